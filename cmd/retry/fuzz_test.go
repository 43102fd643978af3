package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// FuzzPolicyFlags: whatever the values of the policy flags, schedule
// either prints a schedule (status 0) or says what is wrong on one line
// (status 2); it never panics.
func FuzzPolicyFlags(f *testing.F) {
	f.Add("3", "1s", "5m", "2", "exponential", "true", "", "")
	f.Add("25", "PT15S", "PT1H", "4", "polynomial", "additive", "", "30s")
	f.Add("0", "-1s", "1ms", "0.5", "fibonacci", "proportional", "2", "1s")
	f.Add("10", "1500", "P1D", "NaN", "immediate", "none", "0.1", "")
	f.Fuzz(func(t *testing.T, attempts, initial, maxI, coef, strategy, jitter, factor, amount string) {
		args := []string{"schedule", "--limit", "20", "--samples", "3"}
		for _, kv := range [][2]string{{"attempts", attempts}, {"initial", initial}, {"max", maxI}, {"coefficient", coef},
			{"strategy", strategy}, {"jitter", jitter}, {"jitter-factor", factor}, {"jitter-amount", amount}} {
			if kv[1] != "" {
				args = append(args, "--"+kv[0]+"="+kv[1])
			}
		}
		checkOutcome(t, args)
	})
}

// FuzzPresetParams: preset parameters and plot's POLICY arguments.
func FuzzPresetParams(f *testing.F) {
	f.Add("zizq", "retries=3,base=100ms,exponent=2,jitter=0")
	f.Add("ratchet", "retries=20,backoff=fixed,base=24h")
	f.Add("daycry", "multiplier=1e9,max=1s")
	f.Add("ojs", "x=1")
	f.Fuzz(func(t *testing.T, preset, params string) {
		checkOutcome(t, []string{"schedule", "--limit", "5", "--samples", "2", "--preset", preset, "--param", params})
		if _, _, err := policySpec(preset+":"+params, strings.NewReader("")); err != nil && !strings.Contains(line(err), "retry: ") {
			t.Errorf("policySpec error %q", err)
		}
	})
}

// FuzzSimFlags: sim's own parsers (outage, budget, durations) on a small
// workload.
func FuzzSimFlags(f *testing.F) {
	f.Add("1s:2s", "tokens=3,ratio=0.2,window=1s", "100ms", "1", "3")
	f.Add("30s", "off", "0", "0", "1,2")
	f.Add(":", "ratio=-1", "PT1S", "x", ",")
	f.Add("1s:1s", "default", "10ms", "0.5", "-1")
	f.Fuzz(func(t *testing.T, outage, budget, latency, failRate, clients string) {
		checkOutcome(t, []string{"sim", "--rate", "20", "--duration", "2s", "--horizon", "1m", "--outage", outage,
			"--budget", budget, "--latency", latency, "--fail-rate", failRate, "--clients", clients})
	})
}

// FuzzFleetSizes: --clients is one number of clients, or a list of up to
// 8 where lists apply, each in [1, 100000]; anything else is a usage
// error of one line.
func FuzzFleetSizes(f *testing.F) {
	for _, seed := range []string{"1", "1,10,100,1000", "", ",", "0", "-1", "1,,2", " 5 , 6 ", "1,2,3,4,5,6,7,8,9", "100001", "1e3", "0x10"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, clients string) {
		fl := &simFlags{}
		if err := fl.command(&env{}).ParseFlags([]string{"--clients", clients}); err != nil {
			return // pflag's own error, before sim sees it
		}
		for _, many := range []bool{false, true} {
			sizes, err := fl.fleetSizes(many, 1)
			if err != nil {
				var u *usageError
				if !errors.As(err, &u) || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "flag --clients = ") {
					t.Errorf("%q: error %v, want a one-line usage error naming --clients", clients, err)
				}
				continue
			}
			if len(sizes) == 0 || len(sizes) > 8 || !many && len(sizes) != 1 {
				t.Errorf("%q (lists %v): %d sizes", clients, many, len(sizes))
			}
			for _, n := range sizes {
				if n < 1 || n > 100000 {
					t.Errorf("%q: size %d outside [1, 100000]", clients, n)
				}
			}
		}
	})
}

func checkOutcome(t *testing.T, args []string) {
	t.Helper()
	stdout, stderr, code := cli(t, "", args...)
	switch code {
	case 0:
		if stdout == "" {
			t.Errorf("%q: status 0 and no output", args)
		}
	case exitUsage:
		if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "retry: ") {
			t.Errorf("%q: stderr is not one line: %q", args, stderr)
		}
	default:
		t.Errorf("%q: status %d, stderr %q", args, code, stderr)
	}
}

// FuzzHeader: parseHeaders accepts a header only with an RFC 9110 name and
// value, and its error is one of its fixed texts, with the name at most:
// never the value.
func FuzzHeader(f *testing.F) {
	f.Add("Content-Type: application/json")
	f.Add("Authorization Bearer SECRETTOKEN")
	f.Add("X-A: a\tb\x01")
	f.Add("X-(B): 2")
	f.Add(": v")
	f.Add("X-A: a\r\nX-B: b")
	f.Fuzz(func(t *testing.T, h string) {
		hdr, err := parseHeaders([]string{"X-Ok: 1", h})
		if err == nil {
			for k, vs := range hdr {
				if !validHeaderName(k) || strings.ContainsAny(k, " \t\r\n:") {
					t.Errorf("%q: name %q accepted", h, k)
				}
				for _, v := range vs {
					if strings.ContainsAny(v, "\r\n\x00") {
						t.Errorf("%q: value %q accepted", h, v)
					}
				}
			}
			return
		}
		msg := err.Error()
		name, _, _ := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if msg != fmt.Sprintf(errHeaderColon, 2) && msg != fmt.Sprintf(errHeaderName, 2) &&
			!(validHeaderName(name) && msg == fmt.Sprintf(errHeaderValue, name)) {
			t.Errorf("%q: error %q is not one of parseHeaders' texts", h, msg)
		}
	})
}

// FuzzShowURL: showURL never panics, and drops the userinfo of a URL that
// does not parse.
func FuzzShowURL(f *testing.F) {
	f.Add("ftp://alice:s3cr3tpw@h/p?api_key=KEY123")
	f.Add("http://alice:Hx7pUserinfoPw91@127.0.0.1\x7f:1/v1/items")
	f.Add("http://bob:pw@h%zz/x#token=abc")
	f.Add("alice:pw@h/p")
	f.Fuzz(func(t *testing.T, raw string) {
		out := showURL(raw)
		if _, err := url.Parse(raw); err == nil {
			return
		}
		rest := raw
		if _, r, ok := strings.Cut(raw, "://"); ok {
			rest = r
		}
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			rest = rest[:i]
		}
		if i := strings.LastIndexByte(rest, '@'); i >= 0 {
			ui := rest[:i]
			if len(ui) >= 8 && strings.Count(raw, ui) == 1 && strings.Contains(out, ui) {
				t.Errorf("showURL(%q) = %q: the userinfo %q is in it", raw, out, ui)
			}
		}
	})
}
