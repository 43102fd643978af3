package redact_test

import (
	"fmt"
	"net/http"

	"github.com/steadyhq/retry/redact"
)

// Error messages are made safe to log, count or store; the caller keeps the
// real error.
func Example() {
	for _, msg := range []string{
		"dial postgres://app:s3cret@db.internal:5432/orders: connection refused",
		"connect host=db.internal user=app password=s3cretpw dbname=orders: timeout",
		"upstream 401: Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln",
		"push with ghp_16C7e42F292c6912E7710c838347Ae178B4a failed",
		"no account for alice.smith@example.com",
		"dial tcp 127.0.0.1:8080: connect: connection refused",
	} {
		fmt.Println(redact.Sanitize(msg))
	}
	// Output:
	// dial postgres://[REDACTED]@db.internal:5432/orders: connection refused
	// connect host=db.internal user=app password=[REDACTED] dbname=orders: timeout
	// upstream 401: Authorization: [REDACTED]
	// push with [REDACTED] failed
	// no account for a***@example.com
	// dial tcp 127.0.0.1:8080: connect: connection refused
}

// A request is described, for a dead-letter record, without the credentials
// it carries: only headers known to be safe are kept, and those the caller
// names.
func ExampleSafeHeader() {
	req, _ := http.NewRequest(http.MethodPost, "https://bob:hunter2@api.example.com/v1/charges?api_key=AbC123&page=2", nil)
	req.Header.Set("Authorization", "Bearer s3cr3t-value")
	req.Header.Set("X-Functions-Key", "f-key-value")
	req.Header.Set("Idempotency-Key", "order-7")
	req.Header.Set("X-Tenant", "acme; password=leaky")

	h := redact.SafeHeader(req.Header, "X-Tenant")
	fmt.Println(redact.SanitizeURL(req.URL))
	fmt.Printf("Authorization: %q\n", h.Get("Authorization"))
	fmt.Printf("X-Functions-Key: %q\n", h.Get("X-Functions-Key"))
	fmt.Printf("Idempotency-Key: %q\n", h.Get("Idempotency-Key"))
	fmt.Printf("X-Tenant: %q\n", h.Get("X-Tenant"))
	// Output:
	// https://api.example.com/v1/charges?api_key=[REDACTED]&page=2
	// Authorization: ""
	// X-Functions-Key: ""
	// Idempotency-Key: "order-7"
	// X-Tenant: "acme; password=[REDACTED]"
}
