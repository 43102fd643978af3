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
		`server: attempt 1 with "Bearer token-1"`,
		`server: attempt 3 with "Bearer token-3"`,
		"client: 200 OK \"ok\"; the log saw 1 request, the server 3 attempts",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "log: GET /orders"); n != 1 {
		t.Errorf("the access log saw %d requests, want 1:\n%s", n, s)
	}
}
