# The two commands of the quick start (README.md): `make demo` and `make test`.
# CMake does the building; this file installs what is missing and picks the build trees:
#   build/       the normal build (binaries in build/bin, build/lib, build/emu)
#   build-asan/  the same sources under AddressSanitizer + UndefinedBehaviorSanitizer
#   build-fuzz/  clang + libFuzzer targets
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 60
FUZZ_LOG_SECONDS ?= 20
FUZZ_ANALYSIS_SECONDS ?= 20
CMAKE_FLAGS ?=

.PHONY: all deps build demo test test-fast test-asan fuzz bench clean install

all: build

deps:
	@sh scripts/deps.sh

build: deps
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build build -j $(JOBS)

demo: build
	@./build/bin/collprof demo

# Every test: the suite, the suite again under ASan+UBSan, then the fuzz runs (trace reader,
# NCCL log reader, the whole analysis).
test: deps test-fast test-asan fuzz

test-fast: build
	@cd build && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCOLLPROF_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

fuzz: deps
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLLPROF_FUZZ=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_trace_reader fuzz_nccl_log fuzz_analysis
	@mkdir -p build-fuzz/corpus && cp tests/fuzzdata/trace_reader/* build-fuzz/corpus/
	@echo "fuzz: trace reader for $(FUZZ_SECONDS) s"
	@./build-fuzz/bin/fuzz_trace_reader -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	  -rss_limit_mb=2048 -print_final_stats=0 build-fuzz/corpus tests/fuzzdata/trace_reader 2>build-fuzz/fuzz.log \
	  || { tail -n 40 build-fuzz/fuzz.log; exit 1; }
	@grep -E "^(Done|#[0-9]+ +DONE)" build-fuzz/fuzz.log | tail -n 1 || true
	@mkdir -p build-fuzz/corpus-nccl-log && cp tests/fuzzdata/nccl_log/* build-fuzz/corpus-nccl-log/
	@echo "fuzz: NCCL log reader for $(FUZZ_LOG_SECONDS) s"
	@./build-fuzz/bin/fuzz_nccl_log -max_total_time=$(FUZZ_LOG_SECONDS) -max_len=16384 \
	  -rss_limit_mb=2048 -print_final_stats=0 build-fuzz/corpus-nccl-log tests/fuzzdata/nccl_log \
	  2>build-fuzz/fuzz-nccl-log.log || { tail -n 40 build-fuzz/fuzz-nccl-log.log; exit 1; }
	@grep -E "^(Done|#[0-9]+ +DONE)" build-fuzz/fuzz-nccl-log.log | tail -n 1 || true
	@mkdir -p build-fuzz/corpus-analysis && cp tests/fuzzdata/analysis/* build-fuzz/corpus-analysis/
	@echo "fuzz: the analysis and its exporters for $(FUZZ_ANALYSIS_SECONDS) s"
	@./build-fuzz/bin/fuzz_analysis -max_total_time=$(FUZZ_ANALYSIS_SECONDS) -max_len=65536 \
	  -rss_limit_mb=2048 -print_final_stats=0 build-fuzz/corpus-analysis tests/fuzzdata/analysis \
	  2>build-fuzz/fuzz-analysis.log || { tail -n 40 build-fuzz/fuzz-analysis.log; exit 1; }
	@grep -E "^(Done|#[0-9]+ +DONE)" build-fuzz/fuzz-analysis.log | tail -n 1 || true
	@echo "fuzz: no crash"

bench: build
	@cmake --build build -j $(JOBS) --target benchmarks
	@for b in build/bin/bench_*; do $$b || exit 1; done

install: build
	@cmake --install build

clean:
	rm -rf build build-asan build-fuzz
