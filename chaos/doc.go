// Package chaos holds the fault-injection harness of the retry suite: a
// loopback HTTP Server that injects server-side faults (503 storms with
// Retry-After, 500s, half-closed connections, truncated and slow bodies) and
// keeps a ledger of what it applied, and a TCP Proxy (toxiproxy, in process)
// that injects network faults (resets, latency, bandwidth limits, timeouts).
//
// The tests of this module drive the retry Transport through both and check
// that every call ends in a response or a typed error within its deadline,
// that no unkeyed POST is applied twice, that every replayed body is
// identical, and that no goroutine or file descriptor leaks. Run them with
//
//	go test -race ./chaos/...
//
// and a longer soak with -chaos.soak.
package chaos
