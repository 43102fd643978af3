package grpc_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// twiceUnavailable is a health server whose first two Checks fail with
// UNAVAILABLE and whose third fails with INVALID_ARGUMENT.
type twiceUnavailable struct {
	grpc_health_v1.UnimplementedHealthServer
	n atomic.Int32
}

func (s *twiceUnavailable) Check(context.Context, *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	switch s.n.Add(1) {
	case 1, 2:
		return nil, status.Error(codes.Unavailable, "starting")
	case 3:
		return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
	}
	return nil, status.Error(codes.InvalidArgument, "no such service")
}

// A client whose unary calls run through a Retrier: UNAVAILABLE is retried,
// INVALID_ARGUMENT stops at once, and the error keeps its status and type.
func Example() {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := grpc.NewServer()
	grpc_health_v1.RegisterHealthServer(srv, &twiceUnavailable{})
	go srv.Serve(lis)
	defer srv.Stop()

	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 4, InitialInterval: 10 * time.Millisecond}),
		retry.OnRetry(func(ev retry.Event) { fmt.Println("retry after", ev.Type) }),
	)
	cc, _ := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(r)),
	)
	defer cc.Close()
	client := grpc_health_v1.NewHealthClient(cc)

	resp, err := client.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{})
	fmt.Println(resp.GetStatus(), err)

	_, err = client.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{})
	fmt.Println(status.Code(err), retry.TypeOf(err))
	// Output:
	// retry after grpc.unavailable
	// retry after grpc.unavailable
	// SERVING <nil>
	// InvalidArgument grpc.invalid_argument
}
