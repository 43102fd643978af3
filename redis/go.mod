module github.com/steadyhq/retry/redis

go 1.25.0
