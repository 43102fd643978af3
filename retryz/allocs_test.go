//go:build !race

package retryz_test

import (
	"bufio"
	"context"
	"net/http"
	"runtime"
	"testing"

	"golang.org/x/time/rate"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/retryz"
	"github.com/steadyhq/retry/shed"
)

// okRT answers every request with 200 and no body, on the caller's
// goroutine.
type okRT struct{}

func (okRT) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
}

// TestServedAllocs: a call that succeeds through every gate allocates
// nothing, nor does a shed admission, while the page shows them: with an
// event stream open and the page read between the runs. (Built without
// -race, which changes allocation counts; the Transport's request costs
// what okRT's response does, and the same unshown.)
func TestServedAllocs(t *testing.T) {
	ctx := context.Background()
	gates := func() []retry.Option {
		return []retry.Option{retry.WithKey("dep"), retry.WithBreaker(retry.Breaker{PerKey: true}), retry.WithBudget(retry.Budget{PerKey: true}),
			retry.WithRateLimit(retry.RateLimit{Limit: rate.Inf, PerKey: true}), retry.WithThrottle(retry.Throttle{PerKey: true}),
			retry.WithConcurrency(retry.Concurrency{PerKey: true})}
	}
	r := retry.New(gates()...)
	shown := retry.NewTransport(okRT{}, gates()...)
	unshown := retry.NewTransport(okRT{}, gates()...)
	sh, err := shed.New(shed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := retryz.New()
	h.AddRetrier("r", r)
	h.AddTransport("t", shown)
	h.AddShedder("s", sh)
	srv := serve(t, h)
	events, err := srv.Client().Get(srv.URL + "/debug/retry/?format=events")
	if err != nil {
		t.Fatal(err)
	}
	defer events.Body.Close()
	readEvent(t, bufio.NewScanner(events.Body)) // the stream is open and has read the sources

	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
	transport := func(tr *retry.Transport) func() {
		return func() {
			resp, _ := tr.RoundTrip(req)
			resp.Body.Close()
		}
	}
	fn := func(context.Context) error { return nil }
	base := testing.AllocsPerRun(500, transport(unshown))
	tests := []struct {
		name string
		run  func()
		want float64
	}{
		{name: "Retrier", run: func() { _ = r.Run(ctx, fn) }, want: 0},
		{name: "Transport", run: transport(shown), want: base},
		{name: "Shedder", run: func() {
			tk, _ := sh.Admit(ctx, shed.Request{})
			sh.Done(tk)
		}, want: 0},
	}
	for _, tt := range tests {
		snapshot(t, srv, "") // a reading between the runs
		if got := testing.AllocsPerRun(500, tt.run); got != tt.want {
			t.Errorf("%s: %v allocs a call while shown, want %v", tt.name, got, tt.want)
		}
	}
	runtime.KeepAlive(r)
}
