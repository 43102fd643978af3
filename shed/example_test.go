package shed_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/steadyhq/retry/shed"
)

// A server whose one permit is taken sheds a retry at once: 503, with
// Retry-After in seconds (1 or 2 here: nothing has completed yet, so the
// shortest wait, spread over [1 s, 2 s]).
func Example() {
	s, err := shed.New(shed.Options{Initial: 1, Min: 1, Max: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	busy, done := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(busy)
			<-done
		}
	})))
	defer srv.Close()
	go http.Get(srv.URL + "/slow")
	<-busy

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Retry-Attempt", "2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	close(done)
	ra := resp.Header.Get("Retry-After")
	fmt.Println(resp.StatusCode, ra == "1" || ra == "2", resp.Header.Get("Cache-Control"))
	fmt.Printf("%s", body[:len("shed: server overloaded")])
	fmt.Println()
	fmt.Println(s.Stats().Shed[shed.ReasonLow])
	// Output:
	// 503 true no-store
	// shed: server overloaded
	// 1
}
