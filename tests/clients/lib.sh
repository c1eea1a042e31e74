# shellcheck shell=bash disable=SC2030,SC2031,SC2034
# (CHECK_DIR is set per check in its subshell; some variables are for the test scripts)
# Shared functions for tests/clients/test_*.sh: unmodified Debian RDMA clients
# (ibverbs-utils, perftest, qperf) run through `uroce run` against our
# libibverbs.so.1.
#
# A test script does:
#     . "$(dirname "$0")/lib.sh"
#     lib_init "$@"            # optional argument: regex of check names to run
#     need_build
#     check NAME cmd args...   # counted check: "ok NAME" or "FAIL NAME" + log tail
#     skip NAME reason
#     finish                   # prints "N passed, N failed, N skipped", exits
#
# Contexts: where a command runs and which netdev backs the first device.
#   lo  - host network namespace, UROCE_NETDEV=lo
#   a/b - namespaces from netns.sh, UROCE_NETDEV=<that namespace's veth>
#
# Environment knobs:
#   BUILD=DIR        build directory (default <repo>/build; relative = from repo)
#   T_TIMEOUT=SECS   limit for every single client/server run (default 60)
#   KEEP_LOGS=1      keep the log directory even when everything passed
#   V=1              print every check's full log, not only on failure
#   CI=true          a missing client program is a failure, not a skip
#   UROCE_REQUIRE_NETNS=1  no permission for namespaces is a failure, not a skip

set -u

LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$LIB_DIR/../.." && pwd)
BUILD=${BUILD:-$TOP/build}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
UROCE=$BUILD/bin/uroce
T_TIMEOUT=${T_TIMEOUT:-60}
LISTEN_WAIT=${LISTEN_WAIT:-20}     # seconds a server gets to start listening
SERVER_WAIT=${SERVER_WAIT:-20}     # seconds a server gets to exit after its client did
PORT_LOCKS=${PORT_LOCKS:-/tmp/uroce-test-ports}
# Programs writing to a log file buffer stdout fully; a server that has to be
# stopped would lose its output. stdbuf makes it line-buffered.
LINEBUF=()
command -v stdbuf >/dev/null 2>&1 && LINEBUF=(stdbuf -oL -eL)

PASS=0 FAILS=0 SKIPS=0
NETNS_WHY=""
FILTER=""
SKIP_REASON=""      # when set, check() skips with this reason
FAIL_REASON=""      # when set, check() fails without running, with this reason
LOGDIR=""
CLEANUP_HOOKS=()
T_START=$SECONDS
_cleaned=0

lib_init() { # [REGEX]: only checks whose name matches REGEX run
	FILTER=${1:-}
	LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/uroce-clients.XXXXXX") || { echo "mktemp failed"; exit 1; }
	: >"$LOGDIR/pids"
	: >"$LOGDIR/ports"
	# Port locks are shared by all users (sticky, like /tmp); one we cannot
	# write to (another user's, made without these modes) means our own.
	[ -d "$PORT_LOCKS" ] || mkdir -m 1777 "$PORT_LOCKS" 2>/dev/null
	[ -w "$PORT_LOCKS" ] || { PORT_LOCKS=$PORT_LOCKS-$(id -u); mkdir -p "$PORT_LOCKS"; }
	trap 'lib_cleanup' EXIT
	trap 'echo "interrupted (SIGINT)"; lib_cleanup; exit 130' INT
	trap 'echo "interrupted (SIGTERM)"; lib_cleanup; exit 143' TERM
	trap 'echo "interrupted (SIGHUP)"; lib_cleanup; exit 129' HUP
}

# Register a function to run at cleanup (after all processes are killed).
on_cleanup() { CLEANUP_HOOKS+=("$1"); }

lib_cleanup() {
	[ "$_cleaned" -eq 1 ] && return 0
	_cleaned=1
	trap - EXIT INT TERM HUP
	kill_tracked
	local h
	for h in "${CLEANUP_HOOKS[@]}"; do "$h" >/dev/null 2>&1 || true; done
	release_ports
	if [ -n "$LOGDIR" ] && [ -d "$LOGDIR" ]; then
		if [ "$FAILS" -eq 0 ] && [ "${KEEP_LOGS:-0}" != 1 ]; then
			rm -rf "$LOGDIR"
		fi
	fi
	return 0
}

# ---------------------------------------------------------------- processes

# alive PID: true while PID runs (a zombie counts as gone).
alive() {
	kill -0 "$1" 2>/dev/null || return 1
	local st
	st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[ "$st" != Z ]
}

# Background processes are `timeout` processes, each the leader of its own
# process group (timeout calls setpgid), so killing the group takes along
# everything below it (ip netns exec, uroce run, the client itself).
kill_group() { # SIGNAL PID
	kill "-$1" -- "-$2" 2>/dev/null
	kill "-$1" "$2" 2>/dev/null
	return 0
}

stop_pid() { # PID: TERM, then KILL after 3 s
	local pid=$1 i
	alive "$pid" || return 0
	kill_group TERM "$pid"
	for ((i = 0; i < 30; i++)); do alive "$pid" || return 0; sleep 0.1; done
	kill_group KILL "$pid"
}

kill_tracked() {
	[ -n "$LOGDIR" ] && [ -f "$LOGDIR/pids" ] || return 0
	local pid
	while read -r pid; do
		[ -n "$pid" ] && stop_pid "$pid"
	done <"$LOGDIR/pids"
	: >"$LOGDIR/pids"
}

# ----------------------------------------------------------------- contexts

# ctx_prefix CTX: sets CTX_PREFIX to the command prefix that runs a command in
# context CTX (lo, a, b). a and b come from netns.sh (ns_prefix).
ctx_prefix() {
	case $1 in
	lo) CTX_PREFIX=(env UROCE_NETDEV=lo) ;;
	host) CTX_PREFIX=(env) ;;
	a|b)
		declare -F ns_prefix >/dev/null || { echo "ctx $1: netns.sh not sourced"; return 2; }
		ns_prefix "$1" ;;
	*) echo "unknown context $1"; return 2 ;;
	esac
}

# run_in CTX CMD...: run CMD through `uroce run` in CTX, under timeout.
# (Run as a tracked background job so that an interrupted script kills it.)
run_in() {
	local ctx=$1 pid; shift
	ctx_prefix "$ctx" || return 2
	timeout -k 5 "$T_TIMEOUT" "${CTX_PREFIX[@]}" "$UROCE" run -- "${LINEBUF[@]}" "$@" </dev/null &
	pid=$!
	echo "$pid" >>"$LOGDIR/pids"
	wait "$pid"
}

# run_plain CTX CMD...: run CMD in CTX without uroce (e.g. ss), under timeout.
run_plain() {
	local ctx=$1; shift
	ctx_prefix "$ctx" || return 2
	timeout -k 5 "$T_TIMEOUT" "${CTX_PREFIX[@]}" "$@" </dev/null
}

# start_bg CTX LOG CMD...: like run_in but in the background, output to LOG.
# Sets BG_PID (the timeout process, leader of its own process group).
start_bg() {
	local ctx=$1 log=$2; shift 2
	ctx_prefix "$ctx" || return 2
	timeout -k 5 "$T_TIMEOUT" "${CTX_PREFIX[@]}" "$UROCE" run -- "${LINEBUF[@]}" "$@" >"$log" 2>&1 </dev/null &
	BG_PID=$!
	echo "$BG_PID" >>"$LOGDIR/pids"
}

# wait_pid PID SECS: wait up to SECS for PID to exit, kill it if it does not.
# Returns PID's exit status (124/137/143 when it had to be stopped).
wait_pid() {
	local pid=$1 secs=$2 i
	for ((i = 0; i < secs * 10; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	if alive "$pid"; then
		echo "pid $pid still running after ${secs}s: stopping it"
		stop_pid "$pid"
	fi
	wait "$pid"
}

# port_used tcp|udp PORT [listen] [PREFIX...]: whether a socket of proto has
# local PORT (with listen: a listening TCP socket or any bound UDP one), in
# the network namespace PREFIX runs in. ss where iproute2 is installed; else
# /proc/net/{tcp,udp}{,6} (the GPU machine has no iproute2): local address
# in column 2 as ADDR:PORT in hex, state in column 4 (0A: TCP LISTEN).
port_used() {
	local proto=$1 port=$2 listen=${3:-} flag
	shift 3 2>/dev/null || shift $#
	if command -v ss >/dev/null; then
		flag=-Han
		[ -n "$listen" ] && flag=-Hln
		[ "$proto" = udp ] && flag=${flag}u || flag=${flag}t
		"$@" ss "$flag" "sport = :$port" 2>/dev/null | grep -q .
		return
	fi
	"$@" cat "/proc/net/$proto" "/proc/net/${proto}6" 2>/dev/null |
		awk -v p="$(printf '%04X' "$port")" -v tcp="$([ "$proto" = tcp ] && echo 1)" -v l="$listen" '
			NR > 0 && split($2, a, ":") == 2 && toupper(a[2]) == p && (!l || !tcp || $4 == "0A") { f = 1 }
			END { exit !f }'
}

# wait_listen CTX PORT PID SECS: until something listens on TCP PORT in CTX.
# Fails early when PID exits.
wait_listen() {
	local ctx=$1 port=$2 pid=$3 secs=$4 i
	ctx_prefix "$ctx" || return 2
	for ((i = 0; i < secs * 10; i++)); do
		if port_used tcp "$port" listen "${CTX_PREFIX[@]}"; then
			return 0
		fi
		alive "$pid" || { echo "server exited before listening on tcp port $port"; return 1; }
		sleep 0.1
	done
	echo "server did not listen on tcp port $port within ${secs}s"
	return 1
}

# pair [--persistent] SRV_CTX CLI_CTX PORT SERVER_CMD... -- CLIENT_CMD...
# Starts the server in the background, waits until TCP PORT listens (ss -ltn
# in the server's context), runs the client, then collects the server's exit
# status. Both run through `uroce run` under timeout; both must exit 0.
# PAIR_CRC and PAIR_SRC hold the two exit statuses afterwards.
# --persistent: the server serves until killed (qperf); it must still be
# running when the client ends, and is then stopped.
# Output: $CHECK_DIR/server.log and $CHECK_DIR/client.log.
pair() {
	local persistent=0
	[ "${1:-}" = --persistent ] && { persistent=1; shift; }
	local sctx=$1 cctx=$2 port=$3; shift 3
	local -a scmd=() ccmd=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do scmd+=("$1"); shift; done
	[ $# -gt 0 ] || { echo "pair: no -- between server and client commands"; return 2; }
	shift
	ccmd=("$@")
	local dir=${CHECK_DIR:-$LOGDIR}
	echo "server [$sctx]: ${scmd[*]}"
	echo "client [$cctx]: ${ccmd[*]}"
	start_bg "$sctx" "$dir/server.log" "${scmd[@]}" || return 2
	local spid=$BG_PID src crc
	if ! wait_listen "$sctx" "$port" "$spid" "$LISTEN_WAIT"; then
		stop_pid "$spid"; wait "$spid"; src=$?
		echo "server exit $src"
		return 1
	fi
	run_in "$cctx" "${ccmd[@]}" >"$dir/client.log" 2>&1
	crc=$?
	if [ "$persistent" -eq 1 ]; then
		if alive "$spid"; then
			stop_pid "$spid"; wait "$spid"
			src=0
		else
			wait "$spid"; src=$?
			echo "persistent server died (exit $src) before the client ended"
			[ "$src" -eq 0 ] && src=1
		fi
	elif [ "$crc" -eq 0 ]; then
		wait_pid "$spid" "$SERVER_WAIT"; src=$?
	else
		wait_pid "$spid" 5; src=$?
	fi
	echo "client exit $crc$(rc_note "$crc"), server exit $src$(rc_note "$src")"
	PAIR_CRC=$crc PAIR_SRC=$src
	[ "$crc" -eq 0 ] && [ "$src" -eq 0 ]
}

rc_note() {
	case $1 in
	124) echo " (timed out after ${T_TIMEOUT}s)" ;;
	137) echo " (killed)" ;;
	134) echo " (aborted)" ;;
	139) echo " (segfault)" ;;
	143) echo " (terminated)" ;;
	esac
}

# -------------------------------------------------------------------- ports

# free_port: prints a TCP port that nothing uses and that no other running
# uroce test script has reserved (mkdir lock under $PORT_LOCKS, owner pid
# inside; stale locks of dead scripts are taken over). Ports come from below
# the ephemeral range so no outgoing connection can be holding one.
free_port() {
	local lo hi p i owner
	read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || { lo=32768; hi=60999; }
	local base=20000 span
	if [ "$lo" -gt $((base + 2000)) ]; then span=$((lo - base)); else base=$((hi + 1)); span=$((65000 - base)); fi
	for ((i = 0; i < 500; i++)); do
		p=$((base + (RANDOM * 32768 + RANDOM) % span))
		if ! mkdir "$PORT_LOCKS/$p" 2>/dev/null; then
			owner=$(cat "$PORT_LOCKS/$p/pid" 2>/dev/null)
			if [ -n "$owner" ] && ! kill -0 "$owner" 2>/dev/null; then
				rm -rf "${PORT_LOCKS:?}/$p"
			fi
			continue
		fi
		echo "$$" >"$PORT_LOCKS/$p/pid"
		echo "$p" >>"$LOGDIR/ports"
		if port_used tcp "$p" ""; then
			continue     # in use (or TIME-WAIT); keep it reserved, try another
		fi
		echo "$p"
		return 0
	done
	echo "free_port: no free port found" >&2
	return 1
}

release_ports() {
	[ -n "$LOGDIR" ] && [ -f "$LOGDIR/ports" ] || return 0
	local p
	while read -r p; do
		[ -n "$p" ] && [ "$(cat "$PORT_LOCKS/$p/pid" 2>/dev/null)" = "$$" ] && rm -rf "${PORT_LOCKS:?}/$p"
	done <"$LOGDIR/ports"
	: >"$LOGDIR/ports"
}

# ------------------------------------------------------------------- checks

want() { [ -z "$FILTER" ] || [[ $1 =~ $FILTER ]]; }

# check NAME CMD...: runs CMD (a command or a shell function) in a subshell
# with output to $LOGDIR/<NAME>/check.log and CHECK_DIR set to that folder.
# Exit 0 = ok, 77 = skip (the log's last line is the reason), else FAIL with
# the tail of every log of that check.
check() {
	local name=$1; shift
	want "$name" || return 0
	if [ -n "$SKIP_REASON" ]; then skip "$name" "$SKIP_REASON"; return 0; fi
	if [ -n "$FAIL_REASON" ]; then
		echo "FAIL $name (not run: $FAIL_REASON)"
		FAILS=$((FAILS + 1))
		return 0
	fi
	local d=$LOGDIR/${name//[^A-Za-z0-9._-]/_}
	mkdir -p "$d"
	local t0=$SECONDS rc
	(
		CHECK_DIR=$d
		trap - EXIT INT TERM HUP
		"$@"
	) >"$d/check.log" 2>&1 </dev/null &
	local cpid=$!
	echo "$cpid" >>"$LOGDIR/pids"
	wait "$cpid"
	rc=$?
	echo "time $((SECONDS - t0))s, exit $rc" >>"$d/check.log"
	if [ "$rc" -eq 0 ]; then
		echo "ok $name"
		PASS=$((PASS + 1))
		[ "${V:-0}" = 1 ] && show_logs "$d" 1000
	elif [ "$rc" -eq 77 ]; then
		local why
		why=$(grep -v '^time .*s, exit 77$' "$d/check.log" | tail -1)
		if [ "${CI:-}" = true ]; then
			echo "FAIL $name (would skip, but CI=true: $why)"
			FAILS=$((FAILS + 1))
		else
			skip "$name" "$why"
		fi
	else
		echo "FAIL $name"
		FAILS=$((FAILS + 1))
		show_logs "$d" 25
	fi
	return 0
}

show_logs() { # DIR LINES
	local f
	for f in "$1"/check.log "$1"/server.log "$1"/client.log "$1"/*.out; do
		[ -f "$f" ] || continue
		echo "    --- $(basename "$f") (last $2 lines; full: $f)"
		tail -n "$2" "$f" | sed 's/^/    | /'
	done
}

skip() { # NAME REASON
	want "$1" || return 0
	echo "skip $1 ($2)"
	SKIPS=$((SKIPS + 1))
}

# finish: cleanup first, so that nothing is printed after the closing line.
finish() {
	local rc=0
	lib_cleanup
	[ "$FAILS" -eq 0 ] || rc=1
	if [ "$FAILS" -ne 0 ]; then echo "logs: $LOGDIR"; fi
	echo "elapsed $((SECONDS - T_START))s"
	echo "$PASS passed, $FAILS failed, $SKIPS skipped"
	exit "$rc"
}

# need_build: the uroce CLI and library must exist; otherwise one failure.
need_build() {
	if [ ! -x "$UROCE" ] || [ ! -e "$BUILD/lib/libibverbs.so.1" ]; then
		echo "FAIL build (no $UROCE or $BUILD/lib/libibverbs.so.1: run make)"
		FAILS=$((FAILS + 1))
		finish
	fi
}

# have_tools PROG...: for use inside a check: print the reason and return 77
# (skip) when a program is missing.
have_tools() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || { echo "$t not installed (scripts/deps.sh test)"; return 77; }
	done
}

# netns_permitted: can we create network namespaces and veth pairs? Sets
# NETNS_WHY when not.
netns_permitted() {
	NETNS_WHY=""
	if ! command -v ip >/dev/null 2>&1; then NETNS_WHY="ip (iproute2) not installed"; return 1; fi
	local probe=uroce-probe-$$ err
	if ! err=$(ip netns add "$probe" 2>&1); then
		NETNS_WHY="cannot create network namespaces (ip netns add: ${err:-failed}); needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN)"
		return 1
	fi
	if ! err=$(ip -n "$probe" link add uroce-probe0 type veth peer name uroce-probe1 2>&1); then
		ip netns del "$probe" 2>/dev/null
		NETNS_WHY="cannot create veth pairs (${err:-failed})"
		return 1
	fi
	ip netns del "$probe" 2>/dev/null
	return 0
}

need_root() { # prints the reason and fails when not root
	[ "$(id -u)" -eq 0 ] && return 0
	echo "needs root"
	return 1
}

# ---------------------------------------------------------- output checks

# log_has FILE ERE [WHAT]: FILE (relative to CHECK_DIR) must match ERE.
log_has() {
	local f=$1 re=$2
	case $f in /*) ;; *) f=$CHECK_DIR/$f ;; esac
	if grep -Eq -- "$re" "$f"; then return 0; fi
	echo "expected /$re/ in $(basename "$f")${3:+ ($3)}, not found"
	return 1
}

# perftest_table FILE: a "#bytes" results header followed by a numeric row.
perftest_table() {
	local f=$CHECK_DIR/$1
	log_has "$1" '^[[:space:]]*#bytes' "perftest results header" || return 1
	if awk '/^[[:space:]]*#bytes/ {h=1; next} h && /^[[:space:]]*[0-9]+[[:space:]]+[0-9]+[[:space:]]+[0-9.]+/ {ok=1} END {exit !ok}' "$f"; then
		return 0
	fi
	echo "no numeric result row after the #bytes header in $1"
	return 1
}

# --------------------------------------------------------- client checks

# t_devinfo CTX DEV MTU IPV4: ibv_devinfo -v shows DEV, PORT_ACTIVE, Ethernet,
# the active MTU and GID[0] = ::ffff:IPV4.
t_devinfo() {
	local ctx=$1 dev=$2 mtu=$3 ip=$4 rc
	have_tools ibv_devinfo || return 77
	echo "[$ctx] ibv_devinfo -v"
	run_in "$ctx" ibv_devinfo -v >"$CHECK_DIR/devinfo.out" 2>&1
	rc=$?
	echo "exit $rc$(rc_note "$rc")"
	[ "$rc" -eq 0 ] || return 1
	local ok=0
	log_has devinfo.out "hca_id:[[:space:]]*$dev\$" "device name" || ok=1
	log_has devinfo.out 'state:[[:space:]]*PORT_ACTIVE' || ok=1
	log_has devinfo.out 'link_layer:[[:space:]]*Ethernet' || ok=1
	log_has devinfo.out "active_mtu:[[:space:]]*$mtu " "active MTU" || ok=1
	log_has devinfo.out "GID\\[ *0\\]:[[:space:]]*::ffff:${ip//./\\.}" "GID 0 = IPv4-mapped" || ok=1
	return "$ok"
}

# t_pingpong SCTX CCTX ADDR ARGS...: ibv_rc_pingpong -g 0 ARGS on both sides.
t_pingpong() {
	local sctx=$1 cctx=$2 addr=$3 port; shift 3
	have_tools ibv_rc_pingpong || return 77
	port=$(free_port) || return 1
	pair "$sctx" "$cctx" "$port" \
		ibv_rc_pingpong -g 0 -p "$port" "$@" -- \
		ibv_rc_pingpong -g 0 -p "$port" "$@" "$addr" || return 1
	log_has client.log 'bytes in [0-9.]+ seconds' || return 1
	log_has client.log 'iters in [0-9.]+ seconds' || return 1
	log_has server.log 'iters in [0-9.]+ seconds' || return 1
}

# t_pingpong_of KIND SCTX CCTX ADDR ARGS...: ibv_KIND_pingpong (ud, uc, rc, xsrq).
t_pingpong_of() {
	local kind=$1 sctx=$2 cctx=$3 addr=$4 port; shift 4
	have_tools "ibv_${kind}_pingpong" || return 77
	port=$(free_port) || return 1
	pair "$sctx" "$cctx" "$port" \
		"ibv_${kind}_pingpong" -g 0 -p "$port" "$@" -- \
		"ibv_${kind}_pingpong" -g 0 -p "$port" "$@" "$addr" || return 1
	# ibv_xsrq_pingpong reports only "success"
	local done='iters in [0-9.]+ seconds'
	[ "$kind" = xsrq ] && done='^success$'
	log_has client.log "$done" || return 1
	log_has server.log "$done" || return 1
}

# t_perftest SCTX CCTX ADDR TOOL ARGS...: perftest TOOL -x 0 ARGS.
t_perftest() {
	local sctx=$1 cctx=$2 addr=$3 tool=$4 port; shift 4
	have_tools "$tool" || return 77
	port=$(free_port) || return 1
	pair "$sctx" "$cctx" "$port" \
		"$tool" -x 0 -F -p "$port" "$@" -- \
		"$tool" -x 0 -F -p "$port" "$@" "$addr" || return 1
	perftest_table client.log
}

# t_qperf SCTX CCTX ADDR ARGS...: qperf server + client running rc_bw rc_lat.
t_qperf() {
	t_qperf_tests "$1" "$2" "$3" "rc_bw rc_lat" "${@:4}"
}

# t_qperf_tests SCTX CCTX ADDR "TEST..." ARGS...: qperf running each TEST
# (*_bw tests print "bw =", or "recv_bw =" for UD and UC; *_lat tests
# "latency ="; one result line each).
t_qperf_tests() {
	local sctx=$1 cctx=$2 addr=$3 port t nbw=0 nlat=0; shift 3
	local -a tests
	read -r -a tests <<<"$1"; shift
	have_tools qperf || return 77
	port=$(free_port) || return 1
	pair --persistent "$sctx" "$cctx" "$port" \
		qperf -lp "$port" -- \
		qperf -lp "$port" "$@" "$addr" "${tests[@]}" || return 1
	for t in "${tests[@]}"; do
		case $t in *_bw) nbw=$((nbw + 1)) ;; *_lat) nlat=$((nlat + 1)) ;; esac
	done
	[ "$(grep -cE '^[[:space:]]*(recv_)?bw[[:space:]]*=[[:space:]]*[0-9.]+ ' "$CHECK_DIR/client.log")" -eq "$nbw" ] ||
		{ echo "expected $nbw bw results"; return 1; }
	[ "$(grep -cE '^[[:space:]]*latency[[:space:]]*=[[:space:]]*[0-9.]+ ' "$CHECK_DIR/client.log")" -eq "$nlat" ] ||
		{ echo "expected $nlat latency results"; return 1; }
}

# client_suite TAG SCTX CCTX ADDR DEV MTU IPV4 [QPERF_ARGS...]
# Every client check once, server in SCTX, client in CCTX connecting to ADDR.
# DEV/MTU/IPV4: what ibv_devinfo must show in the server's context.
client_suite() {
	local tag=$1 s=$2 c=$3 addr=$4 dev=$5 mtu=$6 ip=$7; shift 7
	local -a qargs=("$@")
	local before=$FAILS
	check "$tag/devinfo" t_devinfo "$s" "$dev" "$mtu" "$ip"
	local saved=$FAIL_REASON
	if [ "$FAILS" -ne "$before" ] && [ -z "$FAIL_REASON" ]; then
		FAIL_REASON="ibv_devinfo failed in [$s], device not usable"
	fi
	check "$tag/pingpong" t_pingpong "$s" "$c" "$addr"
	check "$tag/pingpong-events" t_pingpong "$s" "$c" "$addr" -e
	check "$tag/pingpong-validate" t_pingpong "$s" "$c" "$addr" -c
	check "$tag/pingpong-mtu$mtu" t_pingpong "$s" "$c" "$addr" -m "$mtu" -s $((mtu * 3 + 17)) -n 200
	check "$tag/pingpong-s1" t_pingpong "$s" "$c" "$addr" -s 1 -n 1000
	check "$tag/pingpong-s4096" t_pingpong "$s" "$c" "$addr" -s 4096 -n 500
	check "$tag/pingpong-s65536" t_pingpong "$s" "$c" "$addr" -s 65536 -n 200 -c
	check "$tag/pingpong-s1048576" t_pingpong "$s" "$c" "$addr" -s 1048576 -n 20 -c
	check "$tag/ib_write_bw" t_perftest "$s" "$c" "$addr" ib_write_bw -s 65536 -n 1000
	check "$tag/ib_read_bw" t_perftest "$s" "$c" "$addr" ib_read_bw -s 65536 -n 1000
	check "$tag/ib_send_bw" t_perftest "$s" "$c" "$addr" ib_send_bw -s 65536 -n 1000
	check "$tag/ib_send_bw-srq" t_perftest "$s" "$c" "$addr" ib_send_bw -s 65536 -n 1000 --use-srq
	check "$tag/ib_write_bw-q8" t_perftest "$s" "$c" "$addr" ib_write_bw -s 65536 -n 500 -q 8
	check "$tag/ib_atomic_bw" t_perftest "$s" "$c" "$addr" ib_atomic_bw -n 1000
	check "$tag/ib_atomic_bw-cas" t_perftest "$s" "$c" "$addr" ib_atomic_bw -A CMP_AND_SWAP -n 1000
	check "$tag/ib_write_lat" t_perftest "$s" "$c" "$addr" ib_write_lat -s 2 -n 1000
	check "$tag/ib_read_lat" t_perftest "$s" "$c" "$addr" ib_read_lat -s 2 -n 1000
	check "$tag/ib_send_lat" t_perftest "$s" "$c" "$addr" ib_send_lat -s 2 -n 1000
	check "$tag/ib_atomic_lat" t_perftest "$s" "$c" "$addr" ib_atomic_lat -n 1000
	check "$tag/qperf" t_qperf "$s" "$c" "$addr" "${qargs[@]}"
	# UD and UC (datagrams and unacknowledged connections)
	check "$tag/ud_pingpong" t_pingpong_of ud "$s" "$c" "$addr" -n 500
	check "$tag/ud_pingpong-validate" t_pingpong_of ud "$s" "$c" "$addr" -n 200 -c -s $((mtu / 2))
	check "$tag/uc_pingpong" t_pingpong_of uc "$s" "$c" "$addr" -n 500
	check "$tag/uc_pingpong-validate" t_pingpong_of uc "$s" "$c" "$addr" -c -s $((mtu * 3 + 17)) -n 200 -m "$mtu"
	check "$tag/ib_send_bw-ud" t_perftest "$s" "$c" "$addr" ib_send_bw -c UD -n 1000
	check "$tag/ib_send_lat-ud" t_perftest "$s" "$c" "$addr" ib_send_lat -c UD -s 2 -n 1000
	check "$tag/ib_write_bw-uc" t_perftest "$s" "$c" "$addr" ib_write_bw -c UC -s 65536 -n 1000
	check "$tag/ib_send_bw-uc" t_perftest "$s" "$c" "$addr" ib_send_bw -c UC -s 4096 -n 1000
	check "$tag/ib_write_lat-uc" t_perftest "$s" "$c" "$addr" ib_write_lat -c UC -s 2 -n 1000
	check "$tag/ib_send_lat-uc" t_perftest "$s" "$c" "$addr" ib_send_lat -c UC -s 2 -n 1000
	# XRC: initiator QPs reaching the server's XRC SRQs by number
	check "$tag/xsrq_pingpong" t_pingpong_of xsrq "$s" "$c" "$addr" -n 100
	check "$tag/xsrq_pingpong-s5000" t_pingpong_of xsrq "$s" "$c" "$addr" -n 50 -s 5000 -m "$mtu"
	check "$tag/ib_send_bw-xrc" t_perftest "$s" "$c" "$addr" ib_send_bw -c XRC -s 65536 -n 1000
	check "$tag/ib_write_bw-xrc" t_perftest "$s" "$c" "$addr" ib_write_bw -c XRC -s 65536 -n 1000
	check "$tag/ib_read_bw-xrc" t_perftest "$s" "$c" "$addr" ib_read_bw -c XRC -s 65536 -n 500 -o 4
	# a UD message fits one packet: qperf's default 2 KiB would not at MTU 1024
	check "$tag/qperf-ud-uc" t_qperf_tests "$s" "$c" "$addr" "ud_bw ud_lat uc_bw uc_lat" "${qargs[@]}" -m "$mtu"
	FAIL_REASON=$saved
}
