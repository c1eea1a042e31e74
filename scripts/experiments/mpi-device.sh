#!/usr/bin/env bash
# scripts/experiments/mpi-device.sh: `make bench-mpi` (bench/mpi/run.sh:
# Open MPI over UCX on uroce vs UCX tcp vs ob1 TCP, two ranks in two network
# namespaces) on the GPU machine, which has no Open MPI, UCX, PMIx, iproute2
# or package registry: all of them travel in .device/mpi, made here by
# scripts/experiments/mpi-kit.sh (its header has the layout). Build and
# make the kit here, then
#   run: bash scripts/experiments/mpi-device.sh      carry: build .device/mpi
# (.device/bench is not needed: the kit has its own ip). No make, no
# scripts/deps.sh (apt-get): run.sh directly, with the prebuilt osu_mpi
# (BENCH_MPI_OSU), the kit's Open MPI relocated (OPAL_PREFIX and friends),
# PMIx's components and help texts (PMIX_*), UCX's modules beside libucs.
# BENCH_* pass through to run.sh (default here: BENCH_REPEAT=7,
# BENCH_MPI_SECS=0.4, all sizes, BENCH_MPI_TIMEOUT=60: 21 runs of about 10 s,
# about 4 minutes on 16 cores; BENCH_QUICK=1: run.sh's quick run, 1 repeat,
# 0.1 s a size); the whole of this script is bounded by T_MPI seconds
# (default 540, at most 545: the checks first, run.sh in what is left).
# Results in $OUT (default /tmp/mpi-device): mpi.log (this output),
# mpi-latest.md, mpi-latest.json, mpi.tar.gz (all of BENCH_OUT: every
# mpirun's logs, the plot), rc (run.sh's exit status, also this script's).
# scripts/experiments/mpi-sim.sh runs it here with Debian's packages hidden.
set -u
cd "$(dirname "$0")/../.." || exit 1
K=$PWD/.device/mpi
O=${OUT:-/tmp/mpi-device}
mkdir -p "$O"
rm -f "$O/rc"
[ -x "$K/bin/orterun" ] || { echo "mpi-device: no $K (make it with scripts/experiments/mpi-kit.sh, carry .device/mpi)" >&2; exit 1; }
[ -x build/bin/uroce ] || { echo "mpi-device: no build/bin/uroce (carry build)" >&2; exit 1; }

export PATH=$K/bin:$PATH
export LD_LIBRARY_PATH=$K/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$K/lib2
# Open MPI's install directories (Debian's: /usr, /etc/openmpi,
# /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3, /usr/share/openmpi):
# each one, not only OPAL_PREFIX, since Debian's sysconfdir is not under it
export OPAL_PREFIX=$K OPAL_EXEC_PREFIX=$K OPAL_BINDIR=$K/bin OPAL_SBINDIR=$K/bin OPAL_LIBDIR=$K/lib \
	OPAL_PKGLIBDIR=$K/lib/openmpi3 OPAL_DATAROOTDIR=$K/share OPAL_DATADIR=$K/share \
	OPAL_PKGDATADIR=$K/share/openmpi OPAL_SYSCONFDIR=$K/etc
# PMIx (Debian's: /usr/lib/x86_64-linux-gnu/pmix2/{lib,lib/pmix,share/pmix})
export PMIX_PREFIX=$K PMIX_EXEC_PREFIX=$K PMIX_LIBDIR=$K/lib PMIX_PKGLIBDIR=$K/lib/pmix \
	PMIX_DATAROOTDIR=$K/share PMIX_DATADIR=$K/share PMIX_PKGDATADIR=$K/share/pmix \
	PMIX_MCA_mca_base_component_path=$K/lib/pmix
# hwloc: no plugins (Debian's libhwloc-plugins is not carried; the
# machine's own, if any, are not this libhwloc's)
export HWLOC_PLUGINS_PATH=$K/lib/hwloc
# (UCX finds its modules in $K/lib/ucx, beside libucs, by itself)
export BENCH_MPI_OSU=${BENCH_MPI_OSU:-$K/bin/osu_mpi}
# (BENCH_QUICK=1: run.sh's own quick defaults, 1 repeat, 0.1 s a size)
[ "${BENCH_QUICK:-0}" = 1 ] || export BENCH_REPEAT=${BENCH_REPEAT:-7} BENCH_MPI_SECS=${BENCH_MPI_SECS:-0.4}
# one mpirun takes about 10 s: a hung one ends at 60 s, leaving time for
# the others and the report within T_MPI
export BENCH_MPI_TIMEOUT=${BENCH_MPI_TIMEOUT:-60}
BO=${BENCH_OUT:-/tmp/mpi-device-out}
export BENCH_OUT=$BO
T_MPI=${T_MPI:-540}
[ "$T_MPI" -le 545 ] || T_MPI=545

# run.sh's report takes Open MPI's and UCX's versions from dpkg-query: here
# the kit's Debian packages (.device/mpi/VERSIONS), the machine's otherwise
SHIM=$(mktemp -d "${TMPDIR:-/tmp}/mpi-device-shim.XXXXXX") || exit 1
# shellcheck disable=SC2016  # the shim's own $p, $v
{
	echo '#!/bin/sh'
	echo 'for p; do :; done'
	echo "v=\$(awk -v p=\"\$p\" '\$1 == p {print \$2}' '$K/VERSIONS')"
	echo '[ -n "$v" ] && { printf "%s" "$v"; exit 0; }'
	if real=$(command -v dpkg-query); then echo "exec '$real' \"\$@\""; else echo 'exit 1'; fi
} >"$SHIM/dpkg-query"
chmod +x "$SHIM/dpkg-query"
export PATH=$SHIM:$PATH

{
	echo "== machine: $(nproc) CPUs, $(uname -r), $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}"), glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | cut -d' ' -f2), uid $(id -u)"
	echo "== kit: $(tr '\n' ';' <"$K/VERSIONS")"
	# a batch system's job variables (uroce mpirun --netns leaves them out)
	echo "== batch-system variables: $(env | grep -oE '^(SLURM_|PBS_|LSB_|PE_HOSTFILE|FLUX_|OMPI_|PMIX_)[A-Za-z0-9_]*' | tr '\n' ' ')"
	for t in mpirun orted ompi_info ucx_info ip osu_mpi python3 timeout stdbuf gnuplot; do
		printf '%s: %s\n' "$t" "$(command -v "$t" || echo MISSING)"
	done
	# libraries: the kit's programs, Open MPI's components, UCX's modules,
	# uroce's own (libibverbs and librdmacm: uroce's, found under uroce run)
	for f in "$K"/bin/* "$K"/lib/*.so* "$K"/lib/openmpi3/*.so "$K"/lib/ucx/*.so* "$K"/lib/pmix/*.so build/bin/uroce build/lib/*.so*; do
		m=$(LD_LIBRARY_PATH=$PWD/build/lib:$LD_LIBRARY_PATH:$K/lib/ucx ldd "$f" 2>&1 | grep 'not found')
		[ -n "$m" ] && echo "MISSING for ${f#"$PWD"/}: $m"
	done
	echo "== ompi_info: $(timeout 30 ompi_info --parsable 2>&1 | grep -m1 '^ompi:version:full' || echo FAILED)"
	timeout 30 ompi_info --path all 2>&1 | grep -E 'Prefix|Libdir|Pkglibdir|Pkgdatadir|Sysconfdir' | sort -u | sed 's/^ */   /'
	echo "== pml components: $(timeout 30 ompi_info --parsable 2>&1 | grep -o '^mca:pml:[a-z0-9]*' | sort -u | cut -d: -f3 | tr '\n' ' ')"
	echo "== UCX under uroce run, memory domain: transport/device (this machine's own interfaces):"
	timeout 30 build/bin/uroce run -- ucx_info -v 2>&1 | head -1
	timeout 30 build/bin/uroce run -- ucx_info -d 2>&1 |
		awk '/Memory domain:/ {md = $4} /Transport:/ {tl = $3} /Device:/ {d[md] = d[md] " " tl "/" $3}
			END {for (m in d) print "   " m ":" d[m]}' | sort
	left=$((T_MPI - SECONDS - 5))   # (the checks above count too; 5 s for the tar)
	echo "== bench/mpi/run.sh, limit ${left}s: $(env | grep -E '^BENCH_' | grep -v '^BENCH_MPI_OSU=' | sort | tr '\n' ' ')"
	timeout -k 5 "$left" bash bench/mpi/run.sh
	rc=$?
	echo "$rc" >"$O/rc"
	echo "== bench-mpi exit $rc$([ "$rc" = 124 ] && echo " (the limit, ${left}s)")"
	if [ "$BO/mpi-latest.md" -nt "$SHIM" ]; then   # (this run's)
		echo "== the table above: $BO/mpi-latest.md (also in $O)"
		echo "== uroce traffic of each uroce run (UROCE_LOG=info exit counters of every rank):"
		for d in "$BO"/mpi-logs/uroce.r*; do
			[ -d "$d" ] || continue
			echo "   ${d##*/}: $(grep -cE 'info: uroce_\S+: tx [1-9][0-9]* pkts' "$d/err.log") rank(s) sent on uroce:" \
				"$(sed -n 's/.*info: \(uroce_[^:]*\): \(tx [0-9]* pkts\).*/\1 \2;/p' "$d/err.log" | tr '\n' ' ')"
		done
	fi
} 2>&1 | tee "$O/mpi.log"
cp "$BO"/mpi-latest.md "$BO"/mpi-latest.json "$O/" 2>/dev/null
tar -C "$BO" -czf "$O/mpi.tar.gz" . 2>/dev/null
rm -rf "$SHIM"
exit "$(cat "$O/rc" 2>/dev/null || echo 1)"
