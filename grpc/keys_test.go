package grpc_test

import (
	"context"
	"testing"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// One interceptor serving two targets keeps a breaker per target: the
// target that is down opens its own breaker, and calls to the other, made
// in between, go through.
func TestBreakerPerTarget(t *testing.T) {
	down := &server{check: failing(codes.Unavailable, 1<<30)}
	up := &server{}
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
		retry.WithBreaker(retry.Breaker{MinRequests: 3, MaxWait: -1, PerKey: true}),
	)
	ic := retrygrpc.UnaryClientInterceptor(r)
	client := func(addr string) (grpc_health_v1.HealthClient, string) {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(ic))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return grpc_health_v1.NewHealthClient(cc), cc.Target()
	}
	a, targetA := client(listen(t, down))
	b, targetB := client(listen(t, up))
	ctx := context.Background()
	for range 5 {
		a.Check(ctx, check)
		if _, err := b.Check(ctx, check); err != nil {
			t.Fatalf("call to the healthy target: %v", err)
		}
	}
	_, err := a.Check(ctx, check)
	if status.Code(err) != codes.Unavailable || retry.TypeOf(err) != "breaker.open" {
		t.Errorf("err = %v (type %q), want UNAVAILABLE from breaker.open", err, retry.TypeOf(err))
	}
	states := r.Stats().Breakers
	if states[targetA] != "open" || states[targetB] != "closed" {
		t.Errorf("breakers %v, want %q open and %q closed", states, targetA, targetB)
	}
	if down.count() != 3 {
		t.Errorf("the failing target was hit %d times, want 3 (MinRequests) before its breaker opened", down.count())
	}
}
