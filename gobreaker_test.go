package retry_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/steadyhq/retry"
)

// TestBreakerRefusalIsGobreakers: every refusal of the built-in breaker
// matches gobreaker's sentinels as gobreaker's own would: ErrOpenState
// always, ErrTooManyRequests too when it was half-open with its probes in
// flight; through Do before any attempt and after one, and through the
// Transport. (The gRPC interceptors' case is in the grpc module.)
func TestBreakerRefusalIsGobreakers(t *testing.T) {
	open := retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour, MaxWait: -1}
	tests := []struct {
		name     string
		call     func(t *testing.T) error
		attempts int  // of the call refused
		tooMany  bool // errors.Is ErrTooManyRequests
	}{
		{name: "Do, before any attempt", call: func(t *testing.T) error {
			r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(open))
			_ = r.Run(t.Context(), failing) // opens it
			return r.Run(t.Context(), failing)
		}},
		{name: "Do, after an attempt: the retry is refused", attempts: 1, call: func(t *testing.T) error {
			r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}),
				retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour}))
			return r.Run(t.Context(), failing)
		}},
		{name: "Do, half-open with its probe in flight", tooMany: true, call: func(t *testing.T) error {
			var err error
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
					retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Second, MaxWait: -1}))
				_ = r.Run(t.Context(), failing)
				time.Sleep(time.Second) // half-open
				release := make(chan struct{})
				go r.Run(t.Context(), func(context.Context) error { <-release; return nil }) // the probe
				synctest.Wait()
				err = r.Run(t.Context(), failing)
				close(release)
			})
			return err
		}},
		{name: "Transport, before any attempt", call: func(t *testing.T) error {
			srv := newScripted(t, step{status: 503})
			tr := retry.NewTransport(newBase(t), retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(open))
			for range 2 {
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					return err
				}
				resp.Body.Close()
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(t)
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen || re.Attempts != tt.attempts {
				t.Fatalf("err = %v; want a *retry.Error of Reason breaker_open after %d attempts", err, tt.attempts)
			}
			if !errors.Is(err, gobreaker.ErrOpenState) {
				t.Errorf("errors.Is(%v, gobreaker.ErrOpenState) is false", err)
			}
			if got := errors.Is(err, gobreaker.ErrTooManyRequests); got != tt.tooMany {
				t.Errorf("errors.Is(%v, gobreaker.ErrTooManyRequests) = %v, want %v", err, got, tt.tooMany)
			}
			if got := retry.TypeOf(err); got != "breaker.open" {
				t.Errorf("TypeOf = %q, want breaker.open", got)
			}
		})
	}
}

// newGoBreaker returns a gobreaker two-step breaker that opens on the
// first failure, stays open for timeout, and records its changes of state.
func newGoBreaker(timeout time.Duration, st gobreaker.Settings, changes *[]string) *gobreaker.TwoStepCircuitBreaker[any] {
	st.Timeout = timeout
	if st.ReadyToTrip == nil {
		st.ReadyToTrip = func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 }
	}
	if changes != nil {
		st.OnStateChange = func(_ string, from, to gobreaker.State) { *changes = append(*changes, from.String()+">"+to.String()) }
	}
	return gobreaker.NewTwoStepCircuitBreaker[any](st)
}

// one returns a breaker func that gives cb for every key.
func one(cb *gobreaker.TwoStepCircuitBreaker[any]) func(string) *gobreaker.TwoStepCircuitBreaker[any] {
	return func(string) *gobreaker.TwoStepCircuitBreaker[any] { return cb }
}

// TestGoBreakerWaits: a call that meets an open gobreaker breaker waits
// for it to let a probe through, without consuming an attempt, when that
// fits MaxWait: a one-attempt call runs after the open time and succeeds,
// counted as a breaker wait. Longer than MaxWait, it stops at once with
// Reason breaker_open, the breaker's error, and the breaker's event.
func TestGoBreakerWaits(t *testing.T) {
	tests := []struct {
		name    string
		maxWait time.Duration
		want    error // of the second call
		took    time.Duration
		waits   int64
		denied  int64
	}{
		{name: "within MaxWait: waits out the open time", maxWait: time.Second, took: 100*time.Millisecond + 1, waits: 1},
		{name: "past MaxWait: stops at once", maxWait: 50 * time.Millisecond, want: gobreaker.ErrOpenState, denied: 1},
		{name: "MaxWait negative: never waits", maxWait: -1, want: gobreaker.ErrOpenState, denied: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var changes []string
				cb := newGoBreaker(100*time.Millisecond, gobreaker.Settings{}, &changes)
				var gaveUp []retry.Event
				r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
					retry.WithGoBreaker(one(cb), retry.Breaker{OpenTimeout: 100 * time.Millisecond, MaxWait: tt.maxWait}),
					retry.OnGiveUp(func(ev retry.Event) { gaveUp = append(gaveUp, ev) }))
				_ = r.Run(t.Context(), failing) // opens it
				ran := 0
				start := time.Now()
				err := r.Run(t.Context(), func(context.Context) error { ran++; return nil })
				took := time.Since(start)
				st := r.Stats()
				if st.BreakerWaits != tt.waits || st.BreakerDenied != tt.denied {
					t.Errorf("BreakerWaits %d, BreakerDenied %d; want %d and %d", st.BreakerWaits, st.BreakerDenied, tt.waits, tt.denied)
				}
				if tt.want == nil {
					if err != nil || ran != 1 || took != tt.took {
						t.Fatalf("Run = %v after %v, fn ran %d times; want nil after %v, once", err, took, ran, tt.took)
					}
					if want := []string{"closed>open", "open>half-open", "half-open>closed"}; !slices.Equal(changes, want) {
						t.Errorf("changes %v, want %v", changes, want)
					}
					return
				}
				var re *retry.Error
				if !errors.Is(err, tt.want) || !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen || ran != 0 || took != 0 {
					t.Fatalf("Run = %v after %v, fn ran %d times; want at once an error of Reason breaker_open that is %v", err, took, ran, tt.want)
				}
				if ev := gaveUp[len(gaveUp)-1]; ev.Reason != retry.ReasonBreakerOpen || ev.Type != "breaker.open" || ev.Attempt != 0 {
					t.Errorf("OnGiveUp: Reason %q, Type %q, Attempt %d; want breaker_open, breaker.open, 0", ev.Reason, ev.Type, ev.Attempt)
				}
				if got := st.Breakers[""]; got != retry.BreakerOpen {
					t.Errorf("Stats.Breakers[\"\"] = %q, want open", got)
				}
			})
		})
	}
}

// TestGoBreakerRetryWaitsOpenTime: a retry after the failure that opened
// the breaker waits for the end of its open time (within MaxWait), then
// runs as its probe.
func TestGoBreakerRetryWaitsOpenTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb := newGoBreaker(200*time.Millisecond, gobreaker.Settings{}, nil)
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
			retry.WithGoBreaker(one(cb), retry.Breaker{OpenTimeout: 200 * time.Millisecond}))
		var at []time.Duration
		start := time.Now()
		err := r.Run(t.Context(), func(ctx context.Context) error {
			at = append(at, time.Since(start))
			if retry.AttemptFrom(ctx) == 1 {
				return errTransient
			}
			return nil
		})
		if err != nil || !slices.Equal(at, []time.Duration{0, 200*time.Millisecond + 1}) {
			t.Fatalf("Run = %v, attempts at %v; want nil, the retry just after the 200 ms open time", err, at)
		}
		if st := r.Stats(); st.BreakerWaits != 1 || st.Attempts != 2 || cb.State() != gobreaker.StateClosed {
			t.Errorf("BreakerWaits %d, Attempts %d, state %v; want 1, 2, closed", st.BreakerWaits, st.Attempts, cb.State())
		}
	})
}

// TestGoBreakerProbes: half-open, the breaker lets MaxRequests probes
// through as gobreaker counts them; a call beyond them is refused with an
// error that is both ErrOpenState and ErrTooManyRequests, and the probes'
// successes close the breaker.
func TestGoBreakerProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes []string
		cb := newGoBreaker(time.Second, gobreaker.Settings{MaxRequests: 2}, &changes)
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
			retry.WithGoBreaker(one(cb), retry.Breaker{OpenTimeout: time.Second, MaxWait: -1}))
		_ = r.Run(t.Context(), failing)
		time.Sleep(time.Second + 1) // half-open
		release := make(chan struct{})
		var wg sync.WaitGroup
		var probes []error
		var mu sync.Mutex
		for range 2 {
			wg.Go(func() {
				err := r.Run(t.Context(), func(context.Context) error { <-release; return nil })
				mu.Lock()
				probes = append(probes, err)
				mu.Unlock()
			})
		}
		synctest.Wait()
		err := r.Run(t.Context(), failing)
		if !errors.Is(err, gobreaker.ErrTooManyRequests) || !errors.Is(err, gobreaker.ErrOpenState) {
			t.Errorf("a third call while two probes run: %v; want ErrTooManyRequests and ErrOpenState", err)
		}
		if got := r.Stats().Breakers[""]; got != retry.BreakerHalfOpen {
			t.Errorf("Stats.Breakers[\"\"] = %q, want half_open", got)
		}
		close(release)
		wg.Wait()
		if probes[0] != nil || probes[1] != nil {
			t.Errorf("probes: %v, want both to succeed", probes)
		}
		if want := []string{"closed>open", "open>half-open", "half-open>closed"}; !slices.Equal(changes, want) {
			t.Errorf("changes %v, want %v", changes, want)
		}
	})
}

var errNotFound = errors.New("not found")

// TestGoBreakerCountsByItsSettings: done is told each attempt's own error,
// so the breaker's IsSuccessful and IsExcluded decide what counts; an
// attempt let through and then given up by its call (a later gate refused
// it, a hedge outrun by another) is told an error wrapping
// context.Canceled, which IsExcluded can exclude.
func TestGoBreakerCountsByItsSettings(t *testing.T) {
	settings := gobreaker.Settings{
		IsSuccessful: func(err error) bool { return err == nil || errors.Is(err, errNotFound) },
		IsExcluded:   func(err error) bool { return errors.Is(err, context.Canceled) },
		ReadyToTrip:  func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 3 },
	}
	tests := []struct {
		name string
		run  func(t *testing.T, r *retry.Retrier)
		opts []retry.Option
		want gobreaker.Counts
	}{
		{name: "IsSuccessful: a not-found counts as a success", run: func(t *testing.T, r *retry.Retrier) {
			for range 3 {
				_ = r.Run(t.Context(), func(context.Context) error { return errNotFound })
			}
		}, opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 1})}, want: gobreaker.Counts{Requests: 3, TotalSuccesses: 3, ConsecutiveSuccesses: 3}},
		{name: "a failure counts as one", run: func(t *testing.T, r *retry.Retrier) {
			_ = r.Run(t.Context(), failing)
		}, opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 1})}, want: gobreaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1}},
		{name: "a panic counts as a failure", run: func(t *testing.T, r *retry.Retrier) {
			defer func() {
				if recover() == nil {
					t.Error("the panic did not go on to the caller")
				}
			}()
			_ = r.Run(t.Context(), func(context.Context) error { panic("boom") })
		}, opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 1})}, want: gobreaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1}},
		{name: "IsExcluded: the caller's cancellation", run: func(t *testing.T, r *retry.Retrier) {
			ctx, cancel := context.WithCancel(t.Context())
			_ = r.Run(ctx, func(context.Context) error { cancel(); return ctx.Err() })
		}, want: gobreaker.Counts{Requests: 1, TotalExclusions: 1}},
		{name: "a hedge outrun by another", run: func(t *testing.T, r *retry.Retrier) {
			v, err := retry.Hedged(t.Context(), func(ctx context.Context) (int, error) {
				if retry.AttemptFrom(ctx) == 1 {
					<-ctx.Done() // slow: the hedge wins and this one is canceled
					return 0, errors.New("aborted")
				}
				return 2, nil
			}, r, retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond, Max: 2}))
			if v != 2 || err != nil {
				t.Fatalf("Hedged = %v, %v; want the hedge's 2", v, err)
			}
		}, want: gobreaker.Counts{Requests: 2, TotalSuccesses: 1, ConsecutiveSuccesses: 1, TotalExclusions: 1}},
		{name: "an attempt the concurrency limit refused after the breaker", run: func(t *testing.T, r *retry.Retrier) {
			release := make(chan struct{})
			go r.Run(t.Context(), func(context.Context) error { <-release; return nil }) // holds the one permit
			synctest.Wait()
			err := r.Run(t.Context(), failing)
			close(release)
			synctest.Wait()
			if !strings.Contains(err.Error(), "throttled") {
				t.Fatalf("second call: %v, want it refused by the concurrency limit", err)
			}
		}, opts: []retry.Option{retry.WithConcurrency(retry.Concurrency{Initial: 1, Max: 1})},
			want: gobreaker.Counts{Requests: 2, TotalSuccesses: 1, ConsecutiveSuccesses: 1, TotalExclusions: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cb := newGoBreaker(time.Minute, settings, nil)
				r := retry.New(append([]retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 2}),
					retry.WithGoBreaker(one(cb), retry.Breaker{})}, tt.opts...)...)
				tt.run(t, r)
				synctest.Wait()
				if got := cb.Counts(); got != tt.want {
					t.Errorf("counts %+v, want %+v", got, tt.want)
				}
			})
		})
	}
}

// TestGoBreakerPerKey: the func is asked once per key, and its breakers
// guard their keys apart; a key whose func returns nil is not guarded, and
// Stats lists the guarded keys' states.
func TestGoBreakerPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		asked := map[string]int{}
		cbs := map[string]*gobreaker.TwoStepCircuitBreaker[any]{}
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
			retry.WithGoBreaker(func(key string) *gobreaker.TwoStepCircuitBreaker[any] {
				asked[key]++
				if key == "free" {
					return nil
				}
				cbs[key] = newGoBreaker(time.Minute, gobreaker.Settings{Name: key}, nil)
				return cbs[key]
			}, retry.Breaker{OpenTimeout: time.Minute}))
		call := func(key string, fn func(context.Context) error) error {
			_, err := retry.Do(t.Context(), func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) },
				r, retry.WithKey(key))
			return err
		}
		for range 2 {
			_ = call("a", failing)
			_ = call("free", failing)
		}
		if err := call("b", func(context.Context) error { return nil }); err != nil {
			t.Errorf("key b, its breaker closed: %v", err)
		}
		if err := call("a", func(context.Context) error { return nil }); !errors.Is(err, gobreaker.ErrOpenState) {
			t.Errorf("key a, its breaker open: %v, want ErrOpenState", err)
		}
		if want := map[string]int{"a": 1, "free": 1, "b": 1}; !mapsEqual(asked, want) {
			t.Errorf("the func was asked %v, want %v", asked, want)
		}
		if got, want := r.Stats().Breakers, map[string]string{"a": retry.BreakerOpen, "b": retry.BreakerClosed}; !mapsEqual(got, want) {
			t.Errorf("Stats.Breakers = %v, want %v", got, want)
		}
	})
}

func mapsEqual[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestGoBreakerTransport: the Transport keys gobreaker's breakers by host;
// a request its host's open breaker refuses before any attempt fails with
// an error that is gobreaker.ErrOpenState, nothing sent.
func TestGoBreakerTransport(t *testing.T) {
	srv := newScripted(t, step{status: 503})
	host := strings.TrimPrefix(srv.URL, "http://")
	var keys []string
	cb := newGoBreaker(time.Hour, gobreaker.Settings{}, nil)
	tr := retry.NewTransport(newBase(t), retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
		retry.WithGoBreaker(func(key string) *gobreaker.TwoStepCircuitBreaker[any] { keys = append(keys, key); return cb },
			retry.Breaker{OpenTimeout: time.Hour}))
	get := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		return tr.RoundTrip(req)
	}
	resp, err := get()
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("first request: %v, %v; want the 503", resp, err)
	}
	resp.Body.Close()
	if st := cb.State(); st != gobreaker.StateOpen {
		t.Errorf("after a 503 the breaker is %v, want open: a 503 is a failure", st)
	}
	resp, err = get()
	if resp != nil || !errors.Is(err, gobreaker.ErrOpenState) {
		t.Fatalf("second request: %v, %v; want no response and ErrOpenState", resp, err)
	}
	if n := len(srv.requests()); n != 1 {
		t.Errorf("the server saw %d requests, want 1", n)
	}
	if !slices.Equal(keys, []string{host}) {
		t.Errorf("the func was asked for %q, want the host %q once", keys, host)
	}
}

// TestGoBreakerBadSettings: WithGoBreaker takes OpenTimeout and MaxWait
// alone; any other field, or a nil func, is an error naming it.
func TestGoBreakerBadSettings(t *testing.T) {
	cb := one(gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{}))
	tests := []struct {
		name string
		f    func(string) *gobreaker.TwoStepCircuitBreaker[any]
		b    retry.Breaker
		want string
	}{
		{name: "nil func", b: retry.Breaker{}, want: "WithGoBreaker: breaker = nil"},
		{name: "FailureRatio", f: cb, b: retry.Breaker{FailureRatio: 0.5}, want: "FailureRatio = 0.5: set it in the gobreaker.Settings"},
		{name: "MinRequests", f: cb, b: retry.Breaker{MinRequests: 3}, want: "MinRequests = 3"},
		{name: "Window", f: cb, b: retry.Breaker{Window: time.Second}, want: "Window = 1s"},
		{name: "Probes", f: cb, b: retry.Breaker{Probes: 2}, want: "Probes = 2: set it in the gobreaker.Settings of the breakers, not here (MaxRequests)"},
		{name: "PerKey", f: cb, b: retry.Breaker{PerKey: true}, want: "PerKey = true"},
		{name: "OnChange", f: cb, b: retry.Breaker{OnChange: func(string, string, string) {}}, want: "OnChange = set: set it in the gobreaker.Settings of the breakers, not here (OnStateChange)"},
		{name: "StoreWait", f: cb, b: retry.Breaker{StoreWait: time.Second}, want: "StoreWait = 1s"},
		{name: "OpenTimeout", f: cb, b: retry.Breaker{OpenTimeout: -1}, want: "OpenTimeout = -1ns: must be >= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := retry.New(retry.WithGoBreaker(tt.f, tt.b)).Err()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Err() = %v, want one containing %q", err, tt.want)
			}
		})
	}
	if err := retry.New(retry.WithGoBreaker(cb, retry.Breaker{OpenTimeout: time.Second, MaxWait: -1})).Err(); err != nil {
		t.Errorf("OpenTimeout and MaxWait: %v", err)
	}
}

// TestGoBreakerReplacesBreaker: WithGoBreaker and WithBreaker replace each
// other, the later one winning.
func TestGoBreakerReplacesBreaker(t *testing.T) {
	cb := newGoBreaker(time.Hour, gobreaker.Settings{}, nil)
	builtIn := retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour, MaxWait: -1}
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(builtIn), retry.WithGoBreaker(one(cb), retry.Breaker{MaxWait: -1}))
	_ = r.Run(t.Context(), failing)
	if cb.State() != gobreaker.StateOpen {
		t.Errorf("WithGoBreaker after WithBreaker: the gobreaker breaker is %v, want open", cb.State())
	}
	cb2 := newGoBreaker(time.Hour, gobreaker.Settings{}, nil)
	r = retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithGoBreaker(one(cb2), retry.Breaker{}), retry.WithBreaker(builtIn))
	_ = r.Run(t.Context(), failing)
	if cb2.State() != gobreaker.StateClosed || r.Stats().Breakers[""] != retry.BreakerOpen {
		t.Errorf("WithBreaker after WithGoBreaker: gobreaker %v, built-in %q; want closed and open", cb2.State(), r.Stats().Breakers[""])
	}
}
