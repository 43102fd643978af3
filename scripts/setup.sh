#!/usr/bin/env bash
# Installs what `make test` needs besides Go, or stops at once with the
# command to run. `make test` and .ci/run run it first.
#
# What the tests need: make; a C compiler and the C library's headers
# (go test -race needs cgo); redis-server and redis-cli (the redis module's
# tests start their own servers and Clusters on loopback ports); Chromium
# (the live page's browser test, retryz/browsertest, drives it headless;
# $CHROMIUM names another). On Debian
# and Ubuntu it installs the missing packages with apt-get when it can: as
# root, or through sudo without a password. Otherwise it prints the command and exits 1.
#
#   scripts/setup.sh                 # check, and install what is missing
#   SETUP_INSTALL=no scripts/setup.sh  # check only; print the command
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup: $*" >&2; }

if ! command -v go >/dev/null 2>&1; then
	say "go not found on PATH: install Go 1.25 or newer (see README.md), then run this again"
	exit 1
fi
if ! goversion=$(go env GOVERSION 2>&1); then
	say "go cannot run here: $goversion"
	exit 1
fi

# The Debian packages to install, and what each check found missing.
pkgs=()
what=()
if ! command -v make >/dev/null 2>&1; then
	pkgs+=(make)
	what+=(make)
fi
# cgo compiles with $(go env CC); go test -race needs it and libc's headers.
cc=$(go env CC)
if ! command -v "$cc" >/dev/null 2>&1; then
	pkgs+=(gcc libc6-dev)
	what+=("a C compiler ($cc)")
elif ! printf '#include <stdlib.h>\nint main(void) { return 0; }\n' | "$cc" -x c -o /dev/null - >/dev/null 2>&1; then
	pkgs+=(libc6-dev)
	what+=("the C library's headers")
fi
if ! command -v redis-server >/dev/null 2>&1; then
	pkgs+=(redis-server)
	what+=(redis-server)
fi
# redis-cli joins the test Clusters (redis-cli --cluster create).
if ! command -v redis-cli >/dev/null 2>&1; then
	pkgs+=(redis-tools)
	what+=(redis-cli)
fi

# Debian's chromium, about 100 MB with what it needs; a machine of this
# project's kind installs it in about 15 s.
if [ -z "${CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
	pkgs+=(chromium)
	what+=("chromium (for the live page's browser test)")
fi

if [ ${#pkgs[@]} -gt 0 ]; then
	missing=$(printf '%s, ' "${what[@]}")
	missing=${missing%, }
	install="apt-get update && apt-get install -y --no-install-recommends ${pkgs[*]}"
	if ! command -v apt-get >/dev/null 2>&1; then
		say "missing: $missing. Install them with your system's package manager (on Debian: $install), then run make test again."
		exit 1
	fi
	sudo=""
	if [ "$(id -u)" != 0 ]; then
		if command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
			sudo="sudo"
		else
			sudo=none
		fi
	fi
	if [ "$sudo" = none ] || [ "${SETUP_INSTALL:-yes}" = no ]; then
		say "missing: $missing. Install them as root, then run make test again:"
		echo "    sudo sh -c '$install'" >&2
		exit 1
	fi
	say "missing: $missing; installing ${pkgs[*]} with apt-get (about a minute)"
	log=$(mktemp)
	if ! { $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}"; } >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		say "the install failed; the command was: ${sudo:+sudo }sh -c '$install'"
		exit 1
	fi
	rm -f "$log"
	say "installed ${pkgs[*]}"
	# Installed where this PATH does not look, or not at all: say so now
	# rather than fail later.
	for c in make "$cc" redis-server redis-cli ${CHROMIUM:-chromium}; do
		if ! command -v "$c" >/dev/null 2>&1; then
			say "$c is still not on PATH ($PATH) after the install"
			exit 1
		fi
	done
fi

if [ "$(go env CGO_ENABLED)" != 1 ]; then
	say "cgo is off (CGO_ENABLED=$(go env CGO_ENABLED)), and go test -race needs it: unset CGO_ENABLED, then run make test again"
	exit 1
fi
