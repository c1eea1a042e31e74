#!/usr/bin/env bash
# Two network namespaces joined by a veth pair, for running an RDMA client in
# one and its server in the other over a real (virtual) Ethernet link.
#
#   ns A: uroce-a-<tag>, veth uva<tag>, 198.18.0.1/30
#   ns B: uroce-b-<tag>, veth uvb<tag>, 198.18.0.2/30
#   lo is up in both; no default route; <tag> is the test script's pid ($$).
#   198.18.0.0/15 is the benchmarking range (RFC 2544): nothing real lives there.
#
# Sourced (by test scripts):
#   ns_up MTU          create both namespaces and the link (MTU 1500 or 9000)
#   ns_down            delete them (idempotent; also registered for cleanup)
#   ns_exec a|b CMD... run CMD in ns A/B with UROCE_NETDEV=<its veth>
#   ns_prefix a|b      set NS_PREFIX/CTX_PREFIX to that command prefix
#
# Run directly (by hand; NETNS_TAG defaults to "manual"):
#   tests/clients/netns.sh up [MTU] | down | exec a|b CMD... | selftest [MTU]
# e.g.
#   tests/clients/netns.sh up 9000
#   tests/clients/netns.sh exec a build/bin/uroce run -- ibv_devinfo -v
#   tests/clients/netns.sh down

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	NETNS_TAG=${NETNS_TAG:-manual}
else
	NETNS_TAG=${NETNS_TAG:-$$}
fi
NS_A=uroce-a-$NETNS_TAG
NS_B=uroce-b-$NETNS_TAG
VETH_A=uva$NETNS_TAG       # interface names: at most 15 characters
VETH_B=uvb$NETNS_TAG
IP_A=198.18.0.1
IP_B=198.18.0.2
NS_PLEN=30

ns_name() { case $1 in a) echo "$NS_A" ;; b) echo "$NS_B" ;; *) return 1 ;; esac; }
ns_veth() { case $1 in a) echo "$VETH_A" ;; b) echo "$VETH_B" ;; *) return 1 ;; esac; }
ns_ip() { case $1 in a) echo "$IP_A" ;; b) echo "$IP_B" ;; *) return 1 ;; esac; }

ns_prefix() { # a|b
	local ns veth
	if ! ns=$(ns_name "$1") || ! veth=$(ns_veth "$1"); then
		echo "ns_prefix: a or b, not $1" >&2
		return 2
	fi
	NS_PREFIX=(ip netns exec "$ns" env UROCE_NETDEV="$veth")
	# shellcheck disable=SC2034  # used by lib.sh
	CTX_PREFIX=("${NS_PREFIX[@]}")
}

ns_exec() { # a|b CMD...
	local side=$1; shift
	ns_prefix "$side" || return 2
	"${NS_PREFIX[@]}" "$@"
}

ns_down() {
	local ns
	for ns in "$NS_A" "$NS_B"; do
		if ip netns pids "$ns" >/dev/null 2>&1; then
			# processes left inside (should be none: lib.sh kills its own first)
			local p
			for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
		fi
		ip netns del "$ns" 2>/dev/null
	done
		return 0
}

ns_up() { # MTU
	local mtu=${1:-1500} side ns veth i
	ns_down
	if declare -F on_cleanup >/dev/null && [ "${_ns_hooked:-0}" -eq 0 ]; then
		on_cleanup ns_down
		_ns_hooked=1
	fi
	ip netns add "$NS_A" || return 1
	ip netns add "$NS_B" || { ns_down; return 1; }
		ip link add "$VETH_A" netns "$NS_A" mtu "$mtu" type veth \
		peer name "$VETH_B" netns "$NS_B" mtu "$mtu" || { ns_down; return 1; }
	for side in a b; do
		ns=$(ns_name $side); veth=$(ns_veth $side)
		if ! { ip -n "$ns" link set lo up &&
			ip -n "$ns" addr add "$(ns_ip $side)/$NS_PLEN" dev "$veth" &&
			ip -n "$ns" link set "$veth" up; }; then
			ns_down
			return 1
		fi
	done
	# veth carrier comes up asynchronously
	for ((i = 0; i < 50; i++)); do
		if ip -n "$NS_A" -br link show "$VETH_A" 2>/dev/null | grep -qw UP &&
			ip -n "$NS_B" -br link show "$VETH_B" 2>/dev/null | grep -qw UP; then
			return 0
		fi
		sleep 0.1
	done
	echo "ns_up: $VETH_A/$VETH_B did not come up" >&2
	ip -n "$NS_A" link show "$VETH_A" >&2
	return 1
}

# ns_ping: A reaches B and B reaches A (ping if installed, else a TCP connect).
ns_ping() {
	if command -v ping >/dev/null 2>&1; then
		ip netns exec "$NS_A" ping -c 1 -W 2 "$IP_B" &&
			ip netns exec "$NS_B" ping -c 1 -W 2 "$IP_A"
	else
		# no ping (iputils-ping): a TCP connection from A to a listener in B
		local port=$((20000 + RANDOM % 10000))
		ip netns exec "$NS_B" timeout 5 python3 -c "
import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('$IP_B',$port)); s.listen(1); s.settimeout(4); c,_=s.accept(); c.close()" &
		local lp=$!
		sleep 0.5
		ip netns exec "$NS_A" timeout 3 bash -c "exec 3<>/dev/tcp/$IP_B/$port" && wait "$lp"
	fi
}

ns_selftest() { # MTU: up, check addresses/MTU, reach each other, down
	local mtu=${1:-1500} rc=0
	ns_up "$mtu" || { echo "selftest: ns_up failed"; return 1; }
	ip -n "$NS_A" -br addr show "$VETH_A"
	ip -n "$NS_B" -br addr show "$VETH_B"
	ip -n "$NS_A" link show "$VETH_A" | grep -q "mtu $mtu " || { echo "selftest: wrong MTU"; rc=1; }
	[ -z "$(ip -n "$NS_A" route show default)" ] || { echo "selftest: default route present"; rc=1; }
	ns_ping || { echo "selftest: $IP_A cannot reach $IP_B"; rc=1; }
	[ "$(ns_exec a printenv UROCE_NETDEV)" = "$VETH_A" ] || { echo "selftest: UROCE_NETDEV not set"; rc=1; }
	ns_down
	if ip netns list | grep -q -- "-$NETNS_TAG\\b"; then echo "selftest: namespaces left"; rc=1; fi
	[ "$rc" -eq 0 ] && echo "selftest ok (mtu $mtu)"
	return "$rc"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	set -u
	cmd=${1:-}
	shift || true
	case $cmd in
	up) ns_up "${1:-1500}" && echo "up: $NS_A ($VETH_A $IP_A) <-> $NS_B ($VETH_B $IP_B)" ;;
	down) ns_down ;;
	exec) side=${1:-}; shift || true; ns_exec "$side" "$@" ;;
	selftest) ns_selftest "${1:-1500}" ;;
	*) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
fi
