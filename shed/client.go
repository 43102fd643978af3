package shed

import (
	"encoding/binary"
	"hash/maphash"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
)

// A client is what Options.Client or Request.Key names: the quota counts
// its requests, and ClientShare bounds the permits they hold. It is kept
// as a 64-bit hash of its key under a seed and keys drawn for each
// Shedder (fixed ones with Options.Random, for a simulation), so that a
// key of any length costs the same, and a client cannot choose a key that
// collides with another's.
type client uint64

// noClient is the client of a request that names none ("").
const noClient client = 0

// clientOf returns the client a key names: an IPv6 address by its
// leading IPv6Prefix bits, an IPv4 address mapped into IPv6 as the IPv4
// address it is, any other key (an IPv4 address among them) by its bytes;
// noClient for "".
func (s *Shedder) clientOf(key string) client {
	if key == "" {
		return noClient
	}
	if strings.IndexByte(key, ':') >= 0 && maybeAddr(key) {
		if a, err := netip.ParseAddr(key); err == nil {
			return s.clientOfAddr(a)
		}
	}
	if s.fixed {
		return nonZero(mix(fnv(key), s.keys[0], s.keys[1]))
	}
	return nonZero(maphash.String(s.seed, key))
}

// fnv is the 64-bit FNV-1a hash of key, for a Shedder with Options.Random,
// whose hashes must repeat from run to run.
func fnv(key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	return h
}

// maybeAddr reports whether key may be an IP address without a zone: hex
// digits, dots and colons. It spares the keys that are not (names, tokens)
// the error netip.ParseAddr would allocate.
func maybeAddr(key string) bool {
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c == '.' || c == ':':
		case '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}

// clientOfAddr returns the client of an IPv6 address: its prefix of at
// most 64 bits through a mixing function keyed by the Shedder's keys
// (one-to-one: no two prefixes share a hash), a longer one through the
// same function twice. An IPv4 address mapped into IPv6 is the IPv4
// address, hashed as its text is.
func (s *Shedder) clientOfAddr(a netip.Addr) client {
	if a = a.Unmap(); a.Is4() {
		var buf [len("255.255.255.255")]byte
		return s.clientOf(string(a.AppendTo(buf[:0])))
	}
	p, _ := a.WithZone("").Prefix(s.opts.IPv6Prefix) // within [0, 128]: no error
	b := p.Addr().As16()
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	if s.opts.IPv6Prefix <= 64 {
		return nonZero(mix(hi, s.keys[2], s.keys[3]))
	}
	return nonZero(mix(mix(hi, s.keys[2], s.keys[3])^lo, s.keys[2], s.keys[3]))
}

// mix maps x one-to-one onto a 64-bit hash under the keys k0 and k1 (k1
// odd): an attacker who does not know them cannot tell which prefixes
// share a counter of the clients' shares.
func mix(x, k0, k1 uint64) uint64 {
	x = (x ^ k0) * k1
	return x ^ x>>32
}

// nonZero keeps a hash off noClient.
func nonZero(h uint64) client {
	if h == 0 {
		return 1
	}
	return client(h)
}

// clientOfRequest returns the client of an HTTP request: Options.Client's
// key, or by default the host of RemoteAddr.
func (s *Shedder) clientOfRequest(r *http.Request) client {
	if s.opts.Client != nil {
		return s.clientOf(s.opts.Client(r))
	}
	return s.clientOf(remoteHost(r))
}

// remoteHost returns the host part of r.RemoteAddr, without brackets (the
// default Options.Client): what precedes the last colon, or all of it
// without one.
func remoteHost(r *http.Request) string {
	host := r.RemoteAddr
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	return host
}

// shareSlots is how many counters of permits held the clients are spread
// over, by their hash: two clients share one with odds of 1 in 4,096, and
// are then bounded together. A power of two.
const shareSlots = 4096

// shares counts the permits each client holds or waits for, in
// shareSlots counters. It takes no lock and allocates nothing.
type shares [shareSlots]atomic.Int32

// take counts a request of c, unless c already holds most permits or more;
// it returns the slot to give back (one-based), or 0 when refused.
func (sh *shares) take(c client, most int) int32 {
	slot := int32(c % shareSlots)
	n := &sh[slot]
	if int(n.Add(1)) > most {
		n.Add(-1)
		return 0
	}
	return slot + 1
}

// give gives back what take counted in slot (one-based); 0 does nothing.
func (sh *shares) give(slot int32) {
	if slot > 0 {
		sh[slot-1].Add(-1)
	}
}
