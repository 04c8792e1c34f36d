#!/bin/sh
# usage: leftovers.sh snap FILE | check FILE
# The suite must leave nothing in /tmp or /dev/shm (issue 17): `snap` lists what is there
# before it runs, `check` names what it left that has a name our tests and the emulation use
# (others' files are not ours to judge) and fails.
set -eu
list() {
  for d in /tmp /dev/shm; do
    ls -A "$d" 2>/dev/null | sed "s|^|$d/|"
  done | grep -E '^/(tmp|dev/shm)/(collprof|cpemu|cp-|cps_|cpprobe|shim-|test_|tmp\.)' | sort || true
}
case "${1:-}" in
  snap) list >"$2" ;;
  check)
    new=$(list | comm -13 "$2" -)
    rm -f "$2"
    if [ -n "$new" ]; then
      echo "the tests left these behind:" >&2
      echo "$new" | head -n 20 >&2
      exit 1
    fi ;;
  *) echo "usage: leftovers.sh snap FILE | check FILE" >&2; exit 2 ;;
esac
