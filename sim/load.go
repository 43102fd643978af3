package sim

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// segment is a span of the load at one rate.
type segment struct {
	from, to time.Duration
	rate     float64
}

// segments returns the load's spans of constant rate over [0, dur).
func (l *Load) segments(dur time.Duration) []segment {
	segs := []segment{{from: 0, to: dur, rate: l.Rate}}
	for _, st := range l.Steps {
		segs[len(segs)-1].to = st.At
		segs = append(segs, segment{from: st.At, to: dur, rate: st.Rate})
	}
	return segs
}

// arrivals returns when each call of the run arrives, in order, and the
// client that makes it. Steady arrivals are 1/rate apart from the start of
// their span, round(rate × span) of them; Poisson arrivals are drawn from
// the seed. Each arrival goes to a client started by then (see
// Fleet.Weights); one before any client has started is not made.
func (s *Scenario) arrivals() (at []int64, client []int32) {
	times := s.Load.times(s.Duration, rand.New(rand.NewPCG(s.Seed, streamArrivals)))
	pick := newPicker(&s.Fleet, s.Load.Steady, rand.New(rand.NewPCG(s.Seed, streamAssign)))
	bursts := slices.Clone(s.Load.Bursts)
	slices.SortStableFunc(bursts, func(a, b Burst) int { return cmp.Compare(a.At, b.At) })
	add := func(t int64, c int) {
		at = append(at, t)
		client = append(client, int32(c))
	}
	for _, t := range times {
		for len(bursts) > 0 && int64(bursts[0].At) < t {
			pick.burst(bursts[0], add)
			bursts = bursts[1:]
		}
		if c, ok := pick.next(t); ok {
			add(t, c)
		}
	}
	for _, b := range bursts {
		pick.burst(b, add)
	}
	return at, client
}

// times returns the load's arrival times, in nanoseconds, in order.
func (l *Load) times(dur time.Duration, rng *rand.Rand) []int64 {
	var out []int64
	for _, seg := range l.segments(dur) {
		if seg.rate <= 0 || seg.to <= seg.from {
			continue
		}
		if l.Steady {
			n := int(math.Round(seg.rate * (seg.to - seg.from).Seconds()))
			interval := time.Duration(float64(time.Second) / seg.rate)
			for k := range n {
				out = append(out, int64(seg.from+time.Duration(k)*interval))
			}
			continue
		}
		for t := seg.from.Seconds(); ; {
			t += rng.ExpFloat64() / seg.rate
			at := time.Duration(t * float64(time.Second))
			if at >= seg.to {
				break
			}
			out = append(out, int64(at))
		}
	}
	return out
}

// picker assigns arrivals to the clients started by then: in turn by
// weight for steady arrivals (stride scheduling: each client's arrivals
// are evenly spaced), at random by weight for Poisson ones.
type picker struct {
	weights []float64
	order   []int   // clients by start, then index
	starts  []int64 // when each starts
	started int     // clients of order started so far
	steady  bool
	rng     *rand.Rand

	pass  passHeap // steady: each started client's pass
	tree  fenwick  // Poisson: the started clients' weights
	total float64
	last  float64 // steady: the pass of the last pick
}

func newPicker(f *Fleet, steady bool, rng *rand.Rand) *picker {
	n := f.clients()
	p := &picker{weights: make([]float64, n), starts: make([]int64, n), steady: steady, rng: rng, tree: make(fenwick, n+1)}
	for i := range n {
		p.weights[i] = 1
		if f.Weights != nil {
			p.weights[i] = f.Weights[i]
		}
		if f.Starts != nil {
			p.starts[i] = int64(f.Starts[i])
		}
		p.order = append(p.order, i)
	}
	slices.SortStableFunc(p.order, func(a, b int) int { return cmp.Compare(p.starts[a], p.starts[b]) })
	return p
}

// startUntil starts the clients whose start is at or before t.
func (p *picker) startUntil(t int64) {
	for p.started < len(p.order) && p.starts[p.order[p.started]] <= t {
		c := p.order[p.started]
		p.started++
		if w := p.weights[c]; w > 0 {
			p.tree.add(c, w)
			p.total += w
			p.pass.push(passEntry{pass: p.last + 0.5/w, client: c, stride: 1 / w})
		}
	}
}

// next returns the client of the arrival at t; false when none has started.
func (p *picker) next(t int64) (int, bool) {
	p.startUntil(t)
	if p.total == 0 {
		return 0, false
	}
	if p.started == 1 && len(p.order) == 1 {
		return p.order[0], true
	}
	if p.steady {
		e := p.pass.e[0]
		p.last = e.pass
		p.pass.e[0].pass += e.stride
		p.pass.down(0)
		return e.client, true
	}
	return p.tree.find(p.rng.Float64() * p.total), true
}

// burst adds b's calls: Calls for each client started by then, in order.
func (p *picker) burst(b Burst, add func(t int64, c int)) {
	p.startUntil(int64(b.At))
	clients := slices.Clone(p.order[:p.started])
	slices.Sort(clients)
	for _, c := range clients {
		for range b.Calls {
			add(int64(b.At), c)
		}
	}
}

// passEntry is a client's place in stride scheduling.
type passEntry struct {
	pass, stride float64
	client       int
}

// passHeap is a min-heap of passes, ties to the lower client.
type passHeap struct{ e []passEntry }

func (h *passHeap) less(i, j int) bool {
	a, b := h.e[i], h.e[j]
	if a.pass != b.pass {
		return a.pass < b.pass
	}
	return a.client < b.client
}

func (h *passHeap) push(e passEntry) {
	h.e = append(h.e, e)
	for i := len(h.e) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.e[i], h.e[p] = h.e[p], h.e[i]
		i = p
	}
}

func (h *passHeap) down(i int) {
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.e) && h.less(l, m) {
			m = l
		}
		if r < len(h.e) && h.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		h.e[i], h.e[m] = h.e[m], h.e[i]
		i = m
	}
}

// fenwick is a Fenwick tree of the clients' weights: prefix sums, and the
// client where a running sum crosses a value, in O(log n).
type fenwick []float64

func (f fenwick) add(c int, w float64) {
	for i := c + 1; i < len(f); i += i & -i {
		f[i] += w
	}
}

// find returns the first client whose prefix sum exceeds v.
func (f fenwick) find(v float64) int {
	pos, step := 0, 1
	for step*2 < len(f) {
		step *= 2
	}
	for ; step > 0; step /= 2 {
		if next := pos + step; next < len(f) && f[next] <= v {
			pos = next
			v -= f[next]
		}
	}
	return min(pos, len(f)-2)
}
