#!/bin/sh
# The parts depend on each other one way (docs/ARCHITECTURE.md, "Layout"): each may include
# headers of the parts listed beside it and of no other, so an arrow against the flow (the
# view reaching into the exporters, the analyzer into a report) fails here, not in review.
# Usage: test_layers.sh SOURCE_DIR
src=${1:?usage: test_layers.sh SOURCE_DIR}
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
allowed() {
    case $1 in
    common) echo "common" ;;
    preload) echo "common preload" ;;
    emu) echo "common emu" ;;
    analyzer) echo "common analyzer" ;;
    present) echo "common analyzer present" ;;
    exporters) echo "common analyzer present exporters" ;;
    tui) echo "common analyzer present tui" ;;
    # selftest reads the NVML ABI from emu/nvml until that ABI moves beside the others
    selftest) echo "common emu selftest" ;;
    cli) echo "common analyzer present exporters tui selftest cli" ;;
    esac
}
for part in common preload emu analyzer present exporters tui selftest cli; do
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
    echo "test_layers: $(wc -l <"$tmp") include(s) against the flow"
    exit 1
fi
echo "test_layers: every part includes only what lies below it"
