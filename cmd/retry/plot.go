package main

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/steadyhq/retry"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
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
		cumulative bool
		width      string
		height     string
	)
	cmd := &cobra.Command{
		Use:   "plot [flags] [POLICY...]",
		Short: "Draw the backoff curve of policies, with their jitter bands, as SVG or PNG",
		Long: `Draw the delay before each retry (or with --cumulative, the total wait) of one or more
policies: the median over --samples draws as a line, and the band between the least and the
greatest draw when the policy has jitter.

The first curve is the policy the flags describe (the OJS defaults when none is given). Each
POLICY argument adds a curve to compare: a preset name ("zizq"), a preset with parameters
("daycry:base=2s,multiplier=3"), a policy file, or inline JSON.

` + presetHelp(),
		Example: `  retry plot --attempts 12 -o docs/default-curve.svg
  retry plot --preset ojs --jitter full --attempts 10 ojs 'daycry:base=1s' -o compare.png
  retry plot --preset zizq --cumulative --log -o zizq.svg`,
		RunE: func(cmd *cobra.Command, args []string) error {
			args = append(args, compare...) // --compare is the same as an argument
			curves, err := plotCurves(&pf, e.stdin, args, len(args) > 0 && !pf.anyField(false) && pf.source == "" && pf.preset == "")
			if err != nil {
				return err
			}
			switch {
			case samples < 1 || samples > maxSamples:
				return usagef("flag --samples = %d: must be in [1, %d]", samples, maxSamples)
			case limit < 1 || limit > 1000:
				return usagef("flag --limit = %d: must be in [1, 1000]", limit)
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
			p, err := curvePlot(curves, limit, samples, seed, logY, cumulative)
			if err != nil {
				return err
			}
			if err := savePlot(p, w, h, format, output, e.stdout); err != nil {
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
	f.BoolVar(&logY, "log", false, "a logarithmic delay axis")
	f.BoolVar(&cumulative, "cumulative", false, "draw the total wait up to each retry instead of each delay")
	f.StringVar(&width, "width", "16cm", "image width (cm, mm, in or pt)")
	f.StringVar(&height, "height", "10cm", "image height")
	return cmd
}

// plotCurves returns the curves to draw: the flags' policy unless only
// arguments were given, then one per argument.
func plotCurves(pf *policyFlags, stdin io.Reader, args []string, argsOnly bool) ([]curve, error) {
	var curves []curve
	if !argsOnly {
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
		curves = append(curves, curve{label, p})
	}
	if len(curves) > len(plotutil.DefaultColors) {
		return nil, usagef("too many policies (%d): at most %d on one chart", len(curves), len(plotutil.DefaultColors))
	}
	return curves, nil
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
		return p.WithDefaults(), spec, nil
	}
	data, label, err := readSource(spec, stdin)
	if err != nil {
		if !strings.HasPrefix(strings.TrimSpace(spec), "{") {
			err = fmt.Errorf("policy %q: not a preset (%s), and not a readable file: %v", spec, strings.Join(presetNames(), ", "), unwrapPath(err))
		}
		return retry.Policy{}, "", usage(err)
	}
	p, err := retry.ParsePolicy(data)
	if err != nil {
		return p, "", usage(err)
	}
	if label == "policy" {
		label = describe(p)
		if len(label) > 40 {
			label = label[:37] + "..."
		}
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

// savePlot renders p to output ("-" for w) in format.
func savePlot(p *plot.Plot, width, height vg.Length, format, output string, w io.Writer) error {
	wt, err := p.WriterTo(width, height, format)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return err
	}
	if output == "-" {
		_, err = w.Write(buf.Bytes())
		return err
	}
	return os.WriteFile(output, buf.Bytes(), 0o644)
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

// timeUnit picks the unit that suits durations up to top.
func timeUnit(top time.Duration) (time.Duration, string) {
	switch {
	case top >= 3*day:
		return day, "days"
	case top >= 3*time.Hour:
		return time.Hour, "hours"
	case top >= 3*time.Minute:
		return time.Minute, "minutes"
	case top >= 3*time.Second:
		return time.Second, "seconds"
	}
	return time.Millisecond, "milliseconds"
}

// curvePlot draws the curves. With logY, it is a usage error when no value
// drawn is above 0, as a log axis cannot show one.
func curvePlot(curves []curve, limit, samples int, seed uint64, logY, cumulative bool) (*plot.Plot, error) {
	p := plot.New()
	what := "Delay before each retry"
	if cumulative {
		what = "Total wait up to each retry"
	}
	p.Title.Text = what
	p.X.Label.Text = "retry"
	p.Legend.Top = true
	p.Legend.Left = true
	scheds := make([]schedule, len(curves))
	var top float64 // milliseconds
	for i, c := range curves {
		scheds[i] = computeSchedule(c.policy, limit, samples, seed)
		for _, r := range scheds[i].rows {
			v := r.Delay
			if cumulative {
				v = r.Cumulative
			} else if r.Max != nil {
				v = *r.Max
			}
			top = max(top, v)
		}
	}
	if logY && !(top > 0) {
		return nil, usagef("flag --log: every delay drawn is 0 (an immediate strategy, or no retry), and a log axis cannot show 0: drop --log")
	}
	unit, name := timeUnit(fromMS(top))
	unitMS := ms(unit)
	p.Y.Label.Text = name
	if cumulative {
		p.Y.Label.Text += " (median)"
	}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	conv := func(v float64) float64 {
		y := v / unitMS
		if logY {
			y = max(y, 1e-3) // a log axis has no zero
		}
		return y
	}
	p.X.Tick.Marker = integerTicks{}
	for i, s := range scheds {
		col := plotutil.Color(i)
		var line, lo, hi plotter.XYs
		for _, r := range s.rows[1:] {
			x := float64(r.Retry)
			if cumulative {
				line = append(line, plotter.XY{X: x, Y: conv(r.Cumulative)})
				continue
			}
			line = append(line, plotter.XY{X: x, Y: conv(r.Delay)})
			if r.Min != nil {
				lo = append(lo, plotter.XY{X: x, Y: conv(*r.Min)})
				hi = append(hi, plotter.XY{X: x, Y: conv(*r.Max)})
			}
		}
		if len(line) == 0 {
			continue
		}
		if len(lo) > 1 {
			band := append(hi, reversed(lo)...)
			if poly, err := plotter.NewPolygon(band); err == nil {
				r, g, b, _ := col.RGBA()
				poly.Color = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 0x40}
				poly.LineStyle.Width = 0
				p.Add(poly)
			}
		}
		l, pts, err := plotter.NewLinePoints(line)
		if err != nil {
			continue
		}
		l.Color, pts.Color = col, col
		l.Width = vg.Points(1.5)
		pts.Radius = vg.Points(1.5)
		p.Add(l, pts)
		label := curves[i].label + ": " + summary(curves[i].policy)
		p.Legend.Add(label, l)
	}
	if logY && p.Y.Min == p.Y.Max {
		// One value only: the axis would span it ± 1, which may reach 0.
		p.Y.Min, p.Y.Max = p.Y.Min/2, p.Y.Max*2
	}
	return p, nil
}

// summary describes a policy's curve in a few words.
func summary(p retry.Policy) string {
	p = p.WithDefaults()
	var b strings.Builder
	b.WriteString(p.Backoff.String())
	switch p.Backoff {
	case retry.Exponential, retry.Polynomial:
		fmt.Fprintf(&b, " %s ×%g", human(p.InitialInterval), p.BackoffCoefficient)
	case retry.Constant, retry.Linear:
		fmt.Fprintf(&b, " %s", human(p.InitialInterval))
	}
	if p.Offset > 0 {
		fmt.Fprintf(&b, " +%s", human(p.Offset))
	}
	if p.Backoff != retry.Immediate && p.MaxInterval < 3650*day {
		fmt.Fprintf(&b, ", cap %s", human(p.MaxInterval))
	}
	switch j := p.Jitter; j.Kind {
	case retry.JitterNone:
		b.WriteString(", no jitter")
	case retry.JitterProportional, retry.JitterPercent:
		fmt.Fprintf(&b, ", jitter ±%g%%", 100*j.Factor)
	case retry.JitterAdditive:
		fmt.Fprintf(&b, ", jitter +%s·n", human(j.Amount))
	default:
		fmt.Fprintf(&b, ", %s jitter", j.Kind)
	}
	return b.String()
}

func reversed(xys plotter.XYs) plotter.XYs {
	out := make(plotter.XYs, len(xys))
	for i, v := range xys {
		out[len(xys)-1-i] = v
	}
	return out
}

// integerTicks labels whole numbers only.
type integerTicks struct{}

func (integerTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	out := ticks[:0]
	for _, t := range ticks {
		if t.Label != "" && t.Value != float64(int64(t.Value)) {
			t.Label = ""
		}
		out = append(out, t)
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
