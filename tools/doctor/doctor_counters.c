/* uroce doctor --counters: what the live counters of running uroce
 * processes mean. Each process's stat file (statfile.h) is read twice,
 * interval seconds apart; every check looks at the totals since the device
 * was opened and at the per-second rates in between, and explains them
 * with pass / warn / fail, the evidence and the fix, as the other checks. */
#include "cli.h"
#include "doctor.h"
#include "stat/statfile.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct cproc {
	struct statf_src s;     /* snap: the second read (the first if it exited) */
	int have_rate;          /* read twice: prev holds the first read */
	int gone;               /* exited between the reads */
	char tag[128];          /* "pid 12 (ib_write_bw) uroce_lo" */
	char faults[256];       /* UROCE_LOSS=0.05 ... from its environment */
};

struct cdoc {
	struct cproc p[STATF_MAX];
	int n;
	double dt;
};

/* Index of a counter in struct uroce_counters. */
#define CI(f) ((int)(offsetof(struct uroce_counters, f) / sizeof(uint64_t)))
#define END (-1)

static uint64_t tot(const struct cproc *p, int k)
{
	return ((const uint64_t *)&p->s.snap.cnt)[k];
}

static uint64_t dlt(const struct cproc *p, int k)
{
	return p->have_rate ? tot(p, k) - p->s.prev[k] : 0;
}

static double rate(const struct cdoc *cd, const struct cproc *p, int k)
{
	return p->have_rate && cd->dt > 0 ? (double)dlt(p, k) / cd->dt : 0;
}

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0;
}

static int busy(const struct cproc *p)
{
	return tot(p, CI(tx_pkts)) || tot(p, CI(rx_pkts));
}

/* "name V (R/s)" for each counter index up to END, after "tag: note". */
static void ev(struct doc_check *c, const struct cdoc *cd, const struct cproc *p,
	       const char *note, ...)
{
	char line[1024];
	size_t off;
	va_list ap;
	int k, first = 1;

	off = (size_t)snprintf(line, sizeof(line), "%s: %s%s", p->tag, note ? note : "",
			       note && note[0] ? " " : "");
	va_start(ap, note);
	while ((k = va_arg(ap, int)) != END && off < sizeof(line)) {
		if (p->have_rate)
			off += (size_t)snprintf(line + off, sizeof(line) - off, "%s%s %llu (%.1f/s)",
						first ? "" : ", ", statf_names[k],
						(unsigned long long)tot(p, k), rate(cd, p, k));
		else
			off += (size_t)snprintf(line + off, sizeof(line) - off, "%s%s %llu",
						first ? "" : ", ", statf_names[k],
						(unsigned long long)tot(p, k));
		first = 0;
	}
	va_end(ap);
	doc_add(c, "%s", line);
}

static int sum(const struct cproc *p, const int *ks)
{
	for (; *ks != END; ks++)
		if (tot(p, *ks))
			return 1;
	return 0;
}

/* "now" or "earlier" part of a summary: whether it went on between the reads. */
static int ongoing(const struct cdoc *cd, const int *ks)
{
	for (int i = 0; i < cd->n; i++)
		for (const int *k = ks; *k != END; k++)
			if (dlt(&cd->p[i], *k))
				return 1;
	return 0;
}

static const char *when(const struct cdoc *cd, const int *ks, char *buf, size_t len)
{
	snprintf(buf, len, ongoing(cd, ks) ? "still happening" : "none in the last %.1f s",
		 cd->dt);
	return buf;
}

static int nbusy(const struct cdoc *cd)
{
	int n = 0;

	for (int i = 0; i < cd->n; i++)
		n += busy(&cd->p[i]);
	return n;
}

/* ---- retrans: retransmissions and the drops behind them ---- */

static void check_retrans(struct cdoc *cd, struct doc_check *c)
{
	double worst = 0, worst_rt = 0;
	const char *fenv = NULL;
	int faults = 0, small = 0, rnr_only = 0;
	char fs[300] = "";

	for (int i = 0; i < cd->n; i++) {
		const struct cproc *p = &cd->p[i];
		uint64_t tx = tot(p, CI(tx_pkts)), rx = tot(p, CI(rx_pkts));
		uint64_t rt = tot(p, CI(retrans_pkts)), nk = tot(p, CI(seq_naks_sent));
		double r = pct(rt, tx), in = pct(nk, rx), now = pct(dlt(p, CI(retrans_pkts)),
								     dlt(p, CI(tx_pkts)));
		char note[160];

		if (!busy(p))
			continue;
		snprintf(note, sizeof(note), "%.2f%% of packets sent again;", r);
		if (p->have_rate && dlt(p, CI(tx_pkts)))
			snprintf(note, sizeof(note), "%.2f%% of packets sent again (%.2f%% in the last %.1f s);",
				 r, now, cd->dt);
		ev(c, cd, p, note, CI(retrans_pkts), CI(tx_pkts), CI(seq_naks_rcvd), CI(seq_naks_sent),
		   CI(implied_naks), END);
		if (rt && tot(p, CI(rnr_naks_rcvd)) && !tot(p, CI(seq_naks_rcvd)) &&
		    !tot(p, CI(timeouts)) && !tot(p, CI(implied_naks))) {
			/* Resent after RNR NAKs, with no sign of loss: not the path's. */
			doc_add(c, "%s: the packets were sent again after %llu RNR NAKs (the peer had no "
				   "RECV posted), with no sign of loss: see rnr", p->tag,
				(unsigned long long)tot(p, CI(rnr_naks_rcvd)));
			r = now = 0;
			rnr_only = 1;
		} else if (rt && tx < 1000) {
			doc_add(c, "%s: only %llu packets sent: too few to judge the ratio", p->tag,
				(unsigned long long)tx);
			small = 1;
		}
		if (r > worst_rt)
			worst_rt = r;
		if (now > worst_rt)
			worst_rt = now;
		if (worst_rt > worst)
			worst = worst_rt;
		if (in > worst)
			worst = in;
		if (nk)
			doc_add(c, "%s: seq_naks_sent: %.2f%% of received packets came after a gap in PSNs "
				   "(packets on the way in were lost)", p->tag, in);
		if (tot(p, CI(seq_naks_rcvd)))
			doc_add(c, "%s: seq_naks_rcvd: the peer saw gaps in this process's packets "
				   "(packets on the way out were lost); go-back-N resends from the gap",
				p->tag);
		if (tot(p, CI(sr_retrans_pkts)) || tot(p, CI(sr_placed_ahead)))
			doc_add(c, "%s: selective repeat: %llu packets resent selectively, %llu "
				   "placed ahead of a gap (UROCE_RETRANS=sr on the receiving side)",
				p->tag, (unsigned long long)tot(p, CI(sr_retrans_pkts)),
				(unsigned long long)tot(p, CI(sr_placed_ahead)));
		if (tot(p, CI(fault_dropped)) || p->faults[0]) {
			faults = 1;
			if (p->faults[0] && !fenv)
				fenv = p->faults;
			ev(c, cd, p, "fault injection is on:", CI(fault_dropped), END);
			if (p->faults[0])
				doc_add(c, "%s: its environment sets %s: these drops are injected on purpose, "
					   "not the network's", p->tag, p->faults);
			else
				doc_add(c, "%s: fault_dropped > 0: the drops are injected on purpose "
					   "(UROCE_LOSS), not the network's", p->tag);
		}
	}
	if (!nbusy(cd)) {
		doc_set(c, DOC_PASS, "no packets sent or received yet");
		return;
	}
	if (faults)
		snprintf(fs, sizeof(fs), "; fault injection is on (%s)", fenv ? fenv : "fault_dropped > 0");
	if (worst >= 0.1 && worst_rt >= worst)
		doc_set(c, worst >= 5 && !small ? DOC_FAIL : DOC_WARN,
			"%.2f%% of packets sent again: packets are lost and go-back-N resends the "
			"window after each loss%s", worst, fs);
	else if (worst >= 0.1)
		doc_set(c, worst >= 5 ? DOC_FAIL : DOC_WARN,
			"%.2f%% of received packets came after a gap (NAKed): packets are lost on "
			"the way in%s", worst, fs);
	else
		doc_set(c, DOC_PASS, "retransmissions below 0.1%% of packets sent%s%s",
			rnr_only ? " (besides resends after RNR NAKs: see rnr)" : "",
			faults ? " (fault injection is on)" : "");
	doc_fix(c, "%s", faults ?
		"fault injection is on: the loss is the test's (unset UROCE_LOSS, UROCE_DUP, "
		"UROCE_REORDER, UROCE_CORRUPT, UROCE_DELAY_US); otherwise as for real loss: "
		"`uroce doctor` (drops, sockbuf), `ip -s link`, switch port counters; make the "
		"fabric lossless (PFC) or react earlier (ECN); selective repeat (UROCE_RETRANS=sr "
		"where WRITEs are received) resends only what was lost" :
		"find where packets are lost: `uroce doctor` (drops, sockbuf: UDP receive buffer "
		"errors), `ip -s link`, `nstat -az Udp*`, switch port counters; make the fabric "
		"lossless (PFC) or react earlier (ECN); a smaller window (UROCE_WINDOW) resends less");
}

/* ---- rnr: receiver not ready ---- */

static void check_rnr(struct cdoc *cd, struct doc_check *c)
{
	static const int ks[] = { CI(rnr_naks_sent), CI(rnr_naks_rcvd), CI(rnr_retry_exceeded), END };
	double worst = 0;
	uint64_t total = 0, sent = 0, rcvd = 0, exceeded = 0;
	char w[64];

	for (int i = 0; i < cd->n; i++) {
		const struct cproc *p = &cd->p[i];
		double r = rate(cd, p, CI(rnr_naks_sent)) + rate(cd, p, CI(rnr_naks_rcvd));

		if (!sum(p, ks))
			continue;
		ev(c, cd, p, NULL, CI(rnr_naks_sent), CI(rnr_naks_rcvd), CI(rnr_retry_exceeded), END);
		if (tot(p, CI(rnr_naks_sent)))
			doc_add(c, "%s: rnr_naks_sent: SENDs (or WRITEs with immediate) arrived and no "
				   "RECV was posted: this process does not post receives fast enough", p->tag);
		if (tot(p, CI(rnr_naks_rcvd)))
			doc_add(c, "%s: rnr_naks_rcvd: the peer had no RECV posted; this process waits "
				   "the peer's min_rnr_timer and sends again (rnr_retry times)", p->tag);
		if (tot(p, CI(rnr_retry_exceeded)))
			doc_add(c, "%s: rnr_retry_exceeded: WRs failed with IBV_WC_RNR_RETRY_EXC_ERR",
				p->tag);
		if (r > worst)
			worst = r;
		sent += tot(p, CI(rnr_naks_sent));
		rcvd += tot(p, CI(rnr_naks_rcvd));
		total = sent + rcvd;
		exceeded += tot(p, CI(rnr_retry_exceeded));
	}
	if (!total && !exceeded) {
		doc_set(c, DOC_PASS, "no RNR NAKs: receives were posted in time");
		return;
	}
	if (exceeded)
		doc_set(c, DOC_FAIL, "%llu WRs failed after RNR retries (%s)",
			(unsigned long long)exceeded, when(cd, ks, w, sizeof(w)));
	else if (worst >= 1000)
		doc_set(c, DOC_FAIL, "RNR NAK storm: %.0f RNR NAKs/s: the receiver does not post "
				     "receives fast enough", worst);
	else
		doc_set(c, DOC_WARN, "%llu RNR NAKs sent, %llu received (%s): the receiver did not "
				     "post receives in time",
			(unsigned long long)sent, (unsigned long long)rcvd, when(cd, ks, w, sizeof(w)));
	doc_fix(c, "on the receiver post more RECVs ahead (repost before handling the completion), "
		   "make the RQ larger (max_recv_wr, or an SRQ), or raise min_rnr_timer "
		   "(IBV_QP_MIN_RNR_TIMER) so the sender waits longer; rnr_retry 7 on the sender retries "
		   "without limit");
}

/* ---- timeouts: local ACK timeouts, retry exceeded ---- */

static void check_timeouts(struct cdoc *cd, struct doc_check *c)
{
	static const int ks[] = { CI(timeouts), CI(retry_exceeded), END };
	uint64_t to = 0, ex = 0;
	char w[64];

	for (int i = 0; i < cd->n; i++) {
		const struct cproc *p = &cd->p[i];

		if (!sum(p, ks))
			continue;
		ev(c, cd, p, NULL, CI(timeouts), CI(timeouts_excused), CI(retry_exceeded),
		   CI(acks_rcvd), CI(tx_pkts), END);
		to += tot(p, CI(timeouts));
		ex += tot(p, CI(retry_exceeded));
		if (tot(p, CI(timeouts_excused)))
			doc_add(c, "%s: %llu of them not charged to retry_cnt: the peer spoke "
				   "(ACK, NAK or CNP) but took nothing new, a congested path, not a dead peer",
				p->tag, (unsigned long long)tot(p, CI(timeouts_excused)));
		if (tot(p, CI(fault_dropped)) || p->faults[0])
			doc_add(c, "%s: fault injection is on: lost tail packets or ACKs time out too",
				p->tag);
	}
	if (!to && !ex) {
		doc_set(c, DOC_PASS, "no local ACK timeouts");
		return;
	}
	if (ex)
		doc_set(c, DOC_FAIL, "%llu WRs failed with retry exceeded after %llu local ACK timeouts "
				     "(%s): the peer is gone or unreachable",
			(unsigned long long)ex, (unsigned long long)to, when(cd, ks, w, sizeof(w)));
	else
		doc_set(c, DOC_WARN, "%llu local ACK timeouts (%s): no ACK came in time; the path loses "
				     "tail packets (nothing after them makes the peer NAK) or ACKs",
			(unsigned long long)to, when(cd, ks, w, sizeof(w)));
	doc_fix(c, "check that the peer process is alive and reachable (ping, `uroce stat` on the "
		   "peer); check the QP's timeout (4.096 us * 2^timeout; 14 = 67 ms is usual, short "
		   "values fire before a loaded path answers) and retry_cnt (7); for tail loss see retrans");
}

/* ---- icrc ---- */

static void check_icrc(struct cdoc *cd, struct doc_check *c)
{
	static const int ks[] = { CI(icrc_errors), CI(icrc_id_recovered), END };
	uint64_t err = 0, rx = 0, rec = 0;
	int faults = 0;
	char w[64];

	for (int i = 0; i < cd->n; i++) {
		const struct cproc *p = &cd->p[i];

		rx += tot(p, CI(rx_pkts));
		if (!sum(p, ks) && !tot(p, CI(fault_corrupted)))
			continue;
		ev(c, cd, p, NULL, CI(icrc_errors), CI(icrc_id_recovered), CI(rx_pkts), END);
		err += tot(p, CI(icrc_errors));
		rec += tot(p, CI(icrc_id_recovered));
		if (tot(p, CI(icrc_id_recovered)))
			doc_add(c, "%s: icrc_id_recovered: the peer numbers IP IDs and covers them in its "
				   "ICRC (uroce sends ID 0); the ID was recovered from the ICRC and the packets "
				   "taken: harmless", p->tag);
		if (tot(p, CI(fault_corrupted)) || strstr(p->faults, "UROCE_CORRUPT")) {
			faults = 1;
			ev(c, cd, p, "fault injection corrupts packets (UROCE_CORRUPT):",
			   CI(fault_corrupted), END);
		}
	}
	if (!err) {
		if (rec)
			doc_set(c, DOC_PASS, "no ICRC errors (%llu packets from a peer that numbers IP IDs)",
				(unsigned long long)rec);
		else
			doc_set(c, DOC_PASS, "no ICRC errors");
		return;
	}
	doc_set(c, pct(err, rx) >= 1 ? DOC_FAIL : DOC_WARN,
		"%llu packets dropped with a bad ICRC (%.2f%% of received, %s)%s",
		(unsigned long long)err, pct(err, rx), when(cd, ks, w, sizeof(w)),
		faults ? ": fault injection corrupts them" : ": corruption on the path, or a peer "
							   "computing the ICRC differently");
	doc_fix(c, "%s", faults ? "the corruption is injected (unset UROCE_CORRUPT)" :
		"look for corruption on the path (rx_crc_errors in `ip -s link`, cables, optics); a peer "
		"whose ICRC covers fields differently (another RoCE stack, a middlebox rewriting the "
		"IP header) shows errors on every packet: compare `uroce trace -w` captures in Wireshark");
}

/* ---- drops by reason ---- */

static void check_drops(struct cdoc *cd, struct doc_check *c)
{
	static const struct {
		int k;
		const char *why;
	} why[] = {
		{ CI(drop_malformed), "headers that do not parse (not RoCEv2, truncated): another "
				      "program sends to UDP port 4791, or packets are cut" },
		{ CI(drop_bad_qpn), "no such destination QP: stale packets of a peer that restarted, "
				    "or of a QP destroyed here" },
		{ CI(drop_state), "the QP was not in a state to take them (not yet RTR/RTS, or in "
				  "error): a peer that starts sending before this side is ready" },
		{ CI(drop_pkey), "P_Key mismatch: both sides must use the same pkey_index/P_Key" },
		{ CI(drop_opcode), "opcode not valid here (e.g. READ/atomic without "
				   "IBV_ACCESS_REMOTE_* or on a UD QP)" },
		{ CI(drop_tx_full), "the socket refused to send (send buffer full): raise "
				    "net.core.wmem_max" },
		{ CI(drop_qkey), "UD datagrams whose Q_Key is not the receiving QP's: the "
				 "sender's remote_qkey and the receiver's IBV_QP_QKEY must agree" },
		{ CI(drop_no_rwqe), "UD or UC messages with no receive WQE posted (no RNR on "
				    "UD/UC: post receives before the peer sends, keep enough posted)" },
		{ CI(uc_msgs_dropped), "UC messages dropped whole because a packet of them was "
				       "lost (IBA 9.8.3): UC does not resend" },
		{ CI(ud_len_errs), "UD datagrams longer than the receive WQE (completed with "
				   "IBV_WC_LOC_LEN_ERR): post 40 bytes of GRH + the largest message" },
		{ CI(rx_sock_drops), "the kernel dropped datagrams for a full receive socket "
				     "buffer: the engine fell behind (CPU, or a receiver slower than "
				     "its senders); raise net.core.rmem_max / UROCE_RCVBUF_KB, or let "
				     "congestion control (UROCE_CC=dcqcn, UROCE_ECN_QUEUE_KB) slow the "
				     "senders" },
		{ CI(ooo_full), "packets after a gap that could not be kept for reordering (64 "
				"per QP, 64 MiB per process): resent by go-back-N" },
	};
	uint64_t all = 0, pkts = 0, txfull = 0;
	int any_ks[16], m = 0;
	char w[64];

	for (size_t j = 0; j < sizeof(why) / sizeof(why[0]); j++)
		any_ks[m++] = why[j].k;
	any_ks[m] = END;
	for (int i = 0; i < cd->n; i++) {
		const struct cproc *p = &cd->p[i];

		pkts += tot(p, CI(rx_pkts)) + tot(p, CI(tx_pkts));
		if (!sum(p, any_ks))
			continue;
		for (size_t j = 0; j < sizeof(why) / sizeof(why[0]); j++) {
			int k = why[j].k;

			if (!tot(p, k))
				continue;
			ev(c, cd, p, NULL, k, END);
			doc_add(c, "%s: %s: %s", p->tag, statf_names[k], why[j].why);
			all += tot(p, k);
			if (k == CI(drop_tx_full))
				txfull += tot(p, k);
		}
	}
	if (!all) {
		doc_set(c, DOC_PASS, "no packets dropped by uroce (malformed, bad QPN, state, P_Key, "
				     "opcode, send buffer, Q_Key, receive WQEs, UC messages)");
		return;
	}
	doc_set(c, pct(all, pkts) >= 1 ? DOC_FAIL : DOC_WARN, "%llu packets dropped by uroce (%s)%s",
		(unsigned long long)all, when(cd, any_ks, w, sizeof(w)),
		txfull ? "; sends refused by a full socket buffer" : "");
	doc_fix(c, "%s", txfull ? "raise the send buffer limit: sysctl -w net.core.wmem_max=8388608 "
				  "(and rmem_max); for the other reasons see the evidence" :
		"see the reason of each counter in the evidence; drop_bad_qpn right after a restart "
		"stops by itself");
}

/* ---- duplicates ---- */

static void check_dups(struct cdoc *cd, struct doc_check *c)
{
	static const int ks[] = { CI(dup_requests), CI(dup_responses), END };
	uint64_t dup = 0;
	int lossy = 0, injected = 0;
	char w[64];

	for (int i = 0; i < cd->n; i++) {
		const struct cproc *p = &cd->p[i];

		if (!sum(p, ks))
			continue;
		ev(c, cd, p, NULL, CI(dup_requests), CI(dup_responses), CI(rx_pkts), END);
		dup += tot(p, CI(dup_requests)) + tot(p, CI(dup_responses));
		if (tot(p, CI(fault_duplicated))) {
			injected = 1;
			ev(c, cd, p, "fault injection duplicates packets (UROCE_DUP):", CI(fault_duplicated),
			   END);
		}
		if (tot(p, CI(fault_dropped)) || tot(p, CI(seq_naks_sent)) || tot(p, CI(timeouts)))
			lossy = 1;
	}
	if (!dup) {
		doc_set(c, DOC_PASS, "no duplicate requests or responses");
		return;
	}
	if (injected)
		doc_set(c, DOC_WARN, "%llu duplicates (%s): fault injection duplicates packets",
			(unsigned long long)dup, when(cd, ks, w, sizeof(w)));
	else if (lossy)
		doc_set(c, DOC_WARN, "%llu duplicates (%s): resent packets whose first copy (or its ACK) "
				     "had arrived, after losses (see retrans)",
			(unsigned long long)dup, when(cd, ks, w, sizeof(w)));
	else
		doc_set(c, DOC_WARN, "%llu duplicates (%s) without losses: spurious retransmissions, "
				     "the sender's timer is shorter than the path's round trip",
			(unsigned long long)dup, when(cd, ks, w, sizeof(w)));
	doc_fix(c, "%s", injected ? "the duplicates are injected (unset UROCE_DUP)" :
		"raise the requester's local ACK timeout (ibv_qp_attr.timeout; UROCE_RTO_US for uroce) "
		"above the round trip under load; if packets are lost, fix that first (retrans)");
}

/* ---- ecn / cnp ---- */

static void check_ecn(struct cdoc *cd, struct doc_check *c)
{
	static const int ks[] = { CI(ecn_marked), CI(cnp_sent), CI(cnp_handled), CI(cc_rate_cuts),
				  END };
	uint64_t n = 0;
	char w[64];

	for (int i = 0; i < cd->n; i++) {
		const struct cproc *p = &cd->p[i];

		if (!sum(p, ks))
			continue;
		ev(c, cd, p, NULL, CI(ecn_marked), CI(ecn_queue_marked), CI(cnp_sent), CI(cnp_handled),
		   CI(cc_rate_cuts), CI(cc_pace_waits), END);
		if (tot(p, CI(ecn_marked)) || tot(p, CI(cnp_sent)))
			doc_add(c, "%s: packets to this process crossed a congested queue (ECN CE); it "
				   "told their senders with CNPs", p->tag);
		if (tot(p, CI(ecn_queue_marked)))
			doc_add(c, "%s: ecn_queue_marked: its own receive queue was over "
				   "UROCE_ECN_QUEUE_KB, so it marked CE itself", p->tag);
		if (tot(p, CI(cc_rate_cuts)))
			doc_add(c, "%s: cc_rate_cuts: this process slowed down on CNPs from its peers "
				   "(DCQCN reaction point; cc_pace_waits: its pacer held packets)", p->tag);
		else if (tot(p, CI(cnp_handled)))
			doc_add(c, "%s: cnp_handled without cc_rate_cuts: CNPs arrived but did not slow "
				   "this process (UROCE_CC=none)", p->tag);
		n += tot(p, CI(ecn_marked)) + tot(p, CI(cnp_handled));
	}
	if (!n) {
		doc_set(c, DOC_PASS, "no ECN marks or CNPs: no congestion signalled");
		return;
	}
	doc_set(c, DOC_WARN, "congestion: ECN-marked packets or CNPs (%s)", when(cd, ks, w, sizeof(w)));
	doc_fix(c, "a switch queue on the path fills: spread the traffic (more paths, ECMP entropy), "
		   "lower the offered load, or tune the switch ECN thresholds; marks without drops "
		   "mean ECN is doing its job");
}

/* ---- gpu: copies between GPU memory and the wire ---- */

/* Engine threads blocked on GPU copies for at least this share of each
 * second (engine-seconds per second, summed over a process's engines). */
#define GPU_WAIT_WARN 0.25

static void check_gpu(struct cdoc *cd, struct doc_check *c)
{
	static const int ks[] = { CI(gpu_place_copies), CI(gpu_stage_copies), END };
	double worst = 0;
	const char *who = NULL;
	int any = 0;

	for (int i = 0; i < cd->n; i++) {
		const struct cproc *p = &cd->p[i];
		double blocked = rate(cd, p, CI(gpu_wait_ns)) / 1e9;
		char note[160];

		if (!sum(p, ks))
			continue;
		any = 1;
		if (p->have_rate)
			snprintf(note, sizeof(note), "engine threads blocked on GPU copies %.2f s per "
				 "second (%.3f s in all);", blocked,
				 (double)tot(p, CI(gpu_wait_ns)) / 1e9);
		else
			snprintf(note, sizeof(note), "engine threads blocked on GPU copies %.3f s in all;",
				 (double)tot(p, CI(gpu_wait_ns)) / 1e9);
		ev(c, cd, p, note, CI(gpu_place_copies), CI(gpu_place_bytes), CI(gpu_stage_copies),
		   CI(gpu_stage_bytes), CI(gpu_stage_sync), CI(gpu_prefetch_hits),
		   CI(gpu_acks_deferred), END);
		if (blocked > worst) {
			worst = blocked;
			who = p->tag;
		}
	}
	if (!any) {
		doc_set(c, DOC_PASS, "no GPU memory in the data path");
		return;
	}
	if (worst < GPU_WAIT_WARN) {
		doc_set(c, DOC_PASS, "GPU memory in the data path; engines blocked on its copies "
				     "%.2f s per second at most", worst);
		return;
	}
	doc_set(c, DOC_WARN, "%s: engine threads blocked on GPU copies %.2f s per second", who,
		worst);
	doc_fix(c, "uroce copies GPU memory in a CUDA context of its own, and the GPU time-slices "
		   "it against the application's spinning kernels (docs/design.md, \"GPU memory\"): "
		   "run the ranks under CUDA MPS, or copy in the application's context with "
		   "UROCE_CUDA_OWN_CTX=0 (1.6-1.7x faster for NCCL on one GPU, but a copy can then "
		   "wait behind the application's cuMemFree while a kernel waits for it), or let "
		   "NCCL stage through host memory (NCCL_NET_GDR_LEVEL=LOC)");
}

static const struct {
	const char *id;
	void (*fn)(struct cdoc *cd, struct doc_check *c);
} cchecks[] = {
	{ "retrans", check_retrans },   { "rnr", check_rnr },   { "timeouts", check_timeouts },
	{ "icrc", check_icrc },         { "rx-drops", check_drops }, { "duplicates", check_dups },
	{ "ecn-cnp", check_ecn },       { "gpu", check_gpu },
};
#define NCCHECK ((int)(sizeof(cchecks) / sizeof(cchecks[0])))

/* ---- reading ---- */

/* The UROCE_* fault injection settings in the process's environment
 * (readable for our own processes). */
static void fault_env(struct cproc *p)
{
	static const char *const keys[] = { "UROCE_LOSS=", "UROCE_DUP=", "UROCE_CORRUPT=",
					    "UROCE_REORDER=", "UROCE_DELAY_US=" };
	char path[64], buf[65536];
	size_t off = 0, n;
	FILE *f;

	p->faults[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/environ", p->s.snap.pid);
	f = fopen(path, "rb");
	if (!f)
		return;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			const char *v = buf + i + strlen(keys[k]);

			if (strncmp(buf + i, keys[k], strlen(keys[k])) || !*v || atof(v) == 0)
				continue;
			off += (size_t)snprintf(p->faults + off, sizeof(p->faults) - off, "%s%s",
						off ? " " : "", buf + i);
			if (off >= sizeof(p->faults))
				off = sizeof(p->faults) - 1;
		}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void read_twice(struct cdoc *cd, const struct doc_counters_opts *o)
{
	static struct statf_src first[STATF_MAX], second[STATF_MAX];
	int n1 = statf_scan(first, STATF_MAX, o->filter), n2;
	double t0 = now_s();
	struct timespec ts;

	cd->n = 0;
	if (n1) {
		ts.tv_sec = (time_t)o->interval;
		ts.tv_nsec = (long)((o->interval - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
	}
	n2 = statf_scan(second, STATF_MAX, o->filter);
	cd->dt = n1 ? now_s() - t0 : 0;
	/* The second read, with the first as prev where it was there... */
	for (int j = 0; j < n2 && cd->n < STATF_MAX; j++) {
		struct cproc *p = &cd->p[cd->n++];

		memset(p, 0, sizeof(*p));
		p->s = second[j];
		for (int i = 0; i < n1; i++)
			if (!strcmp(first[i].path, second[j].path) &&
			    first[i].snap.start_ns == second[j].snap.start_ns &&
			    first[i].snap.pid == second[j].snap.pid) {
				memcpy(p->s.prev, &first[i].snap.cnt, sizeof(p->s.prev));
				p->have_rate = 1;
			}
	}
	/* ...and what exited in between, with its last counters. */
	for (int i = 0; i < n1 && cd->n < STATF_MAX; i++) {
		int found = 0;

		for (int j = 0; j < n2; j++)
			found |= !strcmp(first[i].path, second[j].path);
		if (!found) {
			struct cproc *p = &cd->p[cd->n++];

			memset(p, 0, sizeof(*p));
			p->s = first[i];
			p->gone = 1;
		}
	}
	for (int i = 0; i < cd->n; i++) {
		struct cproc *p = &cd->p[i];

		snprintf(p->tag, sizeof(p->tag), "pid %d (%s) %s", p->s.snap.pid, p->s.snap.comm,
			 p->s.snap.ibdev);
		fault_env(p);
	}
}

static void print_procs_text(const struct cdoc *cd)
{
	for (int i = 0; i < cd->n; i++) {
		const struct cproc *p = &cd->p[i];

		printf("  %s netdev %s, %u QPs: tx_pkts %llu, rx_pkts %llu%s%s%s\n", p->tag,
		       p->s.snap.ifname, p->s.snap.nqps, (unsigned long long)tot(p, CI(tx_pkts)),
		       (unsigned long long)tot(p, CI(rx_pkts)),
		       p->gone ? " (exited between the reads)" : "",
		       p->faults[0] ? ", fault injection: " : "", p->faults);
	}
	printf("\n");
}

static void print_procs_json(const struct cdoc *cd)
{
	printf("\"processes\": [");
	for (int i = 0; i < cd->n; i++) {
		const struct cproc *p = &cd->p[i];
		const struct uroce_stat_file *f = &p->s.snap;

		printf("%s\n  {\"pid\": %d, \"comm\": ", i ? "," : "", f->pid);
		cli_json_str(stdout, f->comm);
		printf(", \"device\": ");
		cli_json_str(stdout, f->ibdev);
		printf(", \"netdev\": ");
		cli_json_str(stdout, f->ifname);
		printf(", \"qps\": %u, \"exited\": %s, \"fault_injection\": ", f->nqps,
		       p->gone ? "true" : "false");
		cli_json_str(stdout, p->faults);
		printf(", \"counters\": {");
		for (size_t k = 0; k < STATF_NCOUNTERS; k++)
			printf("%s\"%s\": %llu", k ? ", " : "", statf_names[k],
			       (unsigned long long)tot(p, (int)k));
		printf("}");
		if (p->have_rate) {
			printf(", \"rates_per_s\": {");
			for (size_t k = 0; k < STATF_NCOUNTERS; k++)
				printf("%s\"%s\": %.1f", k ? ", " : "", statf_names[k],
				       rate(cd, p, (int)k));
			printf("}");
		}
		printf("}");
	}
	printf("]");
}

int doc_counters(const struct doc_counters_opts *o, int json)
{
	static struct cdoc cd;
	static struct doc_check res[NCCHECK];
	int fails = 0;

	read_twice(&cd, o);
	if (!cd.n) {
		char msg[200];

		if (o->filter)
			snprintf(msg, sizeof(msg), "no running uroce process matches %s", o->filter);
		else
			snprintf(msg, sizeof(msg), "no running uroce process has a device open: "
						   "no counters to check");
		if (json) {
			printf("{\"counters\": true, \"interval_s\": %.3f, \"processes\": [], "
			       "\"checks\": [], \"message\": ", o->interval);
			cli_json_str(stdout, msg);
			printf("}\n");
		} else {
			printf("uroce doctor: live counters\n%s\n", msg);
		}
		return o->filter ? 1 : 0;
	}
	for (int i = 0; i < NCCHECK; i++) {
		memset(&res[i], 0, sizeof(res[i]));
		res[i].id = cchecks[i].id;
		res[i].st = DOC_SKIP;
		cchecks[i].fn(&cd, &res[i]);
		fails += res[i].st == DOC_FAIL;
	}
	if (json) {
		printf("{\"counters\": true, \"interval_s\": %.3f,\n ", cd.dt);
		print_procs_json(&cd);
		printf(",\n ");
		doc_json_checks(res, NCCHECK);
		printf("}\n");
	} else {
		printf("uroce doctor: live counters of %d process%s, read %.1f s apart\n", cd.n,
		       cd.n == 1 ? "" : "es", cd.dt);
		print_procs_text(&cd);
		doc_print_checks(res, NCCHECK);
	}
	return fails ? 1 : 0;
}
