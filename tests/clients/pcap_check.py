#!/usr/bin/python3
"""Independent checks of a uroce capture (pcap of Ethernet/IPv4/UDP/RoCEv2).

    pcap_check.py [options] FILE...

For every frame of every FILE:
  * scapy: Ethernet type IPv4, IPv4 header checksum valid, UDP to port 4791
    with a valid checksum (or 0),
    the ICRC recomputed with scapy.contrib.roce (BTH.compute_icrc over the
    captured IP/UDP/BTH/payload) equals the captured one;
  * tshark: decodes it as InfiniBand (RRoCE) with the same opcode, PSN and
    destination QP as our own parser, and finds no malformed packet.
Per file and per flow (source address and port, destination QP):
  * request PSNs are consecutive (a READ request takes as many PSNs as its
    response packets), opcodes FIRST, MIDDLE..., LAST in order, FIRST and
    MIDDLE packets carry exactly the path MTU (--mtu), LAST/ONLY at most it;
  * READ response PSNs consecutive and FIRST/MIDDLE/LAST in order;
  * with --allow-rewind, PSNs may go back (a go-back-N resend, e.g. after
    an early retransmission timeout) but never skip; with --lossy they may
    also skip (a packet dropped by fault injection before the receiver's
    capture); opcode order restarts at each discontinuity.

Sequence checks are per file, since one process's file holds each packet
once; a merged file (uroce trace -w) holds most packets twice (sent and
received): pass --merged to check only the per-frame properties there.

--expect KEY=N / KEY>=N / KEY<=N check counts over all files; KEY is an
opcode name (RDMA_WRITE_FIRST, SEND_ONLY_WITH_IMMEDIATE, ACKNOWLEDGE, ...),
frames, ack, nak_seq, sack, rnr_nak, nak_other, imm, retrans.
--json prints the counts. Exit 0 when everything holds.
"""
import argparse
import json
import struct
import subprocess
import sys
from collections import Counter, defaultdict

try:
    from scapy.all import rdpcap, Ether, IP, UDP, raw, conf
    from scapy.contrib.roce import BTH
except Exception as e:  # pragma: no cover
    print("scapy with scapy.contrib.roce is needed (python3-scapy): %s" % e)
    sys.exit(77)

conf.verb = 0
# RoCEv2 is UDP destination port 4791 (IBA Annex A17), whatever the source
# port; uroce's is the QPN's low 16 bits, so any port: with 8472 scapy's
# VXLAN binding (on sport too) matched first and hid the BTH (CI,
# 2026-12-06). The 4791 binding goes first.
UDP.payload_guess.insert(0, ({"dport": 4791}, BTH))

# IBA table 38: RC opcodes (value: name, extension header bytes after BTH).
# RETH 16, AETH 4, AtomicETH 28, AtomicAckETH 8, ImmDt 4, IETH 4.
OPS = {
    0: ("SEND_FIRST", 0), 1: ("SEND_MIDDLE", 0), 2: ("SEND_LAST", 0),
    3: ("SEND_LAST_WITH_IMMEDIATE", 4), 4: ("SEND_ONLY", 0),
    5: ("SEND_ONLY_WITH_IMMEDIATE", 4),
    6: ("RDMA_WRITE_FIRST", 16), 7: ("RDMA_WRITE_MIDDLE", 0), 8: ("RDMA_WRITE_LAST", 0),
    9: ("RDMA_WRITE_LAST_WITH_IMMEDIATE", 4), 10: ("RDMA_WRITE_ONLY", 16),
    11: ("RDMA_WRITE_ONLY_WITH_IMMEDIATE", 20),
    12: ("RDMA_READ_REQUEST", 16),
    13: ("RDMA_READ_RESPONSE_FIRST", 4), 14: ("RDMA_READ_RESPONSE_MIDDLE", 0),
    15: ("RDMA_READ_RESPONSE_LAST", 4), 16: ("RDMA_READ_RESPONSE_ONLY", 4),
    17: ("ACKNOWLEDGE", 4), 18: ("ATOMIC_ACKNOWLEDGE", 12),
    19: ("COMPARE_SWAP", 28), 20: ("FETCH_ADD", 28),
    22: ("SEND_LAST_WITH_INVALIDATE", 4), 23: ("SEND_ONLY_WITH_INVALIDATE", 4),
    129: ("CNP", 0),
}
# UC (0x20 + the RC SEND and RDMA WRITE opcodes) and UD (SEND ONLY with a
# DETH of 8 bytes, 0x64/0x65), same table.
UC = 0x20
for _op in range(0, 12):
    OPS[UC + _op] = ("UC_" + OPS[_op][0], OPS[_op][1])
# XRC (0xa0 + every RC opcode); requests carry a 4-byte XRCETH first.
XRC = 0xa0
_RC_OPS = [k for k in OPS if k < UC]
for _op in _RC_OPS:
    OPS[XRC + _op] = ("XRC_" + OPS[_op][0], OPS[_op][1] + (4 if _op in
                      (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 19, 20, 22, 23) else 0))
OPS[0x64] = ("UD_SEND_ONLY", 8)
OPS[0x65] = ("UD_SEND_ONLY_WITH_IMMEDIATE", 12)
NAME2OP = {v[0]: k for k, v in OPS.items()}
_RC_REQ = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 19, 20, 22, 23}
REQUEST = _RC_REQ | set(range(UC, UC + 12)) | {0x64, 0x65} | {XRC + o for o in _RC_REQ}
READ_RESP = {13, 14, 15, 16, XRC + 13, XRC + 14, XRC + 15, XRC + 16}
# message position: F first, M middle, L last, O only
POS = {0: "F", 1: "M", 2: "L", 3: "L", 4: "O", 5: "O", 6: "F", 7: "M", 8: "L", 9: "L",
       10: "O", 11: "O", 12: "O", 19: "O", 20: "O", 22: "L", 23: "O",
       13: "F", 14: "M", 15: "L", 16: "O", 0x64: "O", 0x65: "O"}
KIND = {0: "S", 1: "S", 2: "S", 3: "S", 4: "S", 5: "S", 22: "S", 23: "S",
        6: "W", 7: "W", 8: "W", 9: "W", 10: "W", 11: "W", 13: "R", 14: "R", 15: "R", 16: "R",
        0x64: "S", 0x65: "S"}
for _op in range(0, 12):
    POS[UC + _op] = POS[_op]
    KIND[UC + _op] = KIND[_op]
for _op in _RC_OPS:
    if _op in POS:
        POS[XRC + _op] = POS[_op]
    if _op in KIND:
        KIND[XRC + _op] = KIND[_op]
IMM = {3, 5, 9, 11, UC + 3, UC + 5, UC + 9, UC + 11, 0x65, XRC + 3, XRC + 5, XRC + 9, XRC + 11}
# Nothing answers UC and UD packets: no AckReq needed on their last ones.
UNACKED = set(range(UC, UC + 12)) | {0x64, 0x65}


def psn_diff(a, b):
    d = (a - b) & 0xffffff
    return d - (1 << 24) if d & 0x800000 else d


def ip_csum_ok(hdr):
    s = 0
    for i in range(0, len(hdr), 2):
        s += (hdr[i] << 8) | hdr[i + 1]
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return s == 0xffff


class Checker:
    def __init__(self, args):
        self.seen = set()
        self.a = args
        self.errors = []
        self.counts = Counter()
        self.files = 0

    def err(self, msg):
        self.errors.append(msg)

    def tshark(self, path):
        cmd = ["tshark", "-n", "-r", path, "--disable-protocol", "rpcordma",
               "-d", "udp.port==4791,infiniband", "-T", "fields", "-E", "separator=\t",
               "-e", "frame.number", "-e", "udp.dstport", "-e", "infiniband.bth.opcode",
               "-e", "infiniband.bth.psn", "-e", "infiniband.bth.destqp",
               "-e", "_ws.malformed", "-e", "_ws.col.Protocol"]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except FileNotFoundError:
            return None
        if out.returncode != 0:
            self.err("%s: tshark failed: %s" % (path, out.stderr.strip()[-300:]))
            return {}
        rows = {}
        for line in out.stdout.splitlines():
            f = line.split("\t")
            if len(f) < 7 or not f[0].isdigit():
                continue
            rows[int(f[0])] = f
        return rows

    def check_file(self, path):
        self.files += 1
        try:
            pkts = rdpcap(path)
        except Exception as e:
            self.err("%s: cannot read: %s" % (path, e))
            return
        ts = self.tshark(path) if not self.a.no_tshark else None
        if ts is None and not self.a.no_tshark:
            self.err("tshark not installed")
        flows = defaultdict(list)
        last_t = None
        for i, p in enumerate(pkts, 1):
            where = "%s frame %d" % (path, i)
            self.counts["frames"] += 1
            if last_t is not None and float(p.time) < last_t - 1e-6:
                self.err("%s: timestamp goes back (%.6f < %.6f)" % (where, p.time, last_t))
            last_t = float(p.time)
            b = raw(p)
            if len(b) < 14 + 20 + 8 + 12 + 4 or b[12:14] != b"\x08\x00":
                self.err("%s: not Ethernet/IPv4 or too short" % where)
                continue
            ihl = (b[14] & 15) * 4
            iph = b[14:14 + ihl]
            if b[14] >> 4 != 4 or ihl != 20 or not ip_csum_ok(iph):
                self.err("%s: bad IPv4 header or checksum" % where)
            if struct.unpack("!H", iph[2:4])[0] != len(b) - 14:
                self.err("%s: IPv4 total length %d, frame carries %d" %
                         (where, struct.unpack("!H", iph[2:4])[0], len(b) - 14))
            if iph[9] != 17:
                self.err("%s: not UDP" % where)
                continue
            udp = b[34:42]
            sport, dport, ulen = struct.unpack("!HHH", udp[:6])
            if dport != 4791:
                self.err("%s: UDP destination port %d, not 4791" % (where, dport))
                continue
            ucs = struct.unpack("!H", udp[6:8])[0]
            if ucs:   # 0 = none (allowed by RoCEv2); else it must be right
                ps = iph[12:20] + b"\x00\x11" + struct.pack("!H", ulen) + b[34:40] + b"\x00\x00" + b[42:]
                if len(ps) % 2:
                    ps += b"\x00"
                t = sum(struct.unpack("!%dH" % (len(ps) // 2), ps))
                while t >> 16:
                    t = (t & 0xffff) + (t >> 16)
                t = (~t) & 0xffff or 0xffff
                if t != ucs:
                    self.err("%s: UDP checksum 0x%04x, should be 0x%04x" % (where, ucs, t))
                else:
                    self.counts["udp_csum_ok"] += 1
            if ulen != len(b) - 34:
                self.err("%s: UDP length %d, frame carries %d" % (where, ulen, len(b) - 34))
            if UDP not in p or BTH not in p:
                self.err("%s: scapy does not see a BTH" % where)
                continue
            bth = b[42:54]
            op = bth[0]
            pad = (bth[1] >> 4) & 3
            dqpn = int.from_bytes(bth[5:8], "big")
            ackreq = bth[8] >> 7
            psn = int.from_bytes(bth[9:12], "big")
            if (bth[1] & 15) != 0 or struct.unpack("!H", bth[2:4])[0] != 0xffff:
                self.err("%s: BTH version %d / P_Key 0x%x" % (where, bth[1] & 15,
                                                                struct.unpack("!H", bth[2:4])[0]))
            # ICRC: scapy's computation over the captured headers.
            want = p[BTH].compute_icrc(None)
            got = b[-4:]
            if want != got:
                self.err("%s: ICRC %s, scapy computes %s" % (where, got.hex(), want.hex()))
            else:
                self.counts["icrc_ok"] += 1
            if self.counts["frames"] == 1:
                self.selftest(p)
            if op not in OPS:
                self.err("%s: opcode %d is not an opcode uroce sends" % (where, op))
                continue
            name, ext = OPS[op]
            # Opcode counts are of distinct packets: a go-back-N resend of
            # the same PSN (allowed with --allow-rewind) is not a new one.
            uniq = (path, dqpn, psn, op)
            if uniq not in self.seen:
                self.seen.add(uniq)
                self.counts[name] += 1
                if op in IMM:
                    self.counts["imm"] += 1
            paylen = len(b) - 42 - 12 - ext - pad - 4
            if paylen < 0:
                self.err("%s: %s too short for its headers" % (where, name))
                continue
            info = {"op": op, "psn": psn, "pay": paylen, "where": where, "ackreq": ackreq}
            # UC and XRC packets as the RC ones they extend; an XRC
            # request's headers start after its XRCETH
            base = op - UC if UC <= op < UC + 12 else op - XRC if XRC <= op < XRC + 0x20 else op
            xo = 4 if XRC <= op < XRC + 0x20 and base in _RC_REQ else 0
            if xo:
                info["xrcsrq"] = int.from_bytes(b[55:58], "big")
                self.counts["xrceth"] += 1
            if op in (0x64, 0x65):
                # DETH: Q_Key, reserved, source QP (IBA 9.3.3)
                info["qkey"] = struct.unpack("!I", b[54:58])[0]
                info["srcqp"] = int.from_bytes(b[59:62], "big")
                self.counts["deth"] += 1
            if base in (6, 10, 11, 12) and op not in (0x64, 0x65):
                info["dmalen"] = struct.unpack("!I", b[54 + xo + 12:54 + xo + 16])[0]
            if base in (13, 15, 16, 17, 18) and op not in (0x64, 0x65):
                syn = b[54]
                info["syndrome"] = syn
                if base == 17:
                    t = syn >> 5
                    if t == 0:
                        self.counts["ack"] += 1
                    elif t == 1:
                        self.counts["rnr_nak"] += 1
                    elif t == 3 and (syn & 31) == 0:
                        self.counts["nak_seq"] += 1
                        # uroce's selective repeat: a SACK (docs/wire.md)
                        if (bth[8] >> 6) & 1:
                            self.counts["sack"] += 1
                    else:
                        self.counts["nak_other"] += 1
            if ts is not None:
                row = ts.get(i)
                if row is None:
                    self.err("%s: tshark did not list it" % where)
                else:
                    _, tport, top, tpsn, tqp, malformed, proto = row[:7]
                    if malformed:
                        self.err("%s: tshark: malformed packet" % where)
                    if not top:
                        self.err("%s: tshark does not decode it as InfiniBand (%s)" % (where, proto))
                    elif int(top) != op or int(tpsn) != psn or int(tqp, 0) != dqpn:
                        self.err("%s: tshark reads opcode %s PSN %s QP %s, we read %d %d 0x%x" %
                                 (where, top, tpsn, tqp, op, psn, dqpn))
                    else:
                        self.counts["tshark_ok"] += 1
            flows[(iph[12:16], sport, dqpn)].append(info)
        if not self.a.merged:
            for key, pk in flows.items():
                self.check_flow(path, key, pk)

    def selftest(self, p):
        """The ICRC check must be able to fail: flip one payload bit."""
        b = bytearray(raw(p))
        b[42 + 5] ^= 0x01   # a DestQP bit, covered by the ICRC
        q = Ether(bytes(b))
        if q[BTH].compute_icrc(None) == bytes(b[-4:]):
            self.err("self-test: a flipped DestQP bit still matches the ICRC")

    def check_flow(self, path, key, pk):
        lossy = self.a.lossy
        mtu = self.a.mtu
        src = "%s:%d->QP 0x%x" % (".".join(str(x) for x in key[0]), key[1], key[2])
        req = [x for x in pk if x["op"] in REQUEST]
        rsp = [x for x in pk if x["op"] in READ_RESP]
        for seq, is_req in ((req, True), (rsp, False)):
            expect = None
            state = None   # None: between messages; else (kind) inside one
            for x in seq:
                op, psn = x["op"], x["psn"]
                if expect is not None and psn != expect:
                    d = psn_diff(psn, expect)
                    if d < 0:
                        self.counts["retrans"] += 1
                    if not (lossy or (d < 0 and self.a.allow_rewind)):
                        self.err("%s: %s: PSN 0x%x after expecting 0x%x (%s)" %
                                 (x["where"], src, psn, expect, "went back" if d < 0 else "gap"))
                    state = "?"
                pos, kind = POS.get(op), KIND.get(op, "A")
                if state == "?":
                    state = kind if pos in "FM" else None
                elif pos in "FO":
                    if state is not None:
                        self.err("%s: %s: %s while a message is open" % (x["where"], src, OPS[op][0]))
                    state = kind if pos == "F" else None
                else:
                    if state != kind:
                        self.err("%s: %s: %s without a FIRST" % (x["where"], src, OPS[op][0]))
                    state = kind if pos == "M" else None
                rop = op - XRC if XRC <= op < XRC + 0x20 else op
                if mtu and rop not in (12, 19, 20):
                    if pos in "FM" and x["pay"] != mtu:
                        self.err("%s: %s: %s carries %d bytes, path MTU %d" %
                                 (x["where"], src, OPS[op][0], x["pay"], mtu))
                    if x["pay"] > mtu:
                        self.err("%s: %s: %s carries %d bytes > MTU %d" %
                                 (x["where"], src, OPS[op][0], x["pay"], mtu))
                n = 1
                if rop == 12:
                    if mtu:
                        n = max(1, -(-x["dmalen"] // mtu))
                    else:
                        n = None   # unknown MTU: any forward step
                expect = None if n is None else (psn + n) & 0xffffff
                if pos in "LO" and x is not None and is_req and not x["ackreq"] and \
                        op not in UNACKED:
                    self.err("%s: %s: last packet of a message without AckReq" % (x["where"], src))

    def expectations(self):
        for e in self.a.expect:
            for opx in (">=", "<=", "="):
                if opx in e:
                    k, v = e.split(opx, 1)
                    break
            else:
                self.err("bad --expect %s" % e)
                continue
            have = self.counts.get(k, 0)
            v = int(v)
            ok = have >= v if opx == ">=" else have <= v if opx == "<=" else have == v
            if not ok:
                self.err("expected %s %s %d, found %d" % (k, opx, v, have))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--mtu", type=int, default=0, help="path MTU: FIRST/MIDDLE payload size")
    ap.add_argument("--lossy", action="store_true", help="allow PSN rewinds and gaps")
    ap.add_argument("--allow-rewind", action="store_true",
                    help="allow PSN rewinds (go-back-N resends) but no gaps")
    ap.add_argument("--merged", action="store_true", help="no per-flow sequence checks")
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    c = Checker(a)
    for f in a.files:
        c.check_file(f)
    c.expectations()
    if c.counts["frames"] == 0:
        c.err("no frames")
    if a.json:
        print(json.dumps(dict(c.counts), sort_keys=True))
    else:
        print("pcap_check: %d files, %s" % (c.files, ", ".join(
            "%s=%d" % kv for kv in sorted(c.counts.items()))))
    for e in c.errors[:40]:
        print("pcap_check: " + e)
    if len(c.errors) > 40:
        print("pcap_check: ... %d more" % (len(c.errors) - 40))
    print("pcap_check: %s" % ("OK" if not c.errors else "%d problems" % len(c.errors)))
    sys.exit(1 if c.errors else 0)


if __name__ == "__main__":
    main()
