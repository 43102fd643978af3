package redact_test

import (
	"net/http"
	"net/url"
	"reflect"
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
	// A password may hold the sub-delims unescaped (RFC 3986, 3.2.1).
	{name: "url password with equals", msg: "GET https://svc:pa=ss@api.example.com/v1 failed", secret: "svc:pa", keep: "api.example.com/v1"},
	{name: "url password with ampersand", msg: "GET https://svc:p&ss;w,rd@api.example.com/v1 failed", secret: "p&ss", keep: "api.example.com/v1"},
	{name: "url password with quote and at", msg: "dial redis://:it's@me@cache:6379 refused", secret: "it's", keep: "cache:6379"},
	{name: "dsn password with equals", msg: "open svc:EqPw71kq=tail@tcp(db:3306)/shop: denied", secret: "EqPw71kq", keep: "tcp(db:3306)/shop"},
	{name: "dsn after a key", msg: "config dsn=app:my5qlpass@tcp(db:3306)/shop invalid", secret: "my5qlpass", keep: "config dsn="},
	{name: "email after a key", msg: "user email=alice.smith@example.com not found", secret: "alice.smith", keep: "email=a***@example.com"},
	// Names ending in "key".
	{name: "connection string AccountKey", msg: "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=bXlTZWNyZXRLZXk=;EndpointSuffix=core.windows.net", secret: "bXlTZWNyZXRLZXk", keep: "AccountName=acct"},
	{name: "app_key query", msg: "GET /v1/metrics?app_key=appk3yvalue&from=1: 403", secret: "appk3yvalue", keep: "from=1"},
	{name: "subscription-key query", msg: "GET /api?subscription-key=subk3yvalue: 401", secret: "subk3yvalue", keep: "/api?subscription-key="},
	// Spaces around the sign.
	{name: "password with spaces", msg: "login failed: password = hunter2 for user al", secret: "hunter2", keep: "for user al"},
	{name: "key with spaces and colon", msg: "config api_key : k3yv4lue loaded", secret: "k3yv4lue", keep: "config"},
	// Header lines whose names end in "key", to the end of the line.
	{name: "x-functions-key header", msg: "sent X-Functions-Key: fnk3yvalue\nHost: x", secret: "fnk3yvalue", keep: "Host: x"},
	{name: "dd-application-key header", msg: "Dd-Application-Key: ddappk3y", secret: "ddappk3y", keep: "Dd-Application-Key"},
	{name: "ocp-apim-subscription-key header", msg: "Ocp-Apim-Subscription-Key: part1 part2\nnext", secret: "part2", keep: "next"},
	{name: "x-master-key header", msg: "headers: X-Master-Key: mk3yvalue", secret: "mk3yvalue", keep: "headers"},
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
			"dial tcp: lookup api.example.com: no such host",
			"GET http://[::1]:8080/v1/items?page=2: 503",
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
		"Authorization":             {"Bearer s3cr3t-value"},
		"Proxy-Authorization":       {"Basic abc"},
		"Cookie":                    {"sid=1"},
		"X-Api-Key":                 {"k3y"},
		"X-Auth-Token":              {"t0k"},
		"X-Functions-Key":           {"fnk3y"},
		"Dd-Application-Key":        {"ddk3y"},
		"Ocp-Apim-Subscription-Key": {"apimk3y"},
		"X-Master-Key":              {"mk3y"},
		"X-Debug":                   {"password=leaky"},
		"X-Tenant":                  {"acme password=leaky"},
		"Idempotency-Key":           {"idem-1"},
		"Content-Type":              {"application/json"},
		"Accept":                    {"text/plain; token=leaky"},
	}
	tests := []struct {
		name string
		keep []string
		want http.Header
	}{
		{name: "safe headers only", want: http.Header{
			"Idempotency-Key": {"idem-1"},
			"Content-Type":    {"application/json"},
			"Accept":          {"text/plain; token=[REDACTED]"},
		}},
		{name: "and those named, without case", keep: []string{"x-tenant", "X-Missing"}, want: http.Header{
			"Idempotency-Key": {"idem-1"},
			"Content-Type":    {"application/json"},
			"Accept":          {"text/plain; token=[REDACTED]"},
			"X-Tenant":        {"acme password=[REDACTED]"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := redact.SafeHeader(h, tt.keep...)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("SafeHeader = %v, want %v", got, tt.want)
			}
		})
	}
	if h.Get("Authorization") == "" || h.Get("X-Debug") != "password=leaky" {
		t.Error("SafeHeader changed its argument")
	}
	if redact.SafeHeader(nil) != nil {
		t.Error("nil header")
	}
}

func TestSanitizeBody(t *testing.T) {
	long := strings.Repeat("x", 4<<10)
	tests := []struct {
		name string
		body []byte
		want []byte
	}{
		{name: "form", body: []byte("grant_type=client_credentials&client_secret=shhh&scope=a"), want: []byte("grant_type=client_credentials&client_secret=[REDACTED]&scope=a")},
		{name: "json", body: []byte(`{"user":"al","password":"js0nSecret","note":"` + long + `"}`), want: []byte(`{"user":"al","password":"[REDACTED]","note":"` + long + `"}`)},
		{name: "nothing secret", body: []byte("hello"), want: []byte("hello")},
		{name: "binary", body: []byte{0x0a, 0x05, 0xff, 0xfe, 's', 'e', 'c'}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redact.SanitizeBody(tt.body); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("SanitizeBody(%.60q) = %.60q, want %.60q", tt.body, got, tt.want)
			}
		})
	}
}

// userinfoBytes are the bytes a URL's password may hold unescaped (RFC
// 3986, 3.2.1), with '@', which parsers take up to the last one.
const userinfoBytes = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:%@"

// only reports whether s is made of the bytes of set alone.
func only(s, set string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(set, s[i]) < 0 {
			return false
		}
	}
	return true
}

// Secrets planted after any text, in any of the shapes the sanitizer
// knows, never survive it: a password value, a URL password of any legal
// bytes, a header line and a key = value pair under any name that ends in
// a secret word.
func FuzzSanitize(f *testing.F) {
	for _, tt := range secretShapes {
		f.Add(tt.msg, tt.secret, "X-Functions-")
	}
	f.Add("a@b.c@d.e:f@g", "x", "")
	f.Add("password=\"unterminated", "y", "Dd-Application")
	f.Add(`token="[REDACTED]`, "pa=ss&w0rd", "Ocp-Apim-Subscription-")
	f.Fuzz(func(t *testing.T, msg, secret, prefix string) {
		got := redact.Sanitize(msg)
		if len(got) > maxMessage || !utf8.ValidString(got) {
			t.Fatalf("Sanitize(%q) = %q: len %d, valid %v", msg, got, len(got), utf8.ValidString(got))
		}
		// Short secrets, or text the output holds anyway, prove nothing;
		// a message near the bound would cut the planted secret off.
		if len(secret) < 4 || len(msg) > 512 || !utf8.ValidString(secret) || strings.Contains(msg, secret) ||
			strings.Contains("[REDACTED]***...(truncated)", secret) {
			return
		}
		word := strings.ContainsAny(secret, "&;, \t\r\n\"'`)]}<>\\[{(=:@%")
		if !word {
			planted := redact.Sanitize(msg + " password=" + secret)
			if strings.Contains(planted, "password="+secret) {
				t.Fatalf("planted secret %q survived in %q", secret, planted)
			}
			for _, end := range []string{"Key", "-key", "_KEY", "Token", "secret", "-Auth"} {
				name := prefix + end
				if !only(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") || strings.Contains(msg+name, secret) {
					continue
				}
				for _, shape := range []string{"\n" + name + ": " + secret + " more", " " + name + " = " + secret, " " + name + "=" + secret} {
					if planted := redact.Sanitize(msg + shape); strings.Contains(planted, secret) {
						t.Fatalf("secret %q planted as %q survived in %q", secret, shape, planted)
					}
				}
			}
		}
		if only(secret, userinfoBytes) && !strings.Contains(msg, "fuzzuser") {
			planted := redact.Sanitize(msg + " https://fuzzuser:" + secret + "@host.example/v1")
			if strings.Contains(planted, "fuzzuser") || strings.Contains(planted, secret[len(secret)-4:]+"@host.example") {
				t.Fatalf("URL password %q survived in %q", secret, planted)
			}
		}
	})
}

// The URL SanitizeURL returns keeps no userinfo and no value of a secret
// parameter, whatever the URL.
func FuzzSanitizeURL(f *testing.F) {
	f.Add("https://bob:pa=ss&w0rd@api.example.com/v1?api_key=abcd&page=2#access_token=zz9&state=s")
	f.Add("https://api.example.com/users/alice@example.com")
	f.Add("redis://:it's@me@cache:6379/0")
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		before := u.String()
		got := redact.SanitizeURL(u)
		if u.String() != before {
			t.Fatalf("SanitizeURL changed its argument from %q to %q", before, u)
		}
		if len(got) > maxMessage || !utf8.ValidString(got) {
			t.Fatalf("SanitizeURL(%q) = %q: len %d, valid %v", raw, got, len(got), utf8.ValidString(got))
		}
		if p, ok := u.User.Password(); ok && len(p) >= 4 && !strings.Contains(u.Host+u.Path+u.RawQuery+u.Fragment, p) &&
			!strings.Contains("[REDACTED]***...(truncated)", p) && strings.Contains(got, p) {
			t.Fatalf("SanitizeURL(%q) = %q keeps the password %q", raw, got, p)
		}
		for _, part := range []string{u.RawQuery, u.Fragment} {
			for kv := range strings.SplitSeq(part, "&") {
				k, v, _ := strings.Cut(kv, "=")
				if k == "api_key" && len(v) >= 4 && !strings.ContainsAny(v, "%+#") && strings.Count(raw, v) == 1 && strings.Contains(got, "api_key="+v) {
					t.Fatalf("SanitizeURL(%q) = %q keeps api_key=%q", raw, got, v)
				}
			}
		}
	})
}

// SafeHeader keeps no header outside the safe list and those named, and
// sanitizes what it keeps, whatever the names and values.
func FuzzSafeHeader(f *testing.F) {
	f.Add("X-Functions-Key", "fnk3yvalue", "X-Tenant")
	f.Add("Accept", "text/plain; token=leaky", "")
	f.Add("x-tenant", "password=leaky", "X-TENANT")
	f.Fuzz(func(t *testing.T, name, value, keep string) {
		h := http.Header{name: {value}, "Authorization": {value}, "X-Unlisted": {value}}
		got := redact.SafeHeader(h, keep)
		for k, vs := range got {
			if strings.EqualFold(k, "Authorization") && !strings.EqualFold(keep, "Authorization") || strings.EqualFold(k, "X-Unlisted") && !strings.EqualFold(keep, k) {
				t.Fatalf("SafeHeader kept %s", k)
			}
			for _, v := range vs {
				if v != redact.Sanitize(value) {
					t.Fatalf("SafeHeader kept %s: %q, want %q", k, v, redact.Sanitize(value))
				}
			}
		}
		if len(h) != 3 && name != "Authorization" && name != "X-Unlisted" {
			t.Fatalf("SafeHeader changed its argument: %v", h)
		}
	})
}
