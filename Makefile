# Counterpart — every entry point sets up what it needs first (Debian packages via apt-get).
SHELL := /bin/bash
export PATH := $(PATH):/opt/swift/usr/bin

SWIFT ?= swift
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 10

.PHONY: setup build run test bench fuzz fuzz-smoke clean

setup:
	@scripts/setup

build: setup
	$(SWIFT) build

# Serves ./public and takes uploads into ./uploads on http://127.0.0.1:8080.
# Flags go in ARGS: make run ARGS="--port 9000 --root ~/files"
run: setup
	$(SWIFT) build -c release --product counterpart
	.build/release/counterpart $(ARGS)

test: setup
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --parallel
	$(MAKE) --no-print-directory fuzz-smoke

# The server benchmarks run the release `counterpart` beside nginx, driven by curl and wrk.
# Arguments: make bench BENCH_ARGS="--only server/threads".
bench:
	@scripts/setup nginx wrk
	$(SWIFT) build -c release --product counterpart-bench
	$(SWIFT) build -c release --product counterpart
	.build/release/counterpart-bench $(BENCH_ARGS)

fuzz: setup
	scripts/fuzz $(FUZZ_SECONDS)

fuzz-smoke: setup
	scripts/fuzz $(FUZZ_SMOKE_SECONDS)

clean:
	rm -rf .build
