// Package retrytest helps test code that retries: a scripted function
// (Func), a scripted HTTP server on a loopback address (Server) and a
// scripted http.RoundTripper that needs no network (Transport). Each fails
// as scripted, then succeeds, and records what it received and when.
//
// # Virtual time
//
// With testing/synctest the waits between attempts take no real time, and
// the recorded times are exact. Func and Transport work inside a synctest
// bubble; Server does not (a bubble's clock does not advance while a
// goroutine waits on the network):
//
//	func TestFetchRetries(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			f := retrytest.FailN(3, io.ErrUnexpectedEOF, "ok")
//			p := retry.Policy{MaxAttempts: 4, InitialInterval: time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}}
//			if _, err := retry.Do(t.Context(), f.Do, retry.WithPolicy(p)); err != nil {
//				t.Fatal(err)
//			}
//			// f.Waits() is exactly [1s 2s 4s], and the test took no real time.
//		})
//	}
//
// A Transport step with a Delay also waits in virtual time, so per-attempt
// timeouts and Retry-After can be tested at their real scale.
package retrytest
