#!/usr/bin/env bash
# bench/incast.sh: incast with and without DCQCN (`make bench-incast`; root).
#
# N senders (2, 4, 8 processes, bench/incast.c) in network namespace A
# write into one receiver process in namespace B across a veth pair
# (198.18.0.1 -> 198.18.0.2, MTU 9000, no default route), while a probe
# process in A does 64-byte RDMA READs from the receiver, one at a time.
# The bottleneck is the receiver's port: its engine reads at most
# UROCE_RX_RATE_GBPS (2), its socket buffer (UROCE_RCVBUF_KB, 1024: the
# kernel doubles it) is the switch buffer, and the engine marks ECT packets
# CE once that buffer holds more than UROCE_ECN_QUEUE_KB (64 KiB, rising to
# every packet at 512 KiB). The same marks are made in both modes; with
# UROCE_CC=none the senders ignore the CNPs, with dcqcn they cut their
# rates and pace. Each point reports, over the last SECS seconds (after a
# 0.5 s start): goodput per sender and in total, Jain's fairness index,
# drops (the receiver namespace's UDP RcvbufErrors), retransmitted packets
# and local ACK timeouts of the senders, and the probe's READ latency.
#
#   bench/incast.sh                full: 2 repeats, 4 s a point (about 1 min)
#   BENCH_QUICK=1 bench/incast.sh  1 repeat, 3 s a point (about 25 s)
#
# Knobs: BENCH_REPEAT, BENCH_INCAST_S, BENCH_INCAST_N ("2 4 8"),
# BENCH_INCAST_RX_GBPS (2), BENCH_INCAST_RCVBUF_KB (1024),
# BENCH_INCAST_ECN_KB ("64,512"), BENCH_OUT (build/bench). Other UROCE_CC_*
# variables pass through. Results: $BENCH_OUT/incast-<run>.json,
# incast-latest.json, incast-latest.md, plots/incast.svg (gnuplot).
# Exit 0 unless a run broke (the PASS/MISS lines are results, not errors).
set -u
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

QUICK=${BENCH_QUICK:-0}
if [ "$QUICK" = 1 ]; then REPEAT=${BENCH_REPEAT:-1} SECS=${BENCH_INCAST_S:-3}
else REPEAT=${BENCH_REPEAT:-2} SECS=${BENCH_INCAST_S:-4}; fi
WARM=0.5
NS_LIST=${BENCH_INCAST_N:-"2 4 8"}
RX_GBPS=${BENCH_INCAST_RX_GBPS:-2}
RCVBUF_KB=${BENCH_INCAST_RCVBUF_KB:-1024}
ECN_KB=${BENCH_INCAST_ECN_KB:-64,512}
OUT=${BENCH_OUT:-$TOP/build/bench}
case $OUT in /*) ;; *) OUT=$TOP/$OUT ;; esac
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
INCAST=$BUILD/bench/incast
[ -x "$INCAST" ] || { echo "bench-incast: no $INCAST: run make" >&2; exit 1; }
need_root >/dev/null || { echo "bench-incast: needs root (network namespaces)" >&2; exit 1; }
lib_init
ns_up 9000 || { echo "bench-incast: cannot create the namespaces" >&2; exit 1; }
mkdir -p "$OUT/plots"
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
REC=$LOGDIR/incast.jsonl
: >"$REC"
FAILED=()
n_pts=$(($(wc -w <<<"$NS_LIST") * 2 * REPEAT))
say "bench-incast: $n_pts runs of ${SECS}s (about $(fmt_s $((n_pts * (SECS + 3))))), senders: $NS_LIST; port ${RX_GBPS} Gb/s, buffer ${RCVBUF_KB} KiB (x2), CE marks at ${ECN_KB} KiB"

# The receiver namespace's UDP receive-buffer drops (/proc/net/snmp is per
# namespace).
rcvbuf_errors() {
	ip netns exec "$NS_B" awk '/^Udp:/ { if (h) print $6; h = 1 }' /proc/net/snmp
}

# one_run N MODE REP: appends the run's record to $REC
one_run() {
	local n=$1 mode=$2 rep=$3 dir xd i ok=true d0 d1
	dir=$LOGDIR/n$n.$mode.r$rep
	xd=$dir/x
	mkdir -p "$xd"
	local -a envs=(env UROCE_CC="$mode" UROCE_RX_RATE_GBPS="$RX_GBPS" UROCE_RCVBUF_KB="$RCVBUF_KB"
		UROCE_ECN_QUEUE_KB="$ECN_KB")
	local -a pids=()
	ns_prefix b
	timeout -k 5 "$T_TIMEOUT" "${NS_PREFIX[@]}" "${envs[@]}" "$INCAST" recv -d "$xd" -n "$n" \
		>"$dir/recv.json" 2>"$dir/recv.err" </dev/null &
	local rpid=$!
	echo "$rpid" >>"$LOGDIR/pids"
	ns_prefix a
	for ((i = 0; i < n; i++)); do
		timeout -k 5 "$T_TIMEOUT" "${NS_PREFIX[@]}" "${envs[@]}" "$INCAST" send -d "$xd" -i "$i" \
			-t "$SECS" -w "$WARM" >"$dir/send$i.json" 2>"$dir/send$i.err" </dev/null &
		pids+=($!)
		echo "$!" >>"$LOGDIR/pids"
	done
	timeout -k 5 "$T_TIMEOUT" "${NS_PREFIX[@]}" "${envs[@]}" "$INCAST" probe -d "$xd" -i "$n" \
		-t "$SECS" -w "$WARM" >"$dir/probe.json" 2>"$dir/probe.err" </dev/null &
	pids+=($!)
	echo "$!" >>"$LOGDIR/pids"
	# drops over the measured window only, as the goodput
	d0="" d1=""
	for ((i = 0; i < 600; i++)); do [ -s "$xd/go" ] && break; sleep 0.05; done
	if [ -s "$xd/go" ]; then
		local t0 now
		t0=$(cat "$xd/go")
		now=$(date +%s%N)
		sleep "$(awk -v a="$t0" -v b="$now" -v w="$WARM" 'BEGIN { s = (a - b) / 1e9 + w; print (s > 0 ? s : 0) }')"
		d0=$(rcvbuf_errors)
	fi
	# a sender may fail (RETRY_EXC_ERR under overload): recorded, not fatal
	for p in "${pids[@]}"; do wait "$p"; done
	d1=$(rcvbuf_errors)
	: >"$xd/stop"
	wait "$rpid" || ok=false
	[ -n "$d0" ] || ok=false
	"$PY" - "$dir" "$n" "$mode" "$rep" "$ok" "${d0:-0}" "${d1:-0}" "$SECS" >>"$REC" <<'PYEOF' || ok=false
import glob, json, os, sys
d, n, mode, rep, ok, d0, d1, secs = sys.argv[1:9]
def load(f):
    try:
        return json.loads(open(f).read().strip().splitlines()[-1])
    except Exception:
        return {"ok": False}
sends = [load(os.path.join(d, f"send{i}.json")) for i in range(int(n))]
probe, recv = load(os.path.join(d, "probe.json")), load(os.path.join(d, "recv.json"))
# measured when every process reported (a QP that failed reports too)
good = ok == "true" and all("role" in x for x in sends + [probe, recv]) and recv.get("ok")
qp_errors = sum(1 for x in sends + [probe] if not x.get("ok"))
g = [s.get("gbps", 0.0) for s in sends]
jain = sum(g) ** 2 / (len(g) * sum(x * x for x in g)) if sum(g) > 0 else None
c = lambda s, k: s.get("counters", {}).get(k, 0)
rc = recv.get("counters", {})
print(json.dumps({"senders": int(n), "mode": mode, "rep": int(rep), "ok": bool(good), "secs": float(secs),
    "gbps": g, "total_gbps": sum(g), "jain": jain, "qp_errors": qp_errors,
    "qp_error_status": sorted({x.get("status", "") for x in sends + [probe] if not x.get("ok")}), "drops": int(d1) - int(d0),
    "retrans_pkts": sum(c(s, "retrans_pkts") for s in sends), "timeouts": sum(c(s, "timeouts") for s in sends),
    "rate_cuts": sum(c(s, "cc_rate_cuts") for s in sends), "pace_waits": sum(c(s, "cc_pace_waits") for s in sends),
    "ecn_marked": rc.get("ecn_queue_marked", 0), "cnp_sent": rc.get("cnp_sent", 0),
    "probe_samples": probe.get("samples", 0), "probe_p50_us": probe.get("p50_us"), "probe_p99_us": probe.get("p99_us")}))
PYEOF
	$ok || FAILED+=("n$n.$mode.r$rep")
}

PROG_TOTAL=$n_pts
PROG_W_TOTAL=$((n_pts * (SECS + 3)))
# interleaved: a disturbance of the noisy machine hits both modes alike
for ((r = 1; r <= REPEAT; r++)); do
	for n in $NS_LIST; do
		for mode in none dcqcn; do
			progress $((SECS + 3)) "$n senders, $mode (rep $r)"
			one_run "$n" "$mode" "$r"
		done
	done
done
[ "$PROG_TTY" = 1 ] && printf '\r\033[K'

BENCH_GNUPLOT=$(command -v gnuplot >/dev/null && echo 1 || echo 0) \
"$PY" - "$REC" "$OUT" "$RUN_ID" "$(git -C "$TOP" rev-parse HEAD 2>/dev/null || echo unknown)" \
	"$RX_GBPS" "$RCVBUF_KB" "$ECN_KB" <<'PYEOF'
import json, os, shutil, subprocess, sys
from statistics import median
rec, out, run_id, commit, rx, rcvbuf, ecn = sys.argv[1:8]
rows = [json.loads(l) for l in open(rec) if l.strip()]
ns = sorted({r["senders"] for r in rows})
keys = ("total_gbps", "jain", "qp_errors", "drops", "retrans_pkts", "timeouts", "probe_p50_us", "probe_p99_us", "rate_cuts")
def med(n, m, k):
    v = [r[k] for r in rows if r["senders"] == n and r["mode"] == m and r["ok"] and r[k] is not None]
    return median(v) if v else None
summary = {str(n): {m: dict({k: med(n, m, k) for k in keys},
                             runs=sum(1 for r in rows if r["senders"] == n and r["mode"] == m and r["ok"]))
                    for m in ("none", "dcqcn")} for n in ns}
targets = []
def t(name, a, b, better):
    if a is None or b is None:
        st = "MISS"
    else:
        # "no lower" allows 0.005: two senders at 1.000 and 0.999 are
        # equal shares within one run's noise (a 0.1% byte difference)
        ok = {"lower": b < a, "higher": b > a, "no lower": b >= a - 0.005}[better]
        st = "PASS" if ok else "MISS"
    targets.append({"target": name, "none": a, "dcqcn": b, "status": st})
# the issue's target, in one run: over the sender counts both modes measured
both = [n for n in ns if all(summary[str(n)][m]["runs"] for m in ("none", "dcqcn"))]
label = "/".join(map(str, both)) or "no"
tot = lambda m, k: sum(summary[str(n)][m][k] or 0 for n in both) if both else None
t(f"with DCQCN, drops fall (sum over {label} senders)", tot("none", "drops"), tot("dcqcn", "drops"), "lower")
mj = lambda m: round(sum(summary[str(n)][m]["jain"] or 0 for n in both) / len(both), 3) if both else None
t(f"with DCQCN, Jain fairness rises (mean over {label} senders)", mj("none"), mj("dcqcn"), "higher")
for n in ns:
    s = summary[str(n)]
    t(f"{n} senders: drops fall", s["none"]["drops"], s["dcqcn"]["drops"], "lower")
    jn, jd = s["none"]["jain"], s["dcqcn"]["jain"]
    # equal at 1.000 is no loss of fairness: "no lower" per point, within 0.005
    t(f"{n} senders: fairness no lower", None if jn is None else round(jn, 3),
      None if jd is None else round(jd, 3), "no lower")
    t(f"{n} senders: probe p99 falls", s["none"]["probe_p99_us"], s["dcqcn"]["probe_p99_us"], "lower")
res = {"run_id": run_id, "commit": commit, "path": "veth between two namespaces, MTU 9000",
       "bottleneck": {"rx_gbps": float(rx), "rcvbuf_kb": int(rcvbuf), "ecn_queue_kb": ecn},
       "loadavg": open("/proc/loadavg").read().split()[:3], "summary": summary, "targets": targets, "runs": rows}
for name in (f"incast-{run_id}.json", "incast-latest.json"):
    with open(os.path.join(out, name), "w") as f:
        json.dump(res, f, indent=1)
def f(v, k=""):
    if v is None:
        return "–"
    if k == "jain":
        return f"{v:.3f}"
    if k in ("total_gbps",):
        return f"{v:.2f}"
    if isinstance(v, float) and k.startswith("probe"):
        return f"{v:.0f}"
    return f"{v:.0f}"
md = [f"# Incast: N senders into one {rx} Gb/s port, with and without DCQCN, run {run_id}", "",
      f"Veth between two namespaces; receive buffer {rcvbuf} KiB (x2 by the kernel), CE marks from {ecn.split(',')[0]} KiB of backlog. "
      "Medians of the repeats; drops over the measured window of each run, retransmissions and timeouts over the whole run; "
      "failed QPs: senders (or the probe) whose QP failed, e.g. with RETRY_EXC_ERR, under the overload.", "",
      "| senders | CC | goodput Gb/s | Jain | failed QPs | drops | retrans pkts | timeouts | rate cuts | probe p50 us | probe p99 us |",
      "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for n in ns:
    for m in ("none", "dcqcn"):
        s = summary[str(n)][m]
        md.append(f"| {n} | {m} | {f(s['total_gbps'], 'total_gbps')} | {f(s['jain'], 'jain')} | {f(s['qp_errors'])} | {f(s['drops'])} | "
                  f"{f(s['retrans_pkts'])} | {f(s['timeouts'])} | {f(s['rate_cuts'])} | {f(s['probe_p50_us'], 'probe')} | "
                  f"{f(s['probe_p99_us'], 'probe')} |")
md.append("")
for tg in targets:
    a = tg["none"]; b = tg["dcqcn"]
    fair = "fairness" in tg["target"]
    fmt = (lambda v: "–" if v is None else (f"{v:.3f}" if fair else f"{v:.0f}"))
    md.append(f"- {tg['status']}: {tg['target']}: none {fmt(a)}, dcqcn {fmt(b)}")
open(os.path.join(out, "incast-latest.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
if os.environ.get("BENCH_GNUPLOT") == "1" and shutil.which("gnuplot"):
    plots = os.path.join(out, "plots")
    fn = os.path.join(plots, "incast.dat")
    with open(fn, "w") as fh:
        for i, n in enumerate(ns):
            a, b = summary[str(n)]["none"], summary[str(n)]["dcqcn"]
            fh.write(f"{n} {a['total_gbps'] or 0} {b['total_gbps'] or 0} {a['jain'] or 0} {b['jain'] or 0} "
                     f"{a['drops'] or 0} {b['drops'] or 0} {a['probe_p99_us'] or 0} {b['probe_p99_us'] or 0}\n")
    gp = f"""set terminal svg size 1100,720 dynamic font 'sans,11' noenhanced
set output '{plots}/incast.svg'
set multiplot layout 2,2 title 'uroce incast into one {rx} Gb/s port: no CC (red) vs DCQCN (blue)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set grid ytics
set key below horizontal
set xlabel 'senders'
set yrange [0:*]
set title 'goodput (Gb/s)'
plot '{fn}' using 2:xtic(1) lc rgb '#c0392b' title 'none', '' using 3 lc rgb '#2e86c1' title 'dcqcn'
set title 'Jain fairness'
set yrange [0:1.05]
plot '{fn}' using 4:xtic(1) lc rgb '#c0392b' title 'none', '' using 5 lc rgb '#2e86c1' title 'dcqcn'
set yrange [0:*]
set title 'drops (receive buffer overflows)'
plot '{fn}' using 6:xtic(1) lc rgb '#c0392b' title 'none', '' using 7 lc rgb '#2e86c1' title 'dcqcn'
set title 'probe READ latency p99 (us)'
plot '{fn}' using 8:xtic(1) lc rgb '#c0392b' title 'none', '' using 9 lc rgb '#2e86c1' title 'dcqcn'
unset multiplot
"""
    subprocess.run(["gnuplot"], input=gp, text=True, check=False)
PYEOF
rrc=$?
rm -rf "$OUT/incast-logs"
cp -r "$LOGDIR" "$OUT/incast-logs" 2>/dev/null
lib_cleanup
say "bench-incast: $OUT/incast-latest.md, $OUT/incast-latest.json, $OUT/plots/incast.svg, logs in $OUT/incast-logs/"
[ "$rrc" -eq 0 ] || { echo "bench-incast: the report failed" >&2; exit 1; }
[ ${#FAILED[@]} -eq 0 ] || { echo "bench-incast: ${#FAILED[@]} run(s) broke: ${FAILED[*]}" >&2; exit 1; }
exit 0
