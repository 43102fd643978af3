package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"a first attempt: the handler called the failing dependency 3 time(s)",
		"Retry-Attempt: 2: the handler called the failing dependency 1 time(s)",
		"Retry-After: ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	// The server stays busy while it sheds: under -race on a shared
	// machine, at least half its capacity (the load test holds it to 90%).
	m := regexp.MustCompile(`served \d+ \((\d+)% of capacity\), shed (\d+)`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("no served line:\n%s", got)
	}
	if pct, _ := strconv.Atoi(m[1]); pct < 50 {
		t.Errorf("served %d%% of capacity, want at least 50%%:\n%s", pct, got)
	}
	if n, _ := strconv.Atoi(m[2]); n == 0 {
		t.Errorf("nothing shed at three times capacity:\n%s", got)
	}
}
