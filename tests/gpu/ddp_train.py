"""A small deterministic DDP job for tests/gpu/run.sh, started by torchrun (one process per GPU).

Run without collprof and under it, its output must not change: every step's loss is printed
in full precision (`step N loss X`, rank 0), so a profiler that disturbed a stream, a buffer
or the order of work would show as a different line. Step times go on separate `steptime`
lines, which run.sh compares but does not require to be equal.

After training it calls every collective PyTorch offers once, each with an element count that
no other call uses (1001...1008), checks each result, and prints one `coll` line per result
and one `expect {json}` line, so that run.sh can find each call in the trace. send/recv needs
a peer: with one rank it is skipped (a `note` line says so). The CUDA-graph all_reduce is
recorded at capture only (its replays do not call NCCL), with the shim's `captured` flag.

Stragglers on purpose (run.sh's straggler step): --slow-rank R --slow-matmul N makes rank R's
GPU run N x N matmuls before each backward pass (its host keeps pace: GPU backlog);
--sleep-rank R --sleep-ms M makes rank R's host sleep M ms before each backward pass.
"""
import argparse
import json
import os
import time
import warnings

# cuBLAS picks its reduction order by workspace unless this is set before it starts, and
# use_deterministic_algorithms refuses to run without it.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402  (after the variable above)
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402


def say(rank, line):
    # Only rank 0 prints: torchrun's workers share one stdout and lines would interleave.
    if rank == 0:
        print(line, flush=True)


def hold(args, rank, dev, junk):
    """The straggler the arguments ask for, before a backward pass."""
    if rank == args.slow_rank and junk is not None:
        for _ in range(8):
            junk = junk @ junk
            junk = junk / junk.norm()
    if rank == args.sleep_rank and args.sleep_ms > 0:
        time.sleep(args.sleep_ms / 1e3)
    return junk


def train(args, rank, dev):
    torch.manual_seed(1234)
    torch.cuda.manual_seed_all(1234)
    w = args.width
    model = torch.nn.Sequential(
        torch.nn.Linear(w, w), torch.nn.ReLU(),
        torch.nn.Linear(w, w), torch.nn.ReLU(),
        torch.nn.Linear(w, w), torch.nn.ReLU(),
        torch.nn.Linear(w, 16)).to(dev)
    ddp = DDP(model, device_ids=[dev.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    # Inputs come from a CPU generator: the same numbers whatever the GPU or its RNG state.
    gen = torch.Generator().manual_seed(4321 + rank)
    xs = torch.randn(args.steps, args.batch, w, generator=gen)
    ys = torch.randn(args.steps, args.batch, 16, generator=gen)
    junk = None
    if args.slow_matmul > 0 and rank == args.slow_rank:
        junk = torch.randn(args.slow_matmul, args.slow_matmul, generator=gen).to(dev)
    for step in range(args.steps):
        x, y = xs[step].to(dev), ys[step].to(dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        junk = hold(args, rank, dev, junk)
        loss.backward()
        opt.step()
        value = loss.item()  # synchronises: the step's work is done
        dt = time.perf_counter() - t0
        say(rank, "step %d loss %r" % (step, value))
        say(rank, "steptime %d %.6f" % (step, dt))


def collectives(rank, world, dev):
    f32 = dict(dtype=torch.float32, device=dev)
    expect = []

    def check(name, ok, ops):
        if not bool(ok):
            raise SystemExit("ddp_train.py: %s gave a wrong result on rank %d" % (name, rank))
        say(rank, "coll %s ok" % name)
        expect.append({"name": name, "any_of": ops})

    t = torch.full((1001,), float(rank + 1), **f32)
    dist.all_reduce(t)
    check("all_reduce", torch.all(t == world * (world + 1) / 2), [[["AllReduce", 1001, 1]]])

    t = torch.full((1002,), float(rank + 7), **f32)
    dist.broadcast(t, src=0)
    check("broadcast", torch.all(t == 7), [[["Broadcast", 1002, 1]]])

    t = torch.full((1003,), float(rank + 1), **f32)
    dist.reduce(t, dst=0)
    check("reduce", rank != 0 or torch.all(t == world * (world + 1) / 2),
          [[["Reduce", 1003, 1]]])

    inp = torch.full((1004,), float(rank), **f32)
    out = torch.empty(1004 * world, **f32)
    dist.all_gather_into_tensor(out, inp)
    want = torch.arange(world, **f32).repeat_interleave(1004)
    check("all_gather", torch.equal(out, want), [[["AllGather", 1004, 1]]])

    inp = torch.arange(1005 * world, **f32)
    out = torch.empty(1005, **f32)
    dist.reduce_scatter_tensor(out, inp)
    check("reduce_scatter", torch.equal(out, world * inp[rank * 1005:(rank + 1) * 1005]),
          [[["ReduceScatter", 1005, 1]]])

    inp = torch.full((1006 * world,), float(rank), **f32)
    out = torch.empty(1006 * world, **f32)
    dist.all_to_all_single(out, inp)
    # ncclAlltoAll where PyTorch uses it (NCCL 2.28 on), else one send and one receive per
    # peer in a group, this rank included.
    check("all_to_all", torch.equal(out, torch.arange(world, **f32).repeat_interleave(1006)),
          [[["AlltoAll", 1006, 1]], [["Send", 1006, world], ["Recv", 1006, world]]])

    if world > 1:
        t = torch.full((1008,), float(rank), **f32)
        r = torch.empty(1008, **f32)
        ops = [dist.P2POp(dist.isend, t, (rank + 1) % world),
               dist.P2POp(dist.irecv, r, (rank - 1) % world)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        check("send_recv", torch.all(r == (rank - 1) % world),
              [[["Send", 1008, 1], ["Recv", 1008, 1]]])
    else:
        say(rank, "note send_recv skipped: one rank has no peer (PyTorch refuses a send to self)")

    # Its tensor's size and type are PyTorch's own choice: not counted, only called.
    dist.barrier()
    say(rank, "coll barrier ok")

    # The graph's all_reduce: one eager call on a side stream first (capture must not be the
    # communicator's first use), then the capture, then three replays. thread_local: the
    # process group's watchdog thread queries events while this thread captures.
    t = torch.ones(1007, **f32)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        dist.all_reduce(t)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                dist.all_reduce(t)
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
    except RuntimeError as e:
        # PyTorch's or NCCL's limit, not the profiler's: the run without collprof says so
        # too, and run.sh compares the two runs' lines.
        say(rank, "note graph_all_reduce failed: %s" % str(e).splitlines()[0])
        return {"calls": expect, "captured": [], "world": world}
    check("graph_all_reduce", torch.all(t == float(world) ** 4), [[["AllReduce", 1007, 2]]])
    # PyTorch 2.11 on one rank (an H200, 2026-11-27) ran the all_reduce outside the capture
    # and warned of an empty graph: NCCL was called, on no capturing stream. On one rank the
    # replays change nothing, so only the warning tells.
    if any("CUDA Graph is empty" in str(w.message) for w in caught):
        say(rank, "note graph_all_reduce: PyTorch captured an empty graph (its all_reduce ran "
            "outside the capture)")
        return {"calls": expect, "captured": [], "world": world}
    return {"calls": expect, "captured": [["AllReduce", 1007, 1]], "world": world}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-matmul", type=int, default=0)
    ap.add_argument("--sleep-rank", type=int, default=-1)
    ap.add_argument("--sleep-ms", type=float, default=0)
    args = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(dev)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    dist.init_process_group("nccl")
    say(rank, "world %d" % world)
    train(args, rank, dev)
    expect = collectives(rank, world, dev)
    say(rank, "expect " + json.dumps(expect, sort_keys=True))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
