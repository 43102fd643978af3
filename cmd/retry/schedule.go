package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/steadyhq/retry"
)

// scheduleRow is one attempt of a schedule. With jitter, Delay and
// Cumulative are medians over the samples, and Min and Max bound the delay.
type scheduleRow struct {
	Attempt    int      `json:"attempt"`
	Retry      int      `json:"retry"`
	Delay      float64  `json:"delay_ms"`
	Cumulative float64  `json:"cumulative_ms"`
	Min        *float64 `json:"min_ms,omitempty"`
	Max        *float64 `json:"max_ms,omitempty"`
}

// schedule is the table of a policy's waits.
type schedule struct {
	policy  retry.Policy
	label   string
	jitter  bool
	rows    []scheduleRow
	retries int // the policy's retries, which may be more than the rows
}

// maxSamples bounds --samples.
const maxSamples = 100000

// computeSchedule returns the delays before each of the first limit retries
// of p: exact without jitter, else min / median / max over samples draws
// of whole schedules from a source seeded with seed.
func computeSchedule(p retry.Policy, limit, samples int, seed uint64) schedule {
	p = withDefaults(p)
	s := schedule{policy: p, retries: p.MaxAttempts - 1, jitter: p.Jitter.Kind != retry.JitterNone}
	n := min(s.retries, limit)
	s.rows = make([]scheduleRow, 0, n+1)
	s.rows = append(s.rows, scheduleRow{Attempt: 1})
	if !s.jitter {
		var cum total
		for i := 1; i <= n; i++ {
			d := p.Delay(i)
			cum.add(d)
			s.rows = append(s.rows, scheduleRow{Attempt: i + 1, Retry: i, Delay: ms(d), Cumulative: cum.ms()})
		}
		return s
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	delays := make([][]time.Duration, n+1) // [retry][sample]
	cums := make([][]float64, n+1)         // milliseconds
	for i := 1; i <= n; i++ {
		delays[i] = make([]time.Duration, samples)
		cums[i] = make([]float64, samples)
	}
	for k := range samples {
		var prev time.Duration
		var cum total
		for i := 1; i <= n; i++ {
			d := p.Sample(i, prev, rng.Float64())
			prev = d
			cum.add(d)
			delays[i][k], cums[i][k] = d, cum.ms()
		}
	}
	for i := 1; i <= n; i++ {
		slices.Sort(delays[i])
		slices.Sort(cums[i])
		lo, hi := ms(delays[i][0]), ms(delays[i][samples-1])
		s.rows = append(s.rows, scheduleRow{
			Attempt: i + 1, Retry: i,
			Delay: ms(median(delays[i])), Cumulative: median(cums[i]),
			Min: &lo, Max: &hi,
		})
	}
	return s
}

// median of a sorted, non-empty slice.
func median[T time.Duration | float64](s []T) T {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return s[n/2-1] + (s[n/2]-s[n/2-1])/2
}

// total is a sum of non-negative durations that goes on past the ~292
// years a time.Duration holds: exact in nanoseconds up to there, then in
// floating-point milliseconds.
type total struct {
	d    time.Duration
	over float64 // milliseconds, once d would overflow
	big  bool
}

func (t *total) add(d time.Duration) {
	if !t.big && t.d <= math.MaxInt64-d {
		t.d += d
		return
	}
	if !t.big {
		t.over, t.big = ms(t.d), true
	}
	t.over += ms(d)
}

// ms returns the total in milliseconds.
func (t *total) ms() float64 {
	if t.big {
		return t.over
	}
	return ms(t.d)
}

// ms converts d to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fromMS converts milliseconds to a duration, saturating at the longest
// one (~292 years) rather than wrapping.
func fromMS(v float64) time.Duration {
	ns := v * float64(time.Millisecond)
	switch {
	case ns >= math.MaxInt64: // 2^63 as a float64: out of range
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(ns)
}

// humanMS formats milliseconds as human does, past the longest duration too.
func humanMS(v float64) string {
	if v*float64(time.Millisecond) < math.MaxInt64 {
		return human(fromMS(v))
	}
	secs := math.Round(v / 1000)
	days := math.Floor(secs / (24 * 3600))
	s := fmt.Sprintf("%.0fd", days)
	if rem := time.Duration(secs-days*24*3600) * time.Second; rem > 0 {
		s += human(rem)
	}
	return s
}

func newSchedule(e *env) *cobra.Command {
	var (
		pf      policyFlags
		asJSON  bool
		samples int
		seed    uint64
		limit   int
	)
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Print the delays of a policy: attempt, retry, delay, cumulative",
		Long: `Print the waits of a policy, one row per attempt: the retry number, the delay before it and
the cumulative wait. With jitter, the delay is the median over --samples draws of the whole
schedule, between the min and max drawn; --seed makes the draws reproducible.

` + presetHelp(),
		Example: `  retry schedule --preset ratchet --param retries=20
  retry schedule --preset zizq --jitter none --json
  retry schedule --policy '{"max_attempts": 6, "initial_interval": "PT0.2S"}' --samples 10000`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, label, err := pf.policy(e.stdin)
			if err != nil {
				return err
			}
			switch {
			case samples < 1 || samples > maxSamples:
				return usagef("flag --samples = %d: must be in [1, %d]", samples, maxSamples)
			case limit < 1 || limit > 1_000_000:
				return usagef("flag --limit = %d: must be in [1, 1000000]", limit)
			case limit*samples > 50_000_000:
				return usagef("flag --samples = %d: with --limit %d, must be at most %d", samples, limit, 50_000_000/limit)
			}
			s := computeSchedule(p, limit, samples, seed)
			s.label = label
			if asJSON {
				return writeJSON(e.stdout, s.rows)
			}
			s.writeText(e.stdout, samples)
			return nil
		},
	}
	pf.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, `print an array of {"attempt", "retry", "delay_ms", "cumulative_ms"} (and "min_ms", "max_ms" with jitter)`)
	cmd.Flags().IntVar(&samples, "samples", 1000, "draws of the schedule when the policy has jitter")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the draws")
	cmd.Flags().IntVar(&limit, "limit", 100, "print at most this many retries")
	return cmd
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeText writes the schedule as a table.
func (s schedule) writeText(w io.Writer, samples int) {
	fmt.Fprintf(w, "# %s: %s\n", s.label, describe(s.policy))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if s.jitter {
		fmt.Fprintf(tw, "attempt\tretry\tmin\tmedian\tmax\tcumulative (median)\t\n")
	} else {
		fmt.Fprintf(tw, "attempt\tretry\tdelay\tcumulative\t\n")
	}
	for _, r := range s.rows {
		if r.Retry == 0 {
			if s.jitter {
				fmt.Fprintf(tw, "%d\t-\t-\t-\t-\t0s\t\n", r.Attempt)
			} else {
				fmt.Fprintf(tw, "%d\t-\t-\t0s\t\n", r.Attempt)
			}
			continue
		}
		if s.jitter {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t\n", r.Attempt, r.Retry,
				humanMS(*r.Min), humanMS(r.Delay), humanMS(*r.Max), humanMS(r.Cumulative))
		} else {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t\n", r.Attempt, r.Retry, humanMS(r.Delay), humanMS(r.Cumulative))
		}
	}
	tw.Flush()
	if len(s.rows)-1 < s.retries {
		fmt.Fprintf(w, "# ... %d more retries (--limit to show them)\n", s.retries-len(s.rows)+1)
	}
	if s.jitter {
		fmt.Fprintf(w, "# %d draws\n", samples)
	}
}

// human formats d for people: whole units past a minute (days once past
// a day, so 24h but 1d20h26m55s and 2d; zero units left out), and no more
// digits than a schedule needs.
func human(d time.Duration) string {
	if d < time.Minute {
		switch {
		case d >= time.Second:
			d = d.Round(time.Millisecond)
		case d >= time.Millisecond:
			d = d.Round(10 * time.Microsecond)
		default:
			d = d.Round(time.Microsecond)
		}
		return d.String()
	}
	d = d.Round(time.Second)
	var b strings.Builder
	if d > day {
		fmt.Fprintf(&b, "%dd", d/day)
		d %= day
	}
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.unit; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.unit
		}
	}
	return b.String()
}

// plural returns one or many after n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
