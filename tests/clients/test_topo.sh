#!/usr/bin/env bash
# shellcheck disable=SC2317,SC2031  # the t_* functions run through check() in lib.sh
# uroce topo on the recorded hwloc topologies in tests/topo/*.xml (real
# machines from hwloc's test suite) and on this machine:
#   topo/json/<xml>      --json is valid JSON with the expected GPU/NIC counts
#   topo/hwloc/<xml>     every matrix cell agrees with a classification
#                        computed from hwloc's own tool (hwloc-info --ancestors)
#   topo/dgx2            DGX-2: GPUs behind one PLX switch PIX, across switches
#                        PXB, across host bridges NODE, across sockets SYS
#   topo/gdr/<xml>       GPUDirect verdicts and best NIC on the two HCA machines
#   topo/svg/<xml>       --svg writes well-formed SVG with one path per GPU
#   topo/live, topo/live-json, topo/nvml   this machine, NVML present or not
#   topo/usage           bad arguments exit 2, a missing file exits 1
# Last line: "N passed, N failed, N skipped".

# shellcheck source=tests/clients/lib.sh
. "$(dirname "$0")/lib.sh"
lib_init "$@"
need_build

XML=$TOP/tests/topo

# json_get FILE PYEXPR: evaluate PYEXPR with j = the parsed JSON in FILE.
json_get() {
	python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

t_json() { # XML NGPU NNIC
	have_tools python3 || return 77
	"$UROCE" topo --input "$XML/$1" --json >"$CHECK_DIR/out.json" || return 1
	local got
	got=$(json_get "$CHECK_DIR/out.json" "'%d %d' % (len(j['gpus']), len(j['nics']))") || return 1
	echo "gpus nics: $got (want $2 $3)"
	[ "$got" = "$2 $3" ]
}

# Expected class of every pair from `hwloc-info --ancestors`: the nearest
# common ancestor by gp index; below a switch (a bridge deeper than the
# root port) count switches, pairing upstream and downstream ports;
# a root port or host bridge is PHB; else the same NUMA nodeset is NODE.
CROSS_PY='
import json, subprocess, sys
xml, out = sys.argv[1], sys.argv[2]
j = json.load(open(out))
devs = j["gpus"] + j["nics"]
def chain(d):
    # A NIC by its OS device: bus ids are not unique in every recording.
    names = d.get("rdma", []) + d.get("netdevs", [])
    loc = "os=" + names[0] if names else "pci=" + d["busid"]
    txt = subprocess.run(["hwloc-info", "--input", xml, "--whole-io", "--ancestors", loc],
                         capture_output=True, text=True, check=True).stdout
    objs, cur = [], None
    for line in txt.splitlines():
        if not line.startswith(" "):
            cur = {"head": line}; objs.append(cur)
        elif " = " in line:
            k, _, v = line.strip().partition(" ="); cur[k] = v.strip()
    return objs[1:] if names else objs   # the PCI device first, the root last
def is_pcibridge(o): return o.get("full type") == "PCIBridge"
def sw(ch, i):                        # switch id of bridge ch[i], None for a root port
    d = 0
    while is_pcibridge(ch[i + 1 + d]): d += 1
    if d == 0: return None
    return ch[i]["gp index"] if d % 2 else ch[i + 1]["gp index"]
def nodeset(ch):
    for o in ch:
        if "nodeset" in o: return o["nodeset"]
def klass(a, b):
    ca, cb = chain(a), chain(b)
    ga = [o["gp index"] for o in ca]
    for ib, o in enumerate(cb):
        if o["gp index"] in ga: break
    ia = ga.index(o["gp index"])
    if is_pcibridge(o) and sw(ca, ia) is not None:
        s = set(sw(ca, i) for i in range(1, ia + 1)) | set(sw(cb, i) for i in range(1, ib + 1))
        return "PIX" if len(s) <= 1 else "PXB"
    if o["type"] in ("Bridge", "PCIDev"): return "PHB"
    return "NODE" if nodeset(ca) == nodeset(cb) else "SYS"
bad = 0
for r, da in enumerate(devs):
    for c, db in enumerate(devs):
        if r == c: continue
        want, got = klass(da, db), j["matrix"]["rows"][r][c]
        if want != got:
            print("%s %s - %s %s: uroce %s, hwloc-info %s" % (da["label"], da["busid"], db["label"], db["busid"], got, want))
            bad += 1
print("%d devices, %d pairs compared, %d mismatches" % (len(devs), len(devs) * (len(devs) - 1), bad))
sys.exit(1 if bad else 0)
'

t_hwloc() { # XML
	have_tools python3 hwloc-info || return 77
	"$UROCE" topo --input "$XML/$1" --json >"$CHECK_DIR/out.json" || return 1
	python3 -c "$CROSS_PY" "$XML/$1" "$CHECK_DIR/out.json"
}

# cell FILE A B: the matrix entry between labels A and B.
cell() {
	json_get "$1" "j['matrix']['rows'][j['matrix']['labels'].index('$2')][j['matrix']['labels'].index('$3')]"
}

t_dgx2() {
	have_tools python3 || return 77
	local f=$CHECK_DIR/out.json ok=0 pair want got
	"$UROCE" topo --input "$XML/nvidiaDGX2.xml" --json >"$f" || return 1
	for pair in GPU0:GPU1:PIX GPU2:GPU3:PIX GPU0:GPU2:PXB GPU1:GPU3:PXB GPU0:GPU4:NODE \
		GPU3:GPU7:NODE GPU0:GPU8:SYS GPU7:GPU15:SYS GPU8:GPU9:PIX GPU12:GPU15:PXB GPU5:GPU5:X; do
		IFS=: read -r a b want <<<"$pair"
		got=$(cell "$f" "$a" "$b")
		echo "$a-$b: $got (want $want)"
		[ "$got" = "$want" ] || ok=1
	done
	"$UROCE" topo --input "$XML/nvidiaDGX2.xml" >"$CHECK_DIR/out.txt" || return 1
	grep -q 'Tesla V100-SXM3-32GB-H' "$CHECK_DIR/out.txt" || { echo "GPU model missing"; ok=1; }
	return "$ok"
}

# gdr FILE GPU NIC: "verdict path" of one pair.
gdr() {
	json_get "$1" "[f\"{p['verdict']} {p['path']}\" for p in j['gpudirect'] if p['gpu'] == '$2' and p['nic'] == '$3'][0]"
}

t_gdr24() {
	have_tools python3 || return 77
	local f=$CHECK_DIR/out.json ok=0
	"$UROCE" topo --input "$XML/24em64t-2n6c2t-pci.xml" --json >"$f" || return 1
	# NIC2 is mlx4_0 (05:00.0) on socket 0; GPU0 (06:00.0) shares its host bridge.
	[ "$(json_get "$f" "j['nics'][2]['name']")" = mlx4_0 ] || { echo "NIC2 is not mlx4_0"; ok=1; }
	[ "$(gdr "$f" GPU0 NIC2)" = "no PHB" ] || { echo "GPU0-NIC2: $(gdr "$f" GPU0 NIC2)"; ok=1; }
	[ "$(gdr "$f" GPU1 NIC2)" = "no SYS" ] || { echo "GPU1-NIC2: $(gdr "$f" GPU1 NIC2)"; ok=1; }
	[ "$(gdr "$f" GPU0 NIC0)" = "no PHB" ] || { echo "GPU0-NIC0 (Ethernet only): $(gdr "$f" GPU0 NIC0)"; ok=1; }
	[ "$(json_get "$f" "[b['name'] for b in j['best_nic']]")" = "['mlx4_0', 'mlx4_0', 'mlx4_0']" ] ||
		{ echo "best NICs: $(json_get "$f" "j['best_nic']")"; ok=1; }
	return "$ok"
}

t_gdr32() {
	have_tools python3 || return 77
	local f=$CHECK_DIR/out.json ok=0
	"$UROCE" topo --input "$XML/32em64t-2n8c2t-pci-normalio.xml" --json >"$f" || return 1
	# mlx5_0 sits under root port 80:03.0 with GPU2 (84:00.0): PHB, not PIX.
	[ "$(json_get "$f" "j['nics'][2]['name']")" = mlx5_0 ] || { echo "NIC2 is not mlx5_0"; ok=1; }
	[ "$(gdr "$f" GPU2 NIC2)" = "no PHB" ] || { echo "GPU2-NIC2: $(gdr "$f" GPU2 NIC2)"; ok=1; }
	[ "$(gdr "$f" GPU0 NIC2)" = "no SYS" ] || { echo "GPU0-NIC2: $(gdr "$f" GPU0 NIC2)"; ok=1; }
	[ "$(json_get "$f" "j['gpus'][0]['numa_affinity']")" = 0 ] || ok=1
	[ "$(json_get "$f" "j['gpus'][1]['numa_affinity']")" = 1 ] || ok=1
	return "$ok"
}

t_svg() { # XML NPATHS
	have_tools python3 || return 77
	local f=$CHECK_DIR/out.svg n
	"$UROCE" topo --input "$XML/$1" --svg "$f" >/dev/null || return 1
	python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$f" || return 1
	n=$(grep -c '<polyline' "$f")
	echo "$n paths (want $2)"
	[ "$n" -eq "$2" ]
}

t_live() {
	"$UROCE" topo >"$CHECK_DIR/out.txt" || return 1
	cat "$CHECK_DIR/out.txt"
	grep -q '^Legend:' "$CHECK_DIR/out.txt" && grep -q '^CPUs: ' "$CHECK_DIR/out.txt"
}

t_live_json() {
	have_tools python3 || return 77
	"$UROCE" topo --json >"$CHECK_DIR/out.json" || return 1
	python3 -m json.tool "$CHECK_DIR/out.json" >/dev/null || return 1
	# uroce's loopback device is a soft device with no PCI NIC under it.
	json_get "$CHECK_DIR/out.json" "j['soft_devices']"
	[ "$(json_get "$CHECK_DIR/out.json" "'uroce_lo' in [s['name'] for s in j['soft_devices']]")" = True ]
}

# NVML is loaded at run time: without it topo says so, with it it counts GPUs.
t_nvml() {
	have_tools python3 || return 77
	local note
	"$UROCE" topo --json >"$CHECK_DIR/out.json" || return 1
	note=$(json_get "$CHECK_DIR/out.json" "j['nvlink']")
	echo "nvlink: $note"
	if python3 -c 'import ctypes; ctypes.CDLL("libnvidia-ml.so.1")' 2>/dev/null; then
		[[ $note == NVML:* ]] || [[ $note == nvmlInit* ]]
	else
		[[ $note == "NVML not available"* ]]
	fi
}

t_usage() {
	local rc
	"$UROCE" topo --bogus >/dev/null 2>&1; rc=$?
	echo "bad argument: exit $rc"; [ "$rc" -eq 2 ] || return 1
	"$UROCE" topo --input /nonexistent.xml >/dev/null 2>&1; rc=$?
	echo "missing file: exit $rc"; [ "$rc" -eq 1 ] || return 1
	"$UROCE" help topo | grep -q -- '--input FILE'
}

for x in 24em64t-2n6c2t-pci.xml:3:3 32em64t-2n8c2t-pci-normalio.xml:4:3 nvidiaDGX2.xml:16:0; do
	IFS=: read -r f g n <<<"$x"
	check "topo/json/$f" t_json "$f" "$g" "$n"
	check "topo/hwloc/$f" t_hwloc "$f"
done
check topo/dgx2 t_dgx2
check topo/gdr/24em64t t_gdr24
check topo/gdr/32em64t t_gdr32
check topo/svg/24em64t t_svg 24em64t-2n6c2t-pci.xml 3
check topo/svg/dgx2 t_svg nvidiaDGX2.xml 0
check topo/live t_live
check topo/live-json t_live_json
check topo/nvml t_nvml
check topo/usage t_usage
finish
