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
		"attempt 2: payment: gateway_timeout (type payment.gateway_timeout)",
		"charged: receipt-3",
		"gave up (non_retryable after 1 attempt): card_stolen",
		"calls 2, attempts 4, retried 2, failed permanently 1",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
