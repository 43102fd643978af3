package sim

import (
	"math"
	"time"

	"github.com/steadyhq/retry"
)

// ChainDefences returns the configurations `retry sim --layers` compares,
// each for every layer's client: "naive", 3 attempts at every layer and
// no budget; "rule only", retries at one layer (the engine's rule) and no
// budget; "budgets only", the default budget with retries at every layer
// (retry.WithNestedRetries); "defaults", the budget and the rule.
func ChainDefences() []Defence {
	off := retry.WithBudget(retry.Budget{Off: true})
	return []Defence{
		{Name: "naive", Options: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3}), off, retry.WithNestedRetries(true)}},
		{Name: "rule only", Options: []retry.Option{off}},
		{Name: "budgets only", Options: []retry.Option{retry.WithNestedRetries(true)}},
		{Name: "defaults"},
	}
}

// ChainOutage returns a chain of layers services under a full outage of
// the dependency at its bottom (every attempt fails at once, 503), with
// d's options at every layer: steady requests at rate for duration into
// the first, each hop taking roundTrip there and back, each call one
// attempt. The run drains for up to a day, so that every call ends. With
// layers below 1 there is no chain: the fleet calls the dependency.
func ChainOutage(layers int, d Defence, rate float64, duration, roundTrip time.Duration, seed uint64) Scenario {
	chain := make([]Layer, max(layers, 0))
	for k := range chain {
		chain[k].Options = func(Client) []retry.Option { return d.Options }
	}
	return Scenario{Duration: duration, Drain: 24 * time.Hour, Seed: seed, Layers: chain, Load: Load{Rate: rate, Steady: true},
		Service: Service{Network: Fixed(roundTrip / 2), Faults: []Fault{{Fail: 1}}},
		Fleet: Fleet{Options: func(Client) []retry.Option {
			return []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 1})}
		}}}
}

// Strategy is a named backoff policy.
type Strategy struct {
	Name   string
	Policy retry.Policy
}

// ContentionStrategies returns the strategies of the AWS Architecture
// Blog's "Exponential Backoff and Jitter", in its order: "no-backoff",
// "exponential" (without jitter), "full", "equal" and "decorrelated"
// jitter, from a base of 5 ms to a cap of 2 s, with no limit on attempts.
// The study's exponential backoff is min(cap, base·2^n) from n = 1, so the
// policies' initial interval is 10 ms; decorrelated jitter draws from
// [base, 3·previous) and starts at the base.
func ContentionStrategies() []Strategy {
	p := retry.Policy{MaxAttempts: math.MaxInt32, InitialInterval: 10 * time.Millisecond, MaxInterval: 2 * time.Second,
		Jitter: retry.Jitter{Kind: retry.JitterNone}}
	none, full, equal, decorrelated := p, p, p, p
	none.Backoff = retry.Immediate
	full.Jitter = retry.Jitter{Kind: retry.JitterFull}
	equal.Jitter = retry.Jitter{Kind: retry.JitterEqual}
	decorrelated.InitialInterval, decorrelated.Jitter = 5*time.Millisecond, retry.Jitter{Kind: retry.JitterDecorrelated}
	return []Strategy{{"no-backoff", none}, {"exponential", p}, {"full", full}, {"equal", equal}, {"decorrelated", decorrelated}}
}

// Contention returns the study's setup: clients each write one row once
// under optimistic concurrency (Service.Conflicts), over a network of
// |N(10ms, 2ms)| a message, each with policy p and no retry budget. The
// run ends when every write has.
func Contention(clients int, p retry.Policy, seed uint64) Scenario {
	return Scenario{Duration: time.Millisecond, Drain: 24 * time.Hour, Seed: seed,
		Load:    Load{Bursts: []Burst{{Calls: 1}}},
		Service: Service{Conflicts: true, Network: Normal(10*time.Millisecond, 2*time.Millisecond)},
		Fleet: Fleet{Clients: clients, Options: func(Client) []retry.Option {
			return []retry.Option{retry.WithPolicy(p), retry.WithBudget(retry.Budget{Off: true})}
		}}}
}

// TailAtScale returns the long-tail setup of Dean and Barroso's "The Tail
// at Scale" (CACM 2013): 20,000 calls at 16,000 a second whose attempts
// take 10-15 ms and 1% of them 100 times longer, by one client of 3
// attempts with hedge h (retry.Hedge{Max: 1} for none).
func TailAtScale(h retry.Hedge, seed uint64) Scenario {
	return Scenario{Duration: 1250 * time.Millisecond, Drain: time.Minute, Seed: seed, Load: Load{Rate: 16000, Steady: true},
		Service: Service{ServiceTime: Spread(12500*time.Microsecond, 0.2).Tail(0.01, 100)},
		Fleet: Fleet{Options: func(Client) []retry.Option {
			return []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3}), retry.WithHedge(h)}
		}}}
}
