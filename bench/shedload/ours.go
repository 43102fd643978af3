package shedload

import (
	"net/http"

	"github.com/steadyhq/retry/shed"
)

// Ours is this library's shedding (package shed) with its defaults.
var Ours = HTTPServer{Name: "ours", Wrap: func(h http.Handler) (http.Handler, error) {
	s, err := shed.New(shed.Options{})
	if err != nil {
		return nil, err
	}
	return s.Handler(h), nil
}}
