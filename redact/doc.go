// Package redact removes credentials and personal data from text before it
// is logged, counted or stored: the error messages of retry events, log
// lines and dead-letter records, and the URL and headers of a request kept
// for replay.
//
// Sanitize replaces with Redacted, wherever they appear in a text:
//
//   - URL userinfo (scheme://user:pass@host) and DSN credentials
//     (user:pass@tcp(host)/db, scott/tiger@host);
//   - the values of secret-looking keys (password, secret, token, api_key,
//     signature, sig, key, session, sid, credential, and names ending in
//     password, secret, token, apikey, accesskey and the like, compared
//     without case, '-', '_' or '.') in query strings, key=value connection
//     strings, "key": "value" JSON and key: value lines;
//   - the values of Authorization, Proxy-Authorization, Cookie, Set-Cookie,
//     X-Api-Key and X-Auth-Token header lines, to the end of the line, and
//     the credential after an authentication scheme (Bearer, Basic, Token,
//     Digest, Negotiate);
//   - well-known token shapes: JWTs, AWS access key ids, GitHub, GitLab,
//     Slack, Stripe, Google, npm and SendGrid keys, sk- secret keys;
//   - the bodies of PEM private keys.
//
// It masks email addresses (alice@example.com becomes a***@example.com)
// and bounds its result to 1024 bytes of valid UTF-8. SanitizeURL renders a
// URL without its userinfo and with secret query and fragment values
// redacted; SafeHeader copies a header without the headers that carry
// credentials.
//
// Redaction goes by shape: a secret in one of the forms above is removed, a
// secret written in no recognisable form (a bare password in prose) passes
// through. It errs towards removing too much: a value runs to the next
// space, '&', ';', ',', quote or bracket. The functions never modify their
// arguments and are safe for concurrent use.
//
// The retry package passes the message of every event, log line and
// dead-letter record through Sanitize; the caller of retry.Do still receives
// the real error.
package redact
