package grpc_test

import (
	"context"
	"errors"
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
	"google.golang.org/grpc/metadata"
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

// slowFirst is a health server whose first Check hangs until the client
// gives it up, and whose later Checks answer at once.
type slowFirst struct {
	grpc_health_v1.UnimplementedHealthServer
	n        atomic.Int32
	previous atomic.Value // the grpc-previous-rpc-attempts of the last Check
}

func (s *slowFirst) Check(ctx context.Context, _ *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		s.previous.Store(md.Get(retrygrpc.PreviousAttemptsKey))
	}
	if s.n.Add(1) == 1 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

// Hedged unary calls: when the first attempt has not answered after 20 ms,
// a hedge is sent beside it; the first success wins and the other attempt
// is canceled.
func Example_hedging() {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := grpc.NewServer()
	s := &slowFirst{}
	grpc_health_v1.RegisterHealthServer(srv, s)
	go srv.Serve(lis)
	defer srv.Stop()

	r := retry.New(retry.WithHedge(retry.Hedge{Delay: 20 * time.Millisecond}))
	cc, _ := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(r)),
	)
	defer cc.Close()
	client := grpc_health_v1.NewHealthClient(cc)

	resp, err := client.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{})
	fmt.Println(resp.GetStatus(), err)
	fmt.Println("attempts:", s.n.Load(), "hedges:", r.Stats().Hedges, "the hedge's previous attempts:", s.previous.Load())
	// Output:
	// SERVING <nil>
	// attempts: 2 hedges: 1 the hedge's previous attempts: [1]
}

// Per-call options: one call makes a single attempt, another up to five.
func Example_callOptions() {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := grpc.NewServer()
	grpc_health_v1.RegisterHealthServer(srv, &alwaysUnavailable{})
	go srv.Serve(lis)
	defer srv.Stop()

	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}))
	cc, _ := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(r)),
	)
	defer cc.Close()
	client := grpc_health_v1.NewHealthClient(cc)
	req := &grpc_health_v1.HealthCheckRequest{}

	var re *retry.Error
	_, err := client.Check(context.Background(), req, retrygrpc.Disable())
	errors.As(err, &re)
	fmt.Println(status.Code(err), status.Convert(err).Message(), re.Attempts)
	_, err = client.Check(context.Background(), req, retrygrpc.WithMax(5))
	errors.As(err, &re)
	fmt.Println(status.Code(err), status.Convert(err).Message(), re.Attempts)
	// Output:
	// Unavailable node-3 down 1
	// Unavailable node-3 down 5
}

// alwaysUnavailable is a health server that is down.
type alwaysUnavailable struct {
	grpc_health_v1.UnimplementedHealthServer
}

func (alwaysUnavailable) Check(context.Context, *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	return nil, status.Error(codes.Unavailable, "node-3 down")
}
