package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steadyhq/retry/bench/shedload"
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
