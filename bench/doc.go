// Package bench measures the retry package side by side with its peers
// (failsafe-go, cenkalti/backoff v5, avast/retry-go v4, sethvargo/go-retry,
// go-retryablehttp and gobreaker v2) on the same work. It is its own module
// so that the peers never enter the library's go.mod.
//
// Run ./run.sh from this directory: it runs every benchmark with -count 10
// and -benchmem and prints the table of medians kept in README.md.
package bench
