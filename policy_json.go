package retry

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ParsePolicy reads a policy in the OJS JSON form, bare or wrapped in
// {"retry": {...}}. Omitted fields take their defaults (a partial policy is
// merged over the defaults), and the result has every field filled in.
//
// Durations are ISO 8601 ("PT0.5S", "PT1H", "P1D"), Go ("1.5s", "250ms") or
// a whole number of milliseconds. A whole number is any JSON number without
// a fractional part (3, 3.0, 1e2), as JSON Schema's "integer" is; this holds
// for "max_attempts" too. "jitter" is true (proportional ±50%),
// false, or an object {"kind": k, "factor": f, "amount": d}. An explicit
// "max_attempts": 0 means one attempt, as OJS says. Unknown or repeated
// fields and invalid values are rejected with a *PolicyError naming the
// field, the value and the rule; a document that is not one JSON object,
// JSON null included, with the field "JSON" and, when it is malformed, the
// line and column where it goes wrong (a trailing comma is named as one,
// at the comma). ({} is the default policy; null is
// refused because it is what a missing value reads as, not a policy.)
func ParsePolicy(data []byte) (Policy, error) {
	var p Policy
	if isNull(data) {
		return Policy{}, &PolicyError{Field: documentField, Value: "null", Rule: "must be a JSON object, not null ({} is the default policy)"}
	}
	if err := p.UnmarshalJSON(data); err != nil {
		return Policy{}, err
	}
	return p.withDefaults(), nil
}

// UnmarshalJSON reads p from the OJS JSON form; see ParsePolicy. Whatever p
// held before is replaced: omitted fields take the defaults. A JSON null
// leaves p as it was.
func (p *Policy) UnmarshalJSON(data []byte) error {
	if isNull(data) {
		return nil // the json.Unmarshaler convention: null changes nothing
	}
	fields, err := jsonObject(data, "")
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(fields, func(f jsonField) bool { return f.name == "retry" }); i >= 0 {
		if len(fields) > 1 {
			other := fields[0]
			if i == 0 {
				other = fields[1]
			}
			return &PolicyError{Field: shownName(other.name), Value: clip(string(other.raw)), Rule: `must not appear beside "retry": a policy is bare, or alone in {"retry": {...}}`}
		}
		if fields, err = jsonObject(fields[0].raw, "retry"); err != nil {
			return err
		}
	}
	var q Policy
	for _, f := range fields {
		if err := q.setField(f.name, f.raw); err != nil {
			return err
		}
	}
	if err := q.Validate(); err != nil {
		return err
	}
	*p = q.withDefaults()
	return nil
}

// policyFields are the JSON fields of a policy, in canonical order.
var policyFields = []string{
	"max_attempts", "initial_interval", "backoff_coefficient", "max_interval",
	"backoff_strategy", "jitter", "non_retryable_errors", "on_exhaustion", "delay_offset",
}

func (p *Policy) setField(name string, raw json.RawMessage) error {
	if string(raw) == "null" {
		return nil // null is an omitted field: the default
	}
	bad := func(rule string) error {
		return &PolicyError{Field: name, Value: clip(string(raw)), Rule: rule}
	}
	switch name {
	case "max_attempts":
		n, neg, ok := jsonWhole(raw)
		if !ok || neg && n != 0 || n > math.MaxInt32 {
			return bad("must be an integer in [0, 2147483647] (0 and 1 both mean one attempt; 3, 3.0 and 3e0 are integers, 3.5 is not)")
		}
		p.MaxAttempts = max(int(n), 1)
	case "initial_interval", "max_interval":
		// The rules of Validate, in its words.
		rule := "must be > 0"
		if name == "initial_interval" {
			rule += " (use the immediate strategy for retries without delay)"
		}
		d, err := jsonDuration(raw)
		switch {
		case isNegative(err) || err == nil && d <= 0:
			return bad(rule)
		case err != nil:
			return bad(durationRuleFor(err))
		}
		if name == "initial_interval" {
			p.InitialInterval = d
		} else {
			p.MaxInterval = d
		}
	case "delay_offset":
		d, err := jsonDuration(raw)
		switch {
		case isNegative(err):
			return bad("must be >= 0")
		case err != nil:
			return bad(durationRuleFor(err))
		}
		p.Offset = d
	case "backoff_coefficient":
		c, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || raw[0] == '"' || math.IsInf(c, 0) || !(c >= 1) {
			return bad("must be a finite number >= 1.0")
		}
		p.BackoffCoefficient = c
	case "backoff_strategy":
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return bad("must be a string")
		}
		st, ok := strategyByName(s)
		if !ok {
			return bad(`must be "constant" (or "none", "fixed"), "linear", "exponential", "polynomial" or "immediate"`)
		}
		p.Backoff = st
	case "jitter":
		j, err := parseJitter(raw)
		if err != nil {
			return err
		}
		p.Jitter = j
	case "non_retryable_errors":
		var pats []string
		if json.Unmarshal(raw, &pats) != nil {
			return bad("must be an array of strings")
		}
		p.NonRetryableErrors = pats
	case "on_exhaustion":
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return bad("must be a string")
		}
		switch s {
		case "discard":
			p.OnExhaustion = ExhaustDiscard
		case "dead_letter":
			p.OnExhaustion = ExhaustDeadLetter
		default:
			return bad(`must be "discard" or "dead_letter"`)
		}
	default:
		return &PolicyError{Field: shownName(name), Value: clip(string(raw)), Rule: "unknown field; the fields are " + strings.Join(policyFields, ", ")}
	}
	return nil
}

func strategyByName(s string) (Strategy, bool) {
	switch s {
	case "none", "fixed":
		return Constant, true
	}
	switch st := Strategy(s); st {
	case Constant, Linear, Exponential, Polynomial, Immediate:
		return st, true
	}
	return "", false
}

func parseJitter(raw json.RawMessage) (Jitter, error) {
	switch string(raw) {
	case "true":
		return Jitter{Kind: JitterProportional, Factor: defaultJitterFactor}, nil
	case "false":
		return Jitter{Kind: JitterNone}, nil
	}
	if raw[0] != '{' {
		return Jitter{}, &PolicyError{Field: "jitter", Value: clip(string(raw)), Rule: `must be true, false or an object {"kind": ..., "factor": ..., "amount": ...}`}
	}
	fields, err := jsonObject(raw, "jitter")
	if err != nil {
		return Jitter{}, err
	}
	j := Jitter{Kind: JitterProportional}
	for _, f := range fields {
		bad := func(rule string) error {
			return &PolicyError{Field: "jitter." + shownName(f.name), Value: clip(string(f.raw)), Rule: rule}
		}
		switch f.name {
		case "kind":
			var s string
			if json.Unmarshal(f.raw, &s) != nil {
				return Jitter{}, bad("must be a string")
			}
			k, ok := jitterByName(s)
			if !ok {
				return Jitter{}, bad("must be " + jitterKindList(true))
			}
			j.Kind = k
		case "factor":
			v, err := strconv.ParseFloat(string(f.raw), 64)
			if err != nil || f.raw[0] == '"' || !(v > 0 && v <= 1) {
				return Jitter{}, bad("must be a number in (0, 1]")
			}
			j.Factor = v
		case "amount":
			d, err := jsonDuration(f.raw)
			switch {
			case isNegative(err):
				return Jitter{}, bad("must be > 0 for additive jitter")
			case err != nil:
				return Jitter{}, bad(durationRuleFor(err))
			}
			j.Amount = d
		default:
			return Jitter{}, bad("unknown field; the fields are kind, factor, amount")
		}
	}
	if err := j.validate(); err != nil {
		return Jitter{}, err
	}
	return j.withDefaults(), nil
}

func jitterByName(s string) (JitterKind, bool) {
	k := JitterKind(s)
	return k, slices.Contains(jitterKinds[:], k)
}

// MarshalJSON writes p in canonical OJS form: the seven OJS fields with
// defaults filled in, durations in ISO 8601, in the order of the OJS
// documentation. What OJS has no field for is written only when it differs
// from its default: "backoff_strategy" when it is not exponential,
// "delay_offset" when it is set, and "jitter" as an object when it is not
// OJS's proportional ±50% or none. So a policy that uses only OJS features
// gives a document that the OJS retry-policy schema accepts. ParsePolicy
// reads the output back to the same policy. An invalid policy is an error.
func (p Policy) MarshalJSON() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	b := make([]byte, 0, 256)
	b = append(b, `{"max_attempts":`...)
	b = strconv.AppendInt(b, int64(p.MaxAttempts), 10)
	b = append(b, `,"initial_interval":"`...)
	b = appendISO(b, p.InitialInterval)
	b = append(b, `","backoff_coefficient":`...)
	b = strconv.AppendFloat(b, p.BackoffCoefficient, 'g', -1, 64)
	b = append(b, `,"max_interval":"`...)
	b = appendISO(b, p.MaxInterval)
	b = append(b, '"')
	if p.Backoff != Exponential {
		b = append(b, `,"backoff_strategy":"`...)
		b = append(b, p.Backoff...)
		b = append(b, '"')
	}
	b = append(b, `,"jitter":`...)
	b = appendJitter(b, p.Jitter)
	b = append(b, `,"non_retryable_errors":`...)
	if len(p.NonRetryableErrors) == 0 {
		b = append(b, "[]"...)
	} else {
		pats, err := json.Marshal(p.NonRetryableErrors)
		if err != nil {
			return nil, err
		}
		b = append(b, pats...)
	}
	b = append(b, `,"on_exhaustion":"`...)
	b = append(b, p.OnExhaustion...)
	b = append(b, '"')
	if p.Offset != 0 {
		b = append(b, `,"delay_offset":"`...)
		b = appendISO(b, p.Offset)
		b = append(b, '"')
	}
	return append(b, '}'), nil
}

func appendJitter(b []byte, j Jitter) []byte {
	switch {
	case j.Kind == JitterNone:
		return append(b, "false"...)
	case j.Kind == JitterProportional && j.Factor == defaultJitterFactor:
		return append(b, "true"...)
	}
	b = append(b, `{"kind":"`...)
	b = append(b, j.Kind...)
	b = append(b, '"')
	if j.Factor != 0 {
		b = append(b, `,"factor":`...)
		b = strconv.AppendFloat(b, j.Factor, 'g', -1, 64)
	}
	if j.Amount != 0 {
		b = append(b, `,"amount":"`...)
		b = appendISO(b, j.Amount)
		b = append(b, '"')
	}
	return append(b, '}')
}
