#!/bin/sh
# usage: test_install.sh CMAKE BUILD_DIR SOURCE_DIR SANITIZED — installs into a temporary
# prefix and checks it: every file in place, the installed command finds the installed shim,
# both need glibc alone (not in a sanitizer build, which links its runtime), and every
# document a help text or the man page names is in the source tree and installed.
set -eu
cmake=$1 build=$2 src=$3 sanitized=$4
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

# NEEDED: glibc's own libraries only, so that a GPU node's image runs them as they are.
if [ "$sanitized" != ON ] && [ "$sanitized" != 1 ]; then
  for f in bin/collprof "$libdir/libcollprof.so"; do
    extra=$(readelf -d "$prefix/$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
            grep -v -E '^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|ld-linux-aarch64)\.so' || true)
    [ -z "$extra" ] || fail "$f needs more than glibc: $extra"
  done
fi

# Documents named by the help texts and the man page exist, and are installed.
named=$( { for v in "" run top selftest report view export dump demo; do
             "$prefix/bin/collprof" $v --help 2>&1 || true; done
           cat "$prefix/share/man/man1/collprof.1"; } |
         grep -o -E '(docs/)?[A-Z_]+\.md' | sed 's|^docs/||' | sort -u)
[ -n "$named" ] || fail "no document named by the help texts (the check itself is broken)"
for d in $named; do
  [ "$d" = README.md ] && dir=$src || dir=$src/docs
  [ -f "$dir/$d" ] || fail "a help text names $d, which the repository does not have"
  [ -f "$prefix/share/doc/collprof/$d" ] || fail "$d is not installed"
done
echo "test_install: ok"
