/* Overload and absent applications (issue 16): deep queues, many QPs at
 * once, a receiver or a sender whose application stops polling for
 * seconds. No QP whose peer is alive may fail, every byte must land, and
 * nothing may hang. The application-progress cases force
 * UROCE_PROGRESS=app: with it an application thread that polls does the
 * engine's work and the engine thread parks, so a poller that goes away
 * is exactly what the park's bound must survive (docs/design.md, "Who runs
 * the transport"). */
#include "common.h"

#define KB 1024u

static void open_pair(struct tv_pair *p, uint32_t depth)
{
	struct tv_opts o = tv_opts_default();

	o.mtu = IBV_MTU_4096;
	o.separate_ctx = 1;
	o.sq_sig_all = 0;
	if (depth) {
		o.max_send_wr = depth;
		o.max_recv_wr = depth;
		o.cqe = (int)depth * 2;
	}
	tv_pair_open(p, &o);
}

/* Spins on cq (empty) for secs: an application thread that polls. */
static void poll_idle(struct ibv_cq *cq, double secs)
{
	double t0 = tv_now();
	struct ibv_wc wc;

	while (tv_now() - t0 < secs)
		T_EQ_INT(ibv_poll_cq(cq, 1, &wc), 0);
}

/* B's application polls for 100 ms (its engine parks), then never again
 * while A writes into it for 2 s and sends to it: B's engine alone must
 * take all of it. */
T_CASE(receiver_stops_polling)
{
	struct tv_pair p;
	struct tv_buf a, b;
	const size_t n = 64 * KB;
	int nwr = 0, nrecv = 64;
	double t0;

	setenv("UROCE_PROGRESS", "app", 1);
	open_pair(&p, 0);
	tv_buf_alloc(&a, p.a.pd, n, TV_ACCESS_ALL);
	tv_buf_alloc(&b, p.b.pd, n * 2, TV_ACCESS_ALL);
	for (int i = 0; i < nrecv; i++)
		T_EQ_INT(tv_post_recv1(p.b.qp, 100 + i, &b, n, 256), 0);
	poll_idle(p.b.rcq, 0.1);
	t0 = tv_now();
	while (tv_now() - t0 < 2.0) {
		tv_fill(a.p, n, (uint64_t)nwr + 1);
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, (uint64_t)nwr, &a, 0, n,
				  (uintptr_t)b.p, b.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
		tv_expect_wc(p.a.scq, p.a.qp, (uint64_t)nwr, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		T_PATTERN(b.p, n, (uint64_t)nwr + 1, 0);
		nwr++;
		if (nwr % 16 == 0)
			usleep(50000); /* gaps: the sender's engine goes idle too */
	}
	/* SENDs into the receives posted before it stopped polling */
	for (int i = 0; i < nrecv; i++)
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 1000 + (uint64_t)i, &a, 0, 256, 0, 0, 0,
				  IBV_SEND_SIGNALED), 0);
	for (int i = 0; i < nrecv; i++)
		tv_expect_wc(p.a.scq, p.a.qp, 1000 + (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_SEND);
	/* only now does B look: every receive completed meanwhile */
	for (int i = 0; i < nrecv; i++)
		tv_expect_wc(p.b.rcq, p.b.qp, 100 + (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RECV);
	t_log("%d WRITEs of 64 KiB and %d SENDs into a context nobody polled for 2 s", nwr, nrecv);
	T_ASSERT(nwr > 10);
	tv_buf_free(&a);
	tv_buf_free(&b);
	tv_pair_close(&p);
	unsetenv("UROCE_PROGRESS");
}

/* A posts a deep queue and its application then sleeps 1 s without
 * polling: its engine must send it all (the window allows only part at
 * once, the rest leaves as ACKs come back). */
static void sender_sleeps(const char *mode)
{
	struct tv_pair p;
	struct tv_buf a, b;
	const uint32_t depth = 1024;
	const size_t n = 16 * KB;

	setenv("UROCE_PROGRESS", mode, 1);
	open_pair(&p, depth);
	tv_buf_alloc(&a, p.a.pd, (size_t)depth * n, TV_ACCESS_ALL);
	tv_buf_alloc(&b, p.b.pd, (size_t)depth * n, TV_ACCESS_ALL);
	tv_fill(a.p, (size_t)depth * n, 77);
	poll_idle(p.a.scq, 0.05);
	for (uint32_t i = 0; i < depth; i++)
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, i, &a, (size_t)i * n, n,
				  (uintptr_t)b.p + (size_t)i * n, b.mr->rkey, 0,
				  i + 1 == depth ? IBV_SEND_SIGNALED : 0), 0);
	sleep(1);
	tv_expect_wc(p.a.scq, p.a.qp, depth - 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	T_PATTERN(b.p, (size_t)depth * n, 77, 0);
	tv_buf_free(&a);
	tv_buf_free(&b);
	tv_pair_close(&p);
	unsetenv("UROCE_PROGRESS");
}

T_CASE(sender_sleeps_after_posting_app) { sender_sleeps("app"); }
T_CASE(sender_sleeps_after_posting_engine) { sender_sleeps("engine"); }

/* 64 QPs between two contexts, all writing at once, each its own pattern
 * into its own region, with 16 KiB SENDs on every QP too. */
T_CASE(qps_64_at_once)
{
	enum { NQ = 64, ROUNDS = 20 };
	static struct tv_side s[2][NQ];
	static struct tv_buf src[NQ], dst[NQ];
	struct ibv_context *ca = tv_open_device(), *cb = tv_open_device();
	struct tv_opts o = tv_opts_default();
	const size_t n = 64 * KB;

	o.mtu = IBV_MTU_4096;
	o.sq_sig_all = 0;
	o.max_send_wr = o.max_recv_wr = 2 * ROUNDS;
	o.cqe = 4 * ROUNDS;
	for (int q = 0; q < NQ; q++) {
		struct tv_info ia, ib;

		tv_side_open(&s[0][q], &o, ca);
		tv_side_open(&s[1][q], &o, cb);
		memset(&ia, 0, sizeof(ia));
		memset(&ib, 0, sizeof(ib));
		tv_info_of(&s[0][q], &ia);
		tv_info_of(&s[1][q], &ib);
		tv_connect(&s[0][q], &o, &ib);
		tv_connect(&s[1][q], &o, &ia);
		tv_buf_alloc(&src[q], s[0][q].pd, n, TV_ACCESS_ALL);
		tv_buf_alloc(&dst[q], s[1][q].pd, n + 16 * KB * ROUNDS, TV_ACCESS_ALL);
		tv_fill(src[q].p, n, 1000 + (uint64_t)q);
		for (int r = 0; r < ROUNDS; r++)
			T_EQ_INT(tv_post_recv1(s[1][q].qp, (uint64_t)r, &dst[q], n + 16 * KB * (size_t)r,
					       16 * KB), 0);
	}
	for (int r = 0; r < ROUNDS; r++)
		for (int q = 0; q < NQ; q++) {
			T_EQ_INT(tv_post1(s[0][q].qp, IBV_WR_RDMA_WRITE, 2 * (uint64_t)r, &src[q], 0, n,
					  (uintptr_t)dst[q].p, dst[q].mr->rkey, 0, 0), 0);
			T_EQ_INT(tv_post1(s[0][q].qp, IBV_WR_SEND, 2 * (uint64_t)r + 1, &src[q], 0,
					  16 * KB, 0, 0, 0, IBV_SEND_SIGNALED), 0);
		}
	for (int q = 0; q < NQ; q++) {
		for (int r = 0; r < ROUNDS; r++) {
			tv_expect_wc(s[0][q].scq, s[0][q].qp, 2 * (uint64_t)r + 1, IBV_WC_SUCCESS,
				     IBV_WC_SEND);
			tv_expect_wc(s[1][q].rcq, s[1][q].qp, (uint64_t)r, IBV_WC_SUCCESS, IBV_WC_RECV);
		}
		T_PATTERN(dst[q].p, n, 1000 + (uint64_t)q, 0);
		for (int r = 0; r < ROUNDS; r++)
			T_PATTERN(dst[q].p + n + 16 * KB * (size_t)r, 16 * KB, 1000 + (uint64_t)q, 0);
	}
	t_log("%d QPs x %d rounds of a 64 KiB WRITE and a 16 KiB SEND, all intact", NQ, ROUNDS);
	for (int q = 0; q < NQ; q++) {
		tv_buf_free(&src[q]);
		tv_buf_free(&dst[q]);
		tv_side_close(&s[0][q]);
		tv_side_close(&s[1][q]);
	}
	T_EQ_INT(ibv_close_device(ca), 0);
	T_EQ_INT(ibv_close_device(cb), 0);
}

/* More SENDs than receives (IBA 9.7.5.2.8): the sender posts 256 SENDs of
 * 16 KiB at once into a receiver with 8 receives posted, which reposts 8
 * at a time only after reading its completions, with pauses. With
 * rnr_retry 7 (infinite) every SEND must land, in order and intact,
 * through RNR NAKs and waits; no QP may fail. Both progress modes. */
static void rnr_overflow(const char *mode)
{
	enum { NS = 256, NR = 8 };
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf a, b;
	const size_t n = 16 * KB;
	uint64_t naks0 = TV_COUNTER(rnr_naks_rcvd);
	int got = 0;

	setenv("UROCE_PROGRESS", mode, 1);
	o.mtu = IBV_MTU_4096;
	o.separate_ctx = 1;
	o.max_send_wr = NS;
	o.max_recv_wr = NR;
	o.cqe = 2 * NS;
	o.rnr_retry = 7;
	o.min_rnr_timer = 1; /* 0.01 ms: the sender comes back soon and often */
	tv_pair_open(&p, &o);
	tv_buf_alloc(&a, p.a.pd, NS * n, TV_ACCESS_ALL);
	tv_buf_alloc(&b, p.b.pd, NS * n, TV_ACCESS_ALL);
	for (int i = 0; i < NS; i++)
		tv_fill(a.p + (size_t)i * n, n, 500 + (uint64_t)i);
	for (int i = 0; i < NR; i++)
		T_EQ_INT(tv_post_recv1(p.b.qp, (uint64_t)i, &b, (size_t)i * n, n), 0);
	for (int i = 0; i < NS; i++)
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, (uint64_t)i, &a, (size_t)i * n, n, 0, 0, 0,
				  IBV_SEND_SIGNALED), 0);
	while (got < NS) {
		/* the next NR in order, then a pause, then NR more receives */
		for (int k = 0; k < NR && got < NS; k++, got++) {
			tv_expect_wc(p.b.rcq, p.b.qp, (uint64_t)got, IBV_WC_SUCCESS, IBV_WC_RECV);
			T_PATTERN(b.p + (size_t)got * n, n, 500 + (uint64_t)got, 0);
		}
		usleep(2000);
		for (int k = 0; k < NR && got + k < NS; k++)
			T_EQ_INT(tv_post_recv1(p.b.qp, (uint64_t)(got + k), &b,
					       (size_t)(got + k) * n, n), 0);
	}
	for (int i = 0; i < NS; i++)
		tv_expect_wc(p.a.scq, p.a.qp, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_SEND);
	t_log("%s: %d SENDs through %d receives, %llu RNR NAKs", mode, NS, NR,
	      (unsigned long long)(TV_COUNTER(rnr_naks_rcvd) - naks0));
	T_GT_INT(TV_COUNTER(rnr_naks_rcvd) - naks0, 0);
	T_EQ_INT(TV_COUNTER(rnr_retry_exceeded), 0);
	tv_buf_free(&a);
	tv_buf_free(&b);
	tv_pair_close(&p);
	unsetenv("UROCE_PROGRESS");
}

T_CASE(rnr_overflow_engine) { rnr_overflow("engine"); }
T_CASE(rnr_overflow_app) { rnr_overflow("app"); }

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
