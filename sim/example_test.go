package sim_test

import (
	"fmt"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
)

// A fleet of 200 clients sends 70 requests a second to a service of 10
// workers of 100 ms, a capacity of 100 a second, with a queue of 2 s of
// work. For 10 s from 30 s, half the workers are gone. Attempts time out
// after 1 s, and the service still serves them. With the default retry
// budget in each client, the calls recover within 20 s of the drop's end.
func Example() {
	rep, err := sim.Run(sim.Scenario{
		Duration: 90 * time.Second,
		Load:     sim.Load{Rate: 70},
		Service: sim.Service{
			Workers:     10,
			ServiceTime: sim.Spread(100*time.Millisecond, 0.1),
			QueueLength: 200,
			Network:     sim.Fixed(5 * time.Millisecond),
			Faults:      []sim.Fault{{Start: 30 * time.Second, Length: 10 * time.Second, Capacity: 0.5}},
		},
		Fleet: sim.Fleet{Clients: 200, Options: func(sim.Client) []retry.Option {
			return []retry.Option{retry.WithAttemptTimeout(time.Second)}
		}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	f := rep.Total
	fmt.Println("recovered within 20 s:", f.Recovered && f.Recovery <= 20*time.Second)
	fmt.Printf("after %v; %.2f attempts a request; goodput %.0f/s before, %.0f/s after\n",
		f.Recovery, f.Amplification(), f.Goodput.Before, f.Goodput.After)
	// Output:
	// recovered within 20 s: true
	// after 8s; 1.09 attempts a request; goodput 68/s before, 59/s after
}

// The metastable failure of the docs' tables at 100 clients: 70 requests
// a second to a service of capacity 100, whose workers are halved for
// 10 s. Without a defence the retries of the attempts that time out keep
// it overloaded; with the defaults it recovers.
func ExampleMetastable() {
	m := sim.NewMetastable()
	for _, d := range sim.Defences(retry.Budget{}) {
		if d.Name != "no defence" && d.Name != "defaults" {
			continue
		}
		s, err := m.Scenario(d, 100)
		if err != nil {
			fmt.Println(err)
			return
		}
		rep, err := sim.Run(s)
		if err != nil {
			fmt.Println(err)
			return
		}
		f := rep.Total
		fmt.Printf("%s: recovered %v after %v, %.2f attempts a request\n", d.Name, f.Recovered, f.Recovery, f.Amplification())
	}
	// Output:
	// no defence: recovered false after 0s, 2.61 attempts a request
	// defaults: recovered true after 7s, 1.04 attempts a request
}
