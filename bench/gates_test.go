package bench

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/sony/gobreaker/v2"
	"github.com/steadyhq/retry"
	"golang.org/x/time/rate"
)

// The Gate cases measure one call that succeeds at once through each gate
// alone (GateBreaker, GateRateLimit, GateThrottle, GateConcurrency) and
// through the breaker, throttling and the concurrency limit together
// (GateAll). In each table a row named X-none is the same
// implementation with no gate, and every row X-… is compared with it, so
// that the difference is what the gate costs; the bare calls of a peer's
// policy (X-bare) and gobreaker's are compared with plain.
//
//	retry-none                 retry.New(): the Retrier with its default budget, which a first attempt does not reach
//	retry-<gate>               retry.New(retry.With<Gate>(zero value))
//	failsafe-go-executor-none  failsafe.With[any](), an executor with no policy
//	failsafe-go-executor-<p>   failsafe.With[any](p)
//	failsafe-go-<p>-bare       p's own acquire and record, called by hand
//
// failsafe-go's policies are built with the settings of our zero values,
// as far as they have them, so that the same work is measured: its
// breaker's defaults count consecutive failures without a clock, where
// ours counts a failure ratio over a time window.

// gate is one gate of ours beside failsafe-go's nearest policy.
type gate struct {
	ours  []retry.Option
	peers []failsafe.Policy[any]
	// bare acquires a permit from the peers' policies and records a
	// success, the way code that calls them by hand would.
	bare func() bool
}

func breakerGate() gate {
	// A failure ratio of 0.5 over at least 20 attempts in 10 s, open for
	// 30 s, closed by one success half-open: the zero retry.Breaker.
	cb := circuitbreaker.NewBuilder[any]().
		WithFailureRateThreshold(0.5, 20, 10*time.Second).
		WithDelay(30 * time.Second).
		WithSuccessThreshold(1).
		Build()
	return gate{
		ours:  []retry.Option{retry.WithBreaker(retry.Breaker{})},
		peers: []failsafe.Policy[any]{cb},
		bare: func() bool {
			if !cb.TryAcquirePermit() {
				return false
			}
			cb.RecordSuccess()
			return true
		},
	}
}

func throttleGate() gate {
	// Its rule is the SRE book's with K = 1/(1 − failure rate threshold),
	// capped at a rejection rate: K = 2 over 2 minutes and no cap, the
	// zero retry.Throttle.
	t := adaptivethrottler.NewBuilder[any]().
		WithFailureRateThreshold(0.5, 0, 2*time.Minute).
		WithMaxRejectionRate(1).
		Build()
	return gate{
		ours:  []retry.Option{retry.WithThrottle(retry.Throttle{})},
		peers: []failsafe.Policy[any]{t},
		bare: func() bool {
			if !t.TryAcquirePermit() {
				return false
			}
			t.RecordSuccess()
			return true
		},
	}
}

func rateLimitGate() gate {
	// 1e9 a second with a burst of 1e9: it never refuses.
	l := ratelimiter.NewBursty[any](1e9, time.Second)
	return gate{
		ours:  []retry.Option{retry.WithRateLimit(retry.RateLimit{Limit: 1e9, Burst: 1e9})},
		peers: []failsafe.Policy[any]{l},
		bare:  l.TryAcquirePermit,
	}
}

func concurrencyGate() gate {
	// Limits 1 to 1000, starting at 20, as the zero retry.Concurrency;
	// the rest of failsafe-go's defaults.
	l := adaptivelimiter.NewBuilder[any]().WithLimits(1, 1000, 20).Build()
	return gate{
		ours:  []retry.Option{retry.WithConcurrency(retry.Concurrency{})},
		peers: []failsafe.Policy[any]{l},
		bare: func() bool {
			p, ok := l.TryAcquirePermit()
			if !ok {
				return false
			}
			p.Record()
			return true
		},
	}
}

// allGates is the three together, in the order failsafe-go's users stack
// them: the breaker outermost, the limiter next to the call.
func allGates() gate {
	gs := []gate{breakerGate(), throttleGate(), concurrencyGate()}
	var all gate
	for _, g := range gs {
		all.ours = append(all.ours, g.ours...)
		all.peers = append(all.peers, g.peers...)
	}
	all.bare = func() bool {
		for _, g := range gs {
			if !g.bare() {
				return false
			}
		}
		return true
	}
	return all
}

// benchGate runs the rows of one Gate case, naming ours retry-ourName and
// failsafe-go's rows by peerName.
func benchGate(b *testing.B, ourName, peerName string, newGate func() gate) {
	ctx := context.Background()
	b.Run("plain", func(b *testing.B) {
		fn := ok
		defer cpuPerOp(b)()
		for b.Loop() {
			if fn(ctx) != nil {
				b.Fatal()
			}
		}
	})
	b.Run("retry-none", func(b *testing.B) {
		r := retry.New()
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := r.Run(ctx, ok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("retry-"+ourName, func(b *testing.B) {
		r := retry.New(newGate().ours...)
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := r.Run(ctx, ok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("failsafe-go-executor-none", func(b *testing.B) {
		ex := failsafe.With[any]()
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := ex.Run(func() error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("failsafe-go-executor-"+peerName, func(b *testing.B) {
		ex := failsafe.With(newGate().peers...)
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := ex.Run(func() error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("failsafe-go-"+peerName+"-bare", func(b *testing.B) {
		bare := newGate().bare
		defer cpuPerOp(b)()
		for b.Loop() {
			if !bare() {
				b.Fatal("no permit")
			}
		}
	})
}

// Case: the success path through a circuit breaker alone. gobreaker's
// Execute and two-step Allow and done, with the same settings as the zero
// retry.Breaker, are references beside failsafe-go's breaker.
func BenchmarkGateBreaker(b *testing.B) {
	benchGate(b, "breaker", "circuitbreaker", breakerGate)
	b.Run("gobreaker-execute", func(b *testing.B) {
		cb := gobreaker.NewCircuitBreaker[struct{}](zeroBreakerSettings)
		defer cpuPerOp(b)()
		for b.Loop() {
			if _, err := cb.Execute(func() (struct{}, error) { return struct{}{}, nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gobreaker-twostep", func(b *testing.B) {
		cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](zeroBreakerSettings)
		defer cpuPerOp(b)()
		for b.Loop() {
			done, err := cb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done(nil)
		}
	})
}

// Case: the success path through a rate limiter that never refuses (1e9
// a second, a burst of 1e9): ours, on golang.org/x/time/rate, beside
// failsafe-go's bursty rate limiter, and x/time/rate's own Allow called
// bare.
func BenchmarkGateRateLimit(b *testing.B) {
	benchGate(b, "ratelimit", "ratelimiter", rateLimitGate)
	b.Run("x-time-rate-allow", func(b *testing.B) {
		lim := rate.NewLimiter(1e9, 1e9)
		defer cpuPerOp(b)()
		for b.Loop() {
			if !lim.Allow() {
				b.Fatal("no token")
			}
		}
	})
}

// Case: the success path through adaptive client-side throttling alone:
// ours (the SRE rule, K = 2) beside failsafe-go's adaptive throttler.
func BenchmarkGateThrottle(b *testing.B) {
	benchGate(b, "throttle", "adaptivethrottler", throttleGate)
}

// Case: the success path through an adaptive concurrency limit alone:
// ours beside failsafe-go's adaptive limiter.
func BenchmarkGateConcurrency(b *testing.B) {
	benchGate(b, "concurrency", "adaptivelimiter", concurrencyGate)
}

// Case: the success path through the breaker, adaptive throttling and the
// concurrency limit together.
func BenchmarkGateAll(b *testing.B) {
	benchGate(b, "all", "all", allGates)
}
