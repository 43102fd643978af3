package otel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retryotel "github.com/steadyhq/retry/otel"
	"github.com/steadyhq/retry/retrytest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// typedError is an error that names its own type, as a dependency's error
// may from what its server sent.
type typedError struct{ typ string }

func (e *typedError) Error() string     { return "failed: " + e.typ }
func (e *typedError) ErrorType() string { return e.typ }

// errorTypeValues returns the distinct values of error.type among the
// points of name.
func errorTypeValues(points map[string][]point, name string) map[string]bool {
	out := map[string]bool{}
	for _, p := range points[name] {
		if v, ok := p.attrs.Value("error.type"); ok {
			out[v.AsString()] = true
		}
	}
	return out
}

// The values of error.type come from a bounded set, whatever the server
// sends: a gRPC code outside the 17 and an HTTP status outside 100-599 are
// _OTHER, and types an error names for itself are kept up to 64 distinct
// ones, _OTHER after.
func TestErrorTypeBounded(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	defer mp.Shutdown(context.Background())
	m, err := retryotel.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), m.Option())
	fail := func(err error) { retry.Run(context.Background(), func(context.Context) error { return err }, r) }
	for code := 17; code < 1017; code++ { // server-chosen gRPC codes, as the grpc module types them
		fail(&typedError{typ: fmt.Sprintf("grpc.code_%d", code)})
	}
	for code := 600; code < 1000; code++ { // statuses past 599, as ResponseError types them
		fail(&retry.StatusError{StatusCode: code})
	}
	for i := range 1000 { // types an error names for itself
		fail(&typedError{typ: fmt.Sprintf("vendor.error_%d", i)})
	}
	fail(&retry.StatusError{StatusCode: 503})
	fail(&typedError{typ: "grpc.unavailable"})

	got := errorTypeValues(collect(t, rd), "retry.give_ups")
	for _, want := range []string{"_OTHER", "http.5xx.503", "grpc.unavailable", "vendor.error_0", "vendor.error_63"} {
		if !got[want] {
			t.Errorf("error.type %q not reported", want)
		}
	}
	if got["vendor.error_64"] || got["grpc.code_17"] || got["http.6xx.600"] || got["http.xxx.999"] {
		t.Errorf("error.type took a value past its bound: %d values", len(got))
	}
	if len(got) != 64+3 {
		t.Errorf("%d values of error.type, want 64 of the errors' own types, _OTHER, http.5xx.503 and grpc.unavailable", len(got))
	}
}

// On a trace event, an HTTP status outside 400-599 as error.type is _OTHER.
func TestTransportStatusTypeBounded(t *testing.T) {
	client := &http.Client{Transport: retry.NewTransport(retryotel.Transport(retrytest.NewTransport(retrytest.Step{Status: 999})),
		retry.WithPolicy(retry.Policy{MaxAttempts: 1}))}
	got := spanEvents(t, func(ctx context.Context) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test/", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	})
	equalEvents(t, got, []map[string]string{{"retry.attempt": "1", "http.response.status_code": "999", "error.type": "_OTHER"}})
}

// closeCounter counts the closes of a request body.
type closeCounter struct {
	io.Reader
	n int
}

func (c *closeCounter) Close() error { c.n++; return nil }

// A typed nil base, or a nil function, is an error when used, never a
// panic; the request's body is closed once.
func TestTypedNil(t *testing.T) {
	var base *http.Transport
	body := &closeCounter{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest(http.MethodPost, "http://svc.test/", body)
	resp, err := retryotel.Transport(base).RoundTrip(req)
	if resp != nil || err == nil || !strings.Contains(err.Error(), "base = nil: is a nil *http.Transport") {
		t.Errorf("RoundTrip = %v, %v; want an error naming the nil base", resp, err)
	}
	if body.n != 1 {
		t.Errorf("request body closed %d times, want 1", body.n)
	}
	if _, err := retryotel.Func[int](nil)(context.Background()); err == nil || !strings.Contains(err.Error(), "Func(nil)") {
		t.Errorf("Func(nil)() = %v, want an error naming it", err)
	}
}

// A hostile server's message cannot hold a call past its deadline with
// every observer on, the otel module's among them: its metrics, and the
// span events of Transport and Func. A call allowed 1 s returns within
// 2 s; the message of 60 KiB of '@' took 5.6 s per event to sanitize
// before.
func TestHostileMessageKeepsDeadline(t *testing.T) {
	const deadline, slack = time.Second, time.Second
	hostile := strings.Repeat("@", 60<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	tests := []struct {
		name string
		call func(ctx context.Context, opts []retry.Option) error
	}{
		{name: "Transport: hostile path, server's 500", call: func(ctx context.Context, opts []retry.Option) error {
			tr := retry.NewTransport(retryotel.Transport(srv.Client().Transport), opts...)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/"+hostile, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		}},
		{name: "Func: server's status message", call: func(ctx context.Context, opts []retry.Option) error {
			_, err := retry.Do(ctx, retryotel.Func(func(context.Context) (int, error) {
				return 0, errors.New("rpc error: code = Unavailable desc = " + hostile)
			}), opts...)
			if err == nil {
				return errors.New("no error from a failing function")
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rd := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
			defer mp.Shutdown(context.Background())
			m, err := retryotel.NewMetrics(mp)
			if err != nil {
				t.Fatal(err)
			}
			sr := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
			defer tp.Shutdown(context.Background())
			var events, sunk int
			r := retry.New(m.Option(),
				retry.OnFailure(func(retry.Event) { events++ }), retry.OnRetry(func(retry.Event) { events++ }),
				retry.OnGiveUp(func(retry.Event) { events++ }),
				retry.WithLogger(slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))),
				retry.WithDeadLetter(retry.DeadLetters{Sink: func(context.Context, retry.Event) error { sunk++; return nil }}),
				retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond,
					Jitter: retry.Jitter{Kind: retry.JitterNone}, OnExhaustion: retry.ExhaustDeadLetter}))
			reg, err := m.Observe(r)
			if err != nil {
				t.Fatal(err)
			}
			defer reg.Unregister()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			ctx, span := tp.Tracer("test").Start(ctx, "call")
			start := time.Now()
			err = tt.call(ctx, []retry.Option{r})
			took := time.Since(start)
			span.End()
			if took > deadline+slack {
				t.Fatalf("the call took %v with every observer on, past its deadline of %v", took, deadline)
			}
			if err != nil {
				t.Fatal(err)
			}
			points := collect(t, rd)
			if events < 5 || sunk != 1 || len(points["retry.give_ups"]) == 0 || len(sr.Ended()) != 1 || len(sr.Ended()[0].Events()) != 3 {
				t.Errorf("%d events, %d records, metrics %v, %d spans: the observers were not all exercised", events, sunk, points["retry.give_ups"], len(sr.Ended()))
			}
		})
	}
}
