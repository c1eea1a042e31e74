#!/usr/bin/env bash
# Packet capture (UROCE_PCAP, `uroce trace -w`) checked by independent
# decoders: tshark (every packet InfiniBand over UDP 4791, none malformed,
# same opcode/PSN/QP as ours) and scapy's RoCE layer (every ICRC recomputed),
# plus PSN and opcode sequences per flow (tests/clients/pcap_check.py).
# Each operation type, with and without immediate data, multi-packet
# messages at MTUs 256..4096, ACKs, sequence NAKs (fault injection) and RNR
# NAKs. Loopback only (UROCE_NETDEV=lo), no root.
#   tests/clients/test_capture.sh [REGEX]
. "$(dirname "$0")/lib.sh"
lib_init "$@"
need_build

PCHK=(/usr/bin/python3 "$LIB_DIR/pcap_check.py")

have_checkers() {
	have_tools tshark || return 77
	if ! /usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null; then
		echo "python3-scapy not installed (scripts/deps.sh test)"
		return 77
	fi
}

# The checks count packets exactly, so no early retransmission may add
# any: on a loaded machine an ACK can wait longer than the 5 ms early
# timer (a tail loss probe then resends a packet; CI on 2026-12-06 with
# other work running). The QP's own timeout still applies, and the loss
# checks below set their own.
CAP_RTO_US=${CAP_RTO_US:-1000000}

# caps: the per-process capture files of this check, at least N of them.
caps() { # N
	CAPS=("$CHECK_DIR"/cap.*)
	if [ ! -e "${CAPS[0]}" ] || [ "${#CAPS[@]}" -lt "$1" ]; then
		echo "expected $1 capture files in $CHECK_DIR, found: $(ls "$CHECK_DIR" | tr '\n' ' ')"
		return 1
	fi
}

# t_cap_perf MTU CHECKARGS... -- TOOL ARGS...: perftest TOOL with -m MTU
# between two processes, each capturing to its own file; both files are
# checked (sequence checks per file), then merged with `mergecap` when
# present and checked as one file.
t_cap_perf() {
	local mtu=$1 port; shift
	local -a ca=()
	while [ "$1" != -- ]; do ca+=("$1"); shift; done
	shift
	local tool=$1; shift
	have_tools "$tool" || return 77
	have_checkers || return 77
	port=$(free_port) || return 1
	export UROCE_PCAP=$CHECK_DIR/cap.%p UROCE_RTO_US=$CAP_RTO_US
	pair lo lo "$port" "$tool" -x 0 -F -p "$port" "$@" -- \
		"$tool" -x 0 -F -p "$port" "$@" 127.0.0.1 || return 1
	unset UROCE_PCAP UROCE_RTO_US
	caps 2 || return 1
	echo "pcap_check ${ca[*]} ${CAPS[*]##*/}"
	"${PCHK[@]}" --allow-rewind ${mtu:+--mtu "$mtu"} "${ca[@]}" "${CAPS[@]}" || return 1
}

# t_cap_xfer CHECKARGS... -- TRACE_OPTS...: the built-in transfer of
# `uroce trace -w` (two processes, merged by uroce trace into one file).
t_cap_xfer() {
	local -a ca=()
	while [ "$1" != -- ]; do ca+=("$1"); shift; done
	shift
	have_checkers || return 77
	echo "uroce trace -w merged.pcap --keep . $*"
	UROCE_RTO_US=$CAP_RTO_US timeout -k 5 "$T_TIMEOUT" "$UROCE" trace -w "$CHECK_DIR/merged.pcap" --keep "$CHECK_DIR" "$@" \
		>"$CHECK_DIR/client.log" 2>&1 || { echo "uroce trace failed"; return 1; }
	caps 2 || return 1
	"${PCHK[@]}" "${ca[@]}" "${CAPS[@]}" || return 1
	echo "merged file:"
	"${PCHK[@]}" --merged "$CHECK_DIR/merged.pcap" || return 1
}

# SEND, WRITE, READ, atomics through perftest; multi-packet at several MTUs.
# Counts: both files hold every packet once (sent by one, received by the
# other), so N messages of P packets give 2*N*P.
check cap/ib_send_bw-mtu256 t_cap_perf 256 --expect SEND_FIRST=20 --expect SEND_MIDDLE=40 \
	--expect SEND_LAST=20 --expect 'ack>=2' -- ib_send_bw -s 1000 -n 10 -m 256
check cap/ib_write_bw-mtu512 t_cap_perf 512 --expect RDMA_WRITE_FIRST=20 --expect RDMA_WRITE_MIDDLE=20 \
	--expect RDMA_WRITE_LAST=20 -- ib_write_bw -s 1500 -n 10 -m 512
check cap/ib_write_bw-mtu1024 t_cap_perf 1024 --expect RDMA_WRITE_FIRST=20 --expect RDMA_WRITE_MIDDLE=60 \
	--expect RDMA_WRITE_LAST=20 --expect 'ack>=2' -- ib_write_bw -s 5000 -n 10 -m 1024
check cap/ib_read_bw-mtu2048 t_cap_perf 2048 --expect RDMA_READ_REQUEST=20 \
	--expect RDMA_READ_RESPONSE_FIRST=20 --expect RDMA_READ_RESPONSE_MIDDLE=20 \
	--expect RDMA_READ_RESPONSE_LAST=20 -- ib_read_bw -s 5000 -n 10 -m 2048
check cap/ib_write_bw-mtu4096 t_cap_perf 4096 --expect RDMA_WRITE_FIRST=20 --expect RDMA_WRITE_MIDDLE=20 \
	--expect RDMA_WRITE_LAST=20 -- ib_write_bw -s 10000 -n 10 -m 4096
check cap/ib_write_bw-small t_cap_perf 4096 --expect RDMA_WRITE_ONLY=40 -- ib_write_bw -s 64 -n 20
check cap/ib_atomic_bw-fadd t_cap_perf "" --expect 'FETCH_ADD>=20' --expect 'ATOMIC_ACKNOWLEDGE>=20' \
	-- ib_atomic_bw -n 10
check cap/ib_atomic_bw-cswap t_cap_perf "" --expect 'COMPARE_SWAP>=20' --expect 'ATOMIC_ACKNOWLEDGE>=20' \
	-- ib_atomic_bw -n 10 -A CMP_AND_SWAP

# UC (no ACKs anywhere), UD (DETH, one packet per message) and XRC.
check cap/uc-write-mtu1024 t_cap_perf 1024 --expect UC_RDMA_WRITE_FIRST=20 --expect UC_RDMA_WRITE_MIDDLE=20 \
	--expect UC_RDMA_WRITE_LAST=20 --expect ack=0 -- ib_write_bw -c UC -s 3000 -n 10 -m 1024
check cap/uc-send-mtu512 t_cap_perf 512 --expect UC_SEND_FIRST=20 --expect UC_SEND_MIDDLE=20 \
	--expect UC_SEND_LAST=20 --expect ack=0 -- ib_send_bw -c UC -s 1500 -n 10 -m 512
check cap/ud-send t_cap_perf "" --expect 'UD_SEND_ONLY>=20' --expect 'deth>=20' --expect ack=0 \
	-- ib_send_bw -c UD -s 1000 -n 10
# XRC: every request carries the XRCETH naming the server's XRC SRQ
check cap/xrc-send-mtu1024 t_cap_perf 1024 --expect XRC_SEND_FIRST=20 --expect XRC_SEND_MIDDLE=20 \
	--expect XRC_SEND_LAST=20 --expect xrceth=60 --expect 'ack>=2' -- ib_send_bw -c XRC -s 3000 -n 10 -m 1024
check cap/xrc-read t_cap_perf 1024 --expect XRC_RDMA_READ_REQUEST=20 --expect XRC_RDMA_READ_RESPONSE_FIRST=20 \
	--expect XRC_RDMA_READ_RESPONSE_LAST=20 -- ib_read_bw -c XRC -s 2000 -n 10 -m 1024 -o 4

# Immediate data and the rest of the opcodes through the built-in transfer.
check cap/send_imm t_cap_xfer --mtu 1024 --expect SEND_FIRST=6 --expect SEND_LAST_WITH_IMMEDIATE=6 \
	--expect imm=6 -- --op send_imm --size 3000 --mtu 1024 --count 3
check cap/send_imm-only t_cap_xfer --expect SEND_ONLY_WITH_IMMEDIATE=4 -- --op send_imm --size 100 --count 2
check cap/write_imm t_cap_xfer --mtu 2048 --expect RDMA_WRITE_FIRST=4 --expect RDMA_WRITE_LAST_WITH_IMMEDIATE=4 \
	-- --op write_imm --size 5000 --mtu 2048 --count 2
check cap/write_imm-only t_cap_xfer --expect RDMA_WRITE_ONLY_WITH_IMMEDIATE=2 -- --op write_imm --size 64
check cap/read-only t_cap_xfer --expect RDMA_READ_REQUEST=2 --expect RDMA_READ_RESPONSE_ONLY=2 -- --op read --size 64
check cap/send-only t_cap_xfer --expect SEND_ONLY=2 --expect ack=2 -- --op send --size 8

# NAKs: RNR (the responder posts its RECVs late) and PSN sequence errors
# (5% loss on receive, a fixed seed).
check cap/rnr_nak t_cap_xfer --lossy --mtu 1024 --expect 'rnr_nak>=2' --expect 'SEND_LAST>=6' \
	-- --op send --rnr --size 3000 --mtu 1024 --count 3

# t_cap_loss gbn|sr CHECKARGS...: ib_write_bw under 5% loss, captured.
t_cap_loss() {
	have_checkers || return 77
	local port mode=$1; shift
	port=$(free_port) || return 1
	export UROCE_PCAP=$CHECK_DIR/cap.%p UROCE_LOSS=0.05 UROCE_SEED=7 UROCE_RETRANS=$mode
	pair lo lo "$port" ib_write_bw -x 0 -F -p "$port" -s 4096 -n 20 -m 1024 -- \
		ib_write_bw -x 0 -F -p "$port" -s 4096 -n 20 -m 1024 127.0.0.1 || return 1
	unset UROCE_PCAP UROCE_LOSS UROCE_SEED UROCE_RETRANS
	caps 2 || return 1
	"${PCHK[@]}" --lossy --mtu 1024 --expect 'retrans>=1' "$@" "${CAPS[@]}"
}
check cap/seq_nak-loss t_cap_loss gbn --expect 'nak_seq>=1' --expect 'sack=0'
# selective repeat: its SACKs are well-formed Acknowledge packets to tshark
# and to scapy's ICRC (the flag bit is covered by it)
check cap/sack-loss t_cap_loss sr --expect 'sack>=1'

# uroce trace -w around a command that starts both perftest processes: two
# captures merged by time into one file.
t_trace_w_cmd() {
	have_tools ib_write_bw || return 77
	have_checkers || return 77
	local port
	port=$(free_port) || return 1
	timeout -k 5 "$T_TIMEOUT" "$UROCE" trace -w "$CHECK_DIR/both.pcap" --keep "$CHECK_DIR" -- bash -c "
		ib_write_bw -x 0 -F -p $port -s 3000 -n 5 -m 1024 & s=\$!
		for i in \$(seq 100); do ss -Hltn 'sport = :$port' | grep -q . && break; sleep 0.1; done
		ib_write_bw -x 0 -F -p $port -s 3000 -n 5 -m 1024 127.0.0.1; c=\$?
		wait \$s && exit \$c" >"$CHECK_DIR/client.log" 2>&1
	local rc=$?
	echo "uroce trace exit $rc"
	[ "$rc" -eq 0 ] || return 1
	log_has client.log 'packets from 2 processes' || return 1
	caps 2 || return 1
	# The merged file holds each packet twice (sent by one process,
	# received by the other); opcode counts are of distinct packets.
	"${PCHK[@]}" --merged --expect 'RDMA_WRITE_FIRST>=5' --expect 'RDMA_WRITE_LAST>=5' \
		--expect 'frames>=30' "$CHECK_DIR/both.pcap" || return 1
	# the exit status of the command comes back
	timeout 20 "$UROCE" trace -w "$CHECK_DIR/none.pcap" -- sh -c 'exit 3'
	rc=$?
	echo "uroce trace -- sh -c 'exit 3': exit $rc"
	[ "$rc" -eq 3 ]
}
check cap/trace-w-merge t_trace_w_cmd

# `uroce demo` (every operation, IMM, both tables) captured: clean RoCEv2
# with valid ICRCs, as the issue's "done when" asks.
t_cap_demo() {
	have_checkers || return 77
	timeout -k 5 "$T_TIMEOUT" "$UROCE" trace -w "$CHECK_DIR/demo.pcap" --keep "$CHECK_DIR" -- \
		"$UROCE" demo --iters 1 --size 64 >"$CHECK_DIR/client.log" 2>&1 || return 1
	caps 2 || return 1
	"${PCHK[@]}" --allow-rewind --expect 'imm>=4' --expect 'COMPARE_SWAP>=2' --expect 'FETCH_ADD>=2' \
		--expect 'RDMA_READ_REQUEST>=2' --expect 'SEND_ONLY>=2' "${CAPS[@]}"
}
check cap/demo t_cap_demo

finish
