package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/steadyhq/retry/bench/shedload"
	"gonum.org/v1/plot"
)

// The README, the guide that tells of the runs, its picture, and the
// recorded runs it quotes: the full form over HTTP (`--json --plot
// docs/shedding.svg`) and over gRPC (`--grpc --json`), gzipped.
const (
	readmePath   = "../../../README.md"
	guidePath    = "../../../docs/shedding.md"
	picturePath  = "../../../docs/shedding.svg"
	recordedHTTP = "testdata/http-run.json.gz"
	recordedGRPC = "testdata/grpc-run.json.gz"
)

// recorded returns the results of a recorded run.
func recorded(t *testing.T, path string) []*shedload.Result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	var rs []*shedload.Result
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestPicture: docs/shedding.svg is, byte for byte, what --plot draws from
// the recorded run over HTTP; docs/shedding.md gives the command and shows
// it, and README shows it.
func TestPicture(t *testing.T) {
	out := filepath.Join(t.TempDir(), "shedding.svg")
	if err := savePlot(shedload.Full(), recorded(t, recordedHTTP), out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(picturePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/shedding.svg (%d bytes) is not what --plot draws from %s (%d bytes)", len(want), recordedHTTP, len(got))
	}
	guide, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{"go run ./bench/cmd/shedload --plot docs/shedding.svg", "](shedding.svg)", "go run ./bench/cmd/shedload --grpc"} {
		if !bytes.Contains(guide, []byte(frag)) {
			t.Errorf("docs/shedding.md does not give %q", frag)
		}
	}
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte("](docs/shedding.svg)")) {
		t.Error("README does not show docs/shedding.svg")
	}
}

// guideNames are the names docs/shedding.md's tables give the servers.
var guideNames = map[string]string{
	"none":         "no shedding",
	"failsafe":     "failsafe-go",
	"ours":         "`shed`, `Initial: 4`",
	"ours-default": "`shed`, defaults",
}

// TestGuideTables: each row of docs/shedding.md's tables over HTTP and
// gRPC holds the figures of the recorded run, as the table the command
// prints rounds them.
func TestGuideTables(t *testing.T) {
	guide, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		wire, after, path string
	}{
		{wire: "http", after: "Over HTTP (`go run ./bench/cmd/shedload --plot docs/shedding.svg`", path: recordedHTTP},
		{wire: "grpc", after: "Over gRPC (`go run ./bench/cmd/shedload --grpc`", path: recordedGRPC},
	}
	for _, tt := range tests {
		t.Run(tt.wire, func(t *testing.T) {
			_, table, ok := strings.Cut(string(guide), tt.after)
			if !ok {
				t.Fatalf("docs/shedding.md has no table after %q", tt.after)
			}
			table, _, _ = strings.Cut(table, "\n\n\n")
			if i := strings.Index(table, "| server"); i >= 0 {
				table = table[i:]
			}
			table, _, _ = strings.Cut(table, "\n\n")
			for _, r := range recorded(t, tt.path) {
				rec := "never"
				if r.RecoveryS != nil {
					rec = fmt.Sprintf("%.1f s", *r.RecoveryS)
				}
				row := fmt.Sprintf("| %s | %.0f%% | %.0f / %.0f ms | %.3f× | %d (%d) | %s |", guideNames[r.Server],
					100*r.GoodputShare, r.P50MS, r.P99MS, r.Amplification, r.Retries, r.EarlyRetries, rec)
				if !strings.Contains(table, row) {
					t.Errorf("docs/shedding.md's table over %s lacks the row %s:\n%s", tt.wire, row, table)
				}
			}
		})
	}
}

// TestPictureLegible: the picture names the servers as the guide's tables
// do, its legend stands right of both panels' data, clear of every line,
// and each value axis spans its data: goodput up to 10% over its peak,
// latency from the decade below its lowest p99 to the decade above its
// highest.
func TestPictureLegible(t *testing.T) {
	results := recorded(t, recordedHTTP)
	out := filepath.Join(t.TempDir(), "shedding.svg")
	if err := savePlot(shedload.Full(), results, out); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]float64{} // text → its x
	for _, m := range regexp.MustCompile(`(?s)<text x="([-0-9.]+)"[^>]*>([^<]*)</text>`).FindAllSubmatch(svg, -1) {
		x, _ := strconv.ParseFloat(string(m[1]), 64)
		texts[string(m[2])] = x
	}
	// The data areas end where the x axes do: the longest thin
	// horizontal lines.
	right := 0.0
	for _, m := range regexp.MustCompile(`<path d="M([0-9.]+),([0-9.]+)L([0-9.]+),([0-9.]+)" style="fill:none;stroke:#000000;stroke-width:0.5" />`).FindAllSubmatch(svg, -1) {
		x1, _ := strconv.ParseFloat(string(m[1]), 64)
		x2, _ := strconv.ParseFloat(string(m[3]), 64)
		if string(m[2]) == string(m[4]) && x2-x1 > 300 {
			right = max(right, x2)
		}
	}
	if right == 0 {
		t.Fatal("found no x axis in the picture")
	}
	for _, r := range results {
		name := strings.Trim(strings.NewReplacer("`", "").Replace(guideNames[r.Server]), " ")
		x, ok := texts[legendName(r.Server)]
		switch {
		case legendName(r.Server) != name:
			t.Errorf("the legend calls %q %q, the guide's tables %q", r.Server, legendName(r.Server), name)
		case !ok:
			t.Errorf("the legend lacks %q (the guide's %q)", legendName(r.Server), name)
		case x <= right:
			t.Errorf("the legend's %q starts at x = %.1f, inside the data, which ends at %.1f", legendName(r.Server), x, right)
		}
		if _, ok := texts[r.Server]; ok {
			t.Errorf("the picture names a server %q, its internal name", r.Server)
		}
	}
	var legend plot.Legend
	good, _ := goodputPanel(shedload.Full(), results, &legend)
	peak := 0.0
	for _, r := range results {
		for _, b := range r.Buckets {
			peak = max(peak, float64(max(b.Offered, b.Succeeded))/shedload.Tick.Seconds())
		}
	}
	if good.Y.Max > 1.1*peak {
		t.Errorf("goodput axis up to %.0f, over 1.1 × the peak of %.0f a second", good.Y.Max, peak)
	}
	lat := latencyPanel(shedload.Full(), results, &legend)
	lo, hi := math.Inf(1), 0.0
	for _, r := range results {
		for _, b := range r.Buckets {
			if b.P99MS > 0 {
				lo, hi = min(lo, b.P99MS), max(hi, b.P99MS)
			}
		}
	}
	if lat.Y.Min < lo/10 || lat.Y.Max > hi*10 {
		t.Errorf("latency axis %g to %g ms, for p99s from %g to %g: more than a decade past them", lat.Y.Min, lat.Y.Max, lo, hi)
	}
}
