package main

import "testing"

// maxRootAPI is the most exported identifiers the root package may have.
// (112 since Retrier.Hedge, which the grpc module needs to hedge when the
// Retrier does, as the Transport does; 118 since the names of the strings
// that callers compare and a typo would pass: the breaker states
// BreakerClosed, BreakerHalfOpen and BreakerOpen, which Breaker.OnChange,
// Stats.Breakers and every BreakerStore speak in, and the engine's own
// event types TypeAttemptTimeout, TypeHedgeStarted and TypeHedgeWon, which
// no other name gives. The types of refusals, such as "breaker.open", have
// none: a stopped call's Reason, ReasonBreakerOpen and its kin, already
// says it with a typed constant; 123 since the adaptive defences: Throttle
// and WithThrottle, Concurrency and WithConcurrency, each a configuration
// struct and its one option as the other defences have, and
// ReasonThrottled, the one reason both give a call they shed; 129 since
// retries at one layer: AttemptHeader, the field both ends of the wire
// name, WithInboundAttempt and InboundAttempt, the context marker the
// servers set and any handler may read, OutboundAttempt, the number the
// clients of the grpc module and the Transport send, WithNestedRetries,
// its one option, and ReasonInboundRetry, the reason of a call it holds
// to one attempt; 130 since WithGoBreaker, the one option that hands the
// breaker gate to a user's gobreaker breakers, whose own Settings need no
// name of ours.)
const maxRootAPI = 130

// TestRootAPI keeps the root package's API within maxRootAPI identifiers.
func TestRootAPI(t *testing.T) {
	names, err := exported("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) > maxRootAPI {
		t.Errorf("the root package exports %d identifiers, more than %d:\n%v", len(names), maxRootAPI, names)
	}
	for _, want := range []string{"func Do", "func Run", "func New", "method Retrier.Run", "type Policy", "func DefaultPolicy",
		"func ParsePolicy", "method Policy.Validate", "method Policy.Delay", "func WithPolicy", "func OnRetry", "type Event",
		"type Error", "func Permanent", "func Retryable", "func Discard", "func DeadLetter", "func Fail", "func After",
		"func TypeOf", "func Match", "func NewTransport"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("%s is missing: it is one of the fixed public names", want)
		}
	}
}

// TestCount counts each kind of declaration once.
func TestCount(t *testing.T) {
	names, err := exported("testdata/pkg")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"const A", "const B", "func F", "method T.M", "type T", "var V"}
	if len(names) != len(want) {
		t.Fatalf("got %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("got %v, want %v", names, want)
		}
	}
}
