package shedload

import (
	"net/http"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
)

// None is the handler of fixed capacity alone: no shedding, every request
// waits for a worker.
var None = HTTPServer{Name: "none"}

// Failsafe is failsafe-go's server handler (failsafehttp.NewHandler) with
// an adaptive limiter of its defaults (adaptivelimiter.NewWithDefaults),
// the policy its documentation gives for overload: a concurrency limit
// that follows the trend of execution times, refusing what exceeds it at
// once (429, no Retry-After), with no queue.
var Failsafe = HTTPServer{Name: "failsafe", Wrap: func(h http.Handler) (http.Handler, error) {
	return failsafehttp.NewHandler(h, adaptivelimiter.NewWithDefaults[*http.Response]()), nil
}}

// HTTPServers are the servers of a run over HTTP, in the order of its
// table: no shedding, failsafe-go's, this library's set up and with its
// defaults.
func HTTPServers() []HTTPServer { return []HTTPServer{None, Failsafe, Ours, OursDefault} }
