#!/usr/bin/env python3
"""One way inside each part: no two files of a library call each other, even through others.

Reads the object files of the build (nm): an edge A -> B when A's object uses a symbol B's
defines; a cycle among a library's files fails, naming its edges. test_layers.sh holds the
parts to one way between them by their #include lines; this holds the files inside a part to
it by what they call, which an include cannot show (every file of a part includes its one
internal header).

Usage: test_file_cycles.py SOURCE_DIR BUILD_DIR [NM]
"""
import os
import subprocess
import sys

# Libraries whose files still call each other, and why they may (docs/ARCHITECTURE.md,
# "One way inside a part"). Anything not named here must be one way.
KNOWN = {
    # The shim starts lazily: a wrapper's first record starts the process (lifecycle.c),
    # which starts the writer and the other modules, which read the settings and the
    # thread's state back from lifecycle.c; the writer, the GPU poller and the plugin feed
    # each other on the writer thread.
    "collprof_shim",
    # The emulated driver's contexts, streams, events and memory wait on each other as the
    # real driver's do; the emulated NCCL's comms, groups and issue queue likewise; the sim
    # is one program whose rank loop, watchdog and patterns call into each other.
    "emu_cuda",
    "emu_nccl_objs",
    "emu_nccl",
    "collprof-sim",
}


def objects(src, build):
    """{target: {file stem: object path}} for the product's libraries, stale objects left out."""
    out = {}
    for root, dirs, files in os.walk(build):
        rel = os.path.relpath(root, build)
        parts = rel.split(os.sep)
        if parts[0] in ("tests", "bench", "Testing") or "CompilerIdC" in rel:
            continue
        if len(parts) < 2 or parts[-2] != "CMakeFiles" or not parts[-1].endswith(".dir"):
            continue
        target = parts[-1][:-4]
        part_dir = os.path.join(src, *parts[:-2])
        for f in files:
            if not f.endswith(".c.o"):
                continue
            source = os.path.join(part_dir, f[:-2])
            if os.path.exists(source):  # an object whose source is gone is a stale one
                out.setdefault(target, {})[f[:-4]] = os.path.join(root, f)
    return out


def symbols(nm, path):
    defined, used = set(), set()
    text = subprocess.run([nm, path], capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "U":
            used.add(fields[1])
        elif len(fields) == 3 and fields[1] in "TDBRVW":
            defined.add(fields[2])
    return defined, used


def cycles(graph):
    """The strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[-1])
        return 2
    src, build = sys.argv[1], sys.argv[2]
    nm = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else "nm"
    libs = objects(src, build)
    if not libs:
        print(f"test_file_cycles: no objects under {build}: build first")
        return 1
    bad = 0
    for target in sorted(libs):
        files = libs[target]
        defs, uses = {}, {}
        for stem, path in files.items():
            d, u = symbols(nm, path)
            uses[stem] = u
            for s in d:
                defs.setdefault(s, stem)
        graph = {a: set() for a in files}
        why = {}
        for a, us in uses.items():
            for s in us:
                b = defs.get(s)
                if b and b != a:
                    graph[a].add(b)
                    why.setdefault((a, b), s)
        for comp in cycles(graph):
            if target in KNOWN:
                continue
            bad += 1
            print(f"test_file_cycles: {target}: {' '.join(comp)} call each other:")
            for a in comp:
                for b in sorted(graph[a]):
                    if b in comp:
                        print(f"    {a} -> {b} ({why[(a, b)]})")
    if bad:
        print(f"test_file_cycles: {bad} cycle(s) among a part's files (KNOWN lists the allowed)")
        return 1
    print(f"test_file_cycles: the files of {len(libs) - len(KNOWN & set(libs))} libraries "
          f"call one way ({len(KNOWN & set(libs))} known exceptions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
