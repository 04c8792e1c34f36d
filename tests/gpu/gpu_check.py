#!/usr/bin/env python3
"""The parts of tests/gpu/run.sh that read JSON or tables: kept here so that the shell script
stays a list of runs and verdicts. Standard library only (the GPU machine installs nothing).

    gpu_check.py nccl-info [--torch] [--lib PATH]   key=value lines about PyTorch and its NCCL
    gpu_check.py trace ...                            is a trace complete and as expected
                                                      (against NCCL's own COLL log too)
    gpu_check.py same-output A B                      step and collective lines of two DDP runs
    gpu_check.py step-time FILE                       median step time of a DDP run
    gpu_check.py nccl-tests FILE                      time per call of an all_reduce_perf run
    gpu_check.py median X...                          the median of numbers

Each prints what it found on stdout; a failed check is one line on stdout and exit 1.
"""
import argparse
import collections
import ctypes
import glob
import json
import os
import re
import statistics
import subprocess
import sys

# The ops collprof-sim counts, in the order of its count line.
SIM_OPS = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AlltoAll",
           "Gather", "Scatter", "Send", "Recv")


def fail(msg):
    print(msg)
    sys.exit(1)


def nccl_file_version(path):
    """ncclGetVersion of the file itself: torch.cuda.nccl.version() may answer for another
    copy (a static one, or the first libnccl.so.2 the loader met)."""
    try:
        lib = ctypes.CDLL(path)
        v = ctypes.c_int(0)
        if lib.ncclGetVersion(ctypes.byref(v)) != 0:
            return "ncclGetVersion failed"
    except OSError as e:
        return "cannot load: %s" % e
    code = v.value
    # NCCL_VERSION_CODE is X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z since 2.9.
    major, rest = (code // 10000, code % 10000) if code >= 10000 else (code // 1000, code % 1000)
    return "%d.%d.%d (%d)" % (major, rest // 100, rest % 100, code)


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def ldd_path(path, soname):
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    m = re.search(r"^\s*%s => (\S+)" % re.escape(soname), out, re.M)
    return m.group(1) if m and m.group(1) != "not" else ""


def cmd_nccl_info(a):
    kv = collections.OrderedDict()
    if a.torch:
        try:
            import torch
        except Exception as e:  # an import error of any kind means the same: no PyTorch here
            fail("torch_error=%s" % str(e).replace("\n", " "))
        kv["torch_version"] = torch.__version__
        kv["torch_cuda"] = torch.version.cuda
        kv["cuda_available"] = int(torch.cuda.is_available())
        kv["gpus"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
        try:
            v = torch.cuda.nccl.version()
            kv["torch_nccl_version"] = ".".join(map(str, v)) if isinstance(v, tuple) else v
        except Exception as e:
            kv["torch_nccl_version"] = "unknown (%s)" % e
        tc = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so")
        kv["libtorch_cuda"] = tc if os.path.exists(tc) else ""
        # NCCL linked into libtorch_cuda.so is out of the shim's reach (README, "What the
        # shim cannot see"): that is a different verdict from a shim that fails.
        kv["nccl_needed_by_torch"] = int(bool(tc) and "libnccl.so.2" in needed(tc))
        kv["nccl_ldd"] = ldd_path(tc, "libnccl.so.2") if kv["nccl_needed_by_torch"] else ""
        pkg = ""
        try:
            import nvidia.nccl as m  # pip's nvidia-nccl-cu* wheel, a namespace package
            for p in m.__path__:
                f = os.path.join(p, "lib", "libnccl.so.2")
                if os.path.exists(f):
                    pkg = f
                    break
        except Exception:
            pass
        kv["nccl_pkg"] = pkg
        lib = kv["nccl_ldd"] or pkg
        kv["nccl_lib"] = os.path.realpath(lib) if lib else ""
    if a.lib:
        kv["nccl_lib"] = a.lib
    if kv.get("nccl_lib"):
        kv["nccl_lib_version"] = nccl_file_version(kv["nccl_lib"])
    for k, v in kv.items():
        print("%s=%s" % (k, v))


def run_cli(cli, args, out_file):
    r = subprocess.run([cli] + args, capture_output=True, text=True)
    with open(out_file, "w") as f:
        f.write(r.stdout)
    if r.returncode != 0:
        fail("collprof %s: exit %d: %s" % (" ".join(args[:2]), r.returncode,
                                            r.stderr.strip().splitlines()[-1:]))
    return r.stdout


def sim_expectations(path):
    """collprof-sim's count lines ('rank R: T nccl calls (AllReduce=.. ...)') as
    {rank: {op: n}}: what every rank issued, which its trace must hold exactly."""
    want = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"rank (\d+): (\d+) nccl calls \((.*)\)", line)
            if m:
                want[int(m.group(1))] = {k: int(v) for k, v in
                                         (kv.split("=") for kv in m.group(3).split())}
    return want


def ddp_expectations(path):
    """ddp_train.py's 'expect {json}' line: the collectives it called itself, each with an
    element count no other call uses."""
    with open(path) as f:
        for line in f:
            if line.startswith("expect "):
                return json.loads(line[len("expect "):])
    return None


# NCCL's INFO line for each collective and send/recv it accepted (src/enqueue.cc,
# ncclEnqueueCheck, under NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL; the emulation writes the same).
NCCL_COLL_LINE = re.compile(r"NCCL INFO (\w+): opCount [0-9a-f]+ sendbuff \S+ recvbuff \S+ "
                            r"count (\d+) datatype -?\d+ op -?\d+ root -?\d+ comm \S+ "
                            r"\[nranks=(\d+)\] stream \S+")


def nccl_log_calls(pattern):
    """(op, count) -> calls, over every file NCCL_DEBUG_FILE made (one per process): what NCCL
    itself was asked, independent of the shim, so the trace can be held to it exactly."""
    files = sorted(glob.glob(pattern))
    if not files:
        fail("no NCCL log matches '%s' (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL "
             "NCCL_DEBUG_FILE was set for the job)" % pattern)
    got = collections.Counter()
    for path in files:
        with open(path, errors="replace") as f:
            for line in f:
                m = NCCL_COLL_LINE.search(line)
                if m and m.group(1) in SIM_OPS:
                    got[(m.group(1), int(m.group(2)))] += 1
    return files, got


def cmd_trace(a):
    os.makedirs(a.logs, exist_ok=True)
    files = sorted(f for f in os.listdir(a.dir) if f.endswith(".cptrace")) \
        if os.path.isdir(a.dir) else []
    if not files:
        fail("no trace file in '%s'" % a.dir)
    if len(files) != a.ranks:
        fail("%d trace files in '%s', expected %d: %s" % (len(files), a.dir, a.ranks, files))
    if a.named:
        names = ["rank%05d-" % r for r in range(a.ranks)]
        if sorted(f[:10] for f in files) != names:
            fail("trace files %s are not rank00000-.. to rank%05d-.." % (files, a.ranks - 1))

    rep = json.loads(run_cli(a.cli, ["report", "--json", a.dir],
                             os.path.join(a.logs, "report.json")))
    run_cli(a.cli, ["report", a.dir], os.path.join(a.logs, "report.txt"))
    dump = [json.loads(l) for l in
            run_cli(a.cli, ["dump", "--json", a.dir], os.path.join(a.logs, "dump.jsonl"))
            .splitlines() if l.strip()]

    job = rep["job"]
    if job["ranks"] != a.ranks:
        fail("report: %d ranks, expected %d" % (job["ranks"], a.ranks))
    if job["lost_records"]:
        fail("report: %d records lost" % job["lost_records"])
    for key in ("hangs", "mismatches"):
        if rep[key]:
            fail("report: %d %s, none expected: %s" % (len(rep[key]), key, rep[key][0]))
    # A file without a launcher's rank (norank-*) takes it from the first communicator
    # (docs/ARCHITECTURE.md, PROCESS records): a report on rank -1 lost that.
    ranks = sorted(p["rank"] for p in rep.get("per_rank", []))
    if ranks != list(range(a.ranks)):
        fail("trace ranks %s, expected %s (-1: the rank was never learnt; a process with no "
             "launcher rank has no PROCESS record from its first communicator)"
             % (ranks, list(range(a.ranks))))
    unended = [p["rank"] for p in rep.get("per_rank", []) if not p.get("ended")]
    if unended:
        fail("ranks %s have no END record (the process did not exit cleanly)" % unended)

    calls = [r for r in dump if r["kind"] == "CALL" and r.get("op") in SIM_OPS]
    done = {(r["rank"], r["comm"], r["op"], r["seq"], r.get("peer"))
            for r in dump if r["kind"] == "DONE"
            and r.get("gpu_end_ns", 0) >= r.get("gpu_start_ns", 1) > 0}
    timed = [c for c in calls if "timed" in c["flags"]]
    untimed_done = [c for c in timed
                    if (c["rank"], c["comm"], c["op"], c["seq"], c.get("peer")) not in done]
    sources = collections.Counter(r.get("timing") for r in dump if r["kind"] == "DONE")
    if a.timing in ("events", "auto", "plugin"):
        # events: every call; auto: NCCL's plugin on comms of 2+ ranks, events (the comm's
        # first calls, then under COLLPROF_OVERHEAD) elsewhere; plugin: comms of 2+ ranks only
        # (a one-GPU job's comm has one rank: NCCL makes no kernel, so nothing is timed)
        if a.timing == "events" and calls and len(timed) != len(calls):
            # A call finds no free event pair when the job outruns the writer that reaps
            # them (one-rank in-place AllReduce at 3 us a call on an H200: the driver calls
            # of both threads contend): it is untimed, never waits, and the report must say
            # so. Half untimed would be a pool that never refills.
            untimed = len(calls) - len(timed)
            said = sum(row.get("timing", {}).get("host", 0) for row in rep["ops"])
            if a.ranks == 1 and said != untimed:  # one rank: an operation is a call
                fail("COLLPROF_GPU_TIMING=events: %d of %d calls not timed, but the report's "
                     "rows say %d timed on the host only" % (untimed, len(calls), said))
            if 2 * untimed > len(calls):
                fail("COLLPROF_GPU_TIMING=events, yet %d of %d calls are not timed"
                     % (untimed, len(calls)))
            print("note: %d of %d calls untimed (event pool exhausted), as the report says"
                  % (untimed, len(calls)))
        if a.timing == "auto" and calls and not timed:
            fail("COLLPROF_GPU_TIMING=auto, yet none of %d calls is timed" % len(calls))
        if untimed_done:
            c = untimed_done[0]
            fail("%d of %d timed calls have no GPU times (first: rank %d %s seq %d)"
                 % (len(untimed_done), len(timed), c["rank"], c["op"], c["seq"]))
        if a.timing == "events" and set(sources) - {"events"}:
            fail("COLLPROF_GPU_TIMING=events, yet DONE timings %s" % dict(sources))
    elif timed:
        fail("COLLPROF_GPU_TIMING=off, yet %d calls are timed" % len(timed))

    ok_calls = [c for c in calls if c["result"] == 0]
    if len(ok_calls) != len(calls):
        fail("%d calls failed in NCCL under the shim" % (len(calls) - len(ok_calls)))
    per_rank = collections.defaultdict(collections.Counter)
    for c in calls:
        per_rank[c["rank"]][c["op"]] += 1
    # The report's rows count operations in "ops" ("calls" are the ranks' calls in them,
    # analyzer.h): the dump's calls of one collective share its communicator and sequence;
    # a send/recv pair is one Send.
    in_report = collections.Counter()
    for row in rep["ops"]:
        in_report[row["op"]] += row["ops"]
    in_dump = collections.Counter(op for op, _, _ in
                                  {(c["op"], c["comm"], c["seq"]) for c in calls
                                   if c["op"] not in ("Send", "Recv")})
    in_dump["Send"] = sum(1 for c in calls if c["op"] == "Send")
    if +in_report != +in_dump:
        fail("report rows %s differ from the dump's operations %s"
             % (dict(in_report), dict(+in_dump)))

    figures = []
    logged = None
    if a.nccl_log:
        files, logged = nccl_log_calls(a.nccl_log)
        traced = collections.Counter((c["op"], c.get("count")) for c in calls)
        if traced != logged:
            diff = sorted(set(traced) | set(logged), key=str)
            diff = ["%s count %s: trace %d, NCCL %d" % (op, n, traced[(op, n)], logged[(op, n)])
                    for op, n in diff if traced[(op, n)] != logged[(op, n)]]
            fail("the trace differs from NCCL's own log (%d file(s)): %s%s"
                 % (len(files), "; ".join(diff[:4]), " ..." if len(diff) > 4 else ""))
        figures.append("the %d calls NCCL logged, each in the trace" % sum(logged.values()))
    if a.sim_counts:
        want = sim_expectations(a.sim_counts)
        if sorted(want) != list(range(a.ranks)):
            fail("count lines for ranks %s, expected 0..%d" % (sorted(want), a.ranks - 1))
        for rank, ops in want.items():
            got = {op: per_rank[rank][op] for op in SIM_OPS}
            if got != ops:
                diff = ["%s %d (job: %d)" % (op, got[op], ops[op]) for op in SIM_OPS
                        if got[op] != ops[op]]
                fail("rank %d: trace holds %s" % (rank, ", ".join(diff)))
        figures.append("%d calls as collprof-sim counted" % sum(sum(v.values())
                                                                for v in want.values()))
    if a.ddp_expect:
        figures += check_ddp(a, ddp_expectations(a.ddp_expect), calls, logged)
    for want in a.min_calls or []:
        op, count, n = want.split(":")
        got = sum(1 for c in calls if c["op"] == op and c.get("count") == int(count))
        if got < int(n):
            fail("%d %s calls of count %s in the trace, expected at least %s"
                 % (got, op, count, n))
        figures.append("%d %s of count %s" % (got, op, count))

    if a.perfetto:
        run_cli(a.cli, ["export", "--perfetto", "-o", a.perfetto, a.dir],
                os.path.join(a.logs, "export.out"))
        try:
            with open(a.perfetto) as f:
                events = json.load(f).get("traceEvents", [])
        except (OSError, ValueError) as e:
            fail("perfetto export '%s' is not JSON: %s" % (a.perfetto, e))
        if not events:
            fail("perfetto export '%s' has no traceEvents" % a.perfetto)
        figures.append("perfetto %d events" % len(events))

    print("%d rank file(s), %d records, none lost, %d NCCL calls (%d GPU-timed, all with "
          "GPU times), every rank ended; %s" % (len(files), job["records"], len(calls),
                                               len(timed), "; ".join(figures)))


def check_ddp(a, want, calls, logged):
    if want is None:
        fail("no 'expect' line in '%s'" % a.ddp_expect)
    by = collections.Counter((c["rank"], c["op"], c.get("count")) for c in calls)
    figures = []
    for entry in want["calls"]:
        # Any one of the alternatives must hold on every rank (all_to_all is ncclAlltoAll
        # from NCCL 2.28 on in recent PyTorch, grouped send/recv before).
        ok = any(all(by[(r, op, cnt)] == n for r in range(a.ranks) for op, cnt, n in alt)
                 for alt in entry["any_of"])
        # PyTorch may answer a call without NCCL (a one-rank reduce_scatter is a copy): when
        # NCCL's own log has none of it either, the trace holding none is right, and said.
        if not ok and logged is not None and \
                not any(logged[(op, cnt)] for alt in entry["any_of"] for op, cnt, _ in alt):
            figures.append("%s made no NCCL call (none in NCCL's log either)" % entry["name"])
            continue
        if not ok:
            seen = {op: by[(0, op, cnt)] for alt in entry["any_of"] for op, cnt, _ in alt}
            fail("%s: rank 0's trace holds %s calls, expected one of %s"
                 % (entry["name"], seen, entry["any_of"]))
    for op, cnt, n in want.get("captured", []):
        got = sum(1 for c in calls if c["op"] == op and c.get("count") == cnt
                  and "captured" in c["flags"])
        if got != n * a.ranks:
            fail("%d %s of count %d flagged captured, expected %d" % (got, op, cnt, n * a.ranks))
    mine = sum(n for e in want["calls"] for alt in e["any_of"][:1] for op, _, n in alt
               if op == "AllReduce")
    total = sum(1 for c in calls if c["op"] == "AllReduce" and c["rank"] == 0)
    figures.append("rank 0: %d AllReduce calls, %d made by ddp_train.py itself, %d by DDP "
                   "(gradient buckets), barrier and the process group"
                   % (total, mine, total - mine))
    figures.append("%d collectives as ddp_train.py called them" % len(want["calls"]))
    return figures


def lines_of(path, prefixes):
    with open(path) as f:
        return [l.rstrip("\n") for l in f if l.startswith(prefixes)]


def cmd_same_output(a):
    keep = ("step ", "coll ", "expect ", "note ")
    x, y = lines_of(a.a, keep), lines_of(a.b, keep)
    steps = sum(1 for l in x if l.startswith("step "))
    if steps == 0:
        fail("no 'step N loss X' line in '%s'" % a.a)
    for i, (p, q) in enumerate(zip(x, y)):
        if p != q:
            fail("line %d differs: '%s' vs '%s'" % (i + 1, p, q))
    if len(x) != len(y):
        fail("%d lines vs %d" % (len(x), len(y)))
    print("%d step lines and %d collective lines identical" % (steps, len(x) - steps))


def cmd_step_time(a):
    t = [float(l.split()[2]) for l in lines_of(a.file, ("steptime ",))]
    # The first steps pay for cuBLAS handles, DDP's bucket rebuild and NCCL's first launch.
    t = t[a.skip:]
    if not t:
        fail("no 'steptime' lines past the first %d in '%s'" % (a.skip, a.file))
    print("%.6f" % statistics.median(t))


def cmd_nccl_tests(a):
    """The 8-byte row of all_reduce_perf: the last eight columns are out-of-place time,
    algbw, busbw, #wrong, then the same in place (nccl-tests 2.x; the leading columns
    changed between versions)."""
    rows = []
    with open(a.file) as f:
        for line in f:
            cols = line.split()
            if cols and not line.lstrip().startswith("#") and cols[0] == "8" and len(cols) >= 10:
                rows.append(cols)
    if len(rows) != 1:
        fail("%d rows of size 8 in '%s', expected 1" % (len(rows), a.file))
    c = rows[0][-8:]
    for wrong in (c[3], c[7]):
        if wrong not in ("0", "N/A"):
            fail("#wrong %s in '%s'" % (wrong, a.file))
    print("%s %s" % (c[0], c[4]))


def cmd_median(a):
    print("%.2f" % statistics.median(a.values))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("nccl-info")
    p.add_argument("--torch", action="store_true")
    p.add_argument("--lib")
    p = sub.add_parser("trace")
    p.add_argument("--cli", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--logs", required=True)
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--named", action="store_true", help="files are rankNNNNN-*, not norank")
    p.add_argument("--timing", choices=("events", "off", "auto", "plugin"), default="auto")
    p.add_argument("--sim-counts", help="collprof-sim's stdout: its count lines")
    p.add_argument("--ddp-expect", help="ddp_train.py's stdout: its expect line")
    p.add_argument("--min-calls", action="append",
                   help="OP:COUNT:N: at least N calls of OP with COUNT (repeatable)")
    p.add_argument("--nccl-log", help="glob of NCCL_DEBUG_FILE logs (NCCL_DEBUG_SUBSYS=COLL): "
                   "the trace must hold exactly the calls NCCL logged")
    p.add_argument("--perfetto", help="export the trace to this file and read it back")
    p = sub.add_parser("same-output")
    p.add_argument("a")
    p.add_argument("b")
    p = sub.add_parser("step-time")
    p.add_argument("file")
    p.add_argument("--skip", type=int, default=5)
    p = sub.add_parser("nccl-tests")
    p.add_argument("file")
    p = sub.add_parser("median")
    p.add_argument("values", type=float, nargs="+")
    a = ap.parse_args()
    {"nccl-info": cmd_nccl_info, "trace": cmd_trace, "same-output": cmd_same_output,
     "step-time": cmd_step_time, "nccl-tests": cmd_nccl_tests, "median": cmd_median}[a.cmd](a)


if __name__ == "__main__":
    main()
