/* incast: one process of the incast benchmark (bench/incast.sh,
 * docs/benchmarks.md): a receiver, one of N senders, or the probe.
 *
 *   incast recv  -d DIR -n N [-s SIZE] [-q DEPTH]
 *   incast send  -d DIR -i I [-s SIZE] [-q DEPTH] [-t SECS] [-w WARM]
 *   incast probe -d DIR -i N [-t SECS] [-w WARM]
 *
 * The receiver opens one RC QP per sender and one for the probe, and
 * writes its GID, QPNs and memory key to DIR/recv; each sender (and the
 * probe, index N) writes its QPN to DIR/send-I and waits for DIR/go,
 * which the receiver writes once every QP is connected: the start time
 * T0 (CLOCK_REALTIME, ns). A sender keeps DEPTH RDMA WRITEs of SIZE bytes
 * in flight into its own region of the receiver's memory from T0 to
 * T0 + WARM + SECS and counts the bytes completed in the last SECS
 * seconds; the probe does 64-byte RDMA READs from the receiver, one at a
 * time, and reports their latency percentiles. The receiver serves until
 * DIR/stop appears. Everyone prints one JSON object with its uroce
 * counters (0 for a foreign verbs provider) and waits on completion
 * channels, so that no process spins on the two cores.
 *
 * Public verbs API, plus the stat file (src/obs/counters.h) for the
 * counters. Not part of the library. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <glob.h>
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include "counters.h"
#include "pair.h"

#define MAX_SENDERS 64
#define PROBE_LEN 64

static const char *dir = ".";

static void die(const char *what)
{
	int e = errno ? errno : EINVAL;

	printf("{\"ok\": false, \"failed_at\": \"%s\", \"error\": \"%s\"}\n", what, strerror(e));
	fflush(stdout);
	exit(1);
}

static void bench_die(const char *what)
{
	die(what);
}

static uint64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
	for (uint64_t now = wall_ns(); now < t; now = wall_ns()) {
		uint64_t d = t - now;
		struct timespec ts = { (time_t)(d / 1000000000ull), (long)(d % 1000000000ull) };

		nanosleep(&ts, NULL);
	}
}

/* Writes DIR/name atomically (a rename). */
static void put_file(const char *name, const char *text)
{
	char p[512], tmp[560];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", p, (int)getpid());
	if (!(f = fopen(tmp, "w")) || fputs(text, f) < 0 || fclose(f) || rename(tmp, p))
		die("write exchange file");
}

/* Waits up to 60 s for DIR/name; returns its contents (static). */
static const char *get_file(const char *name)
{
	static char buf[8192];
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	for (int i = 0; i < 6000; i++) {
		int fd = open(p, O_RDONLY);

		if (fd >= 0) {
			ssize_t n = read(fd, buf, sizeof(buf) - 1);

			close(fd);
			if (n > 0) {
				buf[n] = 0;
				return buf;
			}
		}
		usleep(10000);
	}
	errno = ETIMEDOUT;
	die(name);
	return NULL;
}

static int exists(const char *name)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

/* The process's uroce counters, summed over its stat files. */
static void counters(struct uroce_counters *c)
{
	char pat[64];
	glob_t g;

	memset(c, 0, sizeof(*c));
	snprintf(pat, sizeof(pat), "/dev/shm/uroce-%d-*.stat", (int)getpid());
	if (glob(pat, 0, NULL, &g))
		return;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		struct uroce_stat_file f;
		int fd = open(g.gl_pathv[i], O_RDONLY);

		if (fd < 0)
			continue;
		if (read(fd, &f, sizeof(f)) == (ssize_t)sizeof(f) && f.magic == UROCE_STAT_MAGIC &&
		    f.size == sizeof(f)) {
			uroce_stat_total(&f, &f.cnt);
#define X(n, d) c->n += f.cnt.n;
			UROCE_COUNTERS(X)
#undef X
		}
		close(fd);
	}
	globfree(&g);
}

static void print_counters(void)
{
	struct uroce_counters c;
	int first = 1;

	counters(&c);
	printf(", \"counters\": {");
#define X(n, d)                                                                  \
	printf("%s\"%s\": %llu", first ? "" : ", ", #n, (unsigned long long)c.n); \
	first = 0;
	UROCE_COUNTERS(X)
#undef X
	printf("}");
}

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	union ibv_gid gid;
};

static void dev_open(struct dev *d, int cqe)
{
	struct ibv_device **l = ibv_get_device_list(NULL);

	if (!l || !l[0])
		die("ibv_get_device_list");
	if (!(d->ctx = ibv_open_device(l[0])))
		die("ibv_open_device");
	ibv_free_device_list(l);
	if (!(d->pd = ibv_alloc_pd(d->ctx)))
		die("ibv_alloc_pd");
	if (!(d->ch = ibv_create_comp_channel(d->ctx)))
		die("ibv_create_comp_channel");
	if (!(d->cq = ibv_create_cq(d->ctx, cqe, NULL, d->ch, 0)))
		die("ibv_create_cq");
	if (ibv_query_gid(d->ctx, 1, 0, &d->gid))
		die("ibv_query_gid");
}

static void dev_close(struct dev *d)
{
	if (ibv_destroy_cq(d->cq) || ibv_destroy_comp_channel(d->ch) || ibv_dealloc_pd(d->pd) ||
	    ibv_close_device(d->ctx))
		die("closing the device");
}

static struct ibv_qp *qp_new(struct dev *d, int depth)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = d->cq, .recv_cq = d->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = (uint32_t)depth, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(d->pd, &ia);

	if (!qp)
		die("ibv_create_qp");
	return qp;
}

static void gid_str(const union ibv_gid *g, char *out)
{
	for (int i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02x", g->raw[i]);
}

static void gid_parse(const char *s, union ibv_gid *g)
{
	for (int i = 0; i < 16; i++) {
		unsigned v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			die("bad gid");
		g->raw[i] = (uint8_t)v;
	}
}

/* Waits for completions on the channel; n of them into wc. */
static int wait_wc(struct dev *d, struct ibv_wc *wc, int max)
{
	for (;;) {
		struct ibv_cq *cq;
		void *cctx;
		int n = ibv_poll_cq(d->cq, max, wc);

		if (n)
			return n;
		if (ibv_req_notify_cq(d->cq, 0))
			die("ibv_req_notify_cq");
		n = ibv_poll_cq(d->cq, max, wc);
		if (n)
			return n;
		if (ibv_get_cq_event(d->ch, &cq, &cctx))
			die("ibv_get_cq_event");
		ibv_ack_cq_events(cq, 1);
	}
}

static int run_recv(int n, size_t size, int depth)
{
	struct dev d;
	struct ibv_qp *qp[MAX_SENDERS + 1];
	struct ibv_mr *mr;
	size_t region = size * (size_t)depth, len = region * (size_t)(n + 1);
	uint8_t *buf;
	char g[40], text[8192], name[32];
	int off;
	uint64_t deadline;

	dev_open(&d, 16);
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		die("mmap");
	if (!(mr = ibv_reg_mr(d.pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ)))
		die("ibv_reg_mr");
	gid_str(&d.gid, g);
	off = snprintf(text, sizeof(text), "%s %u %llu %zu", g, mr->rkey,
		       (unsigned long long)(uintptr_t)buf, region);
	for (int i = 0; i <= n; i++) {
		qp[i] = qp_new(&d, 1);
		off += snprintf(text + off, sizeof(text) - (size_t)off, " %u", qp[i]->qp_num);
	}
	snprintf(text + off, sizeof(text) - (size_t)off, "\n");
	put_file("recv", text);
	for (int i = 0; i <= n; i++) {
		union ibv_gid pg;
		unsigned pqpn;
		char pgs[40];

		snprintf(name, sizeof(name), "send-%d", i);
		if (sscanf(get_file(name), "%32s %u", pgs, &pqpn) != 2)
			die("bad sender file");
		gid_parse(pgs, &pg);
		bench_qp_connect(qp[i], &pg, pqpn);
	}
	/* everyone starts together, a little after the last connection */
	snprintf(text, sizeof(text), "%llu\n", (unsigned long long)(wall_ns() + 300000000ull));
	put_file("go", text);
	deadline = wall_ns() + 600ull * 1000000000ull;
	while (!exists("stop") && wall_ns() < deadline)
		usleep(20000);
	printf("{\"ok\": true, \"role\": \"recv\", \"senders\": %d", n);
	print_counters();
	printf("}\n");
	fflush(stdout);
	for (int i = 0; i <= n; i++)
		ibv_destroy_qp(qp[i]);
	ibv_dereg_mr(mr);
	dev_close(&d);
	munmap(buf, len);
	return 0;
}

/* What a sender or the probe learns from DIR/recv. */
struct target {
	union ibv_gid gid;
	uint32_t rkey, qpn;
	uint64_t addr;
	size_t region;
};

static void get_target(int idx, struct target *t)
{
	const char *s = get_file("recv");
	char g[40];
	unsigned long long addr;
	unsigned rkey, q;
	int pos = 0;

	if (sscanf(s, "%32s %u %llu %zu%n", g, &rkey, &addr, &t->region, &pos) != 4)
		die("bad receiver file");
	s += pos;
	for (int i = 0; i <= idx; i++) {
		if (sscanf(s, " %u%n", &q, &pos) != 1)
			die("no QP for this index in the receiver file");
		s += pos;
	}
	gid_parse(g, &t->gid);
	t->rkey = rkey;
	t->qpn = q;
	t->addr = addr + (uint64_t)t->region * (uint64_t)idx;
}

static struct ibv_qp *hello(struct dev *d, int idx, int depth, struct target *t)
{
	struct ibv_qp *qp = qp_new(d, depth);
	char g[40], text[128], name[32];

	gid_str(&d->gid, g);
	snprintf(text, sizeof(text), "%s %u\n", g, qp->qp_num);
	snprintf(name, sizeof(name), "send-%d", idx);
	put_file(name, text);
	get_target(idx, t);
	bench_qp_connect(qp, &t->gid, t->qpn);
	return qp;
}

static int run_send(int idx, size_t size, int depth, double secs, double warm)
{
	struct dev d;
	struct target t;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	uint64_t t0, ws, we, posted = 0, done = 0, in_win = 0, wbytes = 0;
	int inflight = 0, err = 0;

	dev_open(&d, depth + 16);
	if (!(buf = malloc(size * (size_t)depth)))
		die("malloc");
	for (size_t i = 0; i < size * (size_t)depth; i++)
		buf[i] = (uint8_t)(i * 7 + (size_t)idx);
	if (!(mr = ibv_reg_mr(d.pd, buf, size * (size_t)depth, IBV_ACCESS_LOCAL_WRITE)))
		die("ibv_reg_mr");
	qp = hello(&d, idx, depth, &t);
	if (t.region < size * (size_t)depth) {
		errno = EINVAL;
		die("receiver region too small");
	}
	t0 = strtoull(get_file("go"), NULL, 10);
	ws = t0 + (uint64_t)(warm * 1e9);
	we = ws + (uint64_t)(secs * 1e9);
	sleep_until(t0);
	for (;;) {
		struct ibv_wc wc[32];
		uint64_t now = wall_ns();
		int n;

		while (!err && inflight < depth && now < we) {
			uint32_t slot = (uint32_t)(posted % (uint64_t)depth);
			struct ibv_sge sge = { (uintptr_t)buf + slot * size, (uint32_t)size, mr->lkey };
			struct ibv_send_wr wr = {
				.wr_id = slot, .sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
			}, *bad;

			wr.wr.rdma.remote_addr = t.addr + slot * size;
			wr.wr.rdma.rkey = t.rkey;
			if (ibv_post_send(qp, &wr, &bad))
				die("ibv_post_send");
			inflight++;
			posted++;
		}
		if (!inflight)
			break;
		n = wait_wc(&d, wc, 32);
		now = wall_ns();
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS && !err)
				err = (int)wc[i].status;
			inflight--;
			done++;
			if (now >= ws && now < we) {
				in_win++;
				wbytes += size;
			}
		}
	}
	printf("{\"ok\": %s, \"role\": \"send\", \"idx\": %d, \"size\": %zu, \"depth\": %d, "
	       "\"secs\": %.3f, \"msgs\": %llu, \"bytes\": %llu, \"gbps\": %.4f, \"status\": \"%s\"",
	       err ? "false" : "true", idx, size, depth, secs, (unsigned long long)in_win,
	       (unsigned long long)wbytes, (double)wbytes * 8 / secs / 1e9,
	       ibv_wc_status_str((enum ibv_wc_status)err));
	print_counters();
	printf("}\n");
	fflush(stdout);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	dev_close(&d);
	free(buf);
	return err ? 1 : 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int run_probe(int idx, double secs, double warm)
{
	struct dev d;
	struct target t;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	uint64_t t0, ws, we, *lat;
	size_t nlat = 0, cap = 1 << 20;
	int err = 0;

	dev_open(&d, 16);
	if (!(buf = malloc(PROBE_LEN)) || !(lat = malloc(cap * sizeof(*lat))))
		die("malloc");
	if (!(mr = ibv_reg_mr(d.pd, buf, PROBE_LEN, IBV_ACCESS_LOCAL_WRITE)))
		die("ibv_reg_mr");
	qp = hello(&d, idx, 4, &t);
	t0 = strtoull(get_file("go"), NULL, 10);
	ws = t0 + (uint64_t)(warm * 1e9);
	we = ws + (uint64_t)(secs * 1e9);
	sleep_until(t0);
	for (uint64_t now = wall_ns(); now < we && !err; now = wall_ns()) {
		struct ibv_sge sge = { (uintptr_t)buf, PROBE_LEN, mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = 1, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
		}, *bad;
		struct ibv_wc wc;
		uint64_t a = now, b;

		wr.wr.rdma.remote_addr = t.addr;
		wr.wr.rdma.rkey = t.rkey;
		if (ibv_post_send(qp, &wr, &bad))
			die("ibv_post_send");
		wait_wc(&d, &wc, 1);
		b = wall_ns();
		if (wc.status != IBV_WC_SUCCESS)
			err = (int)wc.status;
		else if (a >= ws && nlat < cap)
			lat[nlat++] = b - a;
		usleep(200); /* a light flow: about 4000 probes a second at most */
	}
	qsort(lat, nlat, sizeof(*lat), cmp_u64);
#define PCT(p) (nlat ? (double)lat[(size_t)((double)(nlat - 1) * (p))] / 1000.0 : -1.0)
	printf("{\"ok\": %s, \"role\": \"probe\", \"samples\": %zu, \"p50_us\": %.1f, "
	       "\"p99_us\": %.1f, \"max_us\": %.1f, \"status\": \"%s\"",
	       err ? "false" : "true", nlat, PCT(0.5), PCT(0.99), PCT(1.0),
	       ibv_wc_status_str((enum ibv_wc_status)err));
#undef PCT
	print_counters();
	printf("}\n");
	fflush(stdout);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	dev_close(&d);
	free(buf);
	free(lat);
	return err ? 1 : 0;
}

int main(int argc, char **argv)
{
	size_t size = 256 << 10;
	int n = 2, idx = 0, depth = 8, opt;
	double secs = 3, warm = 0.5;
	const char *role;

	if (argc < 2) {
		fprintf(stderr, "usage: %s recv|send|probe -d DIR [-n N] [-i I] [-s SIZE] [-q DEPTH] "
			"[-t SECS] [-w WARM]\n", argv[0]);
		return 2;
	}
	role = argv[1];
	optind = 2;
	while ((opt = getopt(argc, argv, "d:n:i:s:q:t:w:")) != -1) {
		switch (opt) {
		case 'd': dir = optarg; break;
		case 'n': n = atoi(optarg); break;
		case 'i': idx = atoi(optarg); break;
		case 's': size = strtoull(optarg, NULL, 0); break;
		case 'q': depth = atoi(optarg); break;
		case 't': secs = atof(optarg); break;
		case 'w': warm = atof(optarg); break;
		default: return 2;
		}
	}
	if (n < 1 || n > MAX_SENDERS || idx < 0 || idx > MAX_SENDERS || depth < 1 || !size ||
	    secs <= 0 || warm < 0) {
		fprintf(stderr, "incast: bad arguments\n");
		return 2;
	}
	if (!strcmp(role, "recv"))
		return run_recv(n, size, depth);
	if (!strcmp(role, "send"))
		return run_send(idx, size, depth, secs, warm);
	if (!strcmp(role, "probe"))
		return run_probe(idx, secs, warm);
	fprintf(stderr, "incast: recv, send or probe, not %s\n", role);
	return 2;
}
