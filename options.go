package retry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/steadyhq/retry/redact"
)

// An Option configures a Retrier, a Transport or one call of Do, Run or
// Attempts. A *Retrier is itself an Option.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// apply makes a *Retrier an Option: its configuration and shared state become
// the base that the other options of the same call refine.
func (r *Retrier) apply(c *config) {
	if r != nil {
		*c = r.config().clone()
	}
}

// Decider is the RetryPolicy SPI: ShouldRetry can veto a retry after the
// policy allowed it, and a non-zero Delay replaces the computed wait. attempt
// is the number of attempts run so far (1 after the first failure).
type Decider interface {
	ShouldRetry(attempt int, err error) bool
	Delay(attempt int) time.Duration
}

// Defaults of the options.
const (
	defaultMaxServerDelay  = 5 * time.Minute
	defaultDedupWindow     = time.Hour
	defaultDeadLetterLimit = 10 * time.Second
)

// config is a resolved set of options.
type config struct {
	policy         Policy // with defaults
	rawPolicy      Policy // as given, for validation
	err            error  // configuration error
	exact          map[string]struct{}
	prefixes       []string
	decider        Decider
	attemptTimeout time.Duration
	maxElapsed     time.Duration
	maxServerDelay time.Duration
	onRetry        []func(Event)
	onFailure      []func(Event)
	onDeadLetter   []func(Event)
	onGiveUp       []func(Event)
	sink           func(context.Context, Event) error
	sinkTimeout    time.Duration
	dedupWindow    time.Duration
	sanitize       func(string) string
	random         func() float64
	key            string
	clock          Clock // nil: the real clock
	state          *state
	http           HTTP // the Transport's own settings
	limiter        *limiter
	breakers       *breakers
	onBreaker      []func(key, from, to string)
	budget         *budget         // the Retrier's retry budget
	keyBudgets     *keyed[*budget] // or one per key
	newKeyBudget   func() *budget  // makes a key's budget
	budgetSpec     Budget
	budgetSet      bool
	sharedBudget   SharedBudget // in place of the budgets above
	optErrs        []error
	// timed says events or records are observed, so failures record times.
	timed bool
	// clockAlways says every failure reads the clock: for events, records,
	// MaxElapsed or a retry budget.
	clockAlways bool
	// budgeted says a retry asks a budget for a token.
	budgeted bool
}

// build resolves opts over the defaults. A *Retrier among opts is applied
// first, whatever its position, and shares its state.
func (c *config) build(opts []Option) {
	*c = config{
		maxServerDelay: defaultMaxServerDelay,
		sinkTimeout:    defaultDeadLetterLimit,
		dedupWindow:    defaultDedupWindow,
		sanitize:       redact.Sanitize,
		random:         rand.Float64,
	}
	for _, o := range opts {
		if r, ok := o.(*Retrier); ok && r != nil {
			r.apply(c)
		}
	}
	for _, o := range opts {
		if _, ok := o.(*Retrier); !ok && o != nil {
			o.apply(c)
		}
	}
	shared := c.state != nil
	if !shared {
		c.state = newState()
	}
	switch {
	case c.sharedBudget != nil:
		c.budget, c.keyBudgets = nil, nil
	case c.budgetSet && c.budgetSpec.Off:
		c.budget, c.keyBudgets = nil, nil
	case c.budgetSet && c.budgetSpec.PerKey:
		spec := c.budgetSpec
		c.budget, c.keyBudgets = nil, newKeyed[*budget](maxKeys)
		clock := c.clock
		c.newKeyBudget = func() *budget {
			now := time.Now()
			if clock != nil {
				now = clock.Now()
			}
			return newBudget(spec, new(atomic.Int64), now)
		}
	case c.budgetSet:
		c.budget, c.keyBudgets = newBudget(c.budgetSpec, &c.state.calls, c.now()), nil
	case !shared:
		c.budget = newBudget(defaultBudget, &c.state.calls, c.now())
	}
	c.finish()
	c.timed = c.hooks() || len(c.onGiveUp) > 0 || c.sink != nil
	c.budgeted = c.budget != nil || c.keyBudgets != nil || c.sharedBudget != nil
	c.clockAlways = c.timed || c.maxElapsed > 0 || c.budgeted
}

// clone copies c so that appending hooks to the copy never changes c.
func (c *config) clone() config {
	d := *c
	d.onRetry = slices.Clip(d.onRetry)
	d.onFailure = slices.Clip(d.onFailure)
	d.onDeadLetter = slices.Clip(d.onDeadLetter)
	d.onGiveUp = slices.Clip(d.onGiveUp)
	d.onBreaker = slices.Clip(d.onBreaker)
	d.budgetSet = false
	d.optErrs = slices.Clip(d.optErrs)
	return d
}

// finish validates the configuration and precomputes what calls need.
func (c *config) finish() {
	c.err = nil
	if err := c.rawPolicy.Validate(); err != nil {
		c.err = err
		return
	}
	if len(c.optErrs) > 0 {
		c.err = c.optErrs[0]
		return
	}
	c.policy = c.rawPolicy.WithDefaults()
	c.exact, c.prefixes = nil, nil
	for _, p := range c.policy.NonRetryableErrors {
		if prefix, ok := cutPattern(p); ok {
			c.prefixes = append(c.prefixes, prefix)
			continue
		}
		if c.exact == nil {
			c.exact = make(map[string]struct{})
		}
		c.exact[p] = struct{}{}
	}
}

// cutPattern returns the prefix of a "prefix.*" pattern.
func cutPattern(p string) (string, bool) {
	if len(p) > 2 && p[len(p)-2:] == ".*" {
		return p[:len(p)-1], true // keep the dot: "auth." matches "auth.x"
	}
	return "", false
}

// nonRetryable reports whether typ is non-retryable under the policy's
// patterns or by default.
func (c *config) nonRetryable(typ string) bool {
	return c.listed(typ) || builtinNonRetryable(typ)
}

// listed reports whether typ matches the policy's non_retryable_errors.
func (c *config) listed(typ string) bool {
	if len(c.exact) == 0 && len(c.prefixes) == 0 {
		return false
	}
	if _, ok := c.exact[typ]; ok {
		return true
	}
	for _, p := range c.prefixes {
		if len(typ) > len(p) && typ[:len(p)] == p {
			return true
		}
	}
	return false
}

func (c *config) hooks() bool {
	return len(c.onFailure) > 0 || len(c.onRetry) > 0 || len(c.onDeadLetter) > 0
}

func (c *config) fire(hooks []func(Event), ev Event) {
	for _, h := range hooks {
		h(ev)
	}
}

func (c *config) invalid(option string, value any, rule string) {
	c.optErrs = append(c.optErrs, fmt.Errorf("retry: option %s: value %v: %s", option, value, rule))
}

// WithPolicy sets the retry policy. Zero fields of p take their defaults, so a
// literal such as Policy{MaxAttempts: 5} is the OJS default policy with five
// attempts. An invalid policy makes every call return its validation error.
func WithPolicy(p Policy) Option {
	return optionFunc(func(c *config) { c.rawPolicy = p })
}

// WithDecider sets the RetryPolicy SPI consulted after the policy; see Decider.
func WithDecider(d Decider) Option {
	return optionFunc(func(c *config) { c.decider = d })
}

// WithAttemptTimeout bounds each attempt; an attempt that runs out of time
// fails with type "timeout.attempt", which is retried. Zero means no bound.
func WithAttemptTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 {
			c.invalid("WithAttemptTimeout", d, "must be >= 0")
		}
		c.attemptTimeout = d
	})
}

// WithMaxElapsed bounds the whole call, waits included: a wait that would end
// past it is not slept and the call stops with ReasonDeadline. Zero means no
// bound beyond the context's deadline.
func WithMaxElapsed(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 {
			c.invalid("WithMaxElapsed", d, "must be >= 0")
		}
		c.maxElapsed = d
	})
}

// WithMaxServerDelay bounds the server-directed delays (Retry-After, After)
// that the engine will honour; a longer one stops the call at once with
// ReasonDeadline. The default is 5 minutes.
func WithMaxServerDelay(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.invalid("WithMaxServerDelay", d, "must be > 0")
		}
		c.maxServerDelay = d
	})
}

// OnRetry adds a hook called before each wait, only when a retry will happen.
// Hooks run synchronously on the calling goroutine, in the order given.
func OnRetry(f func(Event)) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.onRetry = append(c.onRetry, f)
		}
	})
}

// OnFailure adds a hook called for every failed attempt, retried or not. On
// the last one, Event.Reason says why the call stops.
func OnFailure(f func(Event)) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.onFailure = append(c.onFailure, f)
		}
	})
}

// OnGiveUp adds a hook called once when a call ends without success, with
// Event.Reason saying why. Event.Err is the last attempt's error, or what
// stopped the call when no attempt ran (Event.Attempt is then 0): the
// breaker's, the limiter's or the context's error. It runs after OnFailure
// and OnDeadLetter.
func OnGiveUp(f func(Event)) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.onGiveUp = append(c.onGiveUp, f)
		}
	})
}

// DeadLetters says where failures routed to dead letter go: the DeadLetter
// verdict always; Permanent, non-retryable types, exhaustion, and
// deadline, budget, breaker and rate-limit stops after at least one
// attempt, when the policy's on_exhaustion is dead_letter. Zero fields take
// the defaults given beside them.
type DeadLetters struct {
	// Sink receives every record routed to dead letter. Its context
	// survives the caller's cancellation and is bounded by Timeout. A sink
	// error, or a panic, is counted in Stats.DeadLetterFailed and joined
	// into the call's error; without a Sink that error says so ("retry:
	// no dead-letter sink configured").
	Sink func(context.Context, Event) error
	// Timeout bounds each call of Sink; default 10 s.
	Timeout time.Duration
	// Alert is called for a record routed to dead letter, except that a
	// repeat of an alert (same key, type and message) within DedupWindow
	// is suppressed and counted in Stats.AlertsSuppressed; Sink still
	// receives every record.
	Alert func(Event)
	// DedupWindow is how long an alert suppresses its repeats; default
	// 1 h (Ratchet's), negative for none.
	DedupWindow time.Duration
}

// WithDeadLetter sets the dead-letter sink and alert of d, in place of
// those before it. An invalid d makes every call return an error naming
// the field.
func WithDeadLetter(d DeadLetters) Option {
	return optionFunc(func(c *config) {
		if d.Timeout < 0 {
			c.invalid("WithDeadLetter", d.Timeout, "Timeout must be >= 0 (0 means 10 s)")
			return
		}
		c.sink, c.sinkTimeout, c.dedupWindow = d.Sink, d.Timeout, d.DedupWindow
		if d.Timeout == 0 {
			c.sinkTimeout = defaultDeadLetterLimit
		}
		switch {
		case d.DedupWindow == 0:
			c.dedupWindow = defaultDedupWindow
		case d.DedupWindow < 0:
			c.dedupWindow = 0
		}
		c.onDeadLetter = nil
		if d.Alert != nil {
			c.onDeadLetter = []func(Event){d.Alert}
		}
	})
}

// WithRandom sets the source of jitter, a function returning values in
// [0, 1). It must be safe for concurrent use if the Retrier is shared; the
// default is math/rand/v2's Float64.
func WithRandom(f func() float64) Option {
	return optionFunc(func(c *config) {
		if f == nil {
			f = rand.Float64
		}
		c.random = f
	})
}

// WithKey names the dependency a call targets, for events, dead-letter
// records and alert deduplication.
func WithKey(key string) Option {
	return optionFunc(func(c *config) { c.key = key })
}
