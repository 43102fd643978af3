package shed

import (
	"net/http"
	"strconv"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/internal/typednil"
)

// envoyAttemptHeader is Envoy's attempt count, one-based like
// retry.AttemptHeader.
const envoyAttemptHeader = "X-Envoy-Attempt-Count"

// maxAttempt is the highest attempt number read from a header; larger
// numbers count as it.
const maxAttempt = 1_000_000

// Handler returns next behind the Shedder: each request is admitted or
// shed as Admit says, its priority from Options.Priority, its attempt
// from the Retry-Attempt (retry.AttemptHeader) or x-envoy-attempt-count
// field (the higher of the two; see ParseAttempt), its client from
// Options.Client.
//
// An admitted request that is attempt n >= 2 of its caller is served
// under retry.WithInboundAttempt(ctx, n); others get the request as it
// came (no copy, no wrapped ResponseWriter). Its permit is given back when
// next returns or panics (the panic goes on to net/http). With a quota,
// the RateLimit and RateLimit-Policy fields are set before next runs.
//
// A shed request gets 503 Service Unavailable (429 Too Many Requests for
// ReasonQuota), Retry-After in whole seconds (Refusal.RetryAfter: for
// overload rounded to the nearest, within [1, MaxRetryAfter]; for
// ReasonQuota rounded up, equal to the RateLimit field's t),
// Cache-Control: no-store (the answer holds for this moment only), and a
// one-line text body such as "shed: server overloaded, retry after 3 s".
// Over HTTP/1.x the refusal of a request that has a body also closes the
// connection (Connection: close), so that a client still sending its body
// gets the answer at once; Handler never reads the body of a request it
// sheds.
//
// A nil next, or a typed nil such as http.HandlerFunc(nil), gives a
// handler that answers every request 500 with the body "shed:
// Handler(nil): no handler to serve"; a nil or zero Shedder gives next
// itself.
func (s *Shedder) Handler(next http.Handler) http.Handler {
	if typednil.Is(next) {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "shed: Handler(nil): no handler to serve", http.StatusInternalServerError)
		})
	}
	if s == nil || s.lim == nil {
		return next
	}
	return &handler{s: s, next: next}
}

type handler struct {
	s    *Shedder
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.s
	req := Request{Attempt: attemptOf(r.Header)}
	if s.opts.Priority != nil {
		req.Priority = s.opts.Priority(r)
	}
	c := noClient
	if s.quota != nil || s.share != nil {
		c = s.clientOfRequest(r)
	}
	t, no := s.admit(r.Context(), req, c)
	if no != nil {
		s.writeRefusal(w, r, no)
		return
	}
	defer s.Done(t)
	if t.quota.on {
		t.quota.setFields(w.Header())
	}
	if req.Attempt >= 2 {
		r = r.WithContext(retry.WithInboundAttempt(r.Context(), req.Attempt))
	}
	h.next.ServeHTTP(w, r)
}

// writeRefusal answers a shed request. Over HTTP/1.x, a request whose
// body was sent is answered with Connection: close: net/http would
// otherwise read up to 256 KiB of the unread body before it sent the
// answer, and a client whose body stalls or never ends would never get it.
func (s *Shedder) writeRefusal(w http.ResponseWriter, r *http.Request, no *Refusal) {
	h := w.Header()
	if r.ProtoMajor == 1 && r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		h.Set("Connection", "close")
	}
	if no.quota.on {
		no.quota.setFields(h)
	}
	code, what := http.StatusServiceUnavailable, "server overloaded"
	switch no.Reason {
	case ReasonQuota:
		code, what = http.StatusTooManyRequests, "quota exceeded"
	case ReasonClient:
		what = "too many requests of this client in progress"
	}
	var n int64
	if no.Reason == ReasonQuota {
		n = seconds(no.RetryAfter, no.quota.window) // the RateLimit field's t
	} else {
		n = nearestSeconds(no.RetryAfter, s.opts.MaxRetryAfter)
	}
	secs := strconv.FormatInt(n, 10)
	h.Set("Retry-After", secs)
	h.Set("Cache-Control", "no-store")
	http.Error(w, "shed: "+what+", retry after "+secs+" s", code)
}

// attemptOf returns the attempt number that h's Retry-Attempt or
// x-envoy-attempt-count field says, the higher of the two; 0 when neither
// says one.
func attemptOf(h http.Header) int {
	n := 0
	if v := h[retry.AttemptHeader]; len(v) > 0 {
		n = ParseAttempt(v[0])
	}
	if v := h[envoyAttemptHeader]; len(v) > 0 {
		n = max(n, ParseAttempt(v[0]))
	}
	return n
}

// ParseAttempt returns the attempt number of a Retry-Attempt or
// x-envoy-attempt-count value: a decimal number of ASCII digits, at most
// 1,000,000 (a larger one counts as 1,000,000, since it is a retry all the
// same). Anything else ("", "abc", "-1", "+2", " 2", "2.0") returns 0, as
// for a request without the field: a client can always leave it out, so
// a malformed value gains nothing over none.
func ParseAttempt(v string) int {
	if v == "" {
		return 0
	}
	n := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = min(n*10+int(c-'0'), maxAttempt)
	}
	return n
}
