package sim_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/shed"
	"github.com/steadyhq/retry/sim"
)

// TestRunBadInput: a scenario that cannot run is refused before it runs,
// with one error naming the field, its value and the rule.
func TestRunBadInput(t *testing.T) {
	ok := sim.Scenario{Duration: time.Minute, Load: sim.Load{Rate: 10}}
	with := func(f func(s *sim.Scenario)) sim.Scenario {
		s := ok
		f(&s)
		return s
	}
	cases := []struct {
		name string
		s    sim.Scenario
		want string
	}{
		{name: "no duration", s: sim.Scenario{}, want: "sim: Duration = 0s: must be positive and at most 366 days"},
		{name: "negative duration", s: with(func(s *sim.Scenario) { s.Duration = -time.Minute }), want: "sim: Duration = -1m0s: must be positive"},
		{name: "negative clients", s: with(func(s *sim.Scenario) { s.Fleet.Clients = -3 }), want: "sim: Fleet.Clients = -3: must be in [1, 100000] (0 means 1)"},
		{name: "too many clients", s: with(func(s *sim.Scenario) { s.Fleet.Clients = 200_000 }), want: "sim: Fleet.Clients = 200000: must be in [1, 100000]"},
		{name: "negative rate", s: with(func(s *sim.Scenario) { s.Load.Rate = -5 }), want: "sim: Load.Rate = -5: must be in [0, 1e7] requests per second"},
		{name: "NaN rate", s: with(func(s *sim.Scenario) { s.Load.Steps = []sim.Step{{At: time.Second, Rate: nan()}} }), want: "sim: Load.Steps[0].Rate = NaN"},
		{name: "steps out of order", s: with(func(s *sim.Scenario) {
			s.Load.Steps = []sim.Step{{At: 2 * time.Second, Rate: 1}, {At: time.Second, Rate: 2}}
		}), want: "sim: Load.Steps[1].At = 1s: must be after the step before (2s)"},
		{name: "a burst past the end", s: with(func(s *sim.Scenario) { s.Load.Bursts = []sim.Burst{{At: time.Hour, Calls: 1}} }), want: "sim: Load.Bursts[0].At = 1h0m0s: must be in [0, Duration) = [0, 1m0s)"},
		{name: "weights that do not match", s: with(func(s *sim.Scenario) { s.Fleet.Clients = 4; s.Fleet.Weights = []float64{1, 2, 3} }),
			want: "sim: Fleet.Weights = 3 weights: must be one per client (4)"},
		{name: "weights all zero", s: with(func(s *sim.Scenario) { s.Fleet.Clients = 2; s.Fleet.Weights = []float64{0, 0} }), want: "sim: Fleet.Weights = all 0: at least one must be positive"},
		{name: "a negative weight", s: with(func(s *sim.Scenario) { s.Fleet.Clients = 2; s.Fleet.Weights = []float64{1, -1} }), want: "sim: Fleet.Weights[1] = -1: must be in [0, 1e12]"},
		{name: "starts that do not match", s: with(func(s *sim.Scenario) { s.Fleet.Starts = []time.Duration{0, 0} }), want: "sim: Fleet.Starts = 2 starts: must be one per client (1)"},
		{name: "a jump of another client", s: with(func(s *sim.Scenario) { s.Fleet.Jumps = []sim.Jump{{At: time.Second, By: time.Hour, Clients: []int{1}}} }),
			want: "sim: Fleet.Jumps[0].Clients = 1: must be a client's index, in [0, 1)"},
		{name: "negative workers", s: with(func(s *sim.Scenario) { s.Service.Workers = -1 }), want: "sim: Service.Workers = -1: must be in [0, 10000] (0 for no limit)"},
		{name: "a negative service time", s: with(func(s *sim.Scenario) { s.Service.ServiceTime = sim.Fixed(-time.Second) }), want: "sim: Service.ServiceTime = -1s: the mean must be >= 0"},
		{name: "a spread over 1", s: with(func(s *sim.Scenario) { s.Service.Network = sim.Spread(time.Millisecond, 2) }), want: "sim: Service.Network = 1ms ±200%: Spread's share must be in [0, 1]"},
		{name: "a trigger past the run's end", s: with(func(s *sim.Scenario) {
			s.Service.Faults = []sim.Fault{{Start: 2 * time.Minute, Length: time.Second, Fail: 1}}
		}),
			want: "sim: Service.Faults[0].Start = 2m0s: must be in [0, Duration) = [0, 1m0s): a fault past the run's end never happens"},
		{name: "a failure rate over 1", s: with(func(s *sim.Scenario) { s.Service.Faults = []sim.Fault{{Fail: 1.5}} }), want: "sim: Service.Faults[0].Fail = 1.5: must be in [0, 1]"},
		{name: "a hang without failures", s: with(func(s *sim.Scenario) { s.Service.Faults = []sim.Fault{{Hang: true}} }), want: "sim: Service.Faults[0].Hang = true: needs Fail"},
		{name: "a capacity drop without workers", s: with(func(s *sim.Scenario) { s.Service.Faults = []sim.Fault{{Capacity: 0.5}} }),
			want: "sim: Service.Faults[0].Capacity = 0.5: needs Service.Workers"},
		{name: "a capacity over 1", s: with(func(s *sim.Scenario) { s.Service.Workers = 2; s.Service.Faults = []sim.Fault{{Capacity: 2}} }),
			want: "sim: Service.Faults[0].Capacity = 2: must be in (0, 1], or 0 to leave every worker"},
		{name: "bad shed options", s: with(func(s *sim.Scenario) { s.Service.Shed = &shed.Options{Queue: -1} }), want: "shed: Options.Queue = -1: must be >= 0"},
		{name: "a resolution that does not divide a second", s: with(func(s *sim.Scenario) { s.Resolution = 3 * time.Second }),
			want: "sim: Resolution = 3s: must divide a second"},
		{name: "too many requests", s: with(func(s *sim.Scenario) { s.Load.Rate = 100_000 }),
			want: "sim: Load = about 6000000 requests over 1m0s: must be at most 1000000 (a lower rate or a shorter Duration)"},
		{name: "series too large for memory", s: with(func(s *sim.Scenario) { s.Duration = 24 * time.Hour; s.Load.Rate = 1; s.Fleet.Clients = 1000 }),
			want: "sim: Fleet.Clients = 1000: with a series of 1s over 24h0m0s, 86486400 buckets: must be at most 10000000 (fewer clients or a shorter Duration)"},
		{name: "a client's options", s: with(func(s *sim.Scenario) {
			s.Fleet.Clients = 3
			s.Fleet.Options = func(c sim.Client) []retry.Option {
				if c.Index == 2 {
					return []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: -1})}
				}
				return nil
			}
		}), want: "sim: Fleet.Options: client 2: retry: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := sim.Run(c.s)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || rep != nil {
				t.Errorf("error %v, report %v; want one line starting %q", err, rep, c.want)
			}
			// A field out of bounds is an InputError; the options' errors
			// are the engine's and shed's own, wrapped.
			var in *sim.InputError
			field := strings.HasPrefix(c.want, "sim: ") && !strings.Contains(c.want, ".Options: ")
			if isInput := errors.As(err, &in); isInput != field || isInput && in.Error() != err.Error() {
				t.Errorf("error %v: an InputError %v (%+v), want one for a field of sim's", err, isInput, in)
			}
		})
	}
}

func nan() float64 {
	z := 0.0
	return z / z
}
