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
	s := out.String()
	for _, want := range []string{
		"healthy: 20 calls, 20 succeeded, 20 reached the dependency",
		"breaker closed -> open",
		"breaker open -> half_open",
		"breaker half_open -> closed",
		"recovered: 20 calls, 20 succeeded, 20 reached the dependency",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(s, "breaker_open") {
		t.Errorf("no call was stopped by the open breaker:\n%s", s)
	}
}
