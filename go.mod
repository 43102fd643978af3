module github.com/steadyhq/retry

go 1.25.0

require go.uber.org/goleak v1.3.0

require (
	github.com/sony/gobreaker/v2 v2.4.0
	golang.org/x/time v0.15.0
)
