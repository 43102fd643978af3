package grpc_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// lateTimer is a context whose deadline is dl but whose timer fires late,
// at the deadline of the context it wraps, as a loaded machine's timers
// fire some time after their deadline.
type lateTimer struct {
	context.Context
	dl time.Time
}

func (c lateTimer) Deadline() (time.Time, bool) { return c.dl, true }

// TestDeadlinePassedServerStatus: a call whose deadline has passed gets
// DEADLINE_EXCEEDED, and errors.Is context.DeadlineExceeded, even when the
// server answers with a status of its own after that deadline and before
// the client's context timer has fired: a handler that wrapped its
// context's error in INTERNAL ("db: context deadline exceeded"), whose
// answer arrives a few milliseconds after the caller's deadline. Hedged or
// not.
//
// The race is made the same in every run: the caller's timer fires 100 ms
// late, and the handler answers 2 ms after the caller's deadline. So that
// grpc-go's server does not reset the stream at its own deadline first,
// an interceptor inside the retry interceptor sends the server a deadline
// as late as the caller's timer.
func TestDeadlinePassedServerStatus(t *testing.T) {
	const (
		deadline = 30 * time.Millisecond
		late     = 100 * time.Millisecond
	)
	var callerDeadline atomic.Int64 // unix ns
	wrapped := func(context.Context, int) error {
		time.Sleep(time.Until(time.Unix(0, callerDeadline.Load())) + 2*time.Millisecond)
		return status.Error(codes.Internal, "db: context deadline exceeded")
	}
	shift := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		dl, _ := ctx.Deadline()
		return invoker(lateTimer{Context: ctx, dl: dl.Add(late)}, method, req, reply, cc, opts...)
	}
	tests := []struct {
		name string
		opts []retry.Option
	}{
		{name: "unhedged"},
		{name: "hedged", opts: []retry.Option{retry.WithHedge(retry.Hedge{Delay: 5 * time.Millisecond, Max: 2})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &server{check: wrapped}
			r := retry.New(append([]retry.Option{retry.WithPolicy(fast)}, tt.opts...)...)
			cc, err := grpc.NewClient(listen(t, s),
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithChainUnaryInterceptor(retrygrpc.UnaryClientInterceptor(r), shift))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ready(t, cc)
			c := grpc_health_v1.NewHealthClient(cc)
			for run := range 2 {
				inner, cancel := context.WithTimeout(context.Background(), deadline+late)
				dl := time.Now().Add(deadline)
				callerDeadline.Store(dl.UnixNano())
				_, err := c.Check(lateTimer{Context: inner, dl: dl}, check)
				cancel()
				if got := status.Code(err); got != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("run %d: %v (%v); want DEADLINE_EXCEEDED, which errors.Is context.DeadlineExceeded", run, got, err)
				}
			}
		})
	}
}

// ready waits until cc is connected, so that the dial falls outside the
// calls of a test.
func ready(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for st := cc.GetState(); st != connectivity.Ready; st = cc.GetState() {
		if st == connectivity.Idle {
			cc.Connect()
		}
		if !cc.WaitForStateChange(ctx, st) {
			t.Fatalf("the connection is not ready after 10s (%v)", st)
		}
	}
}
