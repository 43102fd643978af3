package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/shed"
)

// The service's answers that are not a success.
var (
	errFailed  = &retry.StatusError{StatusCode: http.StatusServiceUnavailable} // a fault's failure
	errRefused = &retry.StatusError{StatusCode: http.StatusServiceUnavailable} // the queue refused it
	errLayer   = &retry.StatusError{StatusCode: http.StatusServiceUnavailable} // a layer's call failed
)

// conflictError is the write of an attempt that lost its optimistic
// concurrency race.
type conflictError string

func (e conflictError) Error() string { return string(e) }

// ErrorType returns "sim.conflict", a type the engine retries by default.
func (conflictError) ErrorType() string { return "sim.conflict" }

var errConflict = conflictError("sim: version conflict")

// service is a run's Service.
type service struct {
	s       *Service
	r       *run
	rng     *rand.Rand
	seed    uint64
	pool    *workers // nil without a limit on workers
	faults  []window
	shed    *shed.Shedder
	keys    []string // each client's key for shed's quota
	version int      // the record of Conflicts
}

func newService(r *run) (*service, error) {
	s := &r.s.Service
	m := &service{s: s, r: r, seed: r.s.Seed, rng: rand.New(rand.NewPCG(r.s.Seed, streamService))}
	horizon := r.s.Duration + r.s.Drain
	for _, f := range s.Faults {
		w := window{from: int64(f.Start), to: int64(f.end(horizon)), fail: f.Fail, hang: f.Hang, slow: f.Slow}
		if f.Capacity > 0 {
			w.active = max(1, int(float64(s.Workers)*f.Capacity+1e-9))
		}
		m.faults = append(m.faults, w)
	}
	if s.Workers > 0 {
		m.pool = &workers{free: make([]int64, s.Workers), length: s.QueueLength, wait: int64(s.QueueWait), faults: m.faults}
	}
	if s.Shed != nil {
		o := *s.Shed
		o.Clock = r.clk
		o.Random = rand.New(rand.NewPCG(r.s.Seed, streamShed)).Float64
		sh, err := shed.New(o)
		if err != nil {
			return nil, err
		}
		m.shed = sh
		for i := range r.s.Fleet.clients() {
			m.keys = append(m.keys, "client-"+strconv.Itoa(i))
		}
	}
	return m, nil
}

// fault is what the faults on at t do together.
type fault struct {
	fail float64 // 1 - the product of what each lets through
	hang bool
	slow float64
}

func (m *service) faultAt(t int64) fault {
	f := fault{slow: 1}
	pass := 1.0
	for i := range m.faults {
		w := &m.faults[i]
		if !w.covers(t) {
			continue
		}
		if w.fail > 0 {
			pass *= 1 - w.fail
			f.hang = f.hang || w.hang
		}
		if w.slow > 0 {
			f.slow *= w.slow
		}
	}
	f.fail = 1 - pass
	return f
}

// inFault reports whether a fault is on at t.
func (m *service) inFault(t int64) bool {
	for i := range m.faults {
		if m.faults[i].covers(t) {
			return true
		}
	}
	return false
}

// travel sleeps a message's way, one draw of Network.
func (m *service) travel(ctx context.Context) error {
	d := m.network()
	if d <= 0 {
		return ctx.Err()
	}
	return m.r.clk.Sleep(ctx, d)
}

func (m *service) network() time.Duration {
	if !m.s.Network.random() {
		return m.s.Network.mean
	}
	return time.Duration(m.s.Network.draw(m.rng))
}

// serve is attempt n of call cs at the service, from its sending to its
// answer's arrival: see Service.
func (m *service) serve(ctx context.Context, cs *callState, n int) error {
	r := m.r
	if err := m.travel(ctx); err != nil {
		return err
	}
	t := r.clk.now
	cs.arrived++
	r.hit(cs.Client, t, m.inFault(t))
	var ticket shed.Ticket
	if m.shed != nil {
		tk, no := m.shed.Admit(ctx, shed.Request{Attempt: n, Key: m.keys[cs.Client]})
		if no != nil {
			code := http.StatusServiceUnavailable
			if no.Reason == shed.ReasonQuota {
				code = http.StatusTooManyRequests
			}
			return m.refuse(ctx, cs, "shed: "+no.Reason.String(), &retry.StatusError{StatusCode: code, RetryAfter: no.RetryAfter})
		}
		ticket, t = tk, r.clk.now
	}
	if f := m.faultAt(t); f.fail > 0 && unitDraw(m.seed, cs.Index, cs.arrived) < f.fail {
		r.errored(cs.Client, t)
		m.done(ticket)
		if f.hang {
			if err := r.clk.Sleep(ctx, math.MaxInt64); err != nil {
				return err
			}
			return errFailed // never: the run ends first
		}
		return m.answer(ctx, errFailed)
	}
	if m.s.Conflicts {
		return m.conflict(ctx, cs, ticket)
	}
	start, end := t, t
	if m.pool != nil {
		worker, at, why := m.pool.admit(t)
		if why != "" {
			m.done(ticket)
			return m.refuse(ctx, cs, why, errRefused)
		}
		start = at
		end = start + m.serviceTime(start)
		m.pool.serve(worker, t, start, end)
	} else {
		end = start + m.serviceTime(start)
	}
	work := time.Duration(end - start)
	r.worked(cs.Client, work)
	if m.shed != nil {
		r.clk.AfterFunc(time.Duration(end-t), func() { m.shed.Done(ticket) })
	}
	answer := end + int64(m.network())
	if d := time.Duration(answer - r.clk.now); d > 0 {
		if err := r.clk.Sleep(ctx, d); err != nil {
			r.wasted(cs.Client, work)
			return err
		}
	}
	return ctx.Err()
}

// serviceTime draws the service time of an attempt starting at start.
func (m *service) serviceTime(start int64) int64 {
	st := &m.s.ServiceTime
	if !st.random() && st.mean == 0 {
		return 0
	}
	d := float64(st.mean)
	if st.random() {
		d = st.draw(m.rng)
	}
	if f := m.faultAt(start); f.slow != 1 {
		d *= f.slow
	}
	return int64(time.Duration(d))
}

// refuse refuses the attempt: its cost, and the answer travelling back.
func (m *service) refuse(ctx context.Context, cs *callState, why string, err error) error {
	t := m.r.clk.now
	m.r.refused(cs.Client, t, why)
	if c := m.s.RefusalCost; c > 0 && m.pool != nil {
		m.pool.cost(t, int64(c))
	}
	return m.answer(ctx, err)
}

// answer returns err once the answer has travelled back.
func (m *service) answer(ctx context.Context, err error) error {
	if e := m.travel(ctx); e != nil {
		return e
	}
	return err
}

// done gives shed's permit back, if the attempt holds one.
func (m *service) done(t shed.Ticket) {
	if m.shed != nil {
		m.shed.Done(t)
	}
}

// conflict is an attempt under optimistic concurrency: it has read the
// record; its answer travels back, the write travels there, and succeeds
// if no other attempt wrote since.
func (m *service) conflict(ctx context.Context, cs *callState, ticket shed.Ticket) error {
	defer m.done(ticket)
	read := m.version
	if err := m.travel(ctx); err != nil {
		return err
	}
	if err := m.travel(ctx); err != nil {
		return err
	}
	ok := m.version == read
	if ok {
		m.version++
	} else {
		m.r.errored(cs.Client, m.r.clk.now)
	}
	if err := m.travel(ctx); err != nil {
		return err
	}
	if !ok {
		return errConflict
	}
	return nil
}

// unitDraw returns a number in [0, 1) fixed by seed, call i and its
// attempt n at the service (SplitMix64's finalizer over their mix).
func unitDraw(seed uint64, i, n int) float64 {
	x := seed ^ uint64(i)*0x9e3779b97f4a7c15 ^ uint64(n)*0xc2b2ae3d27d4eb4f
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}
