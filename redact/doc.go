// Package redact removes credentials and personal data from text before it
// is logged, counted or stored: the error messages of retry events, log
// lines and dead-letter records, and the URL and headers of a request kept
// for replay.
//
// Sanitize replaces with Redacted, wherever they appear in a text:
//
//   - URL userinfo: everything between "://" and the last '@' of the
//     authority, whatever the password holds ('=', '&', ';', ':', '@');
//   - DSN credentials (user:pass@tcp(host)/db, scott/tiger@host);
//   - the values of secret-looking keys (password, secret, token, key,
//     signature, sig, session, sid, credential, and names ending in
//     password, secret, token, key, auth, cookie and the like, compared
//     without case, '-', '_' or '.': api_key, AccountKey, subscription-key,
//     client_secret) in query strings, key=value connection strings,
//     "key": "value" JSON and key: value lines, with or without spaces
//     around the sign (password = x);
//   - the value of a header line whose name is such a key (Authorization,
//     Cookie, Set-Cookie, X-Api-Key, X-Functions-Key,
//     Ocp-Apim-Subscription-Key, ...), to the end of the line, and the
//     credential after an authentication scheme (Bearer, Basic, Token,
//     Digest, Negotiate);
//   - well-known token shapes: JWTs, AWS access key ids, GitHub, GitLab,
//     Slack, Stripe, Google, npm and SendGrid keys, sk- secret keys;
//   - the bodies of PEM private keys.
//
// It masks email addresses (alice@example.com becomes a***@example.com)
// and bounds its result to 1024 bytes of valid UTF-8. SanitizeURL renders a
// URL without its userinfo and with secret query and fragment values
// redacted; SafeHeader copies only the headers known to carry no
// credential (an allowlist: a header it does not know is left out);
// SanitizeBody applies Sanitize's rules to a whole body of text.
//
// Redaction goes by shape: a secret in one of the forms above is removed, a
// secret written in no recognisable form (a bare password in prose) passes
// through. It errs towards removing too much: a value runs to the next
// space, '&', ';', ',', quote or bracket, a header line's to the end of the
// line, and a key whose name merely ends in "key" (monkey=...) loses its
// value too. The functions never modify their arguments and are safe for
// concurrent use.
//
// # Bounds
//
// The text comes from whoever is on the other side of the wire, so every
// function reads it in time linear in its length, with a small constant:
// each rule is one pass that reads every byte a bounded number of times,
// never going back over what it read. Sanitize reads at most the first
// 64 KiB of its argument (a few milliseconds of CPU for 64 KiB of the
// most hostile shapes: one character repeated, '@', "://", '%', '=', long
// tokens; go test -run '^$' -bench . ./redact measures them), allocates a
// few times that, and returns at most 1024 bytes.
// SanitizeURL and SafeHeader call Sanitize on each part, so their cost is
// that of Sanitize on each; SanitizeBody reads the whole body, at the same
// cost per byte.
//
// The retry package passes the message of every event, log line and
// dead-letter record through Sanitize; the caller of retry.Do still receives
// the real error.
package redact
