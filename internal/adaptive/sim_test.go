package adaptive

import (
	"container/heap"
	"math/rand/v2"
	"time"
)

// simDep is a dependency of workers serving one FIFO queue, each request
// for a service time drawn uniformly within ±20% of service, or
// exponentially, from a seeded source: the root package's test model, in
// discrete events, so that a run is the same every time.
type simDep struct {
	workers     int
	service     time.Duration
	exponential bool
	served      int // requests served so far
	// perWorker draws each worker's service times from its own source,
	// seeded by its index as the root package's model does, and gives a
	// request to the worker idle longest.
	perWorker bool
	// workerSeed is added to the second seed of each worker's source
	// (with perWorker): zero draws the root package's model's service
	// times.
	workerSeed uint64
	// failShare is the share of attempts that fail, each drawn
	// independently of the load (and of the others), as failMode says.
	failShare float64
	failMode  simFailure
	// timeout is how long an attempt of failTimeout hangs before it
	// fails: the attempt's timeout.
	timeout time.Duration
	ok      int // requests that succeeded so far
	refused int // attempts the limit refused so far
	// bounded caps the queue at bound attempts waiting for a worker: an
	// attempt that finds the workers busy and the queue full is dropped
	// unanswered (a full accept backlog) and hangs, taking no worker,
	// until the attempt's timeout, when it fails.
	bounded bool
	bound   int
	dropped int // attempts dropped so far
}

// simFailure is how an attempt of a dependency that fails a share of them
// fails.
type simFailure int

const (
	// failFast fails in 1 ms, before the queue: a 503 from a healthy
	// server, which costs it nothing.
	failFast simFailure = iota
	// failTimeout hangs, taking no worker, until the attempt's timeout.
	failTimeout
	// failServed is served as a success is, by a worker for a service
	// time, and then fails: a failure as slow as a success.
	failServed
)

// simCase is a run: a dependency, the rate requests arrive at (evenly
// spaced), the limit's Initial, how long, and the seed.
type simCase struct {
	dep     simDep
	rate    float64
	initial int
	total   time.Duration
	seed    uint64
	// every, when set, is called every 100 ms of the run.
	every func(at time.Duration, l *Limit, d *simDep)
	// jitter moves each arrival by up to a quarter of the time between
	// them, at random, as a scheduler's order would.
	jitter bool
	// skew, when set, scales the latency the limit is given of an
	// attempt that ends at, while a probe is on or not.
	skew func(at time.Duration, probing bool) float64
	// onSample, when set, is called after every sample.
	onSample func(l *Limit, now time.Duration)
	// config, when set, changes the limit's Config (retry.Concurrency's)
	// before the run.
	config func(c *Config)
}

type simEvent struct {
	at     time.Duration
	start  time.Duration // when the attempt took its permit
	timed  bool
	worker int
	failed bool
	away   bool // it took no worker (a failure before the queue)
}

type simHeap []simEvent

func (h simHeap) Len() int           { return len(h) }
func (h simHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h simHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *simHeap) Push(x any)        { *h = append(*h, x.(simEvent)) }
func (h *simHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// simulate runs c and returns the limit.
func simulate(c simCase) *Limit {
	rng := rand.New(rand.NewPCG(c.seed, 7))
	cfg := Config{Initial: c.initial, Min: 1, Max: 1000, MaxLatency: 10 * time.Second, ProbeMeans: 30, SmoothUp: 0.4, KeepFreeBaseline: true, KeepUncrowdedProbe: true, HungNotLoad: true} // as retry.Concurrency
	if c.config != nil {
		c.config(&cfg)
	}
	l := New(cfg)
	epoch := time.Unix(1000, 0)
	every := time.Duration(float64(time.Second) / c.rate)
	var ends simHeap
	var queue []simEvent // waiting for a worker
	var idle []int       // the workers idle, longest first
	var rngs []*rand.Rand
	fails := rand.New(rand.NewPCG(c.seed, 31)) // which attempts fail, apart from rng so that runs without failures draw as before
	for id := range c.dep.workers {
		idle = append(idle, id)
		rngs = append(rngs, rand.New(rand.NewPCG(uint64(id), 29+c.dep.workerSeed)))
	}
	busy := 0
	serve := func(e simEvent, now time.Duration) {
		r := rng
		if c.dep.perWorker {
			for idle[0] >= c.dep.workers { // a worker cut: it takes no more
				idle = idle[1:]
			}
			e.worker, idle = idle[0], idle[1:]
			r = rngs[e.worker]
		}
		f := 0.8 + 0.4*r.Float64()
		if c.dep.exponential {
			f = r.ExpFloat64()
		}
		busy++
		e.at = now + time.Duration(float64(c.dep.service)*f)
		heap.Push(&ends, e)
	}
	next, tick := every, time.Duration(0)
	for {
		// The next event: an arrival, an end, or a tick.
		at := min(next, tick)
		if len(ends) > 0 && ends[0].at <= at {
			e := heap.Pop(&ends).(simEvent)
			if !e.away {
				busy--
				c.dep.served++
				if c.dep.perWorker && e.worker < c.dep.workers {
					idle = append(idle, e.worker)
				}
				if len(queue) > 0 && busy < c.dep.workers {
					serve(queue[0], e.at)
					queue = queue[1:]
				}
			}
			if !e.failed {
				c.dep.ok++
			}
			if e.timed {
				rtt := e.at - e.start
				if c.skew != nil {
					rtt = time.Duration(float64(rtt) * c.skew(e.at, l.algo.probing()))
				}
				l.Done(rtt, e.failed, epoch.Add(e.at))
				if c.onSample != nil {
					c.onSample(l, e.at)
				}
			} else {
				l.Release()
			}
			continue
		}
		if at > c.total {
			return l
		}
		if at == tick {
			if c.every != nil {
				c.every(tick, l, &c.dep)
			}
			tick += 100 * time.Millisecond
			continue
		}
		next += every
		if c.jitter {
			next += time.Duration((rng.Float64() - 0.5) * float64(every) / 2)
		}
		timed, ok := l.Acquire()
		if !ok {
			c.dep.refused++
			continue
		}
		e := simEvent{start: at, timed: timed}
		if c.dep.failShare > 0 && fails.Float64() < c.dep.failShare {
			e.failed = true
			switch c.dep.failMode {
			case failFast:
				e.at, e.away = at+time.Millisecond, true
			case failTimeout:
				e.at, e.away = at+c.dep.timeout, true
			}
			if e.away {
				heap.Push(&ends, e)
				continue
			}
		}
		if busy < c.dep.workers && len(queue) == 0 {
			serve(e, at)
		} else if c.dep.bounded && len(queue) >= c.dep.bound {
			c.dep.dropped++
			e.failed, e.away, e.at = true, true, at+c.dep.timeout
			heap.Push(&ends, e)
		} else {
			queue = append(queue, e)
		}
	}
}
