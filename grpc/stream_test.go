package grpc_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// watchFailing returns a watch that fails with code, before sending
// anything, for the first n hits, and sends three messages afterwards.
func watchFailing(code codes.Code, n int) func(grpc_health_v1.Health_WatchServer, int) error {
	return func(stream grpc_health_v1.Health_WatchServer, hit int) error {
		if hit <= n {
			return status.Error(code, "scripted failure")
		}
		return sendN(stream, 3)
	}
}

// watchPushback returns a watch that fails with code and the trailer values
// of retrygrpc.PushbackKey for the first n hits, and sends three messages
// afterwards.
func watchPushback(code codes.Code, n int, values ...string) func(grpc_health_v1.Health_WatchServer, int) error {
	return func(stream grpc_health_v1.Health_WatchServer, hit int) error {
		if hit > n {
			return sendN(stream, 3)
		}
		md := metadata.MD{}
		for _, v := range values {
			md.Append(retrygrpc.PushbackKey, v)
		}
		stream.SetTrailer(md)
		return status.Error(code, "pushed back")
	}
}

// watchAll receives every message of a Watch and returns how many came and
// the error that ended the stream (nil for io.EOF).
func watchAll(ctx context.Context, c grpc_health_v1.HealthClient) (int, error) {
	stream, err := c.Watch(ctx, check)
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		_, err := stream.Recv()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

func TestServerStream(t *testing.T) {
	tests := []struct {
		name     string
		watch    func(grpc_health_v1.Health_WatchServer, int) error
		policy   retry.Policy
		hits     int
		msgs     int        // messages received
		code     codes.Code // of the error that ended the stream; codes.OK for io.EOF
		typ      string     // retry.TypeOf that error
		reason   string
		previous []string // grpc-previous-rpc-attempts of each hit
	}{
		{
			name:     "unavailable twice then ok",
			watch:    watchFailing(codes.Unavailable, 2),
			hits:     3,
			msgs:     3,
			previous: []string{"", "1", "2"},
		},
		{
			name:   "unavailable until exhausted",
			watch:  watchFailing(codes.Unavailable, 9),
			hits:   3,
			code:   codes.Unavailable,
			typ:    "grpc.unavailable",
			reason: "exhausted",
		},
		{
			name:   "failed precondition stops at once",
			watch:  watchFailing(codes.FailedPrecondition, 9),
			hits:   1,
			code:   codes.FailedPrecondition,
			typ:    "grpc.failed_precondition",
			reason: "non_retryable",
		},
		{
			name:  "pushback retried",
			watch: watchPushback(codes.Unavailable, 1, "1"),
			hits:  2,
			msgs:  3,
		},
		{
			name:   "negative pushback: do not retry",
			watch:  watchPushback(codes.Unavailable, 9, "-5"),
			hits:   1,
			code:   codes.Unavailable,
			typ:    "grpc.unavailable",
			reason: "non_retryable",
		},
		{
			name:   "malformed pushback: do not retry",
			watch:  watchPushback(codes.Unavailable, 9, "1.5"),
			hits:   1,
			code:   codes.Unavailable,
			typ:    "grpc.unavailable",
			reason: "non_retryable",
		},
		{
			// The error comes from the committed stream itself, untouched:
			// no *retry.Error, no reason.
			name: "committed: a message arrived, not retried",
			watch: func(stream grpc_health_v1.Health_WatchServer, n int) error {
				if err := sendN(stream, 1); err != nil {
					return err
				}
				return status.Error(codes.Unavailable, "after a message")
			},
			hits: 1,
			msgs: 1,
			code: codes.Unavailable,
		},
		{
			name: "committed: headers arrived, not retried",
			watch: func(stream grpc_health_v1.Health_WatchServer, n int) error {
				if err := stream.SendHeader(metadata.Pairs("x-sent", "yes")); err != nil {
					return err
				}
				return status.Error(codes.Unavailable, "after the headers")
			},
			hits: 1,
			code: codes.Unavailable,
		},
		{
			name:  "an empty stream succeeds",
			watch: func(grpc_health_v1.Health_WatchServer, int) error { return nil },
			hits:  1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.policy
			p.MaxAttempts, p.InitialInterval, p.MaxInterval = fast.MaxAttempts, fast.InitialInterval, fast.MaxInterval
			s := &server{watch: tt.watch}
			c, _ := start(t, s, retry.New(retry.WithPolicy(p)))
			msgs, err := watchAll(context.Background(), c)
			if got := status.Code(err); got != tt.code {
				t.Fatalf("status.Code = %v, want %v (err %v)", got, tt.code, err)
			}
			if msgs != tt.msgs {
				t.Errorf("%d messages, want %d", msgs, tt.msgs)
			}
			checkOutcome(t, s, err, tt.typ, tt.reason, tt.hits, tt.previous, tt.typ != "")
		})
	}
}

// The server's pushback is the least wait before the stream is opened again.
func TestServerStreamPushbackWait(t *testing.T) {
	const wait = 60 * time.Millisecond
	s := &server{watch: watchPushback(codes.Unavailable, 1, "60")}
	c, _ := start(t, s, retry.New(retry.WithPolicy(fast)))
	if n, err := watchAll(context.Background(), c); err != nil || n != 3 {
		t.Fatalf("%d messages, err %v; want 3 and none", n, err)
	}
	h := s.seen()
	if len(h) != 2 {
		t.Fatalf("%d hits, want 2", len(h))
	}
	if gap := h[1].at.Sub(h[0].at); gap < wait || gap > wait+wait/10+time.Second {
		t.Errorf("gap between attempts %v, want at least %v (plus at most 10%% spread)", gap, wait)
	}
}

// The caller's deadline holds for a stream's start as for a unary call.
func TestServerStreamDeadline(t *testing.T) {
	s := &server{watch: watchFailing(codes.Unavailable, 99)}
	c, _ := start(t, s, retry.New(retry.WithPolicy(constant(t, 10, 40*time.Millisecond))))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := watchAll(ctx, c)
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
}

// A per-attempt timeout bounds the start of a stream, never the committed
// stream: a first attempt that hangs before its headers is cut off and
// retried, and the second, committed, outlives the timeout.
func TestServerStreamAttemptTimeout(t *testing.T) {
	const timeout = 30 * time.Millisecond
	s := &server{watch: func(stream grpc_health_v1.Health_WatchServer, n int) error {
		if n == 1 {
			<-stream.Context().Done()
			return stream.Context().Err()
		}
		for range 3 {
			if err := sendN(stream, 1); err != nil {
				return err
			}
			time.Sleep(timeout) // the stream lasts past the attempt timeout
		}
		return nil
	}}
	r := retry.New(retry.WithPolicy(fast), retry.WithAttemptTimeout(timeout))
	c, _ := start(t, s, r)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := watchAll(ctx, c)
	if err != nil || n != 3 {
		t.Fatalf("%d messages, err %v; want 3 and none", n, err)
	}
	if h := s.seen(); len(h) != 2 {
		t.Fatalf("%d hits, want 2", len(h))
	}
}

// A breaker open on the target reschedules the stream's start without
// consuming attempts; with MaxWait < 0 the stream fails at once with
// codes.Unavailable and type breaker.open, and the server is not called.
func TestServerStreamBreaker(t *testing.T) {
	var down atomic.Bool
	s := &server{watch: func(stream grpc_health_v1.Health_WatchServer, n int) error {
		if down.Load() {
			return status.Error(codes.Unavailable, "down")
		}
		return sendN(stream, 3)
	}}
	tests := []struct {
		name    string
		maxWait time.Duration
		code    codes.Code
		hits    int // by the stream started while the breaker is open
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
				watchAll(context.Background(), c)
			}
			if got := r.Stats().Breakers[cc.Target()]; got != "open" {
				t.Fatalf("breaker of %q is %v, want open (%v)", cc.Target(), got, r.Stats().Breakers)
			}
			down.Store(false)
			before := s.count()
			begin := time.Now()
			_, err := watchAll(context.Background(), c)
			elapsed := time.Since(begin)
			if got := status.Code(err); got != tt.code {
				t.Fatalf("status.Code = %v, want %v (err %v)", got, tt.code, err)
			}
			if got := s.count() - before; got != tt.hits {
				t.Errorf("%d hits, want %d", got, tt.hits)
			}
			if tt.code == codes.OK {
				if elapsed < open/2 {
					t.Errorf("the stream took %v, want a wait for the breaker (%v open)", elapsed, open)
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

// A full outage: the default retry budget holds the streams opened to 1.2
// times the calls or less.
func TestServerStreamOutageBudget(t *testing.T) {
	const calls = 1000
	s := &server{watch: watchFailing(codes.Unavailable, 1<<30)}
	r := retry.New(retry.WithPolicy(immediate(t, 3)))
	c, _ := start(t, s, r)
	for range calls {
		if _, err := watchAll(context.Background(), c); status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v, want UNAVAILABLE", err)
		}
	}
	t.Logf("%d calls, %d hits (%.3fx)", calls, s.count(), float64(s.count())/calls)
	if hits := s.count(); hits > calls*12/10 {
		t.Errorf("%d calls hit the server %d times (%.2fx), want 1.2x or less", calls, hits, float64(hits)/calls)
	}
	if r.Stats().BudgetDenied == 0 {
		t.Error("no retry was refused by the budget")
	}
}

// Header starts the stream as RecvMsg does, and returns the headers of the
// attempt that committed.
func TestServerStreamHeader(t *testing.T) {
	s := &server{watch: func(stream grpc_health_v1.Health_WatchServer, n int) error {
		if n == 1 {
			return status.Error(codes.Unavailable, "first")
		}
		stream.SendHeader(metadata.Pairs("x-hit", "2"))
		return sendN(stream, 2)
	}}
	c, _ := start(t, s, retry.New(retry.WithPolicy(fast)))
	stream, err := c.Watch(context.Background(), check)
	if err != nil {
		t.Fatal(err)
	}
	md, err := stream.Header()
	if err != nil || !slices.Equal(md.Get("x-hit"), []string{"2"}) {
		t.Fatalf("Header = %v, %v; want x-hit 2", md, err)
	}
	n := 0
	for {
		if _, err := stream.Recv(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 || s.count() != 2 {
		t.Errorf("%d messages after %d hits, want 2 after 2", n, s.count())
	}
}

// TestServerStreamFailedTrailer: a server stream whose call fails before
// its first message gives, through Trailer after RecvMsg's error, the
// trailer the server set on the last attempt, as plain grpc-go gives it;
// a committed stream gives its own.
func TestServerStreamFailedTrailer(t *testing.T) {
	tests := []struct {
		name  string
		fails int        // hits that fail with the trailer, before three messages
		code  codes.Code // their status
		want  []string   // x-hit in the trailer the caller reads
		err   codes.Code // RecvMsg's error, OK for io.EOF after three messages
	}{
		{name: "not retryable: the only attempt's", fails: 1, code: codes.InvalidArgument, want: []string{"1"}, err: codes.InvalidArgument},
		{name: "exhausted: the last attempt's", fails: 3, code: codes.Unavailable, want: []string{"3"}, err: codes.Unavailable},
		{name: "retried, then committed: the committed stream's", fails: 2, code: codes.Unavailable, want: []string{"3"}, err: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &server{watch: func(stream grpc_health_v1.Health_WatchServer, hit int) error {
				stream.SetTrailer(metadata.Pairs("x-hit", strconv.Itoa(hit)))
				if hit <= tt.fails {
					return status.Error(tt.code, "scripted failure")
				}
				return sendN(stream, 3)
			}}
			c, _ := start(t, s, retry.New(retry.WithPolicy(fast)))
			stream, err := c.Watch(t.Context(), check)
			if err != nil {
				t.Fatal(err)
			}
			for err == nil {
				_, err = stream.Recv()
			}
			if got := status.Code(err); err != io.EOF && got != tt.err || err == io.EOF && tt.err != codes.OK {
				t.Fatalf("Recv ended with %v, want %v", err, tt.err)
			}
			if got := stream.Trailer().Get("x-hit"); !slices.Equal(got, tt.want) {
				t.Errorf("Trailer()'s x-hit = %q, want %q", got, tt.want)
			}
		})
	}
}
