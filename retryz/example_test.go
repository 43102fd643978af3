package retryz_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/retryz"
)

// The page, mounted on an internal mux at /debug/retry/, shows a
// Retrier's breakers; ?format=json gives the same data.
func Example() {
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
		retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, MaxWait: -1, PerKey: true}))
	_ = retry.Run(context.Background(), func(context.Context) error { return errors.New("down") }, r, retry.WithKey("payments"))

	z := retryz.New()
	z.AddRetrier("api", r)
	internal := http.NewServeMux() // served on an internal port only
	internal.Handle("/debug/retry/", z)

	srv := httptest.NewServer(internal)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/debug/retry/?format=json")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var s retryz.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		fmt.Println(err)
		return
	}
	c := s.Clients[0]
	fmt.Println(c.Name, c.Keys[0].Key, c.Keys[0].Breaker, c.Changes[0].From, "->", c.Changes[0].To)
	// Output: api payments open closed -> open
}
