#!/usr/bin/env bash
# bench/mpi/run.sh: MPI over uroce against MPI over TCP (`make bench-mpi`,
# issue 13), OSU micro-benchmark style (bench/mpi/osu_mpi.c: MPI_Allreduce
# latency and bus bandwidth over sizes, ping-pong latency, windowed
# bandwidth), side by side in one run on one path: two network namespaces
# joined by a veth pair (tests/clients/netns.sh, root), one rank per
# namespace by default, launched by `uroce mpirun --netns`:
#   uroce     Open MPI, pml ucx, UCX_TLS=rc_v,self on uroce (rc_verbs)
#   ucx-tcp   Open MPI, pml ucx, UCX_TLS=tcp,self (UCX's TCP transport)
#   tcp       Open MPI, pml ob1, btl tcp,self (Open MPI's own TCP)
# Runs are interleaved (repeat 1: uroce, ucx-tcp, tcp; repeat 2 starts with
# the next one...) and medians reported. See docs/benchmarks.md.
#
#   bench/mpi/run.sh                 full: 3 repeats, 0.3 s a size (~2 min)
#   BENCH_QUICK=1 bench/mpi/run.sh   1 repeat, 0.1 s a size (~40 s)
#
# Knobs: BENCH_REPEAT, BENCH_MPI_SECS (seconds a size), BENCH_MPI_MTU (veth
# MTU, 9000), BENCH_MPI_PPN (ranks per namespace, 1), BENCH_MPI_YIELD (auto:
# mpi_yield_when_idle for every transport when cores < 2 x ranks; 0, 1),
# BENCH_MPI_TRANSPORTS
# ("uroce ucx-tcp tcp"), BENCH_MPI_ALLREDUCE / _LAT / _BW (comma-separated
# sizes for osu_mpi -a/-l/-b), BENCH_MPI_EXCHANGE (sizes swapped both ways
# at once, osu_mpi -e: 64 KiB and 1 MiB; empty: none), BENCH_MPI_MAXITERS
# (osu_mpi -x, 1000), BENCH_MPI_OSU (a prebuilt osu_mpi instead of
# mpicc; the exchange is then off unless BENCH_MPI_EXCHANGE names sizes), BENCH_OUT (build/bench), BUILD (build),
# BENCH_MPI_TIMEOUT (limit of one mpirun, 300 s), BENCH_DRY=1 (print the plan).
# Results: $BENCH_OUT/mpi-<run>.json, mpi-latest.json, mpi-latest.md,
# plots/mpi.svg, mpi-logs/. Exit 0 unless a run broke; targets never fail it.
# shellcheck disable=SC2317  # step functions run through eval
set -u
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

QUICK=${BENCH_QUICK:-0}
[ "$QUICK" = 1 ] || QUICK=0
if [ "$QUICK" = 1 ]; then REPEAT=${BENCH_REPEAT:-1} SECS=${BENCH_MPI_SECS:-0.1}
else REPEAT=${BENCH_REPEAT:-3} SECS=${BENCH_MPI_SECS:-0.3}; fi
MTU=${BENCH_MPI_MTU:-9000}
PPN=${BENCH_MPI_PPN:-1}
TRANSPORTS=${BENCH_MPI_TRANSPORTS:-"uroce ucx-tcp tcp"}
MPI_TIMEOUT=${BENCH_MPI_TIMEOUT:-300}
OUT=${BENCH_OUT:-$TOP/build/bench}
case $OUT in /*) ;; *) OUT=$TOP/$OUT ;; esac
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || true)
# tests/run.sh-style environments export UROCE_NETDEV=lo; each namespace's
# own interface is what the ranks must use (uroce mpirun picks it per host)
unset UROCE_NETDEV

say "uroce bench-mpi: $([ "$QUICK" = 1 ] && echo quick || echo full) run, repeat $REPEAT, ${SECS}s a size, veth MTU $MTU, $PPN rank(s) per namespace, transports: $TRANSPORTS"

# ------------------------------------------------------------ preconditions
if [ ! -x "$BUILD/bin/uroce" ] || [ ! -e "$BUILD/lib/libibverbs.so.1" ]; then
	echo "bench-mpi: no $BUILD/bin/uroce or $BUILD/lib/libibverbs.so.1: run make" >&2; exit 1
fi
for t in mpirun $([ -z "${BENCH_MPI_OSU:-}" ] && echo mpicc); do
	command -v "$t" >/dev/null 2>&1 || { echo "bench-mpi: $t not installed (scripts/deps.sh bench: openmpi-bin libopenmpi-dev)" >&2; exit 1; }
done
[ -n "$PY" ] || { echo "bench-mpi: python3 is needed for the report" >&2; exit 1; }
if ! netns_permitted; then
	echo "bench-mpi: $NETNS_WHY: the benchmark runs between two network namespaces (run as root)" >&2
	exit 1
fi
lib_init
mkdir -p "$OUT/plots"
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
LOGS=$OUT/mpi-logs.new
rm -rf "$LOGS"
mkdir -p "$LOGS"
REC=$LOGS/records.jsonl
: >"$REC"
FAILED=()

# A private copy of the build (others may rebuild build/ while we run):
# uroce mpirun starts its daemons with its own path.
SNAP=$LOGDIR/uroce
mkdir -p "$SNAP/bin" "$SNAP/lib"
if ! cp "$BUILD/bin/uroce" "$SNAP/bin/" || ! cp "$BUILD/lib/libibverbs.so.1" "$BUILD/lib/librdmacm.so.1" "$SNAP/lib/"; then
	echo "bench-mpi: cannot copy the build" >&2; exit 1
fi
UROCE=$SNAP/bin/uroce
OSU=$LOGDIR/osu_mpi
if [ -n "${BENCH_MPI_OSU:-}" ]; then
	cp "$BENCH_MPI_OSU" "$OSU" || exit 1     # built elsewhere (bench/mpi/device.sh)
elif ! mpicc -O2 -o "$OSU" "$BENCH_DIR/mpi/osu_mpi.c" >"$LOGS/osu_mpi.build.log" 2>&1; then
	cat "$LOGS/osu_mpi.build.log" >&2; echo "bench-mpi: osu_mpi did not build" >&2; exit 1
fi
OSU_ARGS=(-t "$SECS")
[ -n "${BENCH_MPI_ALLREDUCE:-}" ] && OSU_ARGS+=(-a "$BENCH_MPI_ALLREDUCE")
[ -n "${BENCH_MPI_LAT:-}" ] && OSU_ARGS+=(-l "$BENCH_MPI_LAT")
[ -n "${BENCH_MPI_BW:-}" ] && OSU_ARGS+=(-b "$BENCH_MPI_BW")
# (an osu_mpi built before -e existed would refuse it: only asked of a prebuilt one when named)
if [ -n "${BENCH_MPI_OSU:-}" ]; then EXCHANGE=${BENCH_MPI_EXCHANGE:-}; else EXCHANGE=${BENCH_MPI_EXCHANGE-65536,1048576}; fi
[ -n "$EXCHANGE" ] && OSU_ARGS+=(-e "$EXCHANGE")
[ -n "${BENCH_MPI_MAXITERS:-}" ] && OSU_ARGS+=(-x "$BENCH_MPI_MAXITERS")

# The namespaces: one interface name on both sides (the device is
# uroce_<if> in both), the namespaces' names as MPI host names.
VETH_A=umpi$NETNS_TAG
# shellcheck disable=SC2034  # used by netns.sh
VETH_B=$VETH_A
NP=$((2 * PPN))
# Each uroce rank has an engine thread beside its own (UCX spins in its
# progress loop): with fewer than 2 cores a rank, 4 busy threads share 2
# cores and every message waits for a time slice. Open MPI's
# mpi_yield_when_idle (sched_yield in the progress loop) is its setting for
# an oversubscribed node; given to every transport alike (auto: when
# cores < 2 x ranks; BENCH_MPI_YIELD=0/1 forces it).
YIELD=${BENCH_MPI_YIELD:-auto}
if [ "$YIELD" = auto ]; then
	if [ "$(nproc)" -lt $((2 * NP)) ]; then YIELD=1; else YIELD=0; fi
fi
MPI_EXTRA=()
[ "$YIELD" = 1 ] && MPI_EXTRA=(--mca mpi_yield_when_idle 1)

# ---------------------------------------------------------------- the steps
path_up() {
	ns_up "$MTU" >"$LOGS/ns_up.log" 2>&1 || { cat "$LOGS/ns_up.log" >&2; FAILED+=(ns_up); return 1; }
}

# run_one TRANSPORT REP: one mpirun of osu_mpi
run_one() {
	local t=$1 r=$2 id dir rc ok=true
	id=$t.r$r
	dir=$LOGS/$id
	mkdir -p "$dir"
	local -a envs=()
	[ "$t" = uroce ] && envs=(UROCE_LOG=info)
	local -a over=()
	[ "$NP" -gt 2 ] && over=(--oversubscribe)
	echo "${envs[*]} uroce mpirun --netns --transport $t -np $NP --host $NS_A:$PPN,$NS_B:$PPN --map-by node ${over[*]} ${MPI_EXTRA[*]} osu_mpi ${OSU_ARGS[*]}" >"$dir/cmd"
	timeout -k 5 "$MPI_TIMEOUT" env "${envs[@]}" "$METER" "$dir/meter" "$UROCE" mpirun --netns --transport "$t" \
		-np "$NP" --host "$NS_A:$PPN,$NS_B:$PPN" --map-by node "${over[@]}" "${MPI_EXTRA[@]}" "$OSU" "${OSU_ARGS[@]}" \
		>"$dir/out.jsonl" 2>"$dir/err.log" </dev/null &
	echo "$!" >>"$LOGDIR/pids"
	wait "$!"; rc=$?
	if [ "$rc" -ne 0 ] || ! grep -q '"bench":"end"' "$dir/out.jsonl"; then
		ok=false
		FAILED+=("$id")
		say "bench-mpi: FAILED $id (exit $rc$(rc_note "$rc"); logs: $OUT/mpi-logs/$id/)"
	fi
	printf '{"id":"%s","transport":"%s","rep":%s,"rc":%s,"ok":%s,"dir":"%s"}\n' "$id" "$t" "$r" "$rc" "$ok" "$id" >>"$REC"
}

STEPS=() WEIGHTS=() LABELS=()
add() { # WEIGHT LABEL CMD...
	WEIGHTS+=("$1"); LABELS+=("$2"); shift 2
	local q="" a
	for a in "$@"; do q+="$(printf '%q ' "$a")"; done
	STEPS+=("$q")
}
read -r -a TL <<<"$TRANSPORTS"
nsizes=$(( $(tr ',' ' ' <<<"${BENCH_MPI_ALLREDUCE:-a b c d e f g h i}" | wc -w) + $(tr ',' ' ' <<<"${BENCH_MPI_LAT:-a b c d e f g}" | wc -w) + $(tr ',' ' ' <<<"${BENCH_MPI_BW:-a b c d}" | wc -w) ))
w_run=$("$PY" -c "print(int(2 + $nsizes * ($SECS * 0.8)))")
add 2 "namespaces up (veth MTU $MTU)" path_up
for ((r = 1; r <= REPEAT; r++)); do
	for ((k = 0; k < ${#TL[@]}; k++)); do
		t=${TL[$(((k + r - 1) % ${#TL[@]}))]}
		add "$w_run" "$t: osu_mpi, $NP ranks (rep $r)" run_one "$t" "$r"
	done
done
add 1 "namespaces down" ns_down

PROG_TOTAL=${#STEPS[@]}
for w in "${WEIGHTS[@]}"; do PROG_W_TOTAL=$((PROG_W_TOTAL + w)); done
say "bench-mpi: $PROG_TOTAL steps, about $(fmt_s "$PROG_W_TOTAL") (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
if [ "${BENCH_DRY:-0}" = 1 ]; then
	for ((i = 0; i < PROG_TOTAL; i++)); do echo "${WEIGHTS[$i]}s ${LABELS[$i]}"; done
	rm -rf "$LOGS"
	exit 0
fi
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
T_BEGIN=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for ((i = 0; i < PROG_TOTAL; i++)); do
	progress "${WEIGHTS[$i]}" "${LABELS[$i]}"
	eval "${STEPS[$i]}" || break
done
[ "$PROG_TTY" = 1 ] && printf '\r\033[K'
ns_down >/dev/null 2>&1
ELAPSED=$((SECONDS - PROG_T0))

# ---------------------------------------------------------------- the report
ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }
COMMIT=${BENCH_COMMIT:-$(git -C "$TOP" rev-parse HEAD 2>/dev/null || echo unknown)}
DIRTY=false
[ -z "${BENCH_COMMIT:-}" ] && [ -n "$(git -C "$TOP" status --porcelain --untracked-files=no 2>/dev/null)" ] && DIRTY=true
cat >"$LOGS/settings.json" <<EOF
{"run_id":"$RUN_ID","quick":$([ "$QUICK" = 1 ] && echo true || echo false),"repeat":$REPEAT,"secs_per_size":$SECS,
 "mtu":$MTU,"ranks_per_namespace":$PPN,"ranks":$NP,"yield_when_idle":$([ "$YIELD" = 1 ] && echo true || echo false),"cores":$(nproc),"transports":"$TRANSPORTS","osu_args":"${OSU_ARGS[*]}",
 "started":"$T_BEGIN","ended":"$(date -u +%Y-%m-%dT%H:%M:%SZ)","elapsed_s":$ELAPSED,
 "loadavg_start":"$LOAD0","loadavg_end":"$(cut -d' ' -f1-3 /proc/loadavg)","commit":"$COMMIT","dirty":$DIRTY,
 "uroce_build":"$BUILD","versions":{"openmpi":"$(ver openmpi-bin)","ucx":"$(ver libucx0)"},
 "failed":$(printf '%s\n' "${FAILED[@]}" | "$PY" -c 'import json,sys; print(json.dumps([l for l in sys.stdin.read().split("\n") if l]))')}
EOF
rm -rf "$OUT/mpi-logs"
mv "$LOGS" "$OUT/mpi-logs"
rrc=0
BENCH_GNUPLOT=$(command -v gnuplot >/dev/null && echo 1 || echo 0) \
	"$PY" "$BENCH_DIR/mpi/report.py" "$OUT/mpi-logs" "$OUT" "$RUN_ID" || rrc=$?
say "bench-mpi: done in $(fmt_s "$ELAPSED"); $OUT/mpi-latest.md, $OUT/mpi-$RUN_ID.json, $OUT/plots/mpi.svg, raw output in $OUT/mpi-logs/"
lib_cleanup
[ "$rrc" -eq 0 ] || { echo "bench-mpi: the report failed (exit $rrc)" >&2; exit 1; }
[ ${#FAILED[@]} -eq 0 ] || { echo "bench-mpi: ${#FAILED[@]} run(s) broke: ${FAILED[*]}" >&2; exit 1; }
exit 0
