package grpc_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

var check = &grpc_health_v1.HealthCheckRequest{}

func TestUnary(t *testing.T) {
	tests := []struct {
		name     string
		check    func(context.Context, int) error
		policy   retry.Policy
		opts     []retrygrpc.Option
		hits     int
		code     codes.Code // of the call's error; codes.OK for a success
		typ      string     // retry.TypeOf the call's error
		reason   string
		previous []string // grpc-previous-rpc-attempts of each hit
	}{
		{
			name:     "unavailable twice then ok",
			check:    failing(codes.Unavailable, 2),
			hits:     3,
			previous: []string{"", "1", "2"},
		},
		{
			name:   "unavailable until exhausted",
			check:  failing(codes.Unavailable, 9),
			hits:   3,
			code:   codes.Unavailable,
			typ:    "grpc.unavailable",
			reason: "exhausted",
		},
		{
			name:   "invalid argument stops at once",
			check:  failing(codes.InvalidArgument, 9),
			hits:   1,
			code:   codes.InvalidArgument,
			typ:    "grpc.invalid_argument",
			reason: "non_retryable",
		},
		{
			name:   "internal stops at once",
			check:  failing(codes.Internal, 9),
			hits:   1,
			code:   codes.Internal,
			typ:    "grpc.internal",
			reason: "non_retryable",
		},
		{
			name:   "aborted stops at once",
			check:  failing(codes.Aborted, 9),
			hits:   1,
			code:   codes.Aborted,
			typ:    "grpc.aborted",
			reason: "non_retryable",
		},
		{
			name:   "deadline exceeded from the server stops at once",
			check:  failing(codes.DeadlineExceeded, 9),
			hits:   1,
			code:   codes.DeadlineExceeded,
			typ:    "grpc.deadline_exceeded",
			reason: "non_retryable",
		},
		{
			name:   "resource exhausted without pushback stops at once",
			check:  failing(codes.ResourceExhausted, 9),
			hits:   1,
			code:   codes.ResourceExhausted,
			typ:    "grpc.resource_exhausted",
			reason: "non_retryable",
		},
		{
			name:  "resource exhausted with pushback is retried",
			check: pushback(codes.ResourceExhausted, 1, "1"),
			hits:  2,
		},
		{
			name:   "resource exhausted with pushback stopped by the policy",
			check:  pushback(codes.ResourceExhausted, 1, "1"),
			policy: retry.Policy{NonRetryableErrors: []string{"grpc.resource_exhausted"}},
			hits:   1,
			code:   codes.ResourceExhausted,
			typ:    "grpc.resource_exhausted",
			reason: "non_retryable",
		},
		{
			name:   "pushback on a code not retried stops",
			check:  pushback(codes.Internal, 1, "1"),
			hits:   1,
			code:   codes.Internal,
			typ:    "grpc.internal",
			reason: "non_retryable",
		},
		{
			name:   "negative pushback: do not retry",
			check:  pushback(codes.Unavailable, 9, "-1"),
			hits:   1,
			code:   codes.Unavailable,
			typ:    "grpc.unavailable",
			reason: "non_retryable",
		},
		{
			name:   "malformed pushback: do not retry",
			check:  pushback(codes.Unavailable, 9, "soon"),
			hits:   1,
			code:   codes.Unavailable,
			typ:    "grpc.unavailable",
			reason: "non_retryable",
		},
		{
			name:   "two pushback values: do not retry",
			check:  pushback(codes.Unavailable, 9, "1", "2"),
			hits:   1,
			code:   codes.Unavailable,
			typ:    "grpc.unavailable",
			reason: "non_retryable",
		},
		{
			name:  "zero pushback retries after the backoff",
			check: pushback(codes.Unavailable, 1, "0"),
			hits:  2,
		},
		{
			name: "committed: headers received, not retried",
			check: func(ctx context.Context, n int) error {
				grpc.SendHeader(ctx, metadata.Pairs("x-sent", "yes"))
				return status.Error(codes.Unavailable, "after the headers")
			},
			hits:   1,
			code:   codes.Unavailable,
			typ:    "grpc.unavailable",
			reason: "non_retryable",
		},
		{
			name: "committed: header metadata set, not retried",
			check: func(ctx context.Context, n int) error {
				grpc.SetHeader(ctx, metadata.Pairs("x-set", "yes"))
				return status.Error(codes.Unavailable, "with header metadata")
			},
			hits:   1,
			code:   codes.Unavailable,
			typ:    "grpc.unavailable",
			reason: "non_retryable",
		},
		{
			name:   "unavailable listed in non_retryable_errors",
			check:  failing(codes.Unavailable, 9),
			policy: retry.Policy{NonRetryableErrors: []string{"grpc.*"}},
			hits:   1,
			code:   codes.Unavailable,
			typ:    "grpc.unavailable",
			reason: "non_retryable",
		},
		{
			name:  "aborted made retryable",
			check: failing(codes.Aborted, 1),
			opts:  []retrygrpc.Option{retrygrpc.RetryableCodes(codes.Unavailable, codes.Aborted)},
			hits:  2,
		},
		{
			name:   "unavailable left out of the retryable codes",
			check:  failing(codes.Unavailable, 1),
			opts:   []retrygrpc.Option{retrygrpc.RetryableCodes(codes.Aborted)},
			hits:   1,
			code:   codes.Unavailable,
			typ:    "grpc.unavailable",
			reason: "non_retryable",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.policy
			p.MaxAttempts, p.InitialInterval, p.MaxInterval = fast.MaxAttempts, fast.InitialInterval, fast.MaxInterval
			s := &server{check: tt.check}
			c, _ := start(t, s, retry.New(retry.WithPolicy(p)), tt.opts...)
			resp, err := c.Check(context.Background(), check)
			if got := status.Code(err); got != tt.code {
				t.Fatalf("status.Code = %v, want %v (err %v)", got, tt.code, err)
			}
			if err == nil && resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
				t.Errorf("response %v", resp)
			}
			checkOutcome(t, s, err, tt.typ, tt.reason, tt.hits, tt.previous, true)
		})
	}
}

// The error of a failed call is the engine's, and keeps the status: status
// and errors functions reach it.
func TestUnaryErrorChain(t *testing.T) {
	s := &server{check: failing(codes.Unavailable, 9)}
	c, _ := start(t, s, retry.New(retry.WithPolicy(fast)))
	_, err := c.Check(context.Background(), check)
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("err = %v, want a *retry.Error after 3 attempts", err)
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		t.Errorf("status.FromError = %v, %v", st, ok)
	}
	if !errors.Is(err, status.Error(codes.Unavailable, "scripted failure")) {
		t.Errorf("errors.Is does not reach the status error: %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an UNAVAILABLE call matches context.DeadlineExceeded: %v", err)
	}
}

// The server's pushback is the least wait before the next attempt: the gap
// between the server's hits is at least the pushback, though the policy's
// backoff is 1 ms.
func TestUnaryPushbackWait(t *testing.T) {
	const wait = 60 * time.Millisecond
	s := &server{check: pushback(codes.Unavailable, 1, "60")}
	c, _ := start(t, s, retry.New(retry.WithPolicy(fast)))
	if _, err := c.Check(context.Background(), check); err != nil {
		t.Fatal(err)
	}
	h := s.seen()
	if len(h) != 2 {
		t.Fatalf("%d hits, want 2", len(h))
	}
	// The server's clock is the client's: the gap includes the response's
	// and the next request's way over loopback, which only lengthen it.
	if gap := h[1].at.Sub(h[0].at); gap < wait || gap > wait+wait/10+time.Second {
		t.Errorf("gap between attempts %v, want at least %v (plus at most 10%% spread)", gap, wait)
	}
}

// A pushback over the engine's MaxServerDelay stops the call at once.
func TestUnaryPushbackTooLong(t *testing.T) {
	s := &server{check: pushback(codes.Unavailable, 9, "99999999999999999999")}
	c, _ := start(t, s, retry.New(retry.WithPolicy(fast)))
	begin := time.Now()
	_, err := c.Check(context.Background(), check)
	if got := reasonOf(err); got != "deadline" {
		t.Errorf("reason = %q, want deadline (err %v)", got, err)
	}
	if s.count() != 1 || time.Since(begin) > time.Second {
		t.Errorf("%d hits in %v, want 1 at once", s.count(), time.Since(begin))
	}
}

// The caller's deadline holds: no wait is started that cannot end before it,
// and the error matches context.DeadlineExceeded.
func TestUnaryDeadline(t *testing.T) {
	s := &server{check: failing(codes.Unavailable, 99)}
	c, _ := start(t, s, retry.New(retry.WithPolicy(constant(t, 10, 40*time.Millisecond))))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := c.Check(ctx, check)
	elapsed := time.Since(begin)
	// The call stops when the next wait cannot fit or, on a loaded machine,
	// when the deadline cuts off the last attempt: DEADLINE_EXCEEDED either
	// way, matching the caller's deadline.
	if code := status.Code(err); !errors.Is(err, context.DeadlineExceeded) || code != codes.DeadlineExceeded {
		t.Errorf("err = %v (%v), want context.DeadlineExceeded and DEADLINE_EXCEEDED", err, code)
	}
	// An attempt running at the deadline is cut off by it: allow the
	// unwinding, not another wait.
	if elapsed > 100*time.Millisecond+slack {
		t.Errorf("the call took %v, past its deadline of 100ms", elapsed)
	}
	if n := s.count(); n < 2 || n > 4 {
		t.Errorf("%d hits, want 2 to 4 at 40 ms intervals in 100 ms", n)
	}
	for _, h := range s.seen() {
		if h.timeout <= 0 || h.timeout > 100*time.Millisecond {
			t.Errorf("the server saw a deadline %v away, want within the caller's 100ms", h.timeout)
		}
	}
}

// With a per-attempt timeout, an attempt that hangs is cut off and retried
// within the caller's deadline, and the server sees the shorter deadline.
func TestUnaryAttemptTimeout(t *testing.T) {
	s := &server{check: func(ctx context.Context, n int) error {
		if n == 1 {
			<-ctx.Done() // hang until the attempt's deadline
			return ctx.Err()
		}
		return nil
	}}
	r := retry.New(retry.WithPolicy(fast), retry.WithAttemptTimeout(30*time.Millisecond))
	c, _ := start(t, s, r)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	begin := time.Now()
	if _, err := c.Check(ctx, check); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(begin); elapsed < 30*time.Millisecond || elapsed > 2*time.Second {
		t.Errorf("the call took %v, want about one attempt timeout (30ms)", elapsed)
	}
	h := s.seen()
	if len(h) != 2 {
		t.Fatalf("%d hits, want 2", len(h))
	}
	if h[0].timeout > 30*time.Millisecond {
		t.Errorf("the first attempt's deadline was %v away, want the attempt's 30ms", h[0].timeout)
	}
}

// A breaker open on the target reschedules the call without consuming its
// attempts: with one attempt allowed, the call waits for the breaker and
// succeeds. With MaxWait < 0 the call stops at once, with codes.Unavailable,
// and the server is not called.
func TestUnaryBreaker(t *testing.T) {
	var down atomic.Bool
	s := &server{check: func(context.Context, int) error {
		if down.Load() {
			return status.Error(codes.Unavailable, "down")
		}
		return nil
	}}
	tests := []struct {
		name    string
		maxWait time.Duration
		code    codes.Code
		hits    int // by the call made while the breaker is open
	}{
		{name: "rescheduled", maxWait: time.Second, code: codes.OK, hits: 1},
		{name: "refused", maxWait: -1, code: codes.Unavailable, hits: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const open = 50 * time.Millisecond
			r := retry.New(
				retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
				retry.WithBreaker(retry.Breaker{MinRequests: 3, OpenTimeout: open, MaxWait: tt.maxWait, PerKey: true}),
			)
			c, cc := start(t, s, r)
			down.Store(true)
			for range 3 {
				c.Check(context.Background(), check)
			}
			if got := r.Stats().Breakers[cc.Target()]; got != "open" {
				t.Fatalf("breaker of %q is %v, want open (%v)", cc.Target(), got, r.Stats().Breakers)
			}
			down.Store(false)
			before := s.count()
			begin := time.Now()
			_, err := c.Check(context.Background(), check)
			elapsed := time.Since(begin)
			if got := status.Code(err); got != tt.code {
				t.Fatalf("status.Code = %v, want %v (err %v)", got, tt.code, err)
			}
			if got := s.count() - before; got != tt.hits {
				t.Errorf("%d hits, want %d", got, tt.hits)
			}
			if tt.code == codes.OK {
				if elapsed < open/2 {
					t.Errorf("the call took %v, want a wait for the breaker (%v open)", elapsed, open)
				}
				if r.Stats().BreakerWaits == 0 {
					t.Error("no breaker wait counted")
				}
			} else if got := retry.TypeOf(err); got != "breaker.open" {
				t.Errorf("TypeOf = %q, want breaker.open", got)
			}
		})
	}
}

// Keys: the target by default, target and method with PerMethod.
func TestUnaryKeys(t *testing.T) {
	for _, perMethod := range []bool{false, true} {
		var opts []retrygrpc.Option
		if perMethod {
			opts = append(opts, retrygrpc.PerMethod())
		}
		var keys []string
		r := retry.New(retry.WithPolicy(fast), retry.OnRetry(func(e retry.Event) { keys = append(keys, e.Key) }))
		s := &server{check: failing(codes.Unavailable, 1)}
		c, cc := start(t, s, r, opts...)
		if _, err := c.Check(context.Background(), check); err != nil {
			t.Fatal(err)
		}
		want := cc.Target()
		if perMethod {
			want += grpc_health_v1.Health_Check_FullMethodName
		}
		if len(keys) != 1 || keys[0] != want {
			t.Errorf("PerMethod %v: event keys %q, want [%q]", perMethod, keys, want)
		}
	}
}

// The caller's own Header and Trailer options receive the metadata of the
// attempt whose outcome is returned, and commitment is still seen.
func TestUnaryCallerMetadata(t *testing.T) {
	s := &server{check: func(ctx context.Context, n int) error {
		grpc.SetTrailer(ctx, metadata.Pairs("x-hit", string(rune('0'+n))))
		switch n {
		case 1:
			return status.Error(codes.Unavailable, "first")
		case 2:
			grpc.SendHeader(ctx, metadata.Pairs("x-header", "2"))
			return status.Error(codes.Unavailable, "committed")
		}
		return nil
	}}
	c, _ := start(t, s, retry.New(retry.WithPolicy(fast)))
	var header, trailer metadata.MD
	_, err := c.Check(context.Background(), check, grpc.Header(&header), grpc.Trailer(&trailer))
	if status.Code(err) != codes.Unavailable || s.count() != 2 {
		t.Fatalf("err = %v after %d hits, want UNAVAILABLE after 2 (the second is committed)", err, s.count())
	}
	if got := header.Get("x-header"); !slices.Equal(got, []string{"2"}) {
		t.Errorf("header x-header = %q, want the second attempt's", got)
	}
	if got := trailer.Get("x-hit"); !slices.Equal(got, []string{"2"}) {
		t.Errorf("trailer x-hit = %q, want the second attempt's", got)
	}
}

// A full outage: the default retry budget holds the load to 1.2 times the
// calls or less, though every call may make three attempts.
func TestUnaryOutageBudget(t *testing.T) {
	const calls = 1000
	s := &server{check: failing(codes.Unavailable, 1<<30)}
	r := retry.New(retry.WithPolicy(immediate(t, 3)))
	c, _ := start(t, s, r)
	budget := 0
	for range calls {
		_, err := c.Check(context.Background(), check)
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v, want UNAVAILABLE", err)
		}
		if reasonOf(err) == "budget" {
			budget++
		}
	}
	t.Logf("%d calls, %d hits (%.3fx)", calls, s.count(), float64(s.count())/calls)
	if hits := s.count(); hits > calls*12/10 {
		t.Errorf("%d calls hit the server %d times (%.2fx), want 1.2x or less", calls, hits, float64(hits)/calls)
	}
	if budget == 0 {
		t.Error("no call was stopped by the budget")
	}
}
