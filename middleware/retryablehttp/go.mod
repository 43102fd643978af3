module github.com/steadyhq/retry/middleware/retryablehttp

go 1.25.0

require (
	github.com/hashicorp/go-retryablehttp v0.7.8
	go.uber.org/goleak v1.3.0
)

require (
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)

require (
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/steadyhq/retry v0.0.0
)
