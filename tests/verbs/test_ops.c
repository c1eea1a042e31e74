/* Data movement on RC QPs: SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM,
 * RDMA_READ over many sizes and two path MTUs, scatter/gather lists, inline
 * sends, unsignaled WRs, atomics, many WRs in flight; in one process and
 * across two processes.
 *
 * Every payload is a position-dependent pattern whose seed depends on the
 * operation, the size and the MTU, and all memory around it holds a canary,
 * so short, long, shifted or misplaced transfers are caught. */
#include "common.h"

enum { OP_SEND, OP_SEND_IMM, OP_WRITE, OP_WRITE_IMM, OP_READ, OP_N };

static const char *const op_name[OP_N] = { "SEND", "SEND_WITH_IMM", "RDMA_WRITE",
					   "RDMA_WRITE_WITH_IMM", "RDMA_READ" };
static const enum ibv_wr_opcode op_wr[OP_N] = {
	IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
	IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ
};
static const int op_wc[OP_N] = { IBV_WC_SEND, IBV_WC_SEND, IBV_WC_RDMA_WRITE,
				 IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ };

static int op_recv(int op)
{
	return op == OP_SEND || op == OP_SEND_IMM || op == OP_WRITE_IMM;
}

static int op_imm(int op)
{
	return op == OP_SEND_IMM || op == OP_WRITE_IMM;
}

#define SOFF 5  /* payload offset in the source buffer (unaligned on purpose) */
#define DOFF 13 /* payload offset in the destination buffer */
#define TAIL 64 /* canary bytes past the largest payload */
#define MIB (1024u * 1024u)
#define BIG ((size_t)64 * MIB + 13)

static const size_t sizes[] = { 0, 1, 3, 1023, 1024, 1025, 4095, 4096, 4097,
				8192 + 7, 65537, MIB };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static uint64_t seed_of(int op, size_t n, int mtu)
{
	return ((uint64_t)(op + 1) << 56) ^ ((uint64_t)mtu << 40) ^ (uint64_t)n;
}

static uint32_t imm_of(int op, size_t n)
{
	return 0xa0000000u ^ ((uint32_t)op << 24) ^ (uint32_t)n;
}

/* Completion deadline for an n-byte transfer (at least 2 MiB/s). */
static double wait_for(size_t n)
{
	return TV_WAIT_S + (double)n / (2.0 * MIB);
}

/* One end of a transfer: its QP and its memory. */
struct end {
	struct tv_side *s;
	struct tv_buf buf;  /* payload buffer, max + DOFF + TAIL bytes */
	struct tv_buf ibuf; /* receive buffer for WRITE_WITH_IMM: must stay untouched */
	uint64_t wr_id;
};

static void end_alloc(struct end *e, struct tv_side *s, size_t maxn)
{
	memset(e, 0, sizeof(*e));
	e->s = s;
	tv_buf_alloc(&e->buf, s->pd, maxn + DOFF + TAIL, TV_ACCESS_ALL);
	tv_buf_alloc(&e->ibuf, s->pd, 64, IBV_ACCESS_LOCAL_WRITE);
}

static void end_free(struct end *e)
{
	tv_buf_free(&e->buf);
	tv_buf_free(&e->ibuf);
}

/* Responder, before the operation: canary everywhere, the READ source, the
 * receive WR. */
static void resp_prepare(struct end *r, int op, size_t n, uint64_t seed)
{
	tv_canary(r->buf.p, r->buf.len);
	tv_canary(r->ibuf.p, r->ibuf.len);
	if (op == OP_READ)
		tv_fill(r->buf.p + SOFF, n, seed);
	if (op == OP_SEND || op == OP_SEND_IMM)
		T_EQ_INT(tv_post_recv1(r->s->qp, r->wr_id, &r->buf, DOFF, n + TAIL / 2), 0);
	if (op == OP_WRITE_IMM)
		T_EQ_INT(tv_post_recv1(r->s->qp, r->wr_id, &r->ibuf, 0, r->ibuf.len), 0);
}

/* Requester: posts the operation towards raddr/rkey (the peer's payload
 * buffer) and checks its own completion and memory. */
static void req_run(struct end *q, uint64_t raddr, uint32_t rkey, int op, size_t n,
		    uint64_t seed)
{
	int rc;

	tv_canary(q->buf.p, q->buf.len);
	if (op == OP_READ)
		rc = tv_post1(q->s->qp, op_wr[op], q->wr_id, &q->buf, DOFF, n,
			      raddr + SOFF, rkey, 0, IBV_SEND_SIGNALED);
	else {
		tv_fill(q->buf.p + SOFF, n, seed);
		rc = tv_post1(q->s->qp, op_wr[op], q->wr_id, &q->buf, SOFF, n,
			      raddr + DOFF, rkey, imm_of(op, n), IBV_SEND_SIGNALED);
	}
	T_ASSERTF(rc == 0, "%s of %zu bytes: ibv_post_send %d", op_name[op], n, rc);
	tv_expect_wc_to(q->s->scq, q->s->qp, q->wr_id, IBV_WC_SUCCESS, op_wc[op],
			wait_for(n));
	if (op == OP_READ) {
		T_CANARY(q->buf.p, 0, DOFF);
		T_PATTERN(q->buf.p + DOFF, n, seed, 0);
		T_CANARY(q->buf.p, DOFF + n, q->buf.len - DOFF - n);
	} else {
		/* The source is not modified. */
		T_PATTERN(q->buf.p + SOFF, n, seed, 0);
	}
}

/* Responder, after the requester's completion: its completion and memory. */
static void resp_check(struct end *r, int op, size_t n, uint64_t seed)
{
	struct ibv_wc wc;

	if (op_recv(op)) {
		wc = tv_expect_wc_to(r->s->rcq, r->s->qp, r->wr_id, IBV_WC_SUCCESS,
				     op == OP_WRITE_IMM ? IBV_WC_RECV_RDMA_WITH_IMM
							: IBV_WC_RECV,
				     wait_for(n));
		T_ASSERTF(wc.byte_len == n, "%s of %zu bytes: byte_len %u", op_name[op], n,
			  wc.byte_len);
		if (op_imm(op)) {
			T_ASSERTF(wc.wc_flags & IBV_WC_WITH_IMM, "%s: wc_flags 0x%x",
				  op_name[op], wc.wc_flags);
			T_EQ_INT(ntohl(wc.imm_data), imm_of(op, n));
		} else {
			T_ASSERTF(!(wc.wc_flags & IBV_WC_WITH_IMM), "%s: wc_flags 0x%x",
				  op_name[op], wc.wc_flags);
		}
	} else {
		/* WRITE and READ consume no receive and make no responder CQE. */
		tv_expect_no_wc(r->s->rcq, 0);
	}
	if (op == OP_READ) {
		T_CANARY(r->buf.p, 0, SOFF);
		T_PATTERN(r->buf.p + SOFF, n, seed, 0);
		T_CANARY(r->buf.p, SOFF + n, r->buf.len - SOFF - n);
	} else {
		T_CANARY(r->buf.p, 0, DOFF);
		T_PATTERN(r->buf.p + DOFF, n, seed, 0);
		T_CANARY(r->buf.p, DOFF + n, r->buf.len - DOFF - n);
	}
	T_CANARY(r->ibuf.p, 0, r->ibuf.len);
}

static int mtu_bytes(enum ibv_mtu m)
{
	return 128 << (int)m;
}

/* ---- one process ----------------------------------------------------------- */

static void run_local(int op, enum ibv_mtu mtu, const size_t *sz, size_t nsz,
		      int separate_ctx)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct end q, r;
	size_t maxn = 0;
	double t0 = tv_now();

	o.mtu = mtu;
	o.separate_ctx = separate_ctx;
	tv_pair_open(&p, &o);
	for (size_t i = 0; i < nsz; i++)
		maxn = sz[i] > maxn ? sz[i] : maxn;
	end_alloc(&q, &p.a, maxn);
	end_alloc(&r, &p.b, maxn);
	for (size_t i = 0; i < nsz; i++) {
		uint64_t seed = seed_of(op, sz[i], mtu_bytes(mtu));

		q.wr_id = 1000 + i;
		r.wr_id = 2000 + i;
		resp_prepare(&r, op, sz[i], seed);
		req_run(&q, (uintptr_t)r.buf.p, r.buf.mr->rkey, op, sz[i], seed);
		resp_check(&r, op, sz[i], seed);
	}
	tv_expect_no_wc(p.a.scq, 0);
	t_log("%s mtu %d: %zu sizes up to %zu bytes in %.3f s", op_name[op],
	      mtu_bytes(mtu), nsz, maxn, tv_now() - t0);
	end_free(&q);
	end_free(&r);
	tv_pair_close(&p);
}

#define SIZES_CASE(name, op, mtu)                                           \
	T_CASE(name) { run_local(op, mtu, sizes, NSIZES, 0); }
#define BIG_CASE(name, op, mtu)                                             \
	T_CASE(name)                                                        \
	{                                                                   \
		size_t big = BIG;                                           \
		run_local(op, mtu, &big, 1, 0);                             \
	}

SIZES_CASE(send_mtu1024, OP_SEND, IBV_MTU_1024)
SIZES_CASE(send_mtu4096, OP_SEND, IBV_MTU_4096)
SIZES_CASE(send_imm_mtu1024, OP_SEND_IMM, IBV_MTU_1024)
SIZES_CASE(send_imm_mtu4096, OP_SEND_IMM, IBV_MTU_4096)
SIZES_CASE(write_mtu1024, OP_WRITE, IBV_MTU_1024)
SIZES_CASE(write_mtu4096, OP_WRITE, IBV_MTU_4096)
SIZES_CASE(write_imm_mtu1024, OP_WRITE_IMM, IBV_MTU_1024)
SIZES_CASE(write_imm_mtu4096, OP_WRITE_IMM, IBV_MTU_4096)
SIZES_CASE(read_mtu1024, OP_READ, IBV_MTU_1024)
SIZES_CASE(read_mtu4096, OP_READ, IBV_MTU_4096)

BIG_CASE(send_64m_mtu1024, OP_SEND, IBV_MTU_1024)
BIG_CASE(send_64m_mtu4096, OP_SEND, IBV_MTU_4096)
BIG_CASE(send_imm_64m_mtu1024, OP_SEND_IMM, IBV_MTU_1024)
BIG_CASE(send_imm_64m_mtu4096, OP_SEND_IMM, IBV_MTU_4096)
BIG_CASE(write_64m_mtu1024, OP_WRITE, IBV_MTU_1024)
BIG_CASE(write_64m_mtu4096, OP_WRITE, IBV_MTU_4096)
BIG_CASE(write_imm_64m_mtu1024, OP_WRITE_IMM, IBV_MTU_1024)
BIG_CASE(write_imm_64m_mtu4096, OP_WRITE_IMM, IBV_MTU_4096)
BIG_CASE(read_64m_mtu1024, OP_READ, IBV_MTU_1024)
BIG_CASE(read_64m_mtu4096, OP_READ, IBV_MTU_4096)

/* The upper bound: single 1 GiB messages (plus an odd byte). */
#define GIB_CASE(name, op)                                                  \
	T_CASE(name)                                                        \
	{                                                                   \
		size_t big = ((size_t)1 << 30) + 1;                         \
		run_local(op, IBV_MTU_4096, &big, 1, 1);                    \
	}

GIB_CASE(write_1g, OP_WRITE)
GIB_CASE(read_1g, OP_READ)
GIB_CASE(send_1g, OP_SEND)

/* The two QPs on separate device contexts of the same process. */
T_CASE(all_ops_separate_contexts)
{
	for (int op = 0; op < OP_N; op++)
		run_local(op, IBV_MTU_4096, sizes, NSIZES, 1);
}

/* The small path MTUs, around their boundaries. */
T_CASE(all_ops_mtu256_512_2048)
{
	static const enum ibv_mtu m[] = { IBV_MTU_256, IBV_MTU_512, IBV_MTU_2048 };

	for (int i = 0; i < 3; i++) {
		int b = mtu_bytes(m[i]);
		size_t sz[] = { 1, (size_t)b - 1, (size_t)b, (size_t)b + 1,
				(size_t)3 * b + 5, 100000 };

		for (int op = 0; op < OP_N; op++)
			run_local(op, m[i], sz, 6, 0);
	}
}

/* ---- scatter/gather ---------------------------------------------------------- */

/* Writes the byte stream of the SGEs (addresses inside real) into img, an
 * image of real's buffer. */
static size_t sg_scatter(uint8_t *img, const struct tv_buf *real,
			 const struct ibv_sge *sg, int n, const uint8_t *stream,
			 size_t len)
{
	size_t done = 0;

	for (int i = 0; i < n && done < len; i++) {
		size_t off = (size_t)(sg[i].addr - (uintptr_t)real->p);
		size_t k = sg[i].length < len - done ? sg[i].length : len - done;

		memcpy(img + off, stream + done, k);
		done += k;
	}
	return done;
}

static size_t sg_gather(uint8_t *out, const struct ibv_sge *sg, int n)
{
	size_t done = 0;

	for (int i = 0; i < n; i++) {
		memcpy(out + done, (const void *)(uintptr_t)sg[i].addr, sg[i].length);
		done += sg[i].length;
	}
	return done;
}

/* Local side: two MRs, four odd-sized pieces, two from each. */
struct sgl {
	struct tv_buf m1, m2;
	struct ibv_sge sg[4];
	size_t total;
};

static void sgl_make(struct sgl *g, struct ibv_pd *pd, uint64_t seed)
{
	tv_buf_alloc(&g->m1, pd, 16384, TV_ACCESS_ALL);
	tv_buf_alloc(&g->m2, pd, 16384, TV_ACCESS_ALL);
	tv_fill(g->m1.p, g->m1.len, seed);
	tv_fill(g->m2.p, g->m2.len, seed + 1);
	g->sg[0] = tv_sge(&g->m1, 3, 7);
	g->sg[1] = tv_sge(&g->m2, 100, 1501);
	g->sg[2] = tv_sge(&g->m1, 2000, 3);
	g->sg[3] = tv_sge(&g->m2, 5000, 4099);
	g->total = 7 + 1501 + 3 + 4099;
}

T_CASE(sge_send_4_to_4)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct sgl g;
	struct tv_buf rb;
	struct ibv_sge rs[4];
	uint8_t *stream, *img;
	struct ibv_wc wc;

	o.max_send_sge = 4;
	o.max_recv_sge = 4;
	tv_pair_open(&p, &o);
	sgl_make(&g, p.a.pd, 11);
	tv_buf_alloc(&rb, p.b.pd, 16384, IBV_ACCESS_LOCAL_WRITE);
	rs[0] = tv_sge(&rb, 1, 5);
	rs[1] = tv_sge(&rb, 50, 2048);
	rs[2] = tv_sge(&rb, 3000, 1001);
	rs[3] = tv_sge(&rb, 6000, 4000); /* only partly filled */
	stream = malloc(g.total);
	img = malloc(rb.len);
	T_ASSERT(stream && img);
	T_EQ_INT(sg_gather(stream, g.sg, 4), g.total);
	memcpy(img, rb.p, rb.len);
	T_EQ_INT(sg_scatter(img, &rb, rs, 4, stream, g.total), g.total);
	T_EQ_INT(tv_post_recv(p.b.qp, 7, rs, 4), 0);
	T_EQ_INT(tv_post(p.a.qp, IBV_WR_SEND, 8, g.sg, 4, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 8, IBV_WC_SUCCESS, IBV_WC_SEND);
	wc = tv_expect_wc(p.b.rcq, p.b.qp, 7, IBV_WC_SUCCESS, IBV_WC_RECV);
	T_EQ_INT(wc.byte_len, g.total);
	T_EQ_MEM(rb.p, img, rb.len);
	free(stream);
	free(img);
}

T_CASE(sge_write_gather)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct sgl g;
	struct tv_buf rb;
	uint8_t *img;

	o.mtu = IBV_MTU_1024;
	tv_pair_open(&p, &o);
	sgl_make(&g, p.a.pd, 21);
	tv_buf_alloc(&rb, p.b.pd, 16384, TV_ACCESS_ALL);
	img = malloc(rb.len);
	T_ASSERT(img != NULL);
	memcpy(img, rb.p, rb.len);
	T_EQ_INT(sg_gather(img + 13, g.sg, 4), g.total);
	T_EQ_INT(tv_post(p.a.qp, IBV_WR_RDMA_WRITE, 9, g.sg, 4, (uintptr_t)rb.p + 13,
			 rb.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 9, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	T_EQ_MEM(rb.p, img, rb.len);
	free(img);
}

T_CASE(sge_read_scatter)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct sgl g;
	struct tv_buf rb;
	uint8_t *img1, *img2;

	o.mtu = IBV_MTU_1024;
	tv_pair_open(&p, &o);
	sgl_make(&g, p.a.pd, 31);
	tv_canary(g.m1.p, g.m1.len);
	tv_canary(g.m2.p, g.m2.len);
	tv_buf_alloc(&rb, p.b.pd, 16384, TV_ACCESS_ALL);
	tv_fill(rb.p, rb.len, 32);
	img1 = malloc(g.m1.len);
	img2 = malloc(g.m2.len);
	T_ASSERT(img1 && img2);
	memcpy(img1, g.m1.p, g.m1.len);
	memcpy(img2, g.m2.p, g.m2.len);
	/* Expected: remote bytes [7, 7+total) scattered over the 4 SGEs. */
	{
		const uint8_t *src = rb.p + 7;
		size_t done = 0;

		for (int i = 0; i < 4; i++) {
			struct tv_buf *m = (g.sg[i].lkey == g.m1.mr->lkey) ? &g.m1 : &g.m2;
			uint8_t *img = m == &g.m1 ? img1 : img2;

			memcpy(img + (g.sg[i].addr - (uintptr_t)m->p), src + done,
			       g.sg[i].length);
			done += g.sg[i].length;
		}
	}
	T_EQ_INT(tv_post(p.a.qp, IBV_WR_RDMA_READ, 10, g.sg, 4, (uintptr_t)rb.p + 7,
			 rb.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 10, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	T_EQ_MEM(g.m1.p, img1, g.m1.len);
	T_EQ_MEM(g.m2.p, img2, g.m2.len);
	T_PATTERN(rb.p, rb.len, 32, 0);
	free(img1);
	free(img2);
}

/* As many SGEs as the device allows (up to 32), odd lengths, both sides. */
T_CASE(sge_max_send)
{
	struct tv_opts o = tv_opts_default();
	struct ibv_context *ctx = tv_open_device();
	struct ibv_device_attr d = tv_query_device(ctx);
	struct tv_pair p;
	struct tv_buf sb, rb;
	struct ibv_sge ss[32], rs[32];
	uint8_t *stream, *img;
	int n = d.max_sge < 32 ? d.max_sge : 32;
	size_t so = 0, ro = 0, total = 0;
	struct ibv_wc wc;

	ibv_close_device(ctx);
	o.max_send_sge = (uint32_t)n;
	o.max_recv_sge = (uint32_t)n;
	tv_pair_open(&p, &o);
	tv_buf_alloc(&sb, p.a.pd, 65536, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 65536, IBV_ACCESS_LOCAL_WRITE);
	tv_fill(sb.p, sb.len, 41);
	for (int i = 0; i < n; i++) {
		size_t sl = (size_t)i * 37 + 1, rl = (size_t)(n - i) * 41 + 3;

		ss[i] = tv_sge(&sb, so + 1, sl);
		rs[i] = tv_sge(&rb, ro + 2, rl);
		so += sl + 9;
		ro += rl + 11;
		total += sl;
	}
	stream = malloc(total);
	img = malloc(rb.len);
	T_ASSERT(stream && img);
	sg_gather(stream, ss, n);
	memcpy(img, rb.p, rb.len);
	T_ASSERT(sg_scatter(img, &rb, rs, n, stream, total) == total);
	T_EQ_INT(tv_post_recv(p.b.qp, 1, rs, n), 0);
	T_EQ_INT(tv_post(p.a.qp, IBV_WR_SEND, 2, ss, n, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_SEND);
	wc = tv_expect_wc(p.b.rcq, p.b.qp, 1, IBV_WC_SUCCESS, IBV_WC_RECV);
	T_EQ_INT(wc.byte_len, total);
	T_EQ_MEM(rb.p, img, rb.len);
	t_log("%d SGEs, %zu bytes", n, total);
	free(stream);
	free(img);
}

/* ---- inline ------------------------------------------------------------------ */

T_CASE(inline_send_and_write)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf rb;
	uint8_t *src;
	size_t cap, sz[3];

	o.max_inline = 64;
	tv_pair_open(&p, &o);
	cap = p.a.cap.max_inline_data;
	T_GE_INT(cap, 64);
	sz[0] = 1;
	sz[1] = 17;
	sz[2] = cap > 4096 ? 4096 : cap;
	tv_buf_alloc(&rb, p.b.pd, 8192 + 64, TV_ACCESS_ALL);
	/* Unregistered memory: inline data needs no lkey. */
	src = malloc(sz[2]);
	T_ASSERT(src != NULL);
	for (int i = 0; i < 3; i++) {
		struct ibv_sge s = { (uintptr_t)src, (uint32_t)sz[i], 0 };
		struct ibv_wc wc;

		tv_canary(rb.p, rb.len);
		tv_fill(src, sz[i], 100 + i);
		T_EQ_INT(tv_post_recv1(p.b.qp, 50 + i, &rb, 0, 4096 + 8), 0);
		T_EQ_INT(tv_post(p.a.qp, IBV_WR_SEND, 10 + i, &s, 1, 0, 0, 0,
				 IBV_SEND_SIGNALED | IBV_SEND_INLINE), 0);
		/* The data was copied at post time. */
		memset(src, 0, sz[i]);
		tv_expect_wc(p.a.scq, p.a.qp, 10 + i, IBV_WC_SUCCESS, IBV_WC_SEND);
		wc = tv_expect_wc(p.b.rcq, p.b.qp, 50 + i, IBV_WC_SUCCESS, IBV_WC_RECV);
		T_EQ_INT(wc.byte_len, sz[i]);
		T_PATTERN(rb.p, sz[i], 100 + i, 0);
		T_CANARY(rb.p, sz[i], rb.len - sz[i]);

		tv_fill(src, sz[i], 200 + i);
		T_EQ_INT(tv_post(p.a.qp, IBV_WR_RDMA_WRITE, 20 + i, &s, 1,
				 (uintptr_t)rb.p + 4099, rb.mr->rkey, 0,
				 IBV_SEND_SIGNALED | IBV_SEND_INLINE), 0);
		memset(src, 0xee, sz[i]);
		tv_expect_wc(p.a.scq, p.a.qp, 20 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		T_PATTERN(rb.p + 4099, sz[i], 200 + i, 0);
		T_CANARY(rb.p, 4099 + sz[i], rb.len - 4099 - sz[i]);
	}
	free(src);
}

T_CASE(inline_too_big_rejected)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf sb;
	size_t n;
	int rc;

	o.max_inline = 64;
	tv_pair_open(&p, &o);
	n = p.a.cap.max_inline_data + 1;
	tv_buf_alloc(&sb, p.a.pd, n, IBV_ACCESS_LOCAL_WRITE);
	rc = tv_post1(p.a.qp, IBV_WR_SEND, 1, &sb, 0, n, 0, 0, 0,
		      IBV_SEND_SIGNALED | IBV_SEND_INLINE);
	T_NE_INT(rc, 0);
	tv_expect_no_wc(p.a.scq, 0.1);
}

/* ---- signaling ------------------------------------------------------------- */

T_CASE(unsignaled_only_signaled_complete)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf sb, rb;

	o.sq_sig_all = 0;
	tv_pair_open(&p, &o);
	tv_buf_alloc(&sb, p.a.pd, 10 * 1024, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 10 * 1024 + 64, TV_ACCESS_ALL);
	tv_fill(sb.p, sb.len, 7);
	for (int i = 0; i < 10; i++)
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, &sb,
				  (size_t)i * 1024, 1024, (uintptr_t)rb.p + (size_t)i * 1024,
				  rb.mr->rkey, 0, (i == 4 || i == 9) ? IBV_SEND_SIGNALED : 0),
			 0);
	tv_expect_wc(p.a.scq, p.a.qp, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	tv_expect_wc(p.a.scq, p.a.qp, 9, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	tv_expect_no_wc(p.a.scq, 0.2);
	T_PATTERN(rb.p, 10 * 1024, 7, 0);
	T_CANARY(rb.p, 10 * 1024, 64);
}

T_CASE(sq_sig_all_signals_every_wr)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf sb, rb;

	o.sq_sig_all = 1;
	tv_pair_open(&p, &o);
	tv_buf_alloc(&sb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, TV_ACCESS_ALL);
	for (int i = 0; i < 5; i++)
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, &sb, 0, 100,
				  (uintptr_t)rb.p, rb.mr->rkey, 0, 0), 0);
	for (int i = 0; i < 5; i++)
		tv_expect_wc(p.a.scq, p.a.qp, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	tv_expect_no_wc(p.a.scq, 0.1);
}

/* Unsignaled WRs free their SQ slots when a later signaled WR's completion
 * is polled: many rounds of (depth-1 unsignaled + 1 signaled) never hit ENOMEM. */
T_CASE(unsignaled_slots_recycled)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf sb, rb;
	uint32_t n;

	o.sq_sig_all = 0;
	o.max_send_wr = 16;
	tv_pair_open(&p, &o);
	n = p.a.cap.max_send_wr;
	tv_buf_alloc(&sb, p.a.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, 4096, TV_ACCESS_ALL);
	for (int round = 0; round < 50; round++) {
		for (uint32_t i = 0; i < n; i++) {
			int rc = tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, (uint64_t)round * 1000 + i,
					  &sb, 0, 64, (uintptr_t)rb.p, rb.mr->rkey, 0,
					  i == n - 1 ? IBV_SEND_SIGNALED : 0);

			T_ASSERTF(rc == 0, "round %d WR %u of %u: %d", round, i, n, rc);
		}
		tv_expect_wc(p.a.scq, p.a.qp, (uint64_t)round * 1000 + n - 1,
			     IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	}
	tv_expect_no_wc(p.a.scq, 0.05);
}

/* ---- atomics ------------------------------------------------------------------ */

struct atom {
	struct tv_pair p;
	struct tv_buf res;    /* requester: returned values */
	struct tv_buf target; /* responder: the 64-bit words */
};

static void atom_open(struct atom *t, uint32_t depth)
{
	struct tv_opts o = tv_opts_default();

	o.max_send_wr = depth;
	tv_pair_open(&t->p, &o);
	tv_buf_alloc(&t->res, t->p.a.pd, 8 * (size_t)depth + 64, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&t->target, t->p.b.pd, 64,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
}

static uint64_t rd64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static void wr64(void *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

T_CASE(atomic_fetch_add)
{
	struct atom t;
	struct ibv_qp *qp;

	atom_open(&t, 16);
	qp = t.p.a.qp;
	wr64(t.target.p + 8, 0x1122334455667788ULL);
	T_EQ_INT(tv_post_atomic(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, &t.res, 0,
				(uintptr_t)t.target.p + 8, t.target.mr->rkey,
				0x0101010101010101ULL, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(t.p.a.scq, qp, 1, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	T_EQ_U64(rd64(t.res.p), 0x1122334455667788ULL);
	T_EQ_U64(rd64(t.target.p + 8), 0x1223344556677889ULL);
	T_CANARY(t.target.p, 0, 8);
	T_CANARY(t.target.p, 16, 48);
	T_CANARY(t.res.p, 8, 56);
	/* Wrap-around at 2^64. */
	wr64(t.target.p + 16, 0xffffffffffffffffULL);
	T_EQ_INT(tv_post_atomic(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 2, &t.res, 8,
				(uintptr_t)t.target.p + 16, t.target.mr->rkey, 2, 0,
				IBV_SEND_SIGNALED), 0);
	tv_expect_wc(t.p.a.scq, qp, 2, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	T_EQ_U64(rd64(t.res.p + 8), 0xffffffffffffffffULL);
	T_EQ_U64(rd64(t.target.p + 16), 1);
}

T_CASE(atomic_cmp_swap_success)
{
	struct atom t;

	atom_open(&t, 16);
	wr64(t.target.p + 24, 0xdeadbeefcafef00dULL);
	T_EQ_INT(tv_post_atomic(t.p.a.qp, IBV_WR_ATOMIC_CMP_AND_SWP, 3, &t.res, 0,
				(uintptr_t)t.target.p + 24, t.target.mr->rkey,
				0xdeadbeefcafef00dULL, 0x0123456789abcdefULL,
				IBV_SEND_SIGNALED), 0);
	tv_expect_wc(t.p.a.scq, t.p.a.qp, 3, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
	T_EQ_U64(rd64(t.res.p), 0xdeadbeefcafef00dULL);
	T_EQ_U64(rd64(t.target.p + 24), 0x0123456789abcdefULL);
	T_CANARY(t.target.p, 0, 24);
	T_CANARY(t.target.p, 32, 32);
}

T_CASE(atomic_cmp_swap_failure)
{
	struct atom t;

	atom_open(&t, 16);
	wr64(t.target.p + 24, 0xdeadbeefcafef00dULL);
	T_EQ_INT(tv_post_atomic(t.p.a.qp, IBV_WR_ATOMIC_CMP_AND_SWP, 4, &t.res, 0,
				(uintptr_t)t.target.p + 24, t.target.mr->rkey,
				0xdeadbeefcafef00eULL, 0x0123456789abcdefULL,
				IBV_SEND_SIGNALED), 0);
	tv_expect_wc(t.p.a.scq, t.p.a.qp, 4, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
	/* The original comes back; memory is unchanged. */
	T_EQ_U64(rd64(t.res.p), 0xdeadbeefcafef00dULL);
	T_EQ_U64(rd64(t.target.p + 24), 0xdeadbeefcafef00dULL);
	T_CANARY(t.target.p, 0, 24);
}

/* 200 FETCH_AND_ADDs in flight on one QP execute in order. */
T_CASE(atomic_many_in_order)
{
	struct atom t;
	int n = 200;

	atom_open(&t, 256);
	wr64(t.target.p, 1000);
	for (int i = 0; i < n; i++)
		T_EQ_INT(tv_post_atomic(t.p.a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, (uint64_t)i,
					&t.res, 8 * (size_t)i, (uintptr_t)t.target.p,
					t.target.mr->rkey, 1, 0, IBV_SEND_SIGNALED), 0);
	for (int i = 0; i < n; i++)
		tv_expect_wc(t.p.a.scq, t.p.a.qp, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	for (int i = 0; i < n; i++)
		T_EQ_U64(rd64(t.res.p + 8 * i), 1000 + (uint64_t)i);
	T_EQ_U64(rd64(t.target.p), 1000 + (uint64_t)n);
}

/* Two requesters on two device contexts add to the same word at once; the
 * responder memory is shared (one MR per responder PD). Atomic per device:
 * no increment is lost and every returned value is distinct. */
T_CASE(atomic_two_qps_same_word)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p1, p2;
	struct tv_buf r1, r2;
	struct ibv_mr *m1, *m2;
	uint64_t *word;
	uint8_t *seen;
	int n = 500, done1 = 0, done2 = 0;
	void *mem = NULL;

	o.max_send_wr = 512;
	o.cqe = 1024;
	tv_pair_open(&p1, &o);
	tv_pair_open(&p2, &o);
	T_EQ_INT(posix_memalign(&mem, 4096, 4096), 0);
	word = mem;
	*word = 0;
	m1 = ibv_reg_mr(p1.b.pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	m2 = ibv_reg_mr(p2.b.pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	T_ASSERT(m1 && m2);
	tv_buf_alloc(&r1, p1.a.pd, 8 * (size_t)n, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&r2, p2.a.pd, 8 * (size_t)n, IBV_ACCESS_LOCAL_WRITE);
	for (int i = 0; i < n; i++) {
		T_EQ_INT(tv_post_atomic(p1.a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, (uint64_t)i, &r1,
					8 * (size_t)i, (uintptr_t)word, m1->rkey, 1, 0,
					IBV_SEND_SIGNALED), 0);
		T_EQ_INT(tv_post_atomic(p2.a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, (uint64_t)i, &r2,
					8 * (size_t)i, (uintptr_t)word, m2->rkey, 1, 0,
					IBV_SEND_SIGNALED), 0);
	}
	{
		double t0 = tv_now();

		while (done1 < n || done2 < n) {
			struct ibv_wc wc;

			T_ASSERTF(tv_now() - t0 < 60, "%d + %d of %d completions", done1, done2, n);
			if (done1 < n && ibv_poll_cq(p1.a.scq, 1, &wc) == 1) {
				T_ASSERTF(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)done1,
					  "qp1: %s", tv_wc_str(&wc));
				done1++;
			}
			if (done2 < n && ibv_poll_cq(p2.a.scq, 1, &wc) == 1) {
				T_ASSERTF(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)done2,
					  "qp2: %s", tv_wc_str(&wc));
				done2++;
			}
		}
	}
	T_EQ_U64(__atomic_load_n(word, __ATOMIC_SEQ_CST), 2 * (uint64_t)n);
	seen = calloc(2 * (size_t)n, 1);
	T_ASSERT(seen != NULL);
	for (int i = 0; i < 2 * n; i++) {
		uint64_t v = rd64((i < n ? r1.p : r2.p) + 8 * (i % n));

		T_ASSERTF(v < 2 * (uint64_t)n, "returned value %" PRIu64, v);
		T_ASSERTF(!seen[v], "value %" PRIu64 " returned twice", v);
		seen[v] = 1;
	}
	free(seen);
}

/* ---- many WRs in flight -------------------------------------------------------- */

static struct tv_opts deep_opts(void)
{
	struct tv_opts o = tv_opts_default();

	o.max_send_wr = 1024;
	o.max_recv_wr = 1024;
	o.cqe = 4096;
	o.mtu = IBV_MTU_4096;
	return o;
}

T_CASE(many_writes_1000x4k)
{
	struct tv_opts o = deep_opts();
	struct tv_pair p;
	struct tv_buf sb, rb;
	size_t n = 1000, chunk = 4096;
	struct ibv_send_wr wr[100], *bad;
	struct ibv_sge sg[100];
	double t0;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&sb, p.a.pd, n * chunk, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, n * chunk + 64, TV_ACCESS_ALL);
	tv_fill(sb.p, n * chunk, 77);
	t0 = tv_now();
	/* Posted as ten lists of 100 chained WRs. */
	for (size_t l = 0; l < n / 100; l++) {
		memset(wr, 0, sizeof(wr));
		for (size_t j = 0; j < 100; j++) {
			size_t i = l * 100 + j;

			sg[j] = tv_sge(&sb, i * chunk, chunk);
			wr[j].wr_id = i;
			wr[j].next = j < 99 ? &wr[j + 1] : NULL;
			wr[j].sg_list = &sg[j];
			wr[j].num_sge = 1;
			wr[j].opcode = IBV_WR_RDMA_WRITE;
			wr[j].send_flags = IBV_SEND_SIGNALED;
			wr[j].wr.rdma.remote_addr = (uintptr_t)rb.p + i * chunk;
			wr[j].wr.rdma.rkey = rb.mr->rkey;
		}
		bad = NULL;
		T_EQ_INT(ibv_post_send(p.a.qp, wr, &bad), 0);
	}
	for (size_t i = 0; i < n; i++)
		tv_expect_wc(p.a.scq, p.a.qp, i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	t_log("1000 x 4 KiB writes in %.3f s", tv_now() - t0);
	T_PATTERN(rb.p, n * chunk, 77, 0);
	T_CANARY(rb.p, n * chunk, 64);
	tv_expect_no_wc(p.a.scq, 0.05);
}

T_CASE(many_sends_1000x4k)
{
	struct tv_opts o = deep_opts();
	struct tv_pair p;
	struct tv_buf sb, rb;
	size_t n = 1000, chunk = 4096, slot = 4096 + 64;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&sb, p.a.pd, n * chunk, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, n * slot, IBV_ACCESS_LOCAL_WRITE);
	for (size_t i = 0; i < n; i++) {
		tv_fill(sb.p + i * chunk, chunk, 5000 + i);
		T_EQ_INT(tv_post_recv1(p.b.qp, i, &rb, i * slot, slot), 0);
	}
	for (size_t i = 0; i < n; i++)
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, i, &sb, i * chunk, chunk, 0, 0, 0,
				  IBV_SEND_SIGNALED), 0);
	for (size_t i = 0; i < n; i++) {
		struct ibv_wc wc = tv_expect_wc(p.b.rcq, p.b.qp, i, IBV_WC_SUCCESS, IBV_WC_RECV);

		T_EQ_INT(wc.byte_len, chunk);
	}
	for (size_t i = 0; i < n; i++)
		tv_expect_wc(p.a.scq, p.a.qp, i, IBV_WC_SUCCESS, IBV_WC_SEND);
	for (size_t i = 0; i < n; i++) {
		T_PATTERN(rb.p + i * slot, chunk, 5000 + i, 0);
		T_CANARY(rb.p, i * slot + chunk, slot - chunk);
	}
}

T_CASE(many_reads_500x4k)
{
	struct tv_opts o = deep_opts();
	struct tv_pair p;
	struct tv_buf lb, rb;
	size_t n = 500, chunk = 4096;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&lb, p.a.pd, n * chunk + 64, TV_ACCESS_ALL);
	tv_buf_alloc(&rb, p.b.pd, n * chunk, TV_ACCESS_ALL);
	tv_fill(rb.p, rb.len, 88);
	/* Reversed order, so a misplaced response lands in the wrong chunk. */
	for (size_t i = 0; i < n; i++)
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_READ, i, &lb, (n - 1 - i) * chunk, chunk,
				  (uintptr_t)rb.p + (n - 1 - i) * chunk, rb.mr->rkey, 0,
				  IBV_SEND_SIGNALED), 0);
	for (size_t i = 0; i < n; i++)
		tv_expect_wc(p.a.scq, p.a.qp, i, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	T_PATTERN(lb.p, n * chunk, 88, 0);
	T_CANARY(lb.p, n * chunk, 64);
}

/* WRITE, READ and SEND interleaved: completions in order, opcodes right, a
 * READ after a WRITE of the same bytes sees the written data. */
T_CASE(mixed_ops_in_flight)
{
	struct tv_opts o = deep_opts();
	struct tv_pair p;
	struct tv_buf sb, lb, rb, recvb;
	size_t rounds = 100, chunk = 3000;

	tv_pair_open(&p, &o);
	tv_buf_alloc(&sb, p.a.pd, rounds * chunk, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&lb, p.a.pd, rounds * chunk, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, rounds * chunk, TV_ACCESS_ALL);
	tv_buf_alloc(&recvb, p.b.pd, rounds * chunk, IBV_ACCESS_LOCAL_WRITE);
	tv_fill(sb.p, sb.len, 99);
	for (size_t i = 0; i < rounds; i++)
		T_EQ_INT(tv_post_recv1(p.b.qp, i, &recvb, i * chunk, chunk), 0);
	for (size_t i = 0; i < rounds; i++) {
		size_t off = i * chunk;

		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 3 * i, &sb, off, chunk,
				  (uintptr_t)rb.p + off, rb.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_READ, 3 * i + 1, &lb, off, chunk,
				  (uintptr_t)rb.p + off, rb.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 3 * i + 2, &sb, off, chunk, 0, 0, 0,
				  IBV_SEND_SIGNALED), 0);
	}
	for (size_t i = 0; i < rounds; i++) {
		tv_expect_wc(p.a.scq, p.a.qp, 3 * i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		tv_expect_wc(p.a.scq, p.a.qp, 3 * i + 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
		tv_expect_wc(p.a.scq, p.a.qp, 3 * i + 2, IBV_WC_SUCCESS, IBV_WC_SEND);
	}
	for (size_t i = 0; i < rounds; i++)
		tv_expect_wc(p.b.rcq, p.b.qp, i, IBV_WC_SUCCESS, IBV_WC_RECV);
	T_PATTERN(rb.p, rb.len, 99, 0);
	T_PATTERN(lb.p, lb.len, 99, 0);
	T_PATTERN(recvb.p, recvb.len, 99, 0);
}

/* RC ordering at the responder: once the receive of a SEND that follows a
 * WRITE has completed, the WRITE's data is in memory. */
T_CASE(write_then_send_ordering)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf sb, rb, recvb;

	o.sq_sig_all = 0;
	tv_pair_open(&p, &o);
	tv_buf_alloc(&sb, p.a.pd, MIB, IBV_ACCESS_LOCAL_WRITE);
	tv_buf_alloc(&rb, p.b.pd, MIB, TV_ACCESS_ALL);
	tv_buf_alloc(&recvb, p.b.pd, 64, IBV_ACCESS_LOCAL_WRITE);
	for (int round = 0; round < 5; round++) {
		tv_fill(sb.p, sb.len, 300 + round);
		T_EQ_INT(tv_post_recv1(p.b.qp, round, &recvb, 0, 64), 0);
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 10, &sb, 0, MIB, (uintptr_t)rb.p,
				  rb.mr->rkey, 0, 0), 0);
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 11, &sb, 0, 8, 0, 0, 0,
				  IBV_SEND_SIGNALED), 0);
		tv_expect_wc(p.b.rcq, p.b.qp, (uint64_t)round, IBV_WC_SUCCESS, IBV_WC_RECV);
		T_PATTERN(rb.p, MIB, 300 + round, 0);
		tv_expect_wc(p.a.scq, p.a.qp, 11, IBV_WC_SUCCESS, IBV_WC_SEND);
	}
}

/* ---- several contexts at once --------------------------------------------------- */

/* Four pairs, each on two contexts of its own (so eight engine contexts),
 * each with 32 x 1 MiB of one operation in flight at once. On a small
 * machine this overruns socket buffers on loopback: the transport must
 * recover from the lost packets. */
static void concurrent_contexts(enum ibv_wr_opcode op)
{
	enum { NP = 4, K = 32 };
	struct tv_opts o = tv_opts_default();
	struct tv_pair p[NP];
	struct tv_buf l[NP], r[NP];
	size_t c = MIB;
	double t0;

	o.mtu = IBV_MTU_4096;
	o.separate_ctx = 1;
	o.max_send_wr = 64;
	o.max_recv_wr = 64;
	for (int i = 0; i < NP; i++) {
		tv_pair_open(&p[i], &o);
		tv_buf_alloc(&l[i], p[i].a.pd, K * c, TV_ACCESS_ALL);
		tv_buf_alloc(&r[i], p[i].b.pd, K * c, TV_ACCESS_ALL);
		tv_fill(op == IBV_WR_RDMA_READ ? r[i].p : l[i].p, K * c, 600 + (uint64_t)i);
		if (op == IBV_WR_SEND)
			for (size_t k = 0; k < K; k++)
				T_EQ_INT(tv_post_recv1(p[i].b.qp, k, &r[i], k * c, c), 0);
	}
	t0 = tv_now();
	for (size_t k = 0; k < K; k++)
		for (int i = 0; i < NP; i++)
			T_EQ_INT(tv_post1(p[i].a.qp, op, k, &l[i], k * c, c,
					  (uintptr_t)r[i].p + k * c, r[i].mr->rkey, 0,
					  IBV_SEND_SIGNALED), 0);
	for (int i = 0; i < NP; i++)
		for (size_t k = 0; k < K; k++)
			tv_expect_wc_to(p[i].a.scq, p[i].a.qp, k, IBV_WC_SUCCESS,
					op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ
					: op == IBV_WR_SEND    ? IBV_WC_SEND
							       : IBV_WC_RDMA_WRITE,
					60);
	t_log("%d pairs x %d x 1 MiB in %.2f s", NP, K, tv_now() - t0);
	for (int i = 0; i < NP; i++) {
		if (op == IBV_WR_SEND)
			for (size_t k = 0; k < K; k++) {
				struct ibv_wc wc = tv_expect_wc(p[i].b.rcq, p[i].b.qp, k,
								IBV_WC_SUCCESS, IBV_WC_RECV);

				T_EQ_INT(wc.byte_len, c);
			}
		T_PATTERN(op == IBV_WR_RDMA_READ ? l[i].p : r[i].p, K * c, 600 + (uint64_t)i, 0);
	}
}

T_CASE(concurrent_contexts_write)
{
	concurrent_contexts(IBV_WR_RDMA_WRITE);
}

T_CASE(concurrent_contexts_read)
{
	concurrent_contexts(IBV_WR_RDMA_READ);
}

T_CASE(concurrent_contexts_send)
{
	concurrent_contexts(IBV_WR_SEND);
}

/* ---- two processes ----------------------------------------------------------- */

/* The child is a responder agent driven by commands over the socket. */
enum { C_QUIT, C_PREPARE, C_CHECK, C_POST_RECVS, C_EXPECT_RECVS, C_VERIFY,
       C_GET64, C_SET64 };

struct cmd {
	int32_t kind, op;
	uint64_t n, seed, off, val, count;
};

struct agent_arg {
	struct tv_opts o;
	size_t maxn;
};

static void agent(int fd, void *argp)
{
	struct agent_arg *arg = argp;
	struct tv_side s;
	struct end r;
	struct tv_info mine, peer;
	struct cmd c;

	memset(&mine, 0, sizeof(mine));
	tv_side_open(&s, &arg->o, NULL);
	end_alloc(&r, &s, arg->maxn);
	mine.addr[0] = (uintptr_t)r.buf.p;
	mine.len[0] = r.buf.len;
	mine.rkey[0] = r.buf.mr->rkey;
	tv_proc_connect(fd, &s, &arg->o, &mine, &peer);
	for (;;) {
		uint64_t reply = 0;

		tv_recv(fd, &c, sizeof(c));
		if (c.kind == C_QUIT)
			break;
		switch (c.kind) {
		case C_PREPARE:
			r.wr_id = c.val;
			resp_prepare(&r, c.op, c.n, c.seed);
			break;
		case C_CHECK:
			r.wr_id = c.val;
			resp_check(&r, c.op, c.n, c.seed);
			break;
		case C_POST_RECVS: /* count receives of n bytes at off + i*n */
			for (uint64_t i = 0; i < c.count; i++)
				T_EQ_INT(tv_post_recv1(s.qp, i, &r.buf, c.off + i * c.n, c.n), 0);
			break;
		case C_EXPECT_RECVS:
			for (uint64_t i = 0; i < c.count; i++) {
				struct ibv_wc wc = tv_expect_wc(s.rcq, s.qp, i, IBV_WC_SUCCESS,
								IBV_WC_RECV);

				T_EQ_INT(wc.byte_len, c.n);
				T_PATTERN(r.buf.p + c.off + i * c.n, c.n, c.seed + i, 0);
			}
			break;
		case C_VERIFY:
			T_PATTERN(r.buf.p + c.off, c.n, c.seed, 0);
			break;
		case C_GET64:
			reply = rd64(r.buf.p + c.off);
			break;
		case C_SET64:
			tv_canary(r.buf.p, r.buf.len);
			wr64(r.buf.p + c.off, c.val);
			break;
		default:
			T_ASSERTF(0, "bad command %d", c.kind);
		}
		tv_send(fd, &reply, sizeof(reply));
	}
	end_free(&r);
	tv_side_close(&s);
}

struct remote {
	struct tv_proc pr;
	struct tv_side s;
	struct end q;
	struct tv_info mine, peer;
	struct agent_arg arg;
};

static void remote_open(struct remote *R, const struct tv_opts *o, size_t maxn)
{
	memset(R, 0, sizeof(*R));
	R->arg.o = *o;
	R->arg.maxn = maxn;
	R->pr = tv_fork(agent, &R->arg);
	tv_side_open(&R->s, o, NULL);
	end_alloc(&R->q, &R->s, maxn);
	tv_proc_connect(R->pr.fd, &R->s, o, &R->mine, &R->peer);
	T_GE_INT(R->peer.len[0], maxn + DOFF + TAIL);
}

static uint64_t remote_cmd(struct remote *R, int kind, int op, uint64_t n, uint64_t seed,
			   uint64_t off, uint64_t val, uint64_t count)
{
	struct cmd c;
	uint64_t reply;

	memset(&c, 0, sizeof(c));
	c.kind = kind;
	c.op = op;
	c.n = n;
	c.seed = seed;
	c.off = off;
	c.val = val;
	c.count = count;
	tv_send(R->pr.fd, &c, sizeof(c));
	if (kind == C_QUIT)
		return 0;
	tv_recv(R->pr.fd, &reply, sizeof(reply));
	return reply;
}

static void remote_close(struct remote *R)
{
	remote_cmd(R, C_QUIT, 0, 0, 0, 0, 0, 0);
	tv_proc_wait(&R->pr, 60);
	end_free(&R->q);
	tv_side_close(&R->s);
}

/* One operation of n bytes, requester here, responder in the child. */
static void remote_xfer(struct remote *R, int op, size_t n, int mtu, uint64_t id)
{
	uint64_t seed = seed_of(op, n, mtu) ^ 0x7700000000ULL;

	remote_cmd(R, C_PREPARE, op, n, seed, 0, 2000 + id, 0);
	R->q.wr_id = 1000 + id;
	req_run(&R->q, R->peer.addr[0], R->peer.rkey[0], op, n, seed);
	remote_cmd(R, C_CHECK, op, n, seed, 0, 2000 + id, 0);
}

static void run_remote(int op, enum ibv_mtu mtu, const size_t *sz, size_t nsz)
{
	struct tv_opts o = tv_opts_default();
	struct remote R;
	size_t maxn = 0;

	o.mtu = mtu;
	for (size_t i = 0; i < nsz; i++)
		maxn = sz[i] > maxn ? sz[i] : maxn;
	remote_open(&R, &o, maxn);
	for (size_t i = 0; i < nsz; i++)
		remote_xfer(&R, op, sz[i], mtu_bytes(mtu), i);
	remote_close(&R);
}

T_CASE(proc_send)
{
	run_remote(OP_SEND, IBV_MTU_4096, sizes, NSIZES);
}

T_CASE(proc_send_imm)
{
	run_remote(OP_SEND_IMM, IBV_MTU_4096, sizes, NSIZES);
}

T_CASE(proc_write)
{
	run_remote(OP_WRITE, IBV_MTU_4096, sizes, NSIZES);
}

T_CASE(proc_write_imm)
{
	run_remote(OP_WRITE_IMM, IBV_MTU_4096, sizes, NSIZES);
}

T_CASE(proc_read)
{
	run_remote(OP_READ, IBV_MTU_4096, sizes, NSIZES);
}

T_CASE(proc_all_ops_mtu1024)
{
	for (int op = 0; op < OP_N; op++)
		run_remote(op, IBV_MTU_1024, sizes, NSIZES);
}

T_CASE(proc_64m_write)
{
	size_t big = BIG;

	run_remote(OP_WRITE, IBV_MTU_4096, &big, 1);
}

T_CASE(proc_64m_read)
{
	size_t big = BIG;

	run_remote(OP_READ, IBV_MTU_4096, &big, 1);
}

T_CASE(proc_64m_send)
{
	size_t big = BIG;

	run_remote(OP_SEND_IMM, IBV_MTU_1024, &big, 1);
}

T_CASE(proc_atomics)
{
	struct tv_opts o = tv_opts_default();
	struct remote R;
	uint64_t raddr;
	uint32_t rkey;
	struct ibv_qp *qp;

	remote_open(&R, &o, 4096);
	raddr = R.peer.addr[0] + 64;
	rkey = R.peer.rkey[0];
	qp = R.s.qp;
	remote_cmd(&R, C_SET64, 0, 0, 0, 64, 0x1000000000000001ULL, 0);
	T_EQ_INT(tv_post_atomic(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, &R.q.buf, 0, raddr, rkey,
				0x10, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(R.s.scq, qp, 1, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	T_EQ_U64(rd64(R.q.buf.p), 0x1000000000000001ULL);
	T_EQ_U64(remote_cmd(&R, C_GET64, 0, 0, 0, 64, 0, 0), 0x1000000000000011ULL);
	/* Compare fails: value unchanged, original returned. */
	T_EQ_INT(tv_post_atomic(qp, IBV_WR_ATOMIC_CMP_AND_SWP, 2, &R.q.buf, 8, raddr, rkey,
				0x1000000000000001ULL, 0x42, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(R.s.scq, qp, 2, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
	T_EQ_U64(rd64(R.q.buf.p + 8), 0x1000000000000011ULL);
	T_EQ_U64(remote_cmd(&R, C_GET64, 0, 0, 0, 64, 0, 0), 0x1000000000000011ULL);
	/* Compare succeeds. */
	T_EQ_INT(tv_post_atomic(qp, IBV_WR_ATOMIC_CMP_AND_SWP, 3, &R.q.buf, 16, raddr, rkey,
				0x1000000000000011ULL, 0x42, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(R.s.scq, qp, 3, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
	T_EQ_U64(rd64(R.q.buf.p + 16), 0x1000000000000011ULL);
	T_EQ_U64(remote_cmd(&R, C_GET64, 0, 0, 0, 64, 0, 0), 0x42);
	/* 100 adds in flight. */
	for (int i = 0; i < 100; i++)
		T_EQ_INT(tv_post_atomic(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 100 + (uint64_t)i,
					&R.q.buf, 64 + 8 * (size_t)i, raddr, rkey, 3, 0,
					IBV_SEND_SIGNALED), 0);
	for (int i = 0; i < 100; i++) {
		tv_expect_wc(R.s.scq, qp, 100 + (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
		T_EQ_U64(rd64(R.q.buf.p + 64 + 8 * i), 0x42 + 3 * (uint64_t)i);
	}
	T_EQ_U64(remote_cmd(&R, C_GET64, 0, 0, 0, 64, 0, 0), 0x42 + 300);
	remote_close(&R);
}

T_CASE(proc_many_writes_1000x4k)
{
	struct tv_opts o = deep_opts();
	struct remote R;
	size_t n = 1000, chunk = 4096;

	remote_open(&R, &o, n * chunk);
	tv_fill(R.q.buf.p, n * chunk, 1234);
	for (size_t i = 0; i < n; i++)
		T_EQ_INT(tv_post1(R.s.qp, IBV_WR_RDMA_WRITE, i, &R.q.buf, i * chunk, chunk,
				  R.peer.addr[0] + i * chunk, R.peer.rkey[0], 0,
				  IBV_SEND_SIGNALED), 0);
	for (size_t i = 0; i < n; i++)
		tv_expect_wc(R.s.scq, R.s.qp, i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	remote_cmd(&R, C_VERIFY, 0, n * chunk, 1234, 0, 0, 0);
	remote_close(&R);
}

T_CASE(proc_many_sends_1000x4k)
{
	struct tv_opts o = deep_opts();
	struct remote R;
	size_t n = 1000, chunk = 4096;

	remote_open(&R, &o, n * chunk);
	remote_cmd(&R, C_POST_RECVS, 0, chunk, 0, 0, 0, n);
	for (size_t i = 0; i < n; i++) {
		tv_fill(R.q.buf.p + i * chunk, chunk, 4321 + i);
		T_EQ_INT(tv_post1(R.s.qp, IBV_WR_SEND, i, &R.q.buf, i * chunk, chunk, 0, 0, 0,
				  IBV_SEND_SIGNALED), 0);
	}
	for (size_t i = 0; i < n; i++)
		tv_expect_wc(R.s.scq, R.s.qp, i, IBV_WC_SUCCESS, IBV_WC_SEND);
	remote_cmd(&R, C_EXPECT_RECVS, 0, chunk, 4321, 0, 0, n);
	remote_close(&R);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
