// Package retryz serves a live page of a program's defences, in the
// tradition of net/http/pprof, expvar, golang.org/x/net/trace and gRPC's
// channelz: for every Retrier, Transport, Shedder and fleet component
// registered with a Handler, by name, the state of each circuit breaker and
// its recent changes, the retry budget's balance and recent denials, the
// rate limit's tokens, adaptive throttling's probability, the concurrency
// limit and the attempts in flight, hedges and their wins; for a Shedder,
// its limit, requests in flight and queued, those admitted and shed by
// reason, and the Retry-After it sends; for a fleet component (the Store,
// Limiter and Budget of github.com/steadyhq/retry/redis), whether it runs
// on the fleet's state, when it last synced and how many of its round
// trips to Redis failed.
//
// The page reads at a glance: breaker states in colour, sparklines of the
// last five minutes (attempts, failures, retries, denials; for a Shedder,
// admitted and shed), and it updates itself every second over Server-Sent
// Events. It loads nothing from elsewhere (no script, style or font from
// another address; its Content-Security-Policy forbids it), so it works on
// an air-gapped debug port. The same data is served as JSON with
// ?format=json (see Snapshot).
//
// Mount it on an internal port, as net/http/pprof's documentation advises
// for its handlers: what it shows (dependency names, the keys of calls,
// the error types) is for operators, not for the public. It registers
// nothing on http.DefaultServeMux, answers only GET and HEAD, and changes
// nothing: keys and names pass through package redact, as in dead-letter
// records.
//
//	z := retryz.New()
//	z.AddRetrier("payments", r)
//	z.AddTransport("search", searchTransport)
//	internal := http.NewServeMux()
//	internal.Handle("/debug/retry/", z)
//	go http.ListenAndServe("127.0.0.1:6061", internal)
//
// It costs the calls nothing: it reads each source's Stats when a page,
// JSON or event is asked for (at most once a second, whatever the number
// of readers), and registering a source changes nothing on its call path.
// Its history, for the sparklines, is kept from those readings: while
// nobody looks, nothing is read, and a gap between two readings shows the
// average rate over it.
package retryz
