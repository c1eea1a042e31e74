#!/usr/bin/env bash
# uroce model: the all-reduce model against closed forms recomputed here
# from its own JSON (inputs and calibration), the seed's case, the SVG
# plot, and `uroce model calibrate` on result files (no measuring: the
# numbers are given). No root, no network, no timing assertions.
#   tests/clients/test_model.sh [REGEX]
. "$(dirname "$0")/lib.sh"
lib_init "$@"
need_build

PY=/usr/bin/python3
M=("$UROCE" model allreduce)

# Every transport and algorithm at a few shapes: time, bytes, algbw and
# busbw from the formulas of docs/model.md, in Python, against the model.
CLOSED_PY='
import json, math, sys
d = json.load(open(sys.argv[1]))
i, cal = d["inputs"], {k: v["value"] for k, v in d["calibration"]["params"].items()}
over = json.loads(sys.argv[2])
N, G, S, K, X, V = i["nodes"], i["gpus_per_node"], i["bytes"], i["nics_per_node"], i["nic_gbps"], i["nvlink_gbps"]
p = N * G
f = lambda n: 2 * (n - 1) / n
bad = 0
assert abs(i["ring_factor"] - f(p)) < 1e-9, "ring_factor"
for r in d["results"]:
    t, a = r["transport"], r["algo"]
    eff = over.get("eff", cal[t + ".eff"]); al = over.get("alpha", cal[t + ".alpha_us"])
    cp, dr = cal[t + ".copies"], cal[t + ".dram_touches"]
    node_bw = K * X * 1e9 / 8 * eff
    nvl = V * 1e9 / 8
    copy_bw = min(cal["gpu.d2h_gbs"], cal["gpu.h2d_gbs"]) * 1e9
    alpha = (al + 2 * cp * cal["gpu.copy_us"]) * 1e-6
    anvl = cal["nvlink.alpha_us"] * 1e-6
    if a == "ring":
        net = f(p) * S if N > 1 else 0
        lat = 2 * (p - 1) * (alpha if N > 1 else anvl)
        nv = f(p) * S / nvl if G > 1 else 0
        stage_gpu = net / min(K, G)
    elif a == "tree":
        net = f(N) * S
        lat = 2 * math.ceil(math.log2(N)) * alpha + 2 * (G - 1) * anvl if N > 1 else 2 * (G - 1) * anvl
        nv = 2 * S / nvl if G > 1 else 0
        stage_gpu = net / min(K, G)
    else:
        net = f(N) * S
        lat = 2 * (N - 1) * alpha + 2 * (G - 1) * anvl
        nv = 2 * (G - 1) / G * S / nvl
        stage_gpu = net / G
    tnet = net / node_bw
    tst = cp * stage_gpu / copy_bw
    tmem = dr * 2 * net / (cal["node.host_mem_gbs"] * 1e9)
    bw = max(tnet, tst) if i["overlap"] else tnet + tst
    if a == "hier":
        want = lat + nv + max(bw, tmem)
    else:
        want = lat + max(bw, tmem, nv)
    checks = [("time_s", r["time_s"], want), ("net_bytes_per_node", r["net_bytes_per_node"], net),
              ("algbw_gbs", r["algbw_gbs"], S / r["time_s"] / 1e9),
              ("busbw_gbs", r["busbw_gbs"], S / r["time_s"] / 1e9 * f(p)),
              ("latency_s", r["latency_s"], lat), ("network_s", r["network_s"], tnet)]
    for name, have, w in checks:
        ok = abs(have - w) <= 1e-6 * max(abs(have), abs(w)) + 1e-12
        bad += not ok
        print("%-5s %-4s %-20s %-14.8g %s %.8g" % (t, a, name, have, "==" if ok else "!=", w))
sys.exit(1 if bad else 0)
'

t_closed_forms() {
	local shape n=0
	for shape in "--nodes 256 --gpus-per-node 8 --bytes 200G" \
		"--nodes 2 --gpus-per-node 1 --bytes 1M --nic-gbps 25" \
		"--nodes 3 --gpus-per-node 4 --bytes 64Mi --nics-per-node 2 --nic-gbps 200 --no-overlap" \
		"--nodes 1000 --gpus-per-node 8 --bytes 10G --nics-per-node 8 --nic-gbps 400 --nvlink-gbps 100" \
		"--nodes 16 --gpus-per-node 8 --bytes 4K --eff 1 --alpha-us 0"; do
		n=$((n + 1))
		local over='{}'
		case $shape in *--eff*) over='{"eff": 1, "alpha": 0}' ;; esac
		# shellcheck disable=SC2086  # the shape is a list of options
		timeout 10 "${M[@]}" $shape --algo all --transport all --json >"$CHECK_DIR/m$n.json" || {
			echo "uroce model allreduce $shape failed"; return 1; }
		echo "== $shape"
		"$PY" -c "$CLOSED_PY" "$CHECK_DIR/m$n.json" "$over" || return 1
	done
}
check model/closed-forms t_closed_forms

# The seed's numbers: 2 x 2047/2048 x 200 GB = 399.8 GB per server, 32 s at
# 100 Gb/s; the three rows, what they imply, and their reproduction.
t_seed_case() {
	local d=$CHECK_DIR
	timeout 10 "${M[@]}" --seed-case >"$d/seed.out" || return 1
	cat "$d/seed.out"
	log_has seed.out '2 x 2047/2048 x 200 GB = 399.8 GB' || return 1
	log_has seed.out 'At 100 Gb/s that alone takes 32.0 s' || return 1
	local row
	for row in 'TCP, 25GbE +80 s +22.2 h' 'RoCEv2, 100GbE +20 s +5.6 h' 'RDMA\+GDR, 100GbE +8 s +2.2 h'; do
		log_has seed.out "^ +$row" "seed row" || return 1
	done
	log_has seed.out '^4\. What 8 s takes' || return 1
	timeout 10 "${M[@]}" --seed-case --json >"$d/seed.json" || return 1
	"$PY" - "$d/seed.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["seed_case"]
bad = []
moved = 2 * 2047 / 2048 * 200e9
if abs(s["bytes_per_node"] - moved) > 1:
    bad.append("bytes_per_node %r" % s["bytes_per_node"])
rows = {r["label"]: r for r in s["rows"]}
want = {"TCP, 25GbE": (80, 25, "tcp"), "RoCEv2, 100GbE": (20, 100, "roce"), "RDMA+GDR, 100GbE": (8, 100, "gdr")}
for label, (secs, gbps, tp) in want.items():
    r = rows[label]
    m = r["model"]
    print("%-18s seed %3g s  naive %6.1f s  model %6.1f s  implied %5.0f Gb/s  %d NICs -> %5.1f s" % (
        label, r["seed_s"], r["naive_s"], m["time_s"], r["implied_gbps_per_node"], r["nics"],
        r["reproduced"]["time_s"]))
    if (r["seed_s"], r["nic_gbps"], r["transport"]) != (secs, gbps, tp):
        bad.append("%s: seed row %r" % (label, (r["seed_s"], r["nic_gbps"], r["transport"])))
    # the naive reading sends S once at the utilisation given
    if abs(r["naive_s"] - 200e9 * 8 / (gbps * 1e9 * r["eff"])) > 1e-6 * r["naive_s"]:
        bad.append("%s: naive" % label)
    # implied goodput: 2(n-1)/n S in the seed's time
    if abs(r["implied_gbps_per_node"] - moved * 8 / secs / 1e9) > 1e-6 * r["implied_gbps_per_node"]:
        bad.append("%s: implied" % label)
    # one NIC of the stated speed cannot do it: at least the bytes at line rate
    if m["time_s"] < moved * 8 / (gbps * 1e9) or m["time_s"] <= secs:
        bad.append("%s: model %.1f s is not above the line-rate bound" % (label, m["time_s"]))
    # with the NICs the seed's time implies, the model lands near the seed's time
    if not 0.6 * secs <= r["reproduced"]["time_s"] <= 1.4 * secs:
        bad.append("%s: reproduced %.1f s, seed %g s" % (label, r["reproduced"]["time_s"], secs))
    if r["reproduced"]["net_bytes_per_node"] != m["net_bytes_per_node"]:
        bad.append("%s: more NICs changed the bytes" % label)
# 8 rails of 200 Gb/s with GDR reach 8 s, one 100 GbE NIC does not
t8 = {t["what"]: t["result"]["time_s"] for t in s["to_8s"]}
if not t8["8 rails of 200 Gb/s (DGX A100: one HDR NIC per GPU)"] < 8:
    bad.append("8 x 200 Gb/s not under 8 s")
if not t8["the seed's row 3 as stated"] > 30:
    bad.append("1 x 100 GbE under 30 s")
# every param the model used has a source
for k, v in d["calibration"]["params"].items():
    if not (v["source"]["command"] and v["source"]["date"] and v["source"]["machine"]):
        bad.append("param %s without a source" % k)
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
EOF
}
check model/seed-case t_seed_case

t_table() {
	timeout 10 "${M[@]}" --algo all >"$CHECK_DIR/table.out" || return 1
	cat "$CHECK_DIR/table.out"
	local t a
	for t in tcp roce gdr; do
		for a in ring tree hier; do
			log_has table.out "^$t +$a +[0-9.]+ (s|ms|us) " "row $t $a" || return 1
		done
	done
	log_has table.out '2\(p-1\)/p x S = 399.8 GB' || return 1
	log_has table.out "^transport costs \\(.*calibration.json" "the calibration file named" || return 1
	# bad usage: exit 2
	local rc
	"${M[@]}" --transport udp >/dev/null 2>&1; rc=$?
	[ "$rc" -eq 2 ] || { echo "--transport udp: exit $rc, want 2"; return 1; }
	"${M[@]}" --bytes 12X >/dev/null 2>&1; rc=$?
	[ "$rc" -eq 2 ] || { echo "--bytes 12X: exit $rc, want 2"; return 1; }
	"$UROCE" model nosuch >/dev/null 2>&1; rc=$?
	[ "$rc" -eq 2 ] || { echo "model nosuch: exit $rc, want 2"; return 1; }
	"$UROCE" help model | grep -q -- '--seed-case' || { echo "uroce help model: no --seed-case"; return 1; }
}
check model/table-and-usage t_table

# The plot: one polyline per transport, one point per node count (or
# size), and the points are the model's own numbers.
t_svg() {
	local d=$CHECK_DIR
	timeout 10 "${M[@]}" --svg "$d/nodes.svg" --json >"$d/nodes.json" || return 1
	timeout 10 "${M[@]}" --nodes 16 --bytes 1G --sweep bytes --svg "$d/bytes.svg" --json >"$d/bytes.json" || return 1
	"$PY" - "$d" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
ns = {"s": "http://www.w3.org/2000/svg"}
bad = 0
for name in ("nodes", "bytes"):
    svg = ET.parse("%s/%s.svg" % (d, name)).getroot()
    js = json.load(open("%s/%s.json" % (d, name)))["sweep"]
    series = svg.findall(".//s:g[@class='series']", ns)
    names = [g.get("data-name") for g in series]
    print(name, names, "x =", js["x"][:3], "...", len(js["x"]), "points")
    if len(series) != 3 or not all(t in " ".join(names) for t in ("tcp", "roce", "gdr")):
        print("  want three series tcp, roce, gdr"); bad += 1
    for g in series:
        pts = g.find("s:polyline", ns).get("points").split()
        if len(pts) != len(js["x"]) or len(g.findall("s:circle", ns)) != len(js["x"]):
            print("  %s: %d points, sweep has %d" % (g.get("data-name"), len(pts), len(js["x"]))); bad += 1
    for t, ys in js["time_s"].items():
        if any(y2 < y1 * (1 - 1e-9) for y1, y2 in zip(ys, ys[1:])):
            print("  %s: time falls as %s grows: %s" % (t, name, ys)); bad += 1
    if name == "nodes" and js["x"][:4] != [2, 4, 8, 16]:
        print("  node sweep", js["x"]); bad += 1
sys.exit(1 if bad else 0)
EOF
}
check model/svg t_svg

# calibrate from given result files: a make bench JSON, a bench-nccl JSON
# and gpu_bw's line; then without the NCCL file its value and source stay.
t_calibrate() {
	local d=$CHECK_DIR cal=$TOP/tools/model/calibration.json
	cp "$cal" "$d/cal.json" || return 1
	cat >"$d/bench.json" <<'EOF'
{"schema": 1, "settings": {"start": "2031-02-03T04:05:06Z"},
 "machine": {"cores": 2, "cpu_model": "Test CPU", "kernel": "6.1.0"},
 "summary": {"lo": {"iperf3_tcp": 21.5, "ib_write_bw_64k": 12.25,
   "cpu_s_per_gb": {"iperf3 TCP": 0.45, "ib_write_bw 64KiB": 1.5},
   "lat_us": {"sockperf_tcp": {"14": {"typical": 26.5}}, "ib_write_lat": {"2": {"typical": 19.5}}}}}}
EOF
	echo '{"date": "2031-02-04", "machine": "gpu-box", "results": [{"size": 1024, "busbw": 0.5}, {"size": 268435456, "busbw": 2.25}]}' >"$d/nccl.json"
	printf 'table...\n{"msg":4194304,"gpu_gpu_gbps":16.5,"htod_ceiling_gbps":440.0,"dtoh_ceiling_gbps":432.0}\n' >"$d/gpu.out"
	"$UROCE" model calibrate --calibration "$d/cal.json" --bench "$d/bench.json" --nccl "$d/nccl.json" \
		--gpu-json "$d/gpu.out" --no-run --date 2031-02-05 --machine test-host >"$d/cal1.out" 2>&1 || {
		cat "$d/cal1.out"; return 1; }
	cat "$d/cal1.out"
	cp "$d/cal.json" "$d/cal-after1.json"
	# the NCCL file gone: nccl.busbw_gbs keeps 2.25 and its source
	"$UROCE" model calibrate --calibration "$d/cal.json" --bench "$d/bench.json" --nccl "$d/none.json" \
		--no-run --date 2031-03-01 >"$d/cal2.out" 2>&1 || { cat "$d/cal2.out"; return 1; }
	cat "$d/cal2.out"
	log_has cal2.out 'nccl.busbw_gbs stays 2.25' || return 1
	# --dry-run writes nothing
	cp "$d/cal.json" "$d/cal-before3.json"
	"$UROCE" model calibrate --calibration "$d/cal.json" --bench "$d/bench.json" --no-run --dry-run \
		--date 2032-01-01 >"$d/cal3.out" 2>&1 || return 1
	cmp -s "$d/cal.json" "$d/cal-before3.json" || { echo "--dry-run changed the file"; return 1; }
	"$PY" - "$d" "$cal" <<'EOF'
import json, sys
d, orig = sys.argv[1], json.load(open(sys.argv[2]))
a1 = json.load(open(d + "/cal-after1.json"))
a2 = json.load(open(d + "/cal.json"))
bad = []
def expect(doc, table, key, value, date=None, machine=None, cmd=None):
    e = doc[table][key]
    if abs(e["value"] - value) > 1e-9 * max(1, abs(value)):
        bad.append("%s: %r, want %r" % (key, e["value"], value))
    if date and e["source"]["date"] != date:
        bad.append("%s: date %r, want %r" % (key, e["source"]["date"], date))
    if machine and machine not in e["source"]["machine"]:
        bad.append("%s: machine %r, want %r" % (key, e["source"]["machine"], machine))
    if cmd and cmd not in e["source"]["command"]:
        bad.append("%s: command %r, want %r in it" % (key, e["source"]["command"], cmd))
expect(a1, "measured", "host.tcp_gbps", 21.5, "2031-02-03", "Test CPU", "make bench")
expect(a1, "measured", "host.tcp_cpu_s_per_gb", 0.45, "2031-02-03")
expect(a1, "measured", "host.tcp_half_rtt_us", 26.5, "2031-02-03")
expect(a1, "measured", "host.uroce_write_gbps", 12.25, "2031-02-03")
expect(a1, "measured", "host.uroce_cpu_s_per_gb", 1.5)
expect(a1, "measured", "host.uroce_write_lat_us", 19.5)
expect(a1, "measured", "nccl.busbw_gbs", 2.25, "2031-02-04", "gpu-box", "make bench-nccl")
expect(a1, "measured", "gpu.h2d_pinned_gbs", 55.0, "2031-02-05", "test-host", "gpu_bw")
expect(a1, "measured", "gpu.d2h_pinned_gbs", 54.0)
expect(a1, "measured", "gpu.uroce_gpu_write_gbps", 16.5)
# params follow their measurements, with the measurement's source
expect(a1, "params", "tcp.cpu_s_per_gb", 0.45, "2031-02-03", cmd="iperf3")
expect(a1, "params", "tcp.alpha_us", 26.5, "2031-02-03")
expect(a1, "params", "gpu.h2d_gbs", 55.0, "2031-02-05")
expect(a1, "params", "gpu.d2h_gbs", 54.0, "2031-02-05")
# what was not measured keeps its value and source
for key in ("tcp.eff", "roce.eff", "gdr.eff", "roce.alpha_us", "node.host_mem_gbs"):
    if a1["params"][key] != orig["params"][key]:
        bad.append("%s changed: %r" % (key, a1["params"][key]))
if a1["measured"]["gpu.copy_64b_us"] != orig["measured"]["gpu.copy_64b_us"]:
    bad.append("gpu.copy_64b_us changed")
# second run: the NCCL value and its source stay as the first run left them
if a2["measured"]["nccl.busbw_gbs"] != a1["measured"]["nccl.busbw_gbs"]:
    bad.append("nccl.busbw_gbs changed without a file: %r" % a2["measured"]["nccl.busbw_gbs"])
if a2["updated"] != "2031-03-01":
    bad.append("updated %r" % a2["updated"])
for b in bad:
    print("FAIL:", b)
print("%d problems" % len(bad))
sys.exit(1 if bad else 0)
EOF
	# the model reads the refreshed file
	timeout 10 "${M[@]}" --calibration "$d/cal.json" --transport tcp --json >"$d/m.json" || return 1
	"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d["calibration"]["params"]["tcp.cpu_s_per_gb"]["value"]; print("tcp.cpu_s_per_gb", v); sys.exit(v != 0.45)' "$d/m.json"
}
check model/calibrate-from-files t_calibrate

finish
