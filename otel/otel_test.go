package otel_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retryotel "github.com/steadyhq/retry/otel"
	"github.com/steadyhq/retry/retrytest"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// collect reads every metric of the reader into name → points.
func collect(t *testing.T, rd *sdkmetric.ManualReader) map[string][]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]point{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != retryotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, retryotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{attrs: p.Attributes, value: float64(p.Value)})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{attrs: p.Attributes, value: float64(p.Value)})
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{attrs: p.Attributes, value: p.Value})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{attrs: p.Attributes, value: p.Sum, count: p.Count})
				}
			default:
				t.Errorf("metric %s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

type point struct {
	attrs attribute.Set
	value float64
	count uint64 // histograms
}

// find returns the point of name whose attributes include kvs.
func find(points map[string][]point, name string, kvs ...attribute.KeyValue) (point, bool) {
	for _, p := range points[name] {
		ok := true
		for _, kv := range kvs {
			if v, has := p.attrs.Value(kv.Key); !has || v != kv.Value {
				ok = false
			}
		}
		if ok {
			return p, true
		}
	}
	return point{}, false
}

var errBusy = errors.New("busy")

func TestMetrics(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	defer mp.Shutdown(context.Background())
	m, err := retryotel.NewMetrics(mp, attribute.String("service", "shop"))
	if err != nil {
		t.Fatal(err)
	}
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Constant, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
		m.Option())
	reg, err := m.Observe(r, attribute.String("dependency", "inventory"))
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	// Call 1: two failures, then success. Call 2: exhausted. Call 3: a
	// non-retryable failure. Call 4: success at once.
	retry.Run(ctx, retrytest.FailN(2, errBusy, 0).Run, r)
	retry.Run(ctx, retrytest.FailN(5, errBusy, 0).Run, r)
	retry.Run(ctx, retrytest.FailN(1, &retry.StatusError{StatusCode: 404}, 0).Run, r)
	retry.Run(ctx, retrytest.FailN(0, errBusy, 0).Run, r)
	// Call 5: stopped before its first attempt (its context is done); it
	// counts as a call, not an attempt.
	done, cancel := context.WithCancel(ctx)
	cancel()
	retry.Run(done, retrytest.FailN(0, errBusy, 0).Run, r)

	points := collect(t, rd)
	common := []attribute.KeyValue{attribute.String("service", "shop")}
	observed := append(common, attribute.String("dependency", "inventory"))
	tests := []struct {
		name  string
		attrs []attribute.KeyValue
		want  float64
		count uint64
	}{
		{name: "retry.calls", attrs: observed, want: 5},
		{name: "retry.attempts", attrs: observed, want: 3 + 3 + 1 + 1},
		{name: "retry.failures", attrs: observed, want: 2 + 3 + 1},
		{name: "retry.retries", attrs: observed, want: 2 + 2},
		{name: "retry.give_ups", attrs: append(common, attribute.String("retry.reason", "exhausted"), attribute.String("error.type", "error")), want: 1},
		{name: "retry.give_ups", attrs: append(common, attribute.String("retry.reason", "non_retryable"), attribute.String("error.type", "http.4xx.404")), want: 1},
		{name: "retry.delay", attrs: append(common, attribute.String("error.type", "error")), want: 4 * 0.001, count: 4},
		{name: "retry.dead_letters", attrs: append(observed, attribute.String("retry.outcome", "failed"))},
		{name: "retry.denials", attrs: append(observed, attribute.String("retry.defence", "budget"))},
	}
	for _, tt := range tests {
		p, ok := find(points, tt.name, tt.attrs...)
		if !ok {
			t.Errorf("%s%v: no point; have %v", tt.name, tt.attrs, points[tt.name])
			continue
		}
		if p.value < tt.want-1e-9 || p.value > tt.want+1e-9 || p.count != tt.count {
			t.Errorf("%s%v = %v (count %d), want %v (count %d)", tt.name, tt.attrs, p.value, p.count, tt.want, tt.count)
		}
	}
	if p, ok := find(points, "retry.budget.balance", observed...); !ok || p.value < 0 {
		t.Errorf("retry.budget.balance = %v, %v; want a balance", p.value, ok)
	}
	if _, ok := points["retry.breaker.state"]; ok {
		t.Error("retry.breaker.state reported without a breaker")
	}

	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if points := collect(t, rd); len(points["retry.calls"]) != 0 {
		t.Errorf("observed after Unregister: %v", points["retry.calls"])
	}
}

// TestMetricsHedges: the hedges started and won, from Stats.
func TestMetricsHedges(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	defer mp.Shutdown(context.Background())
	m, err := retryotel.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	r := retry.New(retry.WithHedge(retry.Hedge{Delay: 5 * time.Millisecond}), m.Option())
	reg, err := m.Observe(r)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	// The first attempt hangs until canceled; the hedge answers.
	retry.Hedged(context.Background(), func(ctx context.Context) (int, error) {
		if retry.AttemptFrom(ctx) == 1 {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return 2, nil
	}, r)
	points := collect(t, rd)
	for name, want := range map[string]float64{"retry.hedges": 1, "retry.hedge_wins": 1, "retry.attempts": 2} {
		if p, ok := find(points, name); !ok || p.value != want {
			t.Errorf("%s = %v, %v; want %v", name, p.value, ok, want)
		}
	}
}

// TestMetricsAdaptive: adaptive throttling and the concurrency limit, per
// key, from Stats: the probability of shedding, the limit, the attempts in
// flight, and the attempts each shed as denials.
func TestMetricsAdaptive(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	defer mp.Shutdown(context.Background())
	m, err := retryotel.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
		retry.WithThrottle(retry.Throttle{K: 1, PerKey: true}),
		retry.WithConcurrency(retry.Concurrency{Initial: 1, Min: 1, Max: 1, PerKey: true}),
		retry.WithRandom(func() float64 { return 0.999 }), // shed only at p > 0.999
		m.Option())
	reg, err := m.Observe(r)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	down := errors.New("down")
	for range 5 {
		_ = retry.Run(context.Background(), func(context.Context) error { return down }, r, retry.WithKey("a"))
	}
	// One call holds the only permit of key b while another is refused.
	hold, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_ = retry.Run(context.Background(), func(context.Context) error { close(hold); <-release; return nil }, r, retry.WithKey("b"))
	}()
	<-hold
	refused := retry.Run(context.Background(), func(context.Context) error { return nil }, r, retry.WithKey("b"))
	points := collect(t, rd)
	close(release)
	<-done
	if retry.TypeOf(refused) != "concurrency.limit" {
		t.Fatalf("second call on b: %v, want the concurrency limit's refusal", refused)
	}
	key := func(k string) attribute.KeyValue { return attribute.String("retry.key", k) }
	tests := []struct {
		name string
		kvs  []attribute.KeyValue
		want float64
	}{
		{name: "retry.throttle.probability", kvs: []attribute.KeyValue{key("a")}, want: 5.0 / 6},
		{name: "retry.concurrency.limit", kvs: []attribute.KeyValue{key("b")}, want: 1},
		{name: "retry.concurrency.in_flight", kvs: []attribute.KeyValue{key("b")}, want: 1},
		{name: "retry.denials", kvs: []attribute.KeyValue{attribute.String("retry.defence", "concurrency")}, want: 1},
		{name: "retry.denials", kvs: []attribute.KeyValue{attribute.String("retry.defence", "throttle")}, want: 0},
	}
	for _, tt := range tests {
		if p, ok := find(points, tt.name, tt.kvs...); !ok || math.Abs(p.value-tt.want) > 1e-9 {
			t.Errorf("%s%v = %v, %v; want %v", tt.name, tt.kvs, p.value, ok, tt.want)
		}
	}
}

// Breakers per key and an open breaker's denials, through a Transport.
func TestMetricsBreaker(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	defer mp.Shutdown(context.Background())
	m, err := retryotel.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
		retry.WithBreaker(retry.Breaker{PerKey: true, MinRequests: 2, FailureRatio: 0.5, OpenTimeout: time.Hour, MaxWait: -1}),
		retry.WithBudget(retry.Budget{PerKey: true}),
		m.Option())
	tr := retry.NewTransport(retrytest.NewTransport(retrytest.Repeat(10, retrytest.Step{Status: 503})...), r)
	reg, err := m.Observe(r)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	client := &http.Client{Transport: tr}
	for range 3 {
		resp, err := client.Get("http://a.test/")
		if err == nil {
			resp.Body.Close()
		}
	}
	resp, err := client.Get("http://b.test/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	points := collect(t, rd)
	for _, tt := range []struct {
		name string
		key  string
		want float64
	}{
		{name: "retry.breaker.state", key: "a.test", want: 2},
		{name: "retry.breaker.state", key: "b.test"},
	} {
		p, ok := find(points, tt.name, attribute.String("retry.key", tt.key))
		if !ok || p.value != tt.want {
			t.Errorf("%s{%s} = %v, %v; want %v", tt.name, tt.key, p.value, ok, tt.want)
		}
	}
	if p, ok := find(points, "retry.denials", attribute.String("retry.defence", "breaker")); !ok || p.value != 1 {
		t.Errorf("breaker denials = %v, %v; want 1", p.value, ok)
	}
	if p, ok := find(points, "retry.give_ups", attribute.String("retry.reason", "breaker_open"), attribute.String("error.type", "breaker.open")); !ok || p.value != 1 {
		t.Errorf("breaker give-ups = %v, %v; want 1", p.value, ok)
	}
	if _, ok := find(points, "retry.budget.balance", attribute.String("retry.key", "a.test")); !ok {
		t.Errorf("no per-key budget balance: %v", points["retry.budget.balance"])
	}
}

func TestNewMetricsNil(t *testing.T) {
	if _, err := retryotel.NewMetrics(nil); err == nil {
		t.Error("NewMetrics(nil) did not fail")
	}
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	defer mp.Shutdown(context.Background())
	m, _ := retryotel.NewMetrics(mp)
	if _, err := m.Observe(nil); err == nil {
		t.Error("Observe(nil) did not fail")
	}
}

// spanEvents runs call under a recording span and returns the events of
// that span as attribute maps.
func spanEvents(t *testing.T, call func(ctx context.Context)) []map[string]string {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "call")
	call(ctx)
	span.End()
	ended := sr.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	var out []map[string]string
	for _, ev := range ended[0].Events() {
		if ev.Name != retryotel.EventName {
			t.Errorf("event %q, want %q", ev.Name, retryotel.EventName)
		}
		m := map[string]string{}
		for _, kv := range ev.Attributes {
			m[string(kv.Key)] = kv.Value.String()
		}
		out = append(out, m)
	}
	return out
}

func TestTransportEvents(t *testing.T) {
	tests := []struct {
		name  string
		steps []retrytest.Step
		want  []map[string]string
	}{
		{name: "success at once", want: []map[string]string{
			{"retry.attempt": "1", "http.response.status_code": "200"},
		}},
		{name: "503, reset, then 200", steps: []retrytest.Step{{Status: 503}, {Reset: true}, {Status: 200}}, want: []map[string]string{
			{"retry.attempt": "1", "http.response.status_code": "503", "error.type": "503"},
			{"retry.attempt": "2", "http.request.resend_count": "1", "error.type": "net.connection_reset"},
			{"retry.attempt": "3", "http.request.resend_count": "2", "http.response.status_code": "200"},
		}},
		{name: "404 is one attempt", steps: []retrytest.Step{{Status: 404}}, want: []map[string]string{
			{"retry.attempt": "1", "http.response.status_code": "404", "error.type": "404"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &http.Client{Transport: retry.NewTransport(retryotel.Transport(retrytest.NewTransport(tt.steps...)),
				retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate}))}
			got := spanEvents(t, func(ctx context.Context) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test/", nil)
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			})
			equalEvents(t, got, tt.want)
		})
	}
}

func TestFuncEvents(t *testing.T) {
	f := retrytest.NewFunc("ok", errBusy, &retry.StatusError{StatusCode: 503})
	got := spanEvents(t, func(ctx context.Context) {
		if _, err := retry.Do(ctx, retryotel.Func(f.Do), retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate})); err != nil {
			t.Fatal(err)
		}
	})
	equalEvents(t, got, []map[string]string{
		{"retry.attempt": "1", "error.type": "error"},
		{"retry.attempt": "2", "error.type": "http.5xx.503"},
		{"retry.attempt": "3"},
	})
}

// Without a recording span nothing is added and the call is unchanged.
func TestNoSpan(t *testing.T) {
	v, err := retry.Do(context.Background(), retryotel.Func(retrytest.FailN(1, errBusy, 7).Do),
		retry.WithPolicy(retry.Policy{MaxAttempts: 2, Backoff: retry.Immediate}))
	if v != 7 || err != nil {
		t.Errorf("Do = (%v, %v), want (7, nil)", v, err)
	}
}

func equalEvents(t *testing.T, got, want []map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	for i := range got {
		if len(got[i]) != len(want[i]) {
			t.Errorf("event %d = %v, want %v", i, got[i], want[i])
			continue
		}
		for k, v := range want[i] {
			if got[i][k] != v {
				t.Errorf("event %d = %v, want %v", i, got[i], want[i])
				break
			}
		}
	}
}
