package grpc

import (
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/redact"
	"google.golang.org/grpc/codes"
)

// An Option configures the interceptors.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// PerMethod keys the Retrier's breaker, rate limiter and budget by target
// and method ("127.0.0.1:50051/pkg.Service/Method") instead of by target
// alone, so that one failing method does not stop the others of the same
// server. As with the target, this takes effect for the parts of the
// Retrier configured per key (retry.Breaker.PerKey, retry.Budget.PerKey,
// retry.RateLimit.PerKey) and for the adaptive hedge delay; the key also
// names the call in events and dead-letter records.
func PerMethod() Option {
	return optionFunc(func(c *config) { c.perMethod = true })
}

// RetryableCodes sets the status codes that are retried, gRFC A6's
// retryableStatusCodes, and on which a hedged call starts its next hedge at
// once, A6's nonFatalStatusCodes; the default is codes.Unavailable alone. A
// codes.ResourceExhausted with server pushback is retried whatever the set
// (see the package documentation); list "grpc.resource_exhausted" in the
// policy's non_retryable_errors to stop it. codes.OK is not an error and may
// not be listed: every call then fails with codes.Internal and an error
// saying so. WithCodes sets the codes of one call.
func RetryableCodes(cs ...codes.Code) Option {
	return optionFunc(func(c *config) {
		c.codes = map[codes.Code]bool{}
		for _, code := range cs {
			if code == codes.OK {
				c.err = &configError{fmt.Errorf("retry: grpc: option RetryableCodes: codes = %v: must be error codes, not OK", code)}
				continue
			}
			c.codes[code] = true
		}
	})
}

// maxKeys bounds the Retriers kept per interceptor, one per key; a call to
// a further key derives its Retrier afresh, which costs it an allocation.
const maxKeys = 1024

// config is the resolved configuration of an interceptor.
type config struct {
	r         *retry.Retrier
	perMethod bool
	codes     map[codes.Code]bool // nil: codes.Unavailable alone
	err       error               // an invalid option

	mu    sync.Mutex                            // serializes additions to keyed
	keyed atomic.Pointer[map[key]*keyedRetrier] // replaced whole on each addition
	// last is the key and Retrier of the latest lookup that missed it: an
	// interceptor mostly serves one connection, whose target this settles
	// without hashing.
	last atomic.Pointer[keyedRetrier]
}

// keyedRetrier is a key and the Retrier derived for it.
type keyedRetrier struct {
	k      key
	r      *retry.Retrier
	hedges bool // r has a Hedge: unary calls hedge unless told not to
	// hedger is r with the Hedge that unary calls hedge with, made on
	// first use (see hedging).
	hedger atomic.Pointer[retry.Retrier]
}

// hedging returns the Retrier a hedged unary call of the key runs under:
// r with r's own Hedge, or the zero Hedge when r has none, in either case
// without its Release, which is for the values of retry.Hedged. It is
// made once per key, so that the adaptive delay learns from every call.
func (k *keyedRetrier) hedging() *retry.Retrier {
	if h := k.hedger.Load(); h != nil {
		return h
	}
	h, _ := k.r.Hedge()
	h.Release = nil
	k.hedger.CompareAndSwap(nil, retry.New(k.r, retry.WithHedge(h)))
	return k.hedger.Load()
}

// key identifies the Retrier of a call: its target and, with PerMethod, its
// method.
type key struct{ target, method string }

func newConfig(r *retry.Retrier, opts []Option) *config {
	if r == nil {
		r = retry.New()
	}
	c := &config{r: r}
	if err := r.Err(); err != nil {
		c.err = &configError{err}
	}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	return c
}

// retryable reports whether the status code is retried under the code
// set cs, nil for codes.Unavailable alone.
func retryable(cs map[codes.Code]bool, code codes.Code) bool {
	if cs == nil {
		return code == codes.Unavailable
	}
	return cs[code]
}

// entry returns the Retrier for a call to method on target: one derived
// from the interceptor's Retrier per key, sharing its state, with the key
// set. The lookup takes no lock and allocates nothing; the last key looked
// up is answered without hashing, by an inlined call (see hit), and a key
// seen for the first time copies the map. Past maxKeys keys, a call's
// Retrier is derived for that call alone, with the same key and state.
func (c *config) entry(target, method string) *keyedRetrier {
	if e := c.hit(target, method); e != nil {
		return e
	}
	if !c.perMethod {
		method = ""
	}
	return c.lookup(key{target, method})
}

// hit returns the entry of the last key looked up when it is target's and
// method's, or nil. It is small enough to be inlined, and entry is not:
// the unary interceptor asks it first.
func (c *config) hit(target, method string) *keyedRetrier {
	if l := c.last.Load(); l != nil && same(l.k.target, target) && (!c.perMethod || l.k.method == method) {
		return l
	}
	return nil
}

// same reports whether a and b are equal, at once when they share their
// bytes: a connection's Target, and the method names of generated code,
// are the same string from call to call, and == would call
// runtime.memequal to compare them.
func same(a, b string) bool {
	return unsafe.StringData(a) == unsafe.StringData(b) && len(a) == len(b) || a == b
}

// lookup is entry for a key other than the last one.
func (c *config) lookup(k key) *keyedRetrier {
	var e *keyedRetrier
	if m := c.keyed.Load(); m != nil {
		e = (*m)[k]
	}
	if e == nil {
		e = c.add(k)
	}
	c.last.Store(e)
	return e
}

// add returns the entry of k, adding it to the map when there is room.
func (c *config) add(k key) *keyedRetrier {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[key]*keyedRetrier
	if m := c.keyed.Load(); m != nil {
		old = *m
	}
	if e, ok := old[k]; ok {
		return e
	}
	e := &keyedRetrier{k: k, r: retry.New(c.r, retry.WithKey(safeTarget(k.target)+k.method))}
	_, e.hedges = e.r.Hedge()
	if len(old) >= maxKeys {
		return e
	}
	m := make(map[key]*keyedRetrier, len(old)+1)
	for k, e := range old {
		m[k] = e
	}
	m[k] = e
	c.keyed.Store(&m)
	return e
}

// safeTarget returns a dial target as the key of events, logs, Stats, dead
// letters and metrics show it: without the credentials it may carry (a
// resolver's userinfo, dns://user:pass@host/name; a token in an endpoint,
// passthrough:///user:pass@host:443 or host?token=...), as
// redact.SanitizeURL renders a URL. A target that does not parse as a URL
// goes through redact.Sanitize.
func safeTarget(target string) string {
	if u, err := url.Parse(target); err == nil {
		return redact.SanitizeURL(u)
	}
	return redact.Sanitize(target)
}
