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

// TestRestart: through the unary and the stream interceptors with the
// default budget, a quiet client's calls all succeed while a real loopback
// server restarts on the same port, 10 at once over a short restart or 5
// over a longer one: each fails with UNAVAILABLE while the server is down,
// and its retries take tokens of the budget's stock, given back as they
// succeed.
// The policy is the default's at 300 ms (doubling, ±50%), the restarts
// 40 ms for 10 calls, so that their first retries, 150 ms or more later,
// find the server back on a loaded machine, and 300 ms for 5, so that
// some of theirs do not and retry again; the channel reconnects within
// 20 ms (grpc-go's own backoff would wait a second), so that it is the
// budget, not the channel, that the test measures.
func TestRestart(t *testing.T) {
	for _, rs := range []struct {
		stream bool
		calls  int
		down   time.Duration
	}{{false, 10, 40 * time.Millisecond}, {false, 5, 300 * time.Millisecond}, {true, 10, 40 * time.Millisecond}, {true, 5, 300 * time.Millisecond}} {
		t.Run(fmt.Sprintf("stream %v, %d calls, %v down", rs.stream, rs.calls, rs.down), func(t *testing.T) {
			srv := newRestartable(t)
			r := retry.New(retry.WithPolicy(retry.Policy{InitialInterval: 300 * time.Millisecond}))
			cc, err := grpc.NewClient(srv.addr,
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(r)),
				grpc.WithStreamInterceptor(retrygrpc.StreamClientInterceptor(r)),
				grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 20 * time.Millisecond}}),
				grpc.WithDisableRetry(),
			)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cc.Close() })
			c := grpc_health_v1.NewHealthClient(cc)
			call := func(ctx context.Context) error {
				if rs.stream {
					_, err := watchAll(ctx, c)
					return err
				}
				_, err := c.Check(ctx, check)
				return err
			}
			for range 6 {
				if err := call(t.Context()); err != nil {
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
					errs[i] = call(ctx)
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
