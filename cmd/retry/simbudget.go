package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/steadyhq/retry"
)

// The budget table's setup: a full outage of budgetOutage after
// budgetWarm of health, and, in a second run, budgetFailRate of the
// attempts failing independently for budgetSpan; attempts of
// budgetLatency; the default policy (3 attempts, backoff from 1 s, ×2,
// jitter ±50%); one Retrier.
const (
	budgetWarm     = 20 * time.Second
	budgetOutage   = 60 * time.Second
	budgetSpan     = 60 * time.Second
	budgetLatency  = 10 * time.Millisecond
	budgetFailRate = 0.1
)

// budgetRates are the request rates of the budget table, per second.
var budgetRates = []float64{10, 100, 1000}

// budgetRule is a retry budget the table compares. options returns the
// options of a fresh Retrier on clk, and, for a rule kept by the
// simulation, what learns the outcome of every attempt (nil for none).
type budgetRule struct {
	Name    string
	options func(clk *vclock) ([]retry.Option, attemptObserver)
}

// attemptObserver learns the outcome of attempt n of a call (ctx is the
// attempt's) as the dependency answers it.
type attemptObserver interface {
	observe(ctx context.Context, n int, err error)
}

// budgetRules are the rules of the table: none, this library's default
// (the zero Budget), its old rule, and the peers', kept in the simulation
// as retry.SharedBudget implementations.
var budgetRules = []budgetRule{
	{Name: "no budget (3 attempts)", options: func(*vclock) ([]retry.Option, attemptObserver) {
		return []retry.Option{retry.WithBudget(retry.Budget{Off: true})}, nil
	}},
	{Name: "default: 0.15 a success + 0.5/s over 10 s", options: func(*vclock) ([]retry.Option, attemptObserver) {
		return nil, nil // the zero Budget, which every Retrier has
	}},
	{Name: "old rule: 15% of requests + 2/s over 10 s", options: func(clk *vclock) ([]retry.Option, attemptObserver) {
		return []retry.Option{retry.WithBudget(retry.Budget{Shared: &windowBudget{clk: clk, ratio: 0.15, perSec: 2, ttl: 10 * time.Second}})}, nil
	}},
	{Name: "Finagle: 20% of requests + 10/s, TTL 10 s", options: func(clk *vclock) ([]retry.Option, attemptObserver) {
		return []retry.Option{retry.WithBudget(retry.Budget{Shared: &windowBudget{clk: clk, ratio: 0.2, perSec: 10, ttl: 10 * time.Second}})}, nil
	}},
	{Name: "AWS quota: 500, retry 14 (429: 5), success +1", options: func(*vclock) ([]retry.Option, attemptObserver) {
		q := &awsQuota{tokens: awsCapacity}
		return []retry.Option{retry.WithBudget(retry.Budget{Shared: q})}, q
	}},
}

// windowBudget is the rule of Finagle's RetryBudget and of this library's
// budget before it counted successes: over a sliding window of ttl,
// retries may reach ratio times the requests (first attempts) plus perSec
// a second. It runs on the simulation's clock, whose scheduler runs one
// task at a time: no lock is needed.
type windowBudget struct {
	clk           *vclock
	ratio, perSec float64
	ttl           time.Duration
	ring          [10]windowSlice
}

// windowSlice is a tenth of a windowBudget's window.
type windowSlice struct {
	start            int64 // slice number; 0 is unused
	firsts, attempts int64
}

func (b *windowBudget) First(string) { b.slice(b.clk.Now()).firsts++ }

func (b *windowBudget) Retry(_ context.Context, _ string, now time.Time) bool {
	cur := b.slice(now)
	var firsts, retries int64
	for _, s := range b.ring {
		if s.start > cur.start-int64(len(b.ring)) {
			firsts += s.firsts
			retries += s.attempts
		}
	}
	if float64(retries+1) > b.ratio*float64(firsts)+b.perSec*b.ttl.Seconds() {
		return false
	}
	cur.attempts++
	return true
}

// slice returns the window's slice of now, emptied if it held an older one.
func (b *windowBudget) slice(now time.Time) *windowSlice {
	width := int64(b.ttl) / int64(len(b.ring))
	n := now.UnixNano()/width + 1
	s := &b.ring[n%int64(len(b.ring))]
	if s.start != n {
		*s = windowSlice{start: n}
	}
	return s
}

// The AWS SDKs' retry quota (standard mode, as revised in 2026): a bucket
// of 500 tokens; a retry takes 14, or 5 after a throttling error; a first
// attempt that succeeds puts 1 back, and a retry that succeeds puts back
// what it took.
const (
	awsCapacity     = 500
	awsRetryCost    = 14
	awsThrottleCost = 5
	awsSuccess      = 1
)

// awsQuota is the AWS SDKs' retry quota. Like windowBudget, it needs no
// lock in the simulation.
type awsQuota struct{ tokens int }

// awsCall is what the quota knows of one call: its last failure, and the
// tokens its retry in flight took.
type awsCall struct {
	last error
	held int
}

type awsCallKey struct{}

func (q *awsQuota) First(string) {}

func (q *awsQuota) Retry(ctx context.Context, _ string, _ time.Time) bool {
	c, _ := ctx.Value(awsCallKey{}).(*awsCall)
	if c == nil {
		return false
	}
	cost := awsRetryCost
	if c.last == errOverloaded {
		cost = awsThrottleCost
	}
	if q.tokens < cost {
		return false
	}
	q.tokens -= cost
	c.held = cost
	return true
}

func (q *awsQuota) observe(ctx context.Context, n int, err error) {
	c, _ := ctx.Value(awsCallKey{}).(*awsCall)
	if c == nil {
		return
	}
	c.last = err
	switch {
	case err != nil:
		c.held = 0 // a failed retry keeps what it took
	case n == 1:
		q.tokens = min(q.tokens+awsSuccess, awsCapacity)
	default:
		q.tokens = min(q.tokens+c.held, awsCapacity)
	}
}

// budgetRun is what one run of the budget model measured.
type budgetRun struct {
	requests, succeeded  int
	outageHits, outageIn int   // hits during the outage, requests arriving in it
	denied               int64 // retries the library's budget denied (Stats.BudgetDenied)
}

// budgetSim is one run of the budget model: requests at rate for dur
// against a server whose attempts fail during [outageStart, outageEnd),
// or with probability failRate, drawn for each request and attempt so
// that every rule meets the same failures.
type budgetSim struct {
	rule     budgetRule
	rate     float64
	dur      time.Duration
	srv      server // the outage
	failRate float64
	seed     uint64
}

// run simulates the workload on the real engine.
func (s *budgetSim) run() (budgetRun, error) {
	clk := newVClock()
	rng := rand.New(rand.NewPCG(s.seed, 0xb0d6e7))
	opts, obs := s.rule.options(clk)
	r := retry.New(append([]retry.Option{retry.WithClock(clk), retry.WithRandom(rng.Float64)}, opts...)...)
	if err := r.Err(); err != nil {
		return budgetRun{}, err
	}
	var res budgetRun
	res.requests = int(s.rate * s.dur.Seconds())
	interval := time.Duration(float64(time.Second) / s.rate)
	for i := range res.requests {
		start := time.Duration(i) * interval
		if start >= s.srv.outageStart && start < s.srv.outageEnd {
			res.outageIn++
		}
		attempt := func(ctx context.Context) error {
			if err := clk.Sleep(ctx, budgetLatency); err != nil {
				return err
			}
			n := retry.AttemptFrom(ctx)
			t := clk.Now().Sub(epoch)
			err := s.srv.serve(t)
			if err != nil {
				res.outageHits++
			} else if unitDraw(s.seed, i, n) < s.failRate {
				err = errFlaky
			}
			if obs != nil {
				obs.observe(ctx, n, err)
			}
			return err
		}
		clk.Go(epoch.Add(start), i, func(ctx context.Context) {
			if r.Run(context.WithValue(ctx, awsCallKey{}, &awsCall{}), attempt) == nil {
				res.succeeded++
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !clk.Run(ctx, cancel, epoch.Add(s.dur+time.Minute), 50_000_000) {
		return budgetRun{}, fmt.Errorf("sim: %s at %g/s did not settle within a minute of its last request", s.rule.Name, s.rate)
	}
	res.denied = r.Stats().BudgetDenied
	return res, nil
}

// unitDraw returns a number in [0, 1) fixed by seed, request i and
// attempt n (SplitMix64's finalizer over their mix).
func unitDraw(seed uint64, i, n int) float64 {
	x := seed ^ uint64(i)*0x9e3779b97f4a7c15 ^ uint64(n)*0xc2b2ae3d27d4eb4f
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// budgetRow is one rule at one rate: the load of a full outage in
// requests' worth (server hits during it per request arriving in it), and
// the share of calls that succeed under independent failures.
type budgetRow struct {
	Rule          string  `json:"rule"`
	Rate          float64 `json:"rate"`
	Amplification float64 `json:"outage_amplification"`
	SuccessRate   float64 `json:"success_rate"`
}

// budgetTable runs every rule at every rate, both runs each, on all
// processors at once (each run has its own clock, so the figures do not
// depend on the order), and returns the rows by rule, then rate.
func budgetTable(rules []budgetRule, rates []float64, seed uint64, bar *progress) ([]budgetRow, error) {
	rows := make([]budgetRow, len(rules)*len(rates))
	errs := make([]error, len(rows))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range rows {
		rule, rate := rules[i/len(rates)], rates[i%len(rates)]
		rows[i] = budgetRow{Rule: rule.Name, Rate: rate}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			down := &budgetSim{rule: rule, rate: rate, dur: budgetWarm + budgetOutage, seed: seed,
				srv: server{outageStart: budgetWarm, outageEnd: budgetWarm + budgetOutage}}
			flaky := &budgetSim{rule: rule, rate: rate, dur: budgetSpan, failRate: budgetFailRate, seed: seed}
			a, err := down.run()
			if err == nil {
				var b budgetRun
				b, err = flaky.run()
				rows[i].Amplification = float64(a.outageHits) / float64(a.outageIn)
				rows[i].SuccessRate = float64(b.succeeded) / float64(b.requests)
			}
			errs[i] = err
			bar.add(1)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, failed(err)
		}
	}
	return rows, nil
}

// runBudgetTable prints the budget table (retry sim --budgets): for each
// rule and rate, the load of a full outage and the success rate under 10%
// independent failures, as text or JSON, on e's stdout, with a progress
// bar of the runs on e's stderr when progress is shown.
func runBudgetTable(e *env, seed uint64, asJSON bool) error {
	bar := e.newProgress(len(budgetRules)*len(budgetRates), "budgets")
	rows, err := budgetTable(budgetRules, budgetRates, seed, bar)
	bar.finish()
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.stdout, rows)
	}
	w := e.stdout
	fmt.Fprintf(w, "Retry budgets on the real engine, in virtual time: one Retrier, the default policy (3 attempts,\n")
	fmt.Fprintf(w, "backoff from 1s, ×2, jitter ±50%%), attempts of %s; seed %d.\n", human(budgetLatency), seed)
	fmt.Fprintf(w, "load: server hits per request during a full outage of %s after %s of health;\n", human(budgetOutage), human(budgetWarm))
	fmt.Fprintf(w, "success: calls that succeed over %s with %g%% of attempts failing independently.\n\n", human(budgetSpan), 100*budgetFailRate)
	width := 0 // the rules' column is aligned left, the figures right
	for _, r := range rows {
		width = max(width, utf8.RuneCountInString(r.Rule))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\t", width, "rule")
	for _, what := range []string{"load", "success"} {
		for _, rate := range budgetRates {
			fmt.Fprintf(tw, "%s %g/s\t", what, rate)
		}
	}
	fmt.Fprintf(tw, "\n")
	for i := 0; i < len(rows); i += len(budgetRates) {
		fmt.Fprintf(tw, "%-*s\t", width, rows[i].Rule)
		for _, r := range rows[i : i+len(budgetRates)] {
			fmt.Fprintf(tw, "%.3f×\t", r.Amplification)
		}
		for _, r := range rows[i : i+len(budgetRates)] {
			fmt.Fprintf(tw, "%.2f%%\t", 100*r.SuccessRate)
		}
		fmt.Fprintf(tw, "\n")
	}
	return tw.Flush()
}
