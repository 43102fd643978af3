package redact

import (
	"net/http"
	"net/url"
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

// Sanitize returns s with secrets redacted and its length bounded, for
// events, logs, metrics and dead-letter records. It redacts:
//
//   - URL credentials (scheme://user:pass@host) and DSN credentials
//     (user:pass@tcp(host)/db, scott/tiger@host);
//   - values of secret-looking keys (password, token, api_key, secret,
//     signature, sig, key, session, credential and names ending in them) in
//     query strings, key=value connection strings and "key": "value" JSON;
//   - Authorization, Cookie and similar header lines, and bearer, basic and
//     token credentials;
//   - well-known token shapes: JWTs, AWS access keys, GitHub, GitLab,
//     Slack, Stripe and Google API keys, and the bodies of PEM private keys;
//
// and masks email addresses (a***@example.com). Invalid UTF-8 becomes
// U+FFFD, only the first 64 KiB of s are read, and a result longer than
// 1024 bytes is cut at a rune boundary and ends in "...(truncated)".
func Sanitize(s string) string {
	if len(s) > maxScan {
		s = s[:maxScan]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = redactPEM(s)
	s = redactHeaderLines(s)
	s = redactSchemes(s)
	s = redactAt(s)
	s = redactKeyValues(s)
	s = redactTokens(s)
	return bound(s)
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

// SafeHeader returns a copy of h without credentials: Authorization,
// Proxy-Authorization, Cookie, Set-Cookie, WWW-Authenticate,
// Proxy-Authenticate and headers whose names look secret (X-Api-Key,
// X-Auth-Token, ...) are left out, and the other values are passed through
// Sanitize. Idempotency-Key is kept. It does not modify h. A nil h gives nil.
func SafeHeader(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for name, vals := range h {
		if secretHeader(name) {
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

func secretHeader(name string) bool {
	switch strings.ToLower(name) {
	case "authorization", "proxy-authorization", "cookie", "set-cookie", "www-authenticate", "proxy-authenticate":
		return true
	}
	return secretKey(name)
}

// secretSuffixes are the endings of key names whose values are secrets,
// compared lowercase with '-', '_' and '.' removed.
var secretSuffixes = [...]string{
	"password", "passwd", "pwd", "passphrase", "secret", "token", "apikey", "signature",
	"credential", "credentials", "privatekey", "accesskey", "secretkey", "sessionid",
	"authorization", "cookie", "auth",
}

// secretNames are key names whose values are secrets, compared as above.
var secretNames = [...]string{"key", "sig", "pass", "session", "sid", "jwt", "otp", "pin", "xamzcredential"}

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

// unescapeKey decodes a percent-encoded key name (api%5Fkey), as query
// strings quoted in messages may carry them.
func unescapeKey(k string) string {
	if strings.IndexByte(k, '%') < 0 {
		return k
	}
	if u, err := url.QueryUnescape(k); err == nil {
		return u
	}
	return k
}

// isKeyByte reports whether c can be part of a key name.
func isKeyByte(c byte) bool {
	return c == '_' || c == '-' || c == '.' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// valueEnd returns the end of a value starting at i: the first delimiter of
// query strings, connection strings, JSON and prose.
func valueEnd(s string, i int) int {
	for ; i < len(s); i++ {
		switch s[i] {
		case '&', ';', ',', ' ', '\t', '\r', '\n', '"', '\'', ')', ']', '}', '>', '<', '`':
			return i
		}
	}
	return i
}

// redactKeyValues redacts the values of secret keys written k=v, "k": "v",
// k: v or k="v".
func redactKeyValues(s string) string {
	r := redactor{s: s}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '=' && c != ':' {
			continue
		}
		// The key: the run of key bytes before i, possibly quoted.
		ke := i
		if ke > 0 && (s[ke-1] == '"' || s[ke-1] == '\'') {
			ke--
		}
		ks := ke
		for ks > 0 && (isKeyByte(s[ks-1]) || s[ks-1] == '%') {
			ks--
		}
		if ks == ke || ks < r.last || !secretKey(unescapeKey(s[ks:ke])) {
			continue
		}
		if c == ':' && strings.HasPrefix(s[i:], "://") {
			continue
		}
		// The value: after optional spaces and an optional quote.
		vs := i + 1
		for vs < len(s) && (s[vs] == ' ' || s[vs] == '\t') {
			vs++
		}
		var ve int
		if vs < len(s) && (s[vs] == '"' || s[vs] == '\'') {
			q := s[vs]
			vs++
			ve = vs
			for ve < len(s) && s[ve] != q {
				if s[ve] == '\\' && ve+1 < len(s) {
					ve++
				}
				ve++
			}
			ve = min(ve, len(s))
		} else {
			ve = valueEnd(s, vs)
		}
		if ve == vs || strings.HasPrefix(s[vs:], Redacted) {
			continue
		}
		r.replace(vs, ve, Redacted)
		i = ve - 1
	}
	return r.String()
}

// secretHeaderNames are header names whose whole line is redacted when they
// appear as "Name: value" in a message.
var secretHeaderNames = [...]string{"proxy-authorization", "authorization", "set-cookie", "cookie", "x-api-key", "x-auth-token"}

// redactHeaderLines redacts to the end of the line the value of a secret
// header written "Name: value".
func redactHeaderLines(s string) string {
	r := redactor{s: s}
	for i := 0; i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		name := wordBefore(s, i, secretHeaderNames[:])
		if name == "" || i-len(name) < r.last {
			continue
		}
		vs := i + 1
		for vs < len(s) && s[vs] == ' ' {
			vs++
		}
		ve := strings.IndexAny(s[vs:], "\r\n")
		if ve < 0 {
			ve = len(s)
		} else {
			ve += vs
		}
		if ve == vs || strings.HasPrefix(s[vs:], Redacted) {
			continue
		}
		r.replace(vs, ve, Redacted)
		i = ve - 1
	}
	return r.String()
}

// redactPEM redacts the body of PEM private key blocks, up to their END
// line or, when it was cut off, to the end of s.
func redactPEM(s string) string {
	const begin, end, dashes = "-----BEGIN ", "-----END ", "-----"
	r := redactor{s: s}
	for i := 0; ; {
		j := strings.Index(s[i:], begin)
		if j < 0 {
			break
		}
		ls := i + j + len(begin)
		le := strings.Index(s[ls:], dashes)
		if le < 0 {
			break
		}
		bs := ls + le + len(dashes)
		if !strings.HasSuffix(s[ls:ls+le], "PRIVATE KEY") {
			i = bs
			continue
		}
		be := strings.Index(s[bs:], end)
		if be < 0 {
			be = len(s)
		} else {
			be += bs
		}
		if be > bs {
			r.replace(bs, be, Redacted)
		}
		i = be
	}
	return r.String()
}

// wordBefore returns the word of words (compared without case) that ends
// at s[i] and starts a word, or "".
func wordBefore(s string, i int, words []string) string {
	for _, w := range words {
		if i >= len(w) && strings.EqualFold(s[i-len(w):i], w) && (i == len(w) || !isKeyByte(s[i-len(w)-1])) {
			return w
		}
	}
	return ""
}

// authSchemes are credentials written "Scheme value".
var authSchemes = [...]string{"bearer", "basic", "token", "digest", "negotiate"}

// redactSchemes redacts the credential after an authentication scheme.
func redactSchemes(s string) string {
	r := redactor{s: s}
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' || i == 0 {
			continue
		}
		word := wordBefore(s, i, authSchemes[:])
		if word == "" || i < r.last {
			continue
		}
		vs := i + 1
		ve := vs
		for ve < len(s) && (isKeyByte(s[ve]) || s[ve] == '+' || s[ve] == '/' || s[ve] == '=' || s[ve] == '~') {
			ve++
		}
		// A credential is one long run; "token expired" is prose.
		if ve-vs < 8 || strings.HasPrefix(s[vs:], Redacted) {
			continue
		}
		r.replace(vs, ve, Redacted)
		i = ve - 1
	}
	return r.String()
}

// tokenStart reports whether c ends a token when scanning back from '@'.
func tokenBoundary(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '"', '\'', '(', '<', '[', '{', ',', '=', '`', '>':
		return true
	}
	return false
}

// redactAt handles every '@': URL and DSN credentials before it are
// redacted, and email addresses are masked.
func redactAt(s string) string {
	r := redactor{s: s}
	for i := 0; i < len(s); i++ {
		if s[i] != '@' {
			continue
		}
		if strings.HasSuffix(s[:i], Redacted) {
			continue
		}
		ts := i
		for ts > r.last && !tokenBoundary(s[ts-1]) {
			ts--
		}
		if ts == i {
			continue
		}
		start := ts
		url := false
		if k := strings.LastIndex(s[ts:i], "://"); k >= 0 {
			start, url = ts+k+3, true
			if p := strings.LastIndexAny(s[start:i], "/?#&="); p >= 0 {
				// The '@' is in the path or query, not in the userinfo.
				start, url = start+p+1, false
			}
		}
		info := s[start:i]
		switch {
		case info == "":
			continue
		case url || strings.ContainsAny(info, ":/"):
			// URL userinfo, or a DSN's user:password or user/password.
			r.replace(start, i, Redacted)
		case emailDomain(s[i+1:]):
			if strings.HasSuffix(info, "***") && len(info) <= 4 {
				continue
			}
			_, size := utf8.DecodeRuneInString(info)
			r.replace(start+size, i, "***")
		}
	}
	return r.String()
}

// emailDomain reports whether s starts with a domain name with a dot.
func emailDomain(s string) bool {
	dot := false
	n := 0
	for ; n < len(s); n++ {
		c := s[n]
		if c == '.' {
			dot = true
			continue
		}
		if c != '-' && !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			break
		}
	}
	return dot && n > 2 && s[0] != '.'
}

// tokenPrefixes start well-known credential formats; a run of token bytes
// starting with one, at least minToken bytes long, is redacted whole.
var tokenPrefixes = [...]string{
	"eyJ",          // JWT (base64url of `{"`)
	"AKIA", "ASIA", // AWS access key ids
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", // GitHub
	"glpat-",                                    // GitLab
	"xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", // Slack
	"sk_live_", "sk_test_", "rk_live_", "pk_live_", // Stripe
	"AIza", // Google API keys
	"sk-",  // OpenAI-style secret keys
	"npm_", // npm
	"SG.",  // SendGrid
}

const minToken = 16

// redactTokens redacts tokens of well-known credential formats.
func redactTokens(s string) string {
	r := redactor{s: s}
	for i := 0; i < len(s); {
		if !isKeyByte(s[i]) || i > 0 && isKeyByte(s[i-1]) {
			i++
			continue
		}
		e := i
		for e < len(s) && (isKeyByte(s[e]) || s[e] == '+' || s[e] == '/' || s[e] == '=') {
			e++
		}
		tok := s[i:e]
		if len(tok) >= minToken && hasTokenPrefix(tok) {
			r.replace(i, e, Redacted)
		}
		i = e
	}
	return r.String()
}

func hasTokenPrefix(tok string) bool {
	for _, p := range tokenPrefixes {
		if strings.HasPrefix(tok, p) {
			return true
		}
	}
	return false
}

// redactor builds a copy of s with spans replaced, left to right; it
// allocates only once a span is replaced.
type redactor struct {
	s    string
	b    strings.Builder
	last int // the end of the last span replaced
	done bool
}

// replace replaces s[start:end] with with; start must not precede the end
// of the previous span.
func (r *redactor) replace(start, end int, with string) {
	r.b.WriteString(r.s[r.last:start])
	r.b.WriteString(with)
	r.last, r.done = end, true
}

// String returns the result.
func (r *redactor) String() string {
	if !r.done {
		return r.s
	}
	r.b.WriteString(r.s[r.last:])
	return r.b.String()
}
