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
	"github.com/steadyhq/retry/shed"
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

// mount is the mounting shown in README and docs/debug.md, word for word
// (TestDocsShowMount checks it; internal/doccheck compiles the blocks
// with the same names declared). It is compiled, not run: it would listen
// on a fixed port.
func mount(payments *retry.Retrier, search *retry.Transport, api *shed.Shedder, store retryz.Fleet) {
	page := retryz.New()
	page.AddRetrier("payments", payments) // a *retry.Retrier; nil is the default one of Do and Run
	page.AddTransport("search", search)   // a *retry.Transport
	page.AddShedder("api", api)           // a *shed.Shedder
	page.AddFleet("breakers", store)      // a Store, Limiter or Budget of the redis module

	internal := http.NewServeMux() // an internal port, never the public one
	internal.Handle("/debug/retry/", page)
	go http.ListenAndServe("127.0.0.1:6061", internal)
}

var _ = mount // compiled, never called
