# The project's commands. `make test` is what CI runs (see .ci/run).

STATICCHECK := go run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Every module of the workspace (go.work).
MODULES := $(shell go list -m -f '{{.Dir}}' 2>/dev/null)

.PHONY: test vet lint unit tidy fuzz bench demo chaos-soak

## test: vet, gofmt, staticcheck, tidy go.mod files and the race-enabled tests of every module
test: vet lint unit

vet:
	@for m in $(MODULES); do (cd $$m && echo "go vet $$m" && go vet ./...) || exit 1; done

lint:
	@test -z "$$(gofmt -l $(MODULES))" || { gofmt -l $(MODULES); echo "gofmt needed"; exit 1; }
	@for m in $(MODULES); do (cd $$m && echo "staticcheck $$m" && $(STATICCHECK) ./...) || exit 1; done
	@echo "scripts/tidy.sh -check" && scripts/tidy.sh -check

unit:
	@for m in $(MODULES); do (cd $$m && go test -race -count=1 ./...) || exit 1; done

## tidy: rewrite the go.mod and go.sum files of the nested modules
tidy:
	scripts/tidy.sh

## fuzz: run every fuzz target of every module for FUZZTIME each
FUZZTIME ?= 30s
fuzz:
	@for m in $(MODULES); do (cd $$m && for p in $$(go list ./...); do \
		for f in $$(go test -list '^Fuzz' $$p | grep '^Fuzz'); do \
			echo "== $$p $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$p || exit 1; \
		done; done) || exit 1; done

## bench: the side-by-side benchmarks against the peer libraries (about 7 minutes)
bench:
	bench/run.sh

## demo: a plain client and retry.Transport against a flaky loopback server
demo:
	go run ./cmd/retry demo

## chaos-soak: the chaos suite with 200,000 requests
chaos-soak:
	cd chaos && go test -race -count=1 -run TestChaos -chaos.soak -timeout 30m -v .
