#!/usr/bin/env bash
# Runs the test suites and prints one closing line "N passed, N failed, N skipped".
#   tests/run.sh [unit|verbs|rdmacm|clients ...]   (default: all)
# Every test program and script prints its own "N passed, N failed, N skipped"
# as its last line; this sums them. A program that dies without that line
# counts as one failure.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(unit verbs rdmacm clients)
export UROCE_NETDEV=${UROCE_NETDEV:-lo}
export PATH="$build/bin:$PATH"
tp=0 tf=0 ts=0
failed_list=()
# The failures again at the end, with what their logs said: CI shows the
# tail of the output only.
recap=$(mktemp)
trap 'rm -f "$recap"' EXIT

run_one() { # name, command...
	local name=$1; shift
	local log
	log=$(mktemp)
	echo "== $name"
	"$@" 2>&1 | tee "$log"
	local rc=${PIPESTATUS[0]}
	local last
	last=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$log" | tail -1)
	if [ -n "$last" ]; then
		local p f s
		p=$(echo "$last" | sed -E 's/^([0-9]+) passed.*/\1/')
		f=$(echo "$last" | sed -E 's/.* ([0-9]+) failed.*/\1/')
		s=$(echo "$last" | sed -nE 's/.* ([0-9]+) skipped$/\1/p')
		tp=$((tp + p)); tf=$((tf + f)); ts=$((ts + ${s:-0}))
		if [ "$f" -ne 0 ] || [ "$rc" -ne 0 ]; then
			[ "$f" -eq 0 ] && tf=$((tf + 1))
			failed_list+=("$name")
			{ echo "== $name"; grep -A 12 -E '^FAIL ' "$log" | head -60; } >>"$recap"
		fi
	else
		echo "FAIL $name (exit $rc, no summary line)"
		tf=$((tf + 1)); failed_list+=("$name")
	fi
	rm -f "$log"
}

for s in "${suites[@]}"; do
	case "$s" in
	unit|verbs|rdmacm)
		for t in "$build/tests/$s"/*; do
			[ -x "$t" ] || continue
			run_one "$s/$(basename "$t")" "$t"
		done
		# the default (UROCE_PROGRESS=auto) has application threads
		# take the engine's idle turns on up to 4 CPUs and leaves the
		# transport to engine threads (one per 4 CPUs, at most 4) on
		# more; the other mode must do as well. Here, on few CPUs, that
		# is engine progress with four engine threads per context, so
		# the QPs of one test land on different engines.
		if [ "$s" = verbs ]; then
			other=(UROCE_PROGRESS=app)
			[ "$(nproc)" -le 4 ] && other=(UROCE_PROGRESS=engine UROCE_ENGINES=4)
			for t in test_ops test_faults test_inflight; do
				[ -x "$build/tests/verbs/$t" ] &&
					run_one "verbs/$t (${other[*]})" env "${other[@]}" "$build/tests/verbs/$t"
			done
		fi ;;
	clients)
		for t in "$top"/tests/clients/test_*.sh; do
			[ -x "$t" ] || continue
			run_one "clients/$(basename "$t" .sh)" "$t"
		done ;;
	*) echo "unknown suite $s" >&2; exit 2 ;;
	esac
done
echo
if [ ${#failed_list[@]} -gt 0 ]; then
	echo "---- the failures again (12 lines after each FAIL, 60 per program)"
	head -300 "$recap"
	echo "failed: ${failed_list[*]}"
fi
echo "$tp passed, $tf failed, $ts skipped"
[ "$tf" -eq 0 ]
