/* Tearing things down with traffic in flight (issue 4): deregistering the
 * source or the target MR, or destroying a QP, while WRITEs and READs are
 * moving must never crash, hang or write outside registered memory; the
 * affected work requests complete with an error (or succeed if they were
 * already done). */
#include "common.h"

#define N 32
#define CHUNK (1u << 20)

static void post_writes(struct tv_pair *p, struct tv_buf *src, struct tv_buf *dst, int op)
{
	for (int k = 0; k < N; k++)
		T_EQ_INT(tv_post1(p->a.qp, op, k, src, (size_t)k * CHUNK, CHUNK,
				  (uintptr_t)dst->p + (size_t)k * CHUNK, dst->mr->rkey, 0,
				  IBV_SEND_SIGNALED), 0);
}

/* Collects N completions; every one is success or one of the statuses a
 * vanished MR can give. Returns how many failed. */
static int reap(struct ibv_cq *cq)
{
	/* (a remote MR that vanished mid-transfer gives REM_ACCESS_ERR and
	 * the rest flushes; a local one LOC_PROT_ERR) */
	int bad = 0;

	for (int k = 0; k < N; k++) {
		struct ibv_wc wc = tv_wait_wc(cq, 30);

		T_ASSERTF(wc.status == IBV_WC_SUCCESS || wc.status == IBV_WC_LOC_PROT_ERR ||
				  wc.status == IBV_WC_REM_ACCESS_ERR || wc.status == IBV_WC_WR_FLUSH_ERR,
			  "unexpected completion %s", tv_wc_str(&wc));
		bad += wc.status != IBV_WC_SUCCESS;
	}
	return bad;
}

static void open_pair(struct tv_pair *p)
{
	struct tv_opts o = tv_opts_default();

	o.mtu = IBV_MTU_4096;
	o.separate_ctx = 1;
	o.timeout = 10; /* 4 ms: a dead peer is noticed quickly */
	o.retry_cnt = 2;
	tv_pair_open(p, &o);
}

/* Posts N ops of 'op' from a to b, deregisters the source (a) or the
 * target (b) MR while they are in flight, and reaps them all. With
 * guard > 0, that many canary bytes after b's region must stay intact. */
static void dereg_in_flight(enum ibv_wr_opcode op, int target, size_t guard, uint64_t seed,
			    const char *what)
{
	struct tv_pair p;
	struct tv_buf a, b;
	int bad;

	open_pair(&p);
	tv_buf_alloc(&a, p.a.pd, (size_t)N * CHUNK, TV_ACCESS_ALL);
	tv_buf_alloc(&b, p.b.pd, (size_t)N * CHUNK + guard, TV_ACCESS_ALL);
	if (guard)
		tv_canary(b.p + (size_t)N * CHUNK, guard);
	if (seed)
		tv_fill(a.p, (size_t)N * CHUNK, seed);
	post_writes(&p, &a, &b, op);
	/* the engine may be reading or placing into it now */
	T_EQ_INT(ibv_dereg_mr(target ? b.mr : a.mr), 0);
	*(target ? &b.mr : &a.mr) = NULL;
	bad = reap(p.a.scq);
	t_log("%d of %d %s failed after the %s went away", bad, N,
	      op == IBV_WR_RDMA_READ ? "READs" : "WRITEs", what);
	if (guard)
		T_CANARY(b.p + (size_t)N * CHUNK, 0, guard); /* nothing past the region */
	tv_buf_free(&a);
	tv_buf_free(&b);
	tv_pair_close(&p);
}

T_CASE(dereg_source_mr_in_flight)
{
	dereg_in_flight(IBV_WR_RDMA_WRITE, 0, 0, 9, "source MR");
}

T_CASE(dereg_target_mr_in_flight)
{
	dereg_in_flight(IBV_WR_RDMA_WRITE, 1, 8192, 10, "target MR");
}

T_CASE(dereg_read_target_in_flight)
{
	/* responses are being read from the remote MR */
	dereg_in_flight(IBV_WR_RDMA_READ, 1, 0, 0, "remote MR");
}

T_CASE(destroy_qp_in_flight)
{
	struct tv_pair p;
	struct tv_buf a, b;
	double t0;

	open_pair(&p);
	tv_buf_alloc(&a, p.a.pd, (size_t)N * CHUNK, TV_ACCESS_ALL);
	tv_buf_alloc(&b, p.b.pd, (size_t)N * CHUNK, TV_ACCESS_ALL);
	post_writes(&p, &a, &b, IBV_WR_RDMA_WRITE);
	/* the responder's QP goes away under the traffic */
	T_EQ_INT(ibv_destroy_qp(p.b.qp), 0);
	p.b.qp = NULL;
	t0 = tv_now();
	{
		/* What was not acknowledged fails with retry exceeded, the
		 * rest flushes; this must not take longer than the QP's
		 * timeout x retries allows (with slack). */
		int bad = 0;

		for (int k = 0; k < N; k++) {
			struct ibv_wc wc = tv_wait_wc(p.a.scq, 30);

			T_ASSERTF(wc.status == IBV_WC_SUCCESS || wc.status == IBV_WC_RETRY_EXC_ERR ||
					  wc.status == IBV_WC_WR_FLUSH_ERR,
				  "unexpected completion %s", tv_wc_str(&wc));
			bad += wc.status != IBV_WC_SUCCESS;
		}
		t_log("%d of %d WRITEs failed after the peer QP was destroyed (%.0f ms)", bad, N,
		      (tv_now() - t0) * 1e3);
		T_LT_INT((long long)((tv_now() - t0) * 1000), 5000);
		if (bad)
			T_EQ_INT(tv_qp_state(p.a.qp), IBV_QPS_ERR);
	}
	tv_buf_free(&a);
	tv_buf_free(&b);
	tv_pair_close(&p);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
