#!/usr/bin/env bash
# Unmodified Debian RDMA clients across a veth pair between two network
# namespaces (netns.sh): server in ns A (198.18.0.1), client in ns B
# (198.18.0.2), each with UROCE_NETDEV set to its veth, at MTU 1500 and 9000.
# Needs root (ip netns add); every check is skipped, with the reason, without it.
#   tests/clients/test_veth.sh [REGEX]   run only the checks matching REGEX
#   MTUS="9000" tests/clients/test_veth.sh   only one link MTU
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"
lib_init "$@"
need_build

# t_lossy MODE LOSS SCTX CCTX ADDR TOOL ARGS...: t_perftest with
# UROCE_RETRANS=MODE and UROCE_LOSS=LOSS in both processes.
t_lossy() {
	local mode=$1 loss=$2; shift 2
	(export UROCE_RETRANS=$mode UROCE_LOSS=$loss UROCE_SEED=3; t_perftest "$@")
}

if ! netns_permitted; then
	if [ "${UROCE_REQUIRE_NETNS:-0}" = 1 ]; then
		FAIL_REASON=$NETNS_WHY
	else
		SKIP_REASON=$NETNS_WHY
	fi
fi

for mtu in ${MTUS:-1500 9000}; do
	case $mtu in
	1500) active=1024 ;;   # 1500 - IP/UDP/BTH/ICRC headers -> largest IB MTU is 1024
	*) active=4096 ;;
	esac
	tag=veth$mtu
	saved_fail=$FAIL_REASON
	if [ -z "$SKIP_REASON$FAIL_REASON" ]; then
		if ! ns_up "$mtu" >"$LOGDIR/ns_up-$mtu.log" 2>&1; then
			cat "$LOGDIR/ns_up-$mtu.log"
			FAIL_REASON="could not set up namespaces with a $mtu-byte veth: $(tail -1 "$LOGDIR/ns_up-$mtu.log")"
		fi
	fi
	# qperf defaults to a 2048-byte path MTU; say what the link allows.
	client_suite "$tag" a b "$IP_A" "uroce_$VETH_A" "$active" "$IP_A" -mt "$active"
	# unmodified perftest across the namespaces with 1% injected loss (both
	# processes, data and ACKs), in both loss-recovery modes
	check "$tag/sr-loss1pct-ib_write_bw" t_lossy sr 0.01 a b "$IP_A" ib_write_bw -s 1048576 -n 200
	check "$tag/sr-loss1pct-ib_send_bw" t_lossy sr 0.01 a b "$IP_A" ib_send_bw -s 65536 -n 1000
	check "$tag/sr-loss1pct-ib_read_bw" t_lossy sr 0.01 a b "$IP_A" ib_read_bw -s 65536 -n 1000
	check "$tag/gbn-loss1pct-ib_write_bw" t_lossy gbn 0.01 a b "$IP_A" ib_write_bw -s 1048576 -n 100
	ns_down
	FAIL_REASON=$saved_fail
done

finish
