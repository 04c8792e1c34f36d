#!/bin/sh
# Instructions per NCCL call under the shim (valgrind's count, free of timer noise):
# bench_shim's child loop run bare and with the shim enabled; prints the difference.
#   usage: bench/shim_callgrind.sh [BUILD_DIR]   (default build)
set -eu
B=${1:-build}
N=50000 # below bench_shim's 100000-call threshold, where the child repeats its loop 5 times
count() { # [VAR=VALUE ...] PROGRAM ARGS: the variables reach the client, not a wrapper
    while [ "${1#*=}" != "$1" ]; do export "$1"; shift; done
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 |
        sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
}
D=$(mktemp -d)
bare=$(count PATH="$PATH" "$B/bin/bench_shim" --child $N)
bare0=$(count PATH="$PATH" "$B/bin/bench_shim" --child 0)
on=$(count LD_PRELOAD="$B/lib/libcollprof.so" COLLPROF_DIR="$D" COLLPROF_GPU_TIMING=off \
     COLLPROF_BUFFER_MB=256 "$B/bin/bench_shim" --child $N)
on0=$(count LD_PRELOAD="$B/lib/libcollprof.so" COLLPROF_DIR="$D/0" COLLPROF_GPU_TIMING=off \
      "$B/bin/bench_shim" --child 0)
rm -rf "$D"
echo "shim.bare_instructions_per_call: $(( (bare - bare0) / N )) instructions"
echo "shim.enabled_instructions_per_call: $(( (on - on0) / N )) instructions"
echo "shim.overhead_instructions_per_call: $(( (on - on0 - bare + bare0) / N )) instructions"
