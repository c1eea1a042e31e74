#!/usr/bin/env bash
# bench/run.sh: uroce's benchmark harness (`make bench`). Unmodified perftest
# through `uroce run` side by side with the kernel's TCP and UDP (iperf3,
# sockperf) on the same paths: loopback, and a veth pair between two network
# namespaces at MTU 1500 and 9000 (root only). See docs/benchmarks.md.
#
#   bench/run.sh              full run (~15 min on 2 cores)
#   BENCH_QUICK=1 bench/run.sh   smoke run (~2-3 min: fewer sizes, 1 repeat)
#
# Knobs: BENCH_REPEAT=N (3; quick 1), BENCH_PATHS="lo veth1500 veth9000",
# BENCH_OUT=DIR (build/bench), BUILD=DIR (build), T_TIMEOUT=S (60, limit of
# every program), BENCH_SIZES="2 4 ..." (the bandwidth sweep), BENCH_D=S
# (seconds per sweep point, 1), BENCH_IDLE_S=S (5), BENCH_DRY=1 (print the
# plan and its estimated time, run nothing), BENCH_WITHOUT="TOOL ..." (act as
# if those tools were not installed).
# Results: $BENCH_OUT/<run>.json, latest.json, latest.md, plots/*.svg,
# logs/ (raw output of the last run). Exit 0 unless something broke (a run
# failed, the report could not be made); missed targets never fail it.
# shellcheck disable=SC2317  # the step functions run through eval
set -u
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

QUICK=${BENCH_QUICK:-0}
[ "$QUICK" = 1 ] || QUICK=0
if [ "$QUICK" = 1 ]; then
	REPEAT=${BENCH_REPEAT:-1}
	SIZES=${BENCH_SIZES:-"8 65536 1048576"}
	LAT_SIZES="2"
	QPS_LIST="1 4 16 64"
	IPERF_T=2 SOCKPERF_T=2 CPU_N=10000 CPU_FIXED_N=100 LAT_N=5000 PP_N=50000
	IDLE_S=${BENCH_IDLE_S:-3}
else
	REPEAT=${BENCH_REPEAT:-3}
	SIZES=${BENCH_SIZES:-"$(for ((i = 1; i <= 23; i++)); do printf '%d ' $((1 << i)); done)"}
	LAT_SIZES="2 64 4096 65536"
	QPS_LIST="1 4 16 64"
	IPERF_T=3 SOCKPERF_T=3 CPU_N=20000 CPU_FIXED_N=100 LAT_N=10000 PP_N=100000
	IDLE_S=${BENCH_IDLE_S:-5}
fi
BENCH_D=${BENCH_D:-1}
PATHS=${BENCH_PATHS:-"lo veth1500 veth9000"}
OUT=${BENCH_OUT:-$TOP/build/bench}
case $OUT in /*) ;; *) OUT=$TOP/$OUT ;; esac
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || true)

say "uroce bench: $([ "$QUICK" = 1 ] && echo "quick" || echo "full") run, repeat $REPEAT, paths: $PATHS"

# ------------------------------------------------------------ preconditions
if [ ! -x "$BUILD/bin/uroce" ] || [ ! -e "$BUILD/lib/libibverbs.so.1" ]; then
	echo "bench: no $BUILD/bin/uroce or $BUILD/lib/libibverbs.so.1: run make" >&2
	exit 1
fi
if [ -z "$PY" ]; then echo "bench: python3 is needed for the report" >&2; exit 1; fi
lib_init
mkdir -p "$OUT"
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
LOGS=$OUT/logs.new
rm -rf "$LOGS"
mkdir -p "$LOGS"
REC=$LOGS/records.jsonl
: >"$REC"

# A private copy of the build: others may rebuild build/ while we run.
SNAP=$LOGDIR/uroce
mkdir -p "$SNAP/bin" "$SNAP/lib"
if ! cp "$BUILD/bin/uroce" "$SNAP/bin/" || ! cp "$BUILD/lib/libibverbs.so.1" "$SNAP/lib/"; then
	echo "bench: cannot copy the build" >&2; exit 1
fi
[ -e "$BUILD/libexec" ] && cp -r "$BUILD/libexec" "$SNAP/" 2>/dev/null
UROCE=$SNAP/bin/uroce

# Tools: a missing one skips its part.
declare -A HAVE
MISSING=()
for t in ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_read_lat ib_send_lat iperf3 sockperf gnuplot cc; do
	if command -v "$t" >/dev/null 2>&1 && [[ " ${BENCH_WITHOUT:-} " != *" $t "* ]]; then
		HAVE[$t]=1
	else
		HAVE[$t]=0; MISSING+=("$t")
	fi
done
[ ${#MISSING[@]} -eq 0 ] || say "bench: not installed, skipped: ${MISSING[*]} (scripts/deps.sh bench installs them)"
have() { [ "${HAVE[$1]:-0}" = 1 ]; }
# sockperf server and client pinned to the first two allowed cores (BENCH_SOCKPERF_PIN=0: not)
SOCKPERF_PIN=${BENCH_SOCKPERF_PIN:-1}
read -r CPU_S CPU_C < <("$PY" -c 'import os; print(*sorted(os.sched_getaffinity(0))[:2])')
if [ "$SOCKPERF_PIN" = 1 ] && { [ -z "${CPU_C:-}" ] || ! command -v taskset >/dev/null 2>&1; }; then SOCKPERF_PIN=0; fi

# Paths: veth needs root (network namespaces).
WANT_PATHS=()
for p in $PATHS; do
	case $p in
	lo) WANT_PATHS+=(lo) ;;
	veth1500|veth9000)
		if [ -z "${NETNS_OK:-}" ]; then
			if netns_permitted; then NETNS_OK=1; else NETNS_OK=0; fi
		fi
		if [ "$NETNS_OK" = 1 ]; then WANT_PATHS+=("$p"); else
			say "bench: skipping $p: $NETNS_WHY (run as root for the veth paths)"; fi ;;
	*) say "bench: unknown path $p (lo, veth1500, veth9000)" ;;
	esac
done
[ ${#WANT_PATHS[@]} -gt 0 ] || { echo "bench: no path to measure" >&2; exit 1; }

FAILED_STEPS=()

# idle_qps: a tiny verbs program (public API only) holding many connected QPs
IDLE_BIN=""
if have cc; then
	if cc -O2 -std=gnu11 -Wall -o "$LOGDIR/idle_qps" "$BENCH_DIR/idle_qps.c" -I"$BUILD" \
		-L"$SNAP/lib" -l:libibverbs.so.1 -Wl,-rpath,"$BUILD/lib" -Wl,--enable-new-dtags \
		>"$LOGS/idle_qps.build.log" 2>&1; then
		IDLE_BIN=$LOGDIR/idle_qps
	else
		say "bench: idle_qps did not build (see $OUT/logs/idle_qps.build.log); skipping idle and 10k-QP checks"
		FAILED_STEPS+=("build idle_qps")
	fi
elif [ -x "$BUILD/bench/idle_qps" ]; then
	IDLE_BIN=$BUILD/bench/idle_qps # make's, where no compiler is (the GPU machine)
fi

# Helper programs of plain C (no uroce): NAME, built here, or make's copy
# where no compiler is (the GPU machine). Sets TOOL_BIN ("" if neither).
plain_tool() {
	TOOL_BIN=""
	if have cc; then
		if cc -O2 -std=gnu11 -Wall -o "$LOGDIR/$1" "$BENCH_DIR/$1.c" >"$LOGS/$1.build.log" 2>&1; then
			TOOL_BIN=$LOGDIR/$1
		else
			say "bench: $1 did not build (see $OUT/logs/$1.build.log); skipping what needs it"
			FAILED_STEPS+=("build $1")
		fi
	elif [ -x "$BUILD/bench/$1" ]; then
		TOOL_BIN=$BUILD/bench/$1
	fi
}
# udp_gso: the kernel's UDP ceiling with GSO/GRO (issue 15's bar for 1 MiB)
plain_tool udp_gso; GSO_BIN=$TOOL_BIN
# pingpong: the kernel's message latency for a program that polls
plain_tool pingpong; PP_BIN=$TOOL_BIN

# ---------------------------------------------------------------- the steps
# Each step is a function call; records.jsonl gets one line per measurement.
CUR_PATH="" SCTX="" CCTX="" SADDR="" CADDR="" CUR_MTU=0

record() { # ID PATH KIND TOOL SIZE QPS REP PHASE OK [EXTRA-JSON]
	printf '{"id":"%s","path":"%s","kind":"%s","tool":"%s","size":%s,"qps":%s,"rep":%s,"phase":"%s","ok":%s%s}\n' \
		"$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" "${10:+,${10}}" >>"$REC"
}

step_fail() { # ID
	FAILED_STEPS+=("$1")
	say "bench: FAILED $1 (logs: $OUT/logs/$1/)"
}

path_up() { # PATH
	CUR_PATH=$1
	case $1 in
	lo)
		SCTX=lo CCTX=lo SADDR=127.0.0.1 CADDR=127.0.0.1
		CUR_MTU=$(cat /sys/class/net/lo/mtu 2>/dev/null || echo 65536) ;;
	veth*)
		CUR_MTU=${1#veth}
		if ! ns_up "$CUR_MTU" >"$LOGS/ns_up.$1.log" 2>&1; then
			step_fail "ns_up.$1"; CUR_PATH=""; return 1
		fi
		SCTX=a CCTX=b SADDR=$IP_A CADDR=$IP_B ;;
	esac
	echo "{\"path\":\"$1\",\"mtu\":$CUR_MTU,\"server\":\"$SADDR\",\"client\":\"$CADDR\"}" >>"$LOGS/paths.jsonl"
}

path_down() {
	case $CUR_PATH in veth*) ns_down ;; esac
	CUR_PATH=""
}

# perftest bandwidth: TOOL SIZE QPS n|D VALUE PHASE REP [ev]; "ev" adds -e:
# the program sleeps on a completion channel instead of polling its CQ, as
# iperf3 sleeps in recv (the CPU comparison; perftest allows it for SEND)
perf_bw() {
	local tool=$1 size=$2 qps=$3 mode=$4 val=$5 phase=$6 rep=$7 ev=${8:-} port id ok=true
	[ -n "$CUR_PATH" ] || return 0
	id=$CUR_PATH.$tool.s$size.q$qps.$phase.r$rep${ev:+.ev}
	have "$tool" || { record "$id" "$CUR_PATH" perftest_bw "$tool" "$size" "$qps" "$rep" "$phase" false '"skipped":"not installed"'; return 0; }
	port=$(bench_port) || { step_fail "$id"; return 0; }
	local -a args=(-x 0 -F -p "$port" --report_gbits -s "$size" -q "$qps" "-$mode" "$val")
	[ -n "$ev" ] && args+=(-e)
	bench_pair "$LOGS/$id" "$SCTX" "$CCTX" uroce tcp "$port" exit \
		"$tool" "${args[@]}" -- "$tool" "${args[@]}" "$SADDR" || { ok=false; step_fail "$id"; }
	record "$id" "$CUR_PATH" perftest_bw "$tool" "$size" "$qps" "$rep" "$phase" "$ok" "\"mode\":\"$mode\",\"arg\":$val,\"events\":$([ -n "$ev" ] && echo true || echo false),\"dir\":\"$id\""
}

# perftest latency: TOOL SIZE ITERS PHASE REP
perf_lat() {
	local tool=$1 size=$2 n=$3 phase=$4 rep=$5 port id ok=true
	[ -n "$CUR_PATH" ] || return 0
	id=$CUR_PATH.$tool.s$size.$phase.r$rep
	have "$tool" || { record "$id" "$CUR_PATH" perftest_lat "$tool" "$size" 1 "$rep" "$phase" false '"skipped":"not installed"'; return 0; }
	port=$(bench_port) || { step_fail "$id"; return 0; }
	local -a args=(-x 0 -F -p "$port" -s "$size" -n "$n")
	bench_pair "$LOGS/$id" "$SCTX" "$CCTX" uroce tcp "$port" exit \
		"$tool" "${args[@]}" -- "$tool" "${args[@]}" "$SADDR" || { ok=false; step_fail "$id"; }
	record "$id" "$CUR_PATH" perftest_lat "$tool" "$size" 1 "$rep" "$phase" "$ok" "\"iters\":$n,\"dir\":\"$id\""
}

# iperf3: tcp|udp REP (single stream; UDP unlimited rate, datagrams that fit the MTU)
iperf() {
	local proto=$1 rep=$2 port id ok=true len=""
	[ -n "$CUR_PATH" ] || return 0
	id=$CUR_PATH.iperf3_$proto.r$rep
	have iperf3 || { record "$id" "$CUR_PATH" iperf3 "iperf3_$proto" 0 1 "$rep" key false '"skipped":"not installed"'; return 0; }
	port=$(bench_port) || { step_fail "$id"; return 0; }
	local -a extra=()
	if [ "$proto" = udp ]; then
		if [ "$CUR_MTU" -ge 9000 ]; then len=8900; else len=$((CUR_MTU - 100)); fi
		extra=(-u -b 0 -l "$len")
	fi
	bench_pair "$LOGS/$id" "$SCTX" "$CCTX" plain tcp "$port" exit \
		iperf3 -s -1 -B "$SADDR" -p "$port" -- \
		iperf3 -c "$SADDR" -B "$CADDR" -p "$port" -t "$IPERF_T" -J "${extra[@]}" || { ok=false; step_fail "$id"; }
	record "$id" "$CUR_PATH" iperf3 "iperf3_$proto" "${len:-0}" 1 "$rep" key "$ok" "\"secs\":$IPERF_T,\"dir\":\"$id\""
}

# sockperf ping-pong: udp|tcp REP (half round trip, sockperf's default 14-byte messages)
sockperf_pp() {
	local proto=$1 rep=$2 port id ok=true
	[ -n "$CUR_PATH" ] || return 0
	id=$CUR_PATH.sockperf_$proto.r$rep
	have sockperf || { record "$id" "$CUR_PATH" sockperf "sockperf_$proto" 14 1 "$rep" key false '"skipped":"not installed"'; return 0; }
	port=$(bench_port) || { step_fail "$id"; return 0; }
	local -a extra=() pin_s=() pin_c=()
	[ "$proto" = tcp ] && extra=(--tcp)
	# Server and client on different cores, as on two hosts: unpinned, the
	# kernel sometimes puts both on one core, and a same-core ping-pong
	# (no cross-CPU wakeup) is several times faster: the comparison would
	# flip between runs.
	if [ "$SOCKPERF_PIN" = 1 ]; then pin_s=(taskset -c "$CPU_S"); pin_c=(taskset -c "$CPU_C"); fi
	bench_pair "$LOGS/$id" "$SCTX" "$CCTX" plain "$proto" "$port" persist \
		"${pin_s[@]}" sockperf server -i "$SADDR" -p "$port" "${extra[@]}" -- \
		"${pin_c[@]}" sockperf ping-pong -i "$SADDR" -p "$port" -t "$SOCKPERF_T" "${extra[@]}" || { ok=false; step_fail "$id"; }
	record "$id" "$CUR_PATH" sockperf "sockperf_$proto" 14 1 "$rep" key "$ok" "\"secs\":$SOCKPERF_T,\"pinned\":$SOCKPERF_PIN,\"dir\":\"$id\""
}

# Polled ping-pong: udp|tcp REP. 8-byte messages, each side reading with
# MSG_DONTWAIT in a loop (bench/pingpong.c): the kernel's latency as a
# program that polls (an MPI rank, uroce's engine) sees it; sockperf's
# figure above also holds the wakeup of a blocking recvfrom.
pingpong_pp() {
	local proto=$1 rep=$2 port id ok=true
	[ -n "$CUR_PATH" ] || return 0
	id=$CUR_PATH.pingpong_$proto.r$rep
	[ -n "$PP_BIN" ] || { record "$id" "$CUR_PATH" pingpong "pingpong_$proto" 8 1 "$rep" key false '"skipped":"no C compiler"'; return 0; }
	port=$(bench_port) || { step_fail "$id"; return 0; }
	local -a pin_s=() pin_c=()
	# two pollers on one core would take turns by time slice
	if [ "$SOCKPERF_PIN" = 1 ]; then pin_s=(taskset -c "$CPU_S"); pin_c=(taskset -c "$CPU_C"); fi
	bench_pair "$LOGS/$id" "$SCTX" "$CCTX" plain "$proto" "$port" exit \
		"${pin_s[@]}" "$PP_BIN" server "$proto" "$SADDR" "$port" -- \
		"${pin_c[@]}" "$PP_BIN" client "$proto" "$SADDR" "$port" "$PP_N" 8 || { ok=false; step_fail "$id"; }
	record "$id" "$CUR_PATH" pingpong "pingpong_$proto" 8 1 "$rep" key "$ok" "\"iters\":$PP_N,\"dir\":\"$id\""
}

# The UDP GSO/GRO ceiling: REP. Datagrams of the size uroce sends on the
# path: a 4096 B (1024 B below path MTU 4200) payload, BTH and ICRC.
udp_gso() {
	local rep=$1 port id ok=true seg=4112
	[ -n "$CUR_PATH" ] || return 0
	id=$CUR_PATH.udp_gso.r$rep
	[ -n "$GSO_BIN" ] || { record "$id" "$CUR_PATH" udp_gso udp_gso 0 1 "$rep" key false '"skipped":"no C compiler"'; return 0; }
	[ "$CUR_MTU" -lt 4200 ] && seg=1040
	port=$(bench_port) || { step_fail "$id"; return 0; }
	bench_pair "$LOGS/$id" "$SCTX" "$CCTX" plain udp "$port" exit \
		"$GSO_BIN" server "$SADDR" "$port" "$IPERF_T" -- \
		"$GSO_BIN" client "$SADDR" "$port" "$IPERF_T" "$seg" || { ok=false; step_fail "$id"; }
	record "$id" "$CUR_PATH" udp_gso udp_gso "$seg" 1 "$rep" key "$ok" "\"secs\":$IPERF_T,\"dir\":\"$id\""
}

# idle_qps on loopback: PAIRS SECS PHASE
idle_qps() {
	local pairs=$1 secs=$2 phase=$3 id=lo.idle_qps.$3 rc
	[ -n "$IDLE_BIN" ] || { record "$id" lo idle_qps idle_qps 0 $((2 * pairs)) 1 "$phase" false '"skipped":"no C compiler"'; return 0; }
	mkdir -p "$LOGS/$id"
	timeout -k 5 "$T_TIMEOUT" env UROCE_NETDEV=lo "$UROCE" run -- "$IDLE_BIN" -p "$pairs" -t "$secs" \
		>"$LOGS/$id/out.json" 2>"$LOGS/$id/stderr.log" </dev/null &
	echo "$!" >>"$LOGDIR/pids"
	wait "$!"; rc=$?
	# exit 1 = it ran and says in its JSON how far it got (a measurement, not a breakage)
	if [ "$rc" -gt 1 ] || ! grep -q '"qps_created"' "$LOGS/$id/out.json"; then
		step_fail "$id"
		record "$id" lo idle_qps idle_qps 0 $((2 * pairs)) 1 "$phase" false "\"rc\":$rc,\"dir\":\"$id\""
	else
		record "$id" lo idle_qps idle_qps 0 $((2 * pairs)) 1 "$phase" true "\"rc\":$rc,\"dir\":\"$id\""
	fi
}

# PROCS idle_qps processes at once on loopback, PAIRS pairs each (one host's
# QPs across processes, receive demultiplexing between them): PROCS PAIRS PHASE
idle_qps_multi() {
	local procs=$1 pairs=$2 phase=$3 id=lo.idle_qps.$3 rc=0 k pids=()
	[ -n "$IDLE_BIN" ] || { record "$id" lo idle_qps idle_qps 0 $((2 * pairs * procs)) 1 "$phase" false '"skipped":"no C compiler"'; return 0; }
	mkdir -p "$LOGS/$id"
	for ((k = 1; k <= procs; k++)); do
		timeout -k 5 "$T_TIMEOUT" env UROCE_NETDEV=lo "$UROCE" run -- "$IDLE_BIN" -p "$pairs" -t 0 \
			>"$LOGS/$id/out.$k.json" 2>"$LOGS/$id/stderr.$k.log" </dev/null &
		pids+=("$!")
		echo "$!" >>"$LOGDIR/pids"
	done
	for k in "${pids[@]}"; do wait "$k" || { [ $? -gt 1 ] && rc=2; }; done
	# one line, as idle_qps writes it, summed over the processes
	"$PY" - "$procs" "$LOGS/$id"/out.*.json >"$LOGS/$id/out.json" <<'PYEOF' || rc=2
import json, sys
rs = [json.loads(open(f).read().strip().splitlines()[-1]) for f in sys.argv[2:]]
out = {"procs": int(sys.argv[1]), "pairs": sum(r["pairs"] for r in rs),
       "qps_wanted": sum(r["qps_wanted"] for r in rs), "qps_created": sum(r["qps_created"] for r in rs),
       "qps_connected": sum(r["qps_connected"] for r in rs), "pairs_written": sum(r["pairs_written"] for r in rs),
       "ok": all(r["ok"] for r in rs), "procs_ok": sum(1 for r in rs if r["ok"]),
       "failed_at": "; ".join(sorted({r["failed_at"] for r in rs if not r["ok"]})),
       "error": "; ".join(sorted({r["error"] for r in rs if not r["ok"]})),
       "wc_status": "; ".join(sorted({r.get("wc_status") or "" for r in rs if not r["ok"]})),
       "connect_s": max(r["connect_s"] for r in rs), "write_s": max(r["write_s"] for r in rs)}
print(json.dumps(out))
PYEOF
	if [ "$rc" -gt 1 ]; then
		step_fail "$id"
		record "$id" lo idle_qps idle_qps 0 $((2 * pairs * procs)) 1 "$phase" false "\"rc\":$rc,\"dir\":\"$id\""
	else
		record "$id" lo idle_qps idle_qps 0 $((2 * pairs * procs)) 1 "$phase" true "\"rc\":$rc,\"dir\":\"$id\""
	fi
}

# ------------------------------------------------------------------ the plan
STEPS=() WEIGHTS=() LABELS=()
add() { # WEIGHT LABEL CMD...
	WEIGHTS+=("$1"); LABELS+=("$2"); shift 2
	local q="" a
	for a in "$@"; do q+="$(printf '%q ' "$a")"; done
	STEPS+=("$q")
}
PT_OVERHEAD=1   # seconds of a perftest run beyond its measurement (start, exchange, teardown)

for p in "${WANT_PATHS[@]}"; do
	add 1 "$p: setup" path_up "$p"
	# Headline numbers, each repeated: interleaved so that a disturbance hits all tools alike.
	for ((r = 1; r <= REPEAT; r++)); do
		add $((PT_OVERHEAD + 1)) "$p ib_write_bw 64 KiB (rep $r)" perf_bw ib_write_bw 65536 1 n "$CPU_N" key "$r"
		# the same programs moving almost nothing: their fixed CPU cost
		# (start, perftest's 0.2 s busy clock calibration per process,
		# connection, teardown), subtracted so that CPU per GB is per GB
		add $((PT_OVERHEAD + 1)) "$p ib_write_bw fixed cost (rep $r)" perf_bw ib_write_bw 65536 1 n "$CPU_FIXED_N" fixed "$r"
		add $((PT_OVERHEAD + 1)) "$p ib_send_bw -e fixed cost (rep $r)" perf_bw ib_send_bw 65536 1 n "$CPU_FIXED_N" fixed "$r" ev
		add $((IPERF_T + 1)) "$p iperf3 TCP (rep $r)" iperf tcp "$r"
		add $((IPERF_T + 1)) "$p iperf3 UDP (rep $r)" iperf udp "$r"
		add $((IPERF_T + 1)) "$p UDP GSO/GRO ceiling (rep $r)" udp_gso "$r"
		add $((PT_OVERHEAD + BENCH_D)) "$p ib_write_bw 1 MiB (rep $r)" perf_bw ib_write_bw 1048576 1 D "$BENCH_D" key "$r"
		add $((PT_OVERHEAD + 1)) "$p ib_send_lat 2 B (rep $r)" perf_lat ib_send_lat 2 "$LAT_N" key "$r"
		add $((SOCKPERF_T + 1)) "$p sockperf UDP (rep $r)" sockperf_pp udp "$r"
		add $((SOCKPERF_T + 1)) "$p sockperf TCP (rep $r)" sockperf_pp tcp "$r"
		add 2 "$p polled UDP ping-pong (rep $r)" pingpong_pp udp "$r"
		add 2 "$p polled TCP ping-pong (rep $r)" pingpong_pp tcp "$r"
		add $((PT_OVERHEAD + 1)) "$p ib_send_bw 64 KiB, completion events (rep $r)" perf_bw ib_send_bw 65536 1 n "$CPU_N" key "$r" ev
		add $((PT_OVERHEAD + 1)) "$p ib_write_lat 2 B (rep $r)" perf_lat ib_write_lat 2 "$LAT_N" key "$r"
		add $((PT_OVERHEAD + 1)) "$p ib_read_lat 2 B (rep $r)" perf_lat ib_read_lat 2 "$LAT_N" key "$r"
		if [ "$QUICK" = 0 ]; then
			add $((PT_OVERHEAD + BENCH_D)) "$p ib_write_bw 8 B msg rate (rep $r)" perf_bw ib_write_bw 8 1 D "$BENCH_D" key "$r"
			add $((PT_OVERHEAD + 1)) "$p ib_read_bw 64 KiB (rep $r)" perf_bw ib_read_bw 65536 1 n "$CPU_N" key "$r"
			add $((PT_OVERHEAD + 1)) "$p ib_send_bw 64 KiB (rep $r)" perf_bw ib_send_bw 65536 1 n "$CPU_N" key "$r"
		fi
	done
	# Bandwidth vs message size: once per size (the plots), BENCH_D seconds a point.
	for tool in ib_write_bw ib_read_bw ib_send_bw; do
		for s in $SIZES; do
			add $((PT_OVERHEAD + BENCH_D)) "$p $tool $s B" perf_bw "$tool" "$s" 1 D "$BENCH_D" sweep 1
		done
	done
	# Latency at a few sizes (2 B is above)
	for tool in ib_send_lat ib_write_lat ib_read_lat; do
		for s in $LAT_SIZES; do
			[ "$s" = 2 ] && continue
			# fewer iterations than at 2 B: the point is the shape, and a
			# spinning tail (see docs/benchmarks.md) can make each one slow
			n=$((LAT_N / 5))
			add $((PT_OVERHEAD + 1)) "$p $tool $s B" perf_lat "$tool" "$s" "$n" sizes 1
		done
	done
	# Multi-QP scaling (aggregate bandwidth, and RSS per QP from -q 64 vs -q 1)
	for q in $QPS_LIST; do
		add $((PT_OVERHEAD + BENCH_D + 1)) "$p ib_write_bw 64 KiB x $q QPs" perf_bw ib_write_bw 65536 "$q" D "$BENCH_D" qps 1
	done
	add 1 "$p: teardown" path_down
done
add $((IDLE_S + 3)) "lo idle process with 1000 connected QP pairs" idle_qps 1000 "$IDLE_S" idle1000
add 8 "lo 10,000 QPs in one process" idle_qps 5000 0 qps10k
add 20 "lo 64,000 QPs on one host: 4 processes x 16,000" idle_qps_multi 4 8000 qps64k

PROG_TOTAL=${#STEPS[@]}
for w in "${WEIGHTS[@]}"; do PROG_W_TOTAL=$((PROG_W_TOTAL + w)); done
say "bench: $PROG_TOTAL steps, about $(fmt_s "$PROG_W_TOTAL") (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
if [ "${BENCH_DRY:-0}" = 1 ]; then
	for ((i = 0; i < PROG_TOTAL; i++)); do echo "${WEIGHTS[$i]}s ${LABELS[$i]}"; done
	rm -rf "$LOGS"
	exit 0
fi

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
T_BEGIN=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for ((i = 0; i < PROG_TOTAL; i++)); do
	progress "${WEIGHTS[$i]}" "${LABELS[$i]}"
	eval "${STEPS[$i]}"
done
[ "$PROG_TTY" = 1 ] && printf '\r\033[K'
ns_down >/dev/null 2>&1
T_END=$(date -u +%Y-%m-%dT%H:%M:%SZ)
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
ELAPSED=$((SECONDS - PROG_T0))

# ---------------------------------------------------------------- the report
ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }
# the commit measured: the repository's when BUILD is inside it (dirty: the
# tree has uncommitted changes), else BENCH_COMMIT or that build's own checkout
SRC=$TOP
case $BUILD/ in "$TOP"/*) ;; *) SRC=$(dirname "$BUILD") ;; esac
COMMIT=${BENCH_COMMIT:-$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)}
DIRTY=false
[ -z "${BENCH_COMMIT:-}" ] && [ -n "$(git -C "$SRC" status --porcelain --untracked-files=no 2>/dev/null)" ] && DIRTY=true
# the CRC the ICRC ran on (UROCE_CRC, auto's pick) and its speed here
CRC_JSON=null
if [ -x "$BUILD/bench/crc_speed" ]; then
	CRC_JSON=$("$BUILD/bench/crc_speed" 0.05 2>/dev/null | tail -n 1)
	case $CRC_JSON in "{"*) ;; *) CRC_JSON=null ;; esac
fi
cat >"$LOGS/settings.json" <<EOF
{"crc":$CRC_JSON,"crc_env":"${UROCE_CRC:-auto}","run_id":"$RUN_ID","quick":$([ "$QUICK" = 1 ] && echo true || echo false),"repeat":$REPEAT,
 "paths":"${WANT_PATHS[*]}","sizes":"$SIZES","lat_sizes":"$LAT_SIZES","qps":"$QPS_LIST",
 "sweep_secs":$BENCH_D,"iperf_secs":$IPERF_T,"sockperf_secs":$SOCKPERF_T,"cpu_iters":$CPU_N,"lat_iters":$LAT_N,
 "idle_secs":$IDLE_S,"sockperf_pinned":$SOCKPERF_PIN,"started":"$T_BEGIN","ended":"$T_END","elapsed_s":$ELAPSED,
 "loadavg_start":"$LOAD0","loadavg_end":"$LOAD1","commit":"$COMMIT","dirty":$DIRTY,
 "uroce_build":"$BUILD","versions":{"perftest":"$(ver perftest)","iperf3":"$(ver iperf3)","sockperf":"$(ver sockperf)","gnuplot":"$(ver gnuplot-nox)"},
 "missing_tools":"${MISSING[*]}","failed_steps":$(printf '%s\n' "${FAILED_STEPS[@]}" | "$PY" -c 'import json,sys; print(json.dumps([l for l in sys.stdin.read().split("\n") if l]))')}
EOF
rm -rf "$OUT/logs"
mv "$LOGS" "$OUT/logs"
rrc=0
BENCH_GNUPLOT=$(have gnuplot && echo 1 || echo 0) "$PY" "$BENCH_DIR/report.py" "$OUT/logs" "$OUT" "$RUN_ID" || rrc=$?
say "bench: done in $(fmt_s "$ELAPSED"); $OUT/$RUN_ID.json, $OUT/latest.md, $OUT/plots/, raw output in $OUT/logs/"
lib_cleanup
if [ "$rrc" -ne 0 ]; then echo "bench: the report failed (exit $rrc)" >&2; exit 1; fi
if [ ${#FAILED_STEPS[@]} -gt 0 ]; then
	echo "bench: ${#FAILED_STEPS[@]} run(s) broke: ${FAILED_STEPS[*]}" >&2
	exit 1
fi
exit 0
