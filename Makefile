# The project's commands. `make test` is what CI runs (see .ci/run).

STATICCHECK := go run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Every module of the workspace (go.work), or the root module alone.
MODULES := $(shell go list -m -f '{{.Dir}}' 2>/dev/null)

.PHONY: test vet lint unit fuzz bench demo

## test: vet, staticcheck and the race-enabled tests of every module
test: vet lint unit

vet:
	@for m in $(MODULES); do (cd $$m && echo "go vet $$m" && go vet ./...) || exit 1; done

lint:
	@test -z "$$(gofmt -l $(MODULES))" || { gofmt -l $(MODULES); echo "gofmt needed"; exit 1; }
	@for m in $(MODULES); do (cd $$m && echo "staticcheck $$m" && $(STATICCHECK) ./...) || exit 1; done

unit:
	@for m in $(MODULES); do (cd $$m && go test -race -count=1 ./...) || exit 1; done

## fuzz: run every fuzz target of the root package for FUZZTIME each
FUZZTIME ?= 30s
fuzz:
	@for f in $$(go test -list '^Fuzz' . | grep '^Fuzz'); do \
		echo "== $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) . || exit 1; done

## bench: the root package's benchmarks
bench:
	go test -run '^$$' -bench . -benchmem -count 5 .

## demo: the retry engine against a flaky loopback server
demo:
	go run ./examples/flaky
