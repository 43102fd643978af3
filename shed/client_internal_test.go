package shed

import (
	"net/http/httptest"
	"testing"
)

// Clients: an IPv6 address by its /64 (or IPv6Prefix bits), an IPv4
// address mapped into IPv6 as the IPv4 address, any other key by its
// bytes; the host of RemoteAddr by default, brackets and port left out.
func TestClientOf(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := New(Options{IPv6Prefix: 128})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		s    *Shedder
		a, b string
		same bool
	}{
		{name: "same /64", s: s, a: "2001:db8:1:2::1", b: "2001:db8:1:2:ffff::9", same: true},
		{name: "other /64", s: s, a: "2001:db8:1:2::1", b: "2001:db8:1:3::1"},
		{name: "whole addresses", s: whole, a: "2001:db8:1:2::1", b: "2001:db8:1:2::2"},
		{name: "whole addresses, the same", s: whole, a: "2001:db8:1:2::1", b: "2001:0db8:1:2:0:0:0:1", same: true},
		{name: "IPv4 mapped into IPv6", s: s, a: "::ffff:192.0.2.1", b: "192.0.2.1", same: true},
		{name: "IPv4 addresses", s: s, a: "192.0.2.1", b: "192.0.2.2"},
		{name: "a name is its bytes", s: s, a: "tenant-a", b: "tenant-b"},
		{name: "a name spelling an address's bytes", s: s, a: "2001:db8::", b: "\x20\x01\x0d\xb8\x00\x00\x00\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tt.s.clientOf(tt.a), tt.s.clientOf(tt.b)
			if a == noClient || b == noClient || (a == b) != tt.same {
				t.Errorf("clientOf(%q) = %x, clientOf(%q) = %x; same: %v, want %v", tt.a, a, tt.b, b, a == b, tt.same)
			}
		})
	}
	if c := s.clientOf(""); c != noClient {
		t.Errorf(`clientOf("") = %x, want none`, c)
	}
	for remote, key := range map[string]string{"[2001:db8::7]:443": "2001:db8::1", "192.0.2.1:1234": "192.0.2.1", "pipe": "pipe"} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = remote
		if got, want := s.clientOfRequest(req), s.clientOf(key); got != want {
			t.Errorf("RemoteAddr %q: client %x, want that of %q, %x", remote, got, key, want)
		}
	}
}

// With Options.Random, as in a simulation, clients hash the same in every
// Shedder, so that a run repeats; without it, each Shedder has keys of its
// own, which a client cannot know.
func TestClientHashRepeats(t *testing.T) {
	one := func(o Options) *Shedder {
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	random := func() float64 { return 0.5 }
	for _, key := range []string{"client-7", "2001:db8::1", "192.0.2.1"} {
		if a, b := one(Options{Random: random}).clientOf(key), one(Options{Random: random}).clientOf(key); a != b {
			t.Errorf("with Random: %q hashes to %x, then %x", key, a, b)
		}
		if a, b := one(Options{}).clientOf(key), one(Options{}).clientOf(key); a == b {
			t.Errorf("without Random: %q hashes to %x in two Shedders", key, a)
		}
	}
}
