# shellcheck shell=bash
# Helpers for bench/run.sh: server/client pairs under timeout with CPU and
# peak-RSS metering, free ports, a progress line. Builds on the client tests'
# tests/clients/lib.sh (process groups, port locks, cleanup) and netns.sh.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../tests/clients/lib.sh
. "$BENCH_DIR/../tests/clients/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../tests/clients/netns.sh
. "$BENCH_DIR/../tests/clients/netns.sh"
METER=$BENCH_DIR/meter.sh

# bench_port: a TCP port (free_port: reserved, unused) that is also unused for
# UDP, for tools that listen on both (iperf3 -u data, sockperf).
bench_port() {
	local p i
	for ((i = 0; i < 50; i++)); do
		p=$(free_port) || return 1
		port_used udp "$p" "" && continue
		echo "$p"
		return 0
	done
	return 1
}

# wait_port CTX tcp|udp PORT PID SECS: until something listens on PORT in CTX.
wait_port() {
	local ctx=$1 proto=$2 port=$3 pid=$4 secs=$5 i
	ctx_prefix "$ctx" || return 2
	for ((i = 0; i < secs * 20; i++)); do
		port_used "$proto" "$port" listen "${CTX_PREFIX[@]}" && return 0
		alive "$pid" || { echo "server exited before listening on $proto port $port"; return 1; }
		sleep 0.05
	done
	echo "nothing listens on $proto port $port after ${secs}s"
	return 1
}

# bg_cmd CTX LOG METERFILE uroce|plain CMD...: start CMD in CTX in the
# background under timeout (leader of its own process group), metered.
# Sets BG_PID.
bg_cmd() {
	local ctx=$1 log=$2 mfile=$3 how=$4; shift 4
	ctx_prefix "$ctx" || return 2
	local -a via=()
	[ "$how" = uroce ] && via=("$UROCE" run --)
	timeout -k 5 "$T_TIMEOUT" "${CTX_PREFIX[@]}" "$METER" "$mfile" "${via[@]}" "$@" >"$log" 2>&1 </dev/null &
	BG_PID=$!
	echo "$BG_PID" >>"$LOGDIR/pids"
}

# bench_pair DIR SCTX CCTX uroce|plain tcp|udp PORT exit|persist SERVER... -- CLIENT...
# Server in SCTX, client (once PORT listens) in CCTX, both metered into DIR
# (server.log server.meter client.log client.meter pair.log). "persist": the
# server serves until stopped (sockperf); "exit": it must exit by itself.
# Returns 0 when both ended well.
bench_pair() {
	local dir=$1 sctx=$2 cctx=$3 how=$4 proto=$5 port=$6 mode=$7; shift 7
	local -a srv=() cli=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	mkdir -p "$dir"
	local spid crc src
	{
		echo "[$sctx] server: ${srv[*]}"
		bg_cmd "$sctx" "$dir/server.log" "$dir/server.meter" "$how" "${srv[@]}"
		spid=$BG_PID
		if ! wait_port "$sctx" "$proto" "$port" "$spid" "$LISTEN_WAIT"; then
			stop_pid "$spid"; wait "$spid" 2>/dev/null
			echo "server failed to start"
			return 1
		fi
		echo "[$cctx] client: ${cli[*]}"
		bg_cmd "$cctx" "$dir/client.log" "$dir/client.meter" "$how" "${cli[@]}"
		wait "$BG_PID"; crc=$?
		if [ "$mode" = persist ]; then
			stop_pid "$spid"; wait "$spid" 2>/dev/null; src=0
		elif [ "$crc" -eq 0 ]; then
			wait_pid "$spid" "$SERVER_WAIT"; src=$?
		else
			wait_pid "$spid" 3; src=$?
		fi
		echo "client exit $crc$(rc_note "$crc"), server exit $src$(rc_note "$src")"
	} >>"$dir/pair.log" 2>&1
	[ "$crc" -eq 0 ] && [ "$src" -eq 0 ]
}

# ------------------------------------------------------------------ progress

PROG_TOTAL=0 PROG_DONE=0 PROG_W_TOTAL=0 PROG_W_DONE=0 PROG_W_LAST=0 PROG_T0=$SECONDS
PROG_TTY=0
[ -t 1 ] && PROG_TTY=1

fmt_s() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

# progress WEIGHT TEXT: announce the next step (weight = its expected seconds)
progress() {
	local w=$1 text=$2 el=$((SECONDS - PROG_T0)) left="?"
	PROG_W_DONE=$((PROG_W_DONE + PROG_W_LAST))   # the step before this one is done
	PROG_W_LAST=$w
	if [ "$PROG_W_DONE" -gt 0 ] && [ "$el" -gt 0 ]; then
		left=$(fmt_s $(((PROG_W_TOTAL - PROG_W_DONE) * el / PROG_W_DONE)))
	else
		left="~$(fmt_s "$PROG_W_TOTAL")"
	fi
	PROG_DONE=$((PROG_DONE + 1))
	local line
	line=$(printf '[%3d/%d %s elapsed, %s left] %s' "$PROG_DONE" "$PROG_TOTAL" "$(fmt_s "$el")" "$left" "$text")
	if [ "$PROG_TTY" = 1 ]; then
		printf '\r\033[K%s' "${line:0:$(( ${COLUMNS:-120} - 1 ))}"
	else
		echo "$line"
	fi
}

# say TEXT: a line that survives the progress line
say() {
	[ "$PROG_TTY" = 1 ] && printf '\r\033[K'
	echo "$*"
}
