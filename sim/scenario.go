package sim

import (
	"context"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/shed"
)

// Scenario is one run of the model: a Load of requests over Duration,
// made by the clients of a Fleet, each a call of the real engine, to a
// Service, through Layers when there are some. Zero fields take the
// defaults given beside them, field by field; Duration is required.
type Scenario struct {
	// Duration is how long requests arrive: from 0 to Duration. The
	// Report's goodput and recovery are taken over it.
	Duration time.Duration
	// Drain is how long the run goes on after Duration so that the calls
	// in flight end; the run ends earlier once nothing is left to happen.
	// Zero stops it at Duration. A call still running when the run ends
	// is unfinished; its attempts stop where they are.
	Drain   time.Duration
	Load    Load
	Service Service
	Fleet   Fleet
	// Layers, when there are some, are services in a chain between the
	// fleet and Service: the fleet calls the first; the handler of each
	// calls the next through a Retrier of its own, the last one Service.
	// A handler serves a request that is attempt n of its caller under
	// retry.WithInboundAttempt(ctx, n), as shed's middleware does, and
	// numbers its own calls' attempts as the Transport does
	// (retry.OutboundAttempt), so that retries happen at one layer by the
	// engine's rule. A layer that fails answers 503. Each hop takes two
	// draws of Service.Network, there and back.
	Layers []Layer
	// Seed fixes every random draw: the same Scenario and Seed give the
	// same Report.
	Seed uint64
	// Resolution is the width of the Report's series; it divides a second.
	// Default 1 s.
	Resolution time.Duration
}

// Load is when requests arrive: open loop, whatever the answers.
type Load struct {
	// Rate is the fleet's requests per second from the start, together;
	// zero for none. Steps change it later.
	Rate float64
	// Steady spaces arrivals evenly (1/Rate apart); otherwise they are a
	// Poisson process of the same rate.
	Steady bool
	// Steps change the rate over time: from each Step's At on, requests
	// arrive at its Rate; Ats are increasing.
	Steps []Step
	// Bursts are calls that every client started by then makes at once.
	Bursts []Burst
}

// Step is a change of the load's rate at At.
type Step struct {
	At   time.Duration
	Rate float64
}

// Burst is Calls calls that each client makes at once at At (a client
// starting up, a cache emptied by a restart).
type Burst struct {
	At    time.Duration
	Calls int
}

// Fleet is the clients that make the calls: each its own Retrier, built
// from Options and run on the run's clock, so that each has its own
// budget, breaker and other gates unless Options gives them state they
// share (a retry.SharedBudget, a retry.Limiter, built once and returned to
// every client).
type Fleet struct {
	// Clients is the number of clients; default 1.
	Clients int
	// Weights split the load among the clients, one weight per client, in
	// proportion; nil splits it evenly. With Load.Steady, arrivals go to
	// the clients in turn (smooth weighted round robin), so that each
	// client's requests are evenly spaced too; with Poisson arrivals, each
	// goes to a client drawn by weight, so that each client's requests are
	// a Poisson process of its share.
	Weights []float64
	// Starts, one per client, is when each client starts: it makes no
	// call before. Arrivals go to the clients started by then; an arrival
	// before any has started is not made. Nil starts them all at 0.
	Starts []time.Duration
	// Options returns the options of each client's Retrier; nil gives
	// retry.New()'s defaults. It runs once per client, in order, before
	// the run starts. The run appends retry.WithClock with the client's
	// clock and retry.WithRandom with a source of its own, so that the
	// client runs in virtual time and repeatably. A client given
	// retry.WithHedge makes its calls with retry.Hedged, the others with
	// Retrier.Run.
	Options func(c Client) []retry.Option
	// Observe, when set, learns each attempt's outcome as it returns to
	// the client: ctx is the attempt's (CallOf says which call it is of),
	// n its number, err nil for a success.
	Observe func(ctx context.Context, n int, err error)
	// Jumps step clients' clocks (an NTP step, a VM resumed): Now jumps
	// while durations slept stay true.
	Jumps []Jump
}

// Client is what Fleet.Options and Layer.Options know of the client they
// build: its index (for a Layer, the layer's) and its clock, with its
// jumps. The clock is a retry.Clock that runs the engine's timers too;
// only the run's goroutines may sleep on it (a shared state's model of a
// round trip may, from a call's attempt): its Sleep returns an error
// before the run, and a goroutine of your own must not sleep on it.
type Client struct {
	Index int
	Clock retry.Clock
}

// Jump steps the clocks of Clients (nil for all) by By at At: from then
// on their Now reads By later (earlier when By is negative).
type Jump struct {
	At, By  time.Duration
	Clients []int
}

// Layer is a service in a chain between the fleet and the Service (see
// Scenario.Layers).
type Layer struct {
	// Options returns the options of the layer's Retrier, as
	// Fleet.Options does; nil gives retry.New()'s defaults.
	Options func(c Client) []retry.Option
}

// Call identifies a call of a run: the client that makes it and its index
// among the run's calls, in order of arrival.
type Call struct {
	Client, Index int
}

type callKey struct{}

// CallOf returns the call whose context, or whose attempt's context, ctx
// is; false outside a run.
func CallOf(ctx context.Context) (Call, bool) {
	cs, ok := ctx.Value(callKey{}).(*callState)
	if !ok {
		return Call{}, false
	}
	return cs.Call, true
}

// callState is a call's own: its identity, the context it started with,
// the attempts it has sent to the Service, and what a TokenQuota knows of
// it.
type callState struct {
	Call
	ctx     context.Context
	arrived int // attempts that reached the Service
	quota   quotaCall
}

// Service is the dependency at the end of the calls: workers that serve
// attempts from a FIFO queue, behind the network. Its zero value answers
// every attempt at once.
//
// An attempt travels to the service (a draw of Network), meets the
// Faults of that instant, waits in the queue for the first worker free,
// is served for a draw of ServiceTime (times the Slow of the faults when
// it starts), and its answer travels back (another draw). Every attempt
// admitted is served, even once its caller has given up (its attempt
// timed out, a hedge won): wasted work. An attempt that finds the queue
// full, or that would wait longer than QueueWait, is refused at once with
// 503, and the refusal costs a worker RefusalCost, after the work queued.
type Service struct {
	// Workers serve one attempt at a time each; 0 for no limit.
	Workers int
	// ServiceTime is each attempt's, drawn as it is admitted.
	ServiceTime Dist
	// QueueLength is the most attempts waiting for a worker: 0 for no
	// bound, negative for no queue (an attempt that finds every worker
	// busy is refused).
	QueueLength int
	// QueueWait refuses at once an attempt that would wait longer than
	// it for a worker; 0 for no bound.
	QueueWait time.Duration
	// RefusalCost is the time of a worker that each refusal takes, the
	// service's own and Shed's, after the work already queued.
	RefusalCost time.Duration
	// Network is each message's delay, one way.
	Network Dist
	// Faults injected into the service, each for a window of the run.
	Faults []Fault
	// Shed, when set, puts the real load shedder (package shed) of these
	// options in front of the workers: each attempt is admitted or shed
	// (503 with its Retry-After, or 429 over a Quota, keyed by client) as
	// it arrives, and its permit is given back when its service ends. The
	// run sets Options.Clock and Options.Random.
	Shed *shed.Options
	// Conflicts makes every attempt a read then a write of one record
	// under optimistic concurrency, two round trips: the write fails (an
	// error of type "sim.conflict", retryable) if another attempt wrote
	// since the read. Workers and ServiceTime do not apply.
	Conflicts bool
}

// Fault is a fault injected into the Service from Start for Length
// (0: to the end of the run). Its effects combine with those of the
// faults it overlaps.
type Fault struct {
	Start, Length time.Duration
	// Fail is the share of attempts arriving in the window that fail, in
	// [0, 1]: 1 is an outage, 0.5 a half recovery. A failure is a 503
	// answered at once, drawn for each call and attempt from the seed, so
	// that runs of one Scenario and Seed meet the same failures whatever
	// their clients do.
	Fail float64
	// Hang makes the failures timeouts: never answered, they end when the
	// caller gives up.
	Hang bool
	// Slow multiplies the service time of attempts that start in the
	// window (a latency spike); 0 leaves it.
	Slow float64
	// Capacity is the share of Workers left in the window, in (0, 1]
	// (rounded down, at least one worker): the others finish what they
	// serve and start nothing until the window ends. 0 leaves them all.
	Capacity float64
}

// end returns when f ends, horizon for a fault that lasts to the end.
func (f Fault) end(horizon time.Duration) time.Duration {
	if f.Length == 0 {
		return horizon
	}
	return f.Start + f.Length
}
