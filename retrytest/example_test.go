package retrytest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/retrytest"
)

var errTimeout = errors.New("upstream timeout")

func ExampleFailN() {
	f := retrytest.FailN(2, errTimeout, "report")
	v, err := retry.Do(context.Background(), f.Do,
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate}))
	fmt.Println(v, err)
	for _, c := range f.Calls() {
		fmt.Println("attempt", c.Attempt, c.Err)
	}
	// Output:
	// report <nil>
	// attempt 1 upstream timeout
	// attempt 2 upstream timeout
	// attempt 3 <nil>
}

func ExampleNewServer() {
	srv := retrytest.NewServer(
		retrytest.Step{Status: http.StatusServiceUnavailable},
		retrytest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"0"}}},
		retrytest.Step{Body: "hello"},
	)
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: retry.NewTransport(base,
		retry.WithPolicy(retry.Policy{MaxAttempts: 4, InitialInterval: time.Millisecond}))}

	resp, err := client.Get(srv.URL + "/greeting")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", srv.Count(), "requests")
	for _, r := range srv.Requests() {
		fmt.Println(r.Method, r.URL, "step", r.Step)
	}
	// Output:
	// 200 after 3 requests
	// GET /greeting step 0
	// GET /greeting step 1
	// GET /greeting step 2
}
