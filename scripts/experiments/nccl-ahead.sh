#!/usr/bin/env bash
# scripts/experiments/nccl-ahead.sh: NCCL's GDR path in VARIANTS, host
# staging beside them, interleaved over ROUNDS:
#   base   the default (UROCE_GPU_AHEAD=0: no copy of the next WQE ahead)
#   ahead  UROCE_GPU_AHEAD=1
#   rx4    ahead with a ring of 4 placement buffers (UROCE_GPU_RXBUFS=4)
#   primary  ahead, copies in the device's primary context instead of
#          uroce's own (UROCE_CUDA_OWN_CTX=0): does the GPU's time slicing
#          between contexts cost each copy a slice?
# `uroce stat` samples the GPU counters (gpu_*) once a second. On the GPU machine:
#   run: bash scripts/experiments/nccl-ahead.sh   carry: build .device/nccl
# Results: $OUT/ahead.log, $OUT/<round>-<variant>/ (bench JSON, logs), $OUT/stat.jsonl.gz
set -u
cd "$(dirname "$0")/../.." || exit 1
export BUILD=${BUILD:-build} PYTHONUNBUFFERED=1
D=$PWD/.device/nccl
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export T_RANK=${T_RANK:-100} UROCE_LOG=${UROCE_LOG:-info}
export NCCL_BENCH_SIZES=${NCCL_BENCH_SIZES:-4194304,67108864,268435456}
O=${OUT:-/tmp/nccl-ahead}
mkdir -p "$O"
"$BUILD/bin/uroce" stat --json -i 1 >"$O/stat.jsonl" 2>/dev/null &
sp=$!
{
	for r in $(seq "${ROUNDS:-2}"); do
		for v in ${VARIANTS:-base ahead rx4}; do
			cfgs=uroce-gdr
			[ "$v" = ahead ] && cfgs=uroce-gdr,uroce-host
			case $v in
			base) e=(UROCE_GPU_AHEAD=0) ;;
			ahead) e=(UROCE_GPU_AHEAD=1) ;;
			rx4) e=(UROCE_GPU_AHEAD=1 UROCE_GPU_RXBUFS=4) ;;
			rx8) e=(UROCE_GPU_AHEAD=1 UROCE_GPU_RXBUFS=8) ;;
			primary) e=(UROCE_GPU_AHEAD=1 UROCE_CUDA_OWN_CTX=0) ;;
			*) e=() ;;
			esac
			echo "=== round $r $v (${e[*]:-}) $cfgs (t+${SECONDS}s)"
			env "${e[@]}" NCCL_BENCH_CONFIGS=$cfgs BENCH_OUT="$O/$r-$v" NCCL_LOG_DIR="$O/$r-$v/logs" \
				timeout 200 python3 bench/nccl/driver.py bench 2>&1 | grep -vE '^(PASS|MISS|SKIP) .*(Socket|ib_write_bw)'
			grep -h "GPU memory" "$O/$r-$v"/logs/*.log 2>/dev/null | sort | uniq -c | head -12
		done
	done
} 2>&1 | tee "$O/ahead.log"
kill "$sp" 2>/dev/null
gzip -f "$O/stat.jsonl"
