package redis_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
	"github.com/steadyhq/retry/sim"
)

// TestBudgetFleetSim: fleets of 10, 100 and 1,000 clients at 1 request a
// second each, on the simulator's model, each client a process with its
// own redis.Budget on one Redis: a full outage of 60 s after 20 s of
// health loads the service with at most 1.10× the requests at every size,
// the fleet spending its one bucket (12 tokens, or 0.2 for each success of
// the last 10 s: 20 at 10 clients, 2,000 at 1,000) once. The model runs in
// virtual time and Redis answers in real time, each retry's request a
// real round trip. README gives the most of the three.
func TestBudgetFleetSim(t *testing.T) {
	if testing.Short() {
		t.Skip("some 60,000 round trips to Redis")
	}
	s := startServer(t)
	most := 0.0
	for _, n := range []int{10, 100, 1000} {
		t.Run(fmt.Sprintf("%d clients", n), func(t *testing.T) {
			c := s.ClientWith(func(o *goredis.Options) { o.ReadTimeout, o.PoolSize = time.Second, 4 })
			var budgets []*retryredis.Budget
			rep, err := sim.Run(sim.Scenario{Duration: 80 * time.Second, Drain: time.Minute, Seed: 1,
				Load:    sim.Load{Rate: float64(n), Steady: true},
				Service: sim.Service{Network: sim.Fixed(5 * time.Millisecond), Faults: []sim.Fault{{Start: 20 * time.Second, Length: time.Minute, Fail: 1}}},
				Fleet: sim.Fleet{Clients: n, Options: func(sim.Client) []retry.Option {
					// A loaded machine must not make Redis look slow: a
					// round trip that fails would fall back.
					b, err := retryredis.NewBudget(c, retry.Budget{}, retryredis.Options{Prefix: fmt.Sprintf("sim%d:", n), Timeout: time.Second})
					if err != nil {
						t.Fatal(err)
					}
					budgets = append(budgets, b)
					return []retry.Option{retry.WithBudget(retry.Budget{Shared: b})}
				}}})
			if err != nil {
				t.Fatal(err)
			}
			var st retryredis.BudgetStats
			for _, b := range budgets {
				bs := b.Stats()
				st.Granted += bs.Granted
				st.Denied += bs.Denied
				st.Fallbacks += bs.Fallbacks
			}
			f := rep.Total
			amp := float64(f.FaultAttempts) / float64(f.FaultRequests)
			most = max(most, amp)
			t.Logf("%d clients at 1/s each: %.3f× the requests in the outage; budget %+v", n, amp, st)
			if amp > 1.10 || st.Fallbacks != 0 {
				t.Errorf("%.3f× the requests, %d retries decided without Redis; want at most 1.10× and none", amp, st.Fallbacks)
			}
		})
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("from each of 10, 100 and 1,000 processes loads the dependency with %.2f× the requests", most); !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), want) {
		t.Errorf("README does not say %q", want)
	}
}
