package grpc_test

import (
	"context"
	"strings"
	"testing"

	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Type names every code in snake case, and a code outside gRPC's 17 by its
// number.
func TestType(t *testing.T) {
	tests := []struct {
		code codes.Code
		want string
	}{
		{code: codes.OK, want: "grpc.ok"},
		{code: codes.Unavailable, want: "grpc.unavailable"},
		{code: codes.ResourceExhausted, want: "grpc.resource_exhausted"},
		{code: codes.DeadlineExceeded, want: "grpc.deadline_exceeded"},
		{code: codes.FailedPrecondition, want: "grpc.failed_precondition"},
		{code: codes.Unauthenticated, want: "grpc.unauthenticated"},
		{code: codes.Code(17), want: "grpc.code_17"},
		{code: codes.Code(1 << 31), want: "grpc.code_2147483648"},
	}
	for _, tt := range tests {
		if got := retrygrpc.Type(tt.code); got != tt.want {
			t.Errorf("Type(%d) = %q, want %q", tt.code, got, tt.want)
		}
	}
}

// Bad input is an error naming what is wrong, never a panic.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	streamer := func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
		return nil, nil
	}
	desc := &grpc.StreamDesc{ServerStreams: true}
	okCodes := retrygrpc.RetryableCodes(codes.Unavailable, codes.OK)
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{
			name: "unary: OK among the retryable codes",
			call: func() error {
				return retrygrpc.UnaryClientInterceptor(nil, okCodes)(ctx, "/s/m", nil, nil, nil, invoker)
			},
			want: "RetryableCodes: codes = OK: must be error codes, not OK",
		},
		{
			name: "stream: OK among the retryable codes",
			call: func() error {
				_, err := retrygrpc.StreamClientInterceptor(nil, okCodes)(ctx, desc, nil, "/s/m", streamer)
				return err
			},
			want: "RetryableCodes: codes = OK: must be error codes, not OK",
		},
		{
			name: "unary: nil invoker",
			call: func() error { return retrygrpc.UnaryClientInterceptor(nil)(ctx, "/s/m", nil, nil, nil, nil) },
			want: "invoker is nil",
		},
		{
			name: "stream: nil streamer",
			call: func() error {
				_, err := retrygrpc.StreamClientInterceptor(nil)(ctx, desc, nil, "/s/m", nil)
				return err
			},
			want: "streamer is nil",
		},
		{
			name: "stream: nil description",
			call: func() error {
				_, err := retrygrpc.StreamClientInterceptor(nil)(ctx, nil, nil, "/s/m", streamer)
				return err
			},
			want: "stream description is nil",
		},
		{
			name: "client stream: streamer returns neither stream nor error",
			call: func() error {
				_, err := retrygrpc.StreamClientInterceptor(nil)(ctx, &grpc.StreamDesc{ClientStreams: true}, nil, "/s/m", streamer)
				return err
			},
			want: "streamer returned neither a stream nor an error",
		},
		{
			name: "server stream: streamer returns neither stream nor error",
			call: func() error {
				cs, err := retrygrpc.StreamClientInterceptor(nil)(ctx, desc, nil, "/s/m", streamer)
				if err != nil {
					return err
				}
				if err := cs.SendMsg(nil); err != nil {
					return err
				}
				return cs.RecvMsg(nil)
			},
			want: "streamer returned neither a stream nor an error",
		},
		{
			name: "unary: nil options are skipped",
			call: func() error {
				return retrygrpc.UnaryClientInterceptor(nil, nil, retrygrpc.PerMethod())(ctx, "/s/m", nil, nil, nil, invoker)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("err = %v, want one saying %q", err, tt.want)
			case tt.want != "" && status.Code(err) != codes.Internal:
				t.Errorf("status.Code = %v, want Internal: a configuration error is never UNKNOWN", status.Code(err))
			}
		})
	}
}
