module github.com/steadyhq/retry/middleware/retryablehttp

go 1.25.0
