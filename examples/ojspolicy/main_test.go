package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"4 attempts; waits before each retry: 20ms 60ms 180ms",
		"job: retry: exhausted after 4 attempts: export service unavailable",
		"dead letter: attempt 4, type error",
		"rejected: field backoff_coefficient, value 0.5: must be a finite number >= 1.0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
