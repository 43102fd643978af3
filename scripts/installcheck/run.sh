#!/usr/bin/env bash
# Checks README.md's install instructions as a user outside the clone
# follows them. In a new module in a temporary directory, with this clone
# beside it as ../retry, it runs the commands of README's opening code
# blocks (those before its first "## " heading) as written, then builds and
# runs a program that uses what they set up:
#
#  1. after the first block, testdata/root/main.go (retry.Do); the module's
#     go.mod must then require the root module and the two dependencies
#     README names and nothing else, the program must be built from those
#     three alone, and go.sum must hold the checksums README lists;
#  2. after the later blocks, testdata/all/main.go, which uses the root
#     module and each nested library module (grpc, redis, otel,
#     middleware/retryablehttp) without contacting any server.
#
# It also checks that the Releases section lists every nested module of
# go.work. It needs the Go module proxy for the dependencies and nothing
# else. The programs build with -race, so that after make test's
# race-enabled tests little is left to compile.
#
#   scripts/installcheck/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
readme=$root/README.md
start=$SECONDS

say() { echo "installcheck: $*"; }
die() {
	echo "installcheck: $*" >&2
	exit 1
}

# The Releases section names the nested modules: all of go.work's.
listed=$(awk '/^## /{f = ($0 == "## Releases")} f' "$readme" | tr '\n' ' ' |
	sed -n 's/.*The nested modules (\([^)]*\)).*/\1/p' | grep -o '`[^`]*`' | tr -d '`' | sort)
nested=$(go list -m -f '{{.Dir}}' | sed -n "s|^$root/||p" | sort)
if [ "$listed" != "$nested" ]; then
	die "README.md's Releases section lists the nested modules as: $(echo $listed); go.work has: $(echo $nested)"
fi

# README's opening code blocks, each line prefixed by the block's number.
blocks=$(awk '/^## /{exit} /^```/{if (in_block) in_block = 0; else {in_block = 1; n++}; next} in_block{print n "\t" $0}' "$readme")
nblocks=$(cut -f1 <<<"$blocks" | sort -u | wc -l)
[ "$nblocks" -ge 2 ] || die "README.md has $nblocks code blocks before its first section; want the root module's install commands, then the nested modules'"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$root" "$tmp/retry"
mkdir "$tmp/app"
cd "$tmp/app"
export GOWORK=off
go mod init example.com/app 2>/dev/null

# run N...: runs the lines of README's blocks N... in the module, as written.
run() {
	local n line
	for n in "$@"; do
		while IFS= read -r line; do
			echo "    $line"
			bash -euo pipefail -c "$line" || die "README.md's command failed in a module outside the clone: $line"
		done < <(awk -F'\t' -v n="$n" '$1 == n {sub(/^[^\t]*\t/, ""); print}' <<<"$blocks")
	done
}

# build PROGRAM: builds and runs testdata/PROGRAM as the module's main package.
build() {
	cp "$root/scripts/installcheck/testdata/$1/main.go" main.go
	say "go build -race (the $1 program), then run it"
	go build -race -o app . || die "the $1 program does not build after README.md's commands"
	./app | sed 's/^/    /'
	[ "${PIPESTATUS[0]}" = 0 ] || die "the $1 program failed"
}

say "the root module, in a module outside the clone, with README.md's commands:"
cp "$root/scripts/installcheck/testdata/root/main.go" main.go
run 1
build root
# What README says the root module brings: in go.mod and compiled in, the
# root and its two dependencies; in go.sum, also goleak, which its tests
# use, and testify and the three modules it needs, which gobreaker's tests
# use.
want="github.com/sony/gobreaker/v2 github.com/steadyhq/retry golang.org/x/time"
required=$(awk '/^require \(/{b = 1; next} b && /^\)/{b = 0} b{print $1} /^require [^(]/{print $2}' go.mod | sort | xargs)
[ "$required" = "$want" ] || die "go.mod requires: $required; README.md says: $want"
compiled=$(go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}}{{end}}{{end}}' . | sort -u | xargs)
[ "$compiled" = "$want" ] || die "the program is built from: $compiled; README.md says: $want"
want_sum="github.com/davecgh/go-spew github.com/pmezard/go-difflib github.com/sony/gobreaker/v2 github.com/stretchr/testify go.uber.org/goleak golang.org/x/time gopkg.in/yaml.v3"
sums=$(awk '{print $1}' go.sum | sort -u | xargs)
[ "$sums" = "$want_sum" ] || die "go.sum holds: $sums; README.md says: $want_sum"
say "go.mod requires $required; go.sum also holds goleak, testify and testify's three"

say "each nested library module, with README.md's commands:"
cp "$root/scripts/installcheck/testdata/all/main.go" main.go
run $(seq 2 "$nblocks")
build all

say "ok ($((SECONDS - start))s)"
