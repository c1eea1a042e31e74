/* Shared helpers for the verbs tests (public libibverbs API only).
 *
 * Everything here is static inline so each tests/verbs/X.c stays its own
 * program. Helpers that can fail report the caller's file and line.
 *
 *   tv_open_device()            first device (UROCE_NETDEV defaults to lo)
 *   tv_pair_open(&p, &opts)     two connected RC QPs in this process
 *   tv_fork(fn, arg)            a child process talking over a socketpair
 *   tv_expect_wc(cq, qp, id, status, opcode)   one completion, with a deadline
 *   tv_fill / T_PATTERN         position-dependent byte patterns
 */
#ifndef UROCE_TESTS_VERBS_COMMON_H
#define UROCE_TESTS_VERBS_COMMON_H

#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "counters.h"
#include "t.h"

#define TV_WAIT_S 30.0 /* default deadline for one completion, seconds */
#define TV_ACCESS_ALL                                                       \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                 \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define TV_CANARY 0xc0ffee5eedULL /* pattern seed for untouched memory */

/* ---- time ---------------------------------------------------------------- */

static inline double tv_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void tv_msleep(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- patterns ------------------------------------------------------------ */

/* splitmix64 finalizer */
static inline uint64_t tv_mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static inline uint64_t tv_pat_word(uint64_t seed, size_t word)
{
	return tv_mix64(tv_mix64(seed) ^ (uint64_t)word);
}

/* The byte at pattern position pos of the pattern named by seed. */
static inline uint8_t tv_pat_byte(uint64_t seed, size_t pos)
{
	return (uint8_t)(tv_pat_word(seed, pos >> 3) >> ((pos & 7) * 8));
}

/* Writes pattern positions [pos, pos+n) of seed to buf[0..n). */
static inline void tv_fill_at(void *buf, size_t n, uint64_t seed, size_t pos)
{
	uint8_t *p = buf;
	size_t cw = (size_t)-1;
	uint64_t w = 0;

	for (size_t i = 0; i < n; i++) {
		size_t q = pos + i;

		if ((q >> 3) != cw) {
			cw = q >> 3;
			w = tv_pat_word(seed, cw);
		}
		p[i] = (uint8_t)(w >> ((q & 7) * 8));
	}
}

static inline void tv_fill(void *buf, size_t n, uint64_t seed)
{
	tv_fill_at(buf, n, seed, 0);
}

/* Offset of the first byte of buf[0..n) that is not pattern positions
 * [pos, pos+n) of seed, or (size_t)-1 when all match. */
static inline size_t tv_check_at(const void *buf, size_t n, uint64_t seed, size_t pos)
{
	const uint8_t *p = buf;
	size_t cw = (size_t)-1;
	uint64_t w = 0;

	for (size_t i = 0; i < n; i++) {
		size_t q = pos + i;

		if ((q >> 3) != cw) {
			cw = q >> 3;
			w = tv_pat_word(seed, cw);
		}
		if (p[i] != (uint8_t)(w >> ((q & 7) * 8)))
			return i;
	}
	return (size_t)-1;
}

static inline void tv_pattern_(const char *file, int line, const char *what,
			       const void *buf, size_t n, uint64_t seed, size_t pos)
{
	size_t bad = tv_check_at(buf, n, seed, pos);

	if (bad != (size_t)-1) {
		const uint8_t *p = buf;
		size_t run = 0;

		while (bad + run < n &&
		       p[bad + run] != tv_pat_byte(seed, pos + bad + run))
			run++;
		t_fail(file, line,
		       "%s: byte %zu of %zu is 0x%02x, expected 0x%02x "
		       "(pattern seed 0x%" PRIx64 " pos %zu; %zu bad bytes from there)",
		       what, bad, n, p[bad], tv_pat_byte(seed, pos + bad), seed,
		       pos + bad, run);
	}
}

/* Asserts buf[0..n) holds pattern positions [pos, pos+n) of seed. */
#define T_PATTERN(buf, n, seed, pos)                                        \
	tv_pattern_(__FILE__, __LINE__, #buf, (buf), (n), (seed), (pos))
/* Asserts buf[off..off+n) is still the canary written by tv_canary(buf, len). */
#define T_CANARY(buf, off, n)                                               \
	tv_pattern_(__FILE__, __LINE__, "canary " #buf,                     \
		    (const uint8_t *)(buf) + (off), (n), TV_CANARY, (off))

static inline void tv_canary(void *buf, size_t len)
{
	tv_fill_at(buf, len, TV_CANARY, 0);
}

/* ---- device -------------------------------------------------------------- */

static inline struct ibv_context *tv_open_device_(const char *file, int line)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	int n = 0;

	setenv("UROCE_NETDEV", "lo", 0);
	list = ibv_get_device_list(&n);
	if (!list)
		t_fail(file, line, "ibv_get_device_list: %s", strerror(errno));
	if (n < 1)
		t_fail(file, line, "no RDMA device (UROCE_NETDEV=%s)",
		       getenv("UROCE_NETDEV"));
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		t_fail(file, line, "ibv_open_device(%s): %s",
		       ibv_get_device_name(list[0]), strerror(errno));
	ibv_free_device_list(list);
	return ctx;
}
#define tv_open_device() tv_open_device_(__FILE__, __LINE__)

static inline struct ibv_device_attr tv_query_device(struct ibv_context *ctx)
{
	struct ibv_device_attr a;

	memset(&a, 0, sizeof(a));
	T_EQ_INT(ibv_query_device(ctx, &a), 0);
	return a;
}

static inline union ibv_gid tv_gid0(struct ibv_context *ctx)
{
	union ibv_gid g;

	memset(&g, 0, sizeof(g));
	T_EQ_INT(ibv_query_gid(ctx, 1, 0, &g), 0);
	return g;
}

/* ---- buffers ------------------------------------------------------------- */

struct tv_buf {
	uint8_t *p;
	size_t len;
	struct ibv_mr *mr;
};

/* Page-aligned buffer of len bytes (at least 64), registered with access
 * on pd unless pd is NULL. Filled with the canary pattern. */
static inline void tv_buf_alloc_(const char *file, int line, struct tv_buf *b,
				 struct ibv_pd *pd, size_t len, int access)
{
	void *p = NULL;

	if (len < 64)
		len = 64;
	if (posix_memalign(&p, 4096, len))
		t_fail(file, line, "posix_memalign(%zu) failed", len);
	b->p = p;
	b->len = len;
	b->mr = NULL;
	tv_canary(b->p, len);
	if (pd) {
		b->mr = ibv_reg_mr(pd, p, len, access);
		if (!b->mr)
			t_fail(file, line, "ibv_reg_mr(%zu bytes, access 0x%x): %s",
			       len, access, strerror(errno));
	}
}
#define tv_buf_alloc(b, pd, len, access)                                    \
	tv_buf_alloc_(__FILE__, __LINE__, (b), (pd), (len), (access))

static inline void tv_buf_free(struct tv_buf *b)
{
	if (b->mr)
		T_EQ_INT(ibv_dereg_mr(b->mr), 0);
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- QPs ----------------------------------------------------------------- */

struct tv_opts {
	enum ibv_mtu mtu;
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline;
	int sq_sig_all;
	int cqe;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	uint8_t max_rd_atomic;      /* RTS max_rd_atomic, clamped to the device */
	uint8_t max_dest_rd_atomic; /* RTR max_dest_rd_atomic, clamped */
	unsigned int access;        /* QP access flags at INIT */
	int separate_ctx;           /* in-process pair: one context per side */
	int channel;                /* CQs bound to a completion channel */
	enum ibv_qp_type qp_type;   /* 0: RC; IBV_QPT_UC, IBV_QPT_UD */
	uint32_t qkey;              /* UD: the QP's Q_Key */
};

static inline struct tv_opts tv_opts_default(void)
{
	struct tv_opts o;

	memset(&o, 0, sizeof(o));
	o.mtu = IBV_MTU_1024;
	o.max_send_wr = 256;
	o.max_recv_wr = 256;
	o.max_send_sge = 4;
	o.max_recv_sge = 4;
	o.max_inline = 0;
	o.sq_sig_all = 1;
	o.cqe = 1024;
	o.timeout = 14; /* 67 ms */
	o.retry_cnt = 7;
	o.rnr_retry = 7;
	o.min_rnr_timer = 12; /* 0.64 ms */
	o.max_rd_atomic = 16;
	o.max_dest_rd_atomic = 16;
	o.access = TV_ACCESS_ALL;
	return o;
}

struct tv_side {
	struct ibv_context *ctx;
	int own_ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_qp_cap cap; /* as returned by ibv_create_qp */
	uint32_t psn;
};

/* What one side tells the other: QP address plus up to 4 memory regions. */
/* Tests send only over loopback unless told otherwise (UROCE_NETDEV). */
__attribute__((constructor)) static void tv_default_netdev(void)
{
	setenv("UROCE_NETDEV", "lo", 0);
}

struct tv_info {
	uint32_t qpn, psn;
	union ibv_gid gid;
	uint64_t addr[4];
	uint64_t len[4];
	uint32_t rkey[4];
	uint32_t pad;
};

static inline struct ibv_qp *tv_create_rc(struct ibv_pd *pd, struct ibv_cq *scq,
					  struct ibv_cq *rcq,
					  const struct tv_opts *o,
					  struct ibv_qp_cap *cap_out)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.qp_type = o->qp_type ? o->qp_type : IBV_QPT_RC;
	ia.sq_sig_all = o->sq_sig_all;
	ia.cap.max_send_wr = o->max_send_wr;
	ia.cap.max_recv_wr = o->max_recv_wr;
	ia.cap.max_send_sge = o->max_send_sge;
	ia.cap.max_recv_sge = o->max_recv_sge;
	ia.cap.max_inline_data = o->max_inline;
	qp = ibv_create_qp(pd, &ia);
	if (qp && cap_out)
		*cap_out = ia.cap;
	return qp;
}

static inline void tv_side_open_(const char *file, int line, struct tv_side *s,
				 const struct tv_opts *o, struct ibv_context *ctx)
{
	memset(s, 0, sizeof(*s));
	s->ctx = ctx ? ctx : tv_open_device_(file, line);
	s->own_ctx = !ctx;
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd)
		t_fail(file, line, "ibv_alloc_pd: %s", strerror(errno));
	if (o->channel) {
		s->ch = ibv_create_comp_channel(s->ctx);
		if (!s->ch)
			t_fail(file, line, "ibv_create_comp_channel: %s", strerror(errno));
	}
	s->scq = ibv_create_cq(s->ctx, o->cqe, s, s->ch, 0);
	s->rcq = ibv_create_cq(s->ctx, o->cqe, s, s->ch, 0);
	if (!s->scq || !s->rcq)
		t_fail(file, line, "ibv_create_cq(%d): %s", o->cqe, strerror(errno));
	s->qp = tv_create_rc(s->pd, s->scq, s->rcq, o, &s->cap);
	if (!s->qp)
		t_fail(file, line, "ibv_create_qp(type %d, send_wr %u recv_wr %u sge %u/%u inline %u): %s",
		       (int)o->qp_type, o->max_send_wr, o->max_recv_wr, o->max_send_sge,
		       o->max_recv_sge, o->max_inline, strerror(errno));
	s->psn = (uint32_t)(tv_mix64(s->qp->qp_num ^ (uint64_t)getpid() << 24) & 0xffffff);
}
#define tv_side_open(s, o, ctx) tv_side_open_(__FILE__, __LINE__, (s), (o), (ctx))

static inline void tv_side_close(struct tv_side *s)
{
	if (s->qp)
		T_EQ_INT(ibv_destroy_qp(s->qp), 0);
	if (s->scq)
		T_EQ_INT(ibv_destroy_cq(s->scq), 0);
	if (s->rcq)
		T_EQ_INT(ibv_destroy_cq(s->rcq), 0);
	if (s->ch)
		T_EQ_INT(ibv_destroy_comp_channel(s->ch), 0);
	if (s->pd)
		T_EQ_INT(ibv_dealloc_pd(s->pd), 0);
	if (s->own_ctx)
		T_EQ_INT(ibv_close_device(s->ctx), 0);
	memset(s, 0, sizeof(*s));
}

static inline void tv_info_of(const struct tv_side *s, struct tv_info *in)
{
	in->qpn = s->qp->qp_num;
	in->psn = s->psn;
	in->gid = tv_gid0(s->ctx);
}

static inline int tv_modify_init(struct ibv_qp *qp, unsigned int access)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = access;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static inline uint8_t tv_clamp8(uint8_t want, int max)
{
	return (int)want > max ? (uint8_t)max : want;
}

static inline void tv_rtr_attr(struct ibv_qp *qp, const struct tv_opts *o,
			       const struct tv_info *r, struct ibv_qp_attr *a,
			       int *mask)
{
	struct ibv_device_attr d = tv_query_device(qp->context);

	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = o->mtu;
	a->dest_qp_num = r->qpn;
	a->rq_psn = r->psn;
	a->max_dest_rd_atomic = tv_clamp8(o->max_dest_rd_atomic, d.max_qp_rd_atom);
	a->min_rnr_timer = o->min_rnr_timer;
	a->ah_attr.is_global = 1;
	a->ah_attr.grh.dgid = r->gid;
	a->ah_attr.grh.sgid_index = 0;
	a->ah_attr.grh.hop_limit = 64;
	a->ah_attr.port_num = 1;
	*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (qp->qp_type == IBV_QPT_UC) /* IBA 10.3.1 table 91 */
		*mask &= ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (qp->qp_type == IBV_QPT_UD)
		*mask = IBV_QP_STATE;
}

static inline void tv_rts_attr(struct ibv_qp *qp, const struct tv_opts *o,
			       uint32_t psn, struct ibv_qp_attr *a, int *mask)
{
	struct ibv_device_attr d = tv_query_device(qp->context);

	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTS;
	a->sq_psn = psn;
	a->timeout = o->timeout;
	a->retry_cnt = o->retry_cnt;
	a->rnr_retry = o->rnr_retry;
	a->max_rd_atomic = tv_clamp8(o->max_rd_atomic, d.max_qp_init_rd_atom);
	*mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	if (qp->qp_type != IBV_QPT_RC) /* UC and UD: no ACKs, no timers */
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
}

static inline int tv_modify_rtr(struct ibv_qp *qp, const struct tv_opts *o,
				const struct tv_info *r)
{
	struct ibv_qp_attr a;
	int mask;

	tv_rtr_attr(qp, o, r, &a, &mask);
	return ibv_modify_qp(qp, &a, mask);
}

static inline int tv_modify_rts(struct ibv_qp *qp, const struct tv_opts *o, uint32_t psn)
{
	struct ibv_qp_attr a;
	int mask;

	tv_rts_attr(qp, o, psn, &a, &mask);
	return ibv_modify_qp(qp, &a, mask);
}

static inline int tv_modify_state(struct ibv_qp *qp, enum ibv_qp_state st)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = st;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static inline enum ibv_qp_state tv_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	memset(&a, 0, sizeof(a));
	T_EQ_INT(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
	return a.qp_state;
}

/* RESET -> INIT -> RTR -> RTS towards the peer described by r. */
static inline void tv_connect_(const char *file, int line, struct tv_side *s,
			       const struct tv_opts *o, const struct tv_info *r)
{
	int rc;

	if (o->qp_type == IBV_QPT_UD) {
		struct ibv_qp_attr a;

		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.qkey = o->qkey;
		rc = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						      IBV_QP_QKEY);
	} else {
		rc = tv_modify_init(s->qp, o->access);
	}
	if (rc)
		t_fail(file, line, "modify_qp(INIT): %d (%s)", rc, strerror(rc));
	if ((rc = tv_modify_rtr(s->qp, o, r)))
		t_fail(file, line, "modify_qp(RTR): %d (%s)", rc, strerror(rc));
	if ((rc = tv_modify_rts(s->qp, o, s->psn)))
		t_fail(file, line, "modify_qp(RTS): %d (%s)", rc, strerror(rc));
}
#define tv_connect(s, o, r) tv_connect_(__FILE__, __LINE__, (s), (o), (r))

/* Two connected RC QPs in this process: a and b. */
struct tv_pair {
	struct tv_opts o;
	struct tv_side a, b;
};

static inline void tv_pair_open_(const char *file, int line, struct tv_pair *p,
				 const struct tv_opts *o)
{
	struct tv_info ia, ib;
	struct ibv_context *ctx;

	memset(p, 0, sizeof(*p));
	memset(&ia, 0, sizeof(ia));
	memset(&ib, 0, sizeof(ib));
	p->o = *o;
	ctx = tv_open_device_(file, line);
	tv_side_open_(file, line, &p->a, o, ctx);
	p->a.own_ctx = 1;
	tv_side_open_(file, line, &p->b, o, o->separate_ctx ? NULL : ctx);
	tv_info_of(&p->a, &ia);
	tv_info_of(&p->b, &ib);
	tv_connect_(file, line, &p->a, o, &ib);
	tv_connect_(file, line, &p->b, o, &ia);
}
#define tv_pair_open(p, o) tv_pair_open_(__FILE__, __LINE__, (p), (o))

static inline void tv_pair_close(struct tv_pair *p)
{
	tv_side_close(&p->b);
	tv_side_close(&p->a);
}

/* ---- posting ------------------------------------------------------------- */

static inline struct ibv_sge tv_sge(const struct tv_buf *b, size_t off, size_t len)
{
	struct ibv_sge s;

	s.addr = (uintptr_t)(b->p + off);
	s.length = (uint32_t)len;
	s.lkey = b->mr ? b->mr->lkey : 0;
	return s;
}

/* Posts one send-queue WR; a zero-length sge list is posted as num_sge 0. */
static inline int tv_post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id,
			  struct ibv_sge *sge, int nsge, uint64_t raddr,
			  uint32_t rkey, uint32_t imm_host, unsigned int flags)
{
	struct ibv_send_wr wr, *bad = NULL;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = nsge ? sge : NULL;
	wr.num_sge = nsge;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.imm_data = htonl(imm_host);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	rc = ibv_post_send(qp, &wr, &bad);
	if (rc && bad != &wr)
		t_fail(__FILE__, __LINE__, "ibv_post_send failed (%d) but bad_wr %p is not the WR %p",
		       rc, (void *)bad, (void *)&wr);
	return rc;
}

/* Posts one buffer-range WR: local b[off..off+len) (len 0: no SGE). */
static inline int tv_post1(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id,
			   const struct tv_buf *b, size_t off, size_t len,
			   uint64_t raddr, uint32_t rkey, uint32_t imm_host,
			   unsigned int flags)
{
	struct ibv_sge s = tv_sge(b, off, len);

	return tv_post(qp, op, wr_id, &s, len ? 1 : 0, raddr, rkey, imm_host, flags);
}

static inline int tv_post_atomic(struct ibv_qp *qp, enum ibv_wr_opcode op,
				 uint64_t wr_id, const struct tv_buf *b, size_t off,
				 uint64_t raddr, uint32_t rkey, uint64_t compare_add,
				 uint64_t swap, unsigned int flags)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge s = tv_sge(b, off, 8);

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = compare_add;
	wr.wr.atomic.swap = swap;
	return ibv_post_send(qp, &wr, &bad);
}

static inline int tv_post_recv(struct ibv_qp *qp, uint64_t wr_id,
			       struct ibv_sge *sge, int nsge)
{
	struct ibv_recv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = nsge ? sge : NULL;
	wr.num_sge = nsge;
	return ibv_post_recv(qp, &wr, &bad);
}

static inline int tv_post_recv1(struct ibv_qp *qp, uint64_t wr_id,
				const struct tv_buf *b, size_t off, size_t len)
{
	struct ibv_sge s = tv_sge(b, off, len);

	return tv_post_recv(qp, wr_id, &s, len ? 1 : 0);
}

/* ---- counters ------------------------------------------------------------ */

/* Sums a counter over this process's live stat files (/dev/shm): what
 * `uroce stat` shows, e.g. TV_COUNTER(drop_qkey). */
static inline uint64_t tv_counter(size_t off)
{
	char pat[64];
	glob_t g;
	uint64_t sum = 0;

	snprintf(pat, sizeof(pat), "/dev/shm/uroce-%d-*.stat", (int)getpid());
	if (glob(pat, 0, NULL, &g))
		return 0;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		FILE *f = fopen(g.gl_pathv[i], "r");
		struct uroce_stat_file sf;

		if (f && fread(&sf, sizeof(sf), 1, f) == 1 && sf.magic == UROCE_STAT_MAGIC) {
			struct uroce_counters all;

			uroce_stat_total(&sf, &all); /* every engine thread's */
			sum += *(const uint64_t *)((const char *)&all + off);
		}
		if (f)
			fclose(f);
	}
	globfree(&g);
	return sum;
}
#define TV_COUNTER(name) tv_counter(offsetof(struct uroce_counters, name))

/* ---- completions --------------------------------------------------------- */

static inline const char *tv_wc_str(const struct ibv_wc *wc)
{
	static char s[256];

	snprintf(s, sizeof(s),
		 "wr_id=%" PRIu64 " status=%d (%s) opcode=%d byte_len=%u "
		 "qp_num=%u wc_flags=0x%x imm=0x%08x vendor_err=0x%x",
		 wc->wr_id, (int)wc->status, ibv_wc_status_str(wc->status),
		 (int)wc->opcode, wc->byte_len, wc->qp_num, wc->wc_flags,
		 ntohl(wc->imm_data), wc->vendor_err);
	return s;
}

/* Polls one completion: 1 when one arrived, 0 after timeout_s. */
static inline int tv_poll1(struct ibv_cq *cq, struct ibv_wc *wc, double timeout_s)
{
	double t0 = tv_now(), t;
	unsigned long spins = 0;

	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			t_fail(__FILE__, __LINE__, "ibv_poll_cq returned %d", n);
		if (n == 1)
			return 1;
		if (n != 0)
			t_fail(__FILE__, __LINE__, "ibv_poll_cq(1) returned %d", n);
		t = tv_now() - t0;
		if (t > timeout_s)
			return 0;
		if (++spins > 2000)
			usleep(t > 0.01 ? 200 : 20);
		else
			sched_yield();
	}
}

static inline struct ibv_wc tv_wait_wc_(const char *file, int line,
					struct ibv_cq *cq, double timeout_s)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	if (!tv_poll1(cq, &wc, timeout_s))
		t_fail(file, line, "no completion within %.1f s", timeout_s);
	return wc;
}
#define tv_wait_wc(cq, timeout_s) tv_wait_wc_(__FILE__, __LINE__, (cq), (timeout_s))

/* Waits for one completion and checks it. qp NULL: qp_num unchecked;
 * opcode -1: unchecked (it is only checked on success anyway). */
static inline struct ibv_wc tv_expect_wc_(const char *file, int line,
					  struct ibv_cq *cq, struct ibv_qp *qp,
					  uint64_t wr_id, enum ibv_wc_status st,
					  int opcode, double timeout_s)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	if (!tv_poll1(cq, &wc, timeout_s))
		t_fail(file, line, "no completion within %.1f s (expected wr_id %" PRIu64
		       " status %s)", timeout_s, wr_id, ibv_wc_status_str(st));
	if (wc.status != st || wc.wr_id != wr_id ||
	    (qp && wc.qp_num != qp->qp_num) ||
	    (st == IBV_WC_SUCCESS && opcode >= 0 && (int)wc.opcode != opcode))
		t_fail(file, line, "completion %s; expected wr_id=%" PRIu64
		       " status=%d (%s) opcode=%d qp_num=%u", tv_wc_str(&wc), wr_id,
		       (int)st, ibv_wc_status_str(st), opcode, qp ? qp->qp_num : 0);
	return wc;
}
#define tv_expect_wc(cq, qp, wr_id, st, opcode)                             \
	tv_expect_wc_(__FILE__, __LINE__, (cq), (qp), (wr_id), (st), (opcode), TV_WAIT_S)
#define tv_expect_wc_to(cq, qp, wr_id, st, opcode, to)                      \
	tv_expect_wc_(__FILE__, __LINE__, (cq), (qp), (wr_id), (st), (opcode), (to))

/* Asserts that no completion shows up on cq for secs seconds. */
static inline void tv_expect_no_wc_(const char *file, int line,
				    struct ibv_cq *cq, double secs)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	if (tv_poll1(cq, &wc, secs))
		t_fail(file, line, "unexpected completion: %s", tv_wc_str(&wc));
}
#define tv_expect_no_wc(cq, secs) tv_expect_no_wc_(__FILE__, __LINE__, (cq), (secs))

/* The thread IDs of this process's engine threads (named uroce-engine),
 * up to max; returns how many there are. */
static inline int tv_engine_tids(pid_t *tids, int max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	T_ASSERT(d != NULL);
	while ((de = readdir(d))) {
		char path[300], comm[32] = "";
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "uroce-engine", 12)) {
			if (n < max)
				tids[n] = (pid_t)atoi(de->d_name);
			n++;
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

/* ---- processes ----------------------------------------------------------- */

static inline void tv_send_(const char *file, int line, int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			t_fail(file, line, "send to peer process: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}
#define tv_send(fd, buf, len) tv_send_(__FILE__, __LINE__, (fd), (buf), (len))

static inline void tv_recv_(const char *file, int line, int fd, void *buf,
			    size_t len, double timeout_s)
{
	char *p = buf;
	double t0 = tv_now();

	while (len) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		double left = timeout_s - (tv_now() - t0);
		ssize_t n;
		int r;

		if (left <= 0)
			t_fail(file, line, "peer process sent nothing for %.0f s", timeout_s);
		r = poll(&pfd, 1, (int)(left * 1000) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			t_fail(file, line, "poll: %s", strerror(errno));
		if (r == 0)
			continue;
		n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			t_fail(file, line, "peer process closed the socket (it failed or exited; see its output above)");
		if (n < 0)
			t_fail(file, line, "recv from peer process: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}
#define tv_recv(fd, buf, len) tv_recv_(__FILE__, __LINE__, (fd), (buf), (len), 100.0)

/* Both sides send theirs, then read the peer's (small messages only). */
#define tv_xchg(fd, mine, theirs, len)                                      \
	do {                                                                \
		tv_send_(__FILE__, __LINE__, (fd), (mine), (len));          \
		tv_recv_(__FILE__, __LINE__, (fd), (theirs), (len), 100.0); \
	} while (0)

#define tv_sync(fd)                                                         \
	do {                                                                \
		char tv_c_ = 's';                                           \
		tv_send_(__FILE__, __LINE__, (fd), &tv_c_, 1);              \
		tv_recv_(__FILE__, __LINE__, (fd), &tv_c_, 1, 100.0);       \
	} while (0)

/* Exchanges QP info over fd and connects s to the peer. mine may carry
 * memory regions already; peer receives the other side's info. */
static inline void tv_proc_connect_(const char *file, int line, int fd,
				    struct tv_side *s, const struct tv_opts *o,
				    struct tv_info *mine, struct tv_info *peer)
{
	tv_info_of(s, mine);
	tv_send_(file, line, fd, mine, sizeof(*mine));
	tv_recv_(file, line, fd, peer, sizeof(*peer), 100.0);
	tv_connect_(file, line, s, o, peer);
	/* Both QPs are in RTS before either side posts. */
	{
		char c = 'c';

		tv_send_(file, line, fd, &c, 1);
		tv_recv_(file, line, fd, &c, 1, 100.0);
	}
}
#define tv_proc_connect(fd, s, o, mine, peer)                               \
	tv_proc_connect_(__FILE__, __LINE__, (fd), (s), (o), (mine), (peer))

struct tv_proc {
	pid_t pid;
	int fd; /* this process's end of the socketpair */
};

typedef void (*tv_proc_fn)(int fd, void *arg);

/* Forks a child running fn(fd, arg), which exits 0 when fn returns (a failed
 * assertion in the child exits 1). Returns the parent's socket end. */
static inline struct tv_proc tv_fork_(const char *file, int line, tv_proc_fn fn, void *arg)
{
	struct tv_proc p;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		t_fail(file, line, "socketpair: %s", strerror(errno));
	fflush(NULL);
	p.pid = fork();
	if (p.pid < 0)
		t_fail(file, line, "fork: %s", strerror(errno));
	if (p.pid == 0) {
		close(sv[0]);
		fn(sv[1], arg);
		fflush(NULL);
		_exit(0);
	}
	close(sv[1]);
	p.fd = sv[0];
	return p;
}
#define tv_fork(fn, arg) tv_fork_(__FILE__, __LINE__, (fn), (arg))

/* Waits for the child; fails unless it exited 0 within timeout_s. */
static inline void tv_proc_wait_(const char *file, int line, struct tv_proc *p,
				 double timeout_s)
{
	double t0 = tv_now();
	int status = 0;

	for (;;) {
		pid_t r = waitpid(p->pid, &status, WNOHANG);

		if (r == p->pid)
			break;
		if (r < 0 && errno != EINTR)
			t_fail(file, line, "waitpid: %s", strerror(errno));
		if (tv_now() - t0 > timeout_s) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &status, 0);
			t_fail(file, line, "child %d still running after %.0f s", (int)p->pid,
			       timeout_s);
		}
		usleep(1000);
	}
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	if (WIFSIGNALED(status))
		t_fail(file, line, "child %d killed by signal %d", (int)p->pid,
		       WTERMSIG(status));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		t_fail(file, line, "child %d failed (exit %d)", (int)p->pid,
		       WEXITSTATUS(status));
}
#define tv_proc_wait(p, timeout_s) tv_proc_wait_(__FILE__, __LINE__, (p), (timeout_s))

#endif
