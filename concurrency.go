package retry

import (
	"cmp"
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/steadyhq/retry/internal/adaptive"
)

// Concurrency is an adaptive limit on the attempts in flight to a
// dependency, for WithConcurrency. Every attempt, first, retry or hedge,
// takes a permit just before it runs, after every other gate, and gives it
// back when its outcome is known (for the Transport, when the response's
// headers arrive), or when it fails, panics, is canceled or never runs.
//
// The limit follows the latency against a baseline, the latency the
// dependency shows when nothing queues. Over windows of two baselines (at
// least 100 ms, longer until the mean latency is known within 5%) it moves
// towards the dependency's Little's-law limit, the attempts in flight
// times baseline over latency, since attempts beyond what the dependency
// serves queue and stretch the latency, plus a small queue (a third of
// the limit's square root); a latency above the baseline by more than the
// window's noise is a queue. It grows only while it is reached, so a limit
// nobody uses stays where it is, and follows a loss of capacity within a
// few windows.
//
// A limit that starts above what the dependency serves, under load that
// fills it from the start, sees only queued latencies at first. Until it
// knows its baseline is no queue's, it checks: the latency must hold with
// a quarter more attempts in flight, or else a probe lowers the limit to
// a quarter of itself for a moment, times the attempts that start once the
// queue has drained, and sets the limit from what it measured. So the
// limit finds the dependency's capacity from far above it: from two to ten
// times above, within ±20% of it in 2 to 8 s, for dependencies of 10 to
// 200 workers (TestConcurrencyFindsCapacity). Attempts during a probe that
// find the limit reached are refused or wait, as at any limit.
//
// Failures that come back in less than half the baseline (a refusal, a
// 503 at once) say nothing of load and are left out, so a dependency that
// fails fast for a minute finds the limit where it was when it recovers.
// A window of mostly slower failures (timeouts), while at least half the
// limit is in use, cuts the limit by a tenth; once the dependency is
// healthy again the limit doubles back a window at a time to where the
// failures began. The caller's own errors are left out.
//
// The baseline rises only when the windows have halved the limit and the
// latency fell by less than a quarter, and a probe measures it again: then
// the latency is the dependency's own, not a queue. It never rises above
// MaxLatency, so through a long incident the limit stays low while the
// latency stays above MaxLatency, instead of climbing back as the
// incident's latency becomes the new normal (a dependency healthy above
// it is held low). Limits of several clients of one dependency each take
// the queue of the others they meet for latency: together they hold a
// little more than the dependency serves (110 to 115 in flight, on
// average, for 100 workers and three clients:
// TestConcurrencyStaggeredClients).
//
// When the limit is reached, an attempt waits up to MaxWait, within the
// caller's deadline, asking again every eighth of the baseline (1 to
// 50 ms); by default it does not wait, and a hedge never does. An attempt
// that gets no permit ends the call with an *Error of Reason
// ReasonThrottled and type "concurrency.limit" (a retry's keeps the last
// failure); a hedge that gets none is not started. Stats gives each limit
// and its attempts in flight. Latencies are read on WithClock's clock;
// with many attempts, one in up to 64 is timed, as the clock costs more
// than the rest of the gate.
//
// The limit starts at Initial and grows only as attempts come back, so a
// client far busier than Initial has calls refused at first: 500 callers,
// each calling every 80 ms a dependency that answers in 20 ms, had about
// three in four refused for the first half second and none from a second
// and a quarter on (TestConcurrencyStartup, in virtual time). Set Initial
// near the concurrency the dependency is known to serve, or give MaxWait.
//
// The limit is off unless WithConcurrency is given. Zero fields take the
// defaults given beside them, field by field. Concurrency is a plain value;
// the state WithConcurrency builds from it is shared by every call of the
// Retrier or Transport and is safe for concurrent use.
type Concurrency struct {
	// Initial is the limit at the start: default 20, or Max if lower.
	Initial int
	// Min and Max bound the limit: defaults 1 and 1000 (or Initial, if
	// higher). Initial, Min and Max are at most 1,000,000.
	Min, Max int
	// MaxLatency is the ceiling on the baseline, the dependency's healthy
	// latency: default 10 s. Set it to the slowest latency the
	// dependency shows when healthy, such as its p99.
	MaxLatency time.Duration
	// MaxWait bounds how long one call waits for permits, in all, with
	// what other gates held it (see Breaker.MaxWait), and always within
	// the caller's deadline: a call that gets no permit is refused two
	// rechecks and 5 ms before its deadline, so that it ends as the
	// limit's refusal, not the caller's; default 0: an attempt that finds
	// the limit reached is refused at once, so an inline caller is never
	// held.
	MaxWait time.Duration
	// PerKey keeps one limit per key (WithKey, or the Transport's request
	// key, by default the host), so that a slow dependency does not take
	// the permits of the others; at most 1024 keys are kept, the one used
	// least recently dropped (keys last used between the same two
	// additions of keys count as used together).
	PerKey bool
}

// defaultConcurrency holds the defaults of Concurrency's zero fields.
var defaultConcurrency = Concurrency{Initial: 20, Min: 1, Max: 1000, MaxLatency: 10 * time.Second}

// typeConcurrencyLimit is the type of a call's error when the concurrency
// limit refused its attempt.
const typeConcurrencyLimit = "concurrency.limit"

// WithConcurrency puts an adaptive concurrency limit in front of the
// attempts (see Concurrency), in place of any before it. An invalid c
// makes every call return an error naming the field.
func WithConcurrency(c Concurrency) Option {
	return optionFunc(func(cfg *config) {
		c, field, value, rule := c.resolve()
		if field != "" {
			cfg.invalid("WithConcurrency", field, value, rule)
			return
		}
		cfg.concurrency = newConcurrency(c)
	})
}

// resolve returns c with its defaults, or names the field that is wrong,
// its value and the rule it breaks.
func (c Concurrency) resolve() (r Concurrency, field string, value any, rule string) {
	const most = maxConcurrencyLimit
	switch {
	case c.Initial < 0 || c.Initial > most:
		return c, "Initial", c.Initial, "must be in [0, 1000000]"
	case c.Min < 0 || c.Min > most:
		return c, "Min", c.Min, "must be in [0, 1000000]"
	case c.Max < 0 || c.Max > most:
		return c, "Max", c.Max, "must be in [0, 1000000]"
	case c.MaxLatency < 0:
		return c, "MaxLatency", c.MaxLatency, "must be >= 0"
	case c.MaxWait < 0:
		return c, "MaxWait", c.MaxWait, "must be >= 0"
	}
	d := defaultConcurrency
	r = c
	r.Min = cmp.Or(c.Min, d.Min)
	r.Max = cmp.Or(c.Max, max(d.Max, r.Min, c.Initial))
	r.Initial = cmp.Or(c.Initial, min(max(d.Initial, r.Min), r.Max))
	r.MaxLatency = cmp.Or(c.MaxLatency, d.MaxLatency)
	switch {
	case r.Min > r.Max:
		return c, "Min", c.Min, "must be <= Max (" + strconv.Itoa(r.Max) + ")"
	case r.Initial < r.Min || r.Initial > r.Max:
		return c, "Initial", c.Initial, "must be within [Min, Max] = [" + strconv.Itoa(r.Min) + ", " + strconv.Itoa(r.Max) + "]"
	}
	return r, "", nil, ""
}

// waitMargin is how much of the caller's time a wait for a permit leaves,
// beyond two rechecks: a call that got no permit ends as the limit's
// refusal that long before its deadline.
const waitMargin = 5 * time.Millisecond

// maxConcurrencyLimit is the highest limit a Concurrency may set: far more
// attempts in flight than a process holds, and far from the float
// rounding where int conversions overflow.
const maxConcurrencyLimit = 1_000_000

// concurrency is the concurrency-limit gate of a Retrier: one limit, or one
// per key.
type concurrency struct {
	spec   Concurrency
	one    *permits
	keys   *keyed[*permits]
	mk     func() *permits // makes a key's limit
	waits  atomic.Int64    // waits for a permit
	denied atomic.Int64    // attempts refused a permit
}

func newConcurrency(c Concurrency) *concurrency {
	cs := &concurrency{spec: c}
	cs.mk = func() *permits { return newPermits(c) }
	if c.PerKey {
		cs.keys = newKeyed[*permits](maxKeys)
	} else {
		cs.one = cs.mk()
	}
	return cs
}

// acts: every attempt takes a permit as it is about to run, after every
// other gate's wait, so that no attempt holds one while it waits; admit is
// never asked.
func (cs *concurrency) acts() (admits, enters uint8)        { return 0, onAll }
func (cs *concurrency) admit(context.Context, *ask, *grant) {}

// enter takes a permit, whose outcome the limit learns; when there is none,
// it asks for a wait if MaxWait and the time left allow one, or refuses.
func (cs *concurrency) enter(ctx context.Context, a *ask, g *grant) {
	p := cs.get(a.key)
	if timed, ok := p.l.Acquire(); ok {
		g.learner = p
		if timed {
			g.tag = p.start(a.cfg)
		}
		return
	}
	// Wait one recheck more while MaxWait allows and the caller's time
	// outlasts it with a margin (two rechecks and waitMargin, for a
	// timer's lateness); otherwise refuse now, so that the call ends as
	// the limit's refusal, not at the caller's own deadline.
	if w := min(p.recheck(), cs.spec.MaxWait-a.held); a.kind != kindHedge && w > 0 && 2*w+waitMargin < a.room(ctx) {
		cs.waits.Add(1)
		g.wait, g.held = w, w
		return
	}
	cs.denied.Add(1)
	g.no = &refusal{reason: ReasonThrottled, typ: typeConcurrencyLimit, err: &concurrencyError{limit: int64(p.l.Limit())}}
}

// get returns the limit of key: the one, or key's own.
func (cs *concurrency) get(key string) *permits {
	if cs.keys != nil {
		return cs.keys.get(key, time.Time{}, cs.mk)
	}
	return cs.one
}

// stats reports the waits, the refusals, and each limit and its attempts
// in flight.
func (cs *concurrency) stats(s *Stats) {
	s.ConcurrencyWaits = cs.waits.Load()
	s.ConcurrencyDenied = cs.denied.Load()
	s.ConcurrencyLimit, s.InFlight = make(map[string]int), make(map[string]int)
	add := func(key string, p *permits) {
		s.ConcurrencyLimit[key] = p.l.Limit()
		s.InFlight[key] = p.l.InFlight()
	}
	if cs.one != nil {
		add("", cs.one)
		return
	}
	cs.keys.each(add)
}

// permits is one dependency's limit, as a gate's learner.
type permits struct{ l *adaptive.Limit }

// newPermits returns the limit of c. A client's limit times its probes for
// up to 30 means, moves 0.4 of the way up a window, takes a baseline
// measured in two free windows, or by a probe that met no queue, as no
// queue's, and leaves attempts that hung while its successes stayed at
// the baseline out of what says load (see adaptive.Config); a shedder
// keeps the defaults, as its probe holds every client's requests and it
// hears of no attempt that hung.
func newPermits(c Concurrency) *permits {
	return &permits{l: adaptive.New(adaptive.Config{Initial: c.Initial, Min: c.Min, Max: c.Max, MaxLatency: c.MaxLatency, ProbeMeans: 30, SmoothUp: 0.4, KeepFreeBaseline: true, KeepUncrowdedProbe: true, HungNotLoad: true})}
}

// start is the tag of a timed attempt: its start on the clock, odd; an
// attempt that is not timed has the tag zero.
func (p *permits) start(cfg *config) int64 { return ticks(cfg.mono()) | 1 }

// learn gives the permit back and, for a timed attempt that was not left
// out, feeds its latency and outcome to the algorithm (see pass.learn).
func (p *permits) learn(cfg *config, tag int64, outcome, _ error) {
	if tag == 0 || outcome == errBreakerExcluded || outcome == errNotRun {
		p.l.Release()
		return
	}
	now := cfg.mono()
	p.l.Done(time.Duration(ticks(now)-tag), outcome != nil, now)
}

// recheck is how long an attempt waits before it asks again for a permit.
func (p *permits) recheck() time.Duration {
	return min(max(p.l.Baseline()/8, time.Millisecond), 50*time.Millisecond)
}

// ticks is a clock reading as nanoseconds since monoBase.
func ticks(t time.Time) int64 { return int64(t.Sub(monoBase)) }

// concurrencyError is the failure of a call whose attempt the concurrency
// limit refused.
type concurrencyError struct{ limit int64 }

func (e *concurrencyError) Error() string {
	return "retry: concurrency limit reached (at most " + strconv.FormatInt(e.limit, 10) + " attempts in flight)"
}
func (e *concurrencyError) ErrorType() string { return typeConcurrencyLimit }
