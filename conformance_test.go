package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// ojsError is a handler's error with an OJS error type.
type ojsError struct{ typ, msg string }

func (e ojsError) Error() string     { return e.msg }
func (e ojsError) ErrorType() string { return e.typ }

// rtrVector is one vector of the OJS conformance suite for retries
// (openjobspec/ojs-conformance, suites/level-1-reliable/retry, commit
// 9b375f1): the policy it enqueues and what it expects, in our terms.
type rtrVector struct {
	id, name string
	policy   string          // the vector's "retry" object, as enqueued
	reject   string          // the field the rejection names; "" for a valid policy
	want     retry.Policy    // the effective policy, for a valid one
	ext      []string        // fields the vector uses beyond the OJS schema
	delays   []time.Duration // delays before retries 1, 2, ... without jitter
	jitter   [2]time.Duration
	run      *rtrRun // the vector's job run by the library; nil: the policy checks say it all
	na       string  // what the vector checks that a library does not have
}

// rtrRun is a job run: what the attempts return (then success), and what
// the run must show.
type rtrRun struct {
	errs        []error
	attempts    int
	reason      retry.Reason    // why the run stops; 0 for success
	delays      []time.Duration // the waits between attempts
	deadLetters int
}

func plain(msgs ...string) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		errs[i] = errors.New(m)
	}
	return errs
}

const ojsFull = `"initial_interval": "PT1S", "max_interval": "PT5M", "jitter": false, "non_retryable_errors": [], "on_exhaustion": "discard"`

var rtrVectors = []rtrVector{
	{
		id: "L1-RTR-001", name: "retry-with-exponential-backoff",
		policy: `{"max_attempts": 4, "backoff_coefficient": 2.0, ` + ojsFull + `}`,
		want:   retry.Policy{MaxAttempts: 4, Jitter: retry.Jitter{Kind: retry.JitterNone}},
		delays: secs(1, 2, 4),
		run:    &rtrRun{errs: plain("first failure", "second failure"), attempts: 3, delays: secs(1, 2)},
		na:     "job id, state and fetch/nack steps",
	},
	{
		id: "L1-RTR-002", name: "retry-respects-max-attempts",
		policy: `{"max_attempts": 3, "backoff_coefficient": 1.0, ` + ojsFull + `}`,
		want:   retry.Policy{MaxAttempts: 3, BackoffCoefficient: 1, Jitter: retry.Jitter{Kind: retry.JitterNone}},
		delays: secs(1, 1),
		run:    &rtrRun{errs: plain("1 of 3", "2 of 3", "3 of 3", "never"), attempts: 3, reason: retry.ReasonExhausted, delays: secs(1, 1)},
		na:     "the discarded state and the job's stored attempt count",
	},
	{
		id: "L1-RTR-003", name: "retry-with-jitter",
		policy: `{"max_attempts": 3, "initial_interval": "PT2S", "backoff_coefficient": 1.0, "max_interval": "PT5M", "jitter": true, "non_retryable_errors": [], "on_exhaustion": "discard"}`,
		want:   retry.Policy{MaxAttempts: 3, InitialInterval: 2 * time.Second, BackoffCoefficient: 1},
		delays: secs(2, 2),
		jitter: [2]time.Duration{time.Second, 3 * time.Second},
		na:     "the server's own random source",
	},
	{
		id: "L1-RTR-004", name: "retry-non-retryable-error",
		policy: `{"max_attempts": 5, "initial_interval": "PT1S", "backoff_coefficient": 2.0, "max_interval": "PT5M", "jitter": false, "non_retryable_errors": ["FatalError"], "on_exhaustion": "discard"}`,
		want:   retry.Policy{MaxAttempts: 5, Jitter: retry.Jitter{Kind: retry.JitterNone}, NonRetryableErrors: []string{"FatalError"}},
		delays: secs(1, 2, 4, 8),
		run:    &rtrRun{errs: []error{ojsError{"FatalError", "non-retryable failure"}}, attempts: 1, reason: retry.ReasonNonRetryable},
		na:     "the discarded state",
	},
	{
		id: "L1-RTR-005", name: "retry-non-retryable-prefix-match",
		policy: `{"max_attempts": 5, "initial_interval": "PT1S", "backoff_coefficient": 2.0, "max_interval": "PT5M", "jitter": false, "non_retryable_errors": ["Auth.*"], "on_exhaustion": "discard"}`,
		want:   retry.Policy{MaxAttempts: 5, Jitter: retry.Jitter{Kind: retry.JitterNone}, NonRetryableErrors: []string{"Auth.*"}},
		delays: secs(1, 2, 4, 8),
		run:    &rtrRun{errs: []error{ojsError{"Auth.TokenExpired", "invalid credentials"}}, attempts: 1, reason: retry.ReasonNonRetryable},
		na:     "the discarded state",
	},
	{
		id: "L1-RTR-006", name: "retry-exhausted-to-discarded",
		policy: `{"max_attempts": 1, "backoff_coefficient": 1.0, ` + ojsFull + `}`,
		want:   retry.Policy{MaxAttempts: 1, BackoffCoefficient: 1, Jitter: retry.Jitter{Kind: retry.JitterNone}},
		run:    &rtrRun{errs: plain("single allowed attempt exhausted"), attempts: 1, reason: retry.ReasonExhausted},
		na:     "the discarded state and completed_at",
	},
	{
		id: "L1-RTR-007", name: "retry-exhausted-to-dead-letter",
		policy: `{"max_attempts": 1, "initial_interval": "PT1S", "backoff_coefficient": 1.0, "max_interval": "PT5M", "jitter": false, "non_retryable_errors": [], "on_exhaustion": "dead_letter"}`,
		want:   retry.Policy{MaxAttempts: 1, BackoffCoefficient: 1, Jitter: retry.Jitter{Kind: retry.JitterNone}, OnExhaustion: retry.ExhaustDeadLetter},
		run:    &rtrRun{errs: plain("exhaust to trigger dead letter"), attempts: 1, reason: retry.ReasonExhausted, deadLetters: 1},
		na:     "the dead-letter listing endpoint (the sink receives the record)",
	},
	{
		id: "L1-RTR-008", name: "retry-max-interval-cap",
		policy: `{"max_attempts": 4, "initial_interval": "PT1S", "backoff_coefficient": 10.0, "max_interval": "PT2S", "jitter": false, "non_retryable_errors": [], "on_exhaustion": "discard"}`,
		want:   retry.Policy{MaxAttempts: 4, BackoffCoefficient: 10, MaxInterval: 2 * time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}},
		delays: secs(1, 2, 2),
		run:    &rtrRun{errs: plain("1", "2", "3"), attempts: 4, delays: secs(1, 2, 2)},
	},
	{
		id: "L1-RTR-009", name: "retry-linear-backoff",
		policy: `{"max_attempts": 5, "initial_interval": "PT1S", "backoff_coefficient": 1.0, "backoff_strategy": "linear", "max_interval": "PT30S", "jitter": false, "non_retryable_errors": [], "on_exhaustion": "discard"}`,
		want:   retry.Policy{MaxAttempts: 5, BackoffCoefficient: 1, Backoff: retry.Linear, MaxInterval: 30 * time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}},
		ext:    []string{"backoff_strategy"},
		delays: secs(1, 2, 3, 4),
		run:    &rtrRun{errs: plain("1", "2", "3"), attempts: 4, delays: secs(1, 2, 3)},
	},
	{
		id: "L1-RTR-010", name: "retry-constant-backoff",
		policy: `{"max_attempts": 4, "backoff_coefficient": 1.0, ` + ojsFull + `}`,
		want:   retry.Policy{MaxAttempts: 4, BackoffCoefficient: 1, Jitter: retry.Jitter{Kind: retry.JitterNone}},
		delays: secs(1, 1, 1),
		run:    &rtrRun{errs: plain("1", "2", "3"), attempts: 4, delays: secs(1, 1, 1)},
	},
	{
		id: "L1-RTR-011", name: "retry-validation-invalid-max-attempts",
		policy: `{"max_attempts": -1, "initial_interval": "PT1S", "backoff_coefficient": 2.0, "max_interval": "PT5M", "jitter": false, "non_retryable_errors": [], "on_exhaustion": "discard"}`,
		reject: "max_attempts",
		na:     "HTTP 422 and the validation_error type (the *PolicyError names the field)",
	},
	{
		id: "L1-RTR-012", name: "retry-validation-invalid-coefficient",
		policy: `{"max_attempts": 3, "initial_interval": "PT1S", "backoff_coefficient": 0.5, "max_interval": "PT5M", "jitter": false, "non_retryable_errors": [], "on_exhaustion": "discard"}`,
		reject: "backoff_coefficient",
		na:     "HTTP 422 and the validation_error type (the *PolicyError names the field)",
	},
	{
		id: "L1-RTR-013", name: "retry-attempt-counter-increments",
		policy: `{"max_attempts": 5, "backoff_coefficient": 1.0, ` + ojsFull + `}`,
		want:   retry.Policy{MaxAttempts: 5, BackoffCoefficient: 1, Jitter: retry.Jitter{Kind: retry.JitterNone}},
		delays: secs(1, 1, 1, 1),
		run:    &rtrRun{errs: plain("attempt 0 failed", "attempt 1 failed", "attempt 2 failed"), attempts: 4, delays: secs(1, 1, 1)},
	},
	{
		id: "L1-RTR-014", name: "retry-error-history-tracked",
		policy: `{"max_attempts": 4, "backoff_coefficient": 1.0, ` + ojsFull + `}`,
		want:   retry.Policy{MaxAttempts: 4, BackoffCoefficient: 1, Jitter: retry.Jitter{Kind: retry.JitterNone}},
		delays: secs(1, 1, 1),
		run: &rtrRun{errs: []error{
			ojsError{"ConnectionTimeout", "Database connection timed out"},
			ojsError{"RateLimitExceeded", "API rate limit reached"},
			ojsError{"InternalServerError", "Unexpected null reference"},
		}, attempts: 4, delays: secs(1, 1, 1)},
		na: "the job's stored errors array (each failure reaches OnFailure with its attempt, type and message)",
	},
	{
		id: "L1-RTR-015", name: "retry-error-history-has-code",
		policy: `{"max_attempts": 2, "initial_interval": "PT1S", "backoff_coefficient": 1.0, "jitter": false, "on_exhaustion": "discard"}`,
		want:   retry.Policy{MaxAttempts: 2, BackoffCoefficient: 1, Jitter: retry.Jitter{Kind: retry.JitterNone}},
		delays: secs(1),
		run:    &rtrRun{errs: plain("first attempt failure"), attempts: 2, delays: secs(1)},
		na:     "the job's stored errors array and its code field",
	},
}

// TestOJSConformance runs the policy side of each OJS retry vector: the
// policy parses to the effective policy (or is rejected naming the field),
// its schedule is the vector's, its canonical JSON is valid OJS and reads
// back the same, and the library's run of the vector's job makes the
// attempts, waits and dead letters the vector expects. What a job server
// adds (ids, states, HTTP statuses, stored error history) is out of scope;
// rtrVector.na says what.
func TestOJSConformance(t *testing.T) {
	for _, v := range rtrVectors {
		t.Run(v.id, func(t *testing.T) {
			p, err := retry.ParsePolicy([]byte(v.policy))
			if v.reject != "" {
				var pe *retry.PolicyError
				if !errors.As(err, &pe) || pe.Field != v.reject {
					t.Fatalf("ParsePolicy = %v, want a *PolicyError on %s", err, v.reject)
				}
				return
			}
			t.Run("parse", func(t *testing.T) {
				if err != nil {
					t.Fatal(err)
				}
				if !equalPolicies(p, v.want) {
					t.Errorf("effective policy %+v, want %+v", p, withDefaults(v.want))
				}
			})
			if err != nil {
				return
			}
			t.Run("schedule", func(t *testing.T) {
				for i, want := range v.delays {
					if got := p.Delay(i + 1); got != want {
						t.Errorf("Delay(%d) = %v, want %v", i+1, got, want)
					}
				}
				if v.jitter != [2]time.Duration{} {
					lo, hi := p.Sample(1, 0, 0), p.Sample(1, 0, math.Nextafter(1, 0))
					if lo != v.jitter[0] || hi > v.jitter[1] || hi < v.jitter[1]-time.Microsecond {
						t.Errorf("jittered first delay spans [%v, %v], want [%v, %v)", lo, hi, v.jitter[0], v.jitter[1])
					}
				}
			})
			t.Run("schema", func(t *testing.T) {
				if v := ojsSchemaViolations([]byte(v.policy), v.ext...); len(v) != 0 {
					t.Fatalf("the vector's own policy breaks the schema: %q", v)
				}
				b, err := p.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				if viol := ojsSchemaViolations(b, v.ext...); len(viol) != 0 {
					t.Errorf("MarshalJSON wrote %s, which breaks the OJS schema: %q", b, viol)
				}
				roundTrip(t, p)
			})
			if v.run != nil {
				t.Run("run", func(t *testing.T) { checkRTRRun(t, p, v.run) })
			}
		})
	}
}

func checkRTRRun(t *testing.T, p retry.Policy, want *rtrRun) {
	synctest.Test(t, func(t *testing.T) {
		var (
			seen     []int           // AttemptFrom in each attempt
			gaps     []time.Duration // time between attempts
			waits    []time.Duration // OnRetry's delays
			failures []retry.Event
			records  int
			last     time.Time
		)
		fn := func(ctx context.Context) error {
			now := time.Now()
			if len(seen) > 0 {
				gaps = append(gaps, now.Sub(last))
			}
			last = now
			seen = append(seen, retry.AttemptFrom(ctx))
			if n := len(seen); n <= len(want.errs) {
				return want.errs[n-1]
			}
			return nil
		}
		err := retry.Run(t.Context(), fn,
			retry.WithPolicy(p),
			retry.OnRetry(func(ev retry.Event) { waits = append(waits, ev.Delay) }),
			retry.OnFailure(func(ev retry.Event) { failures = append(failures, ev) }),
			retry.WithDeadLetter(retry.DeadLetters{Sink: func(context.Context, retry.Event) error { records++; return nil }}),
		)
		if len(seen) != want.attempts {
			t.Errorf("%d attempts, want %d", len(seen), want.attempts)
		}
		for i, n := range seen {
			if n != i+1 {
				t.Errorf("attempt %d saw AttemptFrom = %d", i+1, n)
			}
		}
		if !slices.Equal(gaps, want.delays) || !slices.Equal(waits, want.delays) {
			t.Errorf("waits %v (OnRetry %v), want %v", gaps, waits, want.delays)
		}
		if records != want.deadLetters {
			t.Errorf("%d dead letters, want %d", records, want.deadLetters)
		}
		var re *retry.Error
		switch {
		case want.reason == "" && err != nil:
			t.Errorf("err = %v, want success", err)
		case want.reason != "" && (!errors.As(err, &re) || re.Reason != want.reason):
			t.Errorf("err = %v, want a *retry.Error with reason %v", err, want.reason)
		}
		// The error history: every failure, in order, with its attempt,
		// type and message.
		if len(failures) != min(len(want.errs), want.attempts) {
			t.Fatalf("%d failures reported, want %d", len(failures), min(len(want.errs), want.attempts))
		}
		for i, ev := range failures {
			e := want.errs[i]
			if ev.Attempt != i+1 || ev.Type != retry.TypeOf(e) || ev.Message != e.Error() || ev.Time.IsZero() {
				t.Errorf("failure %d reported as attempt %d, type %q, message %q, at %v", i+1, ev.Attempt, ev.Type, ev.Message, ev.Time)
			}
		}
	})
}

// TestOJSSpec checks the rules and tables of the OJS retry specification
// (openjobspec/spec, spec/ojs-retry.md, 1.0.0-rc.1) that concern the policy
// itself.
func TestOJSSpec(t *testing.T) {
	t.Run("§11.1 validation rules", func(t *testing.T) {
		tests := []struct {
			rule, json, field string
		}{
			{rule: "max_attempts MUST be a non-negative integer", json: `{"max_attempts": -1}`, field: "max_attempts"},
			{rule: "max_attempts MUST be a non-negative integer", json: `{"max_attempts": 2.5}`, field: "max_attempts"},
			{rule: "max_attempts MUST be a non-negative integer", json: `{"max_attempts": "3"}`, field: "max_attempts"},
			{rule: "max_attempts MUST be a non-negative integer", json: `{"max_attempts": -1.0}`, field: "max_attempts"},
			{rule: "initial_interval MUST be a valid ISO 8601 duration", json: `{"initial_interval": "PT.5S"}`, field: "initial_interval"},
			{rule: "initial_interval MUST be a valid ISO 8601 duration", json: `{"initial_interval": "PT1.5H30M"}`, field: "initial_interval"},
			{rule: "initial_interval MUST be a valid ISO 8601 duration", json: `{"initial_interval": "P"}`, field: "initial_interval"},
			{rule: "initial_interval MUST be a valid ISO 8601 duration", json: `{"initial_interval": "PT"}`, field: "initial_interval"},
			{rule: "initial_interval MUST be greater than zero", json: `{"initial_interval": "PT0S"}`, field: "initial_interval"},
			{rule: "backoff_coefficient MUST be >= 1.0", json: `{"backoff_coefficient": 0.99}`, field: "backoff_coefficient"},
			{rule: "max_interval MUST be a valid ISO 8601 duration", json: `{"max_interval": "PT5M1H"}`, field: "max_interval"},
			{rule: "max_interval MUST be >= initial_interval", json: `{"initial_interval": "PT10S", "max_interval": "PT5S"}`, field: "max_interval"},
			{rule: "jitter MUST be a boolean", json: `{"jitter": "true"}`, field: "jitter"},
			{rule: "jitter MUST be a boolean", json: `{"jitter": 1}`, field: "jitter"},
			{rule: "non_retryable_errors MUST be an array of strings", json: `{"non_retryable_errors": "auth.*"}`, field: "non_retryable_errors"},
			{rule: "non_retryable_errors MUST be an array of strings", json: `{"non_retryable_errors": [1]}`, field: "non_retryable_errors"},
			{rule: "schema: non_retryable_errors items have minLength 1", json: `{"non_retryable_errors": [""]}`, field: "non_retryable_errors[0]"},
			{rule: "schema: non_retryable_errors items are unique", json: `{"non_retryable_errors": ["auth.*", "billing.declined", "auth.*"]}`, field: "non_retryable_errors[2]"},
			{rule: `on_exhaustion MUST be "discard" or "dead_letter"`, json: `{"on_exhaustion": "retry"}`, field: "on_exhaustion"},
			{rule: "schema: additionalProperties false", json: `{"backoff": "linear"}`, field: "backoff"},
		}
		for _, tt := range tests {
			t.Run(tt.json, func(t *testing.T) {
				_, err := retry.ParsePolicy([]byte(tt.json))
				var pe *retry.PolicyError
				if !errors.As(err, &pe) || pe.Field != tt.field {
					t.Errorf("%s: ParsePolicy(%s) = %v, want a *PolicyError on %s", tt.rule, tt.json, err, tt.field)
				}
			})
		}
	})
	t.Run("§4.1 recommended durations", func(t *testing.T) {
		for s, want := range map[string]time.Duration{
			"PT0.5S": 500 * time.Millisecond, "PT1S": time.Second, "PT5S": 5 * time.Second, "PT30S": 30 * time.Second,
			"PT1M": time.Minute, "PT5M": 5 * time.Minute, "PT15M": 15 * time.Minute, "PT1H": time.Hour, "PT24H": day,
		} {
			if got, err := retry.ParseDuration(s); err != nil || got != want {
				t.Errorf("ParseDuration(%q) = %v, %v; want %v", s, got, err, want)
			}
		}
	})
	t.Run("§8 default policy", func(t *testing.T) {
		b, err := retry.DefaultPolicy().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		const want = `{"max_attempts":3,"initial_interval":"PT1S","backoff_coefficient":2,"max_interval":"PT5M","jitter":true,"non_retryable_errors":[],"on_exhaustion":"discard"}`
		if string(b) != want {
			t.Errorf("default policy\n got %s\nwant %s", b, want)
		}
	})
	t.Run("§8.1 and §12 partial policies merge over the defaults", func(t *testing.T) {
		tests := []struct{ partial, effective string }{
			{partial: `{"retry": {"max_attempts": 10, "on_exhaustion": "dead_letter"}}`,
				effective: `{"max_attempts": 10, "initial_interval": "PT1S", "backoff_coefficient": 2.0, "max_interval": "PT5M", "jitter": true, "non_retryable_errors": [], "on_exhaustion": "dead_letter"}`},
			{partial: `{"retry": {"max_attempts": 1}}`,
				effective: `{"max_attempts": 1, "initial_interval": "PT1S", "backoff_coefficient": 2.0, "max_interval": "PT5M", "jitter": true, "non_retryable_errors": [], "on_exhaustion": "discard"}`},
			{partial: `{}`,
				effective: `{"max_attempts": 3, "initial_interval": "PT1S", "backoff_coefficient": 2.0, "max_interval": "PT5M", "jitter": true, "non_retryable_errors": [], "on_exhaustion": "discard"}`},
			{partial: `{"retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}}`,
				effective: `{"max_attempts": 1, "initial_interval": "PT1S", "backoff_coefficient": 2.0, "max_interval": "PT5M", "jitter": true, "non_retryable_errors": [], "on_exhaustion": "dead_letter"}`},
		}
		for _, tt := range tests {
			t.Run(tt.partial, func(t *testing.T) {
				got, err := retry.ParsePolicy([]byte(tt.partial))
				if err != nil {
					t.Fatal(err)
				}
				b, err := got.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				var gotFields, wantFields map[string]any
				if err := json.Unmarshal(b, &gotFields); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal([]byte(tt.effective), &wantFields); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(gotFields) != fmt.Sprint(wantFields) {
					t.Errorf("effective policy\n got %s\nwant %s", b, tt.effective)
				}
			})
		}
	})
	t.Run("§5.3 jitter ranges", func(t *testing.T) {
		p := retry.Policy{InitialInterval: 10 * time.Second}
		ranges := [][2]time.Duration{ // [lo, hi) before retries 1..6; the last is capped at 300 s
			{5 * time.Second, 15 * time.Second}, {10 * time.Second, 30 * time.Second}, {20 * time.Second, 60 * time.Second},
			{40 * time.Second, 120 * time.Second}, {80 * time.Second, 240 * time.Second}, {150 * time.Second, 300 * time.Second},
		}
		for i, r := range ranges {
			lo, hi := p.Sample(i+1, 0, 0), p.Sample(i+1, 0, math.Nextafter(1, 0))
			if lo != r[0] || hi > r[1] || hi < r[1]-time.Microsecond {
				t.Errorf("retry %d: jitter spans [%v, %v], want [%v, %v)", i+1, lo, hi, r[0], r[1])
			}
		}
	})
	t.Run("§6.2 matching", func(t *testing.T) {
		patterns := []string{"validation.payload_invalid", "auth.*"}
		for typ, want := range map[string]bool{
			"validation.payload_invalid": true, "validation.schema_error": false, "auth.token_expired": true,
			"auth.forbidden": true, "auth": false, "external.auth.failure": false,
		} {
			got := slices.ContainsFunc(patterns, func(p string) bool { return retry.Match(p, typ) })
			if got != want {
				t.Errorf("%q matches %q: %v, want %v", typ, patterns, got, want)
			}
		}
		// L1-RTR-005's description says "AuthenticationError" matches
		// "Auth.*"; its vector fails with "Auth.TokenExpired", and §6.2
		// (the type must start with "Auth.") decides.
		if retry.Match("Auth.*", "AuthenticationError") || !retry.Match("Auth.*", "Auth.TokenExpired") {
			t.Error(`"Auth.*" must match "Auth.TokenExpired" and not "AuthenticationError"`)
		}
	})
}
