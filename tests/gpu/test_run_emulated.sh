#!/usr/bin/env bash
# usage: test_run_emulated.sh BUILD_DIR PYTHON [ASAN_RUNTIME]
# tests/gpu/run.sh in its emulated mode against BUILD_DIR (no build of its own).
set -u
build=$1 python=$2 asan=${3:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_run_emulated: $*" >&2; exit 1; }
# The live stats blocks go to the test's own folder, not the machine's /dev/shm.
run() {
  env CP_GPU_EMULATED=1 CP_GPU_BUILD=0 "BUILD_DIR=$build" "PYTHON=$python" \
    "CP_GPU_ASAN_RUNTIME=$asan" "COLLPROF_LIVE_DIR=$tmp" "$@" bash "$here/run.sh"
}

run "OUT=$tmp/all" > "$tmp/all.log" 2>&1
rc=$?
summary=$tmp/all/summary.txt
if [ "$rc" != 0 ]; then
  cat "$tmp/all.log"
  fail "run.sh exited $rc in emulated mode"
fi
want="build env selftest cupti"
for p in ddp fsdp tp pp moe mixed; do want="$want sim.$p sim.$p.shim"; done
for step in $want; do
  grep -q "^PASS  $step " "$summary" || { cat "$tmp/all.log"; fail "step $step did not PASS"; }
done
grep -q '^SKIP  ddp .*PyTorch' "$summary" || fail "the PyTorch step did not SKIP with its reason"
grep -q '^SKIP  nccltests .*GPU' "$summary" || fail "the nccl-tests step did not SKIP with its reason"
grep -q '^SKIP  straggler .*GPU' "$summary" || fail "the straggler step did not SKIP with its reason"
# The analysis' bench, when this build has it (make test builds it): its figures in the line.
if [ -x "$build/bin/bench_analyzer" ]; then
  grep -Eq '^PASS  analyzer .* [0-9.]+e6 records/s wall, [0-9.]+e6 a CPU second.*page faults' "$summary" ||
    { cat "$tmp/all.log"; fail "the analyzer step did not PASS with its figures"; }
else
  grep -q '^SKIP  analyzer .*no .*bench_analyzer' "$summary" || fail "the analyzer step did not SKIP with its reason"
fi
lines=$(wc -l < "$summary")
[ "$lines" = 20 ] || { cat "$summary"; fail "$lines verdict lines, expected 20"; }

# The trace is held to NCCL's own COLL log: one call more in the log than in the trace fails.
log=$(ls "$tmp"/all/sim/tp/shim.nccl.*.log 2> /dev/null | head -n 1)
[ -n "$log" ] || fail "sim.tp.shim left no NCCL log (NCCL_DEBUG_FILE)"
cp "$log" "$tmp/extra.nccl.log"
grep -m1 'NCCL INFO AllReduce: opCount' "$log" >> "$tmp/extra.nccl.log"
if out=$("$python" "$here/gpu_check.py" trace --cli "$build/bin/collprof" --dir "$tmp/all/sim/tp/trace" \
           --logs "$tmp/extra-check" --ranks 1 --nccl-log "$tmp/extra.nccl.log"); then
  fail "a trace one call short of NCCL's log passed: $out"
fi
case $out in *"differs from NCCL's own log"*) ;; *) fail "no NCCL-log verdict: $out" ;; esac

# CUPTI on four emulated ranks, one of them slower on its GPU: the report names it.
run "OUT=$tmp/cupti" CP_GPU_STEPS="build env cupti" SIM_RANKS=4 > "$tmp/cupti.log" 2>&1 ||
  { cat "$tmp/cupti.log"; fail "run.sh's cupti step failed on four ranks"; }
grep -q '^PASS  cupti.straggler ' "$tmp/cupti/summary.txt" ||
  { cat "$tmp/cupti.log"; fail "cupti.straggler did not PASS"; }

# A shim that records nothing (COLLPROF_ENABLE=0 makes it a pass-through): the job still
# passes, its trace check must not.
run "OUT=$tmp/off" COLLPROF_ENABLE=0 CP_GPU_STEPS="build sim" SIM_PATTERNS=ddp \
  > "$tmp/off.log" 2>&1
rc=$?
[ "$rc" = 1 ] || { cat "$tmp/off.log"; fail "run.sh exited $rc with a shim recording nothing"; }
grep -q '^PASS  sim.ddp ' "$tmp/off/summary.txt" || fail "the job alone should still PASS"
grep -q '^FAIL  sim.ddp.shim .*no trace file' "$tmp/off/summary.txt" ||
  { cat "$tmp/off.log"; fail "no FAIL line for the missing trace"; }
echo "test_run_emulated: ok ($(grep -c '^PASS' "$summary") PASS, $(grep -c '^SKIP' "$summary") SKIP)"
