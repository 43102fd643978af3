#!/usr/bin/env bash
# Tidies the go.mod and go.sum of every nested module of the workspace, and
# of the release tool's module (scripts/release, outside the workspace).
#
# Each nested module requires the project's modules it imports at the
# version go.work replaces them at: the newest release (v0.0.0 before the
# first). `go mod tidy` alone cannot tidy it: it ignores go.work, and until
# a release is pushed no module proxy has that version. So each module is
# tidied through a temporary copy of its go.mod that points the root module,
# and any other module of the workspace whose packages it imports (bench
# imports grpc), at this checkout; the copy, minus those pointers, then
# replaces the module's own go.mod and go.sum. The go.sum lines of the
# project's modules, which make release writes from the release's zips, are
# kept as they were.
#
#   scripts/tidy.sh          # rewrite the files
#   scripts/tidy.sh -check   # fail, listing them, when a file is not tidy
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
root_mod=$(GOWORK=off go list -m -f "{{.Path}}")
check=false
[ "${1:-}" = "-check" ] && check=true
# The version go.work replaces the root module at: what the modules require.
version=$(sed -n "s#^[[:space:]]*\(replace[[:space:]][[:space:]]*\)\{0,1\}$root_mod[[:space:]][[:space:]]*\(v[^[:space:]]*\)[[:space:]][[:space:]]*=>.*#\2#p" go.work | head -1)
[ -n "$version" ] || { echo "tidy.sh: go.work has no line replacing $root_mod at a version" >&2; exit 1; }
status=0

# compare DIR TMP: in -check mode, reports DIR's go.mod and go.sum where they
# differ from TMP's; otherwise copies TMP's over them.
compare() {
	local dir=$1 tmp=$2 f
	for f in go.mod go.sum; do
		if $check; then
			if ! cmp -s "$tmp/$f" "$dir/$f" && { [ -s "$tmp/$f" ] || [ -e "$dir/$f" ]; }; then
				echo "not tidy: ${dir#"$root"/}/$f" >&2
				diff -u "$dir/$f" "$tmp/$f" >&2 || true
				status=1
			fi
		elif [ -s "$tmp/$f" ] || [ "$f" = go.mod ]; then
			cp "$tmp/$f" "$dir/$f"
		fi
	done
}

# copyfiles DIR TMP: DIR's go.mod and go.sum (empty when missing) into TMP.
copyfiles() {
	cp "$1/go.mod" "$2/go.mod"
	if [ -f "$1/go.sum" ]; then cp "$1/go.sum" "$2/go.sum"; else : >"$2/go.sum"; fi
}

for dir in $(go list -m -f '{{.Dir}}'); do
	[ "$dir" = "$root" ] && continue
	tmp=$(mktemp -d)
	copyfiles "$dir" "$tmp"
	self=$(cd "$dir" && GOWORK=off go list -m -f "{{.Path}}")
	point=(-require="$root_mod@$version" -replace="$root_mod=$root")
	unpoint=(-dropreplace="$root_mod")
	ours=("$root_mod")
	for other in $(go list -m -f '{{.Path}}={{.Dir}}'); do
		path=${other%%=*}
		case "$path" in "$root_mod" | "$self") continue ;; esac
		if grep -rqs --include='*.go' "\"$path[/\"]" "$dir"; then
			point+=(-require="$path@$version" -replace="$other")
			unpoint+=(-dropreplace="$path")
			ours+=("$path")
		fi
	done
	go mod edit "${point[@]}" "$tmp/go.mod"
	(cd "$dir" && GOWORK=off GOFLAGS=-mod=mod go mod tidy -modfile="$tmp/go.mod")
	go mod edit "${unpoint[@]}" "$tmp/go.mod"
	# The replaced modules have no go.sum lines: put back those of the
	# required versions, in go.sum's order (by module path).
	kept=$(for path in "${ours[@]}"; do
		awk -v p="$path" -v v="$version" '$1 == p && ($2 == v || $2 == v "/go.mod")' "$dir/go.sum" 2>/dev/null || true
	done)
	if [ -n "$kept" ]; then
		{ cat "$tmp/go.sum"; echo "$kept"; } | LC_ALL=C sort -s -k1,1 >"$tmp/go.sum.merged"
		mv "$tmp/go.sum.merged" "$tmp/go.sum"
	fi
	compare "$dir" "$tmp"
	rm -rf "$tmp"
done

# The release tool's module stands on its own, outside the workspace.
for dir in "$root/scripts/release"; do
	tmp=$(mktemp -d)
	copyfiles "$dir" "$tmp"
	(cd "$dir" && GOWORK=off GOFLAGS=-mod=mod go mod tidy -modfile="$tmp/go.mod")
	compare "$dir" "$tmp"
	rm -rf "$tmp"
done
exit $status
