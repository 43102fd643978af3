package sim

import (
	"fmt"
	"math"
	"time"
)

// The bounds of a scenario, so that one too large for memory is refused
// before it runs, not part of the way through.
const (
	maxRequests = 1_000_000  // calls a run makes, about: each holds a task while it runs
	maxClients  = 100_000    // clients, each a Retrier and a series
	maxWorkers  = 10_000     // each attempt admitted looks at every worker
	maxLayers   = 10         // a chain's layers
	maxCells    = 10_000_000 // buckets of the series over Duration, clients and total
	maxSpan     = 366 * 24 * time.Hour
	maxRate     = 1e7
	maxSteps    = 200_000_000 // steps of a run before it is called stuck
)

// InputError is the error of a setup that cannot run, which Run, RunAll
// and Metastable.Scenario return before anything runs: the Field that
// breaks a Rule, named as in Go from the setup ("Load.Rate",
// "Service.Faults[0].Start", "Metastable.Capacity"), and its Value. Its
// Error reads "sim: Field = Value: Rule".
type InputError struct {
	Field string
	Value any
	Rule  string
}

func (e *InputError) Error() string { return fmt.Sprintf("sim: %s = %v: %s", e.Field, e.Value, e.Rule) }

// bad returns the error of a field whose value breaks a rule.
func bad(field string, value any, rule string) error {
	return &InputError{Field: field, Value: value, Rule: rule}
}

// validate checks s and returns the first problem, naming the field, its
// value and the rule; nil when s can run.
func (s *Scenario) validate() error {
	switch {
	case s.Duration <= 0 || s.Duration > maxSpan:
		return bad("Duration", s.Duration, "must be positive and at most 366 days")
	case s.Drain < 0 || s.Drain > maxSpan:
		return bad("Drain", s.Drain, "must be in [0, 366 days]")
	case s.Resolution < 0 || s.Resolution > 0 && time.Second%s.Resolution != 0:
		return bad("Resolution", s.Resolution, "must divide a second (1s, 100ms, 10ms, ...)")
	case len(s.Layers) > maxLayers:
		return bad("Layers", fmt.Sprintf("%d layers", len(s.Layers)), fmt.Sprintf("must be at most %d", maxLayers))
	}
	if err := s.Load.validate(s.Duration); err != nil {
		return err
	}
	if err := s.Fleet.validate(s.Duration, s.Duration+s.Drain); err != nil {
		return err
	}
	if err := s.Service.validate(s.Duration); err != nil {
		return err
	}
	return s.size()
}

func (l *Load) validate(dur time.Duration) error {
	rate := func(field string, r float64) error {
		if !(r >= 0 && r <= maxRate) {
			return bad(field, r, "must be in [0, 1e7] requests per second")
		}
		return nil
	}
	if err := rate("Load.Rate", l.Rate); err != nil {
		return err
	}
	for i, st := range l.Steps {
		field := fmt.Sprintf("Load.Steps[%d]", i)
		switch {
		case st.At < 0 || st.At >= dur:
			return bad(field+".At", st.At, fmt.Sprintf("must be in [0, Duration) = [0, %v)", dur))
		case i > 0 && st.At <= l.Steps[i-1].At:
			return bad(field+".At", st.At, fmt.Sprintf("must be after the step before (%v)", l.Steps[i-1].At))
		}
		if err := rate(field+".Rate", st.Rate); err != nil {
			return err
		}
	}
	for i, b := range l.Bursts {
		field := fmt.Sprintf("Load.Bursts[%d]", i)
		switch {
		case b.At < 0 || b.At >= dur:
			return bad(field+".At", b.At, fmt.Sprintf("must be in [0, Duration) = [0, %v)", dur))
		case b.Calls < 0 || b.Calls > maxRequests:
			return bad(field+".Calls", b.Calls, "must be in [0, 1000000]")
		}
	}
	return nil
}

func (f *Fleet) validate(dur, horizon time.Duration) error {
	n := f.clients()
	switch {
	case f.Clients < 0 || f.Clients > maxClients:
		return bad("Fleet.Clients", f.Clients, fmt.Sprintf("must be in [1, %d] (0 means 1)", maxClients))
	case f.Weights != nil && len(f.Weights) != n:
		return bad("Fleet.Weights", fmt.Sprintf("%d weights", len(f.Weights)), fmt.Sprintf("must be one per client (%d)", n))
	case f.Starts != nil && len(f.Starts) != n:
		return bad("Fleet.Starts", fmt.Sprintf("%d starts", len(f.Starts)), fmt.Sprintf("must be one per client (%d)", n))
	}
	sum := 0.0
	for i, w := range f.Weights {
		if !(w >= 0 && w <= 1e12) {
			return bad(fmt.Sprintf("Fleet.Weights[%d]", i), w, "must be in [0, 1e12]")
		}
		sum += w
	}
	if f.Weights != nil && sum == 0 {
		return bad("Fleet.Weights", "all 0", "at least one must be positive")
	}
	for i, s := range f.Starts {
		if s < 0 || s >= dur {
			return bad(fmt.Sprintf("Fleet.Starts[%d]", i), s, fmt.Sprintf("must be in [0, Duration) = [0, %v)", dur))
		}
	}
	for i, j := range f.Jumps {
		field := fmt.Sprintf("Fleet.Jumps[%d]", i)
		switch {
		case j.At < 0 || j.At >= horizon:
			return bad(field+".At", j.At, fmt.Sprintf("must be in [0, Duration+Drain) = [0, %v)", horizon))
		case j.By < -maxSpan || j.By > maxSpan:
			return bad(field+".By", j.By, "must be within 366 days either way")
		}
		for _, c := range j.Clients {
			if c < 0 || c >= n {
				return bad(field+".Clients", c, fmt.Sprintf("must be a client's index, in [0, %d)", n))
			}
		}
	}
	return nil
}

func (s *Service) validate(dur time.Duration) error {
	switch {
	case s.Workers < 0 || s.Workers > maxWorkers:
		return bad("Service.Workers", s.Workers, fmt.Sprintf("must be in [0, %d] (0 for no limit)", maxWorkers))
	case s.QueueWait < 0 || s.QueueWait > maxSpan:
		return bad("Service.QueueWait", s.QueueWait, "must be in [0, 366 days]")
	case s.RefusalCost < 0 || s.RefusalCost > time.Hour:
		return bad("Service.RefusalCost", s.RefusalCost, "must be in [0, 1h]")
	}
	if err := s.ServiceTime.check("Service.ServiceTime"); err != nil {
		return err
	}
	if err := s.Network.check("Service.Network"); err != nil {
		return err
	}
	for i, f := range s.Faults {
		field := fmt.Sprintf("Service.Faults[%d]", i)
		switch {
		case f.Start < 0 || f.Start >= dur:
			return bad(field+".Start", f.Start, fmt.Sprintf("must be in [0, Duration) = [0, %v): a fault past the run's end never happens", dur))
		case f.Length < 0 || f.Length > maxSpan:
			return bad(field+".Length", f.Length, "must be in [0, 366 days] (0: to the run's end)")
		case !(f.Fail >= 0 && f.Fail <= 1):
			return bad(field+".Fail", f.Fail, "must be in [0, 1]")
		case f.Hang && f.Fail == 0:
			return bad(field+".Hang", true, "needs Fail, the share of attempts that hang")
		case !(f.Slow == 0 || f.Slow > 0 && f.Slow <= 1e6):
			return bad(field+".Slow", f.Slow, "must be in (0, 1e6], or 0 to leave the service time")
		case !(f.Capacity >= 0 && f.Capacity <= 1):
			return bad(field+".Capacity", f.Capacity, "must be in (0, 1], or 0 to leave every worker")
		case f.Capacity > 0 && s.Workers == 0:
			return bad(field+".Capacity", f.Capacity, "needs Service.Workers: a service without a limit has no capacity to drop")
		}
	}
	return nil
}

// size refuses a scenario too large for memory: too many requests, or
// series too long for its clients.
func (s *Scenario) size() error {
	n := s.Fleet.clients()
	reqs := s.Load.expected(s.Duration)
	for _, b := range s.Load.Bursts {
		reqs += float64(b.Calls) * float64(n)
	}
	if reqs > maxRequests {
		return bad("Load", fmt.Sprintf("about %.0f requests over %v", reqs, s.Duration),
			fmt.Sprintf("must be at most %d (a lower rate or a shorter Duration)", maxRequests))
	}
	series := n + 1
	if n == 1 {
		series = 1
	}
	if cells := float64(series) * math.Ceil(float64(s.Duration)/float64(s.resolution())); cells > maxCells {
		fix := "fewer clients or a shorter Duration"
		if s.resolution() < time.Second {
			fix = "fewer clients, a shorter Duration or a coarser Resolution"
		}
		return bad("Fleet.Clients", n, fmt.Sprintf("with a series of %v over %v, %.0f buckets: must be at most %d (%s)",
			s.resolution(), s.Duration, cells, maxCells, fix))
	}
	return nil
}

// expected returns the requests the load's rates make over dur, on
// average.
func (l *Load) expected(dur time.Duration) float64 {
	total := 0.0
	for _, seg := range l.segments(dur) {
		total += seg.rate * (seg.to - seg.from).Seconds()
	}
	return total
}

func (f *Fleet) clients() int { return max(f.Clients, 1) }

func (s *Scenario) resolution() time.Duration {
	if s.Resolution > 0 {
		return s.Resolution
	}
	return time.Second
}
