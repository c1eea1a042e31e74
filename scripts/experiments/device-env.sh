# scripts/experiments/device-env.sh: sourced by the experiments that run
# Debian's perftest/iperf3/sockperf on the GPU machine from .device/bench
# (bench-device.sh says what it holds). Sets D, PATH, LD_LIBRARY_PATH,
# UROCE_NETDEV=lo and U (the uroce CLI), from the repository root.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
D=$PWD/.device/bench
export PATH=$D/bin:$PATH
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$D/lib2
export UROCE_NETDEV=lo
U=$PWD/build/bin/uroce
