# Shared settings for build.sh / boot.sh / stop.sh / gx / validate.sh.
# Every value can be overridden from the environment.
RXE_DIR=${RXE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
ART=${ART:-/var/tmp/rxe-peer}            # large artifacts (debs, kernel, rootfs, image)
RUN=${RUN:-$ART/run}                     # pidfile, console log, control sockets

SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-$(sed -n "s/^URIs: *//p" /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}   # the host's own Debian mirror
KPKG_META=${KPKG_META:-linux-image-amd64}  # resolved to linux-image-6.1.0-NN-amd64 at build time

# guest packages on top of debootstrap minbase
GUEST_PKGS=${GUEST_PKGS:-rdma-core,ibverbs-utils,ibverbs-providers,perftest,rdmacm-utils,infiniband-diags,iproute2,kmod,iputils-ping,procps,ethtool,tcpdump}

# network: host side lives in its own namespace, no default route anywhere
NS=${NS:-rxehost}
TAP=${TAP:-rxetap0}
HOST_IP=${HOST_IP:-198.18.1.1}
GUEST_IP=${GUEST_IP:-198.18.1.2}
PREFIX=${PREFIX:-24}
GUEST_MAC=${GUEST_MAC:-52:54:00:18:01:02}
MTU=${MTU:-1500}
# vnet_hdr on the tap: off = no checksum/GSO offload between host and guest, so a
# capture on the tap shows the packets exactly as the guest gets them
TAP_VNET_HDR=${TAP_VNET_HDR:-off}

# guest: which rxe servers init starts (comma list of pingpong,write_bw,none)
RXE_SERVERS=${RXE_SERVERS:-pingpong,write_bw}
PP_PORT=${PP_PORT:-18515}       # ibv_rc_pingpong server TCP port (its default)
BW_PORT=${BW_PORT:-18516}       # ib_write_bw server TCP port (perftest default is 18515 too, so moved)

MEM=${MEM:-1024}
SMP=${SMP:-2}
# ACCEL=auto picks kvm only when the CPU shows vmx/svm (real hardware virt).
# On the nested-PVM hosts of this workplace /dev/kvm exists but runs a stock
# kernel ~100x slower than TCG, so auto means tcg there.
ACCEL=${ACCEL:-auto}
BOOT_TIMEOUT=${BOOT_TIMEOUT:-180}

pick_accel() {
	local a=$ACCEL
	if [ "$a" = auto ]; then
		if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then a=kvm; else a=tcg; fi
	fi
	echo "$a"
}

kver() { cat "$ART/kernel.version" 2>/dev/null; }
