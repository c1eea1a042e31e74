#!/usr/bin/env bash
# scripts/experiments/mpi-kit.sh: assembles .device/mpi (git-ignored), the
# Open MPI + UCX + PMIx kit that lets `make bench-mpi` (bench/mpi/run.sh)
# run on the GPU machine, which has none of them, no iproute2 and no
# package registry (scripts/experiments/mpi-device.sh runs it there). Run
# here (Debian 12: openmpi-bin, libopenmpi3, libucx0, ucx-utils, libpmix2,
# libhwloc15, iproute2 installed; libopenmpi-dev for mpicc):
#   bash scripts/experiments/mpi-kit.sh        (rebuilds .device/mpi)
# Layout (no symbolic links: every library under its soname, a plain file):
#   bin/            mpirun (= orterun), orterun, orted, ompi_info, ucx_info,
#                   ip (iproute2), osu_mpi (bench/mpi/osu_mpi.c, mpicc -O2)
#   lib/            searched first: Open MPI's libraries, UCX's, libpmix,
#                   libhwloc, libevent, libnuma, libmunge, libnl, libmlx5,
#                   libisal (uroce's libibverbs needs it)
#   lib/openmpi3/   Open MPI's components (OPAL_PKGLIBDIR), those whose
#                   libraries the kit has (not ofi, psm, psm2, openib,
#                   oshmem's)
#   lib/ucx/        UCX's modules (libuct_ib...): UCX looks in ucx/ beside
#                   libucs
#   lib/pmix/       PMIx's components (PMIX_MCA_mca_base_component_path)
#   lib2/           searched last: Debian's copies of common libraries a
#                   minimal Ubuntu may lack (libudev, libz, ip's libbpf...)
#   share/openmpi/  Open MPI's help texts (OPAL_PKGDATADIR)
#   share/pmix/     PMIx's help texts (PMIX_PKGDATADIR)
#   etc/            Debian's openmpi-mca-params.conf (OPAL_SYSCONFDIR: pml
#                   ^ucx, osc ^ucx,pt2pt...; uroce mpirun overrides pml)
#   VERSIONS        the Debian packages it came from
# Never carried: libibverbs and librdmacm (uroce's, build/lib, under
# `uroce run`; a rank outside it loads no ib module, as ucx-tcp needs none).
set -u
cd "$(dirname "$0")/../.." || exit 1
TOP=$PWD
K=$TOP/.device/mpi
A=/usr/lib/x86_64-linux-gnu
OMPI_PKGLIB=$A/openmpi/lib/openmpi3
PMIX=$A/pmix2

for p in openmpi-bin libopenmpi3 openmpi-common libucx0 ucx-utils libpmix2 libhwloc15 iproute2 libopenmpi-dev; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		{ echo "mpi-kit: Debian package $p is not installed (apt-get install $p)" >&2; exit 1; }
done
command -v mpicc >/dev/null || { echo "mpi-kit: no mpicc (libopenmpi-dev)" >&2; exit 1; }

rm -rf "$K"
mkdir -p "$K"/{bin,lib/openmpi3,lib/ucx,lib/pmix,lib2,share/openmpi,share/pmix,etc}

# put FILE DIR [NAME]: a plain copy (symbolic links followed)
put() {
	cp -L --preserve=mode,timestamps "$1" "$2/${3:-$(basename "$1")}" ||
		{ echo "mpi-kit: cannot copy $1" >&2; exit 1; }
}
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

# ------------------------------------------------------------ programs
put /usr/bin/orterun "$K/bin"
put /usr/bin/orterun "$K/bin" mpirun
put /usr/bin/orted "$K/bin"
put /usr/bin/ompi_info "$K/bin"
put /usr/bin/ucx_info "$K/bin"
put /usr/bin/ip "$K/bin"
if ! mpicc -O2 -o "$K/bin/osu_mpi" bench/mpi/osu_mpi.c; then
	echo "mpi-kit: osu_mpi did not build" >&2; exit 1
fi

# ------------------------------------------------------------ libraries
# Open MPI (not liboshmem, libmpi_java, Fortran, C++: osu_mpi is C)
for l in libmpi.so.40 libopen-rte.so.40 libopen-pal.so.40 libmca_common_ucx.so.40 \
	libmca_common_sm.so.40 libmca_common_ompio.so.41 libmca_common_monitoring.so.50; do
	put "$A/$l" "$K/lib"
done
# UCX and its modules
for l in libucs.so.0 libucs_signal.so.0 libuct.so.0 libucp.so.0 libucm.so.0; do put "$A/$l" "$K/lib"; done
for m in ib rdmacm cma; do put "$A/ucx/libuct_$m.so.0" "$K/lib/ucx"; done
# PMIx, its components and help texts
put "$PMIX/lib/libpmix.so.2" "$K/lib"
for f in "$PMIX"/lib/pmix/*.so; do put "$f" "$K/lib/pmix"; done
cp -L "$PMIX"/share/pmix/* "$K/share/pmix/"
# what those need beyond glibc: in lib/ what a minimal Ubuntu lacks
for l in libhwloc.so.15 libevent_core-2.1.so.7 libevent_pthreads-2.1.so.7 libnuma.so.1 \
	libmunge.so.2 libnl-3.so.200 libnl-route-3.so.200 libmlx5.so.1 libisal.so.2; do
	put "$A/$l" "$K/lib"
done
# in lib2/ (searched last) the common ones a minimal Ubuntu may still lack:
# libhwloc's libudev, libopen-rte's libz, ip's libbpf, libelf, libmnl,
# libcap, libbsd, libmd
for l in libudev.so.1 libz.so.1 libbpf.so.1 libelf.so.1 libmnl.so.0 libcap.so.2 libbsd.so.0 libmd.so.0; do
	put "$A/$l" "$K/lib2"
done

# Open MPI's components: those whose libraries are all here (or glibc's)
have_lib() {
	case $1 in libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | librt.so.1 | ld-linux-x86-64.so.2) return 0 ;; esac
	[ -e "$K/lib/$1" ] || [ -e "$K/lib2/$1" ]
}
left=()
for f in "$OMPI_PKGLIB"/mca_*.so; do
	ok=1
	for n in $(needed "$f"); do have_lib "$n" || { ok=0; break; }; done
	if [ "$ok" = 1 ]; then put "$f" "$K/lib/openmpi3"; else left+=("$(basename "$f" .so)($n)"); fi
done
echo "mpi-kit: left out ${#left[@]} Open MPI components: ${left[*]}"

# ------------------------------------------------------------ data, config
cp -L /usr/share/openmpi/help-*.txt "$K/share/openmpi/"
put /usr/share/openmpi/mca-btl-openib-device-params.ini "$K/share/openmpi"
put /etc/openmpi/openmpi-mca-params.conf "$K/etc"
put /etc/openmpi/openmpi-default-hostfile "$K/etc"
dpkg-query -W -f='${Package} ${Version}\n' openmpi-bin libopenmpi3 libucx0 libpmix2 libhwloc15 \
	libevent-core-2.1-7 iproute2 ibverbs-providers >"$K/VERSIONS"
echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release; echo "$PRETTY_NAME"), osu_mpi from commit $(git rev-parse --short HEAD 2>/dev/null)" >>"$K/VERSIONS"

# ------------------------------------------------------------ closure check
# every ELF of the kit against the kit alone (plus uroce's build/lib for
# libibverbs/librdmacm, plus glibc): a library missing here is missing there
miss=0
while IFS= read -r f; do
	readelf -h "$f" >/dev/null 2>&1 || continue
	for n in $(needed "$f"); do
		case $n in libibverbs.so.1 | librdmacm.so.1) [ -e "$TOP/build/lib/$n" ] && continue ;; esac
		have_lib "$n" || [ -e "$K/lib/ucx/$n" ] || { echo "mpi-kit: ${f#"$K"/} needs $n, not in the kit" >&2; miss=1; }
	done
done < <(find "$K" -type f)
[ "$miss" = 0 ] || exit 1
echo "mpi-kit: $K ready, $(du -sh "$K" | cut -f1) ($(find "$K" -type f | wc -l) files)"
