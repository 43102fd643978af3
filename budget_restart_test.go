package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// restarts are the brief failures a quiet client must ride out with the
// default budget: up to 10 calls at once as its dependency restarts for
// 400 ms, or up to 5 as it restarts for 1 s.
var restarts = []struct {
	calls int
	down  time.Duration
}{{calls: 10, down: 400 * time.Millisecond}, {calls: 5, down: time.Second}}

// TestBudgetQuietClient: a client that called once every 10 s for a minute
// then makes up to 10 calls at once as its dependency restarts for 400 ms
// (a refused connection), or up to 5 as it restarts for 1 s, loses none of
// them with the default Retrier and policy: each call's retries take
// tokens of the stock, never more than 10, and give them back as they
// succeed. In virtual time, for 50 draws of the jitter each.
func TestBudgetQuietClient(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, rs := range restarts {
		t.Run(fmt.Sprintf("%d calls, %v down", rs.calls, rs.down), func(t *testing.T) {
			for seed := range uint64(50) {
				synctest.Test(t, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, 0))
					var mu sync.Mutex
					r := retry.New(retry.WithRandom(func() float64 { mu.Lock(); defer mu.Unlock(); return rng.Float64() }))
					start := time.Now()
					var downFrom time.Time
					dep := func(context.Context) error {
						if now := time.Now(); !downFrom.IsZero() && now.Sub(downFrom) < rs.down {
							return refused
						}
						return nil
					}
					for range 6 {
						if err := r.Run(t.Context(), dep); err != nil {
							t.Fatal(err)
						}
						time.Sleep(10 * time.Second)
					}
					downFrom = time.Now()
					errs := make([]error, rs.calls)
					var wg sync.WaitGroup
					for i := range rs.calls {
						wg.Go(func() { errs[i] = r.Run(t.Context(), dep) })
					}
					wg.Wait()
					if err := errors.Join(errs...); err != nil {
						t.Errorf("seed %d, %v after the start: %v; want every call to succeed (stats %+v)", seed, time.Since(start), err, r.Stats())
					}
				})
			}
		})
	}
}

// restartable is an HTTP server on a loopback port that can restart on the
// same port: down, it refuses connections.
type restartable struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	srv  *http.Server
}

func newRestartable(t *testing.T) *restartable {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &restartable{t: t, addr: ln.Addr().String()}
	s.serve(ln)
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.srv.Close()
	})
	return s
}

func (s *restartable) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go srv.Serve(ln)
}

// stop closes the server and every connection to it.
func (s *restartable) stop() {
	s.mu.Lock()
	s.srv.Close()
	s.mu.Unlock()
}

// start listens again on the same port.
func (s *restartable) start() {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Errorf("listening again on %s: %v", s.addr, err)
		return
	}
	s.serve(ln)
}

// TestTransportRestart: through a Transport with the default budget, a
// quiet client's calls all succeed while a real loopback server restarts
// on the same port, 10 at once over a short restart or 5 over a longer
// one (connections refused, or reset as the server closes them). The
// policy is the default's at 300 ms (doubling, ±50%), the restarts 40 ms
// for 10 calls, so that their first retries, 150 ms or more later, find
// the server back on a loaded machine, and 300 ms for 5, so that some of
// theirs do not and retry again; what the budget counts, retries, does not
// depend on the scale.
func TestTransportRestart(t *testing.T) {
	for _, rs := range []struct {
		calls int
		down  time.Duration
	}{{calls: 10, down: 40 * time.Millisecond}, {calls: 5, down: 300 * time.Millisecond}} {
		t.Run(fmt.Sprintf("%d calls, %v down", rs.calls, rs.down), func(t *testing.T) {
			srv := newRestartable(t)
			r := retry.New(retry.WithPolicy(retry.Policy{InitialInterval: 300 * time.Millisecond}))
			client := &http.Client{Transport: retry.NewTransport(newBase(t), r)}
			get := func() error {
				resp, err := client.Get("http://" + srv.addr + "/")
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("status %d", resp.StatusCode)
				}
				return nil
			}
			for range 6 {
				if err := get(); err != nil {
					t.Fatal(err)
				}
			}
			srv.stop()
			restarted := make(chan struct{})
			go func() { time.Sleep(rs.down); srv.start(); close(restarted) }()
			errs := make([]error, rs.calls)
			var wg sync.WaitGroup
			for i := range rs.calls {
				wg.Go(func() { errs[i] = get() })
			}
			wg.Wait()
			<-restarted
			if err := errors.Join(errs...); err != nil {
				t.Errorf("%v; want every call to succeed (stats %+v)", err, r.Stats())
			}
		})
	}
}
