package bench

import (
	"context"
	"net"
	"testing"

	grpcmwretry "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
)

// serving answers every Check at once.
type serving struct {
	grpc_health_v1.UnimplementedHealthServer
}

var servingResp = &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}

func (serving) Check(context.Context, *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	return servingResp, nil
}

// Case 6: one unary RPC that succeeds at once, on a grpc-go server on a
// loopback TCP port: a bare client, go-grpc-middleware v2's retry
// interceptor (three attempts on UNAVAILABLE, as ours) and ours on a
// prebuilt Retrier.
func BenchmarkGRPC(b *testing.B) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	grpc_health_v1.RegisterHealthServer(srv, serving{})
	go srv.Serve(lis)
	defer srv.Stop()

	clients := []struct {
		name string
		opts []grpc.DialOption
	}{
		{"plain", nil},
		{"retry-interceptor", []grpc.DialOption{
			grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(retry.New())),
		}},
		{"go-grpc-middleware-retry", []grpc.DialOption{
			grpc.WithUnaryInterceptor(grpcmwretry.UnaryClientInterceptor(
				grpcmwretry.WithMax(3), grpcmwretry.WithCodes(codes.Unavailable))),
		}},
	}
	req := &grpc_health_v1.HealthCheckRequest{}
	for _, bc := range clients {
		b.Run(bc.name, func(b *testing.B) {
			opts := append([]grpc.DialOption{
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDisableRetry(),
			}, bc.opts...)
			cc, err := grpc.NewClient(lis.Addr().String(), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			client := grpc_health_v1.NewHealthClient(cc)
			ctx := context.Background()
			if _, err := client.Check(ctx, req); err != nil { // connect
				b.Fatal(err)
			}
			defer cpuPerOp(b)()
			for b.Loop() {
				if _, err := client.Check(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Case 6, without the network: each interceptor alone around an invoker
// that succeeds at once, so that only its own cost is left. (grpc-go's
// copies of the header and trailer metadata that our interceptor asks for
// happen in the real invoker, and show in BenchmarkGRPC only.)
func BenchmarkGRPCOverhead(b *testing.B) {
	cc, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	interceptors := []struct {
		name string
		ic   grpc.UnaryClientInterceptor
	}{
		{"plain", func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(ctx, method, req, reply, cc, opts...)
		}},
		{"retry-interceptor", retrygrpc.UnaryClientInterceptor(retry.New())},
		{"go-grpc-middleware-retry", grpcmwretry.UnaryClientInterceptor(grpcmwretry.WithMax(3), grpcmwretry.WithCodes(codes.Unavailable))},
	}
	req, reply := &grpc_health_v1.HealthCheckRequest{}, &grpc_health_v1.HealthCheckResponse{}
	const method = "/grpc.health.v1.Health/Check"
	opts := []grpc.CallOption{grpc.StaticMethod()} // as generated code passes
	for _, bc := range interceptors {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			defer cpuPerOp(b)()
			for b.Loop() {
				if err := bc.ic(ctx, method, req, reply, cc, invoker, opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
