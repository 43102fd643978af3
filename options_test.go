package retry_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/steadyhq/retry"
)

// optionErrorShape is the shape of every option's error: the option, the
// field (or the argument of an option of one value), the value and the rule.
var optionErrorShape = regexp.MustCompile(`^retry: option With[A-Za-z]+: [A-Za-z]+ = [^:]+: [^:].*$`)

// TestOptionErrors: every option refuses a bad value with one error of the
// same shape, "retry: option <Option>: <field> = <value>: <rule>", which
// every call of the Retrier returns without running fn.
func TestOptionErrors(t *testing.T) {
	tests := []struct {
		name string
		opt  retry.Option
		want string
	}{
		{name: "attempt timeout", opt: retry.WithAttemptTimeout(-time.Second), want: "retry: option WithAttemptTimeout: timeout = -1s: must be >= 0"},
		{name: "max elapsed", opt: retry.WithMaxElapsed(-time.Second), want: "retry: option WithMaxElapsed: limit = -1s: must be >= 0"},
		{name: "max server delay", opt: retry.WithMaxServerDelay(0), want: "retry: option WithMaxServerDelay: limit = 0s: must be > 0"},
		{name: "breaker ratio", opt: retry.WithBreaker(retry.Breaker{FailureRatio: 2}), want: "retry: option WithBreaker: FailureRatio = 2: must be in [0, 1]"},
		{name: "breaker window", opt: retry.WithBreaker(retry.Breaker{Window: -time.Second}), want: "retry: option WithBreaker: Window = -1s: must be >= 0"},
		{name: "rate limit", opt: retry.WithRateLimit(retry.RateLimit{}), want: "retry: option WithRateLimit: Limit = 0: must be > 0 attempts per second (rate.Inf for no limit)"},
		{name: "rate limit burst", opt: retry.WithRateLimit(retry.RateLimit{Limit: rate.Inf, Burst: -1}), want: "retry: option WithRateLimit: Burst = -1: must be >= 0 (0 means 1)"},
		{name: "hedge percentile", opt: retry.WithHedge(retry.Hedge{Percentile: 100}), want: "retry: option WithHedge: Percentile = 100: must be above 0 and below 100"},
		{name: "hedge ceiling", opt: retry.WithHedge(retry.Hedge{Floor: time.Second, Ceiling: time.Millisecond}), want: "retry: option WithHedge: Ceiling = 1ms: must be >= Floor (1s)"},
		{name: "budget ratio", opt: retry.WithBudget(retry.Budget{Ratio: math.NaN()}), want: "retry: option WithBudget: Ratio = NaN: must be in [0, 1000], or -1 for none"},
		{name: "budget window", opt: retry.WithBudget(retry.Budget{Window: -time.Second}), want: "retry: option WithBudget: Window = -1s: must be >= 0"},
		{name: "dead letter timeout", opt: retry.WithDeadLetter(retry.DeadLetters{Timeout: -time.Second}), want: "retry: option WithDeadLetter: Timeout = -1s: must be >= 0 (0 means 10 s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := false
			err := retry.Run(context.Background(), func(context.Context) error { ran = true; return nil }, tt.opt)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Run: %v, want %q", err, tt.want)
			}
			if ran {
				t.Error("fn ran under an invalid option")
			}
			if !optionErrorShape.MatchString(err.Error()) {
				t.Errorf("%q is not of the shape %s", err, optionErrorShape)
			}
			if got := retry.New(tt.opt).Err(); got == nil || got.Error() != tt.want {
				t.Errorf("New(...).Err() = %v, want %q", got, tt.want)
			}
		})
	}
}

// TestHTTPRefusesNothing: WithHTTP has no invalid value; its extremes do
// what HTTP's documentation says, seen in the request a dead-letter record
// keeps after a failed PUT.
func TestHTTPRefusesNothing(t *testing.T) {
	const body = `{"amount":5}`
	tests := []struct {
		name     string
		http     retry.HTTP
		body     string
		complete bool
	}{
		{name: "default keeps no body in the record", http: retry.HTTP{}, body: "", complete: false},
		{name: "record body", http: retry.HTTP{RecordBody: true}, body: body, complete: true},
		{name: "MaxInt64 keeps any body", http: retry.HTTP{MaxReplayBytes: math.MaxInt64, RecordBody: true}, body: body, complete: true},
		{name: "negative keeps nothing", http: retry.HTTP{MaxReplayBytes: math.MinInt64, RecordBody: true}, body: "", complete: false},
		{name: "below the body keeps nothing", http: retry.HTTP{MaxReplayBytes: 4, RecordBody: true}, body: "", complete: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScripted(t, step{status: 503})
			var records []retry.Event
			tr := retry.NewTransport(newBase(t), retry.WithHTTP(tt.http),
				retry.WithPolicy(retry.Policy{MaxAttempts: 1, OnExhaustion: retry.ExhaustDeadLetter}),
				retry.WithDeadLetter(retry.DeadLetters{Sink: func(_ context.Context, ev retry.Event) error { records = append(records, ev); return nil }}))
			if err := retry.New(retry.WithHTTP(tt.http)).Err(); err != nil {
				t.Fatalf("WithHTTP(%+v) refused: %v", tt.http, err)
			}
			req, err := http.NewRequest("PUT", srv.URL, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if len(records) != 1 {
				t.Fatalf("%d records, want 1", len(records))
			}
			rec, ok := records[0].Payload.(*retry.RequestRecord)
			if !ok {
				t.Fatalf("payload %T", records[0].Payload)
			}
			if string(rec.Body) != tt.body || rec.BodyComplete != tt.complete {
				t.Errorf("record body %q complete %v, want %q %v", rec.Body, rec.BodyComplete, tt.body, tt.complete)
			}
		})
	}
}
