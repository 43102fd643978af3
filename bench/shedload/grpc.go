package shedload

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/failsafegrpc"
	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// requestKey is the metadata key of RequestHeader.
const requestKey = "shedload-request"

// GRPCServer is a server under test over gRPC: Interceptor returns its
// shedding, a unary server interceptor around the handler of fixed
// capacity (a nil Interceptor: no shedding).
type GRPCServer struct {
	Name        string
	Interceptor func() (grpc.UnaryServerInterceptor, error)
}

// GRPCNone is the handler of fixed capacity alone over gRPC.
var GRPCNone = GRPCServer{Name: "none"}

// GRPCFailsafe is failsafe-go's unary server interceptor
// (failsafegrpc.NewUnaryServerInterceptor) with an adaptive limiter of its
// defaults, as Failsafe is over HTTP. (Its documentation prefers its tap
// handle, NewServerInHandle, for load that needs no look at the request;
// a tap handle refuses before any interceptor, where the attempt could
// not be recorded.) A refused RPC ends with UNKNOWN and no pushback.
var GRPCFailsafe = GRPCServer{Name: "failsafe", Interceptor: func() (grpc.UnaryServerInterceptor, error) {
	return failsafegrpc.NewUnaryServerInterceptor[any](adaptivelimiter.NewWithDefaults[any]()), nil
}}

// GRPCServers are the servers of a run over gRPC, in the order of its
// table.
func GRPCServers() []GRPCServer {
	return []GRPCServer{GRPCNone, GRPCFailsafe, GRPCOurs, GRPCOursDefault}
}

// GRPC returns the Target that serves s on a loopback grpc-go server (the
// health service's Check, served from the pool) and calls it through a
// client with the grpc module's UnaryClientInterceptor with its defaults
// (pushback honoured, a retry budget), grpc-go's own retries off.
func GRPC(s GRPCServer) Target {
	return Target{Name: s.Name, Start: func(pool *Pool, rec *Recorder) (Caller, error) {
		chain := []grpc.UnaryServerInterceptor{grpcRecording(rec)}
		if s.Interceptor != nil {
			ic, err := s.Interceptor()
			if err != nil {
				return nil, err
			}
			chain = append(chain, ic)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		srv := grpc.NewServer(grpc.ChainUnaryInterceptor(chain...))
		grpc_health_v1.RegisterHealthServer(srv, &pooled{pool: pool})
		go srv.Serve(lis)
		cc, err := grpc.NewClient(lis.Addr().String(),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDisableRetry(),
			grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(retry.New())))
		if err != nil {
			srv.Stop()
			return nil, err
		}
		return &grpcCaller{srv: srv, cc: cc, client: grpc_health_v1.NewHealthClient(cc)}, nil
	}}
}

// pooled is a health service whose Check is served from the pool.
type pooled struct {
	grpc_health_v1.UnimplementedHealthServer
	pool *Pool
}

var serving = &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}

func (p *pooled) Check(ctx context.Context, _ *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	if !Serve(ctx, p.pool) {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return serving, nil
}

// grpcRecording records every RPC that reaches the server in rec, before
// the shedding sees it; the pushback in its trailer is its Retry-After.
func grpcRecording(rec *Recorder) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		id, _ := strconv.ParseUint(first(md.Get(requestKey)), 10, 64)
		prev, _ := strconv.Atoi(first(md.Get(retrygrpc.PreviousAttemptsKey)))
		ctx, a := rec.Arrive(ctx, id, prev+1)
		ts := &trailerStream{ServerTransportStream: grpc.ServerTransportStreamFromContext(ctx)}
		resp, err := handler(grpc.NewContextWithServerTransportStream(ctx, ts), req)
		ra := time.Duration(-1)
		if v := first(ts.trailer.Get(retrygrpc.PushbackKey)); v != "" {
			if n, perr := strconv.ParseInt(v, 10, 64); perr == nil && n >= 0 {
				ra = time.Duration(n) * time.Millisecond
			}
		}
		code := 200
		if err != nil {
			code = int(status.Code(err))
		}
		rec.Answer(a, code, ra)
		rec.End(a)
		return resp, err
	}
}

// trailerStream keeps the trailer a handler sets.
type trailerStream struct {
	grpc.ServerTransportStream
	trailer metadata.MD
}

func (s *trailerStream) SetTrailer(md metadata.MD) error {
	s.trailer = metadata.Join(s.trailer, md)
	return s.ServerTransportStream.SetTrailer(md)
}

// first is the first of vs, "" when none.
func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// grpcCaller calls a gRPC server under test.
type grpcCaller struct {
	srv    *grpc.Server
	cc     *grpc.ClientConn
	client grpc_health_v1.HealthClient
}

func (c *grpcCaller) Call(ctx context.Context, id uint64) bool {
	ctx = metadata.AppendToOutgoingContext(ctx, requestKey, strconv.FormatUint(id, 10))
	_, err := c.client.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	return err == nil
}

func (c *grpcCaller) Close() {
	c.cc.Close()
	c.srv.GracefulStop()
}
