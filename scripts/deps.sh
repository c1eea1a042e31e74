#!/usr/bin/env bash
# Install (or report) the Debian packages uroce needs.
#   scripts/deps.sh build   - what `make` needs (headers and libraries)
#   scripts/deps.sh test    - what `make test` needs (real peers: perftest, qperf, ...)
#   scripts/deps.sh bench   - what `make bench` needs
# Packages already present are not touched. As root this runs apt-get; otherwise
# it prints the exact command to run and exits non-zero.
set -euo pipefail
what=${1:-build}

build_pkgs="libibverbs-dev librdmacm-dev zlib1g-dev libpcap-dev libisal-dev libhwloc-dev pkg-config"
test_pkgs="$build_pkgs ibverbs-utils infiniband-diags rdmacm-utils perftest qperf iproute2 tshark python3-scapy hwloc procps chromium ucx-utils openmpi-bin libopenmpi-dev python3-mpi4py"
bench_pkgs="$test_pkgs iperf3 sockperf gnuplot-nox"

case "$what" in
build) pkgs=$build_pkgs ;;
test) pkgs=$test_pkgs ;;
bench) pkgs=$bench_pkgs ;;
*) echo "usage: $0 build|test|bench" >&2; exit 2 ;;
esac

missing=()
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "uroce: missing Debian packages: ${missing[*]}" >&2
	echo "uroce: run as root:  apt-get install -y ${missing[*]}" >&2
	exit 1
fi
echo "uroce: installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no without a prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/uroce-apt.log 2>&1; then
	apt-get update -q >>/tmp/uroce-apt.log 2>&1
	apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/uroce-apt.log 2>&1 || {
		echo "uroce: apt-get failed, see /tmp/uroce-apt.log" >&2; tail -20 /tmp/uroce-apt.log >&2; exit 1; }
fi
