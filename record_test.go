package retry_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/steadyhq/retry"
)

// recordOf sends req through a Transport of h that makes one attempt and
// routes its 503 to dead letter, and returns the record the sink got.
func recordOf(t *testing.T, h retry.HTTP, req *http.Request) *retry.RequestRecord {
	t.Helper()
	var records []retry.Event
	tr := retry.NewTransport(newBase(t), retry.WithHTTP(h),
		retry.WithPolicy(retry.Policy{MaxAttempts: 1, OnExhaustion: retry.ExhaustDeadLetter}),
		retry.WithDeadLetter(retry.DeadLetters{Sink: func(_ context.Context, ev retry.Event) error { records = append(records, ev); return nil }}))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if len(records) != 1 {
		t.Fatalf("%d records, want 1", len(records))
	}
	rec, ok := records[0].Payload.(*retry.RequestRecord)
	if !ok {
		t.Fatalf("payload %T", records[0].Payload)
	}
	return rec
}

// A Transport's dead-letter record keeps no body unless asked, and then
// with its secrets redacted; it keeps only the headers known to be safe,
// and those the caller names.
func TestRecordKeepsNoSecret(t *testing.T) {
	const form = "grant_type=client_credentials&client_id=app&client_secret=cl13nt-s3cret"
	tests := []struct {
		name         string
		http         retry.HTTP
		body         string
		wantBody     string
		wantComplete bool
		wantHeader   http.Header
	}{
		{name: "default: no body, safe headers", body: form, wantHeader: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Accept": {"application/json"}}},
		{name: "body asked for: sanitized", http: retry.HTTP{RecordBody: true}, body: form,
			wantBody: "grant_type=client_credentials&client_id=app&client_secret=[REDACTED]", wantComplete: true,
			wantHeader: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Accept": {"application/json"}}},
		{name: "binary body asked for: not kept", http: retry.HTTP{RecordBody: true}, body: "\x0a\x05\xff\xfes3cret",
			wantHeader: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Accept": {"application/json"}}},
		{name: "headers named", http: retry.HTTP{RecordHeaders: []string{"x-tenant"}}, body: form,
			wantHeader: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Accept": {"application/json"}, "X-Tenant": {"acme"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScripted(t, step{status: 503})
			req, err := http.NewRequest("PUT", srv.URL+"/token", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for name, v := range map[string]string{
				"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json", "X-Tenant": "acme",
				"Authorization": "Bearer s3cret", "X-Functions-Key": "s3cret", "Dd-Application-Key": "s3cret",
				"Ocp-Apim-Subscription-Key": "s3cret", "X-Master-Key": "s3cret", "X-Custom-Credential-Thing": "s3cret",
			} {
				req.Header.Set(name, v)
			}
			rec := recordOf(t, tt.http, req)
			if string(rec.Body) != tt.wantBody || rec.BodyComplete != tt.wantComplete {
				t.Errorf("body %q complete %v, want %q %v", rec.Body, rec.BodyComplete, tt.wantBody, tt.wantComplete)
			}
			if !reflect.DeepEqual(rec.Header, tt.wantHeader) {
				t.Errorf("header %v, want %v", rec.Header, tt.wantHeader)
			}
		})
	}
}

// A request built by hand with a nil Header, given an Idempotency-Key by
// the Transport and routed to dead letter, is recorded with that key: the
// record's header is made, not assigned to while nil.
func TestRecordNilHeader(t *testing.T) {
	srv := newScripted(t, step{status: 503}, step{status: 503})
	u, err := url.Parse(srv.URL + "/orders")
	if err != nil {
		t.Fatal(err)
	}
	req := (&http.Request{Method: "POST", URL: u}).WithContext(context.Background())
	rec := recordOf(t, retry.HTTP{IdempotencyKey: true}, req)
	if rec.Header.Get("Idempotency-Key") == "" || len(rec.Header) != 1 {
		t.Errorf("record header %v, want the Idempotency-Key alone", rec.Header)
	}
}
