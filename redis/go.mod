module github.com/steadyhq/retry/redis

go 1.25.0

require (
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/redis/go-redis/v9 v9.22.0
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.15.0
)

require github.com/sony/gobreaker/v2 v2.4.0 // indirect

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/steadyhq/retry v0.0.0
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
)
