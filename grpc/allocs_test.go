//go:build !race

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
)

// The allocations the unary interceptor adds to a call that succeeds at
// once, on a loopback server, all of them grpc-go's copies of the metadata
// for the grpc.Header and grpc.Trailer call options (metadata.MD.Copy in
// the options' after hooks: a map, its bucket and the content-type value
// for the header; a map for the empty trailer). These tell a committed
// attempt and a pushback apart when an attempt fails, and no other grpc-go
// API reports them to an interceptor. The engine itself and the call's
// state, taken from a pool, allocate nothing; a per-call option of this
// package costs nothing either. (Excluded under -race, where sync.Pool
// drops items.)
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
	// A per-call option of this package adds nothing of the interceptor's
	// own: the plain call is given the same option, which grpc-go ignores.
	opt := retrygrpc.WithCodes(codes.Unavailable, codes.Aborted)
	pc := testing.AllocsPerRun(200, func() { plain.Check(ctx, check, opt) })
	oc := testing.AllocsPerRun(200, func() { ours.Check(ctx, check, opt) })
	if oc-pc > extra {
		t.Errorf("with a per-call WithCodes the interceptor adds %.0f allocations (%.0f against %.0f), want %d or fewer", oc-pc, oc, pc, extra)
	}
}
