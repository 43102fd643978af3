package main

import (
	"fmt"
	"image/color"

	"github.com/steadyhq/retry/bench/shedload"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
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

// savePlot draws the goodput of each result over time, with the load
// offered and the server's capacity, the overload shaded, to file.
func savePlot(p shedload.Profile, results []*shedload.Result, file string) error {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("Goodput through %.0f× overload, %d workers × %s (capacity %.0f/s)",
		p.OverloadFactor, p.Workers, p.Service, p.Capacity())
	pl.X.Label.Text = "seconds into the run"
	pl.Y.Label.Text = fmt.Sprintf("successful requests per second (%d ms mean)", smooth*shedload.Tick.Milliseconds())
	pl.Legend.Top = true
	top := p.OverloadFactor * p.Capacity() * 1.05
	a, b := p.Unloaded.Seconds(), (p.Unloaded + p.Overload).Seconds()
	if shade, err := plotter.NewPolygon(plotter.XYs{{X: a, Y: 0}, {X: b, Y: 0}, {X: b, Y: top}, {X: a, Y: top}}); err == nil {
		shade.Color = color.Gray{Y: 0xe8}
		shade.LineStyle.Width = 0
		pl.Add(shade)
		pl.Legend.Add("overload", shade)
	}
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
	capLine, err := plotter.NewLine(plotter.XYs{{X: 0, Y: p.Capacity()}, {X: p.Duration().Seconds(), Y: p.Capacity()}})
	if err == nil {
		capLine.Color, capLine.Width = color.Black, vg.Points(0.6)
		capLine.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		pl.Add(capLine)
		pl.Legend.Add("capacity", capLine)
	}
	for i, r := range results {
		l, err := plotter.NewLine(series(r, func(x shedload.Bucket) int { return x.Succeeded }))
		if err != nil {
			return err
		}
		l.Color, l.Width = palette[i%len(palette)], vg.Points(1.8)
		pl.Add(l)
		pl.Legend.Add(r.Server, l)
	}
	pl.X.Min, pl.X.Max = 0, p.Duration().Seconds()
	pl.Y.Min, pl.Y.Max = 0, top
	return pl.Save(20*vg.Centimeter, 11*vg.Centimeter, file)
}
