module github.com/steadyhq/retry/retryz/browsertest

go 1.25.0

require (
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	go.uber.org/goleak v1.3.0
)

require github.com/sony/gobreaker/v2 v2.4.0 // indirect

require (
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/steadyhq/retry v0.0.0
	golang.org/x/time v0.15.0 // indirect
)
