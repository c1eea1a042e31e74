#!/usr/bin/python3
"""bench/report.py LOGDIR OUTDIR RUN_ID: turn bench/run.sh's raw output into
OUTDIR/RUN_ID.json (every measurement, medians, machine facts, targets),
OUTDIR/latest.json, OUTDIR/latest.md (the table) and OUTDIR/plots/*.svg
(gnuplot), and print the targets as PASS/MISS lines. Python stdlib only."""
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict

LOGDIR, OUTDIR, RUN_ID = sys.argv[1], sys.argv[2], sys.argv[3]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PATH_ORDER = ["lo", "veth1500", "veth9000"]
QP_TOLERANCE = 0.05      # "never falls": a drop within 5% is measurement noise


def read(path):
    try:
        with open(path, errors="replace") as f:
            return ANSI.sub("", f.read())
    except OSError:
        return ""


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def meter(path):
    """user sys maxrss_kb wall rc"""
    f = read(path).split()
    if len(f) < 5:
        return None
    return {"cpu_s": float(f[0]) + float(f[1]), "user_s": float(f[0]), "sys_s": float(f[1]),
            "maxrss_kb": int(f[2]), "wall_s": float(f[3]), "rc": int(f[4])}


def perftest_row(text):
    """the numeric row after perftest's '#bytes' header: list of floats"""
    lines = text.splitlines()
    for i, l in enumerate(lines):
        if l.strip().startswith("#bytes"):
            for r in lines[i + 1:]:
                f = r.split()
                if len(f) >= 3 and all(num(x) is not None for x in f[:3]):
                    return [num(x) for x in f]
    return None


def parse_bw(d):
    row = perftest_row(read(os.path.join(d, "client.log")))
    if not row or len(row) < 5:
        return None
    return {"bytes": row[0], "iters": row[1], "peak_gbps": row[2], "gbps": row[3], "mpps": row[4]}


def parse_lat(d):
    row = perftest_row(read(os.path.join(d, "client.log")))
    if not row or len(row) < 9:
        return None
    k = ["bytes", "iters", "min", "max", "typical", "avg", "stdev", "p99", "p999"]
    return dict(zip(k, row))


def parse_iperf(d):
    t = read(os.path.join(d, "client.log"))
    a, b = t.find("{"), t.rfind("}")
    if a < 0 or b < a:
        return None
    try:
        j = json.loads(t[a:b + 1])
        end = j["end"]
    except (ValueError, KeyError):
        return None
    if "error" in j:
        return None
    rx = end.get("sum_received") or {}
    tx = end.get("sum_sent") or end.get("sum") or {}
    s = end.get("sum") or {}
    gbps = rx.get("bits_per_second")
    if gbps is None and s:
        gbps = s.get("bits_per_second", 0) * (1 - s.get("lost_percent", 0) / 100)
    return {"gbps": (gbps or 0) / 1e9, "sent_gbps": tx.get("bits_per_second", 0) / 1e9,
            "bytes": rx.get("bytes") or tx.get("bytes"), "lost_percent": s.get("lost_percent"),
            "cpu": end.get("cpu_utilization_percent")}


def parse_sockperf(d):
    t = read(os.path.join(d, "client.log"))
    r = {}
    m = re.search(r"avg-lat(?:ency)?=([0-9.]+)", t)
    if m:
        r["avg"] = float(m.group(1))
    for p, v in re.findall(r"percentile\s+([0-9.]+)\s*=\s*([0-9.]+)", t):
        r["p" + {"50.000": "50", "99.000": "99", "99.900": "999", "90.000": "90",
                 "25.000": "25", "75.000": "75", "99.990": "9999", "99.999": "99999"}.get(p, p)] = float(v)
    m = re.search(r"<MAX> observation\s*=\s*([0-9.]+)", t)
    if m:
        r["max"] = float(m.group(1))
    m = re.search(r"<MIN> observation\s*=\s*([0-9.]+)", t)
    if m:
        r["min"] = float(m.group(1))
    if "p50" not in r:
        return None
    r["typical"] = r["p50"]
    return r


def last_json(path, key):
    """The last line of a log that is a JSON object with key, or None."""
    for l in reversed(read(path).splitlines()):
        try:
            j = json.loads(l)
        except ValueError:
            continue
        if isinstance(j, dict) and key in j:
            return j
    return None


def parse_gso(d):
    """udp_gso's server line: what arrived, Gb/s"""
    return last_json(os.path.join(d, "server.log"), "gbps")


def parse_pingpong(d):
    """pingpong's client line: half round trips, us (p50 as typical)"""
    j = last_json(os.path.join(d, "client.log"), "p50_us")
    return {"typical": j["p50_us"], "p99": j["p99_us"], "avg": j["mean_us"]} if j else None


def parse_idle(d):
    t = read(os.path.join(d, "out.json")).strip()
    try:
        return json.loads(t.splitlines()[-1]) if t else None
    except ValueError:
        return None


# ------------------------------------------------------------------ load
records = []
for line in read(os.path.join(LOGDIR, "records.jsonl")).splitlines():
    try:
        records.append(json.loads(line))
    except ValueError:
        pass
settings = {}
try:
    settings = json.loads(read(os.path.join(LOGDIR, "settings.json")))
except ValueError:
    pass
paths = {}
for line in read(os.path.join(LOGDIR, "paths.jsonl")).splitlines():
    try:
        p = json.loads(line)
        paths[p["path"]] = p
    except (ValueError, KeyError):
        pass
path_list = [p for p in PATH_ORDER if p in paths]

for r in records:
    d = os.path.join(LOGDIR, r.get("dir", r["id"]))
    r["server_meter"] = meter(os.path.join(d, "server.meter"))
    r["client_meter"] = meter(os.path.join(d, "client.meter"))
    if not r.get("ok"):
        r["result"] = None
        continue
    r["result"] = {"perftest_bw": parse_bw, "perftest_lat": parse_lat, "iperf3": parse_iperf,
                   "sockperf": parse_sockperf, "idle_qps": parse_idle,
                   "udp_gso": parse_gso, "pingpong": parse_pingpong}[r["kind"]](d)
    if r["result"] is None:
        r["ok"] = False
        r["parse_error"] = True


def good(**kw):
    return [r for r in records if r.get("ok") and r.get("result") is not None
            and all(r.get(k) == v for k, v in kw.items())]


def cpu_per_gb(r, nbytes, fixed=None):
    """CPU-seconds (both processes) per GB moved. fixed: the median CPU and
    bytes of the same program run with almost no iterations, subtracted
    (its start-up, clock calibration and teardown are not per GB)."""
    cm, sm = r.get("client_meter"), r.get("server_meter")
    if not cm or not sm or not nbytes:
        return None
    cpu = cm["cpu_s"] + sm["cpu_s"]
    if fixed and fixed[0] is not None and nbytes > fixed[1]:
        cpu, nbytes = max(cpu - fixed[0], 0.0), nbytes - fixed[1]
    return cpu / (nbytes / 1e9)


def fixed_cost(rs):
    """(median CPU-s, median bytes) of the fixed-cost runs, or None."""
    c = [r["client_meter"]["cpu_s"] + r["server_meter"]["cpu_s"] for r in rs
         if r.get("client_meter") and r.get("server_meter")]
    return (med(c), med([r["result"]["iters"] * r["size"] for r in rs])) if c else None


# --------------------------------------------------------------- summary
S = {}
for p in path_list:
    s = S[p] = {"mtu": paths[p]["mtu"]}
    bw = defaultdict(dict)
    for r in [r for r in good(path=p, kind="perftest_bw", qps=1) if not r.get("events") and r.get("phase") != "fixed"]:
        bw[r["tool"]].setdefault(r["size"], []).append(r["result"]["gbps"])
    s["bw_gbps"] = {t: {str(k): med(v) for k, v in sorted(m.items())} for t, m in bw.items()}
    s["bw_runs"] = {t: {str(k): len(v) for k, v in sorted(m.items())} for t, m in bw.items()}
    for t in ("ib_write_bw", "ib_read_bw", "ib_send_bw"):
        s[t + "_64k"] = med(bw.get(t, {}).get(65536, []))
        peak = max(((g, k) for k, v in bw.get(t, {}).items() for g in [med(v)] if g is not None), default=None)
        s[t + "_peak"] = {"gbps": peak[0], "size": peak[1]} if peak else None
    s["ib_write_bw_1m"] = med(bw.get("ib_write_bw", {}).get(1048576, []))
    s["udp_gso"] = med([r["result"]["gbps"] for r in good(path=p, kind="udp_gso")])
    s["msgrate_8b_mpps"] = med([r["result"]["mpps"] for r in good(path=p, kind="perftest_bw", tool="ib_write_bw", size=8, qps=1)])
    s["cpu_s_per_gb"] = {}
    s["cpu_fixed_s"] = {}
    for t, events, name in (("ib_write_bw", False, "ib_write_bw 64KiB"), ("ib_read_bw", False, "ib_read_bw 64KiB"),
                            ("ib_send_bw", False, "ib_send_bw 64KiB"),
                            # the program sleeping on a completion channel (perftest
                            # -e), as iperf3 sleeps in recv: what a waiting app pays
                            ("ib_send_bw", True, "ib_send_bw 64KiB events")):
        runs = [r for r in good(path=p, kind="perftest_bw", tool=t, size=65536, qps=1)
                if r.get("mode") == "n" and bool(r.get("events")) == events]
        fixed = fixed_cost([r for r in runs if r.get("phase") == "fixed"])
        key = [r for r in runs if r.get("phase") == "key"]
        s["cpu_s_per_gb"][name] = med([cpu_per_gb(r, r["result"]["iters"] * r["size"], fixed) for r in key])
        if fixed:
            s["cpu_fixed_s"][name] = fixed[0]
    s["ib_send_bw_64k_events"] = med([r["result"]["gbps"] for r in good(
        path=p, kind="perftest_bw", tool="ib_send_bw", size=65536, qps=1, events=True, phase="key")])
    for proto in ("tcp", "udp"):
        rs = good(path=p, kind="iperf3", tool="iperf3_" + proto)
        s["iperf3_" + proto] = med([r["result"]["gbps"] for r in rs])
        s["iperf3_" + proto + "_runs"] = len(rs)
        s["cpu_s_per_gb"]["iperf3 " + proto.upper()] = med([cpu_per_gb(r, r["result"]["bytes"]) for r in rs])
        if proto == "udp":
            s["iperf3_udp_lost_percent"] = med([r["result"]["lost_percent"] for r in rs])
            s["iperf3_udp_len"] = rs[0]["size"] if rs else None
    lat = {}
    for t in ("ib_send_lat", "ib_write_lat", "ib_read_lat"):
        by = defaultdict(list)
        for r in good(path=p, kind="perftest_lat", tool=t):
            by[r["size"]].append(r["result"])
        lat[t] = {str(k): {f: med([x[f] for x in v]) for f in ("min", "typical", "avg", "p99", "p999", "max")} | {"runs": len(v)}
                  for k, v in sorted(by.items())}
    for proto in ("udp", "tcp"):
        v = [r["result"] for r in good(path=p, kind="sockperf", tool="sockperf_" + proto)]
        lat["sockperf_" + proto] = {"14": {f: med([x.get(f) for x in v]) for f in ("min", "typical", "avg", "p99", "p999", "max")} | {"runs": len(v)}} if v else {}
    for proto in ("udp", "tcp"):
        v = [r["result"] for r in good(path=p, kind="pingpong", tool="pingpong_" + proto)]
        lat["pingpong_" + proto] = {"8": {f: med([x.get(f) for x in v]) for f in ("typical", "avg", "p99")} | {"runs": len(v)}} if v else {}
    s["lat_us"] = lat
    q = {}
    rss = {}
    for r in good(path=p, kind="perftest_bw", tool="ib_write_bw", size=65536, phase="qps"):
        q.setdefault(r["qps"], []).append(r["result"]["gbps"])
        if r["client_meter"] and r["server_meter"]:
            rss.setdefault(r["qps"], []).append((r["client_meter"]["maxrss_kb"], r["server_meter"]["maxrss_kb"]))
    s["qps_gbps"] = {str(k): med(v) for k, v in sorted(q.items())}
    if rss:
        lo_q, hi_q = min(rss), max(rss)
        if hi_q > lo_q:
            c = (med([x[0] for x in rss[hi_q]]) - med([x[0] for x in rss[lo_q]])) / (hi_q - lo_q)
            sv = (med([x[1] for x in rss[hi_q]]) - med([x[1] for x in rss[lo_q]])) / (hi_q - lo_q)
            s["perftest_rss_per_qp_kib"] = {"client": c, "server": sv, "from": [lo_q, hi_q]}

idle = {r["phase"]: r["result"] for r in good(kind="idle_qps")}

# --------------------------------------------------------------- targets
def fmt(v, nd=2):
    if v is None:
        return "–"
    if isinstance(v, float):
        if abs(v) >= 100:
            return f"{v:.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.{nd}f}"
    return str(v)


def fx(v):
    return "–" if v is None else f"{v:.2f}x"


targets = []


def target(name, path, value, limit, ok, detail):
    st = "SKIP" if ok is None else ("PASS" if ok else "MISS")
    targets.append({"target": name, "path": path, "value": value, "limit": limit, "status": st, "detail": detail})


def ratio(a, b):
    return a / b if a is not None and b else None


# Issue 15's targets, each per path, ratios within this run.
CORES = os.cpu_count() or 1
for p in path_list:
    s = S[p]
    rt = ratio(s["ib_write_bw_64k"], s["iperf3_tcp"])
    target("ib_write_bw 64 KiB >= 2x single-stream TCP", p, rt, 2.0, None if rt is None else rt >= 2.0,
           f"{fmt(s['ib_write_bw_64k'])} vs {fmt(s['iperf3_tcp'])} Gb/s")
for p in path_list:
    s = S[p]
    rt = ratio(s["ib_write_bw_1m"], s["udp_gso"])
    target("ib_write_bw 1 MiB >= 0.5x the UDP GSO/GRO ceiling", p, rt, 0.5, None if rt is None else rt >= 0.5,
           f"{fmt(s['ib_write_bw_1m'])} vs {fmt(s['udp_gso'])} Gb/s")
for p in path_list:
    q = [(int(k), v) for k, v in S[p]["qps_gbps"].items() if v is not None]
    q.sort()
    if len(q) < 2:
        target("aggregate bandwidth never falls 1..64 QPs", p, None, None, None, "fewer than 2 QP counts measured")
        continue
    worst = min(b[1] / a[1] for a, b in zip(q, q[1:]) if a[1] > 0) if all(x[1] > 0 for x in q) else 0
    target("aggregate bandwidth never falls 1..64 QPs", p, worst, 1 - QP_TOLERANCE, worst >= 1 - QP_TOLERANCE,
           "worst step ratio; " + " / ".join(f"{k} QPs {fmt(v)}" for k, v in q) + " Gb/s")
    d = dict(q)
    rt = ratio(d.get(4), d.get(1))
    if CORES < 8:
        target("aggregate bandwidth 1 -> 4 QPs >= 2x (with spare cores)", p, rt, 2.0, None,
               f"{CORES} cores: no spare cores for more engines (the 2x applies from 8)")
    else:
        target("aggregate bandwidth 1 -> 4 QPs >= 2x (with spare cores)", p, rt, 2.0, None if rt is None else rt >= 2.0,
               f"{fmt(d.get(1))} -> {fmt(d.get(4))} Gb/s on {CORES} cores")
for p in path_list:
    s = S[p]
    a = s["lat_us"].get("ib_send_lat", {}).get("2", {}).get("typical")
    b = s["lat_us"].get("sockperf_udp", {}).get("14", {}).get("typical")
    rt = ratio(a, b)
    target("ib_send_lat 2 B p50 <= 1.1x UDP ping-pong", p, rt, 1.1, None if rt is None else rt <= 1.1,
           f"{fmt(a)} vs {fmt(b)} us")
    a = s["lat_us"].get("ib_send_lat", {}).get("2", {}).get("p99")
    b = s["lat_us"].get("sockperf_udp", {}).get("14", {}).get("p99")
    rt = ratio(a, b)
    target("ib_send_lat 2 B p99 <= 3x UDP ping-pong p99", p, rt, 3.0, None if rt is None else rt <= 3.0,
           f"{fmt(a)} vs {fmt(b)} us")
for p in path_list:
    c = S[p]["cpu_s_per_gb"]
    a, b = c.get("ib_write_bw 64KiB"), c.get("iperf3 TCP")
    rt = ratio(a, b)
    target("CPU-s per GB, ib_write_bw 64 KiB <= 1.0x TCP", p, rt, 1.0, None if rt is None else rt <= 1.0,
           f"{fmt(a, 3)} vs {fmt(b, 3)} CPU-s/GB (perftest polls its CQ: a busy core counted)")
    a = c.get("ib_send_bw 64KiB events")
    rt = ratio(a, b)
    target("CPU-s per GB, ib_send_bw 64 KiB waiting on completion events (-e) <= 1.0x TCP", p, rt, 1.0,
           None if rt is None else rt <= 1.0, f"{fmt(a, 3)} vs {fmt(b, 3)} CPU-s/GB")
k = idle.get("qps10k")
target("10,000 QPs open in one process", "lo", k["qps_created"] if k else None, 10000,
       None if not k else k["qps_created"] >= 10000, "created")
target("10,000 QPs connected in one process, each pair carrying a WRITE", "lo",
       k["pairs_written"] * 2 if k else None, 10000, None if not k else bool(k["ok"]),
       "" if not k or k["ok"] else f"{k['qps_connected']} connected; {k['failed_at']}: {k['error']} {k.get('wc_status') or ''}".strip())
k = idle.get("qps64k")
target("64,000 QPs connected on one host (4 processes)", "lo", k["qps_connected"] if k else None, 64000,
       None if not k else k["qps_connected"] >= 64000, "connected")
target("64,000 QPs on one host, each pair carrying a WRITE at once (extra)", "lo",
       k["pairs_written"] * 2 if k else None, 64000, None if not k else bool(k["ok"]),
       "" if not k or k["ok"] else f"{k['procs_ok']} of {k['procs']} processes completed; {k['failed_at']}: {k['error']} {k.get('wc_status') or ''}".strip())
k = idle.get("idle1000")
target("idle process with 1,000 connected QPs < 1% of a core", "lo", k["idle_cpu_pct"] if k and k["ok"] else None, 1.0,
       None if not k or not k["ok"] else k["idle_cpu_pct"] < 1.0,
       f"% of a core, {k['qps_connected']} QPs" if k else "")

# ---------------------------------------------------------------- machine
def cpu_model():
    for l in read("/proc/cpuinfo").splitlines():
        if l.startswith("model name"):
            return l.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def meminfo():
    m = re.search(r"MemTotal:\s+(\d+)", read("/proc/meminfo"))
    return int(m.group(1)) // 1024 if m else None


machine = {"cores": os.cpu_count(), "cpu_model": cpu_model(), "kernel": platform.release(),
           "uname": " ".join(platform.uname()), "mem_mib": meminfo(),
           "governor": read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").strip() or None,
           "python": platform.python_version()}

def crc_note(st):
    """Which CRC-32 the ICRC ran on, and its speed on 4 KiB here."""
    c = st.get("crc")
    if not isinstance(c, dict):
        return ""
    env = st.get("crc_env", "auto")
    name = c.get("auto") if env in ("", "auto") else env
    speed = (c.get(name) or {}).get("4096")
    return (f" ICRC: {name} CRC-32" + (f" ({speed:.1f} GB/s on 4 KiB, bench/crc_speed)" if speed else "")
            + ".")


# ---------------------------------------------------------------- markdown
def lat(p, tool, size, f="typical"):
    return S[p]["lat_us"].get(tool, {}).get(str(size), {}).get(f)


rows = []


def row(label, fn):
    rows.append("| " + label + " | " + " | ".join(fn(p) for p in path_list) + " |")


hdr = "| | " + " | ".join(f"{p} (MTU {S[p]['mtu']})" for p in path_list) + " |"
rows.append(hdr)
rows.append("|---|" + "---:|" * len(path_list))
row("**ib_write_bw 64 KiB**, Gb/s", lambda p: fmt(S[p]["ib_write_bw_64k"]))
row("ib_read_bw 64 KiB, Gb/s", lambda p: fmt(S[p]["ib_read_bw_64k"]))
row("ib_send_bw 64 KiB, Gb/s", lambda p: fmt(S[p]["ib_send_bw_64k"]))
row("iperf3 TCP, 1 stream, Gb/s", lambda p: fmt(S[p]["iperf3_tcp"]))
row("iperf3 UDP (received), Gb/s", lambda p: fmt(S[p]["iperf3_udp"]) + (f" ({S[p]['iperf3_udp_len']} B, {fmt(S[p]['iperf3_udp_lost_percent'], 0)}% lost)" if S[p]["iperf3_udp"] is not None else ""))
row("**uroce/TCP** (ib_write_bw 64 KiB / iperf3 TCP)", lambda p: fx(ratio(S[p]["ib_write_bw_64k"], S[p]["iperf3_tcp"])))
row("**uroce/UDP** (ib_write_bw 64 KiB / iperf3 UDP)", lambda p: fx(ratio(S[p]["ib_write_bw_64k"], S[p]["iperf3_udp"])))
row("UDP GSO/GRO ceiling (udp_gso), Gb/s", lambda p: fmt(S[p]["udp_gso"]))
row("ib_write_bw 1 MiB, Gb/s", lambda p: fmt(S[p]["ib_write_bw_1m"]))
row("**uroce/UDP GSO** (ib_write_bw 1 MiB / UDP GSO)", lambda p: fx(ratio(S[p]["ib_write_bw_1m"], S[p]["udp_gso"])))
row("ib_write_bw best of the sweep, Gb/s (size)", lambda p: (f"{fmt(S[p]['ib_write_bw_peak']['gbps'])} ({S[p]['ib_write_bw_peak']['size']} B)" if S[p]["ib_write_bw_peak"] else "–"))
row("ib_write_bw 8 B message rate, Mpps", lambda p: fmt(S[p]["msgrate_8b_mpps"], 3))
row("**ib_send_lat 2 B** typical, us", lambda p: fmt(lat(p, "ib_send_lat", 2)))
row("ib_write_lat 2 B typical, us", lambda p: fmt(lat(p, "ib_write_lat", 2)))
row("ib_read_lat 2 B typical, us (full round trip)", lambda p: fmt(lat(p, "ib_read_lat", 2)))
row("sockperf UDP half RTT median, us", lambda p: fmt(lat(p, "sockperf_udp", 14)))
row("sockperf TCP half RTT median, us", lambda p: fmt(lat(p, "sockperf_tcp", 14)))
row("**uroce/UDP latency** (ib_send_lat / sockperf UDP)", lambda p: fx(ratio(lat(p, "ib_send_lat", 2), lat(p, "sockperf_udp", 14))))
row("uroce/TCP latency (ib_send_lat / sockperf TCP)", lambda p: fx(ratio(lat(p, "ib_send_lat", 2), lat(p, "sockperf_tcp", 14))))
row("polled UDP / TCP ping-pong half RTT p50, us (pingpong)", lambda p: f"{fmt(lat(p, 'pingpong_udp', 8))} / {fmt(lat(p, 'pingpong_tcp', 8))}")
row("uroce/polled UDP latency (ib_send_lat / pingpong UDP)", lambda p: fx(ratio(lat(p, "ib_send_lat", 2), lat(p, "pingpong_udp", 8))))
row("ib_send_lat 2 B p99 / sockperf UDP p99, us", lambda p: f"{fmt(lat(p, 'ib_send_lat', 2, 'p99'))} / {fmt(lat(p, 'sockperf_udp', 14, 'p99'))}")
QPL = sorted({int(k) for p in path_list for k in S[p]["qps_gbps"]})
row("ib_write_bw 64 KiB x " + "/".join(map(str, QPL)) + " QPs, Gb/s",
    lambda p: " / ".join(fmt(S[p]["qps_gbps"].get(str(k))) for k in QPL) or "–")
row("CPU-s per GB: ib_write_bw 64 KiB (polling)", lambda p: fmt(S[p]["cpu_s_per_gb"].get("ib_write_bw 64KiB"), 3))
row("CPU-s per GB: ib_send_bw 64 KiB, completion events (-e)", lambda p: fmt(S[p]["cpu_s_per_gb"].get("ib_send_bw 64KiB events"), 3))
row("fixed CPU-s of one perftest pair, subtracted above (polling / -e)", lambda p: " / ".join(
    fmt(S[p]["cpu_fixed_s"].get(k), 3) for k in ("ib_write_bw 64KiB", "ib_send_bw 64KiB events")))
row("ib_send_bw 64 KiB with completion events, Gb/s", lambda p: fmt(S[p].get("ib_send_bw_64k_events")))
row("CPU-s per GB: iperf3 TCP", lambda p: fmt(S[p]["cpu_s_per_gb"].get("iperf3 TCP"), 3))
row("CPU-s per GB: iperf3 UDP", lambda p: fmt(S[p]["cpu_s_per_gb"].get("iperf3 UDP"), 3))
row("RSS per QP, perftest -q 64 vs -q 1 (client/server), KiB", lambda p: (lambda m: f"{fmt(m['client'], 1)} / {fmt(m['server'], 1)}" if m else "–")(S[p].get("perftest_rss_per_qp_kib")))

md = []
st = settings
md.append(f"# uroce benchmarks: run {RUN_ID}")
md.append("")
md.append(f"{'Quick (BENCH_QUICK=1)' if st.get('quick') else 'Full'} run, "
          f"{st.get('started', '?')} .. {st.get('ended', '?')} ({st.get('elapsed_s', '?')} s), "
          f"repeat {st.get('repeat', '?')} (medians), uroce {str(st.get('commit', '?'))[:12]}{' (dirty tree)' if st.get('dirty') else ''}"
          f"{'' if str(st.get('uroce_build', '')).endswith('/build') and str(st.get('uroce_build', '')).startswith(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) else ' built in ' + str(st.get('uroce_build'))}.")
md.append(f"Machine: {machine['cores']} cores, {machine['cpu_model']}, kernel {machine['kernel']}, {machine['mem_mib']} MiB; "
          f"load average {st.get('loadavg_start', '?')} at the start, {st.get('loadavg_end', '?')} at the end. "
          f"perftest {st.get('versions', {}).get('perftest', '?')}, iperf3 {st.get('versions', {}).get('iperf3', '?')}, "
          f"sockperf {st.get('versions', {}).get('sockperf', '?')}." + crc_note(st))
md.append("")
md += rows
md.append("")
if idle:
    i1, k = idle.get("idle1000"), idle.get("qps10k")
    if i1:
        md.append(f"- Idle process holding {i1['qps_connected']} connected QPs ({i1['pairs']} pairs, loopback): "
                  f"{fmt(i1['idle_cpu_pct'], 3)}% of a core over {fmt(i1['idle_secs'], 1)} s "
                  f"({fmt(i1['idle_wakeups_per_s'], 1)} context switches/s); RSS {i1['rss_kb']} KiB, "
                  f"{fmt(i1['rss_per_qp_bytes'] / 1024, 2)} KiB per QP (depth 4); create {fmt(i1['create_s'], 3)} s, connect {fmt(i1['connect_s'], 3)} s."
                  + ("" if i1["ok"] else f" Stopped at {i1['failed_at']}: {i1['error']}."))
    if k:
        md.append(f"- 10,000 QPs in one process: {k['qps_created']} created, {k['qps_connected']} connected, "
                  f"{k['pairs_written']} of {k['pairs']} pairs moved a WRITE"
                  + ("." if k["ok"] else f"; stopped at {k['failed_at']}: {k['error']}"
                     + (f" (completion status: {k['wc_status']})" if k.get("wc_status") else "")
                     + f"; RLIMIT_NOFILE {k['nofile_soft']}/{k['nofile_hard']}."))
    m = idle.get("qps64k")
    if m:
        md.append(f"- {m['qps_wanted']:,} QPs on one host ({m['procs']} processes at once): {m['qps_connected']:,} connected, "
                  f"{m['pairs_written']:,} of {m['pairs']:,} pairs moved a WRITE ({m['procs_ok']} of {m['procs']} processes completed"
                  + (")." if m["ok"] else f"; others stopped at {m['failed_at']}: {m['error']} ({m['wc_status']}))."))
md.append("")
md.append("Targets (issue 15; the QP-count and idle ones from issues 5 and 11):")
md.append("")
for t in targets:
    v = t["value"]
    vs = "–" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
    md.append(f"- {t['status']} {t['target']} [{t['path']}]: {vs} (limit {t['limit']}){'; ' + t['detail'] if t['detail'] else ''}")
fails = st.get("failed_steps") or []
bad = [r["id"] for r in records if not r.get("ok") and not r.get("skipped")]
if fails or bad:
    md.append("")
    md.append(f"Broken runs ({len(set(fails) | set(bad))}): " + ", ".join(sorted(set(fails) | set(bad))) + " (raw output: build/bench/logs/).")
sk = sorted({r["tool"] + ": " + r["skipped"] for r in records if r.get("skipped")})
if sk:
    md.append("")
    md.append("Skipped: " + "; ".join(sk))
md_text = "\n".join(md) + "\n"

# ------------------------------------------------------------------ plots
plots = os.path.join(OUTDIR, "plots")
os.makedirs(plots, exist_ok=True)
plot_status = "not made"
gnuplot = shutil.which("gnuplot") if os.environ.get("BENCH_GNUPLOT", "1") != "0" else None
gp = []
for p in path_list:
    s = S[p]
    for t in ("ib_write_bw", "ib_read_bw", "ib_send_bw"):
        with open(os.path.join(plots, f"bw-{p}-{t}.dat"), "w") as f:
            for k, v in s["bw_gbps"].get(t, {}).items():
                if v is not None:
                    f.write(f"{k} {v}\n")
    lines = []
    for t, c in (("ib_write_bw", 1), ("ib_read_bw", 2), ("ib_send_bw", 3)):
        if s["bw_gbps"].get(t):
            lines.append(f"'{plots}/bw-{p}-{t}.dat' using 1:2 with linespoints lc {c} pt 7 title '{t} (uroce)'")
    if s["iperf3_tcp"] is not None:
        lines.append(f"{s['iperf3_tcp']} with lines lc 7 dt 2 lw 2 title 'iperf3 TCP 1 stream'")
    if s["iperf3_udp"] is not None:
        lines.append(f"{s['iperf3_udp']} with lines lc 4 dt 3 lw 2 title 'iperf3 UDP {s['iperf3_udp_len']} B'")
    if lines:
        gp.append(f"""set terminal svg size 900,560 dynamic font 'sans,12' noenhanced
set output '{plots}/bw-{p}.svg'
set title 'Bandwidth vs message size: {p} (MTU {s["mtu"]}), run {RUN_ID}'
set logscale x 2
set format x '%.0b%BB'
set xlabel 'message size (bytes)'
set ylabel 'Gb/s'
set yrange [0:*]
set grid
set key left top
plot {', '.join(lines)}
unset logscale x
set format x '%g'
""")
    # latency percentiles
    cats = [("min", "min"), ("typical", "median/typical"), ("p99", "99%"), ("p999", "99.9%"), ("max", "max")]
    series = [("ib_send_lat", "2", "ib_send_lat 2 B"), ("ib_write_lat", "2", "ib_write_lat 2 B"),
              ("ib_read_lat", "2", "ib_read_lat 2 B (full round trip)"), ("sockperf_udp", "14", "sockperf UDP"),
              ("sockperf_tcp", "14", "sockperf TCP")]
    lines = []
    for n, (t, sz, title) in enumerate(series):
        d = s["lat_us"].get(t, {}).get(sz)
        if not d:
            continue
        fn = os.path.join(plots, f"lat-{p}-{t}.dat")
        with open(fn, "w") as f:
            for i, (c, lab) in enumerate(cats):
                if d.get(c) is not None:
                    f.write(f"{i} {d[c]} \"{lab}\"\n")
        lines.append(f"'{fn}' using 1:2:xtic(3) with linespoints lc {n + 1} pt 7 lw 2 title '{title}'")
    if lines:
        gp.append(f"""set terminal svg size 900,560 dynamic font 'sans,12' noenhanced
set output '{plots}/lat-{p}.svg'
set title 'Latency percentiles (half round trip unless noted): {p} (MTU {s["mtu"]}), run {RUN_ID}'
set logscale y
set xlabel 'percentile'
set ylabel 'microseconds'
set xrange [-0.3:4.3]
set yrange [*:*]
set grid
set key left top
plot {', '.join(lines)}
unset logscale y
unset xtics
set xtics
set xrange [*:*]
""")
lines = []
for n, p in enumerate(path_list):
    fn = os.path.join(plots, f"qps-{p}.dat")
    with open(fn, "w") as f:
        for k, v in S[p]["qps_gbps"].items():
            if v is not None:
                f.write(f"{k} {v}\n")
    if S[p]["qps_gbps"]:
        lines.append(f"'{fn}' using 1:2 with linespoints lc {n + 1} pt 7 lw 2 title '{p}'")
if lines:
    gp.append(f"""set terminal svg size 900,560 dynamic font 'sans,12' noenhanced
set output '{plots}/qps.svg'
set title 'ib_write_bw 64 KiB aggregate bandwidth vs QPs, run {RUN_ID}'
set logscale x 2
set xlabel 'QPs'
set ylabel 'Gb/s'
set yrange [0:*]
set grid
set key left bottom
plot {', '.join(lines)}
""")
if gnuplot and gp:
    with open(os.path.join(plots, "plots.gp"), "w") as f:
        f.write("\n".join(gp))
    r = subprocess.run([gnuplot, os.path.join(plots, "plots.gp")], capture_output=True, text=True, timeout=60)
    plot_status = "ok" if r.returncode == 0 else "gnuplot failed: " + r.stderr.strip()[-300:]
elif not gnuplot:
    plot_status = "gnuplot not installed"
if plot_status == "ok":
    md_text += ("\nPlots: " + ", ".join(f"plots/bw-{p}.svg" for p in path_list) + ", "
                + ", ".join(f"plots/lat-{p}.svg" for p in path_list) + ", plots/qps.svg.\n")
else:
    md_text += f"\n(plots: {plot_status})\n"

# ------------------------------------------------------------------ write
result = {"schema": 1, "run_id": RUN_ID, "settings": settings, "machine": machine,
          "paths": [paths[p] for p in path_list], "summary": S, "idle_qps": idle,
          "targets": targets, "plots": plot_status, "records": records}
os.makedirs(OUTDIR, exist_ok=True)
with open(os.path.join(OUTDIR, RUN_ID + ".json"), "w") as f:
    json.dump(result, f, indent=1)
shutil.copyfile(os.path.join(OUTDIR, RUN_ID + ".json"), os.path.join(OUTDIR, "latest.json"))
with open(os.path.join(OUTDIR, "latest.md"), "w") as f:
    f.write(md_text)
with open(os.path.join(OUTDIR, RUN_ID + ".md"), "w") as f:
    f.write(md_text)

print("\n".join(rows))
print()
for line in md_text.splitlines():
    if line.startswith("- Idle") or line.startswith("- 10,000"):
        print(line)
print()
for t in targets:
    v = t["value"]
    vs = "n/a" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
    print(f"{t['status']} {t['target']} [{t['path']}]: {vs} (limit {t['limit']}){'; ' + t['detail'] if t['detail'] else ''}")
if plot_status != "ok":
    print(f"plots: {plot_status}")
