// Command all uses the root module and each nested library module as
// README's install instructions set them up in a module of its own, and
// imports nothing else outside the standard library, so that go mod tidy
// takes every other module at the version the library's modules require.
// It contacts no server but a loopback one of its own: a request through
// retry.Transport over the OpenTelemetry transport, the gRPC interceptors,
// a Redis store refusing a nil client, and go-retryablehttp's CheckRetry.
package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"github.com/steadyhq/retry/middleware/retryablehttp"
	retryotel "github.com/steadyhq/retry/otel"
	retryredis "github.com/steadyhq/retry/redis"
)

func main() {
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
	r := retry.New()
	if err := r.Err(); err != nil {
		fail("retry.New", err)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	client := &http.Client{Transport: retry.NewTransport(retryotel.Transport(nil))}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fail("GET through otel.Transport", err)
	}
	resp.Body.Close()
	fmt.Println("retry.NewTransport(otel.Transport(nil)):", resp.Status)

	if retrygrpc.UnaryClientInterceptor(r) == nil || retrygrpc.StreamClientInterceptor(r) == nil {
		fail("grpc interceptors", fmt.Errorf("nil"))
	}
	fmt.Println("grpc.UnaryClientInterceptor, grpc.StreamClientInterceptor: ok")

	if _, err := retryredis.NewStore(nil, retryredis.Options{}); err == nil {
		fail("redis.NewStore(nil)", fmt.Errorf("no error"))
	}
	fmt.Println("redis.NewStore(nil): an error, as it should")

	again, err := retryablehttp.CheckRetry(r)(context.Background(), resp, nil)
	if again || err != nil {
		fail("retryablehttp.CheckRetry on a 200", fmt.Errorf("got %v, %v, want false, nil", again, err))
	}
	fmt.Println("retryablehttp.CheckRetry on a 200: no retry")
}
