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

finish
