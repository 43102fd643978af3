package retry_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// throttleFault is how the dependency of a throttleRun fails a call.
type throttleFault int

const (
	failFast    throttleFault = iota // a 503 at once
	failTimeout                      // no answer: the attempt's 1 s timeout ends it
	failHalf                         // a 503 at once to every other call; the rest succeed
)

// throttleRun is calls at rate a second, one attempt each, through a
// Retrier with th, to a dependency that is healthy for a minute, fails
// for length, then is healthy again; the calls start at from. With
// clock, the Retrier reads it, and it jumps by jump at jumpAt.
type throttleRun struct {
	th     retry.Throttle
	fault  throttleFault
	rate   float64
	length time.Duration
	from   time.Duration
	clock  *jumpClock
	jumpAt time.Duration
	jump   time.Duration
}

// throttleBefore is how long a throttleRun's dependency is healthy first.
const throttleBefore = time.Minute

// run returns the probability that Stats report each second from the
// start, and the attempts shed by then. It runs in a synctest bubble.
func (r throttleRun) run(t *testing.T, after time.Duration) (ps []float64, shed []int64) {
	t.Helper()
	var failing atomic.Bool
	var calls atomic.Uint64
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(3, 29))
	random := func() float64 { // the calls run at once, and a *rand.Rand is not safe for that
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64()
	}
	opts := []retry.Option{
		retry.WithThrottle(r.th), once, retry.WithBudget(retry.Budget{Off: true}),
		retry.WithAttemptTimeout(time.Second), retry.WithRandom(random),
	}
	if r.clock != nil {
		opts = append(opts, retry.WithClock(r.clock))
	}
	rt := retry.New(opts...)
	if err := rt.Err(); err != nil {
		t.Fatal(err)
	}
	dependency := func(ctx context.Context) error {
		n := calls.Add(1)
		switch {
		case !failing.Load():
			return nil
		case r.fault == failTimeout:
			<-ctx.Done()
			return ctx.Err()
		case r.fault == failHalf && n%2 == 0:
			return nil
		}
		return &retry.StatusError{StatusCode: http.StatusServiceUnavailable}
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(r.from)
		every := time.Duration(float64(time.Second) / r.rate)
		for ctx.Err() == nil {
			wg.Go(func() { _ = rt.Run(ctx, dependency) })
			time.Sleep(every)
		}
	})
	end := throttleBefore + r.length + after
	for elapsed := time.Duration(0); elapsed <= end; elapsed += time.Second {
		switch elapsed {
		case throttleBefore:
			failing.Store(true)
		case throttleBefore + r.length:
			failing.Store(false)
		}
		if r.clock != nil && elapsed == r.jumpAt {
			r.clock.jump(r.jump)
		}
		st := rt.Stats()
		ps = append(ps, st.Throttle[""])
		shed = append(shed, st.Throttled)
		time.Sleep(time.Second)
	}
	cancel()
	wg.Wait()
	return ps, shed
}

// TestThrottleRecovers: whatever the Throttle (K from 1 up, any Window up
// to 30 s), after a full outage of 3 minutes at 100 calls a second the
// probability is back to 0 within 30 s of the dependency being healthy
// again, and stays there: no call is shed from then on. So too when the
// dependency fails by timing out, when it fails every other call for 2
// minutes, for a client that starts in the outage, for one that calls
// once a second, and when the clock jumps an hour either way in the
// outage. Shed attempts do not count as requests: counted, as the SRE
// book counts them, they held the probability near 1 for minutes after
// the dependency was back (K = 2 over 2 minutes: 13 minutes), and for good
// with K = 1.
func TestThrottleRecovers(t *testing.T) {
	const (
		outage = 3 * time.Minute
		back   = 30 * time.Second
		after  = 2 * time.Minute
	)
	tests := []struct {
		name  string
		r     throttleRun
		still bool // the throttle need not shed in the outage
	}{
		{name: "defaults", r: throttleRun{rate: 100, length: outage}},
		{name: "K 1", r: throttleRun{th: retry.Throttle{K: 1}, rate: 100, length: outage}},
		{name: "K 1, Window 30 s", r: throttleRun{th: retry.Throttle{K: 1, Window: 30 * time.Second}, rate: 100, length: outage}},
		{name: "K 1.01, Window 30 s", r: throttleRun{th: retry.Throttle{K: 1.01, Window: 30 * time.Second}, rate: 100, length: outage}},
		{name: "K 2, Window 30 s", r: throttleRun{th: retry.Throttle{Window: 30 * time.Second}, rate: 100, length: outage}},
		{name: "K 100, Window 30 s", r: throttleRun{th: retry.Throttle{K: 100, Window: 30 * time.Second}, rate: 100, length: outage}},
		{name: "Window 1 ns", r: throttleRun{th: retry.Throttle{Window: time.Nanosecond}, rate: 100, length: outage}, still: true},
		{name: "fails by timing out", r: throttleRun{fault: failTimeout, rate: 100, length: outage}},
		{name: "fails every other call for 2 min", r: throttleRun{fault: failHalf, rate: 100, length: 2 * time.Minute}, still: true},
		{name: "starts a minute into the outage", r: throttleRun{rate: 100, length: outage, from: throttleBefore + time.Minute}},
		{name: "a call a second", r: throttleRun{rate: 1, length: outage}},
		{name: "K 1, Window 30 s, a call a second", r: throttleRun{th: retry.Throttle{K: 1, Window: 30 * time.Second}, rate: 1, length: outage}},
		{name: "the clock jumps an hour ahead in the outage", r: throttleRun{rate: 100, length: outage, clock: &jumpClock{}, jumpAt: throttleBefore + 90*time.Second, jump: time.Hour}},
		{name: "the clock jumps an hour back in the outage", r: throttleRun{rate: 100, length: outage, clock: &jumpClock{}, jumpAt: throttleBefore + 90*time.Second, jump: -time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ps, shed := tt.r.run(t, after)
				healthy := int((throttleBefore + tt.r.length) / time.Second)
				zero := len(ps) // the second from which p stays 0
				for zero > 0 && ps[zero-1] == 0 {
					zero--
				}
				most := 0.0
				for _, p := range ps[:healthy+1] {
					most = max(most, p)
				}
				took := time.Duration(max(zero-healthy, 0)) * time.Second
				// Sheds are counted from when p is 0 and the dependency
				// healthy: p is sampled once a second, and a dependency
				// failing every other call keeps it at 0 at most samples
				// while a shed between two of them still comes of a p
				// above 0 in the fault.
				from := min(max(zero, healthy), len(shed)-1)
				t.Logf("p at most %.3f in the outage; 0 from %v after the dependency recovered; %d shed after that, %d in all",
					most, took, shed[len(shed)-1]-shed[from], shed[len(shed)-1])
				if zero == len(ps) || took > back {
					t.Errorf("p = %.3f at the end, 0 only from %v after the dependency recovered; want 0 within %v, and after", ps[len(ps)-1], took, back)
				}
				if n := shed[len(shed)-1] - shed[from]; n != 0 {
					t.Errorf("%d calls shed once p was back to 0, want none", n)
				}
				if !tt.still && most < 0.5 {
					t.Errorf("p at most %.3f in the outage: the throttle shed little of a full outage", most)
				}
			})
		})
	}
}
