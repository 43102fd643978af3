package grpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// node3 is the status a server in these tests fails with: a code, a
// message and a detail, all of which must reach the caller unchanged.
func node3(code codes.Code) *status.Status {
	st, err := status.New(code, "node-3 down").WithDetails(durationpb.New(1500 * time.Millisecond))
	if err != nil {
		panic(err)
	}
	return st
}

// TestStatusAsSent: whatever stops a call after attempts reached the
// server (exhaustion, a code that is not retried, a committed RPC, the
// budget, a pushback too long for the Retrier), status.FromError,
// status.Convert and status.Code report the last attempt's status exactly,
// code, message and details, while errors.As reaches the *retry.Error and
// its Reason.
func TestStatusAsSent(t *testing.T) {
	tests := []struct {
		name   string
		check  func(ctx context.Context, n int) error
		opts   []retry.Option
		code   codes.Code
		reason retry.Reason
		hits   int
	}{
		{name: "exhausted", check: func(context.Context, int) error { return node3(codes.Unavailable).Err() },
			code: codes.Unavailable, reason: retry.ReasonExhausted, hits: 3},
		{name: "a code not retried", check: func(context.Context, int) error { return node3(codes.InvalidArgument).Err() },
			code: codes.InvalidArgument, reason: retry.ReasonNonRetryable, hits: 1},
		{name: "the budget refuses the retry", check: func(context.Context, int) error { return node3(codes.Unavailable).Err() },
			opts: []retry.Option{retry.WithBudget(retry.Budget{Tokens: -1, Ratio: -1})},
			code: codes.Unavailable, reason: retry.ReasonBudget, hits: 1},
		{name: "a pushback longer than MaxServerDelay", check: func(ctx context.Context, n int) error {
			pushback(codes.ResourceExhausted, 9, "60000")(ctx, n)
			return node3(codes.ResourceExhausted).Err()
		}, opts: []retry.Option{retry.WithMaxServerDelay(time.Second)},
			code: codes.ResourceExhausted, reason: retry.ReasonDeadline, hits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &server{check: tt.check}
			r := retry.New(append([]retry.Option{retry.WithPolicy(fast)}, tt.opts...)...)
			c, _ := start(t, s, r)
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			_, err := c.Check(ctx, check)
			checkStatus(t, err, node3(tt.code))
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != tt.reason {
				t.Errorf("errors.As: %v; want a *retry.Error with Reason %v", err, tt.reason)
			}
			if s.count() != tt.hits {
				t.Errorf("%d hits, want %d", s.count(), tt.hits)
			}
		})
	}
}

// checkStatus checks that the three ways callers read a status report want.
func checkStatus(t *testing.T, err error, want *status.Status) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || !proto.Equal(st.Proto(), want.Proto()) {
		t.Errorf("status.FromError = %v, %v; want %v", st.Proto(), ok, want.Proto())
	}
	if st := status.Convert(err); !proto.Equal(st.Proto(), want.Proto()) {
		t.Errorf("status.Convert = %v; want %v", st.Proto(), want.Proto())
	}
	if got := status.Code(err); got != want.Code() {
		t.Errorf("status.Code = %v, want %v", got, want.Code())
	}
}

// TestStatusCodes: the code of a call follows its cause, the same in every
// run: the caller canceled (at any moment, with a cause or without) gives
// CANCELED; the caller's deadline, passed or too close for the next wait,
// DEADLINE_EXCEEDED; a refusal before any attempt UNAVAILABLE naming it; an
// invalid configuration INTERNAL naming the option. Each case runs many
// times.
func TestStatusCodes(t *testing.T) {
	const runs = 15
	cause := errors.New("user went away")
	hang := func(ctx context.Context, _ int) error { <-ctx.Done(); return ctx.Err() }
	down := func(context.Context, int) error { return node3(codes.Unavailable).Err() }
	tests := []struct {
		name  string
		check func(ctx context.Context, n int) error
		// call makes one call with client c and Retrier r; hits is the
		// server's hit count so far.
		call     func(c callFunc, hits func() int) error
		policy   retry.Policy
		opts     []retry.Option
		iopts    []retrygrpc.Option
		code     codes.Code
		message  string // a part of the status message
		is       error  // errors.Is target, if any
		maxTook  time.Duration
		reason   retry.Reason // "" for no *retry.Error
		noReason bool
	}{
		{name: "canceled during the backoff", check: down, policy: constant(t, 5, 20*time.Millisecond),
			call: func(c callFunc, hits func() int) error {
				ctx, cancel := context.WithCancel(context.Background())
				go func() {
					for hits() < 2 {
						time.Sleep(time.Millisecond)
					}
					time.Sleep(5 * time.Millisecond) // inside the 20 ms wait
					cancel()
				}()
				return c(ctx)
			}, code: codes.Canceled, message: "context canceled", is: context.Canceled, reason: retry.ReasonCanceled},
		{name: "canceled with a cause during the backoff", check: down, policy: constant(t, 5, 20*time.Millisecond),
			call: func(c callFunc, hits func() int) error {
				ctx, cancel := context.WithCancelCause(context.Background())
				go func() {
					for hits() < 1 {
						time.Sleep(time.Millisecond)
					}
					time.Sleep(5 * time.Millisecond)
					cancel(cause)
				}()
				return c(ctx)
			}, code: codes.Canceled, message: "context canceled: user went away", is: cause, reason: retry.ReasonCanceled},
		{name: "canceled during an attempt", check: hang, policy: fast,
			call: func(c callFunc, hits func() int) error {
				ctx, cancel := context.WithCancel(context.Background())
				go func() {
					for hits() < 1 {
						time.Sleep(time.Millisecond)
					}
					cancel()
				}()
				return c(ctx)
			}, code: codes.Canceled, is: context.Canceled, reason: retry.ReasonCanceled},
		{name: "canceled before the call", check: down, policy: fast,
			call: func(c callFunc, _ func() int) error {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return c(ctx)
			}, code: codes.Canceled, is: context.Canceled, reason: retry.ReasonCanceled},
		{name: "the deadline passes during an attempt", check: hang, policy: fast,
			call: func(c callFunc, _ func() int) error {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				defer cancel()
				return c(ctx)
			}, code: codes.DeadlineExceeded, is: context.DeadlineExceeded, reason: retry.ReasonCanceled},
		// No budget: the default one's reserve (5 retries in 10 s) would
		// stop the call before its deadline.
		{name: "the deadline passes between fast failures", check: down, policy: constant(t, 1000, 3*time.Millisecond), opts: []retry.Option{retry.WithBudget(retry.Budget{Off: true})},
			call: func(c callFunc, _ func() int) error {
				ctx, cancel := context.WithTimeout(context.Background(), 25*time.Millisecond)
				defer cancel()
				return c(ctx)
			}, code: codes.DeadlineExceeded, is: context.DeadlineExceeded},
		{name: "the next wait cannot fit the deadline", check: down, policy: constant(t, 5, time.Second),
			call: func(c callFunc, _ func() int) error {
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				ctx2, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel2()
				return c(ctx2)
			}, code: codes.DeadlineExceeded, message: "node-3 down", is: context.DeadlineExceeded, maxTook: 90 * time.Millisecond, reason: retry.ReasonDeadline},
		{name: "a pushback cannot fit the deadline", check: func(ctx context.Context, n int) error {
			return pushback(codes.Unavailable, 9, "5000")(ctx, n)
		}, policy: fast,
			call: func(c callFunc, _ func() int) error {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				return c(ctx)
			}, code: codes.DeadlineExceeded, maxTook: 90 * time.Millisecond, reason: retry.ReasonDeadline},
		{name: "a jittered pushback cannot fit the deadline", check: func(ctx context.Context, n int) error {
			return pushback(codes.Unavailable, 9, "1000")(ctx, n)
		}, policy: fast, opts: []retry.Option{retry.WithRandom(func() float64 { return 0.99 })},
			call: func(c callFunc, _ func() int) error {
				ctx, cancel := context.WithTimeout(context.Background(), 1050*time.Millisecond)
				defer cancel()
				return c(ctx)
			}, code: codes.DeadlineExceeded, maxTook: 500 * time.Millisecond, reason: retry.ReasonDeadline},
		{name: "the next wait cannot fit MaxElapsed", check: down, policy: constant(t, 5, 2*time.Second),
			opts: []retry.Option{retry.WithMaxElapsed(time.Second)},
			call: func(c callFunc, _ func() int) error { return c(context.Background()) },
			code: codes.DeadlineExceeded, maxTook: 500 * time.Millisecond, reason: retry.ReasonDeadline},
		{name: "a pushback cannot fit MaxElapsed", check: func(ctx context.Context, n int) error {
			return pushback(codes.Unavailable, 9, "2000")(ctx, n)
		}, policy: fast, opts: []retry.Option{retry.WithMaxElapsed(time.Second)},
			call: func(c callFunc, _ func() int) error { return c(context.Background()) },
			code: codes.DeadlineExceeded, maxTook: 500 * time.Millisecond, reason: retry.ReasonDeadline},
		{name: "the breaker refuses before any attempt", check: down, policy: retry.Policy{MaxAttempts: 1},
			opts: []retry.Option{retry.WithBreaker(retry.Breaker{MinRequests: 1, OpenTimeout: time.Hour, MaxWait: -1})},
			call: func(c callFunc, _ func() int) error {
				c(context.Background()) // opens the breaker
				return c(context.Background())
			}, code: codes.Unavailable, message: "breaker_open", reason: retry.ReasonBreakerOpen},
		{name: "the rate limiter refuses before any attempt", check: down, policy: retry.Policy{MaxAttempts: 1},
			opts: []retry.Option{retry.WithRateLimit(retry.RateLimit{Limit: 0.001, Burst: 1})},
			call: func(c callFunc, _ func() int) error {
				c(context.Background()) // takes the only token
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				return c(ctx)
			}, code: codes.Unavailable, message: "rate_limited", reason: retry.ReasonRateLimited},
		{name: "an invalid Retrier", check: down, opts: []retry.Option{retry.WithHedge(retry.Hedge{Max: -1})},
			call: func(c callFunc, _ func() int) error { return c(context.Background()) },
			code: codes.Internal, message: "WithHedge", noReason: true},
		{name: "an invalid option", check: down, iopts: []retrygrpc.Option{retrygrpc.RetryableCodes(codes.OK)},
			call: func(c callFunc, _ func() int) error { return c(context.Background()) },
			code: codes.Internal, message: "RetryableCodes", noReason: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &server{check: tt.check}
			policy := tt.policy
			if policy.MaxAttempts == 0 {
				policy = fast
			}
			addr := listen(t, s)
			for run := range runs {
				s.n.Store(0)
				r := retry.New(append([]retry.Option{retry.WithPolicy(policy)}, tt.opts...)...)
				c := grpc_health_v1.NewHealthClient(dial(t, addr, r, tt.iopts...))
				call := func(ctx context.Context) error {
					_, err := c.Check(ctx, check)
					return err
				}
				begin := time.Now()
				err := tt.call(call, s.count)
				took := time.Since(begin)
				st := status.Convert(err)
				if st.Code() != tt.code || !strings.Contains(st.Message(), tt.message) {
					t.Fatalf("run %d: status %v %q, want %v with %q (err %v)", run, st.Code(), st.Message(), tt.code, tt.message, err)
				}
				if got := status.Code(err); got != tt.code {
					t.Fatalf("run %d: status.Code = %v, want %v", run, got, tt.code)
				}
				if tt.is != nil && !errors.Is(err, tt.is) {
					t.Fatalf("run %d: errors.Is(err, %v) is false: %v", run, tt.is, err)
				}
				if tt.maxTook > 0 && took > tt.maxTook {
					t.Fatalf("run %d: the call took %v, want at most %v", run, took, tt.maxTook)
				}
				var re *retry.Error
				switch {
				case tt.noReason:
				case !errors.As(err, &re):
					t.Fatalf("run %d: no *retry.Error in %v", run, err)
				case tt.reason != "" && re.Reason != tt.reason:
					t.Fatalf("run %d: Reason %v, want %v", run, re.Reason, tt.reason)
				}
			}
		})
	}
}

// callFunc makes one call through the interceptor.
type callFunc func(ctx context.Context) error
