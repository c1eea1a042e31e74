#!/usr/bin/env bash
# scripts/experiments/nccl-engines.sh: does NCCL over uroce gain from
# several engine threads per context (UROCE_ENGINES) or more QPs per
# connection? bench/nccl/driver.py bench at 64 and 256 MiB, variants:
#   auto      the default (engine progress on 16 cores: 4 engines)
#   e1        UROCE_ENGINES=1 (the ceiling of the earlier runs)
#   qps4      the default plus NCCL_IB_QPS_PER_CONNECTION=4
#   mps       the default under CUDA MPS (nvidia-cuda-mps-control -d), so
#             that the two ranks' kernels share the GPU instead of taking
#             turns by time slices: is time slicing the ceiling, Socket's too?
# Socket runs in the first variant and under MPS. Built here, run there:
#   run: bash scripts/experiments/nccl-engines.sh   carry: build-nccl .device/nccl
set -u
cd "$(dirname "$0")/../.." || exit 1
export BUILD=${BUILD:-build-nccl} PYTHONUNBUFFERED=1
D=$PWD/.device/nccl
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export IB_WRITE_BW=$D/bin/ib_write_bw IB_WRITE_BW_LIBS=$D/perflib T_RANK=${T_RANK:-120}
export NCCL_BENCH_SIZES=${NCCL_BENCH_SIZES:-67108864,268435456}
O=${OUT:-/tmp/nccl-engines}
mkdir -p "$O"
VARIANTS=${VARIANTS:-"auto mps e1 qps4"}
first=1
for v in $VARIANTS; do
	case $v in
	auto) env=() ;;
	e1) env=(UROCE_ENGINES=1) ;;
	qps4) env=(NCCL_DRIVER_ENV="NCCL_IB_QPS_PER_CONNECTION=4") ;;
	mps) env=(CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log) ;;
	*) echo "unknown variant $v"; continue ;;
	esac
	cfgs=uroce-gdr,uroce-host
	[ $first = 1 ] || [ $v = mps ] && cfgs=$cfgs,socket
	first=0
	if [ $v = mps ]; then
		mkdir -p /tmp/mps-pipe /tmp/mps-log
		if ! env "${env[@]}" nvidia-cuda-mps-control -d; then echo "=== mps: no MPS daemon"; continue; fi
	fi
	echo "=== variant $v (${env[*]:-}) configs $cfgs (t+${SECONDS}s)"
	env "${env[@]}" NCCL_BENCH_CONFIGS=$cfgs BENCH_OUT="$O/$v" NCCL_LOG_DIR="$O/$v/logs" \
		timeout "${T_VARIANT:-200}" python3 bench/nccl/driver.py bench 2>&1 |
		grep -vE '^\s*$' | grep -E 'ib_write_bw|probe|ok in|FAILED|^\||PASS|MISS|SKIP|busiest|thread|uroce-engine' | head -60
	[ $v = mps ] && { echo quit | env "${env[@]}" nvidia-cuda-mps-control; sleep 1; tail -5 /tmp/mps-log/control.log 2>/dev/null; }
done
tar -C "$O" -czf "$O/../nccl-engines.tgz" . 2>/dev/null; mv "$O/../nccl-engines.tgz" "$O/" 2>/dev/null
echo "=== done (t+${SECONDS}s)"
