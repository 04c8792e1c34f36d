#!/bin/sh
# usage: test_package.sh BUILD_DIR — builds the Debian package with CPack, installs it with
# dpkg into a scratch root (its own dpkg database: the machine's is never touched), runs the
# installed `collprof demo` from PATH, removes the package and checks that nothing is left.
set -eu
build=$1
fail() { echo "test_package: $*" >&2; exit 1; }
for t in cpack dpkg dpkg-deb; do
  command -v $t >/dev/null 2>&1 || { echo "test_package: no $t: skipped"; exit 77; }
done
[ -f "$build/CPackConfig.cmake" ] || fail "no CPackConfig.cmake in $build"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/out" >cpack.log 2>&1) ||
  { tail -n 30 "$work/cpack.log"; fail "cpack failed"; }
deb=$(ls "$work"/out/collprof_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || fail "cpack made no .deb"
dpkg-deb --field "$deb" Package | grep -qx collprof || fail "package name"
deps=$(dpkg-deb --field "$deb" Depends)
echo "test_package: $(basename "$deb"), Depends: $deps"

root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
: >"$root/var/lib/dpkg/status"
dpkg_root() {
  dpkg --root="$root" --admindir="$root/var/lib/dpkg" --log=/dev/null --force-not-root \
       --force-depends --force-script-chrootless "$@"
}
dpkg_root -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i failed"; }
[ -x "$root/usr/bin/collprof" ] || fail "no /usr/bin/collprof in the package"
[ -f "$root/usr/share/man/man1/collprof.1" ] || [ -f "$root/usr/share/man/man1/collprof.1.gz" ] ||
  fail "no man page in the package"
ls "$root"/usr/lib/*/libcollprof.so "$root"/usr/lib/libcollprof.so 2>/dev/null | grep -q . ||
  fail "no libcollprof.so in the package"

# The demo from PATH, the way a user runs it after installing.
PATH="$root/usr/bin:$PATH" collprof demo --ranks 4 >"$work/demo.out" 2>&1 ||
  { tail -n 30 "$work/demo.out"; fail "the installed collprof demo failed"; }
grep -q "stragglers" "$work/demo.out" || fail "the installed demo printed no report"

dpkg_root -r collprof >"$work/dpkg-r.log" 2>&1 || { cat "$work/dpkg-r.log"; fail "dpkg -r failed"; }
left=$(cd "$root" && find . -type f ! -path './var/lib/dpkg/*' | head -n 5)
[ -z "$left" ] || fail "files left after dpkg -r: $left"
echo "test_package: ok"
