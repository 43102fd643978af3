package shedload

import (
	"net/http"

	"google.golang.org/grpc"

	retrygrpc "github.com/steadyhq/retry/grpc"
	"github.com/steadyhq/retry/shed"
)

// oursOptions is this library's shedding as its documentation says to set
// it up: Initial at the requests the handler serves at once (the pool's
// workers, the same in Full and Short), and, as behind a proxy, no bound
// on one client's share of the permits: the load generator sends the
// requests of all its clients from one address. The rest at their
// defaults.
var oursOptions = shed.Options{Initial: Full().Workers, ClientShare: 1}

// Ours is this library's shedding (package shed) set up as its
// documentation says: Initial at the handler's workers.
var Ours = oursHTTP("ours", oursOptions)

// OursDefault is this library's shedding with every option at its
// default (Initial 20, five times the handler's workers) but the share of
// one client, for the generator's one address (see oursOptions): its
// limit starts far above what the handler serves, and the first windows
// of an overload queue in the handler.
var OursDefault = oursHTTP("ours-default", shed.Options{ClientShare: 1})

func oursHTTP(name string, o shed.Options) HTTPServer {
	return HTTPServer{Name: name, Wrap: func(h http.Handler) (http.Handler, error) {
		s, err := shed.New(o)
		if err != nil {
			return nil, err
		}
		return s.Handler(h), nil
	}}
}

// GRPCOurs is this library's shedding over gRPC: the grpc module's
// UnaryServerInterceptor around shed.New set up as Ours is.
var GRPCOurs = oursGRPC("ours", oursOptions)

// GRPCOursDefault is GRPCOurs with every option at its default but the
// share of one client, as OursDefault.
var GRPCOursDefault = oursGRPC("ours-default", shed.Options{ClientShare: 1})

func oursGRPC(name string, o shed.Options) GRPCServer {
	return GRPCServer{Name: name, Interceptor: func() (grpc.UnaryServerInterceptor, error) {
		s, err := shed.New(o)
		if err != nil {
			return nil, err
		}
		return retrygrpc.UnaryServerInterceptor(s), nil
	}}
}
