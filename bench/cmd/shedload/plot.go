package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/steadyhq/retry/bench/shedload"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotFormats are the extensions --plot accepts.
var plotFormats = map[string]bool{".svg": true, ".png": true, ".pdf": true}

// palette is the servers' colours (Okabe and Ito's, told apart in every
// common colour blindness), as in the retry command's charts.
var palette = []color.Color{
	color.RGBA{0xd5, 0x5e, 0x00, 0xff}, // vermillion
	color.RGBA{0x00, 0x72, 0xb2, 0xff}, // blue
	color.RGBA{0x00, 0x9e, 0x73, 0xff}, // bluish green
	color.RGBA{0xcc, 0x79, 0xa7, 0xff}, // reddish purple
}

// smooth is the number of ticks each point of the plot averages.
const smooth = 3

// legendNames are the names the picture gives the servers, as the tables
// of docs/shedding.md do; a server not listed goes by its own name.
var legendNames = map[string]string{
	"none":         "no shedding",
	"failsafe":     "failsafe-go",
	"ours":         "shed, Initial: 4",
	"ours-default": "shed, defaults",
}

func legendName(server string) string {
	if n, ok := legendNames[server]; ok {
		return n
	}
	return server
}

// savePlot draws, to file, two panels over the same time axis: the
// goodput of each result, with the load offered and the server's capacity,
// and the p99 latency of the requests each server admitted, on a log
// scale against the unloaded p99; the overload is shaded in both. One
// legend for both stands to the right of them, clear of every line, and
// each panel's value axis spans its data.
func savePlot(p shedload.Profile, results []*shedload.Result, file string) error {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	legend := plot.NewLegend()
	legend.Top, legend.Left, legend.Padding = true, true, vg.Points(4)
	good, servers := goodputPanel(p, results, &legend)
	lat := latencyPanel(p, results, &legend)
	for i, r := range results {
		if i < len(servers) && servers[i] != nil {
			legend.Add(legendName(r.Server), servers[i])
		}
	}
	const w, h, legendW = 28 * vg.Centimeter, 22 * vg.Centimeter, 8 * vg.Centimeter
	c, err := draw.NewFormattedCanvas(w, h, strings.TrimPrefix(filepath.Ext(file), "."))
	if err != nil {
		return err
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Centimeter, PadTop: vg.Millimeter, PadBottom: vg.Millimeter,
		PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
	panels := [][]*plot.Plot{{good}, {lat}}
	canvases := plot.Align(panels, tiles, draw.Crop(dc, 0, -legendW, 0, 0))
	good.Draw(canvases[0][0])
	lat.Draw(canvases[1][0])
	legend.YOffs = -vg.Centimeter // level with the top panel's data, below its title
	legend.Draw(draw.Crop(dc, w-legendW+vg.Millimeter*3, 0, 0, 0))
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// shade adds the overload, shaded from bottom to top, to pl, and to the
// legend when one is given.
func shade(pl *plot.Plot, p shedload.Profile, bottom, top float64, legend *plot.Legend) {
	a, b := p.Unloaded.Seconds(), (p.Unloaded + p.Overload).Seconds()
	if poly, err := plotter.NewPolygon(plotter.XYs{{X: a, Y: bottom}, {X: b, Y: bottom}, {X: b, Y: top}, {X: a, Y: top}}); err == nil {
		poly.Color = color.Gray{Y: 0xe8}
		poly.LineStyle.Width = 0
		pl.Add(poly)
		if legend != nil {
			legend.Add("overload", poly)
		}
	}
}

// goodputPanel draws the goodput of each result over time, adds the load
// offered and the capacity to legend, and returns the panel and each
// result's line.
func goodputPanel(p shedload.Profile, results []*shedload.Result, legend *plot.Legend) (*plot.Plot, []*plotter.Line) {
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("Goodput through %.0f× overload, %d workers × %s (capacity %.0f/s)",
		p.OverloadFactor, p.Workers, p.Service, p.Capacity())
	pl.X.Label.Text = "seconds into the run"
	pl.Y.Label.Text = fmt.Sprintf("successes per second (%d ms mean)", smooth*shedload.Tick.Milliseconds())
	perSecond := 1 / (float64(smooth) * shedload.Tick.Seconds()) // a sum over smooth ticks, per second
	peak := p.Capacity()
	series := func(r *shedload.Result, v func(shedload.Bucket) int) plotter.XYs {
		var xys plotter.XYs
		for k := 0; k+smooth <= len(r.Buckets); k++ {
			sum := 0
			for _, x := range r.Buckets[k : k+smooth] {
				sum += v(x)
			}
			mid := r.Buckets[k].AtS + float64(smooth)*shedload.Tick.Seconds()/2
			y := float64(sum) * perSecond
			peak = max(peak, y)
			xys = append(xys, plotter.XY{X: mid, Y: y})
		}
		return xys
	}
	var offered plotter.XYs
	if len(results) > 0 {
		offered = series(results[0], func(x shedload.Bucket) int { return x.Offered })
	}
	lines := make([]*plotter.Line, len(results))
	for i, r := range results {
		if l, err := plotter.NewLine(series(r, func(x shedload.Bucket) int { return x.Succeeded })); err == nil {
			l.Color, l.Width = palette[i%len(palette)], vg.Points(1.8)
			lines[i] = l
		}
	}
	top := peak * 1.05
	shade(pl, p, 0, top, legend)
	if l, err := plotter.NewLine(offered); err == nil && len(offered) > 0 {
		l.Color, l.Width = color.Gray{Y: 0x70}, vg.Points(1)
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(2.5)}
		pl.Add(l)
		legend.Add("requests offered", l)
	}
	if capLine, err := plotter.NewLine(plotter.XYs{{X: 0, Y: p.Capacity()}, {X: p.Duration().Seconds(), Y: p.Capacity()}}); err == nil {
		capLine.Color, capLine.Width = color.Black, vg.Points(0.6)
		capLine.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		pl.Add(capLine)
		legend.Add("capacity", capLine)
	}
	for _, l := range lines {
		if l != nil {
			pl.Add(l)
		}
	}
	pl.X.Min, pl.X.Max = 0, p.Duration().Seconds()
	pl.Y.Min, pl.Y.Max = 0, top
	return pl, lines
}

// latencyPanel draws the p99 latency of the requests each server
// admitted, tick by tick, on a log scale from the decade below the lowest
// to the decade above the highest, with twice the unloaded p99 of the
// first result that has one, which it adds to legend.
func latencyPanel(p shedload.Profile, results []*shedload.Result, legend *plot.Legend) *plot.Plot {
	pl := plot.New()
	pl.Title.Text = "p99 latency of the requests each server admitted, per 100 ms"
	pl.X.Label.Text = "seconds into the run"
	pl.Y.Label.Text = "milliseconds (log scale)"
	pl.Y.Scale = plot.LogScale{}
	pl.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var twice float64
	for _, r := range results {
		if r.UnloadedP99MS > 0 {
			twice = 2 * r.UnloadedP99MS
			break
		}
	}
	series := make([]plotter.XYs, len(results))
	lo, hi := math.Inf(1), math.Inf(-1)
	if twice > 0 {
		lo, hi = twice, twice
	}
	for i, r := range results {
		for _, b := range r.Buckets {
			if b.P99MS > 0 {
				series[i] = append(series[i], plotter.XY{X: b.AtS + shedload.Tick.Seconds()/2, Y: b.P99MS})
				lo, hi = min(lo, b.P99MS), max(hi, b.P99MS)
			}
		}
	}
	if math.IsInf(lo, 1) { // nothing to draw: one decade
		lo, hi = 1, 10
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	shade(pl, p, lo, hi, nil)
	if twice > 0 {
		if l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: twice}, {X: p.Duration().Seconds(), Y: twice}}); err == nil {
			// Dash-dot, told apart from the capacity's dots in the legend.
			l.Color, l.Width = color.Black, vg.Points(0.6)
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)}
			pl.Add(l)
			legend.Add(fmt.Sprintf("twice the unloaded p99 (%.0f ms)", twice), l)
		}
	}
	for i, xys := range series {
		if len(xys) == 0 {
			continue
		}
		if l, err := plotter.NewLine(xys); err == nil {
			l.Color, l.Width = palette[i%len(palette)], vg.Points(1.4)
			pl.Add(l)
		}
	}
	pl.X.Min, pl.X.Max = 0, p.Duration().Seconds()
	pl.Y.Min, pl.Y.Max = lo, hi
	return pl
}
