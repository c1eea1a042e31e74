#!/bin/bash
# boot.sh — start the rxe peer VM behind a tap in network namespace $NS.
#   ./boot.sh            boot (no-op if it is already running); waits for RXE-PEER-READY
#   ./boot.sh --restart  stop.sh first, then boot
# Host side afterwards:  ip netns exec rxehost ...   (tap rxetap0 = 198.18.1.1/24)
# Guest:                 198.18.1.2, rxe0; ./gx 'cmd' runs a command in it
# Facts for tests:       $RUN/peer.env (RXE_PEER_IP, RXE_PEER_GID_INDEX, ...)
set -euo pipefail
. "$(dirname "$0")/config.sh"
[ "$(id -u)" = 0 ] || { echo "boot.sh: must run as root" >&2; exit 1; }
KV=$(kver)
for f in "$ART/kernel/boot/vmlinuz-$KV" "$ART/initrd.img" "$ART/rootfs.ext4"; do
	[ -n "$KV" ] && [ -f "$f" ] || { echo "boot.sh: missing ${f:-kernel.version}; run build.sh first" >&2; exit 1; }
done

running() {
	local pid; pid=$(cat "$RUN/qemu.pid" 2>/dev/null) || return 1
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q 'guest=rxe-peer'
}
if [ "${1:-}" = --restart ]; then "$RXE_DIR/stop.sh"; fi
if running; then
	echo "rxe peer already running (qemu pid $(cat "$RUN/qemu.pid")); --restart to reboot it"
	cat "$RUN/peer.env" 2>/dev/null; exit 0
fi
mkdir -p "$RUN"
rm -f "$RUN/console.log" "$RUN/ctl.sock" "$RUN/monitor.sock" "$RUN/qemu.pid" "$RUN/peer.env"

# ---- host side: namespace + tap, no default route
ip netns list | grep -qw "^$NS" || ip netns add "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" link show "$TAP" >/dev/null 2>&1 || ip -n "$NS" tuntap add dev "$TAP" mode tap
ip -n "$NS" addr flush dev "$TAP"
ip -n "$NS" addr add "$HOST_IP/$PREFIX" dev "$TAP"
ip -n "$NS" link set "$TAP" mtu "$MTU" up

# ---- qemu
A=$(pick_accel)
case $A in
kvm) ACC=(-accel kvm -cpu "${KVM_CPU:-host}") ;;
tcg) ACC=(-accel tcg,thread=multi -cpu max) ;;
*) echo "boot.sh: ACCEL must be auto, kvm or tcg" >&2; exit 1 ;;
esac
APPEND="console=ttyS0,115200 loglevel=4 panic=-1 net.ifnames=0 rxe_ip=$GUEST_IP/$PREFIX rxe_mtu=$MTU rxe_servers=$RXE_SERVERS rxe_pp_port=$PP_PORT rxe_bw_port=$BW_PORT ${EXTRA_APPEND:-}"
T0=$(date +%s%N)
ip netns exec "$NS" qemu-system-x86_64 -name guest=rxe-peer "${ACC[@]}" -m "$MEM" -smp "$SMP" \
	-kernel "$ART/kernel/boot/vmlinuz-$KV" -initrd "$ART/initrd.img" -append "$APPEND" \
	-drive file="$ART/rootfs.ext4",format=raw,if=virtio,snapshot=on \
	-netdev tap,id=n0,ifname="$TAP",script=no,downscript=no,vnet_hdr="$TAP_VNET_HDR" \
	-device virtio-net-pci,netdev=n0,mac="$GUEST_MAC" \
	-serial file:"$RUN/console.log" \
	-serial unix:"$RUN/ctl.sock",server=on,wait=off \
	-monitor unix:"$RUN/monitor.sock",server=on,wait=off \
	-nodefaults -display none -no-reboot -daemonize -pidfile "$RUN/qemu.pid"
echo "qemu pid $(cat "$RUN/qemu.pid") accel=$A (console: $RUN/console.log)"

# ---- wait for the guest's init to report
ready=
for i in $(seq $((BOOT_TIMEOUT * 5))); do
	ready=$(grep -a -m1 '^RXE-PEER-READY' "$RUN/console.log" 2>/dev/null || true)
	[ -n "$ready" ] && break
	running || { echo "boot.sh: qemu died; console tail:"; tail -20 "$RUN/console.log"; exit 1; }
	sleep 0.2
done
T1=$(date +%s%N)
[ -n "$ready" ] || { echo "boot.sh: no RXE-PEER-READY after ${BOOT_TIMEOUT}s; console tail:"; tail -30 "$RUN/console.log"; exit 1; }
ready=$(echo "$ready" | tr -d '\r')
echo "$ready"
gidx=$(echo "$ready" | sed -n 's/.*gid_index=\([0-9]*\).*/\1/p')
gid=$(echo "$ready" | sed -n 's/.* gid=\([0-9a-f:]*\).*/\1/p')
cat > "$RUN/peer.env" <<EOF
RXE_NS=$NS
RXE_TAP=$TAP
RXE_HOST_IP=$HOST_IP
RXE_PEER_IP=$GUEST_IP
RXE_PEER_MAC=$GUEST_MAC
RXE_PEER_GID_INDEX=$gidx
RXE_PEER_GID=$gid
RXE_PEER_PP_PORT=$PP_PORT
RXE_PEER_BW_PORT=$BW_PORT
RXE_PEER_SERVERS=$RXE_SERVERS
RXE_PEER_ACCEL=$A
RXE_QEMU_PID=$(cat "$RUN/qemu.pid")
EOF
ms=$(( (T1 - T0) / 1000000 ))
echo "boot to ready: $((ms/1000)).$(printf %03d $((ms%1000))) s  (facts in $RUN/peer.env)"
[ -n "$gidx" ] || { echo "boot.sh: guest found no RoCEv2 IPv4 GID" >&2; exit 1; }
