package grpc_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"github.com/steadyhq/retry/shed"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// listenShed starts s behind sh's server interceptors on a loopback TCP
// port and returns its address.
func listenShed(t *testing.T, s *server, sh *shed.Shedder) string {
	return listen(t, s, grpc.UnaryInterceptor(retrygrpc.UnaryServerInterceptor(sh)),
		grpc.StreamInterceptor(retrygrpc.StreamServerInterceptor(sh)))
}

// plain connects to addr without interceptors.
func plain(t *testing.T, addr string) grpc_health_v1.HealthClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return grpc_health_v1.NewHealthClient(cc)
}

// held starts a shedding server of one permit and takes it with a Check
// that blocks until the test ends.
func held(t *testing.T, opts shed.Options) (addr string, srv *server) {
	t.Helper()
	opts.Initial, opts.Min, opts.Max = 1, 1, 1
	sh, err := shed.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	release, started := make(chan struct{}), make(chan struct{}, 1)
	srv = &server{check: func(ctx context.Context, n int) error {
		if n == 1 {
			started <- struct{}{}
			<-release
		}
		return nil
	}}
	addr = listenShed(t, srv, sh)
	c := plain(t, addr)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{})
	}()
	<-started
	t.Cleanup(func() { close(release); <-done })
	return addr, srv
}

// TestShedStatusAndPushback: a shed RPC, unary or stream, ends UNAVAILABLE
// with the pushback trailer in [w, 2w) ms, w = 500 ms here (nothing has
// completed yet, so w = 1 s, within MaxRetryAfter/2).
func TestShedStatusAndPushback(t *testing.T) {
	addr, _ := held(t, shed.Options{QueueWait: time.Millisecond, MaxRetryAfter: time.Second})
	c := plain(t, addr)
	tests := []struct {
		name   string
		md     []string
		stream bool
	}{
		{name: "unary, queue timeout"},
		{name: "unary retry", md: []string{retrygrpc.PreviousAttemptsKey, "1"}},
		{name: "stream retry", md: []string{retrygrpc.PreviousAttemptsKey, "2"}, stream: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := metadata.AppendToOutgoingContext(context.Background(), tt.md...)
			var trailer metadata.MD
			var err error
			if tt.stream {
				var st grpc_health_v1.Health_WatchClient
				st, err = c.Watch(ctx, &grpc_health_v1.HealthCheckRequest{})
				if err == nil {
					_, err = st.Recv()
					trailer = st.Trailer()
				}
			} else {
				_, err = c.Check(ctx, &grpc_health_v1.HealthCheckRequest{}, grpc.Trailer(&trailer))
			}
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("err = %v, want UNAVAILABLE", err)
			}
			v := trailer.Get(retrygrpc.PushbackKey)
			ms, perr := strconv.Atoi(append(v, "")[0])
			if len(v) != 1 || perr != nil || ms < 500 || ms > 1000 {
				t.Errorf("%s = %q, want one value in [500, 1000]", retrygrpc.PushbackKey, v)
			}
		})
	}
}

// TestClientHonoursPushback: the client interceptor, told to come back in
// at least 500 ms, sends no retry within its 200 ms deadline and stops at
// once.
func TestClientHonoursPushback(t *testing.T) {
	addr, srv := held(t, shed.Options{QueueWait: time.Millisecond, MaxRetryAfter: time.Second})
	r := retry.New(retry.WithPolicy(immediate(t, 5)))
	c := grpc_health_v1.NewHealthClient(dial(t, addr, r))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	// The pushback cannot fit the deadline: the call stops at once, as
	// DEADLINE_EXCEEDED, keeping the shed attempt's failure.
	if status.Code(err) != codes.DeadlineExceeded || reasonOf(err) != "deadline" || !strings.Contains(err.Error(), "code = Unavailable desc = shed: queue timeout") {
		t.Errorf("err = %v (%v, reason %q), want DEADLINE_EXCEEDED, reason deadline, after the shed attempt", err, status.Code(err), reasonOf(err))
	}
	if took := time.Since(start); took > 150*time.Millisecond {
		t.Errorf("the call took %v: it waited instead of stopping at a pushback past its deadline", took)
	}
	// The held Check is the only one the handler saw: the shed attempt
	// never reached it, and no retry was sent.
	if got := srv.count(); got != 1 {
		t.Errorf("handler hits = %d, want 1", got)
	}
}

// TestInboundRetryNotRetried: a client of this module inside the handler
// makes one attempt to a failing dependency when the RPC it serves is a
// retry (grpc-previous-rpc-attempts >= 1), all of them otherwise, or with
// nested retries on; and a call made while serving a retry carries
// grpc-previous-rpc-attempts on its own first attempt, so that the server
// below knows the request belongs to a retry.
func TestInboundRetryNotRetried(t *testing.T) {
	down := &server{check: failing(codes.Unavailable, 1000)}
	downAddr := listen(t, down)
	var downstream grpc_health_v1.HealthClient // a Retrier of its own for each case, so that no budget is shared
	sh, err := shed.New(shed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	front := &server{
		check: func(ctx context.Context, _ int) error {
			_, err := downstream.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
			return err
		},
		watch: func(stream grpc_health_v1.Health_WatchServer, _ int) error {
			_, err := downstream.Check(stream.Context(), &grpc_health_v1.HealthCheckRequest{})
			return err
		},
	}
	c := plain(t, listenShed(t, front, sh))
	tests := []struct {
		name     string
		previous string // what the front receives
		stream   bool
		nested   bool     // the front's client retries anyway
		wantSeen []string // grpc-previous-rpc-attempts of each hit on the dependency
	}{
		{name: "first attempt", wantSeen: []string{"", "1", "2"}},
		{name: "retry", previous: "1", wantSeen: []string{"1"}},
		{name: "third attempt", previous: "2", wantSeen: []string{"2"}},
		{name: "malformed", previous: "abc", wantSeen: []string{"", "1", "2"}},
		{name: "stream retry", previous: "2", stream: true, wantSeen: []string{"2"}},
		{name: "stream first attempt", stream: true, wantSeen: []string{"", "1", "2"}},
		{name: "retry, nested retries on", previous: "1", nested: true, wantSeen: []string{"1", "1", "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			downstream = grpc_health_v1.NewHealthClient(dial(t, downAddr, retry.New(retry.WithPolicy(immediate(t, 3)), retry.WithNestedRetries(tt.nested))))
			before := len(down.seen())
			ctx := context.Background()
			if tt.previous != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, retrygrpc.PreviousAttemptsKey, tt.previous)
			}
			if tt.stream {
				st, err := c.Watch(ctx, &grpc_health_v1.HealthCheckRequest{})
				if err == nil {
					_, err = st.Recv()
				}
				if status.Code(err) != codes.Unavailable {
					t.Errorf("err = %v, want the dependency's UNAVAILABLE", err)
				}
			} else if _, err := c.Check(ctx, &grpc_health_v1.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
				t.Errorf("err = %v, want the dependency's UNAVAILABLE", err)
			}
			var seen []string
			for _, h := range down.seen()[before:] {
				seen = append(seen, h.previous)
			}
			if !slices.Equal(seen, tt.wantSeen) {
				t.Errorf("the dependency saw %d hits with grpc-previous-rpc-attempts %q, want %q", len(seen), seen, tt.wantSeen)
			}
		})
	}
}

// callShed makes a unary or stream call and returns the pushback
// trailer's values and its error.
func callShed(ctx context.Context, c grpc_health_v1.HealthClient, stream bool) ([]string, error) {
	var trailer metadata.MD
	var err error
	if stream {
		var st grpc_health_v1.Health_WatchClient
		st, err = c.Watch(ctx, &grpc_health_v1.HealthCheckRequest{})
		if err == nil {
			for err == nil {
				_, err = st.Recv()
			}
			trailer = st.Trailer()
		}
	} else {
		_, err = c.Check(ctx, &grpc_health_v1.HealthCheckRequest{}, grpc.Trailer(&trailer))
	}
	return trailer.Get(retrygrpc.PushbackKey), err
}

// TestPushbackWellFormed: every shed RPC, unary or stream, ends with one
// pushback value, a non-negative integer of milliseconds within [1 s,
// MaxRetryAfter] at the default cap; the values spread.
func TestPushbackWellFormed(t *testing.T) {
	addr, _ := held(t, shed.Options{QueueWait: time.Millisecond})
	c := plain(t, addr)
	seen := map[string]bool{}
	for i := range 40 {
		stream := i%2 == 1
		ctx := metadata.AppendToOutgoingContext(context.Background(), retrygrpc.PreviousAttemptsKey, "1")
		v, err := callShed(ctx, c, stream)
		if status.Code(err) != codes.Unavailable || len(v) != 1 {
			t.Fatalf("call %d (stream %v): %v, pushback %q; want UNAVAILABLE with one value", i, stream, err, v)
		}
		ms, perr := strconv.ParseInt(v[0], 10, 64)
		if perr != nil || v[0] != strconv.FormatInt(ms, 10) || ms < 1000 || ms > 60_000 {
			t.Errorf("call %d: pushback %q, want a plain integer in [1000, 60000]", i, v[0])
		}
		seen[v[0]] = true
	}
	if len(seen) < 2 {
		t.Errorf("pushback values %v: 40 clients shed together are told the same", seen)
	}
}

// TestQuotaResourceExhausted: a client over its quota gets
// RESOURCE_EXHAUSTED with a pushback of its window's reset, unary and
// stream alike, and is not counted as overload.
func TestQuotaResourceExhausted(t *testing.T) {
	sh, err := shed.New(shed.Options{Quota: shed.Quota{Limit: 1, Window: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	c := plain(t, listenShed(t, &server{}, sh))
	if _, err := callShed(context.Background(), c, false); err != nil {
		t.Fatalf("first call: %v", err)
	}
	for _, stream := range []bool{false, true} {
		v, err := callShed(context.Background(), c, stream)
		ms, perr := strconv.ParseInt(append(v, "")[0], 10, 64)
		if status.Code(err) != codes.ResourceExhausted || len(v) != 1 || perr != nil || ms < 1000 || ms > 5000 {
			t.Errorf("stream %v over quota: %v, pushback %q; want RESOURCE_EXHAUSTED, pushback in [1000, 5000]", stream, err, v)
		}
	}
	if st := sh.Stats(); st.Shed[shed.ReasonQuota] != 2 || st.Shed[shed.ReasonLow]+st.Shed[shed.ReasonQueueFull]+st.Shed[shed.ReasonQueueTimeout] != 0 {
		t.Errorf("Stats().Shed = %v, want 2 for quota only", st.Shed)
	}
}

// TestPreviousAttemptsMalformed: a malformed grpc-previous-rpc-attempts
// counts as absent (a first attempt, which queues), a well-formed k >= 1
// as a retry (shed at once as low priority).
func TestPreviousAttemptsMalformed(t *testing.T) {
	addr, _ := held(t, shed.Options{QueueWait: time.Millisecond})
	c := plain(t, addr)
	tests := []struct {
		name  string
		value []string
		want  string
	}{
		{name: "absent", want: "queue timeout"},
		{name: "zero", value: []string{"0"}, want: "queue timeout"},
		{name: "letters", value: []string{"abc"}, want: "queue timeout"},
		{name: "negative", value: []string{"-1"}, want: "queue timeout"},
		{name: "fraction", value: []string{"1.5"}, want: "queue timeout"},
		{name: "space", value: []string{" 1"}, want: "queue timeout"},
		{name: "empty", value: []string{""}, want: "queue timeout"},
		{name: "one", value: []string{"1"}, want: "low priority"},
		{name: "huge", value: []string{"99999999999999999999999"}, want: "low priority"},
		{name: "two values, first malformed", value: []string{"x", "3"}, want: "queue timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			for _, v := range tt.value {
				ctx = metadata.AppendToOutgoingContext(ctx, retrygrpc.PreviousAttemptsKey, v)
			}
			v, err := callShed(ctx, c, false)
			if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), tt.want) || len(v) != 1 {
				t.Errorf("%v, pushback %q; want UNAVAILABLE, %q", err, v, tt.want)
			}
		})
	}
}

// TestClientWaitsPushback: the client interceptor of this module, shed by
// the server, sends its retry no sooner than the pushback after the
// server refused (MaxRetryAfter 1 s: a pushback in [500, 1000] ms).
func TestClientWaitsPushback(t *testing.T) {
	sh, err := shed.New(shed.Options{Initial: 1, Min: 1, Max: 1, QueueWait: time.Millisecond, MaxRetryAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	type arrival struct {
		at, end  time.Time
		pushback time.Duration
	}
	var mu sync.Mutex
	var arrivals []arrival
	record := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		a := arrival{at: time.Now()}
		resp, err := h(ctx, req)
		a.end = time.Now()
		if msg := status.Convert(err).Message(); err != nil {
			if i := strings.LastIndex(msg, "retry after "); i >= 0 {
				d, _ := time.ParseDuration(msg[i+len("retry after "):])
				a.pushback = d.Round(time.Millisecond) // grpc-retry-pushback-ms rounds up; never below d - 1 ms
			}
		}
		mu.Lock()
		arrivals = append(arrivals, a)
		mu.Unlock()
		return resp, err
	}
	release, started := make(chan struct{}), make(chan struct{})
	srv := &server{check: func(ctx context.Context, n int) error {
		if n == 1 {
			close(started)
			<-release
		}
		return nil
	}}
	addr := listen(t, srv, grpc.ChainUnaryInterceptor(record, retrygrpc.UnaryServerInterceptor(sh)), grpc.StreamInterceptor(retrygrpc.StreamServerInterceptor(sh)))
	first := make(chan error)
	go func() {
		_, err := plain(t, addr).Check(context.Background(), &grpc_health_v1.HealthCheckRequest{})
		first <- err
	}()
	<-started
	c := grpc_health_v1.NewHealthClient(dial(t, addr, retry.New(retry.WithPolicy(immediate(t, 3)))))
	go func() { time.Sleep(50 * time.Millisecond); close(release) }()
	if _, err := c.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Errorf("the retried call: %v", err)
	}
	if err := <-first; err != nil {
		t.Errorf("the held call: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	// arrivals, in the order they ended: the shed attempt, the held
	// call, the retry.
	var shedAt, retryAt []arrival
	for _, a := range arrivals {
		if a.pushback > 0 {
			shedAt = append(shedAt, a)
		} else if a.at.After(arrivals[0].end) {
			retryAt = append(retryAt, a)
		}
	}
	if len(arrivals) != 3 || len(shedAt) != 1 || len(retryAt) != 1 || shedAt[0].pushback < 500*time.Millisecond {
		t.Fatalf("arrivals %+v, want the held call, one shed attempt told at least 500 ms, its retry", arrivals)
	}
	if gap := retryAt[0].at.Sub(shedAt[0].end); gap < shedAt[0].pushback-time.Millisecond {
		t.Errorf("the retry came %v after the refusal, told %v", gap, shedAt[0].pushback)
	} else {
		t.Logf("the retry came %v after the refusal, told %v", gap, shedAt[0].pushback)
	}
}

// TestWireAttemptOfEnclosingCall: the client interceptor inside an
// attempt of retry.Run numbers its own attempts, and sends the enclosing
// attempt's count when that is higher: Run's retry reaches the server as
// a retry, even on the interceptor's first attempt.
func TestWireAttemptOfEnclosingCall(t *testing.T) {
	down := &server{check: failing(codes.Unavailable, 1)}
	c, _ := start(t, down, retry.New(retry.WithPolicy(immediate(t, 1))))
	err := retry.Run(context.Background(), func(ctx context.Context) error {
		_, err := c.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		return err
	}, retry.WithPolicy(immediate(t, 2)))
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, h := range down.seen() {
		seen = append(seen, h.previous)
	}
	if want := []string{"", "1"}; !slices.Equal(seen, want) {
		t.Errorf("grpc-previous-rpc-attempts of each hit = %q, want %q", seen, want)
	}
}

// TestLongStreamsTakePermits: a stream holds its permit for as long as its
// handler runs, so long-lived streams on the Shedder of unary calls take the
// permits those calls need, and the calls are shed; streams on a Shedder of
// their own leave them alone. docs/shedding.md says so.
func TestLongStreamsTakePermits(t *testing.T) {
	tests := []struct {
		name    string
		apart   bool // the streams have a Shedder of their own
		wantErr codes.Code
	}{
		{name: "one Shedder: the watches hold every permit", wantErr: codes.Unavailable},
		{name: "a Shedder for the streams: the calls pass", apart: true, wantErr: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One client holds both permits: no share bounds it.
			opts := shed.Options{Initial: 2, Min: 2, Max: 2, ClientShare: 1}
			unary, err := shed.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			streams := unary
			if tt.apart {
				if streams, err = shed.New(opts); err != nil {
					t.Fatal(err)
				}
			}
			release, watching := make(chan struct{}), make(chan struct{}, 2)
			srv := &server{watch: func(stream grpc_health_v1.Health_WatchServer, _ int) error {
				if err := sendN(stream, 1); err != nil {
					return err
				}
				watching <- struct{}{}
				select { // a watch: open until the test ends
				case <-release:
				case <-stream.Context().Done():
				}
				return nil
			}}
			addr := listen(t, srv, grpc.UnaryInterceptor(retrygrpc.UnaryServerInterceptor(unary)),
				grpc.StreamInterceptor(retrygrpc.StreamServerInterceptor(streams)))
			c := plain(t, addr)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			for range 2 {
				w, err := c.Watch(ctx, check)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Recv(); err != nil {
					t.Fatal(err)
				}
				<-watching
			}
			_, err = c.Check(t.Context(), check)
			close(release)
			if got := status.Code(err); got != tt.wantErr {
				t.Errorf("a Check with two watches open: %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestClientShareGRPC: one peer's RPCs hold at most its share of the
// permits (three quarters of 4: 3); its next is shed with UNAVAILABLE and
// a pushback, while the fourth permit stays free.
func TestClientShareGRPC(t *testing.T) {
	sh, err := shed.New(shed.Options{Initial: 4, Min: 4, Max: 4})
	if err != nil {
		t.Fatal(err)
	}
	release, watching := make(chan struct{}), make(chan struct{}, 3)
	defer close(release)
	srv := &server{watch: func(stream grpc_health_v1.Health_WatchServer, _ int) error {
		if err := sendN(stream, 1); err != nil {
			return err
		}
		watching <- struct{}{}
		select {
		case <-release:
		case <-stream.Context().Done():
		}
		return nil
	}}
	addr := listen(t, srv, grpc.UnaryInterceptor(retrygrpc.UnaryServerInterceptor(sh)),
		grpc.StreamInterceptor(retrygrpc.StreamServerInterceptor(sh)))
	c := plain(t, addr)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for range 3 {
		w, err := c.Watch(ctx, check)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Recv(); err != nil {
			t.Fatal(err)
		}
		<-watching
	}
	var trailer metadata.MD
	_, err = c.Check(t.Context(), check, grpc.Trailer(&trailer))
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "client share") || len(trailer[retrygrpc.PushbackKey]) != 1 {
		t.Errorf("a fourth RPC of the peer: %v, pushback %v; want UNAVAILABLE for its share, with a pushback", err, trailer[retrygrpc.PushbackKey])
	}
	if st := sh.Stats(); st.InFlight != 3 || st.Shed[shed.ReasonClient] != 1 {
		t.Errorf("Stats() = %+v, want 3 in flight, 1 shed for the client's share", st)
	}
}
