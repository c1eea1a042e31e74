/* loss_bw: RDMA WRITE goodput of one RC QP pair, for the goodput-versus-
 * loss benchmark (bench/run.sh, docs/benchmarks.md).
 *
 * One process opens the first verbs device twice (with uroce: two device
 * contexts, so two engine threads, as two hosts would have), connects a QP
 * of each over GID 0 (UROCE_NETDEV=lo: 127.0.0.1) and keeps DEPTH WRITEs of
 * SIZE bytes in flight for SECS seconds, waiting for completions on a
 * completion channel (-w event, the default) or by polling (-w poll).
 * Faults come from the environment (UROCE_LOSS, UROCE_RETRANS, ...), which
 * both contexts read. At the end every destination slot is compared with
 * the source.
 *
 *   loss_bw [-s SIZE] [-t SECS] [-d DEPTH] [-w event|poll]
 *
 * Prints one JSON object; exit 0 when the run completed and verified.
 * Public verbs API only; not part of the library. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pair.h"

struct side {
	struct bench_side b;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static void bench_die(const char *what)
{
	int e = errno ? errno : EINVAL;

	printf("{\"ok\": false, \"failed_at\": \"%s\", \"error\": \"%s\"}\n", what, strerror(e));
	exit(1);
}

static void side_open(struct side *s, struct ibv_device *dev, size_t len, int depth)
{
	bench_side_open(&s->b, dev, depth, 1);
	if (!(s->buf = aligned_alloc(4096, len)))
		bench_die("aligned_alloc");
	memset(s->buf, 0, len);
	if (!(s->mr = ibv_reg_mr(s->b.pd, s->buf, len,
				 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)))
		bench_die("ibv_reg_mr");
}

int main(int argc, char **argv)
{
	size_t size = 1 << 20;
	double secs = 3, t0, t1;
	int depth = 16, opt, event = 1, ndev = 0, inflight = 0, bad = 0;
	uint64_t done = 0, posted = 0;
	struct ibv_device **list;
	struct side a, b;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	while ((opt = getopt(argc, argv, "s:t:d:w:")) != -1) {
		switch (opt) {
		case 's': size = strtoull(optarg, NULL, 0); break;
		case 't': secs = atof(optarg); break;
		case 'd': depth = atoi(optarg); break;
		case 'w': event = strcmp(optarg, "poll") != 0; break;
		default:
			fprintf(stderr, "usage: %s [-s SIZE] [-t SECS] [-d DEPTH] [-w event|poll]\n",
				argv[0]);
			return 2;
		}
	}
	if (!size || depth < 1 || depth > 1024 || secs <= 0) {
		fprintf(stderr, "loss_bw: bad arguments\n");
		return 2;
	}
	list = ibv_get_device_list(&ndev);
	if (!list || ndev < 1)
		bench_die("ibv_get_device_list");
	side_open(&a, list[0], size * (size_t)depth, depth);
	side_open(&b, list[0], size * (size_t)depth, depth);
	bench_connect(&a.b, &b.b);
	bench_connect(&b.b, &a.b);
	srand(7);
	for (size_t i = 0; i < size * (size_t)depth; i++)
		a.buf[i] = (uint8_t)(rand() | 1);

	t0 = bench_now();
	t1 = t0 + secs;
	if (event && ibv_req_notify_cq(a.b.cq, 0))
		bench_die("ibv_req_notify_cq");
	for (;;) {
		struct ibv_wc wc[32];
		int n;

		while (inflight < depth && bench_now() < t1) {
			uint32_t slot = (uint32_t)(posted % (uint64_t)depth);
			struct ibv_sge sge = { (uintptr_t)a.buf + slot * size, (uint32_t)size,
					       a.mr->lkey };
			struct ibv_send_wr wr = {
				.wr_id = slot, .sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
			}, *badwr;

			wr.wr.rdma.remote_addr = (uintptr_t)b.buf + slot * size;
			wr.wr.rdma.rkey = b.mr->rkey;
			if (ibv_post_send(a.b.qp, &wr, &badwr))
				bench_die("ibv_post_send");
			inflight++;
			posted++;
		}
		if (!inflight)
			break;
		if (event) {
			struct ibv_cq *cq;
			void *cctx;

			n = ibv_poll_cq(a.b.cq, 32, wc);
			if (n == 0) {
				if (ibv_get_cq_event(a.b.ch, &cq, &cctx))
					bench_die("ibv_get_cq_event");
				ibv_ack_cq_events(cq, 1);
				if (ibv_req_notify_cq(a.b.cq, 0))
					bench_die("ibv_req_notify_cq");
				continue;
			}
		} else {
			n = ibv_poll_cq(a.b.cq, 32, wc);
		}
		if (n < 0)
			bench_die("ibv_poll_cq");
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				printf("{\"ok\": false, \"failed_at\": \"completion\", \"error\": \"%s\"}\n",
				       ibv_wc_status_str(wc[i].status));
				return 1;
			}
			inflight--;
			done++;
		}
	}
	t1 = bench_now();
	if (done >= (uint64_t)depth)
		bad = memcmp(a.buf, b.buf, size * (size_t)depth) != 0;
	printf("{\"ok\": %s, \"size\": %zu, \"depth\": %d, \"wait\": \"%s\", \"secs\": %.3f, "
	       "\"msgs\": %llu, \"bytes\": %llu, \"gbps\": %.3f, \"verified\": %s}\n",
	       bad ? "false" : "true", size, depth, event ? "event" : "poll", t1 - t0,
	       (unsigned long long)done, (unsigned long long)(done * size),
	       (double)done * (double)size * 8 / (t1 - t0) / 1e9,
	       done >= (uint64_t)depth && !bad ? "true" : "false");
	return bad;
}
