package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/steadyhq/retry"
)

// A preset is the retry policy of a seed system, built from that system's
// own parameters (--param name=value), as DESIGN.md maps them.
type preset struct {
	about  string
	params []param
	build  func(v *values) (retry.Policy, error)
}

// param is one parameter of a preset, with its default.
type param struct{ name, def, about string }

const day = 24 * time.Hour

var presets = map[string]preset{
	"ratchet": {
		about: "Ratchet: maxRetries N is N+1 attempts; EXPONENTIAL doubles from base, capped at min(24h, base·2^20), no jitter",
		params: []param{
			{"retries", "5", "maxRetries"},
			{"base", "1s", "base delay"},
			{"backoff", "exponential", "NONE, FIXED or EXPONENTIAL"},
		},
		build: func(v *values) (retry.Policy, error) {
			n, base, kind := v.retries("retries"), v.duration("base"), v.word("backoff", "none", "fixed", "exponential")
			if v.err != nil {
				return retry.Policy{}, v.err
			}
			p := retry.Policy{MaxAttempts: n + 1, InitialInterval: base, Jitter: retry.Jitter{Kind: retry.JitterNone}}
			switch kind {
			case "none":
				p.Backoff = retry.Immediate
			case "fixed":
				p.Backoff, p.MaxInterval = retry.Constant, max(day, base)
			default:
				p.Backoff, p.BackoffCoefficient = retry.Exponential, 2
				p.MaxInterval = day
				if base <= day>>20 {
					p.MaxInterval = max(base<<20, base)
				}
			}
			return p, nil
		},
	},
	"ojs": {
		about: "Open Job Spec: the defaults (3 attempts, exponential from 1s, coefficient 2, capped at 5m, jitter ×[0.5, 1.5))",
		build: func(v *values) (retry.Policy, error) { v.get(""); return retry.DefaultPolicy(), v.err },
	},
	"daycry": {
		about: "Daycry Jobs: the first retry waits base, then base·multiplier^(n-1) up to max, ±15% jitter",
		params: []param{
			{"retries", "4", "retries after the first attempt"},
			{"base", "5s", "retryBackoffBase"},
			{"multiplier", "2", "retryBackoffMultiplier"},
			{"max", "300s", "retryBackoffMax"},
			{"strategy", "exponential", "none, fixed or exponential"},
			{"jitter", "true", "retryBackoffJitter: true or false"},
		},
		build: func(v *values) (retry.Policy, error) {
			n, base, mult, top := v.retries("retries"), v.duration("base"), v.number("multiplier"), v.duration("max")
			kind, jitter := v.word("strategy", "none", "fixed", "exponential"), v.word("jitter", "true", "false")
			if v.err != nil {
				return retry.Policy{}, v.err
			}
			p := retry.Policy{MaxAttempts: n + 1, InitialInterval: base, MaxInterval: top, BackoffCoefficient: mult,
				Jitter: retry.Jitter{Kind: retry.JitterPercent, Factor: 0.15}}
			switch kind {
			case "none":
				p.Backoff = retry.Immediate
			case "fixed":
				p.Backoff = retry.Constant
			default:
				p.Backoff = retry.Exponential
			}
			if jitter == "false" {
				p.Jitter = retry.Jitter{Kind: retry.JitterNone}
			}
			return p, nil
		},
	},
	"zizq": {
		about: "Zizq: t = B + a^E + a·rand(0..J) with a the retry number: polynomial from 1s, offset B, additive jitter J",
		params: []param{
			{"retries", "25", "retry limit"},
			{"base", "15s", "B, added to every delay"},
			{"exponent", "4", "E"},
			{"jitter", "30s", "J (0 for none)"},
		},
		build: func(v *values) (retry.Policy, error) {
			n, b, e, j := v.retries("retries"), v.duration("base"), v.number("exponent"), v.durationOrZero("jitter")
			if v.err != nil {
				return retry.Policy{}, v.err
			}
			p := retry.Policy{
				MaxAttempts:        n + 1,
				InitialInterval:    time.Second,
				Backoff:            retry.Polynomial,
				BackoffCoefficient: e,
				Offset:             b,
				MaxInterval:        36500 * day, // no effective cap
				Jitter:             retry.Jitter{Kind: retry.JitterAdditive, Amount: j},
			}
			if j == 0 {
				p.Jitter = retry.Jitter{Kind: retry.JitterNone}
			}
			return p, nil
		},
	},
}

// presetNames returns the presets' names, sorted.
func presetNames() []string { return slices.Sorted(maps.Keys(presets)) }

// presetHelp describes the presets and their parameters.
func presetHelp() string {
	var b strings.Builder
	b.WriteString("Presets (--preset NAME, parameters with --param name=value; a duration takes a unit, as\n" +
		"1.5s, 500ms, 2m or PT1.5S, since the systems differ on what a bare number means):\n")
	for _, name := range presetNames() {
		pr := presets[name]
		fmt.Fprintf(&b, "  %-8s %s\n", name, pr.about)
		for _, p := range pr.params {
			fmt.Fprintf(&b, "           %-10s %-12s %s\n", p.name, p.def, p.about)
		}
	}
	return b.String()
}

// values reads a preset's parameters, remembering the first error.
type values struct {
	preset string
	params []param
	m      map[string]string
	err    error
}

// get returns the parameter name, or its default; an unknown parameter
// given by the user is an error.
func (v *values) get(name string) string {
	if v.err == nil {
		for _, k := range slices.Sorted(maps.Keys(v.m)) {
			if !slices.ContainsFunc(v.params, func(p param) bool { return p.name == k }) {
				v.fail(k, v.m[k], "unknown parameter; "+v.preset+" takes "+strings.Join(paramNames(v.params), ", "))
				return ""
			}
		}
	}
	if s, ok := v.m[name]; ok {
		return s
	}
	for _, p := range v.params {
		if p.name == name {
			return p.def
		}
	}
	return ""
}

func paramNames(params []param) []string {
	var names []string
	for _, p := range params {
		names = append(names, p.name)
	}
	if len(names) == 0 {
		return []string{"no parameter"}
	}
	return names
}

func (v *values) fail(name, value, rule string) {
	if v.err == nil {
		v.err = fmt.Errorf("flag --param %s = %q: %s", name, value, rule)
	}
}

func (v *values) retries(name string) int {
	s := v.get(name)
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= 1<<31-1 {
		v.fail(name, s, "must be an integer in [0, 2147483646]")
	}
	return n
}

func (v *values) duration(name string) time.Duration {
	d := v.durationOrZero(name)
	if d == 0 {
		v.fail(name, v.get(name), "must be > 0")
	}
	return d
}

func (v *values) durationOrZero(name string) time.Duration {
	s := v.get(name)
	d, err := retry.ParseDuration(s)
	_, bare := strconv.ParseFloat(strings.TrimSpace(s), 64)
	switch {
	case err != nil || (bare == nil && d != 0):
		v.fail(name, s, "must be a duration with a unit, such as 1.5s, 500ms or PT1.5S")
	case d < 0:
		v.fail(name, s, "must be >= 0")
	}
	return d
}

func (v *values) number(name string) float64 {
	s := v.get(name)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= 1) || f > 1e6 {
		v.fail(name, s, "must be a number in [1, 1e6]")
	}
	return f
}

func (v *values) word(name string, allowed ...string) string {
	s := strings.ToLower(v.get(name))
	if !slices.Contains(allowed, s) {
		v.fail(name, v.get(name), "must be "+strings.Join(allowed, ", "))
	}
	return s
}
