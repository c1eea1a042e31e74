#!/usr/bin/env bash
# scripts/experiments/profile-1qp.sh: where one QP's time goes on a machine
# with cores to spare (issue 15: one QP is one engine thread's work). Runs
# ib_write_bw -s SIZE with 1 QP on loopback under engine progress, and
# iperf3 TCP for scale, and samples every thread's user and system CPU
# (/proc/PID/task/TID/stat) over the middle DUR seconds: which thread is
# saturated, and how much of it is the kernel's. With perf on PATH it also
# records the busiest engine thread's profile (perf report --sort sym).
#   run: bash scripts/experiments/profile-1qp.sh   carry: build .device/bench
set -u
. "$(dirname "$0")/device-env.sh"
export UROCE_PROGRESS=${UROCE_PROGRESS:-engine}
DUR=${DUR:-4} SIZES=${SIZES:-"65536 1048576"}
HZ=$(getconf CLK_TCK)
threads() { # pid... -> "pid tid comm utime stime" per thread
	for p in "$@"; do
		for t in /proc/"$p"/task/*; do
			[ -r "$t/stat" ] || continue
			# comm may hold spaces: cut after the last ')'
			awk -v p="$p" -v t="${t##*/}" '{s=$0; i=index(s, ")"); c=substr(s, index(s, "(")+1, i-index(s, "(")-1);
				n=split(substr(s, i+2), f, " "); print p, t, c, f[12], f[13]}' "$t/stat" 2>/dev/null
		done
	done
}
cpu_split() { # label pids... : samples DUR seconds, prints busiest threads
	local label=$1; shift
	threads "$@" >/tmp/prof.a; sleep "$DUR"; threads "$@" >/tmp/prof.b
	echo "-- $label: thread CPU over ${DUR}s (share of one core: user + sys)"
	awk -v hz="$HZ" -v d="$DUR" 'NR==FNR{u[$1" "$2]=$4; s[$1" "$2]=$5; next}
		($1" "$2) in u {du=($4-u[$1" "$2])/hz/d; ds=($5-s[$1" "$2])/hz/d;
		if (du+ds > 0.02) printf "   pid %s %-16s %5.0f%% = user %4.0f%% + sys %4.0f%%\n", $1, $3, 100*(du+ds), 100*du, 100*ds}' \
		/tmp/prof.a /tmp/prof.b | sort -t= -k1,1 -r
}
echo "== $(nproc) CPUs, $(uname -r), perf: $(command -v perf || echo none)"
port=19500
for s in $SIZES; do
	port=$((port + 1))
	"$U" run -- ib_write_bw -d uroce_lo -q 1 -s "$s" -D $((DUR + 4)) -p $port -F >/tmp/prof.s 2>&1 &
	sp=$!
	sleep 0.5
	"$U" run -- ib_write_bw -d uroce_lo -q 1 -s "$s" -D $((DUR + 4)) -p $port -F 127.0.0.1 >/tmp/prof.c 2>&1 &
	cp=$!
	sleep 2
	ps=$(pgrep -f "ib_write_bw -d uroce_lo -q 1 -s $s" | tr '\n' ' ')
	cpu_split "ib_write_bw -s $s, 1 QP (server and client)" $ps
	if command -v perf >/dev/null; then
		eng=$(threads $ps | awk '$3 ~ /uroce-eng/' | head -2 | awk '{print $2}' | paste -sd,)
		[ -n "$eng" ] && perf record -q -g -t "$eng" -o /tmp/prof.data -- sleep 1 >/dev/null 2>&1 &&
			perf report -i /tmp/prof.data --no-children --sort sym --stdio 2>/dev/null | grep -E '^ +[0-9.]+%' | head -25
	fi
	wait $cp; wait $sp
	echo "   result: $(awk '/^ *[0-9]+ +[0-9]+ /{printf "%.2f Gb/s", $4*8/1000}' /tmp/prof.c)"
done
iperf3 -s -1 -p 5311 >/dev/null 2>&1 &
isp=$!
sleep 0.3
iperf3 -c 127.0.0.1 -p 5311 -t $((DUR + 3)) >/tmp/prof.i 2>&1 &
icp=$!
sleep 1.5
cpu_split "iperf3 TCP (server and client)" $isp $(pgrep -f 'iperf3 -c 127.0.0.1 -p 5311' | head -1)
wait $icp; wait $isp
echo "   result: $(awk '/receiver/{print $7, $8}' /tmp/prof.i)"
