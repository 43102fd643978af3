package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/vg"
)

// The README, the guides and their pictures, from this package's
// directory.
const (
	readmePath = "../../README.md"
	docsDir    = "../../docs"
)

// rerunHedge asks -update to run sim --hedge again and record it.
var rerunHedge = flag.Bool("rerun-hedge", false, "with -update: run sim --hedge again (about 10 s, wall time) and record it for docs/hedge.svg")

// picture is one of README's pictures: the command that draws it, with
// its output in docs/, the guide in docs/ that tells of it, and the
// fragments of the command that guide gives, which together are the
// command.
type picture struct {
	file  string
	args  []string
	guide string
	frags []string
}

var pictures = []picture{
	{file: "curve.svg", args: []string{"plot", "--attempts", "11", "-o", "docs/curve.svg", "ojs", "zizq"},
		guide: "cli.md", frags: []string{"retry plot --attempts 11 -o docs/curve.svg ojs zizq"}},
	{file: "outage.svg", args: []string{"sim", "--rate", "100", "--duration", "2m", "--outage", "30s:60s", "--plot", "docs/outage.svg"},
		guide: "simulator.md", frags: []string{"retry sim --rate 100 --duration 2m --outage 30s:60s", "--plot docs/outage.svg"}},
	{file: "hedge.svg", guide: "hedging.md", frags: []string{"retry sim --hedge", "--plot docs/hedge.svg"}},
	{file: "metastable.svg", args: []string{"sim", "--metastable", "--plot", "docs/metastable.svg"},
		guide: "outages.md", frags: []string{"retry sim --metastable --plot docs/metastable.svg"}},
}

// drawnElsewhere are pictures in docs/ that another module's command
// draws and tests: shedding.svg, bench/cmd/shedload's (its TestPicture).
var drawnElsewhere = map[string]bool{"shedding.svg": true}

// TestPictures: each picture in docs/ is, byte for byte, what its
// guide's command for it draws now: plot, the load simulation and sim
// --metastable run in-process with the guide's flags (deterministic under
// their default seed); sim --hedge runs in wall time, so its picture is
// drawn from a recorded run (testdata/hedge-run.json.gz) by the code
// --plot draws with. A picture in docs/ without a command here, a command
// its guide does not give, or a picture its guide or README does not show,
// fails too. With -update, the pictures are drawn again; with
// -rerun-hedge too, sim --hedge runs again first and its run is recorded
// (its table logged for docs/hedging.md: run it with -v on a quiet
// machine).
func TestPictures(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(docsDir, "*.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if drawnElsewhere[filepath.Base(f)] {
			continue
		}
		if !slices.ContainsFunc(pictures, func(p picture) bool { return p.file == filepath.Base(f) }) {
			t.Errorf("docs/%s: no command draws it here", filepath.Base(f))
		}
	}
	for _, p := range pictures {
		t.Run(p.file, func(t *testing.T) {
			guide, err := os.ReadFile(filepath.Join(docsDir, p.guide))
			if err != nil {
				t.Fatal(err)
			}
			for _, frag := range p.frags {
				if !bytes.Contains(guide, []byte(frag)) {
					t.Errorf("docs/%s does not give %q", p.guide, frag)
				}
			}
			if !bytes.Contains(guide, []byte("]("+p.file+")")) {
				t.Errorf("docs/%s does not show %s", p.guide, p.file)
			}
			if !bytes.Contains(readme, []byte("](docs/"+p.file+")")) {
				t.Errorf("README does not show docs/%s", p.file)
			}
			var got []byte
			if p.file == "hedge.svg" {
				got = hedgePicture(t)
			} else {
				got = commandPicture(t, p.args)
			}
			if want, same := matchFile(t, filepath.Join(docsDir, p.file), got); !same {
				t.Errorf("docs/%s is not what `retry %s` draws (%d bytes, drawn %d): go test -run TestPictures -update draws it again",
					p.file, strings.Join(p.args, " "), len(want), len(got))
			}
		})
	}
}

// commandPicture runs the command in-process, its output file moved from
// docs/ to a temporary directory, and returns the picture it wrote.
func commandPicture(t *testing.T, args []string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "picture.svg")
	args = slices.Clone(args)
	for i, a := range args {
		if strings.HasPrefix(a, "docs/") {
			args[i] = out
		}
	}
	_, stderr, code := cli(t, "", args...)
	if code != 0 {
		t.Fatalf("retry %s: status %d: %s", strings.Join(args, " "), code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hedgeRecording is a run of sim --hedge: each row's figures and its
// latencies in nanoseconds, sorted.
type hedgeRecording struct {
	Rows []struct {
		hedgeRow
		Latencies []time.Duration `json:"latencies_ns"`
	} `json:"rows"`
}

const hedgeRecordingPath = "testdata/hedge-run.json.gz"

// readmeHedge is the setup runHedgeSim runs with its default seed.
func readmeHedge() *hedgeSim {
	return &hedgeSim{requests: 20000, workers: 200, base: 10 * time.Millisecond, slowP: 0.01, slowX: 100, pct: 95, seed: 1}
}

// hedgePicture draws the recorded run of sim --hedge as --plot does; with
// -update and -rerun-hedge, it runs the simulation again first and records
// it.
func hedgePicture(t *testing.T) []byte {
	t.Helper()
	s := readmeHedge()
	if *update && *rerunHedge {
		res, err := s.run()
		if err != nil {
			t.Fatal(err)
		}
		var table bytes.Buffer
		res.writeText(&table, s)
		t.Logf("sim --hedge, recorded in %s:\n%s", hedgeRecordingPath, table.String())
		var rec hedgeRecording
		for _, row := range res.Rows {
			rec.Rows = append(rec.Rows, struct {
				hedgeRow
				Latencies []time.Duration `json:"latencies_ns"`
			}{row, row.lat})
		}
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if err := json.NewEncoder(zw).Encode(rec); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(hedgeRecordingPath, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := readHedgeRecording(t)
	var out bytes.Buffer
	if err := saveChart(res.latencyChart(s), 20*vg.Centimeter, 11*vg.Centimeter, "svg", "-", &out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// readHedgeRecording reads the recorded run of sim --hedge.
func readHedgeRecording(t *testing.T) *hedgeResult {
	t.Helper()
	f, err := os.Open(hedgeRecordingPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var rec hedgeRecording
	if err := json.NewDecoder(zr).Decode(&rec); err != nil {
		t.Fatal(err)
	}
	res := &hedgeResult{}
	for _, r := range rec.Rows {
		if !slices.IsSorted(r.Latencies) || len(r.Latencies) != readmeHedge().requests {
			t.Fatalf("%s: row %q: %d latencies, sorted %v; want %d, sorted", hedgeRecordingPath, r.Mode, len(r.Latencies),
				slices.IsSorted(r.Latencies), readmeHedge().requests)
		}
		row := r.hedgeRow
		row.lat = r.Latencies
		res.Rows = append(res.Rows, row)
	}
	if len(res.Rows) != 2 {
		t.Fatalf("%s: %d rows, want 2", hedgeRecordingPath, len(res.Rows))
	}
	return res
}
