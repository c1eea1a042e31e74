/* Requester and completer (IBA 9.7.1-9.7.6, o9-? and C9-* as cited).
 *
 * PSN bookkeeping. Every WQE gets a fixed PSN range when it is first sent
 * (READ: one PSN per response packet; atomics: one). req.psn is the next
 * PSN to put on the wire, req.una the oldest PSN not yet known to be done.
 * una only moves forward: on ACKs (SEND/WRITE ranges), in-order READ
 * responses and atomic ACKs, so a WQE is done exactly when una is past its
 * last PSN. Go-back-N: a NAK, a gap in READ responses or a timeout rewinds
 * req.psn to una and resends from there. */
#include "engine.h"
#include "trace.h"

#include <stdlib.h>
#include <string.h>

#define READ_CHUNK_PKTS 64    /* READ requests cover at most this many responses */
#define ACKREQ_EVERY 16       /* AckReq on every 16th packet and on each last one */
#define TIMEOUT_EXCUSES 32    /* uncharged timeouts per stall while the peer speaks */
/* A timer shorter than LAG_TURNS of the engine's recent turns is not
 * judged (uroce_req_timers), LAG_DEFERS times at most per stall. */
#define LAG_TURNS 3
#define LAG_DEFERS 32

static inline struct uroce_swqe *sqe(struct uroce_qp *qp, uint32_t idx)
{
	return &qp->sq[idx & (qp->sq_size - 1)];
}

static inline int is_rd_atomic(uint32_t op)
{
	return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static inline uint32_t last_psn(const struct uroce_swqe *w)
{
	return psn_add(w->first_psn, w->npkts - 1);
}

/* una is past the WQE's last PSN. */
static inline int wqe_done(const struct uroce_qp *qp, const struct uroce_swqe *w)
{
	return psn_diff(qp->req.una, last_psn(w)) > 0;
}

int uroce_req_busy(const struct uroce_qp *qp)
{
	if (qp->eng_state != IBV_QPS_RTS && qp->eng_state != IBV_QPS_SQD &&
	    qp->eng_state != IBV_QPS_SQE)
		return qp->eng_state == IBV_QPS_ERR &&
		       atomic_load(&qp->sq_tail) != atomic_load(&qp->sq_head);
	return atomic_load(&qp->sq_tail) != atomic_load(&qp->sq_head);
}

uint64_t uroce_req_next_deadline(const struct uroce_qp *qp)
{
	uint64_t d = UINT64_MAX;

	if (qp->req.deadline)
		d = qp->req.deadline;
	if (qp->req.fast_deadline && qp->req.fast_deadline < d)
		d = qp->req.fast_deadline;
	if (qp->req.rnr_until && qp->req.rnr_until < d)
		d = qp->req.rnr_until;
	if (qp->req.stall_until && qp->req.stall_until < d)
		d = qp->req.stall_until;
	if (qp->req.rec_deadline && qp->req.rec_deadline < d)
		d = qp->req.rec_deadline;
	if (qp->req.rd_gap_start && qp->req.rd_gap_start + qp->gap_wait_ns < d)
		d = qp->req.rd_gap_start + qp->gap_wait_ns;
	if (qp->req.cc.pace_until && qp->req.cc.pace_until < d)
		d = qp->req.cc.pace_until;
	return d;
}

/* ---- congestion control (cc.c) ---- */

/* The DCQCN configuration, NULL with UROCE_CC=none (UD has no flow to
 * notify, so no CNPs and no rate either). */
static inline const struct uroce_cc_cfg *cc_cfg(const struct uroce_qp *qp)
{
	const struct uroce_cc_cfg *c = uroce_cc_config();

	return c->mode == UROCE_CC_DCQCN && qp->type != IBV_QPT_UD ? c : NULL;
}

static void cc_count(struct uroce_qp *qp, const struct uroce_cc_stats *st)
{
	qp->cnt->cc_rate_cuts += st->cuts;
	qp->cnt->cc_rate_incs += st->incs;
}

void uroce_req_cnp(struct uroce_qp *qp, uint64_t now)
{
	const struct uroce_cc_cfg *c = cc_cfg(qp);
	struct uroce_cc_stats st = { 0, 0 };

	qp->req.heard = 1; /* a live peer QP (see uroce_req_timers) */
	if (!c)
		return;
	if (!qp->req.cc.ready)
		uroce_cc_init(&qp->req.cc, c, now);
	uroce_cc_cnp(&qp->req.cc, c, now, &st);
	cc_count(qp, &st);
	uroce_trace("cc_cut", "qpn=0x%x rate_mbps=%.0f target_mbps=%.0f alpha=%.4f", qp->qpn,
		    qp->req.cc.rc, qp->req.cc.rt, qp->req.cc.alpha);
}

/* Whether the pacer lets the next packet leave now (always with
 * UROCE_CC=none). */
static inline int cc_may_send(struct uroce_qp *qp, uint64_t now)
{
	if (!qp->req.cc.ready)
		return 1;
	if (uroce_cc_may_send(&qp->req.cc, uroce_cc_config(), now))
		return 1;
	qp->cnt->cc_pace_waits++;
	return 0;
}

/* A packet of the requester left: what it costs the pacer. The headers
 * (IPv4 20, UDP 8, BTH 12, ICRC 4, a RETH now and then) count as 48
 * bytes. */
static inline void cc_sent(struct uroce_qp *qp, uint64_t now, uint32_t paylen)
{
	struct uroce_cc_stats st = { 0, 0 };

	if (!qp->req.cc.ready)
		return;
	uroce_cc_sent(&qp->req.cc, uroce_cc_config(), now, paylen + 48, &st);
	cc_count(qp, &st);
}

/* The same pacer for what the QP sends as a responder (READ responses):
 * DCQCN's rate is the QP's, whatever its packets are (a CNP answers CE
 * on any packet of the flow, READ responses included). */
int uroce_req_cc_may_send(struct uroce_qp *qp, uint64_t now)
{
	return cc_may_send(qp, now);
}

void uroce_req_cc_sent(struct uroce_qp *qp, uint64_t now, uint32_t paylen)
{
	cc_sent(qp, now, paylen);
}

/* Gathers [off, off+len) of a WQE's local data into iovecs: host memory in
 * place (zero copy), CUDA memory through the QP's staging window. Returns 0
 * or a completion status (IBV_WC_LOC_PROT_ERR). */
/* While the WQE being sent is served from the staging window, the next
 * posted WQE's GPU bytes are copied ahead (qp.c, uroce_stage_ahead): NCCL
 * posts one WRITE per chunk, each within one window, so without this
 * every chunk waited for its own copy before its first packet. One SGE
 * of CUDA memory that the gather will find valid, nothing else. */
static void stage_next(struct uroce_qp *qp)
{
	uint32_t idx = qp->req.cur + 1;
	struct uroce_swqe *w;
	struct uroce_mr *mr;

	/* UROCE_GPU_AHEAD=1 only: on the H100 with NCCL's GDR path it gained
	 * nothing, as every copy in uroce's own CUDA context waited for the
	 * GPU's time slice anyway (docs/design.md, "GPU memory") */
	if (!uroce_eng_gpu_ahead(qp->eng) || qp->stage.pf_mr ||
	    idx == atomic_load_explicit(&qp->sq_head, memory_order_acquire))
		return; /* off, a copy is in flight already, or nothing is posted */
	w = sqe(qp, idx);
	if ((w->flags & (SWQE_INLINE | SWQE_ASSIGNED)) || w->num_sge != 1 || !w->length ||
	    is_rd_atomic(w->opcode))
		return;
	mr = uroce_mr_lookup(&qp->ctx->mrs, w->sge[0].lkey);
	if (!mr || mr->kind != UROCE_MEM_CUDA || mr->pd != qp->pd ||
	    !uroce_mr_ok(mr, w->sge[0].addr, w->sge[0].length, 0))
		return;
	if (!(w->flags & SWQE_KEYED)) {
		w->stage_key = ++qp->stage.next_key;
		w->flags |= SWQE_KEYED;
	}
	uroce_stage_ahead(qp, mr, w->stage_key, w->sge[0].addr, w->sge[0].length);
}

int uroce_req_gather(struct uroce_qp *qp, struct uroce_swqe *w, uint32_t off, uint32_t len,
		     struct iovec *iov, int *niov)
{
	const struct uroce_mr *pmr[UROCE_MAX_SGE];
	uint64_t pva[UROCE_MAX_SGE];
	uint32_t prest[UROCE_MAX_SGE];
	int n = 0, ncuda = 0;
	uint32_t total = len;

	if (w->flags & SWQE_INLINE) {
		iov[0].iov_base = w->inl + off;
		iov[0].iov_len = len;
		*niov = len ? 1 : 0;
		return 0;
	}
	for (uint32_t i = 0; i < w->num_sge && len; i++) {
		struct ibv_sge *s = &w->sge[i];
		struct uroce_mr *mr;
		uint32_t take;

		if (off >= s->length) {
			off -= s->length;
			continue;
		}
		take = MIN(len, s->length - off);
		mr = uroce_mr_lookup(&qp->ctx->mrs, s->lkey);
		if (!mr || mr->pd != qp->pd || !uroce_mr_ok(mr, s->addr + off, take, 0))
			return IBV_WC_LOC_PROT_ERR;
		pmr[n] = mr;
		pva[n] = s->addr + off;
		prest[n] = s->length - off;
		if (mr->kind == UROCE_MEM_HOST) {
			iov[n].iov_base = mr->host + (s->addr + off - mr->iova);
			uroce_trace("mem_read", "qpn=0x%x addr=%p len=%u lkey=0x%x kind=host zero_copy=1",
				    qp->qpn, iov[n].iov_base, take, s->lkey);
		} else {
			ncuda++;
			iov[n].iov_base = NULL;
		}
		iov[n++].iov_len = take;
		len -= take;
		off = 0;
	}
	if (len)
		return IBV_WC_LOC_LEN_ERR;
	if (ncuda && n == 1) {
		/* the common case: one piece of device memory */
		uint8_t *p = uroce_stage(qp, pmr[0], w->stage_key, pva[0], total, prest[0]);

		if (!p)
			return IBV_WC_LOC_PROT_ERR;
		iov[0].iov_base = p;
		uroce_trace("mem_read", "qpn=0x%x dev=0x%llx len=%u kind=cuda staged=1", qp->qpn,
			    (unsigned long long)(pmr[0]->dev + (pva[0] - pmr[0]->iova)), total);
		if (w == sqe(qp, qp->req.cur))
			stage_next(qp);
	} else if (ncuda) {
		/* pieces of several regions, some on the GPU: one run */
		uint8_t *p;
		size_t at = 0;
		int k0 = 0;

		while (pmr[k0]->kind != UROCE_MEM_CUDA)
			k0++;
		p = uroce_stage_linear(qp, pmr[k0], total);
		if (!p)
			return IBV_WC_LOC_PROT_ERR;
		for (int k = 0; k < n; k++) {
			if (uroce_mr_read(pmr[k], pva[k], p + at, iov[k].iov_len))
				return IBV_WC_LOC_PROT_ERR;
			at += iov[k].iov_len;
		}
		iov[0].iov_base = p;
		iov[0].iov_len = total;
		n = 1;
	}
	*niov = n;
	return 0;
}

/* Scatters data into a WQE's SGEs at 'off' (READ responses, atomic results). */
static int scatter(struct uroce_qp *qp, struct uroce_swqe *w, uint32_t off, const uint8_t *src,
		   uint32_t len)
{
	for (uint32_t i = 0; i < w->num_sge && len; i++) {
		struct ibv_sge *s = &w->sge[i];
		struct uroce_mr *mr;
		uint32_t take;

		if (off >= s->length) {
			off -= s->length;
			continue;
		}
		take = MIN(len, s->length - off);
		mr = uroce_mr_lookup(&qp->ctx->mrs, s->lkey);
		if (!mr || mr->pd != qp->pd ||
		    !uroce_mr_ok(mr, s->addr + off, take, IBV_ACCESS_LOCAL_WRITE))
			return IBV_WC_LOC_PROT_ERR;
		if (uroce_place(qp, mr, s->addr + off, src, take))
			return IBV_WC_LOC_PROT_ERR;
		uroce_trace("place", "qpn=0x%x va=0x%llx len=%u lkey=0x%x kind=%s", qp->qpn,
			    (unsigned long long)(s->addr + off), take, s->lkey,
			    mr->kind == UROCE_MEM_CUDA ? "cuda" : "host");
		src += take;
		len -= take;
		off = 0;
	}
	return len ? IBV_WC_LOC_LEN_ERR : 0;
}

static void arm_timers(struct uroce_qp *qp, uint64_t now)
{
	if (qp->req.timeout_ns && !qp->req.deadline)
		qp->req.deadline = now + qp->req.timeout_ns;
	if (!qp->req.fast_cur_ns)
		qp->req.fast_cur_ns = qp->req.fast_rto_ns;
	if (!qp->req.fast_deadline)
		qp->req.fast_deadline = now + qp->req.fast_cur_ns;
}

/* Progress: una moved, so the retry budget and timers start again
 * (C9-140: the retry counter counts consecutive timeouts). */
/* Round-trip samples (Karn: only packets not retransmitted) give the
 * early retransmission timeout, RFC 6298 style: srtt + 4 rttvar, at least
 * UROCE_RTO_US, at most the QP's own timeout. */
static void rtt_update(struct uroce_qp *qp, uint64_t now)
{
	uint64_t r, rto;

	r = now - qp->req.rtt_start;
	qp->req.rtt_start = 0;
	if (!qp->req.srtt_ns) {
		qp->req.srtt_ns = r;
		qp->req.rttvar_ns = r / 2;
	} else {
		uint64_t d = r > qp->req.srtt_ns ? r - qp->req.srtt_ns : qp->req.srtt_ns - r;

		qp->req.rttvar_ns = (3 * qp->req.rttvar_ns + d) / 4;
		qp->req.srtt_ns = (7 * qp->req.srtt_ns + r) / 8;
	}
	rto = qp->req.srtt_ns + 4 * qp->req.rttvar_ns;
	if (rto < qp->req.fast_min_ns)
		rto = qp->req.fast_min_ns;
	if (qp->req.timeout_ns && rto > qp->req.timeout_ns)
		rto = qp->req.timeout_ns;
	qp->req.fast_rto_ns = rto;
}

static void rtt_sample(struct uroce_qp *qp, uint64_t now)
{
	if (!qp->req.rtt_start || psn_diff(qp->req.una, qp->req.rtt_psn) <= 0)
		return;
	rtt_update(qp, now);
}

static void window_grow(struct uroce_qp *qp, uint32_t acked);

static uint64_t rec_rto(const struct uroce_qp *qp);

static void progress_made(struct uroce_qp *qp, uint64_t now)
{
	rtt_sample(qp, now);
	window_grow(qp, (uint32_t)psn_diff(qp->req.una, qp->req.last_una));
	qp->req.last_una = qp->req.una;
	qp->req.retry_left = (int)qp->attr.retry_cnt;
	qp->req.excused = 0;
	qp->req.deferred = 0;
	qp->req.heard = 0;
	qp->req.deadline = 0;
	qp->req.fast_deadline = 0;
	qp->req.fast_cur_ns = qp->req.fast_rto_ns;
	qp->req.una_sent_at = now;
	qp->req.sr_tried = 0;
	qp->req.probed = 0;
	qp->req.rec_deadline = 0;
	if (qp->req.in_rec && psn_diff(qp->req.una, qp->req.rec_end) >= 0)
		qp->req.in_rec = 0;
	/* still recovering: the new una may be a hole resent already */
	if (qp->req.in_rec)
		qp->req.rec_deadline = now + rec_rto(qp);
	if (psn_diff(qp->req.psn, qp->req.una) > 0)
		arm_timers(qp, now);
}

static void seek_to_una(struct uroce_qp *qp);
static void fail_oldest(struct uroce_qp *qp, enum ibv_wc_status st);

/* Retires done WQEs in order, writing CQEs for the signaled ones. */
static void retire(struct uroce_qp *qp)
{
	uint32_t t = atomic_load_explicit(&qp->sq_tail, memory_order_relaxed);
	uint32_t head = atomic_load_explicit(&qp->sq_head, memory_order_acquire);

	qp->req.stall_until = 0;
	for (; t != head; t++) {
		struct uroce_swqe *w = sqe(qp, t);

		if (!(w->flags & SWQE_ASSIGNED) || !wqe_done(qp, w))
			break;
		/* READ data headed for the GPU is there before the WQE
		 * retires (its CQE, or its slot reused); only then: a flush
		 * for every READ response packet made one GPU copy each */
		if (uroce_place_dirty(qp) && uroce_place_flush(qp)) {
			fail_oldest(qp, IBV_WC_LOC_PROT_ERR);
			return;
		}
		if ((w->flags & SWQE_SIGNALED) || qp->sq_sig_all) {
			struct ibv_wc wc = {
				.wr_id = w->wr_id,
				.status = IBV_WC_SUCCESS,
				.opcode = uroce_wc_opcode(w->opcode),
				.qp_num = qp->qpn,
				.byte_len = w->length,
			};

			if (!uroce_cq_space(qp->scq)) {
				/* CQ full: look again shortly */
				qp->req.stall_until = uroce_now_ns() + 50000;
				break;
			}
			uroce_trace("cqe", "qpn=0x%x wr_id=%llu status=0 opcode=%d byte_len=%u", qp->qpn,
				    (unsigned long long)w->wr_id, (int)wc.opcode, w->length);
			/* Free the slot before the CQE is visible: a poller
			 * that sees it may post again at once. */
			w->flags = 0;
			atomic_store_explicit(&qp->sq_tail, t + 1, memory_order_release);
			uroce_cq_push(qp->scq, &wc, 0);
			continue;
		}
		w->flags = 0;
		atomic_store_explicit(&qp->sq_tail, t + 1, memory_order_release);
	}
	/* After a rewind, una can pass the position we resend from (the
	 * first transmission got through): continue from una instead. */
	if (psn_diff(qp->req.una, qp->req.psn) > 0)
		seek_to_una(qp);
	if (psn_diff(qp->req.psn, qp->req.una) <= 0) {
		qp->req.deadline = 0;
		qp->req.fast_deadline = 0;
	}
}

/* The first WQE that is not done, or NULL. */
static struct uroce_swqe *oldest(struct uroce_qp *qp, uint32_t *idx)
{
	uint32_t t = atomic_load_explicit(&qp->sq_tail, memory_order_relaxed);
	uint32_t head = atomic_load_explicit(&qp->sq_head, memory_order_acquire);

	for (; t != head; t++) {
		struct uroce_swqe *w = sqe(qp, t);

		if (!(w->flags & SWQE_ASSIGNED))
			return NULL;
		if (!wqe_done(qp, w)) {
			if (idx)
				*idx = t;
			return w;
		}
	}
	return NULL;
}

/* The WQE holding PSN psn among the assigned ones. */
static struct uroce_swqe *find_psn(struct uroce_qp *qp, uint32_t psn, uint32_t *idx)
{
	uint32_t t = atomic_load_explicit(&qp->sq_tail, memory_order_relaxed);
	uint32_t head = atomic_load_explicit(&qp->sq_head, memory_order_acquire);

	for (; t != head; t++) {
		struct uroce_swqe *w = sqe(qp, t);

		if (!(w->flags & SWQE_ASSIGNED))
			break;
		if (psn_diff(psn, w->first_psn) >= 0 && psn_diff(psn, last_psn(w)) <= 0) {
			*idx = t;
			return w;
		}
	}
	return NULL;
}

/* Moves the send position to una: inside the WQE that holds it, or at the
 * first WQE not sent yet. */
static void seek_to_una(struct uroce_qp *qp)
{
	uint32_t t = atomic_load_explicit(&qp->sq_tail, memory_order_relaxed);
	uint32_t head = atomic_load_explicit(&qp->sq_head, memory_order_acquire);
	uint32_t to = qp->req.una;

	for (; t != head; t++) {
		struct uroce_swqe *w = sqe(qp, t);

		if (!(w->flags & SWQE_ASSIGNED))
			break;
		if (psn_diff(to, last_psn(w)) > 0)
			continue;
		/* Responses already requested are on their way: asking
		 * again would only make the responder start over. */
		if (w->opcode == IBV_WR_RDMA_READ && psn_diff(w->req_hi, to) > 0) {
			to = w->req_hi;
			if (psn_diff(to, last_psn(w)) > 0)
				continue;
		}
		qp->req.cur = t;
		qp->req.cur_pkt = (uint32_t)psn_diff(to, w->first_psn);
		qp->req.psn = to;
		return;
	}
	qp->req.cur = t;
	qp->req.cur_pkt = 0;
	qp->req.psn = to;
}

static void request_rewind(struct uroce_qp *qp)
{
	qp->req.rewind = 1;
}

/* Congestion window (AIMD): every go-back-N resends the whole window, so
 * on a loss signal the window halves (never below 16 packets) and grows
 * back by one packet per window of progress. */
static void window_loss(struct uroce_qp *qp)
{
	/* Halving was tried and lost more than it saved on loopback and veth
	 * (slow regrowth at these RTTs); the window stays fixed unless
	 * UROCE_AIMD=1 asks for it. */
	if (!qp->req.aimd)
		return;
	qp->req.window = MAX(qp->req.window / 2, 16u);
	qp->req.window_acc = 0;
}

/* After a local ACK timeout (a peer that answered nothing for a whole
 * timeout is overwhelmed or gone): the window drops to its floor and grows
 * back by what each ACK covers (doubling per round trip, TCP's slow start),
 * so that an overloaded peer is not buried under full-window resends until
 * the retries run out (a slow rxe guest failed perftest with status 12). */
static void window_timeout(struct uroce_qp *qp)
{
	qp->req.window = 16;
	qp->req.window_acc = 0;
	qp->req.slow_start = 1;
}

static void window_grow(struct uroce_qp *qp, uint32_t acked)
{
	if (qp->req.window >= qp->req.window_max) {
		qp->req.slow_start = 0;
		return;
	}
	if (qp->req.slow_start) {
		qp->req.window = MIN(qp->req.window + acked, qp->req.window_max);
		return;
	}
	qp->req.window_acc += acked;
	while (qp->req.window_acc >= qp->req.window && qp->req.window < qp->req.window_max) {
		qp->req.window_acc -= qp->req.window;
		qp->req.window++;
	}
}

/* Go-back-N: resend from una (IBA 9.7.6.1.3 and C9-125). */
static void do_rewind(struct uroce_qp *qp)
{
	uint32_t idx, head, target = qp->req.una;
	struct uroce_swqe *w;

	qp->req.rewind = 0;
	qp->req.in_rec = 0;
	qp->req.rec_deadline = 0;
	if (psn_diff(qp->req.psn, target) <= 0)
		return;
	qp->req.rtt_start = 0; /* Karn: no sample across a retransmission */
	w = find_psn(qp, target, &idx);
	if (!w)
		return;
	qp->cnt->retrans_pkts += (uint64_t)psn_diff(qp->req.psn, target);
	/* up to the current WQE, never into slots not posted yet (cur may be
	 * the next free slot, which the application may be filling now) */
	head = atomic_load_explicit(&qp->sq_head, memory_order_acquire);
	for (uint32_t t = idx; t != qp->req.cur + 1 && t != head; t++) {
		struct uroce_swqe *x = sqe(qp, t);

		if (!(x->flags & SWQE_ASSIGNED))
			break;
		if (x->opcode == IBV_WR_RDMA_READ)
			x->req_hi = t == idx ? target : x->first_psn;
	}
	qp->req.cur = idx;
	qp->req.cur_pkt = (uint32_t)psn_diff(target, w->first_psn);
	qp->req.psn = target;
	qp->req.rd_out = 0;
}

/* Fails the oldest unfinished WQE and moves the QP to the error state. */
static void fail_oldest(struct uroce_qp *qp, enum ibv_wc_status st)
{
	uint32_t idx;
	struct uroce_swqe *w;

	retire(qp);
	w = oldest(qp, &idx);
	if (!w) {
		/* the failing WQE is the next one to be sent */
		uint32_t t = atomic_load(&qp->sq_tail);

		if (t != atomic_load(&qp->sq_head))
			w = sqe(qp, t);
	}
	if (w)
		w->status = st;
	uroce_info("QP 0x%x: send WQE %s with status %d (enum ibv_wc_status); "
		   "the QP enters the error state",
		   qp->qpn, w ? "fails" : "(none outstanding) fails", (int)st);
	uroce_qp_to_error(qp);
}

/* ACK of every PSN up to and including apsn (IBA 9.7.5.1.1: ACKs are
 * cumulative). Returns 1 if una moved. */
static int ack_upto(struct uroce_qp *qp, uint32_t apsn)
{
	uint32_t una = qp->req.una, head, t;

	if (psn_diff(apsn, una) < 0 || psn_diff(apsn, qp->req.hi_psn) >= 0)
		return 0; /* old, or for a PSN never sent (ignored, C9-?) */
	head = atomic_load_explicit(&qp->sq_head, memory_order_acquire);
	for (t = atomic_load_explicit(&qp->sq_tail, memory_order_relaxed); t != head; t++) {
		struct uroce_swqe *w = sqe(qp, t);

		if (!(w->flags & SWQE_ASSIGNED))
			break;
		if (psn_diff(una, last_psn(w)) > 0)
			continue;
		if (psn_diff(w->first_psn, apsn) > 0)
			break;
		if (is_rd_atomic(w->opcode)) {
			/* The responder has executed a READ or atomic whose
			 * response we lack: implied NAK (9.7.5.1.2). */
			qp->cnt->implied_naks++;
			request_rewind(qp);
			break;
		}
		if (psn_diff(last_psn(w), apsn) <= 0) {
			una = psn_add(last_psn(w), 1);
			continue;
		}
		una = psn_add(apsn, 1);
		break;
	}
	if (una == qp->req.una)
		return 0;
	qp->req.una = una;
	return 1;
}

/* ---- selective repeat, requester side (docs/design.md) ----
 * A responder doing selective repeat reports each packet it placed ahead
 * of a gap in a SACK. Lost are the PSNs below the highest one reported
 * that were not reported; a recovery episode resends each of them once,
 * then ends when una passes what was sent when it began (IRN). A resent
 * hole lost again is resent when una has waited a round-trip timeout for
 * it; the early and the QP's own timers resend every unreported PSN. */

static int build_data_pkt(struct uroce_qp *qp, struct uroce_swqe *w, uint32_t k,
			  struct uroce_txpkt *tp, struct iovec *iov);

/* Forgets SACK bits below una. */
static void sack_sync(struct uroce_qp *qp)
{
	int32_t n = psn_diff(qp->req.una, qp->req.sack_base);

	if (n > 0) {
		uroce_sr_clear_range(qp->sr_sack, qp->req.sack_base, (uint32_t)n);
		qp->req.sack_base = qp->req.una;
	}
}

/* A round-trip timeout from the samples, without the early timer's floor:
 * how long a resent hole may stay unanswered during recovery. */
static uint64_t rec_rto(const struct uroce_qp *qp)
{
	uint64_t r = qp->req.srtt_ns ? qp->req.srtt_ns + 4 * qp->req.rttvar_ns : 1000000ull;

	return MAX(r, 20000ull);
}

static void rec_start(struct uroce_qp *qp, uint32_t lim)
{
	if (!qp->req.in_rec) {
		qp->req.in_rec = 1;
		qp->req.rec_end = qp->req.hi_psn;
		window_loss(qp);
	}
	qp->req.rtx_next = qp->req.una;
	qp->req.rtx_lim = lim;
}

static void on_sack(struct uroce_qp *qp, const struct wire_pkt *p, uint64_t now)
{
	/* the run [lo, hi] the responder placed (docs/wire.md) */
	uint32_t off = p->msn >> SACK_OFF_SHIFT, n = (p->msn & SACK_LEN_MASK) + 1;
	uint32_t hi = psn_add(p->psn, off), lo = psn_add(hi, (PSN_MASK + 1) - (n - 1));
	qp->cnt->sr_sacks_rcvd++;
	uroce_trace("sack_rx", "qpn=0x%x psn=0x%x run=0x%x..0x%x", qp->qpn, p->psn,
		    off ? lo : p->psn, off ? hi : p->psn);
	if (p->psn != qp->req.una)
		return; /* stale, or a READ before it still owes responses */
	if (!qp->sr_sack) {
		qp->sr_sack = calloc(SR_BITS / 64, sizeof(uint64_t));
		if (!qp->sr_sack) {
			request_rewind(qp);
			return;
		}
		qp->req.sack_base = qp->req.sack_hi = qp->req.una;
	}
	if (!off) {
		/* empty: only una is known missing */
		if (!qp->req.in_rec) {
			rec_start(qp, psn_add(qp->req.una, 1));
		}
		return;
	}
	if (n > off || psn_diff(hi, qp->req.hi_psn) >= 0)
		return; /* not a run after ePSN of PSNs we sent */
	sack_sync(qp);
	if (psn_diff(hi, qp->req.una) >= (int32_t)SR_BITS)
		return;
	uroce_sr_set_range(qp->sr_sack, lo, n);
	/* a SACKed packet sent once times the round trip too */
	if (qp->req.rtt_start && psn_diff(qp->req.rtt_psn, lo) >= 0 &&
	    psn_diff(qp->req.rtt_psn, hi) <= 0)
		rtt_update(qp, now);
	if (psn_diff(psn_add(hi, 1), qp->req.sack_hi) > 0)
		qp->req.sack_hi = psn_add(hi, 1);
	if (!qp->req.in_rec)
		rec_start(qp, qp->req.sack_hi);
	else if (psn_diff(qp->req.rtx_next, qp->req.una) > 0 &&
		 now - qp->req.una_sent_at > rec_rto(qp))
		rec_start(qp, qp->req.sack_hi); /* the resent hole at una is lost too */
	if (psn_diff(qp->req.sack_hi, qp->req.rtx_lim) > 0)
		qp->req.rtx_lim = qp->req.sack_hi;
}

/* Timer expiry: with SACKs from the peer, the first one since progress
 * resends what it has not reported; otherwise (and always for the QP's own
 * timeout) forget the SACKs and go back N, so that wrong SACKs cannot
 * stall a QP. */
static void timeout_recover(struct uroce_qp *qp, int hard)
{
	if (!hard && qp->sr_sack && !qp->req.sr_tried &&
	    psn_diff(qp->req.sack_hi, qp->req.una) > 0) {
		qp->req.sr_tried = 1;
		sack_sync(qp);
		rec_start(qp, qp->req.psn);
		return;
	}
	if (qp->sr_sack) {
		memset(qp->sr_sack, 0, SR_BITS / 8);
		qp->req.sack_base = qp->req.sack_hi = qp->req.una;
	}
	request_rewind(qp);
}

/* Sends packet psn of w once more (selective repeat, tail loss probe):
 * 0, or the completion status building it failed with. */
static int resend_pkt(struct uroce_engine *e, struct uroce_qp *qp, struct uroce_swqe *w,
		      uint32_t psn, int ackreq, const char *why)
{
	struct iovec iov[UROCE_MAX_SGE];
	struct uroce_txpkt tp;
	int st = build_data_pkt(qp, w, (uint32_t)psn_diff(psn, w->first_psn), &tp, iov);

	if (st)
		return st;
	tp.h.ackreq = ackreq;
	uroce_trace("rtx", "qpn=0x%x psn=0x%x %s=1", qp->qpn, psn, why);
	uroce_eng_send(e, qp, &tp);
	cc_sent(qp, uroce_eng_now(e), tp.paylen);
	qp->cnt->retrans_pkts++;
	if (psn == qp->req.rtt_psn)
		qp->req.rtt_start = 0; /* Karn */
	return 0;
}

/* Resends the PSNs in [rtx_next, rtx_lim) the responder has not reported. */
static void sr_resend(struct uroce_engine *e, struct uroce_qp *qp, int *budget)
{
	sack_sync(qp);
	if (psn_diff(qp->req.rtx_next, qp->req.una) < 0)
		qp->req.rtx_next = qp->req.una;
	while (*budget > 0 && psn_diff(qp->req.rtx_next, qp->req.rtx_lim) < 0 &&
	       psn_diff(qp->req.rtx_next, qp->req.psn) < 0 && cc_may_send(qp, uroce_eng_now(e))) {
		uint32_t psn = qp->req.rtx_next, idx;
		struct uroce_swqe *w;
		int st;

		if (sr_test(qp->sr_sack, psn)) {
			qp->req.rtx_next = psn_add(psn, 1);
			continue;
		}
		w = find_psn(qp, psn, &idx);
		if (!w || is_rd_atomic(w->opcode)) {
			/* READ and atomics go back the IBA way */
			request_rewind(qp);
			return;
		}
		/* as first sent: a message's last packet asks for the ACK */
		st = resend_pkt(e, qp, w, psn, psn == last_psn(w), "selective");
		if (st) {
			fail_oldest(qp, (enum ibv_wc_status)st);
			return;
		}
		qp->cnt->sr_retrans_pkts++;
		if (psn == qp->req.una) {
			qp->req.una_sent_at = uroce_eng_now(e);
			qp->req.rec_deadline = qp->req.una_sent_at + rec_rto(qp);
		}
		qp->req.rtx_next = psn_add(psn, 1);
		(*budget)--;
	}
}

/* RNR timer codes, IBA 9.7.5.2.8 table 45, in microseconds. */
static uint64_t rnr_timer_us(unsigned code)
{
	static const uint32_t t[32] = {
		655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
		2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920,
		122880, 163840, 245760, 327680, 491520,
	};

	return t[code & 31];
}

static void on_aeth(struct uroce_qp *qp, const struct wire_pkt *p, uint64_t now)
{
	uint8_t syn = p->syndrome;

	/* A NAK must name a PSN we have outstanding (una .. last sent):
	 * anything else answers nothing of ours and is dropped (9.7.5.1.x),
	 * so a forged or stale NAK cannot fail an idle QP. */
	if ((syn & AETH_TYPE_MASK) != AETH_ACK &&
	    (psn_diff(p->psn, qp->req.una) < 0 || psn_diff(p->psn, qp->req.hi_psn) >= 0)) {
		if (p->sack)
			qp->cnt->sr_sacks_rcvd++; /* overtaken by progress */
		else
			qp->cnt->drop_opcode++;
		return;
	}

	switch (syn & AETH_TYPE_MASK) {
	case AETH_ACK:
		qp->cnt->acks_rcvd++;
		uroce_trace("ack_rx", "qpn=0x%x psn=0x%x msn=%u", qp->qpn, p->psn, p->msn);
		if (ack_upto(qp, p->psn))
			progress_made(qp, now);
		return;
	case AETH_RNR_NAK:
		/* 9.7.5.2.8: everything before the NAKed PSN is done. */
		qp->cnt->rnr_naks_rcvd++;
		uroce_trace("rnr_rx", "qpn=0x%x psn=0x%x timer=%u", qp->qpn, p->psn, syn & 0x1f);
		if (psn_diff(p->psn, qp->req.una) > 0 && ack_upto(qp, psn_add(p->psn, PSN_MASK)))
			progress_made(qp, now);
		if (p->psn != qp->req.una)
			return;
		if (qp->req.rnr_left == 0) {
			qp->cnt->rnr_retry_exceeded++;
			fail_oldest(qp, IBV_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		if (qp->attr.rnr_retry != 7) /* 7 means retry forever (C9-129) */
			qp->req.rnr_left--;
		qp->req.rnr_until = now + rnr_timer_us(syn & 0x1f) * 1000ull;
		qp->req.deadline = 0;
		qp->req.fast_deadline = 0;
		request_rewind(qp);
		return;
	default:
		break;
	}
	if ((syn & AETH_TYPE_MASK) != AETH_NAK)
		return; /* reserved syndrome: ignore */
	uroce_trace("nak_rx", "qpn=0x%x psn=0x%x code=%u", qp->qpn, p->psn, syn & 0x1f);
	if (psn_diff(p->psn, qp->req.una) > 0 && ack_upto(qp, psn_add(p->psn, PSN_MASK)))
		progress_made(qp, now);
	switch (syn & 0x1f) {
	case NAK_PSN_SEQ_ERR:
		if (p->sack) {
			on_sack(qp, p, now);
			return;
		}
		qp->cnt->seq_naks_rcvd++;
		if (p->psn == qp->req.una) {
			window_loss(qp);
			request_rewind(qp);
		}
		return;
	case NAK_INVALID_REQ:
		qp->cnt->rem_inv_req_errs++;
		fail_oldest(qp, IBV_WC_REM_INV_REQ_ERR);
		return;
	case NAK_REM_ACCESS_ERR:
		qp->cnt->rem_access_errs++;
		fail_oldest(qp, IBV_WC_REM_ACCESS_ERR);
		return;
	case NAK_REM_OP_ERR:
		fail_oldest(qp, IBV_WC_REM_OP_ERR);
		return;
	default:
		fail_oldest(qp, IBV_WC_REM_INV_REQ_ERR);
		return;
	}
}

/* SEND/WRITE WQEs before the response's PSN are implicitly ACKed by a READ
 * response or atomic ACK (9.7.5.1.2). Returns the oldest unfinished WQE,
 * which must be the READ/atomic the response belongs to. */
static struct uroce_swqe *implied_ack(struct uroce_qp *qp, uint32_t psn)
{
	struct uroce_swqe *w;
	uint32_t idx;

	while ((w = oldest(qp, &idx)) && !is_rd_atomic(w->opcode)) {
		if (psn_diff(psn, last_psn(w)) <= 0)
			return NULL;
		qp->req.una = psn_add(last_psn(w), 1);
	}
	return w;
}

/* ---- READ responses out of order (docs/design.md, "Reordering") ----
 * The requester knows where every response PSN of a READ goes (its
 * offset is (PSN - first PSN) x PMTU), so a response after a gap is placed
 * at once and remembered in rd_got; the READ completes, in order, once
 * the gap fills. The gap is reported (going back to the first missing
 * response, 9.7.5.1.? implied NAK) only once gap_after responses came
 * after it or it is gap_wait_ns old, as the responder does for requests. */

/* A response for the READ w, ahead of where w is. 1 if placed (or already). */
static int rd_place_ahead(struct uroce_qp *qp, struct uroce_swqe *w, const struct wire_pkt *p)
{
	uint32_t off = (uint32_t)psn_diff(p->psn, w->first_psn) * qp->pmtu;

	if (psn_diff(p->psn, qp->req.una) >= (int32_t)SR_BITS || !qp->gap_after)
		return 0;
	if (!qp->rd_got && !(qp->rd_got = calloc(SR_BITS / 64, sizeof(uint64_t))))
		return 0;
	if (sr_test(qp->rd_got, p->psn)) {
		qp->cnt->dup_responses++;
		return 1;
	}
	/* checked as in order; one that fails waits for its turn to fail */
	if (off + p->paylen > w->length ||
	    (p->psn != last_psn(w) && p->paylen != qp->pmtu) ||
	    (p->psn == last_psn(w) && off + p->paylen != w->length) ||
	    scatter(qp, w, off, p->payload, p->paylen))
		return 0;
	sr_set(qp->rd_got, p->psn);
	qp->cnt->rd_placed_ahead++;
	return 1;
}

/* The response at psn of w is taken: one that ends a READ request (its
 * LAST or ONLY; requests end at fixed chunk boundaries) retires it. */
static void rd_took(struct uroce_qp *qp, const struct uroce_swqe *w, uint32_t psn)
{
	uint32_t k = (uint32_t)psn_diff(psn, w->first_psn);

	if ((k % READ_CHUNK_PKTS == READ_CHUNK_PKTS - 1 || psn == last_psn(w)) && qp->req.rd_out)
		qp->req.rd_out--;
}

/* w's response at resp_next was just taken: moves over those placed
 * ahead; una follows. */
static void rd_advance(struct uroce_qp *qp, struct uroce_swqe *w)
{
	while (qp->rd_got && psn_diff(w->resp_next, last_psn(w)) <= 0 &&
	       sr_test(qp->rd_got, w->resp_next)) {
		sr_clear(qp->rd_got, w->resp_next);
		rd_took(qp, w, w->resp_next);
		w->resp_next = psn_add(w->resp_next, 1);
	}
	qp->req.una = w->resp_next;
	qp->req.gap_psn = PSN_MASK + 1;
	qp->req.rd_gap_start = 0;
}

/* The oldest READ or atomic not done, or NULL. */
static struct uroce_swqe *rd_oldest(struct uroce_qp *qp)
{
	uint32_t t = atomic_load_explicit(&qp->sq_tail, memory_order_relaxed);
	uint32_t head = atomic_load_explicit(&qp->sq_head, memory_order_acquire);

	for (; t != head; t++) {
		struct uroce_swqe *w = sqe(qp, t);

		if (!(w->flags & SWQE_ASSIGNED))
			return NULL;
		if (is_rd_atomic(w->opcode) && !wqe_done(qp, w))
			return w;
	}
	return NULL;
}

/* A READ done: the next one may have its first responses placed already. */
static void rd_catch_up(struct uroce_qp *qp)
{
	struct uroce_swqe *w;

	while (qp->rd_got && (w = rd_oldest(qp)) && w->opcode == IBV_WR_RDMA_READ &&
	       sr_test(qp->rd_got, w->resp_next)) {
		implied_ack(qp, w->resp_next); /* the SENDs and WRITEs before it are done */
		rd_advance(qp, w);
	}
}

/* Goes back to the first missing READ response (once per gap). */
static void rd_gap_report(struct uroce_qp *qp, uint32_t missing)
{
	qp->cnt->implied_naks++;
	qp->req.rd_gap_start = 0;
	if (!qp->req.rewind && qp->req.gap_psn != missing) {
		qp->req.gap_psn = missing;
		window_loss(qp);
		request_rewind(qp);
	}
}

static void on_read_resp(struct uroce_qp *qp, const struct wire_pkt *p, uint64_t now)
{
	uint32_t flags = wire_opcodes[p->opcode].flags, off, idx;
	struct uroce_swqe *w, *at;
	int st;

	if (flags & OPF_AETH && (p->syndrome & AETH_TYPE_MASK) != AETH_ACK) {
		on_aeth(qp, p, now);
		return;
	}
	w = implied_ack(qp, p->psn);
	if (!w || w->opcode != IBV_WR_RDMA_READ || psn_diff(p->psn, w->first_psn) < 0)
		return; /* stray or duplicate */
	if (p->psn != w->resp_next) {
		if (psn_diff(p->psn, w->resp_next) < 0) {
			qp->cnt->dup_responses++;
			return;
		}
		/* a gap: place it if it is a READ's, and wait a little */
		at = psn_diff(p->psn, last_psn(w)) <= 0 ? w : find_psn(qp, p->psn, &idx);
		if (at && at->opcode == IBV_WR_RDMA_READ && rd_place_ahead(qp, at, p)) {
			if (!qp->req.rd_gap_start) {
				qp->req.rd_gap_start = now | 1;
				qp->req.rd_gap_pkts = 0;
			}
			if (++qp->req.rd_gap_pkts < qp->gap_after)
				return; /* the time limit is uroce_req_timers' */
		}
		rd_gap_report(qp, w->resp_next);
		return;
	}
	if (psn_diff(p->psn, last_psn(w)) > 0)
		return; /* stray */
	off = (uint32_t)psn_diff(p->psn, w->first_psn) * qp->pmtu;
	if (off + p->paylen > w->length ||
	    (p->psn != last_psn(w) && p->paylen != qp->pmtu) ||
	    (p->psn == last_psn(w) && off + p->paylen != w->length)) {
		fail_oldest(qp, IBV_WC_BAD_RESP_ERR);
		return;
	}
	st = scatter(qp, w, off, p->payload, p->paylen);
	if (st) {
		fail_oldest(qp, (enum ibv_wc_status)st);
		return;
	}
	if (qp->rd_got)
		sr_clear(qp->rd_got, p->psn);
	rd_took(qp, w, p->psn);
	w->resp_next = psn_add(w->resp_next, 1);
	rd_advance(qp, w);
	rd_catch_up(qp);
	progress_made(qp, now);
}

static void on_atomic_ack(struct uroce_qp *qp, const struct wire_pkt *p, uint64_t now)
{
	struct uroce_swqe *w;
	uint8_t buf[8];
	int st;

	if ((p->syndrome & AETH_TYPE_MASK) != AETH_ACK) {
		on_aeth(qp, p, now);
		return;
	}
	w = implied_ack(qp, p->psn);
	if (!w || !is_rd_atomic(w->opcode) || w->opcode == IBV_WR_RDMA_READ ||
	    w->first_psn != p->psn)
		return;
	w->atomic_orig = p->orig;
	memcpy(buf, &p->orig, 8); /* host order, as ibv_post_send(3) returns it */
	st = scatter(qp, w, 0, buf, 8);
	if (st) {
		fail_oldest(qp, (enum ibv_wc_status)st);
		return;
	}
	qp->req.una = psn_add(p->psn, 1);
	if (qp->req.rd_out)
		qp->req.rd_out--;
	progress_made(qp, now);
}

void uroce_comp_rx(struct uroce_engine *e, struct uroce_qp *qp, const struct wire_pkt *p,
		   uint64_t now)
{
	(void)e;
	if (qp->eng_state != IBV_QPS_RTS && qp->eng_state != IBV_QPS_SQD &&
	    qp->eng_state != IBV_QPS_SQE) {
		qp->cnt->drop_state++;
		return;
	}
	qp->req.heard = 1;
	switch (p->opcode) {
	case OP_ACK:
		on_aeth(qp, p, now);
		break;
	case OP_READ_RESP_FIRST:
	case OP_READ_RESP_MIDDLE:
	case OP_READ_RESP_LAST:
	case OP_READ_RESP_ONLY:
		on_read_resp(qp, p, now);
		break;
	case OP_ATOMIC_ACK:
		on_atomic_ack(qp, p, now);
		break;
	default:
		qp->cnt->drop_opcode++;
		return;
	}
	if (qp->eng_state != IBV_QPS_ERR)
		retire(qp);
}

/* Tail loss probe (RFC 8985, section 7, in IBA terms): the early timer's
 * first expiry since progress resends only the last packet sent, with
 * AckReq. The responder's answer says what it has: a duplicate gets an
 * ACK of everything (C9-101), a PSN after a gap gets a sequence NAK naming
 * the gap (or a SACK), and a lost last packet is simply delivered. So a
 * queue that delayed the ACKs (many QPs sharing one engine, a loaded
 * host) costs one packet instead of a resent window that the responder
 * must discard. Not for READ or atomics, whose requests are re-executed.
 * 0 if the probe went out. */
static int tail_probe(struct uroce_engine *e, struct uroce_qp *qp)
{
	uint32_t psn = psn_add(qp->req.psn, PSN_MASK), idx; /* the last PSN sent */
	struct uroce_swqe *w;

	if (qp->req.in_rec || qp->req.rewind)
		return -1;
	w = find_psn(qp, psn, &idx);
	if (!w || is_rd_atomic(w->opcode) || !cc_may_send(qp, uroce_eng_now(e)) ||
	    resend_pkt(e, qp, w, psn, 1, "probe"))
		return -1;
	qp->cnt->tail_probes++;
	return 0;
}

/* The early timer's next interval: twice the last, at most 500 ms and
 * the QP's own timeout. */
static void fast_backoff(struct uroce_qp *qp, uint64_t now)
{
	qp->req.fast_cur_ns *= 2;
	if (qp->req.fast_cur_ns > 500000000ull)
		qp->req.fast_cur_ns = 500000000ull;
	if (qp->req.timeout_ns && qp->req.fast_cur_ns > qp->req.timeout_ns)
		qp->req.fast_cur_ns = qp->req.timeout_ns;
	qp->req.fast_deadline = now + qp->req.fast_cur_ns;
}

void uroce_req_timers(struct uroce_engine *e, struct uroce_qp *qp, uint64_t now)
{
	if (qp->eng_state != IBV_QPS_RTS && qp->eng_state != IBV_QPS_SQD)
		return;
	if (qp->req.rnr_until && now >= qp->req.rnr_until)
		qp->req.rnr_until = 0;
	if (psn_diff(qp->req.psn, qp->req.una) <= 0) {
		qp->req.deadline = 0;
		qp->req.fast_deadline = 0;
		qp->req.rec_deadline = 0;
		return;
	}
	if (qp->req.rd_gap_start && now >= qp->req.rd_gap_start + qp->gap_wait_ns) {
		struct uroce_swqe *w = rd_oldest(qp);

		/* READ responses after a gap, and the gap did not fill */
		qp->req.rd_gap_start = 0;
		if (w && w->opcode == IBV_WR_RDMA_READ)
			rd_gap_report(qp, w->resp_next);
	}
	if (qp->req.rec_deadline && now >= qp->req.rec_deadline) {
		/* Selective repeat: the resent hole at una went unanswered for
		 * a round-trip timeout: resend the holes again (no retry). */
		qp->req.rec_deadline = 0;
		if (qp->req.in_rec)
			rec_start(qp, qp->req.psn);
	}
	if (qp->req.deadline && now >= qp->req.deadline &&
	    uroce_eng_lag_ns(e) * LAG_TURNS > qp->req.timeout_ns &&
	    qp->req.deferred < LAG_DEFERS) {
		/* The engine's own turns lately took more than a third of the
		 * timeout: an answer needs about three turns (ours to send,
		 * the peer's, ours to read; more when another process on this
		 * host forwards it), so expiry says nothing about the peer.
		 * On 2 cores, 4 processes posting 8,000 WRITEs each made
		 * turns of 50-110 ms against a 67 ms timeout; every turn
		 * charged every QP a retry and resent its window, the resends
		 * made the turns longer still, and QPs of live peers failed
		 * with RETRY_EXC_ERR. Wait another timeout instead, sending
		 * nothing; a frozen peer still fails, LAG_DEFERS timeouts
		 * later. */
		qp->req.deferred++;
		qp->cnt->timeouts_deferred++;
		qp->req.deadline = now + qp->req.timeout_ns;
		if (qp->req.fast_deadline && now >= qp->req.fast_deadline)
			qp->req.fast_deadline = now + qp->req.fast_cur_ns;
	} else if (qp->req.deadline && now >= qp->req.deadline) {
		/* Local ACK timeout (C9-140): retry_cnt retries, then fail.
		 * A timeout after which the peer QP was heard from (an ACK,
		 * NAK, response or CNP for this QP, even one that advanced
		 * nothing) is not charged, TIMEOUT_EXCUSES times at most per
		 * stall: the peer is alive and its port congested (incast
		 * without PFC, where the head of a resent window can be tail-
		 * dropped time after time), and IBA's retry count stands for
		 * a peer that answers nothing. A dead or frozen peer says
		 * nothing, so its failure timing is the attributes' own. */
		qp->cnt->timeouts++;
		if (qp->req.heard && qp->req.excused < TIMEOUT_EXCUSES) {
			qp->req.excused++;
			qp->cnt->timeouts_excused++;
		} else if (qp->req.retry_left <= 0) {
			qp->cnt->retry_exceeded++;
			fail_oldest(qp, IBV_WC_RETRY_EXC_ERR);
			return;
		} else {
			qp->req.retry_left--;
		}
		qp->req.heard = 0;
		window_timeout(qp);
		qp->req.deadline = now + qp->req.timeout_ns;
		qp->req.fast_deadline = now + qp->req.fast_cur_ns;
		timeout_recover(qp, 1);
	} else if (qp->req.fast_deadline && now >= qp->req.fast_deadline) {
		/* Early retransmission before the QP's own timeout: costs no
		 * retry, so the failure timing the attributes imply holds. It
		 * backs off exponentially, so a slow peer (a loaded host) is
		 * not buried under retransmissions it must discard. The
		 * first expiry since progress sends one probe (tail_probe);
		 * the next goes back. An interval shorter than LAG_TURNS of
		 * the engine's recent turns only backs off, sending nothing
		 * (as the QP's own timeout above). */
		int probe = 0;

		if (uroce_eng_lag_ns(e) * LAG_TURNS > qp->req.fast_cur_ns) {
			fast_backoff(qp, now);
			return;
		}
		probe = !qp->req.probed && !tail_probe(e, qp);
		if (probe)
			qp->req.probed = 1;
		else
			window_loss(qp);
		fast_backoff(qp, now);
		if (probe)
			return;
		qp->req.gap_psn = PSN_MASK + 1;
		timeout_recover(qp, 0);
	}
}

/* Builds packet k of a SEND or WRITE WQE. Returns 0 or a completion
 * status. */
static int build_data_pkt(struct uroce_qp *qp, struct uroce_swqe *w, uint32_t k,
			  struct uroce_txpkt *tp, struct iovec *iov)
{
	int is_write = w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	int imm = w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	int inv = w->opcode == IBV_WR_SEND_WITH_INV;
	uint32_t off = k * qp->pmtu;
	uint32_t len = MIN(qp->pmtu, w->length - off);
	int first = k == 0, last = k == w->npkts - 1;
	int niov = 0, st;

	memset(tp, 0, sizeof(*tp));
	if (is_write) {
		tp->h.opcode = first && last ? (imm ? OP_WRITE_ONLY_IMM : OP_WRITE_ONLY)
			     : first	    ? OP_WRITE_FIRST
			     : last	    ? (imm ? OP_WRITE_LAST_IMM : OP_WRITE_LAST)
					    : OP_WRITE_MIDDLE;
		if (first) {
			tp->h.va = w->remote_addr;
			tp->h.rkey = w->rkey;
			tp->h.dma_len = w->length;
		}
	} else {
		tp->h.opcode = first && last ? (imm ? OP_SEND_ONLY_IMM
						    : inv ? OP_SEND_ONLY_INV : OP_SEND_ONLY)
			     : first ? OP_SEND_FIRST
			     : last  ? (imm ? OP_SEND_LAST_IMM
					    : inv ? OP_SEND_LAST_INV : OP_SEND_LAST)
				     : OP_SEND_MIDDLE;
	}
	tp->h.pkey = DEFAULT_PKEY;
	tp->h.xrc_srqn = w->xrc_srqn;
	tp->h.dqpn = qp->dest_qpn;
	tp->h.psn = psn_add(w->first_psn, k);
	tp->h.se = last && (w->flags & SWQE_SOLICITED);
	if (last)
		tp->h.imm_be = inv ? htonl(w->rkey) : w->imm_be;
	st = uroce_req_gather(qp, w, off, len, iov, &niov);
	if (st)
		return st;
	tp->pay = iov;
	tp->npay = niov;
	tp->paylen = len;
	return 0;
}

static void send_wqe_packets(struct uroce_engine *e, struct uroce_qp *qp, struct uroce_swqe *w,
			     int *budget)
{
	while (*budget > 0 && qp->req.cur_pkt < w->npkts &&
	       psn_diff(qp->req.psn, qp->req.una) < (int32_t)qp->req.window &&
	       cc_may_send(qp, uroce_eng_now(e))) {
		uint32_t k = qp->req.cur_pkt;
		struct iovec iov[UROCE_MAX_SGE];
		struct uroce_txpkt tp;
		int st = build_data_pkt(qp, w, k, &tp, iov);

		if (st) {
			fail_oldest(qp, (enum ibv_wc_status)st);
			return;
		}
		if (qp->type == IBV_QPT_UC) {
			/* no AckReq on UC: nothing answers */
		} else if (k == w->npkts - 1 || ++qp->req.pkts_since_ackreq >= ACKREQ_EVERY) {
			tp.h.ackreq = 1;
			qp->req.pkts_since_ackreq = 0;
		}
		if (tp.h.ackreq && !qp->req.rtt_start && qp->req.psn == qp->req.hi_psn) {
			qp->req.rtt_start = uroce_eng_now(e) ? uroce_eng_now(e) : 1;
			qp->req.rtt_psn = qp->req.psn;
		}
		uroce_eng_send(e, qp, &tp);
		cc_sent(qp, uroce_eng_now(e), tp.paylen);
		if (qp->req.psn == qp->req.una)
			qp->req.una_sent_at = uroce_eng_now(e);
		qp->req.psn = psn_add(qp->req.psn, 1);
		if (psn_diff(qp->req.psn, qp->req.hi_psn) > 0)
			qp->req.hi_psn = qp->req.psn;
		qp->req.cur_pkt++;
		(*budget)--;
	}
}

static int send_rd_atomic(struct uroce_engine *e, struct uroce_qp *qp, struct uroce_swqe *w)
{
	struct uroce_txpkt tp;

	if (qp->req.rd_out >= qp->req.max_rd)
		return 0;
	memset(&tp, 0, sizeof(tp));
	tp.h.pkey = DEFAULT_PKEY;
	tp.h.dqpn = qp->dest_qpn;
	tp.h.psn = qp->req.psn;
	tp.h.ackreq = 1;
	tp.h.rkey = w->rkey;
	tp.h.xrc_srqn = w->xrc_srqn;
	if (w->opcode == IBV_WR_RDMA_READ) {
		/* Chunks keep fixed boundaries, so a READ retried from the
		 * middle of a chunk asks for no PSN the responder has not
		 * seen: a duplicate must stay inside the original request. */
		uint32_t k = qp->req.cur_pkt;
		uint32_t n = MIN(w->npkts - k, READ_CHUNK_PKTS - k % READ_CHUNK_PKTS);
		uint32_t off = k * qp->pmtu;

		if (psn_diff(qp->req.psn, qp->req.una) > 0 &&
		    psn_diff(psn_add(qp->req.psn, n), qp->req.una) > (int32_t)qp->req.window)
			return 0;
		tp.h.opcode = OP_READ_REQ;
		tp.h.va = w->remote_addr + off;
		tp.h.dma_len = MIN(w->length - off, n * qp->pmtu);
		uroce_eng_send(e, qp, &tp);
		qp->req.psn = psn_add(qp->req.psn, n);
		qp->req.cur_pkt += n;
		if (psn_diff(qp->req.psn, qp->req.hi_psn) > 0)
			qp->req.hi_psn = qp->req.psn;
		if (psn_diff(qp->req.psn, w->req_hi) > 0)
			w->req_hi = qp->req.psn;
	} else {
		tp.h.opcode = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? OP_CMP_SWAP : OP_FETCH_ADD;
		tp.h.va = w->remote_addr;
		tp.h.swap_add = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->swap : w->compare_add;
		tp.h.compare = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->compare_add : 0;
		uroce_eng_send(e, qp, &tp);
		qp->req.psn = psn_add(qp->req.psn, 1);
		qp->req.cur_pkt++;
		if (psn_diff(qp->req.psn, qp->req.hi_psn) > 0)
			qp->req.hi_psn = qp->req.psn;
	}
	qp->req.rd_out++;
	return 1;
}

void uroce_req_progress(struct uroce_engine *e, struct uroce_qp *qp, uint64_t now)
{
	uint32_t head;
	int budget = 128;

	if (qp->eng_state == IBV_QPS_ERR) {
		uroce_qp_flush(qp);
		return;
	}
	if (qp->eng_state != IBV_QPS_RTS)
		return; /* SQD: nothing new starts (IBA 10.3.1); SQE: stopped */
	retire(qp);
	qp->req.cc.pace_until = 0; /* set again if the pacer holds a packet */
	if (unlikely(!qp->req.cc.ready) && cc_cfg(qp))
		uroce_cc_init(&qp->req.cc, cc_cfg(qp), now);
	if (qp->req.cc.limited) {
		struct uroce_cc_stats st = { 0, 0 };

		uroce_cc_advance(&qp->req.cc, uroce_cc_config(), now, &st);
		cc_count(qp, &st);
	}
	if (qp->req.rnr_until)
		return;
	if (qp->req.rewind)
		do_rewind(qp);
	if (qp->req.in_rec) {
		sr_resend(e, qp, &budget);
		if (qp->eng_state != IBV_QPS_RTS)
			return;
		if (qp->req.rewind)
			do_rewind(qp);
	}
	head = atomic_load_explicit(&qp->sq_head, memory_order_acquire);
	while (qp->req.cur != head && budget > 0 && qp->eng_state == IBV_QPS_RTS) {
		struct uroce_swqe *w = sqe(qp, qp->req.cur);
		uint32_t before = qp->req.psn;

		if (!(w->flags & SWQE_ASSIGNED)) {
			/* Fence (ibv_post_send(3)): wait for prior READs/atomics. */
			if ((w->flags & SWQE_FENCE) && oldest(qp, NULL))
				break;
			if (is_rd_atomic(w->opcode) && qp->req.rd_out >= qp->req.max_rd)
				break;
			w->first_psn = qp->req.psn;
			w->npkts = (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
				    w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || !w->length)
					   ? 1
					   : (w->length + qp->pmtu - 1) / qp->pmtu;
			w->resp_next = w->first_psn;
			w->req_hi = w->first_psn;
			if (!(w->flags & SWQE_KEYED))
				w->stage_key = ++qp->stage.next_key;
			w->flags |= SWQE_ASSIGNED;
			uroce_trace("wqe_take", "qpn=0x%x wr_id=%llu first_psn=0x%x packets=%u len=%u",
				    qp->qpn, (unsigned long long)w->wr_id, w->first_psn, w->npkts,
				    w->length);
			qp->req.cur_pkt = 0;
		}
		if (is_rd_atomic(w->opcode)) {
			if (!send_rd_atomic(e, qp, w))
				break;
			budget--;
		} else {
			send_wqe_packets(e, qp, w, &budget);
			if (qp->eng_state != IBV_QPS_RTS)
				return;
		}
		if (qp->req.psn != before && uroce_qp_waits_acks(qp))
			arm_timers(qp, now);
		if (qp->req.cur_pkt < w->npkts)
			break; /* window or budget exhausted */
		qp->req.cur++;
		qp->req.cur_pkt = 0;
	}
	if (qp->type == IBV_QPT_UC && psn_diff(qp->req.psn, qp->req.una) > 0) {
		/* UC (IBA 9.8.2): nothing is acknowledged; a WQE is done once
		 * its packets have left, and only then may its completion let
		 * the application touch the buffers again. */
		uroce_eng_flush(e);
		qp->req.una = qp->req.psn;
		retire(qp);
	}
}
