#!/usr/bin/env bash
# meter.sh OUT CMD...: run CMD, then write to OUT one line
#     user_s sys_s maxrss_kb wall_s rc
# user_s/sys_s: CPU time of CMD and everything it waited for (bash `times`,
# i.e. the kernel's cutime/cstime, all threads); maxrss_kb: the last VmHWM
# (peak RSS) seen while CMD ran, sampled every 0.2 s (after `uroce run` execs
# the real program, that program's); wall_s: elapsed. Exits with CMD's status.
# The sampling loop forks nothing (read -t on a private FIFO instead of sleep),
# so the CPU reported is CMD's alone.
out=$1
shift
t0=$EPOCHREALTIME
fifo=$(mktemp -u "${TMPDIR:-/tmp}/uroce-meter.XXXXXX")
mkfifo -m 600 "$fifo" || exit 125
exec 9<>"$fifo"
rm -f "$fifo"
"$@" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null' TERM INT HUP
hwm=0
while :; do
	st=""
	{ read -r _ _ st _ </proc/$pid/stat; } 2>/dev/null
	[ -n "$st" ] && [ "$st" != Z ] || break
	while read -r k v _; do
		[ "$k" = VmHWM: ] && hwm=$v
	done </proc/$pid/status 2>/dev/null
	read -r -t 0.2 -u 9 _
done
wait "$pid"
rc=$?
# a TERM while waiting interrupts wait: wait again for the real status
while [ "$rc" -gt 128 ] && { read -r _ _ st _ </proc/$pid/stat; } 2>/dev/null; do wait "$pid"; rc=$?; done
t1=$EPOCHREALTIME
times >"$out.times"
# second line of `times`: children's user and system time, e.g. "0m1.063s 0m0.331s"
{ read -r _; read -r cu cs; } <"$out.times"
rm -f "$out.times"
sec() { local m=${1%%m*} s=${1#*m}; s=${s%s}; awk -v m="$m" -v s="$s" 'BEGIN{printf "%.3f", m*60+s}'; }
echo "$(sec "$cu") $(sec "$cs") $hwm $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}') $rc" >"$out"
exit "$rc"
