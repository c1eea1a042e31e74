#!/bin/bash
# validate.sh — prove the rxe peer works: ping, rxe0 ACTIVE + GID table, loopback
# RC pingpong and perftest inside the guest, and RoCEv2 leaving the guest (tshark on the tap).
# Boots the VM if it is not running (and leaves it running). Logs in $ART/validate/.
set -uo pipefail
. "$(dirname "$0")/config.sh"
"$RXE_DIR/boot.sh" >/dev/null || { echo "validate: boot failed"; exit 1; }
. "$RUN/peer.env"
V=$ART/validate; mkdir -p "$V"; rm -f "$V"/*
GX="$RXE_DIR/gx"
G=$RXE_PEER_GID_INDEX
pass=0 fail=0
ok() { echo "ok   $*"; pass=$((pass+1)); }
ko() { echo "FAIL $*"; fail=$((fail+1)); }

# 1. IP reachability from the host namespace
if ip netns exec "$NS" ping -c 3 -W 2 "$RXE_PEER_IP" >"$V/ping.txt" 2>&1; then ok "ping $RXE_PEER_IP from netns $NS"; else ko "ping (see $V/ping.txt)"; fi

# 2. rxe0 is ACTIVE and has the RoCEv2 IPv4 GID at the index boot.sh reported
"$GX" 'rdma link; ibv_devinfo -d rxe0; ibv_devinfo -v -d rxe0 | grep "GID\["; P=/sys/class/infiniband/rxe0/ports/1;
  echo "sysfs (index gid type ndev):"; for n in $(grep -l -s -v -x 0000:0000:0000:0000:0000:0000:0000:0000 $P/gids/* | sed "s|.*/||" | sort -n); do
  echo "$n $(cat $P/gids/$n) $(cat $P/gid_attrs/types/$n) $(cat $P/gid_attrs/ndevs/$n)"; done' >"$V/guest-verbs.txt" 2>&1
if grep -q PORT_ACTIVE "$V/guest-verbs.txt" && grep -q "GID\[ *$G\]:.*::ffff:$RXE_PEER_IP, RoCE v2" "$V/guest-verbs.txt"; then
	ok "rxe0 PORT_ACTIVE, GID[$G] = ::ffff:$RXE_PEER_IP RoCE v2"
else ko "rxe0 state/GID (see $V/guest-verbs.txt)"; fi

# 3. loopback RC pingpong between two processes in the guest
"$GX" -t 60 "ibv_rc_pingpong -d rxe0 -g $G -p 18600 -n 500 >/tmp/v_pp_srv.log 2>&1 & sleep 1;
  ibv_rc_pingpong -d rxe0 -g $G -p 18600 -n 500 127.0.0.1; c=\$?; wait \$!; s=\$?; cat /tmp/v_pp_srv.log; echo rc=\$c/\$s" >"$V/loopback-pingpong.txt" 2>&1
if grep -q 'rc=0/0' "$V/loopback-pingpong.txt" && grep -q 'iters in' "$V/loopback-pingpong.txt"; then
	ok "loopback ibv_rc_pingpong in guest: $(grep -m1 'bytes in' "$V/loopback-pingpong.txt")"
else ko "loopback pingpong (see $V/loopback-pingpong.txt)"; fi

# 4. loopback perftest (RDMA WRITE) in the guest
"$GX" -t 60 "ib_write_bw -d rxe0 -x $G -p 18601 -D 2 --report_gbits >/tmp/v_bw_srv.log 2>&1 & sleep 1.5;
  ib_write_bw -d rxe0 -x $G -p 18601 -D 2 --report_gbits 127.0.0.1; c=\$?; wait \$!; s=\$?; echo rc=\$c/\$s" >"$V/loopback-write-bw.txt" 2>&1
if grep -q 'rc=0/0' "$V/loopback-write-bw.txt"; then
	ok "loopback ib_write_bw in guest: $(awk '/^ *65536 /{print $4" Gb/s avg"}' "$V/loopback-write-bw.txt")"
else ko "loopback ib_write_bw (see $V/loopback-write-bw.txt)"; fi

# 5. RoCEv2 leaves the guest: its RC client talks to a fake pingpong server (TCP side only)
#    on the host; its SENDs to $RXE_HOST_IP:4791 are captured on the tap.
ip netns exec "$NS" timeout 30 tshark -q -i "$TAP" -f 'udp port 4791' -c 40 -a duration:20 -w "$V/roce.pcap" >"$V/tshark.log" 2>&1 &
tpid=$!
for i in $(seq 50); do grep -q 'Capturing on' "$V/tshark.log" 2>/dev/null && break; sleep 0.2; done
ip netns exec "$NS" timeout 30 python3 "$RXE_DIR/fake_pp_peer.py" "$RXE_HOST_IP" 18700 >"$V/fake-peer.txt" 2>&1 &
fpid=$!
sleep 0.5
# rxe treats retry_cnt=7 (what ibv_rc_pingpong asks for) as infinite, so bound the client
"$GX" -t 20 "timeout 4 ibv_rc_pingpong -d rxe0 -g $G -p 18700 -n 3 $RXE_HOST_IP; echo client_rc=\$?" >"$V/wire-client.txt" 2>&1
wait $fpid; wait $tpid
tshark -r "$V/roce.pcap" 2>/dev/null >"$V/roce.txt"
n=$(grep -c RRoCE "$V/roce.txt")
if [ "$n" -gt 0 ]; then ok "RoCEv2 on the tap: $n packets, first: $(head -1 "$V/roce.txt" | sed 's/^ *//')"
else ko "no RoCEv2 packets captured (see $V/tshark.log, $V/wire-client.txt)"; fi
# the project's capture checker (tests/clients/pcap_check.py: scapy ICRC, tshark decode)
PCHK=$RXE_DIR/../../clients/pcap_check.py
if [ -f "$PCHK" ] && /usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null; then
	/usr/bin/python3 "$PCHK" --allow-rewind "$V/roce.pcap" >"$V/icrc.txt" 2>&1
	echo "     pcap_check.py: $(grep -o 'icrc_ok=[0-9]*' "$V/icrc.txt" | head -1) of $(grep -o 'frames=[0-9]*' "$V/icrc.txt" | head -1): $(tail -1 "$V/icrc.txt")"
fi

echo "validate: $pass passed, $fail failed   (logs in $V)"
[ $fail -eq 0 ]
