// Package otel reports the retry engine to OpenTelemetry: metrics of a
// Retrier, and an event per attempt on the span of the call.
//
// # Metrics
//
// NewMetrics creates the instruments on a MeterProvider. Metrics.Option
// records what only the hooks see (the wait before each retry, and the calls
// that give up, by reason and error type); Metrics.Observe reads the
// counters and gauges of Stats at each collection:
//
//	m, err := otel.NewMetrics(meterProvider)
//	if err != nil {
//		return err
//	}
//	r := retry.New(retry.WithPolicy(p), m.Option())
//	reg, err := m.Observe(r) // reg.Unregister() when r is retired
//
// The instruments, under the scope github.com/steadyhq/retry/otel:
//
//	retry.calls               counter    {call}     calls, counted as the first attempt ends or the call is stopped before one
//	retry.attempts            counter    {attempt}  attempts, first ones included
//	retry.failures            counter    {failure}  failed attempts, retried or not
//	retry.retries             counter    {retry}    failed attempts followed by a retry
//	retry.give_ups            counter    {call}     calls ended without success; retry.reason, error.type
//	retry.delay               histogram  s          the wait before each retry; error.type
//	retry.dead_letters        counter    {record}   dead-letter records; retry.outcome delivered or failed
//	retry.denials             counter    {call}     stops by a defence; retry.defence budget, breaker, rate_limit,
//	                                                  throttle (with retry.WithThrottle) or concurrency (with retry.WithConcurrency)
//	retry.hedges              counter    {attempt}  hedged attempts started (retry.Hedged)
//	retry.hedge_wins          counter    {call}     calls whose returned success came from a hedge
//	retry.budget.balance      gauge      {retry}    retries the budget would grant now; retry.key with per-key budgets
//	retry.breaker.state       gauge      1          0 closed, 1 half-open, 2 open; retry.key with per-key breakers
//	retry.throttle.probability gauge     1          the share adaptive throttling sheds now; retry.key
//	retry.concurrency.limit   gauge      {attempt}  the adaptive concurrency limit now; retry.key
//	retry.concurrency.in_flight gauge    {attempt}  attempts holding a permit; retry.key
//
// error.type is the engine's type of the failure (retry.TypeOf), such as
// http.5xx.503 or net.connection_reset; retry.reason is retry.Reason's name.
// Each value of an attribute is a time series a backend keeps, so
// error.type takes its values from a bounded set, whatever a server sends:
// the HTTP types of the statuses 100 to 599 and the types of gRPC's 17
// codes are kept, a gRPC code outside them (grpc.code_<n>) or any other
// HTTP status is "_OTHER" (the conventions' fallback), and the other types
// (an error's own ErrorType among them) are kept up to 64 distinct values
// per Metrics, Transport or Func, in the order seen, "_OTHER" after.
// retry.key takes the keys of Stats, which the Retrier bounds (1,024 per
// kind of state).
// The attributes given to NewMetrics are added to every measurement.
//
// # Traces
//
// Transport and Func add an event named "retry.attempt" to the span found in
// each attempt's context, when it records. Put the span outside the retries
// (see package middleware for the order): one span for the logical call,
// one event per attempt. Attributes follow the semantic conventions:
// http.request.resend_count (on retries) and http.response.status_code for
// HTTP, error.type for a failed attempt (the status code for an HTTP error
// status, as the conventions ask, otherwise the engine's type), and
// retry.attempt, the attempt's number from 1.
package otel
