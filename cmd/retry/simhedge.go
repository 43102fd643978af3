package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/steadyhq/retry"
)

// hedgeSim is the long-tail setup of Dean and Barroso's "The Tail at Scale"
// (CACM 2013): most attempts take about base, a share slowP of them slowX
// times longer. The same calls run twice through the real engine, without
// and with hedging (retry.Hedged, its delay the Percentile of recent
// attempt latencies), in wall time: the engine's hedges race goroutines and
// timers, which the virtual clock of the other simulations cannot run.
type hedgeSim struct {
	requests int           // calls
	workers  int           // calls in flight at once
	base     time.Duration // the latency of most attempts, spread up to +50%
	slowP    float64       // share of attempts slowed
	slowX    float64       // by this factor
	pct      float64       // the hedge delay's percentile
	seed     uint64
	// progress, when set, returns a bar for one run of n calls labelled
	// desc; nil draws none.
	progress func(n int, desc string) *progress
}

// hedgeRow is one run's latencies, in milliseconds, and its attempts.
type hedgeRow struct {
	Mode      string  `json:"mode"`
	P50       float64 `json:"p50_ms"`
	P95       float64 `json:"p95_ms"`
	P99       float64 `json:"p99_ms"`
	P999      float64 `json:"p999_ms"`
	Max       float64 `json:"max_ms"`
	Attempts  float64 `json:"attempts_per_request"`
	Hedges    int64   `json:"hedges"`
	HedgeWins int64   `json:"hedge_wins"`
	lat       []time.Duration
}

// hedgeResult is both runs.
type hedgeResult struct {
	Rows      []hedgeRow `json:"rows"`
	TailDrop  float64    `json:"p999_drop"`      // p99.9 without hedging over p99.9 with it
	ExtraLoad float64    `json:"extra_attempts"` // extra attempts per request, with hedging over without
}

// run simulates both modes.
func (s *hedgeSim) run() (*hedgeResult, error) {
	res := &hedgeResult{}
	for _, hedge := range []bool{false, true} {
		row, err := s.once(hedge)
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, row)
	}
	a, b := res.Rows[0], res.Rows[1]
	if b.P999 > 0 {
		res.TailDrop = a.P999 / b.P999
	}
	res.ExtraLoad = b.Attempts/a.Attempts - 1
	return res, nil
}

// once runs the calls, hedged or not. The latencies are drawn per call and
// attempt from the seed, so both runs meet the same dependency.
func (s *hedgeSim) once(hedge bool) (hedgeRow, error) {
	opts := []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3})}
	row := hedgeRow{Mode: "no hedging"}
	if hedge {
		row.Mode = fmt.Sprintf("hedging at p%g", s.pct)
		opts = append(opts, retry.WithHedge(retry.Hedge{Percentile: s.pct, Floor: s.base / 10, Ceiling: 10 * s.base}))
	} else {
		opts = append(opts, retry.WithHedge(retry.Hedge{Max: 1}))
	}
	r := retry.New(opts...)
	if err := r.Err(); err != nil {
		return row, usage(err)
	}
	// A warm-up of one call per worker, not measured, gives the adaptive
	// delay its first latencies; the measured calls come after it.
	warm := s.workers
	var bar *progress
	if s.progress != nil {
		bar = s.progress(warm+s.requests, row.Mode)
	}
	defer bar.finish()
	lat := make([]time.Duration, warm+s.requests)
	var next atomic.Int64
	var wg sync.WaitGroup
	calls := func(n int) {
		for range s.workers {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					start := time.Now()
					retry.Hedged(context.Background(), func(ctx context.Context) (struct{}, error) {
						return struct{}{}, sleepCtx(ctx, s.latency(i, retry.AttemptFrom(ctx)))
					}, r)
					lat[i] = time.Since(start)
					bar.add(1)
				}
			})
		}
		wg.Wait()
	}
	calls(warm)
	before := r.Stats()
	next.Store(int64(warm)) // the workers that stopped took a number each
	calls(warm + s.requests)
	st := r.Stats()
	lat = lat[warm:]
	row.Attempts = float64(st.Attempts-before.Attempts) / float64(s.requests)
	row.Hedges, row.HedgeWins = st.Hedges-before.Hedges, st.HedgeWins-before.HedgeWins
	slices.Sort(lat)
	q := func(p float64) float64 {
		return ms(lat[min(int(math.Ceil(p*float64(len(lat))))-1, len(lat)-1)])
	}
	row.P50, row.P95, row.P99, row.P999, row.Max = q(0.5), q(0.95), q(0.99), q(0.999), ms(lat[len(lat)-1])
	row.lat = lat
	return row, nil
}

// latency is the time attempt n of call i takes: base spread up to +50%,
// slowed slowX times with probability slowP.
func (s *hedgeSim) latency(i, n int) time.Duration {
	rng := rand.New(rand.NewPCG(s.seed, uint64(i)<<8|uint64(n&0xff)))
	d := float64(s.base) * (1 + 0.5*rng.Float64())
	if rng.Float64() < s.slowP {
		d *= s.slowX
	}
	return time.Duration(d)
}

// sleepCtx sleeps d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeText prints the table of both runs.
func (r *hedgeResult) writeText(w io.Writer, s *hedgeSim) {
	fmt.Fprintf(w, "%d requests, %d at a time; attempts take %s (+0–50%%), %g%% of them %g× longer; seed %d\n",
		s.requests, s.workers, human(s.base), 100*s.slowP, s.slowX, s.seed)
	fmt.Fprintf(w, "hedge delay: the p%g of recent attempt latencies, 2 attempts in flight at most; wall time\n\n", s.pct)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tp50\tp95\tp99\tp99.9\tmax\tattempts/request\thedges\twon\t\n")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.4f\t%d\t%d\t\n", row.Mode, msLabel(row.P50), msLabel(row.P95), msLabel(row.P99),
			msLabel(row.P999), msLabel(row.Max), row.Attempts, row.Hedges, row.HedgeWins)
	}
	tw.Flush()
	fmt.Fprintf(w, "\np99.9 falls %.1f×, for %.2f%% more attempts\n", r.TailDrop, 100*r.ExtraLoad)
}

func msLabel(v float64) string { return fmt.Sprintf("%.1fms", v) }
