package grpc_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/steadyhq/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// chat is a hand-written bidirectional streaming service: its handler fails
// with UNAVAILABLE before answering.
var chatDesc = grpc.StreamDesc{StreamName: "Chat", ClientStreams: true, ServerStreams: true}

// A bidirectional stream is retried only at its opening: once it is open,
// the messages the caller sends are not kept, and a failure reaches the
// caller untouched, after one hit.
func TestBidiStreamNotReplayed(t *testing.T) {
	var hits atomic.Int32
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	gs.RegisterService(&grpc.ServiceDesc{
		ServiceName: "retrytest.Chat",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    chatDesc.StreamName,
			ClientStreams: true,
			ServerStreams: true,
			Handler: func(_ any, stream grpc.ServerStream) error {
				hits.Add(1)
				if err := stream.RecvMsg(new(emptypb.Empty)); err != nil {
					return err
				}
				return status.Error(codes.Unavailable, "going away")
			},
		}},
	}, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	cc := dial(t, lis.Addr().String(), retry.New(retry.WithPolicy(fast)))
	stream, err := cc.NewStream(context.Background(), &chatDesc, "/retrytest.Chat/Chat")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	err = stream.RecvMsg(new(emptypb.Empty))
	if status.Code(err) != codes.Unavailable || reasonOf(err) != "" {
		t.Errorf("err = %v, want the stream's own UNAVAILABLE", err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d hits, want 1", n)
	}
}
