package main

import (
	"fmt"
	"html"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/steadyhq/retry/cmd/retry/internal/chart"
	"gonum.org/v1/plot/vg"
)

// simFlagsOf parses sim's flags.
func simFlagsOf(t *testing.T, args ...string) *simFlags {
	t.Helper()
	f := &simFlags{}
	if err := f.command(&env{}).ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// simOutputOf runs `retry sim args...` in-process and returns what it
// prints.
func simOutputOf(t *testing.T, args ...string) *simOutput {
	t.Helper()
	f := simFlagsOf(t, args...)
	mode, err := f.mode()
	if err != nil {
		t.Fatal(err)
	}
	out, err := mode.run(&env{}, f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// loadChart returns the chart `retry sim args... --plot` draws.
func loadChart(t *testing.T, args ...string) *chart.Chart {
	t.Helper()
	ch, err := simOutputOf(t, append(args, "--plot", "load.svg")...).chart()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// chartTexts returns the texts of a chart drawn as SVG.
func chartTexts(t *testing.T, ch *chart.Chart) []string {
	t.Helper()
	svg, err := ch.Render(20*vg.Centimeter, 11*vg.Centimeter, "svg")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range regexp.MustCompile(`>([^<]+)</text>`).FindAllStringSubmatch(string(svg), -1) {
		texts = append(texts, html.UnescapeString(m[1]))
	}
	return texts
}

// TestLoadChart: with a retry budget, the load chart draws beside the run
// the same run without one, each panel headed with its hits per request
// in the outage; without a budget, one panel. Its legend names every
// series and the outage.
func TestLoadChart(t *testing.T) {
	args := []string{"--rate", "20", "--duration", "40s", "--outage", "10s:20s"}
	two := chartTexts(t, loadChart(t, args...))
	one := chartTexts(t, loadChart(t, append(args, "--budget", "off")...))
	for _, w := range []string{"requests arriving", "server hits", "failed hits", "calls given up", "outage", "per second", "time"} {
		if !slices.Contains(two, w) || !slices.Contains(one, w) {
			t.Errorf("no text %q in both charts:\n%q\n%q", w, two, one)
		}
	}
	headings := func(texts []string) (n int) {
		for _, tx := range texts {
			if strings.HasPrefix(tx, "budget ") && strings.HasSuffix(tx, " hits per request in the outage") {
				n++
			}
		}
		return n
	}
	if headings(two) != 2 || headings(one) != 0 {
		t.Errorf("%d and %d panel headings, want 2 with a budget and none without", headings(two), headings(one))
	}
}

// TestLatencyChart: the chart of sim --hedge reads "calls slower than" on
// a log axis of shares, and marks each run's p99.9.
func TestLatencyChart(t *testing.T) {
	rows := simulated(t).hedge
	texts := chartTexts(t, latencyChart(rows))
	for _, w := range []string{"calls slower than", "latency", "100%", "0.1%", "no hedging", "hedging at p95", "p99.9: 0.1% of calls slower",
		fmt.Sprintf("%.1fms", rows[0].P999), fmt.Sprintf("%.1fms", rows[1].P999)} {
		if !slices.Contains(texts, w) {
			t.Errorf("no text %q in the chart: %q", w, texts)
		}
	}
}
