package main

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/steadyhq/retry/sim"
)

// sim --layers: a chain of services under an outage at the bottom.

// layersRun is one configuration's run: what each service of the chain
// received, and the dependency at the bottom last.
type layersRun struct {
	Name                string         `json:"name"`
	Layers              int            `json:"layers"`
	Offered             int            `json:"offered"`
	AmplificationBottom float64        `json:"amplification_bottom"`
	PerLayer            []layerFigures `json:"per_layer"`
}

type layerFigures struct {
	Layer         string  `json:"layer"`
	Received      int     `json:"received"`
	Amplification float64 `json:"amplification"` // received per request offered
	Retries       int     `json:"retries"`
	NestedRetries int     `json:"nested_retries"`      // sent while serving a retry
	HeldToOne     int     `json:"held_to_one_attempt"` // calls serving a retry held to one attempt
}

// runLayers runs sim --layers: a chain of N services under a full outage
// of the dependency at the bottom, for each configuration.
func runLayers(e *env, f *simFlags) (*simOutput, error) {
	rate, duration := f.rate, f.duration
	if !f.fs.Changed("rate") {
		rate = 100
	}
	if !f.fs.Changed("duration") {
		duration = "1m"
	}
	if f.layers < 1 || f.layers > 6 {
		return nil, usagef("flag --layers = %d: must be in [1, 6]", f.layers)
	}
	if !(rate > 0 && rate <= 1e6) {
		return nil, usagef("flag --rate = %g: must be in (0, 1e6]", rate)
	}
	dur, err := simDuration("duration", duration, time.Millisecond)
	if err != nil {
		return nil, err
	}
	lat, err := simDuration("latency", f.latency, 0)
	if err != nil {
		return nil, err
	}
	n := int(rate * dur.Seconds())
	if n < 1 {
		return nil, usagef("flags --rate and --duration: give at least one request")
	}
	if hits := float64(n) * math.Pow(3, float64(f.layers)); hits > 5_000_000 {
		return nil, usagef("flags --rate, --duration and --layers: %d requests × 3^%d is %.0f hits at the bottom of the naive chain: must be at most 5000000 (lower --rate or --duration)",
			n, f.layers, hits)
	}
	configs := sim.ChainDefences()
	var scenarios []sim.Scenario
	for _, c := range configs {
		scenarios = append(scenarios, sim.ChainOutage(f.layers, c, rate, dur, lat, f.seed))
	}
	reps, err := f.runAll(e, "layers", scenarios...)
	if err != nil {
		return nil, err
	}
	runs := make([]*layersRun, len(configs))
	for i, rep := range reps {
		if rep.Total.Unfinished > 0 {
			return nil, failed(fmt.Errorf("sim: %s with %d layers did not settle within a day of its last request", configs[i].Name, f.layers))
		}
		run := &layersRun{Name: configs[i].Name, Layers: f.layers, Offered: rep.Total.Requests}
		for k, l := range append(rep.Layers, sim.LayerFigures{Received: rep.Total.Attempts}) {
			name := map[bool]string{true: "dependency", false: "service " + strconv.Itoa(k+1)}[k == f.layers]
			run.PerLayer = append(run.PerLayer, layerFigures{Layer: name, Received: l.Received, Amplification: float64(l.Received) / float64(run.Offered),
				Retries: l.Retries, NestedRetries: l.NestedRetries, HeldToOne: l.HeldToOne})
		}
		run.AmplificationBottom = run.PerLayer[f.layers].Amplification
		runs[i] = run
	}
	head := fmt.Sprintf("A chain of %d %s under a full outage of the dependency at the bottom (every call fails at once, 503):\n"+
		"%d requests at %g/s over %s into service 1, each hop taking %s; the real engine in virtual time, seed %d.\n"+
		"naive: 3 attempts at every layer, no budget; rule only: retries at one layer, no budget;\n"+
		"budgets only: retry.New() with WithNestedRetries(true); defaults: retry.New(), the budget and\n"+
		"retries at one layer. Every layer's client has the default policy: 3 attempts, backoff from 1s.\n"+
		"Each cell: requests received, and per request offered.\n\n",
		f.layers, plural(f.layers, "service", "services"), runs[0].Offered, rate, human(dur), human(lat), f.seed)
	lines := [][]string{{"layer"}}
	for _, r := range runs {
		lines[0] = append(lines[0], r.Name, "")
	}
	for i, l := range runs[0].PerLayer {
		line := []string{l.Layer}
		for _, r := range runs {
			line = append(line, strconv.Itoa(r.PerLayer[i].Received), fmt.Sprintf("%.3f×", r.PerLayer[i].Amplification))
		}
		lines = append(lines, line)
	}
	nested, held := []string{"nested retries"}, []string{"held to one"}
	for _, r := range runs {
		var n, h int
		for _, l := range r.PerLayer {
			n, h = n+l.NestedRetries, h+l.HeldToOne
		}
		nested, held = append(nested, strconv.Itoa(n), ""), append(held, strconv.Itoa(h), "")
	}
	return &simOutput{rows: runs, text: []any{head, append(lines, nested, held), "\nnested retries: retries a service sent while serving a request that was itself a retry;\n" +
		"held to one: calls serving a retry that made one attempt by the rule of retries at one layer.\n"}}, nil
}
