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
	{name: "url userinfo", msg: "GET https://bob:hunter2@api.example.com/v1: EOF", secret: "hunter2", keep: "api.example.com/v1"},
	{name: "url user only", msg: "clone https://ghtoken123456@github.com/org/repo failed", secret: "ghtoken123456", keep: "github.com/org/repo"},
	{name: "api_key query", msg: "GET https://api.example.com/v1?api_key=AbC123xyz&page=2: 503", secret: "AbC123xyz", keep: "page=2"},
	{name: "token query", msg: "POST /hook?token=t0k3nvalue: refused", secret: "t0k3nvalue", keep: "/hook?token="},
	{name: "access_token query", msg: "GET /me?access_token=ya29.a0AfH6SM&fields=id", secret: "ya29.a0AfH6SM", keep: "fields=id"},
	{name: "password query", msg: "login?user=al&password=pa55w0rd failed", secret: "pa55w0rd", keep: "user=al"},
	{name: "signature query", msg: "s3 GET /obj?X-Amz-Signature=abcdef0123456789&X-Amz-Expires=60", secret: "abcdef0123456789", keep: "X-Amz-Expires=60"},
	{name: "sig query", msg: "blob?sv=2021&sig=Zm9vYmFyYmF6cXV4%3D&se=2030", secret: "Zm9vYmFyYmF6cXV4", keep: "se=2030"},
	{name: "client_secret form", msg: "grant_type=client_credentials&client_secret=shhh-its-secret", secret: "shhh-its-secret", keep: "grant_type=client_credentials"},
	{name: "bearer token", msg: "401 from upstream: Bearer eyAbc.def.ghi-token-value rejected", secret: "eyAbc.def.ghi-token-value", keep: "rejected"},
	{name: "authorization header", msg: "request headers: Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l\nHost: x", secret: "YWxhZGRpbjpvcGVuc2VzYW1l", keep: "Host: x"},
	{name: "cookie header", msg: "sent Cookie: session=abc123def; theme=dark\nnext line", secret: "abc123def", keep: "next line"},
	{name: "set-cookie header", msg: "got Set-Cookie: sid=zzzTopSecret; HttpOnly", secret: "zzzTopSecret", keep: "got"},
	{name: "x-api-key header", msg: "X-Api-Key: 9f8e7d6c5b4a", secret: "9f8e7d6c5b4a", keep: "X-Api-Key"},
	{name: "email", msg: "no account for alice.smith@example.com", secret: "alice.smith", keep: "@example.com"},
	{name: "postgres url", msg: "dial postgres://app:s3cret@db.internal:5432/orders: refused", secret: "s3cret", keep: "db.internal:5432/orders"},
	{name: "postgres key-value", msg: "connect host=db.internal user=app password=s3cretpw dbname=orders: timeout", secret: "s3cretpw", keep: "dbname=orders"},
	{name: "mysql dsn", msg: "open app:my5qlpass@tcp(db:3306)/shop: access denied", secret: "my5qlpass", keep: "tcp(db:3306)/shop"},
	{name: "redis url", msg: "redis://:r3dispass@cache.internal:6379/0: i/o timeout", secret: "r3dispass", keep: "cache.internal:6379"},
	{name: "rediss url with user", msg: "rediss://default:r3d1s@cache:6380 refused", secret: "r3d1s", keep: "cache:6380"},
	{name: "jdbc postgres", msg: "jdbc:postgresql://db:5432/app?user=svc&password=jdbcpass1 failed", secret: "jdbcpass1", keep: "db:5432/app"},
	{name: "jdbc sqlserver", msg: "jdbc:sqlserver://db:1433;user=sa;password=Sq1Pass!;database=x", secret: "Sq1Pass!", keep: "database=x"},
	{name: "jdbc oracle", msg: "jdbc:oracle:thin:scott/tiger@db:1521:orcl", secret: "tiger", keep: "db:1521:orcl"},
	{name: "mongodb url", msg: "mongodb+srv://admin:m0ng0pw@cluster0.example.net/test", secret: "m0ng0pw", keep: "cluster0.example.net"},
	{name: "json password", msg: `payload {"user":"al","password":"js0nSecret"} rejected`, secret: "js0nSecret", keep: `"user":"al"`},
	{name: "json token with spaces", msg: `{"token": "abc.def.ghi123"}`, secret: "abc.def.ghi123", keep: "token"},
	{name: "jwt", msg: "invalid eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl in header", secret: "eyJhbGciOiJIUzI1NiJ9", keep: "in header"},
	{name: "aws access key", msg: "credentials AKIAIOSFODNN7EXAMPLE denied", secret: "AKIAIOSFODNN7EXAMPLE", keep: "denied"},
	{name: "github token", msg: "push with ghp_16C7e42F292c6912E7710c838347Ae178B4a failed", secret: "ghp_16C7e42F292c6912E7710c838347Ae178B4a", keep: "failed"},
	{name: "slack token", msg: "slack xoxb-1234567890-abcdefghij failed", secret: "xoxb-1234567890-abcdefghij", keep: "slack"},
	{name: "stripe key", msg: "stripe: sk_live_4eC39HqLyjWDarjtT1zdp7dc invalid", secret: "sk_live_4eC39HqLyjWDarjtT1zdp7dc", keep: "invalid"},
	{name: "google api key", msg: "maps?key=AIzaSyD-abcdefghijklmnopqrstuvwx", secret: "AIzaSyD-abcdefghijklmnopqrstuvwx", keep: "maps"},
	{name: "secret yaml-ish", msg: "config error: secret: hush-hush-value", secret: "hush-hush-value", keep: "config error"},
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
		{in: "https://bob:hunter2@api.example.com/v1?id=7", want: "https://api.example.com/v1?id=7"},
		{in: "https://api.example.com/pay?token=abc123&id=7", want: "https://api.example.com/pay?token=[REDACTED]&id=7"},
		{in: "https://x.example/cb#access_token=zz9&state=s", want: "https://x.example/cb#access_token=[REDACTED]&state=s"},
		{in: "http://127.0.0.1:8080/health", want: "http://127.0.0.1:8080/health"},
		{in: "https://api.example.com/users/alice@example.com", want: "https://api.example.com/users/a***@example.com"},
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
