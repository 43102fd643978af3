//go:build race

package redact_test

// raceSlowdown is how much slower the race detector makes the sanitizer,
// about, for the time bounds of TestHostileLinear.
const raceSlowdown = 5
