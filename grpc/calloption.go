package grpc

import (
	"fmt"
	"math"
	"time"

	"github.com/steadyhq/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// A CallOption changes, for one call, what the interceptors do with it.
// Pass it among the call's grpc.CallOptions:
//
//	client.Check(ctx, req, retrygrpc.WithMax(5), retrygrpc.WithCodes(codes.Unavailable, codes.Aborted))
//
// grpc-go ignores it when no interceptor of this package runs, and the
// interceptors read it without passing anything else on. The later of two
// options that set the same thing wins. An invalid value fails the call with
// codes.Internal and an error that names the option, the value and the rule,
// before any attempt.
type CallOption struct {
	grpc.EmptyCallOption
	apply func(*callConfig)
}

// callConfig is what a call's CallOptions set.
type callConfig struct {
	set     bool // some CallOption was given
	max     int  // the policy's MaxAttempts; 0: the interceptor's
	codes   map[codes.Code]bool
	timeout time.Duration // the per-attempt timeout; 0: the interceptor's
	hedge   int8          // 1: hedge, -1: do not, 0: as the interceptor does
	// The error of the last option of each kind, nil when it was valid:
	// a later option replaces an earlier one, error and all.
	maxErr, codesErr, timeoutErr error
}

// err returns the call's configuration error, if any.
func (cc *callConfig) err() error {
	switch {
	case cc.maxErr != nil:
		return cc.maxErr
	case cc.codesErr != nil:
		return cc.codesErr
	}
	return cc.timeoutErr
}

// scan collects the CallOptions among opts.
func (cc *callConfig) scan(opts []grpc.CallOption) {
	*cc = callConfig{}
	for _, o := range opts {
		if co, ok := o.(CallOption); ok {
			cc.add(co)
		}
	}
}

// add applies one CallOption; the zero CallOption does nothing.
func (cc *callConfig) add(co CallOption) {
	if co.apply != nil {
		cc.set = true
		co.apply(cc)
	}
}

// Disable makes the call a single attempt: no retry and no hedge. The
// breaker and the rate limiter still see it, and may refuse it, and its
// error is reported as for any call.
func Disable() CallOption {
	return CallOption{apply: func(cc *callConfig) { cc.max, cc.hedge, cc.maxErr = 1, -1, nil }}
}

// WithMax sets the call's maximum attempts, the first one, retries and
// hedges included, in place of the policy's MaxAttempts. n must be at
// least 1, and within the policy's bound (2147483647); 1 is Disable.
func WithMax(n int) CallOption {
	return CallOption{apply: func(cc *callConfig) {
		if n < 1 || n > math.MaxInt32 {
			cc.maxErr = fmt.Errorf("retry: grpc: call option WithMax: n = %d: must be in [1, %d]", n, math.MaxInt32)
			return
		}
		cc.max, cc.maxErr = n, nil
	}}
}

// WithCodes sets the status codes the call retries, and on which a hedged
// call starts its next hedge at once (A6's nonFatalStatusCodes), in place
// of the interceptor's RetryableCodes. No code at all makes every status
// final, but for RESOURCE_EXHAUSTED with a pushback, which is retried
// whatever the set, as with RetryableCodes. codes.OK is not an error and
// may not be listed.
func WithCodes(cs ...codes.Code) CallOption {
	set := make(map[codes.Code]bool, len(cs))
	var err error
	for _, c := range cs {
		if c == codes.OK {
			err = fmt.Errorf("retry: grpc: call option WithCodes: codes = %v: must be error codes, not OK", c)
		}
		set[c] = true
	}
	return CallOption{apply: func(cc *callConfig) {
		if err != nil {
			cc.codesErr = err
			return
		}
		cc.codes, cc.codesErr = set, nil
	}}
}

// WithAttemptTimeout bounds each attempt of the call, within the caller's
// deadline, in place of the Retrier's retry.WithAttemptTimeout. An attempt
// cut off by it has the type "timeout.attempt" and is retried. timeout
// must be greater than zero.
func WithAttemptTimeout(timeout time.Duration) CallOption {
	return CallOption{apply: func(cc *callConfig) {
		if timeout <= 0 {
			cc.timeoutErr = fmt.Errorf("retry: grpc: call option WithAttemptTimeout: timeout = %v: must be > 0", timeout)
			return
		}
		cc.timeout, cc.timeoutErr = timeout, nil
	}}
}

// WithHedge turns hedging on or off for a unary call. On, the call hedges
// with the Retrier's Hedge (retry.WithHedge), or, when the Retrier has
// none, with the zero retry.Hedge: a delay that follows the 95th
// percentile of the recent latencies of the call's key. Off, the call
// retries only. Stream calls never hedge.
func WithHedge(on bool) CallOption {
	return CallOption{apply: func(cc *callConfig) {
		cc.hedge = -1
		if on {
			cc.hedge = 1
		}
	}}
}

// retrier returns the Retrier of a call whose key's Retrier is r: r, or
// one derived from it for the call's maximum attempts and per-attempt
// timeout, sharing its state.
func (cc *callConfig) retrier(r *retry.Retrier) *retry.Retrier {
	if cc.max == 0 && cc.timeout == 0 {
		return r
	}
	opts := []retry.Option{r}
	if cc.max > 0 {
		p := r.Policy()
		p.MaxAttempts = cc.max
		opts = append(opts, retry.WithPolicy(p))
	}
	if cc.timeout > 0 {
		opts = append(opts, retry.WithAttemptTimeout(cc.timeout))
	}
	return retry.New(opts...)
}
