#!/usr/bin/env bash
# Runs the side-by-side benchmarks with -count 10 -benchmem and prints the
# table of medians that README.md keeps. The raw results go to results.txt,
# for benchstat: go run golang.org/x/perf/cmd/benchstat results.txt
#
#   ./run.sh                 # everything, about 5 minutes
#   BENCH=Success ./run.sh   # one case
set -euo pipefail
cd "$(dirname "$0")"
out=${OUT:-results.txt}
go test -run '^$' -bench "${BENCH:-.}" -benchmem -count "${COUNT:-10}" . | tee "$out" >&2
echo "date: $(date -u +%Y-%m-%d)  "
echo "go: $(go env GOVERSION)  "
go run ./cmd/benchtable <"$out"
