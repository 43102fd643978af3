package retry

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
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
// field, the value and the rule.
func ParsePolicy(data []byte) (Policy, error) {
	var p Policy
	if err := p.UnmarshalJSON(data); err != nil {
		return Policy{}, err
	}
	return p.WithDefaults(), nil
}

// UnmarshalJSON reads p from the OJS JSON form; see ParsePolicy. Whatever p
// held before is replaced: omitted fields take the defaults. A JSON null
// leaves p as it was.
func (p *Policy) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil // the json.Unmarshaler convention: null changes nothing
	}
	fields, err := jsonObject(data, "")
	if err != nil {
		return err
	}
	if len(fields) == 1 && fields[0].name == "retry" {
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
	*p = q.WithDefaults()
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

// jsonObject splits a JSON object into its fields, in order, rejecting
// repeated names and trailing data. where names the object in errors.
func jsonObject(data []byte, where string) ([]jsonField, error) {
	field := where
	if field == "" {
		field = "(policy)"
	}
	notObject := func(detail string) error {
		return &PolicyError{Field: field, Value: clip(string(data)), Rule: "must be a JSON object" + detail}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, notObject(": " + err.Error())
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, notObject("")
	}
	var fields []jsonField
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notObject(": " + err.Error())
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, notObject(": " + err.Error())
		}
		for _, f := range fields {
			if f.name == name {
				return nil, &PolicyError{Field: qualify(where, name), Value: clip(string(raw)), Rule: "must appear only once"}
			}
		}
		fields = append(fields, jsonField{name, raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, notObject(": " + err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, notObject(": data after the object")
	}
	return fields, nil
}

func qualify(where, name string) string {
	if where == "" || where == "retry" {
		return name
	}
	return where + "." + name
}

// clip bounds a value quoted in an error.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

const durationRule = `must be a duration: ISO 8601 ("PT1.5S"), Go ("1.5s") or integer milliseconds (1500, 1500.0 or 1.5e3)`

// durationRuleFor is the rule a bad duration breaks: durationRule, with
// what is wrong when the value is meant as ISO 8601.
func durationRuleFor(err error) string {
	var ie *isoError
	if errors.As(err, &ie) {
		return durationRule + "; as ISO 8601, " + ie.why
	}
	return durationRule
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
		d, err := jsonDuration(raw)
		switch {
		case err != nil:
			return bad(durationRuleFor(err))
		case d <= 0 && name == "initial_interval":
			return bad("must be > 0 (use the immediate strategy for retries without delay)")
		case d <= 0:
			return bad("must be > 0")
		}
		if name == "initial_interval" {
			p.InitialInterval = d
		} else {
			p.MaxInterval = d
		}
	case "delay_offset":
		d, err := jsonDuration(raw)
		if err != nil {
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
		return &PolicyError{Field: name, Value: clip(string(raw)), Rule: "unknown field; the fields are " + strings.Join(policyFields, ", ")}
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
			return &PolicyError{Field: "jitter." + f.name, Value: clip(string(f.raw)), Rule: rule}
		}
		switch f.name {
		case "kind":
			var s string
			if json.Unmarshal(f.raw, &s) != nil {
				return Jitter{}, bad("must be a string")
			}
			k, ok := jitterByName(s)
			if !ok {
				return Jitter{}, bad(`must be "none", "proportional", "percent", "additive", "full", "equal" or "decorrelated"`)
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
			if err != nil {
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
	switch k := JitterKind(s); k {
	case JitterNone, JitterProportional, JitterPercent, JitterAdditive, JitterFull, JitterEqual, JitterDecorrelated:
		return k, true
	}
	return "", false
}

// jsonDuration reads a duration given as a JSON string or as a JSON number
// of milliseconds without a fractional part.
func jsonDuration(raw json.RawMessage) (time.Duration, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		return ParseDuration(s)
	}
	n, neg, ok := jsonWhole(raw)
	if !ok || neg && n != 0 || n > uint64(math.MaxInt64/int64(time.Millisecond)) {
		return 0, errors.New("retry: " + clip(string(raw)) + " is not a whole number of milliseconds in range")
	}
	return time.Duration(n) * time.Millisecond, nil
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
	p = p.WithDefaults()
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

// formatDuration writes d in ISO 8601, the form ParseDuration reads back
// exactly: "PT1.5S", "PT5M", "P1DT2H", "PT0S". Days are 24 hours. A negative
// duration is written with a leading minus sign.
func formatDuration(d time.Duration) string {
	return string(appendISO(nil, d))
}

func appendISO(b []byte, d time.Duration) []byte {
	if d == 0 {
		return append(b, "PT0S"...)
	}
	u := uint64(d)
	if d < 0 {
		b = append(b, '-')
		u = -u
	}
	b = append(b, 'P')
	day := uint64(24 * time.Hour)
	if days := u / day; days > 0 {
		b = strconv.AppendUint(b, days, 10)
		b = append(b, 'D')
		u %= day
	}
	if u == 0 {
		return b
	}
	b = append(b, 'T')
	if h := u / uint64(time.Hour); h > 0 {
		b = strconv.AppendUint(b, h, 10)
		b = append(b, 'H')
		u %= uint64(time.Hour)
	}
	if m := u / uint64(time.Minute); m > 0 {
		b = strconv.AppendUint(b, m, 10)
		b = append(b, 'M')
		u %= uint64(time.Minute)
	}
	if u > 0 {
		b = strconv.AppendUint(b, u/uint64(time.Second), 10)
		if frac := u % uint64(time.Second); frac > 0 {
			digits := strconv.AppendUint(nil, frac+uint64(time.Second), 10)[1:] // nine digits
			b = append(b, '.')
			b = append(b, bytes.TrimRight(digits, "0")...)
		}
		b = append(b, 'S')
	}
	return b
}

// ParseDuration reads a non-negative duration written in ISO 8601
// ("PT0.5S", "PT1H30M", "P1D", "P1W"; days are 24 hours, years and months
// are refused for having no fixed length), as a Go duration ("1.5s",
// "250ms") or as an integer number of milliseconds ("1500"). In ISO 8601,
// the last component may have a decimal fraction, written with a point or a
// comma between digits ("PT0.5S", not "PT.5S" or "PT5.S").
func ParseDuration(s string) (time.Duration, error) {
	switch {
	case s == "":
		return 0, errors.New("retry: empty duration")
	case s[0] == 'P' || s[0] == 'p':
		return parseISO(s)
	case s[0] == '-':
		return 0, errors.New("retry: duration " + strconv.Quote(clip(s)) + " is negative")
	case allDigits(s):
		return parseMillis(s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("retry: " + strconv.Quote(clip(s)) + " is not a duration: ISO 8601 (\"PT1.5S\"), Go (\"1.5s\") or integer milliseconds")
	}
	if d < 0 {
		return 0, errors.New("retry: duration " + strconv.Quote(clip(s)) + " is negative")
	}
	return d, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parseMillis reads an integer number of milliseconds.
func parseMillis(s string) (time.Duration, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errors.New("retry: " + strconv.Quote(clip(s)) + " is not an integer number of milliseconds in range")
	}
	if n > uint64(math.MaxInt64/int64(time.Millisecond)) {
		return 0, errors.New("retry: " + strconv.Quote(clip(s)) + " milliseconds is out of range")
	}
	return time.Duration(n) * time.Millisecond, nil
}

// isoUnits are the ISO 8601 designators we accept, in the order they must
// appear; time components follow 'T'.
var isoUnits = [...]struct {
	c    byte
	time bool
	d    time.Duration
}{
	{'W', false, 7 * 24 * time.Hour},
	{'D', false, 24 * time.Hour},
	{'H', true, time.Hour},
	{'M', true, time.Minute},
	{'S', true, time.Second},
}

// isoError is a string that is not an ISO 8601 duration we accept, and why.
type isoError struct{ s, why string }

func (e *isoError) Error() string {
	return "retry: ISO 8601 duration " + strconv.Quote(clip(e.s)) + ": " + e.why
}

func parseISO(s string) (time.Duration, error) {
	bad := func(why string) (time.Duration, error) {
		return 0, &isoError{s, why}
	}
	rest := strings.ToUpper(s[1:])
	var total uint64
	next := 0 // index of the first designator still allowed
	inTime, components, fraction := false, 0, false
	for rest != "" {
		if rest[0] == 'T' {
			if inTime {
				return bad("repeated T")
			}
			inTime = true
			next = 2
			rest = rest[1:]
			if rest == "" {
				return bad("no component after T")
			}
			continue
		}
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.' || rest[i] == ',') {
			i++
		}
		if i == 0 || i == len(rest) {
			return bad("expected a number followed by a designator")
		}
		num, c := rest[:i], rest[i]
		rest = rest[i+1:]
		if c == 'Y' || c == 'M' && !inTime {
			return bad("years and months have no fixed length; use weeks, days or hours")
		}
		u := -1
		for k := next; k < len(isoUnits); k++ {
			if isoUnits[k].c == c && isoUnits[k].time == inTime {
				u = k
				break
			}
		}
		if u < 0 {
			return bad("unexpected or out-of-order designator " + strconv.Quote(string(c)))
		}
		if fraction {
			return bad("only the last component may have a decimal fraction")
		}
		next = u + 1
		v, why := isoComponent(num, uint64(isoUnits[u].d))
		if why != "" {
			return bad(strconv.Quote(num) + " " + why)
		}
		fraction = strings.ContainsAny(num, ".,")
		var carry uint64
		total, carry = bits.Add64(total, v, 0)
		if carry != 0 || total > math.MaxInt64 {
			return bad("out of range")
		}
		components++
	}
	if components == 0 {
		return bad("no components")
	}
	return time.Duration(total), nil
}

// isoComponent returns num units, num being digits with an optional decimal
// fraction, rounded to the nanosecond; why says what is wrong with num, if
// anything.
func isoComponent(num string, unit uint64) (v uint64, why string) {
	whole, frac, hasFrac := strings.Cut(strings.ReplaceAll(num, ",", "."), ".")
	switch {
	case strings.Contains(frac, "."):
		return 0, "has more than one decimal sign"
	case whole == "":
		return 0, `needs a digit before its decimal sign ("0.5", not ".5")`
	case hasFrac && frac == "":
		return 0, `needs a digit after its decimal sign ("5" or "5.0", not "5.")`
	}
	const outOfRange = "is out of range"
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil {
		return 0, outOfRange
	}
	hi, v := bits.Mul64(w, unit)
	if hi != 0 {
		return 0, outOfRange
	}
	if frac != "" {
		if len(frac) > 18 {
			frac = frac[:18] // beyond a nanosecond of a week
		}
		f, _ := strconv.ParseUint(frac, 10, 64) // at most 18 digits
		den := uint64(1)
		for range len(frac) {
			den *= 10
		}
		hi, lo := bits.Mul64(f, unit)
		q, r := bits.Div64(hi, lo, den)
		if r >= den-r {
			q++
		}
		var carry uint64
		if v, carry = bits.Add64(v, q, 0); carry != 0 {
			return 0, outOfRange
		}
	}
	return v, ""
}
