// Command example runs a grpc-go client through the retry interceptors
// against a loopback health server: its Check fails twice with UNAVAILABLE,
// the second time with a pushback of 50 ms, and succeeds on the third
// attempt; its Watch stream fails once before its first message and is
// opened again.
//
//	go run ./example (from the grpc module)
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
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

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// flaky is a health server that fails its first calls.
type flaky struct {
	grpc_health_v1.UnimplementedHealthServer
	checks, watches atomic.Int32
}

var serving = &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}

func (f *flaky) Check(ctx context.Context, _ *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	switch f.checks.Add(1) {
	case 1:
		return nil, status.Error(codes.Unavailable, "warming up")
	case 2:
		// Come back in 50 ms at the earliest (gRFC A6 pushback).
		grpc.SetTrailer(ctx, metadata.Pairs(retrygrpc.PushbackKey, "50"))
		return nil, status.Error(codes.Unavailable, "overloaded")
	}
	return serving, nil
}

func (f *flaky) Watch(_ *grpc_health_v1.HealthCheckRequest, stream grpc_health_v1.Health_WatchServer) error {
	if f.watches.Add(1) == 1 {
		return status.Error(codes.Unavailable, "draining")
	}
	for range 2 {
		if err := stream.Send(serving); err != nil {
			return err
		}
	}
	return nil
}

func run(w io.Writer) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	grpc_health_v1.RegisterHealthServer(srv, &flaky{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		srv.Stop()
		<-served
	}()

	// One Retrier for the connection: four attempts, backoff from 20 ms, and
	// a breaker per target. The interceptors key it by the target.
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 4, InitialInterval: 20 * time.Millisecond}),
		retry.WithBreaker(retry.Breaker{PerKey: true}),
		retry.OnRetry(func(ev retry.Event) {
			fmt.Fprintf(w, "attempt %d failed (%s); retrying\n", ev.Attempt, ev.Type)
		}),
	)
	cc, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(r)),
		grpc.WithStreamInterceptor(retrygrpc.StreamClientInterceptor(r)),
		grpc.WithDisableRetry(), // grpc-go's own retries would multiply ours
	)
	if err != nil {
		return err
	}
	defer cc.Close()
	client := grpc_health_v1.NewHealthClient(cc)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	begin := time.Now()
	resp, err := client.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Check: %v after %d attempts (pushback kept: %v)\n",
		resp.GetStatus(), r.Stats().Attempts, time.Since(begin) >= 50*time.Millisecond)

	stream, err := client.Watch(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		return err
	}
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "Watch: %v\n", msg.GetStatus())
	}
	fmt.Fprintf(w, "%d attempts in all\n", r.Stats().Attempts)
	return nil
}
