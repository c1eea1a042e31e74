#!/usr/bin/env bash
# scripts/experiments/msglat-device.sh: ib_send_lat over loopback at
# several message sizes, for this build and others (BUILDS: directories
# with bin/uroce and lib/, default "build"), interleaved over REPEAT rounds:
# what one more packet per message costs. Copy an older build's bin/ and
# lib/ to .device/<name> to compare (e.g. before a change).
#   run: BUILDS="build .device/base" bash scripts/experiments/msglat-device.sh
#   carry: build .device/bench .device/base
set -u
# shellcheck source-path=SCRIPTDIR source=device-env.sh
. "$(dirname "$0")/device-env.sh"
REPEAT=${REPEAT:-3} N=${N:-20000}
BUILDS=${BUILDS:-build} SIZES=${SIZES:-"2 4096 8192 16384 32768 65536"}
port=19800
for _ in $(seq "$REPEAT"); do
	for s in $SIZES; do
		for b in $BUILDS; do
			port=$((port + 1))
			"$b/bin/uroce" run -- ib_send_lat -d uroce_lo -s "$s" -n "$N" -p $port >/dev/null 2>&1 &
			sleep 0.4
			res=$("$b/bin/uroce" run -- ib_send_lat -d uroce_lo -s "$s" -n "$N" -p $port 127.0.0.1 2>&1 |
				awk -v s="$s" '$1 == s && NF >= 8 {print "p50 " $5 " p99 " $8 " us"}')
			wait
			echo "size $s $b: $res"
		done
	done
done
