#!/usr/bin/env bash
# scripts/experiments/device-kit.sh: assembles .device/bench and
# .device/nccl (git-ignored), the Debian programs and libraries that the
# GPU machine lacks (it has no perftest, iperf3, sockperf or iproute2 and
# no package registry). Run here (Debian 12, scripts/deps.sh test and bench
# installed):
#   bash scripts/experiments/device-kit.sh
# .device/bench (bench-device.sh, lat-device.sh, profile-1qp.sh):
#   bin/   perftest's ib_* programs, iperf3, sockperf, ip (and perf, if here)
#   lib/   searched first: what a minimal Ubuntu lacks (libisal for uroce's
#          libibverbs, perftest's libmlx5/libefa/libpci/libnl, libiperf...)
#   lib2/  searched last: Debian's copies of common libraries
# .device/nccl (bench/nccl/device.sh, nccl-engines.sh):
#   lib/libisal.so.2, bin/ (as above), perflib/ (lib/ and lib2/ together,
#   for ib_write_bw alone: the machine's own libraries stay first for torch)
# Never carried: libibverbs and librdmacm (uroce's, build/lib).
set -u
cd "$(dirname "$0")/../.." || exit 1
B=$PWD/.device/bench N=$PWD/.device/nccl
PROGS="ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_read_lat ib_send_lat iperf3 sockperf ip"
# libraries a minimal Ubuntu 24.04 image lacks; everything else goes to lib2/
FIRST='^lib(isal|mlx5|mlx4|efa|pci|nl-3|nl-route-3|hwloc|iperf|sctp|numa|ibumad)\.'

rm -rf "$B" "$N"
mkdir -p "$B"/{bin,lib,lib2} "$N"/{bin,lib,perflib}
for p in $PROGS; do
	f=$(command -v "$p") || { echo "device-kit: no $p here (bash scripts/deps.sh bench)" >&2; exit 1; }
	cp -L "$f" "$B/bin/"
done
# perf, where installed (profile-1qp.sh records the engine threads with it)
if f=$(command -v perf); then cp -L "$f" "$B/bin/"; fi
# the libraries they load, transitively (ldd resolves the closure), and
# libisal, which uroce's libibverbs links; perftest's providers as well
libs=$( { for p in "$B"/bin/*; do ldd "$p"; done; ldd build/lib/libibverbs.so.1
	for m in /usr/lib/x86_64-linux-gnu/libibverbs/*.so; do [ -e "$m" ] && ldd "$m"; done; } |
	awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u)
for l in $libs; do
	n=${l##*/}
	case $n in
	libstdc++.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux* | libibverbs.so.* | librdmacm.so.* | libgcc_s.so.*) continue ;;
	esac
	if [[ $n =~ $FIRST ]]; then cp -L "$l" "$B/lib/"; else cp -L "$l" "$B/lib2/"; fi
done
cp -L /usr/lib/x86_64-linux-gnu/libisal.so.2 "$N/lib/"
cp "$B"/bin/* "$N/bin/"
cp "$B"/lib/* "$B"/lib2/* "$N/perflib/"
# perftest finds its providers through libibverbs' own directory; under
# uroce run it loads none, so nothing more is needed
dpkg-query -W -f='${Package} ${Version}\n' perftest iperf3 sockperf iproute2 libisal2 >"$B/VERSIONS"
cp "$B/VERSIONS" "$N/VERSIONS"
echo "device-kit: $B $(du -sh "$B" | cut -f1), $N $(du -sh "$N" | cut -f1)"
