package retry

import (
	"net/http"
	"net/url"
)

// TEMPORARY stub, replaced by sanitize.go. Not committed.
func Sanitize(s string) string { return s }

func SanitizeURL(u *url.URL) string { return u.Redacted() }

func SafeHeader(h http.Header) http.Header { return h.Clone() }
