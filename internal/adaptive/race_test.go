//go:build race

package adaptive

// raceSlowdown is how much slower the race detector makes the seeded
// runs, about: TestPassRateOverSeeds runs that share of its seeds.
const raceSlowdown = 5
