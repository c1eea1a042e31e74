/* XRC (ibv_open_xrcd(3), ibv_create_srq_ex(3), ibv_create_qp_ex(3)): an
 * initiator QP reaches the XRC SRQs of a target's domain by number; a
 * SEND lands in the SRQ its WR names and completes on that SRQ's CQ with
 * the target QP's number; RDMA goes to memory of that SRQ's PD; a number
 * that is not one of the domain's SRQs is an invalid request. Initiator
 * and target on separate device contexts (two engines). */
#include <fcntl.h>

#include "common.h"

struct xrc {
	struct ibv_context *ci, *ct;   /* initiator's and target's contexts */
	struct ibv_pd *pi, *pt;
	struct ibv_cq *scq, *cq[2];
	struct ibv_xrcd *xrcd;
	struct ibv_srq *srq[2];
	uint32_t srqn[2];
	struct ibv_qp *ini, *tgt;
	struct tv_buf sb, rb;          /* initiator's source, target's memory (pt) */
};

static struct ibv_xrcd *open_xrcd(struct ibv_context *c, int fd, int oflags)
{
	struct ibv_xrcd_init_attr a;

	memset(&a, 0, sizeof(a));
	a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	a.fd = fd;
	a.oflags = oflags;
	return ibv_open_xrcd(c, &a);
}

static struct ibv_srq *xsrq(struct xrc *x, int i)
{
	struct ibv_srq_init_attr_ex a;
	struct ibv_srq *s;

	memset(&a, 0, sizeof(a));
	a.attr.max_wr = 64;
	a.attr.max_sge = 1;
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
		      IBV_SRQ_INIT_ATTR_PD;
	a.srq_type = IBV_SRQT_XRC;
	a.xrcd = x->xrcd;
	a.cq = x->cq[i];
	a.pd = x->pt;
	s = ibv_create_srq_ex(x->ct, &a);
	T_ASSERTF(s, "ibv_create_srq_ex(XRC): %s", strerror(errno));
	return s;
}

static void connect_pair(struct xrc *x)
{
	struct ibv_qp_attr a;
	union ibv_gid gi = tv_gid0(x->ci), gt = tv_gid0(x->ct);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = TV_ACCESS_ALL;
	T_EQ_INT(ibv_modify_qp(x->tgt, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						   IBV_QP_ACCESS_FLAGS),
		 0);
	a.qp_access_flags = 0;
	T_EQ_INT(ibv_modify_qp(x->ini, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						   IBV_QP_ACCESS_FLAGS),
		 0);
	/* target: RTR towards the initiator, RTS with a timeout and PSN only */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = x->ini->qp_num;
	a.rq_psn = 100;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gi;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	T_EQ_INT(ibv_modify_qp(x->tgt, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
						   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
						   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
		 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.sq_psn = 200;
	a.retry_cnt = 7;
	/* requester attributes on a target are dropped, as the kernel does,
	 * but a timeout is needed */
	T_EQ_INT(ibv_modify_qp(x->tgt, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT), EINVAL);
	T_EQ_INT(ibv_modify_qp(x->tgt, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN |
						   IBV_QP_RETRY_CNT),
		 0);
	/* initiator: RTR without responder attributes, RTS as RC */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = x->tgt->qp_num;
	a.rq_psn = 200;
	a.max_dest_rd_atomic = 16;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gt;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	/* responder attributes on an initiator are dropped; an address is
	 * needed */
	T_EQ_INT(ibv_modify_qp(x->ini, &a, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						   IBV_QP_RQ_PSN),
		 EINVAL);
	T_EQ_INT(ibv_modify_qp(x->ini, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
						   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
						   IBV_QP_MAX_DEST_RD_ATOMIC),
		 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 100;
	a.max_rd_atomic = 16;
	T_EQ_INT(ibv_modify_qp(x->ini, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN |
						   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						   IBV_QP_MAX_QP_RD_ATOMIC),
		 0);
}

static void xrc_open(struct xrc *x)
{
	struct ibv_qp_init_attr_ex q;

	memset(x, 0, sizeof(*x));
	x->ci = tv_open_device();
	x->ct = tv_open_device();
	x->pi = ibv_alloc_pd(x->ci);
	x->pt = ibv_alloc_pd(x->ct);
	x->scq = ibv_create_cq(x->ci, 256, NULL, NULL, 0);
	x->cq[0] = ibv_create_cq(x->ct, 256, NULL, NULL, 0);
	x->cq[1] = ibv_create_cq(x->ct, 256, NULL, NULL, 0);
	T_ASSERT(x->pi && x->pt && x->scq && x->cq[0] && x->cq[1]);
	x->xrcd = open_xrcd(x->ct, -1, O_CREAT);
	T_ASSERTF(x->xrcd, "ibv_open_xrcd: %s", strerror(errno));
	for (int i = 0; i < 2; i++) {
		x->srq[i] = xsrq(x, i);
		T_EQ_INT(ibv_get_srq_num(x->srq[i], &x->srqn[i]), 0);
	}
	T_NE_INT(x->srqn[0], x->srqn[1]);
	memset(&q, 0, sizeof(q));
	q.qp_type = IBV_QPT_XRC_RECV;
	q.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	q.xrcd = x->xrcd;
	x->tgt = ibv_create_qp_ex(x->ct, &q);
	T_ASSERTF(x->tgt, "XRC target QP: %s", strerror(errno));
	memset(&q, 0, sizeof(q));
	q.qp_type = IBV_QPT_XRC_SEND;
	q.comp_mask = IBV_QP_INIT_ATTR_PD;
	q.pd = x->pi;
	q.send_cq = x->scq;
	q.cap.max_send_wr = 64;
	q.cap.max_send_sge = 1;
	x->ini = ibv_create_qp_ex(x->ci, &q);
	T_ASSERTF(x->ini, "XRC initiator QP: %s", strerror(errno));
	T_EQ_INT(x->ini->qp_type, IBV_QPT_XRC_SEND);
	T_EQ_INT(x->tgt->qp_type, IBV_QPT_XRC_RECV);
	connect_pair(x);
	tv_buf_alloc(&x->sb, x->pi, 1u << 20, TV_ACCESS_ALL);
	tv_buf_alloc(&x->rb, x->pt, 1u << 20, TV_ACCESS_ALL);
}

static void xrc_close(struct xrc *x)
{
	tv_buf_free(&x->sb);
	tv_buf_free(&x->rb);
	T_EQ_INT(ibv_destroy_qp(x->ini), 0);
	T_EQ_INT(ibv_destroy_qp(x->tgt), 0);
	T_EQ_INT(ibv_close_xrcd(x->xrcd), EBUSY); /* its SRQs are still there */
	for (int i = 0; i < 2; i++)
		T_EQ_INT(ibv_destroy_srq(x->srq[i]), 0);
	T_EQ_INT(ibv_close_xrcd(x->xrcd), 0);
	T_EQ_INT(ibv_destroy_cq(x->scq), 0);
	T_EQ_INT(ibv_destroy_cq(x->cq[0]), 0);
	T_EQ_INT(ibv_destroy_cq(x->cq[1]), 0);
	T_EQ_INT(ibv_dealloc_pd(x->pi), 0);
	T_EQ_INT(ibv_dealloc_pd(x->pt), 0);
	T_EQ_INT(ibv_close_device(x->ci), 0);
	T_EQ_INT(ibv_close_device(x->ct), 0);
}

static int xpost(struct xrc *x, enum ibv_wr_opcode op, uint64_t id, size_t off, size_t n,
		 uint64_t raddr, uint32_t rkey, uint32_t srqn)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge s = tv_sge(&x->sb, off, n);

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = n ? &s : NULL;
	wr.num_sge = n ? 1 : 0;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl((uint32_t)id);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 5;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	wr.qp_type.xrc.remote_srqn = srqn;
	return ibv_post_send(x->ini, &wr, &bad);
}

/* A SEND lands in the SRQ its WR names, completing on that SRQ's CQ with
 * the target QP's number, over several packets too; the other SRQ's CQ
 * stays empty. */
T_CASE(send_to_each_srq)
{
	struct xrc x;
	static const size_t sizes[] = { 1, 1024, 5000 };

	xrc_open(&x);
	for (int k = 0; k < 6; k++) {
		int i = k & 1;
		size_t n = sizes[k % 3];
		struct ibv_recv_wr rw, *bad;
		struct ibv_sge rs = tv_sge(&x.rb, (size_t)k * 8192, 8192);
		struct ibv_wc wc;

		memset(&rw, 0, sizeof(rw));
		rw.wr_id = 1000 + (uint64_t)k;
		rw.sg_list = &rs;
		rw.num_sge = 1;
		T_EQ_INT(ibv_post_srq_recv(x.srq[i], &rw, &bad), 0);
		tv_fill(x.sb.p + (size_t)k * 8192, n, 40 + (uint64_t)k);
		T_EQ_INT(xpost(&x, IBV_WR_SEND_WITH_IMM, (uint64_t)k, (size_t)k * 8192, n, 0, 0,
			       x.srqn[i]),
			 0);
		tv_expect_wc(x.scq, x.ini, (uint64_t)k, IBV_WC_SUCCESS, IBV_WC_SEND);
		wc = tv_expect_wc(x.cq[i], x.tgt, 1000 + (uint64_t)k, IBV_WC_SUCCESS, IBV_WC_RECV);
		T_EQ_INT(wc.byte_len, n);
		T_EQ_INT(ntohl(wc.imm_data), k);
		T_PATTERN(x.rb.p + (size_t)k * 8192, n, 40 + (uint64_t)k, 0);
		tv_expect_no_wc(x.cq[i ^ 1], 0.01);
	}
	xrc_close(&x);
}

/* WRITE, READ and an atomic through the initiator, checked in the
 * target's memory (its SRQ's PD). */
T_CASE(rdma_and_atomic)
{
	struct xrc x;
	uint64_t v;

	xrc_open(&x);
	tv_fill(x.sb.p, 70000, 9);
	T_EQ_INT(xpost(&x, IBV_WR_RDMA_WRITE, 1, 0, 70000, (uintptr_t)x.rb.p, x.rb.mr->rkey,
		       x.srqn[0]),
		 0);
	tv_expect_wc(x.scq, x.ini, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	T_PATTERN(x.rb.p, 70000, 9, 0);
	tv_fill(x.rb.p + 100000, 3000, 10);
	T_EQ_INT(xpost(&x, IBV_WR_RDMA_READ, 2, 200000, 3000, (uintptr_t)x.rb.p + 100000,
		       x.rb.mr->rkey, x.srqn[1]),
		 0);
	tv_expect_wc(x.scq, x.ini, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	T_PATTERN(x.sb.p + 200000, 3000, 10, 0);
	v = 37;
	memcpy(x.rb.p + 300000, &v, 8);
	T_EQ_INT(xpost(&x, IBV_WR_ATOMIC_FETCH_AND_ADD, 3, 400000, 8, (uintptr_t)x.rb.p + 300000,
		       x.rb.mr->rkey, x.srqn[0]),
		 0);
	tv_expect_wc(x.scq, x.ini, 3, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	memcpy(&v, x.sb.p + 400000, 8);
	T_EQ_INT(v, 37);
	memcpy(&v, x.rb.p + 300000, 8);
	T_EQ_INT(v, 42);
	xrc_close(&x);
}

/* A number that is no SRQ of the target's domain is an invalid request:
 * the initiator's WQE fails with IBV_WC_REM_INV_REQ_ERR. */
T_CASE(bad_srq_number)
{
	struct xrc x;

	xrc_open(&x);
	T_EQ_INT(xpost(&x, IBV_WR_SEND, 1, 0, 16, 0, 0, 0x7777), 0);
	tv_expect_wc(x.scq, x.ini, 1, IBV_WC_REM_INV_REQ_ERR, -1);
	T_EQ_INT(tv_qp_state(x.ini), IBV_QPS_ERR);
	xrc_close(&x);
}

/* An SRQ of another domain of the same context is not the target's. */
T_CASE(srq_of_another_domain)
{
	struct xrc x;
	struct ibv_xrcd *other;
	struct ibv_srq_init_attr_ex a;
	struct ibv_srq *s;
	uint32_t n;

	xrc_open(&x);
	other = open_xrcd(x.ct, -1, O_CREAT);
	T_ASSERT(other);
	memset(&a, 0, sizeof(a));
	a.attr.max_wr = 4;
	a.attr.max_sge = 1;
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
		      IBV_SRQ_INIT_ATTR_PD;
	a.srq_type = IBV_SRQT_XRC;
	a.xrcd = other;
	a.cq = x.cq[0];
	a.pd = x.pt;
	s = ibv_create_srq_ex(x.ct, &a);
	T_ASSERT(s);
	T_EQ_INT(ibv_get_srq_num(s, &n), 0);
	T_EQ_INT(xpost(&x, IBV_WR_SEND, 1, 0, 16, 0, 0, n), 0);
	tv_expect_wc(x.scq, x.ini, 1, IBV_WC_REM_INV_REQ_ERR, -1);
	T_EQ_INT(ibv_destroy_srq(s), 0);
	T_EQ_INT(ibv_close_xrcd(other), 0);
	xrc_close(&x);
}

/* The verbs' rules: no receive queue on either XRC QP, no send queue on
 * a target, a domain by inode (O_CREAT, O_EXCL), no number for a basic
 * SRQ, no cross-process ibv_open_qp. */
T_CASE(api_rules)
{
	struct xrc x;
	struct ibv_recv_wr rw, *bad;
	struct ibv_send_wr sw, *sbad;
	char path[] = "/tmp/uroce-xrcd-XXXXXX";
	int fd;
	struct ibv_xrcd *a, *b;
	struct ibv_srq_init_attr sa;
	struct ibv_srq *basic;
	struct ibv_qp_open_attr oa;
	uint32_t n;

	xrc_open(&x);
	memset(&rw, 0, sizeof(rw));
	T_EQ_INT(ibv_post_recv(x.ini, &rw, &bad), EINVAL);
	T_EQ_INT(ibv_post_recv(x.tgt, &rw, &bad), EINVAL);
	memset(&sw, 0, sizeof(sw));
	sw.opcode = IBV_WR_SEND;
	T_EQ_INT(ibv_post_send(x.tgt, &sw, &sbad), EINVAL);
	fd = mkstemp(path);
	T_ASSERT(fd >= 0);
	errno = 0;
	T_EQ_PTR(open_xrcd(x.ct, fd, 0), NULL);
	T_EQ_INT(errno, ENOENT);
	a = open_xrcd(x.ct, fd, O_CREAT);
	b = open_xrcd(x.ct, fd, O_CREAT);
	T_ASSERT(a && b);
	T_EQ_PTR(a, b);
	T_EQ_PTR(open_xrcd(x.ct, fd, O_CREAT | O_EXCL), NULL);
	T_EQ_INT(errno, EEXIST);
	T_EQ_INT(ibv_close_xrcd(a), 0);
	T_EQ_INT(ibv_close_xrcd(b), 0);
	T_EQ_PTR(open_xrcd(x.ct, -1, 0), NULL);
	T_EQ_INT(errno, EINVAL);
	close(fd);
	unlink(path);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	basic = ibv_create_srq(x.pt, &sa);
	T_ASSERT(basic);
	T_EQ_INT(ibv_get_srq_num(basic, &n), EINVAL);
	T_EQ_INT(ibv_destroy_srq(basic), 0);
	memset(&oa, 0, sizeof(oa));
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
	oa.qp_num = x.tgt->qp_num;
	oa.xrcd = x.xrcd;
	oa.qp_type = IBV_QPT_XRC_RECV;
	errno = 0;
	T_EQ_PTR(ibv_open_qp(x.ct, &oa), NULL);
	T_EQ_INT(errno, EOPNOTSUPP);
	xrc_close(&x);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
