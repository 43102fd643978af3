package retry

import (
	"net/http"
	"strings"
	"time"
)

// rateLimitField is the canonical form of the RateLimit response field's
// name, as net/http keys it.
const rateLimitField = "Ratelimit"

// rateLimitWait returns how long the RateLimit fields of h ask the client
// to hold off (draft-ietf-httpapi-ratelimit-headers-11, section 4): the
// longest effective window t among the service limits whose available
// quota r is 0. It returns zero when h has no such field, when no limit is
// exhausted, when an exhausted limit gives no window, and when any
// RateLimit field of h is malformed, since the draft has the client
// ignore malformed fields.
func rateLimitWait(h http.Header) time.Duration {
	var wait time.Duration
	for _, v := range h[rateLimitField] {
		w, ok := parseRateLimit(v)
		if !ok {
			return 0
		}
		wait = max(wait, w)
	}
	return wait
}

// parseRateLimit parses one RateLimit field line: a Structured Fields List
// (RFC 9651, 4.2.1) of Items, each a String naming a quota policy, with
// the parameters r (the available quota, a non-negative Integer,
// required), t (the effective window in seconds, a non-negative Integer)
// and pk (the partition key, a Byte Sequence); other parameters are
// comments, and of duplicated parameters the last counts. It returns the
// longest t among the items whose r is 0, and ok == false for a line that
// is not such a list. It never panics, whatever v holds.
func parseRateLimit(v string) (wait time.Duration, ok bool) {
	p := sfParser{s: strings.Trim(v, " ")}
	for !p.done() {
		w, ok := p.limit()
		if !ok {
			return 0, false
		}
		wait = max(wait, w)
		p.skipOWS()
		if p.done() {
			break
		}
		if !p.eat(',') {
			return 0, false
		}
		p.skipOWS()
		if p.done() {
			return 0, false // a trailing comma
		}
	}
	return wait, true
}

// sfParser reads Structured Field values (RFC 9651) from s, at i.
type sfParser struct {
	s string
	i int
}

// Kinds of bare items, of which the parser keeps only Integers' values.
const (
	sfNone = iota
	sfInteger
	sfOther // a Decimal, String, Token, Boolean or Date
	sfBytes
)

// limit reads one service limit Item and returns the window it asks the
// client to wait: t when r is 0, else zero.
func (p *sfParser) limit() (time.Duration, bool) {
	if p.peek() != '"' || p.str() != sfOther {
		return 0, false // the policy's name must be a String
	}
	var r, t int64
	rKind, tKind, pkKind := sfNone, sfNone, sfNone
	for p.eat(';') {
		p.skipSP()
		key, ok := p.key()
		if !ok {
			return 0, false
		}
		kind, n := sfOther, int64(0) // a bare key is the Boolean true
		if p.eat('=') {
			if kind, n = p.bareItem(); kind == sfNone {
				return 0, false
			}
		}
		switch key {
		case "r":
			rKind, r = kind, n
		case "t":
			tKind, t = kind, n
		case "pk":
			pkKind = kind
		}
	}
	switch {
	case rKind != sfInteger || r < 0: // r is required
		return 0, false
	case tKind != sfNone && (tKind != sfInteger || t < 0):
		return 0, false
	case pkKind != sfNone && pkKind != sfBytes:
		return 0, false
	case r > 0:
		return 0, true
	}
	return seconds(t), true
}

// seconds converts n >= 0 seconds to a Duration, saturating.
func seconds(n int64) time.Duration {
	if n > int64(maxDuration/time.Second) {
		return maxDuration
	}
	return time.Duration(n) * time.Second
}

func (p *sfParser) done() bool { return p.i >= len(p.s) }

func (p *sfParser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *sfParser) eat(c byte) bool {
	if !p.done() && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *sfParser) skipSP() {
	for p.eat(' ') {
	}
}

func (p *sfParser) skipOWS() {
	for p.eat(' ') || p.eat('\t') {
	}
}

// key reads a parameter's key (RFC 9651, 4.2.3.3).
func (p *sfParser) key() (string, bool) {
	start := p.i
	if c := p.peek(); !isLCAlpha(c) && c != '*' {
		return "", false
	}
	for p.i++; !p.done(); p.i++ {
		if c := p.s[p.i]; !isLCAlpha(c) && !isDigit(c) && !strings.ContainsRune("_-.*", rune(c)) {
			break
		}
	}
	return p.s[start:p.i], true
}

// bareItem reads a bare item (RFC 9651, 4.2.3.1) and returns its kind,
// and its value when it is an Integer; sfNone when there is none at i.
func (p *sfParser) bareItem() (kind int, n int64) {
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str(), 0
	case c == ':':
		return p.bytes(), 0
	case c == '?':
		p.i++
		if c := p.peek(); c == '0' || c == '1' {
			p.i++
			return sfOther, 0
		}
	case c == '@': // a Date: an Integer of seconds
		p.i++
		if kind, _ := p.number(); kind == sfInteger {
			return sfOther, 0
		}
	case isAlpha(c) || c == '*':
		return p.token(), 0
	}
	return sfNone, 0
}

// number reads an Integer or a Decimal (RFC 9651, 4.2.4).
func (p *sfParser) number() (kind int, n int64) {
	neg := p.eat('-')
	digits, frac, dot := 0, 0, false
	for ; !p.done(); p.i++ {
		c := p.s[p.i]
		if c == '.' && !dot && digits > 0 && digits <= 12 {
			dot = true
			continue
		}
		if !isDigit(c) {
			break
		}
		if dot {
			frac++
		} else {
			digits++
			n = n*10 + int64(c-'0')
		}
		if digits > 15 || frac > 3 {
			return sfNone, 0
		}
	}
	switch {
	case digits == 0, dot && frac == 0:
		return sfNone, 0
	case dot:
		return sfOther, 0
	case neg:
		n = -n
	}
	return sfInteger, n
}

// str reads a String (RFC 9651, 4.2.5).
func (p *sfParser) str() int {
	p.i++ // the opening quote
	for ; !p.done(); p.i++ {
		switch c := p.s[p.i]; {
		case c == '\\':
			p.i++
			if c := p.peek(); c != '"' && c != '\\' {
				return sfNone
			}
		case c == '"':
			p.i++
			return sfOther
		case c < 0x20 || c > 0x7e:
			return sfNone
		}
	}
	return sfNone // no closing quote
}

// token reads a Token (RFC 9651, 4.2.6).
func (p *sfParser) token() int {
	for p.i++; !p.done(); p.i++ {
		if c := p.s[p.i]; !isTChar(c) && c != ':' && c != '/' {
			break
		}
	}
	return sfOther
}

// bytes reads a Byte Sequence (RFC 9651, 4.2.7): base64 between colons.
func (p *sfParser) bytes() int {
	for p.i++; !p.done(); p.i++ {
		switch c := p.s[p.i]; {
		case c == ':':
			p.i++
			return sfBytes
		case !isAlpha(c) && !isDigit(c) && c != '+' && c != '/' && c != '=':
			return sfNone
		}
	}
	return sfNone // no closing colon
}

func isDigit(c byte) bool   { return '0' <= c && c <= '9' }
func isLCAlpha(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || 'A' <= c && c <= 'Z' }

// isTChar reports whether c is a tchar of RFC 9110, 5.6.2.
func isTChar(c byte) bool {
	return isAlpha(c) || isDigit(c) || c != 0 && strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
