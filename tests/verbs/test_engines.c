/* Several engine threads per device context (UROCE_ENGINES, docs/design.md
 * "Several engine threads"): QPs are spread over them, and what QPs on
 * different engines share stays right when the engines complete, consume
 * and count at the same time: one send CQ and one receive CQ for all, an
 * SRQ, a CQ resized under traffic, the counters of `uroce stat`. */
#include "common.h"

#include <dirent.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#define NENG 4
#define NPAIRS 4          /* 8 QPs: every engine holds two */
#define MSGS 400          /* per QP and operation */
#define MSG_LEN 3000      /* three packets at MTU 1024 */

__attribute__((constructor)) static void engines_env(void)
{
	/* the engine thread does the transport; application progress runs one
	 * engine per context */
	setenv("UROCE_PROGRESS", "engine", 1);
	setenv("UROCE_ENGINES", "4", 0);
}

/* Threads of this process named uroce-engine. */
static int engine_threads(void)
{
	return tv_engine_tids(NULL, 0);
}

/* NPAIRS connected RC pairs a[i] <-> b[i] in one context; every QP on the
 * same send CQ and receive CQ, the b side optionally on one SRQ. */
struct world {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_srq *srq;
	struct ibv_qp *a[NPAIRS], *b[NPAIRS];
	struct tv_buf src, dst;
	struct tv_opts o;
};

static struct ibv_qp *make_qp(struct world *w, int with_srq)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = w->scq;
	ia.recv_cq = w->rcq;
	ia.srq = with_srq ? w->srq : NULL;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = 1;
	ia.cap.max_send_wr = 2 * MSGS;
	ia.cap.max_recv_wr = with_srq ? 0 : MSGS;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(w->pd, &ia);
	T_ASSERTF(qp, "ibv_create_qp: %s", strerror(errno));
	return qp;
}

static void connect_qp(struct world *w, struct ibv_qp *qp, struct ibv_qp *peer)
{
	struct tv_info r;

	memset(&r, 0, sizeof(r));
	r.qpn = peer->qp_num;
	r.psn = peer->qp_num & 0xffff;
	r.gid = tv_gid0(w->ctx);
	T_EQ_INT(tv_modify_init(qp, TV_ACCESS_ALL), 0);
	T_EQ_INT(tv_modify_rtr(qp, &w->o, &r), 0);
	T_EQ_INT(tv_modify_rts(qp, &w->o, qp->qp_num & 0xffff), 0);
}

static void world_open(struct world *w, int with_srq, int cqe)
{
	memset(w, 0, sizeof(*w));
	w->o = tv_opts_default();
	w->ctx = tv_open_device();
	w->pd = ibv_alloc_pd(w->ctx);
	T_ASSERT(w->pd);
	w->scq = ibv_create_cq(w->ctx, cqe, NULL, NULL, 0);
	w->rcq = ibv_create_cq(w->ctx, cqe, NULL, NULL, 0);
	T_ASSERT(w->scq && w->rcq);
	if (with_srq) {
		struct ibv_srq_init_attr sa;

		memset(&sa, 0, sizeof(sa));
		sa.attr.max_wr = NPAIRS * MSGS;
		sa.attr.max_sge = 1;
		w->srq = ibv_create_srq(w->pd, &sa);
		T_ASSERTF(w->srq, "ibv_create_srq: %s", strerror(errno));
	}
	for (int i = 0; i < NPAIRS; i++) {
		w->a[i] = make_qp(w, 0);
		w->b[i] = make_qp(w, with_srq);
	}
	for (int i = 0; i < NPAIRS; i++) {
		connect_qp(w, w->a[i], w->b[i]);
		connect_qp(w, w->b[i], w->a[i]);
	}
	tv_buf_alloc(&w->src, w->pd, (size_t)NPAIRS * MSGS * MSG_LEN, TV_ACCESS_ALL);
	tv_buf_alloc(&w->dst, w->pd, (size_t)NPAIRS * MSGS * MSG_LEN, TV_ACCESS_ALL);
	for (int i = 0; i < NPAIRS; i++)
		tv_fill(w->src.p + (size_t)i * MSGS * MSG_LEN, (size_t)MSGS * MSG_LEN, 100 + i);
}

static void world_close(struct world *w)
{
	for (int i = 0; i < NPAIRS; i++) {
		T_EQ_INT(ibv_destroy_qp(w->a[i]), 0);
		T_EQ_INT(ibv_destroy_qp(w->b[i]), 0);
	}
	if (w->srq)
		T_EQ_INT(ibv_destroy_srq(w->srq), 0);
	T_EQ_INT(ibv_destroy_cq(w->scq), 0);
	T_EQ_INT(ibv_destroy_cq(w->rcq), 0);
	tv_buf_free(&w->src);
	tv_buf_free(&w->dst);
	T_EQ_INT(ibv_dealloc_pd(w->pd), 0);
	T_EQ_INT(ibv_close_device(w->ctx), 0);
}

/* wr_id: pair << 20 | kind << 16 | message */
#define WRID(pair, kind, k) ((uint64_t)(pair) << 20 | (uint64_t)(kind) << 16 | (uint64_t)(k))

/* Reaps n completions from cq, each wr_id exactly once and successful;
 * seen[] is indexed by pair * 2 * MSGS + kind * MSGS + message. When
 * resize is set, the CQ is resized every 200 completions meanwhile. */
static void reap_all(struct ibv_cq *cq, int n, uint8_t *seen, int resize)
{
	double t0 = tv_now();
	int got = 0, sizes[] = { 4096, 8192, 5000 }, r = 0;

	while (got < n) {
		struct ibv_wc wc[32];
		int k = ibv_poll_cq(cq, 32, wc);

		T_GE_INT(k, 0);
		for (int i = 0; i < k; i++) {
			unsigned pair = (unsigned)(wc[i].wr_id >> 20), kind = (wc[i].wr_id >> 16) & 0xf,
				 msg = wc[i].wr_id & 0xffff;
			size_t at = (size_t)pair * 2 * MSGS + kind * MSGS + msg;

			T_ASSERTF(wc[i].status == IBV_WC_SUCCESS, "%s", tv_wc_str(&wc[i]));
			T_ASSERTF(pair < NPAIRS && kind < 2 && msg < MSGS, "wr_id 0x%" PRIx64,
				  wc[i].wr_id);
			T_ASSERTF(!seen[at], "wr_id 0x%" PRIx64 " completed twice", wc[i].wr_id);
			seen[at] = 1;
			got++;
			if (resize && got % 200 == 0) {
				T_EQ_INT(ibv_resize_cq(cq, sizes[r % 3]), 0);
				r++;
			}
		}
		T_ASSERTF(tv_now() - t0 < 20, "%d of %d completions after 20 s", got, n);
	}
	T_ASSERT(!resize || r >= 3);
}

/* Every a[i] WRITEs MSGS messages into dst and SENDs MSGS more to b[i]'s
 * receives (its own RQ or the SRQ), all at once. */
static void traffic(struct world *w, int resize)
{
	uint8_t *sseen = calloc((size_t)NPAIRS * 2 * MSGS, 1);
	uint8_t *rseen = calloc((size_t)NPAIRS * 2 * MSGS, 1);
	struct tv_buf rbuf;

	T_ASSERT(sseen && rseen);
	tv_buf_alloc(&rbuf, w->pd, (size_t)NPAIRS * MSGS * MSG_LEN, TV_ACCESS_ALL);
	for (int i = 0; i < NPAIRS; i++)
		for (int k = 0; k < MSGS; k++) {
			struct ibv_sge s = tv_sge(&rbuf, ((size_t)i * MSGS + k) * MSG_LEN, MSG_LEN);
			struct ibv_recv_wr wr = { .wr_id = WRID(i, 1, k), .sg_list = &s, .num_sge = 1 },
					   *bad;

			if (w->srq)
				T_EQ_INT(ibv_post_srq_recv(w->srq, &wr, &bad), 0);
			else
				T_EQ_INT(ibv_post_recv(w->b[i], &wr, &bad), 0);
		}
	for (int k = 0; k < MSGS; k++)
		for (int i = 0; i < NPAIRS; i++) {
			size_t off = ((size_t)i * MSGS + k) * MSG_LEN;

			T_EQ_INT(tv_post1(w->a[i], IBV_WR_RDMA_WRITE, WRID(i, 0, k), &w->src, off,
					  MSG_LEN, (uintptr_t)w->dst.p + off, w->dst.mr->rkey, 0, 0),
				 0);
			T_EQ_INT(tv_post1(w->a[i], IBV_WR_SEND, WRID(i, 1, k), &w->src, off, MSG_LEN, 0,
					  0, 0, 0),
				 0);
		}
	reap_all(w->scq, NPAIRS * 2 * MSGS, sseen, resize);
	reap_all(w->rcq, NPAIRS * MSGS, rseen, 0);
	for (int i = 0; i < NPAIRS; i++) {
		size_t off = (size_t)i * MSGS * MSG_LEN;

		tv_pattern_(__FILE__, __LINE__, "WRITE data", w->dst.p + off, (size_t)MSGS * MSG_LEN,
			    100 + i, 0);
		if (!w->srq) /* with an SRQ, any pair's SEND may land in any WQE */
			tv_pattern_(__FILE__, __LINE__, "SEND data", rbuf.p + off,
				    (size_t)MSGS * MSG_LEN, 100 + i, 0);
	}
	tv_buf_free(&rbuf);
	free(sseen);
	free(rseen);
}

T_CASE(qps_spread_over_engines)
{
	struct world w;
	unsigned slots[NENG];
	int nslots = 0;

	world_open(&w, 0, 4096);
	for (int i = 0; i < NPAIRS; i++)
		for (int s = 0; s < 2; s++) {
			unsigned slot = (s ? w.b[i] : w.a[i])->qp_num >> 16;
			int j;

			for (j = 0; j < nslots && slots[j] != slot; j++)
				;
			if (j == nslots) {
				T_LT_INT(nslots, NENG);
				slots[nslots++] = slot;
			}
		}
	/* QP k went to engine k % 4: four slots, four threads */
	T_EQ_INT(nslots, NENG);
	T_EQ_INT(engine_threads(), NENG);
	traffic(&w, 0);
	world_close(&w);
	T_EQ_INT(engine_threads(), 0);

	/* UROCE_ENGINES=1: one slot, one thread */
	setenv("UROCE_ENGINES", "1", 1);
	world_open(&w, 0, 4096);
	setenv("UROCE_ENGINES", "4", 1);
	for (int i = 0; i < NPAIRS; i++) {
		T_EQ_INT(w.a[i]->qp_num >> 16, w.a[0]->qp_num >> 16);
		T_EQ_INT(w.b[i]->qp_num >> 16, w.a[0]->qp_num >> 16);
	}
	T_EQ_INT(engine_threads(), 1);
	world_close(&w);
}

T_CASE(shared_cq_every_engine)
{
	struct world w;

	/* 8 QPs on four engines complete into one send and one receive CQ */
	world_open(&w, 0, NPAIRS * 2 * MSGS);
	traffic(&w, 0);
	world_close(&w);
}

T_CASE(shared_srq_every_engine)
{
	struct world w;

	/* four responders on four engines take from one SRQ: every receive
	 * WQE is used once (a WQE taken twice shows as a wr_id twice) */
	world_open(&w, 1, NPAIRS * 2 * MSGS);
	for (int round = 0; round < 4; round++)
		traffic(&w, 0);
	world_close(&w);
}

T_CASE(resize_cq_under_traffic)
{
	struct world w;

	world_open(&w, 0, NPAIRS * 2 * MSGS);
	traffic(&w, 1);
	world_close(&w);
}

T_CASE(counters_every_engine)
{
	struct world w;
	uint64_t before = TV_COUNTER(tx_pkts), after;

	world_open(&w, 0, NPAIRS * 2 * MSGS);
	traffic(&w, 0);
	/* each message is 3 packets, plus the ACKs: the sum over every
	 * engine's block counts them all */
	after = TV_COUNTER(tx_pkts);
	T_GE_INT(after - before, (uint64_t)NPAIRS * 2 * MSGS * 3);
	world_close(&w);
}

/* This process's UDP sockets bound to port 4791 and connected: the flow
 * sockets (its socket inodes, matched in /proc/self/net/udp). */
static int flow_sockets(void)
{
	unsigned long ino[4096];
	int nino = 0, n = 0;
	char line[512];
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	FILE *f;

	T_ASSERT(d);
	while ((de = readdir(d)) && nino < 4096) {
		char path[300], tgt[64];
		ssize_t k;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		k = readlink(path, tgt, sizeof(tgt) - 1);
		if (k <= 0)
			continue;
		tgt[k] = 0;
		if (sscanf(tgt, "socket:[%lu]", &ino[nino]) == 1)
			nino++;
	}
	closedir(d);
	f = fopen("/proc/self/net/udp", "r");
	T_ASSERT(f);
	while (fgets(line, sizeof(line), f)) {
		char local[64], rem[64];
		unsigned long inode;

		/* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
		if (sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %*s %*s %lu", local, rem, &inode) != 3)
			continue;
		if (!strstr(local, ":12B7") || !strcmp(rem, "00000000:0000"))
			continue;
		for (int i = 0; i < nino; i++)
			if (ino[i] == inode) {
				n++;
				break;
			}
	}
	fclose(f);
	return n;
}

/* UROCE_FLOW_SOCKETS is the context's budget, shared by its engine
 * threads (the remainder to the first ones): 4 over 4 engines is one each, so 4 of the 8 QPs (two per
 * engine, each with company in the namespace: a flow socket at RTR) get
 * one and the other 4 are reached through the mailboxes; every pair still
 * moves its data. (A budget per engine would have opened 8.) */
T_CASE(flow_sockets_shared_by_engines)
{
	struct world w;

	setenv("UROCE_FLOW_SOCKETS", "4", 1);
	world_open(&w, 0, 4096);
	T_EQ_INT(engine_threads(), NENG);
	T_EQ_INT(flow_sockets(), 4);
	traffic(&w, 0);
	world_close(&w);
	T_EQ_INT(flow_sockets(), 0);
	/* 6 over 4 engines: 2, 2, 1, 1, the whole budget used */
	setenv("UROCE_FLOW_SOCKETS", "6", 1);
	world_open(&w, 0, 4096);
	T_EQ_INT(flow_sockets(), 6);
	world_close(&w);
	unsetenv("UROCE_FLOW_SOCKETS");
}

static double cpu_seconds(void)
{
	struct rusage ru;

	T_EQ_INT(getrusage(RUSAGE_SELF, &ru), 0);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

/* Traffic over NENG engines, then 0.3 s of nothing: the idle engine
 * threads must use under 0.1 CPU-s (they sleep, not spin). */
static void expect_sleep_after_traffic(void)
{
	struct world w;
	double c0;

	world_open(&w, 0, 4096);
	T_EQ_INT(engine_threads(), NENG);
	traffic(&w, 0);
	usleep(100 * 1000); /* the engines go idle */
	c0 = cpu_seconds();
	usleep(300 * 1000);
	T_ASSERTF(cpu_seconds() - c0 < 0.1, "idle engines used %.2f CPU-s in 0.3 s", cpu_seconds() - c0);
	world_close(&w);
}

/* A kernel before 5.11 (a container on a RHEL 8 host) has no
 * epoll_pwait2, nor has valgrind: a seccomp filter makes it ENOSYS for
 * this test process. The engines fall back to epoll_wait: the traffic
 * moves, and four idle engine threads then sleep (with the call failing
 * and nothing else, each spun a core: 4 engines, 300 ms, about 0.6 CPU-s
 * on 2 cores). */
T_CASE(sleeps_without_epoll_pwait2)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_epoll_pwait2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	T_EQ_INT(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	T_EQ_INT(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
	T_EQ_INT((int)syscall(SYS_epoll_pwait2, -1, NULL, 0, NULL, NULL, 0), -1);
	T_EQ_INT(errno, ENOSYS);
	expect_sleep_after_traffic();
}

/* UROCE_POLL_US: an engine thread polls its sockets a while after its
 * last work, reading the socket that last had packets without asking
 * epoll first (engine.c, HOT_TURNS). A read that finds nothing is no
 * work: once traffic stops the threads must still go to sleep. */
T_CASE(sleeps_after_polling_hot_socket)
{
	setenv("UROCE_POLL_US", "200", 1);
	expect_sleep_after_traffic();
	unsetenv("UROCE_POLL_US");
}

T_CASE(bad_engines_setting_fails_open)
{
	const char *bad[] = { "0", "17", "x", "-1", "4k" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ibv_device **l = ibv_get_device_list(NULL);
		struct ibv_context *c;

		T_ASSERT(l && l[0]);
		setenv("UROCE_ENGINES", bad[i], 1);
		errno = 0;
		c = ibv_open_device(l[0]);
		setenv("UROCE_ENGINES", "4", 1);
		T_ASSERTF(!c, "UROCE_ENGINES=%s opened", bad[i]);
		T_EQ_INT(errno, EINVAL);
		ibv_free_device_list(l);
	}
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
