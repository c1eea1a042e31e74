#!/usr/bin/env python3
"""NCCL over uroce: the benchmark (`make bench-nccl`) and the correctness
checks (tests/clients/test_nccl.sh), two ranks on one GPU through PyTorch's
NCCL. Python stdlib only; the ranks (nccl_rank.py) need torch with CUDA.

  driver.py bench [--quick]
      NCCL on uroce with GPU memory registered (GDR), NCCL on uroce with host
      staging, and NCCL_NET=Socket, side by side in one run; uroce's own
      ib_write_bw of 1 MiB on the same machine; one probe run with NCCL left
      to decide GDR by itself. Writes BENCH_OUT (build/bench)/nccl-<run>.json,
      nccl-latest.json, nccl-latest.md, logs under nccl-logs/, and prints the
      table and the targets as PASS/MISS lines.
  driver.py why-not
      prints why the GPU checks would skip (nothing when torch sees a GPU).
  driver.py check [--modes gdr,host,loss,gdr-loss,peermem] [--sizes B,B,...]
      all_reduce, all_gather, reduce_scatter, broadcast, send/recv in fp32
      and bf16, every element checked, per mode; prints "ok|FAIL|skip
      nccl/<mode>" lines and "N passed, N failed, N skipped".

Without torch or a GPU both print why and skip (exit 0).

Environment: BUILD (build), BENCH_OUT (build/bench), PYTHON (python3, the
one with torch), NCCL_BENCH_SIZES (bytes, comma-separated),
NCCL_BENCH_CONFIGS (uroce-gdr,uroce-host,socket), NCCL_CHECK_SIZES,
NCCL_CHECK_LOSS_SIZES (the loss mode's sizes), IB_WRITE_BW (path of
perftest's ib_write_bw; PATH by default), IB_WRITE_BW_LIBS (a folder of the
libraries it needs, for a perftest carried from another system), NCCL_LOG_DIR (where the rank logs
go), T_RANK (seconds one pair of ranks may take, 300).
"""
import datetime
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("BUILD", "build")
BUILD = BUILD if os.path.isabs(BUILD) else os.path.join(TOP, BUILD)
UROCE = os.path.join(BUILD, "bin", "uroce")
PY = os.environ.get("PYTHON", "python3")
RANK = os.path.join(HERE, "nccl_rank.py")
T_RANK = float(os.environ.get("T_RANK", "300"))
MiB = 1 << 20

# What a user of two ranks on one GPU sets (NCCL refuses two ranks on one
# GPU with one host hash; P2P and SHM off so that the network is used).
COMMON = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo",
          "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_NVLS_ENABLE": "0",
          "NCCL_SET_THREAD_NAME": "1", "PYTHONUNBUFFERED": "1"}
# name: (through uroce run?, extra environment, what it is)
CONFIGS = {
    "uroce-default": (True, {"NCCL_DEBUG_SUBSYS": "INIT,NET,GRAPH"},
                      "NCCL on uroce, NCCL decides GDR itself"),
    "uroce-gdr": (True, {"NCCL_NET": "IB", "NCCL_NET_GDR_LEVEL": "SYS"},
                  "NCCL on uroce, GPU memory registered (GDR; NCCL_NET_GDR_LEVEL=SYS)"),
    "uroce-host": (True, {"NCCL_NET": "IB", "NCCL_NET_GDR_LEVEL": "LOC"},
                   "NCCL on uroce, host staging (NCCL_NET_GDR_LEVEL=LOC)"),
    "socket": (False, {"NCCL_NET": "Socket"}, "NCCL_NET=Socket"),
    # checks
    "gdr": (True, {"NCCL_NET": "IB", "NCCL_NET_GDR_LEVEL": "SYS", "NCCL_NET_FORCE_FLUSH": "1"},
            "uroce, GDR (dma-buf of cuMem buffers), GDR flush forced (a READ on a loopback QP)"),
    "host": (True, {"NCCL_NET": "IB", "NCCL_NET_GDR_LEVEL": "LOC"}, "uroce, host staging"),
    "loss": (True, {"NCCL_NET": "IB", "NCCL_NET_GDR_LEVEL": "LOC", "UROCE_LOSS": "0.01"},
             "uroce, host staging, UROCE_LOSS=0.01 (1% of packets dropped on receive)"),
    "gdr-loss": (True, {"NCCL_NET": "IB", "NCCL_NET_GDR_LEVEL": "SYS", "UROCE_LOSS": "0.01"},
                 "uroce, GDR, UROCE_LOSS=0.01"),
    "peermem": (True, {"NCCL_NET": "IB", "NCCL_NET_GDR_LEVEL": "SYS", "NCCL_DMABUF_ENABLE": "0",
                       "NCCL_NET_FORCE_FLUSH": "1"},
                "uroce, GDR through ibv_reg_mr on GPU pointers (peer-memory style: a "
                "memory_peers/nv_mem/version file shown to NCCL, dma-buf off)"),
}


def say(*a):
    print(*a, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def gpu_why_not():
    """None if torch sees a CUDA GPU, else the reason."""
    if os.environ.get("NCCL_RANK_CPU") == "1":
        return None  # trying the scripts with gloo on the CPU
    try:
        r = subprocess.run([PY, "-c", "import torch,sys; sys.exit(0 if torch.cuda.is_available() "
                            "and torch.distributed.is_nccl_available() else 3)"],
                           capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return f"no {PY} ({e})"
    if r.returncode == 3:
        return "no GPU (torch.cuda.is_available() is False, or torch without NCCL)"
    if r.returncode:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return f"no torch ({last})"
    return None


def rank_cmd(cfg, r, mode, out, port, extra):
    via_uroce, env_extra, _ = CONFIGS[cfg]
    env = dict(os.environ)
    env.update(COMMON)
    env.update(env_extra)
    # NCCL_DRIVER_ENV="K=V ...": overrides a configuration's own settings
    # (diagnosis: the same check with one thing changed)
    for kv in os.environ.get("NCCL_DRIVER_ENV", "").split():
        k, _, v = kv.partition("=")
        env[k] = v
    env["NCCL_HOSTID"] = f"uroce-nccl-host{r}"
    env["UROCE_BIN"] = UROCE
    cmd = [PY, RANK, "--rank", str(r), "--world", "2", "--port", str(port), "--mode", mode,
           "--out", out, "--label", cfg] + extra
    if via_uroce:
        cmd = [UROCE, "run", "--netdev", "lo", "--"] + cmd
        env["UROCE_NETDEV"] = "lo"
    if cfg == "peermem":
        # NCCL looks for nvidia_peermem in sysfs; show it one in a private
        # mount namespace (root only), so that it registers GPU pointers
        # with ibv_reg_mr as with a peer-memory module
        script = ("mount -t tmpfs tmpfs /sys/kernel/mm && mkdir -p /sys/kernel/mm/memory_peers/nv_mem && "
                  "echo 1.0 >/sys/kernel/mm/memory_peers/nv_mem/version && exec \"$@\"")
        cmd = ["unshare", "-m", "sh", "-c", script, "sh"] + cmd
    return cmd, env


def run_pair(cfg, mode, out, logdir, extra=(), timeout=None):
    """Runs 2 ranks; returns (ok, wall seconds, [log paths])."""
    port = free_port()
    procs, logs = [], []
    t0 = time.time()
    for r in range(2):
        cmd, env = rank_cmd(cfg, r, mode, out, port, list(extra))
        log = os.path.join(logdir, f"{os.path.basename(out)}.{cfg}.rank{r}.log")
        logs.append(log)
        f = open(log, "w")
        f.write("# " + " ".join(cmd) + "\n")
        f.flush()
        procs.append((subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT,
                                       start_new_session=True), f))
    ok = True
    deadline = t0 + (timeout or T_RANK)
    for p, f in procs:
        try:
            rc = p.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            for q, _ in procs:
                try:
                    os.killpg(q.pid, 9)
                except OSError:
                    pass
            rc = p.wait()
            with open(f.name, "a") as g:
                g.write(f"\n# killed after {timeout or T_RANK:.0f} s\n")
        f.close()
        ok = ok and rc == 0
    return ok, time.time() - t0, logs


def read_jsonl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


NCCL_PAT = re.compile(r"GPU Direct RDMA|via NET/|NET/IB|NET/Socket|Using network|dma-?buf|DMA-BUF|"
                      r"Could not find real path|WARN|speed|GDR|Connected all|Init COMPLETE|"
                      r"ncclNetInit|Initialized NET plugin|NCCL version", re.I)


def nccl_lines(log, limit=60):
    lines = []
    try:
        with open(log, errors="replace") as f:
            for line in f:
                if "NCCL" in line and NCCL_PAT.search(line):
                    line = re.sub(r"^\S+:\d+:\d+ ", "", line.rstrip())
                    if line not in lines:
                        lines.append(line)
    except OSError:
        pass
    return lines[:limit]


def gdr_decision(lines):
    """What NCCL decided about GPU Direct RDMA, from its INFO lines."""
    dec = [l for l in lines if "GPU Direct RDMA" in l]
    via = sorted({m.group(0) for l in lines for m in [re.search(r"via NET/\S+", l)] if m})
    return {"gdr_lines": dec[:4], "channels_via": via}


# ---------------------------------------------------------------- perftest
def ib_write_bw(logdir):
    tool = os.environ.get("IB_WRITE_BW") or shutil.which("ib_write_bw")
    if not tool:
        return {"skipped": "ib_write_bw not installed (perftest)"}
    port = str(free_port())
    args = ["-x", "0", "-F", "-p", port, "--report_gbits", "-s", "1048576", "-q", "1", "-D", "3"]
    env = dict(os.environ, UROCE_NETDEV="lo")
    if os.environ.get("IB_WRITE_BW_LIBS"):  # perftest's own libraries, for it alone
        env["LD_LIBRARY_PATH"] = os.environ["IB_WRITE_BW_LIBS"] + ":" + env.get("LD_LIBRARY_PATH", "")
    base = [UROCE, "run", "--netdev", "lo", "--", tool]
    with open(os.path.join(logdir, "ib_write_bw.server.log"), "w") as sf:
        srv = subprocess.Popen(base + args, env=env, stdout=sf, stderr=subprocess.STDOUT)
        time.sleep(1.5)
        cl = subprocess.run(base + args + ["127.0.0.1"], env=env, capture_output=True, text=True,
                            timeout=60)
        try:
            srv.wait(timeout=20)
        except subprocess.TimeoutExpired:
            srv.kill()
    with open(os.path.join(logdir, "ib_write_bw.client.log"), "w") as f:
        f.write(cl.stdout + cl.stderr)
    rows = cl.stdout.splitlines()
    for i, l in enumerate(rows):
        if l.strip().startswith("#bytes"):
            for r in rows[i + 1:]:
                f = r.split()
                if len(f) >= 4 and f[0].isdigit():
                    return {"bytes": int(f[0]), "gbps": float(f[3]), "GBps": float(f[3]) / 8,
                            "cmd": " ".join(["uroce run --netdev lo --", "ib_write_bw"] + args + ["127.0.0.1"])}
    return {"skipped": f"ib_write_bw gave no result (exit {cl.returncode}), see logs"}


# ---------------------------------------------------------------- bench
def fmt(v, d=2):
    return "–" if v is None else f"{v:.{d}f}"


def human(b):
    for u, s in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= u and b % u == 0:
            return f"{b // u} {s}"
    return f"{b} B"


def bench(quick):
    if not os.access(UROCE, os.X_OK):
        say(f"bench-nccl: no {UROCE}: run make (BUILD={BUILD})")
        return 1
    why = gpu_why_not()
    if why:
        say(f"bench-nccl: skipped: {why}")
        return 0
    out_dir = os.environ.get("BENCH_OUT") or os.path.join(TOP, "build", "bench")
    out_dir = out_dir if os.path.isabs(out_dir) else os.path.join(TOP, out_dir)
    logdir = os.environ.get("NCCL_LOG_DIR") or os.path.join(out_dir, "nccl-logs")
    os.makedirs(logdir, exist_ok=True)
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    sizes = os.environ.get("NCCL_BENCH_SIZES") or (
        "1048576,16777216,67108864,268435456" if quick else
        "65536,1048576,4194304,16777216,67108864,268435456")
    configs = (os.environ.get("NCCL_BENCH_CONFIGS") or "uroce-gdr,uroce-host,socket").split(",")
    res = os.path.join(logdir, f"bench-{run_id}.jsonl")
    info = {}

    say(f"bench-nccl: {run_id}, sizes {sizes}, configs {' '.join(configs)}")
    pt = ib_write_bw(logdir)
    say(f"  ib_write_bw 1 MiB on uroce: {pt.get('gbps', pt.get('skipped'))} Gb/s")

    # NCCL on its own: which NIC, which speed, GDR or not
    probe = os.path.join(logdir, f"probe-{run_id}.jsonl")
    ok, secs, logs = run_pair("uroce-default", "probe", probe, logdir, timeout=120)
    lines = nccl_lines(logs[0], 80)
    info["uroce-default"] = {"ok": ok, "secs": round(secs, 1), "nccl": lines, **gdr_decision(lines)}
    say(f"  probe (NCCL decides GDR): {'ok' if ok else 'FAILED'} in {secs:.0f} s; "
        f"{'; '.join(info['uroce-default']['gdr_lines'][:1]) or 'no GDR line'}; "
        f"{', '.join(info['uroce-default']['channels_via'])}")

    for c in configs:
        ok, secs, logs = run_pair(c, "bench", res, logdir, ["--sizes", sizes])
        lines = nccl_lines(logs[0])
        procs = [read_jsonl(res + f".rank{r}") for r in range(2)]
        info[c] = {"ok": ok, "secs": round(secs, 1), "nccl": lines, **gdr_decision(lines),
                   "procs": [p[0] if p else None for p in procs]}
        say(f"  {c}: {'ok' if ok else 'FAILED'} in {secs:.0f} s; {', '.join(info[c]['channels_via'])}")
        for r in range(2):
            try:
                os.rename(res + f".rank{r}", res + f".{c}.rank{r}")
            except OSError:
                pass

    recs = [r for r in read_jsonl(res) if r.get("kind") == "bench"]
    inits = [r for r in read_jsonl(res) if r.get("kind") == "init"]
    B = {}
    for r in recs:
        B[(r["label"], r["coll"], r["bytes"])] = r
    colls = ["all_reduce", "all_gather"]
    szl = [int(x) for x in sizes.split(",")]
    names = {"uroce-gdr": "uroce GDR", "uroce-host": "uroce host staging", "socket": "Socket"}

    def bw(c, coll, s, k="busbw_GBps"):
        r = B.get((c, coll, s))
        return r[k] if r else None

    md = [f"# NCCL over uroce: `make bench-nccl`, run {run_id}", ""]
    md.append(f"Two ranks on one GPU (PyTorch {inits[0]['torch'] if inits else '?'}, "
              f"NCCL {inits[0]['nccl'] if inits else '?'}), each with its own NCCL_HOSTID, "
              "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1; nccl-tests' algbw/busbw "
              "(all_reduce in place: busbw = algbw x 2(n-1)/n; all_gather: size is the "
              "gathered total, busbw = algbw x (n-1)/n); time is the median of 3 timed loops, "
              "the slower rank's. GB/s = 1e9 bytes/s.")
    md.append("")
    for c in configs:
        md.append(f"- **{names.get(c, c)}**: {CONFIGS[c][2]}; "
                  f"channels {', '.join(info[c]['channels_via']) or '?'}"
                  + ("" if info[c]["ok"] else " (**the run failed**: see logs)"))
    md.append(f"- NCCL left to itself (no NCCL_NET_GDR_LEVEL): "
              f"{'; '.join(info['uroce-default']['gdr_lines'][:1]) or 'no GDR line'}; "
              f"{', '.join(info['uroce-default']['channels_via']) or '?'}")
    if "gbps" in pt:
        md.append(f"- uroce's own `ib_write_bw` 1 MiB, same machine: {pt['gbps']:.2f} Gb/s "
                  f"({pt['GBps']:.2f} GB/s)")
    md.append("")
    for coll in colls:
        md.append(f"### {coll}")
        md.append("")
        hdr = "| size |" + "".join(f" {names.get(c, c)} time us | algbw | busbw |" for c in configs)
        hdr += " GDR / Socket | GDR / host |"
        md.append(hdr)
        md.append("|---:|" + "---:|---:|---:|" * len(configs) + "---:|---:|")
        for s in szl:
            row = f"| {human(s)} |"
            for c in configs:
                r = B.get((c, coll, s))
                row += (f" {fmt(r['time_us'], 0)} | {fmt(r['algbw_GBps'])} | {fmt(r['busbw_GBps'])} |"
                        if r else " – | – | – |")
            g, so, h = bw("uroce-gdr", coll, s), bw("socket", coll, s), bw("uroce-host", coll, s)
            row += f" {fmt(g / so if g and so else None)}x | {fmt(g / h if g and h else None)}x |"
            md.append(row)
        md.append("")

    targets = []

    def target(name, value, limit, detail):
        st = "SKIP" if value is None else ("PASS" if value >= limit else "MISS")
        targets.append({"target": name, "value": value, "limit": limit, "status": st, "detail": detail})

    for coll in colls:
        for s in szl:
            if s < 64 * MiB:
                continue
            g, so, h = bw("uroce-gdr", coll, s), bw("socket", coll, s), bw("uroce-host", coll, s)
            best = max([x for x in (g, h) if x] or [0]) or None
            target(f"NCCL over uroce >= 2x Socket busbw, {coll} {human(s)}",
                   best / so if best and so else None, 2.0,
                   f"uroce {fmt(best)} (GDR {fmt(g)}, host {fmt(h)}) vs Socket {fmt(so)} GB/s")
            target(f"GDR path >= host staging, {coll} {human(s)}", g / h if g and h else None, 1.0,
                   f"{fmt(g)} vs {fmt(h)} GB/s")
    s256 = 256 * MiB
    g = bw("uroce-gdr", "all_reduce", s256)
    target("all_reduce 256 MiB busbw (GDR) >= 0.8x uroce ib_write_bw 1 MiB",
           g / pt["GBps"] if g and "GBps" in pt else None, 0.8,
           f"{fmt(g)} GB/s vs {fmt(pt.get('GBps'))} GB/s ({fmt(pt.get('gbps'))} Gb/s)")
    md.append("### Targets")
    md.append("")
    for t in targets:
        md.append(f"- {t['status']}: {t['target']}: {fmt(t['value'])} (limit {t['limit']}); {t['detail']}")
    md.append("")
    # where the time goes: busiest threads of rank 0 per uroce config
    md.append("### Where the time goes (rank 0's busiest threads, CPU seconds over the run)")
    md.append("")
    for c in configs:
        p = (info[c].get("procs") or [None])[0]
        if p:
            th = ", ".join(f"{t['name']} {t['cpu_s']}" for t in p["threads"][:5])
            md.append(f"- {names.get(c, c)}: wall {p['wall_s']} s, user {p['user_s']} s, "
                      f"sys {p['sys_s']} s; {th}")
    md.append("")
    cmd = "make bench-nccl" + (" (quick)" if quick else "")
    md.append(f"Command: `{cmd}`; logs: {os.path.relpath(logdir, TOP)}/")
    text = "\n".join(md) + "\n"

    machine = {"host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count()}
    try:
        machine["gpu"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                         "--format=csv,noheader"], capture_output=True, text=True,
                                        timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    result = {"schema": 1, "run_id": run_id, "sizes": szl, "configs": {c: CONFIGS[c][2] for c in configs},
              "machine": machine, "ib_write_bw": pt, "nccl": info, "records": recs, "init": inits,
              "targets": targets}
    os.makedirs(out_dir, exist_ok=True)
    for name in (f"nccl-{run_id}.json", "nccl-latest.json"):
        with open(os.path.join(out_dir, name), "w") as f:
            json.dump(result, f, indent=1)
    for name in (f"nccl-{run_id}.md", "nccl-latest.md"):
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(text)
    say("")
    say(text)
    for t in targets:
        say(f"{t['status']} {t['target']}: {fmt(t['value'], 3)} (limit {t['limit']}); {t['detail']}")
    failed = [c for c in configs if not info[c]["ok"]]
    if failed:
        say(f"bench-nccl: runs failed: {' '.join(failed)}")
    return 1 if failed else 0


# ---------------------------------------------------------------- check
def check(modes, sizes):
    why = gpu_why_not()
    npass = nfail = nskip = 0
    if why:
        for m in modes:
            say(f"skip nccl/{m} ({why})")
        say(f"0 passed, 0 failed, {len(modes)} skipped")
        return 0
    logdir = os.environ.get("NCCL_LOG_DIR") or os.path.join(BUILD, "nccl-check")
    os.makedirs(logdir, exist_ok=True)
    for m in modes:
        if m == "peermem" and os.geteuid() != 0:
            say(f"skip nccl/{m} (needs root to show NCCL a peer-memory module)")
            nskip += 1
            continue
        sz = sizes
        if m == "loss":
            sz = os.environ.get("NCCL_CHECK_LOSS_SIZES") or sizes
        out = os.path.join(logdir, f"check-{m}.jsonl")
        for p in (out, out + ".rank0", out + ".rank1"):
            if os.path.exists(p):
                os.remove(p)
        extra = ["--sizes", sz] if sz else []
        if os.environ.get("NCCL_CHECK_DTYPES"):
            extra += ["--dtypes", os.environ["NCCL_CHECK_DTYPES"]]
        elif m == "peermem":
            extra += ["--dtypes", "float32"]
        ok, secs, logs = run_pair(m, "check", out, logdir, extra)
        recs = [r for r in read_jsonl(out) if r.get("kind") == "check"]
        bad = [r for r in recs if not r["ok"]]
        lines = nccl_lines(logs[0])
        dec = gdr_decision(lines)
        if ok and recs and not bad:
            npass += 1
            say(f"ok   nccl/{m}: {len(recs)} cases ({CONFIGS[m][2]}) in {secs:.0f} s; "
                f"{', '.join(dec['channels_via'])}")
        else:
            nfail += 1
            say(f"FAIL nccl/{m}: {len(bad)} of {len(recs)} cases wrong, ranks "
                f"{'ok' if ok else 'failed'} ({CONFIGS[m][2]}), {secs:.0f} s")
            for r in bad[:5]:
                say(f"  {r['coll']} {r['dtype']} {r['bytes']} B: {r.get('error')}")
            for lg in logs:
                try:
                    with open(lg, errors="replace") as f:
                        tail = f.read().splitlines()[-15:]
                    say(f"  -- {os.path.basename(lg)}:")
                    for l in tail:
                        say("    " + l[:300])
                except OSError:
                    pass
    say(f"{npass} passed, {nfail} failed, {nskip} skipped")
    return 1 if nfail else 0


def main():
    a = sys.argv[1:]
    if a and a[0] == "why-not":  # for tests/clients/test_nccl.sh: why the GPU checks skip
        why = gpu_why_not()
        if why:
            print(why)
        return 0
    if a and a[0] == "pair" and len(a) >= 3:  # pair CONFIG MODE [OUT]: two ranks, once (uroce trace)
        out = a[3] if len(a) > 3 else os.path.join(BUILD, f"pair-{a[1]}.jsonl")
        logdir = os.environ.get("NCCL_LOG_DIR") or os.path.dirname(out)
        ok, secs, logs = run_pair(a[1], a[2], out, logdir, timeout=T_RANK)
        say(f"pair {a[1]} {a[2]}: {'ok' if ok else 'FAILED'} in {secs:.0f} s; logs {' '.join(logs)}")
        return 0 if ok else 1
    if not a or a[0] not in ("bench", "check"):
        print(__doc__)
        return 2
    if a[0] == "bench":
        return bench("--quick" in a)
    modes = "gdr,host,loss,gdr-loss,peermem"
    sizes = os.environ.get("NCCL_CHECK_SIZES", "")
    i = 1
    while i < len(a):
        if a[i] == "--modes":
            modes = a[i + 1]
            i += 2
        elif a[i] == "--sizes":
            sizes = a[i + 1]
            i += 2
        else:
            print(f"unknown argument {a[i]}", file=sys.stderr)
            return 2
    return check(modes.split(","), sizes)


if __name__ == "__main__":
    sys.exit(main())
