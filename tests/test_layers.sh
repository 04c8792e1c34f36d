#!/bin/sh
# The parts depend on each other one way (docs/ARCHITECTURE.md, "Layout"): each may include
# headers of the parts listed beside it and of no other, so an arrow against the flow (the
# view reaching into the exporters, the analyzer into a report) fails here, not in review.
# It also fails on a folder of sources that is no part it knows, and on a test or benchmark
# file included OPTIONAL.
# Usage: test_layers.sh SOURCE_DIR
src=${1:?usage: test_layers.sh SOURCE_DIR}
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
allowed() {
    case $1 in
    common) echo "common" ;;
    abi) echo "abi" ;;
    trace) echo "common trace" ;;
    live) echo "common trace live" ;;
    launcher) echo "common abi launcher" ;;
    preload) echo "common abi trace live launcher preload" ;;
    emu) echo "common abi launcher emu" ;;
    analyzer) echo "common abi trace analyzer" ;;
    present) echo "common abi trace analyzer present" ;;
    exporters) echo "common abi trace analyzer present exporters" ;;
    tui) echo "common abi trace live analyzer present tui" ;;
    selftest) echo "common abi launcher selftest" ;;
    cli) echo "common abi trace live launcher analyzer present exporters tui selftest cli" ;;
    esac
}
parts="common abi trace live launcher preload emu analyzer present exporters tui selftest cli"
# a folder of sources that is no part above would escape the check: name it in the list
for d in "$src"/*/; do
    d=$(basename "$d")
    case " $parts tests bench " in *" $d "*) continue ;; esac
    if [ -n "$(find "$src/$d" -maxdepth 1 -name '*.[ch]' | head -n 1)" ]; then
        echo "test_layers: $d/ holds sources but is no part this test knows"
        echo x >>"$tmp"
    fi
done
# tests and benchmarks are registered so that a missing file stops the configure: an
# include(... OPTIONAL) would drop a deleted file's tests without a word
for f in $(find "$src" -path "$src/build*" -prune -o \( -name CMakeLists.txt -o -name '*.cmake' \) -print); do
    if grep -n '^[[:space:]]*include(.*OPTIONAL' "$f" >/dev/null; then
        echo "test_layers: ${f#$src/} includes a file OPTIONAL: a missing one must stop the configure"
        echo x >>"$tmp"
    fi
done
for part in $parts; do
    [ -d "$src/$part" ] || { echo "test_layers: no folder $part in $src"; exit 1; }
    ok=$(allowed "$part")
    # every quoted include of a file in another folder of the project
    for f in $(find "$src/$part" -name '*.[ch]'); do
        sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)\/.*/\1/p' "$f" |
            sort -u | while read -r dep; do
                case " $ok " in
                *" $dep "*) ;;
                *) echo "${f#$src/}: includes $dep/, which $part/ may not (allowed: $ok)"
                   echo x >>"$tmp" ;;
                esac
            done
    done
done
if [ -s "$tmp" ]; then
    echo "test_layers: $(wc -l <"$tmp") problem(s): includes against the flow, a part unknown, or an OPTIONAL include"
    exit 1
fi
echo "test_layers: every part includes only what lies below it"
