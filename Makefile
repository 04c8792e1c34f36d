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
# Our own builds treat warnings as errors (a plain `cmake` build does not).
OUR_FLAGS = -DCOLLPROF_WERROR=ON
# make's "Entering directory" lines are noise around CMake's own progress.
MAKEFLAGS += --no-print-directory
# What `collprof demo` runs: the command, the shim, the emulated job and the emulation.
DEMO_TARGETS = collprof collprof_shim collprof-sim emu_cuda emu_nvml emu_host emu_nccl

.PHONY: all deps configure build demo test test-fast test-asan fuzz bench clean install package \
	release-builds

all: build

deps:
	@sh scripts/deps.sh

configure: deps
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo $(OUR_FLAGS) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build build -j $(JOBS)

# Builds only what the demo runs, its compiler output in build/demo-build.log (shown when it
# fails), then runs it.
demo: configure
	@echo "collprof: building collprof, libcollprof.so and the emulation (log: build/demo-build.log)..."
	@start=$$(date +%s); \
	  cmake --build build -j $(JOBS) --target $(DEMO_TARGETS) >build/demo-build.log 2>&1 \
	    || { tail -n 40 build/demo-build.log; echo "collprof: the build failed (build/demo-build.log)"; exit 1; }; \
	  echo "collprof: built in $$(( $$(date +%s) - start )) s; running the demo"
	@./build/bin/collprof demo

# Every test: the suite, the suite again under ASan+UBSan, then the fuzz runs (trace reader,
# NCCL log reader, the whole analysis).
test: deps test-fast test-asan fuzz

# bench_analyzer too: tests/gpu/run.sh's analyzer step runs it (test_gpu_run_emulated).
test-fast: build
	@cmake --build build -j $(JOBS) --target bench_analyzer
	@sh scripts/leftovers.sh snap build/leftovers.before
	@cd build && ctest --output-on-failure -j $(JOBS)
	@sh scripts/leftovers.sh check build/leftovers.before

test-asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCOLLPROF_SANITIZE=ON $(OUR_FLAGS) $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cmake --build build-asan -j $(JOBS) --target bench_analyzer
	@sh scripts/leftovers.sh snap build-asan/leftovers.before
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)
	@sh scripts/leftovers.sh check build-asan/leftovers.before

fuzz: deps
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLLPROF_FUZZ=ON $(OUR_FLAGS) $(CMAKE_FLAGS) >/dev/null
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

# PREFIX (default /usr/local) moves the install, DESTDIR stages it (packagers); a real install
# refreshes the loader's cache, so that LD_PRELOAD=libcollprof.so finds the shim there.
install: build
	@cmake --install build $(if $(PREFIX),--prefix "$(PREFIX)")
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi

# A Debian package of collprof (CPack): build/collprof_<version>_<arch>.deb.
package: build
	@cd build && cpack -G DEB >/dev/null && ls -1 "$$PWD"/collprof_*.deb

# What users and packagers build: Release with gcc and with clang, warnings as errors (CI).
release-builds: deps
	@for cc in gcc clang; do \
	  echo "release build with $$cc (log: build-release-$$cc.log)"; \
	  CC=$$cc cmake -S . -B build-release-$$cc -DCMAKE_BUILD_TYPE=Release $(OUR_FLAGS) \
	    $(CMAKE_FLAGS) >build-release-$$cc.log 2>&1 && \
	  cmake --build build-release-$$cc -j $(JOBS) >>build-release-$$cc.log 2>&1 \
	    || { grep -E "error|warning" build-release-$$cc.log | head -n 20; exit 1; }; \
	done

clean:
	rm -rf build build-asan build-fuzz build-release-gcc build-release-clang build-release-*.log
