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

// param is one parameter of a preset, with its default. A parameter that
// takes one of a few words lists them in choices, spelled as the system
// spells them; they are read in any case.
type param struct {
	name, def, about string
	choices          []string
}

const day = 24 * time.Hour

var presets = map[string]preset{
	"ratchet": {
		about: "Ratchet: maxRetries N is N+1 attempts; EXPONENTIAL doubles from base, capped at min(24h, base·2^20), no jitter",
		params: []param{
			{name: "retries", def: "5", about: "maxRetries"},
			{name: "base", def: "1s", about: "base delay"},
			{name: "backoff", def: "EXPONENTIAL", choices: []string{"NONE", "FIXED", "EXPONENTIAL"}},
		},
		build: func(v *values) (retry.Policy, error) {
			n, base, kind := v.retries("retries"), v.duration("base"), v.word("backoff")
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
			{name: "retries", def: "4", about: "retries after the first attempt"},
			{name: "base", def: "5s", about: "retryBackoffBase"},
			{name: "multiplier", def: "2", about: "retryBackoffMultiplier"},
			{name: "max", def: "300s", about: "retryBackoffMax"},
			{name: "strategy", def: "exponential", choices: []string{"none", "fixed", "exponential"}},
			{name: "jitter", def: "true", about: "retryBackoffJitter", choices: []string{"true", "false"}},
		},
		build: func(v *values) (retry.Policy, error) {
			n, base, mult, top := v.retries("retries"), v.duration("base"), v.number("multiplier"), v.duration("max")
			kind, jitter := v.word("strategy"), v.word("jitter")
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
			{name: "retries", def: "25", about: "retry limit"},
			{name: "base", def: "15s", about: "B, added to every delay"},
			{name: "exponent", def: "4", about: "E"},
			{name: "jitter", def: "30s", about: "J (0 for none)"},
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
			fmt.Fprintf(&b, "           %-10s %-12s %s\n", p.name, p.def, p.describe())
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

// describe says what p is; the words a parameter takes are listed as its
// errors list them.
func (p param) describe() string {
	if len(p.choices) == 0 {
		return p.about
	}
	if p.about == "" {
		return oneOf(p.choices)
	}
	return p.about + ": " + oneOf(p.choices)
}

// oneOf lists words as "a, b or c".
func oneOf(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
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

// duration reads a duration parameter that must be > 0.
func (v *values) duration(name string) time.Duration {
	d, ok := v.signedDuration(name)
	if ok && d <= 0 {
		v.fail(name, v.get(name), "must be > 0")
	}
	return d
}

// durationOrZero reads a duration parameter that must be >= 0.
func (v *values) durationOrZero(name string) time.Duration {
	d, ok := v.signedDuration(name)
	if ok && d < 0 {
		v.fail(name, v.get(name), "must be >= 0")
	}
	return d
}

// signedDuration reads a duration parameter, with its unit (0 may go
// without one) and possibly negative, for the caller to name the rule a
// negative value breaks; ok is false when it is not a duration.
func (v *values) signedDuration(name string) (d time.Duration, ok bool) {
	s := v.get(name)
	d, err := parseSigned(s)
	_, bare := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || (bare == nil && d != 0) {
		v.fail(name, s, "must be a duration with a unit, such as 1.5s, 500ms or PT1.5S")
		return 0, false
	}
	return d, true
}

// parseSigned reads a duration as retry.ParseDuration does, and a negative
// one too, so that its error can say the rule a negative value breaks
// rather than call it not a duration.
func parseSigned(s string) (time.Duration, error) {
	d, err := retry.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	if abs, neg := strings.CutPrefix(strings.TrimSpace(s), "-"); neg {
		if d, err2 := retry.ParseDuration(abs); err2 == nil && d > 0 {
			return -d, nil
		}
	}
	return 0, err
}

func (v *values) number(name string) float64 {
	s := v.get(name)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= 1) || f > 1e6 {
		v.fail(name, s, "must be a number in [1, 1e6]")
	}
	return f
}

// word reads a parameter that takes one of its choices, in any case, and
// returns it in lower case.
func (v *values) word(name string) string {
	s := v.get(name)
	var choices []string
	for _, p := range v.params {
		if p.name == name {
			choices = p.choices
		}
	}
	if !slices.ContainsFunc(choices, func(c string) bool { return strings.EqualFold(c, s) }) {
		v.fail(name, s, "must be "+oneOf(choices)+" (in any case)")
	}
	return strings.ToLower(s)
}
