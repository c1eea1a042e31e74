/* Responder (IBA 9.7.4-9.7.5, C9-* as cited): PSN checks, placement of
 * SENDs and WRITEs, READ responses, atomics, ACK/NAK generation. */
#include "engine.h"
#include "trace.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#define ACK_DELAY_NS 20000   /* an unrequested ACK goes out at the latest after this */
#define ACK_EVERY 64         /* or after this many unacknowledged packets */
#define ACK_HOLD_NS 200000   /* a requested ACK held over an application turn, at most: if no turn follows, the parked engine thread wakes for it */
#define RD_BUDGET 64         /* READ response packets per QP per engine pass */

int uroce_resp_busy(const struct uroce_qp *qp)
{
	return qp->resp.rd_len || qp->resp.ack_now || qp->resp.unacked ||
	       uroce_resp_deadline(qp);
}

/* ---- reordering (docs/design.md, "Reordering") ----
 * Fabrics reorder (ECMP, spraying, adaptive routing). A packet after a gap
 * at ePSN is kept, a copy in a ring by PSN, and executed when the gap
 * fills, exactly as if it had arrived in order: the PSN, opcode sequence
 * and every other check run then (9.7.4, C9-94). The gap is reported (the
 * one sequence NAK per gap of C9-110, or a SACK in selective repeat) only
 * once gap_after packets came after it or it is gap_wait_ns old, so that
 * a packet merely overtaken costs no retransmission; a lost one costs at
 * most the resend of what could not be kept. IBA leaves when the NAK goes
 * to the responder; a late NAK reads, to any requester, as a NAK that
 * travelled slowly. */
#define OOO_SLOTS 64                 /* packets after a gap, per QP */
#define OOO_BYTES_MAX (64u << 20)    /* in all QPs of the process */

struct uroce_ooo_pkt {
	struct wire_pkt p;           /* payload points at data */
	uint8_t data[];
};

struct uroce_ooo {
	uint32_t n;
	struct uroce_ooo_pkt *slot[OOO_SLOTS]; /* by PSN % OOO_SLOTS */
};

static _Atomic size_t ooo_bytes;

/* A whole number up to max from the environment, else def (a bad value
 * is named once and ignored). */
static unsigned long gap_env(const char *name, unsigned long max, unsigned long def)
{
	static int warned;
	const char *s = getenv(name);
	char *end;
	unsigned long v;

	if (!s || !*s)
		return def;
	v = strtoul(s, &end, 0);
	if (*end || v > max || *s == '-') {
		if (!warned) {
			warned = 1;
			uroce_warn("%s=%s: want a whole number up to %lu; using %lu", name, s, max,
				   def);
		}
		return def;
	}
	return v;
}

void uroce_gap_params(uint32_t *pkts, uint64_t *ns)
{
	*pkts = (uint32_t)gap_env("UROCE_GAP_PKTS", OOO_SLOTS, OOO_SLOTS);
	*ns = (uint64_t)gap_env("UROCE_GAP_US", 1000000, 200) * 1000;
}

static void ooo_put(struct uroce_ooo *o, uint32_t i)
{
	struct uroce_ooo_pkt *k = o->slot[i];

	atomic_fetch_sub(&ooo_bytes, sizeof(*k) + k->p.paylen);
	free(k);
	o->slot[i] = NULL;
	o->n--;
}

void uroce_resp_ooo_free(struct uroce_qp *qp)
{
	struct uroce_ooo *o = qp->ooo;

	if (!o)
		return;
	for (uint32_t i = 0; i < OOO_SLOTS && o->n; i++)
		if (o->slot[i])
			ooo_put(o, i);
	free(o);
	qp->ooo = NULL;
}

/* Keeps a copy of a packet d PSNs after ePSN. 1 if kept (or already). */
static int ooo_hold(struct uroce_qp *qp, const struct wire_pkt *p, int32_t d)
{
	struct uroce_ooo *o = qp->ooo;
	struct uroce_ooo_pkt *k;
	uint32_t i = p->psn % OOO_SLOTS;
	size_t sz = sizeof(*k) + p->paylen;

	if (d >= OOO_SLOTS || !qp->gap_after)
		return 0;
	if (!o && !(o = qp->ooo = calloc(1, sizeof(*o))))
		return 0;
	if (o->slot[i]) {
		if (o->slot[i]->p.psn == p->psn) {
			qp->cnt->dup_requests++;
			return 1;
		}
		ooo_put(o, i); /* one of an older gap the requester went back over */
	}
	if (atomic_fetch_add(&ooo_bytes, sz) + sz > OOO_BYTES_MAX ||
	    !(k = malloc(sz))) {
		atomic_fetch_sub(&ooo_bytes, sz);
		qp->cnt->ooo_full++;
		return 0;
	}
	k->p = *p;
	memcpy(k->data, p->payload, p->paylen);
	k->p.payload = k->data;
	o->slot[i] = k;
	o->n++;
	qp->cnt->ooo_held++;
	return 1;
}

uint64_t uroce_resp_deadline(const struct uroce_qp *qp)
{
	if (!qp->resp.gap_start || qp->resp.nak_sent || qp->resp.gap_sacked)
		return 0;
	return qp->resp.gap_start + qp->gap_wait_ns;
}

/* Whether the gap at ePSN is to be reported now. */
static int gap_due(const struct uroce_qp *qp, uint64_t now)
{
	return !qp->resp.gap_start || qp->resp.gap_pkts >= qp->gap_after ||
	       now >= qp->resp.gap_start + qp->gap_wait_ns;
}

/* The PSN an ACK may cover: not beyond READ responses not yet sent, so that
 * ACKs and responses reach the requester in execution order. */
static uint32_t ack_psn(const struct uroce_qp *qp)
{
	if (qp->resp.rd_len) {
		const struct uroce_rd_res *r = &qp->resp.rd[qp->resp.rd_head];

		return psn_add(r->psn + r->sent / qp->pmtu, PSN_MASK);
	}
	return psn_add(qp->resp.epsn, PSN_MASK);
}

static void send_aeth_sack(struct uroce_engine *e, struct uroce_qp *qp, uint8_t syndrome,
			   uint32_t psn, int sack, uint32_t msn)
{
	struct uroce_txpkt tp;

	/* An ACK says the data is placed: GPU placements go out first. */
	if (uroce_place_dirty(qp) && uroce_place_flush(qp) && (syndrome & AETH_TYPE_MASK) == AETH_ACK)
		syndrome = AETH_NAK | NAK_REM_OP_ERR;

	memset(&tp, 0, sizeof(tp));
	tp.h.opcode = OP_ACK;
	tp.h.pkey = DEFAULT_PKEY;
	tp.h.dqpn = qp->dest_qpn;
	tp.h.psn = psn;
	tp.h.syndrome = syndrome;
	tp.h.msn = msn;
	tp.h.sack = (uint8_t)sack;
	uroce_eng_send(e, qp, &tp);
	qp->cnt->acks_sent++;
}

static void send_aeth(struct uroce_engine *e, struct uroce_qp *qp, uint8_t syndrome, uint32_t psn)
{
	send_aeth_sack(e, qp, syndrome, psn, 0, qp->resp.msn);
}

static void sack_flush(struct uroce_engine *e, struct uroce_qp *qp);
static void report_gap(struct uroce_engine *e, struct uroce_qp *qp);

void uroce_resp_flush_ack(struct uroce_engine *e, struct uroce_qp *qp, uint64_t now)
{
	uint64_t gap = uroce_resp_deadline(qp);

	if (gap && now >= gap)
		report_gap(e, qp); /* it did not fill in time */
	if (qp->resp.sack_due)
		sack_flush(e, qp);
	if (!qp->resp.ack_now && !(qp->resp.unacked && now >= qp->resp.ack_deadline))
		return;
	if (!uroce_qp_takes_packets(qp))
		return;
	/* In an application thread's turn the completion this ACK goes with
	 * is read only after the turn, and its reply (a ping-pong's next
	 * SEND) is posted right after: the ACK waits one turn and leaves in
	 * the same system call, after that reply. An ACK covers every PSN
	 * up to its own, so responders coalesce them (IBA 9.7.5.1.1); if no
	 * turn follows, the engine thread sends it when it next wakes, by
	 * ACK_HOLD_NS (next_deadline, wake_for_deadline). UINT64_MAX:
	 * a caller that needs it out now (ordering before an atomic's). */
	if (qp->resp.ack_now && now != UINT64_MAX) {
		uint64_t turn = uroce_eng_app_turn_id(e);

		if (turn && (!qp->resp.ack_held || qp->resp.ack_held == turn)) {
			if (!qp->resp.ack_held)
				qp->cnt->acks_held++;
			qp->resp.ack_held = turn;
			if (!qp->resp.ack_deadline || qp->resp.ack_deadline > now + ACK_HOLD_NS)
				qp->resp.ack_deadline = now + ACK_HOLD_NS;
			return;
		}
		/* The engine thread's turn: a completed receive is read by a
		 * polling application within a microsecond or two, and a
		 * ping-pong's reply follows. The ACK waits for it, up to
		 * UROCE_REPLY_HOLD_US while the engine spins anyway, and leaves
		 * in the reply's system call; the requester then reads both
		 * at once. */
		if (!turn && qp->resp.answer) {
			uint64_t hold = qp->resp.hold_until ? 0 : uroce_eng_reply_hold_ns(e);

			if (hold) {
				qp->resp.hold_until = now + hold;
				qp->cnt->acks_held++;
				if (!qp->resp.ack_deadline || qp->resp.ack_deadline > qp->resp.hold_until)
					qp->resp.ack_deadline = qp->resp.hold_until;
			}
			if (qp->resp.hold_until && now < qp->resp.hold_until &&
			    uroce_eng_reply_hold_ns(e))
				return;
		}
	}
	/* An ACK says the data is placed: with payload on its way to the GPU
	 * it waits, without blocking the engine, until the copies are done
	 * (an error shows as a NAK from send_aeth). */
	if (uroce_place_dirty(qp) && !uroce_place_kick(qp) && uroce_place_pending(qp)) {
		qp->cnt->gpu_acks_deferred++;
		qp->resp.ack_now = 1;
		qp->resp.ack_deadline = now + 2000;
		return;
	}
	send_aeth(e, qp, AETH_ACK | AETH_ACK_NO_CREDIT, ack_psn(qp));
	qp->resp.ack_now = 0;
	qp->resp.ack_held = 0;
	qp->resp.answer = 0;
	qp->resp.hold_until = 0;
	qp->resp.unacked = 0;
	qp->resp.ack_deadline = 0;
}

/* A NAK that ends the responder's part (Class B/C errors, 9.9.3.1): the
 * requester fails its WQE; here the QP enters the error state too. */
static void nak_fatal(struct uroce_engine *e, struct uroce_qp *qp, uint8_t code,
		      enum ibv_wc_status local)
{
	/* the reason stays visible: the application sees only flushes */
	uroce_info("QP 0x%x: responder error at PSN 0x%06x (NAK code %u, receive status %d); "
		   "the QP enters the error state",
		   qp->qpn, qp->resp.epsn, code, (int)local);
	send_aeth(e, qp, AETH_NAK | code, qp->resp.epsn);
	if (qp->resp.have_rwqe) {
		/* every receive WR completes exactly once */
		struct ibv_wc wc = {
			.wr_id = qp->resp.rwqe_id,
			.status = local ? local : IBV_WC_WR_FLUSH_ERR,
			.opcode = IBV_WC_RECV,
			.qp_num = qp->qpn,
		};

		uroce_cq_push(qp->rcq, &wc, 1);
		qp->resp.have_rwqe = 0;
	}
	uroce_eng_flush(e);
	uroce_qp_to_error(qp);
	uroce_async_event(qp->ctx, IBV_EVENT_QP_FATAL, &qp->qpx.qp_base);
}

/* Remote access check: key, PD, bounds, rights of the MR and of the QP
 * (C9-88/C9-89). Zero-length accesses need no valid key: they pass with
 * *mrp NULL. Returns 1 if allowed. */
static int remote_ok(struct uroce_qp *qp, uint32_t rkey, uint64_t va, uint32_t len, int need,
		     struct uroce_mr **mrp)
{
	struct uroce_mr *mr;

	if (mrp)
		*mrp = NULL;
	if (!len)
		return 1;
	if ((qp->attr.qp_access_flags & (unsigned)need) != (unsigned)need)
		return 0;
	mr = uroce_mr_lookup(&qp->ctx->mrs, rkey);
	if (!mr || mr->pd != qp->pd || !uroce_mr_ok(mr, va, len, need))
		return 0;
	if (mrp)
		*mrp = mr;
	return 1;
}

int uroce_resp_take_rwqe(struct uroce_qp *qp)
{
	struct uroce_rq *rq = qp->srq ? &qp->srq->rq : &qp->rq;
	struct uroce_rwqe *r;

	if (qp->srq)
		pthread_spin_lock(&rq->take_lock);
	r = uroce_rq_peek(rq);
	if (!r) {
		if (qp->srq)
			pthread_spin_unlock(&rq->take_lock);
		return 0;
	}
	qp->resp.rwqe_id = r->wr_id;
	qp->resp.rwqe_nsge = r->num_sge;
	qp->resp.rwqe_len = r->length;
	memcpy(qp->resp.rwqe_sge, r->sge, sizeof(r->sge[0]) * r->num_sge);
	uroce_rq_pop(rq);
	if (qp->srq)
		pthread_spin_unlock(&rq->take_lock);
	qp->resp.have_rwqe = 1;
	if (qp->srq && qp->srq->limit && atomic_load(&qp->srq->armed_limit)) {
		uint32_t left = atomic_load(&rq->head) - atomic_load(&rq->tail);

		if (left < qp->srq->limit && atomic_exchange(&qp->srq->armed_limit, 0))
			uroce_async_event(qp->ctx, IBV_EVENT_SRQ_LIMIT_REACHED, &qp->srq->ibsrq);
	}
	return 1;
}

/* Scatters a SEND payload into the receive WQE at msg_off. */
enum ibv_wc_status uroce_resp_place_send(struct uroce_qp *qp, const uint8_t *src, uint32_t len)
{
	uint32_t off = qp->resp.msg_off;

	if ((uint64_t)off + len > qp->resp.rwqe_len)
		return IBV_WC_LOC_LEN_ERR;
	for (uint32_t i = 0; i < qp->resp.rwqe_nsge && len; i++) {
		struct ibv_sge *s = &qp->resp.rwqe_sge[i];
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
	return IBV_WC_SUCCESS;
}

static void complete_recv(struct uroce_qp *qp, const struct wire_pkt *p, enum ibv_wc_opcode op,
			  uint32_t byte_len)
{
	uint32_t f = wire_opcodes[p->opcode].flags;
	struct ibv_wc wc = {
		.wr_id = qp->resp.rwqe_id,
		.status = IBV_WC_SUCCESS,
		.opcode = op,
		.byte_len = byte_len,
		.qp_num = qp->qpn,
		.src_qp = qp->dest_qpn,
		.pkey_index = 0,
	};

	if (f & OPF_IMM) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = p->imm_be;
	} else if (f & OPF_IETH) {
		wc.wc_flags |= IBV_WC_WITH_INV;
		wc.invalidated_rkey = ntohl(p->imm_be);
	}
	if (uroce_place_dirty(qp) && uroce_place_flush(qp))
		wc.status = IBV_WC_LOC_PROT_ERR;
	uroce_trace("cqe", "qpn=0x%x wr_id=%llu status=0 opcode=%d byte_len=%u", qp->qpn,
		    (unsigned long long)wc.wr_id, (int)op, byte_len);
	if (uroce_cq_push(qp->rcq, &wc, p->se) < 0)
		uroce_async_event(qp->ctx, IBV_EVENT_CQ_ERR, &qp->rcq->ibcq);
	qp->resp.have_rwqe = 0;
	qp->resp.answer = 1;
}

/* dup: the re-execution of a duplicate READ (C9-104) */
static void queue_read(struct uroce_qp *qp, const struct wire_pkt *p, int dup)
{
	uint32_t cap = (uint32_t)ARRAY_SIZE(qp->resp.rd);
	struct uroce_rd_res *r = &qp->resp.rd[(qp->resp.rd_head + qp->resp.rd_len) % cap];

	r->psn = p->psn;
	r->rkey = p->rkey;
	r->va = p->va;
	r->len = p->dma_len;
	r->end = p->dma_len;
	r->sent = 0;
	r->stage_key = ++qp->stage.next_key;
	r->dup = dup;
	qp->resp.rd_len++;
}

/* A retried READ at psn supersedes queued responses from psn on: the
 * requester went back to psn and asks again for everything after it. */
static void drop_superseded(struct uroce_qp *qp, uint32_t psn)
{
	uint32_t cap = (uint32_t)ARRAY_SIZE(qp->resp.rd);

	while (qp->resp.rd_len) {
		struct uroce_rd_res *r = &qp->resp.rd[(qp->resp.rd_head + qp->resp.rd_len - 1) % cap];
		uint32_t npk = r->len ? (r->len + qp->pmtu - 1) / qp->pmtu : 1;

		if (psn_diff(r->psn, psn) >= 0) {
			qp->resp.rd_len--;
			continue;
		}
		if (psn_diff(psn, psn_add(r->psn, npk)) < 0)
			r->end = MIN(r->end, (uint32_t)psn_diff(psn, r->psn) * qp->pmtu);
		break;
	}
}

static void send_atomic_ack(struct uroce_engine *e, struct uroce_qp *qp, uint32_t psn,
			    uint64_t orig)
{
	struct uroce_txpkt tp;

	uroce_place_flush(qp);

	memset(&tp, 0, sizeof(tp));
	tp.h.opcode = OP_ATOMIC_ACK;
	tp.h.pkey = DEFAULT_PKEY;
	tp.h.dqpn = qp->dest_qpn;
	tp.h.psn = psn;
	tp.h.syndrome = AETH_ACK | AETH_ACK_NO_CREDIT;
	tp.h.msn = qp->resp.msn;
	tp.h.orig = orig;
	uroce_eng_send(e, qp, &tp);
}

/* ---- selective repeat, responder side (docs/design.md) ---- */

static struct uroce_sr_rx *srx_get(struct uroce_qp *qp)
{
	if (!qp->srx)
		qp->srx = calloc(1, sizeof(*qp->srx));
	return qp->srx;
}

/* ePSN moves over n PSNs just executed. */
static void epsn_advance(struct uroce_qp *qp, uint32_t n)
{
	if (qp->srx)
		uroce_sr_clear_range(qp->srx->placed, qp->resp.epsn, n);
	qp->resp.epsn = psn_add(qp->resp.epsn, n);
	qp->resp.gap_sacked = 0;
	qp->resp.gap_start = 0;
}

/* The WRITE context holding psn, or NULL. */
static struct uroce_sr_wctx *wctx_find(struct uroce_sr_rx *x, uint32_t psn)
{
	struct uroce_sr_wctx *c = &x->w[x->last];

	if (c->npkts && psn_diff(psn, c->first_psn) >= 0 &&
	    psn_diff(psn, c->first_psn) < (int32_t)c->npkts)
		return c;
	for (uint32_t i = 0; i < SR_WCTX; i++) {
		c = &x->w[i];
		if (c->npkts && psn_diff(psn, c->first_psn) >= 0 &&
		    psn_diff(psn, c->first_psn) < (int32_t)c->npkts) {
			x->last = i;
			return c;
		}
	}
	return NULL;
}

/* Remembers a multi-packet WRITE from its FIRST packet (already checked);
 * slots of messages ePSN has passed are reused. 0, or -1 when full. */
static int wctx_add(struct uroce_qp *qp, const struct wire_pkt *p)
{
	struct uroce_sr_rx *x = srx_get(qp);
	struct uroce_sr_wctx *c;

	if (!x)
		return -1;
	if ((c = wctx_find(x, p->psn)))
		return c->first_psn == p->psn ? 0 : -1;
	for (uint32_t i = 0; i < SR_WCTX; i++) {
		c = &x->w[i];
		if (c->npkts &&
		    psn_diff(psn_add(c->first_psn, c->npkts), qp->resp.epsn) > 0)
			continue; /* still to be reached */
		c->first_psn = p->psn;
		c->npkts = (p->dma_len + qp->pmtu - 1) / qp->pmtu;
		c->rkey = p->rkey;
		c->len = p->dma_len;
		c->va = p->va;
		x->last = i;
		return 0;
	}
	return -1;
}

/* ePSN reached packets placed ahead of it: it moves over them, keeping the
 * in-order message state as if they had come now (C9-94 sequence checks
 * included), and the next ACK covers them. -1 if the QP failed. */
static int sr_drain(struct uroce_engine *e, struct uroce_qp *qp)
{
	struct uroce_sr_rx *x = qp->srx;
	uint32_t k = 0;

	if (!x)
		return 0;
	while (sr_test(x->placed, qp->resp.epsn)) {
		uint32_t psn = qp->resp.epsn;
		struct uroce_sr_wctx *c = wctx_find(x, psn);
		uint32_t at = c ? (uint32_t)psn_diff(psn, c->first_psn) : 0;
		int ok;

		sr_clear(x->placed, psn);
		if (!c || at == 0) {
			/* ONLY, or FIRST of c */
			ok = qp->resp.msg == RESP_MSG_NONE;
			if (ok && c) {
				qp->resp.msg = RESP_MSG_WRITE;
				qp->resp.wr_rkey = c->rkey;
				qp->resp.wr_va = c->va;
				qp->resp.wr_len = c->len;
				qp->resp.msg_off = qp->pmtu;
			}
		} else {
			ok = qp->resp.msg == RESP_MSG_WRITE && qp->resp.wr_va == c->va &&
			     qp->resp.msg_off == at * qp->pmtu;
			qp->resp.msg_off += qp->pmtu;
		}
		if (!ok) {
			nak_fatal(e, qp, NAK_INVALID_REQ, 0);
			return -1;
		}
		if (!c || at == c->npkts - 1) {
			qp->resp.msg = RESP_MSG_NONE;
			qp->resp.msn = (qp->resp.msn + 1) & 0xffffff;
		}
		qp->resp.epsn = psn_add(psn, 1);
		k++;
	}
	if (k) {
		qp->resp.unacked += k;
		qp->resp.ack_now = 1;
		qp->resp.nak_sent = 0;
		qp->resp.gap_sacked = 0;
		qp->resp.gap_start = 0;
		if (psn_diff(qp->resp.blk_hi, qp->resp.epsn) > 0) {
			/* placed packets further on: a gap again */
			qp->resp.gap_start = uroce_now_ns() | 1;
			qp->resp.gap_pkts = (uint32_t)psn_diff(qp->resp.blk_hi, qp->resp.epsn);
		}
	}
	return 0;
}

/* Reports the run of PSNs placed ahead of ePSN that the latest arrival
 * belongs to, in a SACK: a sequence NAK that names ePSN as IBA's does
 * (9.7.5.2.1), marked by the first resv7 bit, its MSN field holding the
 * run (docs/wire.md). One per run per receive batch; an empty one (no
 * run) says only that ePSN is missing. */
static void sack_flush(struct uroce_engine *e, struct uroce_qp *qp)
{
	uint32_t lo = qp->resp.blk_lo, hi = qp->resp.blk_hi, msn = 0;

	if (!qp->resp.sack_due)
		return;
	if (!qp->resp.gap_sacked && !gap_due(qp, uroce_now_ns()))
		return; /* maybe only overtaken: wait (reordering, above) */
	qp->resp.sack_due = 0;
	/* No SACK while READ responses are queued: naming ePSN would
	 * acknowledge the READ before its responses (see ack_psn()). */
	if (qp->resp.rd_len)
		return;
	if (psn_diff(hi, qp->resp.epsn) > 0) {
		if (psn_diff(lo, qp->resp.epsn) <= 0)
			lo = psn_add(qp->resp.epsn, 1);
		msn = (uint32_t)psn_diff(hi, qp->resp.epsn) << SACK_OFF_SHIFT |
		      (uint32_t)psn_diff(hi, lo);
	} else if (qp->resp.blk_lo != qp->resp.blk_hi || hi != qp->resp.epsn) {
		return; /* the run was reached meanwhile: the ACK says it all */
	}
	send_aeth_sack(e, qp, AETH_NAK | NAK_PSN_SEQ_ERR, qp->resp.epsn, 1, msn);
	uroce_trace("sack_tx", "qpn=0x%x epsn=0x%x placed=0x%x..0x%x", qp->qpn, qp->resp.epsn,
		    msn ? lo : qp->resp.epsn, msn ? hi : qp->resp.epsn);
	qp->resp.gap_sacked = 1;
	qp->cnt->sr_sacks_sent++;
}

/* Places a packet that came after a gap if it says (or its message's
 * FIRST said) where it goes: WRITE FIRST, MIDDLE, LAST and ONLY without
 * immediate. It is checked as in order (C9-88, 9.7.4.1.5; a FIRST for the
 * whole message); one that fails waits for its turn, where it fails as IBA
 * says. 1 if placed (or already placed). */
static int sr_place_ahead(struct uroce_qp *qp, const struct wire_pkt *p, int32_t d)
{
	struct uroce_sr_rx *x = srx_get(qp);
	struct uroce_mr *mr = NULL;
	uint64_t va;

	if (!x)
		return 0;
	if (sr_test(x->placed, p->psn)) {
		qp->cnt->dup_requests++;
		return 1;
	}
	switch (p->opcode) {
	case OP_WRITE_ONLY:
		if (p->paylen != p->dma_len || p->paylen > qp->pmtu ||
		    !remote_ok(qp, p->rkey, p->va, p->dma_len, IBV_ACCESS_REMOTE_WRITE, &mr))
			return 0;
		va = p->va;
		break;
	case OP_WRITE_FIRST:
		if (p->paylen != qp->pmtu || p->dma_len <= qp->pmtu ||
		    !remote_ok(qp, p->rkey, p->va, p->dma_len, IBV_ACCESS_REMOTE_WRITE, &mr) ||
		    wctx_add(qp, p))
			return 0;
		va = p->va;
		break;
	case OP_WRITE_MIDDLE:
	case OP_WRITE_LAST: {
		struct uroce_sr_wctx *c = wctx_find(x, p->psn);
		uint32_t at = c ? (uint32_t)psn_diff(p->psn, c->first_psn) : 0, off;

		if (!c || !at)
			return 0; /* its FIRST is missing too */
		off = at * qp->pmtu;
		if (p->opcode == OP_WRITE_MIDDLE ? (at == c->npkts - 1 || p->paylen != qp->pmtu)
						 : (at != c->npkts - 1 || off + p->paylen != c->len))
			return 0;
		va = c->va + off;
		if (!remote_ok(qp, c->rkey, va, p->paylen, IBV_ACCESS_REMOTE_WRITE, &mr))
			return 0;
		break;
	}
	default:
		return 0;
	}
	if (p->paylen && uroce_place(qp, mr, va, p->payload, p->paylen))
		return 0;
	uroce_trace("place", "qpn=0x%x va=0x%llx len=%u kind=%s ahead=%d", qp->qpn,
		    (unsigned long long)va, p->paylen,
		    mr && mr->kind == UROCE_MEM_CUDA ? "cuda" : "host", (int)d);
	sr_set(x->placed, p->psn);
	qp->cnt->sr_placed_ahead++;
	return 1;
}

/* Selective repeat (docs/design.md): a packet after a gap. Returns 1 if
 * handled here, 0 to leave it to go-back-N (a sequence NAK). */
static int sr_ahead(struct uroce_engine *e, struct uroce_qp *qp, const struct wire_pkt *p,
		    int32_t d)
{
	uint32_t f = wire_opcodes[p->opcode].flags;
	struct uroce_sr_rx *x;
	uint32_t lo, hi;

	if ((uint32_t)d >= SR_BITS)
		return 0;
	if (!sr_place_ahead(qp, p, d)) {
		/* A WRITE whose FIRST is missing too: say ePSN is missing
		 * (once per gap). Anything else (SEND, READ, atomics,
		 * immediates) cannot be placed ahead: once nothing was
		 * reported for this gap, go back N. */
		if (qp->resp.gap_sacked) {
			ooo_hold(qp, p, d);
			return 1;
		}
		if ((f & OPF_WRITE) && !(f & OPF_IMM)) {
			ooo_hold(qp, p, d);
			qp->resp.blk_lo = qp->resp.blk_hi = qp->resp.epsn;
			qp->resp.sack_due = 1;
			sack_flush(e, qp);
			return 1;
		}
		return 0;
	}
	x = qp->srx;
	/* the run it belongs to */
	if (qp->resp.sack_due && p->psn == psn_add(qp->resp.blk_hi, 1)) {
		lo = qp->resp.blk_lo;
	} else {
		sack_flush(e, qp);
		for (lo = p->psn; psn_diff(lo, qp->resp.epsn) > 1 &&
				  sr_test(x->placed, psn_add(lo, PSN_MASK));)
			lo = psn_add(lo, PSN_MASK);
	}
	for (hi = p->psn; psn_diff(hi, qp->resp.epsn) < (int32_t)SR_BITS - 1 &&
			  sr_test(x->placed, psn_add(hi, 1));)
		hi = psn_add(hi, 1);
	qp->resp.blk_lo = lo;
	qp->resp.blk_hi = hi;
	qp->resp.sack_due = 1;
	return 1;
}

/* A request whose PSN is before ePSN (9.7.5.1.? duplicate detection). */
static void duplicate(struct uroce_engine *e, struct uroce_qp *qp, const struct wire_pkt *p)
{
	uint32_t f = wire_opcodes[p->opcode].flags;

	qp->cnt->dup_requests++;
	if (f & OPF_READ) {
		/* Re-execute (C9-104); the requester went back and will ask
		 * again for everything after, so queued responses go. */
		if (!remote_ok(qp, p->rkey, p->va, p->dma_len, IBV_ACCESS_REMOTE_READ, NULL))
			return;
		drop_superseded(qp, p->psn);
		if (qp->resp.rd_len < ARRAY_SIZE(qp->resp.rd))
			queue_read(qp, p, 1);
		/* A retried READ reaching past ePSN asks for new responses
		 * too: those PSNs are now used (never let the requester get
		 * ahead of ePSN). */
		{
			uint32_t npk = p->dma_len ? (p->dma_len + qp->pmtu - 1) / qp->pmtu : 1;
			uint32_t end = psn_add(p->psn, npk);

			if (psn_diff(end, qp->resp.epsn) > 0) {
				epsn_advance(qp, (uint32_t)psn_diff(end, qp->resp.epsn));
				qp->resp.nak_sent = 0;
				sr_drain(e, qp);
			}
		}
		return;
	}
	if (f & OPF_ATOMIC) {
		/* Never execute an atomic twice: replay its result (C9-111). */
		for (unsigned i = 0; i < ARRAY_SIZE(qp->resp.atm); i++)
			if (qp->resp.atm[i].valid && qp->resp.atm[i].psn == p->psn)
				send_atomic_ack(e, qp, p->psn, qp->resp.atm[i].orig);
		return;
	}
	/* SEND/WRITE: acknowledge again (C9-101). */
	qp->resp.ack_now = 1;
}

/* ---- UC responder (IBA 9.8.3) ----
 * No ACKs, NAKs or RNR: a packet either continues the message in
 * progress at the expected PSN or, if it is a FIRST or ONLY, starts a new
 * one wherever its PSN is. Anything else means packets were lost: the
 * message in progress is dropped whole, and so is every packet up to the
 * next FIRST or ONLY (o9-? "the responder shall silently drop"). A
 * dropped SEND leaves its receive WQE for the next message. */

/* Abandons the message in progress (a packet of it was lost). */
static void uc_abandon(struct uroce_qp *qp)
{
	if (qp->resp.msg != RESP_MSG_NONE)
		qp->cnt->uc_msgs_dropped++;
	qp->resp.msg = RESP_MSG_NONE;
	qp->resp.msg_off = 0;
}

static void uc_rx(struct uroce_engine *e, struct uroce_qp *qp, const struct wire_pkt *p)
{
	uint32_t f = wire_opcodes[p->opcode].flags;
	int kind = (f & OPF_SEND) ? RESP_MSG_SEND : RESP_MSG_WRITE;

	if (p->psn != qp->resp.epsn || ((f & OPF_FIRST) ? qp->resp.msg != RESP_MSG_NONE
						       : qp->resp.msg != kind)) {
		uc_abandon(qp);
		if (!(f & OPF_FIRST)) {
			/* a MIDDLE or LAST whose message began unseen */
			qp->resp.epsn = psn_add(p->psn, 1);
			qp->cnt->drop_opcode++;
			return;
		}
	}
	qp->resp.epsn = psn_add(p->psn, 1);
	/* Length rules as RC (9.7.4.1.5, C9-? for UC in 9.8.3): a packet
	 * that breaks them is dropped with its message. */
	if (!(f & OPF_LAST) ? p->paylen != qp->pmtu : p->paylen > qp->pmtu) {
		uc_abandon(qp);
		qp->cnt->drop_malformed++;
		return;
	}
	if (f & OPF_SEND) {
		enum ibv_wc_status st;

		if ((f & OPF_FIRST) && !qp->resp.have_rwqe && !uroce_resp_take_rwqe(qp)) {
			/* no receive WQE: the message is dropped (no RNR on UC) */
			qp->cnt->drop_no_rwqe++;
			return;
		}
		if (f & OPF_FIRST) {
			qp->resp.msg = RESP_MSG_SEND;
			qp->resp.msg_off = 0;
		}
		st = uroce_resp_place_send(qp, p->payload, p->paylen);
		if (st) {
			/* local errors end the QP (9.9.3.1, class D) */
			struct ibv_wc wc = {
				.wr_id = qp->resp.rwqe_id, .status = st, .opcode = IBV_WC_RECV,
				.qp_num = qp->qpn,
			};

			uroce_cq_push(qp->rcq, &wc, 1);
			qp->resp.have_rwqe = 0;
			uroce_info("QP 0x%x: receive fails with status %d (enum ibv_wc_status); "
				   "the QP enters the error state", qp->qpn, (int)st);
			uroce_qp_to_error(qp);
			uroce_async_event(qp->ctx, IBV_EVENT_QP_FATAL, &qp->qpx.qp_base);
			return;
		}
		qp->resp.msg_off += p->paylen;
		if (f & OPF_LAST) {
			complete_recv(qp, p, IBV_WC_RECV, qp->resp.msg_off);
			qp->resp.msg = RESP_MSG_NONE;
		}
		return;
	}
	/* RDMA WRITE */
	if (f & OPF_FIRST) {
		if (!remote_ok(qp, p->rkey, p->va, p->dma_len, IBV_ACCESS_REMOTE_WRITE, NULL)) {
			/* UC: a remote access violation drops the message
			 * silently (9.8.3.2) */
			qp->cnt->rem_access_errs++;
			return;
		}
		qp->resp.wr_rkey = p->rkey;
		qp->resp.wr_va = p->va;
		qp->resp.wr_len = p->dma_len;
		qp->resp.msg_off = 0;
		qp->resp.msg = RESP_MSG_WRITE;
	}
	if ((uint64_t)qp->resp.msg_off + p->paylen > qp->resp.wr_len ||
	    ((f & OPF_LAST) && qp->resp.msg_off + p->paylen != qp->resp.wr_len)) {
		uc_abandon(qp);
		qp->cnt->drop_malformed++;
		return;
	}
	if (p->paylen) {
		uint64_t va = qp->resp.wr_va + qp->resp.msg_off;
		struct uroce_mr *mr;

		if (!remote_ok(qp, qp->resp.wr_rkey, va, p->paylen, IBV_ACCESS_REMOTE_WRITE, &mr) ||
		    uroce_place(qp, mr, va, p->payload, p->paylen)) {
			uc_abandon(qp);
			qp->cnt->rem_access_errs++;
			return;
		}
	}
	qp->resp.msg_off += p->paylen;
	if (f & OPF_LAST) {
		qp->resp.msg = RESP_MSG_NONE;
		/* WRITE with immediate consumes a receive WQE at its end */
		if (f & OPF_IMM) {
			if (!qp->resp.have_rwqe && !uroce_resp_take_rwqe(qp)) {
				qp->cnt->drop_no_rwqe++;
				return;
			}
			complete_recv(qp, p, IBV_WC_RECV_RDMA_WITH_IMM, qp->resp.wr_len);
		} else if (uroce_place_dirty(qp)) {
			uroce_place_flush(qp);
		}
	}
	(void)e;
}

/* XRC target (IBA 9.? XRC): the request's XRCETH names the XRC SRQ whose
 * receive WQEs, CQ and protection domain it uses. The QP takes them on
 * for the packet at hand. 0, or -1 when the SRQ is not one of the QP's
 * domain (the request is invalid). */
static int xrc_bind(struct uroce_qp *qp, const struct wire_pkt *p)
{
	struct uroce_srq *srq = NULL;

	if (p->xrc_srqn && p->xrc_srqn <= UROCE_MAX_XSRQ)
		srq = atomic_load_explicit(&qp->ctx->xsrq[p->xrc_srqn - 1], memory_order_acquire);
	if (!srq || srq->xrcd != qp->xrcd)
		return -1;
	/* a message in progress keeps the SRQ it began with */
	if (qp->resp.msg != RESP_MSG_NONE && qp->srq && qp->srq != srq)
		return -1;
	qp->srq = srq;
	qp->pd = srq->pd;
	qp->rcq = srq->cq;
	return 0;
}

/* Reports the gap at ePSN: the SACK due, else one sequence NAK (C9-110). */
static void report_gap(struct uroce_engine *e, struct uroce_qp *qp)
{
	if (qp->resp.sack_due)
		sack_flush(e, qp);
	if (qp->resp.nak_sent || qp->resp.gap_sacked)
		return;
	send_aeth(e, qp, AETH_NAK | NAK_PSN_SEQ_ERR, qp->resp.epsn);
	qp->resp.nak_sent = 1;
	qp->cnt->seq_naks_sent++;
	uroce_trace("gap_nak", "qpn=0x%x epsn=0x%x after=%u", qp->qpn, qp->resp.epsn,
		    qp->resp.gap_pkts);
}

static void resp_rx1(struct uroce_engine *e, struct uroce_qp *qp, const struct wire_pkt *p,
		     uint64_t now)
{
	uint32_t f = wire_opcodes[p->opcode].flags;
	int32_t d;

	if (!uroce_qp_takes_packets(qp)) {
		qp->cnt->drop_state++;
		return;
	}
	if (p->pkey != DEFAULT_PKEY) {
		/* C9-41: P_Key mismatch, silently dropped and counted. */
		qp->cnt->drop_pkey++;
		return;
	}
	if (!qp->resp.comm_est) {
		qp->resp.comm_est = 1;
		if (qp->eng_state == IBV_QPS_RTR)
			uroce_async_event(qp->ctx, IBV_EVENT_COMM_EST, &qp->qpx.qp_base);
	}
	if (qp->type == IBV_QPT_UC) {
		uc_rx(e, qp, p);
		return;
	}
	d = psn_diff(p->psn, qp->resp.epsn);
	if (qp->type == IBV_QPT_XRC_RECV && d == 0 && xrc_bind(qp, p)) {
		nak_fatal(e, qp, NAK_INVALID_REQ, 0);
		return;
	}
	if (d > 0) {
		if (!qp->resp.gap_start) {
			qp->resp.gap_start = now | 1;
			qp->resp.gap_pkts = 0;
		}
		qp->resp.gap_pkts++;
		if (qp->sr && sr_ahead(e, qp, p, d))
			return;
		/* Out of sequence: kept for when the gap fills, and the gap
		 * reported once it is more than reordering (above). */
		/* arrivals count packets only: a slow engine's batch must not
		 * look like an old gap (the time limit is the timer's) */
		if (ooo_hold(qp, p, d) && qp->resp.gap_pkts < qp->gap_after)
			return;
		report_gap(e, qp);
		return;
	}
	if (d < 0) {
		duplicate(e, qp, p);
		return;
	}
	if (qp->resp.gap_start && !qp->resp.nak_sent && !qp->resp.gap_sacked)
		qp->cnt->gap_filled++; /* only overtaken: nothing resent */
	qp->resp.gap_start = 0;
	qp->resp.nak_sent = 0;

	/* Opcode sequence (C9-94/95): middle and last packets continue a
	 * message of their kind; first and only ones start a new one. */
	if (f & OPF_SEND || f & OPF_WRITE) {
		int kind = (f & OPF_SEND) ? RESP_MSG_SEND : RESP_MSG_WRITE;

		if (!(f & OPF_FIRST) ? qp->resp.msg != kind : qp->resp.msg != RESP_MSG_NONE) {
			nak_fatal(e, qp, NAK_INVALID_REQ, 0);
			return;
		}
		/* Length rules (C9-? 9.7.4.1.5): FIRST and MIDDLE carry exactly
		 * the path MTU; LAST and ONLY at most. */
		if (!(f & OPF_LAST) ? p->paylen != qp->pmtu : p->paylen > qp->pmtu) {
			nak_fatal(e, qp, NAK_INVALID_REQ, 0);
			return;
		}
	}

	if (f & OPF_SEND) {
		enum ibv_wc_status st;

		if (f & OPF_FIRST) {
			if (!uroce_resp_take_rwqe(qp)) {
				/* Receiver not ready (9.7.5.2.8). */
				send_aeth(e, qp, (uint8_t)(AETH_RNR_NAK | (qp->attr.min_rnr_timer & 0x1f)),
					  qp->resp.epsn);
				qp->cnt->rnr_naks_sent++;
				/* the requester resends from here after the RNR
				 * timer: later packets are dropped without NAKs */
				qp->resp.nak_sent = 1;
				return;
			}
			qp->resp.msg = RESP_MSG_SEND;
			qp->resp.msg_off = 0;
		}
		st = uroce_resp_place_send(qp, p->payload, p->paylen);
		if (st) {
			nak_fatal(e, qp, st == IBV_WC_LOC_LEN_ERR ? NAK_INVALID_REQ : NAK_REM_OP_ERR, st);
			return;
		}
		qp->resp.msg_off += p->paylen;
		if (f & OPF_LAST) {
			complete_recv(qp, p, IBV_WC_RECV, qp->resp.msg_off);
			qp->resp.msg = RESP_MSG_NONE;
			qp->resp.msn = (qp->resp.msn + 1) & 0xffffff;
		}
	} else if (f & OPF_WRITE) {

		if ((f & OPF_FIRST) &&
		    !remote_ok(qp, p->rkey, p->va, p->dma_len, IBV_ACCESS_REMOTE_WRITE, NULL)) {
			qp->cnt->rem_access_errs++;
			nak_fatal(e, qp, NAK_REM_ACCESS_ERR, 0);
			return;
		}
		/* WRITE with immediate consumes a receive WQE at its last
		 * packet; take it before changing any state, so that an RNR
		 * NAK leaves the responder as it was. */
		if ((f & OPF_IMM) && !qp->resp.have_rwqe && !uroce_resp_take_rwqe(qp)) {
			send_aeth(e, qp, (uint8_t)(AETH_RNR_NAK | (qp->attr.min_rnr_timer & 0x1f)),
				  qp->resp.epsn);
			qp->cnt->rnr_naks_sent++;
			qp->resp.nak_sent = 1;
			return;
		}
		if (f & OPF_FIRST) {
			qp->resp.wr_rkey = p->rkey;
			qp->resp.wr_va = p->va;
			qp->resp.wr_len = p->dma_len;
			qp->resp.msg_off = 0;
			qp->resp.msg = RESP_MSG_WRITE;
			/* its later packets may come after a gap */
			if (qp->sr && !(f & OPF_LAST))
				wctx_add(qp, p);
		}
		if ((uint64_t)qp->resp.msg_off + p->paylen > qp->resp.wr_len ||
		    ((f & OPF_LAST) && qp->resp.msg_off + p->paylen != qp->resp.wr_len)) {
			nak_fatal(e, qp, NAK_INVALID_REQ, 0);
			return;
		}
		if (p->paylen) {
			/* Look the key up again: the MR may be gone since FIRST. */
			uint64_t va = qp->resp.wr_va + qp->resp.msg_off;
			struct uroce_mr *mr;

			if (!remote_ok(qp, qp->resp.wr_rkey, va, p->paylen, IBV_ACCESS_REMOTE_WRITE,
				       &mr) ||
			    uroce_place(qp, mr, va, p->payload, p->paylen)) {
				qp->cnt->rem_access_errs++;
				nak_fatal(e, qp, NAK_REM_ACCESS_ERR, 0);
				return;
			}
			uroce_trace("place", "qpn=0x%x va=0x%llx len=%u rkey=0x%x kind=%s", qp->qpn,
				    (unsigned long long)va, p->paylen, qp->resp.wr_rkey,
				    mr->kind == UROCE_MEM_CUDA ? "cuda" : "host");
		}
		qp->resp.msg_off += p->paylen;
		if (f & OPF_LAST) {
			if (f & OPF_IMM)
				complete_recv(qp, p, IBV_WC_RECV_RDMA_WITH_IMM, qp->resp.wr_len);
			qp->resp.msg = RESP_MSG_NONE;
			qp->resp.msn = (qp->resp.msn + 1) & 0xffffff;
		}
	} else if (f & OPF_READ) {
		uint32_t npk = p->dma_len ? (p->dma_len + qp->pmtu - 1) / qp->pmtu : 1;

		if (qp->resp.msg != RESP_MSG_NONE) {
			nak_fatal(e, qp, NAK_INVALID_REQ, 0);
			return;
		}
		if (!remote_ok(qp, p->rkey, p->va, p->dma_len, IBV_ACCESS_REMOTE_READ, NULL)) {
			qp->cnt->rem_access_errs++;
			nak_fatal(e, qp, NAK_REM_ACCESS_ERR, 0);
			return;
		}
		if (qp->resp.rd_len >= ARRAY_SIZE(qp->resp.rd)) {
			/* More outstanding than max_dest_rd_atomic (C9-?). */
			nak_fatal(e, qp, NAK_INVALID_REQ, 0);
			return;
		}
		queue_read(qp, p, 0);
		qp->resp.msn = (qp->resp.msn + 1) & 0xffffff;
		epsn_advance(qp, npk);
		sr_drain(e, qp);
		return;
	} else if (f & OPF_ATOMIC) {
		uint64_t *ptr, orig;
		struct uroce_mr *mr;

		if (qp->resp.msg != RESP_MSG_NONE) {
			nak_fatal(e, qp, NAK_INVALID_REQ, 0);
			return;
		}
		if (p->va & 7) {
			/* C9-? atomics need 8-byte alignment: invalid request */
			nak_fatal(e, qp, NAK_INVALID_REQ, 0);
			return;
		}
		if (!remote_ok(qp, p->rkey, p->va, 8, IBV_ACCESS_REMOTE_ATOMIC, &mr)) {
			qp->cnt->rem_access_errs++;
			nak_fatal(e, qp, NAK_REM_ACCESS_ERR, 0);
			return;
		}
		if (mr->kind == UROCE_MEM_HOST) {
			ptr = (uint64_t *)(mr->host + (p->va - mr->iova));
			if (p->opcode == OP_CMP_SWAP) {
				orig = p->compare;
				__atomic_compare_exchange_n(ptr, &orig, p->swap_add, 0,
							    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
			} else {
				orig = __atomic_fetch_add(ptr, p->swap_add, __ATOMIC_SEQ_CST);
			}
		} else {
			/* GPU memory: read, modify, write on the engine thread,
			 * which serialises every RDMA atomic of this device
			 * context; not atomic against GPU kernels (docs). */
			uint64_t v;

			if (uroce_place_flush(qp) || uroce_mr_read(mr, p->va, &v, 8)) {
				nak_fatal(e, qp, NAK_REM_OP_ERR, 0);
				return;
			}
			orig = v;
			if (p->opcode == OP_CMP_SWAP)
				v = v == p->compare ? p->swap_add : v;
			else
				v += p->swap_add;
			if (v != orig && uroce_mr_write(mr, p->va, &v, 8)) {
				nak_fatal(e, qp, NAK_REM_OP_ERR, 0);
				return;
			}
		}
		uroce_trace("atomic", "qpn=0x%x op=%s va=0x%llx orig=0x%llx kind=%s", qp->qpn,
			    p->opcode == OP_CMP_SWAP ? "CMP_SWAP" : "FETCH_ADD",
			    (unsigned long long)p->va, (unsigned long long)orig,
			    mr->kind == UROCE_MEM_CUDA ? "cuda" : "host");
		qp->resp.atm[qp->resp.atm_next].psn = p->psn;
		qp->resp.atm[qp->resp.atm_next].orig = orig;
		qp->resp.atm[qp->resp.atm_next].valid = 1;
		qp->resp.atm_next = (qp->resp.atm_next + 1) % ARRAY_SIZE(qp->resp.atm);
		/* Responses go out in order: ACK what precedes, then the result. */
		if (qp->resp.unacked && !qp->resp.rd_len)
			uroce_resp_flush_ack(e, qp, UINT64_MAX);
		qp->resp.msn = (qp->resp.msn + 1) & 0xffffff;
		epsn_advance(qp, 1);
		send_atomic_ack(e, qp, p->psn, orig);
		sr_drain(e, qp);
		return;
	} else {
		qp->cnt->drop_opcode++;
		return;
	}
	epsn_advance(qp, 1);
	qp->resp.unacked++;
	if (p->ackreq || qp->resp.unacked >= ACK_EVERY)
		qp->resp.ack_now = 1;
	else if (!qp->resp.ack_deadline)
		qp->resp.ack_deadline = now + ACK_DELAY_NS;
	sr_drain(e, qp);
}

/* ePSN moved: executes the packets kept for it, in PSN order. */
static void ooo_drain(struct uroce_engine *e, struct uroce_qp *qp, uint64_t now)
{
	struct uroce_ooo *o = qp->ooo;

	while (o->n) {
		uint32_t i = qp->resp.epsn % OOO_SLOTS, before = qp->resp.epsn;
		struct uroce_ooo_pkt *k = o->slot[i];

		if (!k || k->p.psn != before)
			break;
		o->slot[i] = NULL;
		o->n--;
		resp_rx1(e, qp, &k->p, now);
		atomic_fetch_sub(&ooo_bytes, sizeof(*k) + k->p.paylen);
		free(k);
		if (qp->ooo != o)
			return; /* the QP failed meanwhile */
		if (qp->resp.epsn == before)
			break; /* not taken (RNR): it comes again */
	}
	for (uint32_t i = 0; i < OOO_SLOTS && o->n; i++)
		if (o->slot[i] && psn_diff(o->slot[i]->p.psn, qp->resp.epsn) <= 0 &&
		    qp->resp.epsn != o->slot[i]->p.psn)
			ooo_put(o, i); /* ePSN passed it (a READ re-executed) */
	if (o->n && !qp->resp.gap_start) {
		qp->resp.gap_start = now | 1; /* the next gap */
		qp->resp.gap_pkts = o->n;
	}
}

void uroce_resp_rx(struct uroce_engine *e, struct uroce_qp *qp, const struct wire_pkt *p,
		   uint64_t now)
{
	uint32_t before = qp->resp.epsn;

	resp_rx1(e, qp, p, now);
	if (qp->ooo && qp->ooo->n && qp->resp.epsn != before)
		ooo_drain(e, qp, now);
}

void uroce_resp_progress(struct uroce_engine *e, struct uroce_qp *qp, uint64_t now)
{
	uint32_t cap = (uint32_t)ARRAY_SIZE(qp->resp.rd);
	int budget = RD_BUDGET;

	(void)now;
	while (qp->resp.rd_len && budget > 0) {
		struct uroce_rd_res *r = &qp->resp.rd[qp->resp.rd_head];
		uint32_t npk = r->len ? (r->len + qp->pmtu - 1) / qp->pmtu : 1;

		if (r->len && r->sent >= r->end) {
			qp->resp.rd_head = (qp->resp.rd_head + 1) % cap;
			qp->resp.rd_len--;
			continue;
		}
		while (budget > 0) {
			uint32_t k = r->sent / qp->pmtu, len = MIN(qp->pmtu, r->len - r->sent);
			struct uroce_txpkt tp;
			struct iovec iov;
			uint8_t *src;
			int bounced = 0;

			/* DCQCN paces READ responses as the QP's requests
			 * (the engine wakes at cc.pace_until) */
			if (!uroce_req_cc_may_send(qp, now))
				return;
			memset(&tp, 0, sizeof(tp));
			tp.h.opcode = npk == 1	       ? OP_READ_RESP_ONLY
				    : k == 0	       ? OP_READ_RESP_FIRST
				    : k == npk - 1 ? OP_READ_RESP_LAST
						   : OP_READ_RESP_MIDDLE;
			tp.h.pkey = DEFAULT_PKEY;
			tp.h.dqpn = qp->dest_qpn;
			tp.h.psn = psn_add(r->psn, k);
			tp.h.syndrome = AETH_ACK | AETH_ACK_NO_CREDIT;
			tp.h.msn = qp->resp.msn;
			if (len) {
				struct uroce_mr *mr;

				src = NULL;
				if (remote_ok(qp, r->rkey, r->va + r->sent, len, IBV_ACCESS_REMOTE_READ,
					      &mr))
					src = mr->kind == UROCE_MEM_HOST
						      ? mr->host + (r->va + r->sent - mr->iova)
						      : uroce_stage(qp, mr, r->stage_key,
								    r->va + r->sent, len,
								    r->end - r->sent);
				if (src && r->dup && mr->kind == UROCE_MEM_HOST) {
					src = (uint8_t *)(uintptr_t)uroce_eng_bounce(e, src, len);
					bounced = 1;
				}
				if (!src && r->dup) {
					/* A re-executed READ whose MR went away
					 * meanwhile: the requester retried too
					 * early and had the first responses after
					 * all, completed the READ, and the peer
					 * application (told so) deregistered or
					 * unmapped the buffer (UCX's rendezvous: the ATS
					 * follows the READ's last response, then
					 * the sender's buffer is freed). A
					 * requester that still waits for these
					 * retries again; its duplicate then
					 * fails the R_Key check (C9-104 validates
					 * it) and goes unanswered until its retry
					 * count runs out. Failing the QP here
					 * flushed a healthy connection (CI of
					 * 2026-12-07, mpi/c-np8). */
					qp->cnt->read_resp_abandoned++;
					r->sent = r->end;
					break;
				}
				if (!src) {
					/* the MR went away under the READ */
					send_aeth(e, qp, AETH_NAK | NAK_REM_ACCESS_ERR, tp.h.psn);
					uroce_eng_flush(e);
					uroce_info("QP 0x%x: the MR of an RDMA READ went away; "
						   "the QP enters the error state", qp->qpn);
					uroce_qp_to_error(qp);
					return;
				}
				uroce_trace("mem_read", "qpn=0x%x addr=%p len=%u rkey=0x%x kind=host zero_copy=1",
					    qp->qpn, (void *)src, len, r->rkey);
				iov.iov_base = src;
				iov.iov_len = len;
				tp.pay = &iov;
				tp.npay = 1;
				tp.paylen = len;
			}
			uroce_eng_send(e, qp, &tp);
			if (bounced)
				uroce_eng_flush(e); /* the bounce buffer is reused */
			uroce_req_cc_sent(qp, now, tp.paylen);
			budget--;
			r->sent += len;
			if (k == npk - 1 || r->sent >= r->end)
				break;
		}
		if (r->sent < r->end)
			break;
		qp->resp.rd_head = (qp->resp.rd_head + 1) % cap;
		qp->resp.rd_len--;
	}
}
