package grpc_test

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"github.com/steadyhq/retry/shed"
)

// TestRetryMarkGoesDown: a call made while serving a retry carries
// grpc-previous-rpc-attempts on its own first attempt, so that the server
// below knows the request belongs to a retry; a call serving a first
// attempt numbers its own attempts from nothing.
func TestRetryMarkGoesDown(t *testing.T) {
	down := &server{check: failing(codes.Unavailable, 1000)}
	downAddr := listen(t, down)
	var downstream grpc_health_v1.HealthClient
	sh, err := shed.New(shed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	front := &server{
		check: func(ctx context.Context, _ int) error {
			_, err := downstream.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
			return err
		},
		watch: func(stream grpc_health_v1.Health_WatchServer, _ int) error {
			_, err := downstream.Check(stream.Context(), &grpc_health_v1.HealthCheckRequest{})
			return err
		},
	}
	c := plain(t, listenShed(t, front, sh))
	tests := []struct {
		name         string
		previous     string // what the front receives
		stream       bool
		nested       bool // the front's client retries anyway
		wantPrevious []string
	}{
		{name: "first attempt", wantPrevious: []string{"", "1", "2"}},
		{name: "retry", previous: "1", wantPrevious: []string{"1"}},
		{name: "third attempt", previous: "2", wantPrevious: []string{"2"}},
		{name: "stream retry", previous: "1", stream: true, wantPrevious: []string{"1"}},
		{name: "retry, nested retries on", previous: "1", nested: true, wantPrevious: []string{"1", "1", "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			downstream = grpc_health_v1.NewHealthClient(dial(t, downAddr, retry.New(retry.WithPolicy(immediate(t, 3)), retry.WithNestedRetries(tt.nested))))
			before := len(down.seen())
			ctx := context.Background()
			if tt.previous != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, retrygrpc.PreviousAttemptsKey, tt.previous)
			}
			if tt.stream {
				st, err := c.Watch(ctx, &grpc_health_v1.HealthCheckRequest{})
				if err == nil {
					_, err = st.Recv()
				}
				if status.Code(err) != codes.Unavailable {
					t.Errorf("err = %v, want the dependency's UNAVAILABLE", err)
				}
			} else if _, err := c.Check(ctx, &grpc_health_v1.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
				t.Errorf("err = %v, want the dependency's UNAVAILABLE", err)
			}
			var got []string
			for _, h := range down.seen()[before:] {
				got = append(got, h.previous)
			}
			if !slices.Equal(got, tt.wantPrevious) {
				t.Errorf("the dependency saw grpc-previous-rpc-attempts %q, want %q", got, tt.wantPrevious)
			}
		})
	}
}
