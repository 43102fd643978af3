package otel

import (
	"strconv"
	"strings"
	"sync"
)

// otherType is the error.type of a failure whose type is not among the
// values reported: the semantic conventions' fallback.
const otherType = "_OTHER"

// maxErrorTypes bounds the error.type values other than the engine's HTTP
// and gRPC types that one Metrics, Transport or Func reports; those seen
// after it are reported as _OTHER.
const maxErrorTypes = 64

// errorTypes bounds the values of error.type, since each value is a time
// series a metrics backend keeps: what a server chooses (an HTTP status, a
// gRPC code) or a type an error names for itself could otherwise grow them
// without end. The engine's HTTP types (http.<class>.<code> for the codes
// 100 to 599, or the code alone on a trace event) and the 17 gRPC codes'
// types are kept; a gRPC code outside them (grpc.code_<n>) and any other
// HTTP value are _OTHER; the other types are kept up to maxErrorTypes
// distinct ones, in the order they are seen, and _OTHER after. It is safe
// for concurrent use.
type errorTypes struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// bound returns t, or _OTHER when t is not among the values reported.
func (s *errorTypes) bound(t string) string {
	switch {
	case strings.HasPrefix(t, "grpc."):
		if strings.HasPrefix(t, "grpc.code_") {
			return otherType
		}
		return t // one of the 17 codes' names, a bounded set
	case strings.HasPrefix(t, "http."):
		if httpType(t) {
			return t
		}
		return otherType
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[t]; ok {
		return t
	}
	if len(s.seen) >= maxErrorTypes {
		return otherType
	}
	if s.seen == nil {
		s.seen = make(map[string]struct{})
	}
	s.seen[t] = struct{}{}
	return t
}

// httpType reports whether t is the engine's type of an HTTP status from
// 100 to 599: http.<d>xx.<code>, such as http.5xx.503.
func httpType(t string) bool {
	const prefix = "http."
	if len(t) != len(prefix)+len("5xx.503") || t[len(prefix)+1:len(prefix)+4] != "xx." {
		return false
	}
	code, err := strconv.Atoi(t[len(prefix)+4:])
	return err == nil && code >= 100 && code <= 599 && t[len(prefix)] == byte('0'+code/100)
}

// statusType returns the error.type of an HTTP error status on a trace
// event, as the conventions ask (the code itself): codes 400 to 599, or
// _OTHER.
func statusType(code int) string {
	if code < 400 || code > 599 {
		return otherType
	}
	return strconv.Itoa(code)
}
