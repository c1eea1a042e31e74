#!/bin/bash
# Experiment, not a test (docs/design.md, "NCCL over uroce"): a two-rank
# NCCL all-reduce on one GPU over uroce_lo, each rank its own NCCL_HOSTID.
# Needs root, PyTorch with CUDA and an NVIDIA GPU. With FAKE=1 (default) it
# bind-mounts a copy of /sys/class that adds infiniband/uroce_lo/device
# (a link to eth0's PCI device) over /sys/class for the run, and unmounts
# it at the end. EXTRA_ENV adds variables; TAILN lines of each log shown.
#   BUILD=build scripts/experiments/nccl-try.sh
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
while umount /sys/class 2>/dev/null; do :; done
F=/tmp/fakeclass.$$; rm -rf /tmp/fakeclass.*; mkdir -p "$F"
for c in /sys/class/*; do ln -sfn "$c" "$F/$(basename "$c")"; done
rm -rf "$F/infiniband"; mkdir -p "$F/infiniband/uroce_lo"
NIC=$(readlink -f /sys/class/net/eth0/device); case $NIC in */virtio*) NIC=$(dirname "$NIC");; esac
ln -sfn "$NIC" "$F/infiniband/uroce_lo/device"
if [ "${FAKE:-1}" = 1 ]; then
	if mount --bind "$F" /sys/class 2>/tmp/mnt.err; then echo "fake /sys/class mounted"
	else echo "mount failed: $(cat /tmp/mnt.err)"; fi
fi
realpath /sys/class/infiniband/uroce_lo/device
# shellcheck disable=SC2086  # EXTRA_ENV is a list of assignments
export UROCE_NETDEV=lo NCCL_NET=IB NCCL_IB_HCA=uroce_lo NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
	NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL NCCL_SOCKET_IFNAME=lo UROCE_SEGV_BACKTRACE=1 \
	NCCL_IB_GID_INDEX=0 ${EXTRA_ENV:-}
for r in 0 1; do
	NCCL_HOSTID=host$r timeout 120 "$BUILD/bin/uroce" run -- python3 scripts/experiments/nccl_ar.py $r \
		>/tmp/nccl$r.log 2>&1 &
done
wait
for r in 0 1; do
	echo "== rank $r"
	grep -E "NCCL (INFO|WARN)|fatal|libnccl|libibverbs|allreduce" /tmp/nccl$r.log | grep -v dlvsym | tail -"${TAILN:-30}"
done
umount /sys/class 2>/dev/null
rm -rf "$F"
