/* Shared by the single-process benchmarks (loss_bw, gpu_bw): a clock, and
 * two device contexts of one process joined by an RC QP each, connected
 * over GID 0 (UROCE_NETDEV=lo: 127.0.0.1) with MTU 4096. Public verbs API
 * only. */
#ifndef UROCE_BENCH_PAIR_H
#define UROCE_BENCH_PAIR_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct bench_side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch; /* NULL unless asked for */
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

/* Called with what failed; must not return. */
static void bench_die(const char *what);

static inline void bench_side_open(struct bench_side *s, struct ibv_device *dev, int depth,
				   int channel)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = (uint32_t)depth, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	memset(s, 0, sizeof(*s));
	if (!(s->ctx = ibv_open_device(dev)))
		bench_die("ibv_open_device");
	if (!(s->pd = ibv_alloc_pd(s->ctx)))
		bench_die("ibv_alloc_pd");
	if (channel && !(s->ch = ibv_create_comp_channel(s->ctx)))
		bench_die("ibv_create_comp_channel");
	if (!(s->cq = ibv_create_cq(s->ctx, depth + 16, NULL, s->ch, 0)))
		bench_die("ibv_create_cq");
	ia.send_cq = ia.recv_cq = s->cq;
	if (!(s->qp = ibv_create_qp(s->pd, &ia)))
		bench_die("ibv_create_qp");
}

/* INIT -> RTR -> RTS towards (gid, dqpn): RC, MTU 4096, 16 reads and
 * atomics each way, retry 7/7, PSNs 0. */
static inline void bench_qp_connect(struct ibv_qp *qp, const union ibv_gid *gid, uint32_t dqpn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		bench_die("modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		bench_die("modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 16;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		bench_die("modify to RTS");
}

static inline void bench_connect(struct bench_side *s, const struct bench_side *peer)
{
	union ibv_gid gid;

	if (ibv_query_gid(peer->ctx, 1, 0, &gid))
		bench_die("ibv_query_gid");
	bench_qp_connect(s->qp, &gid, peer->qp->qp_num);
}

#endif
