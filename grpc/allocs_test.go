//go:build !race

package grpc_test

import (
	"context"
	"testing"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
)

// The allocations the unary interceptor adds to a call that succeeds at
// once, on a loopback server: the header and trailer metadata grpc-go copies
// for the grpc.Header and grpc.Trailer call options (a map and a slice for
// the header's content-type, a map for the trailer). These tell a committed
// attempt and a pushback apart when an attempt fails; the engine itself and
// the call's state, taken from a pool, allocate nothing. (Excluded under
// -race, where sync.Pool drops items.)
func TestUnaryAllocs(t *testing.T) {
	const extra = 4
	addr := listen(t, &server{})
	client := func(opts ...grpc.DialOption) grpc_health_v1.HealthClient {
		cc, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return grpc_health_v1.NewHealthClient(cc)
	}
	plain := client()
	ours := client(grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(retry.New())))
	ctx := context.Background()
	allocs := func(c grpc_health_v1.HealthClient) float64 {
		if _, err := c.Check(ctx, check); err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(200, func() { c.Check(ctx, check) })
	}
	p, o := allocs(plain), allocs(ours)
	if o-p > extra {
		t.Errorf("the interceptor adds %.0f allocations to a call (%.0f against %.0f), want %d or fewer", o-p, o, p, extra)
	}
}
