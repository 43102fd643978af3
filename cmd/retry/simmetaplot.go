package main

import (
	"fmt"
	"image/color"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"github.com/steadyhq/retry"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// metaFlags are the flags of sim --metastable of its own.
type metaFlags struct {
	on        bool
	trigger   string
	triggerAt string
	factor    float64
	workers   int
	timeout   string
}

// metaOnly are the flags that apply only with --metastable; metaRefused,
// those of sim that do not apply with it.
var (
	metaOnly    = []string{"trigger", "trigger-at", "factor", "workers", "attempt-timeout"}
	metaRefused = []string{"outage", "fail-rate", "timeout", "horizon", "bucket", "budget", "clients", "runs"}
)

// The defaults of sim --metastable for the flags it shares with the load
// simulation: 70% of the capacity, and a run 14 L long past the trigger.
const (
	metaRate     = 70
	metaCapacity = 100
	metaDuration = "3m"
)

func (m *metaFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&m.on, "metastable", false, "a server of finite capacity that can fail metastably, under each defence")
	f.StringVar(&m.trigger, "trigger", triggerCapacity, "with --metastable: what the trigger does: capacity (workers divided by --factor) or latency (service time multiplied by it)")
	f.StringVar(&m.triggerAt, "trigger-at", "30s:10s", "with --metastable: when the trigger starts and how long it lasts (L), as START:LENGTH")
	f.Float64Var(&m.factor, "factor", 2, "with --metastable: the trigger's strength, in (1, 100]")
	f.IntVar(&m.workers, "workers", 10, "with --metastable: the server's workers; each attempt takes workers/capacity seconds")
	f.StringVar(&m.timeout, "attempt-timeout", "1s", "with --metastable: the client's per-attempt timeout")
}

// sim builds the setup of sim --metastable from its flags and those it
// shares with the load simulation, which take their own defaults unless
// given.
func (m *metaFlags) sim(fs *pflag.FlagSet, rate, capacity float64, duration, latency string, seed uint64, p retry.Policy) (*metaSim, error) {
	if !fs.Changed("rate") {
		rate = metaRate
	}
	if !fs.Changed("capacity") {
		capacity = metaCapacity
	}
	if !fs.Changed("duration") {
		duration = metaDuration
	}
	s := &metaSim{rate: rate, capacity: capacity, workers: m.workers, queue: 2 * time.Second, policy: p, seed: seed,
		trig: trigger{kind: m.trigger, factor: m.factor}}
	switch {
	case !(capacity > 0 && capacity <= 1e6):
		return nil, usagef("flag --capacity = %g: must be in (0, 1e6] with --metastable", capacity)
	case !(rate > 0 && rate < capacity):
		return nil, usagef("flag --rate = %g: must be in (0, %g), under --capacity: the load is steady below capacity", rate, capacity)
	case m.workers < 1 || m.workers > 10000:
		return nil, usagef("flag --workers = %d: must be in [1, 10000]", m.workers)
	case m.trigger != triggerCapacity && m.trigger != triggerLatency:
		return nil, usagef("flag --trigger = %q: must be capacity or latency", m.trigger)
	case !(m.factor > 1 && m.factor <= 100):
		return nil, usagef("flag --factor = %g: must be in (1, 100]", m.factor)
	}
	var err error
	for _, d := range []struct {
		name, v string
		dst     *time.Duration
		min     time.Duration
	}{
		{"duration", duration, &s.duration, time.Second},
		{"latency", latency, &s.latency, 0},
		{"attempt-timeout", m.timeout, &s.timeout, time.Millisecond},
	} {
		if *d.dst, err = simDuration(d.name, d.v, d.min); err != nil {
			return nil, err
		}
	}
	if s.trig.start, s.trig.end, err = parseWindow("trigger-at", m.triggerAt); err != nil {
		return nil, err
	}
	if s.trig.start < time.Second {
		return nil, usagef("flag --trigger-at = %q: START must be at least 1s, so that there is a before", m.triggerAt)
	}
	if least := s.trig.end + 2*recoveryWindow*time.Second; s.duration < least {
		return nil, usagef("flags --duration and --trigger-at: the run (%s) must last at least %s past the trigger's end (%s): --duration %s or more",
			human(s.duration), human(2*recoveryWindow*time.Second), human(s.trig.end), human(least))
	}
	if n := rate * s.duration.Seconds(); n > maxRequests {
		return nil, usagef("flags --rate and --duration: %s/s over %s is %.0f requests: must be at most %d (lower --rate or --duration)",
			strconv.FormatFloat(rate, 'f', -1, 64), human(s.duration), n, maxRequests)
	}
	return s, nil
}

// runMetastable runs sim --metastable and reports it: a table, or JSON,
// and a chart to plotFile when given.
func runMetastable(e *env, s *metaSim, policyLabel string, asJSON bool, plotFile string) error {
	format, err := simPlot(plotFile)
	if err != nil {
		return err
	}
	s.progress = e.newProgress
	rows, err := s.run()
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(e.stdout, rows); err != nil {
			return err
		}
	} else {
		writeMetaText(e.stdout, s, policyLabel, rows)
	}
	if plotFile != "" {
		if err := saveChart(metaChart(s, rows), 20*vg.Centimeter, 11*vg.Centimeter, format, plotFile, e.stdout); err != nil {
			return failed(err)
		}
		fmt.Fprintf(e.stderr, "wrote %s\n", plotFile)
	}
	return nil
}

// triggerText says what the trigger does, as "capacity cut to 5 of 10
// workers" or "service time ×2 (100ms → 200ms)".
func (s *metaSim) triggerText() string {
	if s.trig.kind == triggerCapacity {
		return fmt.Sprintf("capacity cut to %d of %d workers", s.activeWorkers(), s.workers)
	}
	return fmt.Sprintf("service time ×%s (%s → %s)", strconv.FormatFloat(s.trig.factor, 'f', -1, 64),
		human(s.service()), human(time.Duration(float64(s.service())*s.trig.factor)))
}

// writeMetaText prints the setup and the table of sim --metastable.
func writeMetaText(w io.Writer, s *metaSim, policyLabel string, rows []*metaRow) {
	fmt.Fprintf(w, "%s requests/s (Poisson, open loop) for %s; server: %d workers, %s an attempt (capacity %s/s),\n",
		strconv.FormatFloat(s.rate, 'f', -1, 64), human(s.duration), s.workers, human(s.service()), strconv.FormatFloat(s.capacity, 'f', -1, 64))
	fmt.Fprintf(w, "a FIFO queue of %d (%s of work), more refused at once with 503; attempts time out after %s\n",
		s.queueMax(), human(s.queue), human(s.timeout))
	fmt.Fprintf(w, "and the server still serves them; round trip %s\n", human(s.latency))
	fmt.Fprintf(w, "trigger: %s from %s to %s (L = %s)\n", s.triggerText(), human(s.trig.start), human(s.trig.end), human(s.trig.end-s.trig.start))
	fmt.Fprintf(w, "policy %s: %s; seed %d\n\n", policyLabel, describe(s.policy), s.seed)
	width := len("defences")
	for _, r := range rows {
		width = max(width, len(r.Name))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\toffered\tbefore\tduring\tafter\tamplification\twasted work\trecovered after\t\n", width, "defences")
	for _, r := range rows {
		fmt.Fprintf(tw, "%-*s\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f×\t%.0f%%\t%s\t\n", width, r.Name, r.Offered, r.Before, r.During, r.After,
			r.Amplification, 100*r.Wasted, r.recoveryText())
	}
	tw.Flush()
	fmt.Fprintf(w, "\noffered: requests per second; before, during, after: goodput, successful calls per second, before,\n")
	fmt.Fprintf(w, "during and after the trigger; amplification: attempts reaching the server per request; wasted\n")
	fmt.Fprintf(w, "work: the server's work for attempts whose caller had given up; recovered after: from then on,\n")
	fmt.Fprintf(w, "every %d s window to the end of the run has successful calls of at least %.0f%% of the requests\n", recoveryWindow, 100*recoveryShare)
	fmt.Fprintf(w, "arriving in it (never: not within the %s after the trigger)\n", human(s.duration-s.trig.end))
}

// recoveryText is the table's "recovered after" cell.
func (r *metaRow) recoveryText() string {
	if r.RecoveryS == nil {
		return "never"
	}
	return human(time.Duration(*r.RecoveryS * float64(time.Second)))
}

// metaWidths are the widths of the rows' lines, in points, widest first:
// each is drawn over the wider ones before it, so that lines that meet
// (every row before the trigger) all show.
var metaWidths = []float64{5, 4, 3.2, 2.5, 1.9, 1.4, 1}

// metaChart draws the goodput of each row over time, with the requests
// arriving, each a mean over 5 s (the windows of the recovery rule),
// the trigger shaded.
func metaChart(s *metaSim, rows []*metaRow) *chart {
	note := fmt.Sprintf("%s requests/s to a server of capacity %s/s (%d workers, queue %s of work), attempts time out after %s; %s from %s to %s",
		strconv.FormatFloat(s.rate, 'f', -1, 64), strconv.FormatFloat(s.capacity, 'f', -1, 64), s.workers, human(s.queue),
		human(s.timeout), s.triggerText(), human(s.trig.start), human(s.trig.end))
	ch := newChart("Goodput through a trigger, by defence", note)
	ch.X.Label.Text = "time"
	ch.X.Tick.Marker = durationTicks{}
	ch.Y.Label.Text = "successful calls per second (5 s mean)"
	top := 1.0
	for _, r := range rows {
		for _, b := range r.series {
			top = max(top, float64(b.arrivals), float64(b.succeeded))
		}
	}
	top *= 1.08
	end := 1000 * s.duration.Seconds()
	a, b := ms(s.trig.start), min(ms(s.trig.end), end)
	shade, err := plotter.NewPolygon(plotter.XYs{{X: a, Y: 0}, {X: b, Y: 0}, {X: b, Y: top}, {X: a, Y: top}})
	if err == nil {
		shade.Color = color.Gray{Y: 0xe4}
		shade.LineStyle.Width = 0
		ch.Add(shade)
	}
	// Each point is the mean over the window of recovery's rule centred
	// on it, from the first whole window to the last.
	mean := func(v func(metaBucket) int, series []metaBucket) plotter.XYs {
		var xys plotter.XYs
		for k := 0; k+recoveryWindow <= len(series); k++ {
			sum := 0
			for _, b := range series[k : k+recoveryWindow] {
				sum += v(b)
			}
			span := min(float64(k+recoveryWindow), s.duration.Seconds()) - float64(k)
			xys = append(xys, plotter.XY{X: 1000 * (float64(k) + span/2), Y: float64(sum) / span})
		}
		return xys
	}
	for i, r := range rows {
		if len(r.series) < recoveryWindow {
			continue
		}
		l, err := plotter.NewLine(mean(func(b metaBucket) int { return b.succeeded }, r.series))
		if err != nil {
			continue
		}
		l.Color, l.Width = palette[i%len(palette)], vg.Points(metaWidths[min(i, len(metaWidths)-1)])
		ch.Add(l)
		ch.legend(r.Name, l)
	}
	if len(rows) > 0 && len(rows[0].series) >= recoveryWindow {
		if l, err := plotter.NewLine(mean(func(b metaBucket) int { return b.arrivals }, rows[0].series)); err == nil {
			l.Color, l.Width = grey, vg.Points(0.9) // black is a row's colour
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2.5)}
			ch.Add(l)
			ch.legend("requests arriving", l)
		}
	}
	if shade != nil {
		ch.legend("trigger", shade)
	}
	ch.X.Min, ch.X.Max = 0, end
	ch.Y.Min, ch.Y.Max = 0, top
	return ch
}
