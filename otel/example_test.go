package otel_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/steadyhq/retry"
	retryotel "github.com/steadyhq/retry/otel"
	"github.com/steadyhq/retry/retrytest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Metrics of a Transport and an event per attempt on the caller's span.
func Example() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())

	m, err := retryotel.NewMetrics(mp)
	if err != nil {
		fmt.Println(err)
		return
	}
	// A scripted backend: busy twice, then fine.
	backend := retrytest.NewTransport(retrytest.Step{Status: 503}, retrytest.Step{Status: 503})
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}),
		m.Option())
	tr := retry.NewTransport(retryotel.Transport(backend), r)
	reg, err := m.Observe(r)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Unregister()

	ctx, span := tp.Tracer("shop").Start(context.Background(), "GET /stock")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://inventory.test/stock", nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err == nil {
		resp.Body.Close()
	}
	span.End()

	for _, ev := range spans.Ended()[0].Events() {
		fmt.Print(ev.Name)
		for _, kv := range ev.Attributes {
			fmt.Printf(" %s=%s", kv.Key, kv.Value.String())
		}
		fmt.Println()
	}
	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, metric := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := metric.Data.(metricdata.Sum[int64]); ok && len(sum.DataPoints) == 1 && metric.Name != "retry.dead_letters" && metric.Name != "retry.denials" {
			fmt.Println(metric.Name, sum.DataPoints[0].Value)
		}
	}
	// Output:
	// retry.attempt retry.attempt=1 http.response.status_code=503 error.type=503
	// retry.attempt retry.attempt=2 http.request.resend_count=1 http.response.status_code=503 error.type=503
	// retry.attempt retry.attempt=3 http.request.resend_count=2 http.response.status_code=200
	// retry.calls 1
	// retry.attempts 3
	// retry.failures 2
	// retry.retries 2
	// retry.hedges 0
	// retry.hedge_wins 0
}
