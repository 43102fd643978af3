package retry

import (
	"context"
	"errors"
	"testing"
)

// recordGate is a gate of a type consult does not know: it is asked
// through the interface. It lets every attempt through and records what
// it learns.
type recordGate struct {
	entered int
	learned []error
}

func (*recordGate) acts() (uint8, uint8)                { return 0, onAll }
func (*recordGate) admit(context.Context, *ask, *grant) {}
func (g *recordGate) enter(_ context.Context, a *ask, gr *grant) {
	g.entered++
	gr.learner, gr.tag = g, int64(a.kind)
}
func (g *recordGate) learn(_ *config, _ int64, outcome, _ error) {
	g.learned = append(g.learned, outcome)
}

// TestUnknownGate: a gate of a type the loop does not call by its own is
// asked through the interface all the same, and learns each outcome.
func TestUnknownGate(t *testing.T) {
	r := New(WithPolicy(Policy{MaxAttempts: 2, Backoff: Immediate}))
	g := &recordGate{}
	c := r.config()
	for k := range c.gates.enters {
		c.gates.enters[k] = append(c.gates.enters[k], g)
	}
	c.learns = true
	n := 0
	err := r.Run(context.Background(), func(context.Context) error {
		if n++; n == 1 {
			return errors.New("flaky")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if g.entered != 2 || len(g.learned) != 2 || g.learned[0] != errBreakerFailure || g.learned[1] != nil {
		t.Errorf("entered %d times, learned %v; want 2 and [failure <nil>]", g.entered, g.learned)
	}
}
