package retry

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
)

// idempotent reports whether req may be sent twice.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return hasIdempotencyKey(req.Header)
}

// hasIdempotencyKey reports whether h carries an idempotency key. An empty
// value counts as absent. As in net/http, a key present with no values (a
// nil slice) marks the request idempotent without sending the header.
func hasIdempotencyKey(h http.Header) bool {
	return hasKey(h, "Idempotency-Key") || hasKey(h, "X-Idempotency-Key")
}

// hasKey reports whether h's header name holds a key, or net/http's marker.
func hasKey(h http.Header, name string) bool {
	v, ok := h[name]
	if !ok {
		return false
	}
	if len(v) == 0 {
		return true // net/http's marker
	}
	for _, s := range v {
		if strings.TrimSpace(s) != "" {
			return true
		}
	}
	return false
}

// neverSent reports whether a failure of type typ proves that the request
// never reached the server, so that any method may be retried.
func neverSent(typ string) bool {
	switch typ {
	case typeConnectionRefused, typeDNSNotFound, typeDNSTemporary, typeDNS,
		typeHTTP2RefusedStream, typeHTTP2GoAway: // not typeHTTP2GoAwayClosed
		return true
	}
	return false
}

// mayRepeat reports whether a request that failed with failure may be sent
// again: it is idempotent, or the failure proves it was never sent.
func mayRepeat(idempotent bool, failure error) bool {
	return idempotent || neverSent(inspect(failure).typ)
}

func newIdempotencyKey() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
