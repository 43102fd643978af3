package grpc

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/steadyhq/retry"
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
// retry.WithKeyedRateLimit); the key also names the call in events and
// dead-letter records.
func PerMethod() Option {
	return optionFunc(func(c *config) { c.perMethod = true })
}

// RetryableCodes sets the status codes that are retried, gRFC A6's
// retryableStatusCodes; the default is codes.Unavailable alone. A
// codes.ResourceExhausted with server pushback is retried whatever the set
// (see the package documentation); list "grpc.resource_exhausted" in the
// policy's non_retryable_errors to stop it. codes.OK is not an error and may
// not be listed: every call then fails with an error saying so.
func RetryableCodes(cs ...codes.Code) Option {
	return optionFunc(func(c *config) {
		c.codes = map[codes.Code]bool{}
		for _, code := range cs {
			if code == codes.OK {
				c.err = fmt.Errorf("retry: grpc: option RetryableCodes: value %v: must be an error code, not OK", code)
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
	k key
	r *retry.Retrier
}

// key identifies the Retrier of a call: its target and, with PerMethod, its
// method.
type key struct{ target, method string }

func newConfig(r *retry.Retrier, opts []Option) *config {
	if r == nil {
		r = retry.New()
	}
	c := &config{r: r}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	return c
}

// retryable reports whether the status code is retried.
func (c *config) retryable(code codes.Code) bool {
	if c.codes == nil {
		return code == codes.Unavailable
	}
	return c.codes[code]
}

// retrier returns the Retrier for a call to method on target: one derived
// from the interceptor's Retrier per key, sharing its state, with the key
// set. The lookup takes no lock and allocates nothing; the last key looked
// up is answered without hashing, and a key seen for the first time copies
// the map. Past maxKeys keys, a call's Retrier is derived for that call
// alone, with the same key and state.
func (c *config) retrier(target, method string) *retry.Retrier {
	if !c.perMethod {
		method = ""
	}
	k := key{target, method}
	if l := c.last.Load(); l != nil && l.k == k {
		return l.r
	}
	var e *keyedRetrier
	if m := c.keyed.Load(); m != nil {
		e = (*m)[k]
	}
	if e == nil {
		e = c.add(k)
	}
	c.last.Store(e)
	return e.r
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
	e := &keyedRetrier{k, retry.New(c.r, retry.WithKey(k.target+k.method))}
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
