package sim

import (
	"context"
	"net/http"
	"time"

	"github.com/steadyhq/retry"
)

// The retry budgets of other libraries, as retry.SharedBudget models that
// run on a client's clock, to compare a rule against: give each client its
// own (Fleet.Options runs once per client), or one to all for a fleet's.
// They keep no lock: the run's clock runs one goroutine at a time, so use
// them in a run only.

// WindowBudget is the rule of Finagle's RetryBudget (Ratio 0.2, PerSecond
// 10) and of this library's budget before it counted successes (0.15, 2):
// over a sliding window of 10 s, in slices of a second, retries may reach
// Ratio times the first attempts plus PerSecond a second. It learns of
// first attempts through Observe, which Fleet.Observe must call.
type WindowBudget struct {
	Ratio, PerSecond float64
	clock            retry.Clock
	ring             [10]windowSlice
}

// windowSlice is a second of a WindowBudget's window.
type windowSlice struct {
	start           int64 // the second; 0 is unused
	firsts, retries int64
}

// NewWindowBudget returns a WindowBudget on clock (a Client's).
func NewWindowBudget(clock retry.Clock, ratio, perSecond float64) *WindowBudget {
	return &WindowBudget{Ratio: ratio, PerSecond: perSecond, clock: clock}
}

// Won does nothing: the rule counts first attempts (Observe).
func (b *WindowBudget) Won(string, int) {}

// Observe counts a first attempt as it returns, whatever its outcome; it
// has the signature of Fleet.Observe.
func (b *WindowBudget) Observe(_ context.Context, n int, _ error) {
	if n == 1 {
		b.slice(b.clock.Now()).firsts++
	}
}

// Retry grants a retry if the window's retries stay within the rule,
// whatever the failure.
func (b *WindowBudget) Retry(_ context.Context, _ string, _ bool, now time.Time) bool {
	cur := b.slice(now)
	var firsts, retries int64
	for _, s := range b.ring {
		if s.start > cur.start-int64(len(b.ring)) {
			firsts, retries = firsts+s.firsts, retries+s.retries
		}
	}
	if float64(retries+1) > b.Ratio*float64(firsts)+b.PerSecond*float64(len(b.ring)) {
		return false
	}
	cur.retries++
	return true
}

// slice returns the window's slice of now, emptied if it held an older one.
func (b *WindowBudget) slice(now time.Time) *windowSlice {
	n := now.UnixNano()/int64(time.Second) + 1
	s := &b.ring[n%int64(len(b.ring))]
	if s.start != n {
		*s = windowSlice{start: n}
	}
	return s
}

// TokenQuota is the AWS SDKs' retry quota (standard mode, as revised in
// 2026): a bucket of 500 tokens; a retry takes 14, or 5 after a throttling
// error (429); a first attempt that succeeds puts 1 back, and a retry that
// succeeds puts back what it took. It learns the outcomes of attempts
// through Observe, which Fleet.Observe must call.
type TokenQuota struct{ tokens int }

// quotaCall is what a TokenQuota knows of a call, kept with the call: its
// last failure, and what its retry in flight took.
type quotaCall struct {
	last error
	held int
}

// The rule of TokenQuota.
const (
	quotaTokens   = 500
	quotaRetry    = 14
	quotaThrottle = 5
)

// NewTokenQuota returns a full TokenQuota.
func NewTokenQuota() *TokenQuota { return &TokenQuota{tokens: quotaTokens} }

// Won does nothing: the quota learns outcomes attempt by attempt (Observe).
func (q *TokenQuota) Won(string, int) {}

// Retry takes a retry's tokens, if there are enough; a timeout costs what
// another failure costs (the 2026 revision).
func (q *TokenQuota) Retry(ctx context.Context, _ string, _ bool, _ time.Time) bool {
	cs, _ := ctx.Value(callKey{}).(*callState)
	if cs == nil {
		return false
	}
	c := &cs.quota
	cost := quotaRetry
	if se, ok := c.last.(*retry.StatusError); ok && se.StatusCode == http.StatusTooManyRequests {
		cost = quotaThrottle
	}
	if q.tokens < cost {
		return false
	}
	q.tokens -= cost
	c.held = cost
	return true
}

// Observe learns attempt n's outcome, err nil for a success; it has the
// signature of Fleet.Observe.
func (q *TokenQuota) Observe(ctx context.Context, n int, err error) {
	cs, _ := ctx.Value(callKey{}).(*callState)
	if cs == nil {
		return
	}
	c := &cs.quota
	switch {
	case err != nil:
		c.last, c.held = err, 0 // a failed retry keeps what it took
	case n == 1:
		q.tokens = min(q.tokens+1, quotaTokens)
	default:
		q.tokens = min(q.tokens+c.held, quotaTokens)
	}
}
