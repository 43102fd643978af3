module github.com/steadyhq/retry

go 1.25.0

require go.uber.org/goleak v1.3.0

require golang.org/x/time v0.15.0

require github.com/stretchr/testify v1.8.4 // indirect
