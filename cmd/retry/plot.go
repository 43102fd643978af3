package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/cmd/retry/internal/chart"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// curve is one policy on a chart.
type curve struct {
	label  string
	policy retry.Policy
}

func newPlot(e *env) *cobra.Command {
	var (
		pf         policyFlags
		compare    []string
		output     string
		format     string
		samples    int
		seed       uint64
		limit      int
		logY       bool
		linearY    bool
		cumulative bool
		width      string
		height     string
	)
	cmd := &cobra.Command{
		Use:   "plot [flags] [POLICY...]",
		Short: "Draw the backoff curve of policies, with their jitter bands, as SVG or PNG",
		Long: `Draw the delay before each retry (or with --cumulative, the total wait) of one or more
policies: the median over --samples draws of the whole schedule as a line, and a shaded band
from the 5th to the 95th percentile of the draws when the policy has jitter. The delay axis is
logarithmic when the values drawn span more than two decades (--log or --linear to choose),
with ticks in ms, s, min, h and d.

Each POLICY argument is a curve: a preset name ("zizq"), a preset with parameters
("daycry:base=2s,multiplier=3"), a policy file, or inline JSON. --policy or --preset adds
one more curve, drawn first; with neither and no argument, the curve is the OJS defaults.
The field flags (--attempts, --initial, --jitter, ...) apply to every curve.

` + presetHelp(),
		Example: `  retry plot --attempts 11 -o docs/curve.svg ojs zizq
  retry plot --jitter full --attempts 10 ojs 'daycry:base=1s' -o compare.png
  retry plot --preset zizq --cumulative -o zizq.svg`,
		RunE: func(cmd *cobra.Command, args []string) error {
			args = append(args, compare...) // --compare is the same as an argument
			curves, err := plotCurves(&pf, e.stdin, args)
			if err != nil {
				return err
			}
			if err := someRetry(&pf, curves); err != nil {
				return err
			}
			switch {
			case samples < 1 || samples > maxSamples:
				return usagef("flag --samples = %d: must be in [1, %d]", samples, maxSamples)
			case limit < 1 || limit > 1000:
				return usagef("flag --limit = %d: must be in [1, 1000]", limit)
			case limit*samples > maxDraws:
				return usagef("flag --samples = %d: with --limit %d, must be at most %d", samples, limit, maxDraws/limit)
			case logY && linearY:
				return usagef("flags --log and --linear: give one or the other")
			}
			w, err := plotLength("width", width)
			if err != nil {
				return err
			}
			h, err := plotLength("height", height)
			if err != nil {
				return err
			}
			format, err = plotFormat(output, format)
			if err != nil {
				return err
			}
			if err := outputDir("output", output); err != nil {
				return err
			}
			o := curveOptions{limit: limit, samples: samples, seed: seed, cumulative: cumulative, scale: scaleAuto}
			switch {
			case logY:
				o.scale = scaleLog
			case linearY:
				o.scale = scaleLinear
			}
			ch, err := curveChart(curves, o)
			if err != nil {
				return err
			}
			if err := chart.Save(ch, w, h, format, output, e.stdout); err != nil {
				return failed(err)
			}
			if output != "-" {
				fmt.Fprintf(e.stderr, "wrote %s (%d %s)\n", output, len(curves), plural(len(curves), "curve", "curves"))
			}
			return nil
		},
	}
	pf.register(cmd.Flags())
	f := cmd.Flags()
	f.StringArrayVar(&compare, "compare", nil, "another policy to draw, as a POLICY argument (repeatable)")
	f.StringVarP(&output, "output", "o", "retry-curve.svg", "the image file; - for stdout (then --format is needed)")
	f.StringVar(&format, "format", "", "svg or png; by default the output's extension")
	f.IntVar(&samples, "samples", 1000, "draws of each schedule with jitter")
	f.Uint64Var(&seed, "seed", 1, "seed of the draws")
	f.IntVar(&limit, "limit", 30, "draw at most this many retries")
	f.BoolVar(&logY, "log", false, "a logarithmic delay axis (by default, when the values span more than two decades)")
	f.BoolVar(&linearY, "linear", false, "a linear delay axis")
	f.BoolVar(&cumulative, "cumulative", false, "draw the total wait up to each retry instead of each delay")
	f.StringVar(&width, "width", "16cm", "image width (cm, mm, in or pt)")
	f.StringVar(&height, "height", "10cm", "image height")
	return cmd
}

// maxDraws bounds the delays plot samples, --limit × --samples.
const maxDraws = 10_000_000

// plotCurves returns the curves to draw: one per argument, after the
// flags' policy when --policy or --preset names one (or when there is no
// argument, the defaults); every field flag applies to every curve.
func plotCurves(pf *policyFlags, stdin io.Reader, args []string) ([]curve, error) {
	var curves []curve
	if len(args) == 0 || pf.source != "" || pf.preset != "" {
		p, label, err := pf.policy(stdin)
		if err != nil {
			return nil, err
		}
		curves = append(curves, curve{label, p})
	}
	for _, a := range args {
		p, label, err := policySpec(a, stdin)
		if err != nil {
			return nil, err
		}
		if p, err = pf.override(p); err != nil {
			return nil, usage(fmt.Errorf("policy %q: %w", a, err))
		}
		if pf.anyField(true) {
			label += " (modified)"
		}
		curves = append(curves, curve{label, withDefaults(p)})
	}
	if len(curves) > len(chart.Palette) {
		return nil, usagef("too many policies (%d): at most %d on one chart", len(curves), len(chart.Palette))
	}
	return curves, nil
}

// plotAttemptsRule is the rule of --attempts and max_attempts in plot.
const plotAttemptsRule = "must be >= 2 with plot, which draws the delays before retries"

// someRetry refuses a chart with no retry to draw: --attempts 0 or 1
// (both one attempt), or policies that all make one attempt.
func someRetry(pf *policyFlags, curves []curve) error {
	if pf.changed("attempts") {
		v := *pf.strFlag["attempts"]
		if n, err := strconv.Atoi(v); err == nil && n < 2 {
			return usagef("flag --attempts = %q: %s", v, plotAttemptsRule)
		}
	}
	for _, c := range curves {
		if withDefaults(c.policy).MaxAttempts > 1 {
			return nil
		}
	}
	where := "policy"
	if len(curves) > 0 && curves[0].label != "" && curves[0].label != "policy" {
		where = fmt.Sprintf("policy %q", curves[0].label)
	}
	return usagef("%s: max_attempts = 1: %s", where, plotAttemptsRule)
}

// policySpec reads a POLICY argument: a preset, "preset:k=v,...", inline
// JSON or a file.
func policySpec(spec string, stdin io.Reader) (retry.Policy, string, error) {
	name, params, _ := strings.Cut(spec, ":")
	if pr, ok := presets[name]; ok {
		m := map[string]string{}
		if params != "" {
			for kv := range strings.SplitSeq(params, ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return retry.Policy{}, "", usagef("policy %q: parameter %q must be name=value", spec, kv)
				}
				m[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
		p, err := pr.build(&values{preset: name, params: pr.params, m: m})
		if err != nil {
			return p, "", usage(fmt.Errorf("policy %q: %w", spec, err))
		}
		return withDefaults(p), spec, nil
	}
	data, label, err := readSource(spec, stdin)
	if err != nil {
		return retry.Policy{}, "", usage(fmt.Errorf("policy %q: not a preset (%s), and not a readable file: %v", spec, strings.Join(presetNames(), ", "), err))
	}
	p, err := retry.ParsePolicy(data)
	if err != nil {
		return p, "", usage(err)
	}
	if label == "policy" {
		label = "" // inline JSON: the legend's summary says what it is
	}
	return p, label, nil
}

// plotLength parses an image dimension.
func plotLength(name, s string) (vg.Length, error) {
	for _, u := range []struct {
		suffix string
		unit   vg.Length
	}{{"cm", vg.Centimeter}, {"mm", vg.Millimeter}, {"in", vg.Inch}, {"pt", vg.Points(1)}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			var v float64
			if _, err := fmt.Sscanf(num, "%g", &v); err == nil && v >= 1 && v <= 1000 {
				return vg.Length(v) * u.unit, nil
			}
		}
	}
	return 0, usagef("flag --%s = %q: must be a length such as 16cm, 120mm, 6in or 400pt, from 1 to 1000 units", name, s)
}

// plotFormat decides the image format from --format or the file's
// extension.
func plotFormat(output, format string) (string, error) {
	if format == "" {
		if output == "-" {
			return "", usagef("flag --format: needed when the output is stdout (svg or png)")
		}
		format = strings.TrimPrefix(strings.ToLower(filepath.Ext(output)), ".")
	}
	switch format {
	case "svg", "png":
		return format, nil
	}
	return "", usagef("image format %q (from --format or the output's extension): must be svg or png", format)
}

// outputDir checks that the directory of an image file named by flag
// exists, as nothing creates it.
func outputDir(flag, output string) error {
	if output == "-" {
		return nil
	}
	dir := filepath.Dir(output)
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		return usagef("flag --%s = %q: directory %q: %v", flag, output, dir, unwrapPath(err))
	case !st.IsDir():
		return usagef("flag --%s = %q: %q is not a directory", flag, output, dir)
	}
	return nil
}

// summary describes a policy's curve in a few words, with the strategy's
// formula in n, the retry's number, as the library's doc writes it
// (exponential 1s ×2, polynomial 1s·n^4, linear 1s·n) and durations in the
// units of the delay axis.
func summary(p retry.Policy) string {
	p = withDefaults(p)
	var b strings.Builder
	b.WriteString(string(p.Backoff))
	switch p.Backoff {
	case retry.Exponential:
		fmt.Fprintf(&b, " %s ×%g", unitDuration(p.InitialInterval), p.BackoffCoefficient)
	case retry.Polynomial:
		fmt.Fprintf(&b, " %s·n^%g", unitDuration(p.InitialInterval), p.BackoffCoefficient)
	case retry.Constant:
		fmt.Fprintf(&b, " %s", unitDuration(p.InitialInterval))
	case retry.Linear:
		fmt.Fprintf(&b, " %s·n", unitDuration(p.InitialInterval))
	}
	if p.Offset > 0 {
		fmt.Fprintf(&b, " +%s", unitDuration(p.Offset))
	}
	if p.Backoff != retry.Immediate && p.MaxInterval < 3650*day {
		fmt.Fprintf(&b, ", cap %s", unitDuration(p.MaxInterval))
	}
	switch j := p.Jitter; j.Kind {
	case retry.JitterNone:
		b.WriteString(", no jitter")
	case retry.JitterProportional, retry.JitterPercent:
		fmt.Fprintf(&b, ", jitter ±%g%%", 100*j.Factor)
	case retry.JitterAdditive:
		fmt.Fprintf(&b, ", jitter +%s·n", unitDuration(j.Amount))
	default:
		fmt.Fprintf(&b, ", %s jitter", j.Kind)
	}
	return b.String()
}

// The delay axis' scale.
const (
	scaleAuto   = "auto" // log when the values span more than two decades
	scaleLog    = "log"
	scaleLinear = "linear"
)

// The percentiles a jitter band spans.
const (
	bandLow  = 0.05
	bandHigh = 0.95
)

// curveOptions are what plot draws of each curve.
type curveOptions struct {
	limit, samples int
	seed           uint64
	cumulative     bool
	scale          string
}

// point is one retry of a curve, in milliseconds: the median and the band
// around it (lo = mid = hi without jitter).
type point struct {
	retry       int
	lo, mid, hi float64
}

// curvePoints returns the delays (or with cumulative, the total waits)
// before each of the first limit retries of p: exact without jitter, else
// the median and the band's percentiles over samples draws of whole
// schedules from a source seeded with seed.
func curvePoints(p retry.Policy, limit, samples int, seed uint64, cumulative bool) []point {
	p = withDefaults(p)
	n := min(p.MaxAttempts-1, limit)
	pts := make([]point, n)
	if p.Jitter.Kind == retry.JitterNone {
		var cum total
		for i := range n {
			d := p.Delay(i + 1)
			v := ms(d)
			if cumulative {
				cum.add(d)
				v = cum.ms()
			}
			pts[i] = point{i + 1, v, v, v}
		}
		return pts
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	draws := make([][]float64, n) // [retry-1][sample], milliseconds
	for i := range draws {
		draws[i] = make([]float64, samples)
	}
	for k := range samples {
		var prev time.Duration
		var cum total
		for i := range n {
			d := p.Sample(i+1, prev, rng.Float64())
			prev = d
			v := ms(d)
			if cumulative {
				cum.add(d)
				v = cum.ms()
			}
			draws[i][k] = v
		}
	}
	for i, s := range draws {
		slices.Sort(s)
		pts[i] = point{i + 1, percentile(s, bandLow), percentile(s, 0.5), percentile(s, bandHigh)}
	}
	return pts
}

// percentile q of a sorted, non-empty slice, interpolated between the two
// nearest draws.
func percentile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (s[i+1]-s[i])*(pos-float64(i))
}

// spansDecades reports whether values from lo to hi (lo the smallest above
// 0) span more than two decades, where a linear axis flattens the lower
// curves to a line.
func spansDecades(lo, hi float64) bool { return lo > 0 && hi/lo > 100 }

// curveChart draws the curves: per curve, its jitter band shaded and its
// median on top, and a legend entry naming it.
func curveChart(curves []curve, o curveOptions) (*chart.Chart, error) {
	data := make([][]point, len(curves))
	lo, hi := math.Inf(1), 0.0
	last, jitter := 0, false
	for i, c := range curves {
		data[i] = curvePoints(c.policy, o.limit, o.samples, o.seed, o.cumulative)
		for _, pt := range data[i] {
			for _, v := range []float64{pt.lo, pt.mid, pt.hi} {
				if v > 0 {
					lo = min(lo, v)
				}
				hi = max(hi, v)
			}
			last = max(last, pt.retry)
			jitter = jitter || pt.lo != pt.hi
		}
	}
	logY := o.scale == scaleLog || o.scale == scaleAuto && spansDecades(lo, hi)
	if o.scale == scaleLog && !(hi > 0) {
		return nil, usagef("flag --log: every delay drawn is 0 (an immediate strategy, or no retry), and a log axis cannot show 0: drop --log")
	}
	title, ylabel := "Delay before each retry", "delay"
	if o.cumulative {
		title, ylabel = "Total wait up to each retry", "total wait"
	}
	note := ""
	if jitter {
		note = fmt.Sprintf("line: median of %d %s; band: %gth to %gth percentile",
			o.samples, plural(o.samples, "draw", "draws"), 100*bandLow, 100*bandHigh)
	}
	ch := chart.New(title, note)
	ch.X.Label.Text = "retry"
	ch.X.Tick.Marker = chart.IntegerTicks{}
	ch.Y.Tick.Marker = chart.DurationTicks{Log: logY}
	var ymin, ymax float64
	switch {
	case logY:
		ylabel += " (log scale)"
		ymin, ymax = math.Log10(lo/1.25), math.Log10(hi*1.25)
	case hi > 0:
		ymin, ymax = 0, hi*1.05
	default:
		ymin, ymax = 0, 1000 // every delay 0: an axis to 1s
	}
	ch.Y.Label.Text = ylabel
	y := func(v float64) float64 {
		if logY {
			return max(math.Log10(v), ymin) // a log axis has no 0: drawn at its floor
		}
		return v
	}
	for i, pts := range data {
		col := chart.Palette[i]
		var thumbs []plot.Thumbnailer
		var med, band plotter.XYs
		for _, pt := range pts {
			med = append(med, plotter.XY{X: float64(pt.retry), Y: y(pt.mid)})
		}
		if curves[i].policy.Jitter.Kind != retry.JitterNone && len(pts) > 0 {
			for _, pt := range pts {
				band = append(band, plotter.XY{X: float64(pt.retry), Y: y(pt.hi)})
			}
			for _, pt := range slices.Backward(pts) {
				band = append(band, plotter.XY{X: float64(pt.retry), Y: y(pt.lo)})
			}
			if len(pts) == 1 { // one retry: a bar
				band = append(band, plotter.XY{X: band[0].X + 0.05, Y: band[1].Y}, plotter.XY{X: band[0].X + 0.05, Y: band[0].Y})
				for j := range band[:2] {
					band[j].X -= 0.05
				}
			}
			poly, err := plotter.NewPolygon(band)
			if err != nil {
				return nil, err
			}
			poly.Color = chart.Tint(col, 0.3)
			poly.LineStyle.Width = 0
			ch.Add(poly)
			thumbs = append(thumbs, poly)
		}
		if len(med) > 0 {
			l, err := plotter.NewLine(med)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = col, vg.Points(1.6)
			ch.Add(l)
			thumbs = append(thumbs, l)
			if len(med) <= 40 {
				dots, err := plotter.NewScatter(med)
				if err != nil {
					return nil, err
				}
				dots.Color, dots.Radius, dots.Shape = col, vg.Points(1.8), draw.CircleGlyph{}
				ch.Add(dots)
				thumbs = append(thumbs, dots)
			}
		}
		label := summary(curves[i].policy) + ", " + retriesNote(curves[i].policy, len(pts))
		if curves[i].label != "" {
			label = curves[i].label + ": " + label
		}
		ch.Legend(label, thumbs...)
	}
	// The ranges, set once the plotters have widened them to their data.
	ch.X.Min, ch.X.Max = 1, float64(max(last, 1))
	if last <= 1 {
		ch.X.Min, ch.X.Max = 0.5, 1.5
	}
	ch.Y.Min, ch.Y.Max = ymin, ymax
	return ch, nil
}

// retriesNote says how many retries a policy makes, and how many of them
// are drawn when --limit cut it short.
func retriesNote(p retry.Policy, drawn int) string {
	n := withDefaults(p).MaxAttempts - 1
	s := fmt.Sprintf("%d %s", n, plural(n, "retry", "retries"))
	if drawn < n {
		s += fmt.Sprintf(" (first %d drawn)", drawn)
	}
	return s
}

// unitDuration writes d in the units of a delay axis (µs, ms, s, min, h,
// d): as its label when d is round there (5min, 1.5s), else in whole
// units from the largest down (1h2min3s), or as human writes it under a
// minute.
func unitDuration(d time.Duration) string {
	if _, _, round := chart.DurationUnit(ms(d)); round || d <= 0 {
		return chart.DurationLabel(ms(d))
	}
	if d < time.Minute {
		return human(d)
	}
	d = d.Round(time.Second)
	var b strings.Builder
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{day, "d"}, {time.Hour, "h"}, {time.Minute, "min"}, {time.Second, "s"}} {
		if n := d / u.unit; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.unit
		}
	}
	return b.String()
}
