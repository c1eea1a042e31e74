#!/usr/bin/env bash
# scripts/experiments/bench-device.sh: `make bench` on the GPU machine (16
# cores), issue 15's "a run on the GPU machine". That machine has no
# perftest, iperf3 or sockperf and no package registry, so Debian's
# binaries travel in .device/bench: bin/ (the programs), lib/ (libraries it
# may lack, searched first), lib2/ (Debian's copies of common libraries,
# searched last: the machine's own newer ones win). Build here, then
#   run: bash scripts/experiments/bench-device.sh   carry: build .device/bench
# BENCH_* pass through (default: BENCH_QUICK=1 BENCH_REPEAT=3). Results:
# $OUT/bench.log and $OUT/bench.tar.gz (build/bench of that run).
set -u
cd "$(dirname "$0")/../.." || exit 1
D=$PWD/.device/bench
O=${OUT:-/tmp/bench-device}
mkdir -p "$O"
export PATH=$D/bin:$PATH
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$D/lib2
export BENCH_QUICK=${BENCH_QUICK:-1} BENCH_REPEAT=${BENCH_REPEAT:-3} BENCH_OUT=/tmp/bench-device-out
{
	echo "== machine: $(nproc) CPUs, $(uname -r), $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}"), uid $(id -u)"
	for t in ip ss taskset gnuplot cc python3; do printf '%s: %s\n' "$t" "$(command -v "$t" || echo MISSING)"; done
	for t in "$D"/bin/*; do ldd "$t" | grep -q 'not found' && { echo "${t##*/}:"; ldd "$t" | grep 'not found'; }; done
	ldd build/lib/libibverbs.so.1 | grep -E 'isal|not found'
	timeout -k 10 "${T_BENCH:-560}" bash bench/run.sh
	echo "== bench exit $?"
} 2>&1 | tee "$O/bench.log"
tar -C /tmp/bench-device-out -czf "$O/bench.tar.gz" . 2>/dev/null
