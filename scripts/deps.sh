#!/bin/sh
# Installs the Debian packages collprof builds and tests with, if any is missing.
# Used by `make deps` (and so by `make demo`, `make test`, `make bench`).
set -eu
# libunwind8: the run-time library the shim opens when present (no headers needed).
# dpkg-dev and file: CPack works out the .deb's Depends with dpkg-shlibdeps (make package).
# openmpi-bin, slurm-wlm and munge: the real launchers tests/cli/test_run_launchers.c runs
# jobs under (mpirun; srun on a one-node Slurm of the test's own, authenticated by munge).
# prometheus: for its promtool, which checks the Prometheus text collprof writes (the
# package's service is not started: the tests only run promtool).
# protobuf-compiler: its protoc decodes the Perfetto protobuf export in test_perfetto_proto,
# a decoder independent of ours (the build needs none: the export's encoder is our own).
PKGS="cmake make gcc clang pkg-config libunwind8 libncurses-dev libjson-c-dev \
libcmocka-dev libxxhash-dev tmux python3 valgrind openmpi-bin slurm-wlm munge dpkg-dev file prometheus \
protobuf-compiler"

missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    echo "collprof: missing Debian packages:$missing" >&2
    echo "collprof: run 'sudo make deps' (or: sudo apt-get install$missing), then try again" >&2
    exit 1
  fi
else
  SUDO=
fi
echo "collprof: installing$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
