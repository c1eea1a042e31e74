#!/usr/bin/env bash
# shellcheck disable=SC2016  # the sh -c script expands in its own shell
# bench/nccl/device.sh: everything issue 14 needs from the GPU machine in one
# call (docs/benchmarks.md, "NCCL"): the GPU registration tests, uroce topo,
# make bench-nccl, the NCCL correctness checks and a trace of one NCCL
# transfer. Built here (Debian), run there (the device tool):
#   run: bash bench/nccl/device.sh      carry: build-nccl .device/nccl
# .device/nccl holds what the GPU machine lacks: lib/libisal.so.2 (uroce's
# library links it), bin/ib_write_bw and perflib/ (Debian's perftest and its
# libraries: libmlx5, libefa, libpci, libnl; libhwloc for uroce topo).
# Results: $OUT/device.log (everything printed) and $OUT/results.tar.gz.
# STAGES="tests topo bench check trace" picks stages; T_* bound each.
set -u
cd "$(dirname "$0")/../.." || exit 1
TOP=$PWD
export BUILD=${BUILD:-build-nccl}
D=$TOP/.device/nccl
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
O=${OUT:-/tmp/nccl-out}
R=$O/r
mkdir -p "$R"
STAGES=${STAGES:-"tests topo bench check trace"}
export PYTHONUNBUFFERED=1 NCCL_LOG_DIR=$R/logs BENCH_OUT=$R/bench
mkdir -p "$R/logs" "$R/bench"
finish() {
	cp -r "$TOP/$BUILD/bench/." "$R/bench/" 2>/dev/null
	tar -C "$R" -czf "$O/results.tar.gz" . 2>/dev/null
	echo "=== results: $(du -sh "$O/results.tar.gz" | cut -f1)"
}
# The stages run in a child bounded by T_ALL, so that the results are packed
# even when a stage hangs (the device tool's own limit would lose them).
if [ -z "${DEVICE_INNER:-}" ]; then
	trap finish EXIT
	DEVICE_INNER=1 timeout -k 10 "${T_ALL:-540}" bash "$0" "$@" 2>&1 | tee "$O/device.log"
	echo "=== stages exit ${PIPESTATUS[0]} after ${SECONDS}s"
	exit 0
fi
sec() { echo; echo "=== $* (t+${SECONDS}s)"; }
has() { [[ " $STAGES " == *" $1 "* ]]; }

sec machine
nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader
nvidia-smi topo -m 2>&1 | head -12
for n in /sys/class/net/*; do echo "${n##*/} -> $(readlink -f "$n/device" 2>/dev/null || echo none)"; done
uname -r; nproc
python3 -c 'import torch, os, nvidia.nccl as n; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), os.path.dirname(n.__file__))' 2>&1 | tail -1
echo /sys/module/nvidia*
head -1 /proc/driver/nvidia/version 2>/dev/null
echo /sys/kernel/mm/memory_peers/*
ldd "$BUILD/lib/libibverbs.so.1" | grep -E 'not found|isal'

if has tests; then
	sec "C tests: GPU memory registered as NCCL does"
	timeout 90 "$BUILD/tests/verbs/test_gpu_nccl" 2>&1 | tail -25
	timeout 30 "$BUILD/tests/verbs/test_device" query_port_56_bytes_uncleared 2>&1 | tail -3
	sec "C tests: test_gpu (regression)"
	timeout 90 "$BUILD/tests/verbs/test_gpu" 2>&1 | grep -E '^(ok|FAIL|skip)|passed|  ' | tail -20
fi
if has topo; then
	sec "uroce topo (host) and in uroce run's view"
	LD_LIBRARY_PATH=$D/perflib:$LD_LIBRARY_PATH timeout 30 "$BUILD/bin/uroce" topo 2>&1 | tail -30
	LD_LIBRARY_PATH=$D/perflib:$LD_LIBRARY_PATH timeout 30 "$BUILD/bin/uroce" run --netdev lo -- \
		sh -c 'echo "device -> $(readlink -f /sys/class/infiniband/uroce_lo/device)"; "$0" topo --json' "$BUILD/bin/uroce" \
		>"$R/topo-view.json" 2>&1
	head -3 "$R/topo-view.json"; grep -A3 '"gpudirect"' "$R/topo-view.json" | head -8
fi
if has bench; then
	sec "make bench-nccl"
	export IB_WRITE_BW=$D/bin/ib_write_bw IB_WRITE_BW_LIBS=$D/perflib T_RANK=${T_RANK:-100}
	# what `make bench-nccl BUILD=...` runs; make itself is left out here: it
	# would first remake build/config.mk through scripts/deps.sh (apt-get),
	# and that machine has no package registry
	timeout "${T_BENCH:-220}" python3 bench/nccl/driver.py bench
fi
if has check; then
	sec "tests/clients/test_nccl.sh"
	KEEP_LOGS=1 T_RANK=${T_RANK:-150} timeout "${T_CHECK:-240}" tests/clients/test_nccl.sh
	cp -r /tmp/uroce-clients.* "$R/logs/" 2>/dev/null
fi
if has trace; then
	sec "uroce trace --explain of one NCCL WRITE_WITH_IMM (GDR: GPU memory on both ends)"
	NCCL_LOG_DIR=$R/logs timeout "${T_TRACE:-60}" "$BUILD/bin/uroce" trace --explain --op write_imm --netdev lo \
		--keep "$R/trace" -- python3 bench/nccl/driver.py pair uroce-gdr probe "$R/logs/trace-pair.jsonl" \
		>"$R/trace-explain.txt" 2>&1
	echo "exit $?"; head -80 "$R/trace-explain.txt"
	rm -f "$R"/trace/cap.* 2>/dev/null
fi
sec finished
