#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2030,SC2031,SC2317  # sh -c scripts expand later; CHECK_DIR is per check (lib.sh); t_* run through check()
# The sysfs view of `uroce run` (docs/design.md, "The sysfs view"): what
# programs that read /sys/class/infiniband and /dev/infiniband themselves
# (NCCL, UCX, Open MPI, ibstat) see under `uroce run`, as root and as an
# unprivileged user (nobody, through setpriv; its checks are skipped with the
# reason where user namespaces are not allowed), plus the same inside a
# network namespace from netns.sh (root only).
#   tests/clients/test_sysfs.sh [REGEX]   run only the checks matching REGEX
# shellcheck source=tests/clients/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/clients/netns.sh
. "$(dirname "$0")/netns.sh"
lib_init "$@"
need_build

IB=/sys/class/infiniband/uroce_lo
HW=$IB/ports/1/hw_counters
GID0=0000:0000:0000:0000:0000:ffff:7f00:0001   # ::ffff:127.0.0.1 as sysfs writes it
UNPRIV=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
# The unprivileged user's prefix. As root, in a network namespace of its own
# with just lo (NS_U, below): port 4791 of 127.0.0.1 is shared through
# SO_REUSEPORT among one user's sockets only, so on the host's lo another
# user's uroce process (other tests running) would keep its QPs from
# connecting. Not root ourselves: "user" is us, on the host's lo.
NS_U=uroce-u-$$
USER_PRE=()
[ "$(id -u)" -eq 0 ] && USER_PRE=("${UNPRIV[@]}")

# as WHO CMD...: CMD as root, or as the unprivileged user, from /, with
# UROCE_NETDEV=lo, under timeout.
as() {
	local who=$1; shift
	local -a pre=()
	[ "$who" = user ] && pre=("${USER_PRE[@]}")
	(cd / && timeout -k 5 "$T_TIMEOUT" "${pre[@]}" env UROCE_NETDEV=lo "$@") </dev/null
}
view() { local who=$1; shift; as "$who" "$UROCE" run -- "$@"; }

# expect WHAT GOT WANT
expect() {
	[ "$2" = "$3" ] && return 0
	echo "$1: got '$2', want '$3'"
	return 1
}

t_list() {
	local out
	out=$(view "$1" ls /sys/class/infiniband) || { echo "exit $?"; return 1; }
	expect "ls /sys/class/infiniband" "$out" uroce_lo
}

t_files() {
	local who=$1 ok=0
	view "$who" sh -c "cat $IB/ports/1/gid_attrs/types/0 $IB/ports/1/gids/0 $IB/ports/1/gid_attrs/ndevs/0 \
		$IB/ports/1/state $IB/ports/1/link_layer $IB/node_type $IB/board_id $IB/ports/1/pkeys/0 \
		/sys/class/infiniband_verbs/uverbs0/ibdev" >"$CHECK_DIR/files.out" 2>&1 || ok=1
	cat "$CHECK_DIR/files.out"
	mapfile -t l <"$CHECK_DIR/files.out"
	expect "gid_attrs/types/0" "${l[0]:-}" "RoCE v2" || ok=1
	expect "gids/0" "${l[1]:-}" "$GID0" || ok=1
	expect "gid_attrs/ndevs/0" "${l[2]:-}" lo || ok=1
	expect "state" "${l[3]:-}" "4: ACTIVE" || ok=1
	expect "link_layer" "${l[4]:-}" Ethernet || ok=1
	expect "node_type" "${l[5]:-}" "1: CA" || ok=1
	expect "board_id" "${l[6]:-}" UROCE_SOFT_ROCE || ok=1
	expect "pkeys/0" "${l[7]:-}" 0xffff || ok=1
	expect "infiniband_verbs/uverbs0/ibdev" "${l[8]:-}" uroce_lo || ok=1
	# an index with no GID: the zero GID, and no type (the kernel fails the read)
	view "$who" sh -c "cat $IB/ports/1/gids/1; test ! -e $IB/ports/1/gid_attrs/types/1" \
		>"$CHECK_DIR/gid1.out" 2>&1 || { echo "gids/1 or types/1 wrong"; ok=1; }
	log_has gid1.out '^0000(:0000){7}$' "zero GID at index 1" || ok=1
	return "$ok"
}

# One table: what the view's files say is what ibv_read_sysfs_file says.
t_library_matches() {
	local t=$BUILD/tests/verbs/test_sysfs
	[ -x "$t" ] || { echo "no $t: run make"; return 1; }
	view "$1" "$t" view_matches >"$CHECK_DIR/match.out" 2>&1
	cat "$CHECK_DIR/match.out"
	log_has match.out '^1 passed, 0 failed, 0 skipped$' "test_sysfs view_matches in the view"
}

t_device_link() {
	local out
	out=$(view "$1" sh -c "p=\$(readlink -f $IB/device) && test -d \"\$p\" && echo \"\$p\"") ||
		{ echo "readlink -f $IB/device does not resolve to a directory"; return 1; }
	echo "device -> $out"
	# lo has no device: the interface's own directory
	expect "readlink -f device" "$out" /sys/devices/virtual/net/lo
}

t_uverbs() {
	view "$1" sh -c 'test -c /dev/infiniband/uverbs0 && test -r /dev/infiniband/uverbs0 &&
		test -w /dev/infiniband/uverbs0 && exec 3<>/dev/infiniband/uverbs0 && echo opened O_RDWR' \
		>"$CHECK_DIR/uverbs.out" 2>&1
	cat "$CHECK_DIR/uverbs.out"
	log_has uverbs.out '^opened O_RDWR$' "/dev/infiniband/uverbs0: a char device, opened read-write"
}

# Port 4791 of 127.0.0.1 is shared through SO_REUSEPORT, among one user's
# sockets only (docs/testing.md): with another user's uroce process on it,
# the unprivileged user's QPs cannot be set up. Prints the reason, returns 77.
lo_port_free_for() { # WHO
	local uid others
	[ "$1" = user ] && [ "${USER_PRE[0]:-}" != ip ] || return 0
	uid=$(as user id -u)
	# ss -e prints uid:N for sockets of uid N other than 0
	others=$(ss -Hulne 'sport = :4791' 2>/dev/null | awk -v me="$uid" '$4 ~ /^127\.0\.0\.1:/ {
		u = 0; for (i = 5; i <= NF; i++) if ($i ~ /^uid:/) u = substr($i, 5)
		if (u != me) print "uid " u }' | sort -u | tr '\n' ' ')
	[ -z "$others" ] && return 0
	echo "another user's uroce process holds UDP 127.0.0.1:4791 (${others% }); SO_REUSEPORT is per user"
	return 77
}

# sent_pkts etc. grow by at least what one ibv_rc_pingpong pair sends (other
# uroce processes on this host's lo count too, as on a NIC: at least, not
# exactly), and the values come from processes that have exited already.
t_hw_counters() {
	local who=$1 port
	have_tools ibv_rc_pingpong ss || return 77
	lo_port_free_for "$who" || return 77
	port=$(free_port) || return 1
	view "$who" sh -c '
		H='"$HW"' P='"$port"'
		b1=$(cat $H/sent_pkts) b2=$(cat $H/rcvd_pkts) b3=$(cat $H/../counters/port_xmit_packets)
		ibv_rc_pingpong -g 0 -p $P -n 200 >/dev/null 2>&1 & s=$!
		i=0; while ! ss -Hltn "sport = :$P" | grep -q . && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
		ibv_rc_pingpong -g 0 -p $P -n 200 127.0.0.1 || exit 1
		wait $s || exit 1
		sleep 0.5     # one refresh after the processes closed their devices
		a1=$(cat $H/sent_pkts) a2=$(cat $H/rcvd_pkts) a3=$(cat $H/../counters/port_xmit_packets)
		echo "sent_pkts $b1 -> $a1, rcvd_pkts $b2 -> $a2, port_xmit_packets $b3 -> $a3"
		[ $((a1 - b1)) -ge 400 ] && [ $((a2 - b2)) -ge 400 ] && [ $((a3 - b3)) -ge 400 ]' \
		>"$CHECK_DIR/hw.out" 2>&1
	local rc=$?
	cat "$CHECK_DIR/hw.out"
	[ "$rc" -eq 0 ] || { echo "hw_counters did not grow by the 2 x 200 packets sent (exit $rc)"; return 1; }
}

# /dev apart from infiniband is the host's: /dev/shm is the same directory
# (uroce's counter files live there), null, urandom, zero and pts work.
t_dev_intact() {
	local who=$1 f out
	f=uroce-sysfs-test-$$-$RANDOM
	out=$(view "$who" sh -c "echo x >/dev/null && head -c 16 /dev/urandom | wc -c && head -c 8 /dev/zero | wc -c &&
		test -c /dev/pts/ptmx && echo pts && echo hello >/dev/shm/$f && cat /dev/shm/$f") ||
		{ echo "exit $?: $out"; rm -f "/dev/shm/$f"; return 1; }
	echo "$out"
	if [ "$(cat "/dev/shm/$f" 2>/dev/null)" != hello ]; then
		echo "/dev/shm/$f written in the view is not in the host's /dev/shm"
		rm -f "/dev/shm/$f"
		return 1
	fi
	rm -f "/dev/shm/$f"
	expect "null, urandom, zero, pts, shm" "$(echo "$out" | tr '\n' ' ')" "16 8 pts hello "
}

t_no_sysfs() {
	local who=$1 out rc=0
	out=$(as "$who" "$UROCE" run --no-sysfs -- sh -c 'ls /sys/class/infiniband /dev/infiniband 2>/dev/null')
	echo "--no-sysfs: '$out'"
	case $out in *uroce_lo*|*uverbs*) echo "--no-sysfs still shows the view"; rc=1 ;; esac
	out=$(as "$who" env UROCE_SYSFS=0 "$UROCE" run -- sh -c 'ls /sys/class/infiniband /dev/infiniband 2>/dev/null')
	echo "UROCE_SYSFS=0: '$out'"
	case $out in *uroce_lo*|*uverbs*) echo "UROCE_SYSFS=0 still shows the view"; rc=1 ;; esac
	return "$rc"
}

# The program is uroce run's own process: its exit status, its signals.
t_exit_status() {
	local who=$1 rc ok=0 pid noexec
	view "$who" sh -c 'exit 3'; rc=$?
	expect "exit 3" "$rc" 3 || ok=1
	view "$who" sh -c 'kill -TERM $$'; rc=$?
	expect "killed itself by SIGTERM" "$rc" 143 || ok=1
	view "$who" /nonexistent/uroce-no-such-command 2>/dev/null; rc=$?
	expect "command not found" "$rc" 127 || ok=1
	noexec=$(mktemp /tmp/uroce-noexec.XXXXXX) && chmod 644 "$noexec"
	view "$who" "$noexec" 2>/dev/null; rc=$?
	rm -f "$noexec"
	expect "not executable" "$rc" 126 || ok=1
	# SIGTERM from outside, to the pid that `uroce run` had
	local -a pre=()
	[ "$who" = user ] && pre=("${USER_PRE[@]}")
	(cd / && exec "${pre[@]}" "$UROCE" run -- sleep 30) </dev/null &
	pid=$!
	sleep 0.5
	expect "the pid of uroce run is the program" "$(cat "/proc/$pid/comm" 2>/dev/null)" sleep || ok=1
	kill -TERM "$pid"
	wait "$pid"; rc=$?
	expect "killed by SIGTERM from outside" "$rc" 143 || ok=1
	return "$ok"
}

t_devinfo() {
	have_tools ibv_devinfo || return 77
	view "$1" ibv_devinfo -v >"$CHECK_DIR/devinfo.out" 2>&1 || { echo "exit $?"; return 1; }
	log_has devinfo.out 'hca_id:[[:space:]]*uroce_lo$' &&
		log_has devinfo.out 'board_id:[[:space:]]*UROCE_SOFT_ROCE' "board_id"
}

# ibstat (infiniband-diags) reads sysfs itself, through libibumad.
t_ibstat() {
	have_tools ibstat || return 77
	view "$1" ibstat >"$CHECK_DIR/ibstat.out" 2>&1 || { echo "exit $?"; cat "$CHECK_DIR/ibstat.out"; return 1; }
	cat "$CHECK_DIR/ibstat.out"
	log_has ibstat.out "^CA 'uroce_lo'" && log_has ibstat.out 'State: Active' &&
		log_has ibstat.out 'Link layer: Ethernet' && log_has ibstat.out 'Firmware version: 0\.1\.0'
}

# Children of the program see the view; a uroce run inside one reuses it.
t_children() {
	local out
	out=$(view "$1" sh -c 'sh -c "ls /sys/class/infiniband" && '"$UROCE"' run -- ls /sys/class/infiniband') ||
		{ echo "exit $?"; return 1; }
	expect "grandchild, nested uroce run" "$(echo "$out" | tr '\n' ' ')" "uroce_lo uroce_lo "
}

# Server and client in two separate `uroce run`s (two user namespaces for
# the unprivileged user): uroce's processes still find each other.
t_two_views() {
	local who=$1
	have_tools ss || return 77
	lo_port_free_for "$who" || return 77
	(
		if [ "$who" = user ]; then
			# shellcheck disable=SC2034  # read by lib.sh's pair()
			ctx_prefix() { CTX_PREFIX=("${USER_PRE[@]}" env UROCE_NETDEV=lo); }
		fi
		cd / && t_pingpong lo lo 127.0.0.1 -n 100
	)
}

# The helper that keeps hw_counters live leaves with the program.
t_helper_exits() {
	local mnt i left
	mnt=$(view "$1" readlink /proc/self/ns/mnt) || { echo "exit $?"; return 1; }
	echo "view: $mnt"
	for ((i = 0; i < 30; i++)); do
		left=""
		for p in /proc/[0-9]*; do
			[ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$mnt" ] || continue
			[ "$(awk '{print $3}' "$p/stat" 2>/dev/null)" = Z ] && continue
			left="$left ${p#/proc/}($(cat "$p/comm" 2>/dev/null))"
		done
		[ -z "$left" ] && return 0
		sleep 0.1
	done
	echo "still running in the view 3 s after the program exited:$left"
	return 1
}

# Where namespaces are refused (strace makes unshare fail): one warning,
# the program runs without the view; --sysfs makes it an error.
t_fallback() {
	local who=$1 rc ok=0
	have_tools strace || return 77
	as "$who" strace -f -o /dev/null -e trace=unshare -e inject=unshare:error=EPERM \
		"$UROCE" run -- sh -c 'test -e '"$IB"' && echo view || echo no view' \
		>"$CHECK_DIR/fb.out" 2>"$CHECK_DIR/fb.err"; rc=$?
	cat "$CHECK_DIR/fb.out" "$CHECK_DIR/fb.err"
	expect "exit without a view" "$rc" 0 || ok=1
	expect "stdout" "$(cat "$CHECK_DIR/fb.out")" "no view" || ok=1
	expect "warning lines" "$(grep -c 'warning: no sysfs view' "$CHECK_DIR/fb.err")" 1 || ok=1
	expect "stderr lines" "$(wc -l <"$CHECK_DIR/fb.err")" 1 || ok=1
	as "$who" strace -f -o /dev/null -e trace=unshare -e inject=unshare:error=EPERM \
		"$UROCE" run --sysfs -- true 2>/dev/null; rc=$?
	expect "--sysfs without a view" "$rc" 125 || ok=1
	return "$ok"
}

suite() { # WHO
	local w=$1
	check "$w/list" t_list "$w"
	check "$w/files" t_files "$w"
	check "$w/library-matches-view" t_library_matches "$w"
	check "$w/device-link" t_device_link "$w"
	check "$w/uverbs-chardev" t_uverbs "$w"
	check "$w/hw_counters-live" t_hw_counters "$w"
	check "$w/dev-intact" t_dev_intact "$w"
	check "$w/no-sysfs" t_no_sysfs "$w"
	check "$w/exit-status" t_exit_status "$w"
	check "$w/devinfo" t_devinfo "$w"
	check "$w/ibstat" t_ibstat "$w"
	check "$w/children" t_children "$w"
	check "$w/two-views-pingpong" t_two_views "$w"
	check "$w/helper-exits" t_helper_exits "$w"
	check "$w/fallback-warning" t_fallback "$w"
}

# ------------------------------------------------------------------ root
if [ "$(id -u)" -eq 0 ]; then
	suite root
else
	for c in list files library-matches-view device-link uverbs-chardev hw_counters-live dev-intact no-sysfs exit-status \
		devinfo ibstat children two-views-pingpong helper-exits fallback-warning; do
		skip "root/$c" "needs root"
	done
fi

# ---------------------------------------------------------- unprivileged
user_ns_down() { ip netns del "$NS_U" 2>/dev/null; return 0; }
user_why=""
if [ "$(id -u)" -eq 0 ] && ! command -v setpriv >/dev/null 2>&1; then
	user_why="setpriv (util-linux) not installed"
elif ! err=$(as user unshare --user --map-current-user --mount true 2>&1); then
	user_why="no unprivileged user namespaces here (unshare --user: ${err:-failed})"
elif [ "$(id -u)" -eq 0 ] && netns_permitted && ip netns add "$NS_U" 2>/dev/null; then
	on_cleanup user_ns_down
	ip -n "$NS_U" link set lo up && USER_PRE=(ip netns exec "$NS_U" "${UNPRIV[@]}")
fi
saved=$SKIP_REASON
SKIP_REASON=$user_why
suite user
SKIP_REASON=$saved
user_ns_down

# -------------------------------------------------- network namespaces
# In ns A (ip netns exec remounts /sys for it): the devices are A's, the
# device link is A's veth, and traffic on the host's lo does not move A's
# uroce_lo counters.
t_netns_list() {
	local out
	out=$(ns_exec a "$UROCE" run -- sh -c 'ls /sys/class/infiniband; readlink -f /sys/class/infiniband/*/device;
		cat /sys/class/infiniband/uroce_'"$VETH_A"'/ports/1/gid_attrs/ndevs/0; ls /dev/infiniband') ||
		{ echo "exit $?"; return 1; }
	echo "$out"
	expect "ns A, UROCE_NETDEV=$VETH_A" "$(echo "$out" | tr '\n' ' ')" \
		"uroce_$VETH_A /sys/devices/virtual/net/$VETH_A $VETH_A uverbs0 " || return 1
	out=$(ip netns exec "$NS_A" env -u UROCE_NETDEV "$UROCE" run -- ls /sys/class/infiniband) ||
		{ echo "exit $?"; return 1; }
	expect "ns A, every interface" "$(echo "$out" | tr '\n' ' ')" "uroce_lo uroce_$VETH_A "
}

t_netns_counters() {
	local port out
	have_tools ibv_rc_pingpong || return 77
	port=$(free_port) || return 1
	# host lo traffic while ns A reads its own uroce_lo twice
	run_in lo ibv_rc_pingpong -g 0 -p "$port" -n 2000 >"$CHECK_DIR/srv.log" 2>&1 &
	local spid=$!
	wait_listen lo "$port" "$spid" "$LISTEN_WAIT" || return 1
	ip netns exec "$NS_A" env UROCE_NETDEV=lo "$UROCE" run -- sh -c '
		H=/sys/class/infiniband/uroce_lo/ports/1/hw_counters
		a=$(cat $H/sent_pkts); sleep 1; b=$(cat $H/sent_pkts); echo "$a $b"' >"$CHECK_DIR/ns.out" 2>&1 &
	local npid=$!
	run_in lo ibv_rc_pingpong -g 0 -p "$port" -n 2000 127.0.0.1 >"$CHECK_DIR/cli.log" 2>&1 || { echo "host pingpong failed"; return 1; }
	wait "$spid"
	wait "$npid" || { echo "ns A run failed"; cat "$CHECK_DIR/ns.out"; return 1; }
	out=$(cat "$CHECK_DIR/ns.out")
	echo "ns A uroce_lo sent_pkts before/after: $out"
	expect "ns A's uroce_lo counters while the host's lo carried traffic" "$out" "0 0"
}

# A pingpong across the veth: the server's view counts what crossed it.
t_netns_pingpong_counters() {
	local port
	have_tools ibv_rc_pingpong ss || return 77
	port=$(free_port) || return 1
	start_bg a "$CHECK_DIR/server.log" sh -c '
		H=/sys/class/infiniband/uroce_'"$VETH_A"'/ports/1/hw_counters
		b=$(cat $H/sent_pkts); ibv_rc_pingpong -g 0 -p '"$port"' -n 300 || exit 1
		sleep 0.5; a=$(cat $H/sent_pkts); echo "server view sent_pkts $b -> $a"; [ $((a - b)) -ge 300 ]'
	local spid=$BG_PID
	wait_listen a "$port" "$spid" "$LISTEN_WAIT" || return 1
	run_in b ibv_rc_pingpong -g 0 -p "$port" -n 300 "$IP_A" >"$CHECK_DIR/client.log" 2>&1 || { echo "client failed"; return 1; }
	wait_pid "$spid" "$SERVER_WAIT" || { cat "$CHECK_DIR/server.log"; return 1; }
	cat "$CHECK_DIR/server.log"
}

ns_why=""
if [ "$(id -u)" -ne 0 ]; then
	ns_why="needs root (ip netns)"
elif ! netns_permitted; then
	ns_why=$NETNS_WHY
elif ! ns_up 1500 >"$LOGDIR/ns_up.log" 2>&1; then
	ns_why="could not set up namespaces: $(tail -1 "$LOGDIR/ns_up.log")"
fi
SKIP_REASON=$ns_why
check netns/list t_netns_list
check netns/counters-isolated t_netns_counters
check netns/veth-pingpong-counters t_netns_pingpong_counters
SKIP_REASON=$saved
[ -z "$ns_why" ] && ns_down

finish
