package grpc_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// hang waits for the end of the attempt's RPC, which the client cancels
// when another attempt wins, or for long, and reports whether it was
// canceled.
func hang(ctx context.Context, canceled *atomic.Int32) error {
	select {
	case <-ctx.Done():
		canceled.Add(1)
		return ctx.Err()
	case <-time.After(5 * time.Second):
		return nil
	}
}

// TestUnaryHedge: unary calls hedged as gRFC A6's hedgingPolicy says,
// against a real server. A success wins and cancels the others; a
// non-fatal status starts the next hedge at once; a fatal status, or a
// response committed by its headers, ends the call with that response and
// cancels the others; a pushback delays the next hedge by its wait, or,
// when it says not to retry, ends the call; every hedge carries
// grpc-previous-rpc-attempts; the caller's reply, header and trailer are
// the winner's.
func TestUnaryHedge(t *testing.T) {
	const delay = 40 * time.Millisecond
	tests := []struct {
		name string
		max  int // Hedge.Max, and the policy's MaxAttempts
		// answer answers hit n; canceled counts the hits canceled.
		answer   func(ctx context.Context, n int, canceled *atomic.Int32) error
		code     codes.Code // of the call
		message  string
		reason   retry.Reason  // of a failed call, when set
		winner   int           // the hit whose reply and header the caller gets; 0 for none
		hits     int           // hits in all
		canceled int           // hits canceled by the client
		gap      time.Duration // the largest gap wanted between the last two hits' starts; 0: not checked
		minGap   time.Duration // the least
		took     time.Duration // the most the call may take
	}{
		{name: "a slow first attempt: the hedge wins, the first is canceled", max: 2,
			answer: func(ctx context.Context, n int, c *atomic.Int32) error {
				if n == 1 {
					return hang(ctx, c)
				}
				return nil
			}, winner: 2, hits: 2, canceled: 1, took: time.Second},
		{name: "a non-fatal status starts the next hedge at once", max: 3,
			answer: func(ctx context.Context, n int, c *atomic.Int32) error {
				switch n {
				case 1:
					return hang(ctx, c)
				case 2:
					return status.Error(codes.Unavailable, "node-2 down")
				}
				return nil
			}, winner: 3, hits: 3, canceled: 1, gap: delay / 2, took: time.Second},
		{name: "a fatal status ends the call and cancels the others", max: 3,
			answer: func(ctx context.Context, n int, c *atomic.Int32) error {
				if n == 1 {
					return hang(ctx, c)
				}
				return status.Error(codes.InvalidArgument, "no such service")
			}, code: codes.InvalidArgument, message: "no such service", hits: 2, canceled: 1, took: time.Second},
		{name: "a committed response ends the call", max: 3,
			answer: func(ctx context.Context, n int, c *atomic.Int32) error {
				if n == 1 {
					return hang(ctx, c)
				}
				grpc.SendHeader(ctx, metadata.Pairs("hit", strconv.Itoa(n)))
				return status.Error(codes.Unavailable, "broke after its headers")
			}, code: codes.Unavailable, message: "broke after its headers", hits: 2, canceled: 1, took: time.Second},
		{name: "a pushback delays the next hedge", max: 3,
			answer: func(ctx context.Context, n int, c *atomic.Int32) error {
				switch n {
				case 1:
					return hang(ctx, c)
				case 2:
					grpc.SetTrailer(ctx, metadata.Pairs(retrygrpc.PushbackKey, "150"))
					return status.Error(codes.Unavailable, "later")
				}
				return nil
			}, winner: 3, hits: 3, canceled: 1, minGap: 150 * time.Millisecond, took: time.Second},
		{name: "a pushback that says not to retry: no further hedge, the first goes on and wins", max: 3,
			answer: func(ctx context.Context, n int, c *atomic.Int32) error {
				if n == 1 {
					time.Sleep(150 * time.Millisecond)
					return nil
				}
				grpc.SetTrailer(ctx, metadata.Pairs(retrygrpc.PushbackKey, "-1"))
				return status.Error(codes.Unavailable, "go away")
			}, winner: 1, hits: 2, took: time.Second},
		{name: "a pushback that says not to retry, then the first fails: the pushback's status", max: 3,
			answer: func(ctx context.Context, n int, c *atomic.Int32) error {
				if n == 1 {
					time.Sleep(150 * time.Millisecond)
					return status.Error(codes.Unavailable, "node-1 down")
				}
				grpc.SetTrailer(ctx, metadata.Pairs(retrygrpc.PushbackKey, "-1"))
				return status.Error(codes.Unavailable, "go away")
			}, code: codes.Unavailable, message: "go away", reason: retry.ReasonNonRetryable, hits: 2, took: time.Second},
		{name: "the first attempt wins before the delay: no hedge", max: 3,
			answer: func(context.Context, int, *atomic.Int32) error { return nil },
			winner: 1, hits: 1, took: delay},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var canceled atomic.Int32
			var started sync.WaitGroup
			s := &server{check: func(ctx context.Context, n int) error {
				started.Add(1)
				defer started.Done()
				grpc.SetTrailer(ctx, metadata.Pairs("trailer-hit", strconv.Itoa(n)))
				err := tt.answer(ctx, n, &canceled)
				if err == nil {
					// Headers set on a failure would be sent before its
					// status, and commit the RPC.
					grpc.SetHeader(ctx, metadata.Pairs("hit", strconv.Itoa(n)))
				}
				return err
			}}
			r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: tt.max, InitialInterval: time.Hour}),
				retry.WithHedge(retry.Hedge{Delay: delay, Max: tt.max}))
			c, _ := start(t, s, r)
			var header, trailer metadata.MD
			var p peer.Peer
			begin := time.Now()
			resp, err := c.Check(context.Background(), check, grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&p))
			took := time.Since(begin)
			// The client cancels the losers; wait until the server saw it.
			deadline := time.Now().Add(2 * time.Second)
			for canceled.Load() < int32(tt.canceled) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if tt.code == codes.OK {
				if err != nil || resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
					t.Fatalf("Check = %v, %v; want SERVING", resp, err)
				}
				if got := header.Get("hit"); !slices.Equal(got, []string{strconv.Itoa(tt.winner)}) {
					t.Errorf("header hit = %v, want the winner's %d", got, tt.winner)
				}
				if got := trailer.Get("trailer-hit"); !slices.Equal(got, []string{strconv.Itoa(tt.winner)}) {
					t.Errorf("trailer hit = %v, want the winner's %d", got, tt.winner)
				}
				if p.Addr == nil {
					t.Error("the caller's Peer was not filled in")
				}
			} else {
				checkStatus(t, err, status.New(tt.code, tt.message))
				if tt.reason != "" && reasonOf(err) != tt.reason.String() {
					t.Errorf("reason %q, want %q", reasonOf(err), tt.reason)
				}
			}
			if took > tt.took {
				t.Errorf("the call took %v, want at most %v", took, tt.took)
			}
			if got := int(canceled.Load()); got != tt.canceled {
				t.Errorf("%d hits canceled, want %d", got, tt.canceled)
			}
			time.Sleep(2 * delay) // no hedge may start after the call
			h := s.seen()
			if len(h) != tt.hits {
				t.Fatalf("%d hits, want %d", len(h), tt.hits)
			}
			for i, hit := range h {
				want := ""
				if i > 0 {
					want = strconv.Itoa(i)
				}
				if hit.previous != want {
					t.Errorf("hit %d carried grpc-previous-rpc-attempts %q, want %q", i+1, hit.previous, want)
				}
			}
			if n := len(h); n >= 2 {
				gap := h[n-1].at.Sub(h[n-2].at)
				if tt.gap > 0 && gap > tt.gap {
					t.Errorf("hit %d started %v after hit %d, want at once (under %v)", n, gap, n-1, tt.gap)
				}
				if gap < tt.minGap {
					t.Errorf("hit %d started %v after hit %d, want at least %v", n, gap, n-1, tt.minGap)
				}
			}
			started.Wait()
		})
	}
}

// TestUnaryHedgeTail: against a real server whose handler is slow for 1%
// of calls, hedging cuts the 99.9th percentile of the call latency at
// least tenfold for at most 5% more attempts.
func TestUnaryHedgeTail(t *testing.T) {
	// Every call takes base at the server, so that the callers leave the
	// CPU of a loaded, race-enabled machine to its other work; the slow
	// ones take slow. The hedge delay is adaptive, the 99th percentile of
	// the recent latencies, within a Ceiling of 50 ms, so that it follows
	// what the machine makes of the fast calls.
	//
	// A loaded machine stalls the process now and then, a stall lengthens
	// every call in flight, and a call that a stall made slower than the
	// hedge delay is hedged like a slow one. Both figures are therefore
	// taken beside what the same run measured of the calls that hit no
	// slow handler: the tail must fall to within slow/10 of what the
	// machine made of theirs, and a hedge of such a call only counts
	// against the 5% when the call, hedged, still ended within the
	// Ceiling and base, so that the delay and not the machine sent it.
	const (
		calls   = 2000
		callers = 12
		base    = 10 * time.Millisecond
		slow    = 2 * time.Second
		ceiling = 50 * time.Millisecond
	)
	type result struct {
		lat   []time.Duration // of each call
		slow  []bool          // whether the call hit a slow handler
		tries []int           // the server's hits of each call
		hits  int
	}
	// run makes the calls from callers callers at once.
	run := func(t *testing.T, r *retry.Retrier, callers int) result {
		res := result{lat: make([]time.Duration, calls)}
		var mu sync.Mutex
		slowCalls, tries := make([]bool, calls), make([]int, calls)
		s := &server{check: func(ctx context.Context, n int) error {
			md, _ := metadata.FromIncomingContext(ctx)
			i, err := strconv.Atoi(first(md.Get("call")))
			if err != nil || i < 0 || i >= calls {
				return status.Errorf(codes.InvalidArgument, "call %q", md.Get("call"))
			}
			d := base
			if n%100 == 50 { // 1% of the hits
				d = slow
			}
			mu.Lock()
			slowCalls[i] = slowCalls[i] || d == slow
			tries[i]++
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
			return nil
		}}
		c, _ := start(t, s, r)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= calls {
						return
					}
					ctx := metadata.AppendToOutgoingContext(context.Background(), "call", strconv.FormatInt(i, 10))
					begin := time.Now()
					if _, err := c.Check(ctx, check); err != nil {
						t.Error(err)
					}
					res.lat[i] = time.Since(begin)
				}
			})
		}
		wg.Wait()
		mu.Lock() // a hedge sent as its call was won may still arrive
		defer mu.Unlock()
		res.slow, res.tries = slices.Clone(slowCalls), slices.Clone(tries)
		res.hits = s.count()
		return res
	}
	// p999 returns the 99.9th percentile of the latencies of the calls
	// that keep says to keep.
	p999 := func(res result, keep func(i int) bool) time.Duration {
		var lat []time.Duration
		for i, l := range res.lat {
			if keep(i) {
				lat = append(lat, l)
			}
		}
		slices.Sort(lat)
		return lat[len(lat)*999/1000]
	}
	every := func(int) bool { return true }

	// Without hedging, the p99.9 is that of the slow calls, however many
	// callers make them: more callers overlap them and shorten the run.
	plain := run(t, retry.New(), 40)
	if plainP := p999(plain, every); plainP < slow || plain.hits != calls {
		t.Fatalf("without hedging: p99.9 %v after %d hits, want at least %v after %d: the server is not slow as set", plainP, plain.hits, slow, calls)
	}

	hedged := run(t, retry.New(retry.WithHedge(retry.Hedge{Percentile: 99, Ceiling: ceiling})), callers)
	p := p999(hedged, every)
	// The calls that hit no slow handler took base, and whatever the
	// machine added: stalls, which lengthen the slow calls' hedges alike.
	fastP := p999(hedged, func(i int) bool { return !hedged.slow[i] })
	machine := max(fastP-base, 0)
	// The hedges of fast calls that a stall made slower than the delay
	// could ever be, plus base: the adaptive delay, at most the Ceiling,
	// hedged them because the machine held both their attempts.
	var stalled int
	for i, l := range hedged.lat {
		if !hedged.slow[i] && l > ceiling+base {
			stalled += hedged.tries[i] - 1
		}
	}
	extra := hedged.hits - calls
	t.Logf("p99.9 %v without hedging, %v with; of the calls that hit no slow handler %v (the machine added %v); %d attempts for %d calls (%.1f%% more), %d of them hedges of calls that hit no slow handler and took over %v",
		p999(plain, every), p, fastP, machine, hedged.hits, calls, 100*float64(extra)/calls, stalled, ceiling+base)
	if bound := slow/10 + machine; p > bound {
		t.Errorf("p99.9 fell from %v to %v, want at least tenfold, to %v plus the %v the machine added to the calls that hit no slow handler: %v or less",
			p999(plain, every), p, slow/10, machine, bound)
	}
	if bound := calls*5/100 + stalled; extra > bound {
		t.Errorf("hedging made %d attempts for %d calls, want at most 5%% more besides the %d hedges of calls the machine held past the Ceiling: %d more", hedged.hits, calls, stalled, bound)
	}
}

// first returns the first of vs, or "" for none.
func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// TestUnaryHedgeOutage: hedges are load, and take tokens from the retry
// budget as retries do: under a full outage of a server slower than the
// hedge delay, hedges and retries together stay within the default
// budget's bound: a full outage earns nothing (0.2 a call that succeeds),
// so they share its stock of 12 tokens, though every call could make
// three attempts.
func TestUnaryHedgeOutage(t *testing.T) {
	const calls = 300
	s := &server{check: func(context.Context, int) error {
		time.Sleep(3 * time.Millisecond)
		return status.Error(codes.Unavailable, "down")
	}}
	r := retry.New(retry.WithPolicy(immediate(t, 3)), retry.WithHedge(retry.Hedge{Delay: time.Millisecond, Max: 3}))
	c, _ := start(t, s, r)
	for range calls {
		if _, err := c.Check(context.Background(), check); status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v, want UNAVAILABLE", err)
		}
	}
	st := r.Stats()
	t.Logf("%d calls, %d hits (%.3fx), %d hedges", calls, s.count(), float64(s.count())/calls, st.Hedges)
	if hits, bound := s.count(), calls+12; hits > bound {
		t.Errorf("%d calls hit the server %d times, want at most %d", calls, hits, bound)
	}
	if st.Hedges == 0 {
		t.Error("no hedge started: the test does not exercise hedges")
	}
}

// TestUnaryHedgeFirstWins: hedges that fail while the first attempt runs
// start the next at once, up to the attempts allowed, and the first
// attempt's success, arriving last, is the call's.
func TestUnaryHedgeFirstWins(t *testing.T) {
	third := make(chan struct{}) // closed when the last hedge has answered
	s := &server{check: func(ctx context.Context, n int) error {
		switch n {
		case 1:
			select { // bounded, so that a missing hedge fails the count instead of hanging
			case <-third:
			case <-time.After(5 * time.Second):
			}
			return nil
		case 3:
			defer close(third)
		}
		return status.Error(codes.Unavailable, "hedges fail")
	}}
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Hour}),
		retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond, Max: 3}))
	c, _ := start(t, s, r)
	resp, err := c.Check(context.Background(), check)
	if err != nil || resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("Check = %v, %v; want the first attempt's SERVING", resp, err)
	}
	if n := s.count(); n != 3 {
		t.Errorf("%d hits, want 3", n)
	}
	var re *retry.Error
	if errors.As(err, &re) {
		t.Errorf("a *retry.Error on success: %v", re)
	}
}

// TestUnaryHedgeOnFinish: call options that act after an attempt, such as
// grpc.OnFinish, act once per attempt of a hedged call.
func TestUnaryHedgeOnFinish(t *testing.T) {
	var canceled atomic.Int32
	s := &server{check: func(ctx context.Context, n int) error {
		if n == 1 {
			return hang(ctx, &canceled)
		}
		return nil
	}}
	c, _ := start(t, s, retry.New(retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond})))
	var finished atomic.Int32
	if _, err := c.Check(context.Background(), check, grpc.OnFinish(func(error) { finished.Add(1) })); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for finished.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := finished.Load(); got != 2 {
		t.Errorf("OnFinish ran %d times, want once for each of the 2 attempts", got)
	}
}

// TestUnaryHedgeNotHedged: a call whose messages the interceptor cannot
// copy is not hedged, though its Retrier hedges: a request or reply that is
// not a protocol buffer (a codec of another kind), or a nil reply of a
// message type (nothing to merge a winner into). The invoker stands in for
// a connection, as no server can answer into a nil reply.
func TestUnaryHedgeNotHedged(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name       string
		req, reply any
	}{
		{name: "not protocol buffers", req: str("ping"), reply: str("")},
		{name: "a nil reply", req: &grpc_health_v1.HealthCheckRequest{}, reply: (*grpc_health_v1.HealthCheckResponse)(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			icpt := retrygrpc.UnaryClientInterceptor(retry.New(retry.WithHedge(retry.Hedge{Delay: time.Millisecond})))
			var calls atomic.Int32
			invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
				calls.Add(1)
				time.Sleep(20 * time.Millisecond) // 20 times the hedge delay
				return nil
			}
			if err := icpt(context.Background(), "/svc/M", tt.req, tt.reply, nil, invoker); err != nil || calls.Load() != 1 {
				t.Errorf("call = %v after %d attempts; want one attempt, no hedge", err, calls.Load())
			}
		})
	}
}

// TestUnaryHedgeReplyReuse: hedges never touch the caller's reply, during
// the call or after it returns, though the caller reuses it at once: run
// under -race, many calls whose attempts finish near the hedge delay.
func TestUnaryHedgeReplyReuse(t *testing.T) {
	s := &server{check: func(_ context.Context, n int) error {
		time.Sleep(time.Duration(n%4) * 500 * time.Microsecond)
		return nil
	}}
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3}), retry.WithHedge(retry.Hedge{Delay: time.Millisecond, Max: 3}))
	_, cc := start(t, s, r)
	reply := new(grpc_health_v1.HealthCheckResponse)
	for range 400 {
		if err := cc.Invoke(context.Background(), "/grpc.health.v1.Health/Check", check, reply); err != nil {
			t.Fatal(err)
		}
		if reply.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Fatalf("reply %v, want SERVING", reply)
		}
		reply.Reset() // the caller reuses its reply
		reply.Status = grpc_health_v1.HealthCheckResponse_UNKNOWN
	}
	if r.Stats().Hedges == 0 {
		t.Error("no hedge started: the test does not exercise hedges")
	}
}

// TestUnaryHedgeEveryOption: every Header, Trailer and Peer option of a
// hedged call receives the winner's.
func TestUnaryHedgeEveryOption(t *testing.T) {
	var canceled atomic.Int32
	s := &server{check: func(ctx context.Context, n int) error {
		if n == 1 {
			return hang(ctx, &canceled)
		}
		grpc.SetHeader(ctx, metadata.Pairs("hit", strconv.Itoa(n)))
		grpc.SetTrailer(ctx, metadata.Pairs("trailer-hit", strconv.Itoa(n)))
		return nil
	}}
	c, _ := start(t, s, retry.New(retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond})))
	var h1, h2, t1, t2 metadata.MD
	var p1, p2 peer.Peer
	if _, err := c.Check(context.Background(), check, grpc.Header(&h1), grpc.Header(&h2), grpc.Trailer(&t1), grpc.Trailer(&t2), grpc.Peer(&p1), grpc.Peer(&p2)); err != nil {
		t.Fatal(err)
	}
	for i, md := range []metadata.MD{h1, h2} {
		if got := md.Get("hit"); !slices.Equal(got, []string{"2"}) {
			t.Errorf("header %d: hit = %v, want the winner's [2]", i+1, got)
		}
	}
	for i, md := range []metadata.MD{t1, t2} {
		if got := md.Get("trailer-hit"); !slices.Equal(got, []string{"2"}) {
			t.Errorf("trailer %d: trailer-hit = %v, want the winner's [2]", i+1, got)
		}
	}
	if p1.Addr == nil || p2.Addr == nil {
		t.Errorf("peers %v and %v, want both filled in", p1.Addr, p2.Addr)
	}
}

// gated is a health server whose Checks each wait for the test to release
// them: hit 1 then answers SERVING, hit 2 NOT_SERVING, each with its hit
// number in the header.
type gated struct {
	grpc_health_v1.UnimplementedHealthServer
	n       atomic.Int32
	arrived chan int
	release [2]chan struct{}
}

func (g *gated) Check(ctx context.Context, _ *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	n := int(g.n.Add(1))
	if n > 2 {
		return nil, status.Error(codes.Internal, "a third attempt")
	}
	g.arrived <- n
	<-g.release[n-1]
	grpc.SetHeader(ctx, metadata.Pairs("hit", strconv.Itoa(n)))
	st := grpc_health_v1.HealthCheckResponse_SERVING
	if n == 2 {
		st = grpc_health_v1.HealthCheckResponse_NOT_SERVING
	}
	return &grpc_health_v1.HealthCheckResponse{Status: st}, nil
}

// TestUnaryHedgeBothSucceed: the first attempt and a hedge both succeed,
// in either order or at once. The caller gets exactly one attempt's reply,
// with that attempt's header: the earlier one's when their successes are
// apart.
func TestUnaryHedgeBothSucceed(t *testing.T) {
	tests := []struct {
		name string
		// order is the hits released: the second only once the call has
		// returned with the first's success, so that the earlier success
		// is known; both at once when one entry is 0.
		order  []int
		winner int // 0: either, but one whole
		runs   int
	}{
		{name: "the first's success comes first", order: []int{1, 2}, winner: 1, runs: 3},
		{name: "the hedge's success comes first", order: []int{2, 1}, winner: 2, runs: 3},
		{name: "both at once", order: []int{0}, runs: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for run := range tt.runs {
				g := &gated{arrived: make(chan int, 2), release: [2]chan struct{}{make(chan struct{}), make(chan struct{})}}
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				srv := grpc.NewServer()
				grpc_health_v1.RegisterHealthServer(srv, g)
				go srv.Serve(lis)
				r := retry.New(retry.WithHedge(retry.Hedge{Delay: 5 * time.Millisecond}))
				cc := dial(t, lis.Addr().String(), r)
				returned := make(chan struct{})
				go func() {
					<-g.arrived
					<-g.arrived // both attempts are at the server
					if tt.order[0] == 0 {
						close(g.release[0])
						close(g.release[1])
						return
					}
					close(g.release[tt.order[0]-1])
					select { // bounded, so that a call that waits for the other fails instead of hanging
					case <-returned:
					case <-time.After(2 * time.Second):
					}
					close(g.release[tt.order[1]-1])
				}()
				finished := make(chan struct{}, 2)
				var header metadata.MD
				resp, err := grpc_health_v1.NewHealthClient(cc).Check(context.Background(), check, grpc.Header(&header),
					grpc.OnFinish(func(error) { finished <- struct{}{} }))
				close(returned)
				// Both attempts are over before the reply and header are
				// read: a loser that wrote into them after the call
				// returned would show.
				for range 2 {
					select {
					case <-finished:
					case <-time.After(5 * time.Second):
						t.Fatalf("run %d: an attempt did not finish", run)
					}
				}
				if err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				got := map[grpc_health_v1.HealthCheckResponse_ServingStatus]string{
					grpc_health_v1.HealthCheckResponse_SERVING:     "1",
					grpc_health_v1.HealthCheckResponse_NOT_SERVING: "2",
				}[resp.GetStatus()]
				if hit := header.Get("hit"); len(hit) != 1 || hit[0] != got {
					t.Fatalf("run %d: reply %v from hit %q with the header of hit %v: not one attempt's", run, resp.GetStatus(), got, hit)
				}
				if tt.winner != 0 && got != strconv.Itoa(tt.winner) {
					t.Errorf("run %d: hit %s's reply, want hit %d's, whose success came first", run, got, tt.winner)
				}
				srv.Stop()
			}
		})
	}
}
