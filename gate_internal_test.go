package retry

import (
	"context"
	"testing"
)

// nopGate is a gate that lets every attempt through and asks to learn its
// outcome, and learns nothing: what the loop costs any gate that learns.
type nopGate struct{}

func (nopGate) acts() (uint8, uint8)                { return 0, onAll }
func (nopGate) admit(context.Context, ask) grant    { return grant{} }
func (g *nopGate) enter(context.Context, ask) grant { return grant{learner: g} }
func (*nopGate) learn(*config, int64, error, error) {}

// BenchmarkNopGate measures the success path with no gate and with a gate
// that does nothing but ask for the outcome: the loop's share of every
// learning gate's cost (the breaker, adaptive throttling, the concurrency
// limit).
func BenchmarkNopGate(b *testing.B) {
	ctx := context.Background()
	for _, on := range []bool{false, true} {
		name := "none"
		if on {
			name = "nop"
		}
		b.Run(name, func(b *testing.B) {
			r := New()
			c := r.config()
			if on {
				g := &nopGate{}
				c.gates.enters[kindFirst] = append(c.gates.enters[kindFirst], g)
				c.learns = true
			}
			f := func(context.Context) error { return nil }
			b.ReportAllocs()
			for b.Loop() {
				_ = r.Run(ctx, f)
			}
		})
	}
}
