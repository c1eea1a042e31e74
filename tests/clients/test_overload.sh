#!/usr/bin/env bash
# Overload with unmodified perftest on loopback (issue 16): a long size
# sweep (ib_write_bw -a, 2 B to 8 MiB), and 16 processes at once (8
# ib_write_bw pairs). Nothing may fail: a false IBV_WC_RETRY_EXC_ERR
# ("Failed status 12") on a lossless host is the bug this guards against.
# The C side (deep queues, 64 QPs, applications that stop polling) is
# tests/verbs/test_overload.c.
#   tests/clients/test_overload.sh [REGEX]
. "$(dirname "$0")/lib.sh"
lib_init "$@"
need_build

no_failed_status() { # FILE...
	if grep -H -E 'Failed status|Completion with error|IBV_WC_RETRY' "$@"; then
		echo "a work request failed"
		return 1
	fi
}

t_sweep() {
	have_tools ib_write_bw || return 77
	local port
	port=$(free_port) || return 1
	pair lo lo "$port" ib_write_bw -x 0 -F -p "$port" -a -n 1000 -- \
		ib_write_bw -x 0 -F -p "$port" -a -n 1000 127.0.0.1 || return 1
	no_failed_status "$CHECK_DIR/server.log" "$CHECK_DIR/client.log" || return 1
	# all 23 sizes reported
	[ "$(grep -cE '^ *[0-9]+ +1000 ' "$CHECK_DIR/client.log")" -eq 23 ] ||
		{ echo "not every size of the sweep was reported"; return 1; }
}
check overload/sweep-2B-8MiB t_sweep

t_16_procs() {
	have_tools ib_write_bw || return 77
	local i port pids=() ports=() rc=0
	for ((i = 0; i < 8; i++)); do
		port=$(free_port) || return 1
		ports+=("$port")
		start_bg lo "$CHECK_DIR/server.$i.log" ib_write_bw -x 0 -F -p "$port" -s 65536 -n 3000 -q 2
		pids+=("$BG_PID")
	done
	for ((i = 0; i < 8; i++)); do
		wait_listen lo "${ports[$i]}" "${pids[$i]}" "$LISTEN_WAIT" || return 1
	done
	for ((i = 0; i < 8; i++)); do
		start_bg lo "$CHECK_DIR/client.$i.log" ib_write_bw -x 0 -F -p "${ports[$i]}" -s 65536 -n 3000 -q 2 127.0.0.1
		pids+=("$BG_PID")
	done
	for i in "${pids[@]}"; do
		wait_pid "$i" "$T_TIMEOUT" || rc=1
	done
	no_failed_status "$CHECK_DIR"/client.*.log "$CHECK_DIR"/server.*.log || return 1
	# (perftest reports iterations x QPs)
	[ "$(grep -lE '^ *65536 +6000 ' "$CHECK_DIR"/client.*.log | wc -l)" -eq 8 ] ||
		{ echo "not every client reported its result"; return 1; }
	return "$rc"
}
check overload/16-processes t_16_procs

# bench/idle_qps (public verbs API): N QP pairs connected to themselves in
# one process, one 8-byte WRITE over each, all posted at once (every byte
# checked). With 8,000 pairs the engine fell ~20,000 datagrams behind on
# its input, its timers fired on ACKs it had not read yet, and the
# resends buried it: RETRY_EXC_ERR after ~2,000 WRITEs, every run. Then 4
# such processes at once (3 of 4 packets forwarded between engines), in
# both progress modes.
IDLE_QPS=""
build_idle_qps() {
	[ -n "$IDLE_QPS" ] && return 0
	have_tools cc || return 77
	cc -O2 -std=gnu11 -o "$LOGDIR/idle_qps" "$TOP/bench/idle_qps.c" -I"$BUILD" \
		-L"$BUILD/lib" -l:libibverbs.so.1 -Wl,-rpath,"$BUILD/lib" >"$LOGDIR/idle_qps.build.log" 2>&1 ||
		{ cat "$LOGDIR/idle_qps.build.log"; return 1; }
	IDLE_QPS=$LOGDIR/idle_qps
}
idle_ok() { # JSON...: every process moved and checked every WRITE
	local f
	for f in "$@"; do
		grep -q '"ok": true' "$f" || { echo "$f:"; cat "$f"; return 1; }
	done
}

t_16000_qps() {
	build_idle_qps || return $?
	start_bg lo "$CHECK_DIR/out.json" env UROCE_NETDEV=lo "$IDLE_QPS" -p 8000 -t 0
	wait_pid "$BG_PID" "$T_TIMEOUT" || { cat "$CHECK_DIR/out.json"; return 1; }
	idle_ok "$CHECK_DIR/out.json"
}
check overload/16000-qps-one-process t_16000_qps

t_4_procs_qps() { # MODE
	build_idle_qps || return $?
	local k pids=() rc=0
	for ((k = 0; k < 4; k++)); do
		start_bg lo "$CHECK_DIR/out.$k.json" env UROCE_NETDEV=lo UROCE_PROGRESS="$1" \
			"$IDLE_QPS" -p 4000 -t 0
		pids+=("$BG_PID")
	done
	for k in "${pids[@]}"; do
		wait_pid "$k" "$T_TIMEOUT" || rc=1
	done
	idle_ok "$CHECK_DIR"/out.*.json || return 1
	return "$rc"
}
check overload/4-processes-8000-qps-each t_4_procs_qps engine
check overload/4-processes-8000-qps-each-app t_4_procs_qps app

finish
