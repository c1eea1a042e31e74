#!/usr/bin/env bash
# scripts/experiments/mpi-variants.sh: bench/mpi/run.sh for uroce under
# several UCX settings, with Open MPI's TCP BTL (ob1) once as the baseline,
# and one summary table (medians of each variant's repeats). Here:
#   bash scripts/experiments/mpi-variants.sh
# on the GPU machine (16 cores) through mpi-device.sh's kit:
#   MPI_DEVICE=1 bash scripts/experiments/mpi-variants.sh   carry: build .device/mpi
# VARIANTS: ';'-separated, each a space-separated list of NAME=VALUE (the
# empty one is the default), e.g.
#   VARIANTS='; UCX_RNDV_SCHEME=put_zcopy; UCX_RNDV_THRESH=262144'
# BENCH_REPEAT (2), BENCH_MPI_SECS (0.3), T_VARIANT (seconds a variant, 150).
# Output in $OUT (default /tmp/mpi-variants): one directory per variant
# (its mpi-latest.json and .md), summary.md.
set -u
cd "$(dirname "$0")/../.." || exit 1
O=${OUT:-/tmp/mpi-variants}
mkdir -p "$O"
VARIANTS=${VARIANTS:-"; UCX_RNDV_SCHEME=put_zcopy; UCX_RNDV_THRESH=262144; UCX_RC_VERBS_TX_CQ_MODERATION=1"}
export BENCH_REPEAT=${BENCH_REPEAT:-2} BENCH_MPI_SECS=${BENCH_MPI_SECS:-0.3}
T_VARIANT=${T_VARIANT:-150}

run_one() { # NAME TRANSPORTS ENV...
	local name=$1 tr=$2; shift 2
	local d=$O/$name
	rm -rf "$d" && mkdir -p "$d"
	echo "== $name: transports $tr, env: ${*:-(default)}"
	if [ "${MPI_DEVICE:-0}" = 1 ]; then
		env "$@" BENCH_MPI_TRANSPORTS="$tr" OUT="$d" BENCH_OUT="$d/out" T_MPI="$T_VARIANT" \
			bash scripts/experiments/mpi-device.sh >"$d/log" 2>&1
	else
		env "$@" BENCH_MPI_TRANSPORTS="$tr" BENCH_OUT="$d/out" \
			timeout -k 5 "$T_VARIANT" bash bench/mpi/run.sh >"$d/log" 2>&1
		cp "$d/out/mpi-latest.json" "$d/" 2>/dev/null
	fi
	grep -E '^(PASS|MISS|SKIP)' "$d/log" | sed 's/^/   /'
}

run_one ob1 tcp
i=0
IFS=';' read -r -a vs <<<"$VARIANTS"
for v in "${vs[@]}"; do
	# shellcheck disable=SC2086  # the variant's words are NAME=VALUE pairs
	set -- $v
	run_one "v$i" uroce "$@"
	echo "${*:-default}" >"$O/v$i/env"
	i=$((i + 1))
done

/usr/bin/python3 - "$O" <<'EOF' | tee "$O/summary.md"
import json, os, statistics, sys
o = sys.argv[1]
def load(d):
    try:
        return json.load(open(os.path.join(o, d, "mpi-latest.json")))["measurements"]
    except (OSError, ValueError, KeyError):
        return []
def med(rows, bench, size, field):
    xs = [m[field] for m in rows if m["bench"] == bench and m["size"] == size and m.get(field) is not None]
    return statistics.median(xs) if xs else None
cols = [("allreduce", 8, "avg_us", "AR 8 B us"), ("allreduce", 4096, "avg_us", "AR 4 KiB us"),
        ("allreduce", 32768, "avg_us", "AR 32 KiB us"), ("allreduce", 262144, "avg_us", "AR 256 KiB us"),
        ("allreduce", 1 << 20, "avg_us", "AR 1 MiB us"), ("allreduce", 16 << 20, "avg_us", "AR 16 MiB us"),
        ("latency", 8, "avg_us", "lat 8 B us"), ("latency", 32768, "avg_us", "lat 32 KiB us"),
        ("latency", 1 << 20, "avg_us", "lat 1 MiB us"), ("bw", 1 << 20, "MBps", "bw 1 MiB MB/s")]
names = ["ob1"] + sorted((d for d in os.listdir(o) if d.startswith("v") and os.path.isdir(os.path.join(o, d))),
                         key=lambda d: int(d[1:]))
print("| variant | " + " | ".join(c[3] for c in cols) + " |")
print("|---|" + "---:|" * len(cols))
for n in names:
    rows = load(n)
    env = open(os.path.join(o, n, "env")).read().strip() if os.path.exists(os.path.join(o, n, "env")) else "ob1 TCP"
    vals = []
    for b, s, f, _ in cols:
        v = med(rows, b, s, f)
        vals.append("–" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}"))
    print(f"| {env} | " + " | ".join(vals) + " |")
EOF
