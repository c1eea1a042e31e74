#!/usr/bin/env bash
# uroce trace --html: the page of a trace, on loopback (UROCE_NETDEV=lo), no
# root:
#   - self-contained (no script, nothing fetched), one arrow per pkt_tx of
#     the trace, the seed's steps 1-6 once each, every mark with its trace
#     line as a <title>; retransmissions and NAKs (injected loss, RNR) red;
#     GPU staging copies as spans (a trace with kind=cuda lines);
#   - with --explain and with -- CMD (perftest);
#   - in a real browser: Debian's chromium, headless, loads the page, its DOM
#     has one element per packet, and a screenshot is not blank. Without
#     chromium that check is skipped (a failure with CI=true).
#   tests/clients/test_trace_html.sh [REGEX]
. "$(dirname "$0")/lib.sh"
lib_init "$@"
need_build

PY=/usr/bin/python3

# PAGE_PY HTML TRACEDIR [want-rtx|want-nak|want-gpu ...]: the page against
# its trace, parsed with Python's html.parser.
PAGE_PY='
import glob, os, re, sys
from html.parser import HTMLParser
page, tdir, wants = sys.argv[1], sys.argv[2], set(sys.argv[3:])
lines = []
for f in sorted(glob.glob(os.path.join(tdir, "trace.*"))):
    if not f.endswith(".all"):
        lines += [l.rstrip("\n") for l in open(f) if l.strip()]
tx = [l for l in lines if l.split()[4:5] == ["pkt_tx"]]
class P(HTMLParser):
    def __init__(s):
        super().__init__(); s.els = []; s.stack = []; s.titles = []; s.intitle = False
    def handle_starttag(s, tag, a):
        a = dict(a); s.els.append((tag, a))
        if tag == "title": s.intitle = True; s.titles.append("")
    def handle_endtag(s, tag):
        if tag == "title": s.intitle = False
    def handle_data(s, data):
        if s.intitle: s.titles[-1] += data
p = P(); text = open(page, encoding="utf-8").read(); p.feed(text)
bad = []
pk = [a for t, a in p.els if "data-pkt" in a]
print("trace: %d lines, %d pkt_tx; page: %d packet arrows, %d elements" % (len(lines), len(tx), len(pk), len(p.els)))
if len(pk) != len(tx):
    bad.append("%d packet elements for %d pkt_tx lines" % (len(pk), len(tx)))
# each arrow is a different pkt_tx line: its title holds that line
titles = "\n".join(p.titles)
missing = [l for l in tx if l not in titles]
if missing:
    bad.append("%d pkt_tx lines in no title, e.g. %s" % (len(missing), missing[0]))
nolines = [l for l in lines if l not in titles]
if nolines:
    bad.append("%d trace lines behind no mark, e.g. %s" % (len(nolines), nolines[0]))
steps = sorted(a["data-step"] for t, a in p.els if "data-step" in a)
if steps != ["1", "2", "3", "4", "5", "6"]:
    bad.append("steps %s, want 1..6 once each" % steps)
lanes = [a for t, a in p.els if a.get("class") == "lane"]
if len(lanes) != 7:
    bad.append("%d lanes" % len(lanes))
# self-contained: no scripts, no external references
for t, a in p.els:
    if t in ("script", "iframe", "img", "link") and not (t == "link" and a.get("href", "").startswith("data:")):
        bad.append("element <%s %s>" % (t, a))
    for k in ("src", "href"):
        v = a.get(k, "")
        if v and not v.startswith(("#", "data:")):
            bad.append("%s=%s" % (k, v))
if re.search(r"url\((?!#)", text) or "@import" in text:
    bad.append("a CSS url() or @import")
# retransmissions: a pkt_tx of a (pid, qpn, psn, op) sent before; red and dashed
seen, rtx = set(), 0
for l in tx:
    f = l.split(); kv = dict(x.split("=", 1) for x in f[5:] if "=" in x)
    key = (f[1], kv.get("qpn"), kv.get("psn"), kv.get("op"))
    if key in seen and not kv.get("op", "").startswith(("ACK", "ATOMIC_ACK")):
        rtx += 1
    seen.add(key)
prtx = [a for a in pk if "rtx" in a.get("class", "").split()]
print("retransmissions: %d in the trace, %d drawn" % (rtx, len(prtx)))
if len(prtx) != rtx:
    bad.append("%d rtx arrows for %d retransmitted packets" % (len(prtx), rtx))
naks = [a for a in pk if set(a.get("class", "").split()) & {"nak", "rnr"}]
nak_lines = sum(1 for l in lines if l.split()[4:5] in (["nak_rx"], ["rnr_rx"]))
print("NAKs: %d nak_rx/rnr_rx lines, %d NAK arrows" % (nak_lines, len(naks)))
if "want-rtx" in wants and not rtx:
    bad.append("no retransmission in this trace")
if "want-nak" in wants and not naks:
    bad.append("no NAK drawn")
if len(naks) > nak_lines:
    bad.append("more NAK arrows than NAKs received")
cuda = sum(1 for l in lines if "kind=cuda" in l and l.split()[4] in ("mem_read", "place"))
spans = [a for t, a in p.els if a.get("class") == "gpu-copy"]
print("GPU: %d kind=cuda lines, %d staging spans" % (cuda, len(spans)))
if len(spans) != cuda:
    bad.append("%d spans for %d kind=cuda lines" % (len(spans), cuda))
if "want-gpu" in wants and not cuda:
    bad.append("no GPU memory in this trace")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
'

t_builtin() {
	local d=$CHECK_DIR
	timeout -k 5 "$T_TIMEOUT" "$UROCE" trace --html "$d/page.html" --keep "$d/files" --size 16384 --mtu 1024 \
		>"$d/client.log" 2>&1 || { echo "uroce trace --html failed"; cat "$d/client.log"; return 1; }
	log_has client.log 'packets \(16 data, [0-9]+ ACK' || return 1
	"$PY" -c "$PAGE_PY" "$d/page.html" "$d/files"
}
check html/builtin-write t_builtin

# --explain and --html at once; then the same files again with --from.
t_explain() {
	local d=$CHECK_DIR
	timeout -k 5 "$T_TIMEOUT" "$UROCE" trace --explain --html "$d/page.html" --keep "$d/files" --op read \
		--size 8192 --mtu 4096 >"$d/explain.out" 2>"$d/client.log" || return 1
	log_has explain.out '\[7\] cqe' || return 1
	"$PY" -c "$PAGE_PY" "$d/page.html" "$d/files" || return 1
	"$UROCE" trace --html "$d/again.html" --from "$d/files" 2>>"$d/client.log" || return 1
	"$PY" -c "$PAGE_PY" "$d/again.html" "$d/files"
}
check html/explain-read t_explain

# Loss on receive in both processes: go-back-N resends, red and dashed.
t_loss() {
	local d=$CHECK_DIR
	UROCE_LOSS=0.1 UROCE_SEED=7 timeout -k 5 "$T_TIMEOUT" "$UROCE" trace --html "$d/page.html" --keep "$d/files" \
		--size 65536 --mtu 1024 >"$d/client.log" 2>&1 || { cat "$d/client.log"; return 1; }
	"$PY" -c "$PAGE_PY" "$d/page.html" "$d/files" want-rtx
}
check html/loss-retransmissions t_loss

# RNR: the responder posts its RECV late; the RNR NAKs are drawn as NAKs.
t_rnr() {
	local d=$CHECK_DIR
	timeout -k 5 "$T_TIMEOUT" "$UROCE" trace --html "$d/page.html" --keep "$d/files" --op send --rnr \
		--size 3000 --mtu 1024 >"$d/client.log" 2>&1 || { cat "$d/client.log"; return 1; }
	"$PY" -c "$PAGE_PY" "$d/page.html" "$d/files" want-nak want-rtx
}
check html/rnr-nak t_rnr

# GPU memory: no GPU here, so a real trace turned into one of GPU buffers
# (the lines the engine writes for device memory: mem_read dev=... kind=cuda
# staged=1, place ... kind=cuda), rendered with --from.
t_gpu() {
	local d=$CHECK_DIR f
	timeout -k 5 "$T_TIMEOUT" "$UROCE" trace --html "$d/host.html" --keep "$d/host" --size 8192 --mtu 4096 \
		>"$d/client.log" 2>&1 || return 1
	mkdir -p "$d/gpu"
	for f in "$d"/host/trace.*; do
		sed -E -e 's/ mem_read qpn=(0x[0-9a-f]+) addr=(0x[0-9a-f]+) len=([0-9]+) .*/ mem_read qpn=\1 dev=0x7f0000000000 len=\3 kind=cuda staged=1/' \
			-e 's/( place .*)kind=host/\1kind=cuda/' "$f" >"$d/gpu/$(basename "$f")"
	done
	grep -h 'kind=cuda' "$d"/gpu/trace.*
	"$UROCE" trace --html "$d/gpu.html" --from "$d/gpu" 2>>"$d/client.log" || return 1
	grep -q 'host + GPU' "$d/gpu.html" || { echo "no GPU memory lane"; return 1; }
	"$PY" -c "$PAGE_PY" "$d/gpu.html" "$d/gpu" want-gpu
}
check html/gpu-staging t_gpu

# -- CMD: perftest's transfer, with --explain too.
t_cmd() {
	have_tools ib_write_bw || return 77
	local port d=$CHECK_DIR
	port=$(free_port) || return 1
	timeout -k 5 "$T_TIMEOUT" "$UROCE" trace --explain --html "$d/page.html" --keep "$d/files" -- bash -c "
		ib_write_bw -x 0 -F -p $port -s 8192 -n 5 >/dev/null & s=\$!
		for i in \$(seq 100); do ss -Hltn 'sport = :$port' | grep -q . && break; sleep 0.1; done
		ib_write_bw -x 0 -F -p $port -s 8192 -n 5 127.0.0.1 >/dev/null; c=\$?
		wait \$s && exit \$c" >"$d/explain.out" 2>"$d/client.log" || { cat "$d/client.log"; return 1; }
	log_has explain.out '\[4\] pkt_tx' || return 1
	grep -q 'uroce trace -- bash -c' "$d/page.html" || { echo "the command is not in the page"; return 1; }
	"$PY" -c "$PAGE_PY" "$d/page.html" "$d/files"
}
check html/cmd-perftest t_cmd

# A real browser: the DOM Chromium builds has one element per packet, and
# its screenshot has more than a blank page's colours.
PNG_PY='
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat = 8, b""
while pos < len(data):
    n, typ = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if typ == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
    elif typ == b"IDAT":
        idat += body
    pos += 12 + n
assert depth == 8 and ctype in (2, 6), "PNG type %d/%d" % (depth, ctype)
bpp = 3 if ctype == 2 else 4
raw, stride = zlib.decompress(idat), w * bpp
prev, out, i = bytearray(stride), [], 0
for y in range(h):
    ft, line = raw[i], bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
        if ft == 1: line[x] = (line[x] + a) & 255
        elif ft == 2: line[x] = (line[x] + b) & 255
        elif ft == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif ft == 4:
            pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    out.append(bytes(line)); prev = line
colours, white = set(), 0
for row in out:
    for x in range(0, stride, bpp):
        px = row[x:x + 3]; colours.add(px); white += px == b"\xff\xff\xff"
total = w * h
red = sum(1 for c in colours if c[0] > 180 and c[1] < 90 and c[2] < 90)
print("screenshot %dx%d: %d colours, %.1f%% white, %d reddish colours" % (w, h, len(colours), 100.0 * white / total, red))
sys.exit(0 if len(colours) >= 50 and white < 0.97 * total and red > 0 else 1)
'

t_browser() {
	local d=$CHECK_DIR chrome n_tx n_dom
	chrome=$(command -v chromium || command -v chromium-browser) ||
		{ echo "chromium not installed (scripts/deps.sh test)"; return 77; }
	timeout -k 5 "$T_TIMEOUT" "$UROCE" trace --html "$d/page.html" --keep "$d/files" --size 16384 --mtu 1024 \
		>"$d/client.log" 2>&1 || return 1
	local -a flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
		--disable-background-networking --disable-component-update --disable-sync
		--user-data-dir="$d/profile")
	timeout -k 5 120 "$chrome" "${flags[@]}" --dump-dom "file://$d/page.html" >"$d/dom.html" 2>"$d/chrome.log" ||
		{ echo "chromium --dump-dom failed"; tail -5 "$d/chrome.log"; return 1; }
	n_tx=$(cat "$d"/files/trace.* | awk '$5 == "pkt_tx"' | wc -l)
	n_dom=$(grep -o 'data-pkt="[0-9]*"' "$d/dom.html" | wc -l)
	echo "pkt_tx lines $n_tx, packet elements in Chromium's DOM $n_dom"
	[ "$n_tx" -gt 0 ] && [ "$n_dom" -eq "$n_tx" ] || return 1
	grep -q '<svg' "$d/dom.html" || { echo "no <svg> in the DOM"; return 1; }
	timeout -k 5 120 "$chrome" "${flags[@]}" --hide-scrollbars --window-size=1160,900 \
		--screenshot="$d/shot.png" "file://$d/page.html" >>"$d/chrome.log" 2>&1 ||
		{ echo "chromium --screenshot failed"; tail -5 "$d/chrome.log"; return 1; }
	"$PY" -c "$PNG_PY" "$d/shot.png"
}
check html/chromium t_browser

finish
