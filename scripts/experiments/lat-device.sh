#!/usr/bin/env bash
# scripts/experiments/lat-device.sh: ib_send_lat 2 B on loopback against
# sockperf UDP ping-pong, under each progress mode and engine busy-poll
# budget (UROCE_POLL_US), interleaved over REPEAT rounds (VARIANTS: each
# MODE:POLL_US or MODE:POLL_US:REPLY_HOLD_US): what the p50 and
# p99 targets of issue 15 cost where cores are plenty. MTU=1500 or 9000:
# over a veth pair between two namespaces (tests/clients/netns.sh, root)
# instead of loopback.
#   run: bash scripts/experiments/lat-device.sh   carry: build .device/bench
set -u
. "$(dirname "$0")/device-env.sh"
REPEAT=${REPEAT:-3} N=${N:-20000}
VARIANTS=${VARIANTS:-"engine:0 engine:20 engine:50 app:0"}
port=19700
SRV=() CLI=() DEV=uroce_lo IP=127.0.0.1
if [ -n "${MTU:-}" ]; then
	export NETNS_TAG=lat$$
	tests/clients/netns.sh up "$MTU" >/dev/null || exit 1
	trap 'tests/clients/netns.sh down >/dev/null 2>&1' EXIT
	SRV=(tests/clients/netns.sh exec a) CLI=(tests/clients/netns.sh exec b)
	DEV=uroce_uva$NETNS_TAG IP=198.18.0.1
	echo "== veth MTU $MTU between two namespaces"
fi
for _ in $(seq "$REPEAT"); do
	for v in $VARIANTS; do
		port=$((port + 1))
		IFS=: read -r mode poll hold <<<"$v"
		export UROCE_PROGRESS=$mode UROCE_POLL_US=$poll
		if [ -n "$hold" ]; then export UROCE_REPLY_HOLD_US=$hold; else unset UROCE_REPLY_HOLD_US; fi
		"${SRV[@]}" /usr/bin/time -f "%U %S" -o /tmp/lat.s "$U" run -- ib_send_lat -d "$DEV" -s 2 -n "$N" -p $port -F >/dev/null 2>&1 &
		sleep 0.5
		res=$("${CLI[@]}" /usr/bin/time -f "%U %S" -o /tmp/lat.c "$U" run -- ib_send_lat -d "${DEV/uva/uvb}" -s 2 -n "$N" -p $port -F "$IP" 2>&1 |
			awk '/^ *2 +[0-9]+ /{print "p50 " $5 " p99 " $8 " us"}')
		wait
		echo "lat $v: $res cpu $(cat /tmp/lat.s 2>/dev/null) / $(cat /tmp/lat.c 2>/dev/null)"
	done
	unset UROCE_PROGRESS UROCE_POLL_US UROCE_REPLY_HOLD_US
	"${SRV[@]}" sockperf sr -i "$IP" -p 5411 >/dev/null 2>&1 &
	sp=$!
	sleep 0.3
	echo "udp: $("${CLI[@]}" sockperf pp -i "$IP" -p 5411 -t 3 -m 14 2>&1 | awk '/percentile 50.000/{a=$NF} /percentile 99.000/{b=$NF} END{print "p50 " a " p99 " b " us"}')"
	kill $sp 2>/dev/null; pkill -f "sockperf sr -i $IP -p 5411" 2>/dev/null; wait $sp 2>/dev/null
done
