#!/usr/bin/env bash
# scripts/experiments/nccl-gdr-hang.sh: on the GPU machine, runs the NCCL
# GDR check's first collective (8 B) in variants and, while it hangs, takes
# the backtrace of every uroce engine thread and NCCL proxy thread
# (UROCE_SEGV_BACKTRACE=1 + SIGUSR2) and uroce's live counters.
#   run: bash scripts/experiments/nccl-gdr-hang.sh   carry: build-nccl .device/nccl
set -u
cd "$(dirname "$0")/../.." || exit 1
export BUILD=${BUILD:-build-nccl} LD_LIBRARY_PATH=$PWD/.device/nccl/lib PYTHONUNBUFFERED=1
O=${OUT:-/tmp/hang-out}
mkdir -p "$O"
variant() { # name mode seconds-before-dump env...
	local name=$1 mode=$2 wait=$3
	shift 3
	echo "=== $name: $mode $* (t+${SECONDS}s)"
	mkdir -p "$O/$name"
	env "$@" UROCE_SEGV_BACKTRACE=1 NCCL_LOG_DIR="$O/$name" T_RANK=${T_RANK:-45} \
		NCCL_CHECK_SIZES=${SIZES:-8} NCCL_CHECK_DTYPES=float32 \
		timeout 80 python3 bench/nccl/driver.py check --modes "$mode" >"$O/$name/driver.log" 2>&1 &
	local d=$! i
	for ((i = 0; i < wait; i++)); do
		sleep 1
		kill -0 $d 2>/dev/null || break
	done
	if kill -0 $d 2>/dev/null; then
		echo "still running after ${wait}s: dumping"
		timeout 10 "$BUILD/bin/uroce" doctor --counters >"$O/$name/counters.txt" 2>&1
		for t in /proc/[0-9]*/task/[0-9]*; do
			c=$(cat "$t/comm" 2>/dev/null) || continue
			case $c in uroce-engine*|"NCCL Progress"*|python3)
				p=${t#/proc/}; p=${p%%/*}
				echo "$p/${t##*/} $c $(cat "$t/wchan" 2>/dev/null) $(awk '{print $3}' "$t/stat")" >>"$O/$name/threads.txt"
				case $c in uroce-engine*|"NCCL Progress"*)
					# tgkill(pid, tid, SIGUSR2): that very thread
					python3 -c 'import ctypes,sys; ctypes.CDLL(None).syscall(234, int(sys.argv[1]), int(sys.argv[2]), 12)' "$p" "${t##*/}"
					sleep 0.3 ;;
				esac ;;
			esac
		done
		sleep 2
	fi
	wait $d
	tail -5 "$O/$name/driver.log"
	grep -h -A25 "SIGUSR2" "$O/$name"/*.log 2>/dev/null | head -120
	cat "$O/$name/threads.txt" 2>/dev/null | head -40
	grep -v "^ *0" "$O/$name/counters.txt" 2>/dev/null | head -60
}
variant flush gdr 25
variant noflush gdr 25 NCCL_DRIVER_ENV="NCCL_NET_FORCE_FLUSH=0"
variant simple gdr 25 NCCL_DRIVER_ENV="NCCL_NET_FORCE_FLUSH=0 NCCL_PROTO=Simple"
variant loss gdr-loss 25
tar -C "$O" -czf "$O/hang.tar.gz" --exclude hang.tar.gz . 2>/dev/null
