package sim

import (
	"math"
	"testing"
	"time"
)

// TestArrivals: steady arrivals are 1/rate apart, round(rate × span) of
// them per span of one rate; Poisson ones about as many; the steady split
// gives each client its share in turn, the Poisson split about its share;
// a client makes no call before it starts, and an arrival before any has
// started is not made; bursts add Calls for each client started by then.
func TestArrivals(t *testing.T) {
	cases := []struct {
		name      string
		s         Scenario
		requests  int     // exactly, or about within tol
		tol       float64 // relative; 0 for exact
		perClient []int   // exactly, or about within tol
		check     func(t *testing.T, at []int64, client []int32)
	}{
		{name: "steady, 3 clients in turn", s: Scenario{Duration: time.Second, Load: Load{Rate: 6, Steady: true}, Fleet: Fleet{Clients: 3}},
			requests: 6, perClient: []int{2, 2, 2}, check: func(t *testing.T, at []int64, client []int32) {
				for i := range at {
					if at[i] != int64(i)*int64(time.Second/6) || int(client[i]) != i%3 {
						t.Errorf("arrival %d at %v to client %d, want at %v to %d", i, time.Duration(at[i]), client[i], time.Duration(i)*time.Second/6, i%3)
					}
				}
			}},
		{name: "steady, a rate that does not divide", s: Scenario{Duration: time.Second, Load: Load{Rate: 3, Steady: true}}, requests: 3},
		{name: "steady, steps", s: Scenario{Duration: 3 * time.Second, Load: Load{Rate: 10, Steady: true, Steps: []Step{{At: time.Second, Rate: 0}, {At: 2 * time.Second, Rate: 100}}}},
			requests: 110, check: func(t *testing.T, at []int64, _ []int32) {
				for _, a := range at {
					if a >= int64(time.Second) && a < int64(2*time.Second) {
						t.Errorf("an arrival at %v, in the step at rate 0", time.Duration(a))
					}
				}
			}},
		{name: "steady, weights 100 to 1", s: Scenario{Duration: 10 * time.Second, Load: Load{Rate: 101, Steady: true}, Fleet: Fleet{Clients: 2, Weights: []float64{100, 1}}},
			requests: 1010, perClient: []int{1000, 10}, check: func(t *testing.T, at []int64, client []int32) {
				last := int64(-1)
				for i := range at { // the quiet client's calls are evenly spaced
					if client[i] != 1 {
						continue
					}
					if last >= 0 && math.Abs(float64(at[i]-last)-float64(time.Second)) > float64(20*time.Millisecond) {
						t.Errorf("the quiet client's calls %v apart, want about 1s", time.Duration(at[i]-last))
					}
					last = at[i]
				}
			}},
		{name: "Poisson", s: Scenario{Duration: 100 * time.Second, Load: Load{Rate: 100}, Seed: 1}, requests: 10000, tol: 0.03},
		{name: "Poisson, weights", s: Scenario{Duration: 100 * time.Second, Load: Load{Rate: 100}, Fleet: Fleet{Clients: 3, Weights: []float64{1, 2, 0}}, Seed: 1},
			requests: 10000, tol: 0.05, perClient: []int{3333, 6667, 0}},
		{name: "starts", s: Scenario{Duration: 4 * time.Second, Load: Load{Rate: 10, Steady: true}, Fleet: Fleet{Clients: 2, Starts: []time.Duration{time.Second, 2 * time.Second}}},
			requests: 30, perClient: []int{20, 10}, check: func(t *testing.T, at []int64, client []int32) {
				for i := range at {
					if at[i] < int64(time.Second) || client[i] == 1 && at[i] < int64(2*time.Second) {
						t.Errorf("arrival at %v to client %d before it started", time.Duration(at[i]), client[i])
					}
				}
			}},
		{name: "bursts", s: Scenario{Duration: 10 * time.Second, Load: Load{Rate: 0.1, Steady: true, Bursts: []Burst{{At: 5 * time.Second, Calls: 4}}},
			Fleet: Fleet{Clients: 3, Starts: []time.Duration{0, 0, 6 * time.Second}}},
			requests: 1 + 8, perClient: []int{1 + 4, 4, 0}, check: func(t *testing.T, at []int64, _ []int32) {
				for i := 1; i < len(at); i++ {
					if at[i] < at[i-1] {
						t.Errorf("arrival %d at %v before arrival %d at %v", i, time.Duration(at[i]), i-1, time.Duration(at[i-1]))
					}
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at, client := c.s.arrivals()
			about := func(what string, got, want int) {
				if c.tol == 0 && got != want || c.tol > 0 && math.Abs(float64(got-want)) > c.tol*float64(want)+2 {
					t.Errorf("%s: %d, want %d (tolerance %g)", what, got, want, c.tol)
				}
			}
			about("requests", len(at), c.requests)
			if c.perClient != nil {
				counts := make([]int, len(c.perClient))
				for _, cl := range client {
					counts[cl]++
				}
				for i, want := range c.perClient {
					about("client "+string(rune('0'+i)), counts[i], want)
				}
			}
			if c.check != nil {
				c.check(t, at, client)
			}
		})
	}
}

// TestArrivalsPoissonGaps: Poisson arrivals have exponential gaps: their
// mean is 1/rate and their deviation about the same.
func TestArrivalsPoissonGaps(t *testing.T) {
	s := Scenario{Duration: 1000 * time.Second, Load: Load{Rate: 20}, Seed: 7}
	at, _ := s.arrivals()
	var sum, sq float64
	for i := 1; i < len(at); i++ {
		g := time.Duration(at[i] - at[i-1]).Seconds()
		sum += g
		sq += g * g
	}
	n := float64(len(at) - 1)
	mean := sum / n
	sd := math.Sqrt(sq/n - mean*mean)
	if math.Abs(mean-0.05) > 0.002 || math.Abs(sd-0.05) > 0.003 {
		t.Errorf("gaps: mean %.4fs, deviation %.4fs; want both about 0.05s", mean, sd)
	}
}
