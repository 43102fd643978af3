# The project's commands. `make test` is what CI runs (see .ci/run).

SHELL := /bin/bash
# One step at a time, in order, even under -j: set-up first, and each
# step's output in one piece.
.NOTPARALLEL:

STATICCHECK_VERSION := v0.7.0
ACTIONLINT_VERSION := v1.7.12
GORELEASER_VERSION := v2.15.1
BIN := $(CURDIR)/.bin
# staticcheck built by the Go in use, as it reads code with that Go's parser.
STATICCHECK := $(BIN)/staticcheck-$(STATICCHECK_VERSION)-$(shell go env GOVERSION 2>/dev/null)
ACTIONLINT := $(BIN)/actionlint-$(ACTIONLINT_VERSION)
GORELEASER := $(BIN)/goreleaser-$(GORELEASER_VERSION)
# Every module of the workspace (go.work), then the release tool's module,
# which stands outside it: it needs Go 1.26, where the library needs 1.25.
MODULES := $(shell go list -m -f '{{.Dir}}' 2>/dev/null) $(CURDIR)/scripts/release
# For a recipe's loop over $$m in MODULES: the workspace, or none for the
# release tool's module.
WORK = GOWORK=$$(case $$m in */scripts/release) echo off;; esac)
# A bash function for recipes: `ticking WHAT COMMAND...` runs COMMAND and,
# every 15 s while it runs, prints "    still WHAT (Ns)", so that no long
# step (a first vet or build compiles the standard library and every
# dependency) runs in silence.
TICKING := ticking() { local what=$$1 pid t=0 i; shift; "$$@" & pid=$$!; \
	while :; do \
		for ((i = 0; i < 75; i++)); do kill -0 $$pid 2>/dev/null || break 2; sleep 0.2; done; \
		t=$$((t + 15)); echo "    still $$what ($${t}s)"; \
	done; wait $$pid; }

.PHONY: test setup vet lint unit installcheck tidy fuzz bench demo chaos-soak release apidiff dist

## test: installs what the tests need (scripts/setup.sh), then vet, gofmt, staticcheck, tidy go.mod files, actionlint, the race-enabled tests of every module, and a rehearsal release with README's install commands run against it
test: setup vet lint unit installcheck

## setup: install make, a C compiler and redis-server when missing, or stop with the command to run
setup:
	@scripts/setup.sh

vet:
	@$(TICKING); for m in $(MODULES); do echo "go vet $$m"; \
		(cd $$m && export $(WORK) && ticking "vetting $$m (a first run compiles what it imports)" go vet ./...) || exit 1; done

lint:
	@echo "gofmt -l"; test -z "$$(gofmt -l $(MODULES))" || { gofmt -l $(MODULES); echo "gofmt needed"; exit 1; }
	@$(TICKING); test -x $(STATICCHECK) || { \
		echo "building staticcheck $(STATICCHECK_VERSION) into .bin (once per Go version)"; \
		GOBIN=$(BIN) ticking "building staticcheck" go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) && \
		mv $(BIN)/staticcheck $(STATICCHECK); }
	@$(TICKING); for m in $(MODULES); do echo "staticcheck $$m"; \
		(cd $$m && export $(WORK) && ticking "checking $$m" $(STATICCHECK) ./...) || exit 1; done
	@echo "scripts/tidy.sh -check" && scripts/tidy.sh -check
	@$(TICKING); test -x $(ACTIONLINT) || { \
		echo "building actionlint $(ACTIONLINT_VERSION) into .bin (once)"; \
		GOBIN=$(BIN) ticking "building actionlint" go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION) && \
		mv $(BIN)/actionlint $(ACTIONLINT); }
	@echo "actionlint .github/workflows" && $(ACTIONLINT)

# The tests of every module under -race, then, without it, the tests that
# -race excludes (//go:build !race): the allocation tests, which -race
# changes (sync.Pool drops items), the timing tests (named ...Timing), the
# short load test of shedding, whose times would be the race detector's,
# and the figures the docs show from retry sim, which take seconds without
# the race detector and minutes with it (package sim's own tests run the
# model under -race). testsummary prints go test's usual lines, one line
# counting the skipped tests and their reasons, and "N passed, N failed, N
# skipped"; with CI=true a skipped test fails the run. The passes with -run
# say so as they start, so that testsummary tells a package none of whose
# tests the pass runs from one of benchmarks only.
unit: setup
	@set -o pipefail; { rc=0; \
		for m in $(MODULES); do echo "go test -race $$m"; \
			(cd $$m && $(WORK) go test -race -count=1 -json ./... 2>&1) || rc=1; done; \
		echo "go test -run 'Allocs$$|Timing$$' (allocations and timings, without -race) $(CURDIR)/... and grpc"; \
		go test -count=1 -json -run 'Allocs$$|Timing$$' ./... 2>&1 || rc=1; \
		(cd grpc && go test -count=1 -json -run 'Allocs$$' . 2>&1) || rc=1; \
		echo "go test -run 'ShortLoad$$' (the short load test of shedding, without -race) bench/shedload"; \
		(cd bench && go test -count=1 -json -run 'ShortLoad$$' ./shedload 2>&1) || rc=1; \
		echo "go test -run 'Figures$$|^TestPictures$$' (the docs' figures of retry sim, without -race) cmd/retry"; \
		(cd cmd/retry && go test -count=1 -json -run 'Figures$$|^TestPictures$$' . 2>&1) || rc=1; \
		exit $$rc; } | go run ./scripts/testsummary

## installcheck: a rehearsal release in a temporary clone, served by a file-based module proxy, then README's go get, go install and clone commands in modules outside the clone
installcheck:
	@scripts/installcheck/run.sh

## release: make release VERSION=vX.Y.Z [MAJOR=yes]: sets the requirements between the modules, writes CHANGELOG.md, runs the checks (each module's tests outside the workspace, make test, make dist), commits and tags every released module (README's Releases); never pushes
release:
	@$(TICKING); cd scripts/release && GOWORK=off ticking "building scripts/release" go build -o $(BIN)/release .
	@$(BIN)/release -C $(CURDIR) -check "make test dist" -major "$$MAJOR" "$$VERSION"

## apidiff: the API changes since the newest release, as make release judges them
apidiff:
	@$(TICKING); cd scripts/release && GOWORK=off ticking "building scripts/release" go build -o $(BIN)/release .
	@$(BIN)/release -C $(CURDIR) api

## dist: the retry binaries for Linux, macOS and Windows on amd64 and arm64 with a checksums file, into dist/ (goreleaser --snapshot; a first run builds goreleaser into .bin, for several minutes)
dist:
	@$(TICKING); test -x $(GORELEASER) || { \
		echo "building goreleaser $(GORELEASER_VERSION) into .bin (once; several minutes)"; \
		GOBIN=$(BIN) ticking "building goreleaser" go install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION) && \
		mv $(BIN)/goreleaser $(GORELEASER); }
	@tag=$$(git tag --list 'v*' | grep -E '^v[0-9]+\.[0-9]+\.[0-9]+$$' | sort -V | tail -1); \
		GORELEASER_CURRENT_TAG=$${tag:-v0.0.0} $(GORELEASER) release --snapshot --clean

## tidy: rewrite the go.mod and go.sum files of the nested modules
tidy:
	scripts/tidy.sh

## fuzz: run every fuzz target of every module for FUZZTIME each
FUZZTIME ?= 30s
fuzz:
	@for m in $(MODULES); do (cd $$m && export $(WORK) && for p in $$(go list ./...); do \
		for f in $$(go test -list '^Fuzz' $$p | grep '^Fuzz'); do \
			echo "== $$p $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$p || exit 1; \
		done; done) || exit 1; done

## bench: the side-by-side benchmarks against the peer libraries (about 7 minutes)
bench:
	bench/run.sh

## demo: a plain client and retry.Transport against a flaky loopback server
# Built into .bin, then run, so that a long first build is seen to be one.
demo:
	@echo "make demo: compiling cmd/retry into .bin/retry (a first run downloads its modules and compiles for a minute or more; later runs take seconds), then: retry demo"
	@$(TICKING); ticking "compiling cmd/retry" go build -o $(BIN)/retry ./cmd/retry
	@$(BIN)/retry demo

## chaos-soak: the chaos suite with 200,000 requests
chaos-soak:
	cd chaos && go test -race -count=1 -run TestChaos -chaos.soak -timeout 30m -v .
