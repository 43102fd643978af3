package retry

// Unexported parsers and formatters, for the tests of package retry_test.
var (
	ParseRetryAfter = parseRetryAfter
	FormatDuration  = formatDuration
)
