package browsertest

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	cdpnetwork "github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/retryz"
	"github.com/steadyhq/retry/shed"
)

// screenshot, when set, is where TestBreakerLive writes its picture of the
// page: README's, made by
//
//	cd retryz/browsertest && go test -run TestBreakerLive -screenshot ../../docs/debug.png
//
// With it, the dependency goes down after 45 s rather than at once, so
// that the sparklines have a history.
var screenshot = flag.String("screenshot", "", "write a PNG of the page, with its breaker closed again, to `file`")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// chromium finds the browser: $CHROMIUM, else Debian's chromium
// (scripts/setup.sh installs it).
func chromium(t *testing.T) string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: scripts/setup.sh installs Debian's chromium")
	return ""
}

// program is a program with a flaky dependency: a server behind a shed
// Shedder with two endpoints, payments and search, called every 20 ms each
// through one retry.Transport with a breaker per endpoint; payments goes
// down when told. Its page is served on a port of its own.
type program struct {
	down  atomic.Bool
	page  *httptest.Server
	stop  func()
	calls atomic.Int64
}

func startProgram(t *testing.T) *program {
	p := &program{}
	sh, err := shed.New(shed.Options{Initial: 8, Max: 8})
	if err != nil {
		t.Fatal(err)
	}
	dep := httptest.NewServer(sh.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/payments" && p.down.Load() {
			http.Error(w, "payments: down", http.StatusServiceUnavailable)
			return
		}
		time.Sleep(2 * time.Millisecond)
		io.WriteString(w, "ok\n")
	})))
	base := dep.Client().Transport.(*http.Transport).Clone()
	tr := retry.NewTransport(base,
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: 20 * time.Millisecond, MaxInterval: 50 * time.Millisecond}),
		retry.WithHTTP(retry.HTTP{Key: func(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, "/") }}),
		retry.WithBreaker(retry.Breaker{PerKey: true, MinRequests: 10, Window: 2 * time.Second, OpenTimeout: 2 * time.Second, MaxWait: -1}),
		retry.WithBudget(retry.Budget{PerKey: true}),
		retry.WithConcurrency(retry.Concurrency{PerKey: true}),
	)
	z := retryz.New()
	z.AddTransport("checkout", tr)
	z.AddShedder("dependency", sh)
	mux := http.NewServeMux()
	mux.Handle("/debug/retry/", z)
	p.page = httptest.NewServer(mux)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	client := &http.Client{Transport: tr}
	for _, path := range []string{"/payments", "/search"} {
		wg.Go(func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, dep.URL+path, nil)
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				p.calls.Add(1)
			}
		})
	}
	p.stop = func() {
		cancel()
		wg.Wait()
		p.page.Close()
		dep.Close()
		base.CloseIdleConnections()
		runtime.KeepAlive(tr)
		runtime.KeepAlive(sh)
	}
	return p
}

// browser starts headless Chromium with the flags this machine needs (no
// sandbox as root, no GPU, no network of its own) and a fresh profile.
func browser(t *testing.T) (context.Context, context.CancelFunc) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	return ctx, func() {
		cancel()
		cancelAlloc()
	}
}

// wait runs a poll for the JavaScript predicate, failing the test after
// limit.
func wait(t *testing.T, ctx context.Context, what, predicate string, limit time.Duration) {
	t.Helper()
	start := time.Now()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(limit))); err != nil {
		t.Fatalf("waiting %v for %s: %v", limit, what, err)
	}
	t.Logf("%s after %v", what, time.Since(start).Round(10*time.Millisecond))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// TestBreakerLive opens the page once, in headless Chromium, on a program
// with a flaky dependency, and sees it follow the program as it runs: the
// payments breaker opens when the dependency goes down and closes when it
// comes back, the page updated in place by its event stream (never
// reloaded), with the changes listed and the failures in the sparklines.
// The page loads nothing but itself, and what it holds in the browser
// does not grow with its updates.
func TestBreakerLive(t *testing.T) {
	p := startProgram(t)
	defer p.stop()
	ctx, closeBrowser := browser(t)
	defer closeBrowser()

	var blocked atomic.Int64 // requests the page made elsewhere, or that failed
	url := p.page.URL + "/debug/retry/"
	err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*cdpnetwork.EventRequestWillBeSent); ok && !strings.HasPrefix(e.Request.URL, p.page.URL) {
			blocked.Add(1)
		}
		if _, ok := ev.(*cdpnetwork.EventLoadingFailed); ok {
			blocked.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	// A mark that a reload would wipe.
	eval[bool](t, ctx, "window.unreloaded = true")
	wait(t, ctx, "the page live", `document.getElementById("status").textContent === "live" && document.querySelector('tr[data-key="payments"][data-state="closed"]') !== null`, 15*time.Second)

	if *screenshot != "" {
		time.Sleep(45 * time.Second) // a history for the picture's sparklines
	}
	p.down.Store(true)
	wait(t, ctx, "payments' breaker open on the page", `document.querySelector('section[data-source="checkout"] tr[data-key="payments"][data-state="open"]') !== null`, 20*time.Second)
	if !eval[bool](t, ctx, `document.querySelector('section[data-source="checkout"] li[data-to="open"]') !== null && document.querySelector('tr[data-key="search"][data-state="closed"]') !== null`) {
		t.Error("the change to open is not listed, or search is not closed")
	}
	if !eval[bool](t, ctx, `document.querySelector('section[data-source="checkout"] tr[data-reason="breaker_open"]') !== null`) {
		t.Error("no breaker_open denial listed")
	}
	pill := eval[string](t, ctx, `getComputedStyle(document.querySelector('tr[data-key="payments"] .pill.open')).backgroundColor`)
	if pill != "rgb(198, 40, 40)" {
		t.Errorf("the open pill's colour is %s, want red, rgb(198, 40, 40)", pill)
	}

	p.down.Store(false)
	wait(t, ctx, "payments' breaker closed again on the page", `document.querySelector('section[data-source="checkout"] tr[data-key="payments"][data-state="closed"]') !== null && document.querySelector('section[data-source="checkout"] li[data-to="closed"]') !== null`, 20*time.Second)
	if !eval[bool](t, ctx, "window.unreloaded === true") {
		t.Error("the page was reloaded: its updates must come in place")
	}
	updates := eval[string](t, ctx, `document.body.getAttribute("data-updates")`)
	failures := eval[string](t, ctx, `document.querySelector('section[data-source="checkout"] figure[data-series="failures"] small').textContent`)
	t.Logf("%s updates; failures sparkline: %s; %d calls made", updates, failures, p.calls.Load())
	if failures == "max 0 · last 60 s" {
		t.Error("the failures sparkline shows none")
	}
	if *screenshot != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*screenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Thirty more updates: the page's nodes stay as many, and its heap
	// after a collection does not grow with them.
	nodes := `document.getElementsByTagName("*").length`
	// heap is the page's heap after a collection: the least of three
	// readings 300 ms apart, so that an event being received when one is
	// taken does not count.
	heap := func() float64 {
		least := math.Inf(1)
		for i := range 3 {
			if i > 0 {
				time.Sleep(300 * time.Millisecond)
			}
			v, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (float64, error) {
				if _, err := cdp.Call(ctx, t, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
					return 0, err
				}
				u, err := cdp.Call(ctx, t, cdpruntime.GetHeapUsage, cdp.Empty{})
				// External strings (an event's data) are kept outside
				// the heap proper.
				return u.UsedSize + u.BackingStorageSize + u.EmbedderHeapUsedSize, err
			})
			if err != nil {
				t.Fatal(err)
			}
			least = min(least, v)
		}
		return least
	}
	n0, h0 := eval[int](t, ctx, nodes), heap()
	u0 := eval[string](t, ctx, `document.body.getAttribute("data-updates")`)
	wait(t, ctx, "thirty more updates", fmt.Sprintf(`Number(document.body.getAttribute("data-updates")) >= %s + 30`, u0), 60*time.Second)
	n1, h1 := eval[int](t, ctx, nodes), heap()
	t.Logf("nodes %d then %d; heap %.0f then %.0f bytes", n0, n1, h0, h1)
	if n1 > n0+20 || n1 < n0-20 { // a change of state may add or remove a row or two
		t.Errorf("the page's nodes went from %d to %d over thirty updates", n0, n1)
	}
	// Measured at a load of 12 on 2 cores: 13 KB over thirty updates; a
	// page that kept each update's body grew by 204 KB. (A single reading
	// rather than the least of three grew by 133 KB over fifteen, under
	// load, and no leak.)
	if h1 > h0+96<<10 {
		t.Errorf("the page's heap grew from %.0f to %.0f bytes over thirty updates", h0, h1)
	}
	if n := blocked.Load(); n != 0 {
		t.Errorf("%d requests went elsewhere than the page, or failed", n)
	}
}
