// Package sim runs a model of a service under load from a fleet of
// clients, each the real engine of package retry, in virtual time, so that
// a test can say what a configuration does when the service fails: "this
// Retrier recovers within 20 s from a 10 s halving of capacity at 200
// clients" is a Scenario, a call of Run and an assertion on its Report.
//
// # The model
//
// A Load of requests arrives open loop, whatever the answers: a Poisson
// process or evenly spaced, at a rate that may change over time, with
// bursts of calls that every client makes at once. A Fleet of clients
// makes them: each a retry.Retrier of its own, built from Fleet.Options,
// or sharing state with the others through the engine's interfaces (a
// retry.SharedBudget, a retry.Limiter); the load split evenly or by
// weight; clients that start at different times; clocks that jump. Each
// request is a call of the engine (Retrier.Run, or retry.Hedged for a
// client with retry.WithHedge), whose attempts go to the Service, or to a
// chain of Layers in front of it, each layer a service whose handler calls
// the next through a Retrier of its own. WindowBudget and TokenQuota model
// other libraries' retry budgets, to compare a rule against.
//
// The Service is the network, a delay each way, and workers that serve
// attempts from a FIFO queue bounded by length or by wait, each for a
// service time drawn from a distribution (Dist). An attempt admitted is
// served even when its caller has given up: wasted work. A refusal (a
// full queue) answers 503 at once and costs a worker's time. The real
// load shedder of package shed may stand in front of the workers. Faults
// change the service for a window of the run: an outage, a share of
// attempts failing at once or never answered, a latency spike, a drop of
// capacity, a half recovery.
//
// One virtual clock runs all of it, and the engine runs on it everything
// it times: backoff and the gates' waits, the windows of the retry budget,
// the circuit breaker and adaptive throttling, the latencies of the
// concurrency limit, the per-attempt timeout (retry.WithAttemptTimeout)
// and hedges, since the clock has AfterFunc (see retry.Clock). Minutes of
// a fleet take a fraction of a second: 1,000 clients for 3 minutes at 70
// requests a second take well under 10 s on two cores
// (BenchmarkFleet). A run is deterministic: the clock runs one simulated
// goroutine at a time, in order of time, and every random draw comes from
// the Seed, each part of the model from a stream of its own, so that the
// defence sets of a comparison meet the same arrivals, and the same
// failures call for call. RunAll runs the scenarios of a comparison at once,
// one a processor, and gives the reports Run gives each.
//
// # The report
//
// A Report gives, for the fleet and for each client: the calls that
// succeeded, failed (by the reason that ended them) or were still running
// at the end; the attempts that reached the service and the load
// amplification, attempts per request; the attempts the service refused,
// by reason; the work done and the share of it wasted; goodput, successful
// calls a second, before, during and after the faults; the time the calls
// took to recover after the faults by the rule of recovery (from then on,
// every window of 5 whole seconds to the end of the run has successful
// calls of at least 90% of the calls that arrived in it); and these
// figures over time, in a series of buckets. Calls' latencies and each
// Retrier's Stats come with it.
//
// # Setups
//
// The setups of the docs' figures, each of `retry sim`'s modes, come as
// named scenarios to run as they are or to change: Metastable (from
// NewMetastable) with the Defences it compares, a BudgetTable of
// BudgetCases for the BudgetRules, ChainOutage with ChainDefences,
// Contention with ContentionStrategies, and TailAtScale.
//
// # Limits
//
// It is a model. The workers are one pool of identical servers: no CPU,
// memory, connection pool or garbage collector, and a service time does
// not grow with the load except through the queue and Slow faults. The
// network loses nothing and has no limit on connections; an attempt whose
// caller gives up before it reaches the service never reaches it. A layer
// of a chain has no workers of its own and one Retrier. Virtual time has
// none of real time's costs: a timer fires exactly when due, and a hedge
// starts at its delay to the nanosecond, where a loaded machine's timers
// fire late.
//
// What runs on real time stays on it and is not repeatable: a breaker
// shared through a retry.BreakerStore syncs on real timers, and a store on
// Redis answers in real time; model a fleet's shared state with a
// SharedBudget or a Limiter of your own, on Client.Clock. The adaptive
// concurrency limit (retry.WithConcurrency, and shed) times a sample of
// its permits drawn from a random source of its own once more than about
// 2,000 pass in one of its windows (above about ten thousand attempts a
// second through one limit): past that, runs with it are not repeatable.
//
// A run holds every call in flight as a goroutine and its figures in
// memory: Run refuses, before it starts, a Scenario of more than 1,000,000
// requests, 100,000 clients, 10,000 workers or 10,000,000 buckets of
// series: an InputError that names the field, its value and the rule, as
// for any field out of bounds.
package sim
