#!/usr/bin/env bash
# scripts/experiments/latprof-device.sh: where one small message's time goes
# on the GPU machine. Prints the clock source and what a clock read and a
# system call cost there, then profiles (perf record -a -g, the kit's perf)
# a polled UDP ping-pong (bench/pingpong, the kernel's floor) and
# ib_send_lat 8 B on loopback under each UROCE_PROGRESS mode in MODES.
# Reports land in $OUT (or /tmp/latprof).
#   kit:   .device/prof (bin/perf and its libraries from Debian 12, and
#          bin/clockcost; see docs/performance.md)
#   run:   bash scripts/experiments/latprof-device.sh
#   carry: build .device/bench .device/prof
set -u
# shellcheck source-path=SCRIPTDIR source=device-env.sh
. "$(dirname "$0")/device-env.sh"
P=$PWD/.device/prof O=${OUT:-/tmp/latprof} N=${N:-1000000} MODES=${MODES:-"app engine"}
mkdir -p "$O"
kperf() { LD_LIBRARY_PATH=$P/lib "$P/bin/perf" "$@"; }
echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource) cpus $(nproc) kernel $(uname -r) paranoid $(cat /proc/sys/kernel/perf_event_paranoid)"
"$P/bin/clockcost"
report() { # NAME: the top of the profile, by thread name and symbol
	kperf report -i "$O/$1.data" --no-children --sort comm,dso,sym -g none 2>/dev/null |
		grep -v '^#' | grep -v '^$' | head -70 >"$O/$1.txt"
	echo "== $1: top 25"
	head -25 "$O/$1.txt"
}
port=19700
# the floor: a polled UDP ping-pong, 8 B each way
build/bench/pingpong server udp 127.0.0.1 $port &
sleep 0.3
build/bench/pingpong client udp 127.0.0.1 $port $((N * 2)) 8 >"$O/pingpong.res" &
sleep 0.5
kperf record -a -g -F 4999 -o "$O/pingpong.data" -- sleep 2 >/dev/null 2>&1
wait
echo "pingpong udp: $(cat "$O/pingpong.res")"
report pingpong
for m in $MODES; do
	port=$((port + 1))
	env UROCE_PROGRESS="$m" "$U" run -- ib_send_lat -s 8 -n "$N" -p $port >/dev/null 2>&1 &
	sleep 0.4
	env UROCE_PROGRESS="$m" "$U" run -- ib_send_lat -s 8 -n "$N" -p $port 127.0.0.1 >"$O/$m.res" 2>&1 &
	sleep 0.8
	kperf record -a -g -F 4999 -o "$O/$m.data" -- sleep 2 >/dev/null 2>&1
	kperf stat -a -e 'syscalls:sys_enter_sendmmsg,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_futex,context-switches' -- sleep 1 2>&1 | grep -E 'syscalls|context' >"$O/$m.stat"
	wait
	echo "ib_send_lat $m: $(awk '$1 == 8 && NF >= 8 {print "p50 " $5 " p99 " $8 " us"}' "$O/$m.res")"
	cat "$O/$m.stat"
	report "$m"
done
rm -f "$O"/*.data.old
