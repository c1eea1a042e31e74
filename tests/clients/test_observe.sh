#!/usr/bin/env bash
# Live counters (`uroce stat`) and the data-path trace (`uroce trace
# --explain`), on loopback (UROCE_NETDEV=lo), no root:
#   - counters of a transfer whose packet counts are known, read from the
#     running processes with `uroce stat --json`, equal to what the capture
#     shows; the stat files are gone once the processes exit;
#   - `uroce stat -i` refreshing while perftest runs (-D);
#   - the explanation of one RDMA WRITE has every step in order, with
#     non-decreasing timestamps, on the right processes and threads.
#   tests/clients/test_observe.sh [REGEX]
. "$(dirname "$0")/lib.sh"
lib_init "$@"
need_build

PY=/usr/bin/python3
PCHK=("$PY" "$LIB_DIR/pcap_check.py")

# N WRITEs of S bytes at MTU M: the requester sends N*ceil(S/M) packets,
# of N*(S + 12*ceil(S/M) + 16 + 4*ceil(S/M)) UDP payload bytes (BTH 12,
# one RETH 16 per message, ICRC 4; no padding when S is a multiple of 4).
N=10 S=65536 M=1024
PKTS=$((N * ((S + M - 1) / M)))
BYTES=$((N * (S + 16 * ((S + M - 1) / M) + 16)))

t_stat_known() {
	have_tools tshark || return 77
	"$PY" -c 'import scapy.contrib.roce' 2>/dev/null || { echo "python3-scapy not installed"; return 77; }
	local d=$CHECK_DIR pid req resp i
	timeout -k 5 "$T_TIMEOUT" "$UROCE" trace -w "$d/xfer.pcap" --keep "$d" \
		--size "$S" --mtu "$M" --count "$N" --hold 3000 >"$d/client.log" 2>&1 &
	pid=$!
	echo "$pid" >>"$LOGDIR/pids"
	for ((i = 0; i < 100; i++)); do
		grep -q 'requester pid' "$d/client.log" && break
		sleep 0.05
	done
	req=$(sed -nE 's/.*requester pid ([0-9]+).*/\1/p' "$d/client.log")
	resp=$(sed -nE 's/.*responder pid ([0-9]+).*/\1/p' "$d/client.log")
	[ -n "$req" ] && [ -n "$resp" ] || { echo "no pids in the output"; cat "$d/client.log"; return 1; }
	echo "requester pid $req, responder pid $resp; expecting $PKTS packets, $BYTES bytes"
	# Read both live until the requester's transfer is complete.
	for ((i = 0; i < 40; i++)); do
		"$UROCE" stat --json >"$d/stat.json"
		"$PY" - "$d/stat.json" "$req" "$resp" "$PKTS" <<'EOF' && break
import json, sys
d = json.load(open(sys.argv[1]))
p = {x["pid"]: x for x in d["processes"]}
req, resp, pk = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sys.exit(0 if req in p and resp in p and p[req]["counters"]["acks_rcvd"] > 0 and
         p[req]["counters"]["tx_pkts"] >= pk else 1)
EOF
		sleep 0.05
	done
	kill -0 "$req" 2>/dev/null || { echo "requester $req exited before its counters could be read"; return 1; }
	"$UROCE" stat "$req" >"$d/stat-req.out"
	cat "$d/stat-req.out"
	log_has stat-req.out "^uroce_lo pid $req " "text header" || return 1
	log_has stat-req.out "^ +tx_pkts +$PKTS " "tx_pkts in text" || return 1
	wait "$pid" || { echo "uroce trace failed"; return 1; }
	# Gone after exit.
	for i in "$req" "$resp"; do
		if ls /dev/shm/uroce-"$i"-*.stat >/dev/null 2>&1; then
			echo "stat file of pid $i still there after it exited"; return 1
		fi
	done
	if "$UROCE" stat "$req" >/dev/null; then echo "uroce stat $req still finds it"; return 1; fi
	echo "stat files gone after exit"
	"${PCHK[@]}" --json --mtu "$M" "$d/cap.$req" | head -1 >"$d/cap-req.json" || return 1
	"${PCHK[@]}" --json --mtu "$M" "$d/cap.$resp" | head -1 >"$d/cap-resp.json" || return 1
	"$PY" - "$d/stat.json" "$req" "$resp" "$PKTS" "$BYTES" "$d/cap-req.json" "$d/cap-resp.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
p = {x["pid"]: x["counters"] for x in d["processes"]}
req, resp, pk, by = (int(x) for x in sys.argv[2:6])
cq, cr = json.load(open(sys.argv[6])), json.load(open(sys.argv[7]))
q, r = p[req], p[resp]
wr = lambda c: sum(v for k, v in c.items() if k.startswith("RDMA_WRITE_"))
checks = [
    ("requester tx_pkts", q["tx_pkts"], pk),
    ("requester tx_bytes", q["tx_bytes"], by),
    ("responder rx_pkts", r["rx_pkts"], pk),
    ("responder rx_bytes", r["rx_bytes"], by),
    ("WRITE packets in the requester's capture", wr(cq), pk),
    ("WRITE packets in the responder's capture", wr(cr), pk),
    ("responder tx_pkts = ACKs it sent", r["tx_pkts"], r["acks_sent"]),
    ("requester rx_pkts = responder tx_pkts", q["rx_pkts"], r["tx_pkts"]),
    ("requester acks_rcvd = responder acks_sent", q["acks_rcvd"], r["acks_sent"]),
    ("ACKs in the requester's capture", cq.get("ACKNOWLEDGE", 0), q["rx_pkts"]),
    ("ACKs in the responder's capture", cr.get("ACKNOWLEDGE", 0), r["tx_pkts"]),
    ("frames in the requester's capture", cq["frames"], q["tx_pkts"] + q["rx_pkts"]),
    ("retransmitted", q["retrans_pkts"], 0),
    ("ICRC errors", q["icrc_errors"] + r["icrc_errors"], 0),
    ("sequence NAKs", q["seq_naks_rcvd"] + r["seq_naks_sent"], 0),
]
bad = 0
for what, have, want in checks:
    print("%-45s %10d %s %d" % (what, have, "==" if have == want else "!=", want))
    bad += have != want
if not 1 <= r["acks_sent"] <= pk:
    print("ACK count %d out of range" % r["acks_sent"]); bad += 1
sys.exit(1 if bad else 0)
EOF
}
check stat/known-transfer t_stat_known

# uroce stat -i while perftest runs for 2 s: counters grow, rates shown.
t_stat_interval() {
	have_tools ib_write_bw || return 77
	local port pid cpid i
	port=$(free_port) || return 1
	start_bg lo "$CHECK_DIR/server.log" ib_write_bw -x 0 -F -p "$port" -D 2 -s 4096
	pid=$BG_PID
	wait_listen lo "$port" "$pid" "$LISTEN_WAIT" || return 1
	start_bg lo "$CHECK_DIR/client.log" ib_write_bw -x 0 -F -p "$port" -D 2 -s 4096 127.0.0.1
	for ((i = 0; i < 50; i++)); do
		cpid=$(pgrep -f "^ib_write_bw -x 0 -F -p $port -D 2 -s 4096 127.0.0.1" | head -1)
		# perftest opens the device more than once: wait for the context
		# with the QP (uroce stat -i keeps the sources of its first scan)
		[ -n "$cpid" ] && "$UROCE" stat --json "$cpid" 2>/dev/null | grep -q '"qps":[1-9]' && break
		sleep 0.1
	done
	[ -n "$cpid" ] || { echo "client process not found"; return 1; }
	echo "client pid $cpid"
	"$UROCE" stat --json -i 0.3 -n 3 "$cpid" >"$CHECK_DIR/stat.out"
	wait "$BG_PID" || return 1
	wait "$pid" || return 1
	"$PY" - "$CHECK_DIR/stat.out" <<'EOF'
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
tx = [d["processes"][0]["counters"]["tx_pkts"] for d in docs if d["processes"]]
rates = [d["processes"][0].get("rates_per_s", {}).get("tx_pkts", 0) for d in docs[1:] if d["processes"]]
print("refreshes", len(docs), "tx_pkts", tx, "tx_pkts/s", rates)
ok = len(docs) == 3 and len(tx) == 3 and tx[0] < tx[1] < tx[2] and all(r > 0 for r in rates) and len(rates) == 2
sys.exit(0 if ok else 1)
EOF
}
check stat/interval-live t_stat_interval

# The explanation of one RDMA WRITE (the built-in transfer).
EXPLAIN_PY='
import json, sys
d = json.load(open(sys.argv[1]))
signaled = sys.argv[2] == "1"
mode = sys.argv[3] if len(sys.argv) > 3 else "app"  # UROCE_PROGRESS
st = d["steps"]
ev = [s for s in st if "event" in s]
names = [s["event"] for s in ev]
print(" ".join("%s@%.1f" % (s["event"], s["t_us"]) for s in ev))
bad = []
if not d["complete"]:
    bad.append("incomplete: missing %s" % d["missing"])
want = ["post_send", "wqe_take", "mem_read", "pkt_tx", "pkt_rx", "place", "ack_rx"]
if signaled:
    want += ["cqe", "poll_cq"]
i = 0
for n in names:
    if i < len(want) and n == want[i]:
        i += 1
if i < len(want):
    bad.append("steps out of order or missing: found %s, wanted %s in this order" % (names, want))
# Causal order, every step at or after the one before. The doorbell is
# left out: it runs on the app thread concurrently with the engine taking the WQE
# (its line is written after the eventfd write returns).
# The responder receives and places the first packets while the requester
# may still be sending the last ones (its window): those two streams are
# checked apart, and every packet is received after it was sent.
chain = [s for s in ev if s["event"] != "doorbell"]
sent = {}
for s in chain:
    if s["event"] == "pkt_tx" and s["side"] == "requester":
        sent[s["fields"].get("psn")] = s["ts_ns"]
for a, b in zip(chain, chain[1:]):
    if a["side"] == "requester" and b["side"] == "responder" and b["event"] in ("pkt_rx", "place"):
        continue
    if b["ts_ns"] < a["ts_ns"]:
        bad.append("time goes back from %s (%.1f us) to %s (%.1f us)" %
                   (a["event"], a["t_us"], b["event"], b["t_us"]))
for s in chain:
    if s["event"] == "pkt_rx" and s["side"] == "responder":
        t = sent.get(s["fields"].get("psn"))
        if t is None or s["ts_ns"] < t:
            bad.append("PSN %s received before it was sent" % s["fields"].get("psn"))
req, resp = d["requester"], d["responder"]
post = ev[0]
if post["role"] != "app" or post["pid"] != req["pid"]:
    bad.append("post not on the app thread of the requester")
# Transport work runs on the engine thread, or (UROCE_PROGRESS=app) on an
# application thread taking a turn of the idle engine; either way the trace
# must name the thread that did it.
for s in ev:
    if s["event"] in ("wqe_take", "mem_read", "pkt_tx", "ack_rx", "cqe") and s["side"] == "requester":
        if s["pid"] != req["pid"]:
            bad.append("%s not in the requester process" % s["event"])
        elif s["role"] == "engine" and s["tid"] == req["app_tid"]:
            bad.append("%s labelled engine on the application thread" % s["event"])
        elif s["role"] != "engine" and mode == "engine":
            bad.append("%s on an application thread with UROCE_PROGRESS=engine" % s["event"])
    if s["event"] in ("pkt_rx", "place") and s["side"] == "responder" and s["pid"] == req["pid"]:
        bad.append("%s on the requester pid" % s["event"])
mr = [s for s in ev if s["event"] == "mem_read"]
if mr and int(mr[0]["fields"]["addr"], 16) != int(post["fields"]["addr"], 16):
    bad.append("first memory read not at the posted buffer")
if mr and any(s["fields"].get("zero_copy") != "1" for s in mr):
    bad.append("a memory read without zero_copy=1")
if "responder_mr" in d:
    lo = int(d["responder_mr"]["addr"], 16); hi = lo + d["responder_mr"]["len"]
    for s in ev:
        if s["event"] == "place":
            a = int(s["fields"].get("addr", s["fields"].get("va", "0")), 16)
            if not lo <= a < hi:
                bad.append("placed at 0x%x outside the responder MR" % a)
places = [s for s in ev if s["event"] == "place"]
if places and any(s["pid"] != resp["pid"] for s in places):
    bad.append("a place not on the responder")
if signaled:
    pc = [s for s in ev if s["event"] == "poll_cq"]
    if not pc or pc[0]["fields"].get("syscall") != "0" or pc[0]["tid"] != req["app_tid"]:
        bad.append("poll_cq not on the app thread with syscall=0")
sc = d["syscalls"]["requester"]
print("requester syscalls:", sc)
if sc["poll_syscalls"] != 0 or sc["post_send"] < 1:
    bad.append("syscall counts wrong")
for b in bad:
    print("explain:", b)
sys.exit(1 if bad else 0)
'

t_explain_builtin() {
	local d=$CHECK_DIR
	timeout -k 5 "$T_TIMEOUT" "$UROCE" trace --explain --json --keep "$d/files" >"$d/explain.json" 2>"$d/client.log" ||
		{ echo "uroce trace --explain --json failed"; return 1; }
	"$PY" -c "$EXPLAIN_PY" "$d/explain.json" 1 || return 1
	# the engine thread alone does the transport with UROCE_PROGRESS=engine
	UROCE_PROGRESS=engine timeout -k 5 "$T_TIMEOUT" "$UROCE" trace --explain --json \
		>"$d/explain-engine.json" 2>>"$d/client.log" || { echo "explain (engine) failed"; return 1; }
	"$PY" -c "$EXPLAIN_PY" "$d/explain-engine.json" 1 engine || return 1
	# the merged trace is sorted by time
	awk 'NR > 1 && $1 < prev { bad = 1 } { prev = $1 } END { exit bad }' "$d/files/trace.all" ||
		{ echo "trace.all not in time order"; return 1; }
	# the text form names the seven steps and the three lessons
	timeout -k 5 "$T_TIMEOUT" "$UROCE" trace --explain --size 5000 --mtu 1024 >"$d/explain.out" 2>>"$d/client.log" ||
		return 1
	local n
	for n in 1 2 3 4 5 6 7; do log_has explain.out "\\[$n\\] " "step $n" || return 1; done
	log_has explain.out 'RDMA_WRITE_MIDDLE PSN' || return 1
	log_has explain.out '^kernel bypass: .* polled with 0 system calls' || return 1
	log_has explain.out 'zero copy' || return 1
	log_has explain.out '^(offload|progress): segmentation' || return 1
	UROCE_PROGRESS=engine timeout -k 5 "$T_TIMEOUT" "$UROCE" trace --explain >"$d/explain-engine.out" \
		2>>"$d/client.log" || return 1
	log_has explain-engine.out '^offload: .*never on the application thread' || return 1
}
check explain/write-builtin t_explain_builtin

# The same for a command: perftest's first WRITE (unsignaled: perftest
# signals every cq_mod-th WR).
t_explain_perftest() {
	have_tools ib_write_bw || return 77
	local port
	port=$(free_port) || return 1
	timeout -k 5 "$T_TIMEOUT" "$UROCE" trace --explain --json -- bash -c "
		ib_write_bw -x 0 -F -p $port -s 8192 -n 5 >/dev/null & s=\$!
		for i in \$(seq 100); do ss -Hltn 'sport = :$port' | grep -q . && break; sleep 0.1; done
		ib_write_bw -x 0 -F -p $port -s 8192 -n 5 127.0.0.1 >/dev/null; c=\$?
		wait \$s && exit \$c" >"$CHECK_DIR/explain.json" 2>"$CHECK_DIR/client.log" || return 1
	"$PY" -c "$EXPLAIN_PY" "$CHECK_DIR/explain.json" 0
}
check explain/perftest-write t_explain_perftest

finish
