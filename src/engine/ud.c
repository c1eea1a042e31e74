/* Unreliable Datagram (IBA 9.8.4, 10.2.5, 11.4.1.2; RoCEv2 annex A17):
 * the requester sends each WQE as one SEND ONLY packet with a DETH to the
 * address its AH names and completes it once the datagram has left; the
 * receiver checks the Q_Key, puts the 40-byte GRH area and the payload in
 * the next receive WQE and completes it. Nothing is acknowledged and
 * nothing is resent: a lost datagram is gone. */
#include "engine.h"
#include "trace.h"

#include <arpa/inet.h>
#include <netinet/ip.h>
#include <string.h>

#define UD_BUDGET 64 /* datagrams per QP per engine pass */

static inline struct uroce_swqe *sqe(struct uroce_qp *qp, uint32_t idx)
{
	return &qp->sq[idx & (qp->sq_size - 1)];
}

static void ud_complete(struct uroce_qp *qp, struct uroce_swqe *w, uint32_t t)
{
	struct ibv_wc wc = {
		.wr_id = w->wr_id,
		.status = w->status ? (enum ibv_wc_status)w->status : IBV_WC_SUCCESS,
		.opcode = IBV_WC_SEND,
		.qp_num = qp->qpn,
		.byte_len = w->length,
	};
	int signaled = (w->flags & SWQE_SIGNALED) || qp->sq_sig_all || w->status;

	/* Free the slot before the CQE is visible (as req.c's retire). */
	w->flags = 0;
	w->status = 0;
	atomic_store_explicit(&qp->sq_tail, t + 1, memory_order_release);
	if (signaled) {
		uroce_trace("cqe", "qpn=0x%x wr_id=%llu status=%d opcode=%d byte_len=%u", qp->qpn,
			    (unsigned long long)wc.wr_id, (int)wc.status, (int)wc.opcode, wc.byte_len);
		uroce_cq_push(qp->scq, &wc, 0);
	}
}

/* Builds and queues the datagram of one WQE: 0 or a completion status. */
static int ud_send_one(struct uroce_engine *e, struct uroce_qp *qp, struct uroce_swqe *w)
{
	struct iovec iov[UROCE_MAX_SGE];
	struct uroce_txpkt tp;
	int niov = 0, st;

	memset(&tp, 0, sizeof(tp));
	w->stage_key = ++qp->stage.next_key;
	st = uroce_req_gather(qp, w, 0, w->length, iov, &niov);
	if (st)
		return st;
	tp.dst_ip4 = w->ud_ip4;
	tp.h.opcode = w->opcode == IBV_WR_SEND_WITH_IMM ? OP_UD_SEND_ONLY_IMM : OP_UD_SEND_ONLY;
	tp.h.pkey = DEFAULT_PKEY;
	tp.h.dqpn = w->ud_qpn;
	tp.h.psn = qp->req.psn;
	tp.h.se = !!(w->flags & SWQE_SOLICITED);
	tp.h.qkey = w->ud_qkey;
	tp.h.src_qp = qp->qpn;
	tp.h.imm_be = w->imm_be;
	tp.pay = iov;
	tp.npay = niov;
	tp.paylen = w->length;
	if (IN_MULTICAST(ntohl(w->ud_ip4)) && !qp->mcast_if) {
		/* a group: leave through this device's interface */
		int err = uroce_eng_backend(e)->tx_mcast(qp->tx_fd, qp->src_ip4);

		if (err)
			return IBV_WC_LOC_QP_OP_ERR;
		qp->mcast_if = 1;
	}
	if (w->ud_tos != qp->tos) {
		/* The AH's traffic class is the IP TOS byte; what is batched
		 * leaves with the old one first. */
		int tos = w->ud_tos;

		uroce_eng_flush(e);
		setsockopt(qp->tx_fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
		qp->tos = w->ud_tos;
	}
	uroce_eng_send(e, qp, &tp);
	qp->req.psn = psn_add(qp->req.psn, 1);
	return 0;
}

void uroce_ud_progress(struct uroce_engine *e, struct uroce_qp *qp, uint64_t now)
{
	uint32_t head, t, first;
	int n = 0;

	(void)now;
	if (qp->eng_state == IBV_QPS_ERR) {
		uroce_qp_flush(qp);
		return;
	}
	if (qp->eng_state != IBV_QPS_RTS)
		return; /* SQD: nothing new starts (IBA 10.3.1) */
	first = t = atomic_load_explicit(&qp->sq_tail, memory_order_relaxed);
	head = atomic_load_explicit(&qp->sq_head, memory_order_acquire);
	if (t == head)
		return;
	/* Completions may not be visible before the datagrams leave: the
	 * application may reuse the buffers at once. */
	for (; t != head && n < UD_BUDGET && uroce_cq_space(qp->scq); t++, n++) {
		struct uroce_swqe *w = sqe(qp, t);

		uroce_trace("wqe_take", "qpn=0x%x wr_id=%llu first_psn=0x%x packets=1 len=%u",
			    qp->qpn, (unsigned long long)w->wr_id, qp->req.psn, w->length);
		w->status = (uint32_t)ud_send_one(e, qp, w);
		if (w->status)
			break; /* completes in error below, then the QP fails */
	}
	uroce_eng_flush(e);
	for (uint32_t i = first; i != t; i++)
		ud_complete(qp, sqe(qp, i), i);
	/* A local error on a UD send: the WQE fails with its status and the
	 * QP enters the error state (IBA 10.8.3). */
	if (t != head && sqe(qp, t)->status)
		uroce_qp_to_error(qp);
}

/* The 40-byte GRH area of a received datagram, as RoCE providers fill it
 * for IPv4 (RoCEv2 annex A17.4.5.1): 20 bytes of zeros, then the IPv4
 * header the datagram came with. */
static void fill_grh(uint8_t *grh, uint32_t saddr, uint32_t daddr, uint8_t tos, uint16_t ip_id,
		     uint32_t udp_len)
{
	struct iphdr ip;
	uint32_t sum = 0;
	const uint16_t *w = (const uint16_t *)&ip;

	memset(grh, 0, 20);
	memset(&ip, 0, sizeof(ip));
	ip.version = 4;
	ip.ihl = 5;
	ip.tos = tos;
	ip.tot_len = htons((uint16_t)(20 + 8 + udp_len));
	ip.id = htons(ip_id);
	ip.frag_off = htons(IP_DF);
	ip.ttl = 64; /* not visible to a UDP socket; what Linux senders use */
	ip.protocol = IPPROTO_UDP;
	ip.saddr = saddr;
	ip.daddr = daddr;
	for (unsigned i = 0; i < sizeof(ip) / 2; i++)
		sum += w[i];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	ip.check = (uint16_t)~sum;
	memcpy(grh + 20, &ip, sizeof(ip));
}

void uroce_ud_rx(struct uroce_engine *e, struct uroce_qp *qp, const struct wire_pkt *p,
		 const struct uroce_rx_meta *m)
{
	struct uroce_counters *c = qp->cnt;
	uint8_t grh[UROCE_GRH_LEN];
	enum ibv_wc_status st;
	struct ibv_wc wc;

	(void)e;
	if (!uroce_qp_takes_packets(qp)) {
		c->drop_state++;
		return;
	}
	if (p->pkey != DEFAULT_PKEY) {
		c->drop_pkey++; /* C9-41 */
		return;
	}
	/* IBA 10.2.5, C9-? (9.6.1.2): a datagram whose Q_Key differs from
	 * the QP's is silently dropped. */
	if (p->qkey != qp->attr.qkey) {
		c->drop_qkey++;
		return;
	}
	if (!uroce_resp_take_rwqe(qp)) {
		/* no receive WQE: the datagram is gone (no RNR on UD) */
		c->drop_no_rwqe++;
		return;
	}
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = qp->resp.rwqe_id;
	wc.opcode = IBV_WC_RECV;
	wc.qp_num = qp->qpn;
	wc.src_qp = p->src_qp;
	wc.byte_len = UROCE_GRH_LEN + p->paylen;
	wc.wc_flags = IBV_WC_GRH;
	/* mlx5 and UCX read the RoCE packet type of a UD receive from sl:
	 * 2 is IPv4 (RoCEv2) */
	wc.sl = 2;
	wc.slid = uroce_port_lid(m->saddr);
	if (wire_opcodes[p->opcode].flags & OPF_IMM) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = p->imm_be;
	}
	if ((uint64_t)UROCE_GRH_LEN + p->paylen > qp->resp.rwqe_len) {
		/* longer than the WQE: completed in error (9.9.3.1, class D) */
		st = IBV_WC_LOC_LEN_ERR;
		c->ud_len_errs++;
	} else {
		fill_grh(grh, m->saddr, m->daddr, m->tos, m->ip_id, m->len);
		qp->resp.msg_off = 0;
		st = uroce_resp_place_send(qp, grh, UROCE_GRH_LEN);
		qp->resp.msg_off = UROCE_GRH_LEN;
		if (!st && p->paylen)
			st = uroce_resp_place_send(qp, p->payload, p->paylen);
		if (!st && uroce_place_dirty(qp) && uroce_place_flush(qp))
			st = IBV_WC_LOC_PROT_ERR;
	}
	wc.status = st;
	if (st)
		wc.byte_len = 0;
	qp->resp.have_rwqe = 0;
	uroce_trace("cqe", "qpn=0x%x wr_id=%llu status=%d opcode=%d byte_len=%u src_qp=0x%x", qp->qpn,
		    (unsigned long long)wc.wr_id, (int)st, (int)wc.opcode, wc.byte_len, wc.src_qp);
	if (uroce_cq_push(qp->rcq, &wc, p->se) < 0)
		uroce_async_event(qp->ctx, IBV_EVENT_CQ_ERR, &qp->rcq->ibcq);
}
