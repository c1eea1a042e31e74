#!/usr/bin/env bash
# shellcheck disable=SC2317  # the t_* functions run through check() in lib.sh
# UCX 1.13 (Debian's libucx0 / ucx-utils) on uroce, through `uroce run`:
#   ucx/info-devices   `ucx_info -d` loads uct_ib (which links libmlx5, BIND_NOW)
#                      and lists uroce_lo as an IB memory domain with rc_verbs
#                      and ud_verbs on uroce_lo:1, and the rdmacm connection
#                      manager (uroce's librdmacm: no "rdma_create_event_channel
#                      failed")
#   ucx/info-roce      the port is RoCE (from sysfs gid_attrs/types: uroce
#                      run's view) and UCX picks a GID
# Loopback only, no root.
#   tests/clients/test_ucx.sh [REGEX]
# shellcheck source=tests/clients/lib.sh
. "$(dirname "$0")/lib.sh"
lib_init "$@"
need_build

# ucx_info -d through uroce run, with UCX's debug log (which says why a
# device or transport is left out) in the check directory.
t_ucx_info() {
	have_tools ucx_info || return 77
	UCX_LOG_LEVEL=debug UCX_LOG_FILE="$CHECK_DIR/ucx-debug.log" run_in lo ucx_info -d \
		>"$CHECK_DIR/client.log" 2>&1 || { echo "ucx_info -d failed"; return 1; }
	if grep -q 'rdma_create_event_channel failed' "$CHECK_DIR/client.log" "$CHECK_DIR"/ucx-debug.log* 2>/dev/null; then
		echo "UCX could not use librdmacm"; return 1
	fi
	# the uroce_lo block: its memory domain, then both transports on port 1
	awk '/^# Memory domain: /{md=$4} md=="uroce_lo" && /# *Transport:/{t=$3}
	     md=="uroce_lo" && /# *Device: uroce_lo:1/{print t}' "$CHECK_DIR/client.log" |
		sort -u >"$CHECK_DIR/transports.txt"
	echo "uroce_lo transports: $(tr '\n' ' ' <"$CHECK_DIR/transports.txt")"
	grep -qx rc_verbs "$CHECK_DIR/transports.txt" || { echo "no rc_verbs on uroce_lo:1"; return 1; }
	grep -qx ud_verbs "$CHECK_DIR/transports.txt" || { echo "no ud_verbs on uroce_lo:1"; return 1; }
	log_has client.log '^# Connection manager: rdmacm' || return 1
}

t_ucx_roce() {
	have_tools ucx_info || return 77
	UCX_LOG_LEVEL=debug run_in lo ucx_info -d >"$CHECK_DIR/client.log" 2>&1 ||
		{ echo "ucx_info -d failed"; return 1; }
	log_has client.log 'uroce_lo:1/RoCE' || return 1
	log_has client.log 'uroce_lo:1 using gid_index 0' || return 1
}

check ucx/info-devices t_ucx_info
check ucx/info-roce t_ucx_roce
finish
