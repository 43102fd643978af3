package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steadyhq/retry/bench/shedload"
)

func TestUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "plot format", args: []string{"--plot", "x.jpeg"}, want: "must end in .svg, .png or .pdf"},
		{name: "unknown server", args: []string{"--servers", "none,nginx"}, want: `no server "nginx"`},
		{name: "argument", args: []string{"now"}, want: `unexpected argument "now"`},
		{name: "unknown flag", args: []string{"--long"}, want: "flag provided but not defined"},
		{name: "replay of no file", args: []string{"--replay", "testdata/none.json"}, want: `flag --replay = "testdata/none.json"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

func TestPick(t *testing.T) {
	tests := []struct {
		grpc  bool
		names string
		want  string
	}{
		{names: "", want: "none,failsafe,ours,ours-default"},
		{grpc: true, names: "", want: "none,failsafe,ours,ours-default"},
		{names: "none", want: "none"},
		{grpc: true, names: "ours,none", want: "ours,none"},
	}
	for _, tt := range tests {
		t.Run(tt.names, func(t *testing.T) {
			got, err := pick(tt.grpc, tt.names)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, g := range got {
				names = append(names, g.Name)
			}
			if g := strings.Join(names, ","); g != tt.want {
				t.Errorf("pick = %s, want %s", g, tt.want)
			}
		})
	}
}

// results are two made-up results of the short profile.
func results() []*shedload.Result {
	never, half := (*float64)(nil), 0.5
	p := shedload.Short()
	buckets := make([]shedload.Bucket, int(p.Duration()/shedload.Tick))
	for k := range buckets {
		buckets[k] = shedload.Bucket{AtS: float64(k) / 10, Offered: 10 + k%5, Succeeded: 5 + k%7}
	}
	return []*shedload.Result{
		{Server: "none", Capacity: 200, GoodputShare: 0.123, P50MS: 999, P99MS: 1020, UnloadedP99MS: 21, Amplification: 1, RecoveryS: never, Buckets: buckets},
		{Server: "ours", Capacity: 200, GoodputShare: 0.95, P50MS: 30, P99MS: 41, UnloadedP99MS: 21, Amplification: 1.0123, Retries: 7, EarlyRetries: 2, RecoveryS: &half, Buckets: buckets},
	}
}

func TestTable(t *testing.T) {
	var out bytes.Buffer
	writeTable(&out, shedload.Short(), results())
	for _, want := range []string{
		"4 workers, 20ms a request (capacity 200/s)",
		"none      12%",
		"ours      95%         30 ms         41 ms         21 ms         1.012×        7              2     0.5 s",
		"never",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestPlot(t *testing.T) {
	file := filepath.Join(t.TempDir(), "goodput.svg")
	if err := savePlot(shedload.Short(), results(), file); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "no shedding", "shed, Initial: 4", "requests offered", "capacity", "overload"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the plot lacks %q", want)
		}
	}
}
