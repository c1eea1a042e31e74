#!/usr/bin/env bash
# scripts/experiments/progress-modes.sh: ib_write_bw and ib_send_lat on
# loopback in both UROCE_PROGRESS modes, back to back (for the GPU
# machine's 16 cores: carry build and .device/nccl).
cd "$(dirname "$0")/../.." || exit 1
D=$PWD/.device/nccl
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/perflib:$D/lib
U=$PWD/build/bin/uroce
pair() { # env... -- perftest args
	local p=$((20000 + RANDOM % 20000)) e=()
	while [ "$1" != -- ]; do e+=("$1"); shift; done
	shift
	env "${e[@]}" timeout 30 "$U" run --netdev lo -- "$@" -p $p >/dev/null 2>&1 &
	sleep 0.4
	env "${e[@]}" timeout 30 "$U" run --netdev lo -- "$@" -p $p 127.0.0.1 2>&1
	wait
}
for m in app engine; do
	echo "== UROCE_PROGRESS=$m"
	for s in 65536 1048576; do
		echo "write_bw $s: $(pair UROCE_PROGRESS=$m -- ib_write_bw -F --report_gbits -D 2 -s $s | awk '/^ *[0-9]+ +[0-9]+ /{print $4}' | tail -1) Gb/s"
	done
	echo "write_bw 65536 q4: $(pair UROCE_PROGRESS=$m -- ib_write_bw -F --report_gbits -D 2 -s 65536 -q 4 | awk '/^ *[0-9]+ +[0-9]+ /{print $4}' | tail -1) Gb/s"
	pair UROCE_PROGRESS=$m -- ib_send_lat -F -s 2 -n 10000 | grep -A1 t_min | tail -1
done
