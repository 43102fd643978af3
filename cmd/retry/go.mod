module github.com/steadyhq/retry/cmd/retry

go 1.25.0
