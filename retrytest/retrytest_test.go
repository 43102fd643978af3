package retrytest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/retrytest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	errA = errors.New("a")
	errB = errors.New("b")
)

func TestFunc(t *testing.T) {
	tests := []struct {
		name  string
		f     *retrytest.Func[string]
		calls int
		want  []error // what each call returns
		value string  // the value of a success
	}{
		{name: "zero value", f: new(retrytest.Func[string]), calls: 2, want: []error{nil, nil}},
		{name: "errors in order", f: retrytest.NewFunc("v", errA, errB), calls: 4, want: []error{errA, errB, nil, nil}, value: "v"},
		{name: "nil in the script succeeds", f: retrytest.NewFunc("v", errA, nil, errB), calls: 3, want: []error{errA, nil, errB}, value: "v"},
		{name: "fail n", f: retrytest.FailN(3, errA, "v"), calls: 4, want: []error{errA, errA, errA, nil}, value: "v"},
		{name: "fail zero", f: retrytest.FailN(0, errA, "v"), calls: 1, want: []error{nil}, value: "v"},
		{name: "fail negative", f: retrytest.FailN(-1, errA, "v"), calls: 1, want: []error{nil}, value: "v"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.calls {
				v, err := tt.f.Do(context.Background())
				if err != tt.want[i] {
					t.Errorf("call %d: err = %v, want %v", i+1, err, tt.want[i])
				}
				if err == nil && v != tt.value {
					t.Errorf("call %d: value = %q, want %q", i+1, v, tt.value)
				}
				if err != nil && v != "" {
					t.Errorf("call %d: value = %q on failure, want zero", i+1, v)
				}
			}
			calls := tt.f.Calls()
			if len(calls) != tt.calls || tt.f.Count() != tt.calls {
				t.Fatalf("recorded %d calls (Count %d), want %d", len(calls), tt.f.Count(), tt.calls)
			}
			for i, c := range calls {
				if c.Err != tt.want[i] || c.Attempt != 1 || c.Time.IsZero() {
					t.Errorf("call %d recorded as %+v", i+1, c)
				}
			}
		})
	}
}

func TestFuncWithDo(t *testing.T) {
	tests := []struct {
		name       string
		fails      int
		attempts   int
		wantCalls  int
		wantReason retry.Reason
	}{
		{name: "success after retries", fails: 2, attempts: 3, wantCalls: 3},
		{name: "exhausted", fails: 3, attempts: 3, wantCalls: 3, wantReason: retry.ReasonExhausted},
		{name: "success at once", attempts: 3, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := retrytest.FailN(tt.fails, errA, 7)
			p := retry.Policy{MaxAttempts: tt.attempts, Backoff: retry.Immediate}
			err := retry.Run(context.Background(), f.Run, retry.WithPolicy(p))
			var re *retry.Error
			if tt.wantReason == "" && err != nil || tt.wantReason != "" && (!errors.As(err, &re) || re.Reason != tt.wantReason) {
				t.Fatalf("err = %v, want reason %q", err, tt.wantReason)
			}
			var attempts []int
			for _, c := range f.Calls() {
				attempts = append(attempts, c.Attempt)
			}
			want := make([]int, tt.wantCalls)
			for i := range want {
				want[i] = i + 1
			}
			if !slices.Equal(attempts, want) {
				t.Errorf("attempts recorded = %v, want %v", attempts, want)
			}
		})
	}
}

func TestRepeat(t *testing.T) {
	s := retrytest.Step{Status: 503}
	if got := retrytest.Repeat(3, s); len(got) != 3 || got[0].Status != 503 || got[2].Status != 503 {
		t.Errorf("Repeat(3) = %v", got)
	}
	if got := retrytest.Repeat(-2, s); len(got) != 0 {
		t.Errorf("Repeat(-2) = %v, want empty", got)
	}
}

// answer is what a plain client got for one request.
type answer struct {
	status int
	body   string
	header string // the value of Retry-After
	typ    string // TypeOf the error, when there was no response
}

func get(client *http.Client, url string) answer {
	resp, err := client.Get(url)
	if err != nil {
		return answer{typ: retry.TypeOf(err)}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: string(b), header: resp.Header.Get("Retry-After")}
}

var scripts = []struct {
	name  string
	steps []retrytest.Step
	want  []answer
}{
	{name: "empty script succeeds", want: []answer{{status: 200}, {status: 200}}},
	{
		name: "statuses, headers and bodies, then success",
		steps: []retrytest.Step{
			{Status: 503, Body: "busy"},
			{Status: 429, Header: http.Header{"Retry-After": {"7"}}},
			{Body: "ok"},
		},
		want: []answer{{status: 503, body: "busy"}, {status: 429, header: "7"}, {status: 200, body: "ok"}, {status: 200}},
	},
	{
		name:  "reset",
		steps: []retrytest.Step{{Reset: true}, {Status: 500}},
		want:  []answer{{typ: "net.connection_reset"}, {status: 500}, {status: 200}},
	},
	{
		name:  "delay",
		steps: []retrytest.Step{{Delay: 5 * time.Millisecond, Status: 502}},
		want:  []answer{{status: 502}, {status: 200}},
	},
}

func TestServer(t *testing.T) {
	for _, tt := range scripts {
		t.Run(tt.name, func(t *testing.T) {
			srv := retrytest.NewServer(tt.steps...)
			defer srv.Close()
			tr := &http.Transport{DisableKeepAlives: true}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			var got []answer
			for range tt.want {
				got = append(got, get(client, srv.URL+"/x?n=1"))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("answers = %+v, want %+v", got, tt.want)
			}
			checkRecords(t, srv.Requests(), len(tt.want), len(tt.steps), "/x?n=1")
		})
	}
}

func TestTransport(t *testing.T) {
	for _, tt := range scripts {
		t.Run(tt.name, func(t *testing.T) {
			tr := retrytest.NewTransport(tt.steps...)
			client := &http.Client{Transport: tr}
			var got []answer
			for range tt.want {
				got = append(got, get(client, "http://svc.test/x?n=1"))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("answers = %+v, want %+v", got, tt.want)
			}
			checkRecords(t, tr.Requests(), len(tt.want), len(tt.steps), "http://svc.test/x?n=1")
		})
	}
}

func checkRecords(t *testing.T, reqs []retrytest.Request, n, steps int, url string) {
	t.Helper()
	if len(reqs) != n {
		t.Fatalf("recorded %d requests, want %d", len(reqs), n)
	}
	for i, r := range reqs {
		wantStep := i
		if i >= steps {
			wantStep = -1
		}
		if r.Method != http.MethodGet || r.URL != url || r.Step != wantStep || r.Time.IsZero() {
			t.Errorf("request %d recorded as %+v, want GET %s step %d", i, r, url, wantStep)
		}
	}
}

func TestServerRecordsBody(t *testing.T) {
	srv := retrytest.NewServer()
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("payload"))
	req.Header.Set("Idempotency-Key", "k1")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r := srv.Requests()[0]
	if string(r.Body) != "payload" || r.Header.Get("Idempotency-Key") != "k1" || r.Method != http.MethodPost {
		t.Errorf("recorded %+v", r)
	}
}

// The retry Transport against a scripted server: every step is one attempt.
func TestServerWithRetryTransport(t *testing.T) {
	srv := retrytest.NewServer(
		retrytest.Step{Status: 503},
		retrytest.Step{Reset: true},
		retrytest.Step{Status: 429, Header: http.Header{"Retry-After": {"0"}}},
		retrytest.Step{Body: "done"},
	)
	defer srv.Close()
	base := &http.Transport{DisableKeepAlives: true}
	defer base.CloseIdleConnections()
	var types []string
	client := &http.Client{Transport: retry.NewTransport(base,
		retry.WithPolicy(retry.Policy{MaxAttempts: 5, InitialInterval: time.Millisecond}),
		retry.OnRetry(func(ev retry.Event) { types = append(types, ev.Type) }))}
	got := get(client, srv.URL)
	if got != (answer{status: 200, body: "done"}) {
		t.Errorf("answer = %+v", got)
	}
	want := []string{"http.5xx.503", "net.connection_reset", "http.4xx.429"}
	if !slices.Equal(types, want) {
		t.Errorf("retried on %v, want %v", types, want)
	}
	if srv.Count() != 4 || len(srv.Waits()) != 3 {
		t.Errorf("server saw %d requests, %d waits; want 4 and 3", srv.Count(), len(srv.Waits()))
	}
}

// Close ends a step's Delay at once: the client sees no response.
func TestServerCloseCutsDelay(t *testing.T) {
	srv := retrytest.NewServer(retrytest.Step{Delay: time.Hour})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	done := make(chan answer)
	go func() { done <- get(&http.Client{Transport: tr}, srv.URL) }()
	for srv.Count() == 0 {
		time.Sleep(time.Millisecond)
	}
	srv.Close()
	if got := <-done; got.status != 0 {
		t.Errorf("answer = %+v, want no response", got)
	}
}

// A request whose context ends during a Transport step's Delay gets the
// context's error.
func TestTransportDelayCanceled(t *testing.T) {
	tr := retrytest.NewTransport(retrytest.Step{Delay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test/", nil)
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's deadline", err)
	}
}

type closeCounter struct {
	io.Reader
	closes int
}

func (c *closeCounter) Close() error { c.closes++; return nil }

func TestTransportClosesBody(t *testing.T) {
	for _, st := range []retrytest.Step{{}, {Reset: true}} {
		body := &closeCounter{Reader: strings.NewReader("x")}
		req, _ := http.NewRequest(http.MethodPut, "http://svc.test/", body)
		resp, err := retrytest.NewTransport(st).RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if body.closes != 1 {
			t.Errorf("step %+v: body closed %d times, want 1", st, body.closes)
		}
	}
}
