package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/retryz"
)

// The demo's workload: requests arrive at a steady rate for a few seconds;
// the server has transient faults throughout and is down in the middle.
const (
	demoRate     = 40 // requests per second
	demoDuration = 6 * time.Second
	demoOutageAt = 2 * time.Second
	demoOutage   = 2 * time.Second
	demoDeadline = 5 * time.Second // each request's
)

func newDemo(e *env) *cobra.Command {
	var dbg demoDebug
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "A flaky loopback server, driven with a plain http.Client and then with retry.Transport",
		Long: `Start a flaky HTTP server on loopback (transient 503s, 429s with Retry-After, connection resets,
and a full outage in the middle) and send it the same workload twice: with a plain http.Client,
then with retry.Transport (the default policy and retry budget, plus a circuit breaker). Then
compare them side by side: requests that succeeded, attempts, waits, breaker trips, and the load
on the server during the outage. It needs no flag and ends by itself in about 20 seconds.

With --debug-addr HOST:PORT it also serves the live page of the defences (package retryz) at
http://HOST:PORT/debug/retry/ while it runs: the breaker opening and closing, the budget, the
denials, sparklines of attempts and failures. With --debug-wait it keeps serving the page after
the demo, until interrupted. Give it an address of this machine, such as 127.0.0.1:6061.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dbg.wait && dbg.addr == "" {
				return usagef("flag --debug-wait: needs --debug-addr")
			}
			_, err := runDemo(cmd.Context(), e, dbg)
			return err
		},
	}
	cmd.Flags().StringVar(&dbg.addr, "debug-addr", "", "serve the live page of the defences at http://`HOST:PORT`/debug/retry/ while the demo runs")
	cmd.Flags().BoolVar(&dbg.wait, "debug-wait", false, "keep serving the page after the demo, until interrupted")
	return cmd
}

// demoDebug is where the demo serves the live page of its defences.
type demoDebug struct {
	addr string // HOST:PORT; "" for no page
	wait bool   // serve it after the demo, until the context ends
	// listening, when set, is told the page's URL once it is served.
	listening func(url string)
}

// serveDebug serves the page of h at dbg.addr until stop is called.
func serveDebug(out io.Writer, dbg demoDebug, h *retryz.Handler) (url string, stop func(), err error) {
	l, err := net.Listen("tcp", dbg.addr)
	if err != nil {
		return "", nil, failed(fmt.Errorf("demo: --debug-addr: %w", err))
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/retry/", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	url = "http://" + l.Addr().String() + "/debug/retry/"
	fmt.Fprintf(out, "The defences, live: %s\n", url)
	if dbg.listening != nil {
		dbg.listening(url)
	}
	return url, func() { srv.Close() }, nil
}

// flaky is the demo's server. Outside the outage it answers 6% of requests
// with 503, 2% with 429 and Retry-After: 1, and resets 2% of connections;
// in the outage it answers every request with 503.
type flaky struct {
	mu          sync.Mutex
	rng         *rand.Rand
	start       time.Time // the current run's start
	hits        int
	outageHits  int
	outageStart time.Duration
	outageEnd   time.Duration
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.hits++
	since := time.Since(f.start)
	down := since >= f.outageStart && since < f.outageEnd
	if down {
		f.outageHits++
	}
	n := f.rng.IntN(100)
	f.mu.Unlock()
	switch {
	case down:
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	case n < 6:
		http.Error(w, "busy", http.StatusServiceUnavailable)
	case n < 8:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	case n < 10:
		reset(w)
	default:
		io.WriteString(w, "ok\n")
	}
}

// reset ends the connection with a TCP reset, as a crashing server would.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// begin starts a run: the clock of the outage and the counters.
func (f *flaky) begin() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.start = time.Now()
	f.hits, f.outageHits = 0, 0
}

func (f *flaky) counts() (hits, outageHits int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits, f.outageHits
}

// demoSide is what one run saw.
type demoSide struct {
	Name            string
	Requests        int
	Succeeded       int
	OutageRequests  int // requests that arrived during the outage
	OutageSucceeded int
	Hits            int // attempts the server received
	OutageHits      int
	Resent          int           // requests net/http sent again by itself (see wireCount)
	Retries         int           // retries by retry.Transport, each after a wait
	Waited          time.Duration // the waits' sum over all requests, concurrent ones included
	LongestWait     time.Duration
	BreakerTrips    int
	Failures        map[string]int
	Latencies       []time.Duration
}

// demoReport is the demo's outcome.
type demoReport struct{ Plain, Retry demoSide }

// demoIntro is the demo's first line, printed before anything starts.
const demoIntro = "retry demo: a plain http.Client, then retry.Transport, against a flaky loopback server (about 20 s)"

// runDemo runs the demo and prints its report.
func runDemo(ctx context.Context, e *env, dbg demoDebug) (*demoReport, error) {
	fmt.Fprintln(e.stdout, demoIntro)
	var page *retryz.Handler
	var pageURL string
	if dbg.addr != "" {
		page = retryz.New()
		u, stop, err := serveDebug(e.stdout, dbg, page)
		if err != nil {
			return nil, err
		}
		defer stop()
		pageURL = u
	}
	srv := &flaky{
		rng:         rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)),
		outageStart: demoOutageAt,
		outageEnd:   demoOutageAt + demoOutage,
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, failed(fmt.Errorf("demo: %w", err))
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Listener.Close()
	ts.Listener = l
	ts.Start()
	defer ts.Close()

	n := int(demoRate * demoDuration.Seconds())
	out := e.stdout
	fmt.Fprintf(out, "A flaky HTTP server on %s: 6%% of requests get 503, 2%% get 429 with Retry-After: 1,\n", l.Addr())
	fmt.Fprintf(out, "2%% have their connection reset, and from %s to %s every request gets 503 (an outage).\n",
		human(demoOutageAt), human(demoOutageAt+demoOutage))
	fmt.Fprintf(out, "The same workload goes through it twice: %d GETs at %d/s for %s, each with a %s deadline.\n\n",
		n, demoRate, human(demoDuration), human(demoDeadline))

	base := ts.Client().Transport.(*http.Transport)
	plainRT := base.Clone()
	defer plainRT.CloseIdleConnections()
	fmt.Fprintln(out, "1. a plain http.Client")
	plainWire := &wireCount{base: plainRT}
	plain := drive(ctx, e, srv, &http.Client{Transport: plainWire}, "plain client", ts.URL+"/")
	plain.Resent = int(plainWire.resent.Load())

	var side demoSide
	var mu sync.Mutex
	retryBase := base.Clone()
	defer retryBase.CloseIdleConnections()
	r := retry.New(
		// The default policy (3 attempts, exponential from 1 s, ±50%
		// jitter) and the default retry budget, plus a circuit breaker
		// sized for a short demo: it trips on half of 20 attempts failing,
		// probes again after a second, and holds a request up to 3 s for
		// that probe (the default MaxWait, 1 s, suits inline callers).
		retry.WithBreaker(retry.Breaker{OpenTimeout: time.Second, MaxWait: 3 * time.Second,
			OnChange: func(_, _, to string) {
				if to == "open" {
					mu.Lock()
					side.BreakerTrips++
					mu.Unlock()
				}
			}}),
		retry.OnRetry(func(ev retry.Event) {
			mu.Lock()
			side.Retries++
			side.Waited += ev.Delay
			side.LongestWait = max(side.LongestWait, ev.Delay)
			mu.Unlock()
		}),
	)
	retryWire := &wireCount{base: retryBase}
	rt := retry.NewTransport(retryWire, r)
	if page != nil {
		page.AddTransport("retry.Transport", rt)
	}
	fmt.Fprintln(out, "2. retry.NewTransport(nil, retry.WithBreaker(retry.Breaker{OpenTimeout: time.Second, MaxWait: 3 * time.Second}))")
	fmt.Fprintln(out, "   the default policy and retry budget, and a circuit breaker")
	withRetry := drive(ctx, e, srv, &http.Client{Transport: rt}, "retry.Transport", ts.URL+"/")
	mu.Lock()
	withRetry.Retries, withRetry.Waited, withRetry.LongestWait, withRetry.BreakerTrips = side.Retries, side.Waited, side.LongestWait, side.BreakerTrips
	mu.Unlock()
	withRetry.Resent = int(retryWire.resent.Load())
	if err := ctx.Err(); err != nil {
		return nil, failed(fmt.Errorf("demo: %w", err))
	}
	rep := &demoReport{Plain: plain, Retry: withRetry}
	rep.write(out, r.Stats())
	if dbg.wait {
		fmt.Fprintf(out, "\nServing %s until interrupted (Ctrl-C).\n", pageURL)
		<-ctx.Done()
	}
	runtime.KeepAlive(rt) // the page shows it only while it lives
	return rep, nil
}

// wireCount counts the requests that net/http's Transport sends again by
// itself: it re-sends an idempotent request such as a GET, once, when a
// keep-alive connection it reused fails before any response (a reset, or
// the server closing it). Each send takes a connection; a round trip that
// took n connections was sent again n-1 times.
type wireCount struct {
	base   http.RoundTripper
	resent atomic.Int64
}

func (w *wireCount) RoundTrip(req *http.Request) (*http.Response, error) {
	var conns atomic.Int64
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { conns.Add(1) }}
	resp, err := w.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if n := conns.Load(); n > 1 {
		w.resent.Add(n - 1)
	}
	return resp, err
}

// drive sends the workload through client and tallies what it saw.
func drive(ctx context.Context, e *env, srv *flaky, client *http.Client, name, url string) demoSide {
	n := int(demoRate * demoDuration.Seconds())
	s := demoSide{Name: name, Requests: n, Failures: map[string]int{}}
	bar := e.newProgress(n, "   "+name)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var done atomic.Int64
	srv.begin()
	start := time.Now()
	// Request i is due at start + i/demoRate. A late request goes out at
	// once and the next ones catch up, rather than dropping ticks as a
	// time.Ticker does when its reader falls behind: on a busy machine the
	// workload keeps its rate, and the outage its share of the requests.
	wait := time.NewTimer(0)
	defer wait.Stop()
	for i := range n {
		due := start.Add(time.Duration(i) * time.Second / demoRate)
		if d := time.Until(due); d > 0 {
			wait.Reset(d)
			select {
			case <-wait.C:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		arrived := time.Since(start)
		inOutage := arrived >= demoOutageAt && arrived < demoOutageAt+demoOutage
		wg.Go(func() {
			t0 := time.Now()
			why := get(ctx, client, url)
			lat := time.Since(t0)
			mu.Lock()
			s.Latencies = append(s.Latencies, lat)
			if inOutage {
				s.OutageRequests++
			}
			if why == "" {
				s.Succeeded++
				if inOutage {
					s.OutageSucceeded++
				}
			} else {
				s.Failures[why]++
			}
			mu.Unlock()
			done.Add(1)
			bar.add(1)
		})
	}
	wg.Wait()
	bar.finish()
	s.Hits, s.OutageHits = srv.counts()
	slices.Sort(s.Latencies)
	fmt.Fprintf(e.stdout, "   %d requests in %s\n\n", done.Load(), human(time.Since(start).Round(10*time.Millisecond)))
	return s
}

// progress is a progress bar on stderr, safe for concurrent use; a nil
// *progress draws nothing.
type progress struct{ bar *progressbar.ProgressBar }

// newProgress returns a bar of n steps labelled desc, or nil when progress
// is not shown (see showProgress). The bar is cleared when it finishes.
func (e *env) newProgress(n int, desc string) *progress {
	if !e.showProgress() {
		return nil
	}
	return &progress{progressbar.NewOptions(n,
		progressbar.OptionSetWriter(e.stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)}
}

// add moves the bar n steps on.
func (p *progress) add(n int) {
	if p != nil {
		p.bar.Add(n)
	}
}

// finish completes the bar and clears it.
func (p *progress) finish() {
	if p != nil {
		p.bar.Finish()
	}
}

// get performs one GET; it returns "" on success, or why it failed.
func get(ctx context.Context, client *http.Client, url string) string {
	ctx, cancel := context.WithTimeout(ctx, demoDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		var re *retry.Error
		if errors.As(err, &re) {
			return re.Reason.String() + ": " + retry.TypeOf(err)
		}
		return retry.TypeOf(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return retry.TypeOf(err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("status %d", resp.StatusCode)
	}
	return ""
}

// write prints the side-by-side summary.
func (r *demoReport) write(w io.Writer, st retry.Stats) {
	p, q := r.Plain, r.Retry
	pct := func(a, b int) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintf(tw, "\tplain client\tretry.Transport\n")
	fmt.Fprintf(tw, "requests that succeeded\t%s\t%s\n", pct(p.Succeeded, p.Requests), pct(q.Succeeded, q.Requests))
	fmt.Fprintf(tw, "  sent outside the outage\t%s\t%s\n", pct(p.Succeeded-p.OutageSucceeded, p.Requests-p.OutageRequests), pct(q.Succeeded-q.OutageSucceeded, q.Requests-q.OutageRequests))
	fmt.Fprintf(tw, "  sent during the outage\t%s\t%s\n", pct(p.OutageSucceeded, p.OutageRequests), pct(q.OutageSucceeded, q.OutageRequests))
	fmt.Fprintf(tw, "server hits (attempts received)\t%d\t%d\n", p.Hits, q.Hits)
	fmt.Fprintf(tw, "  per request\t%.2f\t%.2f\n", float64(p.Hits)/float64(p.Requests), float64(q.Hits)/float64(q.Requests))
	fmt.Fprintf(tw, "  re-sent by net/http itself *\t%d\t%d\n", p.Resent, q.Resent)
	fmt.Fprintf(tw, "retries by retry.Transport\t-\t%d\n", q.Retries)
	mean := "-"
	if q.Retries > 0 {
		mean = fmt.Sprintf("%s / %s", human((q.Waited / time.Duration(q.Retries)).Round(time.Millisecond)), human(q.LongestWait.Round(time.Millisecond)))
	}
	fmt.Fprintf(tw, "  wait before one, mean / longest\t-\t%s\n", mean)
	fmt.Fprintf(tw, "breaker trips\t-\t%d\n", q.BreakerTrips)
	fmt.Fprintf(tw, "server load during the outage\t%.1f hits/s\t%.1f hits/s\n", float64(p.OutageHits)/demoOutage.Seconds(), float64(q.OutageHits)/demoOutage.Seconds())
	fmt.Fprintf(tw, "latency p50 / p99\t%s / %s\t%s / %s\n", human(quantile(p.Latencies, 0.5)), human(quantile(p.Latencies, 0.99)),
		human(quantile(q.Latencies, 0.5)), human(quantile(q.Latencies, 0.99)))
	tw.Flush()
	fmt.Fprintln(w, "* net/http's Transport sends a GET again, once, when a keep-alive connection it reused fails")
	fmt.Fprintln(w, "  before any response (here, a reset): the plain client's only hits beyond its requests.")
	fmt.Fprintf(w, "\nretry.Transport: %d retries granted, %d denied by the retry budget, %d waits for the breaker, %d stopped by it.\n",
		st.Retried, st.BudgetDenied, st.BreakerWaits, st.BreakerDenied)
	for _, side := range []demoSide{p, q} {
		if len(side.Failures) == 0 {
			continue
		}
		fmt.Fprintf(w, "failures with the %s:", side.Name)
		keys := make([]string, 0, len(side.Failures))
		for k := range side.Failures {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(w, "%s %s ×%d", sep, k, side.Failures[k])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "\nThe transient faults are retried away. During the outage the retry budget and the breaker")
	fmt.Fprintln(w, "keep the load near what a plain client sends, instead of multiplying it; see \"retry sim\".")
}

// quantile of sorted durations.
func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[min(int(q*float64(len(s))), len(s)-1)]
}
