package main

import (
	"bytes"
	"testing"

	"go.uber.org/goleak"
)

func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	const want = `attempt 1 failed (grpc.unavailable); retrying
attempt 2 failed (grpc.unavailable); retrying
Check: SERVING after 3 attempts (pushback kept: true)
attempt 1 failed (grpc.unavailable); retrying
Watch: SERVING
Watch: SERVING
5 attempts in all
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
