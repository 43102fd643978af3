package retry

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Strategy is how the raw delay grows from one retry to the next, named as
// in OJS JSON. The zero Strategy means the default, Exponential.
type Strategy string

// The backoff strategies. With I the initial interval, C the coefficient and
// n the retry number (1 before the second attempt), the raw delay is:
const (
	Constant    Strategy = "constant"    // I (OJS "none", also "fixed")
	Linear      Strategy = "linear"      // I·n
	Exponential Strategy = "exponential" // I·C^(n−1)
	Polynomial  Strategy = "polynomial"  // I·n^C
	Immediate   Strategy = "immediate"   // 0: retry at once
)

// JitterKind is how a delay is randomised, named as in policy JSON. The
// zero JitterKind means the default, JitterProportional.
type JitterKind string

// The jitter kinds. d is the delay after the first cap, u a uniform draw in
// [0, 1), n the retry number; the result is capped at MaxInterval again.
const (
	JitterNone         JitterKind = "none"         // d
	JitterProportional JitterKind = "proportional" // d·(1 − f + 2f·u): ×[1−f, 1+f), OJS (f = 0.5)
	JitterPercent      JitterKind = "percent"      // the same, ±p of d, Daycry (p = 0.15)
	JitterAdditive     JitterKind = "additive"     // d + J·n·u, Zizq
	JitterFull         JitterKind = "full"         // d·u, AWS "full jitter"
	JitterEqual        JitterKind = "equal"        // d/2 + d/2·u, AWS "equal jitter"
	JitterDecorrelated JitterKind = "decorrelated" // I + (3·prev − I)·u, AWS "decorrelated jitter"
)

// jitterKinds is every JitterKind, in the order above: the one list that
// validation, policy JSON and the CLI read.
var jitterKinds = [...]JitterKind{JitterNone, JitterProportional, JitterPercent, JitterAdditive, JitterFull, JitterEqual, JitterDecorrelated}

// JitterKinds returns every jitter kind, from JitterNone to
// JitterDecorrelated, as policy JSON names them.
func JitterKinds() []JitterKind { return slices.Clone(jitterKinds[:]) }

// jitterKindList names the kinds for an error: "a, b or c", each quoted
// when quote is set.
func jitterKindList(quote bool) string {
	var b strings.Builder
	for i, k := range jitterKinds {
		switch {
		case i == len(jitterKinds)-1:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		if quote {
			b.WriteString(strconv.Quote(string(k)))
		} else {
			b.WriteString(string(k))
		}
	}
	return b.String()
}

// Jitter says how a policy randomises its delays. The zero Jitter is the OJS
// default, proportional with factor 0.5 (a delay d becomes one in
// [d/2, 3d/2)); a zero Kind with a Factor is proportional with that factor;
// Jitter{Kind: JitterNone} turns jitter off.
//
// Factor applies to JitterProportional (default 0.5) and JitterPercent
// (default 0.15) and must lie in (0, 1]. Amount is the J of JitterAdditive
// and must be positive. JitterDecorrelated draws from the previous delay and
// ignores the strategy and offset: each delay is uniform in
// [I, 3·previous), the first previous being I.
type Jitter struct {
	Kind   JitterKind
	Factor float64
	Amount time.Duration
}

// Default jitter factors.
const (
	defaultJitterFactor  = 0.5
	defaultPercentFactor = 0.15
)

func (j Jitter) withDefaults() Jitter {
	switch j.Kind {
	case "":
		return Jitter{Kind: JitterProportional, Factor: cmp.Or(j.Factor, defaultJitterFactor)}
	case JitterProportional:
		if j.Factor == 0 {
			j.Factor = defaultJitterFactor
		}
	case JitterPercent:
		if j.Factor == 0 {
			j.Factor = defaultPercentFactor
		}
	}
	return j
}

// Exhaustion is where a failure goes when the policy gives up: on exhausted
// attempts, a Permanent error or a non-retryable type; named as in OJS
// JSON. The zero Exhaustion means ExhaustDiscard.
type Exhaustion string

// The exhaustion actions of OJS.
const (
	ExhaustDiscard    Exhaustion = "discard"     // return the error
	ExhaustDeadLetter Exhaustion = "dead_letter" // also send it to the dead-letter sink
)

// Policy is the Open Job Spec retry policy. A zero field means its default,
// so a literal is a partial policy merged over the defaults:
// Policy{MaxAttempts: 5} is the OJS default policy with five attempts. The
// JSON form (ParsePolicy, MarshalJSON) uses the OJS field names given below.
//
// A Policy is a plain value; it is safe to copy and to share.
type Policy struct {
	// MaxAttempts counts attempts, the first included ("max_attempts");
	// default 3. 1 means no retry.
	MaxAttempts int
	// InitialInterval is the I of the strategies ("initial_interval");
	// default 1 s. Retries without delay are the Immediate strategy.
	InitialInterval time.Duration
	// MaxInterval caps each delay before and after jitter ("max_interval");
	// default 5 min, or InitialInterval when that is longer.
	MaxInterval time.Duration
	// Offset is added to every raw delay ("delay_offset"), as Zizq's base B
	// or Sidekiq's 15 s; default 0.
	Offset time.Duration
	// BackoffCoefficient is the C of the strategies ("backoff_coefficient");
	// default 2, at least 1. Exponential coefficients within 1e-9 of 1 act
	// as 1.
	BackoffCoefficient float64
	// Backoff is the strategy ("backoff_strategy"); default Exponential.
	Backoff Strategy
	// Jitter randomises the delays ("jitter"); default proportional ±50%.
	Jitter Jitter
	// NonRetryableErrors lists error types that stop the call at once
	// ("non_retryable_errors"): exact types, or "prefix.*" patterns; see Match.
	// Each pattern appears once, as the OJS schema requires.
	NonRetryableErrors []string
	// OnExhaustion says where a failure goes when the policy gives up
	// ("on_exhaustion"); default ExhaustDiscard.
	OnExhaustion Exhaustion
}

// Defaults of the policy, those of OJS.
const (
	defaultMaxAttempts        = 3
	defaultInitialInterval    = time.Second
	defaultMaxInterval        = 5 * time.Minute
	defaultBackoffCoefficient = 2.0
)

// DefaultPolicy returns the OJS default policy with every field filled in:
// three attempts, exponential backoff from 1 s with coefficient 2, capped at
// 5 min, proportional jitter ±50%, nothing non-retryable, discard on
// exhaustion.
func DefaultPolicy() Policy { return Policy{}.withDefaults() }

// withDefaults returns p with its zero fields set to their defaults.
func (p Policy) withDefaults() Policy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = defaultMaxAttempts
	}
	if p.InitialInterval == 0 {
		p.InitialInterval = defaultInitialInterval
	}
	if p.MaxInterval == 0 {
		p.MaxInterval = max(defaultMaxInterval, p.InitialInterval)
	}
	if p.BackoffCoefficient == 0 {
		p.BackoffCoefficient = defaultBackoffCoefficient
	}
	if p.Backoff == "" {
		p.Backoff = Exponential
	}
	p.Jitter = p.Jitter.withDefaults()
	if p.OnExhaustion == "" {
		p.OnExhaustion = ExhaustDiscard
	}
	return p
}

// PolicyError reports an invalid policy: the field (by its JSON name), the
// value given and the rule it breaks.
type PolicyError struct {
	Field string // JSON name, such as "backoff_coefficient" or "jitter.factor"
	Value string // the value as given
	Rule  string // what the value must be
}

// Error returns "retry: policy: <field> = <value>: <rule>"; a nil
// *PolicyError says it is nil.
func (e *PolicyError) Error() string {
	if e == nil {
		return "retry: nil *PolicyError"
	}
	return "retry: policy: " + e.Field + " = " + e.Value + ": " + e.Rule
}

func policyErr(field string, value any, rule string) *PolicyError {
	var v string
	switch x := value.(type) {
	case string:
		v = strconv.Quote(x)
	case Strategy:
		v = strconv.Quote(string(x))
	case JitterKind:
		v = strconv.Quote(string(x))
	case Exhaustion:
		v = strconv.Quote(string(x))
	case time.Duration:
		v = x.String()
	case float64:
		v = strconv.FormatFloat(x, 'g', -1, 64)
	case int:
		v = strconv.Itoa(x)
	case interface{ String() string }:
		v = x.String()
	default:
		v = "?"
	}
	return &PolicyError{Field: field, Value: v, Rule: rule}
}

// Validate reports the first field of p that breaks its rule, as a
// *PolicyError; zero fields are valid (they take their defaults).
func (p Policy) Validate() error {
	switch {
	case p.MaxAttempts < 0 || p.MaxAttempts > math.MaxInt32:
		return policyErr("max_attempts", p.MaxAttempts, "must be in [0, 2147483647] (0 takes the default, 3; 1 is one attempt, no retry)")
	case p.InitialInterval < 0:
		return policyErr("initial_interval", p.InitialInterval, "must be > 0 (use the immediate strategy for retries without delay)")
	case p.MaxInterval < 0:
		return policyErr("max_interval", p.MaxInterval, "must be > 0")
	case p.Offset < 0:
		return policyErr("delay_offset", p.Offset, "must be >= 0")
	case math.IsNaN(p.BackoffCoefficient) || math.IsInf(p.BackoffCoefficient, 0):
		return policyErr("backoff_coefficient", p.BackoffCoefficient, "must be a finite number >= 1.0")
	case p.BackoffCoefficient != 0 && p.BackoffCoefficient < 1:
		return policyErr("backoff_coefficient", p.BackoffCoefficient, "must be >= 1.0")
	case p.Backoff != "" && !slices.Contains([]Strategy{Constant, Linear, Exponential, Polynomial, Immediate}, p.Backoff):
		return policyErr("backoff_strategy", p.Backoff, "must be constant, linear, exponential, polynomial or immediate")
	case p.OnExhaustion != "" && p.OnExhaustion != ExhaustDiscard && p.OnExhaustion != ExhaustDeadLetter:
		return policyErr("on_exhaustion", p.OnExhaustion, `must be "discard" or "dead_letter"`)
	}
	d := p.withDefaults()
	if d.MaxInterval < d.InitialInterval {
		return policyErr("max_interval", d.MaxInterval, "must be >= initial_interval ("+d.InitialInterval.String()+")")
	}
	if err := p.Jitter.validate(); err != nil {
		return err
	}
	for i, pat := range p.NonRetryableErrors {
		field := "non_retryable_errors[" + strconv.Itoa(i) + "]"
		if rule := patternRule(pat); rule != "" {
			return policyErr(field, pat, rule)
		}
		if j := slices.Index(p.NonRetryableErrors[:i], pat); j >= 0 {
			return policyErr(field, pat, "repeats non_retryable_errors["+strconv.Itoa(j)+"]; each pattern must appear once (OJS: uniqueItems)")
		}
	}
	return nil
}

func (j Jitter) validate() error {
	if j.Kind != "" && !slices.Contains(jitterKinds[:], j.Kind) {
		return policyErr("jitter.kind", j.Kind, "must be "+jitterKindList(false))
	}
	switch j.Kind {
	case "", JitterProportional, JitterPercent:
		if math.IsNaN(j.Factor) || j.Factor < 0 || j.Factor > 1 {
			return policyErr("jitter.factor", j.Factor, "must be in (0, 1]")
		}
	default:
		if j.Factor != 0 {
			return policyErr("jitter.factor", j.Factor, "only proportional and percent jitter take a factor")
		}
	}
	switch {
	case j.Kind == JitterAdditive && j.Amount <= 0:
		return policyErr("jitter.amount", j.Amount, "must be > 0 for additive jitter")
	case j.Kind != JitterAdditive && j.Amount != 0:
		return policyErr("jitter.amount", j.Amount, "only additive jitter takes an amount")
	}
	return nil
}

// Delay returns the delay before retry n (n = 1 before the second attempt)
// without jitter: the strategy's raw delay plus the offset, capped at
// MaxInterval. It is exact until the cap and saturates there; it never
// overflows, never goes negative and never decreases as n grows. Delay is 0
// for n < 1. Zero fields of p take their defaults.
func (p Policy) Delay(n int) time.Duration {
	d := p.withDefaults()
	return d.delay(n)
}

// delay is Delay for a policy whose defaults are filled in.
func (p *Policy) delay(n int) time.Duration {
	if n < 1 {
		return 0
	}
	limit := max(p.MaxInterval, 0)
	raw := rawDelay(*p, n, limit)
	if raw >= limit || max(p.Offset, 0) >= limit-raw {
		return limit
	}
	return raw + max(p.Offset, 0)
}

// coefficientEpsilon is how close to 1 an exponential coefficient must be to
// act as 1: beyond it, growth per retry dwarfs the rounding of floating
// point, so that delays never decrease.
const coefficientEpsilon = 1e-9

// rawDelay returns the strategy's delay before retry n, saturated at limit.
func rawDelay(p Policy, n int, limit time.Duration) time.Duration {
	base := max(p.InitialInterval, 0)
	c := p.BackoffCoefficient
	switch p.Backoff {
	case Immediate:
		return 0
	case Constant:
		return min(base, limit)
	case Linear:
		return mulSat(base, uint64(n), limit)
	case Exponential:
		if !(c-1 > coefficientEpsilon) {
			return min(base, limit) // C = 1, or NaN from an invalid policy
		}
		if c == math.Trunc(c) && c < 1<<32 {
			return powSat(base, uint64(c), uint64(n-1), limit)
		}
		return floatSat(float64(base)*math.Exp(float64(n-1)*math.Log(c)), limit)
	default: // Polynomial
		if !(c >= 1) {
			c = 1
		}
		if c == math.Trunc(c) && c < 1<<32 {
			return powSat(base, uint64(n), uint64(c), limit)
		}
		return floatSat(float64(base)*math.Exp(c*math.Log(float64(n))), limit)
	}
}

// mulSat returns d·k, saturated at limit.
func mulSat(d time.Duration, k uint64, limit time.Duration) time.Duration {
	hi, lo := bits.Mul64(uint64(d), k)
	if hi != 0 || lo >= uint64(limit) {
		return limit
	}
	return time.Duration(lo)
}

// powSat returns d·b^e, saturated at limit, exactly. With b ≥ 2 it stops
// after at most 63 steps.
func powSat(d time.Duration, b, e uint64, limit time.Duration) time.Duration {
	if d == 0 || b == 1 || e == 0 {
		return min(d, limit)
	}
	if b == 0 {
		return 0
	}
	for ; e > 0 && d < limit; e-- {
		d = mulSat(d, b, limit)
	}
	return min(d, limit)
}

// floatSat rounds a delay computed in floating point, saturated at limit.
func floatSat(v float64, limit time.Duration) time.Duration {
	if !(v < float64(limit)) { // also NaN
		return limit
	}
	if v <= 0 {
		return 0
	}
	return min(time.Duration(math.Round(v)), limit)
}

// Sample returns the jittered delay before retry n: Delay(n), randomised by
// the policy's jitter with the uniform draw u in [0, 1), then capped at
// MaxInterval again. prev is the previous delay this call sampled (zero for
// the first retry), used by decorrelated jitter. Sample is deterministic in
// its arguments; the engine draws u from the random source of WithRandom.
func (p Policy) Sample(n int, prev time.Duration, u float64) time.Duration {
	d := p.withDefaults()
	return d.sample(n, prev, u)
}

// sample is Sample for a policy whose defaults are filled in.
func (p *Policy) sample(n int, prev time.Duration, u float64) time.Duration {
	if n < 1 {
		return 0
	}
	u = unit(u)
	limit := max(p.MaxInterval, 0)
	d := p.delay(n)
	j := p.Jitter
	var v float64
	switch j.Kind {
	case JitterProportional, JitterPercent:
		f := min(max(j.Factor, 0), 1)
		v = float64(d) * (1 - f + 2*f*u)
	case JitterAdditive:
		v = float64(d) + float64(max(j.Amount, 0))*float64(n)*u
	case JitterFull:
		v = float64(d) * u
	case JitterEqual:
		v = float64(d)/2 + float64(d)/2*u
	case JitterDecorrelated:
		lo := float64(min(max(p.InitialInterval, 0), limit))
		if prev <= 0 {
			prev = p.InitialInterval
		}
		hi := max(3*float64(prev), lo)
		v = lo + (hi-lo)*u
	default:
		return d
	}
	return floatSat(v, limit)
}
