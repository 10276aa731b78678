# Counterpart — every entry point sets up what it needs first (Debian packages via apt-get).
SHELL := /bin/bash
export PATH := $(PATH):/opt/swift/usr/bin

SWIFT ?= swift
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 10

.PHONY: setup build test bench fuzz fuzz-smoke clean

setup:
	@scripts/setup

build: setup
	$(SWIFT) build

test: setup
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --parallel
	$(MAKE) --no-print-directory fuzz-smoke

bench: setup
	$(SWIFT) build -c release --product counterpart-bench
	.build/release/counterpart-bench

fuzz: setup
	scripts/fuzz $(FUZZ_SECONDS)

fuzz-smoke: setup
	scripts/fuzz $(FUZZ_SMOKE_SECONDS)

clean:
	rm -rf .build
