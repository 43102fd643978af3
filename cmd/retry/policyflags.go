package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/steadyhq/retry"
)

// policyFlags are the flags that describe one policy: a policy given whole
// (--policy, a file or inline JSON, or --preset, a seed system with its
// parameters), then single fields that override it.
type policyFlags struct {
	source  string            // --policy: a file, "-" for stdin, or inline JSON
	preset  string            // --preset
	params  map[string]string // --param, the preset's parameters
	fs      *pflag.FlagSet
	strFlag map[string]*string
	nonRetr []string
}

// attemptsRule is the rule of --attempts, as of max_attempts in JSON.
const attemptsRule = "must be an integer in [0, 2147483647] (0 and 1 both mean one attempt)"

// The policy field flags: name → what it sets.
var fieldFlags = []struct{ name, usage string }{
	{"attempts", "maximum attempts, the first included: " + attemptsRule[len("must be "):]},
	{"initial", "initial interval (1.5s, PT1.5S or 1500 for milliseconds)"},
	{"max", "maximum interval, capping each delay before and after jitter"},
	{"offset", "delay offset added to every raw delay"},
	{"coefficient", "backoff coefficient (>= 1)"},
	{"strategy", "backoff strategy: constant, linear, exponential, polynomial or immediate"},
	{"jitter", "jitter: true (proportional 0.5) or a kind: " + jitterKinds()},
	{"jitter-factor", "factor of proportional and percent jitter, in (0, 1]"},
	{"jitter-amount", "amount J of additive jitter"},
	{"on-exhaustion", "discard or dead_letter"},
}

// register adds the policy flags to fs.
func (f *policyFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.source, "policy", "", "the policy as OJS JSON: a file, - for stdin, or inline {...}")
	fs.StringVar(&f.preset, "preset", "", "a seed system's policy: "+strings.Join(presetNames(), ", "))
	fs.StringToStringVar(&f.params, "param", nil, "a preset's parameter, as name=value (repeatable; see --preset)")
	f.strFlag = make(map[string]*string)
	for _, ff := range fieldFlags {
		f.strFlag[ff.name] = fs.String(ff.name, "", ff.usage)
	}
	fs.StringSliceVar(&f.nonRetr, "non-retryable", nil, `error types that are not retried, exact or "prefix.*" (repeatable)`)
}

// changed reports whether the flag name was given.
func (f *policyFlags) changed(name string) bool { return f.fs != nil && f.fs.Changed(name) }

// policy builds the policy the flags describe, and a label for it. Errors
// are usage errors naming the flag or field, the value and the rule.
func (f *policyFlags) policy(stdin io.Reader) (retry.Policy, string, error) {
	var p retry.Policy
	label := "default"
	switch {
	case f.changed("policy") && strings.TrimSpace(f.source) == "":
		return p, "", usagef("flag --policy = %q: must be a file, - for stdin, or inline JSON {...}", f.source)
	case f.source != "" && f.preset != "":
		return p, "", usagef("flags --policy and --preset: give one or the other")
	case f.source != "":
		data, name, err := readSource(f.source, stdin)
		if err != nil {
			return p, "", usage(fmt.Errorf("flag --policy = %q: %v", f.source, err))
		}
		if p, err = retry.ParsePolicy(data); err != nil {
			return p, "", usage(err)
		}
		label = name
	case f.preset != "":
		pr, ok := presets[f.preset]
		if !ok {
			return p, "", usagef("flag --preset = %q: must be one of %s", f.preset, strings.Join(presetNames(), ", "))
		}
		var err error
		if p, err = pr.build(&values{preset: f.preset, params: pr.params, m: f.params}); err != nil {
			return p, "", usage(err)
		}
		label = f.preset
	case len(f.params) > 0:
		return p, "", usagef("flag --param: needs --preset")
	}
	p, err := f.override(p)
	if err != nil {
		return p, "", usage(err)
	}
	if f.anyField(true) {
		label += " (modified)"
	}
	return withDefaults(p), label, nil
}

// anyField reports whether a field flag was given; shape asks only about
// those that change the delays.
func (f *policyFlags) anyField(shape bool) bool {
	if f.changed("non-retryable") && !shape {
		return true
	}
	for _, ff := range fieldFlags {
		if f.changed(ff.name) && !(shape && (ff.name == "attempts" || ff.name == "on-exhaustion")) {
			return true
		}
	}
	return false
}

// readSource reads a policy source (--policy, or plot's POLICY argument):
// inline JSON, "-" for stdin, or a file. Text that starts as a JSON object
// or array does, or that is JSON and names no file, is inline JSON, so that
// a policy that is not an object is reported as such rather than as a
// missing file. A file's error is the operating system's, without the
// path, for the caller to name the source.
func readSource(src string, stdin io.Reader) (data []byte, name string, err error) {
	t := strings.TrimSpace(src)
	switch {
	case strings.HasPrefix(t, "{") || strings.HasPrefix(t, "["):
		return []byte(t), "policy", nil
	case t == "-":
		data, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
		return data, "stdin", err
	}
	data, err = os.ReadFile(src)
	if errors.Is(err, fs.ErrNotExist) && json.Valid([]byte(t)) {
		return []byte(t), "policy", nil
	}
	if err != nil {
		return nil, "", unwrapPath(err)
	}
	return data, src, nil
}

// unwrapPath drops the path that an *os.PathError repeats.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// durationRules are the rules of the duration flags, as of their JSON
// fields: a negative value breaks them, and so does 0 but for --offset.
var durationRules = map[string]string{
	"initial": "must be > 0 (use --strategy immediate for retries without delay)",
	"max":     "must be > 0",
	"offset":  "must be >= 0",
}

// flagField maps a policy's JSON field to the flag that sets it.
var flagField = map[string]string{
	"max_attempts":         "attempts",
	"initial_interval":     "initial",
	"max_interval":         "max",
	"delay_offset":         "offset",
	"backoff_coefficient":  "coefficient",
	"backoff_strategy":     "strategy",
	"jitter":               "jitter",
	"jitter.kind":          "jitter",
	"jitter.factor":        "jitter-factor",
	"jitter.amount":        "jitter-amount",
	"on_exhaustion":        "on-exhaustion",
	"non_retryable_errors": "non-retryable",
}

// override applies the field flags to p and validates the result.
func (f *policyFlags) override(p retry.Policy) (retry.Policy, error) {
	str := func(name string) (string, bool) {
		if !f.changed(name) {
			return "", false
		}
		return *f.strFlag[name], true
	}
	dur := func(name string, dst *time.Duration) error {
		v, ok := str(name)
		if !ok {
			return nil
		}
		d, err := retry.ParseDuration(v)
		if err != nil {
			if abs, ok := strings.CutPrefix(strings.TrimSpace(v), "-"); ok {
				if _, err := retry.ParseDuration(abs); err == nil {
					return fmt.Errorf("flag --%s = %q: %s", name, v, durationRules[name])
				}
			}
			return fmt.Errorf("flag --%s = %q: must be a duration such as 1.5s, PT1.5S or 1500 (milliseconds)", name, v)
		}
		if d == 0 && name != "offset" {
			// A zero field in Go means the default; given as a flag,
			// as in JSON, it is refused.
			return fmt.Errorf("flag --%s = %q: %s", name, v, durationRules[name])
		}
		*dst = d
		return nil
	}
	if v, ok := str("attempts"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return p, fmt.Errorf("flag --attempts = %q: %s", v, attemptsRule)
		}
		p.MaxAttempts = max(n, 1) // 0 in a Policy would mean the default, 3
	}
	maxBefore := p.MaxInterval
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"initial", &p.InitialInterval}, {"max", &p.MaxInterval}, {"offset", &p.Offset}} {
		if err := dur(d.name, d.dst); err != nil {
			return p, err
		}
	}
	// A larger initial interval lifts a maximum that was not given.
	if f.changed("initial") && !f.changed("max") && maxBefore != 0 && maxBefore < p.InitialInterval {
		p.MaxInterval = p.InitialInterval
	}
	if v, ok := str("coefficient"); ok {
		c, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return p, fmt.Errorf("flag --coefficient = %q: must be a number >= 1", v)
		}
		p.BackoffCoefficient = c
	}
	if v, ok := str("strategy"); ok {
		q, err := fieldPolicy("strategy", "backoff_strategy", v, strconv.Quote(v))
		if err != nil {
			return p, err
		}
		p.Backoff = q.Backoff
	}
	if v, ok := str("on-exhaustion"); ok {
		q, err := fieldPolicy("on-exhaustion", "on_exhaustion", v, strconv.Quote(v))
		if err != nil {
			return p, err
		}
		p.OnExhaustion = q.OnExhaustion
	}
	if err := f.jitter(&p); err != nil {
		return p, err
	}
	if f.changed("non-retryable") {
		p.NonRetryableErrors = slices.Clone(f.nonRetr)
	}
	if err := p.Validate(); err != nil {
		return p, flagError(err, f.changed)
	}
	return p, nil
}

// jitter applies --jitter, --jitter-factor and --jitter-amount.
func (f *policyFlags) jitter(p *retry.Policy) error {
	kind, kindSet := *f.strFlag["jitter"], f.changed("jitter")
	factor, factorSet := *f.strFlag["jitter-factor"], f.changed("jitter-factor")
	amount, amountSet := *f.strFlag["jitter-amount"], f.changed("jitter-amount")
	if !kindSet && !factorSet && !amountSet {
		return nil
	}
	var raw string
	switch strings.ToLower(kind) {
	case "none", "false", "off":
		if factorSet || amountSet {
			return fmt.Errorf("flag --jitter = %q: --jitter-factor and --jitter-amount need a jitter kind", kind)
		}
		raw = "false"
	case "true", "on":
		raw = "true"
		if factorSet {
			raw = `{"kind": "proportional", "factor": ` + jsonNumber(factor) + `}`
		}
	default:
		if !kindSet {
			kind = string(withDefaults(*p).Jitter.Kind)
		}
		obj := map[string]any{"kind": kind}
		if factorSet {
			obj["factor"] = json.RawMessage(jsonNumber(factor))
		}
		if amountSet {
			obj["amount"] = amount
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		raw = string(b)
	}
	if factorSet && jsonNumber(factor) == "null" {
		return fmt.Errorf("flag --jitter-factor = %q: must be a number in (0, 1]", factor)
	}
	q, err := fieldPolicy("jitter", "jitter", kind, raw)
	if err != nil {
		return flagError(err, func(name string) bool { return name != "jitter" || kindSet })
	}
	p.Jitter = q.Jitter
	return nil
}

// jsonNumber returns s when it is a JSON number, else "null".
func jsonNumber(s string) string {
	if _, err := strconv.ParseFloat(s, 64); err != nil || !json.Valid([]byte(s)) {
		return "null"
	}
	return s
}

// fieldPolicy parses a one-field policy with the core's own parser, so that
// names (strategies, jitter kinds) are read exactly as in policy JSON.
func fieldPolicy(flag, field, value, raw string) (retry.Policy, error) {
	p, err := retry.ParsePolicy([]byte(`{"` + field + `": ` + raw + `}`))
	if err != nil {
		var pe *retry.PolicyError
		if errors.As(err, &pe) && flagField[pe.Field] == flag {
			return p, fmt.Errorf("flag --%s = %q: %s", flag, value, pe.Rule)
		}
		return p, flagError(err, func(string) bool { return true })
	}
	return p, nil
}

// flagError restates a *retry.PolicyError about a field that a given flag
// set in terms of that flag.
func flagError(err error, given func(string) bool) error {
	var pe *retry.PolicyError
	if !errors.As(err, &pe) {
		return err
	}
	name, ok := flagField[pe.Field]
	if !ok {
		if i := strings.IndexByte(pe.Field, '['); i > 0 {
			name, ok = flagField[pe.Field[:i]]
		}
	}
	if !ok || !given(name) {
		return err
	}
	return fmt.Errorf("flag --%s = %s: %s", name, pe.Value, pe.Rule)
}

// describe renders p as its canonical OJS JSON on one line.
func describe(p retry.Policy) string {
	b, err := json.Marshal(p)
	if err != nil {
		return err.Error()
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// withDefaults returns p with its zero fields set to their defaults, as a
// Retrier resolves it; an invalid p comes back as it is, for Validate to
// name its fault.
func withDefaults(p retry.Policy) retry.Policy {
	r := retry.New(retry.WithPolicy(p))
	if r.Err() != nil {
		return p
	}
	return r.Policy()
}

// jitterKinds names the library's jitter kinds, as policy JSON does.
func jitterKinds() string {
	kinds := retry.JitterKinds()
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
