#!/usr/bin/env bash
# Unmodified Debian RDMA CM programs (rdmacm-utils, perftest -R, qperf -cm1)
# through `uroce run`, which puts uroce's librdmacm.so.1 and libibverbs.so.1
# first: on 127.0.0.1 (UROCE_NETDEV=lo), then across the veth pair of
# netns.sh (server in ns A 198.18.0.1, client in ns B). The veth part needs
# root; without it those checks are skipped with the reason.
#   tests/clients/test_rdmacm.sh [REGEX]   run only the checks matching REGEX
#   MTUS="1500 9000" tests/clients/test_rdmacm.sh   veth MTUs (default 1500)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"
lib_init "$@"
need_build

RDMACM=$BUILD/lib/librdmacm.so.1
SYS_RDMACM=/usr/lib/x86_64-linux-gnu/librdmacm.so.1

# ---------------------------------------------------------------- checks

# t_abi: every symbol and version node of Debian's librdmacm is ours too.
t_abi() {
	have_tools objdump || return 77
	[ -e "$SYS_RDMACM" ] || { echo "$SYS_RDMACM missing (librdmacm1)"; return 77; }
	# shellcheck disable=SC2016  # an awk program
	local syms='/RDMACM_1/ && $0 !~ /\*UND\*/ {print $(NF-1), $NF}'
	objdump -T "$SYS_RDMACM" | awk "$syms" | sort >"$CHECK_DIR/debian.out"
	objdump -T "$RDMACM" | awk "$syms" | sort >"$CHECK_DIR/uroce.out"
	echo "debian: $(wc -l <"$CHECK_DIR/debian.out") symbols, uroce: $(wc -l <"$CHECK_DIR/uroce.out")"
	[ -s "$CHECK_DIR/debian.out" ] || return 1
	diff -u "$CHECK_DIR/debian.out" "$CHECK_DIR/uroce.out"
}

# t_ldd CTX PROG: under `uroce run`, PROG loads our librdmacm and every
# symbol resolves (BIND_NOW programs would not start otherwise).
t_ldd() {
	local ctx=$1 prog=$2 path
	have_tools "$prog" ldd || return 77
	path=$(command -v "$prog")
	run_in "$ctx" ldd -r "$path" >"$CHECK_DIR/ldd.out" 2>&1 || { cat "$CHECK_DIR/ldd.out"; return 1; }
	cat "$CHECK_DIR/ldd.out"
	log_has ldd.out "librdmacm\\.so\\.1 => $RDMACM" "our librdmacm" || return 1
	if grep -q "undefined symbol" "$CHECK_DIR/ldd.out"; then
		echo "unresolved symbols"
		return 1
	fi
}

# rping_late_ebadf LOG RC: rping (rdma-core 44) exited 255 with
# "rdma_get_cm_event: Bad file descriptor" as its last line: its CM thread
# came back for one more event after main had destroyed the channel, a race
# in rping itself (fixed upstream by rdma-core commit f3ae6534a, "rping:
# terminate CM event thread before exiting"; the kernel's read(2) gives the
# same EBADF). The run itself is judged by its data lines.
rping_late_ebadf() {
	[ "$2" -eq 255 ] && [ "$(tail -n 1 "$CHECK_DIR/$1")" = "rdma_get_cm_event: Bad file descriptor" ]
}

# t_rping SCTX CCTX ADDR COUNT: both sides print COUNT data lines, in order.
t_rping() {
	local sctx=$1 cctx=$2 addr=$3 n=$4 port i
	have_tools rping || return 77
	port=$(free_port) || return 1
	if ! pair "$sctx" "$cctx" "$port" \
		rping -s -a "$addr" -p "$port" -v -C "$n" -- \
		rping -c -a "$addr" -p "$port" -v -C "$n"; then
		{ [ "$PAIR_CRC" -eq 0 ] || rping_late_ebadf client.log "$PAIR_CRC"; } &&
			{ [ "$PAIR_SRC" -eq 0 ] || rping_late_ebadf server.log "$PAIR_SRC"; } || return 1
		echo "rping's own teardown race (its CM thread after the channel's destroy); judged by the data lines"
	fi
	for ((i = 0; i < n; i++)); do
		log_has client.log "^ping data: rdma-ping-$i: " || return 1
		log_has server.log "^server ping data: rdma-ping-$i: " || return 1
	done
	[ "$(grep -c '^ping data: rdma-ping-' "$CHECK_DIR/client.log")" -eq "$n" ] ||
		{ echo "client: not $n data lines"; return 1; }
}

# t_rping_refused CTX ADDR: nobody listens: rping reports the REJ of the
# kernel's CM (IB_CM_REJ_INVALID_SERVICE_ID, 8) and fails.
t_rping_refused() {
	local ctx=$1 addr=$2 port rc
	have_tools rping || return 77
	port=$(free_port) || return 1
	echo "[$ctx] rping -c -a $addr -p $port (no server)"
	run_in "$ctx" rping -c -a "$addr" -p "$port" -v -C 1 >"$CHECK_DIR/client.log" 2>&1
	rc=$?
	echo "exit $rc$(rc_note "$rc")"
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || return 1
	log_has client.log 'RDMA_CM_EVENT_REJECTED, error 8'
}

# t_ucmatose SCTX CCTX ADDR CONNS COUNT
t_ucmatose() {
	local sctx=$1 cctx=$2 addr=$3 c=$4 n=$5 port
	have_tools ucmatose || return 77
	port=$(free_port) || return 1
	pair "$sctx" "$cctx" "$port" \
		ucmatose -p "$port" -c "$c" -C "$n" -- \
		ucmatose -s "$addr" -p "$port" -c "$c" -C "$n" || return 1
	log_has client.log '^data transfers complete' || return 1
	log_has client.log '^return status 0' || return 1
	log_has server.log '^data transfers complete' || return 1
	log_has server.log '^return status 0'
}

# t_rdma_server SCTX CCTX ADDR: the synchronous rdma_verbs.h API.
t_rdma_server() {
	local sctx=$1 cctx=$2 addr=$3 port
	have_tools rdma_server rdma_client || return 77
	port=$(free_port) || return 1
	pair "$sctx" "$cctx" "$port" \
		rdma_server -s "$addr" -p "$port" -- \
		rdma_client -s "$addr" -p "$port" || return 1
	log_has client.log '^rdma_client: end 0' || return 1
	log_has server.log '^rdma_server: end 0'
}

# t_perftest_cm SCTX CCTX ADDR TOOL ARGS...: perftest with -R (connection
# through rdma_cm; its own control messages go over that connection too).
t_perftest_cm() {
	local sctx=$1 cctx=$2 addr=$3 tool=$4 port; shift 4
	have_tools "$tool" || return 77
	port=$(free_port) || return 1
	pair "$sctx" "$cctx" "$port" \
		"$tool" -R -F -p "$port" "$@" -- \
		"$tool" -R -F -p "$port" "$@" "$addr" || return 1
	perftest_table client.log || return 1
	perftest_table server.log 2>/dev/null || log_has server.log '^[[:space:]]*#bytes'
}

# reserve_fixed_port PORT: udaddy has no port option (7174): wait until no
# other test script holds it, then hold it.
reserve_fixed_port() {
	local p=$1 i owner
	for ((i = 0; i < 300; i++)); do
		if mkdir "$PORT_LOCKS/$p" 2>/dev/null; then
			echo "$$" >"$PORT_LOCKS/$p/pid"
			echo "$p" >>"$LOGDIR/ports"
			return 0
		fi
		owner=$(cat "$PORT_LOCKS/$p/pid" 2>/dev/null)
		[ "$owner" = "$$" ] && return 0   # an earlier check of this script
		if [ -n "$owner" ] && ! kill -0 "$owner" 2>/dev/null; then
			rm -rf "${PORT_LOCKS:?}/$p"
			continue
		fi
		sleep 0.2
	done
	echo "port $p stays taken"
	return 1
}

# t_udaddy SCTX CCTX SADDR CADDR: SIDR (RDMA_PS_UDP) and datagrams.
t_udaddy() {
	local sctx=$1 cctx=$2 saddr=$3 caddr=$4
	have_tools udaddy || return 77
	reserve_fixed_port 7174 || return 1
	pair "$sctx" "$cctx" 7174 \
		udaddy -b "$saddr" -- \
		udaddy -s "$saddr" -b "$caddr" || return 1
	log_has client.log '^data transfers complete' || return 1
	log_has client.log '^return status 0' || return 1
	log_has server.log '^data transfers complete' || return 1
	log_has server.log '^return status 0'
}

# wait_log FILE ERE PID SECS: until FILE matches (the receiver joined).
wait_log() {
	local f=$1 re=$2 pid=$3 secs=$4 i
	for ((i = 0; i < secs * 10; i++)); do
		grep -Eq -- "$re" "$f" 2>/dev/null && return 0
		alive "$pid" || { echo "receiver exited early"; return 1; }
		sleep 0.1
	done
	echo "no /$re/ in $(basename "$f") within ${secs}s"
	return 1
}

# t_mckey RCTX SCTX RADDR SADDR [-o]: a receiver joins an IPv4 group, a
# sender (a full member, or with -o a send-only one that posts its 10
# datagrams and destroys its QP at once) sends 10 datagrams to it.
t_mckey() {
	local rctx=$1 sctx=$2 raddr=$3 saddr=$4 group port rpid rc src
	local -a so=("${@:5}")
	have_tools mckey || return 77
	port=$(free_port) || return 1   # reserved only to pick a group nobody else uses
	group=239.77.$((port / 256 % 256)).$((port % 256))
	echo "group $group"
	start_bg "$rctx" "$CHECK_DIR/server.log" mckey -m "$group" -b "$raddr" -C 10
	rpid=$BG_PID
	wait_log "$CHECK_DIR/server.log" '^mckey: joined' "$rpid" "$LISTEN_WAIT" || {
		stop_pid "$rpid"; return 1; }
	run_in "$sctx" mckey -m "$group" -b "$saddr" -s "${so[@]}" -C 10 >"$CHECK_DIR/client.log" 2>&1
	rc=$?
	wait_pid "$rpid" "$SERVER_WAIT"
	src=$?
	echo "sender exit $rc$(rc_note "$rc"), receiver exit $src$(rc_note "$src")"
	[ "$rc" -eq 0 ] && [ "$src" -eq 0 ] || return 1
	log_has client.log "^mckey: joined dgid: ::ffff:$group" || return 1
	log_has server.log '^data transfers complete' || return 1
	log_has server.log '^return status 0'
}

# cm_suite TAG SCTX CCTX ADDR CADDR [QPERF_ARGS...]
cm_suite() {
	local tag=$1 s=$2 c=$3 addr=$4 caddr=$5; shift 5
	check "$tag/ldd-rping" t_ldd "$c" rping
	check "$tag/ldd-ib_send_bw" t_ldd "$c" ib_send_bw
	check "$tag/rping" t_rping "$s" "$c" "$addr" 10
	check "$tag/rping-refused" t_rping_refused "$c" "$addr"
	check "$tag/ucmatose" t_ucmatose "$s" "$c" "$addr" 4 10
	check "$tag/rdma_server-client" t_rdma_server "$s" "$c" "$addr"
	check "$tag/ib_send_bw-R" t_perftest_cm "$s" "$c" "$addr" ib_send_bw -s 65536 -n 500
	check "$tag/ib_read_bw-R" t_perftest_cm "$s" "$c" "$addr" ib_read_bw -s 65536 -n 500
	check "$tag/ib_write_bw-R" t_perftest_cm "$s" "$c" "$addr" ib_write_bw -s 65536 -n 500
	check "$tag/ib_write_bw-R-q4" t_perftest_cm "$s" "$c" "$addr" ib_write_bw -s 65536 -n 200 -q 4
	check "$tag/ib_send_lat-R" t_perftest_cm "$s" "$c" "$addr" ib_send_lat -s 2 -n 500
	# UD through rdma_cm: SIDR resolves the server's QP
	check "$tag/ib_send_bw-R-UD" t_perftest_cm "$s" "$c" "$addr" ib_send_bw -c UD -n 500
	check "$tag/ib_send_lat-R-UD" t_perftest_cm "$s" "$c" "$addr" ib_send_lat -c UD -s 2 -n 500
	check "$tag/qperf-cm1" t_qperf "$s" "$c" "$addr" -cm1 "$@"
	check "$tag/udaddy" t_udaddy "$s" "$c" "$addr" "$caddr"
	check "$tag/mckey" t_mckey "$s" "$c" "$addr" "$caddr"
	check "$tag/mckey-sendonly" t_mckey "$s" "$c" "$addr" "$caddr" -o
}

check "abi" t_abi
cm_suite lo lo lo 127.0.0.1 127.0.0.1

if ! netns_permitted; then
	if [ "${UROCE_REQUIRE_NETNS:-0}" = 1 ]; then
		FAIL_REASON=$NETNS_WHY
	else
		SKIP_REASON=$NETNS_WHY
	fi
fi
for mtu in ${MTUS:-1500}; do
	case $mtu in
	1500) active=1024 ;;
	*) active=4096 ;;
	esac
	saved_fail=$FAIL_REASON
	if [ -z "$SKIP_REASON$FAIL_REASON" ]; then
		if ! ns_up "$mtu" >"$LOGDIR/ns_up-$mtu.log" 2>&1; then
			cat "$LOGDIR/ns_up-$mtu.log"
			FAIL_REASON="could not set up namespaces with a $mtu-byte veth: $(tail -1 "$LOGDIR/ns_up-$mtu.log")"
		fi
	fi
	cm_suite "veth$mtu" a b "$IP_A" "$IP_B" -mt "$active"
	ns_down
	FAIL_REASON=$saved_fail
done

finish
