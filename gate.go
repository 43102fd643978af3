package retry

import (
	"context"
	"errors"
	"time"
)

// A gate is a defence that every attempt passes: the circuit breaker, the
// rate limiter, adaptive throttling, the retry budget, the concurrency
// limit. Each lives in its own file behind this interface, and the loop
// asks every gate of the call, in the order config.assemble gives,
// through config.admit and config.enter, for first attempts, retries and
// hedges alike. A gate reads the ask and writes its answer into the grant
// it is given, zero at first; neither pointer outlives the call (see
// consult).
type gate interface {
	// acts returns the kinds of attempt (bit 1<<kind) that admit and
	// enter act on; the loop asks the gate only about those.
	acts() (admits, enters uint8)
	// admit is asked when an attempt is planned: a first attempt or a
	// hedge just before it would run, a retry as soon as it is decided,
	// before its wait, so that a driver still holds what the last attempt
	// returned when the retry is refused. The grant lets the attempt
	// through after g.wait (at least a.wait, at most a.room), or refuses
	// it; its undo, when not nil, gives back what the gate took should
	// the attempt never run.
	admit(ctx context.Context, a *ask, g *grant)
	// enter is asked just before the attempt runs, after every wait. The
	// grant lets it run, with a learner of its outcome (nil when the gate
	// need not know), or asks for a wait (g.wait) after which the gate is
	// asked again, or refuses.
	enter(ctx context.Context, a *ask, g *grant)
}

// consult asks gate g about the attempt of a, its admit or (entering) its
// enter, into gr. The gates this package has are called by their own
// types: through the interface the compiler cannot see that a method
// keeps neither pointer, so the pass they point into would move to the
// heap, an allocation a call, and passing the ask and the grant by value
// instead copies them through memory, which cost each gate about 20 ns a
// call in loads that waited on the stores just before them. Another gate
// is asked through the interface, on copies.
func consult(ctx context.Context, g gate, entering bool, a *ask, gr *grant) {
	switch g := g.(type) {
	case *breakers:
		if entering {
			g.enter(ctx, a, gr)
		} else {
			g.admit(ctx, a, gr)
		}
	case *goBreakers:
		if entering {
			g.enter(ctx, a, gr)
		} else {
			g.admit(ctx, a, gr)
		}
	case *paceGate:
		if entering {
			g.enter(ctx, a, gr)
		} else {
			g.admit(ctx, a, gr)
		}
	case *limiter:
		if entering {
			g.enter(ctx, a, gr)
		} else {
			g.admit(ctx, a, gr)
		}
	case *throttles:
		if entering {
			g.enter(ctx, a, gr)
		} else {
			g.admit(ctx, a, gr)
		}
	case *budgets:
		if entering {
			g.enter(ctx, a, gr)
		} else {
			g.admit(ctx, a, gr)
		}
	case *concurrency:
		if entering {
			g.enter(ctx, a, gr)
		} else {
			g.admit(ctx, a, gr)
		}
	default:
		ac, gc := *a, grant{}
		if entering {
			g.enter(ctx, &ac, &gc)
		} else {
			g.admit(ctx, &ac, &gc)
		}
		*gr = gc
	}
}

// kind is what an attempt is to the gates.
type kind uint8

const (
	kindFirst kind = iota // the first attempt of a call
	kindRetry             // an attempt after a failure
	kindHedge             // an attempt beside one in flight: it starts now or not at all
)

// ask is what a gate is asked about an attempt.
type ask struct {
	cfg  *config
	kind kind
	key  string
	// start is when the call started, for MaxElapsed (see room); zero
	// without it.
	start time.Time
	// wait is the wait before the attempt so far: the policy's, raised by
	// the gates asked before.
	wait time.Duration
	// held is how long gates have held the call beyond the policy's
	// waits, in all (Breaker.MaxWait bounds it).
	held time.Duration
	// slow says a retry follows a timeout: the retry budget lets it spend
	// only what successes earned.
	slow bool
}

// room returns the longest wait from now that fits the caller's deadline
// (ctx's) and MaxElapsed; zero for a hedge. It reads the clock when there
// is one of them, at each call: after a wait, a timer that fired late
// leaves no gate counting on time the caller no longer has. A gate asks
// for it only when it would wait or refuse, so that the success path
// reads no clock.
func (a *ask) room(ctx context.Context) time.Duration {
	if a.kind == kindHedge {
		return 0
	}
	dl, ok := ctx.Deadline()
	if !ok && a.cfg.maxElapsed <= 0 {
		return maxDuration
	}
	now := a.cfg.now()
	var elapsed time.Duration
	if a.cfg.maxElapsed > 0 {
		elapsed = now.Sub(a.start)
	}
	return waitRoom(now, dl, ok, a.cfg.maxElapsed, elapsed)
}

// grant is a gate's answer.
type grant struct {
	wait time.Duration   // see gate.admit and gate.enter
	held time.Duration   // what this wait adds to ask.held
	undo func(time.Time) // gives back what admit took
	// learner, when set, learns the outcome after enter with tag, the
	// gate's note on the attempt (a generation, a start time). A per-key
	// state that is a pointer, or a doneFunc, takes no allocation.
	learner learner
	tag     int64
	no      *refusal // a refusal; nil when the gate lets the attempt through
}

// learner learns the outcome of an attempt it let through (see
// pass.learn for the outcome and its cause) with the tag its grant
// carried; cfg is the configuration of the call, for its clock (cfg.mono)
// and random source.
type learner interface {
	learn(cfg *config, tag int64, outcome, cause error)
}

// doneFunc is a learner made of a func of the outcome alone.
type doneFunc func(error)

func (f doneFunc) learn(_ *config, _ int64, outcome, _ error) { f(outcome) }

// maxLearners is the most gates that learn the outcome of one attempt:
// the breaker (the built-in one or gobreaker's, never both), adaptive
// throttling and the concurrency limit, and room for one more.
const maxLearners = 4

// pass is one attempt's way through the gates: the ask, and what the gates
// granted. Every call sets one up, gates or none: it is kept small.
type pass struct {
	ask
	undo     func(time.Time)      // gives back what gates took, if the attempt never runs
	learners [maxLearners]learner // what learns the attempt's outcome, in the order entered
	tags     [maxLearners]int64   // with its tag
	heard    uint8                // the learners set
}

// refusal is a gate's no: the reason the call stops, the type of its
// error, and the error a call refused before any attempt returns.
type refusal struct {
	reason Reason
	typ    string
	err    error
}

// Bits of the kinds of attempt, for gate.acts.
const (
	onFirst = 1 << kindFirst
	onRetry = 1 << kindRetry
	onHedge = 1 << kindHedge
	onAll   = onFirst | onRetry | onHedge
)

// gates are a configuration's gates, by kind of attempt, in the order they
// are asked: those that admit it, and those it enters.
type gates struct {
	admits, enters [3][]gate
}

// assemble puts the configuration's gates in the order they are asked:
// the breaker raises a retry's wait to the end of its open time, a
// Transport's pacing to the end of the server's quota window, the rate
// limiter takes its token for that wait, adaptive throttling drops an
// attempt locally by the share the dependency has been refusing, the
// budget takes a retry token only once those let the attempt through, and
// the concurrency limit, last, takes a permit just before the attempt
// runs, so that no attempt holds one while it waits. Adding a gate is
// adding it here.
func (c *config) assemble() {
	var all []gate
	if c.breakers != nil {
		all = append(all, c.breakers)
	}
	if c.goBreakers != nil {
		all = append(all, c.goBreakers)
	}
	if c.pace != nil {
		all = append(all, c.pace)
	}
	if c.limiter != nil {
		all = append(all, c.limiter)
	}
	if c.throttle != nil {
		all = append(all, c.throttle)
	}
	if c.budget != nil {
		all = append(all, c.budget)
	}
	if c.concurrency != nil {
		all = append(all, c.concurrency)
	}
	c.gates = gates{}
	c.learns = c.breakers != nil || c.goBreakers != nil || c.throttle != nil || c.concurrency != nil
	for _, g := range all {
		admits, enters := g.acts()
		for k := range c.gates.admits {
			if admits&(1<<k) != 0 {
				c.gates.admits[k] = append(c.gates.admits[k], g)
			}
			if enters&(1<<k) != 0 {
				c.gates.enters[k] = append(c.gates.enters[k], g)
			}
		}
	}
}

// admits and enters report whether any gate admits, or is entered by, an
// attempt of kind k: the loop asks the gates only then.
func (c *config) admits(k kind) bool { return len(c.gates.admits[k]) > 0 }
func (c *config) enters(k kind) bool { return len(c.gates.enters[k]) > 0 }

// admit asks every gate to let the attempt of p through (see gate.admit),
// raising p.wait. On a refusal it gives back what the gates before took.
func (c *config) admit(ctx context.Context, p *pass) *refusal {
	for _, g := range c.gates.admits[p.kind] {
		var gr grant
		consult(ctx, g, false, &p.ask, &gr)
		if gr.no != nil {
			p.giveBack(c)
			return gr.no
		}
		p.wait, p.held = max(p.wait, gr.wait), p.held+gr.held
		if gr.undo != nil {
			if first := p.undo; first != nil { // a second gate took something
				then := gr.undo
				gr.undo = func(now time.Time) { first(now); then(now) }
			}
			p.undo = gr.undo
		}
	}
	return nil
}

// enter asks the gates the attempt of p enters, from the i-th on, to let
// it run now (see gate.enter). It returns no refusal and no wait once
// every gate has; a gate's refusal, having reported to the gates already
// entered that the attempt did not run and given back what the gates took
// in admit; or the wait a gate asked for, with that gate's index, to ask
// it again from after the wait (or, for an attempt that does not wait,
// to call p.notRun). It takes no func to sleep with: a closure over the
// caller's state, built on every gated call, cost it 1.5 to 3 ns.
func (c *config) enter(ctx context.Context, p *pass, i int) (next int, wait time.Duration, no *refusal) {
	list := c.gates.enters[p.kind]
	for ; i < len(list); i++ {
		var gr grant
		consult(ctx, list[i], true, &p.ask, &gr)
		if gr.no != nil {
			p.notRun(c)
			return i, 0, gr.no
		}
		if gr.wait > 0 {
			p.held += gr.held
			return i, gr.wait, nil
		}
		if gr.learner != nil {
			p.learners[p.heard], p.tags[p.heard] = gr.learner, gr.tag
			p.heard++
		}
	}
	return i, 0, nil
}

// notRun reports to the gates entered that the attempt of p will not
// run, and gives back what the gates took in admit.
func (p *pass) notRun(c *config) {
	p.learn(errNotRun, nil)
	p.giveBack(c)
}

// errNotRun is the outcome of an attempt that a gate let through and a
// later gate refused, or whose wait the caller's context ended: it never
// reached the dependency.
var errNotRun = errors.New("not run")

// learn reports the attempt's outcome to the gates that asked for it: nil
// for a success, errBreakerExcluded for an outcome that counts neither way,
// errBreakerFailure for a failure, errNotRun for an attempt that never ran;
// and its cause, for a gate that judges it by its own rules (gobreaker's):
// the attempt's error (nil for a success), errWithdrawn for an attempt its
// call gave up (a hedge that lost), nil when outcome is errNotRun, or
// errPanicked.
func (p *pass) learn(outcome, cause error) {
	n := p.heard
	if n == 0 {
		return
	}
	p.heard = 0
	for i := range n {
		if l := p.learners[i]; l != nil {
			l.learn(p.cfg, p.tags[i], outcome, cause)
			p.learners[i] = nil
		}
	}
	if bs := p.cfg.breakers; bs != nil {
		bs.flush()
	}
}

// spend marks what the gates took as spent: the attempt runs.
func (p *pass) spend() { p.undo = nil }

// giveBack gives back what the gates took for an attempt that never runs.
func (p *pass) giveBack(c *config) {
	if undo := p.undo; undo != nil {
		p.undo = nil
		undo(c.mono())
	}
}

// breakerOutcome is what an attempt's error means to the gates that learn
// outcomes (the circuit breaker, adaptive throttling, the concurrency
// limit): nil for a success, errBreakerExcluded for the caller's own
// errors, which must not trip a breaker or count as the dependency's
// refusal, errBreakerFailure otherwise. An attempt cut off by the
// caller's deadline while the dependency had not answered is a timeout
// failure, so that a hung dependency trips the breaker; the caller's own
// cancellation is excluded.
func (cfg *config) breakerOutcome(ctx context.Context, err error, timedOut bool) error {
	if err == nil {
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
