#!/usr/bin/env bash
# Runs the side-by-side benchmarks with -count 10 -benchmem and prints the
# table of medians that README.md keeps. The raw results go to results.txt,
# for benchstat: go run golang.org/x/perf/cmd/benchstat@latest results.txt
#
# The ten counts are interleaved: ten rounds, each running every case once,
# so that a slow spell of a shared machine falls on every case alike instead
# of on whichever case was running.
#
#   ./run.sh                 # everything, about 13 minutes
#   BENCH=Success ./run.sh   # one case
#   COUNT=3 ./run.sh         # fewer rounds
set -euo pipefail
cd "$(dirname "$0")"
out=${OUT:-results.txt}
bin=$(mktemp -d)/bench.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" .
: >"$out"
for i in $(seq "${COUNT:-10}"); do
	echo "round $i of ${COUNT:-10}" >&2
	"$bin" -test.run '^$' -test.bench "${BENCH:-.}" -test.benchmem -test.count 1 | tee -a "$out" >&2
done
echo "date: $(date -u +%Y-%m-%d)  "
echo "go: $(go env GOVERSION)  "
go run ./cmd/benchtable <"$out"
