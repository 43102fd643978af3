package retry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// secretCase is one entry of testdata/secrets.json, the corpus of secret
// shapes shared by the redaction tests of every module.
type secretCase struct {
	Name   string   `json:"name"`
	Secret string   `json:"secret"` // must never appear in what the library renders
	Text   string   `json:"text"`   // an error message carrying the secret
	URL    string   `json:"url"`    // a request URL carrying it; {host} is the server's
	Header []string `json:"header"` // a request header carrying it: name, value
}

func loadSecrets(t *testing.T) []secretCase {
	t.Helper()
	data, err := os.ReadFile("testdata/secrets.json")
	if err != nil {
		t.Fatal(err)
	}
	var corpus struct {
		Secrets []secretCase `json:"secrets"`
	}
	if err := json.Unmarshal(data, &corpus); err != nil {
		t.Fatalf("testdata/secrets.json: %v", err)
	}
	if len(corpus.Secrets) < 20 {
		t.Fatalf("testdata/secrets.json: %d shapes, want at least 20", len(corpus.Secrets))
	}
	for _, c := range corpus.Secrets {
		if c.Secret == "" || !strings.Contains(c.Text, c.Secret) ||
			c.URL != "" && !strings.Contains(c.URL, c.Secret) && !strings.Contains(c.URL, url.QueryEscape(c.Secret)) ||
			len(c.Header) != 0 && (len(c.Header) != 2 || !strings.Contains(c.Header[1], c.Secret)) {
			t.Fatalf("testdata/secrets.json: entry %q does not carry its secret where it says", c.Name)
		}
	}
	return corpus.Secrets
}

// leaks reports the forms of secret found in text: the secret itself and its
// URL-escaped forms.
func leaks(text, secret string) bool {
	for _, form := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret)} {
		if strings.Contains(text, form) {
			return true
		}
	}
	return false
}

// renderEvent renders ev the ways logs, metrics and dead-letter stores do:
// fmt of the Event without Err (Err is the real error, for programs), its
// JSON, and its payload.
func renderEvent(ev retry.Event) string {
	ev.Err = nil
	var b strings.Builder
	fmt.Fprintf(&b, "%v\n%+v\n", ev, ev)
	if js, err := json.Marshal(ev); err == nil {
		b.Write(js)
		b.WriteByte('\n')
	} else {
		fmt.Fprintf(&b, "json: %v\n", err)
	}
	if rec, ok := ev.Payload.(*retry.RequestRecord); ok && rec != nil {
		fmt.Fprintf(&b, "%+v\n%v\n%s\n", *rec, rec.Header, rec.Body)
	}
	return b.String()
}

// secretRecorder collects every Event the hooks and the sink receive, and
// the log lines of a logger at level Debug, in text and JSON.
type secretRecorder struct {
	mu     sync.Mutex
	events map[string][]retry.Event // by hook: failure, retry, giveup, alert, sink
	logs   lockedBuffer
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (r *secretRecorder) add(hook string, ev retry.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.events == nil {
		r.events = make(map[string][]retry.Event)
	}
	r.events[hook] = append(r.events[hook], ev)
}

func (r *secretRecorder) options() []retry.Option {
	return []retry.Option{
		retry.OnFailure(func(ev retry.Event) { r.add("failure", ev) }),
		retry.OnRetry(func(ev retry.Event) { r.add("retry", ev) }),
		retry.OnGiveUp(func(ev retry.Event) { r.add("giveup", ev) }),
		retry.WithDeadLetter(retry.DeadLetters{
			Sink:  func(_ context.Context, ev retry.Event) error { r.add("sink", ev); return nil },
			Alert: func(ev retry.Event) { r.add("alert", ev) },
		}),
		retry.WithLogger(slog.New(slog.NewTextHandler(&r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		retry.WithLogger(slog.New(slog.NewJSONHandler(&r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
	}
}

// check fails t if the secret appears in any event, log line or stats.
func (r *secretRecorder) check(t *testing.T, secret string, stats retry.Stats) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, hook := range []string{"failure", "retry", "giveup", "sink"} {
		if len(r.events[hook]) == 0 {
			t.Errorf("no %s event: the secret was not exercised there", hook)
		}
	}
	for hook, evs := range r.events {
		for _, ev := range evs {
			if s := renderEvent(ev); leaks(s, secret) {
				t.Errorf("%s event holds the secret %q:\n%s", hook, secret, s)
			}
		}
	}
	logs := r.logs.String()
	if strings.Count(logs, "\n") < 4 {
		t.Errorf("too few log lines to check:\n%s", logs)
	}
	if leaks(logs, secret) {
		t.Errorf("log lines hold the secret %q:\n%s", secret, logs)
	}
	js, err := json.Marshal(stats)
	if err != nil {
		t.Fatal(err)
	}
	if leaks(string(js), secret) {
		t.Errorf("Stats hold the secret %q: %s", secret, js)
	}
}

// secretPolicy retries once, then routes the failure to dead letter.
var secretPolicy = retry.WithPolicy(retry.Policy{
	MaxAttempts:     2,
	InitialInterval: time.Millisecond,
	OnExhaustion:    retry.ExhaustDeadLetter,
})

// TestSecretsDo fails calls of Do with errors carrying each secret shape,
// plain, wrapped and under verdicts, and checks that no event, dead-letter
// record or Stats shows it, while the caller's error still does.
func TestSecretsDo(t *testing.T) {
	for _, sc := range loadSecrets(t) {
		for _, wrap := range []struct {
			name string
			err  func(string) error
		}{
			{name: "plain", err: func(s string) error { return errors.New(s) }},
			{name: "wrapped", err: func(s string) error { return fmt.Errorf("charge %s: %w", "order-7", errors.New(s)) }},
			{name: "joined", err: func(s string) error { return errors.Join(errors.New("first"), errors.New(s)) }},
			{name: "after", err: func(s string) error { return retry.After(errors.New(s), time.Millisecond) }},
		} {
			t.Run(sc.Name+"/"+wrap.name, func(t *testing.T) {
				var rec secretRecorder
				r := retry.New(append(rec.options(), secretPolicy, retry.WithKey("payments"),
					retry.WithBreaker(retry.Breaker{PerKey: true}), retry.WithBudget(retry.Budget{PerKey: true}))...)
				_, err := retry.Do(context.Background(), func(context.Context) (int, error) {
					return 0, wrap.err(sc.Text)
				}, r)
				if err == nil || !strings.Contains(err.Error(), sc.Secret) {
					t.Fatalf("the caller's error lost the real cause: %v", err)
				}
				rec.check(t, sc.Secret, r.Stats())
			})
		}
	}
}

// TestSecretsTransport sends failing requests through the Transport with
// each secret shape in the URL, in a header, and in the error text of a base
// transport that quotes the full request, and checks that no event,
// dead-letter record or Stats shows it.
func TestSecretsTransport(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string // what reached the server: URL and headers
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r.URL.String()+" "+fmt.Sprint(r.Header))
		mu.Unlock()
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	for _, sc := range loadSecrets(t) {
		for _, mode := range []string{"status", "error"} {
			if sc.URL == "" && sc.Header == nil && mode == "status" {
				continue // the secret is only an error text
			}
			t.Run(sc.Name+"/"+mode, func(t *testing.T) {
				mu.Lock()
				seen = nil
				mu.Unlock()
				var rec secretRecorder
				var base http.RoundTripper = http.DefaultTransport
				if mode == "error" {
					base = &quotingTransport{text: sc.Text}
				}
				tr, trR := newCounted(base, append(rec.options(), secretPolicy,
					retry.WithBreaker(retry.Breaker{PerKey: true}), retry.WithBudget(retry.Budget{PerKey: true}),
					retry.WithRateLimit(retry.RateLimit{Limit: 1e6, Burst: 100, PerKey: true}))...)
				defer tr.CloseIdleConnections()
				target := srv.URL + "/v1/items?page=2"
				if sc.URL != "" {
					target = strings.ReplaceAll(sc.URL, "{host}", host)
				}
				req, err := http.NewRequest(http.MethodPut, target, strings.NewReader(`{"qty":1}`))
				if err != nil {
					t.Fatal(err)
				}
				if sc.Header != nil {
					req.Header.Set(sc.Header[0], sc.Header[1])
				}
				resp, err := (&http.Client{Transport: tr}).Do(req)
				switch mode {
				case "status":
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusServiceUnavailable {
						t.Fatalf("status %d, want 503", resp.StatusCode)
					}
					mu.Lock()
					reached := strings.Join(seen, "\n")
					mu.Unlock()
					// The real request carried the secret to the server
					// (a fragment never leaves the client).
					frag := strings.Contains(target[strings.Index(target, "#")+1:], sc.Secret) && strings.Contains(target, "#")
					if !frag && !leaks(reached, sc.Secret) && !strings.Contains(reached, "Authorization:[Basic") {
						t.Fatalf("the request did not carry the secret: %s", reached)
					}
				case "error":
					if err == nil || !strings.Contains(err.Error(), sc.Secret) {
						t.Fatalf("the caller's error lost the real cause: %v", err)
					}
				}
				rec.check(t, sc.Secret, trR.Stats())
			})
		}
	}
}

// quotingTransport fails every request with an error quoting the request in
// full, credentials included, as careless wrappers do.
type quotingTransport struct{ text string }

func (q *quotingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return nil, fmt.Errorf("%s %s %v: %s: %w", req.Method, req.URL.String(), req.Header, q.text, io.ErrUnexpectedEOF)
}
