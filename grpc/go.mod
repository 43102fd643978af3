module github.com/steadyhq/retry/grpc

go 1.25.0

require (
	github.com/sony/gobreaker/v2 v2.4.0
	google.golang.org/grpc v1.84.0
	google.golang.org/protobuf v1.36.11
)

require golang.org/x/time v0.15.0 // indirect

require (
	github.com/steadyhq/retry v0.0.0
	go.uber.org/goleak v1.3.0
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.40.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260706201446-f0a921348800 // indirect
)
