package retry

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/steadyhq/retry/internal/typednil"
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
	hooks          hooks       // OnRetry, OnFailure, OnGiveUp
	deadLetters    DeadLetters // WithDeadLetter's, with its defaults
	sanitize       func(string) string
	random         func() float64
	key            string
	clock          Clock      // nil: the real clock
	timers         timerClock // clock, when it runs the engine's timers too; nil otherwise
	state          *state
	http           HTTP // the Transport's own settings
	limiter        *limiter
	breakers       *breakers
	goBreakers     *goBreakers  // WithGoBreaker's, in place of breakers
	throttle       *throttles   // adaptive throttling; nil when off
	concurrency    *concurrency // the adaptive concurrency limit; nil when off
	pace           *paceGate    // a Transport's pacing by RateLimit fields; nil elsewhere
	budget         *budgets     // the retry budget; nil when off
	budgetSpec     *Budget      // WithBudget's, resolved into budget by build
	hedge          *hedgeSpec   // nil: no hedging
	nested         bool         // WithNestedRetries: retry under an inbound retry
	gates          gates        // the gates attempts pass, in order (assemble)
	learns         bool         // some gate learns the outcomes of attempts (assemble)
	optErrs        []error
	// clockAlways says every failure reads the clock: for events, records,
	// MaxElapsed or a retry budget.
	clockAlways bool
	// wins counts the calls that succeed, for the Retrier's own budget;
	// nil without one (a budget per key counts through budgets.win).
	wins *stripes
	// winsInStats says wins is state.wins, which Stats reads as the
	// calls that succeeded: they need no count of their own.
	winsInStats bool
}

// build resolves opts over the defaults. A *Retrier among opts is applied
// first, whatever its position, and shares its state.
func (c *config) build(opts []Option) {
	*c = config{
		maxServerDelay: defaultMaxServerDelay,
		deadLetters:    DeadLetters{}.withDefaults(),
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
	case c.budgetSpec != nil:
		c.budget = newBudgets(*c.budgetSpec, c.clock)
	case !shared:
		c.budget = newBudgets(defaultBudget, c.clock)
	}
	c.wins = nil
	if c.budget != nil && c.budget.one != nil {
		c.wins = &c.budget.one.wins
	}
	if !shared {
		c.state.wins = c.wins
	}
	c.winsInStats = c.wins != nil && c.wins == c.state.wins
	c.finish()
	c.assemble()
	c.clockAlways = c.hooks.any() || c.deadLetters.Sink != nil || c.deadLetters.Alert != nil || c.maxElapsed > 0 || c.budget != nil
}

// clone copies c so that appending hooks to the copy never changes c.
func (c *config) clone() config {
	d := *c
	d.hooks = d.hooks.clip()
	d.budgetSpec = nil
	d.optErrs = slices.Clip(d.optErrs)
	return d
}

// finish validates the configuration and precomputes what calls need.
func (c *config) finish() {
	c.err = nil
	c.policy = Policy{} // none applies until the configuration is valid
	if err := c.rawPolicy.Validate(); err != nil {
		c.err = err
		return
	}
	if len(c.optErrs) > 0 {
		c.err = c.optErrs[0]
		return
	}
	c.policy = c.rawPolicy.withDefaults()
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

// invalid records an option's error, in the shape of every configuration
// error: "retry: option <Option>: <field> = <value>: <rule>". field is the
// struct field of the option's argument, or the argument's own name for an
// option of one value.
func (c *config) invalid(option, field string, value any, rule string) {
	c.optErrs = append(c.optErrs, optionError(option, field, value, rule))
}

// optionError is an option's error; see config.invalid.
func optionError(option, field string, value any, rule string) error {
	return fmt.Errorf("retry: option %s: %s = %v: %s", option, field, value, rule)
}

// WithPolicy sets the retry policy. Zero fields of p take their defaults, so a
// literal such as Policy{MaxAttempts: 5} is the OJS default policy with five
// attempts. An invalid policy makes every call return its validation error.
func WithPolicy(p Policy) Option {
	return optionFunc(func(c *config) { c.rawPolicy = p })
}

// WithDecider sets the RetryPolicy SPI consulted after the policy; see Decider.
func WithDecider(decider Decider) Option {
	return optionFunc(func(c *config) {
		if decider != nil && isNil(decider) {
			c.invalid("WithDecider", "decider", "nil", typedNil(decider))
			return
		}
		c.decider = decider
	})
}

// WithAttemptTimeout bounds each attempt; an attempt that runs out of time
// fails with type TypeAttemptTimeout ("timeout.attempt"), which is retried. Zero means no bound.
func WithAttemptTimeout(timeout time.Duration) Option {
	return optionFunc(func(c *config) {
		if timeout < 0 {
			c.invalid("WithAttemptTimeout", "timeout", timeout, "must be >= 0")
		}
		c.attemptTimeout = timeout
	})
}

// WithMaxElapsed bounds the whole call, waits included: a wait that would end
// past it is not slept and the call stops with ReasonDeadline. Zero means no
// bound beyond the context's deadline.
func WithMaxElapsed(limit time.Duration) Option {
	return optionFunc(func(c *config) {
		if limit < 0 {
			c.invalid("WithMaxElapsed", "limit", limit, "must be >= 0")
		}
		c.maxElapsed = limit
	})
}

// WithMaxServerDelay bounds the server-directed delays (Retry-After, After)
// that the engine will honour; a longer one stops the call at once with
// ReasonDeadline. The default is 5 minutes.
func WithMaxServerDelay(limit time.Duration) Option {
	return optionFunc(func(c *config) {
		if limit <= 0 {
			c.invalid("WithMaxServerDelay", "limit", limit, "must be > 0")
		}
		c.maxServerDelay = limit
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
func WithKey(key string) Option { return keyOption(key) }

// keyOption is WithKey's Option, a type of its own so that a call with a
// *Retrier and a key alone can take the Retrier's configuration as it is
// (see resolve).
type keyOption string

func (k keyOption) apply(c *config) { c.key = string(k) }

// isNil reports whether v is nil or a typed nil (see internal/typednil).
func isNil(v any) bool { return typednil.Is(v) }

// typedNil is the rule an option breaks when given a typed nil.
func typedNil(v any) string {
	return fmt.Sprintf("is a nil %T; leave it unset, or check the error of the constructor that returned it", v)
}
