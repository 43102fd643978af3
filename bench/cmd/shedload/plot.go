package main

import (
	"fmt"
	"image/color"
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

// savePlot draws, to file, two panels over the same time axis: the
// goodput of each result, with the load offered and the server's capacity,
// and the p99 latency of the requests each server admitted, on a log
// scale against the unloaded p99; the overload is shaded in both.
func savePlot(p shedload.Profile, results []*shedload.Result, file string) error {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	good, lat := goodputPanel(p, results), latencyPanel(p, results)
	const w, h = 20 * vg.Centimeter, 22 * vg.Centimeter
	c, err := draw.NewFormattedCanvas(w, h, strings.TrimPrefix(filepath.Ext(file), "."))
	if err != nil {
		return err
	}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Centimeter, PadTop: vg.Millimeter, PadBottom: vg.Millimeter,
		PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
	panels := [][]*plot.Plot{{good}, {lat}}
	canvases := plot.Align(panels, tiles, draw.New(c))
	good.Draw(canvases[0][0])
	lat.Draw(canvases[1][0])
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

// shade adds the overload, shaded from 0 to top, to pl.
func shade(pl *plot.Plot, p shedload.Profile, bottom, top float64, legend bool) {
	a, b := p.Unloaded.Seconds(), (p.Unloaded + p.Overload).Seconds()
	if poly, err := plotter.NewPolygon(plotter.XYs{{X: a, Y: bottom}, {X: b, Y: bottom}, {X: b, Y: top}, {X: a, Y: top}}); err == nil {
		poly.Color = color.Gray{Y: 0xe8}
		poly.LineStyle.Width = 0
		pl.Add(poly)
		if legend {
			pl.Legend.Add("overload", poly)
		}
	}
}

// goodputPanel draws the goodput of each result over time.
func goodputPanel(p shedload.Profile, results []*shedload.Result) *plot.Plot {
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("Goodput through %.0f× overload, %d workers × %s (capacity %.0f/s)",
		p.OverloadFactor, p.Workers, p.Service, p.Capacity())
	pl.X.Label.Text = "seconds into the run"
	pl.Y.Label.Text = fmt.Sprintf("successes per second (%d ms mean)", smooth*shedload.Tick.Milliseconds())
	pl.Legend.Top = true
	peak := p.OverloadFactor * p.Capacity()
	top := peak * 1.6 // room for the legend above the load offered
	shade(pl, p, 0, peak*1.05, true)
	perSecond := 1 / (float64(smooth) * shedload.Tick.Seconds()) // a sum over smooth ticks, per second
	series := func(r *shedload.Result, v func(shedload.Bucket) int) plotter.XYs {
		var xys plotter.XYs
		for k := 0; k+smooth <= len(r.Buckets); k++ {
			sum := 0
			for _, x := range r.Buckets[k : k+smooth] {
				sum += v(x)
			}
			mid := r.Buckets[k].AtS + float64(smooth)*shedload.Tick.Seconds()/2
			xys = append(xys, plotter.XY{X: mid, Y: float64(sum) * perSecond})
		}
		return xys
	}
	if len(results) > 0 {
		if l, err := plotter.NewLine(series(results[0], func(x shedload.Bucket) int { return x.Offered })); err == nil {
			l.Color, l.Width = color.Gray{Y: 0x70}, vg.Points(1)
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2.5)}
			pl.Add(l)
			pl.Legend.Add("requests offered", l)
		}
	}
	if capLine, err := plotter.NewLine(plotter.XYs{{X: 0, Y: p.Capacity()}, {X: p.Duration().Seconds(), Y: p.Capacity()}}); err == nil {
		capLine.Color, capLine.Width = color.Black, vg.Points(0.6)
		capLine.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		pl.Add(capLine)
		pl.Legend.Add("capacity", capLine)
	}
	for i, r := range results {
		if l, err := plotter.NewLine(series(r, func(x shedload.Bucket) int { return x.Succeeded })); err == nil {
			l.Color, l.Width = palette[i%len(palette)], vg.Points(1.8)
			pl.Add(l)
			pl.Legend.Add(r.Server, l)
		}
	}
	pl.X.Min, pl.X.Max = 0, p.Duration().Seconds()
	pl.Y.Min, pl.Y.Max = 0, top
	return pl
}

// latencyPanel draws the p99 latency of the requests each server
// admitted, tick by tick, on a log scale, with twice the unloaded p99 of
// the first result that has one.
func latencyPanel(p shedload.Profile, results []*shedload.Result) *plot.Plot {
	pl := plot.New()
	pl.Title.Text = "p99 latency of the requests each server admitted, per 100 ms"
	pl.X.Label.Text = "seconds into the run"
	pl.Y.Label.Text = "milliseconds (log scale)"
	pl.Y.Scale = plot.LogScale{}
	pl.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	// The legend sits low, below every latency a loopback server shows.
	lo, hi := 0.5, 10000.0
	shade(pl, p, lo, hi, false)
	for _, r := range results {
		if r.UnloadedP99MS > 0 {
			twice := 2 * r.UnloadedP99MS
			if l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: twice}, {X: p.Duration().Seconds(), Y: twice}}); err == nil {
				l.Color, l.Width = color.Black, vg.Points(0.6)
				l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
				pl.Add(l)
				pl.Legend.Add(fmt.Sprintf("twice the unloaded p99 (%.0f ms)", twice), l)
			}
			break
		}
	}
	for i, r := range results {
		var xys plotter.XYs
		for _, b := range r.Buckets {
			if b.P99MS > 0 {
				xys = append(xys, plotter.XY{X: b.AtS + shedload.Tick.Seconds()/2, Y: min(max(b.P99MS, lo), hi)})
			}
		}
		if len(xys) == 0 {
			continue
		}
		if l, err := plotter.NewLine(xys); err == nil {
			l.Color, l.Width = palette[i%len(palette)], vg.Points(1.4)
			pl.Add(l)
			pl.Legend.Add(r.Server, l)
		}
	}
	pl.X.Min, pl.X.Max = 0, p.Duration().Seconds()
	pl.Y.Min, pl.Y.Max = lo, hi
	return pl
}
