package grpc_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestCallOptions: a call's CallOptions change that call alone, against a
// real server: Disable makes one attempt, WithMax sets the attempts,
// WithCodes the codes retried, WithAttemptTimeout each attempt's deadline,
// WithHedge hedging on or off; an invalid one fails the call with INTERNAL
// naming it, before any attempt. The next call without options is as the
// interceptor makes it.
func TestCallOptions(t *testing.T) {
	unavailable := failing(codes.Unavailable, 1<<30)
	tests := []struct {
		name    string
		check   func(ctx context.Context, n int) error
		hedge   *retry.Hedge // the Retrier's
		opts    []grpc.CallOption
		code    codes.Code
		message string
		hits    int
		// then is the hits of a second call without options, 0 to skip it.
		then int
		// deadline is the longest deadline the server may see, 0 for any.
		deadline time.Duration
		took     time.Duration // the most the call may take, 0 for any
		minTook  time.Duration
	}{
		{name: "the zero CallOption changes nothing", check: unavailable, opts: []grpc.CallOption{retrygrpc.CallOption{}},
			code: codes.Unavailable, message: "scripted failure", hits: 3},
		{name: "Disable", check: unavailable, opts: []grpc.CallOption{retrygrpc.Disable()},
			code: codes.Unavailable, message: "scripted failure", hits: 1, then: 3},
		{name: "WithMax", check: unavailable, opts: []grpc.CallOption{retrygrpc.WithMax(5)},
			code: codes.Unavailable, message: "scripted failure", hits: 5, then: 3},
		{name: "WithMax 1", check: unavailable, opts: []grpc.CallOption{retrygrpc.WithMax(1)},
			code: codes.Unavailable, message: "scripted failure", hits: 1},
		{name: "WithCodes retries another code", check: failing(codes.Internal, 2),
			opts: []grpc.CallOption{retrygrpc.WithCodes(codes.Internal)}, hits: 3},
		{name: "WithCodes without UNAVAILABLE", check: unavailable,
			opts: []grpc.CallOption{retrygrpc.WithCodes(codes.Aborted)}, code: codes.Unavailable, message: "scripted failure", hits: 1, then: 3},
		{name: "WithCodes of none", check: unavailable,
			opts: []grpc.CallOption{retrygrpc.WithCodes()}, code: codes.Unavailable, message: "scripted failure", hits: 1},
		{name: "the later option wins", check: unavailable,
			opts: []grpc.CallOption{retrygrpc.WithMax(5), retrygrpc.WithMax(2)}, code: codes.Unavailable, message: "scripted failure", hits: 2},
		{name: "WithAttemptTimeout", check: func(ctx context.Context, n int) error {
			if n == 1 {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}, opts: []grpc.CallOption{retrygrpc.WithAttemptTimeout(30 * time.Millisecond)}, hits: 2, deadline: 30 * time.Millisecond},
		{name: "WithHedge(true) on a Retrier without a Hedge", check: func(ctx context.Context, n int) error {
			if n == 1 {
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
				}
			}
			return nil
		}, opts: []grpc.CallOption{retrygrpc.WithHedge(true)}, hits: 2, took: 2 * time.Second},
		{name: "WithHedge(false) on a Retrier with a Hedge", check: func(ctx context.Context, n int) error {
			if n == 1 {
				time.Sleep(100 * time.Millisecond)
			}
			return nil
		}, hedge: &retry.Hedge{Delay: 5 * time.Millisecond}, opts: []grpc.CallOption{retrygrpc.WithHedge(false)}, hits: 1, minTook: 100 * time.Millisecond},
		{name: "Disable on a Retrier with a Hedge", check: func(ctx context.Context, n int) error {
			if n == 1 {
				time.Sleep(100 * time.Millisecond)
			}
			return nil
		}, hedge: &retry.Hedge{Delay: 5 * time.Millisecond}, opts: []grpc.CallOption{retrygrpc.Disable()}, hits: 1, minTook: 100 * time.Millisecond},
		{name: "WithMax 0", check: unavailable, opts: []grpc.CallOption{retrygrpc.WithMax(0)},
			code: codes.Internal, message: "call option WithMax: n = 0: must be in [1, 2147483647]"},
		{name: "WithMax over the policy's bound", check: unavailable, opts: []grpc.CallOption{retrygrpc.WithMax(math.MaxInt32 + 1)},
			code: codes.Internal, message: "call option WithMax: n = 2147483648: must be in [1, 2147483647]"},
		{name: "a valid option after an invalid one wins", check: unavailable,
			opts: []grpc.CallOption{retrygrpc.WithMax(0), retrygrpc.WithMax(2), retrygrpc.WithAttemptTimeout(0), retrygrpc.WithAttemptTimeout(time.Second),
				retrygrpc.WithCodes(codes.OK), retrygrpc.WithCodes(codes.Unavailable)},
			code: codes.Unavailable, message: "scripted failure", hits: 2},
		{name: "an invalid option after a valid one wins", check: unavailable,
			opts: []grpc.CallOption{retrygrpc.WithMax(2), retrygrpc.WithMax(0)},
			code: codes.Internal, message: "call option WithMax: n = 0"},
		{name: "WithAttemptTimeout -1s", check: unavailable, opts: []grpc.CallOption{retrygrpc.WithAttemptTimeout(-time.Second)},
			code: codes.Internal, message: "call option WithAttemptTimeout: timeout = -1s: must be > 0"},
		{name: "WithCodes OK", check: unavailable, opts: []grpc.CallOption{retrygrpc.WithCodes(codes.Unavailable, codes.OK)},
			code: codes.Internal, message: "call option WithCodes: codes = OK: must be error codes, not OK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &server{check: tt.check}
			// No budget: each row counts the attempts its options allow,
			// which the default budget's reserve (5 in 10 s) would cut.
			opts := []retry.Option{retry.WithPolicy(fast), retry.WithBudget(retry.Budget{Off: true})}
			if tt.hedge != nil {
				opts = append(opts, retry.WithHedge(*tt.hedge))
			}
			c, _ := start(t, s, retry.New(opts...))
			begin := time.Now()
			_, err := c.Check(context.Background(), check, tt.opts...)
			took := time.Since(begin)
			st := status.Convert(err)
			if st.Code() != tt.code || !strings.Contains(st.Message(), tt.message) {
				t.Errorf("status %v %q, want %v with %q (err %v)", st.Code(), st.Message(), tt.code, tt.message, err)
			}
			if s.count() != tt.hits {
				t.Errorf("%d hits, want %d", s.count(), tt.hits)
			}
			if tt.took > 0 && took > tt.took {
				t.Errorf("the call took %v, want at most %v", took, tt.took)
			}
			if took < tt.minTook {
				t.Errorf("the call took %v, want at least %v", took, tt.minTook)
			}
			if tt.deadline > 0 {
				for _, h := range s.seen() {
					if h.timeout <= 0 || h.timeout > tt.deadline {
						t.Errorf("the server saw a deadline %v away, want within %v", h.timeout, tt.deadline)
					}
				}
			}
			if tt.then > 0 {
				before := s.count()
				c.Check(context.Background(), check)
				if got := s.count() - before; got != tt.then {
					t.Errorf("the next call without options made %d hits, want %d", got, tt.then)
				}
			}
		})
	}
}

// TestCallOptionsStream: the CallOptions apply to the start of a stream
// too: Disable makes one attempt, WithMax sets the attempts, WithCodes the
// codes retried; WithHedge changes nothing.
func TestCallOptionsStream(t *testing.T) {
	tests := []struct {
		name string
		opts []grpc.CallOption
		hits int
	}{
		{name: "none", hits: 3},
		{name: "Disable", opts: []grpc.CallOption{retrygrpc.Disable()}, hits: 1},
		{name: "WithMax", opts: []grpc.CallOption{retrygrpc.WithMax(4)}, hits: 4},
		{name: "WithCodes without UNAVAILABLE", opts: []grpc.CallOption{retrygrpc.WithCodes(codes.Aborted)}, hits: 1},
		{name: "WithHedge, which streams ignore", opts: []grpc.CallOption{retrygrpc.WithHedge(true)}, hits: 3},
		{name: "WithAttemptTimeout is accepted", opts: []grpc.CallOption{retrygrpc.WithAttemptTimeout(time.Second)}, hits: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &server{watch: func(grpc_health_v1.Health_WatchServer, int) error {
				return status.Error(codes.Unavailable, "down")
			}}
			c, _ := start(t, s, retry.New(retry.WithPolicy(fast)))
			stream, err := c.Watch(context.Background(), check, tt.opts...)
			if err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != codes.Unavailable {
				t.Errorf("err = %v, want UNAVAILABLE", err)
			}
			if s.count() != tt.hits {
				t.Errorf("%d hits, want %d", s.count(), tt.hits)
			}
		})
	}
}
