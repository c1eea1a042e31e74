#!/usr/bin/env bash
# Regenerates the recorded /sys + /proc trees that `uroce doctor --root`
# reads in tests/clients/test_doctor.sh. Each tree holds only the files the
# checks read. good/ is a healthy GPU server (one GPU and one ConnectX NIC
# behind the same PCIe switch on NUMA node 0); every other tree is good/
# with one thing broken, named after it:
#
#   downtrained     the NIC's link trained at 8 GT/s x8 of 16 GT/s x16   -> pcie-link FAIL
#   acs             ACS request/completion redirect on the switch ports   -> acs FAIL
#   mtu1500         interface MTU 1500 (test passes --peer-mtu 9000)      -> mtu FAIL
#   no-peermem      no nvidia_peermem, proprietary driver (no dma-buf)    -> peermem FAIL
#   cross-socket    NIC on the other socket's root complex, NUMA node 1   -> numa FAIL
#   iommu-strict    IOMMU translating (type DMA), iommu.strict=1          -> iommu FAIL
#   no-rocev2-gid   only RoCE v1 GIDs on the port                         -> gid FAIL
#   powersave       CPU frequency governor powersave                      -> governor WARN
#   small-rmem      net.core.rmem_max/wmem_max at the kernel default      -> sockbuf WARN
#   drops           rx_missed_errors and UDP RcvbufErrors                 -> drops WARN
#   ecn-off         DCQCN notification point disabled on every priority  -> ecn WARN
#   pfc-off         trust pcp, PFC off on every priority                  -> qos WARN
#   acs-unreadable  config space cut at 64 bytes, as a non-root user sees -> acs SKIP
#
#   tests/topo/doctor/mktrees.sh      (rewrites the trees next to it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# put FILE CONTENT: one file with one line.
put() { mkdir -p "$(dirname "$1")"; printf '%s\n' "$2" >"$1"; }

# config FILE CTRL [SIZE]: PCI config space with an ACS extended capability
# at 0x100 (capability 0x005f: SV RR CR UF EC) and ACS control CTRL.
config() {
	local f=$1 ctrl=$2 size=${3:-264}
	mkdir -p "$(dirname "$f")"
	{ head -c 256 /dev/zero
	  printf '\x0d\x00\x01\x00\x5f\x00'
	  printf '%b' "$(printf '\\x%02x\\x%02x' $((ctrl & 255)) $((ctrl >> 8)))"
	} >"$f"
	truncate -s "$size" "$f"
}

# pcidev DIR CLASS VENDOR NUMA [SPEED WIDTH MAXSPEED MAXWIDTH]
pcidev() {
	local d=$1
	put "$d/class" "$2"
	put "$d/vendor" "$3"
	put "$d/numa_node" "$4"
	if [ $# -gt 4 ]; then
		put "$d/current_link_speed" "$5"
		put "$d/current_link_width" "$6"
		put "$d/max_link_speed" "$7"
		put "$d/max_link_width" "$8"
	fi
}

good() {
	local r=$1 rp=sys/devices/pci0000:00/0000:00:01.0
	local up=$rp/0000:01:00.0 gpu nic if=ens1f0
	gpu=$up/0000:02:08.0/0000:03:00.0
	nic=$up/0000:02:10.0/0000:04:00.0
	pcidev "$r/$rp" 0x060400 0x8086 0 "16.0 GT/s PCIe" 16 "16.0 GT/s PCIe" 16
	pcidev "$r/$up" 0x060400 0x10b5 0
	pcidev "$r/$up/0000:02:08.0" 0x060400 0x10b5 0
	pcidev "$r/$up/0000:02:10.0" 0x060400 0x10b5 0
	config "$r/$up/0000:02:08.0/config" 0
	config "$r/$up/0000:02:10.0/config" 0
	pcidev "$r/$gpu" 0x030200 0x10de 0 "16.0 GT/s PCIe" 16 "16.0 GT/s PCIe" 16
	pcidev "$r/$nic" 0x020000 0x15b3 0 "16.0 GT/s PCIe" 16 "16.0 GT/s PCIe" 16

	local n=$r/sys/class/net/$if
	put "$n/mtu" 9000
	put "$n/operstate" up
	mkdir -p "$n"; ln -sfn "../../../${nic#sys/}" "$n/device"
	for c in rx_dropped rx_missed_errors rx_fifo_errors rx_over_errors rx_crc_errors tx_dropped; do
		put "$n/statistics/$c" 0
	done
	for p in 0 1 2 3 4 5 6 7; do
		put "$n/ecn/roce_np/enable/$p" $((p == 3))
		put "$n/ecn/roce_rp/enable/$p" $((p == 3))
	done
	put "$n/qos/trust" dscp
	put "$n/qos/pfc" "0 0 0 1 0 0 0 0"

	local ib=$r/sys/class/infiniband/mlx5_0
	mkdir -p "$ib"; ln -sfn "../../../${nic#sys/}" "$ib/device"
	put "$ib/ports/1/link_layer" Ethernet
	put "$ib/ports/1/gids/0" fe80:0000:0000:0000:0a42:a1ff:fe00:0001
	put "$ib/ports/1/gids/1" fe80:0000:0000:0000:0a42:a1ff:fe00:0001
	put "$ib/ports/1/gids/2" 0000:0000:0000:0000:0000:ffff:c612:0001
	put "$ib/ports/1/gids/3" 0000:0000:0000:0000:0000:ffff:c612:0001
	put "$ib/ports/1/gids/4" 0000:0000:0000:0000:0000:0000:0000:0000
	put "$ib/ports/1/gid_attrs/types/0" "IB/RoCE v1"
	put "$ib/ports/1/gid_attrs/types/1" "RoCE v2"
	put "$ib/ports/1/gid_attrs/types/2" "IB/RoCE v1"
	put "$ib/ports/1/gid_attrs/types/3" "RoCE v2"

	put "$r/sys/module/nvidia_peermem/version" 535.154.05
	put "$r/proc/driver/nvidia/version" \
		"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.154.05  Thu Dec 28 15:37:48 UTC 2023"
	put "$r/proc/sys/kernel/osrelease" 6.1.0-18-amd64
	put "$r/proc/cmdline" "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=/dev/sda1 ro quiet"
	for c in 0 1 2 3; do
		put "$r/sys/devices/system/cpu/cpu$c/cpufreq/scaling_governor" performance
	done
	put "$r/proc/sys/net/core/rmem_max" 16777216
	put "$r/proc/sys/net/core/wmem_max" 16777216
	udp "$r" 0 0
}

# udp ROOT RCVBUFERRORS SNDBUFERRORS: the Udp lines of /proc/net/snmp.
udp() {
	mkdir -p "$1/proc/net"
	printf 'Ip: Forwarding DefaultTTL\nIp: 1 64\n%s\n%s\n' \
		"Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors" \
		"Udp: 1000 0 $2 1000 $2 $3 0 0 0" >"$1/proc/net/snmp"
}

# tree NAME: a fresh copy of good/ to break.
tree() { rm -rf "${here:?}/$1"; cp -a "$here/good" "$here/$1"; echo "$here/$1"; }

rm -rf "${here:?}/good"
good "$here/good"
up=sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0

t=$(tree downtrained)
put "$t/$up/0000:02:10.0/0000:04:00.0/current_link_speed" "8.0 GT/s PCIe"
put "$t/$up/0000:02:10.0/0000:04:00.0/current_link_width" 8

t=$(tree acs)
config "$t/$up/0000:02:08.0/config" 0x001d
config "$t/$up/0000:02:10.0/config" 0x001d

t=$(tree mtu1500)
put "$t/sys/class/net/ens1f0/mtu" 1500

t=$(tree no-peermem)
rm -rf "$t/sys/module/nvidia_peermem"

t=$(tree cross-socket)
rp1=sys/devices/pci0000:80/0000:80:01.0
mkdir -p "$t/$rp1"
mv "$t/$up/0000:02:10.0/0000:04:00.0" "$t/$rp1/0000:81:00.0"
pcidev "$t/$rp1" 0x060400 0x8086 1 "16.0 GT/s PCIe" 16 "16.0 GT/s PCIe" 16
put "$t/$rp1/0000:81:00.0/numa_node" 1
ln -sfn "../../../${rp1#sys/}/0000:81:00.0" "$t/sys/class/net/ens1f0/device"
ln -sfn "../../../${rp1#sys/}/0000:81:00.0" "$t/sys/class/infiniband/mlx5_0/device"

t=$(tree iommu-strict)
put "$t/sys/class/iommu/dmar0/intel-iommu/version" 1:0
put "$t/sys/kernel/iommu_groups/0/type" DMA
put "$t/sys/kernel/iommu_groups/1/type" DMA
put "$t/proc/cmdline" "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=/dev/sda1 ro intel_iommu=on iommu.strict=1"

t=$(tree no-rocev2-gid)
put "$t/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/1" "IB/RoCE v1"
put "$t/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3" "IB/RoCE v1"

t=$(tree powersave)
for c in 0 1 2 3; do put "$t/sys/devices/system/cpu/cpu$c/cpufreq/scaling_governor" powersave; done

t=$(tree small-rmem)
put "$t/proc/sys/net/core/rmem_max" 212992
put "$t/proc/sys/net/core/wmem_max" 212992

t=$(tree drops)
put "$t/sys/class/net/ens1f0/statistics/rx_missed_errors" 12345
udp "$t" 678 0

t=$(tree ecn-off)
put "$t/sys/class/net/ens1f0/ecn/roce_np/enable/3" 0

t=$(tree pfc-off)
put "$t/sys/class/net/ens1f0/qos/trust" pcp
put "$t/sys/class/net/ens1f0/qos/pfc" "0 0 0 0 0 0 0 0"

t=$(tree acs-unreadable)
config "$t/$up/0000:02:08.0/config" 0 64
config "$t/$up/0000:02:10.0/config" 0 64
