#!/usr/bin/env bash
# bench/loss.sh: goodput versus loss rate, go-back-N against selective
# repeat (`make bench-loss`; `make bench` runs it after bench/run.sh).
# RDMA WRITEs of 1 MiB on loopback with injected receive-side loss
# (UROCE_LOSS, both processes/contexts, data and ACKs alike), measured two
# ways: bench/loss_bw.c (one QP pair, two device contexts, waits on a
# completion channel) and unmodified ib_write_bw between two processes
# (whose pollers spin: on 2 cores they compete with the engines).
#
#   bench/loss.sh                full: 3 repeats, 3 s a point (~5 min)
#   BENCH_QUICK=1 bench/loss.sh  1 repeat, 2 s a point (~1.5 min)
#
# Knobs: BENCH_REPEAT, BENCH_LOSS_S (seconds a point), BENCH_LOSSES
# ("0 0.0001 0.001 0.01 0.05"), BENCH_LOSS_TOOLS ("loss_bw ib_write_bw"),
# BENCH_OUT (build/bench). Results: $BENCH_OUT/loss-<run>.json,
# loss-latest.json, loss-latest.md, plots/goodput-loss.svg (gnuplot).
# Traffic stays on 127.0.0.1 (UROCE_NETDEV=lo). Exit 0 unless a run broke.
set -u
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

QUICK=${BENCH_QUICK:-0}
if [ "$QUICK" = 1 ]; then REPEAT=${BENCH_REPEAT:-1} SECS=${BENCH_LOSS_S:-2}
else REPEAT=${BENCH_REPEAT:-3} SECS=${BENCH_LOSS_S:-3}; fi
LOSSES=${BENCH_LOSSES:-"0 0.0001 0.001 0.01 0.05"}
TOOLS=${BENCH_LOSS_TOOLS:-"loss_bw ib_write_bw"}
OUT=${BENCH_OUT:-$TOP/build/bench}
case $OUT in /*) ;; *) OUT=$TOP/$OUT ;; esac
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
LOSS_BW=$BUILD/bench/loss_bw
[ -x "$LOSS_BW" ] || { echo "bench-loss: no $LOSS_BW: run make" >&2; exit 1; }
command -v ib_write_bw >/dev/null || TOOLS=${TOOLS//ib_write_bw/}
export UROCE_NETDEV=lo
lib_init
mkdir -p "$OUT/plots"
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
REC=$LOGDIR/loss.jsonl
: >"$REC"
FAILED=()
n_modes=2 n_loss=$(wc -w <<<"$LOSSES") n_tools=$(wc -w <<<"$TOOLS")
say "bench-loss: $((n_modes * n_loss * n_tools * REPEAT)) runs of ${SECS}s (about $(fmt_s $((n_modes * n_loss * n_tools * REPEAT * (SECS + 2))))), losses: $LOSSES, tools: $TOOLS"

# one_run TOOL MODE LOSS REP: appends {"tool","mode","loss","rep","ok","gbps"} to $REC
one_run() {
	local tool=$1 mode=$2 loss=$3 rep=$4 dir gbps="null" ok=false
	dir=$LOGDIR/$tool.$mode.$loss.r$rep
	mkdir -p "$dir"
	local -a envs=(env UROCE_RETRANS="$mode" UROCE_LOSS="$loss" UROCE_SEED="$rep")
	if [ "$tool" = loss_bw ]; then
		if timeout -k 5 "$T_TIMEOUT" "${envs[@]}" "$LOSS_BW" -s 1048576 -t "$SECS" >"$dir/out.json" 2>"$dir/err.log"; then
			gbps=$("$PY" -c 'import json,sys; d=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(d["gbps"] if d.get("ok") and d.get("verified") else "null")' "$dir/out.json" 2>/dev/null || echo null)
		fi
	else
		local port
		port=$(bench_port) || port=""
		local -a args=(-x 0 -F -p "$port" --report_gbits -s 1048576 -D "$SECS")
		if [ -n "$port" ] && bench_pair "$dir" lo lo uroce tcp "$port" exit \
			"${envs[@]}" ib_write_bw "${args[@]}" -- "${envs[@]}" ib_write_bw "${args[@]}" 127.0.0.1; then
			gbps=$(awk '$1 == 1048576 && NF >= 4 { v = $4 } END { print (v == "" ? "null" : v) }' "$dir/client.log")
		fi
	fi
	[ "$gbps" != null ] && ok=true || FAILED+=("$tool.$mode.$loss.r$rep")
	printf '{"tool":"%s","mode":"%s","loss":%s,"rep":%s,"ok":%s,"gbps":%s,"secs":%s}\n' \
		"$tool" "$mode" "$loss" "$rep" "$ok" "$gbps" "$SECS" >>"$REC"
}

i=0 total=$((n_modes * n_loss * n_tools * REPEAT))
PROG_TOTAL=$total
PROG_W_TOTAL=$((total * (SECS + 2)))
# interleaved: a disturbance of the noisy machine hits both modes alike
for ((r = 1; r <= REPEAT; r++)); do
	for loss in $LOSSES; do
		for tool in $TOOLS; do
			for mode in gbn sr; do
				i=$((i + 1))
				progress $((SECS + 2)) "$tool $mode loss $loss (rep $r)"
				one_run "$tool" "$mode" "$loss" "$r"
			done
		done
	done
done
[ "$PROG_TTY" = 1 ] && printf '\r\033[K'

# Reordering (issue 16): 64 KiB ibv_rc_pingpong (SEND, both directions)
# with UROCE_REORDER=0 and 8, and loss_bw (WRITE 1 MiB) under reorder 8,
# go-back-N and selective repeat, interleaved. BENCH_REORDER=0 skips it.
REORDER=${BENCH_REORDER_DEG:-8}
PP_N=${BENCH_PP_ITERS:-300}
# pp_run MODE DEG REP: appends {"tool":"pingpong",...,"us_iter"} to $REC
pp_run() {
	local mode=$1 deg=$2 rep=$3 dir port us=null ok=false
	dir=$LOGDIR/pingpong.$mode.$deg.r$rep
	mkdir -p "$dir"
	port=$(bench_port) || port=""
	local -a envs=(env UROCE_RETRANS="$mode" UROCE_REORDER="$deg" UROCE_SEED="$rep")
	local -a args=(-g 0 -p "$port" -s 65536 -n "$PP_N" -c)
	if [ -n "$port" ]; then
		timeout -k 5 60 "${envs[@]}" "$BUILD/bin/uroce" run -- ibv_rc_pingpong "${args[@]}" >"$dir/server.log" 2>&1 &
		sleep 0.3
		timeout -k 5 60 "${envs[@]}" "$BUILD/bin/uroce" run -- ibv_rc_pingpong "${args[@]}" 127.0.0.1 >"$dir/client.log" 2>&1
		wait
		us=$(awk '/usec\/iter/ { v = $(NF-1) } END { print (v == "" ? "null" : v) }' "$dir/client.log")
	fi
	[ "$us" != null ] && ok=true || FAILED+=("pingpong.$mode.$deg.r$rep")
	printf '{"tool":"pingpong","mode":"%s","reorder":%s,"rep":%s,"ok":%s,"us_iter":%s}\n' \
		"$mode" "$deg" "$rep" "$ok" "$us" >>"$REC"
}
# bw_reorder MODE DEG REP: loss_bw (WRITE 1 MiB) under reordering
bw_reorder() {
	local mode=$1 deg=$2 rep=$3 dir gbps=null ok=false
	dir=$LOGDIR/loss_bw-reorder.$mode.$deg.r$rep
	mkdir -p "$dir"
	if timeout -k 5 "$T_TIMEOUT" env UROCE_RETRANS="$mode" UROCE_REORDER="$deg" UROCE_SEED="$rep" \
		"$LOSS_BW" -s 1048576 -t "$SECS" >"$dir/out.json" 2>"$dir/err.log"; then
		gbps=$("$PY" -c 'import json,sys; d=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(d["gbps"] if d.get("ok") and d.get("verified") else "null")' "$dir/out.json" 2>/dev/null || echo null)
	fi
	[ "$gbps" != null ] && ok=true || FAILED+=("loss_bw-reorder.$mode.$deg.r$rep")
	printf '{"tool":"loss_bw-reorder","mode":"%s","reorder":%s,"rep":%s,"ok":%s,"gbps":%s}\n' \
		"$mode" "$deg" "$rep" "$ok" "$gbps" >>"$REC"
}
if [ "${BENCH_REORDER:-1}" = 1 ] && command -v ibv_rc_pingpong >/dev/null; then
	say "bench-loss: reordering (degree $REORDER): ibv_rc_pingpong 64 KiB x $PP_N and loss_bw, $REPEAT repeat(s)"
	for ((r = 1; r <= REPEAT; r++)); do
		for mode in gbn sr; do
			for deg in 0 "$REORDER"; do
				pp_run "$mode" "$deg" "$r"
				bw_reorder "$mode" "$deg" "$r"
			done
		done
	done
fi

BENCH_GNUPLOT=$(command -v gnuplot >/dev/null && echo 1 || echo 0) \
"$PY" - "$REC" "$OUT" "$RUN_ID" "$(git -C "$TOP" rev-parse HEAD 2>/dev/null || echo unknown)" <<'PYEOF'
import json, os, shutil, subprocess, sys
from statistics import median
rec, out, run_id, commit = sys.argv[1:5]
allrows = [json.loads(l) for l in open(rec) if l.strip()]
rows = [r for r in allrows if "loss" in r]
rrows = [r for r in allrows if "reorder" in r]
tools = [t for t in ("loss_bw", "ib_write_bw") if any(r["tool"] == t for r in rows)]
losses = sorted({r["loss"] for r in rows})
def med(tool, mode, loss):
    v = [r["gbps"] for r in rows if r["tool"] == tool and r["mode"] == mode and r["loss"] == loss and r["ok"]]
    return (median(v), len(v)) if v else (None, 0)
summary = {}
for t in tools:
    for m in ("gbn", "sr"):
        base = med(t, m, 0)[0]
        for l in losses:
            g, n = med(t, m, l)
            summary.setdefault(t, {}).setdefault(m, {})[str(l)] = {
                "gbps": g, "runs": n, "of_lossless": (g / base) if g is not None and base else None}
targets = []
for t in tools:
    s = summary[t]["sr"].get("0.01")
    if s:
        ok = s["of_lossless"] is not None and s["of_lossless"] >= 0.8
        targets.append({"target": "selective repeat keeps >= 80% of lossless goodput at 1% loss", "tool": t,
                        "value": s["of_lossless"], "status": "PASS" if ok else "MISS"})
reorder = {}
degs = sorted({r["reorder"] for r in rrows})
for tool, key in (("pingpong", "us_iter"), ("loss_bw-reorder", "gbps")):
    for m in ("gbn", "sr"):
        for d in degs:
            v = [r[key] for r in rrows if r["tool"] == tool and r["mode"] == m and r["reorder"] == d and r["ok"]]
            reorder.setdefault(tool, {}).setdefault(m, {})[str(d)] = median(v) if v else None
if rrows and len(degs) == 2:
    d = str(degs[1])
    for m, lim in (("gbn", 3.0), ("sr", 1.5)):
        a, b = reorder["pingpong"][m].get("0"), reorder["pingpong"][m].get(d)
        v = b / a if a and b else None
        targets.append({"target": f"64 KiB ping-pong under reorder {d}: at most {lim:g}x fault-free ({m.upper()})",
                        "tool": "ibv_rc_pingpong", "value": v, "ratio": True,
                        "status": "PASS" if v is not None and v <= lim else "MISS"})
    a, b = reorder["loss_bw-reorder"]["sr"].get("0"), reorder["loss_bw-reorder"]["sr"].get(d)
    v = b / a if a and b else None
    targets.append({"target": f"WRITE goodput under reorder {d}: at least 0.8x lossless (SR)",
                    "tool": "loss_bw", "value": v, "ratio": True,
                    "status": "PASS" if v is not None and v >= 0.8 else "MISS"})
res = {"run_id": run_id, "reorder": reorder, "commit": commit, "size": 1048576, "path": "lo", "loadavg": open("/proc/loadavg").read().split()[:3],
       "summary": summary, "targets": targets, "runs": rows}
for name in (f"loss-{run_id}.json", "loss-latest.json"):
    with open(os.path.join(out, name), "w") as f:
        json.dump(res, f, indent=1)
def f(v, pct=False):
    if v is None:
        return "–"
    return f"{100 * v:.0f}%" if pct else f"{v:.1f}"
md = [f"# Goodput versus loss (RDMA WRITE 1 MiB, loopback), run {run_id}", "",
      "Medians of the repeats; \"of lossless\" is the same mode and tool at 0% loss.", ""]
hdr = "| loss |" + "".join(f" {t} GBN Gb/s | of lossless | {t} SR Gb/s | of lossless |" for t in tools)
md += [hdr, "|---|" + "---:|" * (4 * len(tools))]
for l in losses:
    line = f"| {100 * l:g}% |"
    for t in tools:
        for m in ("gbn", "sr"):
            s = summary[t][m][str(l)]
            line += f" {f(s['gbps'])} | {f(s['of_lossless'], True)} |"
    md.append(line)
md.append("")
if rrows and len(degs) == 2:
    d = str(degs[1])
    md += ["", f"Reordering (UROCE_REORDER={d}; medians):", "",
           "| mode | ping-pong 64 KiB, fault-free us/iter | reordered us/iter | ratio | loss_bw WRITE 1 MiB Gb/s | reordered Gb/s | ratio |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for m in ("gbn", "sr"):
        pa, pb = reorder["pingpong"][m].get("0"), reorder["pingpong"][m].get(d)
        ba, bb = reorder["loss_bw-reorder"][m].get("0"), reorder["loss_bw-reorder"][m].get(d)
        md.append(f"| {m.upper()} | {f(pa)} | {f(pb)} | {f(pb / pa if pa and pb else None)}x |"
                  f" {f(ba)} | {f(bb)} | {f(bb / ba if ba and bb else None)}x |")
    md.append("")
for tg in targets:
    md.append(f"- {tg['status']}: {tg['target']} ({tg['tool']}): "
              f"{f(tg['value']) + 'x' if tg.get('ratio') else f(tg['value'], True)}")
open(os.path.join(out, "loss-latest.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
if os.environ.get("BENCH_GNUPLOT") == "1" and shutil.which("gnuplot"):
    plots = os.path.join(out, "plots")
    lines = []
    for t in tools:
        for m, c in (("gbn", 1), ("sr", 2)):
            fn = os.path.join(plots, f"loss-{t}-{m}.dat")
            with open(fn, "w") as fh:
                for l in losses:
                    g = summary[t][m][str(l)]["gbps"]
                    if g is not None:
                        fh.write(f"{max(100 * l, 0.001)} {g}\n")
            dt = 1 if t == "loss_bw" else 2
            lines.append(f"'{fn}' using 1:2 with linespoints lc {c} dt {dt} pt 7 title '{t} {m.upper()}'")
    gp = f"""set terminal svg size 900,560 dynamic font 'sans,12' noenhanced
set output '{plots}/goodput-loss.svg'
set title 'uroce RDMA WRITE 1 MiB goodput vs loss (loopback; 0% drawn at 0.001%)'
set logscale x
set xlabel 'loss (%)'
set ylabel 'Gb/s'
set grid
set key top right
plot {', '.join(lines)}
"""
    subprocess.run(["gnuplot"], input=gp, text=True, check=False)
PYEOF
rrc=$?
rm -rf "$OUT/loss-logs"
cp -r "$LOGDIR" "$OUT/loss-logs" 2>/dev/null
lib_cleanup
say "bench-loss: $OUT/loss-latest.md, $OUT/loss-latest.json, $OUT/plots/goodput-loss.svg, logs in $OUT/loss-logs/"
[ "$rrc" -eq 0 ] || { echo "bench-loss: the report failed" >&2; exit 1; }
[ ${#FAILED[@]} -eq 0 ] || { echo "bench-loss: ${#FAILED[@]} run(s) broke: ${FAILED[*]}" >&2; exit 1; }
exit 0
