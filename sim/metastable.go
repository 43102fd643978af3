package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/shed"
)

// Defence is a named set of options a client runs beside its policy, a
// row of a comparison.
type Defence struct {
	Name    string
	Options []retry.Option
}

// Defences returns the defence sets that `retry sim --metastable`
// compares, in its order: "no defence" (the budget off); each gate alone
// with its defaults, the budget off beside the others ("budget",
// "breaker", "throttle", "concurrency"); "defaults", what retry.New gives
// with no defence option; and "all", every gate together. Budget is the
// retry budget of the sets that have one: the zero Budget is the
// default's.
func Defences(budget retry.Budget) []Defence {
	off := retry.WithBudget(retry.Budget{Off: true})
	gates := []Defence{
		{Name: "budget", Options: []retry.Option{retry.WithBudget(budget)}},
		{Name: "breaker", Options: []retry.Option{retry.WithBreaker(retry.Breaker{})}},
		{Name: "throttle", Options: []retry.Option{retry.WithThrottle(retry.Throttle{})}},
		{Name: "concurrency", Options: []retry.Option{retry.WithConcurrency(retry.Concurrency{})}},
	}
	sets := []Defence{{Name: "no defence", Options: []retry.Option{off}}}
	var all []retry.Option
	for _, g := range gates {
		sets = append(sets, Defence{Name: g.Name, Options: append([]retry.Option{off}, g.Options...)})
		all = append(all, g.Options...)
	}
	return append(sets, Defence{Name: "defaults", Options: []retry.Option{retry.WithBudget(budget)}}, Defence{Name: "all", Options: all})
}

// Metastable is a service that can fail metastably (docs/outages.md): a
// Poisson load of Rate below Capacity, served by Workers from a FIFO
// queue of QueueWork of work, more refused at once with 503; attempts that
// time out after AttemptTimeout, which the service still serves; and a
// Trigger, a fault that cuts the capacity (Fault.Capacity) or slows the
// service (Fault.Slow) for a while. Without a defence the retries of the
// attempts that time out keep the service overloaded after the trigger
// ends; NewMetastable gives the setup the docs' tables run.
type Metastable struct {
	// Rate is the requests a second, the fleet's together.
	Rate float64
	// Capacity is the attempts a second the Workers serve at full
	// strength; each attempt's service time is Workers/Capacity seconds,
	// spread ±10%.
	Capacity float64
	Workers  int
	// QueueWork bounds the queue by its work: Capacity·QueueWork attempts.
	QueueWork time.Duration
	// RoundTrip is the network's time of an attempt, there and back.
	RoundTrip      time.Duration
	AttemptTimeout time.Duration
	Duration       time.Duration
	Trigger        Fault
	// Shed, when set, puts the real shedder of these options in front of
	// the workers (Service.Shed).
	Shed *shed.Options
	Seed uint64
}

// NewMetastable returns the setup of the docs' tables: 70 requests a
// second for 3 minutes to 10 workers of 100 ms (a capacity of 100 a
// second) with a queue of 2 s of work, a round trip of 10 ms, attempts
// timing out after 1 s, and half the workers gone for 10 s from 30 s;
// seed 1.
func NewMetastable() Metastable {
	return Metastable{Rate: 70, Capacity: 100, Workers: 10, QueueWork: 2 * time.Second, RoundTrip: 10 * time.Millisecond,
		AttemptTimeout: time.Second, Duration: 3 * time.Minute, Seed: 1,
		Trigger: Fault{Start: 30 * time.Second, Length: 10 * time.Second, Capacity: 0.5}}
}

// ServiceTime returns the mean service time of an attempt at full
// strength, Workers/Capacity seconds.
func (m Metastable) ServiceTime() time.Duration {
	return time.Duration(float64(m.Workers) / m.Capacity * float64(time.Second))
}

// Scenario returns the run of defence set d by a fleet of clients
// clients, each a Retrier of opts (a policy, say), then
// retry.WithAttemptTimeout(m.AttemptTimeout), then d's options. It
// refuses a Capacity that is not positive or makes a service time of over
// 366 days, Workers below 1, a negative QueueWork and a Rate that is not
// below Capacity (the load is steady until the trigger); Run checks the
// rest.
func (m Metastable) Scenario(d Defence, clients int, opts ...retry.Option) (Scenario, error) {
	switch {
	case m.Workers < 1 || m.Workers > maxWorkers:
		return Scenario{}, bad("Metastable.Workers", m.Workers, fmt.Sprintf("must be in [1, %d]", maxWorkers))
	case !(m.Capacity > 0 && m.Capacity <= maxRate && float64(m.Workers)/m.Capacity <= maxSpan.Seconds()):
		return Scenario{}, bad("Metastable.Capacity", m.Capacity, "must be in (0, 1e7] attempts a second, and Workers/Capacity at most 366 days")
	case m.QueueWork < 0 || m.QueueWork > maxSpan:
		return Scenario{}, bad("Metastable.QueueWork", m.QueueWork, "must be in [0, 366 days]")
	case !(m.Rate > 0 && m.Rate < m.Capacity):
		return Scenario{}, bad("Metastable.Rate", m.Rate, fmt.Sprintf("must be in (0, %g), below Capacity: the load is steady until the trigger", m.Capacity))
	}
	all := append(append(append([]retry.Option(nil), opts...), retry.WithAttemptTimeout(m.AttemptTimeout)), d.Options...)
	return Scenario{Duration: m.Duration, Seed: m.Seed, Load: Load{Rate: m.Rate},
		Service: Service{Workers: m.Workers, Network: Fixed(m.RoundTrip / 2), ServiceTime: Spread(m.ServiceTime(), 0.1),
			QueueLength: max(1, int(math.Round(m.QueueWork.Seconds()*m.Capacity))), Faults: []Fault{m.Trigger}, Shed: m.Shed},
		Fleet: Fleet{Clients: clients, Options: func(Client) []retry.Option { return all }}}, nil
}
