#!/usr/bin/python3
"""bench/mpi/report.py LOGDIR OUTDIR RUN_ID: bench/mpi/run.sh's raw output
(records.jsonl, settings.json, <transport>.r<rep>/out.jsonl, err.log, meter)
into OUTDIR/mpi-RUN_ID.json and mpi-latest.json (every measurement, medians,
targets), mpi-latest.md (the tables) and plots/mpi.svg (gnuplot), and the
targets as PASS/MISS lines. Python stdlib only."""
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys

LOGDIR, OUTDIR, RUN_ID = sys.argv[1], sys.argv[2], sys.argv[3]
ORDER = ["uroce", "ucx-tcp", "tcp"]
LABEL = {"uroce": "UCX on uroce (rc_verbs)", "ucx-tcp": "UCX tcp", "tcp": "Open MPI TCP BTL (ob1)"}
SHORT = {"uroce": "uroce", "ucx-tcp": "UCX tcp", "tcp": "ob1 TCP"}
SMALL_MAX = 4096          # "small-message" allreduce: up to 4 KiB
LARGE_MIN = 1 << 20       # "1 MiB and larger"


def read(p):
    try:
        with open(p, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def size_str(n):
    for u, s in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= u and n % u == 0:
            return f"{n // u} {s}"
    return f"{n} B"


def fmt(v, nd=2):
    if v is None:
        return "–"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.{nd}f}"


def fx(v):
    return "–" if v is None else f"{v:.2f}x"


settings = {}
try:
    settings = json.loads(read(os.path.join(LOGDIR, "settings.json")))
except ValueError:
    pass
records = []
for line in read(os.path.join(LOGDIR, "records.jsonl")).splitlines():
    try:
        records.append(json.loads(line))
    except ValueError:
        pass

# every measurement of every run
rows = []
for r in records:
    d = os.path.join(LOGDIR, r["dir"])
    r["results"] = 0
    for line in read(os.path.join(d, "out.jsonl")).splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("bench") in ("allreduce", "latency", "bw", "exchange"):
            m["transport"], m["rep"] = r["transport"], r["rep"]
            rows.append(m)
            r["results"] += 1
    mt = read(os.path.join(d, "meter")).split()
    r["cpu_s"] = float(mt[0]) + float(mt[1]) if len(mt) >= 5 else None
    r["wall_s"] = float(mt[3]) if len(mt) >= 5 else None
    # uroce's counters at exit (UROCE_LOG=info): packets and retransmissions
    tx = rtx = 0
    for m in re.finditer(r"info: uroce_\S+: tx (\d+) pkts rx \d+ pkts retrans (\d+)", read(os.path.join(d, "err.log"))):
        tx += int(m.group(1))
        rtx += int(m.group(2))
    r["uroce_tx_pkts"], r["uroce_retrans"] = (tx, rtx) if r["transport"] == "uroce" else (None, None)

transports = [t for t in ORDER if any(r["transport"] == t for r in records)]
ranks = next((m["ranks"] for m in rows if m["bench"] == "allreduce"), settings.get("ranks", 2))
bus = 2 * (ranks - 1) / ranks


def series(bench, field):
    out = {}
    for t in transports:
        by = {}
        for m in rows:
            if m["transport"] == t and m["bench"] == bench and (bench != "allreduce" or m.get("ok")):
                by.setdefault(m["size"], []).append(m[field])
        out[t] = {s: med(v) for s, v in sorted(by.items())}
    return out


ar_us = series("allreduce", "avg_us")
lat_us = series("latency", "avg_us")
bw_mbps = series("bw", "MBps")
ex_us = series("exchange", "avg_us")
ar_bus = {t: {s: (s / us / 1e3 * bus if us else None) for s, us in v.items()} for t, v in ar_us.items()}  # GB/s
bad = sorted({f"{m['transport']} r{m['rep']} {m['size']} B" for m in rows if m["bench"] == "allreduce" and not m.get("ok")})

ar_sizes = sorted({s for v in ar_us.values() for s in v})
lat_sizes = sorted({s for v in lat_us.values() for s in v})
bw_sizes = sorted({s for v in bw_mbps.values() for s in v})
ex_sizes = sorted({s for v in ex_us.values() for s in v})


def ratio(a, b):
    return a / b if a is not None and b else None


# ---------------------------------------------------------------- targets
targets = []


def target(name, base, sizes, fn, limit, better):
    ok_t = base in transports and "uroce" in transports
    vals = [(s, fn(s)) for s in sizes] if ok_t else []
    vals = [(s, v) for s, v in vals if v is not None]
    if not vals:
        targets.append({"target": name, "vs": base, "status": "SKIP", "worst": None, "limit": limit,
                        "detail": "not measured"})
        return
    worst = min(vals, key=lambda x: x[1]) if better == "ge" else max(vals, key=lambda x: x[1])
    ok = all((v >= limit) if better == "ge" else (v <= limit) for _, v in vals)
    targets.append({"target": name, "vs": base, "status": "PASS" if ok else "MISS", "worst": worst[1],
                    "worst_size": worst[0], "limit": limit,
                    "detail": ", ".join(f"{size_str(s)} {v:.2f}x" for s, v in vals)})


for base in ("tcp", "ucx-tcp"):
    target(f"MPI_Allreduce busbw >= 1.5x {LABEL[base]}, every size >= 1 MiB", base,
           [s for s in ar_sizes if s >= LARGE_MIN],
           lambda s, b=base: ratio(ar_bus["uroce"].get(s), ar_bus.get(b, {}).get(s)), 1.5, "ge")
    target(f"small-message MPI_Allreduce latency <= 1.2x {LABEL[base]}, every size <= 4 KiB", base,
           [s for s in ar_sizes if s <= SMALL_MAX],
           lambda s, b=base: ratio(ar_us["uroce"].get(s), ar_us.get(b, {}).get(s)), 1.2, "le")

# ---------------------------------------------------------------- markdown
st = settings
md = [f"# MPI over uroce against MPI over TCP: run {RUN_ID}", ""]
md.append(f"{'Quick (BENCH_QUICK=1)' if st.get('quick') else 'Full'} run, {st.get('started', '?')} .. {st.get('ended', '?')} "
          f"({st.get('elapsed_s', '?')} s), repeat {st.get('repeat', '?')} (medians), {st.get('secs_per_size', '?')} s a size; "
          f"{ranks} ranks, {st.get('ranks_per_namespace', '?')} per namespace, two network namespaces joined by a veth pair "
          f"(MTU {st.get('mtu', '?')}); uroce {str(st.get('commit', '?'))[:12]}{' (dirty tree)' if st.get('dirty') else ''}; "
          f"Open MPI {st.get('versions', {}).get('openmpi', '?')}, UCX {st.get('versions', {}).get('ucx', '?')}.")
md.append((f"Open MPI's mpi_yield_when_idle was on for every transport ({st.get('cores', '?')} cores, fewer than 2 per rank: "
           "each uroce rank has an engine thread beside its spinning progress loop). "
           if st.get("yield_when_idle") else "") + f"Machine: {os.cpu_count()} cores, kernel {platform.release()}; load average {st.get('loadavg_start', '?')} at the start, "
          f"{st.get('loadavg_end', '?')} at the end. Columns: " + "; ".join(f"**{SHORT[t]}** = {LABEL[t]}" for t in transports) + ".")
md.append("")
md.append(f"### MPI_Allreduce (MPI_FLOAT, MPI_SUM; time per call, busbw = size / time x 2(n-1)/n, GB/s = 1e9 B/s)")
md.append("")
hdr = "| size |" + "".join(f" {SHORT[t]} us |" for t in transports) + "".join(f" {SHORT[t]} busbw |" for t in transports)
hdr += " uroce/ob1 time | uroce/ob1 busbw |"
md += [hdr, "|---:|" + "---:|" * (2 * len(transports) + 2)]
for s in ar_sizes:
    line = f"| {size_str(s)} |" + "".join(f" {fmt(ar_us[t].get(s))} |" for t in transports)
    line += "".join(f" {fmt(ar_bus[t].get(s), 3)} |" for t in transports)
    line += f" {fx(ratio(ar_us.get('uroce', {}).get(s), ar_us.get('tcp', {}).get(s)))} |"
    line += f" {fx(ratio(ar_bus.get('uroce', {}).get(s), ar_bus.get('tcp', {}).get(s)))} |"
    md.append(line)
md.append("")
md.append("### Point to point, rank 0 <-> rank 1 across the veth (osu_latency: half round trip; osu_bw: window of 64, MB/s = 1e6 B/s)")
md.append("")
hdr = "| size |" + "".join(f" {SHORT[t]} latency us |" for t in transports) + " uroce/ob1 |"
md += [hdr, "|---:|" + "---:|" * (len(transports) + 1)]
for s in lat_sizes:
    md.append(f"| {size_str(s)} |" + "".join(f" {fmt(lat_us[t].get(s))} |" for t in transports)
              + f" {fx(ratio(lat_us.get('uroce', {}).get(s), lat_us.get('tcp', {}).get(s)))} |")
md.append("")
hdr = "| size |" + "".join(f" {SHORT[t]} MB/s |" for t in transports) + " uroce/ob1 |"
md += [hdr, "|---:|" + "---:|" * (len(transports) + 1)]
for s in bw_sizes:
    md.append(f"| {size_str(s)} |" + "".join(f" {fmt(bw_mbps[t].get(s))} |" for t in transports)
              + f" {fx(ratio(bw_mbps.get('uroce', {}).get(s), bw_mbps.get('tcp', {}).get(s)))} |")
md.append("")
if ex_sizes:
    # both directions at once, as in each step of a 2-rank allreduce: what
    # the transport gives a collective before any reduction or algorithm
    md.append("### Exchange, rank 0 <-> rank 1 both ways at once (MPI_Sendrecv; time per swap, MB/s = size / time each way)")
    md.append("")
    hdr = "| size |" + "".join(f" {SHORT[t]} us |" for t in transports) + "".join(f" {SHORT[t]} MB/s |" for t in transports)
    md += [hdr + " uroce/ob1 time |", "|---:|" + "---:|" * (2 * len(transports) + 1)]
    for s in ex_sizes:
        md.append(f"| {size_str(s)} |" + "".join(f" {fmt(ex_us[t].get(s))} |" for t in transports)
                  + "".join(f" {fmt(s / ex_us[t][s] if ex_us[t].get(s) else None)} |" for t in transports)
                  + f" {fx(ratio(ex_us.get('uroce', {}).get(s), ex_us.get('tcp', {}).get(s)))} |")
    md.append("")
cpu = []
for t in transports:
    rs = [r for r in records if r["transport"] == t and r.get("ok")]
    c, w = med([r["cpu_s"] for r in rs]), med([r["wall_s"] for r in rs])
    extra = ""
    if t == "uroce":
        tx, rt = med([r["uroce_tx_pkts"] for r in rs]), med([r["uroce_retrans"] for r in rs])
        if tx:
            extra = f", {tx:.0f} packets sent, {rt:.0f} retransmitted ({100 * rt / tx:.2f}%)"
    cpu.append(f"{SHORT[t]} {fmt(c, 1)} CPU-s in {fmt(w, 1)} s{extra}")
md.append("One run (all sizes, median of the repeats): " + "; ".join(cpu) + ".")
md.append("")
md.append("Targets (issue 13; ratios within this run):")
md.append("")
for tg in targets:
    w = "–" if tg["worst"] is None else f"{tg['worst']:.2f}x at {size_str(tg['worst_size'])}"
    md.append(f"- {tg['status']}: {tg['target']}: worst {w} (limit {tg['limit']}x){'; ' + tg['detail'] if tg['detail'] else ''}")
broken = [r["id"] for r in records if not r.get("ok")]
if broken or bad:
    md.append("")
    if broken:
        md.append(f"Broken runs: {', '.join(broken)} (raw output: build/bench/mpi-logs/).")
    if bad:
        md.append(f"Wrong MPI_Allreduce results (left out): {', '.join(bad)}.")
md_text = "\n".join(md) + "\n"

# ------------------------------------------------------------------ plot
plots = os.path.join(OUTDIR, "plots")
os.makedirs(plots, exist_ok=True)
plot_status = "not made"
if os.environ.get("BENCH_GNUPLOT", "1") != "0" and shutil.which("gnuplot"):
    def dat(name, d):
        fn = os.path.join(plots, f"mpi-{name}.dat")
        with open(fn, "w") as f:
            for s, v in sorted(d.items()):
                if v is not None:
                    f.write(f"{s} {v}\n")
        return fn

    def panel(name, title, ylab, data, logy):
        ls = [f"'{dat(name + '-' + t, data[t])}' using 1:2 with linespoints lc {i + 1} pt 7 lw 2 title '{SHORT[t]}'"
              for i, t in enumerate(transports)]
        return (f"set title '{title}'\nset ylabel '{ylab}'\n{'set logscale y' if logy else 'unset logscale y'}\n"
                f"set yrange [{'*' if logy else '0'}:*]\nplot {', '.join(ls)}\n")
    gp = f"""set terminal svg size 1100,800 dynamic font 'sans,11' noenhanced
set output '{plots}/mpi.svg'
set multiplot layout 2,2 title 'MPI over uroce vs TCP, {ranks} ranks, 2 namespaces (veth MTU {st.get("mtu", "?")}), run {RUN_ID}'
set logscale x 2
set format x '%.0b%BB'
set xlabel 'message size'
set grid
set key left top
"""
    gp += panel("ar-us", "MPI_Allreduce time per call", "us", {t: ar_us[t] for t in transports}, True)
    gp += panel("ar-busbw", "MPI_Allreduce bus bandwidth", "GB/s", {t: ar_bus[t] for t in transports}, False)
    gp += panel("lat", "ping-pong latency (half round trip)", "us", {t: lat_us[t] for t in transports}, True)
    gp += panel("bw", "bandwidth (osu_bw, window 64)", "MB/s", {t: bw_mbps[t] for t in transports}, False)
    gp += "unset multiplot\n"
    with open(os.path.join(plots, "mpi.gp"), "w") as f:
        f.write(gp)
    r = subprocess.run(["gnuplot", os.path.join(plots, "mpi.gp")], capture_output=True, text=True, timeout=60)
    plot_status = "ok" if r.returncode == 0 else "gnuplot failed: " + r.stderr.strip()[-300:]
else:
    plot_status = "gnuplot not installed"
md_text += "\nPlot: plots/mpi.svg.\n" if plot_status == "ok" else f"\n(plot: {plot_status})\n"

# ------------------------------------------------------------------ write
def keyed(d):
    return {t: {str(s): v for s, v in m.items()} for t, m in d.items()}


result = {"schema": 1, "run_id": RUN_ID, "settings": settings, "ranks": ranks,
          "machine": {"cores": os.cpu_count(), "kernel": platform.release()},
          "summary": {"allreduce_us": keyed(ar_us), "allreduce_busbw_GBps": keyed(ar_bus),
                      "latency_us": keyed(lat_us), "bw_MBps": keyed(bw_mbps),
                      "exchange_us": keyed(ex_us)},
          "targets": targets, "runs": records, "measurements": rows, "plot": plot_status}
with open(os.path.join(OUTDIR, f"mpi-{RUN_ID}.json"), "w") as f:
    json.dump(result, f, indent=1)
shutil.copyfile(os.path.join(OUTDIR, f"mpi-{RUN_ID}.json"), os.path.join(OUTDIR, "mpi-latest.json"))
for name in (f"mpi-{RUN_ID}.md", "mpi-latest.md"):
    with open(os.path.join(OUTDIR, name), "w") as f:
        f.write(md_text)
print(md_text)
for tg in targets:
    w = "n/a" if tg["worst"] is None else f"{tg['worst']:.2f}x at {size_str(tg['worst_size'])}"
    print(f"{tg['status']} {tg['target']}: worst {w} (limit {tg['limit']}x)")
