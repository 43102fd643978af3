package retryz_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/retryz"
	"github.com/steadyhq/retry/shed"
)

var update = flag.Bool("update", false, "rewrite testdata/fields.txt")

// paths lists the JSON paths of v, arrays as [], sorted.
func paths(prefix string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			paths(prefix+"."+k, x, out)
		}
	case []any:
		for _, x := range v {
			paths(prefix+"[]", x, out)
		}
		if len(v) == 0 {
			out[prefix+"[]"] = true
		}
	default:
		out[prefix] = true
	}
}

// TestJSONFieldsStable: the JSON of a page with every kind of source, every
// gate per key and a fleet breaker has exactly the fields listed in
// testdata/fields.txt (the fields docs/debug.md documents): a field
// renamed or dropped fails here, and a field added must be listed.
func TestJSONFieldsStable(t *testing.T) {
	local := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond}),
		retry.WithBreaker(retry.Breaker{MinRequests: 2, FailureRatio: 1, OpenTimeout: time.Hour, MaxWait: -1, PerKey: true}),
		retry.WithBudget(retry.Budget{PerKey: true, Tokens: -1, Ratio: -1}),
		retry.WithRateLimit(retry.RateLimit{Limit: 100, PerKey: true}))
	// The budget denies the first call's retry; the second call's failure
	// opens k's breaker, which denies its retry.
	for range 2 {
		_ = retry.Run(t.Context(), func(context.Context) error { return errDown }, local, retry.WithKey("k"))
	}
	fleet := retry.New(retry.WithBreaker(retry.Breaker{Store: memStore{}}),
		retry.WithThrottle(retry.Throttle{}), retry.WithConcurrency(retry.Concurrency{}))
	_ = fleet.Run(t.Context(), func(context.Context) error { return nil })
	sh := mustShedder(t)
	tk, _ := sh.Admit(t.Context(), shed.Request{})
	sh.Done(tk)
	h := retryz.New()
	h.AddRetrier("local", local)
	h.AddRetrier("fleet", fleet)
	h.AddTransport("nil", nil)
	h.AddShedder("s", sh)
	h.AddShedder("nil shedder", nil)
	h.AddFleet("f", &fleetPart{on: true, last: time.Now(), errs: 1})
	h.AddFleet("nil fleet", nil)
	defer runtime.KeepAlive([]any{local, fleet, sh})
	srv := serve(t, h)
	// Readings until every source has a series (two whole seconds passed).
	var body string
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(300 * time.Millisecond) {
		_, _, body = get(t, srv, "GET", "/debug/retry/?format=json")
		var s retryz.Snapshot
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		if s.Clients[0].Activity.Attempts != nil && s.Shedders[1].Activity.Admitted != nil && s.Fleet[0].Activity.Errors != nil {
			break
		}
	}
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	paths("", v, set)
	var got []string
	for p := range set {
		got = append(got, p)
	}
	slices.Sort(got)
	if *update {
		if err := os.WriteFile("testdata/fields.txt", []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile("testdata/fields.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(data))
	for _, p := range got {
		if !slices.Contains(want, p) {
			t.Errorf("field %s is not listed in testdata/fields.txt", p)
		}
	}
	for _, p := range want {
		if !slices.Contains(got, p) {
			t.Errorf("field %s is gone", p)
		}
	}
}

// memStore is a BreakerStore of one process, in memory: enough for the
// breakers to report whether they decided on the fleet's state.
type memStore struct{}

func (memStore) Sync(_ context.Context, _ retry.Breaker, in []retry.BreakerSync) ([]retry.BreakerFleet, error) {
	out := make([]retry.BreakerFleet, len(in))
	for i := range out {
		out[i] = retry.BreakerFleet{State: retry.BreakerClosed, Generation: 1}
	}
	return out, nil
}
func (memStore) SyncInterval() time.Duration { return time.Second }
