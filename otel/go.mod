module github.com/steadyhq/retry/otel

go 1.25.0
