#!/bin/sh
# usage: test_install.sh CMAKE BUILD_DIR — installs into a temporary prefix and checks it.
set -eu
cmake=$1 build=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
"$cmake" --install "$build" --prefix "$prefix" >/dev/null
libdir=$(cd "$prefix" && ls -d lib lib64 lib/* 2>/dev/null | while read d; do
  [ -f "$prefix/$d/libcollprof.so" ] && echo "$d" && break; done)
fail() { echo "test_install: $*" >&2; exit 1; }
[ -n "$libdir" ] || fail "no libcollprof.so under $prefix"
for f in bin/collprof bin/collprof-sim share/man/man1/collprof.1 "$libdir/pkgconfig/collprof.pc" \
         "$libdir/collprof/emu/libnccl.so.2" "$libdir/collprof/emu/libcuda.so.1" \
         "$libdir/collprof/emu/libnvidia-ml.so.1" "$libdir/collprof/emu/libcollprof-emuhost.so"; do
  [ -e "$prefix/$f" ] || fail "missing $f"
done
"$prefix/bin/collprof" --version | grep -q '^collprof ' || fail "installed collprof --version"
# The installed cli finds the installed shim (../lib beside bin, or its libdir). In the
# sanitizer build that shim is instrumented: sh must tolerate a late ASan runtime.
pre=$(ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 \
      "$prefix/bin/collprof" run --dir "$prefix/trace" -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
case "$pre" in
  "$prefix/"*libcollprof.so*) ;;
  *) fail "collprof run set LD_PRELOAD='$pre'" ;;
esac
grep -q "^preload=" "$prefix/$libdir/pkgconfig/collprof.pc" || fail "pkg-config file"
echo "test_install: ok"
