module github.com/steadyhq/retry/chaos

go 1.25.0
