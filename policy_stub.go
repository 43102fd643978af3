package retry

// TEMPORARY stub, replaced by policy.go. Not committed.

import (
	"errors"
	"math"
	"time"
)

type Strategy uint8

const (
	Constant Strategy = iota + 1
	Linear
	Exponential
	Polynomial
	Immediate
)

type JitterKind uint8

const (
	JitterNone JitterKind = iota + 1
	JitterProportional
	JitterPercent
	JitterAdditive
	JitterFull
	JitterEqual
	JitterDecorrelated
)

type Jitter struct {
	Kind   JitterKind
	Factor float64
	Amount time.Duration
}

var NoJitter = Jitter{Kind: JitterNone}

type Exhaustion uint8

const (
	ExhaustDiscard Exhaustion = iota + 1
	ExhaustDeadLetter
)

type Policy struct {
	MaxAttempts        int
	InitialInterval    time.Duration
	MaxInterval        time.Duration
	Offset             time.Duration
	BackoffCoefficient float64
	Backoff            Strategy
	Jitter             Jitter
	NonRetryableErrors []string
	OnExhaustion       Exhaustion
}

type PolicyError struct{ Field, Value, Rule string }

func (e *PolicyError) Error() string { return "retry: policy field " + e.Field + ": " + e.Value + ": " + e.Rule }

func DefaultPolicy() Policy { return Policy{}.WithDefaults() }

func (p Policy) WithDefaults() Policy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 3
	}
	if p.InitialInterval == 0 {
		p.InitialInterval = time.Second
	}
	if p.MaxInterval == 0 {
		p.MaxInterval = max(5*time.Minute, p.InitialInterval)
	}
	if p.BackoffCoefficient == 0 {
		p.BackoffCoefficient = 2
	}
	if p.Backoff == 0 {
		p.Backoff = Exponential
	}
	if p.Jitter.Kind == 0 {
		p.Jitter = Jitter{Kind: JitterProportional, Factor: 0.5}
	}
	if p.OnExhaustion == 0 {
		p.OnExhaustion = ExhaustDiscard
	}
	return p
}

func (p Policy) Validate() error {
	if p.MaxAttempts < 0 {
		return &PolicyError{"max_attempts", "neg", "must be >= 0"}
	}
	return nil
}

func (p Policy) Delay(n int) time.Duration {
	if n < 1 {
		return 0
	}
	p = p.WithDefaults()
	var raw float64
	switch p.Backoff {
	case Constant:
		raw = float64(p.InitialInterval)
	case Immediate:
	default:
		raw = float64(p.InitialInterval) * math.Pow(p.BackoffCoefficient, float64(n-1))
	}
	raw += float64(p.Offset)
	if raw > float64(p.MaxInterval) {
		return p.MaxInterval
	}
	return time.Duration(raw)
}

func (p Policy) Sample(n int, prev time.Duration, u float64) time.Duration {
	d := p.Delay(n)
	p = p.WithDefaults()
	if p.Jitter.Kind == JitterProportional {
		d = time.Duration(float64(d) * (0.5 + u))
	}
	return min(d, p.MaxInterval)
}

var _ = errors.New
func ParsePolicy(b []byte) (Policy, error) { return DefaultPolicy(), errors.New("stub") }
