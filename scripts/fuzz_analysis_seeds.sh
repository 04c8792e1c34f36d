#!/bin/sh
# Writes the seeds of the analysis fuzz target (tests/fuzzdata/analysis/seed-*) from emulated
# jobs run under the shim: each seed is one job's rank files back to back, in rank order
# (tests/analyzer/fuzz_analysis.c says how the target splits them again). Small on purpose
# (--scale 0.001, one step): 8 to 33 KB each. Usage: scripts/fuzz_analysis_seeds.sh [BUILD [OUT]]
# with BUILD the normal build tree (default build/), which must hold collprof, collprof-sim,
# libcollprof.so and the emulation, and OUT where the seeds go (default tests/fuzzdata/analysis).
set -eu
build=${1:-build}
out=${2:-tests/fuzzdata/analysis}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH="$build/emu"
sim="$build/bin/collprof-sim --scale 0.001 --steps 1"

seed() { # NAME ENV... -- SIM-ARGS...
  name=$1; shift
  vars=""
  while [ "$1" != "--" ]; do vars="$vars $1"; shift; done
  shift
  # a job that hangs or mismatches exits non-zero: its trace is what we want
  env $vars "$build/bin/collprof" run --dir "$tmp/$name" -- $sim "$@" >/dev/null 2>&1 || true
  cat "$tmp/$name"/*.cptrace > "$out/seed-$name.cptraces"
  echo "$out/seed-$name.cptraces: $(ls "$tmp/$name" | wc -l) ranks, $(wc -c < "$out/seed-$name.cptraces") bytes"
}

mkdir -p "$out"
# GPU times from CUDA events (the seeds written before NCCL's profiler plugin) ...
ev=COLLPROF_GPU_TIMING=events
seed ddp-straggler $ev COLLPROF_EMU_DELAY=3:5 -- --launch 4 --pattern ddp
seed two-hosts $ev COLLPROF_EMU_HOSTS=2 COLLPROF_EMU_CLOCK_OFFSET_US=1:3000 -- --launch 4 --pattern ddp
seed tp-mismatch $ev -- --launch 4 --pattern tp --mismatch 1:3:count=7 --timeout 3
seed pp-send-recv $ev -- --launch 4 --pattern pp
seed ddp-hang $ev COLLPROF_EMU_HANG=2:3 COLLPROF_HANG_S=1 -- --launch 4 --pattern ddp --timeout 3
# collprof demo's job, smaller: mixed pattern on two emulated hosts, rank 5 late
seed mixed-demo $ev COLLPROF_EMU_DELAY=5:2 COLLPROF_EMU_HOSTS=2 -- --launch 8 --pattern mixed
# ... and from NCCL's profiler plugin (the default, auto): NCCL_OP records, DONE timing plugin,
# and a watchdog abort whose never-started rank has an NCCL_OP without DONE
seed plugin-moe-straggler COLLPROF_EMU_DELAY=1:2 -- --launch 4 --pattern moe
seed plugin-watchdog-abort COLLPROF_EMU_HANG=1:3 -- --launch 4 --pattern ddp --timeout 2
# ... and from CUPTI's kernel records: KNAME and KERNELS records, rank 1's backward kernels
# a thousand times as long (a GPU-backlog straggler with a kernel to name)
seed cupti-slow-compute COLLPROF_GPU_TIMING=cupti -- --launch 4 --pattern ddp --gpu-compute --slow-compute 1:1000:sim_bwd_gemm
# ... and a rotated trace (COLLPROF_MAX_MB at its smallest, 16 KiB segments): each rank's two
# newest segments, in order, which the target names as the writer does so the loader joins them
seed_rotated() {
  name=rotated-tp
  COLLPROF_MAX_MB=0.125 "$build/bin/collprof" run --dir "$tmp/$name" -- $sim --launch 2 \
    --pattern tp --steps 40 >/dev/null 2>&1 || true
  for r in 00000 00001; do
    ls "$tmp/$name"/rank$r-*.cptrace | tail -n 2
  done | xargs cat > "$out/seed-$name.cptraces"
  echo "$out/seed-$name.cptraces: 2 ranks, $(wc -c < "$out/seed-$name.cptraces") bytes"
}
seed_rotated
