package otel

import (
	"context"
	"errors"

	"github.com/steadyhq/retry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// ScopeName is the instrumentation scope of the meter.
const ScopeName = "github.com/steadyhq/retry/otel"

// Attribute keys of the engine's own; error.type comes from the semantic
// conventions.
const (
	AttrReason  = attribute.Key("retry.reason")  // why a call gave up: exhausted, non_retryable, ...
	AttrKey     = attribute.Key("retry.key")     // the key of a breaker or budget
	AttrOutcome = attribute.Key("retry.outcome") // a dead-letter record: delivered or failed
	AttrDefence = attribute.Key("retry.defence") // what denied a call: budget, breaker, rate_limit, throttle or concurrency
	AttrAttempt = attribute.Key("retry.attempt") // an attempt's number, from 1
)

// delayBuckets are the bounds of the retry.delay histogram, in seconds: from
// immediate retries to the policy's default cap of five minutes.
var delayBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Metrics holds the engine's instruments on one meter. Build it with
// NewMetrics (the zero Metrics is not usable); it is safe for concurrent use, and one Metrics may serve
// several Retriers (Observe each, with attributes telling them apart).
type Metrics struct {
	meter  metric.Meter
	attrs  []attribute.KeyValue
	delay  metric.Float64Histogram
	giveUp metric.Int64Counter
	types  errorTypes // bounds the values of error.type
}

// NewMetrics creates the instruments on mp's meter for ScopeName; attrs are
// added to every measurement. A nil mp is an error.
func NewMetrics(mp metric.MeterProvider, attrs ...attribute.KeyValue) (*Metrics, error) {
	if mp == nil {
		return nil, errors.New("otel: NewMetrics: meter provider is nil")
	}
	m := &Metrics{meter: mp.Meter(ScopeName), attrs: append([]attribute.KeyValue(nil), attrs...)}
	var err1, err2 error
	m.delay, err1 = m.meter.Float64Histogram("retry.delay",
		metric.WithDescription("The wait before each retry."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(delayBuckets...))
	m.giveUp, err2 = m.meter.Int64Counter("retry.give_ups",
		metric.WithDescription("Calls that ended without success, by reason and error type."),
		metric.WithUnit("{call}"))
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	return m, nil
}

// Option returns the retry option that records the retry.delay histogram
// and the retry.give_ups counter from the OnRetry and OnGiveUp hooks.
func (m *Metrics) Option() retry.Option {
	return retry.Options(
		retry.OnRetry(func(ev retry.Event) {
			m.delay.Record(context.Background(), ev.Delay.Seconds(),
				metric.WithAttributes(m.with(semconv.ErrorTypeKey.String(m.types.bound(ev.Type)))...))
		}),
		retry.OnGiveUp(func(ev retry.Event) {
			m.giveUp.Add(context.Background(), 1, metric.WithAttributes(m.with(
				AttrReason.String(ev.Reason.String()), semconv.ErrorTypeKey.String(m.types.bound(ev.Type)))...))
		}),
	)
}

func (m *Metrics) with(kvs ...attribute.KeyValue) []attribute.KeyValue {
	if len(m.attrs) == 0 {
		return kvs
	}
	return append(append(make([]attribute.KeyValue, 0, len(m.attrs)+len(kvs)), m.attrs...), kvs...)
}

// Source is what Observe reads, such as a *retry.Retrier (a Transport
// built with one shares its counters).
type Source interface {
	Stats() retry.Stats
}

// Observe registers the observable instruments that read src.Stats() once
// per collection; attrs, with those of NewMetrics, are added to every
// observation. Unregister the returned registration when src is retired.
func (m *Metrics) Observe(src Source, attrs ...attribute.KeyValue) (metric.Registration, error) {
	if src == nil {
		return nil, errors.New("otel: Observe: source is nil")
	}
	counter := func(name, desc, unit string) (metric.Int64ObservableCounter, error) {
		return m.meter.Int64ObservableCounter(name, metric.WithDescription(desc), metric.WithUnit(unit))
	}
	calls, e0 := counter("retry.calls", "Calls, each counted when its first attempt ends or when it is stopped before one.", "{call}")
	attempts, e1 := counter("retry.attempts", "Attempts, first ones included.", "{attempt}")
	failures, e2 := counter("retry.failures", "Failed attempts, retried or not.", "{failure}")
	retries, e3 := counter("retry.retries", "Failed attempts followed by a retry.", "{retry}")
	deadLetters, e4 := counter("retry.dead_letters", "Dead-letter records, delivered or failed.", "{record}")
	denials, e5 := counter("retry.denials", "Calls or retries stopped by the budget, a breaker, the rate limit, adaptive throttling or the concurrency limit.", "{call}")
	hedges, e8 := counter("retry.hedges", "Hedged attempts started.", "{attempt}")
	hedgeWins, e9 := counter("retry.hedge_wins", "Calls whose returned success came from a hedge.", "{call}")
	balance, e6 := m.meter.Float64ObservableGauge("retry.budget.balance",
		metric.WithDescription("Retries the retry budget would grant now."), metric.WithUnit("{retry}"))
	breaker, e7 := m.meter.Int64ObservableGauge("retry.breaker.state",
		metric.WithDescription("Circuit breaker state: 0 closed, 1 half-open, 2 open."), metric.WithUnit("1"))
	throttle, e10 := m.meter.Float64ObservableGauge("retry.throttle.probability",
		metric.WithDescription("The probability with which adaptive throttling sheds an attempt now."), metric.WithUnit("1"))
	limit, e11 := m.meter.Int64ObservableGauge("retry.concurrency.limit",
		metric.WithDescription("The adaptive concurrency limit on attempts in flight."), metric.WithUnit("{attempt}"))
	inFlight, e12 := m.meter.Int64ObservableGauge("retry.concurrency.in_flight",
		metric.WithDescription("Attempts holding a permit of the concurrency limit."), metric.WithUnit("{attempt}"))
	if err := errors.Join(e0, e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11, e12); err != nil {
		return nil, err
	}
	base := append(append([]attribute.KeyValue(nil), m.attrs...), attrs...)
	set := func(kvs ...attribute.KeyValue) metric.ObserveOption {
		return metric.WithAttributes(append(append(make([]attribute.KeyValue, 0, len(base)+len(kvs)), base...), kvs...)...)
	}
	all := set()
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := src.Stats()
		o.ObserveInt64(calls, s.Calls, all)
		o.ObserveInt64(attempts, s.Attempts, all)
		o.ObserveInt64(failures, s.Failed, all)
		o.ObserveInt64(retries, s.Retried, all)
		o.ObserveInt64(deadLetters, s.DeadLettered, set(AttrOutcome.String("delivered")))
		o.ObserveInt64(deadLetters, s.DeadLetterFailed, set(AttrOutcome.String("failed")))
		o.ObserveInt64(denials, s.BudgetDenied, set(AttrDefence.String("budget")))
		o.ObserveInt64(denials, s.BreakerDenied, set(AttrDefence.String("breaker")))
		o.ObserveInt64(denials, s.LimiterDenied, set(AttrDefence.String("rate_limit")))
		if s.Throttle != nil {
			o.ObserveInt64(denials, s.Throttled, set(AttrDefence.String("throttle")))
		}
		if s.ConcurrencyLimit != nil {
			o.ObserveInt64(denials, s.ConcurrencyDenied, set(AttrDefence.String("concurrency")))
		}
		o.ObserveInt64(hedges, s.Hedges, all)
		o.ObserveInt64(hedgeWins, s.HedgeWins, all)
		if s.BudgetBalance >= 0 {
			o.ObserveFloat64(balance, s.BudgetBalance, all)
		}
		for k, b := range s.Budgets {
			o.ObserveFloat64(balance, b, set(AttrKey.String(k)))
		}
		for k, st := range s.Breakers {
			o.ObserveInt64(breaker, int64(breakerValue(st)), set(AttrKey.String(k)))
		}
		for k, p := range s.Throttle {
			o.ObserveFloat64(throttle, p, set(AttrKey.String(k)))
		}
		for k, n := range s.ConcurrencyLimit {
			o.ObserveInt64(limit, int64(n), set(AttrKey.String(k)))
		}
		for k, n := range s.InFlight {
			o.ObserveInt64(inFlight, int64(n), set(AttrKey.String(k)))
		}
		return nil
	}, calls, attempts, failures, retries, deadLetters, denials, hedges, hedgeWins, balance, breaker, throttle, limit, inFlight)
}

// breakerValue is the gauge value of a breaker state.
func breakerValue(s string) int {
	switch s {
	case retry.BreakerHalfOpen:
		return 1
	case retry.BreakerOpen:
		return 2
	}
	return 0
}
