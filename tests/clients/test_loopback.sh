#!/usr/bin/env bash
# Unmodified Debian RDMA clients (ibverbs-utils, perftest, qperf) between two
# processes on this host, both on 127.0.0.1 with UROCE_NETDEV=lo, through
# `uroce run`. Needs no root.
#   tests/clients/test_loopback.sh [REGEX]   run only the checks matching REGEX
. "$(dirname "$0")/lib.sh"
lib_init "$@"
need_build

# lo: device uroce_lo, active MTU 4096, GID 0 = ::ffff:127.0.0.1
client_suite lo lo lo 127.0.0.1 uroce_lo 4096 127.0.0.1

finish
