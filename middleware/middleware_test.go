package middleware_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/middleware"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a RoundTripper middleware that appends its name to a log on
// every request it sees.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

func (r *recorder) mw(name string) middleware.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			r.add(name + ">")
			resp, err := next.RoundTrip(req)
			r.add("<" + name)
			return resp, err
		})
	}
}

func TestChainOrder(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		nils  []int // positions of nil middlewares inserted
		want  string
	}{
		{name: "none", want: "base"},
		{name: "one", names: []string{"a"}, want: "a> base <a"},
		{name: "three", names: []string{"a", "b", "c"}, want: "a> b> c> base <c <b <a"},
		{name: "nil skipped", names: []string{"a", "b"}, nils: []int{0, 2}, want: "a> b> base <b <a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec recorder
			base := middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
				rec.add("base")
				return &http.Response{StatusCode: 204, Body: http.NoBody, Request: req}, nil
			})
			var mws []middleware.RoundTripper
			for _, n := range tt.names {
				mws = append(mws, rec.mw(n))
			}
			for _, i := range tt.nils {
				mws = slices.Insert(mws, i, nil)
			}
			req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
			if _, err := middleware.Chain(base, mws...).RoundTrip(req); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(rec.log, " "); got != tt.want {
				t.Errorf("order = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestChainNilBase(t *testing.T) {
	if got := middleware.Chain(nil); got != http.DefaultTransport {
		t.Errorf("Chain(nil) = %T, want http.DefaultTransport", got)
	}
}

// Where the retry middleware sits decides what each middleware sees: outside
// it one request, inside it every attempt.
func TestRetryPosition(t *testing.T) {
	tests := []struct {
		name       string
		order      []string // "trace", "retry", "auth", outermost first
		wantTraces int
		wantTokens []string // Authorization seen by the server, per attempt
	}{
		{name: "trace, retry, auth", order: []string{"trace", "retry", "auth"}, wantTraces: 1, wantTokens: []string{"t1", "t2", "t3"}},
		{name: "auth outside retry reuses the token", order: []string{"trace", "auth", "retry"}, wantTraces: 1, wantTokens: []string{"t1", "t1", "t1"}},
		{name: "trace inside retry sees every attempt", order: []string{"retry", "trace", "auth"}, wantTraces: 3, wantTokens: []string{"t1", "t2", "t3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu   sync.Mutex
				seen []string
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
				n := len(seen)
				mu.Unlock()
				if n < 3 {
					w.WriteHeader(http.StatusBadGateway)
				}
			}))
			defer srv.Close()

			var traces, tokens atomic.Int32
			named := map[string]middleware.RoundTripper{
				"trace": func(next http.RoundTripper) http.RoundTripper {
					return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
						traces.Add(1)
						return next.RoundTrip(req)
					})
				},
				"auth": func(next http.RoundTripper) http.RoundTripper {
					return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
						req = req.Clone(req.Context())
						req.Header.Set("Authorization", "Bearer t"+string(rune('0'+tokens.Add(1))))
						return next.RoundTrip(req)
					})
				},
				"retry": middleware.Retry(retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate})),
			}
			var mws []middleware.RoundTripper
			for _, n := range tt.order {
				mws = append(mws, named[n])
			}
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			client := &http.Client{Transport: middleware.Chain(base, mws...)}
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status = %d, want 200", resp.StatusCode)
			}
			if got := int(traces.Load()); got != tt.wantTraces {
				t.Errorf("trace middleware ran %d times, want %d", got, tt.wantTraces)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, tt.wantTokens) {
				t.Errorf("tokens seen = %v, want %v", seen, tt.wantTokens)
			}
		})
	}
}

func TestChainFuncOrder(t *testing.T) {
	var log []string
	mw := func(name string) middleware.Func[string] {
		return func(next func(context.Context) (string, error)) func(context.Context) (string, error) {
			return func(ctx context.Context) (string, error) {
				log = append(log, name+">")
				v, err := next(ctx)
				log = append(log, "<"+name)
				return v + name, err
			}
		}
	}
	fn := func(context.Context) (string, error) { log = append(log, "fn"); return "", nil }
	tests := []struct {
		name    string
		mws     []middleware.Func[string]
		want    string
		wantVal string
	}{
		{name: "none", want: "fn"},
		{name: "two", mws: []middleware.Func[string]{mw("a"), mw("b")}, want: "a> b> fn <b <a", wantVal: "ba"},
		{name: "nil skipped", mws: []middleware.Func[string]{nil, mw("a"), nil}, want: "a> fn <a", wantVal: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log = nil
			v, err := middleware.ChainFunc(fn, tt.mws...)(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(log, " "); got != tt.want {
				t.Errorf("order = %q, want %q", got, tt.want)
			}
			if v != tt.wantVal {
				t.Errorf("value = %q, want %q", v, tt.wantVal)
			}
		})
	}
}

var errFlaky = errors.New("flaky")

func TestRetryFunc(t *testing.T) {
	tests := []struct {
		name       string
		fails      int
		attempts   int
		wantCalls  int
		wantReason retry.Reason
	}{
		{name: "success at once", attempts: 3, wantCalls: 1},
		{name: "success after two failures", fails: 2, attempts: 3, wantCalls: 3},
		{name: "exhausted", fails: 5, attempts: 3, wantCalls: 3, wantReason: retry.ReasonExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: tt.attempts, Backoff: retry.Immediate}))
			calls := 0
			fn := func(context.Context) (int, error) {
				calls++
				if calls <= tt.fails {
					return 0, errFlaky
				}
				return 7, nil
			}
			call := middleware.ChainFunc(fn, middleware.RetryFunc[int](r))
			v, err := call(context.Background())
			if calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tt.wantCalls)
			}
			var re *retry.Error
			switch {
			case tt.wantReason == "" && (err != nil || v != 7):
				t.Errorf("got (%d, %v), want (7, nil)", v, err)
			case tt.wantReason != "" && (!errors.As(err, &re) || re.Reason != tt.wantReason):
				t.Errorf("err = %v, want reason %v", err, tt.wantReason)
			}
			// The middleware shares the Retrier's state.
			if got := r.Stats().Attempts; got != int64(tt.wantCalls) {
				t.Errorf("Stats().Attempts = %d, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestRetryTransportState(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1)%2 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond}))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: middleware.Chain(base, middleware.Retry(r))}
	for range 3 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if s := r.Stats(); s.Calls != 3 || s.Retried != 3 {
		t.Errorf("Stats = %d calls, %d retried; want 3 and 3 (state shared with the Retrier)", s.Calls, s.Retried)
	}
}
