package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"github.com/steadyhq/retry"
)

// sim --layers: a chain of services, each calling the next through a
// client of this library, under a full outage of the dependency at the
// bottom. Layer 1 takes the requests offered; the handler of layer i calls
// layer i+1 through its own Retrier, and layer N's calls the dependency,
// which fails every call at once with 503. A handler marks its context
// with the attempt of its caller that it serves (retry.WithInboundAttempt),
// as the shedding middleware does from the Transport's Retry-Attempt
// header, so each layer's engine sees whether its caller is retrying; and
// it numbers its own calls as the Transport does (retry.OutboundAttempt),
// so a call made while serving a retry is marked a retry too.

// The bounds and defaults of sim --layers: the rate and the duration
// apply unless given.
const (
	layersMin      = 1
	layersMax      = 6
	layersRate     = 100
	layersDuration = "1m"
	// layersMaxHits bounds the dependency's hits of the naive chain,
	// requests × 3^N: each is a few scheduler hand-offs.
	layersMaxHits = 5_000_000
)

// layersFlags are the flags sim --layers takes (and --progress, which
// every command takes).
var layersFlags = []string{"layers", "rate", "duration", "latency", "seed", "json", "progress"}

// layersConfig is a configuration of sim --layers: the options of every
// layer's Retrier.
type layersConfig struct {
	name string
	opts []retry.Option
}

// layersConfigs are the configurations of sim --layers: 3 attempts at
// every layer with nothing to stop them; the rule that retries happen at
// one layer without a retry budget; the library's retry budget at every
// layer but retries at every layer too (WithNestedRetries); and the
// library's defaults, the budget and the rule.
var layersConfigs = []layersConfig{
	{name: "naive", opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3}),
		retry.WithBudget(retry.Budget{Off: true}), retry.WithNestedRetries(true)}},
	{name: "rule only", opts: []retry.Option{retry.WithBudget(retry.Budget{Off: true})}},
	{name: "budgets only", opts: []retry.Option{retry.WithNestedRetries(true)}},
	{name: "defaults", opts: nil},
}

// layersSim is the setup of sim --layers: requests arrive at rate, evenly
// spaced, for duration, at the top of a chain of layers services; each hop
// takes latency, there and back.
type layersSim struct {
	layers   int
	rate     float64
	duration time.Duration
	latency  time.Duration
	seed     uint64
}

// layerFigures is what one layer of the chain saw; the last of a run is
// the dependency at the bottom, which calls nothing.
type layerFigures struct {
	Layer string `json:"layer"`
	// Received counts the requests that reached the layer, retries
	// included; Amplification is that per request offered at the top.
	Received      int     `json:"received"`
	Amplification float64 `json:"amplification"`
	// Retries counts the retries the layer's client sent below;
	// NestedRetries, those of them sent while serving a request that was
	// itself a retry; HeldToOne, the calls that served a retry and ended
	// after one attempt by the rule of retries at one layer.
	Retries       int `json:"retries"`
	NestedRetries int `json:"nested_retries"`
	HeldToOne     int `json:"held_to_one_attempt"`
}

// layersRun is one configuration's run.
type layersRun struct {
	Name                string         `json:"name"`
	Layers              int            `json:"layers"`
	Offered             int            `json:"offered"`
	AmplificationBottom float64        `json:"amplification_bottom"`
	PerLayer            []layerFigures `json:"per_layer"` // the services from the top, then the dependency
}

// errLayerDown is what a service answers when its own call below failed:
// 503, which its caller may retry.
var errLayerDown = &retry.StatusError{StatusCode: 503}

// requests returns the number of requests offered.
func (s *layersSim) requests() int { return int(s.rate * s.duration.Seconds()) }

// run runs every configuration, each on its own clock, in parallel; bar,
// when not nil, counts the requests that have ended.
func (s *layersSim) run(configs []layersConfig, bar *progress) ([]*layersRun, error) {
	runs := make([]*layersRun, len(configs))
	errs := make([]error, len(configs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, c := range configs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			runs[i], errs[i] = s.runConfig(c, bar)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return runs, nil
}

// runConfig runs the chain with every layer's Retrier set up with c, on
// the real engine in virtual time.
func (s *layersSim) runConfig(c layersConfig, bar *progress) (*layersRun, error) {
	clk := newVClock()
	clients := make([]*retry.Retrier, s.layers)
	for i := range clients {
		rng := rand.New(rand.NewPCG(s.seed, 0x1a7e5+uint64(i)))
		clients[i] = retry.New(append([]retry.Option{retry.WithClock(clk), retry.WithRandom(rng.Float64)}, c.opts...)...)
		if err := clients[i].Err(); err != nil {
			return nil, err
		}
	}
	run := &layersRun{Name: c.name, Layers: s.layers, Offered: s.requests(), PerLayer: make([]layerFigures, s.layers+1)}
	for i := range run.PerLayer {
		run.PerLayer[i].Layer = "service " + strconv.Itoa(i+1)
	}
	run.PerLayer[s.layers].Layer = "dependency"

	// serve is layer i's handler for a request that is attempt n of its
	// caller; root is the context of the simulated request, which ends
	// with the run. Its error is what the layer answers.
	var serve func(root context.Context, i, n int) error
	serve = func(root context.Context, i, n int) error {
		f := &run.PerLayer[i]
		f.Received++
		if i == s.layers {
			return errDown // the outage
		}
		ctx := retry.WithInboundAttempt(root, n) // what the shedding middleware does
		err := clients[i].Run(ctx, func(actx context.Context) error {
			a := retry.AttemptFrom(actx)
			if a > 1 {
				f.Retries++
				if n > 1 {
					f.NestedRetries++
				}
			}
			if err := clk.Sleep(actx, s.latency); err != nil { // there and back, in one step
				return err
			}
			return serve(root, i+1, retry.OutboundAttempt(actx)) // what the Transport sends
		})
		if err == nil {
			return nil
		}
		if re := (*retry.Error)(nil); errors.As(err, &re) && re.Reason == retry.ReasonInboundRetry {
			f.HeldToOne++
		}
		return errLayerDown
	}

	interval := time.Duration(float64(time.Second) / s.rate)
	for k := range run.Offered {
		clk.Go(epoch.Add(time.Duration(k)*interval), k, func(ctx context.Context) {
			serve(ctx, 0, 1) // the offered request is a first attempt
			bar.add(1)
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !clk.Run(ctx, cancel, epoch.Add(s.duration+24*time.Hour), math.MaxInt) {
		return nil, fmt.Errorf("sim: %s with %d layers did not settle within a day of its last request", c.name, s.layers)
	}
	for i := range run.PerLayer {
		f := &run.PerLayer[i]
		f.Amplification = float64(f.Received) / float64(run.Offered)
	}
	run.AmplificationBottom = run.PerLayer[s.layers].Amplification
	return run, nil
}

// layersSetup builds the setup of sim --layers from its flags, refusing
// the flags it does not take; rate and duration take its own defaults
// unless given.
func layersSetup(fs *pflag.FlagSet, layers int, rate float64, duration, latency string, seed uint64) (*layersSim, error) {
	var err error
	fs.Visit(func(f *pflag.Flag) {
		if err == nil && !slices.Contains(layersFlags, f.Name) {
			err = usagef("flag --%s: does not apply to --layers, which takes only --%s and --%s", f.Name,
				strings.Join(layersFlags[1:len(layersFlags)-2], ", --"), layersFlags[len(layersFlags)-2])
		}
	})
	if err != nil {
		return nil, err
	}
	if layers < layersMin || layers > layersMax {
		return nil, usagef("flag --layers = %d: must be in [%d, %d]", layers, layersMin, layersMax)
	}
	if !fs.Changed("rate") {
		rate = layersRate
	}
	if !fs.Changed("duration") {
		duration = layersDuration
	}
	if !(rate > 0 && rate <= 1e6) {
		return nil, usagef("flag --rate = %g: must be in (0, 1e6]", rate)
	}
	s := &layersSim{layers: layers, rate: rate, seed: seed}
	if s.duration, err = simDuration("duration", duration, time.Millisecond); err != nil {
		return nil, err
	}
	if s.latency, err = simDuration("latency", latency, 0); err != nil {
		return nil, err
	}
	n := s.requests()
	if n < 1 {
		return nil, usagef("flags --rate and --duration: give at least one request")
	}
	if hits := float64(n) * math.Pow(3, float64(layers)); hits > layersMaxHits {
		return nil, usagef("flags --rate, --duration and --layers: %d requests × 3^%d is %.0f hits at the bottom of the naive chain: must be at most %d (lower --rate or --duration)",
			n, layers, hits, layersMaxHits)
	}
	return s, nil
}

// runLayers runs sim --layers and prints a table, or JSON: one object per
// configuration.
func runLayers(e *env, s *layersSim, asJSON bool) error {
	bar := e.newProgress(len(layersConfigs)*s.requests(), "layers")
	runs, err := s.run(layersConfigs, bar)
	bar.finish()
	if err != nil {
		return failed(err)
	}
	if asJSON {
		return writeJSON(e.stdout, runs)
	}
	w := e.stdout
	fmt.Fprintf(w, "A chain of %d %s under a full outage of the dependency at the bottom (every call fails at once, 503):\n",
		s.layers, plural(s.layers, "service", "services"))
	fmt.Fprintf(w, "%d requests at %g/s over %s into service 1, each hop taking %s; the real engine in virtual time, seed %d.\n",
		runs[0].Offered, s.rate, human(s.duration), human(s.latency), s.seed)
	fmt.Fprintf(w, "naive: 3 attempts at every layer, no budget; rule only: retries at one layer, no budget;\n")
	fmt.Fprintf(w, "budgets only: retry.New() with WithNestedRetries(true); defaults: retry.New(), the budget and\n")
	fmt.Fprintf(w, "retries at one layer. Every layer's client has the default policy: 3 attempts, backoff from 1s.\n")
	fmt.Fprintf(w, "Each cell: requests received, and per request offered.\n\n")
	const width = len("nested retries") // the labels' column is aligned left, the figures right
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\t", width, "layer")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t\t", r.Name)
	}
	fmt.Fprintf(tw, "\n")
	for i := range runs[0].PerLayer {
		fmt.Fprintf(tw, "%-*s\t", width, runs[0].PerLayer[i].Layer)
		for _, r := range runs {
			f := r.PerLayer[i]
			fmt.Fprintf(tw, "%d\t%.3f×\t", f.Received, f.Amplification)
		}
		fmt.Fprintf(tw, "\n")
	}
	for _, row := range []struct {
		name string
		v    func(layerFigures) int
	}{
		{"nested retries", func(f layerFigures) int { return f.NestedRetries }},
		{"held to one", func(f layerFigures) int { return f.HeldToOne }},
	} {
		fmt.Fprintf(tw, "%-*s\t", width, row.name)
		for _, r := range runs {
			sum := 0
			for _, f := range r.PerLayer {
				sum += row.v(f)
			}
			fmt.Fprintf(tw, "%d\t\t", sum)
		}
		fmt.Fprintf(tw, "\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nnested retries: retries a service sent while serving a request that was itself a retry;\n")
	fmt.Fprintf(w, "held to one: calls serving a retry that made one attempt by the rule of retries at one layer.\n")
	return nil
}
