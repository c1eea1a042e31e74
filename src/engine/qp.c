/* QP plumbing on the engine thread: completions, flushes, the error state,
 * receive queues and the QP's sockets. */
#include "engine.h"
#include "cuda.h"

#define STAGE_CAP (1u << 20) /* staging window, bytes */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void chan_notify(struct uroce_cq *cq)
{
	struct uroce_comp_channel *ch = cq->chan;
	uint64_t one = 1;

	if (!ch)
		return;
	pthread_mutex_lock(&ch->lock);
	if (ch->qlen == ch->qcap) {
		uint32_t ncap = ch->qcap ? ch->qcap * 2 : 16;
		struct uroce_cq **nq = malloc(sizeof(*nq) * ncap);

		if (!nq) {
			pthread_mutex_unlock(&ch->lock);
			return;
		}
		for (uint32_t i = 0; i < ch->qlen; i++)
			nq[i] = ch->q[(ch->qhead + i) % ch->qcap];
		free(ch->q);
		ch->q = nq;
		ch->qcap = ncap;
		ch->qhead = 0;
	}
	ch->q[(ch->qhead + ch->qlen++) % ch->qcap] = cq;
	cq->events_pending++;
	pthread_mutex_unlock(&ch->lock);
	if (write(ch->ch.fd, &one, sizeof(one)) < 0) {
		/* cannot happen below 2^64-1 pending events */
	}
}

int uroce_cq_space(struct uroce_cq *cq)
{
	return atomic_load_explicit(&cq->prod, memory_order_relaxed) -
		       atomic_load_explicit(&cq->cons, memory_order_acquire) <
	       cq->size;
}

int uroce_cq_push(struct uroce_cq *cq, const struct ibv_wc *wc, int solicited)
{
	uint32_t prod, cons;
	int armed;

	pthread_spin_lock(&cq->push_lock);
	prod = atomic_load_explicit(&cq->prod, memory_order_relaxed);
	cons = atomic_load_explicit(&cq->cons, memory_order_acquire);
	if (prod - cons >= cq->size) {
		pthread_spin_unlock(&cq->push_lock);
		return -1;
	}
	cq->ring[prod & (cq->size - 1)] = *wc;
	atomic_store_explicit(&cq->prod, prod + 1, memory_order_release);
	pthread_spin_unlock(&cq->push_lock);
	/* Dekker with ibv_req_notify_cq + ibv_poll_cq: either the poller sees
	 * this CQE or we see its arming (a store-load fence on both sides). */
	atomic_thread_fence(memory_order_seq_cst);
	armed = atomic_load(&cq->armed);
	/* ibv_req_notify_cq(3): solicited-only arming also fires on errors. */
	if (armed == 1 || (armed == 2 && (solicited || wc->status != IBV_WC_SUCCESS))) {
		if (atomic_exchange(&cq->armed, 0))
			chan_notify(cq);
	}
	return 0;
}

/* What an async event's element is (ibv_get_async_event(3)). */
enum { AE_PORT, AE_DEVICE, AE_CQ, AE_SRQ, AE_QP };

static int async_kind(enum ibv_event_type type)
{
	switch (type) {
	case IBV_EVENT_CQ_ERR:
		return AE_CQ;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return AE_SRQ;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		return AE_PORT;
	case IBV_EVENT_DEVICE_FATAL:
		return AE_DEVICE;
	default:
		return AE_QP;
	}
}

void uroce_async_event(struct uroce_ctx *ctx, enum ibv_event_type type, void *obj)
{
	struct uroce_async *a = &ctx->async;
	struct ibv_async_event ev = { .event_type = type };
	uint64_t one = 1;

	switch (async_kind(type)) {
	case AE_CQ:
		ev.element.cq = obj;
		break;
	case AE_SRQ:
		ev.element.srq = obj;
		break;
	case AE_PORT:
		ev.element.port_num = 1;
		break;
	case AE_DEVICE:
		break;
	default:
		ev.element.qp = obj;
	}
	pthread_mutex_lock(&a->lock);
	if (a->len == a->cap) {
		uint32_t ncap = a->cap ? a->cap * 2 : 16;
		struct ibv_async_event *nq = malloc(sizeof(*nq) * ncap);

		if (!nq) {
			pthread_mutex_unlock(&a->lock);
			return;
		}
		for (uint32_t i = 0; i < a->len; i++)
			nq[i] = a->q[(a->head + i) % a->cap];
		free(a->q);
		a->q = nq;
		a->cap = ncap;
		a->head = 0;
	}
	a->q[(a->head + a->len++) % a->cap] = ev;
	pthread_mutex_unlock(&a->lock);
	if (write(a->efd, &one, sizeof(one)) < 0) {
		/* cannot happen */
	}
}

const void *uroce_async_obj(const struct ibv_async_event *ev)
{
	switch (async_kind(ev->event_type)) {
	case AE_CQ:
		return ev->element.cq;
	case AE_SRQ:
		return ev->element.srq;
	case AE_QP:
		return ev->element.qp;
	default:
		return NULL;
	}
}

void uroce_async_ack(const struct ibv_async_event *ev)
{
	const void *obj = uroce_async_obj(ev);
	struct ibv_context *c;
	struct uroce_async *a;

	if (!obj)
		return;
	/* the context the object belongs to */
	switch (async_kind(ev->event_type)) {
	case AE_CQ:
		c = ev->element.cq->context;
		break;
	case AE_SRQ:
		c = ev->element.srq->context;
		break;
	default:
		c = ev->element.qp->context;
	}
	a = &to_uctx(c)->async;
	pthread_mutex_lock(&a->lock);
	for (uint32_t i = 0; i < a->nout; i++)
		if (a->out[i].obj == obj) {
			if (!--a->out[i].n) {
				a->out[i] = a->out[--a->nout];
				pthread_cond_broadcast(&a->acked);
			}
			break;
		}
	pthread_mutex_unlock(&a->lock);
}

/* As many entries as objects with events out, each with its count (as
 * rdma-core counts events_reported against events_completed per object),
 * so that any number of unacknowledged events keeps destroy waiting. */
void uroce_async_out_add(struct uroce_async *a, const void *obj)
{
	for (uint32_t i = 0; i < a->nout; i++)
		if (a->out[i].obj == obj) {
			a->out[i].n++;
			return;
		}
	if (a->nout == a->outcap) {
		uint32_t ncap = a->outcap ? a->outcap * 2 : 16;
		struct uroce_async_out *n = realloc(a->out, sizeof(*n) * ncap);

		if (!n) {
			/* destroy will not wait for this one: the only cost */
			uroce_warn("async events: no memory to track an unacknowledged event");
			return;
		}
		a->out = n;
		a->outcap = ncap;
	}
	a->out[a->nout++] = (struct uroce_async_out){ obj, 1 };
}

/* UCX moves its QPs on an SRQ to the error state and destroys them at
 * once; the Last WQE Reached event of the first step then reached its
 * async thread after the second, which read the freed QP (SIGSEGV in
 * uct_ib_handle_async_event, CI of 2026-12-08, mpi/c-np8). The kernel
 * drops a destroyed object's pending events (ib_uverbs_release_uevent)
 * and libibverbs waits for the acknowledgement of those handed out. */
void uroce_async_forget(struct uroce_ctx *ctx, const void *obj)
{
	struct uroce_async *a = &ctx->async;
	uint32_t k = 0;
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&a->lock);
	for (uint32_t i = 0; i < a->len; i++) {
		struct ibv_async_event *ev = &a->q[(a->head + i) % a->cap];

		if (uroce_async_obj(ev) != obj)
			a->q[(a->head + k++) % a->cap] = *ev;
	}
	/* the eventfd keeps its count: ibv_get_async_event skips tokens
	 * that find the queue empty */
	a->len = k;
	for (;;) {
		uint32_t i;

		for (i = 0; i < a->nout && a->out[i].obj != obj; i++)
			;
		if (i == a->nout)
			break;
		if (pthread_cond_timedwait(&a->acked, &a->lock, &until)) {
			uroce_warn("destroying an object whose async event was never acknowledged "
				   "(ibv_ack_async_event)");
			a->out[i] = a->out[--a->nout];
		}
	}
	pthread_mutex_unlock(&a->lock);
}

int uroce_rq_empty(const struct uroce_rq *rq)
{
	return atomic_load_explicit(&rq->tail, memory_order_relaxed) ==
	       atomic_load_explicit(&rq->head, memory_order_acquire);
}

struct uroce_rwqe *uroce_rq_peek(struct uroce_rq *rq)
{
	uint32_t t = atomic_load_explicit(&rq->tail, memory_order_relaxed);

	if (t == atomic_load_explicit(&rq->head, memory_order_acquire))
		return NULL;
	return (struct uroce_rwqe *)(rq->ring + (size_t)(t & (rq->size - 1)) * rq->stride);
}

void uroce_rq_pop(struct uroce_rq *rq)
{
	atomic_fetch_add_explicit(&rq->tail, 1, memory_order_release);
}

/* The completion opcode of a send-queue WR (ibv_poll_cq(3)). */
enum ibv_wc_opcode uroce_wc_opcode(uint32_t op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	default:
		return IBV_WC_SEND;
	}
}

/* Completes every SQ and RQ entry of a QP in the error state: the first
 * with its own status if it failed, the rest with IBV_WC_WR_FLUSH_ERR.
 * Error completions are generated for unsignaled WRs too (IBA 10.8.3). */
void uroce_qp_flush(struct uroce_qp *qp)
{
	uint32_t head = atomic_load_explicit(&qp->sq_head, memory_order_acquire);
	uint32_t t = atomic_load_explicit(&qp->sq_tail, memory_order_relaxed);
	struct uroce_rwqe *r;

	for (; t != head; t++) {
		struct uroce_swqe *w = &qp->sq[t & (qp->sq_size - 1)];
		struct ibv_wc wc = {
			.wr_id = w->wr_id,
			.status = w->status ? (enum ibv_wc_status)w->status : IBV_WC_WR_FLUSH_ERR,
			.opcode = uroce_wc_opcode(w->opcode),
			.qp_num = qp->qpn,
		};

		if (!uroce_cq_space(qp->scq))
			break;
		w->status = 0;
		atomic_store_explicit(&qp->sq_tail, t + 1, memory_order_release);
		uroce_cq_push(qp->scq, &wc, 0);
	}
	qp->req.cur = atomic_load_explicit(&qp->sq_tail, memory_order_relaxed);
	if (qp->resp.have_rwqe) {
		/* a receive WQE taken for a message that will never end (its
		 * SRQ's too: every receive WR completes exactly once) */
		struct ibv_wc wc = {
			.wr_id = qp->resp.rwqe_id,
			.status = IBV_WC_WR_FLUSH_ERR,
			.opcode = IBV_WC_RECV,
			.qp_num = qp->qpn,
		};

		if (uroce_cq_push(qp->rcq, &wc, 0) == 0)
			qp->resp.have_rwqe = 0;
	}
	if (qp->srq)
		return;
	while ((r = uroce_rq_peek(&qp->rq))) {
		struct ibv_wc wc = {
			.wr_id = r->wr_id,
			.status = IBV_WC_WR_FLUSH_ERR,
			.opcode = IBV_WC_RECV,
			.qp_num = qp->qpn,
		};

		if (uroce_cq_push(qp->rcq, &wc, 0) < 0)
			break;
		uroce_rq_pop(&qp->rq);
	}
}

void uroce_qp_to_error(struct uroce_qp *qp)
{
	/* IBA 11.6.3.1 (o11-5.2.?): a QP on an SRQ that enters the error
	 * state takes no more WQEs from it: Last WQE Reached. */
	if (qp->srq && qp->eng_state != IBV_QPS_ERR)
		uroce_async_event(qp->ctx, IBV_EVENT_QP_LAST_WQE_REACHED, &qp->qpx.qp_base);
	/* qp->attr is left alone: the application reads it (ibv_query_qp)
	 * without a lock while this runs on the engine thread; the state is
	 * eng_state here and qp->state (atomic) for the application. */
	qp->eng_state = IBV_QPS_ERR;
	atomic_store(&qp->state, IBV_QPS_ERR);
	qp->req.deadline = 0;
	qp->resp.rd_len = 0;
	qp->resp.ack_now = 0;
	qp->resp.ack_held = 0;
	qp->resp.answer = 0;
	qp->resp.hold_until = 0;
	qp->resp.unacked = 0;
	qp->resp.ack_deadline = 0;
	qp->resp.gap_start = 0;
	uroce_resp_ooo_free(qp);
	uroce_qp_flush(qp);
}

void uroce_qp_reset_transport(struct uroce_qp *qp)
{
	uint32_t head = atomic_load(&qp->sq_head);

	memset(&qp->req, 0, sizeof(qp->req));
	memset(&qp->resp, 0, sizeof(qp->resp));
	uroce_resp_ooo_free(qp);
	if (qp->srx)
		memset(qp->srx, 0, sizeof(*qp->srx));
	if (qp->sr_sack)
		memset(qp->sr_sack, 0, SR_BITS / 8);
	if (qp->rd_got)
		memset(qp->rd_got, 0, SR_BITS / 8);
	/* IBA 10.3.1: entering RESET empties the work queues. */
	atomic_store(&qp->sq_tail, head);
	qp->req.cur = head;
	atomic_store(&qp->rq.tail, atomic_load(&qp->rq.head));
}

int uroce_retrans_sr(void)
{
	static int warned;
	const char *s = getenv("UROCE_RETRANS");

	if (!s || !*s || !strcmp(s, "gbn"))
		return 0;
	if (!strcmp(s, "sr"))
		return 1;
	if (!warned) {
		warned = 1;
		uroce_warn("UROCE_RETRANS=%s: unknown, expected gbn or sr; using gbn", s);
	}
	return 0;
}

/* Sets (v = 1) or clears (v = 0) the bits of n PSNs from psn on. */
static void sr_fill_range(uint64_t *m, uint32_t psn, uint32_t n, int v)
{
	if (n >= SR_BITS) {
		memset(m, v ? 0xff : 0, SR_BITS / 8);
		return;
	}
	for (; n && (psn % 64); n--, psn = psn_add(psn, 1))
		v ? sr_set(m, psn) : sr_clear(m, psn);
	for (; n >= 64; n -= 64, psn = psn_add(psn, 64))
		m[(psn % SR_BITS) / 64] = v ? ~0ull : 0;
	for (; n; n--, psn = psn_add(psn, 1))
		v ? sr_set(m, psn) : sr_clear(m, psn);
}

void uroce_sr_clear_range(uint64_t *m, uint32_t psn, uint32_t n)
{
	sr_fill_range(m, psn, n, 0);
}

void uroce_sr_set_range(uint64_t *m, uint32_t psn, uint32_t n)
{
	sr_fill_range(m, psn, n, 1);
}

uint32_t uroce_qpn_port(uint32_t qpn)
{
	return qpn & 0xffff;
}

int uroce_qp_connect(struct uroce_qp *qp)
{
	return uroce_eng_bind_qp(qp->eng, qp);
}

void uroce_qp_disconnect(struct uroce_qp *qp)
{
	uroce_eng_unbind_qp(qp->eng, qp);
}

/* Buffers in the QP's placement ring: UROCE_GPU_RXBUFS, 2..UROCE_RXS_MAX
 * (default 2: one filling, one being copied). */
static int rxs_count(struct uroce_qp *qp)
{
	if (!qp->rxs.n)
		qp->rxs.n = uroce_eng_gpu_rxbufs(qp->eng);
	return qp->rxs.n;
}

/* The QP's copy stream, in the context of mr; NULL: copy synchronously
 * (no asynchronous API, another GPU's context, or UROCE_CUDA_ASYNC=0). */
static void *stream_for(struct uroce_qp *qp, const struct uroce_mr *mr)
{
	if (!qp->cu_ctx) {
		qp->cu_ctx = mr->cuctx;
		qp->cu_stream = uroce_cuda_stream_new(mr->cuctx);
		if (qp->cu_stream) {
			int ok = !!(qp->stage.pf_ev = uroce_cuda_event_new(mr->cuctx));

			for (int i = 0; i < rxs_count(qp); i++)
				ok &= !!(qp->rxs.ev[i] = uroce_cuda_event_new(mr->cuctx));
			if (!ok) {
				uroce_cuda_stream_free(mr->cuctx, qp->cu_stream);
				qp->cu_stream = NULL;
			}
		}
	}
	return qp->cu_ctx == mr->cuctx ? qp->cu_stream : NULL;
}

static int bufs_alloc(uint8_t **buf, int *pinned, int n, size_t *cap, const struct uroce_mr *mr);

/* Gets a QP's CUDA resources (copy stream, events, pinned staging buffers)
 * ready ahead of traffic, in CUDA context cuctx (engine thread). A
 * page-locked allocation is an implicit synchronization point of the
 * device (CUDA programming guide, "Implicit Synchronization"): made while a
 * collective's kernel spins on the GPU waiting for this very data, it
 * never returns. NCCL registers its buffers and connects its QPs before it
 * launches kernels, so this runs then: at the registration of CUDA memory
 * and when a QP of a context that has some enters RTR. */
void uroce_qp_cuda_prepare(struct uroce_qp *qp, void *cuctx)
{
	struct uroce_mr m;

	if (!cuctx || (qp->cu_ctx && qp->cu_ctx != cuctx))
		return;
	memset(&m, 0, sizeof(m));
	m.cuctx = cuctx;
	stream_for(qp, &m);
	bufs_alloc(qp->stage.buf, qp->stage.pinned, 2, &qp->stage.cap, &m);
	bufs_alloc(qp->rxs.buf, qp->rxs.pinned, rxs_count(qp), &qp->rxs.cap, &m);
}

/* n pinned buffers of STAGE_CAP, all or none. */
static int bufs_alloc(uint8_t **buf, int *pinned, int n, size_t *cap, const struct uroce_mr *mr)
{
	int i;

	if (buf[0])
		return 0;
	for (i = 0; i < n; i++)
		if (!(buf[i] = uroce_cuda_host_alloc(mr->cuctx, STAGE_CAP, &pinned[i])))
			break;
	if (i < n) {
		while (i-- > 0) {
			uroce_cuda_host_free(buf[i], pinned[i]);
			buf[i] = NULL;
		}
		*cap = 0;
		return -1;
	}
	*cap = STAGE_CAP;
	return 0;
}

/* ---- placements into GPU memory ---- */

/* Waits for a copy on the QP's stream; the time the engine thread spent
 * blocked is counted (gpu_wait_ns). */
static int ev_wait(struct uroce_qp *qp, void *ev)
{
	uint64_t t0 = uroce_now_ns();
	int r = uroce_cuda_event_wait(qp->cu_ctx, ev);

	qp->cnt->gpu_wait_ns += uroce_now_ns() - t0;
	return r;
}

/* A synchronous copy between GPU memory and host memory (dir 0: from the
 * GPU, 1: to it), counted as the engine's waiting time. */
static int sync_copy(struct uroce_qp *qp, const struct uroce_mr *mr, int dir, uint64_t va,
		     void *host, size_t len)
{
	uint64_t t0 = uroce_now_ns();
	int r = dir ? uroce_mr_write(mr, va, host, len) : uroce_mr_read(mr, va, host, len);

	if (mr->kind != UROCE_MEM_HOST)
		qp->cnt->gpu_wait_ns += uroce_now_ns() - t0;
	return r;
}

/* Waits for buf[i]'s copy. */
static int rxs_wait(struct uroce_qp *qp, int i)
{
	if (!qp->rxs.busy[i])
		return 0;
	qp->rxs.busy[i] = 0;
	qp->rxs.inflight--;
	return ev_wait(qp, qp->rxs.ev[i]);
}

int uroce_place_kick(struct uroce_qp *qp)
{
	int i = qp->rxs.cur, r = 0;
	void *st;

	if (!qp->rxs.len || !qp->rxs.mr)
		return 0;
	st = stream_for(qp, qp->rxs.mr);
	qp->cnt->gpu_place_copies++;
	qp->cnt->gpu_place_bytes += qp->rxs.len;
	if (!st) {
		r = sync_copy(qp, qp->rxs.mr, 1, qp->rxs.va, qp->rxs.buf[i], qp->rxs.len);
	} else if (!(r = uroce_cuda_copy_async(qp->cu_ctx, st, 1, qp->rxs.buf[i],
					       qp->rxs.mr->dev + (qp->rxs.va - qp->rxs.mr->iova),
					       qp->rxs.len)) &&
		   !(r = uroce_cuda_event_record(qp->cu_ctx, qp->rxs.ev[i], st))) {
		qp->rxs.busy[i] = 1;
		qp->rxs.inflight++;
		/* fill the next buffer of the ring, once its copy is done */
		qp->rxs.cur = (i + 1) % rxs_count(qp);
		r = rxs_wait(qp, qp->rxs.cur);
	}
	qp->rxs.len = 0;
	qp->rxs.mr = NULL;
	return r;
}

int uroce_place_pending(struct uroce_qp *qp)
{
	int pending = 0;

	for (int i = 0; i < qp->rxs.n && qp->rxs.inflight; i++) {
		if (!qp->rxs.busy[i])
			continue;
		if (uroce_cuda_event_done(qp->cu_ctx, qp->rxs.ev[i]) != 0) {
			qp->rxs.busy[i] = 0; /* done (an error shows in the flush) */
			qp->rxs.inflight--;
		} else {
			pending = 1;
		}
	}
	return pending;
}

int uroce_place_flush(struct uroce_qp *qp)
{
	int r = uroce_place_kick(qp);

	for (int i = 0; i < qp->rxs.n; i++)
		if (rxs_wait(qp, i))
			r = -1;
	return r;
}

int uroce_place(struct uroce_qp *qp, const struct uroce_mr *mr, uint64_t va, const void *src,
		size_t len)
{
	if (mr->kind == UROCE_MEM_HOST)
		return uroce_mr_write(mr, va, src, len);
	if (qp->rxs.mr == mr && va == qp->rxs.va + qp->rxs.len &&
	    qp->rxs.len + len <= qp->rxs.cap) {
		memcpy(qp->rxs.buf[qp->rxs.cur] + qp->rxs.len, src, len);
		qp->rxs.len += len;
		return 0;
	}
	if (uroce_place_kick(qp))
		return -1;
	if (bufs_alloc(qp->rxs.buf, qp->rxs.pinned, rxs_count(qp), &qp->rxs.cap, mr) ||
	    len > qp->rxs.cap) {
		/* no staging: the slow way, after what is in flight */
		qp->cnt->gpu_place_copies++;
		qp->cnt->gpu_place_bytes += len;
		return uroce_place_flush(qp) ? -1 : sync_copy(qp, mr, 1, va, (void *)src, len);
	}
	memcpy(qp->rxs.buf[qp->rxs.cur], src, len);
	qp->rxs.mr = mr;
	qp->rxs.va = va;
	qp->rxs.len = len;
	return 0;
}

/* ---- sends out of GPU memory ---- */

/* Waits for the prefetch and forgets it. */
static int pf_drop(struct uroce_qp *qp)
{
	int r = 0;

	if (qp->stage.pf_mr)
		r = ev_wait(qp, qp->stage.pf_ev);
	qp->stage.pf_mr = NULL;
	return r;
}

/* Starts copying [va, end) of mr (as much as a window holds) into the
 * other buffer, for the send of WQE or READ key: the next window of the
 * message being sent, or the first of the next WQE (uroce_stage_ahead). */
static void pf_copy(struct uroce_qp *qp, const struct uroce_mr *mr, uint64_t key, uint64_t va,
		    uint64_t end)
{
	void *st;

	if (qp->stage.pf_mr || !mr || end <= va || !qp->stage.cap || !(st = stream_for(qp, mr)))
		return;
	if (va < mr->iova || va >= mr->iova + mr->length)
		return;
	/* packets still queued may point into the other buffer */
	uroce_eng_flush(qp->eng);
	qp->stage.pf_len = MIN((size_t)(end - va), qp->stage.cap);
	qp->stage.pf_len = MIN(qp->stage.pf_len, (size_t)(mr->iova + mr->length - va));
	qp->cnt->gpu_stage_copies++;
	qp->cnt->gpu_stage_bytes += qp->stage.pf_len;
	if (uroce_cuda_copy_async(qp->cu_ctx, st, 0, qp->stage.buf[qp->stage.cur ^ 1],
				  mr->dev + (va - mr->iova), qp->stage.pf_len) ||
	    uroce_cuda_event_record(qp->cu_ctx, qp->stage.pf_ev, st)) {
		ev_wait(qp, qp->stage.pf_ev);
		return;
	}
	qp->stage.pf_mr = mr;
	qp->stage.pf_key = key;
	qp->stage.pf_va = va;
}

/* Starts copying the window after the current one into the other buffer,
 * if the message goes on there (end: the first address after it). */
static void pf_start(struct uroce_qp *qp, uint64_t end)
{
	pf_copy(qp, qp->stage.mr, qp->stage.key, qp->stage.va + qp->stage.len, end);
}

/* The WQE after the one being sent will send [va, va + len) of mr: while
 * the current window is served and no copy is in flight, its first window
 * is copied ahead into the other buffer. A NIC may read a posted WQE's
 * buffer at any time before its completion (ibv_post_send(3): the buffer
 * must not change until then), so reading it early is allowed. */
void uroce_stage_ahead(struct uroce_qp *qp, const struct uroce_mr *mr, uint64_t key, uint64_t va,
		       size_t len)
{
	if (!qp->stage.mr || qp->stage.pf_mr)
		return;
	pf_copy(qp, mr, key, va, va + len);
}

uint8_t *uroce_stage(struct uroce_qp *qp, const struct uroce_mr *mr, uint64_t key, uint64_t va,
		     size_t len, size_t want)
{
	size_t n;

	/* bytes written by the peer must be in the GPU before we read it */
	if (uroce_place_dirty(qp) && uroce_place_flush(qp))
		return NULL;
	/* A hit needs the same WQE (or READ): the application may change its
	 * buffer between two work requests. */
	if (qp->stage.mr == mr && qp->stage.key == key && va >= qp->stage.va &&
	    va + len <= qp->stage.va + qp->stage.len) {
		pf_start(qp, va + want);
		return qp->stage.buf[qp->stage.cur] + (va - qp->stage.va);
	}
	if (bufs_alloc(qp->stage.buf, qp->stage.pinned, 2, &qp->stage.cap, mr) || len > qp->stage.cap)
		return NULL;
	/* packets queued may point into the window about to change */
	uroce_eng_flush(qp->eng);
	if (qp->stage.pf_mr == mr && qp->stage.pf_key == key && va >= qp->stage.pf_va &&
	    va + len <= qp->stage.pf_va + qp->stage.pf_len) {
		/* the prefetched window: wait for it and serve from it */
		qp->stage.mr = NULL;
		if (pf_drop(qp))
			return NULL;
		qp->cnt->gpu_prefetch_hits++;
		qp->stage.cur ^= 1;
		qp->stage.mr = mr;
		qp->stage.key = key;
		qp->stage.va = qp->stage.pf_va;
		qp->stage.len = qp->stage.pf_len;
		pf_start(qp, va + want);
		return qp->stage.buf[qp->stage.cur] + (va - qp->stage.va);
	}
	if (pf_drop(qp))
		return NULL;
	n = MIN(MAX(len, want), qp->stage.cap);
	qp->stage.mr = NULL;
	qp->cnt->gpu_stage_copies++;
	qp->cnt->gpu_stage_bytes += n;
	qp->cnt->gpu_stage_sync++;
	if (sync_copy(qp, mr, 0, va, qp->stage.buf[qp->stage.cur], n))
		return NULL;
	qp->stage.mr = mr;
	qp->stage.key = key;
	qp->stage.va = va;
	qp->stage.len = n;
	pf_start(qp, va + want);
	return qp->stage.buf[qp->stage.cur];
}

uint8_t *uroce_stage_linear(struct uroce_qp *qp, const struct uroce_mr *cudamr, size_t len)
{
	if (bufs_alloc(qp->stage.buf, qp->stage.pinned, 2, &qp->stage.cap, cudamr) ||
	    len > qp->stage.cap)
		return NULL;
	uroce_eng_flush(qp->eng);
	if (pf_drop(qp))
		return NULL;
	qp->stage.mr = NULL;
	return qp->stage.buf[qp->stage.cur];
}

/* An MR is going away: nothing of it may stay staged or in flight. */
void uroce_stage_forget(struct uroce_qp *qp, const struct uroce_mr *mr)
{
	if (qp->stage.pf_mr == mr)
		pf_drop(qp);
	if (qp->stage.mr == mr)
		qp->stage.mr = NULL;
	if (qp->rxs.mr == mr || qp->rxs.inflight)
		uroce_place_flush(qp);
}

void uroce_stage_free(struct uroce_qp *qp)
{
	pf_drop(qp);
	uroce_place_flush(qp);
	for (int i = 0; i < 2; i++)
		if (qp->stage.buf[i])
			uroce_cuda_host_free(qp->stage.buf[i], qp->stage.pinned[i]);
	for (int i = 0; i < UROCE_RXS_MAX; i++) {
		if (qp->rxs.buf[i])
			uroce_cuda_host_free(qp->rxs.buf[i], qp->rxs.pinned[i]);
		if (qp->rxs.ev[i])
			uroce_cuda_event_free(qp->cu_ctx, qp->rxs.ev[i]);
	}
	if (qp->stage.pf_ev)
		uroce_cuda_event_free(qp->cu_ctx, qp->stage.pf_ev);
	if (qp->cu_stream)
		uroce_cuda_stream_free(qp->cu_ctx, qp->cu_stream);
	memset(&qp->stage, 0, sizeof(qp->stage));
	memset(&qp->rxs, 0, sizeof(qp->rxs));
	qp->cu_stream = qp->cu_ctx = NULL;
}
