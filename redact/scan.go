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

// maxEscapedKey is the longest key name worth decoding: secretKey looks at
// names of at most 64 bytes, each at most 3 bytes escaped.
const maxEscapedKey = 3 * 64

// redactKeyValues redacts the values of secret keys written k=v, "k": "v",
// k: v, k="v" or k = v. Each key and value is read once: after a value the
// scan goes on past its end, whether it was redacted or not.
func redactKeyValues(s string) string {
	r := redactor{s: s}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '=' && c != ':' || c == ':' && strings.HasPrefix(s[i:], "://") {
			continue
		}
		// The key: the run of key bytes before i, possibly quoted, and
		// spaces between it and i.
		ke := i
		for ke > 0 && (s[ke-1] == ' ' || s[ke-1] == '\t') {
			ke--
		}
		if ke > 0 && (s[ke-1] == '"' || s[ke-1] == '\'') {
			ke--
		}
		ks := ke
		for ks > 0 && (isKeyByte(s[ks-1]) || s[ks-1] == '%') {
			ks--
		}
		if ks == ke || ks < r.last || ke-ks > maxEscapedKey || !secretKey(unescapeKey(s[ks:ke])) {
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
		} else if strings.HasPrefix(s[vs:], Redacted) {
			// Its brackets do not end a value that goes on past it.
			ve = valueEnd(s, vs+len(Redacted))
		} else {
			ve = valueEnd(s, vs)
		}
		if ve > vs && s[vs:ve] != Redacted {
			r.replace(vs, ve, Redacted)
		}
		i = max(i, ve-1)
	}
	return r.String()
}

// redactHeaderLines redacts to the end of the line the value of a header
// written "Name: value" whose name looks secret (see secretKey:
// Authorization, Cookie, Set-Cookie, X-Api-Key, X-Functions-Key,
// Ocp-Apim-Subscription-Key, X-Vault-Token, ...). Each line is read once.
func redactHeaderLines(s string) string {
	r := redactor{s: s}
	for i := 0; i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		ns := i
		for ns > r.last && isKeyByte(s[ns-1]) {
			ns--
		}
		if ns == i || !secretKey(s[ns:i]) {
			continue
		}
		vs := i + 1
		for vs < len(s) && (s[vs] == ' ' || s[vs] == '\t') {
			vs++
		}
		ve := strings.IndexAny(s[vs:], "\r\n")
		if ve < 0 {
			ve = len(s)
		} else {
			ve += vs
		}
		if ve > vs && s[vs:ve] != Redacted {
			r.replace(vs, ve, Redacted)
		}
		i = max(i, ve-1)
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
		// A scheme's name ends in a letter.
		if s[i] != ' ' || i == 0 || s[i-1]|0x20 < 'a' || s[i-1]|0x20 > 'z' {
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

// authorityEnd reports whether c ends the authority of a URL (RFC 3986,
// 3.2), or the URL itself in running text: a character a URL cannot hold
// unescaped. The sub-delims a password may hold (!$&'()*+,;=) do not.
func authorityEnd(c byte) bool {
	switch c {
	case '/', '?', '#', '\\', ' ', '\t', '\r', '\n', '"', '<', '>', '`':
		return true
	}
	return false
}

// redactUserinfo redacts the userinfo of every URL: what lies between
// "://" and the last '@' of the authority, whatever it holds (a password
// may carry '=', '&', ';', ',', ':' and even '@' unescaped). Each
// authority is read once.
func redactUserinfo(s string) string {
	r := redactor{s: s}
	for i := 0; ; {
		k := strings.Index(s[i:], "://")
		if k < 0 {
			break
		}
		start := i + k + 3
		end, at := start, -1
		for ; end < len(s) && !authorityEnd(s[end]); end++ {
			if s[end] == '@' {
				at = end
			}
		}
		if at > start && s[start:at] != Redacted {
			r.replace(start, at, Redacted)
		}
		i = end
	}
	return r.String()
}

// tokenBoundary reports whether c ends a token when scanning back from '@'.
func tokenBoundary(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '"', '\'', '(', '<', '[', '{', ',', '`', '>':
		return true
	}
	return false
}

// redactAt handles every '@' outside a URL's authority (redactUserinfo has
// done those): DSN credentials before it (user:pass@tcp(host),
// dsn=scott/tiger@host, and a password holding '=') are redacted, and
// email addresses masked. It reads s once, keeping what it needs of the
// token before each '@' (where it starts, where its last "://", '=', path
// separator and ':' or '/' are) as it goes, so that no '@' sends it back
// over what it read.
func redactAt(s string) string {
	r := redactor{s: s}
	tok := 0    // the start of the token at i: just past the last boundary
	scheme := 0 // just past the last "://"; 0 for none
	eq := -1    // the last '='
	cut := -1   // the last '/', '?', '#', '&' or '=': a URL's path, query or fragment goes on after it
	sep := -1   // the last ':' or '/'
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '/', '?', '#', '&', '=', ':':
			if c == ':' && strings.HasPrefix(s[i:], "://") {
				scheme = i + 3
			}
			if c != ':' {
				cut = i
			}
			if c == ':' || c == '/' {
				sep = i
			}
			if c == '=' {
				eq = i
			}
			continue
		case '@':
		default:
			if tokenBoundary(c) {
				tok = i + 1
			}
			continue
		}
		if strings.HasSuffix(s[:i], Redacted) {
			continue
		}
		start := max(tok, r.last)
		if scheme-3 >= start {
			// In a URL, past its authority: the '@' is in the path, query
			// or fragment, and what goes before it starts after the last
			// separator.
			start = max(scheme, cut+1)
		}
		word := max(start, eq+1) // after a key= in front of it
		switch {
		case word < i && sep >= word:
			// A DSN's user:password or user/password.
			r.replace(word, i, Redacted)
		case sep >= start:
			// user:pass=word: a password that holds '='.
			r.replace(start, i, Redacted)
		case word < i && emailDomain(s[i+1:]):
			info := s[word:i]
			if strings.HasSuffix(info, "***") && len(info) <= 4 {
				continue
			}
			_, size := utf8.DecodeRuneInString(info)
			r.replace(word+size, i, "***")
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
