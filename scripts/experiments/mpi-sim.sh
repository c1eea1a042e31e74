#!/usr/bin/env bash
# scripts/experiments/mpi-sim.sh: runs scripts/experiments/mpi-device.sh
# HERE as the GPU machine would: in a private mount namespace (unshare -m,
# root) where /usr and /etc are overlays from which every file of Debian's
# Open MPI, UCX, PMIx, hwloc, libevent, libnuma, munge, libnl, isal,
# rdma-core (libibverbs, librdmacm, providers), libfabric, psm, iproute2
# (and libbpf, libelf, libmnl) packages is deleted: absent, not empty, so
# that only .device/mpi (scripts/experiments/mpi-kit.sh) and build/ can
# provide them. Nothing outside the namespace changes.
#   bash scripts/experiments/mpi-sim.sh [VAR=VALUE...]   e.g.
#   bash scripts/experiments/mpi-sim.sh BENCH_REPEAT=1 BENCH_MPI_SECS=0.1 \
#       BENCH_MPI_ALLREDUCE=8,65536 BENCH_MPI_LAT=8 BENCH_MPI_BW=65536
# MPI_SIM_CMD='...' runs that shell command there instead of mpi-device.sh.
set -u
cd "$(dirname "$0")/../.." || exit 1
[ "$(id -u)" = 0 ] || { echo "mpi-sim: needs root (unshare -m, mount)" >&2; exit 1; }
if [ "${1:-}" != --inside ]; then
	T=$(mktemp -d "${TMPDIR:-/tmp}/mpi-sim.XXXXXX") || exit 1   # (a tmpfs there, in the namespace)
	unshare -m --propagation private bash "$0" --inside "$T" "$@"
	rc=$?
	rmdir "$T"
	exit "$rc"
fi
T=$2
shift 2
PKGS="openmpi-bin libopenmpi3 libopenmpi-dev openmpi-common mpi-default-bin mpi-default-dev
 libucx0 ucx-utils libpmix2 libpmix-dev libhwloc15 libhwloc-dev libhwloc-plugins hwloc
 libevent-2.1-7 libevent-core-2.1-7 libevent-extra-2.1-7 libevent-openssl-2.1-7
 libevent-pthreads-2.1-7 libevent-dev libnuma1 libnuma-dev libmunge2 libnl-3-200
 libnl-route-3-200 libnl-genl-3-200 libnl-3-dev libnl-route-3-dev libisal2 libibverbs1
 libibverbs-dev librdmacm1 librdmacm-dev ibverbs-providers ibverbs-utils rdmacm-utils
 libfabric1 libpsm2-2 libpsm-infinipath1 iproute2 libbpf1 libelf1 libmnl0 python3-mpi4py perftest"
list=$(mktemp)
for p in $PKGS; do dpkg -L "$p" 2>/dev/null; done | grep -E '^/(usr|etc|bin|sbin|lib)/' | sort -u >"$list"
mount -t tmpfs mpi-sim "$T" || exit 1
for d in usr etc; do
	mkdir -p "$T/$d.u" "$T/$d.w"
	mount -t overlay overlay -o "lowerdir=/$d,upperdir=$T/$d.u,workdir=$T/$d.w" "/$d" || exit 1
done
n=0
while IFS= read -r f; do
	case $f in /bin/* | /sbin/* | /lib/*) f=/usr$f ;; esac   # merged /usr
	if [ -L "$f" ] || [ -f "$f" ]; then rm -f "$f" && n=$((n + 1)); fi
done <"$list"
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/ucx /usr/lib/x86_64-linux-gnu/pmix2 \
	/usr/share/openmpi /etc/openmpi /usr/share/ucx /usr/lib/x86_64-linux-gnu/hwloc \
	/usr/lib/x86_64-linux-gnu/libibverbs /etc/libibverbs.d /etc/alternatives/mpi*; do
	rm -rf "$d"
done
rm -f "$list"
echo "== mpi-sim: $n files of $(wc -w <<<"$PKGS") Debian packages hidden in this mount namespace"
for t in mpirun orterun mpicc ompi_info ucx_info ip ss ibv_devinfo; do printf '%s: %s  ' "$t" "$(command -v "$t" || echo absent)"; done
echo
left=$(find /usr/lib/x86_64-linux-gnu -maxdepth 1 ! -xtype l -regextype egrep \
	-regex '.*/lib(mpi|open-(pal|rte)|uc[mpst]|pmix|hwloc|event|numa|munge|nl-|isal|ibverbs|rdmacm|mlx5|bpf|elf|mnl).*')
echo "system libraries of those names left: ${left:-none}"
if [ -n "${MPI_SIM_CMD:-}" ]; then env "$@" bash -c "$MPI_SIM_CMD"; exit; fi   # (a probe instead)
env "$@" bash scripts/experiments/mpi-device.sh
