package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Dist is a distribution of durations: a service time, a network delay.
// The zero Dist is always zero. Build one with Fixed, Spread, Exponential or
// Normal, and give it a slow tail with Tail.
type Dist struct {
	kind   distKind
	mean   time.Duration
	spread float64 // Spread's share of the mean; Normal's deviation, in ns
	tail   float64 // share of draws slowed
	factor float64 // by this factor
}

type distKind int8

const (
	distFixed distKind = iota
	distSpread
	distExponential
	distNormal
)

// Fixed returns a distribution that is always d.
func Fixed(d time.Duration) Dist { return Dist{mean: d} }

// Spread returns a distribution uniform within share of mean on either
// side: Spread(100*time.Millisecond, 0.1) is uniform in [90ms, 110ms).
// share is in [0, 1].
func Spread(mean time.Duration, share float64) Dist {
	return Dist{kind: distSpread, mean: mean, spread: share}
}

// Exponential returns an exponential distribution of the given mean.
func Exponential(mean time.Duration) Dist { return Dist{kind: distExponential, mean: mean} }

// Normal returns the absolute value of a normal distribution of the given
// mean and standard deviation.
func Normal(mean, deviation time.Duration) Dist {
	return Dist{kind: distNormal, mean: mean, spread: float64(deviation)}
}

// Tail returns d with a share of its draws multiplied by factor: a slow
// tail, such as Tail(0.01, 100) for one draw in a hundred 100 times longer.
// share is in [0, 1], factor at least 1.
func (d Dist) Tail(share, factor float64) Dist {
	d.tail, d.factor = share, factor
	return d
}

// Mean returns the distribution's mean, its tail included.
func (d Dist) Mean() time.Duration {
	m := float64(d.mean)
	if d.tail > 0 {
		m *= 1 + d.tail*(d.factor-1)
	}
	return time.Duration(m)
}

// String describes the distribution: "100ms", "100ms ±10%", "exp(100ms)",
// "|N(10ms, 2ms)|", each followed by its tail when it has one.
func (d Dist) String() string {
	var s string
	switch d.kind {
	case distSpread:
		s = fmt.Sprintf("%v ±%g%%", d.mean, 100*d.spread)
	case distExponential:
		s = fmt.Sprintf("exp(%v)", d.mean)
	case distNormal:
		s = fmt.Sprintf("|N(%v, %v)|", d.mean, time.Duration(d.spread))
	default:
		s = d.mean.String()
	}
	if d.tail > 0 {
		s += fmt.Sprintf(", %g%% of them ×%g", 100*d.tail, d.factor)
	}
	return s
}

// random reports whether a draw uses the source: a Fixed distribution
// without a tail draws nothing, so that adding one does not shift the
// other draws of a run.
func (d Dist) random() bool { return d.kind != distFixed || d.tail > 0 }

// draw returns a duration, in nanoseconds as a float so that a caller may
// scale it before rounding, drawn from rng.
func (d Dist) draw(rng *rand.Rand) float64 {
	var v float64
	switch d.kind {
	case distSpread:
		v = float64(d.mean) * (1 + d.spread*(2*rng.Float64()-1))
	case distExponential:
		v = float64(d.mean) * rng.ExpFloat64()
	case distNormal:
		v = math.Abs(rng.NormFloat64()*d.spread + float64(d.mean))
	default:
		v = float64(d.mean)
	}
	if d.tail > 0 && rng.Float64() < d.tail {
		v *= d.factor
	}
	return v
}

// check returns what is wrong with d, named field, or nil.
func (d Dist) check(field string) error {
	switch {
	case d.mean < 0:
		return bad(field, d, "the mean must be >= 0")
	case d.kind == distSpread && !(d.spread >= 0 && d.spread <= 1):
		return bad(field, d, "Spread's share must be in [0, 1]")
	case d.kind == distNormal && !(d.spread >= 0):
		return bad(field, d, "Normal's deviation must be >= 0")
	case !(d.tail >= 0 && d.tail <= 1):
		return bad(field, d, "Tail's share must be in [0, 1]")
	case d.tail > 0 && !(d.factor >= 1 && d.factor <= 1e6):
		return bad(field, d, "Tail's factor must be in [1, 1e6]")
	case float64(d.Mean()) > float64(24*time.Hour):
		return bad(field, d, "the mean must be at most 24h")
	}
	return nil
}
