#!/usr/bin/env bash
# shellcheck disable=SC2317,SC2016,SC2031  # t_* run through check(); $NCCL_GIN_TYPE is for the inner sh; CHECK_DIR is per check
# NCCL over uroce (issue 14; docs/testing.md, "NCCL"):
#   nccl/gin-type       uroce run sets NCCL_GIN_TYPE=0 when it is unset (NCCL
#                       2.28.7-2.28.9 crash in ncclNetInit on devices that are
#                       not mlx5), keeps a value the user set, and says so at
#                       UROCE_LOG=info
#   nccl/fake-cuda      tests/verbs/test_gpu_nccl against a fake libcuda.so.1
#                       (tests/gpu/fakecuda.c, whose device memory the CPU
#                       cannot touch): cuMem (VMM) and cuMemAlloc buffers
#                       registered with ibv_reg_mr the way NCCL does, WRITE,
#                       READ and the GDR flush (a READ on a loopback QP);
#                       chunked WRITEs whose next WQE is copied ahead; and
#                       test_gpu's GPU-to-GPU, mixed and atomic cases
#   nccl/gdr nccl/host nccl/loss nccl/gdr-loss nccl/peermem
#                       bench/nccl/driver.py check: two ranks on one GPU
#                       through PyTorch's NCCL over uroce_lo, all_reduce,
#                       all_gather, reduce_scatter, broadcast and send/recv
#                       in fp32 and bf16, every element checked; through
#                       uroce's GPU path (dma-buf, flush forced), host staging,
#                       1% loss, and ibv_reg_mr of GPU pointers. They need
#                       torch and an NVIDIA GPU; without them (CI) they are
#                       skipped with the reason.
#   tests/clients/test_nccl.sh [REGEX]
# Knobs: PYTHON (the python3 with torch), NCCL_CHECK_SIZES (bytes, comma-
# separated; default powers of 8 from 8 B to 1 GiB), NCCL_CHECK_LOSS_SIZES.
# shellcheck source=tests/clients/lib.sh
. "$(dirname "$0")/lib.sh"
lib_init "$@"
need_build

t_gin_type() {
	local out
	out=$(env -u NCCL_GIN_TYPE UROCE_LOG=info "$UROCE" run --no-sysfs -- sh -c 'echo "GIN=$NCCL_GIN_TYPE"' 2>&1)
	echo "$out"
	grep -qx 'GIN=0' <<<"$out" || { echo "NCCL_GIN_TYPE was not set to 0"; return 1; }
	grep -q 'info: NCCL_GIN_TYPE=0' <<<"$out" || { echo "no info line at UROCE_LOG=info"; return 1; }
	out=$(NCCL_GIN_TYPE=2 "$UROCE" run --no-sysfs -- sh -c 'echo "GIN=$NCCL_GIN_TYPE"' 2>&1)
	echo "$out"
	grep -qx 'GIN=2' <<<"$out" || { echo "a user's NCCL_GIN_TYPE was overridden"; return 1; }
	out=$(env -u NCCL_GIN_TYPE "$UROCE" run --no-sysfs -- true 2>&1)
	[ -z "$out" ] || { echo "uroce run printed without UROCE_LOG=info: $out"; return 1; }
}

t_fake_cuda() {
	have_tools cc || return 77
	local d=$CHECK_DIR/fakecuda t=$BUILD/tests/verbs/test_gpu_nccl c
	[ -x "$t" ] || { echo "no $t: run make"; return 1; }
	mkdir -p "$d"
	cc -O2 -Wall -shared -fPIC -fvisibility=hidden -o "$d/libcuda.so.1" "$TOP/tests/gpu/fakecuda.c" ||
		{ echo "the fake libcuda did not build"; return 1; }
	LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} UROCE_LOG=info "$t" >"$CHECK_DIR/test.log" 2>&1
	cat "$CHECK_DIR/test.log"
	for c in dmabuf_probe_ebadf flush_read_self_qp_host cumem_reg_mr cumemalloc_reg_mr chunked_writes_copied_ahead; do
		grep -q "^ok   $c " "$CHECK_DIR/test.log" || { echo "$c did not pass"; return 1; }
	done
	grep -q 'MR .* is CUDA device memory' "$CHECK_DIR/test.log" ||
		{ echo "uroce did not take the fake's memory for device memory"; return 1; }
	grep -q "cuMem memory is copied in uroce's own context" "$CHECK_DIR/test.log" ||
		{ echo "uroce did not make a context of its own for cuMem memory"; return 1; }
	# and test_gpu's GPU-to-GPU, mixed and atomic cases (its 1 GiB WRITE
	# takes 8 s here and adds nothing the fake can show)
	LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$BUILD/tests/verbs/test_gpu" \
		gpu_to_gpu_all_ops host_gpu_mixed gpu_atomics >"$CHECK_DIR/test_gpu.log" 2>&1
	cat "$CHECK_DIR/test_gpu.log"
	grep -q '^3 passed, 0 failed' "$CHECK_DIR/test_gpu.log" || { echo "test_gpu failed"; return 1; }
}

t_nccl_mode() { # MODE
	NCCL_LOG_DIR=$CHECK_DIR BUILD=$BUILD "${PYTHON:-python3}" "$TOP/bench/nccl/driver.py" check --modes "$1"
}

check nccl/gin-type t_gin_type
check nccl/fake-cuda t_fake_cuda
WHY=$(BUILD=$BUILD "${PYTHON:-python3}" "$TOP/bench/nccl/driver.py" why-not 2>&1)
for m in host loss gdr gdr-loss peermem; do
	if [ -n "$WHY" ]; then
		skip "nccl/$m" "$WHY"
	elif [ "$m" = peermem ] && [ "$(id -u)" != 0 ]; then
		skip "nccl/$m" "needs root: NCCL is shown a peer-memory module in a private mount namespace"
	else
		check "nccl/$m" t_nccl_mode "$m"
	fi
done
finish
