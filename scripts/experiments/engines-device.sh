#!/usr/bin/env bash
# scripts/experiments/engines-device.sh: does a context with several engine
# threads (UROCE_ENGINES) move more with more QPs? ib_write_bw on loopback,
# 1 and 4 QPs, 64 KiB and 1 MiB, UROCE_ENGINES=1, 2 and 4, interleaved over
# REPEAT rounds, plus iperf3 TCP for scale and ib_send_lat 2 B (one QP:
# more engines must not cost latency). Needs what bench-device.sh carries:
#   run: bash scripts/experiments/engines-device.sh   carry: build .device/bench
# Output: one line per run, "engines E qps Q size S: X Gb/s", then medians.
set -u
. "$(dirname "$0")/device-env.sh"
export UROCE_PROGRESS=${UROCE_PROGRESS:-engine}
REPEAT=${REPEAT:-3} DUR=${DUR:-3}
ENGS=${ENGS:-"1 2 4"} QPS=${QPS:-"1 4"} SIZES=${SIZES:-"65536 1048576"}
R=${OUT:-/tmp/engines-device}
mkdir -p "$R"
port=19000
bw() { # engines qps size -> Gb/s
	port=$((port + 1))
	UROCE_ENGINES=$1 timeout 30 "$U" run -- ib_write_bw -d uroce_lo -q "$2" -s "$3" -D "$DUR" -p $port -F >"$R/s.log" 2>&1 &
	local sp=$!
	sleep 0.5
	UROCE_ENGINES=$1 timeout 30 "$U" run -- ib_write_bw -d uroce_lo -q "$2" -s "$3" -D "$DUR" -p $port -F 127.0.0.1 >"$R/c.log" 2>&1
	wait $sp
	awk '/^ *[0-9]+ +[0-9]+ /{v=$4} END{printf "%.2f", v*8/1000}' "$R/c.log"
}
echo "== $(nproc) CPUs, $(uname -r)"
for r in $(seq "$REPEAT"); do
	for s in $SIZES; do
		for q in $QPS; do
			for e in $ENGS; do
				echo "engines $e qps $q size $s: $(bw "$e" "$q" "$s") Gb/s"
			done
		done
	done
	iperf3 -s -1 -p 5301 >/dev/null 2>&1 &
	sleep 0.3
	echo "tcp: $(iperf3 -c 127.0.0.1 -p 5301 -t "$DUR" -J 2>/dev/null | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9,2))') Gb/s"
	wait
	for e in $ENGS; do
		port=$((port + 1))
		UROCE_ENGINES=$e timeout 30 "$U" run -- ib_send_lat -d uroce_lo -s 2 -n 20000 -p $port -F >/dev/null 2>&1 &
		sleep 0.5
		echo "lat engines $e: $(UROCE_ENGINES=$e timeout 30 "$U" run -- ib_send_lat -d uroce_lo -s 2 -n 20000 -p $port -F 127.0.0.1 2>&1 | awk '/^ *2 +20000/{print "p50 " $5 " p99 " $8 " us"}')"
		wait
	done
done 2>&1 | tee "$R/all.log"
echo "== medians"
python3 - "$R/all.log" <<'EOF'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"(engines \d+ qps \d+ size \d+|tcp): ([\d.]+) Gb/s", line)
    if m:
        runs.setdefault(m.group(1), []).append(float(m.group(2)))
for k, v in runs.items():
    print(f"{k}: median {statistics.median(v):.2f} Gb/s of {v}")
EOF
