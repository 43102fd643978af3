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
#   BASE=main ./run.sh       # also the library at git revision main
#
# With BASE, each round also runs this module's benchmarks against the
# library as it was at that revision (the rest of the repository taken
# from it, this bench directory from the working tree), and only its rows
# of ours, named base:retry-…: a before and after in one interleaved run.
set -euo pipefail
cd "$(dirname "$0")"
out=${OUT:-results.txt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/bench.test
go test -c -o "$bin" .
if [[ -n ${BASE:-} ]]; then
	base=$(git -C .. rev-parse --short "$BASE^{commit}") # the revision now: BASE may be a branch that moves
	mkdir "$tmp/base"
	git -C .. archive "$base" | tar -x -C "$tmp/base"
	rm -rf "$tmp/base/bench"
	cp -R . "$tmp/base/bench"
	(cd "$tmp/base/bench" && go test -c -o "$tmp/base.test" .)
	baseBench=${BENCH:-.}
	[[ $baseBench == */* ]] || baseBench="$baseBench/^retry"
fi
: >"$out"
for i in $(seq "${COUNT:-10}"); do
	echo "round $i of ${COUNT:-10}" >&2
	"$bin" -test.run '^$' -test.bench "${BENCH:-.}" -test.benchmem -test.count 1 | tee -a "$out" >&2
	if [[ -n ${BASE:-} ]]; then
		"$tmp/base.test" -test.run '^$' -test.bench "$baseBench" -test.benchmem -test.count 1 |
			sed -E 's#^(Benchmark[^/ ]+/)(retry)#\1base:\2#' | tee -a "$out" >&2
	fi
done
echo "date: $(date -u +%Y-%m-%d)  "
echo "go: $(go env GOVERSION)  "
[[ -n ${BASE:-} ]] && echo "base: $BASE ($base)  "
go run ./cmd/benchtable <"$out"
