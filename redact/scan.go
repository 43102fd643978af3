package redact

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

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

// tokenBoundary reports whether c ends a token when scanning back from '@'.
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
