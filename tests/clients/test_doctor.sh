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
	"$UROCE" doctor --root /nonexistent >/dev/null 2>&1; rc=$?
	echo "missing root: exit $rc"; [ "$rc" -eq 1 ] || return 1
	"$UROCE" help doctor | grep -q -- '--root DIR'
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
finish
