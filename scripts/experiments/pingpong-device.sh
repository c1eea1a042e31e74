#!/usr/bin/env bash
# scripts/experiments/pingpong-device.sh: what one small message costs, from
# the kernel's floor up: bench/pingpong (UDP and TCP, polling with
# MSG_DONTWAIT as an MPI rank or uroce's engine does, and blocking as
# sockperf does), sockperf's UDP ping-pong, and ib_send_lat 8 B for each
# build in BUILDS (default "build .device/base") under each UROCE_PROGRESS
# mode in MODES (default "auto app"), on loopback and on a veth pair
# between two network namespaces (MTU 1500), interleaved over REPEAT rounds.
#   run: bash scripts/experiments/pingpong-device.sh
#   carry: build .device/bench .device/base   (.device/mpi for ip, if the
#   machine has no iproute2)
set -u
# shellcheck source-path=SCRIPTDIR source=device-env.sh
. "$(dirname "$0")/device-env.sh"
[ -x .device/mpi/bin/ip ] && ! command -v ip >/dev/null && export PATH=$PATH:$PWD/.device/mpi/bin
REPEAT=${REPEAT:-3} N=${N:-100000}
BUILDS=${BUILDS:-"build .device/base"} MODES=${MODES:-"auto app"}
PP=$PWD/build/bench/pingpong
port=19900
export NETNS_TAG=pp
# shellcheck source=tests/clients/netns.sh
# shellcheck disable=SC1091
. tests/clients/netns.sh

pre() { # a|b|lo: the command prefix of that side
	case $1 in lo) echo "env UROCE_NETDEV=lo" ;; *) echo "ip netns exec $(ns_name "$1") env UROCE_NETDEV=$(ns_veth "$1")" ;; esac
}

one_path() { # PATH SERVER-SIDE CLIENT-SIDE SERVER-ADDR
	local path=$1 s c addr=$4 proto blk b m res
	s=$(pre "$2"); c=$(pre "$3")
	for proto in udp tcp; do
		for blk in "" --block; do
			port=$((port + 1))
			$s "$PP" server $proto "$addr" $port $blk &
			sleep 0.3
			res=$($c "$PP" client $proto "$addr" $port "$N" 8 $blk)
			wait
			echo "$path pingpong $proto${blk:+ block}: $res"
		done
	done
	if command -v sockperf >/dev/null; then
		port=$((port + 1))
		$s sockperf server -i "$addr" -p $port >/dev/null 2>&1 &
		local spid=$!
		sleep 0.3
		res=$($c sockperf ping-pong -i "$addr" -p $port -m 14 -t 2 2>&1 |
			awk '/avg-latency/ {a=$0} /50.000/ {p=$NF} /99.000/ {q=$NF} END {print "p50", p, "p99", q}')
		kill "$spid" 2>/dev/null; wait
		echo "$path sockperf udp: $res"
	fi
	for m in $MODES; do
		for b in $BUILDS; do
			port=$((port + 1))
			$s env UROCE_PROGRESS="$m" "$b/bin/uroce" run -- ib_send_lat -s 8 -n "$N" -p $port >/dev/null 2>&1 &
			sleep 0.4
			res=$($c env UROCE_PROGRESS="$m" "$b/bin/uroce" run -- ib_send_lat -s 8 -n "$N" -p $port "$addr" 2>&1 |
				awk '$1 == 8 && NF >= 8 {print "p50 " $5 " p99 " $8 " us"}')
			wait
			echo "$path ib_send_lat $m $b: $res"
		done
	done
}

for _ in $(seq "$REPEAT"); do
	one_path lo lo lo 127.0.0.1
	if ns_up 1500 >/dev/null 2>&1; then
		one_path veth1500 a b "$IP_A"
		ns_down
	else
		echo "veth: no network namespaces here"
	fi
done
