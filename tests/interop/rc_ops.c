/*
 * rc_ops: one RC operation in a loop between two processes, with data
 * verification, written against the standard libibverbs API only.
 *
 * It is the interop suite's own client (tests/interop/run.sh): the same
 * binary runs in the rxe guest on the kernel's soft-RoCE (Debian's
 * libibverbs + the rxe provider) and on the host under `uroce run`, so each
 * side can be either stack, and either side can be the requester.
 *
 *   rc_ops [options]            server: listens on TCP port -p
 *   rc_ops [options] ADDRESS    client: connects to ADDRESS:-p
 *
 * Like ibv_rc_pingpong, the two sides exchange LID/QPN/PSN/GID (and the MR's
 * rkey and address) over TCP, bring an RC QP to RTS, then step through the
 * sizes in lockstep over the TCP connection: the responder prepares its
 * memory (and posts a receive where the operation consumes one), says GO,
 * the requester posts the work request and checks its completion (READ data,
 * atomic return values), says DONE, the responder checks its receive
 * completion (opcode, byte_len, immediate data) and its memory (the data and
 * the untouched guard bytes around it) and answers with its verdict.
 *
 * Modes:
 *   normal  every size x iterations, verified (default)
 *   rnr     the responder posts its receive --rnr-delay-ms late; the
 *           requester's SEND must succeed (--expect ok, rnr_retry 7) or fail
 *           with IBV_WC_RNR_RETRY_EXC_ERR (--expect rnr, e.g. --rnr-retry 0)
 *   retry   the responder destroys its QP (--peer-qp destroy) or leaves it in
 *           INIT (--peer-qp init) after the exchange; the requester's first WR
 *           must complete with IBV_WC_RETRY_EXC_ERR (use --retry 1..6: rxe
 *           treats 7 as infinite) and the next one with IBV_WC_WR_FLUSH_ERR
 *
 * Output: progress on stderr with -v; the last line on stdout is
 *   rc_ops: OK <what> ...      exit 0
 *   rc_ops: FAIL <what>: why   exit 1   (2: bad arguments, 3: setup failed)
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum op { OP_SEND, OP_SEND_IMM, OP_WRITE, OP_WRITE_IMM, OP_READ, OP_CAS, OP_FADD, OP_N };
static const char *op_names[OP_N] = { "send", "send_imm", "write", "write_imm", "read", "cas", "fadd" };
enum mode { M_NORMAL, M_RNR, M_RETRY };
static const char *mode_names[] = { "normal", "rnr", "retry" };
enum expect { E_OK, E_RNR, E_RETRY };
static const char *expect_names[] = { "ok", "rnr", "retry" };

#define GUARD 64        /* bytes checked on each side of every target region */
#define MAXOFF 64       /* messages start at offsets 0..MAXOFF-1 */
#define MAX_SIZES 32

static struct {
	const char *dev, *addr;
	int port, ib_port, gidx, mtu, iters, verbose;
	int retry, rnr_retry, timeout, min_rnr_timer;
	int is_client, requester_is_client;
	enum op op;
	enum mode mode;
	enum expect expect;
	int expect_set;
	int rnr_delay_ms, wait_s, wc_tmo_ms;
	int inject_bad;         /* self-test: spoil one byte/value, the run must FAIL */
	const char *peer_qp;    /* retry mode: destroy | init */
	size_t sizes[MAX_SIZES];
	int nsizes;
	const char *sizes_arg;
} o = {
	.port = 18520, .ib_port = 1, .gidx = 0, .mtu = 1024, .iters = 3,
	.retry = 7, .rnr_retry = 7, .timeout = 14, .min_rnr_timer = 12,
	.requester_is_client = 1, .op = OP_WRITE, .mode = M_NORMAL,
	.rnr_delay_ms = 300, .wait_s = 30, .wc_tmo_ms = 20000, .peer_qp = "destroy",
};

static int am_req;           /* this process is the requester */
static char what[256];       /* for the result line */
static int sock = -1;

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static struct ibv_cq *scq, *rcq;
static struct ibv_comp_channel *sch, *rch;
static struct ibv_qp *qp;
static uint8_t *buf;
static size_t buflen;

struct peer {
	uint32_t lid, qpn, psn, rkey;
	uint64_t addr, len;
	union ibv_gid gid;
};
static struct peer me, them;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void vlog(const char *fmt, ...)
{
	va_list ap;
	if (!o.verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "rc_ops[%s]: ", o.is_client ? "client" : "server");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* the result line, then exit */
static void __attribute__((noreturn, format(printf, 2, 3))) finish(int rc, const char *fmt, ...)
{
	va_list ap;
	fflush(stderr);
	printf("rc_ops: %s %s", rc == 0 ? "OK" : "FAIL", what);
	if (fmt && *fmt) {
		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	fflush(stdout);
	exit(rc);
}

/* ------------------------------------------------------------------ TCP */

static int send_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int send_line(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(line) - 1)
		return -1;
	line[n++] = '\n';
	for (int off = 0; off < n;) {
		ssize_t w = send(sock, line + off, n - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		off += w;
	}
	return 0;
}

/* one line (without the newline) within tmo_ms; 0 ok, -1 error/EOF, -2 timeout */
static int recv_line(char *line, size_t max, int tmo_ms)
{
	size_t n = 0;
	double end = now_s() + tmo_ms / 1000.0;
	for (;;) {
		int left = (int)((end - now_s()) * 1000);
		struct pollfd p = { .fd = sock, .events = POLLIN };
		if (left <= 0)
			return -2;
		int r = poll(&p, 1, left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			return -2;
		char c;
		ssize_t got = recv(sock, &c, 1, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -1;
		if (c == '\n') {
			line[n] = 0;
			return 0;
		}
		if (n + 1 < max)
			line[n++] = c;
	}
}

/* the peer's next line; a closed connection or a timeout ends the run */
static void expect_line(char *line, size_t max, int tmo_ms, const char *waiting_for)
{
	int r = recv_line(line, max, tmo_ms);
	if (r == -2)
		finish(1, "no %s from the peer within %d ms", waiting_for, tmo_ms);
	if (r < 0)
		finish(1, "peer closed the TCP connection while we waited for %s (see its output)", waiting_for);
	vlog("<- %s", line);
	if (!strncmp(line, "FAIL ", 5))
		finish(1, "peer reports: %s", line + 5);
}

static void tcp_connect_or_listen(void)
{
	double end = now_s() + o.wait_s;
	int one = 1;
	if (o.is_client) {
		struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
		char port[16];
		snprintf(port, sizeof(port), "%d", o.port);
		int e = getaddrinfo(o.addr, port, &hints, &ai);
		if (e)
			finish(3, "getaddrinfo %s: %s", o.addr, gai_strerror(e));
		for (;;) {
			sock = socket(AF_INET, SOCK_STREAM, 0);
			if (sock < 0)
				finish(3, "socket: %s", strerror(errno));
			if (connect(sock, ai->ai_addr, ai->ai_addrlen) == 0)
				break;
			int err = errno;
			close(sock);
			sock = -1;
			if (now_s() > end)
				finish(3, "connect %s:%d: %s (for %d s)", o.addr, o.port, strerror(err), o.wait_s);
			usleep(100000);
		}
		freeaddrinfo(ai);
	} else {
		struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(o.port),
					   .sin_addr.s_addr = htonl(INADDR_ANY) };
		int ls = socket(AF_INET, SOCK_STREAM, 0);
		if (ls < 0)
			finish(3, "socket: %s", strerror(errno));
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(ls, (struct sockaddr *)&sin, sizeof(sin)) || listen(ls, 1))
			finish(3, "listen on tcp port %d: %s", o.port, strerror(errno));
		vlog("listening on tcp port %d", o.port);
		struct pollfd p = { .fd = ls, .events = POLLIN };
		int r = poll(&p, 1, o.wait_s * 1000);
		if (r <= 0)
			finish(3, "no client connected to tcp port %d within %d s", o.port, o.wait_s);
		sock = accept(ls, NULL, NULL);
		if (sock < 0)
			finish(3, "accept: %s", strerror(errno));
		close(ls);
	}
	setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---------------------------------------------------------------- verbs */

static int wait_wc(struct ibv_cq *cq, struct ibv_comp_channel *ch, struct ibv_wc *wc, int tmo_ms)
{
	double end = now_s() + tmo_ms / 1000.0;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;   /* 1, or <0 on error */
		if (ibv_req_notify_cq(cq, 0))
			return -1;
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
		int left = (int)((end - now_s()) * 1000);
		if (left <= 0)
			return 0;
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };
		if (left > 50)
			left = 50;   /* re-poll now and then even without an event */
		if (poll(&p, 1, left) > 0) {
			struct ibv_cq *ecq;
			void *ectx;
			if (ibv_get_cq_event(ch, &ecq, &ectx) == 0)
				ibv_ack_cq_events(ecq, 1);
		}
	}
}

static enum ibv_mtu mtu_enum(int m)
{
	switch (m) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	}
	return 0;
}

static void setup_verbs(size_t maxsize)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	if (!list || n == 0)
		finish(3, "no RDMA devices (ibv_get_device_list)");
	for (int i = 0; i < n; i++)
		if (!o.dev || !strcmp(ibv_get_device_name(list[i]), o.dev)) {
			dev = list[i];
			break;
		}
	if (!dev)
		finish(3, "no device %s", o.dev);
	o.dev = strdup(ibv_get_device_name(dev));
	ctx = ibv_open_device(dev);
	if (!ctx)
		finish(3, "ibv_open_device %s: %s", o.dev, strerror(errno));
	ibv_free_device_list(list);

	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, o.ib_port, &pa))
		finish(3, "ibv_query_port: %s", strerror(errno));
	if (pa.state != IBV_PORT_ACTIVE)
		finish(3, "%s port %d is not ACTIVE", o.dev, o.ib_port);
	if (mtu_enum(o.mtu) > pa.active_mtu)
		vlog("note: -m %d above the port's active MTU (enum %d)", o.mtu, pa.active_mtu);
	if (ibv_query_gid(ctx, o.ib_port, o.gidx, &me.gid))
		finish(3, "ibv_query_gid %d: %s", o.gidx, strerror(errno));
	me.lid = pa.lid;

	pd = ibv_alloc_pd(ctx);
	if (!pd)
		finish(3, "ibv_alloc_pd: %s", strerror(errno));
	buflen = maxsize + 2 * GUARD + 2 * MAXOFF + 64;
	if (posix_memalign((void **)&buf, 4096, buflen))
		finish(3, "out of memory for %zu bytes", buflen);
	memset(buf, 0, buflen);
	mr = ibv_reg_mr(pd, buf, buflen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr)
		finish(3, "ibv_reg_mr %zu bytes: %s", buflen, strerror(errno));
	sch = ibv_create_comp_channel(ctx);
	rch = ibv_create_comp_channel(ctx);
	if (!sch || !rch)
		finish(3, "ibv_create_comp_channel: %s", strerror(errno));
	fcntl(sch->fd, F_SETFL, fcntl(sch->fd, F_GETFL) | O_NONBLOCK);
	fcntl(rch->fd, F_SETFL, fcntl(rch->fd, F_GETFL) | O_NONBLOCK);
	scq = ibv_create_cq(ctx, 16, NULL, sch, 0);
	rcq = ibv_create_cq(ctx, 16, NULL, rch, 0);
	if (!scq || !rcq)
		finish(3, "ibv_create_cq: %s", strerror(errno));
	struct ibv_qp_init_attr ia = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		finish(3, "ibv_create_qp: %s", strerror(errno));
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = o.ib_port,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		finish(3, "modify QP to INIT: %s", strerror(errno));
	srand48(getpid() ^ (long)(now_s() * 1e6));
	me.qpn = qp->qp_num;
	me.psn = lrand48() & 0xffffff;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	me.len = buflen;
}

static void to_rts(void)
{
	struct ibv_device_attr da;
	int rd = 4;
	if (ibv_query_device(ctx, &da) == 0) {
		if (da.max_qp_rd_atom < rd)
			rd = da.max_qp_rd_atom;
		if (da.max_qp_init_rd_atom < rd)
			rd = da.max_qp_init_rd_atom;
		if (rd < 1)
			rd = 1;
	}
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = mtu_enum(o.mtu), .dest_qp_num = them.qpn,
		.rq_psn = them.psn, .max_dest_rd_atomic = rd, .min_rnr_timer = o.min_rnr_timer,
		.ah_attr = { .is_global = 1, .dlid = them.lid, .sl = 0, .port_num = o.ib_port,
			     .grh = { .dgid = them.gid, .sgid_index = o.gidx, .hop_limit = 64 } },
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		finish(3, "modify QP to RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = o.timeout;
	a.retry_cnt = o.retry;
	a.rnr_retry = o.rnr_retry;
	a.sq_psn = me.psn;
	a.max_rd_atomic = rd;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		finish(3, "modify QP to RTS: %s", strerror(errno));
}

static void gid_hex(const union ibv_gid *g, char *out)
{
	for (int i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02x", g->raw[i]);
}

static int hex_gid(const char *s, union ibv_gid *g)
{
	if (strlen(s) != 32)
		return -1;
	for (int i = 0; i < 16; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		g->raw[i] = v;
	}
	return 0;
}

/* Both sides must run the same test: the line carries the settings, and a
 * mismatch ends both runs with the reason. */
static void exchange(void)
{
	char line[512], g[40], pg[40], pop[32], pmode[32], preq[16];
	int pmtu, piters, pn;
	unsigned long long paddr, plen;
	gid_hex(&me.gid, g);
	if (send_line("RCOPS1 %x %x %x %s %x %llx %llx %s %s %s %d %d %d", me.lid, me.qpn, me.psn, g,
		      me.rkey, (unsigned long long)me.addr, (unsigned long long)me.len, op_names[o.op],
		      mode_names[o.mode], o.requester_is_client ? "client" : "server", o.mtu, o.iters,
		      o.nsizes))
		finish(1, "TCP send failed");
	expect_line(line, sizeof(line), o.wait_s * 1000, "QP information");
	if (sscanf(line, "RCOPS1 %x %x %x %39s %x %llx %llx %31s %31s %15s %d %d %d", &them.lid, &them.qpn,
		   &them.psn, pg, &them.rkey, &paddr, &plen, pop, pmode, preq, &pmtu, &piters, &pn) != 13 ||
	    hex_gid(pg, &them.gid))
		finish(1, "bad QP information from the peer: %.100s", line);
	them.addr = paddr;
	them.len = plen;
	if (strcmp(pop, op_names[o.op]) || strcmp(pmode, mode_names[o.mode]) ||
	    strcmp(preq, o.requester_is_client ? "client" : "server") || pmtu != o.mtu ||
	    piters != o.iters || pn != o.nsizes)
		finish(2, "the peer runs a different test: op %s mode %s requester %s mtu %d iters %d sizes %d",
		       pop, pmode, preq, pmtu, piters, pn);
	if (them.len < buflen)
		finish(2, "the peer's buffer (%llu bytes) is smaller than ours (%zu): different -s?", plen, buflen);
	vlog("local  %s lid %u qpn 0x%06x psn 0x%06x gid %s", o.dev, me.lid, me.qpn, me.psn, g);
	vlog("remote lid %u qpn 0x%06x psn 0x%06x gid %s rkey 0x%x addr 0x%llx", them.lid, them.qpn,
	     them.psn, pg, them.rkey, paddr);
}

/* ---------------------------------------------------------------- data */

static uint64_t mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static uint8_t pat(uint64_t seed, size_t i)
{
	return (uint8_t)(mix(seed ^ ((uint64_t)(i / 8) << 20)) >> (8 * (i % 8)));
}

static void fill_pat(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(seed, i);
}

/* first mismatch of p[0..n) against the pattern, or -1 */
static long check_pat(const uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pat(seed, i))
			return (long)i;
	return -1;
}

static long check_fill(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return (long)i;
	return -1;
}

static uint64_t seed_of(size_t size, int it) { return mix(size * 1000003u + it * 7919u + 0x5eed); }
static uint32_t imm_of(size_t size, int it) { return 0x5A000000u ^ (uint32_t)(size * 2654435761u) ^ (uint32_t)it; }
static uint8_t fill_of(int it) { return (uint8_t)(0xA5 ^ (it * 0x3b)); }
static size_t roff_of(int it) { return GUARD + (size_t)(it * 5) % MAXOFF; }   /* responder's offset */
static size_t loff_of(int it) { return GUARD + (size_t)(it * 3 + 1) % MAXOFF; }   /* requester's */
static size_t aoff_of(int it) { return GUARD + 8 * (size_t)(it % 8); }        /* 8-aligned */
static uint64_t v0_of(int it) { return it % 2 ? 0xFFFFFFFFFFFFFFF0ull - it : mix(it) ; }

static int msg_ok;  /* formatted failure goes to errbuf */
static char errbuf[300];
static int fail_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail_msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	va_end(ap);
	msg_ok = 0;
	return -1;
}

static int post_recv_at(size_t off, size_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf + off, .length = (uint32_t)len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 0x5245, .sg_list = &sge, .num_sge = len ? 1 : 0 }, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

static int uses_recv(enum op op) { return op == OP_SEND || op == OP_SEND_IMM || op == OP_WRITE_IMM; }

/* post one request of the op: data ops use size at loff/roff; atomics use
 * compare_add/swap at aoff. */
static int post_req(enum op op, size_t size, int it, uint64_t cmp_add, uint64_t swap, uint64_t wrid)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf + loff_of(it), .length = (uint32_t)size, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wrid, .sg_list = &sge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED }, *bad;
	switch (op) {
	case OP_SEND: wr.opcode = IBV_WR_SEND; break;
	case OP_SEND_IMM: wr.opcode = IBV_WR_SEND_WITH_IMM; wr.imm_data = htonl(imm_of(size, it)); break;
	case OP_WRITE: wr.opcode = IBV_WR_RDMA_WRITE; break;
	case OP_WRITE_IMM: wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM; wr.imm_data = htonl(imm_of(size, it)); break;
	case OP_READ: wr.opcode = IBV_WR_RDMA_READ; break;
	case OP_CAS: wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP; break;
	case OP_FADD: wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD; break;
	default: return -1;
	}
	if (op == OP_WRITE || op == OP_WRITE_IMM || op == OP_READ) {
		wr.wr.rdma.remote_addr = them.addr + roff_of(it);
		wr.wr.rdma.rkey = them.rkey;
	}
	if (op == OP_CAS || op == OP_FADD) {
		sge.addr = (uintptr_t)buf + aoff_of(it);
		sge.length = 8;
		wr.wr.atomic.remote_addr = them.addr + aoff_of(it);
		wr.wr.atomic.rkey = them.rkey;
		wr.wr.atomic.compare_add = cmp_add;
		wr.wr.atomic.swap = swap;
	}
	return ibv_post_send(qp, &wr, &bad) ? -1 : 0;
}

static enum ibv_wc_opcode wc_opcode_of(enum op op)
{
	switch (op) {
	case OP_SEND: case OP_SEND_IMM: return IBV_WC_SEND;
	case OP_WRITE: case OP_WRITE_IMM: return IBV_WC_RDMA_WRITE;
	case OP_READ: return IBV_WC_RDMA_READ;
	case OP_CAS: return IBV_WC_COMP_SWAP;
	default: return IBV_WC_FETCH_ADD;
	}
}

/* wait for the send completion of wrid, check it; returns 0 or fail_msg */
static int req_complete(enum op op, uint64_t wrid, enum ibv_wc_status want, struct ibv_wc *wc)
{
	int r = wait_wc(scq, sch, wc, o.wc_tmo_ms);
	if (r < 0)
		return fail_msg("ibv_poll_cq (send CQ) failed");
	if (r == 0)
		return fail_msg("no send completion within %d ms", o.wc_tmo_ms);
	if (wc->status != want)
		return fail_msg("send completion status %s (%d), vendor_err 0x%x, expected %s", ibv_wc_status_str(wc->status),
				wc->status, wc->vendor_err, ibv_wc_status_str(want));
	if (wc->wr_id != wrid)
		return fail_msg("send completion wr_id 0x%" PRIx64 ", expected 0x%" PRIx64, wc->wr_id, wrid);
	if (want == IBV_WC_SUCCESS && wc->opcode != wc_opcode_of(op))
		return fail_msg("send completion opcode %d, expected %d", wc->opcode, wc_opcode_of(op));
	if (wc->qp_num != qp->qp_num)
		return fail_msg("send completion qp_num 0x%x, expected 0x%x", wc->qp_num, qp->qp_num);
	return 0;
}

/* ---- requester side of one iteration (normal mode); 0 or fail_msg */
static int req_iter(enum op op, size_t size, int it)
{
	struct ibv_wc wc;
	uint64_t seed = seed_of(size, it);
	uint8_t f = fill_of(it) ^ 0xff;
	size_t lo = loff_of(it);
	if (op == OP_CAS || op == OP_FADD) {
		uint64_t v0 = v0_of(it), a1 = mix(it + 11), a2 = mix(it + 12), *res = (uint64_t *)(buf + aoff_of(it));
		*res = 0x1111111111111111ull;
		if (op == OP_CAS) {
			/* a matching compare swaps, a mismatching one does not; both return the old value */
			if (post_req(op, 8, it, v0, a1, 1) || req_complete(op, 1, IBV_WC_SUCCESS, &wc))
				return msg_ok ? fail_msg("ibv_post_send CAS: %s", strerror(errno)) : -1;
			if (*res != v0)
				return fail_msg("CAS #1 returned 0x%016" PRIx64 ", expected the original 0x%016" PRIx64, *res, v0);
			*res = 0x2222222222222222ull;
			if (post_req(op, 8, it, v0 ^ 1, a2, 2) || req_complete(op, 2, IBV_WC_SUCCESS, &wc))
				return msg_ok ? fail_msg("ibv_post_send CAS: %s", strerror(errno)) : -1;
			if (*res != a1)
				return fail_msg("CAS #2 (compare mismatch) returned 0x%016" PRIx64 ", expected 0x%016" PRIx64,
						*res, a1);
		} else {
			if (post_req(op, 8, it, a1, 0, 1) || req_complete(op, 1, IBV_WC_SUCCESS, &wc))
				return msg_ok ? fail_msg("ibv_post_send FETCH_ADD: %s", strerror(errno)) : -1;
			if (*res != v0)
				return fail_msg("FETCH_ADD #1 returned 0x%016" PRIx64 ", expected 0x%016" PRIx64, *res, v0);
			*res = 0x2222222222222222ull;
			if (post_req(op, 8, it, a2, 0, 2) || req_complete(op, 2, IBV_WC_SUCCESS, &wc))
				return msg_ok ? fail_msg("ibv_post_send FETCH_ADD: %s", strerror(errno)) : -1;
			if (*res != v0 + a1)
				return fail_msg("FETCH_ADD #2 returned 0x%016" PRIx64 ", expected 0x%016" PRIx64, *res, v0 + a1);
		}
		return 0;
	}
	if (op == OP_READ) {
		memset(buf + lo - GUARD, f, size + 2 * GUARD);
	} else {
		memset(buf + lo - GUARD, f, size + 2 * GUARD);
		fill_pat(buf + lo, size, seed);
		if (o.inject_bad)
			buf[lo + size - 1] ^= 0x01;
	}
	if (post_req(op, size, it, 0, 0, 1))
		return fail_msg("ibv_post_send: %s", strerror(errno));
	if (req_complete(op, 1, IBV_WC_SUCCESS, &wc))
		return -1;
	if (op == OP_READ) {
		long bad = check_pat(buf + lo, size, seed);
		if (bad >= 0)
			return fail_msg("READ data wrong at byte %ld of %zu: 0x%02x, expected 0x%02x", bad, size, buf[lo + bad],
					pat(seed, bad));
		if ((bad = check_fill(buf + lo - GUARD, GUARD, f)) >= 0)
			return fail_msg("READ wrote before the local buffer (byte -%ld)", GUARD - bad);
		if ((bad = check_fill(buf + lo + size, GUARD, f)) >= 0)
			return fail_msg("READ wrote past the %zu bytes asked for (byte +%ld)", size, bad);
	}
	return 0;
}

/* ---- responder side: prepare memory before GO */
static int resp_prepare(enum op op, size_t size, int it)
{
	size_t ro = roff_of(it);
	uint8_t f = fill_of(it);
	if (op == OP_CAS || op == OP_FADD) {
		*(uint64_t *)(buf + aoff_of(it)) = v0_of(it) + (o.inject_bad ? 1 : 0);
		return 0;
	}
	memset(buf + ro - GUARD, f, size + 2 * GUARD);
	if (op == OP_READ) {
		fill_pat(buf + ro, size, seed_of(size, it));
		if (o.inject_bad)
			buf[ro + size - 1] ^= 0x01;
	}
	if (op == OP_SEND || op == OP_SEND_IMM) {
		/* room for GUARD more bytes than sent: they must stay untouched */
		if (post_recv_at(ro, size + GUARD))
			return fail_msg("ibv_post_recv: %s", strerror(errno));
	} else if (op == OP_WRITE_IMM) {
		if (post_recv_at(0, 0))
			return fail_msg("ibv_post_recv (no SGE): %s", strerror(errno));
	}
	return 0;
}

static int resp_check_recv(enum op op, size_t size, int it, int tmo_ms)
{
	struct ibv_wc wc;
	int r = wait_wc(rcq, rch, &wc, tmo_ms);
	if (r < 0)
		return fail_msg("ibv_poll_cq (recv CQ) failed");
	if (r == 0)
		return fail_msg("no receive completion within %d ms", tmo_ms);
	if (wc.status != IBV_WC_SUCCESS)
		return fail_msg("receive completion status %s (%d)", ibv_wc_status_str(wc.status), wc.status);
	enum ibv_wc_opcode want = op == OP_WRITE_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
	if (wc.opcode != want)
		return fail_msg("receive completion opcode %d, expected %d", wc.opcode, want);
	if (wc.byte_len != size)
		return fail_msg("receive completion byte_len %u, expected %zu", wc.byte_len, size);
	if (wc.qp_num != qp->qp_num)
		return fail_msg("receive completion qp_num 0x%x, expected 0x%x", wc.qp_num, qp->qp_num);
	if (op == OP_SEND) {
		if (wc.wc_flags & IBV_WC_WITH_IMM)
			return fail_msg("SEND without immediate completed with IBV_WC_WITH_IMM");
	} else {
		if (!(wc.wc_flags & IBV_WC_WITH_IMM))
			return fail_msg("no IBV_WC_WITH_IMM in the receive completion");
		if (ntohl(wc.imm_data) != imm_of(size, it))
			return fail_msg("immediate data 0x%08x, expected 0x%08x", ntohl(wc.imm_data), imm_of(size, it));
	}
	return 0;
}

static int resp_check_mem(enum op op, size_t size, int it)
{
	size_t ro = roff_of(it);
	uint8_t f = fill_of(it);
	long bad;
	if (op == OP_CAS || op == OP_FADD) {
		uint64_t v = *(volatile uint64_t *)(buf + aoff_of(it));
		uint64_t want = op == OP_CAS ? mix(it + 11) : v0_of(it) + mix(it + 11) + mix(it + 12);
		if (v != want)
			return fail_msg("target after the atomics 0x%016" PRIx64 ", expected 0x%016" PRIx64, v, want);
		return 0;
	}
	if (op == OP_READ) {
		if (!o.inject_bad && (bad = check_pat(buf + ro, size, seed_of(size, it))) >= 0)
			return fail_msg("READ source changed at byte %ld", bad);
		return 0;
	}
	if ((bad = check_pat(buf + ro, size, seed_of(size, it))) >= 0)
		return fail_msg("data wrong at byte %ld of %zu: 0x%02x, expected 0x%02x", bad, size, buf[ro + bad],
				pat(seed_of(size, it), bad));
	if ((bad = check_fill(buf + ro - GUARD, GUARD, f)) >= 0)
		return fail_msg("bytes before the target were overwritten (byte -%ld)", GUARD - bad);
	if ((bad = check_fill(buf + ro + size, GUARD, f)) >= 0)
		return fail_msg("bytes after the %zu-byte message were overwritten (byte +%ld)", size, bad);
	return 0;
}

/* ---------------------------------------------------------------- modes */

static void run_normal(void)
{
	char line[512];
	double t0 = now_s();
	uint64_t bytes = 0;
	int n = 0;
	for (int s = 0; s < o.nsizes; s++) {
		size_t size = o.sizes[s];
		for (int it = 0; it < o.iters; it++) {
			msg_ok = 1;
			if (am_req) {
				expect_line(line, sizeof(line), o.wc_tmo_ms + 5000, "GO");
				unsigned long long gs;
				int git;
				if (sscanf(line, "GO %llu %d", &gs, &git) != 2 || gs != size || git != it)
					finish(1, "out of step: peer says '%.60s', we are at size %zu iteration %d", line, size, it);
				if (req_iter(o.op, size, it)) {
					send_line("FAIL requester, size %zu iteration %d: %s", size, it, errbuf);
					finish(1, "size %zu iteration %d: %s", size, it, errbuf);
				}
				send_line("DONE %zu %d", size, it);
				expect_line(line, sizeof(line), o.wc_tmo_ms + 5000, "the responder's verdict");
				if (strncmp(line, "OK ", 3))
					finish(1, "unexpected verdict line '%.60s'", line);
			} else {
				if (resp_prepare(o.op, size, it)) {
					send_line("FAIL responder, size %zu iteration %d: %s", size, it, errbuf);
					finish(1, "size %zu iteration %d: %s", size, it, errbuf);
				}
				send_line("GO %zu %d", size, it);
				expect_line(line, sizeof(line), o.wc_tmo_ms + 5000, "DONE");
				if ((uses_recv(o.op) && resp_check_recv(o.op, size, it, o.wc_tmo_ms)) ||
				    resp_check_mem(o.op, size, it)) {
					send_line("FAIL responder, size %zu iteration %d: %s", size, it, errbuf);
					finish(1, "size %zu iteration %d: %s", size, it, errbuf);
				}
				send_line("OK %zu %d", size, it);
			}
			bytes += (o.op == OP_CAS || o.op == OP_FADD) ? 16 : size;
			n++;
		}
		vlog("size %zu: %d iterations ok", size, o.iters);
	}
	double dt = now_s() - t0;
	char sz[200] = "";
	for (int s = 0, l = 0; s < o.nsizes && l < (int)sizeof(sz) - 12; s++)
		l += snprintf(sz + l, sizeof(sz) - l, "%s%zu", s ? "," : "", o.sizes[s]);
	finish(0, "%d messages (sizes %s x %d), %" PRIu64 " bytes in %.2f s, verified", n, sz, o.iters, bytes, dt);
}

static void run_rnr(void)
{
	char line[512];
	size_t size = o.sizes[0];
	struct ibv_wc wc;
	msg_ok = 1;
	if (am_req) {
		expect_line(line, sizeof(line), o.wait_s * 1000, "GO");
		uint64_t seed = seed_of(size, 0);
		fill_pat(buf + loff_of(0), size, seed);
		double t0 = now_s();
		if (post_req(o.op, size, 0, 0, 0, 1))
			finish(1, "ibv_post_send: %s", strerror(errno));
		enum ibv_wc_status want = o.expect == E_RNR ? IBV_WC_RNR_RETRY_EXC_ERR : IBV_WC_SUCCESS;
		if (req_complete(o.op, 1, want, &wc)) {
			send_line("FAIL requester: %s", errbuf);
			finish(1, "%s (after %.0f ms)", errbuf, (now_s() - t0) * 1000);
		}
		double ms = (now_s() - t0) * 1000;
		if (o.expect == E_OK && ms < o.rnr_delay_ms * 0.8) {
			send_line("FAIL requester: completed after %.0f ms, before the receive was posted", ms);
			finish(1, "completed after %.0f ms, before the responder posted its receive (%d ms)", ms, o.rnr_delay_ms);
		}
		send_line("DONE %.0f", ms);
		expect_line(line, sizeof(line), o.wc_tmo_ms + o.rnr_delay_ms + 5000, "the responder's verdict");
		if (o.expect == E_RNR)
			finish(0, "%s as expected after %.1f ms", ibv_wc_status_str(wc.status), ms);
		finish(0, "completed after %.0f ms, receive posted after %d ms (RNR NAKs, retried), verified", ms,
		       o.rnr_delay_ms);
	}
	memset(buf + roff_of(0) - GUARD, fill_of(0), size + 2 * GUARD);
	send_line("GO");
	usleep(o.rnr_delay_ms * 1000);
	if (o.op == OP_WRITE_IMM ? post_recv_at(0, 0) : post_recv_at(roff_of(0), size + GUARD))
		finish(1, "ibv_post_recv: %s", strerror(errno));
	vlog("receive posted after %d ms", o.rnr_delay_ms);
	expect_line(line, sizeof(line), o.wc_tmo_ms + 5000, "DONE");
	if (o.expect == E_RNR) {
		/* the requester gave up: nothing may have been received */
		if (wait_wc(rcq, rch, &wc, 200) != 0)
			finish(1, "a receive completed (status %s) although the requester gave up",
			       ibv_wc_status_str(wc.status));
		send_line("OK");
		finish(0, "requester got RNR_RETRY_EXC_ERR as expected, nothing received");
	}
	if (resp_check_recv(o.op, size, 0, o.wc_tmo_ms) || resp_check_mem(o.op, size, 0)) {
		send_line("FAIL responder: %s", errbuf);
		finish(1, "%s", errbuf);
	}
	send_line("OK");
	finish(0, "receive posted after %d ms, %zu-byte message received after RNR retries, verified", o.rnr_delay_ms,
	       size);
}

static void run_retry(void)
{
	char line[512];
	size_t size = o.sizes[0];
	struct ibv_wc wc;
	msg_ok = 1;
	if (am_req) {
		expect_line(line, sizeof(line), o.wait_s * 1000, "GO");
		double t0 = now_s();
		if (post_req(o.op, size, 0, 0, 0, 1) || post_req(o.op, size, 1, 0, 0, 2))
			finish(1, "ibv_post_send: %s", strerror(errno));
		if (req_complete(o.op, 1, IBV_WC_RETRY_EXC_ERR, &wc)) {
			send_line("FAIL requester: %s", errbuf);
			finish(1, "%s (after %.0f ms)", errbuf, (now_s() - t0) * 1000);
		}
		double ms = (now_s() - t0) * 1000;
		/* the second WR is flushed */
		if (req_complete(o.op, 2, IBV_WC_WR_FLUSH_ERR, &wc)) {
			send_line("FAIL requester: %s", errbuf);
			finish(1, "second WR: %s", errbuf);
		}
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;
		if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) == 0 && a.qp_state != IBV_QPS_ERR) {
			send_line("FAIL requester: QP state %d after the error, not ERR", a.qp_state);
			finish(1, "QP state %d after RETRY_EXC_ERR, expected IBV_QPS_ERR", a.qp_state);
		}
		double one = 4.096e-3 * (1 << o.timeout);   /* ms */
		send_line("DONE %.0f", ms);
		expect_line(line, sizeof(line), 10000, "the peer's OK");
		finish(0, "transport retry counter exceeded after %.0f ms (retry_cnt %d, timeout %d = %.1f ms), "
		       "next WR flushed, QP in ERR", ms, o.retry, o.timeout, one);
	}
	if (!strcmp(o.peer_qp, "destroy")) {
		if (ibv_destroy_qp(qp))
			finish(3, "ibv_destroy_qp: %s", strerror(errno));
		qp = NULL;
	}
	send_line("GO");
	expect_line(line, sizeof(line), o.wc_tmo_ms + 5000, "DONE");
	send_line("OK");
	finish(0, "peer QP %s; requester got RETRY_EXC_ERR (%s ms)", !strcmp(o.peer_qp, "destroy") ? "destroyed" : "left in INIT",
	       line + 5);
}

/* -------------------------------------------------------------- options */

static void usage(int rc)
{
	fprintf(rc ? stderr : stdout,
		"usage: rc_ops [options]            server (listens on -p)\n"
		"       rc_ops [options] ADDRESS    client\n"
		"  -o, --op OP            send|send_imm|write|write_imm|read|cas|fadd (default write)\n"
		"  -s, --sizes LIST       comma list of message sizes; 'mtu', 'mtu-1', 'mtu+1', '3mtu+7'\n"
		"                         allowed (default 1,63,mtu-1,mtu,mtu+1,3mtu+7,65536,1048576; atomics 8)\n"
		"  -n, --iters N          iterations per size (default 3)\n"
		"  -p, --port PORT        TCP port (default 18520)\n"
		"  -d, --ib-dev DEV       device (default the first)\n"
		"  -i, --ib-port N        port (default 1)\n"
		"  -g, --gid-idx N        local GID index (default 0)\n"
		"  -m, --mtu N            path MTU 256..4096 (default 1024)\n"
		"  -r, --requester WHO    client|server: who posts the requests (default client)\n"
		"      --retry N          retry_cnt (default 7)\n"
		"      --rnr-retry N      rnr_retry (default 7 = infinite)\n"
		"      --timeout N        local ACK timeout, 4.096 us * 2^N (default 14)\n"
		"      --min-rnr-timer N  responder's min_rnr_timer (default 12)\n"
		"      --mode M           normal|rnr|retry (default normal)\n"
		"      --expect E         ok|rnr|retry: outcome of rnr mode (default ok)\n"
		"      --rnr-delay-ms N   rnr mode: the responder posts its receive this late (default 300)\n"
		"      --peer-qp HOW      retry mode: destroy|init, what the responder does with its QP\n"
		"      --wait S           seconds to wait for the peer's TCP connection (default 30)\n"
		"      --wc-timeout MS    limit for each completion (default 20000)\n"
		"      --inject-bad       self-test: spoil one byte (atomics: the initial value); must FAIL\n"
		"  -v, --verbose          progress on stderr\n");
	exit(rc);
}

static size_t parse_size(const char *s)
{
	char *end;
	if (!strcmp(s, "mtu")) return o.mtu;
	if (!strcmp(s, "mtu-1")) return o.mtu - 1;
	if (!strcmp(s, "mtu+1")) return o.mtu + 1;
	if (!strcmp(s, "3mtu+7")) return 3 * (size_t)o.mtu + 7;
	unsigned long long v = strtoull(s, &end, 0);
	if (*end == 'k' || *end == 'K') { v <<= 10; end++; }
	else if (*end == 'm' || *end == 'M') { v <<= 20; end++; }
	if (*end || v == 0 || v > (1ull << 30)) {
		fprintf(stderr, "rc_ops: bad size '%s'\n", s);
		exit(2);
	}
	return (size_t)v;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "op", 1, 0, 'o' }, { "sizes", 1, 0, 's' }, { "iters", 1, 0, 'n' }, { "port", 1, 0, 'p' },
		{ "ib-dev", 1, 0, 'd' }, { "ib-port", 1, 0, 'i' }, { "gid-idx", 1, 0, 'g' }, { "mtu", 1, 0, 'm' },
		{ "requester", 1, 0, 'r' }, { "retry", 1, 0, 1 }, { "rnr-retry", 1, 0, 2 }, { "timeout", 1, 0, 3 },
		{ "min-rnr-timer", 1, 0, 4 }, { "mode", 1, 0, 5 }, { "expect", 1, 0, 6 }, { "rnr-delay-ms", 1, 0, 7 },
		{ "peer-qp", 1, 0, 8 }, { "wait", 1, 0, 9 }, { "wc-timeout", 1, 0, 10 }, { "verbose", 0, 0, 'v' },
		{ "inject-bad", 0, 0, 11 }, { "help", 0, 0, 'h' }, { 0 }
	};
	int c, i;
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(what, sizeof(what), "(setup)");
	while ((c = getopt_long(argc, argv, "o:s:n:p:d:i:g:m:r:vh", lo, NULL)) != -1) {
		switch (c) {
		case 'o':
			for (i = 0; i < OP_N && strcmp(optarg, op_names[i]); i++)
				;
			if (i == OP_N) { fprintf(stderr, "rc_ops: unknown op %s\n", optarg); return 2; }
			o.op = i;
			break;
		case 's': o.sizes_arg = optarg; break;
		case 'n': o.iters = atoi(optarg); break;
		case 'p': o.port = atoi(optarg); break;
		case 'd': o.dev = optarg; break;
		case 'i': o.ib_port = atoi(optarg); break;
		case 'g': o.gidx = atoi(optarg); break;
		case 'm': o.mtu = atoi(optarg); break;
		case 'r':
			if (!strcmp(optarg, "client")) o.requester_is_client = 1;
			else if (!strcmp(optarg, "server")) o.requester_is_client = 0;
			else { fprintf(stderr, "rc_ops: --requester client|server\n"); return 2; }
			break;
		case 1: o.retry = atoi(optarg); break;
		case 2: o.rnr_retry = atoi(optarg); break;
		case 3: o.timeout = atoi(optarg); break;
		case 4: o.min_rnr_timer = atoi(optarg); break;
		case 5:
			for (i = 0; i < 3 && strcmp(optarg, mode_names[i]); i++)
				;
			if (i == 3) { fprintf(stderr, "rc_ops: --mode normal|rnr|retry\n"); return 2; }
			o.mode = i;
			break;
		case 6:
			for (i = 0; i < 3 && strcmp(optarg, expect_names[i]); i++)
				;
			if (i == 3) { fprintf(stderr, "rc_ops: --expect ok|rnr|retry\n"); return 2; }
			o.expect = i;
			o.expect_set = 1;
			break;
		case 7: o.rnr_delay_ms = atoi(optarg); break;
		case 8: o.peer_qp = optarg; break;
		case 9: o.wait_s = atoi(optarg); break;
		case 10: o.wc_tmo_ms = atoi(optarg); break;
		case 11: o.inject_bad = 1; break;
		case 'v': o.verbose = 1; break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	if (optind < argc)
		o.addr = argv[optind++];
	if (optind < argc)
		usage(2);
	o.is_client = o.addr != NULL;
	if (!mtu_enum(o.mtu)) { fprintf(stderr, "rc_ops: -m must be 256, 512, 1024, 2048 or 4096\n"); return 2; }
	if (o.iters < 1 || o.retry < 0 || o.retry > 7 || o.rnr_retry < 0 || o.rnr_retry > 7 || o.timeout < 0 ||
	    o.timeout > 31 || o.min_rnr_timer < 0 || o.min_rnr_timer > 31) {
		fprintf(stderr, "rc_ops: -n >= 1; --retry/--rnr-retry 0..7; --timeout/--min-rnr-timer 0..31\n");
		return 2;
	}
	if (o.mode == M_RNR && !uses_recv(o.op)) {
		fprintf(stderr, "rc_ops: --mode rnr needs an op that consumes a receive (send, send_imm, write_imm)\n");
		return 2;
	}
	if (o.mode == M_RETRY && strcmp(o.peer_qp, "destroy") && strcmp(o.peer_qp, "init")) {
		fprintf(stderr, "rc_ops: --peer-qp destroy|init\n");
		return 2;
	}
	if (o.mode == M_RETRY)
		o.expect = E_RETRY;
	const char *sl = o.sizes_arg;
	if (o.op == OP_CAS || o.op == OP_FADD)
		sl = "8";   /* atomics are 8 bytes, whatever -s says */
	if (!sl)
		sl = (o.op == OP_CAS || o.op == OP_FADD) ? "8" : o.mode != M_NORMAL ? "4096"
			: "1,63,mtu-1,mtu,mtu+1,3mtu+7,65536,1048576";
	char *dup = strdup(sl), *save, *t;
	for (t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (o.nsizes == MAX_SIZES) { fprintf(stderr, "rc_ops: at most %d sizes\n", MAX_SIZES); return 2; }
		o.sizes[o.nsizes++] = parse_size(t);
	}
	free(dup);
	if (!o.nsizes) usage(2);
	size_t maxsize = 8;
	for (i = 0; i < o.nsizes; i++)
		if (o.sizes[i] > maxsize)
			maxsize = o.sizes[i];
	am_req = o.is_client == o.requester_is_client;
	snprintf(what, sizeof(what), "%s %s%s%s mtu %d, %s as %s", op_names[o.op], mode_names[o.mode],
		 o.mode == M_RNR ? " expect " : "", o.mode == M_RNR ? expect_names[o.expect] : "", o.mtu,
		 o.is_client ? "client" : "server", am_req ? "requester" : "responder");

	setup_verbs(maxsize);
	snprintf(what + strlen(what), sizeof(what) - strlen(what), " on %s", o.dev);
	tcp_connect_or_listen();
	exchange();
	if (!(o.mode == M_RETRY && !am_req))
		to_rts();
	switch (o.mode) {
	case M_NORMAL: run_normal(); break;
	case M_RNR: run_rnr(); break;
	case M_RETRY: run_retry(); break;
	}
	return 0;
}
