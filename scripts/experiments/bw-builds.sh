#!/usr/bin/env bash
# scripts/experiments/bw-builds.sh: ib_write_bw over loopback (one QP) at
# SIZES, for this build and others (BUILDS: directories with bin/uroce and
# lib/, default "build"), interleaved over REPEAT rounds of SECS seconds: a
# before/after of one change on the same machine. Copy an older build's
# bin/ and lib/ to .device/<name> to compare.
#   run: BUILDS="build .device/base" bash scripts/experiments/bw-builds.sh
#   carry: build .device/bench .device/base
set -u
# shellcheck source-path=SCRIPTDIR source=device-env.sh
. "$(dirname "$0")/device-env.sh"
REPEAT=${REPEAT:-3} SECS=${SECS:-3}
BUILDS=${BUILDS:-build} SIZES=${SIZES:-"65536 1048576"}
port=19900
for _ in $(seq "$REPEAT"); do
	for s in $SIZES; do
		for b in $BUILDS; do
			port=$((port + 1))
			"$b/bin/uroce" run -- ib_write_bw -d uroce_lo -x 0 -F --report_gbits -s "$s" -D "$SECS" -p $port >/dev/null 2>&1 &
			sleep 0.4
			res=$("$b/bin/uroce" run -- ib_write_bw -d uroce_lo -x 0 -F --report_gbits -s "$s" -D "$SECS" -p $port 127.0.0.1 2>&1 |
				awk -v s="$s" '$1 == s && NF >= 5 {print $4 " Gb/s"}')
			wait
			echo "size $s $b: $res"
		done
	done
done
