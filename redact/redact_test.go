package redact_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/steadyhq/retry/redact"
)

// maxMessage is the bound in bytes that Sanitize documents.
const maxMessage = 1024

// secretShapes are messages carrying a secret, the secret, and text that
// must survive sanitizing.
var secretShapes = []struct {
	name, msg, secret, keep string
}{
	{"url userinfo", "GET https://bob:hunter2@api.example.com/v1: EOF", "hunter2", "api.example.com/v1"},
	{"url user only", "clone https://ghtoken123456@github.com/org/repo failed", "ghtoken123456", "github.com/org/repo"},
	{"api_key query", "GET https://api.example.com/v1?api_key=AbC123xyz&page=2: 503", "AbC123xyz", "page=2"},
	{"token query", "POST /hook?token=t0k3nvalue: refused", "t0k3nvalue", "/hook?token="},
	{"access_token query", "GET /me?access_token=ya29.a0AfH6SM&fields=id", "ya29.a0AfH6SM", "fields=id"},
	{"password query", "login?user=al&password=pa55w0rd failed", "pa55w0rd", "user=al"},
	{"signature query", "s3 GET /obj?X-Amz-Signature=abcdef0123456789&X-Amz-Expires=60", "abcdef0123456789", "X-Amz-Expires=60"},
	{"sig query", "blob?sv=2021&sig=Zm9vYmFyYmF6cXV4%3D&se=2030", "Zm9vYmFyYmF6cXV4", "se=2030"},
	{"client_secret form", "grant_type=client_credentials&client_secret=shhh-its-secret", "shhh-its-secret", "grant_type=client_credentials"},
	{"bearer token", "401 from upstream: Bearer eyAbc.def.ghi-token-value rejected", "eyAbc.def.ghi-token-value", "rejected"},
	{"authorization header", "request headers: Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l\nHost: x", "YWxhZGRpbjpvcGVuc2VzYW1l", "Host: x"},
	{"cookie header", "sent Cookie: session=abc123def; theme=dark\nnext line", "abc123def", "next line"},
	{"set-cookie header", "got Set-Cookie: sid=zzzTopSecret; HttpOnly", "zzzTopSecret", "got"},
	{"x-api-key header", "X-Api-Key: 9f8e7d6c5b4a", "9f8e7d6c5b4a", "X-Api-Key"},
	{"email", "no account for alice.smith@example.com", "alice.smith", "@example.com"},
	{"postgres url", "dial postgres://app:s3cret@db.internal:5432/orders: refused", "s3cret", "db.internal:5432/orders"},
	{"postgres key-value", "connect host=db.internal user=app password=s3cretpw dbname=orders: timeout", "s3cretpw", "dbname=orders"},
	{"mysql dsn", "open app:my5qlpass@tcp(db:3306)/shop: access denied", "my5qlpass", "tcp(db:3306)/shop"},
	{"redis url", "redis://:r3dispass@cache.internal:6379/0: i/o timeout", "r3dispass", "cache.internal:6379"},
	{"rediss url with user", "rediss://default:r3d1s@cache:6380 refused", "r3d1s", "cache:6380"},
	{"jdbc postgres", "jdbc:postgresql://db:5432/app?user=svc&password=jdbcpass1 failed", "jdbcpass1", "db:5432/app"},
	{"jdbc sqlserver", "jdbc:sqlserver://db:1433;user=sa;password=Sq1Pass!;database=x", "Sq1Pass!", "database=x"},
	{"jdbc oracle", "jdbc:oracle:thin:scott/tiger@db:1521:orcl", "tiger", "db:1521:orcl"},
	{"mongodb url", "mongodb+srv://admin:m0ng0pw@cluster0.example.net/test", "m0ng0pw", "cluster0.example.net"},
	{"json password", `payload {"user":"al","password":"js0nSecret"} rejected`, "js0nSecret", `"user":"al"`},
	{"json token with spaces", `{"token": "abc.def.ghi123"}`, "abc.def.ghi123", "token"},
	{"jwt", "invalid eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl in header", "eyJhbGciOiJIUzI1NiJ9", "in header"},
	{"aws access key", "credentials AKIAIOSFODNN7EXAMPLE denied", "AKIAIOSFODNN7EXAMPLE", "denied"},
	{"github token", "push with ghp_16C7e42F292c6912E7710c838347Ae178B4a failed", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "failed"},
	{"slack token", "slack xoxb-1234567890-abcdefghij failed", "xoxb-1234567890-abcdefghij", "slack"},
	{"stripe key", "stripe: sk_live_4eC39HqLyjWDarjtT1zdp7dc invalid", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "invalid"},
	{"google api key", "maps?key=AIzaSyD-abcdefghijklmnopqrstuvwx", "AIzaSyD-abcdefghijklmnopqrstuvwx", "maps"},
	{"secret yaml-ish", "config error: secret: hush-hush-value", "hush-hush-value", "config error"},
}

func TestSanitize(t *testing.T) {
	for _, tt := range secretShapes {
		t.Run(tt.name, func(t *testing.T) {
			got := redact.Sanitize(tt.msg)
			if strings.Contains(got, tt.secret) {
				t.Errorf("Sanitize(%q) = %q still holds %q", tt.msg, got, tt.secret)
			}
			if !strings.Contains(got, tt.keep) {
				t.Errorf("Sanitize(%q) = %q lost %q", tt.msg, got, tt.keep)
			}
			if again := redact.Sanitize(got); again != got {
				t.Errorf("not idempotent: %q then %q", got, again)
			}
		})
	}
	t.Run("harmless text is unchanged", func(t *testing.T) {
		for _, msg := range []string{
			"retry: http status 503",
			"dial tcp 127.0.0.1:8080: connect: connection refused",
			"unexpected status code: 500",
			"context deadline exceeded",
			"token expired",
			"read tcp 10.0.0.1:443->10.0.0.2:5555: i/o timeout",
		} {
			if got := redact.Sanitize(msg); got != msg {
				t.Errorf("Sanitize(%q) = %q", msg, got)
			}
		}
	})
	t.Run("length is bounded", func(t *testing.T) {
		got := redact.Sanitize(strings.Repeat("é", 5000))
		if len(got) > maxMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "(truncated)") {
			t.Errorf("len %d, valid %v, tail %q", len(got), utf8.ValidString(got), got[len(got)-20:])
		}
	})
}

func TestSanitizeURL(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"https://bob:hunter2@api.example.com/v1?id=7", "https://api.example.com/v1?id=7"},
		{"https://api.example.com/pay?token=abc123&id=7", "https://api.example.com/pay?token=[REDACTED]&id=7"},
		{"https://x.example/cb#access_token=zz9&state=s", "https://x.example/cb#access_token=[REDACTED]&state=s"},
		{"http://127.0.0.1:8080/health", "http://127.0.0.1:8080/health"},
		{"https://api.example.com/users/alice@example.com", "https://api.example.com/users/a***@example.com"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := redact.SanitizeURL(u); got != tt.want {
			t.Errorf("SanitizeURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if u.String() != tt.in && !strings.Contains(tt.in, "@example.com") {
			t.Errorf("SanitizeURL changed its argument to %q", u)
		}
	}
	if redact.SanitizeURL(nil) != "" {
		t.Error("nil URL")
	}
}

func TestSafeHeader(t *testing.T) {
	h := http.Header{
		"Authorization":       {"Bearer s3cr3t-value"},
		"Proxy-Authorization": {"Basic abc"},
		"Cookie":              {"sid=1"},
		"X-Api-Key":           {"k3y"},
		"X-Auth-Token":        {"t0k"},
		"Idempotency-Key":     {"idem-1"},
		"Content-Type":        {"application/json"},
		"X-Debug":             {"password=leaky"},
	}
	got := redact.SafeHeader(h)
	for _, name := range []string{"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key", "X-Auth-Token"} {
		if _, ok := got[name]; ok {
			t.Errorf("%s kept", name)
		}
	}
	if got.Get("Idempotency-Key") != "idem-1" || got.Get("Content-Type") != "application/json" {
		t.Errorf("safe headers lost: %v", got)
	}
	if v := got.Get("X-Debug"); strings.Contains(v, "leaky") {
		t.Errorf("X-Debug = %q", v)
	}
	if h.Get("Authorization") == "" {
		t.Error("SafeHeader changed its argument")
	}
	if redact.SafeHeader(nil) != nil {
		t.Error("nil header")
	}
}

func FuzzSanitize(f *testing.F) {
	for _, tt := range secretShapes {
		f.Add(tt.msg, tt.secret)
	}
	f.Add("a@b.c@d.e:f@g", "x")
	f.Add("password=\"unterminated", "y")
	f.Fuzz(func(t *testing.T, msg, secret string) {
		got := redact.Sanitize(msg)
		if len(got) > maxMessage || !utf8.ValidString(got) {
			t.Fatalf("Sanitize(%q) = %q: len %d, valid %v", msg, got, len(got), utf8.ValidString(got))
		}
		// A secret planted as a password value never survives.
		if len(secret) < 4 || strings.ContainsAny(secret, "&;, \t\r\n\"'`)]}<>\\") || !utf8.ValidString(secret) {
			return
		}
		planted := redact.Sanitize(msg + " password=" + secret)
		if strings.Contains(planted, "password="+secret) {
			t.Fatalf("planted secret %q survived in %q", secret, planted)
		}
	})
}
