package retry_test

import (
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/steadyhq/retry"
)

func TestParseDuration(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{in: "PT1S", want: time.Second},
		{in: "PT0.5S", want: 500 * time.Millisecond},
		{in: "PT0,5S", want: 500 * time.Millisecond},
		{in: "PT0.001S", want: time.Millisecond},
		{in: "PT0.000000001S", want: time.Nanosecond},
		{in: "PT0.0000000015S", want: 2 * time.Nanosecond},
		{in: "PT1H", want: time.Hour},
		{in: "PT1H30M", want: 90 * time.Minute},
		{in: "PT1.5H", want: 90 * time.Minute},
		{in: "P1D", want: day},
		{in: "P1DT12H", want: 36 * time.Hour},
		{in: "P2W", want: 14 * day},
		{in: "pt5m", want: 5 * time.Minute},
		{in: "PT0S"},
		{in: "1.5s", want: 1500 * time.Millisecond},
		{in: "250ms", want: 250 * time.Millisecond},
		{in: "1h2m3s", want: time.Hour + 2*time.Minute + 3*time.Second},
		{in: "1500", want: 1500 * time.Millisecond},
		{in: "0"},
		{in: "PT2562047H47M16.854775807S", want: 1<<63 - 1},
		{in: "PT1H0.5S", want: time.Hour + 500*time.Millisecond},
		{in: "PT0.5H", want: 30 * time.Minute},
		{in: "P1.5D", want: 36 * time.Hour},
		{in: "P1W2D", want: 9 * day},
		{in: "PT01S", want: time.Second},
	}
	for _, tt := range good {
		got, err := retry.ParseDuration(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	bad := []string{"", "P", "PT", "P1Y", "P1M", "PT1D", "P1H", "PT1S1M", "PT1M1M", "P1DT", "PTS", "PT1..5S", "PT.S",
		"-PT1S", "-1s", "1 s", "s", "PT2562047H47M16.854775808S", "P106752D", "99999999999999999999", "9223372036855", "PT1,5.5S", "PTT1S",
		"PT.5S", "PT,5S", "P.5D", "PT5.S", "PT1.5H30M", "P1.5DT1H", "PT1.5M1.5S", "PT1S "}
	for _, in := range bad {
		if d, err := retry.ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
		}
	}
	for _, d := range []time.Duration{0, 1, time.Millisecond, 1500 * time.Millisecond, 90 * time.Minute, 36*time.Hour + 1, 1<<63 - 1} {
		s := retry.FormatDuration(d)
		if got, err := retry.ParseDuration(s); err != nil || got != d {
			t.Errorf("FormatDuration(%v) = %q parses back as %v, %v", d, s, got, err)
		}
	}
}

// TestParseDurationNegative: a duration of any form with a minus sign is
// refused as negative; a minus sign before what is no duration is refused
// as no duration; minus zero is zero.
func TestParseDurationNegative(t *testing.T) {
	tests := []struct {
		in   string
		want string // the error; "" for a duration of zero
	}{
		{in: "-1s", want: `retry: duration "-1s" is negative`},
		{in: "-PT1S", want: `retry: duration "-PT1S" is negative`},
		{in: "-1500", want: `retry: duration "-1500" is negative`},
		{in: "-0s", want: ""},
		{in: "-soon", want: `retry: "-soon" is not a duration: ISO 8601 ("PT1.5S"), Go ("1.5s") or integer milliseconds`},
		{in: "--1s", want: `retry: "--1s" is not a duration: ISO 8601 ("PT1.5S"), Go ("1.5s") or integer milliseconds`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, err := retry.ParseDuration(tt.in)
			switch {
			case tt.want == "" && (err != nil || d != 0):
				t.Errorf("ParseDuration(%q) = %v, %v; want 0", tt.in, d, err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("ParseDuration(%q) = %v, %v; want %q", tt.in, d, err, tt.want)
			}
		})
	}
}

// TestParseDurationErrors: a string that is almost ISO 8601 is rejected
// with an error that says what is wrong.
func TestParseDurationErrors(t *testing.T) {
	tests := []struct{ in, why string }{
		{in: "PT.5S", why: `".5" needs a digit before its decimal sign`},
		{in: "P,5D", why: `",5" needs a digit before its decimal sign`},
		{in: "PT5.S", why: `"5." needs a digit after its decimal sign`},
		{in: "PT1.2.3S", why: "more than one decimal sign"},
		{in: "PT1.5H30M", why: "only the last component may have a decimal fraction"},
		{in: "P1.5DT1H", why: "only the last component may have a decimal fraction"},
		{in: "P1M", why: "years and months have no fixed length"},
		{in: "P1Y", why: "years and months have no fixed length"},
		{in: "PT1S1M", why: `out-of-order designator "M"`},
		{in: "P1D1W", why: `out-of-order designator "W"`},
		{in: "P1H", why: `designator "H"`},
		{in: "P", why: "no components"},
		{in: "PT", why: "no component after T"},
		{in: "PT1HT1M", why: "repeated T"},
		{in: "PT99999999999999999999S", why: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := retry.ParseDuration(tt.in)
			if err == nil || !strings.HasPrefix(err.Error(), "retry: ") || !strings.Contains(err.Error(), strconv.Quote(tt.in)) || !strings.Contains(err.Error(), tt.why) {
				t.Errorf("ParseDuration(%q) = %v, want an error that names the value and says %q", tt.in, err, tt.why)
			}
			_, err = retry.ParsePolicy([]byte(`{"max_interval": "` + tt.in + `"}`))
			checkPolicyError(t, err, "max_interval", strconv.Quote(tt.in))
			if err != nil && !strings.Contains(err.Error(), tt.why) {
				t.Errorf("policy error %q does not say %q", err, tt.why)
			}
		})
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"PT1S", "PT0.5S", "P1DT2H3M4.5S", "P2W", "1.5s", "250", "-1s", "P1Y", "PT0,000000001S", "PT999999999999999999999H",
		"PT.5S", "PT5.S", "PT1.5H30M", "PT1H0.5S", "P1.5D", "P1W2D", "PT1,5.5S", "PT" + strings.Repeat("1", 40000) + "S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := retry.ParseDuration(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "retry: ") {
				t.Fatalf("error %q lacks the prefix", err)
			}
			if len(err.Error()) > 400 { // the input is quoted clipped, whatever its length
				t.Fatalf("error of %d bytes for an input of %d", len(err.Error()), len(s))
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
		}
		iso := retry.FormatDuration(d)
		if back, err := retry.ParseDuration(iso); err != nil || back != d {
			t.Fatalf("%q → %v → %q → %v, %v", s, d, iso, back, err)
		}
	})
}

// TestParseDurationOddInput: what ParseDuration says of inputs with
// whitespace inside, long runs of multi-byte characters, non-ASCII letters
// that upper-case to ASCII, and the least Duration.
func TestParseDurationOddInput(t *testing.T) {
	tests := []struct {
		name string
		in   string
		err  string // a part of the error; "" for none
		want time.Duration
	}{
		{name: "a newline is quoted as one", in: "1s\n", err: `"1s\n" is not a duration`},
		{name: "a tab is quoted as one", in: "\t1s", err: `"\t1s" is not a duration`},
		{name: "a long value is cut at a character", in: "a" + strings.Repeat("é", 40), err: `"a` + strings.Repeat("é", 31) + `..." is not a duration`},
		{name: "a non-ASCII designator", in: "PT1ſ", err: "non-ASCII"},
		{name: "the least Duration is negative", in: "-9223372036854775808ns", err: "is negative"},
		{name: "an ASCII designator in lower case", in: "pt1s", want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := retry.ParseDuration(tt.in)
			switch {
			case tt.err == "" && (err != nil || d != tt.want):
				t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, d, err, tt.want)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("ParseDuration(%q) = %v, %v; want an error with %q", tt.in, d, err, tt.err)
			case err != nil && !utf8.ValidString(err.Error()):
				t.Errorf("ParseDuration(%q): the error is not valid UTF-8: %q", tt.in, err)
			}
		})
	}
}
