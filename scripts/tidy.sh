#!/usr/bin/env bash
# Tidies the go.mod and go.sum of every nested module of the workspace.
#
# `go mod tidy` alone cannot: it ignores go.work and looks the unpublished
# root module up on the proxy. So each module is tidied through a temporary
# copy of its go.mod that points the root module, and any other module of the
# workspace whose packages it imports (bench imports grpc), at this checkout;
# the copy, minus those pointers, then replaces the module's own go.mod and
# go.sum.
#
#   scripts/tidy.sh          # rewrite the files
#   scripts/tidy.sh -check   # fail, listing them, when a file is not tidy
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
root_mod=$(GOWORK=off go list -m -f "{{.Path}}")
check=false
[ "${1:-}" = "-check" ] && check=true
status=0
for dir in $(go list -m -f '{{.Dir}}'); do
	[ "$dir" = "$root" ] && continue
	tmp=$(mktemp -d)
	cp "$dir/go.mod" "$tmp/go.mod"
	if [ -f "$dir/go.sum" ]; then cp "$dir/go.sum" "$tmp/go.sum"; else : >"$tmp/go.sum"; fi
	point=(-require="$root_mod@v0.0.0" -replace="$root_mod=$root")
	unpoint=(-droprequire="$root_mod" -dropreplace="$root_mod")
	self=$(cd "$dir" && GOWORK=off go list -m -f "{{.Path}}")
	for other in $(go list -m -f '{{.Path}}={{.Dir}}'); do
		path=${other%%=*}
		case "$path" in "$root_mod" | "$self") continue ;; esac
		if grep -rqs --include='*.go' "\"$path[/\"]" "$dir"; then
			point+=(-require="$path@v0.0.0" -replace="$other")
			unpoint+=(-droprequire="$path" -dropreplace="$path")
		fi
	done
	go mod edit "${point[@]}" "$tmp/go.mod"
	(cd "$dir" && GOWORK=off GOFLAGS=-mod=mod go mod tidy -modfile="$tmp/go.mod")
	go mod edit "${unpoint[@]}" "$tmp/go.mod"
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
	rm -rf "$tmp"
done
exit $status
