package redact

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Redacted is the text that Sanitize, SanitizeURL and SafeHeader put in
// place of a secret value.
const Redacted = "[REDACTED]"

// maxMessage bounds the length in bytes of a sanitized message.
const maxMessage = 1024

// maxScan bounds how much of a message the sanitizer reads; the rest could
// never reach the output.
const maxScan = 64 << 10

// Sanitize returns s with credentials replaced by Redacted: URL and DSN
// credentials, the values of secret-looking keys, credential headers and
// authentication schemes, well-known token shapes and PEM private keys (the
// package documentation lists them). It masks email addresses
// (a***@example.com). Invalid UTF-8 becomes U+FFFD, only the first 64 KiB of
// s are read, and a result longer than 1024 bytes is cut at a rune boundary
// and ends in "...(truncated)".
func Sanitize(s string) string {
	if len(s) > maxScan {
		s = s[:maxScan]
	}
	return bound(scrub(s))
}

// scrub applies every rule of the sanitizer to the whole of s, each in one
// pass that reads every byte a bounded number of times.
func scrub(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = redactPEM(s)
	s = redactHeaderLines(s)
	s = redactSchemes(s)
	s = redactUserinfo(s)
	s = redactAt(s)
	s = redactKeyValues(s)
	s = redactTokens(s)
	return s
}

// SanitizeBody returns a copy of a request or response body with what
// Sanitize redacts and masks replaced the same way, all of it read and
// nothing cut, for a dead-letter record that keeps a body. A body that is
// not UTF-8 text gives nil: a binary body (protobuf, an image) can carry
// secrets in no shape the rules know, so none of it is kept. It takes time
// linear in len(b).
func SanitizeBody(b []byte) []byte {
	if !utf8.Valid(b) {
		return nil
	}
	return []byte(scrub(string(b)))
}

// bound cuts valid UTF-8 s to maxMessage bytes at a rune boundary.
func bound(s string) string {
	if len(s) > maxMessage {
		const more = "...(truncated)"
		cut := maxMessage - len(more)
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + more
	}
	return s
}

// SanitizeURL returns u as a string without its userinfo, with the values
// of secret-looking query and fragment parameters replaced by Redacted, and
// the result passed through Sanitize. It does not modify u. A nil u gives "".
func SanitizeURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	v := *u
	v.User = nil
	v.RawQuery = redactParams(v.RawQuery)
	if v.Fragment != "" {
		v.Fragment = redactParams(v.Fragment)
		v.RawFragment = ""
	}
	return Sanitize(v.String())
}

// redactParams redacts the values of secret-looking keys in a
// query-string-like text (k=v&k=v).
func redactParams(q string) string {
	if q == "" {
		return q
	}
	var b strings.Builder
	changed := false
	for i, part := range strings.Split(q, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		k, _, hasValue := strings.Cut(part, "=")
		if ku, err := url.QueryUnescape(k); err == nil {
			k = ku
		}
		if hasValue && secretKey(k) {
			b.WriteString(part[:strings.IndexByte(part, '=')+1])
			b.WriteString(Redacted)
			changed = true
			continue
		}
		b.WriteString(part)
	}
	if !changed {
		return q
	}
	return b.String()
}

// SafeHeader returns a copy of h with only the headers known to carry no
// credential, their values passed through Sanitize: the standard content
// and conditional headers (Accept, Content-Type, If-None-Match, Range,
// ...), User-Agent, Idempotency-Key, Retry-Attempt, trace context, request
// ids, and on responses Retry-After, RateLimit, ETag and the like (the list
// is safeHeaders in the source). Every other header is left out, whatever
// its name: Authorization and cookies, and also X-Functions-Key,
// Ocp-Apim-Subscription-Key and the custom headers no list of secret names
// could foresee. keep names more headers to keep (compared without case),
// their values sanitized too. It does not modify h. A nil h gives nil.
func SafeHeader(h http.Header, keep ...string) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, min(len(h), len(safeHeaders)+len(keep)))
	for name, vals := range h {
		if !safeHeaders[http.CanonicalHeaderKey(name)] && !slices.ContainsFunc(keep, func(k string) bool { return strings.EqualFold(k, name) }) {
			continue
		}
		vs := make([]string, len(vals))
		for i, v := range vals {
			vs[i] = Sanitize(v)
		}
		out[name] = vs
	}
	return out
}

// safeHeaders are the headers SafeHeader keeps, canonical: none carries a
// credential by its definition.
var safeHeaders = map[string]bool{
	// Content and representation.
	"Accept": true, "Accept-Charset": true, "Accept-Encoding": true, "Accept-Language": true,
	"Content-Encoding": true, "Content-Language": true, "Content-Length": true, "Content-Type": true,
	"Content-Range": true, "Content-Disposition": true,
	// Conditions, ranges and caching.
	"If-Match": true, "If-None-Match": true, "If-Modified-Since": true, "If-Unmodified-Since": true,
	"If-Range": true, "Range": true, "Cache-Control": true, "Pragma": true, "Expect": true, "Prefer": true,
	"Etag": true, "Last-Modified": true, "Expires": true, "Age": true, "Vary": true, "Allow": true,
	// The request and its retries.
	"Date": true, "Host": true, "User-Agent": true, "Te": true, "Max-Forwards": true, "Via": true,
	"Idempotency-Key": true, "Retry-Attempt": true, "X-Envoy-Attempt-Count": true,
	"X-Request-Id": true, "X-Correlation-Id": true, "Traceparent": true, "Tracestate": true,
	// The server's answer on when to come back.
	"Retry-After": true, "Ratelimit": true, "Ratelimit-Policy": true,
}

// secretSuffixes are the endings of key names whose values are secrets,
// compared lowercase with '-', '_' and '.' removed: "key" takes in api_key,
// AccountKey, X-Functions-Key, subscription-key and app_key.
var secretSuffixes = [...]string{
	"password", "passwords", "passwd", "pwd", "passphrase", "secret", "secrets", "token", "tokens",
	"key", "keys", "signature", "credential", "credentials", "sessionid", "authorization", "cookie",
	"cookies", "auth",
}

// secretNames are key names whose values are secrets, compared as above.
var secretNames = [...]string{"sig", "pass", "session", "sid", "jwt", "otp", "pin"}

// secretKey reports whether a key of a query string, connection string or
// JSON object names a secret.
func secretKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	var buf [64]byte
	n := 0
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '-' || c == '_' || c == '.':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		buf[n] = c
		n++
	}
	norm := string(buf[:n])
	for _, s := range secretNames {
		if norm == s {
			return true
		}
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(norm, s) {
			return true
		}
	}
	return false
}
