#!/usr/bin/env bash
# shellcheck disable=SC2317,SC2031  # the t_* functions run through check() in lib.sh
# uroce doctor on the recorded trees in tests/topo/doctor/ (see mktrees.sh
# there): good/ passes every check; each known-bad tree makes exactly its
# check fail or warn while every other check passes or skips, and the exit
# status is 1 exactly when a check fails.
#   doctor/<tree>         one tree
#   doctor/json           --json is valid JSON with every check
#   doctor/live           this machine: runs, prints every check, exits 0 or 1
#   doctor/usage          bad arguments exit 2, a missing --root exits 1
#   doctor/counters-*     --counters on live processes (src/obs/counters.h):
#     -loss               ib_write_bw on lo with UROCE_LOSS=0.05: retrans
#                         WARN/FAIL naming fault injection (text and --json)
#     -clean              the same without faults: retrans PASS, gpu PASS
#                         (no GPU memory), exit 0
#     -rnr                uroce trace --op send --rnr: rnr WARN, post more RECVs
#     -none               no process (private /dev/shm): message, exit 0
# Last line: "N passed, N failed, N skipped".

# shellcheck source=tests/clients/lib.sh
. "$(dirname "$0")/lib.sh"
lib_init "$@"
need_build

TREES=$TOP/tests/topo/doctor
NCHECK=12

# t_tree TREE CHECK STATUS [ARGS...]: CHECK has STATUS, the others PASS/SKIP.
t_tree() {
	local tree=$1 id=$2 want=$3 rc out bad want_rc=0; shift 3
	out=$CHECK_DIR/out.txt
	"$UROCE" doctor --root "$TREES/$tree" "$@" >"$out"
	rc=$?
	cat "$out"
	echo "exit $rc"
	[ "$want" = FAIL ] && want_rc=1
	[ "$rc" -eq "$want_rc" ] || { echo "want exit $want_rc"; return 1; }
	[ "$(grep -cE '^(PASS|WARN|FAIL|SKIP) [a-z-]+: ' "$out")" -eq "$NCHECK" ] ||
		{ echo "want $NCHECK check lines"; return 1; }
	[ "$id" = - ] || grep -q "^$want $id: " "$out" || { echo "want '$want $id'"; return 1; }
	bad=$(grep -E '^(WARN|FAIL) ' "$out" | grep -v "^$want $id: ")
	[ -z "$bad" ] || { echo "other checks complain: $bad"; return 1; }
}

t_unreadable() {
	t_tree acs-unreadable acs SKIP || return 1
	grep -q 'needs root' "$CHECK_DIR/out.txt" || { echo "no 'needs root' explanation"; return 1; }
}

t_json() {
	have_tools python3 || return 77
	"$UROCE" doctor --root "$TREES/downtrained" --json >"$CHECK_DIR/out.json"
	python3 - "$CHECK_DIR/out.json" "$NCHECK" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
st = {c["id"]: c["status"] for c in j["checks"]}
print(st)
assert len(st) == int(sys.argv[2]), "check count"
assert st["pcie-link"] == "FAIL"
assert all(c["evidence"] for c in j["checks"] if c["status"] != "SKIP")
EOF
}

t_live() {
	local rc
	"$UROCE" doctor >"$CHECK_DIR/out.txt"
	rc=$?
	cat "$CHECK_DIR/out.txt"
	echo "exit $rc"
	[ "$rc" -le 1 ] || return 1
	[ "$(grep -cE '^(PASS|WARN|FAIL|SKIP) [a-z-]+: ' "$CHECK_DIR/out.txt")" -eq "$NCHECK" ]
}

t_usage() {
	local rc
	"$UROCE" doctor --bogus >/dev/null 2>&1; rc=$?
	echo "bad argument: exit $rc"; [ "$rc" -eq 2 ] || return 1
	"$UROCE" doctor --peer-mtu 12 >/dev/null 2>&1; rc=$?
	echo "bad --peer-mtu: exit $rc"; [ "$rc" -eq 2 ] || return 1
	"$UROCE" doctor --counters --interval 0 >/dev/null 2>&1; rc=$?
	echo "bad --interval: exit $rc"; [ "$rc" -eq 2 ] || return 1
	"$UROCE" doctor --counters --root / >/dev/null 2>&1; rc=$?
	echo "--counters --root: exit $rc"; [ "$rc" -eq 2 ] || return 1
	"$UROCE" doctor 1234 >/dev/null 2>&1; rc=$?
	echo "PID without --counters: exit $rc"; [ "$rc" -eq 2 ] || return 1
	"$UROCE" doctor --root /nonexistent >/dev/null 2>&1; rc=$?
	echo "missing root: exit $rc"; [ "$rc" -eq 1 ] || return 1
	"$UROCE" help doctor | grep -q -- '--root DIR'
}

# ---- --counters: live processes ----

# ctr_pid PATTERN: waits (up to 10 s) for the process whose command line
# matches ^PATTERN to have a QP in its stat file; prints its pid.
ctr_pid() {
	local pat=$1 pid i
	for ((i = 0; i < 100; i++)); do
		for pid in $(pgrep -f "^$pat"); do
			"$UROCE" stat --json "$pid" 2>/dev/null | grep -q '"qps":[1-9]' &&
				{ echo "$pid"; return 0; }
		done
		sleep 0.1
	done
	echo "no process '$pat' with a QP" >&2
	return 1
}

# ctr_perftest SECS [ARGS...]: ib_write_bw ARGS server and client on lo for
# SECS seconds (fault injection from the caller's environment, e.g.
# UROCE_LOSS=0.05 ctr_perftest 4); sets SPID and CPID (the perftest pids),
# SRV_BG and CLI_BG.
ctr_perftest() {
	local secs=$1 port; shift
	have_tools ib_write_bw || return 77
	port=$(free_port) || return 1
	start_bg lo "$CHECK_DIR/server.log" ib_write_bw "$@" -x 0 -p "$port" -D "$secs"
	SRV_BG=$BG_PID
	wait_listen lo "$port" "$SRV_BG" "$LISTEN_WAIT" || return 1
	start_bg lo "$CHECK_DIR/client.log" ib_write_bw "$@" -x 0 -p "$port" -D "$secs" 127.0.0.1
	CLI_BG=$BG_PID
	CPID=$(ctr_pid "ib_write_bw.* -p $port -D $secs 127.0.0.1") || return 1
	SPID=$(ctr_pid "ib_write_bw.* -p $port -D $secs\$") || return 1
	echo "server pid $SPID, client pid $CPID"
}

ctr_wait_done() {
	wait_pid "$CLI_BG" 15 >/dev/null 2>&1
	wait_pid "$SRV_BG" 15 >/dev/null 2>&1
	return 0
}

t_ctr_loss() {
	local rc out=$CHECK_DIR/client.out
	UROCE_LOSS=0.05 ctr_perftest 4 || return $?
	sleep 0.5
	"$UROCE" doctor --counters "$CPID" >"$out"; rc=$?
	cat "$out"; echo "exit $rc"
	"$UROCE" doctor --counters --json --interval 0.5 "$SPID" >"$CHECK_DIR/server.json"
	echo "server --json: exit $?"
	ctr_wait_done
	grep -qE '^(WARN|FAIL) retrans: .*fault injection is on \(UROCE_LOSS=0.05\)' "$out" ||
		{ echo "want retrans WARN/FAIL naming UROCE_LOSS"; return 1; }
	grep -qE 'retrans_pkts [1-9][0-9]* \([0-9.]+/s\)' "$out" ||
		{ echo "want retrans_pkts with a rate"; return 1; }
	grep -q 'fix: fault injection is on' "$out" || { echo "want the fix"; return 1; }
	if grep -q '^FAIL ' "$out"; then [ "$rc" -eq 1 ]; else [ "$rc" -eq 0 ]; fi ||
		{ echo "exit status does not match the checks"; return 1; }
	have_tools python3 || return 0
	python3 - "$CHECK_DIR/server.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
st = {c["id"]: c for c in j["checks"]}
print({k: v["status"] for k, v in st.items()})
p = j["processes"][0]
assert "UROCE_LOSS=0.05" in p["fault_injection"], p["fault_injection"]
assert p["counters"]["fault_dropped"] > 0 and "rates_per_s" in p
assert st["retrans"]["status"] in ("WARN", "FAIL"), st["retrans"]
assert any("fault injection" in e for e in st["retrans"]["evidence"])
assert set(st) == {"retrans", "rnr", "timeouts", "icrc", "rx-drops", "duplicates", "ecn-cnp", "gpu"}
EOF
}

t_ctr_clean() {
	local rc out=$CHECK_DIR/client.out
	unset UROCE_LOSS UROCE_DUP UROCE_CORRUPT UROCE_REORDER UROCE_DELAY_US
	# a few WRs in flight: no burst overflows the loopback socket buffers
	# of a busy host (real loss, which the check would rightly report)
	ctr_perftest 2 -s 4096 -t 4 || return $?
	sleep 0.3
	"$UROCE" doctor --counters --interval 0.5 "$CPID" >"$out"; rc=$?
	cat "$out"; echo "exit $rc"
	ctr_wait_done
	grep -q '^PASS retrans: ' "$out" || { echo "want PASS retrans"; return 1; }
	grep -q '^PASS timeouts: ' "$out" || { echo "want PASS timeouts"; return 1; }
	grep -q '^PASS gpu: no GPU memory in the data path' "$out" || { echo "want PASS gpu"; return 1; }
	! grep -q 'fault injection' "$out" || { echo "fault injection named"; return 1; }
	[ "$rc" -eq 0 ]
}

t_ctr_rnr() {
	local bg pid kids="" i out=$CHECK_DIR/rnr.out
	timeout -k 5 "$T_TIMEOUT" env UROCE_NETDEV=lo "$UROCE" trace --explain --op send --rnr \
		--hold 3000 >"$CHECK_DIR/trace.log" 2>&1 </dev/null &
	bg=$!
	echo "$bg" >>"$LOGDIR/pids"
	# the transfer's processes: children of `uroce trace` (under timeout);
	# they hold on for 3 s after the transfer, so the counters are there
	local k
	for ((i = 0; i < 200; i++)); do
		k=$(pgrep -P "$(pgrep -P "$bg" | head -1)" 2>/dev/null | tr '\n' ' ')
		[ -n "${k// /}" ] && kids=$k
		for pid in $k; do
			"$UROCE" stat --json "$pid" 2>/dev/null | grep -q '"rnr_naks_sent":[1-9]' && break 2
		done
		sleep 0.1
	done
	echo "transfer pids: $kids"
	: >"$out"
	for pid in $kids; do "$UROCE" doctor --counters --interval 0.3 "$pid" >>"$out"; done
	cat "$out"
	wait_pid "$bg" 10 >/dev/null 2>&1
	grep -q '^WARN rnr: ' "$out" || { echo "want WARN rnr"; return 1; }
	grep -q 'does not post receives fast enough' "$out" || { echo "want the receiver named"; return 1; }
	grep -q 'fix: .*post more RECVs' "$out" || { echo "want the fix"; return 1; }
	! grep -qE '^(WARN|FAIL) retrans: ' "$out" || { echo "RNR resends taken for losses"; return 1; }
}

t_ctr_none() {
	local rc out=$CHECK_DIR/none.out
	# A private, empty /dev/shm, so that processes of other tests do not count.
	if unshare -rm true 2>/dev/null; then
		# shellcheck disable=SC2016  # $0 is expanded by the inner sh
		unshare -rm sh -c 'mount -t tmpfs none /dev/shm && exec "$0" doctor --counters' \
			"$UROCE" >"$out"; rc=$?
	elif ! ls /dev/shm/uroce-*.stat >/dev/null 2>&1; then
		"$UROCE" doctor --counters >"$out"; rc=$?
	else
		echo "uroce processes are running and no user namespace for a private /dev/shm"
		return 77
	fi
	cat "$out"; echo "exit $rc"
	[ "$rc" -eq 0 ] || return 1
	grep -q 'no running uroce process has a device open' "$out" || return 1
	"$UROCE" doctor --counters --interval 0.1 999999999 >"$out"; rc=$?
	cat "$out"; echo "unknown pid: exit $rc"
	[ "$rc" -eq 1 ] && grep -q 'no running uroce process matches 999999999' "$out"
}

check doctor/good t_tree good - PASS
check doctor/downtrained t_tree downtrained pcie-link FAIL
check doctor/acs t_tree acs acs FAIL
check doctor/mtu1500 t_tree mtu1500 mtu FAIL --peer-mtu 9000
check doctor/mtu1500-alone t_tree mtu1500 mtu WARN
check doctor/mtu-peer-match t_tree good mtu PASS --peer-mtu 9000
check doctor/no-peermem t_tree no-peermem peermem FAIL
check doctor/cross-socket t_tree cross-socket numa FAIL
check doctor/iommu-strict t_tree iommu-strict iommu FAIL
check doctor/no-rocev2-gid t_tree no-rocev2-gid gid FAIL
check doctor/powersave t_tree powersave governor WARN
check doctor/small-rmem t_tree small-rmem sockbuf WARN
check doctor/drops t_tree drops drops WARN
check doctor/ecn-off t_tree ecn-off ecn WARN
check doctor/pfc-off t_tree pfc-off qos WARN
check doctor/acs-unreadable t_unreadable
check doctor/json t_json
check doctor/live t_live
check doctor/usage t_usage
check doctor/counters-none t_ctr_none
check doctor/counters-loss t_ctr_loss
check doctor/counters-clean t_ctr_clean
check doctor/counters-rnr t_ctr_rnr
finish
