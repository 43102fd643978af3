module github.com/steadyhq/retry/cmd/retry

go 1.25.0

require (
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
