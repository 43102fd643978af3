package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
)

// TestFleetRecovers is the test README and docs/simulator.md show: a
// user's assertion that a configuration recovers from a fault at a fleet
// size.
func TestFleetRecovers(t *testing.T) {
	rep, err := sim.Run(sim.Scenario{
		Duration: 90 * time.Second,
		Load:     sim.Load{Rate: 70}, // requests a second, the fleet's, Poisson
		Service: sim.Service{
			Workers:     10,
			ServiceTime: sim.Spread(100*time.Millisecond, 0.1),
			QueueLength: 200,
			Network:     sim.Fixed(5 * time.Millisecond),
			// Half the workers gone for 10 s.
			Faults: []sim.Fault{{Start: 30 * time.Second, Length: 10 * time.Second, Capacity: 0.5}},
		},
		Fleet: sim.Fleet{Clients: 200, Options: func(sim.Client) []retry.Option {
			return []retry.Option{retry.WithAttemptTimeout(time.Second)}
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Total; !f.Recovered || f.Recovery > 20*time.Second {
		t.Errorf("recovered %v after %v, want within 20s of the fault's end", f.Recovered, f.Recovery)
	}
}

// TestDocsShowFleetTest: README and docs/simulator.md show
// TestFleetRecovers as it is here, word for word, at the end of a Go file
// of a package service_test (which the docs' check of Go blocks
// compiles).
func TestDocsShowFleetTest(t *testing.T) {
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, fn, _ := strings.Cut(string(src), "\nfunc TestFleetRecovers(")
	fn, _, _ = strings.Cut(fn, "\n}\n")
	fn = "func TestFleetRecovers(" + fn + "\n}\n"
	for _, doc := range []string{"../README.md", filepath.Join("..", "docs", "simulator.md")} {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		_, block, _ := strings.Cut(string(text), "```go\npackage service_test\n")
		block, _, _ = strings.Cut(block, "```")
		if !strings.HasSuffix(block, "\n"+fn) {
			t.Errorf("%s does not show, in a Go file of its own, TestFleetRecovers as sim/readme_test.go has it:\n%s", doc, fn)
		}
	}
}
