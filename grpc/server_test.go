package grpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fast is a policy at millisecond scale.
var fast = retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond}

// slack is the time a call may take past its deadline to return, once the
// deadline cut off its attempt: the unwinding of a loaded, race-enabled
// process, far less than any wait of the tests' policies.
const slack = 20 * time.Millisecond

// hit is what the server saw of one attempt.
type hit struct {
	at       time.Time
	previous string        // grpc-previous-rpc-attempts
	timeout  time.Duration // what was left of the deadline, or 0 for none
}

// server is a health server whose Check and Watch follow a script. Hits are
// numbered from 1.
type server struct {
	grpc_health_v1.UnimplementedHealthServer

	// check answers the n-th Check; nil answers SERVING.
	check func(ctx context.Context, n int) error
	// watch runs the n-th Watch; nil sends three SERVING messages.
	watch func(stream grpc_health_v1.Health_WatchServer, n int) error

	n    atomic.Int64
	mu   sync.Mutex
	hits []hit
}

func (s *server) record(ctx context.Context) int {
	h := hit{at: time.Now()}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(retrygrpc.PreviousAttemptsKey); len(v) > 0 {
			h.previous = v[0]
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		h.timeout = time.Until(dl)
	}
	s.mu.Lock()
	s.hits = append(s.hits, h)
	s.mu.Unlock()
	return int(s.n.Add(1))
}

// seen returns the hits so far.
func (s *server) seen() []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hit(nil), s.hits...)
}

func (s *server) count() int { return int(s.n.Load()) }

var serving = &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}

func (s *server) Check(ctx context.Context, _ *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	n := s.record(ctx)
	if s.check != nil {
		if err := s.check(ctx, n); err != nil {
			return nil, err
		}
	}
	return serving, nil
}

func (s *server) Watch(_ *grpc_health_v1.HealthCheckRequest, stream grpc_health_v1.Health_WatchServer) error {
	n := s.record(stream.Context())
	if s.watch != nil {
		return s.watch(stream, n)
	}
	return sendN(stream, 3)
}

func sendN(stream grpc_health_v1.Health_WatchServer, n int) error {
	for range n {
		if err := stream.Send(serving); err != nil {
			return err
		}
	}
	return nil
}

// listen starts s on a loopback TCP port, with the given server options
// (interceptors), and returns its address.
func listen(t testing.TB, s *server, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
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

// dial connects to addr through both interceptors on r, and returns once
// the connection is ready: grpc.NewClient connects lazily, and the dial and
// the HTTP/2 handshake would otherwise fall inside the first call, and
// inside the tests' hedge delays, deadlines and attempt timeouts.
func dial(t testing.TB, addr string, r *retry.Retrier, opts ...retrygrpc.Option) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(r, opts...)),
		grpc.WithStreamInterceptor(retrygrpc.StreamClientInterceptor(r, opts...)),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for st := cc.GetState(); st != connectivity.Ready; st = cc.GetState() {
		if st == connectivity.Idle {
			cc.Connect()
		}
		if !cc.WaitForStateChange(ctx, st) {
			t.Fatalf("the connection to %s is not ready after 10s (%v)", addr, st)
		}
	}
	return cc
}

// start runs s and returns a health client on r.
func start(t testing.TB, s *server, r *retry.Retrier, opts ...retrygrpc.Option) (grpc_health_v1.HealthClient, *grpc.ClientConn) {
	t.Helper()
	cc := dial(t, listen(t, s), r, opts...)
	return grpc_health_v1.NewHealthClient(cc), cc
}

// failing returns a check that fails with code for the first n hits.
func failing(code codes.Code, n int) func(context.Context, int) error {
	return func(_ context.Context, hit int) error {
		if hit <= n {
			return status.Error(code, "scripted failure")
		}
		return nil
	}
}

// pushback returns a check that fails with code and the trailer values of
// retrygrpc.PushbackKey for the first n hits.
func pushback(code codes.Code, n int, values ...string) func(context.Context, int) error {
	return func(ctx context.Context, hit int) error {
		if hit > n {
			return nil
		}
		md := metadata.MD{}
		for _, v := range values {
			md.Append(retrygrpc.PushbackKey, v)
		}
		grpc.SetTrailer(ctx, md)
		return status.Error(code, "pushed back")
	}
}

// reasonOf returns the Reason of err's *retry.Error, or "" without one.
func reasonOf(err error) string {
	var re *retry.Error
	if errors.As(err, &re) {
		return re.Reason.String()
	}
	return ""
}

// constant returns a policy of attempts at a constant interval, no jitter.
func constant(t testing.TB, attempts int, interval time.Duration) retry.Policy {
	t.Helper()
	return parse(t, fmt.Sprintf(`{"max_attempts": %d, "backoff_strategy": "constant", "initial_interval": %q, "jitter": false}`,
		attempts, interval.String()))
}

// immediate returns a policy of attempts with no wait between them.
func immediate(t testing.TB, attempts int) retry.Policy {
	t.Helper()
	return parse(t, fmt.Sprintf(`{"max_attempts": %d, "backoff_strategy": "immediate"}`, attempts))
}

func parse(t testing.TB, js string) retry.Policy {
	t.Helper()
	p, err := retry.ParsePolicy([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkOutcome checks what a call through the interceptors left: its
// error's type (when checkType), its reason, the server's hits and the
// grpc-previous-rpc-attempts values the server saw (when previous is set).
func checkOutcome(t *testing.T, s *server, err error, typ, reason string, hits int, previous []string, checkType bool) {
	t.Helper()
	if got := retry.TypeOf(err); checkType && got != typ {
		t.Errorf("TypeOf = %q, want %q", got, typ)
	}
	if got := reasonOf(err); got != reason {
		t.Errorf("reason = %q, want %q", got, reason)
	}
	if got := s.count(); got != hits {
		t.Errorf("server hits = %d, want %d", got, hits)
	}
	if previous != nil {
		var got []string
		for _, h := range s.seen() {
			got = append(got, h.previous)
		}
		if !slices.Equal(got, previous) {
			t.Errorf("grpc-previous-rpc-attempts = %q, want %q", got, previous)
		}
	}
}
