/* idle_qps: how much an idle process holding many connected RC QPs costs.
 *
 * One process opens the first verbs device, creates PAIRS pairs of RC QPs and
 * connects each pair to itself over the device's GID 0 (with UROCE_NETDEV=lo:
 * 127.0.0.1), moves one 8-byte RDMA WRITE over every pair to prove the pairs
 * are connected, then sleeps SECS seconds and measures its own CPU time
 * (getrusage and /proc/self/stat utime+stime, all threads) and RSS.
 *
 *   idle_qps [-p PAIRS] [-t SECS] [-d DEPTH]
 *
 * Prints one JSON object on stdout; exit 0 when every QP was created,
 * connected and carried its WRITE, 1 otherwise (the JSON says how far it got).
 * Public verbs API only, so it runs against any libibverbs.so.1. Built and run
 * by bench/run.sh; not part of the library. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A numeric field ("VmRSS", "Threads") of /proc/self/status, or -1. */
static long status_field(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	size_t kl = strlen(key);
	char line[256];
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = strtol(line + kl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static long rss_kb(void)
{
	return status_field("VmRSS");
}

static int nthreads(void)
{
	return (int)status_field("Threads");
}

/* utime+stime of the whole process from /proc/self/stat, in seconds */
static double stat_cpu_s(void)
{
	char buf[2048], *p;
	unsigned long ut = 0, st = 0;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n;
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')'); /* comm may contain spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / sysconf(_SC_CLK_TCK);
}

static double ru_cpu_s(struct rusage *ru)
{
	return ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6 + ru->ru_stime.tv_sec +
	       ru->ru_stime.tv_usec / 1e6;
}

static const char *stage = "start";
static int err_no;
static int created, connected, written;
static int wc_status = -1;
static double t_write;

static void report(int pairs, double secs, double cpu_pct, double stat_pct, double wakeups,
		   long rss0, long rss1, double t_create, double t_connect, int threads, int ok)
{
	struct rlimit rl = {0, 0};
	getrlimit(RLIMIT_NOFILE, &rl);
	printf("{\"pairs\": %d, \"qps_wanted\": %d, \"qps_created\": %d, \"qps_connected\": %d, "
	       "\"pairs_written\": %d, \"ok\": %s, \"failed_at\": \"%s\", \"errno\": %d, \"error\": \"%s\", "
	       "\"idle_secs\": %.3f, \"idle_cpu_pct\": %.4f, \"idle_cpu_pct_stat\": %.4f, "
	       "\"idle_wakeups_per_s\": %.1f, \"rss_base_kb\": %ld, \"rss_kb\": %ld, "
	       "\"rss_per_qp_bytes\": %.0f, \"create_s\": %.3f, \"connect_s\": %.3f, \"threads\": %d, "
	       "\"write_s\": %.3f, \"wc_status\": \"%s\", \"nofile_soft\": %llu, \"nofile_hard\": %llu}\n",
	       pairs, 2 * pairs, created, connected, written, ok ? "true" : "false", ok ? "" : stage,
	       ok ? 0 : err_no, ok ? "" : strerror(err_no), secs, cpu_pct, stat_pct, wakeups, rss0,
	       rss1, created ? (rss1 - rss0) * 1024.0 / created : 0.0, t_create, t_connect, threads, t_write,
	       wc_status < 0 ? "" : ibv_wc_status_str(wc_status),
	       (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
	fflush(stdout);
}

#define FAIL(what)                                  \
	do {                                        \
		stage = (what);                     \
		err_no = errno ? errno : EINVAL;    \
		goto out;                           \
	} while (0)

int main(int argc, char **argv)
{
	int pairs = 1000, depth = 4, opt, i, nqp, ok = 0, ndev = 0;
	double secs = 5, cpu_pct = -1, stat_pct = -1, wakeups = -1, t_create = 0, t_connect = 0;
	long rss0 = -1, rss1 = -1;
	struct ibv_device **list = NULL;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd = NULL;
	struct ibv_cq *cq = NULL;
	struct ibv_mr *mr = NULL;
	struct ibv_qp **qp = NULL;
	struct ibv_port_attr port;
	struct ibv_device_attr dattr;
	union ibv_gid gid;
	char *buf = NULL;
	size_t buflen;
	double t0;

	while ((opt = getopt(argc, argv, "p:t:d:")) != -1) {
		switch (opt) {
		case 'p': pairs = atoi(optarg); break;
		case 't': secs = atof(optarg); break;
		case 'd': depth = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-p PAIRS] [-t SECS] [-d DEPTH]\n", argv[0]);
			return 2;
		}
	}
	if (pairs < 1 || depth < 1 || secs < 0) {
		fprintf(stderr, "idle_qps: bad arguments\n");
		return 2;
	}
	nqp = 2 * pairs;
	errno = 0;
	list = ibv_get_device_list(&ndev);
	if (!list || ndev < 1)
		FAIL("ibv_get_device_list");
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		FAIL("ibv_open_device");
	if (ibv_query_port(ctx, 1, &port) || ibv_query_device(ctx, &dattr))
		FAIL("ibv_query_port");
	if (ibv_query_gid(ctx, 1, 0, &gid))
		FAIL("ibv_query_gid");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		FAIL("ibv_alloc_pd");
	buflen = (size_t)pairs * 16;
	buf = calloc(1, buflen);
	if (!buf)
		FAIL("calloc");
	mr = ibv_reg_mr(pd, buf, buflen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		FAIL("ibv_reg_mr");
	{
		int cqe = pairs + 64;
		if (dattr.max_cqe > 0 && cqe > dattr.max_cqe)
			cqe = dattr.max_cqe;
		cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);
	}
	if (!cq)
		FAIL("ibv_create_cq");
	qp = calloc(nqp, sizeof(*qp));
	if (!qp)
		FAIL("calloc");
	rss0 = rss_kb();

	t0 = now_s();
	for (i = 0; i < nqp; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = {.max_send_wr = depth, .max_recv_wr = depth,
				.max_send_sge = 1, .max_recv_sge = 1},
		};
		qp[i] = ibv_create_qp(pd, &ia);
		if (!qp[i])
			FAIL("ibv_create_qp");
		created++;
	}
	t_create = now_s() - t0;

	t0 = now_s();
	for (i = 0; i < nqp; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
			.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
		};
		if ((errno = ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
			FAIL("ibv_modify_qp INIT");
	}
	for (i = 0; i < nqp; i++) {
		struct ibv_qp *peer = qp[i ^ 1];
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR, .path_mtu = port.active_mtu,
			.dest_qp_num = peer->qp_num, .rq_psn = 0x100 + (i ^ 1),
			.max_dest_rd_atomic = 1, .min_rnr_timer = 12,
			.ah_attr = {.is_global = 1, .port_num = 1,
				    .grh = {.dgid = gid, .sgid_index = 0, .hop_limit = 64}},
		};
		/* ibv_modify_qp returns the error number (errno may be stale) */
		if ((errno = ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
						    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
						    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
			FAIL("ibv_modify_qp RTR");
		a = (struct ibv_qp_attr){
			.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
			.sq_psn = 0x100 + i, .max_rd_atomic = 1,
		};
		if ((errno = ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
						    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
						    IBV_QP_MAX_QP_RD_ATOMIC)))
			FAIL("ibv_modify_qp RTS");
		connected++;
	}
	t_connect = now_s() - t0;

	t0 = now_s();
	/* one 8-byte WRITE per pair, from its even QP into the odd one's slot */
	for (i = 0; i < pairs; i++) {
		struct ibv_sge sge = {.addr = (uintptr_t)buf + 16 * i, .length = 8, .lkey = mr->lkey};
		struct ibv_send_wr wr = {
			.wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = {.remote_addr = (uintptr_t)buf + 16 * i + 8, .rkey = mr->rkey},
		}, *bad;
		memcpy(buf + 16 * i, &i, sizeof(i));
		if ((errno = ibv_post_send(qp[2 * i], &wr, &bad))) {
			FAIL("ibv_post_send");
		}
		/* keep the CQ from overflowing: reap when many are outstanding */
		while (i + 1 - written > cq->cqe - 8) {
			struct ibv_wc wc[64];
			int n = ibv_poll_cq(cq, 64, wc), k;
			if (n < 0)
				FAIL("ibv_poll_cq");
			for (k = 0; k < n; k++) {
				if (wc[k].status != IBV_WC_SUCCESS) {
					wc_status = wc[k].status;
					errno = EIO;
					FAIL("write completion");
				}
				written++;
			}
			if (n == 0)
				usleep(100);
		}
	}
	while (written < pairs) {
		struct ibv_wc wc[64];
		int n = ibv_poll_cq(cq, 64, wc), k;
		if (n < 0)
			FAIL("ibv_poll_cq");
		for (k = 0; k < n; k++) {
			if (wc[k].status != IBV_WC_SUCCESS) {
				wc_status = wc[k].status;
				errno = EIO;
				FAIL("write completion");
			}
			written++;
		}
		if (n == 0 && now_s() - t0 > 30) {
			errno = ETIMEDOUT;
			FAIL("write completions (30 s)");
		}
		if (n == 0)
			usleep(100); /* leave the cores to the engine thread */
	}
	for (i = 0; i < pairs; i++) {
		int v;
		memcpy(&v, buf + 16 * i + 8, sizeof(v));
		if (v != i) {
			errno = EIO;
			FAIL("write data check");
		}
	}
	t_write = now_s() - t0;
	rss1 = rss_kb();

	if (secs > 0) {
		struct rusage r0, r1;
		double w0, w1, s0, s1;
		usleep(500000); /* let the last ACKs and timers settle */
		getrusage(RUSAGE_SELF, &r0);
		s0 = stat_cpu_s();
		w0 = now_s();
		usleep((useconds_t)(secs * 1e6));
		getrusage(RUSAGE_SELF, &r1);
		s1 = stat_cpu_s();
		w1 = now_s();
		secs = w1 - w0;
		cpu_pct = 100.0 * (ru_cpu_s(&r1) - ru_cpu_s(&r0)) / secs;
		stat_pct = 100.0 * (s1 - s0) / secs;
		/* our main thread sleeps in usleep once: the rest are other threads' */
		wakeups = ((r1.ru_nvcsw + r1.ru_nivcsw) - (r0.ru_nvcsw + r0.ru_nivcsw) - 1) / secs;
	}
	ok = 1;
out:
	report(pairs, secs, cpu_pct, stat_pct, wakeups, rss0, rss1 >= 0 ? rss1 : rss_kb(), t_create,
	       t_connect, nthreads(), ok);
	if (qp)
		for (i = 0; i < nqp; i++)
			if (qp[i])
				ibv_destroy_qp(qp[i]);
	if (cq)
		ibv_destroy_cq(cq);
	if (mr)
		ibv_dereg_mr(mr);
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	if (list)
		ibv_free_device_list(list);
	free(qp);
	free(buf);
	return ok ? 0 : 1;
}
