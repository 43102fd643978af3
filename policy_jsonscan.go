package retry

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The reading of JSON objects for ParsePolicy: fields in order, repeated
// names, trailing commas and positions for errors, whole numbers in any
// JSON form, and values clipped for display.

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
