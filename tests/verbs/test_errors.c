/* Error completions: remote access violations (keys, bounds, MR and QP
 * access flags), length errors, RNR and transport retry exhaustion with their
 * timing, flushes on ERR. Every violation must leave target memory untouched
 * (checked with a canary) and move the requester to ERR, after which every
 * WR completes with IBV_WC_WR_FLUSH_ERR. */
#include "common.h"

#include <signal.h>

#define BAD_KEY(k) ((k) ^ 0x00a5a500u)

/* A connected pair whose responder (b) QP has access flags b_access. */
static void pair_open_access(struct tv_pair *p, const struct tv_opts *o,
			     unsigned int b_access)
{
	struct tv_opts ob = *o;
	struct tv_info ia, ib;

	memset(p, 0, sizeof(*p));
	memset(&ia, 0, sizeof(ia));
	memset(&ib, 0, sizeof(ib));
	p->o = *o;
	ob.access = b_access;
	tv_side_open(&p->a, o, NULL);
	tv_side_open(&p->b, o, p->a.ctx);
	p->b.own_ctx = 0;
	tv_info_of(&p->a, &ia);
	tv_info_of(&p->b, &ib);
	tv_connect(&p->a, o, &ib);
	tv_connect(&p->b, &ob, &ia);
}

/* After an error completion: a is in ERR and a new WR flushes. */
static void expect_err_then_flush(struct tv_pair *p, struct tv_buf *lb)
{
	T_EQ_INT(tv_qp_state(p->a.qp), IBV_QPS_ERR);
	T_EQ_INT(tv_post1(p->a.qp, IBV_WR_SEND, 777, lb, 0, 8, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p->a.scq, p->a.qp, 777, IBV_WC_WR_FLUSH_ERR, -1);
	tv_expect_no_wc(p->a.scq, 0.05);
}

/* ---- remote access ----------------------------------------------------------- */

T_CASE(bad_rkey_write_then_flush)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;
	struct ibv_send_wr wr[3], *bad = NULL;
	struct ibv_sge sg;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, TV_ACCESS_ALL);
	tv_fill(lb.p, lb.len, 1);
	sg = tv_sge(&lb, 0, 1000);
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < 3; i++) {
		wr[i].wr_id = (uint64_t)i + 1;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
		wr[i].sg_list = &sg;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].wr.rdma.remote_addr = (uintptr_t)rb.p + 1000 * (uint64_t)i;
		wr[i].wr.rdma.rkey = i == 0 ? BAD_KEY(rb.mr->rkey) : rb.mr->rkey;
	}
	T_EQ_INT(ibv_post_send(p.a.qp, wr, &bad), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_REM_ACCESS_ERR, -1);
	/* The valid WRs behind the failed one are flushed, not executed. */
	tv_expect_wc(p.a.scq, p.a.qp, 2, IBV_WC_WR_FLUSH_ERR, -1);
	tv_expect_wc(p.a.scq, p.a.qp, 3, IBV_WC_WR_FLUSH_ERR, -1);
	T_CANARY(rb.p, 0, rb.len);
	expect_err_then_flush(&p, &lb);
	T_CANARY(rb.p, 0, rb.len);
}

T_CASE(bad_rkey_read)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, TV_ACCESS_ALL);
	tv_fill(rb.p, rb.len, 2);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_READ, 1, &lb, 0, 2000, (uintptr_t)rb.p,
			  BAD_KEY(rb.mr->rkey), 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_REM_ACCESS_ERR, -1);
	T_CANARY(lb.p, 0, lb.len);
	T_PATTERN(rb.p, rb.len, 2, 0);
	expect_err_then_flush(&p, &lb);
}

T_CASE(bad_rkey_atomic)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 64, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 64, TV_ACCESS_ALL);
	T_EQ_INT(tv_post_atomic(p.a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, &lb, 0,
				(uintptr_t)rb.p + 8, BAD_KEY(rb.mr->rkey), 1, 0,
				IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_REM_ACCESS_ERR, -1);
	T_CANARY(rb.p, 0, rb.len);
	T_CANARY(lb.p, 0, lb.len);
	expect_err_then_flush(&p, &lb);
}

/* The MR covers [4096, 8192) of a 12 KiB allocation; the rest is canary. */
struct window {
	struct tv_buf mem; /* unregistered */
	struct ibv_mr *mr;
	uint8_t *base;
	size_t len;
};

static void window_open(struct window *w, struct ibv_pd *pd, int access)
{
	tv_buf_alloc(&w->mem, NULL, 3 * 4096, 0);
	w->base = w->mem.p + 4096;
	w->len = 4096;
	w->mr = ibv_reg_mr(pd, w->base, w->len, access);
	T_ASSERTF(w->mr != NULL, "ibv_reg_mr: %s", strerror(errno));
}

static void oob_write(uint64_t off_from_base, size_t len, int negative)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb;
	struct window w;
	uint64_t raddr;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 8192, IBV_ACCESS_LOCAL_WRITE);
	tv_fill(lb.p, lb.len, 3);
	window_open(&w, p.b.pd, TV_ACCESS_ALL);
	raddr = negative ? (uintptr_t)w.base - off_from_base : (uintptr_t)w.base + off_from_base;
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 1, &lb, 0, len, raddr, w.mr->rkey, 0,
			  IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_REM_ACCESS_ERR, -1);
	T_CANARY(w.mem.p, 0, w.mem.len);
	expect_err_then_flush(&p, &lb);
	T_CANARY(w.mem.p, 0, w.mem.len);
}

T_CASE(oob_write_past_end)
{
	oob_write(4096 - 10, 100, 0);
}

T_CASE(oob_write_one_byte_past_end)
{
	oob_write(1, 4096, 0);
}

T_CASE(oob_write_before_start)
{
	oob_write(8, 16, 1);
}

T_CASE(oob_write_far_away)
{
	oob_write(1ULL << 40, 8, 0);
}

/* Exactly the MR's range works (the positive control of the cases above). */
T_CASE(write_exact_mr_range_ok)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb;
	struct window w;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_fill(lb.p, lb.len, 4);
	window_open(&w, p.b.pd, TV_ACCESS_ALL);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 1, &lb, 0, 4096, (uintptr_t)w.base,
			  w.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	T_CANARY(w.mem.p, 0, 4096);
	T_PATTERN(w.base, 4096, 4, 0);
	T_CANARY(w.mem.p, 8192, 4096);
}

T_CASE(oob_read_past_end)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb;
	struct window w;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 8192, IBV_ACCESS_LOCAL_WRITE);
	window_open(&w, p.b.pd, TV_ACCESS_ALL);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_READ, 1, &lb, 0, 200,
			  (uintptr_t)w.base + 4000, w.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_REM_ACCESS_ERR, -1);
	T_CANARY(lb.p, 0, lb.len);
	expect_err_then_flush(&p, &lb);
}

/* Target MR without the needed remote right. */
static void mr_access_case(int mr_access, enum ibv_wr_opcode op)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;
	int rc;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, mr_access);
	tv_fill(lb.p, lb.len, 5);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		rc = tv_post_atomic(p.a.qp, op, 1, &lb, 0, (uintptr_t)rb.p + 64, rb.mr->rkey, 1, 0,
				    IBV_SEND_SIGNALED);
	else
		rc = tv_post1(p.a.qp, op, 1, &lb, 0, 512, (uintptr_t)rb.p + 64, rb.mr->rkey, 0,
			      IBV_SEND_SIGNALED);
	T_EQ_INT(rc, 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_REM_ACCESS_ERR, -1);
	T_CANARY(rb.p, 0, rb.len);
	if (op != IBV_WR_RDMA_WRITE)
		T_PATTERN(lb.p, lb.len, 5, 0); /* nothing came back */
	expect_err_then_flush(&p, &lb);
}

T_CASE(mr_without_remote_write)
{
	mr_access_case(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			       IBV_ACCESS_REMOTE_ATOMIC,
		       IBV_WR_RDMA_WRITE);
}

T_CASE(mr_without_remote_write_imm)
{
	mr_access_case(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ,
		       IBV_WR_RDMA_WRITE_WITH_IMM);
}

T_CASE(mr_without_remote_read)
{
	mr_access_case(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_ATOMIC,
		       IBV_WR_RDMA_READ);
}

T_CASE(mr_without_remote_atomic)
{
	mr_access_case(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ,
		       IBV_WR_ATOMIC_FETCH_AND_ADD);
}

/* Responder QP without the remote right, MR with all of them. */
static void qp_access_case(unsigned int qp_access, enum ibv_wr_opcode op)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;
	int rc;

	pair_open_access(&p, &o, qp_access);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, TV_ACCESS_ALL);
	tv_fill(lb.p, lb.len, 6);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		rc = tv_post_atomic(p.a.qp, op, 1, &lb, 0, (uintptr_t)rb.p, rb.mr->rkey, 1, 0,
				    IBV_SEND_SIGNALED);
	else
		rc = tv_post1(p.a.qp, op, 1, &lb, 0, 256, (uintptr_t)rb.p, rb.mr->rkey, 0,
			      IBV_SEND_SIGNALED);
	T_EQ_INT(rc, 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_REM_ACCESS_ERR, -1);
	T_CANARY(rb.p, 0, rb.len);
	if (op != IBV_WR_RDMA_WRITE)
		T_PATTERN(lb.p, lb.len, 6, 0);
	expect_err_then_flush(&p, &lb);
}

T_CASE(qp_without_remote_write)
{
	qp_access_case(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			       IBV_ACCESS_REMOTE_ATOMIC,
		       IBV_WR_RDMA_WRITE);
}

T_CASE(qp_without_remote_read)
{
	qp_access_case(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_ATOMIC,
		       IBV_WR_RDMA_READ);
}

T_CASE(qp_without_remote_atomic)
{
	qp_access_case(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ,
		       IBV_WR_ATOMIC_FETCH_AND_ADD);
}

/* An rkey of an MR in another PD than the responder QP's. */
T_CASE(rkey_of_other_pd)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;
	struct ibv_pd *other;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	other = ibv_alloc_pd(p.b.ctx);
	T_ASSERT(other != NULL);
	tv_buf_alloc(&rb, other, 4096, TV_ACCESS_ALL);
	tv_fill(lb.p, lb.len, 7);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 1, &lb, 0, 100, (uintptr_t)rb.p,
			  rb.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_REM_ACCESS_ERR, -1);
	T_CANARY(rb.p, 0, rb.len);
	expect_err_then_flush(&p, &lb);
}

T_CASE(rkey_after_dereg)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;
	uint32_t rkey;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, TV_ACCESS_ALL);
	rkey = rb.mr->rkey;
	T_EQ_INT(ibv_dereg_mr(rb.mr), 0);
	rb.mr = NULL;
	tv_fill(lb.p, lb.len, 8);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 1, &lb, 0, 100, (uintptr_t)rb.p, rkey, 0,
			  IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_REM_ACCESS_ERR, -1);
	T_CANARY(rb.p, 0, rb.len);
	expect_err_then_flush(&p, &lb);
}

T_CASE(atomic_misaligned)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 64, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 64, TV_ACCESS_ALL);
	T_EQ_INT(tv_post_atomic(p.a.qp, IBV_WR_ATOMIC_CMP_AND_SWP, 1, &lb, 0,
				(uintptr_t)rb.p + 4, rb.mr->rkey, 0, 1, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_REM_INV_REQ_ERR, -1);
	T_CANARY(rb.p, 0, rb.len);
	expect_err_then_flush(&p, &lb);
}

/* ---- local errors -------------------------------------------------------------- */

T_CASE(bad_lkey_send)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;
	struct ibv_sge s;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	T_EQ_INT(tv_post_recv1(p.b.qp, 5, &rb, 0, 4096), 0);
	s = tv_sge(&lb, 0, 100);
	s.lkey = BAD_KEY(s.lkey);
	T_EQ_INT(tv_post(p.a.qp, IBV_WR_SEND, 1, &s, 1, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_LOC_PROT_ERR, -1);
	tv_expect_no_wc(p.b.rcq, 0.1);
	T_CANARY(rb.p, 0, rb.len);
	expect_err_then_flush(&p, &lb);
}

/* A SGE reaching past the end of its MR. */
T_CASE(lkey_out_of_bounds_write)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 8192, TV_ACCESS_ALL);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 1, &lb, 4000, 200, (uintptr_t)rb.p,
			  rb.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_LOC_PROT_ERR, -1);
	T_CANARY(rb.p, 0, rb.len);
	expect_err_then_flush(&p, &lb);
}

/* READ responses need local write access to land. */
T_CASE(read_into_mr_without_local_write)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, 0);
	tv_buf_alloc(&rb, p.b.pd, 4096, TV_ACCESS_ALL);
	tv_fill(rb.p, rb.len, 9);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_READ, 1, &lb, 0, 1000, (uintptr_t)rb.p,
			  rb.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_LOC_PROT_ERR, -1);
	T_CANARY(lb.p, 0, lb.len);
}

T_CASE(recv_bad_lkey)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;
	struct ibv_sge s;
	struct ibv_wc wc;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	s = tv_sge(&rb, 0, 4096);
	s.lkey = BAD_KEY(s.lkey);
	T_EQ_INT(tv_post_recv(p.b.qp, 5, &s, 1), 0);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 1, &lb, 0, 100, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.b.rcq, p.b.qp, 5, IBV_WC_LOC_PROT_ERR, -1);
	wc = tv_wait_wc(p.a.scq, TV_WAIT_S);
	T_EQ_INT(wc.wr_id, 1);
	T_ASSERTF(wc.status != IBV_WC_SUCCESS, "sender: %s", tv_wc_str(&wc));
	t_log("sender saw %s", ibv_wc_status_str(wc.status));
	T_CANARY(rb.p, 0, rb.len);
}

static void recv_too_small(size_t rlen, size_t slen, enum ibv_mtu mtu)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;

	o.mtu = mtu;
	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, slen, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, rlen + 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_fill(lb.p, lb.len, 10);
	T_EQ_INT(tv_post_recv1(p.b.qp, 5, &rb, 0, rlen), 0);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 1, &lb, 0, slen, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.b.rcq, p.b.qp, 5, IBV_WC_LOC_LEN_ERR, -1);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_REM_INV_REQ_ERR, -1);
	/* Whatever landed stays inside the receive buffer. */
	T_CANARY(rb.p, rlen, rb.len - rlen);
	expect_err_then_flush(&p, &lb);
}

T_CASE(recv_too_small_one_packet)
{
	recv_too_small(100, 200, IBV_MTU_1024);
}

T_CASE(recv_too_small_multi_packet)
{
	recv_too_small(5000, 9000, IBV_MTU_1024);
}

/* ---- RNR ------------------------------------------------------------------------ */

T_CASE(rnr_retry_zero_fails)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;
	double t0, dt;

	o.rnr_retry = 0;
	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	t0 = tv_now();
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 1, &lb, 0, 100, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc_to(p.a.scq, p.a.qp, 1, IBV_WC_RNR_RETRY_EXC_ERR, -1, 5.0);
	dt = tv_now() - t0;
	t_log("RNR_RETRY_EXC_ERR after %.1f ms", dt * 1e3);
	T_ASSERTF(dt < 2.0, "took %.3f s", dt);
	/* A receive posted now is not consumed by the failed send. */
	T_EQ_INT(tv_post_recv1(p.b.qp, 9, &rb, 0, 4096), 0);
	tv_expect_no_wc(p.b.rcq, 0.1);
	T_CANARY(rb.p, 0, rb.len);
	expect_err_then_flush(&p, &lb);
}

T_CASE(rnr_retry_infinite_waits_for_recv)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;
	struct ibv_wc wc;

	o.rnr_retry = 7;
	o.min_rnr_timer = 1; /* 0.01 ms: many RNR NAKs in 200 ms */
	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 8192, IBV_ACCESS_LOCAL_WRITE);
	tv_fill(lb.p, lb.len, 11);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 1, &lb, 0, 4096, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_no_wc(p.a.scq, 0.2);
	T_EQ_INT(tv_post_recv1(p.b.qp, 2, &rb, 0, 8192), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	wc = tv_expect_wc(p.b.rcq, p.b.qp, 2, IBV_WC_SUCCESS, IBV_WC_RECV);
	T_EQ_INT(wc.byte_len, 4096);
	T_PATTERN(rb.p, 4096, 11, 0);
	T_CANARY(rb.p, 4096, 4096);
	T_EQ_INT(tv_qp_state(p.a.qp), IBV_QPS_RTS);
}

/* rnr_retry 3 with the responder's min_rnr_timer 18 (5.12 ms): three waits. */
T_CASE(rnr_retry_count_and_timer)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb;
	double t0, dt, want = 3 * 5.12e-3;

	o.rnr_retry = 3;
	o.min_rnr_timer = 18;
	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	t0 = tv_now();
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 1, &lb, 0, 64, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc_to(p.a.scq, p.a.qp, 1, IBV_WC_RNR_RETRY_EXC_ERR, -1, 10.0);
	dt = tv_now() - t0;
	t_log("RNR_RETRY_EXC_ERR after %.1f ms (3 x 5.12 ms = %.1f ms)", dt * 1e3, want * 1e3);
	T_ASSERTF(dt >= 0.8 * want, "after %.2f ms, expected >= %.2f ms", dt * 1e3,
		  0.8 * want * 1e3);
	T_ASSERTF(dt < 2.0, "took %.3f s", dt);
}

/* ---- transport retries ------------------------------------------------------------ */

/* Local ACK timeout 10 (4.194 ms), retry_cnt 2: the first try and two
 * retries time out, so no sooner than about 3 x 4.2 ms. */
static void expect_retry_exc(struct tv_side *a, struct tv_buf *lb, uint64_t raddr,
			     uint32_t rkey, uint8_t timeout, uint8_t retry_cnt)
{
	double t0, dt, tmo = 4.096e-6 * (double)(1u << timeout);
	double want = (retry_cnt + 1) * tmo;

	t0 = tv_now();
	T_EQ_INT(tv_post1(a->qp, IBV_WR_RDMA_WRITE, 1, lb, 0, 1000, raddr, rkey, 0,
			  IBV_SEND_SIGNALED), 0);
	tv_expect_wc_to(a->scq, a->qp, 1, IBV_WC_RETRY_EXC_ERR, -1, 10.0);
	dt = tv_now() - t0;
	t_log("RETRY_EXC_ERR after %.1f ms (timeout %u = %.2f ms, retry_cnt %u: >= %.1f ms)",
	      dt * 1e3, timeout, tmo * 1e3, retry_cnt, want * 1e3);
	T_ASSERTF(dt >= 0.8 * want, "after %.2f ms, expected >= %.2f ms", dt * 1e3,
		  0.8 * want * 1e3);
	T_ASSERTF(dt < 2.0, "took %.3f s", dt);
	T_EQ_INT(tv_qp_state(a->qp), IBV_QPS_ERR);
	T_EQ_INT(tv_post1(a->qp, IBV_WR_SEND, 2, lb, 0, 8, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(a->scq, a->qp, 2, IBV_WC_WR_FLUSH_ERR, -1);
}

T_CASE(retry_exc_peer_qp_destroyed)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;

	o.timeout = 10;
	o.retry_cnt = 2;
	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, TV_ACCESS_ALL);
	/* The connection works, then the peer QP goes away. */
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 0, &lb, 0, 100, (uintptr_t)rb.p,
			  rb.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 0, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	T_EQ_INT(ibv_destroy_qp(p.b.qp), 0);
	p.b.qp = NULL;
	expect_retry_exc(&p.a, &lb, (uintptr_t)rb.p, rb.mr->rkey, 10, 2);
}

/* Same with a larger timeout: the bound scales with the attribute. */
T_CASE(retry_exc_timeout_14)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;

	o.timeout = 14; /* 67 ms */
	o.retry_cnt = 1;
	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, TV_ACCESS_ALL);
	T_EQ_INT(ibv_destroy_qp(p.b.qp), 0);
	p.b.qp = NULL;
	expect_retry_exc(&p.a, &lb, (uintptr_t)rb.p, rb.mr->rkey, 14, 1);
}

/* A peer that is alive but takes none of the requester's packets: b's
 * responder is reconnected expecting a PSN 1000 behind a's, so every
 * request is out of sequence (one NAK, IBA C9-112, then silent drops).
 * With marks (UROCE_ECN_MARK=1) b answers each arrival with a CNP, the
 * requester hears its peer, and TIMEOUT_EXCUSES (32) timeouts go
 * uncharged before retry_cnt + 1 charged ones fail the WRITE: bounded,
 * never a hang. Without marks only the NAK speaks: at most one excuse. */
static void peer_takes_nothing(int mark, uint64_t *timeouts, uint64_t *excused)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;
	struct tv_info ia;
	uint64_t t0 = 0, e0 = 0;
	double s0;

	if (mark)
		setenv("UROCE_ECN_MARK", "1", 1);
	o.timeout = 10; /* 4.2 ms */
	o.retry_cnt = 2;
	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, TV_ACCESS_ALL);
	memset(&ia, 0, sizeof(ia));
	tv_info_of(&p.a, &ia);
	ia.psn = (p.a.psn - 1000) & 0xffffff;
	T_EQ_INT(tv_modify_state(p.b.qp, IBV_QPS_RESET), 0);
	tv_connect(&p.b, &o, &ia);
	t0 = TV_COUNTER(timeouts);
	e0 = TV_COUNTER(timeouts_excused);
	s0 = tv_now();
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 1, &lb, 0, 1000, (uintptr_t)rb.p,
			  rb.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc_to(p.a.scq, p.a.qp, 1, IBV_WC_RETRY_EXC_ERR, -1, 10.0);
	*timeouts = TV_COUNTER(timeouts) - t0;
	*excused = TV_COUNTER(timeouts_excused) - e0;
	t_log("RETRY_EXC_ERR after %.1f ms: %" PRIu64 " timeouts, %" PRIu64 " excused, %" PRIu64
	      " CNPs handled", (tv_now() - s0) * 1e3, *timeouts, *excused, TV_COUNTER(cnp_handled));
	T_EQ_INT(tv_qp_state(p.a.qp), IBV_QPS_ERR);
	tv_buf_free(&lb);
	tv_buf_free(&rb);
	tv_pair_close(&p);
}

T_CASE(retry_exc_peer_speaks_timeouts_excused)
{
	uint64_t n, ex;

	peer_takes_nothing(1, &n, &ex);
	T_EQ_INT(ex, 32);
	T_EQ_INT(n, 32 + 2 + 1);
}

T_CASE(retry_exc_peer_silent_timeouts_charged)
{
	uint64_t n, ex;

	peer_takes_nothing(0, &n, &ex);
	T_ASSERTF(ex <= 1, "%" PRIu64 " timeouts excused", ex);
	T_EQ_INT(n, 2 + 1 + ex);
}

static void sleeper(int fd, void *arg)
{
	struct tv_opts *o = arg;
	struct tv_side s;
	struct tv_buf b;
	struct tv_info mine, peer;

	memset(&mine, 0, sizeof(mine));
	tv_side_open(&s, o, NULL);
	tv_buf_alloc(&b, s.pd, 4096, TV_ACCESS_ALL);
	mine.addr[0] = (uintptr_t)b.p;
	mine.rkey[0] = b.mr->rkey;
	tv_proc_connect(fd, &s, o, &mine, &peer);
	for (;;)
		pause();
}

T_CASE(retry_exc_peer_process_killed)
{
	struct tv_opts o = tv_opts_default();
	struct tv_proc pr;
	struct tv_side a;
	struct tv_buf lb;
	struct tv_info mine, peer;
	int status;

	o.timeout = 10;
	o.retry_cnt = 2;
	memset(&mine, 0, sizeof(mine));
	pr = tv_fork(sleeper, &o);
	tv_side_open(&a, &o, NULL);
	tv_buf_alloc(&lb, a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_proc_connect(pr.fd, &a, &o, &mine, &peer);
	/* The connection works first. */
	T_EQ_INT(tv_post1(a.qp, IBV_WR_RDMA_WRITE, 0, &lb, 0, 100, peer.addr[0], peer.rkey[0],
			  0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(a.scq, a.qp, 0, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	T_EQ_INT(kill(pr.pid, SIGKILL), 0);
	T_EQ_INT(waitpid(pr.pid, &status, 0), pr.pid);
	T_ASSERT(WIFSIGNALED(status));
	expect_retry_exc(&a, &lb, peer.addr[0], peer.rkey[0], 10, 2);
}

/* The restarted peer: a new process with a new QP, connected to a new QP
 * of the old peer, while that peer's old QP still retransmits WRITEs meant
 * for the process that died. None of them may land: the new process checks
 * its memory (only the new connection's WRITE) and that its QP is alive. */
#define RESTART_LEN (256u << 10)

static void restarted(int fd, void *arg)
{
	struct tv_opts *o = arg;
	struct tv_side s;
	struct tv_buf b;
	struct tv_info mine, peer;
	char c = 0;

	memset(&mine, 0, sizeof(mine));
	tv_side_open(&s, o, NULL);
	tv_buf_alloc(&b, s.pd, RESTART_LEN, TV_ACCESS_ALL);
	mine.addr[0] = (uintptr_t)b.p;
	mine.rkey[0] = b.mr->rkey;
	tv_proc_connect(fd, &s, o, &mine, &peer);
	tv_recv(fd, &c, 1); /* the old QP has given up by now */
	T_EQ_INT(c, 'c');
	T_PATTERN(b.p, 100, 77, 0);
	T_CANARY(b.p, 100, RESTART_LEN - 100);
	T_EQ_INT(tv_qp_state(s.qp), IBV_QPS_RTS);
}

T_CASE(restarted_peer_gets_no_stale_packets)
{
	struct tv_opts o = tv_opts_default();
	struct tv_proc p1, p2;
	struct tv_side a1, a2;
	struct tv_buf lb;
	struct tv_info m1, peer1, m2, peer2;
	int status, n = 0, exc = 0;
	double t0;

	o.timeout = 14; /* 67 ms x (7 + 1): the old QP retries for ~540 ms */
	o.retry_cnt = 7;
	memset(&m1, 0, sizeof(m1));
	memset(&m2, 0, sizeof(m2));
	p1 = tv_fork(sleeper, &o);
	tv_side_open(&a1, &o, NULL);
	tv_buf_alloc(&lb, a1.pd, RESTART_LEN, TV_ACCESS_ALL);
	tv_proc_connect(p1.fd, &a1, &o, &m1, &peer1);
	T_EQ_INT(tv_post1(a1.qp, IBV_WR_RDMA_WRITE, 100, &lb, 0, 100, peer1.addr[0], peer1.rkey[0],
			  0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(a1.scq, a1.qp, 100, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	/* the first peer dies; WRITEs for it keep being retransmitted */
	T_EQ_INT(kill(p1.pid, SIGKILL), 0);
	T_EQ_INT(waitpid(p1.pid, &status, 0), p1.pid);
	for (uint64_t i = 0; i < 16; i++)
		T_EQ_INT(tv_post1(a1.qp, IBV_WR_RDMA_WRITE, i, &lb, 0, 4096, peer1.addr[0],
				  peer1.rkey[0], 0, IBV_SEND_SIGNALED), 0);
	t0 = tv_now();
	/* the restarted peer, on a new connection */
	p2 = tv_fork(restarted, &o);
	tv_side_open(&a2, &o, NULL);
	tv_proc_connect(p2.fd, &a2, &o, &m2, &peer2);
	{
		struct tv_buf lb2;

		tv_buf_alloc(&lb2, a2.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
		tv_fill(lb2.p, 100, 77);
		T_EQ_INT(tv_post1(a2.qp, IBV_WR_RDMA_WRITE, 7, &lb2, 0, 100, peer2.addr[0],
				  peer2.rkey[0], 0, IBV_SEND_SIGNALED), 0);
		tv_expect_wc(a2.scq, a2.qp, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	}
	/* the old QP was retransmitting all along, and now gives up */
	t_log("the restarted peer was up %.0f ms after the old QP began retrying (for ~540 ms)",
	      (tv_now() - t0) * 1e3);
	while (n < 16 && tv_now() - t0 < 10) {
		struct ibv_wc wc;

		if (!tv_poll1(a1.scq, &wc, 0.1))
			continue;
		n++;
		T_ASSERTF(wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_WR_FLUSH_ERR,
			  "old QP: %s", ibv_wc_status_str(wc.status));
		exc += wc.status == IBV_WC_RETRY_EXC_ERR;
	}
	T_EQ_INT(n, 16);
	T_EQ_INT(exc, 1);
	tv_send(p2.fd, "c", 1);
	tv_proc_wait(&p2, 10);
}

/* ---- flushes ------------------------------------------------------------------------ */

/* SENDs to a peer with no receive and rnr_retry 7 stay outstanding; moving
 * the QP to ERR flushes them and the posted receives, in order. */
static void flush_outstanding(int sig_all)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb;

	o.sq_sig_all = sig_all;
	o.rnr_retry = 7;
	o.min_rnr_timer = 1;
	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	for (int i = 0; i < 5; i++)
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 10 + (uint64_t)i, &lb, 0, 64, 0, 0, 0, 0), 0);
	for (int i = 0; i < 4; i++)
		T_EQ_INT(tv_post_recv1(p.a.qp, 20 + (uint64_t)i, &lb, 1024, 1024), 0);
	tv_expect_no_wc(p.a.scq, 0.1);
	T_EQ_INT(tv_modify_state(p.a.qp, IBV_QPS_ERR), 0);
	/* Flush completions are generated for unsignaled WRs too. */
	for (int i = 0; i < 5; i++)
		tv_expect_wc(p.a.scq, p.a.qp, 10 + (uint64_t)i, IBV_WC_WR_FLUSH_ERR, -1);
	for (int i = 0; i < 4; i++)
		tv_expect_wc(p.a.rcq, p.a.qp, 20 + (uint64_t)i, IBV_WC_WR_FLUSH_ERR, -1);
	tv_expect_no_wc(p.a.scq, 0.05);
	tv_expect_no_wc(p.a.rcq, 0);
	/* Nothing reached the peer. */
	tv_expect_no_wc(p.b.rcq, 0);
}

T_CASE(modify_err_flushes_outstanding)
{
	flush_outstanding(1);
}

T_CASE(modify_err_flushes_unsignaled)
{
	flush_outstanding(0);
}

T_CASE(post_to_err_qp_flushes)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf lb, rb;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, TV_ACCESS_ALL);
	T_EQ_INT(tv_post_recv1(p.b.qp, 1, &rb, 0, 4096), 0);
	T_EQ_INT(tv_modify_state(p.a.qp, IBV_QPS_ERR), 0);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 2, &lb, 0, 100, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 3, &lb, 0, 100, (uintptr_t)rb.p,
			  rb.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	T_EQ_INT(tv_post_recv1(p.a.qp, 4, &lb, 0, 4096), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 2, IBV_WC_WR_FLUSH_ERR, -1);
	tv_expect_wc(p.a.scq, p.a.qp, 3, IBV_WC_WR_FLUSH_ERR, -1);
	tv_expect_wc(p.a.rcq, p.a.qp, 4, IBV_WC_WR_FLUSH_ERR, -1);
	tv_expect_no_wc(p.b.rcq, 0.1);
	T_CANARY(rb.p, 0, rb.len);
	/* RESET empties the queues; no more flushes appear. */
	T_EQ_INT(tv_modify_state(p.a.qp, IBV_QPS_RESET), 0);
	tv_expect_no_wc(p.a.scq, 0.05);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
