# Counterpart — every entry point sets up what it needs first (Debian packages via apt-get).
SHELL := /bin/bash
export PATH := $(PATH):/opt/swift/usr/bin

SWIFT ?= swift
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 10
HTTP_FUZZ_SECONDS ?= 60
HTTP_FUZZ_SMOKE_SECONDS ?= 20
# Run a second time with the portable fallbacks of Support/Platform.swift (what macOS runs);
# the filter is anchored (`.Suite/`) so that UploadTests does not also pick ResumableUploadTests.
PORTABLE_SUITES := PlatformTests|UploadWriterTests|StaticFileTests|StaticFileReviewTests|RangeRequestTests|DownloadDispositionTests|ListingTests|BadInputCorpusPathTests|BadInputCorpusChangingFileTests|UploadTests|UploadErrorTests|UploadReviewTests

.PHONY: setup build run test test-s3 bench stress fuzz fuzz-smoke http-fuzz container-test dist dist-check clean

setup:
	@scripts/setup

build: setup
	$(SWIFT) build

# Serves ./public and takes uploads into ./uploads on http://127.0.0.1:8080.
# Flags go in ARGS: make run ARGS="--port 9000 --root ~/files"
run: setup
	$(SWIFT) build -c release --product counterpart
	.build/release/counterpart $(ARGS)

test:
	@scripts/setup chromium wrk strace
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --parallel
	COUNTERPART_PORTABLE_FALLBACKS=1 $(SWIFT) test --skip-build --parallel --filter '\.($(PORTABLE_SUITES))/'
	scripts/stress --binary .build/debug/counterpart --quick $(if $(CI),--require-root)
	scripts/http-fuzz $(HTTP_FUZZ_SMOKE_SECONDS) --binary .build/debug/counterpart --no-build
	$(MAKE) --no-print-directory fuzz-smoke

# The object store, on a real engine: a throw-away one-node Ceph RGW (memstore, about 15 s to
# start) in a temporary folder. `make test` runs the engine-free tests of these suites and
# skips the rest, with the reason.
S3_SUITES := S3ClientTests|S3ConfigurationTests|S3EncodingTests|S3LeftoversTests
# The suites that store something, run a second time with their uploads in the object store
# (TestServer under COUNTERPART_TEST_STORE=s3): the same tests, against both backends.
STORAGE_SUITES := UploadTests|UploadErrorTests|UploadReviewTests|WrongBoundaryTests|TusTests|ResumableUploadTests|TakeoverTests|DroppedAppendTests|DraftRuleTests|BadInputCorpusFilenameTests|BadInputCorpusLookalikeTests|BadInputCorpusPartHeaderTests|BadInputCorpusPartLimitTests|BadInputCorpusContentTypeTests|RangeRequestTests|DownloadDispositionTests|ListingTests|NoLeakMatrixTests|JournalTests|CookbookTests

# Ceph RGW started here (scripts/ceph-s3), then: the S3 client's suites; every storage suite
# against the object store; the store frozen (radosgw stopped, alone: the others would
# stall with it); three nodes behind nginx (scripts/cluster, TLS and HTTP/2) and
# the cross-node checks. The engine and the nodes are stopped by PID however the tests end.
test-s3:
	@scripts/setup ceph-mon ceph-osd radosgw nginx aria2
	$(SWIFT) build --build-tests
	engine=$$(mktemp -d -t counterpart-s3.XXXXXX); cluster=$$(mktemp -d -t counterpart-cluster.XXXXXX); \
	trap 'scripts/cluster down "$$cluster"; scripts/ceph-s3 down "$$engine"' EXIT; \
	scripts/ceph-s3 up "$$engine" && \
	COUNTERPART_S3_ENV="$$engine/s3.env" $(SWIFT) test --skip-build --filter '\.($(S3_SUITES))/' && \
	COUNTERPART_S3_ENV="$$engine/s3.env" COUNTERPART_TEST_STORE=s3 $(SWIFT) test --skip-build --parallel --filter '\.($(STORAGE_SUITES))/' && \
	COUNTERPART_S3_ENV="$$engine/s3.env" COUNTERPART_S3_FREEZE=1 $(SWIFT) test --skip-build --filter '\.StoreStallTests/' && \
	scripts/cluster up "$$cluster" 3 --s3-env "$$engine/s3.env" && \
	COUNTERPART_CLUSTER_ENV="$$cluster/cluster.env" $(SWIFT) test --skip-build --filter '\.ClusterTests/'

# The benchmarks: the parsers beside MHD_PostProcessor in memory, then the release `counterpart`
# beside nginx (1 and 2 workers) and a C libmicrohttpd server built here from bench/peers/,
# driven by curl and wrk over 127.0.0.1, and how its cost grows (concurrent uploads, idle
# connections). About 10 minutes on 2 busy cores (--quick: 2); a JSON summary goes to
# .build/bench/summary.json.
# Arguments: make bench BENCH_ARGS="--only server/small,server/scaling" or BENCH_ARGS=--quick.
BENCH_PEERS := $(patsubst bench/peers/%.c,.build/bench/bin/%,$(wildcard bench/peers/*.c))

bench:
	@scripts/setup nginx wrk gcc
	$(MAKE) --no-print-directory $(BENCH_PEERS)
	$(SWIFT) build -c release --product counterpart-bench
	$(SWIFT) build -c release --product counterpart
	.build/release/counterpart-bench --peers .build/bench/bin --json .build/bench/summary.json $(BENCH_ARGS)

.build/bench/bin/%: bench/peers/%.c
	@mkdir -p $(@D)
	gcc -O2 -Wall -Wextra -o $@ $< -lmicrohttpd

# Load and fault scenarios (wrk, curl, raw sockets) against the release server, on loopback.
# Arguments: make stress STRESS_ARGS="--quick --only uploads,kill9" (--list names them).
stress:
	@scripts/setup wrk
	$(SWIFT) build -c release --product counterpart
	scripts/stress --binary .build/release/counterpart $(STRESS_ARGS)

fuzz: setup
	scripts/fuzz $(FUZZ_SECONDS)

fuzz-smoke: setup
	scripts/fuzz $(FUZZ_SMOKE_SECONDS)

# The HTTP-level fuzzer: mutated requests over raw sockets against the release server
# (see scripts/http-fuzz). `make test` runs 20 s of it on the debug build. make http-fuzz HTTP_FUZZ_SECONDS=1800
http-fuzz: setup
	scripts/http-fuzz $(HTTP_FUZZ_SECONDS)

# The container image built from Containerfile with podman and checked the way a user runs
# it (root; local stand-ins for the base images, see scripts/container-test).
container-test:
	scripts/container-test

# The ready binary: .build/dist/counterpart-linux-<arch>.tar.gz (see scripts/dist);
# dist-check tries it in a Debian root without Swift (root; see scripts/dist-check).
dist:
	scripts/dist

dist-check: dist
	scripts/dist-check

clean:
	rm -rf .build
