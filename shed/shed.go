// Package shed sheds load on the server side: an adaptive concurrency
// limit in front of a handler, a short FIFO queue, priority for first
// attempts over retries, and answers that say when to come back.
//
// A Shedder admits a request when a permit of its limit is free (the
// limit is the one retry.Concurrency runs on the client side, one
// implementation: it follows the handler's latency against its unloaded
// baseline). Otherwise a request of Normal priority waits in a FIFO queue
// for a permit; a request that is itself a retry (the Retry-Attempt field,
// retry.AttemptHeader, or Envoy's x-envoy-attempt-count, at 2 or more)
// and a request Options.Priority calls Low never wait: they are shed
// first. A shed request gets 503 with a Retry-After computed from the
// rate at which the server drains its work (see Refusal.RetryAfter); with
// a Quota, a client over its quota gets 429 with the window's reset, and
// every response to a request the quota counts carries the RateLimit and
// RateLimit-Policy fields of draft-ietf-httpapi-ratelimit-headers.
//
// Retries happen at one layer: the handler of a request that is attempt
// n >= 2 of its caller runs under retry.WithInboundAttempt(ctx, n), so a
// client of package retry called inside it makes one attempt.
//
// Handler is the net/http middleware; Admit and Done are the same core
// for other transports (the gRPC server interceptors of
// github.com/steadyhq/retry/grpc).
//
// # Clients, and what a flood of them costs
//
// A client is what Options.Client names: by default the host of the
// request's RemoteAddr (for gRPC, of the peer's address), an IPv6 address
// by its /64 (Options.IPv6Prefix), since whoever holds a /64 can send from
// any of its addresses. A client's requests, admitted or waiting, hold at
// most ClientShare of the limit (three quarters): one client that keeps
// its requests open as long as it likes, such as bodies uploaded a byte at
// a time, leaves the rest of the permits to the others, who are served.
// Whatever its clients send, a Shedder keeps these bounds:
//
//   - memory: the Quota's windows of at most 10,000 clients, under 1 MB
//     whatever the length of their keys (a key is kept as a 64-bit hash);
//     4,096 counters of the clients' shares (16 KiB); a queue of at most
//     Queue requests;
//   - keys: past 10,000 clients, a new one evicts the client seen least
//     recently, so a flood of new keys never locks newcomers out of a
//     window of their own;
//   - time: the attempt fields (ParseAttempt) and a client's key are read
//     in time linear in their length; no request waits for a permit longer
//     than QueueWait.
//
// What it cannot bound is how long a request it admitted takes to arrive
// or to be read: a body sent slowly holds its permit until the handler has
// read it, a response read slowly until the handler has written it, and
// several clients together can hold every permit. http.Server's timeouts
// bound them, and should be set on any server that faces clients it does
// not trust:
//
//	srv := &http.Server{
//		Handler:           s.Handler(mux),
//		ReadHeaderTimeout: 5 * time.Second,  // the request's head, read before Handler runs
//		ReadTimeout:       30 * time.Second, // the whole request, body included
//		WriteTimeout:      60 * time.Second, // the response, for clients that read slowly
//		IdleTimeout:       2 * time.Minute,  // a kept-alive connection between requests
//	}
//
// With ReadTimeout, a handler's read of a body that has not arrived in
// time fails, the handler returns, and the permit comes back.
package shed

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/internal/adaptive"
	"github.com/steadyhq/retry/internal/typednil"
)

// Priority is how soon a request is shed: Low before Normal.
type Priority int8

const (
	// Normal requests take a free permit or wait in the queue for one.
	Normal Priority = iota
	// Low requests take a permit only when one is free and nobody waits;
	// they never wait. Retries (attempt 2 or more) are Low whatever their
	// Priority.
	Low
)

// Options configures a Shedder. Zero fields take the defaults given beside
// them, field by field; Options{} is a working configuration.
type Options struct {
	// Initial, Min and Max bound the adaptive limit on the requests in
	// flight, as in retry.Concurrency: defaults 20, 1 and 1000 (Max at
	// least Min and Initial); each at most 1,000,000, Min <= Initial <= Max.
	// Set Initial to the requests the handler serves at once when that is
	// known (its workers, its database pool): the limit grows only while
	// it is reached, so at light load it stays at Initial, and an
	// overload that finds it far above what the handler serves queues
	// requests in the handler for the limit's first few windows (about
	// 300 to 500 ms of 110 ms latencies for a handler of 4 workers at
	// 20 ms under Initial 20, against 40 ms with Initial 4; see
	// bench/cmd/shedload).
	Initial, Min, Max int
	// MaxLatency is the ceiling on the baseline, the handler's latency
	// when nothing queues: default 10 s.
	MaxLatency time.Duration
	// Queue is the most requests waiting for a permit: default 0, a
	// quarter of the current limit (at least 1): what the handler serves
	// in a quarter of its baseline latency, the default QueueWait.
	Queue int
	// QueueWait is the most time a request waits for a permit: default 0,
	// a quarter of the limit's baseline latency, or 25 ms before one is
	// known. With the requests that wait inside the handler for the
	// limit's allowance, an admitted request's latency stays within about
	// twice the unloaded one. A request also stops waiting when its
	// context ends (the client went away). Over HTTP/1.1, net/http
	// notices a client gone only once the request's body has been read,
	// and Handler does not read it: a request with a body whose client
	// left waits out QueueWait (over HTTP/2 it leaves at once).
	QueueWait time.Duration
	// Priority, when set, gives each HTTP request its priority; nil makes
	// every request Normal. It runs on every request: keep it cheap. It
	// runs before any permit or quota is taken, so a panic in it (as in
	// Client) goes on to net/http as a panic of the handler would,
	// holding nothing.
	Priority func(*http.Request) Priority
	// Client names the client of an HTTP request, for its Quota and its
	// ClientShare; "" leaves the request out of both. Default: the host of
	// the request's RemoteAddr. Behind a proxy or a load balancer every
	// request comes from its address, and all would be one client: name
	// the client from what the proxy forwards (the address it appended to
	// X-Forwarded-For), or set ClientShare to 1. A key that is an IP
	// address names its client by its prefix (IPv6Prefix); any other key
	// is kept as a hash, so its length costs nothing. gRPC: the host of
	// the peer's address.
	Client func(*http.Request) string
	// ClientShare is the most of the limit that one client's requests may
	// hold, admitted or waiting, as a fraction in (0, 1]: default 0.75,
	// and at least one permit. A request past its client's share is shed
	// at once (ReasonClient), so that one client's slow requests (a body
	// uploaded a byte at a time holds its permit as long as the client
	// likes) leave a quarter of the permits to the others; http.Server's
	// ReadTimeout bounds how long (see the package doc). 1 lets one client
	// hold every permit.
	ClientShare float64
	// IPv6Prefix is how many leading bits of an IPv6 address name one
	// client: default 64, as one subscriber's network is a /64 whose 2^64
	// addresses it may use at will; 128 counts each address apart. In
	// [0, 128]. IPv4 addresses count whole.
	IPv6Prefix int
	// Quota is an optional per-client quota; its zero value counts
	// nothing.
	Quota Quota
	// MaxRetryAfter bounds the come-back delay a request shed for
	// overload is told: default 60 s; at least 1 s. The delay is spread
	// over [w, 2w] with w at most MaxRetryAfter/2 (see Refusal), so under
	// 2 s it may be less than 1 s (gRPC's pushback says so in
	// milliseconds), and HTTP's Retry-After, in whole seconds, is 1 for
	// every client: no spread. A client over its Quota is told when its
	// window resets, however far.
	MaxRetryAfter time.Duration
	// Clock is what the Shedder reads the time from (the latencies of its
	// limit, its drain rate, the Quota's windows) and what a request waits
	// in the queue on: Clock.Sleep for up to QueueWait, woken early when a
	// permit is handed to it or its context ends. Nil is the real clock.
	// The simulator (package github.com/steadyhq/retry/sim) runs a
	// Shedder in virtual time through it.
	Clock retry.Clock
	// Random returns the uniform draws in [0, 1) that spread Retry-After;
	// nil is math/rand/v2's Float64. It must be safe for concurrent use
	// when requests are. With Random set, clients are also hashed with
	// fixed keys instead of secret ones, so that a simulation's runs
	// repeat: leave it nil on a server that faces clients.
	Random func() float64
}

// Defaults of Options' zero fields.
const (
	defaultInitial    = 20
	defaultMin        = 1
	defaultMax        = 1000
	defaultMaxLatency = 10 * time.Second
	defaultQueueWait  = 25 * time.Millisecond
	// queueShare: by default the queue holds a quarter of the limit, for
	// a quarter of the baseline.
	queueShare           = 4
	defaultMaxRetryAfter = 60 * time.Second
	maxLimit             = 1_000_000
	defaultClientShare   = 0.75
	defaultIPv6Prefix    = 64
)

// resolve returns o with its defaults, or an error naming the field that
// is wrong, its value and the rule it breaks.
func (o Options) resolve() (Options, error) {
	bad := func(field string, value any, rule string) (Options, error) {
		return o, fmt.Errorf("shed: Options.%s = %v: %s", field, value, rule)
	}
	switch {
	case o.Initial < 0 || o.Initial > maxLimit:
		return bad("Initial", o.Initial, "must be in [0, 1000000]")
	case o.Min < 0 || o.Min > maxLimit:
		return bad("Min", o.Min, "must be in [0, 1000000]")
	case o.Max < 0 || o.Max > maxLimit:
		return bad("Max", o.Max, "must be in [0, 1000000]")
	case o.MaxLatency < 0:
		return bad("MaxLatency", o.MaxLatency, "must be >= 0")
	case o.Queue < 0:
		return bad("Queue", o.Queue, "must be >= 0")
	case o.QueueWait < 0:
		return bad("QueueWait", o.QueueWait, "must be >= 0")
	case o.MaxRetryAfter != 0 && o.MaxRetryAfter < time.Second:
		return bad("MaxRetryAfter", o.MaxRetryAfter, "must be 0 or >= 1s")
	case o.Clock != nil && typednil.Is(o.Clock):
		return bad("Clock", "nil", fmt.Sprintf("a nil %T: leave Clock nil for the real clock", o.Clock))
	case !(o.ClientShare >= 0 && o.ClientShare <= 1): // NaN included
		return bad("ClientShare", o.ClientShare, "must be in [0, 1] (0 means 0.75)")
	case o.IPv6Prefix < 0 || o.IPv6Prefix > 128:
		return bad("IPv6Prefix", o.IPv6Prefix, "must be in [0, 128] (0 means 64)")
	}
	r := o
	r.Min = cmp.Or(o.Min, defaultMin)
	r.Max = cmp.Or(o.Max, max(defaultMax, r.Min, o.Initial))
	r.Initial = cmp.Or(o.Initial, min(max(defaultInitial, r.Min), r.Max))
	r.MaxLatency = cmp.Or(o.MaxLatency, defaultMaxLatency)
	r.MaxRetryAfter = cmp.Or(o.MaxRetryAfter, defaultMaxRetryAfter)
	r.ClientShare = cmp.Or(o.ClientShare, defaultClientShare)
	r.IPv6Prefix = cmp.Or(o.IPv6Prefix, defaultIPv6Prefix)
	switch {
	case r.Min > r.Max:
		return bad("Min", o.Min, fmt.Sprintf("must be <= Max (%d)", r.Max))
	case r.Initial < r.Min || r.Initial > r.Max:
		return bad("Initial", o.Initial, fmt.Sprintf("must be within [Min, Max] = [%d, %d]", r.Min, r.Max))
	}
	q, err := o.Quota.resolve()
	if err != nil {
		return o, err
	}
	r.Quota = q
	return r, nil
}

// Shedder sheds the load of a server: see the package doc. Build it with
// New; the zero Shedder and a nil *Shedder admit every request and shed
// nothing. A Shedder is safe for concurrent use; share one among the
// handlers that share a capacity.
type Shedder struct {
	opts  Options
	lim   *adaptive.Limit
	quota *quotas // nil without a quota
	// How clients are hashed (see client.go): under a seed of maphash and
	// keys of mix drawn at random, or, with Options.Random (a simulation,
	// whose runs must repeat), by FNV-1a and fixed keys.
	seed  maphash.Seed
	keys  [4]uint64
	fixed bool
	// share counts the permits each client holds or waits for, when
	// ClientShare is under 1.
	share *shares

	// waiting counts the requests in the slow path (queued, or about to
	// be): while it is above zero, no request takes a permit without
	// going through the queue's lock, and every release hands permits to
	// the queue.
	waiting atomic.Int64
	mu      sync.Mutex
	queue   []*waiter // FIFO: queue[0] is served first

	// completed changes on every request; waiting, read on every
	// request, is kept off its cache line.
	_         [64]byte
	completed atomic.Int64 // permits given back
	shed      [numReasons]atomic.Int64
	meter     meter
	// retryAfter is the come-back delay told the last request shed for
	// overload, for Stats.
	retryAfter atomic.Int64

	now   func() time.Time // the clock; time.Now
	rand  func() float64   // uniform in [0, 1); rand.Float64
	clock retry.Clock      // Options.Clock; nil for the real clock
}

// Options returns the options s runs with, its defaults resolved; the
// zero Options for a nil s.
func (s *Shedder) Options() Options {
	if s == nil {
		return Options{}
	}
	return s.opts
}

// New returns a Shedder of o, or an error naming the field of o that is
// invalid, its value and the rule it breaks, shaped
// "shed: Options.Queue = -1: must be >= 0".
func New(o Options) (*Shedder, error) {
	r, err := o.resolve()
	if err != nil {
		return nil, err
	}
	s := &Shedder{
		opts:  r,
		lim:   adaptive.New(adaptive.Config{Initial: r.Initial, Min: r.Min, Max: r.Max, MaxLatency: r.MaxLatency}),
		now:   time.Now,
		rand:  rand.Float64,
		clock: r.Clock,
		seed:  maphash.MakeSeed(),
		keys:  [4]uint64{rand.Uint64(), rand.Uint64() | 1, rand.Uint64(), rand.Uint64() | 1},
	}
	if r.Clock != nil {
		s.now = r.Clock.Now
	}
	if r.Random != nil {
		s.rand = r.Random
		s.fixed = true
		s.keys = [4]uint64{0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb, 0xd6e8feb86659fd93}
	}
	if r.Quota.Limit > 0 {
		s.quota = newQuotas(r.Quota)
	}
	if r.ClientShare < 1 {
		s.share = new(shares)
	}
	return s, nil
}

// Stats is a snapshot of a Shedder's state and counters.
type Stats struct {
	Limit    int // the concurrency limit now
	InFlight int // requests holding a permit
	Queued   int // requests waiting for one
	// Admitted counts the requests admitted, those in flight included.
	Admitted int64
	// Shed counts the requests refused, by Reason (Shed[ReasonQuota] are
	// the 429s).
	Shed Counts
	// DrainRate is the requests completed per second over about the last
	// second, as last measured (0 before a measurement).
	DrainRate float64
	// RetryAfter is the come-back delay told the last request shed for
	// overload (Refusal.RetryAfter; over HTTP, Retry-After rounds it to
	// whole seconds); 0 before one.
	RetryAfter time.Duration
}

// Counts are counts of requests shed, indexed by Reason.
type Counts [numReasons]int64

// String names each count by its Reason, in the order of the reasons:
// "{queue full: 116, queue timeout: 14, low priority: 0, canceled: 0,
// quota: 0, client share: 0}".
func (c Counts) String() string {
	b := []byte{'{'}
	for r, n := range c {
		if r > 0 {
			b = append(b, ", "...)
		}
		b = append(b, reasonNames[r]...)
		b = append(b, ": "...)
		b = strconv.AppendInt(b, n, 10)
	}
	return string(append(b, '}'))
}

// Stats returns the Shedder's state and counters.
func (s *Shedder) Stats() Stats {
	if s == nil || s.lim == nil {
		return Stats{}
	}
	s.mu.Lock()
	queued := len(s.queue)
	s.mu.Unlock()
	st := Stats{Limit: s.lim.Limit(), InFlight: s.lim.InFlight(), Queued: queued}
	st.Admitted = s.completed.Load() + int64(st.InFlight)
	for i := range s.shed {
		st.Shed[i] = s.shed[i].Load()
	}
	st.DrainRate, _ = s.meter.rate(s.now(), s.completed.Load(), 0)
	st.RetryAfter = time.Duration(s.retryAfter.Load())
	return st
}
