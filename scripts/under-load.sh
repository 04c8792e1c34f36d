#!/bin/sh
# usage: scripts/under-load.sh [RUNS [TARGET]]   (default: 3 test-fast)
# Runs `make TARGET` RUNS times in a row with two busy loops beside it (issue 17: the suite
# must hold on a loaded machine), and says how each run ended. Exit 0 when all passed.
set -u
runs=${1:-3} target=${2:-test-fast}
busy() { while :; do :; done; }
busy & b1=$!
busy & b2=$!
trap 'kill $b1 $b2 2>/dev/null' EXIT INT TERM
failed=0
i=1
while [ "$i" -le "$runs" ]; do
  start=$(date +%s)
  if make "$target" >"under-load-$i.log" 2>&1; then r=passed; else r=FAILED; failed=$((failed + 1)); fi
  echo "run $i of $runs: $r in $(( $(date +%s) - start )) s (log: under-load-$i.log)"
  [ "$r" = FAILED ] && grep -E "^\s+[0-9]+ - |tests failed" "under-load-$i.log" | head -n 10
  i=$((i + 1))
done
[ "$failed" -eq 0 ]
