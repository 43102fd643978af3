package grpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
)

// restartable is a health server on a loopback port that can restart on
// the same port: down, it refuses connections.
type restartable struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	gs   *grpc.Server
	done chan struct{}
}

func newRestartable(t *testing.T) *restartable {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &restartable{t: t, addr: lis.Addr().String()}
	s.serve(lis)
	t.Cleanup(s.stop)
	return s
}

func (s *restartable) serve(lis net.Listener) {
	gs := grpc.NewServer()
	grpc_health_v1.RegisterHealthServer(gs, &server{})
	done := make(chan struct{})
	s.mu.Lock()
	s.gs, s.done = gs, done
	s.mu.Unlock()
	go func() {
		defer close(done)
		gs.Serve(lis)
	}()
}

// stop stops the server, closing every connection to it.
func (s *restartable) stop() {
	s.mu.Lock()
	gs, done := s.gs, s.done
	s.mu.Unlock()
	gs.Stop()
	<-done
}

// start listens again on the same port.
func (s *restartable) start() {
	lis, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Errorf("listening again on %s: %v", s.addr, err)
		return
	}
	s.serve(lis)
}

// TestUnaryRestart: through the unary interceptor with the default budget,
// a quiet client's calls all succeed while a real loopback server restarts
// on the same port, 10 at once over a short restart or 5 over a longer
// one: each fails with UNAVAILABLE while the server is down, and its
// retries take tokens of the budget's stock, given back as they succeed.
// The policy is the default scaled to a tenth (100 ms, doubling, ±50%), and
// so are the restarts (40 ms and 100 ms), so that the test takes under a
// second; the channel reconnects within 20 ms (grpc-go's own backoff would
// wait a second), so that it is the budget, not the channel, that the
// test measures.
func TestUnaryRestart(t *testing.T) {
	for _, rs := range []struct {
		calls int
		down  time.Duration
	}{{10, 40 * time.Millisecond}, {5, 100 * time.Millisecond}} {
		t.Run(fmt.Sprintf("%d calls, %v down", rs.calls, rs.down), func(t *testing.T) {
			srv := newRestartable(t)
			r := retry.New(retry.WithPolicy(retry.Policy{InitialInterval: 100 * time.Millisecond}))
			cc, err := grpc.NewClient(srv.addr,
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(r)),
				grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 20 * time.Millisecond}}),
				grpc.WithDisableRetry(),
			)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cc.Close() })
			c := grpc_health_v1.NewHealthClient(cc)
			for range 6 {
				if _, err := c.Check(t.Context(), check); err != nil {
					t.Fatal(err)
				}
			}
			srv.stop()
			restarted := make(chan struct{})
			go func() { time.Sleep(rs.down); srv.start(); close(restarted) }()
			errs := make([]error, rs.calls)
			var wg sync.WaitGroup
			for i := range rs.calls {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					_, errs[i] = c.Check(ctx, check)
				})
			}
			wg.Wait()
			<-restarted
			if err := errors.Join(errs...); err != nil {
				t.Errorf("%v; want every call to succeed (stats %+v)", err, r.Stats())
			}
		})
	}
}
