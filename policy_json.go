package retry

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
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

type jsonField struct {
	name string
	raw  json.RawMessage
}

// documentField is the field a PolicyError names when the document itself,
// rather than one of its fields, is wrong.
const documentField = "JSON"

func isNull(data []byte) bool { return string(bytes.TrimSpace(data)) == "null" }

// jsonObject splits a JSON object into its fields, in order, rejecting
// repeated names and trailing data. where names the object in errors; ""
// is the whole document.
func jsonObject(data []byte, where string) ([]jsonField, error) {
	field, value := where, clip(string(data))
	if field == "" {
		field = documentField
	}
	if len(bytes.TrimSpace(data)) == 0 {
		value = `""`
	}
	notObject := func(err error) error {
		rule := "must be a JSON object"
		if err != nil {
			rule += "; " + err.Error()
		}
		return &PolicyError{Field: field, Value: value, Rule: rule}
	}
	malformed := func(what string) error {
		return &PolicyError{Field: field, Value: value, Rule: "must be well-formed JSON: " + what}
	}
	// Malformed JSON, found by a scan of the whole document, which gives
	// the offending byte's offset (the decoder's offsets are relative to
	// the value it reads).
	var whole json.RawMessage
	if err := json.Unmarshal(data, &whole); err != nil {
		var se *json.SyntaxError
		switch {
		case len(bytes.TrimSpace(data)) == 0:
			return nil, notObject(errors.New("the input is empty"))
		case !errors.As(err, &se):
			return nil, notObject(err)
		case strings.HasPrefix(se.Error(), "unexpected end"):
			return nil, malformed("the input ends early, at " + position(data, int64(len(data))))
		case strings.Contains(se.Error(), "after top-level value"):
			return nil, &PolicyError{Field: field, Value: value, Rule: "must be one JSON object: more follows it, at " + position(data, se.Offset-1)}
		}
		// se.Offset counts the offending byte.
		if comma, end, ok := trailingComma(data, se.Offset-1); ok {
			return nil, malformed("a comma before '" + string(end) + "' at " + position(data, comma) + " (JSON allows no trailing comma)")
		}
		return nil, malformed(se.Error() + " at " + position(data, se.Offset-1))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, notObject(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, notObject(nil)
	}
	var fields []jsonField
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notObject(err)
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, notObject(err)
		}
		for _, f := range fields {
			if f.name == name {
				return nil, &PolicyError{Field: qualify(where, shownName(name)), Value: clip(string(raw)), Rule: "must appear only once"}
			}
		}
		fields = append(fields, jsonField{name, raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, notObject(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, notObject(errors.New("data follows it")) // caught above
	}
	return fields, nil
}

// trailingComma reports whether the byte at off, where a JSON scan failed,
// closes an object or array right after a comma, and the comma's offset.
func trailingComma(data []byte, off int64) (comma int64, end byte, ok bool) {
	if off < 0 || off >= int64(len(data)) || data[off] != '}' && data[off] != ']' {
		return 0, 0, false
	}
	before := bytes.TrimRight(data[:off], " \t\r\n")
	if len(before) == 0 || before[len(before)-1] != ',' {
		return 0, 0, false
	}
	return int64(len(before) - 1), data[off], true
}

// position names the byte at offset off of data by its line and column,
// both from 1; the column counts bytes.
func position(data []byte, off int64) string {
	off = max(0, min(off, int64(len(data))))
	before := data[:off]
	line := 1 + bytes.Count(before, []byte("\n"))
	col := off - int64(bytes.LastIndexByte(before, '\n'))
	return "line " + strconv.Itoa(line) + ", column " + strconv.FormatInt(col, 10)
}

// shownName is a field name as an error shows it: as it is when it is a
// plain name of letters, digits and underscores, quoted otherwise (an
// empty name, or one with spaces, dots or colons, would blur the error).
func shownName(name string) string {
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return strconv.Quote(clip(name))
		}
	}
	if name == "" {
		return `""`
	}
	return name
}

func qualify(where, name string) string {
	if where == "" || where == "retry" {
		return name
	}
	return where + "." + name
}

// clip bounds a value quoted in an error, and puts it on one line.
func clip(s string) string {
	if strings.ContainsAny(s, "\n\r\t") {
		s = strings.Join(strings.Fields(s), " ")
	}
	return cut(s)
}

// cut shortens s to at most 64 bytes, at a character's boundary, and marks
// the cut with "...".
func cut(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
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

// jsonWhole reads a JSON number whose value is an integer, whatever its
// form ("3", "3.0", "1e2", "2.5e1", "-0"), as JSON Schema's "integer" does.
// It returns the magnitude and the sign; ok is false for anything else: not
// a number, a value with a fractional part ("3.5", "1e-1"), or a magnitude
// beyond uint64.
func jsonWhole(raw []byte) (n uint64, neg, ok bool) {
	s := string(raw)
	if neg = strings.HasPrefix(s, "-"); neg {
		s = s[1:]
	}
	mant, exp10, hasExp := strings.Cut(s, "e")
	if !hasExp {
		mant, exp10, hasExp = strings.Cut(s, "E")
	}
	whole, frac, _ := strings.Cut(mant, ".")
	if !allDigits(whole) || len(whole) > 1 && whole[0] == '0' || frac != "" && !allDigits(frac) || strings.HasSuffix(mant, ".") {
		return 0, false, false
	}
	exp := 0
	if hasExp {
		digits := strings.TrimLeft(exp10, "+-")
		if !allDigits(digits) || len(exp10)-len(digits) > 1 {
			return 0, false, false
		}
		digits = strings.TrimLeft(digits, "0")
		if len(digits) > 6 {
			digits = "999999" // any larger exponent gives the same answer
		}
		exp, _ = strconv.Atoi("0" + digits)
		if exp10[0] == '-' {
			exp = -exp
		}
	}
	// The value is sig·10^exp, sig without leading or trailing zeros.
	sig := strings.TrimLeft(whole+frac, "0")
	exp -= len(frac)
	if sig == "" {
		return 0, neg, true // zero, whatever its exponent
	}
	for strings.HasSuffix(sig, "0") {
		sig = sig[:len(sig)-1]
		exp++
	}
	if exp < 0 || len(sig)+exp > 20 {
		return 0, false, false // a fraction, or beyond uint64
	}
	n, err := strconv.ParseUint(sig, 10, 64)
	for ; err == nil && exp > 0; exp-- {
		var hi uint64
		if hi, n = bits.Mul64(n, 10); hi != 0 {
			return 0, false, false
		}
	}
	return n, neg, err == nil
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
