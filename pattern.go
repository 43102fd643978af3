package retry

import (
	"strings"
	"unicode/utf8"
)

// Match reports whether the error type typ matches pattern under the OJS rule:
// an exact match, or a pattern "prefix.*" matching every type that starts with
// "prefix." ("auth.*" matches "auth.forbidden" and "auth.token.expired" but
// not "auth" nor "external.auth.failure").
func Match(pattern, typ string) bool {
	if prefix, ok := strings.CutSuffix(pattern, ".*"); ok && prefix != "" {
		return len(typ) > len(prefix)+1 && typ[len(prefix)] == '.' && strings.HasPrefix(typ, prefix)
	}
	return pattern == typ
}

// cutPattern returns the prefix of a "prefix.*" pattern.
func cutPattern(p string) (string, bool) {
	if len(p) > 2 && p[len(p)-2:] == ".*" {
		return p[:len(p)-1], true // keep the dot: "auth." matches "auth.x"
	}
	return "", false
}

// nonRetryable reports whether typ is non-retryable under the policy's
// patterns or by default.
func (c *config) nonRetryable(typ string) bool {
	return c.listed(typ) || builtinNonRetryable(typ)
}

// listed reports whether typ matches the policy's non_retryable_errors.
func (c *config) listed(typ string) bool {
	if len(c.exact) == 0 && len(c.prefixes) == 0 {
		return false
	}
	if _, ok := c.exact[typ]; ok {
		return true
	}
	for _, p := range c.prefixes {
		if len(typ) > len(p) && typ[:len(p)] == p {
			return true
		}
	}
	return false
}

// patternRule returns the rule a non_retryable_errors pattern breaks, or "".
func patternRule(p string) string {
	switch {
	case p == "":
		return "must not be empty"
	case !utf8.ValidString(p):
		return "must be valid UTF-8"
	case len(p) > 256:
		return "must be at most 256 bytes"
	case strings.ContainsAny(p, " \t\r\n"):
		return "must not contain white space"
	}
	body := strings.TrimSuffix(p, ".*")
	if body == "" || body == "." || strings.Contains(body, "*") {
		return `must be an error type, or "prefix.*"`
	}
	if strings.HasPrefix(body, ".") || strings.HasSuffix(body, ".") || strings.Contains(body, "..") {
		return "must not have empty dot-separated parts"
	}
	return ""
}
