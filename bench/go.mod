module github.com/steadyhq/retry/bench

go 1.25.0
