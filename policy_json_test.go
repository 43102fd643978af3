package retry_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/steadyhq/retry"
)

// The OJS retry-policy schema (openjobspec/ojs-json-schema,
// schemas/v1/retry-policy.schema.json, commit f1e2f34), written out as the
// constraints it states rather than embedded, so that the root module needs
// no JSON Schema validator:
//
//   - the policy is an object with additionalProperties false over the seven
//     properties below;
//   - max_attempts: integer, minimum 0;
//   - initial_interval, max_interval: string matching ojsDurationPattern;
//   - backoff_coefficient: number, minimum 1.0;
//   - jitter: boolean;
//   - non_retryable_errors: array of strings of minLength 1, uniqueItems;
//   - on_exhaustion: string, enum "discard", "dead_letter".
//
// Defaults, titles and examples in the schema are annotations, not
// constraints. TestOJSSchemaCheck tries the check on the schema's own
// examples and on one violation of each constraint.
var ojsDurationPattern = regexp.MustCompile(`^P(?:\d+Y)?(?:\d+M)?(?:\d+W)?(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?$`)

// ojsExtensions are the fields this library writes beyond the OJS schema,
// each only when it differs from its default; "jitter" is an extension
// only when it is an object.
var ojsExtensions = []string{"backoff_strategy", "delay_offset", "jitter"}

// ojsSchemaViolations returns the constraints of the OJS schema that doc
// breaks, as "field: keyword ..." strings; none for a valid document. The
// fields named in allow are skipped (they are checked elsewhere), except
// that a boolean jitter is always checked.
func ojsSchemaViolations(doc []byte, allow ...string) []string {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return []string{"type: not an object"}
	}
	var out []string
	bad := func(field, format string, args ...any) {
		out = append(out, field+": "+fmt.Sprintf(format, args...))
	}
	// number returns the exact value of a JSON number, or nil.
	number := func(x any) *big.Rat {
		n, ok := x.(json.Number)
		if !ok {
			return nil
		}
		r, ok := new(big.Rat).SetString(n.String())
		if !ok {
			return nil
		}
		return r
	}
	for name, x := range obj {
		if _, isBool := x.(bool); slices.Contains(allow, name) && !(name == "jitter" && isBool) {
			continue
		}
		switch name {
		case "max_attempts":
			if r := number(x); r == nil || !r.IsInt() {
				bad(name, "type integer: got %v", x)
			} else if r.Sign() < 0 {
				bad(name, "minimum 0: got %v", x)
			}
		case "initial_interval", "max_interval":
			if s, ok := x.(string); !ok {
				bad(name, "type string: got %v", x)
			} else if !ojsDurationPattern.MatchString(s) {
				bad(name, "pattern: %q does not match", s)
			}
		case "backoff_coefficient":
			if r := number(x); r == nil {
				bad(name, "type number: got %v", x)
			} else if r.Cmp(big.NewRat(1, 1)) < 0 {
				bad(name, "minimum 1.0: got %v", x)
			}
		case "jitter":
			if _, ok := x.(bool); !ok {
				bad(name, "type boolean: got %v", x)
			}
		case "non_retryable_errors":
			items, ok := x.([]any)
			if !ok {
				bad(name, "type array: got %v", x)
				continue
			}
			seen := map[string]bool{}
			for i, item := range items {
				s, ok := item.(string)
				switch {
				case !ok:
					bad(name, "items type string: [%d] is %v", i, item)
				case utf8.RuneCountInString(s) < 1:
					bad(name, "items minLength 1: [%d] is empty", i)
				case seen[s]:
					bad(name, "uniqueItems: %q repeats", s)
				}
				seen[s] = true
			}
		case "on_exhaustion":
			if s, ok := x.(string); !ok || s != "discard" && s != "dead_letter" {
				bad(name, `enum ["discard", "dead_letter"]: got %v`, x)
			}
		default:
			bad(name, "additionalProperties false: not a property of the schema")
		}
	}
	slices.Sort(out)
	return out
}

// TestOJSSchemaCheck tries ojsSchemaViolations on the schema's own examples,
// which must pass, and on documents that each break one constraint.
func TestOJSSchemaCheck(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string // the field of the violation; "" for a valid document
	}{
		{name: "schema example 1", doc: `{"max_attempts": 3, "initial_interval": "PT1S", "backoff_coefficient": 2.0, "max_interval": "PT5M", "jitter": true, "non_retryable_errors": [], "on_exhaustion": "discard"}`},
		{name: "schema example 2", doc: `{"max_attempts": 5, "initial_interval": "PT5S", "backoff_coefficient": 2.0, "max_interval": "PT1H", "jitter": true, "non_retryable_errors": ["ValidationError", "AuthenticationError"], "on_exhaustion": "dead_letter"}`},
		{name: "schema example 3", doc: `{"max_attempts": 1}`},
		{name: "empty policy", doc: `{}`},
		{name: "integer written with a fraction of zero", doc: `{"max_attempts": 3.0}`},
		{name: "integer written with an exponent", doc: `{"max_attempts": 1e2}`},
		{name: "duration examples", doc: `{"initial_interval": "PT0.5S", "max_interval": "PT24H"}`},
		{name: "days and weeks", doc: `{"initial_interval": "P1D", "max_interval": "P2W1DT1H"}`},
		{name: "fractional attempts", doc: `{"max_attempts": 2.5}`, want: "max_attempts"},
		{name: "negative attempts", doc: `{"max_attempts": -1}`, want: "max_attempts"},
		{name: "attempts as a string", doc: `{"max_attempts": "3"}`, want: "max_attempts"},
		{name: "Go duration", doc: `{"initial_interval": "1s"}`, want: "initial_interval"},
		{name: "milliseconds", doc: `{"max_interval": 1000}`, want: "max_interval"},
		{name: "no digit before the decimal point", doc: `{"initial_interval": "PT.5S"}`, want: "initial_interval"},
		{name: "fraction on minutes", doc: `{"max_interval": "PT1.5M"}`, want: "max_interval"},
		{name: "decimal comma", doc: `{"max_interval": "PT0,5S"}`, want: "max_interval"},
		{name: "lower case", doc: `{"max_interval": "pt5m"}`, want: "max_interval"},
		{name: "coefficient below 1", doc: `{"backoff_coefficient": 0.5}`, want: "backoff_coefficient"},
		{name: "coefficient as a string", doc: `{"backoff_coefficient": "2"}`, want: "backoff_coefficient"},
		{name: "jitter object", doc: `{"jitter": {"kind": "full"}}`, want: "jitter"},
		{name: "pattern not a string", doc: `{"non_retryable_errors": [1]}`, want: "non_retryable_errors"},
		{name: "empty pattern", doc: `{"non_retryable_errors": [""]}`, want: "non_retryable_errors"},
		{name: "repeated pattern", doc: `{"non_retryable_errors": ["a", "a"]}`, want: "non_retryable_errors"},
		{name: "unknown exhaustion", doc: `{"on_exhaustion": "retry"}`, want: "on_exhaustion"},
		{name: "backoff_strategy is not in the schema", doc: `{"backoff_strategy": "exponential"}`, want: "backoff_strategy"},
		{name: "delay_offset is not in the schema", doc: `{"delay_offset": "PT1S"}`, want: "delay_offset"},
		{name: "not an object", doc: `[]`, want: "type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ojsSchemaViolations([]byte(tt.doc))
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("%s: violations %q, want none", tt.doc, got)
			case tt.want != "" && (len(got) != 1 || !bytes.HasPrefix([]byte(got[0]), []byte(tt.want+":"))):
				t.Errorf("%s: violations %q, want one on %s", tt.doc, got, tt.want)
			}
		})
	}
}

// TestMarshalOJSSchema: a policy that uses only OJS features marshals to a
// document that the OJS schema accepts, with no field beyond it; a policy
// that uses extensions writes exactly the extension fields that differ from
// their defaults, and the rest of its document is valid OJS.
func TestMarshalOJSSchema(t *testing.T) {
	tests := []struct {
		name string
		p    retry.Policy
		ext  []string // the extension fields the document must have
	}{
		{name: "zero policy", p: retry.Policy{}},
		{name: "defaults", p: retry.DefaultPolicy()},
		{name: "one attempt", p: retry.Policy{MaxAttempts: 1}},
		{name: "most attempts", p: retry.Policy{MaxAttempts: math.MaxInt32}},
		{name: "sub-second interval", p: retry.Policy{InitialInterval: 500 * time.Millisecond}},
		{name: "one nanosecond", p: retry.Policy{InitialInterval: time.Nanosecond, MaxInterval: time.Nanosecond}},
		{name: "hours, minutes and fractional seconds", p: retry.Policy{InitialInterval: time.Hour + 2*time.Minute + 3500*time.Millisecond, MaxInterval: 2 * time.Hour}},
		{name: "days", p: retry.Policy{InitialInterval: 36 * time.Hour, MaxInterval: 30 * day}},
		{name: "longest interval", p: retry.Policy{MaxInterval: math.MaxInt64}},
		{name: "coefficient 1", p: retry.Policy{BackoffCoefficient: 1}},
		{name: "fractional coefficient", p: retry.Policy{BackoffCoefficient: 1.5}},
		{name: "huge coefficient", p: retry.Policy{BackoffCoefficient: 1e300}},
		{name: "no jitter", p: retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterNone}}},
		{name: "explicit OJS jitter", p: retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterProportional, Factor: 0.5}}},
		{name: "non-retryable errors", p: retry.Policy{NonRetryableErrors: []string{"ValidationError", "auth.*", "billing.card_declined"}}},
		{name: "dead letter", p: retry.Policy{OnExhaustion: retry.ExhaustDeadLetter}},
		{name: "explicit exponential", p: retry.Policy{Backoff: retry.Exponential}},
		{name: "payment processing", p: retry.Policy{MaxAttempts: 25, InitialInterval: 15 * time.Second, BackoffCoefficient: 4, MaxInterval: time.Hour, NonRetryableErrors: []string{"payment.card_stolen", "validation.*"}, OnExhaustion: retry.ExhaustDeadLetter}},
		{name: "polling", p: retry.Policy{MaxAttempts: 60, InitialInterval: 10 * time.Second, BackoffCoefficient: 1, MaxInterval: 10 * time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}, OnExhaustion: retry.ExhaustDeadLetter}},
		// Extensions: each field appears only when it differs from its default.
		{name: "linear", p: retry.Policy{Backoff: retry.Linear}, ext: []string{"backoff_strategy"}},
		{name: "constant", p: retry.Policy{Backoff: retry.Constant}, ext: []string{"backoff_strategy"}},
		{name: "polynomial", p: retry.Policy{Backoff: retry.Polynomial, BackoffCoefficient: 4}, ext: []string{"backoff_strategy"}},
		{name: "immediate", p: retry.Policy{Backoff: retry.Immediate}, ext: []string{"backoff_strategy"}},
		{name: "offset", p: retry.Policy{Offset: 15 * time.Second}, ext: []string{"delay_offset"}},
		{name: "full jitter", p: retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterFull}}, ext: []string{"jitter"}},
		{name: "proportional 0.2", p: retry.Policy{Jitter: retry.Jitter{Factor: 0.2}}, ext: []string{"jitter"}},
		{name: "zizq", p: zizq(25, 15*time.Second, 4, 30*time.Second), ext: []string{"backoff_strategy", "delay_offset", "jitter"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.p.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if v := ojsSchemaViolations(b, tt.ext...); len(v) != 0 {
				t.Errorf("%s breaks the OJS schema: %q", b, v)
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(b, &fields); err != nil {
				t.Fatal(err)
			}
			for _, name := range ojsExtensions {
				_, has := fields[name]
				if name == "jitter" {
					has = has && fields[name][0] == '{'
				}
				if want := slices.Contains(tt.ext, name); has != want {
					t.Errorf("%s: extension %s written: %v, want %v", b, name, has, want)
				}
			}
			roundTrip(t, tt.p)
		})
	}
}

// TestPolicyJSONIntegers: an integer field takes any JSON number without a
// fractional part, as JSON Schema's "integer" does, and rejects the others
// naming the field, the value and the rule. Durations given as numbers of
// milliseconds follow the same rule.
func TestPolicyJSONIntegers(t *testing.T) {
	good := []struct {
		json string
		want retry.Policy
	}{
		{json: `{"max_attempts": 3.0}`, want: retry.Policy{MaxAttempts: 3}},
		{json: `{"max_attempts": 1e2}`, want: retry.Policy{MaxAttempts: 100}},
		{json: `{"max_attempts": 1E2}`, want: retry.Policy{MaxAttempts: 100}},
		{json: `{"max_attempts": 1e+2}`, want: retry.Policy{MaxAttempts: 100}},
		{json: `{"max_attempts": 2.5e1}`, want: retry.Policy{MaxAttempts: 25}},
		{json: `{"max_attempts": 500e-2}`, want: retry.Policy{MaxAttempts: 5}},
		{json: `{"max_attempts": 0.0}`, want: retry.Policy{MaxAttempts: 1}},
		{json: `{"max_attempts": -0}`, want: retry.Policy{MaxAttempts: 1}},
		{json: `{"max_attempts": -0.0e5}`, want: retry.Policy{MaxAttempts: 1}},
		{json: `{"max_attempts": 0e99999999999}`, want: retry.Policy{MaxAttempts: 1}},
		{json: `{"max_attempts": 2147483647.000}`, want: retry.Policy{MaxAttempts: math.MaxInt32}},
		{json: `{"max_attempts": 2.147483647e9}`, want: retry.Policy{MaxAttempts: math.MaxInt32}},
		{json: `{"initial_interval": 1.5e3}`, want: retry.Policy{InitialInterval: 1500 * time.Millisecond}},
		{json: `{"max_interval": 6e4}`, want: retry.Policy{MaxInterval: time.Minute}},
		{json: `{"initial_interval": 250.0, "max_interval": 2.5e2}`, want: retry.Policy{InitialInterval: 250 * time.Millisecond, MaxInterval: 250 * time.Millisecond}},
		{json: `{"delay_offset": 1e1}`, want: retry.Policy{Offset: 10 * time.Millisecond}},
		{json: `{"jitter": {"kind": "additive", "amount": 3e4}}`, want: retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterAdditive, Amount: 30 * time.Second}}},
		{json: `{"delay_offset": 9223372036854e0}`, want: retry.Policy{Offset: 9223372036854 * time.Millisecond}},
	}
	for _, tt := range good {
		t.Run(tt.json, func(t *testing.T) {
			got, err := retry.ParsePolicy([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if !equalPolicies(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, withDefaults(tt.want))
			}
		})
	}
	bad := []struct{ json, field, value string }{
		{json: `{"max_attempts": 3.5}`, field: "max_attempts", value: "3.5"},
		{json: `{"max_attempts": 1e-1}`, field: "max_attempts", value: "1e-1"},
		{json: `{"max_attempts": 1e-400}`, field: "max_attempts", value: "1e-400"},
		{json: `{"max_attempts": 3.0000000000000001}`, field: "max_attempts", value: "3.0000000000000001"},
		{json: `{"max_attempts": 2.147483648e9}`, field: "max_attempts", value: "2.147483648e9"},
		{json: `{"max_attempts": 1e400}`, field: "max_attempts", value: "1e400"},
		{json: `{"max_attempts": 18446744073709551616}`, field: "max_attempts", value: "18446744073709551616"},
		{json: `{"max_attempts": -1.0}`, field: "max_attempts", value: "-1.0"},
		{json: `{"max_attempts": -1e0}`, field: "max_attempts", value: "-1e0"},
		{json: `{"max_attempts": true}`, field: "max_attempts", value: "true"},
		{json: `{"initial_interval": 1500.5}`, field: "initial_interval", value: "1500.5"},
		{json: `{"max_interval": 1e-3}`, field: "max_interval", value: "1e-3"},
		{json: `{"delay_offset": -1e3}`, field: "delay_offset", value: "-1e3"},
		{json: `{"delay_offset": 9223372036855e0}`, field: "delay_offset", value: "9223372036855e0"},
		{json: `{"jitter": {"kind": "additive", "amount": 0.5}}`, field: "jitter.amount", value: "0.5"},
	}
	for _, tt := range bad {
		t.Run(tt.json, func(t *testing.T) {
			_, err := retry.ParsePolicy([]byte(tt.json))
			checkPolicyError(t, err, tt.field, tt.value)
		})
	}
}

// TestPolicyJSONErrors: bad policy JSON gets one line naming the field, the
// value and the rule: a negative duration the rule Validate states for the
// field, a field beside the wrapper that field, and a malformed document
// the line and column where it goes wrong.
func TestPolicyJSONErrors(t *testing.T) {
	const positive = "must be > 0 (use the immediate strategy for retries without delay)"
	tests := []struct {
		name, json, want string
		goAPI            retry.Policy // the same mistake in Go, when there is one
	}{
		{name: "negative Go duration", json: `{"initial_interval": "-1s"}`, want: `retry: policy: initial_interval = "-1s": ` + positive,
			goAPI: retry.Policy{InitialInterval: -time.Second}},
		{name: "negative milliseconds", json: `{"initial_interval": -5}`, want: `retry: policy: initial_interval = -5: ` + positive,
			goAPI: retry.Policy{InitialInterval: -5 * time.Millisecond}},
		{name: "negative ISO duration", json: `{"max_interval": "-PT1S"}`, want: `retry: policy: max_interval = "-PT1S": must be > 0`,
			goAPI: retry.Policy{MaxInterval: -time.Second}},
		{name: "negative offset", json: `{"delay_offset": "-1s"}`, want: `retry: policy: delay_offset = "-1s": must be >= 0`,
			goAPI: retry.Policy{Offset: -time.Second}},
		{name: "negative offset in milliseconds", json: `{"delay_offset": -5}`, want: `retry: policy: delay_offset = -5: must be >= 0`,
			goAPI: retry.Policy{Offset: -5 * time.Millisecond}},
		{name: "negative jitter amount", json: `{"jitter": {"kind": "additive", "amount": "-1s"}}`, want: `retry: policy: jitter.amount = "-1s": must be > 0 for additive jitter`,
			goAPI: retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterAdditive, Amount: -time.Second}}},
		{name: "minus before no duration", json: `{"delay_offset": "-soon"}`, want: `retry: policy: delay_offset = "-soon": must be a duration: ISO 8601 ("PT1.5S"), Go ("1.5s") or integer milliseconds (1500, 1500.0 or 1.5e3)`},
		{name: "field beside the wrapper", json: `{"retry": {"max_attempts": 5}, "extra": 1}`, want: `retry: policy: extra = 1: must not appear beside "retry": a policy is bare, or alone in {"retry": {...}}`},
		{name: "policy field before the wrapper", json: `{"max_attempts": 5, "retry": {}}`, want: `retry: policy: max_attempts = 5: must not appear beside "retry": a policy is bare, or alone in {"retry": {...}}`},
		{name: "malformed", json: `{bad json`, want: `retry: policy: JSON = {bad json: must be well-formed JSON: invalid character 'b' looking for beginning of object key string at line 1, column 2`},
		{name: "malformed on a later line", json: "{\n  \"max_attempts\": 3,\n  \"jitter\": }\n", want: `retry: policy: JSON = { "max_attempts": 3, "jitter": }: must be well-formed JSON: invalid character '}' looking for beginning of value at line 3, column 13`},
		{name: "trailing comma", json: `{"max_attempts": 3,}`, want: `retry: policy: JSON = {"max_attempts": 3,}: must be well-formed JSON: a comma before '}' at line 1, column 19 (JSON allows no trailing comma)`},
		{name: "trailing comma on a later line", json: "{\n  \"max_attempts\": 3,\n}\n", want: `retry: policy: JSON = { "max_attempts": 3, }: must be well-formed JSON: a comma before '}' at line 2, column 20 (JSON allows no trailing comma)`},
		{name: "trailing comma in a list", json: `{"non_retryable_errors": ["auth.*", ]}`, want: `retry: policy: JSON = {"non_retryable_errors": ["auth.*", ]}: must be well-formed JSON: a comma before ']' at line 1, column 35 (JSON allows no trailing comma)`},
		{name: "cut short", json: `{"max_attempts": 3`, want: `retry: policy: JSON = {"max_attempts": 3: must be well-formed JSON: the input ends early, at line 1, column 19`},
		{name: "data after the object", json: `{"max_attempts": 3} {}`, want: `retry: policy: JSON = {"max_attempts": 3} {}: must be one JSON object: more follows it, at line 1, column 21`},
		{name: "empty", json: ` `, want: `retry: policy: JSON = "": must be a JSON object; the input is empty`},
		{name: "null", json: `null`, want: `retry: policy: JSON = null: must be a JSON object, not null ({} is the default policy)`},
		{name: "null wrapped", json: `{"retry": null}`, want: `retry: policy: retry = null: must be a JSON object`},
		{name: "empty field name", json: `{"": false}`, want: `retry: policy: "" = false: unknown field; the fields are max_attempts, initial_interval, backoff_coefficient, max_interval, backoff_strategy, jitter, non_retryable_errors, on_exhaustion, delay_offset`},
		{name: "field name with a colon", json: `{"jitter": {"a: b": 1}}`, want: `retry: policy: jitter."a: b" = 1: unknown field; the fields are kind, factor, amount`},
		{name: "array", json: `[1, 2]`, want: `retry: policy: JSON = [1, 2]: must be a JSON object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := retry.ParsePolicy([]byte(tt.json))
			if err == nil || err.Error() != tt.want {
				t.Fatalf("ParsePolicy(%q) = %v\nwant %s", tt.json, err, tt.want)
			}
			var pe *retry.PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("%T is not a *PolicyError", err)
			}
			if tt.goAPI.Validate() != nil {
				// The Go API says the same rule for the same field.
				var ge *retry.PolicyError
				if err := tt.goAPI.Validate(); !errors.As(err, &ge) || ge.Field != pe.Field || ge.Rule != pe.Rule {
					t.Errorf("Validate of %+v: %v, want field %q and rule %q", tt.goAPI, err, pe.Field, pe.Rule)
				}
			}
		})
	}
}

// TestPolicyNull: ParsePolicy refuses a JSON null, which is what a missing
// value reads as, while Policy.UnmarshalJSON follows the json.Unmarshaler
// convention and leaves the policy as it was, so that a null field of a
// larger document keeps its Go value.
func TestPolicyNull(t *testing.T) {
	if p, err := retry.ParsePolicy([]byte(" null\n")); err == nil {
		t.Errorf("ParsePolicy(null) = %+v, want an error", p)
	}
	p := retry.Policy{MaxAttempts: 7}
	if err := json.Unmarshal([]byte(`null`), &p); err != nil || p.MaxAttempts != 7 {
		t.Errorf("Unmarshal(null) into a policy: %v, MaxAttempts %d, want it unchanged", err, p.MaxAttempts)
	}
}

// TestPolicyJSON covers partial merge, the wrapper, aliases and round trips.
func TestPolicyJSON(t *testing.T) {
	tests := []struct {
		name string
		json string
		want retry.Policy
	}{
		{name: "empty is the defaults", json: `{}`, want: retry.DefaultPolicy()},
		{name: "empty wrapper is the defaults", json: `{"retry": {}}`, want: retry.DefaultPolicy()},
		{name: "null fields are the defaults", json: `{"max_attempts": null, "jitter": null}`, want: retry.DefaultPolicy()},
		{name: "partial", json: `{"max_attempts": 10}`, want: retry.Policy{MaxAttempts: 10}},
		{name: "zero attempts is one", json: `{"max_attempts": 0}`, want: retry.Policy{MaxAttempts: 1}},
		{name: "long initial raises the default cap", json: `{"initial_interval": "PT10M"}`, want: retry.Policy{InitialInterval: 10 * time.Minute, MaxInterval: 10 * time.Minute}},
		{name: "integer milliseconds", json: `{"initial_interval": 250}`, want: retry.Policy{InitialInterval: 250 * time.Millisecond}},
		{name: "go duration", json: `{"initial_interval": "1m30s"}`, want: retry.Policy{InitialInterval: 90 * time.Second}},
		{name: "jitter false", json: `{"jitter": false}`, want: retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterNone}}},
		{name: "jitter object", json: `{"jitter": {"kind": "full"}}`, want: retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterFull}}},
		{name: "jitter kind defaults to proportional", json: `{"jitter": {"factor": 0.25}}`, want: retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterProportional, Factor: 0.25}}},
		{name: "dead letter", json: `{"on_exhaustion": "dead_letter", "non_retryable_errors": ["auth.*"]}`,
			want: retry.Policy{OnExhaustion: retry.ExhaustDeadLetter, NonRetryableErrors: []string{"auth.*"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := retry.ParsePolicy([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if !equalPolicies(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, withDefaults(tt.want))
			}
			roundTrip(t, got)
		})
	}
	t.Run("canonical form", func(t *testing.T) {
		b, err := retry.DefaultPolicy().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		const want = `{"max_attempts":3,"initial_interval":"PT1S","backoff_coefficient":2,"max_interval":"PT5M","jitter":true,"non_retryable_errors":[],"on_exhaustion":"discard"}`
		if string(b) != want {
			t.Errorf("got  %s\nwant %s", b, want)
		}
	})
	t.Run("seed policies round-trip", func(t *testing.T) {
		for _, tc := range seedCases {
			roundTrip(t, tc.policy)
		}
	})
	t.Run("invalid policy does not marshal", func(t *testing.T) {
		if _, err := (retry.Policy{MaxAttempts: -1}).MarshalJSON(); err == nil {
			t.Error("want an error")
		}
	})
}

// policyErrorShape is the shape of every policy error, on one line.
var policyErrorShape = regexp.MustCompile(`^retry: policy: (?:[A-Za-z_.\[\]0-9]+|(?:jitter\.)?"(?:[^"\\]|\\.)*") = [^\n]+: [^\n]+$`)

func FuzzParsePolicy(f *testing.F) {
	for _, tc := range seedCases {
		f.Add(tc.json)
	}
	f.Add(`{"retry": {"max_attempts": 0, "jitter": {"kind": "decorrelated"}, "on_exhaustion": "dead_letter", "non_retryable_errors": ["a.*", "b"]}}`)
	f.Add(`{"jitter": {"kind": "additive", "amount": 1}, "delay_offset": "P1W"}`)
	f.Add(`{"max_attempts": 1e3}`)
	for _, v := range rtrVectors {
		f.Add(v.policy)
	}
	for _, s := range []string{
		`{"max_attempts": 3.0, "initial_interval": 1.5e3}`, `{"max_attempts": 3.5}`, `{"max_attempts": -0.0e5}`,
		`{"max_attempts": 2.147483648e9}`, `{"delay_offset": 1e-3}`, `{"initial_interval": "PT.5S"}`,
		`{"max_interval": "PT1.5H30M"}`, `{"max_interval": "PT1H0.5S"}`, `{"non_retryable_errors": ["a.*", "b", "a.*"]}`,
	} {
		f.Add(s)
	}
	for _, s := range []string{`{"initial_interval": "-1s"}`, `{"delay_offset": -5}`, `{"retry": {"max_attempts": 5}, "extra": 1}`,
		`{bad json`, "{\n\"jitter\": }", `null`, ``, `{"retry": null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := retry.ParsePolicy([]byte(s))
		if err != nil {
			var pe *retry.PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *PolicyError", err, err)
			}
			if msg := err.Error(); !policyErrorShape.MatchString(msg) || pe.Field == "" || pe.Value == "" || pe.Rule == "" {
				t.Fatalf("error %q is not one line of the shape %s", msg, policyErrorShape)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("parsed policy invalid: %v", err)
		}
		b, err := p.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		q, err := retry.ParsePolicy(b)
		if err != nil {
			t.Fatalf("canonical %s does not parse: %v", b, err)
		}
		b2, _ := q.MarshalJSON()
		if string(b) != string(b2) {
			t.Fatalf("round trip %s → %s", b, b2)
		}
		// The OJS fields are valid OJS, and a policy that uses only OJS
		// features writes nothing else.
		if v := ojsSchemaViolations(b, ojsExtensions...); len(v) != 0 {
			t.Fatalf("%s breaks the OJS schema: %q", b, v)
		}
		ojsOnly := p.Backoff == retry.Exponential && p.Offset == 0 &&
			(p.Jitter == retry.Jitter{Kind: retry.JitterNone} || p.Jitter == retry.Jitter{Kind: retry.JitterProportional, Factor: 0.5})
		if v := ojsSchemaViolations(b); ojsOnly && len(v) != 0 {
			t.Fatalf("%s of an OJS-only policy breaks the OJS schema: %q", b, v)
		}
		for _, n := range []int{1, 2, 10, math.MaxInt32} {
			if d := p.Delay(n); d < 0 || d > p.MaxInterval || d != q.Delay(n) {
				t.Fatalf("Delay(%d) = %v / %v with cap %v", n, d, q.Delay(n), p.MaxInterval)
			}
		}
	})
}
