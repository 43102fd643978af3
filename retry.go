package retry

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/steadyhq/retry/redact"
)

// Do calls fn until it succeeds or the policy says stop, and returns fn's
// value on success. On failure the error is an *Error whose Err is the last
// attempt's error.
//
// With no options Do uses the process-wide default Retrier (OJS default policy).
// With a *Retrier among the options, Do uses that Retrier's shared state
// (counters, dedup window) and applies the other options to this call only;
// with options but no Retrier, the call gets fresh state. An invalid
// configuration, or a nil ctx, is returned as an error without calling fn.
func Do[T any](ctx context.Context, fn func(context.Context) (T, error), opts ...Option) (T, error) {
	if len(opts) == 0 {
		return do(ctx, &std.cfg, fn)
	}
	return do(ctx, resolve(opts), fn)
}

// Run is Do for a function that returns only an error.
func Run(ctx context.Context, fn func(context.Context) error, opts ...Option) error {
	if len(opts) == 0 {
		return run(ctx, &std.cfg, fn)
	}
	return run(ctx, resolve(opts), fn)
}

// Retrier holds a resolved configuration and the state shared by every call
// made through it: counters, the dead-letter alert window, the retry budget,
// breakers and rate limiters. Build it once with New; it is safe for
// concurrent use and never changes afterwards. The zero Retrier, like a nil
// *Retrier, is the process-wide default one that Do and Run use without
// options.
//
// A *Retrier is itself an Option: Do(ctx, fn, r, more...) runs with r's
// configuration and shared state, plus more for that call only.
type Retrier struct {
	cfg config
}

// New returns a Retrier configured by opts. Options are resolved once here.
// A *Retrier among opts contributes its configuration and shares its state
// with the new one. An invalid configuration does not panic: every call made
// through the Retrier returns the configuration error without running fn.
func New(opts ...Option) *Retrier {
	r := &Retrier{}
	r.cfg.build(opts)
	return r
}

// Run calls fn under r's configuration; see Do.
func (r *Retrier) Run(ctx context.Context, fn func(context.Context) error) error {
	return run(ctx, r.config(), fn)
}

// Err reports the configuration error of r, or nil when r is usable.
func (r *Retrier) Err() error { return r.config().err }

// Policy returns the policy r applies, with defaults filled in.
func (r *Retrier) Policy() Policy { return r.config().policy }

// Attempts returns an iterator over attempt numbers for loops that are not a
// single function call, such as reconnect loops. The loop body reports the
// attempt's outcome by assigning *errp: the iteration ends when the body
// leaves *errp nil (success) or breaks; otherwise the failure is classified
// and, after the policy's wait, the next attempt is yielded. When the engine
// stops the loop, *errp holds the *Error. A nil errp gives an empty sequence.
//
//	var err error
//	for attempt := range r.Attempts(ctx, &err) {
//		conn, err = dial(ctx, attempt)
//	}
func (r *Retrier) Attempts(ctx context.Context, errp *error) iter.Seq[int] {
	return attempts(ctx, r.config(), errp)
}

// Attempts is Retrier.Attempts with per-call options; see Do for how options
// are resolved.
func Attempts(ctx context.Context, errp *error, opts ...Option) iter.Seq[int] {
	return attempts(ctx, resolve(opts), errp)
}

// std is the Retrier used by Do, Run and Attempts without options.
var std Retrier

func init() { std.cfg.build(nil) }

// config returns r's configuration; a nil or zero Retrier means the
// default one.
func (r *Retrier) config() *config {
	if r == nil || r.cfg.state == nil {
		return &std.cfg
	}
	return &r.cfg
}

// resolve returns the configuration for one call.
func resolve(opts []Option) *config {
	switch len(opts) {
	case 0:
		return &std.cfg
	case 1:
		if r, ok := opts[0].(*Retrier); ok {
			return r.config()
		}
	}
	c := new(config)
	c.build(opts)
	return c
}

var (
	errNilFunc    = errors.New("retry: fn is nil")
	errNilContext = errors.New("retry: nil Context")
)

func do[T any](ctx context.Context, cfg *config, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	switch {
	case ctx == nil:
		return zero, errNilContext
	case cfg.err != nil:
		return zero, cfg.err
	case fn == nil:
		return zero, errNilFunc
	}
	if (cfg.fast || cfg.guardedFast) && ctx.Err() == nil && ctx.Value(attemptKey{}) == nil {
		// The success path: steps 1 to 4 with nothing to wait for, the
		// caller's own context, no allocation, and no clock read but the
		// token bucket's. The full path takes over when the bucket would
		// make the attempt wait, or after a failure.
		if cfg.guardedFast {
			if cfg.bucket != nil && !cfg.admit() {
				c := call{cfg: cfg, key: cfg.key}
				return loop(ctx, &c, fn, nil)
			}
			if b := cfg.fastBreaker; b != nil {
				return breakered(ctx, cfg, b, fn)
			}
		}
		cfg.state.calls.add()
		v, err := fn(ctx) // a panic goes on to the caller, unrecovered
		if err == nil {
			return v, nil
		}
		c := call{cfg: cfg, key: cfg.key, attempt: 1}
		return loop(ctx, &c, fn, err)
	}
	c := call{cfg: cfg, key: cfg.key}
	return loop(ctx, &c, fn, nil)
}

// breakered is the success path through the single in-process breaker: the
// first attempt runs inside the breaker's Execute with the caller's own
// context. The full path takes over after a failure, or when the breaker
// refuses the attempt; the token the bucket gave it is then kept for the
// next try.
func breakered[T any](ctx context.Context, cfg *config, b *breaker, fn func(context.Context) (T, error)) (T, error) {
	bs := cfg.breakers
	var v T
	var err error
	ran := false
	b.cb.Execute(func() (struct{}, error) {
		ran = true
		bs.flush(cfg.onBreaker) // a change made as the attempt was let through
		cfg.state.calls.add()
		v, err = fn(ctx) // a panic goes on: the breaker records it
		return struct{}{}, cfg.breakerOutcome(ctx, err, false)
	})
	bs.flush(cfg.onBreaker)
	if !ran {
		c := call{cfg: cfg, key: cfg.key, tokened: cfg.bucket != nil}
		return loop(ctx, &c, fn, nil)
	}
	if err == nil {
		return v, nil
	}
	c := call{cfg: cfg, key: cfg.key, attempt: 1}
	return loop(ctx, &c, fn, err)
}

// loop drives the call's attempts; failed, when not nil, is the error of an
// attempt that has already run.
func loop[T any](ctx context.Context, c *call, fn func(context.Context) (T, error), failed error) (T, error) {
	var zero T
	defer c.end()
	for {
		err, timedOut := failed, false
		failed = nil
		if err == nil {
			if stop := c.begin(ctx); stop != nil {
				return zero, stop
			}
			var v T
			if c.cfg.direct {
				// No breaker and no attempt timeout: nothing to guard or
				// cancel around fn.
				c.started()
				v, err = fn(c.numbered(ctx)) // a panic goes on to the caller
			} else {
				ran, stop := c.guard(ctx, func() error {
					c.started()
					actx, cancel := c.attemptContext(ctx)
					if cancel != nil {
						defer cancel() // also when fn panics
					}
					v, err = fn(actx) // a panic goes on: the breaker records it
					timedOut = cancel != nil && actx.Err() != nil && ctx.Err() == nil
					return c.breakerOutcome(ctx, err, timedOut)
				})
				if !ran {
					if stop != nil {
						return zero, stop
					}
					continue
				}
			}
			if err == nil {
				return v, nil
			}
		}
		d, stop := c.fail(ctx, err, timedOut)
		if stop == nil && d > 0 {
			stop = c.sleep(ctx, d)
		}
		if stop != nil {
			return zero, stop
		}
	}
}

func run(ctx context.Context, cfg *config, fn func(context.Context) error) error {
	if ctx == nil {
		return errNilContext
	}
	if fn == nil {
		if cfg.err != nil {
			return cfg.err
		}
		return errNilFunc
	}
	if cfg.err == nil && cfg.fast && ctx.Err() == nil && ctx.Value(attemptKey{}) == nil {
		cfg.state.calls.add()
		err := fn(ctx) // a panic goes on to the caller, unrecovered
		if err == nil {
			return nil
		}
		c := call{cfg: cfg, key: cfg.key, attempt: 1}
		_, err = loop(ctx, &c, errOnly(fn), err)
		return err
	}
	_, err := do(ctx, cfg, errOnly(fn))
	return err
}

// errOnly adapts a func returning only an error to Do's shape.
func errOnly(fn func(context.Context) error) func(context.Context) (struct{}, error) {
	return func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) }
}

func attempts(ctx context.Context, cfg *config, errp *error) iter.Seq[int] {
	return func(yield func(int) bool) {
		if errp == nil {
			return
		}
		if ctx == nil {
			*errp = errNilContext
			return
		}
		if cfg.err != nil {
			*errp = cfg.err
			return
		}
		c := call{cfg: cfg, key: cfg.key}
		defer c.end()
		for {
			if err := c.begin(ctx); err != nil {
				*errp = err
				return
			}
			more := true
			ran, stop := c.guard(ctx, func() error {
				c.started()
				*errp = nil
				more = yield(c.attempt)
				return c.breakerOutcome(ctx, *errp, false)
			})
			if !ran {
				if stop != nil {
					*errp = stop
					return
				}
				continue
			}
			err := *errp
			if !more || err == nil {
				return
			}
			d, stop := c.fail(ctx, err, false)
			if stop == nil {
				stop = c.sleep(ctx, d)
			}
			if stop != nil {
				*errp = stop
				return
			}
		}
	}
}

// attemptKey is the context key of the attempt number.
type attemptKey struct{}

// AttemptFrom returns the number of the attempt whose context is ctx: 2 for
// the first retry, and so on. The first attempt of a call runs with the
// caller's own context (so the success path allocates nothing), and a context
// that carries no attempt number gives 1. The contexts of retries come from
// blocks of 32 shared by many calls, so a retry allocates nothing either. A
// block keeps the parents of the contexts it handed out reachable until it
// is used up or the garbage collector drops it from the free list (two
// cycles), and a retry's context that fn keeps after its call keeps its
// block.
func AttemptFrom(ctx context.Context) int {
	if n, ok := ctx.Value(attemptKey{}).(int); ok {
		return n
	}
	return 1
}

// call is the state of one logical call: the driver's side of the engine.
type call struct {
	cfg     *config
	attempt int             // attempts run so far
	start   time.Time       // start of the call, read only when MaxElapsed is set
	first   time.Time       // time of the first failure
	prev    time.Duration   // previous sampled delay, for decorrelated jitter
	timer   *time.Timer     // one reusable timer per call
	last    error           // the last attempt's error
	lastTyp string          // its type, as classified (timeout.attempt included)
	key     string          // key for dedup and events
	method  string          // HTTP method, for events
	url     string          // sanitized URL, for events
	req     *http.Request   // the Transport's request, for events
	payload any             // dead-letter payload
	record  func() any      // builds the payload when a record is routed
	nested  bool            // ctx already carried an attempt number
	tokened bool            // the limiter already gave the next attempt its token
	untoken func(time.Time) // gives that token back if the attempt never runs
	slab    *ctxSlab        // attempt contexts, taken on the first retry

	dl      time.Time // the caller's deadline
	dlKnown uint8     // 0: not looked up yet; 1: none; 2: dl

	breakerWait time.Duration // time waited for open breakers
}

// begin runs steps 1 and 2 before an attempt: the context, then the rate
// limiter, whose wait is not an attempt.
func (c *call) begin(ctx context.Context) error {
	tokened := c.tokened
	c.tokened, c.untoken = false, nil
	if ctx.Err() != nil {
		return c.canceled(ctx)
	}
	if c.cfg.maxElapsed > 0 && c.start.IsZero() {
		c.start = c.cfg.now() // MaxElapsed counts the waits before the first attempt too
	}
	if l := c.cfg.limiter; l != nil && !tokened {
		ok, err := l.wait(ctx, c, c.key)
		if err != nil {
			return err
		}
		if !ok {
			return c.refuse(ctx, ReasonRateLimited, TypeRateLimited, rateLimitError{})
		}
	}
	return nil
}

// guard runs step 3 and then attempt, which starts the attempt and runs fn
// (step 4) and returns its outcome for the breaker (step 5). When the breaker
// is open the attempt is neither run nor counted: guard waits until the
// breaker may let a probe through and returns ran == false, or returns the
// error that stops the call when that wait cannot fit.
func (c *call) guard(ctx context.Context, attempt func() error) (ran bool, stop error) {
	bs := c.cfg.breakers
	if bs == nil {
		attempt()
		return true, nil
	}
	var now time.Time
	if bs.keys != nil {
		now = c.cfg.now()
	}
	ran, wait := bs.get(c.key, now).run(ctx, bs, func() error {
		// A change made as the attempt was let through (open to half-open)
		// is delivered before it runs, outside gobreaker's lock.
		bs.flush(c.cfg.onBreaker)
		return attempt()
	})
	bs.flush(c.cfg.onBreaker)
	if ran {
		return true, nil
	}
	if ctx.Err() != nil { // the caller's deadline ended while the breaker was consulted
		return false, c.canceled(ctx)
	}
	c.breakerWait += wait
	fits := bs.spec.MaxWait >= 0 && c.breakerWait <= bs.spec.MaxWait && c.fits(ctx, c.cfg.now(), wait)
	if !fits {
		bs.denied.Add(1)
		return false, c.refuse(ctx, ReasonBreakerOpen, TypeBreakerOpen, &breakerError{wait: wait})
	}
	bs.waits.Add(1)
	return false, c.sleep(ctx, wait)
}

// refuse stops the call before an attempt: the breaker, the rate limiter or
// the budget said no. The error keeps the last attempt's error, if any, and
// is typed by what refused.
//
// A refusal is not a failed attempt: it fires no OnFailure. Before any
// attempt ran it is only the returned error (counted in Stats as a breaker
// or limiter denial); after one, it ends the call like exhaustion, routed by
// the policy's on_exhaustion with the last failure.
func (c *call) refuse(ctx context.Context, reason Reason, typ string, err error) error {
	if c.attempt == 0 {
		c.cfg.state.unstarted.Add(1)
		e := &Error{Reason: reason, Err: err, typ: typ}
		c.gaveUp(e, typ)
		return e
	}
	o := inspect(c.last)
	o.typ = typ
	return c.terminal(ctx, o, reason, c.cfg.policy.OnExhaustion == ExhaustDeadLetter, c.cfg.now(), false)
}

// breakerOutcome is config.breakerOutcome for the call's attempt.
func (c *call) breakerOutcome(ctx context.Context, err error, timedOut bool) error {
	return c.cfg.breakerOutcome(ctx, err, timedOut)
}

// breakerOutcome is what an attempt's error means to a circuit breaker:
// nil for a success, errBreakerExcluded for the caller's own errors, which
// must not trip it, errBreakerFailure otherwise. An attempt cut off by the
// caller's deadline while the dependency had not answered is a timeout
// failure, so that a hung dependency trips the breaker; the caller's own
// cancellation is excluded.
func (cfg *config) breakerOutcome(ctx context.Context, err error, timedOut bool) error {
	if err == nil || cfg.breakers == nil {
		return nil
	}
	cerr := ctx.Err()
	if cerr == context.Canceled {
		return errBreakerExcluded
	}
	o := attemptOutcome(ctx, err, timedOut)
	if cerr != nil && unanswered(o.typ) {
		return errBreakerFailure
	}
	switch {
	case cfg.listed(o.typ):
		return errBreakerExcluded
	case o.verdict == verdictRetry:
		return errBreakerFailure
	case o.verdict != verdictNone, o.permanent, cfg.nonRetryable(o.typ):
		return errBreakerExcluded
	}
	return errBreakerFailure
}

// attemptOutcome classifies the error of an attempt run with the caller's
// context ctx: a deadline that struck inside fn while ctx is alive is
// TypeTimeout, and the attempt's own timeout (timedOut) TypeAttemptTimeout.
func attemptOutcome(ctx context.Context, err error, timedOut bool) outcome {
	o := inspect(err)
	if o.typ == TypeDeadlineExceeded || o.typ == TypeCanceled {
		switch {
		case timedOut:
			o.typ = TypeAttemptTimeout
		case o.typ == TypeDeadlineExceeded && ctx.Err() == nil:
			o.typ = TypeTimeout
		}
	}
	return o
}

// unanswered reports whether typ says an attempt ended without an answer
// from the dependency: its context ended, or a timeout struck.
func unanswered(typ string) bool {
	switch typ {
	case TypeCanceled, TypeDeadlineExceeded, TypeTimeout, TypeAttemptTimeout, TypeNetTimeout:
		return true
	}
	return false
}

// started counts the attempt about to run.
func (c *call) started() {
	c.attempt++
	st := c.cfg.state
	if c.attempt == 1 {
		st.calls.add()
		if c.cfg.keyBudgets != nil {
			c.budget(c.cfg.now()).calls.add()
		}
		if sb := c.cfg.sharedBudget; sb != nil {
			sb.First(c.key)
		}
	} else {
		st.retryAttempts.Add(1)
	}
}

// attemptContext returns the context for the current attempt: the caller's
// own for the first attempt of an un-nested call (no allocation), otherwise
// one carrying the attempt number, and a per-attempt timeout when set.
func (c *call) attemptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = c.numbered(ctx)
	if t := c.cfg.attemptTimeout; t > 0 {
		return context.WithTimeout(ctx, t)
	}
	return ctx, nil
}

// numbered returns ctx carrying the current attempt number, or ctx itself
// for the first attempt of an un-nested call.
func (c *call) numbered(ctx context.Context) context.Context {
	if c.attempt == 1 {
		c.nested = ctx.Value(attemptKey{}) != nil
	}
	if c.attempt == 1 && !c.nested {
		return ctx
	}
	// A context is never changed once handed out (fn may keep it), so each
	// attempt gets its own, taken from a slab of them.
	if c.slab == nil {
		c.slab, _ = ctxSlabs.Get().(*ctxSlab)
		if c.slab == nil {
			c.slab = new(ctxSlab)
		}
	}
	s := c.slab
	a := &s.ctxs[s.used]
	if s.used++; s.used == len(s.ctxs) {
		c.slab = nil // used up: it is garbage once its contexts are
	}
	a.Context, a.n = ctx, c.attempt
	return a
}

// ctxSlab is a block of attempt contexts. A call holds one while it runs and
// hands its contexts out in order; at the end of the call the rest of the
// block goes back to ctxSlabs for the next call. A context handed out is
// never reused, so many calls share one allocation: in exchange, a context
// kept past its call keeps the block's other contexts, and their parents,
// reachable.
type ctxSlab struct {
	ctxs [32]attemptCtx
	used int
}

// ctxSlabs holds the partly used blocks of attempt contexts.
var ctxSlabs sync.Pool

// attemptCtx is the context of an attempt after the first: it carries the
// attempt number for AttemptFrom.
type attemptCtx struct {
	context.Context
	n int
}

// Value returns the attempt number for attemptKey; other keys go to the
// parent.
func (a *attemptCtx) Value(key any) any {
	if _, ok := key.(attemptKey); ok {
		return a.n
	}
	return a.Context.Value(key)
}

// String names the context for debugging, as the context package does.
func (a *attemptCtx) String() string {
	return fmt.Sprint(a.Context) + ".WithAttempt(" + strconv.Itoa(a.n) + ")"
}

// budget returns the retry budget of the call: the Retrier's, its key's,
// or nil when the budget is off.
func (c *call) budget(now time.Time) *budget {
	if kb := c.cfg.keyBudgets; kb != nil {
		return kb.get(c.key, now, c.cfg.newKeyBudget)
	}
	return c.cfg.budget
}

// end releases what the call holds: its timer and its block of attempt
// contexts.
func (c *call) end() {
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.untoken != nil { // a token taken for an attempt that never ran
		c.untoken(c.cfg.mono())
		c.untoken = nil
	}
	if c.slab != nil {
		ctxSlabs.Put(c.slab)
		c.slab = nil
	}
}

// fail runs steps 5 to 7 for a failed attempt: classify, decide, report. It
// returns the wait before the next attempt, or the terminal error.
func (c *call) fail(ctx context.Context, err error, timedOut bool) (time.Duration, error) {
	cfg := c.cfg
	cfg.state.failed.Add(1)
	c.last = err
	o := attemptOutcome(ctx, err, timedOut)
	c.lastTyp = o.typ
	var now time.Time
	if c.clocked(ctx) {
		now = cfg.now()
		if c.first.IsZero() {
			c.first = now
		}
	}
	reason, route := c.decide(ctx, err, o)
	if reason != reasonNone {
		return 0, c.terminal(ctx, o, reason, route, now, true)
	}
	d, ok := c.delay(ctx, o, now)
	if !ok {
		return 0, c.terminal(ctx, o, ReasonDeadline, cfg.policy.OnExhaustion == ExhaustDeadLetter, now, true)
	}
	if cfg.breakers != nil || cfg.limiter != nil {
		var reason Reason
		if d, reason = c.admitNext(ctx, d, now); reason != reasonNone {
			if reason == ReasonCanceled {
				return 0, c.canceled(ctx)
			}
			o.typ = TypeBreakerOpen
			if reason == ReasonRateLimited {
				o.typ = TypeRateLimited
			}
			return 0, c.terminal(ctx, o, reason, cfg.policy.OnExhaustion == ExhaustDeadLetter, now, true)
		}
	}
	if cfg.budgeted && !c.allowRetry(ctx, now) {
		o.typ = TypeBudgetExhausted
		return 0, c.terminal(ctx, o, ReasonBudget, cfg.policy.OnExhaustion == ExhaustDeadLetter, now, true)
	}
	cfg.state.retried.Add(1)
	if cfg.hooks() {
		ev := c.event(o, now)
		ev.Delay = d
		cfg.fire(cfg.onFailure, ev)
		cfg.fire(cfg.onRetry, ev)
	}
	return d, nil
}

// admitNext decides, before the outcome in hand is given up (for the
// Transport, before the response is drained), whether the next attempt may
// run after the wait d: an open breaker whose open time outlasts d must
// fit MaxWait and the deadline, and the rate limiter's token for the next
// attempt is taken now. It returns the wait before the next attempt, at
// least d, or the reason that stops the call.
func (c *call) admitNext(ctx context.Context, d time.Duration, now time.Time) (time.Duration, Reason) {
	cfg := c.cfg
	if bs := cfg.breakers; bs != nil {
		if now.IsZero() {
			now = cfg.now()
		}
		if left := bs.get(c.key, now).openFor(&bs.spec); left > d {
			c.breakerWait += left - d
			if bs.spec.MaxWait < 0 || c.breakerWait > bs.spec.MaxWait || !c.fits(ctx, now, left) {
				bs.denied.Add(1)
				return 0, ReasonBreakerOpen
			}
			bs.waits.Add(1)
			d = left
		}
	}
	if l := cfg.limiter; l != nil {
		mono := cfg.mono()
		w, cancel, ok := l.l.Reserve(ctx, c.key, mono, c.room(ctx, mono))
		if !ok {
			if ctx.Err() != nil {
				return 0, ReasonCanceled
			}
			l.denied.Add(1)
			return 0, ReasonRateLimited
		}
		c.tokened, c.untoken = true, cancel
		if w > d {
			l.waits.Add(1)
			d = w
		}
	}
	return d, reasonNone
}

// clocked says whether a failure must read the clock: for events and
// records, MaxElapsed, the caller's deadline or the retry budget. Otherwise
// the failure path reads no clock at all.
func (c *call) clocked(ctx context.Context) bool {
	if c.cfg.clockAlways {
		return true
	}
	_, ok := c.deadline(ctx)
	return ok
}

// decide runs steps 6.1 to 6.6. A zero reason means "retry"; route says
// whether a terminal outcome goes to the dead-letter sink.
func (c *call) decide(ctx context.Context, err error, o outcome) (reason Reason, route bool) {
	cfg := c.cfg
	exhaust := cfg.policy.OnExhaustion == ExhaustDeadLetter
	if ctx.Err() != nil {
		return ReasonCanceled, false
	}
	switch o.verdict {
	case verdictDiscard:
		return ReasonDiscarded, false
	case verdictDeadLetter:
		return ReasonDeadLettered, true
	case verdictFail:
		return ReasonFailed, false
	}
	// Retryable overrides Permanent and the built-in classification, not
	// the policy's non_retryable_errors: OJS's RETRY means the normal
	// policy applies.
	transient := o.verdict == verdictRetry
	if cfg.listed(o.typ) || !transient && (o.permanent || cfg.nonRetryable(o.typ)) {
		return ReasonNonRetryable, exhaust
	}
	if c.attempt >= cfg.policy.MaxAttempts {
		return ReasonExhausted, exhaust
	}
	if cfg.decider != nil && !cfg.decider.ShouldRetry(c.attempt, err) {
		return ReasonNonRetryable, exhaust
	}
	return reasonNone, false
}

// delay runs step 6.7: the wait before the next attempt, and whether it fits
// the caller's deadline, MaxElapsed and MaxServerDelay.
func (c *call) delay(ctx context.Context, o outcome, now time.Time) (time.Duration, bool) {
	cfg := c.cfg
	var d time.Duration
	if cfg.decider != nil {
		d = max(cfg.decider.Delay(c.attempt), 0)
	}
	switch {
	case d > 0:
	case o.hint > 0:
		if o.hint > cfg.maxServerDelay {
			return 0, false
		}
		d = o.hint
		if cfg.policy.Jitter.Kind != JitterNone {
			spread := time.Duration(float64(min(d/10, time.Second)) * unit(cfg.random()))
			d = min(d, maxDuration-spread) + spread // saturate, never wrap
		}
	case cfg.zeroDelay:
		// Zero, whatever the draw: spare the random source.
	default:
		d = cfg.policy.sample(c.attempt, c.prev, cfg.random())
		c.prev = d
	}
	return d, c.fits(ctx, now, d)
}

// fits reports whether a wait of d from now ends before the caller's
// deadline and within MaxElapsed of the call's start.
func (c *call) fits(ctx context.Context, now time.Time, d time.Duration) bool {
	if c.dlKnown == 1 && c.cfg.maxElapsed == 0 {
		return true // no deadline, no MaxElapsed
	}
	if m := c.cfg.maxElapsed; m > 0 && (d > m || now.Sub(c.start) > m-d) {
		return false
	}
	if dl, ok := c.deadline(ctx); ok && (d >= maxDuration/2 || !now.Add(d).Before(dl)) {
		return false
	}
	return true
}

// deadline returns ctx's deadline, looked up once per call: a context's
// deadline never changes.
func (c *call) deadline(ctx context.Context) (time.Time, bool) {
	if c.dlKnown == 0 {
		var ok bool
		c.dl, ok = ctx.Deadline()
		c.dlKnown = 1
		if ok {
			c.dlKnown = 2
		}
	}
	return c.dl, c.dlKnown == 2
}

// unit clamps a random draw into [0, 1).
func unit(u float64) float64 {
	if !(u >= 0) {
		return 0
	}
	if u >= 1 {
		return 0.9999999999999999
	}
	return u
}

// sleep waits d with the call's reusable timer; a zero delay takes no timer.
// The caller's context interrupts the wait.
func (c *call) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if clk := c.cfg.clock; clk != nil {
		if clk.Sleep(ctx, d) != nil {
			return c.canceled(ctx)
		}
		return nil
	}
	if c.timer == nil {
		c.timer = time.NewTimer(d)
	} else {
		c.timer.Reset(d)
	}
	select {
	case <-c.timer.C:
		return nil
	case <-ctx.Done():
		c.timer.Stop()
		return c.canceled(ctx)
	}
}

// canceled ends the call because the caller's context is done.
func (c *call) canceled(ctx context.Context) error {
	if c.attempt > 0 {
		c.cfg.state.failedPermanently.Add(1)
	} else {
		c.cfg.state.unstarted.Add(1)
	}
	e := c.newError(ctx, ReasonCanceled)
	if c.lastTyp == TypeAttemptTimeout {
		e.typ = c.lastTyp // see terminal
	}
	c.gaveUp(e, "")
	return e
}

// gaveUp fires OnGiveUp for a call that stops with e outside terminal: a
// refusal before any attempt, or the caller's context ending between
// attempts. typ overrides the type of the error.
func (c *call) gaveUp(e *Error, typ string) {
	hooks := c.cfg.onGiveUp
	if len(hooks) == 0 {
		return
	}
	if c.url == "" && c.req != nil {
		c.method, c.url = methodOf(c.req), redact.SanitizeURL(c.req.URL)
	}
	var ev Event
	if c.last != nil {
		o := inspect(c.last)
		if c.lastTyp != "" {
			o.typ = c.lastTyp
		}
		ev = c.event(o, c.cfg.now())
	} else {
		ev = Event{Err: e.Err, Key: c.key, Method: c.method, URL: c.url, Time: c.cfg.now()}
		if ev.Key == "" {
			ev.Key = c.cfg.key
		}
		if e.Err != nil {
			ev.Message = c.cfg.sanitize(e.Err.Error())
			ev.Type = TypeOf(e.Err)
		}
	}
	if typ != "" {
		ev.Type = typ
	}
	ev.Reason = e.Reason
	c.cfg.fire(hooks, ev)
}

// newError returns the error of a call that stops for reason. A call stopped
// by the caller's context keeps the context's error and its cause, so that
// errors.Is matches both; a call stopped because its next wait could not fit
// (ReasonDeadline) matches context.DeadlineExceeded.
func (c *call) newError(ctx context.Context, reason Reason) *Error {
	e := &Error{Attempts: c.attempt, Reason: reason, Err: c.last}
	switch reason {
	case ReasonCanceled:
		cerr, cause := ctx.Err(), context.Cause(ctx)
		if e.Err == nil {
			e.Err, cause = cause, nil
		}
		if cause != nil && cause != e.Err {
			e.cause = cause
		}
		if cerr != nil && cerr != e.Err && cerr != e.cause {
			e.ctxErr = cerr
		}
	case ReasonDeadline:
		e.ctxErr = context.DeadlineExceeded
	}
	return e
}

// terminal ends the call with reason: counters, events and dead-letter
// routing. failed says the call's last attempt has just failed, so that
// OnFailure reports it. The record goes to the sink before any hook runs,
// so that a panicking hook cannot lose it.
func (c *call) terminal(ctx context.Context, o outcome, reason Reason, route bool, now time.Time, failed bool) error {
	cfg := c.cfg
	cfg.state.failedPermanently.Add(1)
	e := c.newError(ctx, reason)
	switch {
	case reason == ReasonBudget, reason == ReasonBreakerOpen, reason == ReasonRateLimited:
		e.typ = o.typ
	case o.typ == TypeAttemptTimeout, o.typ == TypeTimeout:
		// Err wraps context.DeadlineExceeded: without this, TypeOf would
		// report the caller's own deadline as the cause.
		e.typ = o.typ
	}
	if !route && (!failed || len(cfg.onFailure) == 0) && len(cfg.onGiveUp) == 0 {
		return e
	}
	if now.IsZero() { // the failure path did not need the clock
		now = cfg.now()
	}
	ev := c.event(o, now)
	ev.Reason = reason
	if route {
		if ev.Payload == nil && c.record != nil {
			ev.Payload = c.record()
		}
		e.sink = c.deadLetter(ctx, ev)
	}
	if failed {
		cfg.fire(cfg.onFailure, ev)
	}
	if route {
		c.alert(ev)
	}
	cfg.fire(cfg.onGiveUp, ev)
	return e
}

// Reason says why a call stopped.
type Reason uint8

// The reasons a call stops. Reason.String gives their names.
const (
	reasonNone         Reason = iota
	ReasonExhausted           // the attempts were used up
	ReasonNonRetryable        // Permanent, a non-retryable type, or the Decider said no
	ReasonDiscarded           // the Discard verdict
	ReasonDeadLettered        // the DeadLetter verdict
	ReasonFailed              // the Fail verdict
	ReasonCanceled            // the caller's context ended
	ReasonDeadline            // the next wait could not fit the deadline, MaxElapsed or MaxServerDelay
	ReasonBudget              // the retry budget had no token
	ReasonBreakerOpen         // the circuit breaker was open and its wait could not fit
	ReasonRateLimited         // the rate limiter's wait could not fit the deadline
)

var reasonNames = [...]string{
	reasonNone:         "",
	ReasonExhausted:    "exhausted",
	ReasonNonRetryable: "non_retryable",
	ReasonDiscarded:    "discarded",
	ReasonDeadLettered: "dead_lettered",
	ReasonFailed:       "failed",
	ReasonCanceled:     "canceled",
	ReasonDeadline:     "deadline",
	ReasonBudget:       "budget",
	ReasonBreakerOpen:  "breaker_open",
	ReasonRateLimited:  "rate_limited",
}

// String returns the reason's name, such as "exhausted"; "" for the zero Reason.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// MarshalText encodes the reason as its name.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Error is the error of a call that did not succeed.
//
// Err is the last attempt's error (or the context's cause when no attempt
// ran). When the caller's context ended, Unwrap also yields the context's
// error and its cause, so that errors.Is(err, context.Canceled) or
// errors.Is(err, context.DeadlineExceeded) holds whether or not the context
// carries a cause (context.WithCancelCause, context.WithTimeoutCause), and
// the cause is reachable too. A call stopped because its next wait could
// not fit the deadline (ReasonDeadline) matches context.DeadlineExceeded.
// Unwrap yields the dead-letter sink's error when routing failed as well.
type Error struct {
	Attempts int    // attempts run
	Reason   Reason // why the call stopped
	Err      error  // the last attempt's error

	cause  error  // context cause, when distinct from Err
	ctxErr error  // the context's error, when distinct from Err and cause
	sink   error  // dead-letter routing failure
	typ    string // the type of a stop by the breaker, limiter or budget
}

// ErrorType is "breaker.open", "ratelimit.local" or "budget.exhausted" for a
// call stopped by the breaker, the rate limiter or the retry budget, so that
// TypeOf reports what stopped it, and "timeout.attempt" when the last attempt
// ran out of its per-attempt timeout (Err is then that attempt context's
// deadline error, not the caller's); otherwise it is empty and TypeOf looks
// at Err.
func (e *Error) ErrorType() string { return e.typ }

// Error describes the stop, the attempts and the last error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("retry: ")
	b.WriteString(e.Reason.String())
	b.WriteString(" after ")
	b.WriteString(strconv.Itoa(e.Attempts))
	if e.Attempts == 1 {
		b.WriteString(" attempt")
	} else {
		b.WriteString(" attempts")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.cause != nil {
		b.WriteString(" (")
		b.WriteString(e.cause.Error())
		b.WriteString(")")
	}
	if e.sink != nil {
		b.WriteString("; ")
		b.WriteString(e.sink.Error())
	}
	return b.String()
}

// Unwrap returns the last error, the context's cause and error, and the
// dead-letter sink's error, those that are set.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 4)
	for _, err := range [...]error{e.Err, e.cause, e.ctxErr, e.sink} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
