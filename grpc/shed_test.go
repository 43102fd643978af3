package grpc_test

import (
	"context"
	"net"
	"strconv"
	"strings"
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
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.UnaryInterceptor(retrygrpc.UnaryServerInterceptor(sh)),
		grpc.StreamInterceptor(retrygrpc.StreamServerInterceptor(sh)))
	grpc_health_v1.RegisterHealthServer(gs, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return lis.Addr().String()
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
// retry (grpc-previous-rpc-attempts >= 1), all of them otherwise.
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
		previous string
		stream   bool
		wantHits int
	}{
		{name: "first attempt", wantHits: 3},
		{name: "retry", previous: "1", wantHits: 1},
		{name: "malformed", previous: "abc", wantHits: 3},
		{name: "stream retry", previous: "2", stream: true, wantHits: 1},
		{name: "stream first attempt", stream: true, wantHits: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			downstream = grpc_health_v1.NewHealthClient(dial(t, downAddr, retry.New(retry.WithPolicy(immediate(t, 3)))))
			before := down.count()
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
			if got := down.count() - before; got != tt.wantHits {
				t.Errorf("dependency hits = %d, want %d", got, tt.wantHits)
			}
		})
	}
}
