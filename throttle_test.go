package retry_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// throttleClock is a virtual clock that tests move by hand; Sleep moves it
// too.
type throttleClock struct {
	mu  sync.Mutex
	now time.Time
}

func newThrottleClock() *throttleClock {
	return &throttleClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *throttleClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *throttleClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.add(d)
	return nil
}

func (c *throttleClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Draws for a throttleRig: drawNever sheds nothing (p = R/(R+1) stays below
// it for any count a test reaches), drawAlways sheds whenever p > 0.
var (
	drawNever  = math.Nextafter(1, 0)
	drawAlways = 0.0
)

// throttleRig is a Retrier with adaptive throttling, one attempt a call, on
// a virtual clock, whose random draws the test sets.
type throttleRig struct {
	r     *retry.Retrier
	clock *throttleClock
	draw  atomic.Pointer[func() float64]
	sent  int // attempts that ran
}

func newThrottleRig(t testing.TB, th retry.Throttle, opts ...retry.Option) *throttleRig {
	t.Helper()
	g := &throttleRig{clock: newThrottleClock()}
	g.setDraw(drawNever)
	opts = append([]retry.Option{
		retry.WithThrottle(th),
		retry.WithClock(g.clock),
		retry.WithRandom(func() float64 { return (*g.draw.Load())() }),
		retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
	}, opts...)
	g.r = retry.New(opts...)
	if err := g.r.Err(); err != nil {
		t.Fatal(err)
	}
	return g
}

// setDraw makes every draw v.
func (g *throttleRig) setDraw(v float64) { g.setSource(func() float64 { return v }) }

// setSource makes the draws come from src.
func (g *throttleRig) setSource(src func() float64) { g.draw.Store(&src) }

// call makes one call on key whose attempt fails with err (nil: succeeds),
// and reports whether the attempt ran.
func (g *throttleRig) call(key string, err error) (ran bool, out error) {
	return g.callCtx(context.Background(), key, func(context.Context) error { return err })
}

func (g *throttleRig) callCtx(ctx context.Context, key string, fn func(context.Context) error) (ran bool, out error) {
	out = retry.Run(ctx, func(ctx context.Context) error {
		ran = true
		g.sent++
		return fn(ctx)
	}, g.r, retry.WithKey(key))
	return ran, out
}

// calls makes n calls on key that fail with err (nil: succeed) and returns
// how many ran.
func (g *throttleRig) calls(n int, key string, err error) int {
	ran := 0
	for range n {
		if ok, _ := g.call(key, err); ok {
			ran++
		}
	}
	return ran
}

// p is the probability that Stats reports for key now.
func (g *throttleRig) p(key string) float64 { return g.r.Stats().Throttle[key] }

var errRefused = errors.New("refused") // an error of type "error": the dependency's failure

// sre is the book's rule.
func sre(k, requests, accepts float64) float64 {
	return max(0, (requests-k*accepts)/(requests+1))
}

// TestThrottleSettings: an invalid Throttle is an error naming the field,
// its value and the rule, and no attempt runs; zero fields are defaults.
func TestThrottleSettings(t *testing.T) {
	tests := []struct {
		name     string
		throttle retry.Throttle
		want     string // error; "" for none
	}{
		{name: "zero", throttle: retry.Throttle{}},
		{name: "K 1, tiny window, per key", throttle: retry.Throttle{K: 1, Window: time.Nanosecond, PerKey: true}},
		{name: "K below 1", throttle: retry.Throttle{K: 0.5}, want: "retry: option WithThrottle: K = 0.5: must be >= 1"},
		{name: "K negative", throttle: retry.Throttle{K: -2}, want: "retry: option WithThrottle: K = -2: must be >= 1"},
		{name: "K NaN", throttle: retry.Throttle{K: math.NaN()}, want: "retry: option WithThrottle: K = NaN: must be >= 1"},
		{name: "K infinite", throttle: retry.Throttle{K: math.Inf(1)}, want: "retry: option WithThrottle: K = +Inf: must be finite"},
		{name: "negative window", throttle: retry.Throttle{Window: -time.Second}, want: "retry: option WithThrottle: Window = -1s: must be >= 0"},
		{name: "window of 30 s", throttle: retry.Throttle{K: 1, Window: 30 * time.Second}},
		{name: "window over 30 s", throttle: retry.Throttle{Window: 30*time.Second + time.Millisecond}, want: "retry: option WithThrottle: Window = 30.001s: must be <= 30s"},
		{name: "window of 2 min", throttle: retry.Throttle{Window: 2 * time.Minute}, want: "retry: option WithThrottle: Window = 2m0s: must be <= 30s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := retry.New(retry.WithThrottle(tt.throttle))
			ran := false
			err := r.Run(context.Background(), func(context.Context) error { ran = true; return nil })
			switch {
			case tt.want == "" && (err != nil || r.Err() != nil || !ran):
				t.Errorf("error %v (Err %v), ran %v; want none, ran", err, r.Err(), ran)
			case tt.want != "" && (r.Err() == nil || r.Err().Error() != tt.want):
				t.Errorf("Err() = %v, want %q", r.Err(), tt.want)
			case tt.want != "" && (err == nil || ran):
				t.Errorf("Run = %v, ran %v; want the configuration error, no attempt", err, ran)
			}
		})
	}
}

// TestThrottleProbability: the probability Stats reports is the SRE rule on
// the window's requests and accepts; attempts the throttle shed are not
// requests.
func TestThrottleProbability(t *testing.T) {
	tests := []struct {
		name     string
		k        float64 // 0: the default 2
		accepts  int
		refusals int
		shed     int // calls made after, with a draw that sheds whenever p > 0
		want     float64
	}{
		{name: "none", want: 0},
		{name: "K 2, 30 of 100 accepted", accepts: 30, refusals: 70, want: sre(2, 100, 30)},
		{name: "K 2, half accepted", accepts: 50, refusals: 50, want: 0},
		{name: "K 2, a third accepted", accepts: 40, refusals: 80, want: sre(2, 120, 40)},
		{name: "K 2, just under a half", accepts: 49, refusals: 51, want: sre(2, 100, 49)},
		{name: "K 1, 30 of 100 accepted", k: 1, accepts: 30, refusals: 70, want: sre(1, 100, 30)},
		{name: "K 1, half accepted", k: 1, accepts: 50, refusals: 50, want: sre(1, 100, 50)},
		{name: "K 1.5, 40 of 100 accepted", k: 1.5, accepts: 40, refusals: 60, want: sre(1.5, 100, 40)},
		{name: "K 2, none accepted", accepts: 0, refusals: 10, want: sre(2, 10, 0)},
		{name: "shed attempts do not count", accepts: 30, refusals: 70, shed: 10, want: sre(2, 100, 30)},
		{name: "shed attempts do not count, K 1", k: 1, accepts: 5, refusals: 5, shed: 20, want: sre(1, 10, 5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newThrottleRig(t, retry.Throttle{K: tt.k, Window: 30 * time.Second})
			if ran := g.calls(tt.accepts, "", nil) + g.calls(tt.refusals, "", errRefused); ran != tt.accepts+tt.refusals {
				t.Fatalf("%d attempts ran, want all %d (the draw sheds nothing)", ran, tt.accepts+tt.refusals)
			}
			g.setDraw(drawAlways)
			if ran := g.calls(tt.shed, "", nil); ran != 0 {
				t.Fatalf("%d of %d calls ran, want all shed", ran, tt.shed)
			}
			st := g.r.Stats()
			if got := st.Throttle[""]; math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("p = %.6f, want %.6f", got, tt.want)
			}
			if st.Throttled != int64(tt.shed) {
				t.Errorf("Throttled = %d, want %d", st.Throttled, tt.shed)
			}
		})
	}
}

// TestThrottleShed: an attempt is shed when the draw is below p; a call
// shed before its first attempt returns an *Error with Attempts 0, Reason
// throttled and type throttle.adaptive.
func TestThrottleShed(t *testing.T) {
	p := sre(2, 100, 30) // 0.396
	tests := []struct {
		name string
		draw float64
		shed bool
	}{
		{name: "draw well below", draw: 0, shed: true},
		{name: "draw just below", draw: p - 1e-9, shed: true},
		{name: "draw at p", draw: p, shed: false},
		{name: "draw above", draw: 0.5, shed: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newThrottleRig(t, retry.Throttle{})
			g.calls(30, "", nil)
			g.calls(70, "", errRefused)
			g.setDraw(tt.draw)
			ran, err := g.call("", nil)
			if ran == tt.shed {
				t.Fatalf("attempt ran = %v, want %v", ran, !tt.shed)
			}
			if !tt.shed {
				if err != nil {
					t.Errorf("error %v, want none", err)
				}
				return
			}
			var e *retry.Error
			if !errors.As(err, &e) || e.Attempts != 0 || e.Reason != retry.ReasonThrottled {
				t.Fatalf("error %#v, want *retry.Error with Attempts 0 and Reason throttled", err)
			}
			if typ := retry.TypeOf(err); typ != "throttle.adaptive" {
				t.Errorf("TypeOf = %q, want throttle.adaptive", typ)
			}
			if want := "retry: adaptive throttling shed the attempt (p = 0.40)"; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q, want it to contain %q", err, want)
			}
			if st := g.r.Stats(); st.Throttled != 1 || st.Calls != 101 || st.Attempts != 100 {
				t.Errorf("Stats: Throttled %d, Calls %d, Attempts %d; want 1, 101, 100", st.Throttled, st.Calls, st.Attempts)
			}
		})
	}
}

// TestThrottleShare: over many seeded draws, the share of attempts shed is
// the sum of the probabilities at each draw, within 4 standard deviations,
// with the probability held near the book's example, 30 of 100 accepted.
func TestThrottleShare(t *testing.T) {
	const n = 4000
	g := newThrottleRig(t, retry.Throttle{})
	g.calls(30, "", nil)
	g.calls(70, "", errRefused)
	g.setSource(rand.New(rand.NewPCG(1, 29)).Float64)
	var want, variance, sumP float64
	shed := 0
	for i := range n {
		p := g.p("")
		want += p
		variance += p * (1 - p)
		sumP += p
		// Three in ten of the attempts that run succeed: each adds a
		// request and 0.3 accepts, 1 - 2·0.3 = 0.4 to the window's excess
		// of requests over 2·accepts, so p = excess/(requests+1) stays
		// near 0.4.
		var err error
		if i%10 >= 3 {
			err = errRefused
		}
		if ran, _ := g.call("", err); !ran {
			shed++
		}
	}
	if mean, book := sumP/n, sre(2, 100, 30); math.Abs(mean-book) > 0.03 {
		t.Errorf("mean p = %.3f, want it near %.3f (the test holds p there)", mean, book)
	}
	if sd := math.Sqrt(variance); math.Abs(float64(shed)-want) > 4*sd {
		t.Errorf("shed %d of %d, want %.0f ± %.0f (4 sd)", shed, n, want, 4*sd)
	}
	if got := g.r.Stats().Throttled; got != int64(shed) {
		t.Errorf("Throttled = %d, want %d", got, shed)
	}
}

// TestThrottleWindow: outcomes leave the window once it has passed them
// (between 11/12 of a Window and a Window after), on the Retrier's clock.
func TestThrottleWindow(t *testing.T) {
	// One Retrier through the steps, Window 30 s in slices of 2.5 s.
	g := newThrottleRig(t, retry.Throttle{Window: 30 * time.Second})
	steps := []struct {
		name     string
		advance  time.Duration // before the step's calls
		accepts  int
		refusals int
		want     float64
	}{
		{name: "10 refused at 0", refusals: 10, want: sre(2, 10, 0)},
		{name: "still there at 15 s", advance: 15 * time.Second, want: sre(2, 10, 0)},
		{name: "still there at 29.5 s", advance: 14500 * time.Millisecond, want: sre(2, 10, 0)},
		{name: "gone at 30 s; 4 refused", advance: 500 * time.Millisecond, refusals: 4, want: sre(2, 4, 0)},
		{name: "3 accepted at 45 s", advance: 15 * time.Second, accepts: 3, want: sre(2, 7, 3)},
		{name: "the refusals of 30 s gone at 60 s", advance: 15 * time.Second, want: 0},
		{name: "3 refused at 60 s: 3 accepts left", refusals: 3, want: 0},
		{name: "7 refused at 72.5 s", advance: 12500 * time.Millisecond, refusals: 7, want: sre(2, 13, 3)},
		{name: "the accepts of 45 s gone at 75 s", advance: 2500 * time.Millisecond, want: sre(2, 10, 0)},
	}
	for _, st := range steps {
		g.clock.add(st.advance)
		g.calls(st.accepts, "", nil)
		g.calls(st.refusals, "", errRefused)
		if got := g.p(""); math.Abs(got-st.want) > 1e-12 {
			t.Errorf("%s: p = %.4f, want %.4f", st.name, got, st.want)
		}
	}
}

// TestThrottleQuietRun: accepts counted without the clock, over a long run
// of successes, are spread over the time they took: only the last Window's
// worth counts when failures begin.
func TestThrottleQuietRun(t *testing.T) {
	g := newThrottleRig(t, retry.Throttle{Window: 30 * time.Second})
	g.call("", errRefused) // t = 0
	for range 600 {        // a success a second up to t = 600 s
		g.clock.add(time.Second)
		g.call("", nil)
	}
	for range 20 { // then a failure a second up to t = 620 s
		g.clock.add(time.Second)
		g.call("", errRefused)
	}
	// The window reaches back 27.5 to 30 s: 7 to 10 accepts (from 592.5
	// or 590 s to 600 s) and 20 refusals. Every accept kept would give 0,
	// none 0.952.
	lo, hi := sre(2, 30, 10), sre(2, 27, 7)
	if got := g.p(""); got < lo-0.01 || got > hi+0.01 {
		t.Errorf("p = %.3f, want %.3f to %.3f", got, lo, hi)
	}
}

// TestThrottleCallerErrors: the caller's own errors count as accepted;
// the dependency's failures as refused.
func TestThrottleCallerErrors(t *testing.T) {
	canceled := func(ctx context.Context) (context.Context, func(context.Context) error) {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, func(context.Context) error { cancel(); return context.Canceled }
	}
	fails := func(err error) func(ctx context.Context) (context.Context, func(context.Context) error) {
		return func(ctx context.Context) (context.Context, func(context.Context) error) {
			return ctx, func(context.Context) error { return err }
		}
	}
	tests := []struct {
		name    string
		attempt func(ctx context.Context) (context.Context, func(context.Context) error)
		refused bool
	}{
		{name: "404", attempt: fails(&retry.StatusError{StatusCode: 404}), refused: false},
		{name: "permanent", attempt: fails(retry.Permanent(errRefused)), refused: false},
		{name: "canceled by the caller", attempt: canceled, refused: false},
		{name: "503", attempt: fails(&retry.StatusError{StatusCode: 503}), refused: true},
		{name: "429", attempt: fails(&retry.StatusError{StatusCode: 429}), refused: true},
		{name: "unknown error", attempt: fails(errRefused), refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// K = 1: p > 0 as soon as anything is refused.
			g := newThrottleRig(t, retry.Throttle{K: 1})
			for range 10 {
				ctx, fn := tt.attempt(context.Background())
				if ran, _ := g.callCtx(ctx, "", fn); !ran {
					t.Fatal("attempt shed, want it run (the draw sheds nothing)")
				}
			}
			want := 0.0
			if tt.refused {
				want = sre(1, 10, 0)
			}
			if got := g.p(""); got != want {
				t.Errorf("p = %.4f, want %.4f", got, want)
			}
		})
	}
}

// TestThrottlePerKey: with PerKey, a failing key does not shed the attempts
// to another; with one throttle, it does.
func TestThrottlePerKey(t *testing.T) {
	tests := []struct {
		name   string
		perKey bool
		bShed  bool
		keys   []string // in Stats.Throttle
	}{
		{name: "per key", perKey: true, bShed: false, keys: []string{"a", "b"}},
		{name: "one for all", perKey: false, bShed: true, keys: []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newThrottleRig(t, retry.Throttle{K: 1, PerKey: tt.perKey})
			g.calls(10, "a", errRefused)
			g.calls(2, "b", nil)
			g.setDraw(drawAlways)
			if ran, _ := g.call("a", nil); ran {
				t.Error("the failing key's attempt ran, want it shed")
			}
			if ran, _ := g.call("b", nil); ran == tt.bShed {
				t.Errorf("the healthy key's attempt ran = %v, want %v", ran, !tt.bShed)
			}
			st := g.r.Stats()
			if len(st.Throttle) != len(tt.keys) {
				t.Errorf("Throttle = %v, want keys %v", st.Throttle, tt.keys)
			}
			for _, k := range tt.keys {
				if _, ok := st.Throttle[k]; !ok {
					t.Errorf("Throttle = %v, want key %q", st.Throttle, k)
				}
			}
			if tt.perKey && (st.Throttle["a"] == 0 || st.Throttle["b"] != 0) {
				t.Errorf("Throttle = %v, want a > 0, b = 0", st.Throttle)
			}
		})
	}
}

// TestThrottleOutage: at 100 calls a second, a full outage lets through
// about √N attempts a Window, N the calls a Window, once the accepts of
// before and the refusals they allowed have left the window: with R
// refusals in the window p = R/(R+1), so each Window lets N/(R+1) through,
// and R² ≈ N. Shed attempts, not counted, do not hold p up when the
// dependency is back: it is 0 within a Window.
func TestThrottleOutage(t *testing.T) {
	const (
		window = 10 * time.Second
		step   = 10 * time.Millisecond // 100 calls a second
	)
	g := newThrottleRig(t, retry.Throttle{Window: window})
	g.setSource(rand.New(rand.NewPCG(2, 29)).Float64)
	run := func(d time.Duration, err error) (calls, ran int) {
		for range d / step {
			g.clock.add(step)
			calls++
			if ok, _ := g.call("", err); ok {
				ran++
			}
		}
		return calls, ran
	}
	if calls, ran := run(window, nil); ran != calls {
		t.Fatalf("healthy: %d of %d calls ran, want all", ran, calls)
	}
	calls, ran := run(2*window, errRefused)
	t.Logf("outage, first 2 windows: %d of %d calls ran", ran, calls)
	calls, ran = run(4*window, errRefused)
	perWindow, n := float64(ran)/4, float64(calls)/4
	t.Logf("outage, next 4 windows: %d of %d calls ran, %.0f a window (√%.0f = %.0f)", ran, calls, perWindow, n, math.Sqrt(n))
	if perWindow < math.Sqrt(n)/2 || perWindow > 2*math.Sqrt(n) {
		t.Errorf("%.0f attempts a window in the outage, want about √%.0f = %.0f (within a factor of 2)", perWindow, n, math.Sqrt(n))
	}
	back := time.Duration(0)
	for g.p("") > 0 {
		if back >= window {
			t.Fatalf("p = %.3f %v after the dependency came back, want 0 within a Window (%v)", g.p(""), back, window)
		}
		run(window/10, nil)
		back += window / 10
	}
	t.Logf("p back to 0 %v after the dependency", back)

	// An overload: the dependency accepts 10 a second (A = 100 a
	// Window) and refuses the rest. The client sends about
	// √(N·(K·A+1)) = √(1000·201) ≈ 448 a Window, more than K·A = 200.
	var second time.Time
	accepted := 0
	overloaded := func() error {
		if now := g.clock.Now().Truncate(time.Second); !now.Equal(second) {
			second, accepted = now, 0
		}
		if accepted < 10 {
			accepted++
			return nil
		}
		return errRefused
	}
	sent := 0
	for i := range int(8 * window / step) {
		g.clock.add(step)
		ran, _ := g.callCtx(context.Background(), "", func(context.Context) error { return overloaded() })
		if ran && i >= int(4*window/step) {
			sent++
		}
	}
	perWindow = float64(sent) / 4
	t.Logf("overload, last 4 windows: %.0f sent a window, √(1000·201) = %.0f, K·A = 200", perWindow, math.Sqrt(1000*201))
	if want := math.Sqrt(1000 * 201); math.Abs(perWindow-want) > 0.25*want {
		t.Errorf("%.0f attempts a window under the overload, want about %.0f (±25%%)", perWindow, want)
	}
}

// TestThrottleTransport: through the Transport against a loopback server,
// 503s raise the probability, a shed request does not reach the server,
// a shed retry returns the response in hand, and 200s bring it back to 0.
func TestThrottleTransport(t *testing.T) {
	var healthy atomic.Bool
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	clock := newThrottleClock()
	var draw atomic.Uint64
	setDraw := func(v float64) { draw.Store(math.Float64bits(v)) }
	setDraw(drawNever)
	r := retry.New(
		retry.WithThrottle(retry.Throttle{}),
		retry.WithClock(clock),
		retry.WithRandom(func() float64 { return math.Float64frombits(draw.Load()) }),
		retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
		retry.WithBudget(retry.Budget{Off: true}))
	client := &http.Client{Transport: retry.NewTransport(srv.Client().Transport, r)}
	get := func() (int, error) {
		resp, err := client.Get(srv.URL)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	steps := []struct {
		name     string
		healthy  bool
		draw     float64
		requests int
		code     int   // of every response; 0 for an error
		hits     int64 // server hits in the step
		throttle float64
		shed     int64 // Stats.Throttled after the step
	}{
		{name: "503s, nothing shed", draw: drawNever, requests: 10, code: 503, hits: 20, throttle: sre(2, 20, 0)},
		{name: "first attempts shed", draw: drawAlways, requests: 3, code: 0, hits: 0, throttle: sre(2, 20, 0), shed: 3},
		{name: "200s", healthy: true, draw: drawNever, requests: 23, code: 200, hits: 23, throttle: 0, shed: 3},
	}
	for _, st := range steps {
		healthy.Store(st.healthy)
		setDraw(st.draw)
		before := hits.Load()
		for range st.requests {
			code, err := get()
			if code != st.code {
				t.Fatalf("%s: status %d, error %v; want status %d", st.name, code, err, st.code)
			}
			var e *retry.Error
			if st.code == 0 && (!errors.As(err, &e) || e.Reason != retry.ReasonThrottled || e.Attempts != 0) {
				t.Fatalf("%s: error %v, want a *retry.Error, throttled, no attempt", st.name, err)
			}
		}
		if got := hits.Load() - before; got != st.hits {
			t.Errorf("%s: %d server hits, want %d", st.name, got, st.hits)
		}
		s := r.Stats()
		if math.Abs(s.Throttle[""]-st.throttle) > 1e-12 || s.Throttled != st.shed {
			t.Errorf("%s: p = %.4f, Throttled %d; want %.4f, %d", st.name, s.Throttle[""], s.Throttled, st.throttle, st.shed)
		}
	}
}

// TestThrottleTransportRetryShed: a retry the throttle sheds leaves the
// Transport's response in hand: the 503 is returned with a nil error.
func TestThrottleTransportRetryShed(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	r := retry.New(
		retry.WithThrottle(retry.Throttle{K: 1}), // one refusal: p = 1/2
		retry.WithClock(newThrottleClock()),
		retry.WithRandom(func() float64 { return 0 }),
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}))
	resp, err := (&http.Client{Transport: retry.NewTransport(srv.Client().Transport, r)}).Get(srv.URL)
	if err != nil {
		t.Fatalf("error %v, want the 503 and no error", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || hits.Load() != 1 {
		t.Errorf("status %d after %d hits, want 503 after 1", resp.StatusCode, hits.Load())
	}
	if st := r.Stats(); st.Throttled != 1 || st.Retried != 0 {
		t.Errorf("Throttled %d, Retried %d; want 1, 0", st.Throttled, st.Retried)
	}
}

// TestThrottleRetryShed: through Do, a shed retry ends the call with
// Reason throttled and the last failure as Err.
func TestThrottleRetryShed(t *testing.T) {
	n := 0
	_, err := retry.Do(context.Background(), func(context.Context) (int, error) { n++; return 0, errRefused },
		retry.WithThrottle(retry.Throttle{K: 1}),
		retry.WithClock(newThrottleClock()),
		retry.WithRandom(func() float64 { return 0 }),
		retry.WithPolicy(retry.Policy{MaxAttempts: 3}))
	var e *retry.Error
	if !errors.As(err, &e) || e.Reason != retry.ReasonThrottled || e.Attempts != 1 || !errors.Is(err, errRefused) || n != 1 {
		t.Fatalf("error %v after %d attempts, want throttled after 1, wrapping the failure", err, n)
	}
	if typ := retry.TypeOf(err); typ != "throttle.adaptive" {
		t.Errorf("TypeOf = %q, want throttle.adaptive", typ)
	}
}

// TestThrottleZero: the zero Throttle is K = 2 over 10 seconds; without
// WithThrottle, Stats report none.
func TestThrottleZero(t *testing.T) {
	g := newThrottleRig(t, retry.Throttle{})
	g.calls(30, "", nil)
	g.calls(70, "", errRefused)
	if got, want := g.p(""), sre(2, 100, 30); got != want {
		t.Errorf("p = %.4f, want %.4f (K = 2)", got, want)
	}
	g.clock.add(9 * time.Second)
	if got, want := g.p(""), sre(2, 100, 30); got != want {
		t.Errorf("p = %.4f after 9 s, want %.4f (window 10 s)", got, want)
	}
	g.clock.add(time.Second)
	if got := g.p(""); got != 0 {
		t.Errorf("p = %.4f after 10 s, want 0", got)
	}
	st := retry.New().Stats()
	if st.Throttle != nil || st.Throttled != 0 {
		t.Errorf("without WithThrottle: Throttle %v, Throttled %d; want nil, 0", st.Throttle, st.Throttled)
	}
}

// TestThrottleConcurrent: calls from many goroutines count every outcome
// (run with -race).
func TestThrottleConcurrent(t *testing.T) {
	g := newThrottleRig(t, retry.Throttle{K: 1, PerKey: true})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				var err error
				if j%4 == 0 {
					err = errRefused
				}
				_ = retry.Run(context.Background(), func(context.Context) error { return err }, g.r, retry.WithKey([]string{"a", "b"}[i%2]))
			}
		})
	}
	wg.Wait()
	// Per key: 800 requests, 600 accepted, nothing shed.
	st := g.r.Stats()
	for _, k := range []string{"a", "b"} {
		if got, want := st.Throttle[k], sre(1, 800, 600); math.Abs(got-want) > 1e-12 {
			t.Errorf("key %s: p = %.4f, want %.4f", k, got, want)
		}
	}
}

// TestThrottleCountsLaterRefusals: an attempt that the concurrency limit,
// a gate after the throttle, refuses never reached the dependency: the
// throttle counts it neither as refused nor as accepted. Against a
// dependency that accepts everything, the concurrency limit's refusals
// leave the probability at 0 (counted as refusals, they raised it to 0.9,
// and the throttle then shed most calls).
func TestThrottleCountsLaterRefusals(t *testing.T) {
	r := retry.New(retry.WithThrottle(retry.Throttle{K: 1}), retry.WithConcurrency(retry.Concurrency{Initial: 1, Min: 1, Max: 1}),
		retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithRandom(func() float64 { return 0 }))
	hold, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(context.Background(), func(context.Context) error { close(hold); <-release; return nil })
	}()
	<-hold
	for range 10 {
		if err := r.Run(context.Background(), func(context.Context) error { return nil }); retry.TypeOf(err) != "concurrency.limit" {
			t.Fatalf("err = %v, want the concurrency limit's refusal", err)
		}
	}
	close(release)
	<-done
	// The draw is 0: any probability above 0 sheds the call.
	if err := r.Run(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Errorf("a call after 10 refusals by the concurrency limit: %v, want success", err)
	}
	st := r.Stats()
	if p := st.Throttle[""]; p != 0 || st.Throttled != 0 {
		t.Errorf("throttle p = %.3f, %d shed after 10 refusals by the concurrency limit, want 0 and none", p, st.Throttled)
	}
}
