package retry

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

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

// negativeError is a duration that would be valid but for its minus sign.
type negativeError struct{ s string }

func (e *negativeError) Error() string {
	return "retry: duration " + strconv.Quote(clip(e.s)) + " is negative"
}

// isNegative reports whether err is that of a negative duration.
func isNegative(err error) bool {
	var ne *negativeError
	return errors.As(err, &ne)
}

// jsonDuration reads a duration given as a JSON string or as a JSON number
// of milliseconds without a fractional part. A negative duration, string or
// number, is a *negativeError.
func jsonDuration(raw json.RawMessage) (time.Duration, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		return ParseDuration(s)
	}
	n, neg, ok := jsonWhole(raw)
	if ok && neg && n != 0 {
		return 0, &negativeError{string(raw)}
	}
	if !ok || n > uint64(math.MaxInt64/int64(time.Millisecond)) {
		return 0, errors.New("retry: " + clip(string(raw)) + " is not a whole number of milliseconds in range")
	}
	return time.Duration(n) * time.Millisecond, nil
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
// comma between digits ("PT0.5S", not "PT.5S" or "PT5.S"). A duration of
// any of these forms with a minus sign is refused as negative, not as
// unreadable.
func ParseDuration(s string) (time.Duration, error) {
	switch {
	case s == "":
		return 0, errors.New("retry: empty duration")
	case s[0] == 'P' || s[0] == 'p':
		return parseISO(s)
	case s[0] == '-':
		if d, err := time.ParseDuration(s); err == nil && d < 0 {
			return 0, &negativeError{s} // such as the least Duration, whose magnitude overflows
		}
		switch d, err := ParseDuration(s[1:]); {
		case err != nil:
			return 0, notDuration(s)
		case d == 0:
			return 0, nil // "-0s", as JSON's -0
		}
		return 0, &negativeError{s}
	case allDigits(s):
		return parseMillis(s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, notDuration(s)
	}
	return d, nil // not negative: s does not begin with a minus sign
}

// notDuration is the error of a string that is no duration ParseDuration
// reads.
func notDuration(s string) error {
	return errors.New("retry: " + strconv.Quote(cut(s)) + " is not a duration: ISO 8601 (\"PT1.5S\"), Go (\"1.5s\") or integer milliseconds")
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
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			// strings.ToUpper would read some, such as "ſ", as ASCII.
			return bad("non-ASCII character")
		}
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
			return bad(strconv.Quote(cut(num)) + " " + why)
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
