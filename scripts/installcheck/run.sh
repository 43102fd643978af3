#!/usr/bin/env bash
# Rehearses a release and checks README.md's install commands as a user
# outside the clone follows them, with nothing but the Go module proxy.
#
#  1. The rehearsal: a temporary clone of this checkout (its working tree as
#     it is, committed or not) makes a release with scripts/release, as
#     `make release` would (every refusal checked, requirements set,
#     CHANGELOG.md written, modules tidied and vetted outside the workspace
#     against the release, commit and tags), at the next minor version after
#     the newest release with a pre-release suffix of its own
#     (v0.1.0-rehearsal.N), so that no two rehearsals meet in the module
#     cache. Its tags are then served by a file-based module proxy
#     (GOPROXY=file://...) whose zips golang.org/x/mod/zip makes from them,
#     as the public proxy makes them from the repository's.
#  2. In a new module outside the clone, with no replace directive and no
#     workspace, README.md's `go get` commands: the root module's, then
#     testdata/root/main.go (retry.Do) is built and run, and go.mod must
#     require the root at the rehearsal's version and the two dependencies
#     README names, and nothing else, and nothing else is compiled in; then each nested library module's,
#     then testdata/all/main.go, which uses the root and each of them;
#     then a program that imports every released library module, each got
#     with go get if README.md has no line for it.
#  3. README.md's `go install .../cmd/retry@latest`, then `retry schedule`
#     and `retry --version`, which must print the rehearsal's version.
#  4. README.md's clone route (go mod edit -replace=...=../retry), in
#     another new module, with this checkout beside it as ../retry: the
#     same two programs.
#
# Nothing is left behind, whether it passes or fails: the temporary
# directory goes, and so does the rehearsal's version from the module
# cache.
#
#   scripts/installcheck/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
readme=$root/README.md
start=$SECONDS
root_mod=github.com/steadyhq/retry

say() { echo "installcheck: $*"; }
die() {
	echo "installcheck: $*" >&2
	exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/retry-installcheck.XXXXXX")
version=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$version" ] && [ -x "$tmp/release" ]; then
		"$tmp/release" -C "$root" forget "$version" || rc=1
	fi
	chmod -R u+w "$tmp" 2>/dev/null || true
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "building scripts/release"
(cd scripts/release && GOWORK=off go build -o "$tmp/release" .)
released=$("$tmp/release" -C "$root" modules)

# README's code blocks, each line prefixed by the block's number.
blocks=$(awk '/^```/{if (in_block) in_block = 0; else {in_block = 1; n++}; next} in_block{print n "\t" $0}' "$readme")
# block PATTERN: the code block of README.md that has a line matching
# PATTERN (the first such block), all of its lines.
block() {
	local n
	n=$(awk -F'\t' -v re="$1" '{line = $0; sub(/^[^\t]*\t/, "", line)} line ~ re {print $1; exit}' <<<"$blocks")
	[ -n "$n" ] || return 0
	awk -F'\t' -v n="$n" '$1 == n {sub(/^[^\t]*\t/, ""); print}' <<<"$blocks"
}
# runlines LINES: runs each line as written, in the current directory.
runlines() {
	local line
	[ -n "$1" ] || die "README.md has no such command"
	while IFS= read -r line; do
		echo "    $line"
		bash -euo pipefail -c "$line" || die "README.md's command failed in a module outside the clone: $line"
	done <<<"$1"
}
# requires: the module paths and versions go.mod requires, one a line, sorted.
requires() {
	awk '/^require \(/{b = 1; next} b && /^\)/{b = 0} b{print $1, $2} /^require [^(]/{print $2, $3}' go.mod | sort
}
# build PROGRAM: builds and runs main.go, the PROGRAM program.
build() {
	say "go build (the $1 program), then run it"
	go build -o app . || die "the $1 program does not build after README.md's commands"
	./app | sed 's/^/    /'
	[ "${PIPESTATUS[0]}" = 0 ] || die "the $1 program failed"
}
# noreplace: the module has no replace directive.
noreplace() {
	! grep -q '=>' go.mod || die "go.mod has a replace directive: $(grep '=>' go.mod)"
}

get_root=$(block "^go get $root_mod@latest$")
get_nested=$(block "^go get $root_mod/[^@]*@latest$")
install=$(block "^go install $root_mod/cmd/retry@latest$")
clone_root=$(block "^go mod edit -replace=$root_mod=../retry$")
clone_nested=$(block "^go mod edit -replace=$root_mod/")
[ -n "$get_root" ] || die "README.md has no 'go get $root_mod@latest'"
[ -n "$clone_root" ] && [ -n "$clone_nested" ] || die "README.md has no clone route (go mod edit -replace=$root_mod=../retry, then each nested module's)"
[ -n "$install" ] || die "README.md has no 'go install $root_mod/cmd/retry@latest'"

# 1. The rehearsal.
say "a rehearsal release, in a temporary clone of the working tree"
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME=rehearsal GIT_AUTHOR_EMAIL=rehearsal@localhost
export GIT_COMMITTER_NAME=rehearsal GIT_COMMITTER_EMAIL=rehearsal@localhost
git clone -q --shared "$root" "$tmp/repo"
# The working tree's files, committed or not, as they are.
git -C "$root" ls-files -z -co --exclude-standard |
	while IFS= read -r -d '' f; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done |
	tar -C "$root" --null -T - -cf - | tar -C "$tmp/repo" -xf -
git -C "$root" ls-files -z -d | (cd "$tmp/repo" && xargs -0 -r rm -f --)
git -C "$tmp/repo" add -A
git -C "$tmp/repo" diff --cached --quiet || git -C "$tmp/repo" commit -q -m "rehearsal: the working tree as it is"
next=$("$tmp/release" -C "$tmp/repo" next)
version="$next-rehearsal.$(date +%s).$$"
say "make release VERSION=$version, in the clone (go vet outside the workspace in place of make test)"
"$tmp/release" -C "$tmp/repo" -check "scripts/tidy.sh -check" -standalone vet "$version" 2>&1 | sed -u 's/^/    /'
[ "${PIPESTATUS[0]}" = 0 ] || die "the rehearsal release failed"
for dir in $released; do
	tag=$version
	[ "$dir" = . ] || tag=$dir/$version
	git -C "$tmp/repo" rev-parse -q --verify "refs/tags/$tag" >/dev/null || die "the release made no tag $tag"
done
[ -z "$(git -C "$tmp/repo" status --porcelain)" ] || die "the release left the tree dirty: $(git -C "$tmp/repo" status --porcelain | head -3)"
grep -q "^## $version " "$tmp/repo/CHANGELOG.md" || die "CHANGELOG.md has no section for $version"
"$tmp/release" -C "$tmp/repo" proxy "$tmp/proxy" "$version"
say "the tags of $version served from $tmp/proxy"

# 2. README's go get, in a module outside the clone, no replace, no workspace.
export GOWORK=off
export GOPROXY="file://$tmp/proxy,$(go env GOPROXY)"
export GONOSUMDB="$root_mod${GONOSUMDB:+,$GONOSUMDB}"
# No index of the rehearsal's modules in the build cache: the go command
# keys it by the module's directory, and the version is used once.
export GODEBUG="${GODEBUG:+$GODEBUG,}goindex=0"
export GOFLAGS="${GOFLAGS:-}"
mkdir "$tmp/app"
cd "$tmp/app"
go mod init example.com/app 2>/dev/null
say "the root module, with README.md's go get:"
cp "$root/scripts/installcheck/testdata/root/main.go" main.go
runlines "$get_root"
build root
noreplace
# What README says the root module brings: in go.mod and compiled in, the
# root, at the rehearsal's version, and its two dependencies.
deps="github.com/sony/gobreaker/v2 golang.org/x/time"
got=$(requires | awk '{print $1}' | xargs)
want=$(printf '%s\n' $root_mod $deps | sort | xargs)
[ "$got" = "$want" ] || die "go.mod requires: $got; README.md says: $want"
got=$(requires | awk -v p="$root_mod" '$1 == p {print $2}')
[ "$got" = "$version" ] || die "go.mod requires $root_mod at '$got', want $version"
compiled=$(go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}}{{end}}{{end}}' . | sort -u | xargs)
[ "$compiled" = "$want" ] || die "the program is built from: $compiled; README.md says: $want"
got=$(requires | xargs)
say "go.mod requires $got"

say "each nested library module, with README.md's go get:"
cp "$root/scripts/installcheck/testdata/all/main.go" main.go
runlines "$get_nested"
build all
# Every released library module, README's or not: go get it, and build a
# program that imports each.
say "every released library module, imported by one program:"
libraries=$(for dir in $released; do case "$dir" in . | cmd/retry) ;; *) echo "$root_mod/$dir" ;; esac; done)
for path in $libraries; do
	grep -q "^go get $path@latest$" <<<"$get_nested" || runlines "go get $path@latest"
done
{
	echo "package main"
	echo
	echo "import ("
	for path in $root_mod $libraries; do echo "	_ \"$path\""; done
	echo ")"
	echo
	echo "func main() {}"
} >main.go
build each
noreplace
for dir in $released; do
	case "$dir" in cmd/retry) continue ;; esac
	path=$root_mod
	[ "$dir" = . ] || path=$root_mod/$dir
	got=$(requires | awk -v p="$path" '$1 == p {print $2}')
	[ "$got" = "$version" ] || die "go.mod requires $path at '$got', want $version"
done
say "go.mod requires $(requires | awk -v p="$root_mod" 'index($1, p) == 1 {printf "%s%s %s", s, $1, $2; s = ", "}')"

# 3. README's go install, outside any module.
say "the retry command, with README.md's go install:"
cd "$tmp"
export GOBIN="$tmp/bin" PATH="$tmp/bin:$PATH"
runlines "$install"
out=$("$GOBIN/retry" schedule --attempts 3 --jitter none) || die "retry schedule failed: $out"
echo "$out" | sed 's/^/    /'
grep -q 'attempt' <<<"$out" || die "retry schedule printed no schedule"
got=$("$GOBIN/retry" --version)
echo "    retry --version: $got"
[ "$got" = "retry $version" ] || die "retry --version printed '$got', want 'retry $version'"

# 4. README's clone route, with this checkout beside the module as ../retry.
say "the clone route, with README.md's go mod edit -replace commands:"
export GOPROXY="${GOPROXY#*,}"
mkdir "$tmp/clone" "$tmp/clone/app"
ln -s "$root" "$tmp/clone/retry"
cd "$tmp/clone/app"
go mod init example.com/app 2>/dev/null
cp "$root/scripts/installcheck/testdata/root/main.go" main.go
runlines "$clone_root"
build root
cp "$root/scripts/installcheck/testdata/all/main.go" main.go
runlines "$clone_nested"
build all

say "ok ($((SECONDS - start))s)"
