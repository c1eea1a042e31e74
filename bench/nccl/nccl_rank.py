#!/usr/bin/env python3
"""One rank of an NCCL job through PyTorch (torch.distributed), for
bench/nccl/run.sh (`make bench-nccl`) and tests/gpu/nccl_check.sh.

  nccl_rank.py --rank R --world N --port P --mode bench|check|probe --out FILE [...]

Every rank uses cuda:0 (two ranks on one GPU need their own NCCL_HOSTID and
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 so that NCCL goes through the
network). Rank 0 appends JSON lines to --out.

bench: nccl-tests' definitions. all_reduce (in place) of SIZE bytes;
  all_gather of SIZE bytes in all (SIZE/N per rank). time = median over
  --repeats timed loops of `iters` back-to-back operations, measured with
  CUDA events on rank 0 after a barrier; algbw = SIZE / time;
  busbw = algbw * 2(N-1)/N (all_reduce), algbw * (N-1)/N (all_gather).
check: all_reduce, all_gather, reduce_scatter, broadcast (both roots) and
  send/recv in each dtype at each size (bytes per rank's buffer), on
  integer-valued data that every dtype holds exactly (so sums are exact),
  outputs poisoned with NaN first; every element compared.
probe: one 1 MiB all_reduce (for NCCL's INFO lines about the NIC and GDR).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist

ap = argparse.ArgumentParser()
ap.add_argument("--rank", type=int, required=True)
ap.add_argument("--world", type=int, default=2)
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--mode", choices=["bench", "check", "probe"], required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--label", default="")
ap.add_argument("--sizes", default="")
ap.add_argument("--colls", default="")
ap.add_argument("--dtypes", default="float32,bfloat16")
ap.add_argument("--repeats", type=int, default=3)
ap.add_argument("--budget-s", type=float, default=0.25, help="bench: seconds per timed loop")
args = ap.parse_args()

R, N = args.rank, args.world
# NCCL_RANK_CPU=1: gloo on the CPU, to try this script where there is no GPU
CPU = os.environ.get("NCCL_RANK_CPU") == "1"
t_init = time.time()
if CPU:
    dev = torch.device("cpu")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=R, world_size=N)
else:
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{args.port}", rank=R, world_size=N,
                            device_id=dev)
DT = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def emit(rec):
    if R == 0:
        rec.setdefault("label", args.label)
        with open(args.out, "a") as f:
            f.write(json.dumps(rec) + "\n")


def sizes(default):
    s = args.sizes or default
    return [int(x) for x in s.split(",") if x]


def devsync():
    if not CPU:
        torch.cuda.synchronize()


def sync():
    devsync()
    dist.barrier()
    devsync()


def all_gather_t(out, inp):
    if CPU:  # gloo has no _allgather_base
        dist.all_gather(list(out.chunk(N)), inp)
    else:
        dist.all_gather_into_tensor(out, inp)


def reduce_scatter_t(out, inp):
    if CPU:  # nor reduce_scatter
        t = inp.clone()
        dist.all_reduce(t)
        out.copy_(t.chunk(N)[R])
    else:
        dist.reduce_scatter_tensor(out, inp)


class Timer:
    """CUDA events around GPU work (host clock on the CPU)."""

    def __init__(self):
        if CPU:
            self.t = time.perf_counter()
        else:
            self.a = torch.cuda.Event(enable_timing=True)
            self.b = torch.cuda.Event(enable_timing=True)
            self.a.record()

    def stop(self):
        if CPU:
            return time.perf_counter() - self.t
        self.b.record()
        self.b.synchronize()
        return self.a.elapsed_time(self.b) / 1e3


# first collective: connections are made here
x = torch.ones(1 << 18, device=dev)
dist.all_reduce(x)
devsync()
emit({"kind": "init", "init_s": round(time.time() - t_init, 3), "first_ok": bool(x[0].item() == N),
      "nccl": "" if CPU else ".".join(map(str, torch.cuda.nccl.version())), "torch": torch.__version__})


def run_bench():
    colls = (args.colls or "all_reduce,all_gather").split(",")
    for coll in colls:
        for size in sizes("1048576,4194304,16777216,67108864,268435456"):
            nel = size // 4
            if coll == "all_reduce":
                buf = torch.ones(nel, device=dev)
                op = lambda: dist.all_reduce(buf)  # noqa: E731
                factor = 2 * (N - 1) / N
            else:
                per = nel // N
                inp = torch.ones(per, device=dev)
                out = torch.empty(per * N, device=dev)
                op = lambda: all_gather_t(out, inp)  # noqa: E731
                factor = (N - 1) / N
            # warm up, then size the loop to about budget_s
            sync()
            t0 = time.time()
            op()
            devsync()
            op()
            devsync()
            one = max((time.time() - t0) / 2, 1e-6)
            t = torch.tensor([one], device=dev)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            iters = int(max(1, min(50, args.budget_s / t.item())))
            times = []
            for _ in range(args.repeats):
                sync()
                tm = Timer()
                for _ in range(iters):
                    op()
                times.append(tm.stop() / iters)
            tt = torch.tensor([statistics.median(times)], device=dev)
            dist.all_reduce(tt, op=dist.ReduceOp.MAX)  # the slower rank's time
            sec = tt.item()
            algbw = size / sec / 1e9
            emit({"kind": "bench", "coll": coll, "bytes": size, "iters": iters, "repeats": args.repeats,
                  "time_us": round(sec * 1e6, 1), "algbw_GBps": round(algbw, 3),
                  "busbw_GBps": round(algbw * factor, 3),
                  "times_us": [round(x * 1e6, 1) for x in times]})
            del op
            if not CPU:
                torch.cuda.empty_cache()


def gen(rank, n, dtype, seed):
    # integers in [-8, 8]: exact in bf16 and fp32, and so are their sums
    i = torch.arange(n, device=dev, dtype=torch.int64)
    return (((i * 7 + rank * 13 + seed * 5) % 17) - 8).to(dtype)


def compare(out, exp):
    if torch.equal(out, exp):
        return None
    bad = (out != exp) | torch.isnan(out)
    idx = int(bad.nonzero()[0].item())
    return {"first_bad": idx, "n_bad": int(bad.sum().item()), "got": float(out[idx].item()),
            "want": float(exp[idx].item())}


def run_check():
    colls = (args.colls or "all_reduce,all_gather,reduce_scatter,broadcast,sendrecv").split(",")
    nfail = 0
    for dname in args.dtypes.split(","):
        dt = DT[dname]
        es = torch.tensor([], dtype=dt).element_size()
        for size in sizes("8,64,512,4096,32768,262144,2097152,16777216,134217728,1073741824"):
            n = max(1, size // es)
            for coll in colls:
                seed = (size * 31 + len(coll)) % 1000
                t0 = time.time()
                err = None
                if coll == "all_reduce":
                    buf = gen(R, n, dt, seed)
                    dist.all_reduce(buf)
                    exp = sum(gen(r, n, dt, seed) for r in range(N))
                    devsync()
                    err = compare(buf, exp)
                elif coll == "all_gather":
                    inp = gen(R, n, dt, seed)
                    out = torch.full((n * N,), float("nan"), device=dev, dtype=dt)
                    all_gather_t(out, inp)
                    devsync()
                    err = compare(out, torch.cat([gen(r, n, dt, seed) for r in range(N)]))
                elif coll == "reduce_scatter":
                    inp = gen(R, n * N, dt, seed)
                    out = torch.full((n,), float("nan"), device=dev, dtype=dt)
                    reduce_scatter_t(out, inp)
                    devsync()
                    exp = sum(gen(r, n * N, dt, seed)[R * n:(R + 1) * n] for r in range(N))
                    err = compare(out, exp)
                elif coll == "broadcast":
                    for root in range(N):
                        buf = gen(R, n, dt, seed) if R == root else torch.full((n,), float("nan"), device=dev, dtype=dt)
                        dist.broadcast(buf, src=root)
                        devsync()
                        err = err or compare(buf, gen(root, n, dt, seed))
                elif coll == "sendrecv":
                    # every rank sends to the next and receives from the previous, at once
                    nxt, prv = (R + 1) % N, (R - 1) % N
                    snd = gen(R, n, dt, seed)
                    rcv = torch.full((n,), float("nan"), device=dev, dtype=dt)
                    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, snd, nxt),
                                                   dist.P2POp(dist.irecv, rcv, prv)])
                    for q in reqs:
                        q.wait()
                    devsync()
                    err = compare(rcv, gen(prv, n, dt, seed))
                # a failure on any rank fails the case
                f = torch.tensor([0 if err is None else 1], device=dev)
                dist.all_reduce(f)
                ok = f.item() == 0
                nfail += not ok
                rec = {"kind": "check", "coll": coll, "dtype": dname, "bytes": size, "ok": ok,
                       "secs": round(time.time() - t0, 3)}
                if err:
                    rec["error"] = err
                emit(rec)
                if err:
                    print(f"rank {R}: {coll} {dname} {size} B: {err}", file=sys.stderr, flush=True)
                if not CPU:
                    torch.cuda.empty_cache()
    return nfail


def threads_cpu():
    """CPU seconds of this process's busiest threads (where the time goes)."""
    hz = os.sysconf("SC_CLK_TCK")
    rows = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                s = f.read()
            name = s[s.index("(") + 1:s.rindex(")")]
            fl = s[s.rindex(")") + 2:].split()
            rows.append((int(fl[11]) / hz + int(fl[12]) / hz, int(fl[11]) / hz, int(fl[12]) / hz, name, tid))
        except (OSError, ValueError):
            pass
    rows.sort(reverse=True)
    return [{"tid": int(t), "name": n, "cpu_s": round(c, 2), "user_s": round(u, 2), "sys_s": round(s_, 2)}
            for c, u, s_, n, t in rows[:6]]


t_run = time.time()
nfail = 0
if args.mode == "bench":
    run_bench()
elif args.mode == "check":
    nfail = run_check()
wall = time.time() - t_run
ru = resource.getrusage(resource.RUSAGE_SELF)
stat = ""
if os.environ.get("UROCE_BIN"):
    try:
        stat = subprocess.run([os.environ["UROCE_BIN"], "stat", str(os.getpid())], capture_output=True,
                              text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError, KeyError):
        stat = ""
rec = {"kind": "proc", "rank": R, "mode": args.mode, "wall_s": round(wall, 2),
       "user_s": round(ru.ru_utime, 2), "sys_s": round(ru.ru_stime, 2), "threads": threads_cpu(),
       "uroce_stat": stat[-3000:], "failures": nfail}
# every rank's own line
with open(args.out + f".rank{R}", "w") as f:
    f.write(json.dumps(rec) + "\n")
dist.destroy_process_group()
print(f"rank {R}: {args.mode} done in {wall:.1f} s, {nfail} failed", flush=True)
sys.exit(1 if nfail else 0)
