#!/usr/bin/env bash
# shellcheck disable=SC2317  # the t_* functions run through check() in lib.sh
# ABI of build/lib/libibverbs.so.1 against Debian 12's libibverbs (rdma-core 44):
#   abi/symbols-missing   every exported (version, name, kind) of the system
#                         library is exported by ours
#   abi/symbols-extra     ours exports nothing the system library does not
#   abi/version-nodes     same soname, version nodes and node inheritance
#   ldd/<prog or lib>     `ldd -r` of each Debian client and provider against
#                         our library: no undefined symbol, no missing version
#                         or library, and libibverbs.so.1 resolves to ours
# Kinds are objdump's flags (binding, DF function / DO object); data objects
# also compare their size (copy relocations depend on it). Addresses and
# function sizes are ignored.
#
#   tests/clients/test_abi.sh [REGEX]    only checks whose name matches
#   BUILD=DIR    build directory (default <repo>/build)
#   SYSLIB=FILE  reference library (default the Debian one)
# Last line: "N passed, N failed, N skipped".

# shellcheck source=tests/clients/lib.sh
. "$(dirname "$0")/lib.sh"
lib_init "$@"

OURLIB=$BUILD/lib/libibverbs.so.1
SYSLIB=${SYSLIB:-/usr/lib/x86_64-linux-gnu/libibverbs.so.1}
MULTIARCH=/usr/lib/x86_64-linux-gnu

# SKIP_REASON / FAIL_REASON are read by check() in lib.sh.
# shellcheck disable=SC2034
if ! command -v objdump >/dev/null 2>&1; then
	SKIP_REASON="objdump not installed (binutils)"
elif [ ! -e "$SYSLIB" ]; then
	SKIP_REASON="no reference library $SYSLIB (libibverbs1)"
elif [ ! -e "$OURLIB" ]; then
	FAIL_REASON="no $OURLIB: run make"
fi

# abi_syms LIB: one line per defined dynamic symbol,
#   "VERSION NAME BIND KIND[ size=N]"
# VERSION is objdump's: "(V)" for a non-default (hidden) version, "V" for
# the default one. BIND is g (global), w (weak), u (unique); KIND DF/DO/D.
abi_syms() {
	objdump -T "$1" | awk '
	/^[0-9a-f]+ / {
		flags = substr($0, 18, 7)
		n = split(substr($0, 26), f, /[ \t]+/)
		sec = f[1]; size = f[2]; ver = f[3]; name = f[n]
		if (sec == "*UND*" || n < 4)
			next
		bind = substr(flags, 1, 1)
		if (substr(flags, 2, 1) == "w")
			bind = "w"
		kind = substr(flags, 6, 2)
		gsub(/ /, "", kind)
		line = ver " " name " " bind " " kind
		if (kind == "DO" && sec != "*ABS*") {
			sub(/^0+/, "", size)
			line = line " size=0x" (size == "" ? "0" : size)
		}
		print line
	}' | LC_ALL=C sort -u
}

# version_nodes LIB: "base SONAME" and "NODE <- PARENT|-" lines.
version_nodes() {
	objdump -p "$1" | awk '
	/^Version definitions:/ { on = 1; next }
	on && /^$/ { on = 0 }
	on && /^[0-9]/ {
		if (cur != "") print cur " <- " (par == "" ? "-" : par)
		cur = ""; par = ""
		if ($2 ~ /1$/) { print "base " $4; next }   # VER_FLG_BASE: the soname
		cur = $4
		next
	}
	on && /^[ \t]/ { par = par (par == "" ? "" : ",") $1 }
	END { if (cur != "") print cur " <- " (par == "" ? "-" : par) }'
}

# Differences are printed one per line, then once more on a single line so
# that the tail lib.sh shows on failure always holds the whole list.
t_syms() { # missing|extra
	local ours sys diff what
	ours=$(abi_syms "$OURLIB") || return 1
	sys=$(abi_syms "$SYSLIB") || return 1
	echo "system: $SYSLIB ($(echo "$sys" | wc -l) symbols)"
	echo "ours:   $OURLIB ($(echo "$ours" | wc -l) symbols)"
	if [ "$1" = missing ]; then
		diff=$(LC_ALL=C comm -23 <(echo "$sys") <(echo "$ours"))
		what="exported by the system library but not by ours"
	else
		diff=$(LC_ALL=C comm -13 <(echo "$sys") <(echo "$ours"))
		what="exported by ours but not by the system library"
	fi
	[ -z "$diff" ] && return 0
	echo "$(echo "$diff" | wc -l) symbols $what (VERSION NAME BIND KIND):"
	echo "$diff" | sed 's/^/  /'
	echo "all $1: $(echo "$diff" | awk '{printf "%s%s@%s", (NR>1?" ":""), $2, $1}')"
	return 1
}

t_nodes() {
	local ours sys
	ours=$(version_nodes "$OURLIB")
	sys=$(version_nodes "$SYSLIB")
	if [ "$ours" = "$sys" ]; then
		echo "$ours"
		return 0
	fi
	echo "version definitions differ (- system, + ours):"
	diff <(echo "$sys") <(echo "$ours") | grep '^[<>]' | sed 's/^</-/; s/^>/+/'
	return 1
}

# t_ldd FILE: ldd -r FILE with our library first in the search path.
t_ldd() {
	local bin=$1 out rc bad ours got
	if [ ! -e "$bin" ]; then
		echo "$bin not installed (scripts/deps.sh test)"
		return 77
	fi
	out=$(LD_LIBRARY_PATH=$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd -r "$bin" 2>&1)
	rc=$?
	echo "$out"
	local ok=0
	if [ "$rc" -ne 0 ]; then
		echo "ldd -r exit $rc"
		ok=1
	fi
	bad=$(echo "$out" | grep -E 'undefined symbol|version .* not found|=> not found')
	if [ -n "$bad" ]; then
		echo "$(echo "$bad" | wc -l) unresolved:"
		echo "$bad" | sed 's/^[[:space:]]*/  /'
		# once more on one line: NAME@VERSION (or the library not found)
		echo "all unresolved: $(echo "$bad" | sed -nE \
			-e 's/.*undefined symbol: ([^ ,\t]+), version ([^ \t]+).*/\1@\2/p' \
			-e 's/.*undefined symbol: ([^ ,\t]+).*/\1/p' \
			-e 's/.*(version [^ ]+ not found).*/\1/p' \
			-e 's/^[[:space:]]*([^ ]+) => not found.*/\1 (library not found)/p' | sort -u | tr '\n' ' ')"
		ok=1
	fi
	ours=$(readlink -f "$OURLIB")
	got=$(echo "$out" | awk '$1 == "libibverbs.so.1" && $2 == "=>" { print $3; exit }')
	if [ -z "$got" ]; then
		echo "$bin does not load libibverbs.so.1"
		ok=1
	elif [ "$(readlink -f "$got")" != "$ours" ]; then
		echo "libibverbs.so.1 resolves to $got, not ours ($ours)"
		ok=1
	fi
	return "$ok"
}

check abi/symbols-missing t_syms missing
check abi/symbols-extra t_syms extra
check abi/version-nodes t_nodes

for b in /usr/bin/ibv_devinfo /usr/bin/ibv_rc_pingpong \
	/usr/bin/ib_write_bw /usr/bin/ib_read_bw /usr/bin/ib_send_bw /usr/bin/ib_atomic_bw \
	/usr/bin/ib_write_lat /usr/bin/ib_read_lat /usr/bin/ib_send_lat /usr/bin/ib_atomic_lat \
	/usr/bin/qperf \
	"$MULTIARCH/librdmacm.so.1" "$MULTIARCH/libmlx5.so.1" "$MULTIARCH/libefa.so.1"; do
	check "ldd/$(basename "$b")" t_ldd "$b"
done

finish
