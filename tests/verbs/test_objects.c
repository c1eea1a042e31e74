/* Object lifetime (PD, MR, CQ, QP), argument checking with the documented
 * errno values, the RC QP state machine, ibv_query_qp and work queue limits. */
#include <sys/mman.h>

#include "common.h"

struct objs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_device_attr d;
};

static void objs_open(struct objs *o)
{
	o->ctx = tv_open_device();
	o->d = tv_query_device(o->ctx);
	o->pd = ibv_alloc_pd(o->ctx);
	T_ASSERTF(o->pd != NULL, "ibv_alloc_pd: %s", strerror(errno));
	o->cq = ibv_create_cq(o->ctx, 256, NULL, NULL, 0);
	T_ASSERTF(o->cq != NULL, "ibv_create_cq: %s", strerror(errno));
}

static struct ibv_qp *rc_qp(struct objs *o, uint32_t swr, uint32_t rwr,
			    uint32_t ssge, uint32_t rsge, struct ibv_qp_init_attr *out)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.qp_context = o;
	ia.send_cq = o->cq;
	ia.recv_cq = o->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = swr;
	ia.cap.max_recv_wr = rwr;
	ia.cap.max_send_sge = ssge;
	ia.cap.max_recv_sge = rsge;
	qp = ibv_create_qp(o->pd, &ia);
	if (out)
		*out = ia;
	return qp;
}

/* ---- PD / MR ------------------------------------------------------------- */

T_CASE(pd_alloc_dealloc)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_pd *p1 = ibv_alloc_pd(ctx), *p2 = ibv_alloc_pd(ctx);

	T_ASSERT(p1 != NULL && p2 != NULL);
	T_ASSERT(p1 != p2);
	T_EQ_PTR(p1->context, ctx);
	T_EQ_INT(ibv_dealloc_pd(p1), 0);
	T_EQ_INT(ibv_dealloc_pd(p2), 0);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(mr_reg_dereg)
{
	struct objs o;
	size_t len = 3 * 4096 + 17;
	uint8_t *buf = malloc(len);
	struct ibv_mr *m1, *m2, *m3;

	objs_open(&o);
	T_ASSERT(buf != NULL);
	m1 = ibv_reg_mr(o.pd, buf, len, TV_ACCESS_ALL);
	T_ASSERTF(m1 != NULL, "ibv_reg_mr: %s", strerror(errno));
	T_EQ_PTR(m1->addr, buf);
	T_EQ_INT(m1->length, len);
	T_EQ_PTR(m1->pd, o.pd);
	T_EQ_PTR(m1->context, o.ctx);
	/* Read-only local MR (local read is always allowed). */
	m2 = ibv_reg_mr(o.pd, buf + 1, 100, 0);
	T_ASSERTF(m2 != NULL, "ibv_reg_mr(access 0): %s", strerror(errno));
	/* The same memory registered twice gets distinct keys. */
	m3 = ibv_reg_mr(o.pd, buf, len, TV_ACCESS_ALL);
	T_ASSERT(m3 != NULL);
	T_NE_INT(m1->lkey, m3->lkey);
	T_NE_INT(m1->rkey, m3->rkey);
	T_NE_INT(m1->lkey, m2->lkey);
	T_EQ_INT(ibv_dereg_mr(m1), 0);
	T_EQ_INT(ibv_dereg_mr(m2), 0);
	T_EQ_INT(ibv_dereg_mr(m3), 0);
	free(buf);
}

/* ibv_reg_dmabuf_mr(3) argument checks: no fd, a closed fd, an fd that is
 * not a dma-buf, zero length (mappable and CUDA dma-bufs: test_gpu). */
T_CASE(mr_reg_dmabuf_bad_args)
{
	struct objs o;
	int fd, pfd[2];

	objs_open(&o);
	errno = 0;
	T_ASSERT(!ibv_reg_dmabuf_mr(o.pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE));
	T_EQ_INT(errno, EBADF);
	T_EQ_INT(pipe(pfd), 0);
	close(pfd[1]);
	errno = 0;
	T_ASSERT(!ibv_reg_dmabuf_mr(o.pd, 0, 4096, 0, pfd[1], IBV_ACCESS_LOCAL_WRITE));
	T_EQ_INT(errno, EBADF);
	errno = 0;
	T_ASSERT(!ibv_reg_dmabuf_mr(o.pd, 0, 4096, 0, pfd[0], IBV_ACCESS_LOCAL_WRITE));
	T_EQ_INT(errno, EINVAL);
	close(pfd[0]);
	fd = memfd_create("not-a-dmabuf", 0);
	T_ASSERT(fd >= 0);
	T_EQ_INT(ftruncate(fd, 4096), 0);
	errno = 0;
	T_ASSERT(!ibv_reg_dmabuf_mr(o.pd, 0, 4096, 0, fd, IBV_ACCESS_LOCAL_WRITE));
	T_EQ_INT(errno, EINVAL);
	errno = 0;
	T_ASSERT(!ibv_reg_dmabuf_mr(o.pd, 0, 0, 0, fd, IBV_ACCESS_LOCAL_WRITE));
	T_EQ_INT(errno, EINVAL);
	errno = 0;
	T_ASSERT(!ibv_reg_dmabuf_mr(o.pd, 0, 4096, 0, fd, IBV_ACCESS_REMOTE_WRITE));
	T_EQ_INT(errno, EINVAL); /* remote write needs local write */
	close(fd);
}

T_CASE(mr_reg_64mib)
{
	struct objs o;
	struct tv_buf b;

	objs_open(&o);
	tv_buf_alloc(&b, o.pd, (64u << 20) + 13, TV_ACCESS_ALL);
	T_EQ_INT(b.mr->length, (64u << 20) + 13);
	tv_buf_free(&b);
}

T_CASE(mr_remote_write_needs_local_write)
{
	struct objs o;
	char buf[256];
	struct ibv_mr *m;

	objs_open(&o);
	errno = 0;
	m = ibv_reg_mr(o.pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE);
	T_EQ_PTR(m, NULL);
	T_EQ_INT(errno, EINVAL);
	errno = 0;
	m = ibv_reg_mr(o.pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_ATOMIC);
	T_EQ_PTR(m, NULL);
	T_EQ_INT(errno, EINVAL);
	errno = 0;
	m = ibv_reg_mr(o.pd, buf, sizeof(buf),
		       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	T_EQ_PTR(m, NULL);
	T_EQ_INT(errno, EINVAL);
	/* REMOTE_READ alone is fine. */
	m = ibv_reg_mr(o.pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_READ);
	T_ASSERTF(m != NULL, "ibv_reg_mr(REMOTE_READ): %s", strerror(errno));
	T_EQ_INT(ibv_dereg_mr(m), 0);
}

T_CASE(dealloc_pd_busy_mr)
{
	struct objs o;
	char buf[256];
	struct ibv_pd *pd;
	struct ibv_mr *m;

	objs_open(&o);
	pd = ibv_alloc_pd(o.ctx);
	T_ASSERT(pd != NULL);
	m = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	T_ASSERT(m != NULL);
	T_EQ_INT(ibv_dealloc_pd(pd), EBUSY);
	/* The MR still works as an object after the failed dealloc. */
	T_EQ_PTR(m->pd, pd);
	T_EQ_INT(ibv_dereg_mr(m), 0);
	T_EQ_INT(ibv_dealloc_pd(pd), 0);
}

T_CASE(dealloc_pd_busy_qp)
{
	struct objs o;
	struct ibv_qp *qp;

	objs_open(&o);
	qp = rc_qp(&o, 16, 16, 1, 1, NULL);
	T_ASSERT(qp != NULL);
	T_EQ_INT(ibv_dealloc_pd(o.pd), EBUSY);
	T_EQ_INT(ibv_destroy_qp(qp), 0);
	T_EQ_INT(ibv_destroy_cq(o.cq), 0);
	T_EQ_INT(ibv_dealloc_pd(o.pd), 0);
	T_EQ_INT(ibv_close_device(o.ctx), 0);
}

/* ---- CQ ------------------------------------------------------------------ */

T_CASE(cq_create_destroy)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_cq *cq;
	int tag;

	cq = ibv_create_cq(ctx, 1, &tag, NULL, 0);
	T_ASSERTF(cq != NULL, "ibv_create_cq(1): %s", strerror(errno));
	T_GE_INT(cq->cqe, 1);
	T_EQ_PTR(cq->cq_context, &tag);
	T_EQ_PTR(cq->context, ctx);
	T_EQ_PTR(cq->channel, NULL);
	T_EQ_INT(ibv_destroy_cq(cq), 0);
	cq = ibv_create_cq(ctx, 1000, NULL, NULL, 0);
	T_ASSERT(cq != NULL);
	T_GE_INT(cq->cqe, 1000);
	T_EQ_INT(ibv_destroy_cq(cq), 0);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(cq_too_big)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_device_attr d = tv_query_device(ctx);
	struct ibv_cq *cq;

	T_ASSERT(d.max_cqe < 0x7fffffff);
	errno = 0;
	cq = ibv_create_cq(ctx, d.max_cqe + 1, NULL, NULL, 0);
	T_EQ_PTR(cq, NULL);
	T_EQ_INT(errno, EINVAL);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(cq_bad_comp_vector)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_cq *cq;

	cq = ibv_create_cq(ctx, 16, NULL, NULL, ctx->num_comp_vectors);
	T_EQ_PTR(cq, NULL);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(destroy_cq_busy)
{
	struct objs o;
	struct ibv_qp *qp;
	struct ibv_cq *rcq;
	struct ibv_qp_init_attr ia;

	objs_open(&o);
	rcq = ibv_create_cq(o.ctx, 16, NULL, NULL, 0);
	T_ASSERT(rcq != NULL);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = o.cq;
	ia.recv_cq = rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(o.pd, &ia);
	T_ASSERT(qp != NULL);
	T_EQ_INT(ibv_destroy_cq(o.cq), EBUSY);
	T_EQ_INT(ibv_destroy_cq(rcq), EBUSY);
	T_EQ_INT(ibv_destroy_qp(qp), 0);
	T_EQ_INT(ibv_destroy_cq(o.cq), 0);
	T_EQ_INT(ibv_destroy_cq(rcq), 0);
}

/* ---- QP creation --------------------------------------------------------- */

T_CASE(qp_create_destroy)
{
	struct objs o;
	struct ibv_qp_init_attr ia;
	struct ibv_qp *q1, *q2;

	objs_open(&o);
	q1 = rc_qp(&o, 64, 32, 2, 3, &ia);
	T_ASSERTF(q1 != NULL, "ibv_create_qp: %s", strerror(errno));
	T_GE_INT(ia.cap.max_send_wr, 64);
	T_GE_INT(ia.cap.max_recv_wr, 32);
	T_GE_INT(ia.cap.max_send_sge, 2);
	T_GE_INT(ia.cap.max_recv_sge, 3);
	T_EQ_INT(q1->qp_type, IBV_QPT_RC);
	T_EQ_INT(q1->state, IBV_QPS_RESET);
	T_EQ_PTR(q1->pd, o.pd);
	T_EQ_PTR(q1->context, o.ctx);
	T_EQ_PTR(q1->send_cq, o.cq);
	T_EQ_PTR(q1->recv_cq, o.cq);
	T_EQ_PTR(q1->qp_context, &o);
	T_EQ_PTR(q1->srq, NULL);
	T_GE_INT(q1->qp_num, 2); /* 0 and 1 are the special QPs */
	T_LE_INT(q1->qp_num, 0xffffff);
	T_EQ_INT(tv_qp_state(q1), IBV_QPS_RESET);
	q2 = rc_qp(&o, 1, 1, 1, 1, NULL);
	T_ASSERT(q2 != NULL);
	T_NE_INT(q1->qp_num, q2->qp_num);
	T_EQ_INT(ibv_destroy_qp(q1), 0);
	T_EQ_INT(ibv_destroy_qp(q2), 0);
}

T_CASE(qp_create_many)
{
	struct objs o;
	struct ibv_qp *q[64];

	objs_open(&o);
	for (int i = 0; i < 64; i++) {
		q[i] = rc_qp(&o, 4, 4, 1, 1, NULL);
		T_ASSERTF(q[i] != NULL, "QP %d: %s", i, strerror(errno));
		for (int j = 0; j < i; j++)
			T_NE_INT(q[i]->qp_num, q[j]->qp_num);
	}
	for (int i = 0; i < 64; i++)
		T_EQ_INT(ibv_destroy_qp(q[i]), 0);
}

static void expect_qp_type_unsupported(struct objs *o, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = o->cq;
	ia.recv_cq = o->cq;
	ia.qp_type = t;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	errno = 0;
	qp = ibv_create_qp(o->pd, &ia);
	T_ASSERTF(qp == NULL, "QP type %d was created", (int)t);
	T_ASSERTF(errno == EOPNOTSUPP, "QP type %d: errno %d (%s), expected EOPNOTSUPP",
		  (int)t, errno, strerror(errno));
}

/* RC, UC, UD and XRC initiators are offered through ibv_create_qp (an
 * XRC target needs a domain: ibv_create_qp_ex, test_xrc); raw packet QPs
 * are not (EOPNOTSUPP); a type that does not exist is EINVAL. */
T_CASE(qp_create_types)
{
	struct objs o;
	static const enum ibv_qp_type ok[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD,
					       IBV_QPT_XRC_SEND };

	objs_open(&o);
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct ibv_qp_init_attr ia;
		struct ibv_qp *qp;

		memset(&ia, 0, sizeof(ia));
		ia.send_cq = ia.recv_cq = o.cq;
		ia.qp_type = ok[i];
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		qp = ibv_create_qp(o.pd, &ia);
		T_ASSERTF(qp, "QP type %d: %s", (int)ok[i], strerror(errno));
		T_EQ_INT(qp->qp_type, ok[i]);
		T_EQ_INT(ibv_destroy_qp(qp), 0);
	}
	expect_qp_type_unsupported(&o, IBV_QPT_RAW_PACKET);
	for (int bad = 0; bad < 2; bad++) {
		struct ibv_qp_init_attr ia;

		memset(&ia, 0, sizeof(ia));
		ia.send_cq = ia.recv_cq = o.cq;
		ia.qp_type = bad ? (enum ibv_qp_type)77 : IBV_QPT_XRC_RECV;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
		errno = 0;
		T_EQ_PTR(ibv_create_qp(o.pd, &ia), NULL);
		T_EQ_INT(errno, EINVAL);
	}
}

T_CASE(qp_create_too_big)
{
	struct objs o;
	struct ibv_qp *qp;

	objs_open(&o);
	errno = 0;
	qp = rc_qp(&o, (uint32_t)o.d.max_qp_wr + 1, 4, 1, 1, NULL);
	T_EQ_PTR(qp, NULL);
	T_EQ_INT(errno, EINVAL);
	errno = 0;
	qp = rc_qp(&o, 4, (uint32_t)o.d.max_qp_wr + 1, 1, 1, NULL);
	T_EQ_PTR(qp, NULL);
	T_EQ_INT(errno, EINVAL);
	errno = 0;
	qp = rc_qp(&o, 4, 4, (uint32_t)o.d.max_sge + 1, 1, NULL);
	T_EQ_PTR(qp, NULL);
	T_EQ_INT(errno, EINVAL);
	errno = 0;
	qp = rc_qp(&o, 4, 4, 1, (uint32_t)o.d.max_sge + 1, NULL);
	T_EQ_PTR(qp, NULL);
	T_EQ_INT(errno, EINVAL);
}

T_CASE(qp_create_at_limits)
{
	struct objs o;
	struct ibv_qp *qp;

	objs_open(&o);
	qp = rc_qp(&o, (uint32_t)o.d.max_qp_wr, 4, (uint32_t)o.d.max_sge, 1, NULL);
	T_ASSERTF(qp != NULL, "QP at max_qp_wr/max_sge: %s", strerror(errno));
	T_EQ_INT(ibv_destroy_qp(qp), 0);
}

/* ---- state machine ------------------------------------------------------- */

/* A QP in RESET plus a peer description, for state tests. */
struct sm {
	struct tv_opts o;
	struct tv_side s;
	struct tv_info peer;
};

static void sm_open(struct sm *m)
{
	m->o = tv_opts_default();
	tv_side_open(&m->s, &m->o, NULL);
	memset(&m->peer, 0, sizeof(m->peer));
	m->peer.qpn = 0x123;
	m->peer.psn = 0x4567;
	m->peer.gid = tv_gid0(m->s.ctx);
}

static void sm_expect(struct sm *m, enum ibv_qp_state st)
{
	T_EQ_INT(tv_qp_state(m->s.qp), st);
	T_EQ_INT(m->s.qp->state, st);
}

T_CASE(qp_state_valid_path)
{
	struct sm m;

	sm_open(&m);
	sm_expect(&m, IBV_QPS_RESET);
	T_EQ_INT(tv_modify_init(m.s.qp, TV_ACCESS_ALL), 0);
	sm_expect(&m, IBV_QPS_INIT);
	/* INIT -> INIT is allowed too. */
	T_EQ_INT(tv_modify_init(m.s.qp, IBV_ACCESS_REMOTE_READ), 0);
	sm_expect(&m, IBV_QPS_INIT);
	T_EQ_INT(tv_modify_rtr(m.s.qp, &m.o, &m.peer), 0);
	sm_expect(&m, IBV_QPS_RTR);
	T_EQ_INT(tv_modify_rts(m.s.qp, &m.o, 0x777), 0);
	sm_expect(&m, IBV_QPS_RTS);
	/* RTS -> RTS with an optional attribute. */
	{
		struct ibv_qp_attr a;

		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.min_rnr_timer = 5;
		T_EQ_INT(ibv_modify_qp(m.s.qp, &a, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER), 0);
	}
	sm_expect(&m, IBV_QPS_RTS);
}

T_CASE(qp_state_invalid_transitions)
{
	struct sm m;
	struct ibv_qp_attr a;
	int mask;

	sm_open(&m);
	/* RESET -> RTS with everything RTS needs. */
	tv_rts_attr(m.s.qp, &m.o, 1, &a, &mask);
	T_EQ_INT(ibv_modify_qp(m.s.qp, &a, mask), EINVAL);
	sm_expect(&m, IBV_QPS_RESET);
	/* RESET -> RTR with everything RTR needs. */
	tv_rtr_attr(m.s.qp, &m.o, &m.peer, &a, &mask);
	T_EQ_INT(ibv_modify_qp(m.s.qp, &a, mask), EINVAL);
	sm_expect(&m, IBV_QPS_RESET);
	/* INIT -> RTS skips RTR. */
	T_EQ_INT(tv_modify_init(m.s.qp, TV_ACCESS_ALL), 0);
	tv_rts_attr(m.s.qp, &m.o, 1, &a, &mask);
	T_EQ_INT(ibv_modify_qp(m.s.qp, &a, mask), EINVAL);
	sm_expect(&m, IBV_QPS_INIT);
	/* RTR -> INIT goes backwards. */
	T_EQ_INT(tv_modify_rtr(m.s.qp, &m.o, &m.peer), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = TV_ACCESS_ALL;
	T_EQ_INT(ibv_modify_qp(m.s.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		 EINVAL);
	sm_expect(&m, IBV_QPS_RTR);
	/* RTS -> RTR goes backwards. */
	T_EQ_INT(tv_modify_rts(m.s.qp, &m.o, 1), 0);
	tv_rtr_attr(m.s.qp, &m.o, &m.peer, &a, &mask);
	T_EQ_INT(ibv_modify_qp(m.s.qp, &a, mask), EINVAL);
	sm_expect(&m, IBV_QPS_RTS);
}

T_CASE(qp_state_err_reset_invalid)
{
	struct sm m;

	sm_open(&m);
	T_EQ_INT(tv_modify_state(m.s.qp, IBV_QPS_ERR), 0);
	sm_expect(&m, IBV_QPS_ERR);
	/* ERR -> INIT is not a transition; only RESET (or ERR) leaves ERR. */
	T_EQ_INT(tv_modify_init(m.s.qp, TV_ACCESS_ALL), EINVAL);
	sm_expect(&m, IBV_QPS_ERR);
}

T_CASE(qp_init_missing_attrs)
{
	static const int req[] = { IBV_QP_PKEY_INDEX, IBV_QP_PORT, IBV_QP_ACCESS_FLAGS };
	struct sm m;
	struct ibv_qp_attr a;
	int full = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;

	sm_open(&m);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = TV_ACCESS_ALL;
	for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++) {
		T_ASSERTF(ibv_modify_qp(m.s.qp, &a, full & ~req[i]) == EINVAL,
			  "RESET->INIT without attr 0x%x accepted", req[i]);
		sm_expect(&m, IBV_QPS_RESET);
	}
	/* An attribute RESET->INIT does not take (SQ_PSN). */
	a.sq_psn = 5;
	T_EQ_INT(ibv_modify_qp(m.s.qp, &a, full | IBV_QP_SQ_PSN), EINVAL);
	sm_expect(&m, IBV_QPS_RESET);
	/* Port out of range. */
	a.port_num = 2;
	T_EQ_INT(ibv_modify_qp(m.s.qp, &a, full), EINVAL);
	sm_expect(&m, IBV_QPS_RESET);
	a.port_num = 1;
	T_EQ_INT(ibv_modify_qp(m.s.qp, &a, full), 0);
	sm_expect(&m, IBV_QPS_INIT);
}

T_CASE(qp_rtr_missing_attrs)
{
	static const int req[] = { IBV_QP_AV, IBV_QP_PATH_MTU, IBV_QP_DEST_QPN,
				   IBV_QP_RQ_PSN, IBV_QP_MAX_DEST_RD_ATOMIC,
				   IBV_QP_MIN_RNR_TIMER };
	struct sm m;
	struct ibv_qp_attr a;
	int mask;

	sm_open(&m);
	T_EQ_INT(tv_modify_init(m.s.qp, TV_ACCESS_ALL), 0);
	tv_rtr_attr(m.s.qp, &m.o, &m.peer, &a, &mask);
	for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++) {
		T_ASSERTF(ibv_modify_qp(m.s.qp, &a, mask & ~req[i]) == EINVAL,
			  "INIT->RTR without attr 0x%x accepted", req[i]);
		sm_expect(&m, IBV_QPS_INIT);
	}
	/* An RTR GID index outside the table. */
	{
		struct ibv_port_attr p;
		struct ibv_qp_attr b = a;

		T_EQ_INT(ibv_query_port(m.s.ctx, 1, &p), 0);
		b.ah_attr.grh.sgid_index = (uint8_t)p.gid_tbl_len;
		if (p.gid_tbl_len < 256) {
			T_EQ_INT(ibv_modify_qp(m.s.qp, &b, mask), EINVAL);
			sm_expect(&m, IBV_QPS_INIT);
		}
	}
	T_EQ_INT(ibv_modify_qp(m.s.qp, &a, mask), 0);
	sm_expect(&m, IBV_QPS_RTR);
}

T_CASE(qp_rts_missing_attrs)
{
	static const int req[] = { IBV_QP_SQ_PSN, IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT,
				   IBV_QP_RNR_RETRY, IBV_QP_MAX_QP_RD_ATOMIC };
	struct sm m;
	struct ibv_qp_attr a;
	int mask;

	sm_open(&m);
	T_EQ_INT(tv_modify_init(m.s.qp, TV_ACCESS_ALL), 0);
	T_EQ_INT(tv_modify_rtr(m.s.qp, &m.o, &m.peer), 0);
	tv_rts_attr(m.s.qp, &m.o, 9, &a, &mask);
	for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++) {
		T_ASSERTF(ibv_modify_qp(m.s.qp, &a, mask & ~req[i]) == EINVAL,
			  "RTR->RTS without attr 0x%x accepted", req[i]);
		sm_expect(&m, IBV_QPS_RTR);
	}
	T_EQ_INT(ibv_modify_qp(m.s.qp, &a, mask), 0);
	sm_expect(&m, IBV_QPS_RTS);
}

/* Brings m's QP from RESET to st (RESET, INIT, RTR or RTS). */
static void sm_goto(struct sm *m, enum ibv_qp_state st)
{
	if (st == IBV_QPS_RESET)
		return;
	T_EQ_INT(tv_modify_init(m->s.qp, TV_ACCESS_ALL), 0);
	if (st == IBV_QPS_INIT)
		return;
	T_EQ_INT(tv_modify_rtr(m->s.qp, &m->o, &m->peer), 0);
	if (st == IBV_QPS_RTR)
		return;
	T_EQ_INT(tv_modify_rts(m->s.qp, &m->o, 3), 0);
}

T_CASE(qp_any_state_to_err_and_reset)
{
	static const enum ibv_qp_state from[] = { IBV_QPS_RESET, IBV_QPS_INIT,
						  IBV_QPS_RTR, IBV_QPS_RTS };
	struct sm m;

	sm_open(&m);
	for (size_t i = 0; i < 4; i++) {
		sm_goto(&m, from[i]);
		sm_expect(&m, from[i]);
		T_ASSERTF(tv_modify_state(m.s.qp, IBV_QPS_ERR) == 0,
			  "state %d -> ERR refused", (int)from[i]);
		sm_expect(&m, IBV_QPS_ERR);
		T_EQ_INT(tv_modify_state(m.s.qp, IBV_QPS_RESET), 0);
		sm_expect(&m, IBV_QPS_RESET);
	}
	/* Any state -> RESET directly. */
	for (size_t i = 1; i < 4; i++) {
		sm_goto(&m, from[i]);
		T_ASSERTF(tv_modify_state(m.s.qp, IBV_QPS_RESET) == 0,
			  "state %d -> RESET refused", (int)from[i]);
		sm_expect(&m, IBV_QPS_RESET);
	}
}

T_CASE(qp_query_returns_what_was_set)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	struct ibv_device_attr d;
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS |
		   IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN |
		   IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		   IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_CAP;

	o.mtu = IBV_MTU_2048;
	o.timeout = 17;
	o.retry_cnt = 5;
	o.rnr_retry = 3;
	o.min_rnr_timer = 14;
	o.max_send_wr = 77;
	o.max_recv_wr = 33;
	o.max_send_sge = 3;
	o.max_recv_sge = 2;
	o.max_inline = 64;
	o.max_rd_atomic = 1;
	o.max_dest_rd_atomic = 1;
	o.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	o.sq_sig_all = 0;
	tv_pair_open(&p, &o);
	d = tv_query_device(p.a.ctx);
	memset(&a, 0xa5, sizeof(a));
	memset(&ia, 0xa5, sizeof(ia));
	T_EQ_INT(ibv_query_qp(p.a.qp, &a, mask, &ia), 0);
	T_EQ_INT(a.qp_state, IBV_QPS_RTS);
	T_EQ_INT(a.dest_qp_num, p.b.qp->qp_num);
	T_EQ_INT(a.path_mtu, IBV_MTU_2048);
	T_EQ_INT(a.timeout, 17);
	T_EQ_INT(a.retry_cnt, 5);
	T_EQ_INT(a.rnr_retry, 3);
	T_EQ_INT(a.min_rnr_timer, 14);
	T_EQ_INT(a.rq_psn, p.b.psn);
	T_EQ_INT(a.sq_psn, p.a.psn);
	T_EQ_INT(a.max_rd_atomic, 1);
	T_EQ_INT(a.max_dest_rd_atomic, 1);
	T_EQ_INT(a.qp_access_flags, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	T_EQ_INT(a.port_num, 1);
	T_EQ_INT(a.pkey_index, 0);
	T_EQ_INT(a.ah_attr.is_global, 1);
	T_EQ_INT(a.ah_attr.port_num, 1);
	T_EQ_INT(a.ah_attr.grh.sgid_index, 0);
	T_EQ_INT(a.ah_attr.grh.hop_limit, 64);
	{
		union ibv_gid g = tv_gid0(p.b.ctx);

		T_EQ_MEM(a.ah_attr.grh.dgid.raw, g.raw, 16);
	}
	T_GE_INT(a.cap.max_send_wr, 77);
	T_GE_INT(a.cap.max_recv_wr, 33);
	T_GE_INT(a.cap.max_send_sge, 3);
	T_GE_INT(a.cap.max_recv_sge, 2);
	T_GE_INT(a.cap.max_inline_data, 64);
	T_GE_INT(ia.cap.max_send_wr, 77);
	T_GE_INT(ia.cap.max_inline_data, 64);
	T_EQ_INT(ia.cap.max_send_wr, p.a.cap.max_send_wr);
	T_EQ_INT(ia.qp_type, IBV_QPT_RC);
	T_EQ_INT(ia.sq_sig_all, 0);
	T_EQ_PTR(ia.send_cq, p.a.scq);
	T_EQ_PTR(ia.recv_cq, p.a.rcq);
	T_LE_INT(a.cap.max_send_wr, d.max_qp_wr);
}

/* ---- posting in the wrong state and queue limits ---------------------------- */

T_CASE(post_send_reset_init_rtr)
{
	struct sm m;
	struct tv_buf b;
	int rc;

	sm_open(&m);
	tv_buf_alloc(&b, m.s.pd, 64, IBV_ACCESS_LOCAL_WRITE);
	rc = tv_post1(m.s.qp, IBV_WR_SEND, 1, &b, 0, 8, 0, 0, 0, IBV_SEND_SIGNALED);
	T_ASSERTF(rc == EINVAL, "post_send in RESET: %d", rc);
	T_EQ_INT(tv_modify_init(m.s.qp, TV_ACCESS_ALL), 0);
	rc = tv_post1(m.s.qp, IBV_WR_SEND, 2, &b, 0, 8, 0, 0, 0, IBV_SEND_SIGNALED);
	T_ASSERTF(rc == EINVAL, "post_send in INIT: %d", rc);
	T_EQ_INT(tv_modify_rtr(m.s.qp, &m.o, &m.peer), 0);
	rc = tv_post1(m.s.qp, IBV_WR_SEND, 3, &b, 0, 8, 0, 0, 0, IBV_SEND_SIGNALED);
	T_ASSERTF(rc == EINVAL, "post_send in RTR: %d", rc);
	tv_expect_no_wc(m.s.scq, 0.1);
}

T_CASE(post_recv_reset_fails_init_ok)
{
	struct sm m;
	struct tv_buf b;

	sm_open(&m);
	tv_buf_alloc(&b, m.s.pd, 64, IBV_ACCESS_LOCAL_WRITE);
	T_EQ_INT(tv_post_recv1(m.s.qp, 1, &b, 0, 64), EINVAL);
	T_EQ_INT(tv_modify_init(m.s.qp, TV_ACCESS_ALL), 0);
	/* Receives may be posted from INIT on (IBA 10.3.1). */
	T_EQ_INT(tv_post_recv1(m.s.qp, 2, &b, 0, 64), 0);
	tv_expect_no_wc(m.s.rcq, 0.1);
}

T_CASE(post_too_many_sge)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf b;
	struct ibv_sge sg[64];
	int ns, rc;

	o.max_send_sge = 2;
	o.max_recv_sge = 2;
	tv_pair_open(&p, &o);
	tv_buf_alloc(&b, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	ns = (int)p.a.cap.max_send_sge + 1;
	T_LE_INT(ns, 64);
	for (int i = 0; i < ns; i++)
		sg[i] = tv_sge(&b, (size_t)i * 8, 8);
	rc = tv_post(p.a.qp, IBV_WR_SEND, 1, sg, ns, 0, 0, 0, IBV_SEND_SIGNALED);
	T_NE_INT(rc, 0);
	t_log("post_send with %d SGEs (max %u): %d", ns, p.a.cap.max_send_sge, rc);
	ns = (int)p.a.cap.max_recv_sge + 1;
	T_LE_INT(ns, 64);
	T_NE_INT(tv_post_recv(p.a.qp, 2, sg, ns), 0);
	tv_expect_no_wc(p.a.scq, 0.1);
	tv_expect_no_wc(p.a.rcq, 0.0);
}

/* SENDs to a peer with no receive posted stay outstanding (RNR, rnr_retry 7)
 * however fast the engine is; receives posted later release them. */
T_CASE(sq_overflow_enomem)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf src, dst;
	uint32_t n;
	int rc;

	o.max_send_wr = 16;
	o.max_recv_wr = 64;
	o.rnr_retry = 7;
	o.min_rnr_timer = 1; /* 0.01 ms */
	tv_pair_open(&p, &o);
	n = p.a.cap.max_send_wr;
	T_GE_INT(n, 16);
	T_LE_INT(n, p.b.cap.max_recv_wr);
	tv_buf_alloc(&src, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&dst, p.b.pd, 4096, TV_ACCESS_ALL);
	for (uint32_t i = 0; i < n; i++) {
		rc = tv_post1(p.a.qp, IBV_WR_SEND, i, &src, 0, 8, 0, 0, 0, IBV_SEND_SIGNALED);
		T_ASSERTF(rc == 0, "WR %u of %u: %d", i, n, rc);
	}
	rc = tv_post1(p.a.qp, IBV_WR_SEND, n, &src, 0, 8, 0, 0, 0, IBV_SEND_SIGNALED);
	T_EQ_INT(rc, ENOMEM);
	tv_expect_no_wc(p.a.scq, 0.05);
	for (uint32_t i = 0; i < n; i++)
		T_EQ_INT(tv_post_recv1(p.b.qp, i, &dst, 0, 64), 0);
	for (uint32_t i = 0; i < n; i++)
		tv_expect_wc(p.a.scq, p.a.qp, i, IBV_WC_SUCCESS, IBV_WC_SEND);
	for (uint32_t i = 0; i < n; i++)
		tv_expect_wc(p.b.rcq, p.b.qp, i, IBV_WC_SUCCESS, IBV_WC_RECV);
	tv_expect_no_wc(p.a.scq, 0.05);
	/* Room again once the completions were polled. */
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 999, &src, 0, 8, (uintptr_t)dst.p,
			  dst.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 999, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
}

T_CASE(sq_overflow_in_one_list)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf src, dst;
	struct ibv_send_wr *wr, *bad = NULL;
	struct ibv_sge sge;
	uint32_t n;

	o.max_send_wr = 8;
	o.max_recv_wr = 64;
	o.rnr_retry = 7;
	o.min_rnr_timer = 1;
	tv_pair_open(&p, &o);
	n = p.a.cap.max_send_wr;
	T_LE_INT(n, p.b.cap.max_recv_wr);
	tv_buf_alloc(&src, p.a.pd, 64, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&dst, p.b.pd, 64, TV_ACCESS_ALL);
	sge = tv_sge(&src, 0, 8);
	wr = calloc(n + 1, sizeof(*wr));
	T_ASSERT(wr != NULL);
	for (uint32_t i = 0; i <= n; i++) {
		wr[i].wr_id = i;
		wr[i].next = i < n ? &wr[i + 1] : NULL;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = IBV_SEND_SIGNALED;
	}
	T_EQ_INT(ibv_post_send(p.a.qp, wr, &bad), ENOMEM);
	T_EQ_PTR(bad, &wr[n]);
	/* The WRs before the failing one were posted and complete. */
	for (uint32_t i = 0; i < n; i++)
		T_EQ_INT(tv_post_recv1(p.b.qp, i, &dst, 0, 64), 0);
	for (uint32_t i = 0; i < n; i++)
		tv_expect_wc(p.a.scq, p.a.qp, i, IBV_WC_SUCCESS, IBV_WC_SEND);
	tv_expect_no_wc(p.a.scq, 0.05);
	free(wr);
}

T_CASE(rq_overflow_enomem)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf b;
	uint32_t n;

	o.max_recv_wr = 16;
	tv_pair_open(&p, &o);
	n = p.b.cap.max_recv_wr;
	T_LE_INT(n, 4096);
	tv_buf_alloc(&b, p.b.pd, 64, IBV_ACCESS_LOCAL_WRITE);
	for (uint32_t i = 0; i < n; i++)
		T_EQ_INT(tv_post_recv1(p.b.qp, i, &b, 0, 64), 0);
	T_EQ_INT(tv_post_recv1(p.b.qp, n, &b, 0, 64), ENOMEM);
}

T_CASE(qp_reuse_after_reset)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf src, dst;
	struct tv_info ia, ib;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&src, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&dst, p.b.pd, 4096, TV_ACCESS_ALL);
	tv_fill(src.p, 4096, 1);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 1, &src, 0, 4096, (uintptr_t)dst.p,
			  dst.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	T_PATTERN(dst.p, 4096, 1, 0);
	/* Both QPs back to RESET, then connected again with new PSNs. */
	T_EQ_INT(tv_modify_state(p.a.qp, IBV_QPS_RESET), 0);
	T_EQ_INT(tv_modify_state(p.b.qp, IBV_QPS_RESET), 0);
	p.a.psn = (p.a.psn + 100000) & 0xffffff;
	p.b.psn = (p.b.psn + 777) & 0xffffff;
	tv_info_of(&p.a, &ia);
	tv_info_of(&p.b, &ib);
	tv_connect(&p.a, &o, &ib);
	tv_connect(&p.b, &o, &ia);
	tv_fill(src.p, 4096, 2);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 2, &src, 0, 4096, (uintptr_t)dst.p,
			  dst.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	T_PATTERN(dst.p, 4096, 2, 0);
	tv_expect_no_wc(p.a.scq, 0.05);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
