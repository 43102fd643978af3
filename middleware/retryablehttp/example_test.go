package retryablehttp_test

import (
	"fmt"
	"net/http"
	"time"

	hcretry "github.com/hashicorp/go-retryablehttp"
	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/middleware/retryablehttp"
	"github.com/steadyhq/retry/retrytest"
)

// An existing retryablehttp.Client deciding as the retry Transport: the 503
// is retried, the POST without an Idempotency-Key is not.
func ExampleConfigure() {
	srv := retrytest.NewServer(
		retrytest.Step{Status: http.StatusServiceUnavailable},
		retrytest.Step{Body: "ok"},
		retrytest.Step{Status: http.StatusServiceUnavailable},
	)
	defer srv.Close()

	c := hcretry.NewClient()
	c.Logger = nil
	retryablehttp.Configure(c, retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 4, InitialInterval: time.Millisecond})))
	defer c.HTTPClient.CloseIdleConnections()

	resp, err := c.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("GET:", resp.StatusCode, "after", srv.Count(), "requests")

	resp, err = c.Post(srv.URL, "text/plain", []byte("order"))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("POST:", resp.StatusCode, "after", srv.Count()-2, "request")
	// Output:
	// GET: 200 after 2 requests
	// POST: 503 after 1 request
}
