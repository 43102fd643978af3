package sim

import (
	"context"
	"time"

	"github.com/steadyhq/retry"
)

// BudgetRule is a retry budget to compare: the options it gives each
// client and, for a rule that learns the outcomes of attempts, the
// client's observer (of Fleet.Observe's signature), nil otherwise. Nil
// Options gives retry.New's defaults.
type BudgetRule struct {
	Name    string
	Options func(c Client) ([]retry.Option, func(ctx context.Context, n int, err error))
}

// BudgetRules returns the rules `retry sim --budgets` compares, each
// client its own: no budget (3 attempts); this library's default (the
// zero Budget: 12 tokens, 0.2 a success); its old rule, 15% of requests
// and 2 a second over 10 s (a WindowBudget); Finagle's, 20% and 10 a
// second (a WindowBudget); and the AWS SDKs' quota (a TokenQuota).
func BudgetRules() []BudgetRule {
	window := func(ratio, perSecond float64) func(c Client) ([]retry.Option, func(context.Context, int, error)) {
		return func(c Client) ([]retry.Option, func(context.Context, int, error)) {
			b := NewWindowBudget(c.Clock, ratio, perSecond)
			return []retry.Option{retry.WithBudget(retry.Budget{Shared: b})}, b.Observe
		}
	}
	return []BudgetRule{
		{"no budget (3 attempts)", func(Client) ([]retry.Option, func(context.Context, int, error)) {
			return []retry.Option{retry.WithBudget(retry.Budget{Off: true})}, nil
		}},
		{"default: 12 tokens, 0.2 a success", func(Client) ([]retry.Option, func(context.Context, int, error)) { return nil, nil }},
		{"old rule: 15% of requests + 2/s over 10 s", window(0.15, 2)},
		{"Finagle: 20% of requests + 10/s, TTL 10 s", window(0.2, 10)},
		{"AWS quota: 500, retry 14 (429: 5), success +1", func(Client) ([]retry.Option, func(context.Context, int, error)) {
			q := NewTokenQuota()
			return []retry.Option{retry.WithBudget(retry.Budget{Shared: q})}, q.Observe
		}},
	}
}

// BudgetTable is the cases a budget rule is run in: a quiet client's
// Restarts; full outages for one client at each of Rates and for fleets
// of each size of Fleets at 1 request a second a client; and independent
// failures of each share of Fails at each of Rates, failing fast or
// timing out.
type BudgetTable struct {
	Restarts []Restart
	Rates    []float64
	Fleets   []int
	Fails    []float64
}

// Restart is a quiet client's restart: a call every 10 s for 55 s, then
// Calls at once as its dependency goes down for Down.
type Restart struct {
	Calls int
	Down  time.Duration
}

// NewBudgetTable returns the cases of the docs' tables: restarts of 10
// calls in 400 ms and 5 in 1 s; rates of 10, 100 and 1,000 requests a
// second; fleets of 10, 100 and 1,000 clients; 10%, 20% and 30% failing.
func NewBudgetTable() BudgetTable {
	return BudgetTable{Restarts: []Restart{{10, 400 * time.Millisecond}, {5, time.Second}},
		Rates: []float64{10, 100, 1000}, Fleets: []int{10, 100, 1000}, Fails: []float64{0.1, 0.2, 0.3}}
}

// BudgetCase is one case of a BudgetTable. Kind is "restart" (a
// Restart of Burst calls and Down), "outage" (a full outage of 1 m after
// 20 s, of Clients together at Rate), "timeouts" (a share Fail of
// attempts never answered, for 1 m at Rate) or else "fast" (the same
// failing with 503 at once).
type BudgetCase struct {
	Kind    string
	Clients int
	Rate    float64 // requests a second, all clients together
	Fail    float64
	Down    time.Duration
	Burst   int
}

// Cases returns the table's cases in order: the restarts, one client's
// outages, the fleets' outages, then the independent failures, fast and
// then timing out, by share and rate.
func (t BudgetTable) Cases() []BudgetCase {
	var cases []BudgetCase
	for _, r := range t.Restarts {
		cases = append(cases, BudgetCase{Kind: "restart", Clients: 1, Rate: 0.1, Down: r.Down, Burst: r.Calls})
	}
	for _, rate := range t.Rates {
		cases = append(cases, BudgetCase{Kind: "outage", Clients: 1, Rate: rate})
	}
	for _, n := range t.Fleets {
		cases = append(cases, BudgetCase{Kind: "outage", Clients: n, Rate: float64(n)})
	}
	for _, kind := range []string{"fast", "timeouts"} {
		for _, fail := range t.Fails {
			for _, rate := range t.Rates {
				cases = append(cases, BudgetCase{Kind: kind, Clients: 1, Rate: rate, Fail: fail})
			}
		}
	}
	return cases
}

// Scenario returns the case's run under rule: steady arrivals, attempts
// of 10 ms timing out after 1 s, the default policy, the run draining for
// a minute.
func (c BudgetCase) Scenario(rule BudgetRule, seed uint64) Scenario {
	s := Scenario{Seed: seed, Drain: time.Minute, Load: Load{Rate: c.Rate, Steady: true},
		Service: Service{Network: Fixed(5 * time.Millisecond)}}
	switch c.Kind {
	case "restart":
		at := 55 * time.Second
		s.Duration = time.Minute
		s.Load.Bursts = []Burst{{At: at, Calls: c.Burst}}
		s.Service.Faults = []Fault{{Start: at, Length: c.Down, Fail: 1}}
	case "outage":
		s.Duration = 80 * time.Second
		s.Service.Faults = []Fault{{Start: 20 * time.Second, Length: time.Minute, Fail: 1}}
	default:
		s.Duration = time.Minute
		s.Service.Faults = []Fault{{Fail: c.Fail, Hang: c.Kind == "timeouts"}}
	}
	var observe []func(context.Context, int, error) // by client, grown as Run builds them
	s.Fleet = Fleet{Clients: c.Clients, Options: func(cl Client) []retry.Option {
		if cl.Index >= len(observe) {
			observe = append(observe, make([]func(context.Context, int, error), cl.Index+1-len(observe))...)
		}
		var opts []retry.Option
		if rule.Options != nil {
			opts, observe[cl.Index] = rule.Options(cl)
		}
		return append(opts, retry.WithAttemptTimeout(time.Second))
	}, Observe: func(ctx context.Context, n int, err error) {
		if call, ok := CallOf(ctx); ok && call.Client < len(observe) && observe[call.Client] != nil {
			observe[call.Client](ctx, n, err)
		}
	}}
	return s
}
