//go:build !race

package redis_test

// raceEnabled reports whether the tests run under -race, so that the
// programs they build and start are built with it too.
const raceEnabled = false
