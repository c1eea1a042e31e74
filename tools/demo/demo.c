/* uroce demo: two processes (client = parent, server = child) joined by a
 * socketpair made before fork. Each opens the first device, connects an RC
 * QP to the other over loopback, then the client drives the checks:
 * RDMA WRITE, RDMA READ, SEND/RECV, SEND_WITH_IMM, RDMA_WRITE_WITH_IMM,
 * FETCH_AND_ADD, CMP_AND_SWP; and the bandwidth and latency tables
 * (demo_perf.c). Every wait is bounded; a watchdog catches the rest. */
#include "cli.h"
#include "demo.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_SIZE (1u << 20)
#define MIN_SIZE 64u
#define MAX_SIZE (1ull << 30)
#define SOCK_TIMEOUT_MS 30000     /* one request/reply (setup, a check) */
#define WATCHDOG_S 120            /* whole demo, default iterations */
#define WATCHDOG_ITERS_S 3600     /* whole demo, with --iters */

#define IMM_SEND 0x5e9d1a2bu
#define IMM_WRITE 0x3a7ec0deu
#define ATOM_COUNTER0 UINT64_C(100)
#define ATOM_ADD UINT64_C(23)
#define ATOM_SWAP0 UINT64_C(0x1111111122222222)
#define ATOM_SWAP1 UINT64_C(0x3333333344444444)

void usage_demo(FILE *f)
{
	fprintf(f,
		"usage: uroce demo [--iters N] [--size BYTES] | --gpu\n"
		"\n"
		"Fork a server and a client process that talk RDMA over the first device\n"
		"(UROCE_NETDEV defaults to 'lo' for the demo). They exchange QPN, PSN,\n"
		"GID, buffer address and rkey over a socketpair, connect RC QPs, and check\n"
		"RDMA WRITE, RDMA READ, SEND/RECV, SEND_WITH_IMM, RDMA_WRITE_WITH_IMM,\n"
		"FETCH_AND_ADD and CMP_AND_SWP, each printed with PASS or FAIL. Then an\n"
		"RDMA WRITE bandwidth table (2 B .. BYTES, perftest ib_write_bw style) and\n"
		"a SEND/RECV ping-pong latency table (2 B .. 4 KiB, half round trip).\n"
		"\n"
		"options:\n"
		"  --iters N       iterations per message size in both tables (default:\n"
		"                  up to 5000 / 1000, cut to fit a time budget per size)\n"
		"  --size BYTES    size of the transfer checks and largest bandwidth\n"
		"                  message (default 1M; suffixes K, M, G; %u .. 1G)\n"
		"  --gpu           instead: a GPU-to-GPU RDMA WRITE of 16 MiB between two\n"
		"                  processes, checked in the receiver's GPU memory (needs\n"
		"                  an NVIDIA GPU; exits 77 without one)\n"
		"  -h, --help      print this help\n"
		"\n"
		"exit status: 0 if every check passed, 1 if a check or a verbs call\n"
		"failed or timed out, 2 on bad usage.\n",
		MIN_SIZE);
}

/* ---- utilities ---- */

uint64_t demo_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void demo_err(struct demo *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->err, sizeof(d->err), fmt, ap);
	va_end(ap);
	/* Only recorded: the client prints it in a FAIL line (or on stderr
	 * before the checks start), the server sends it in its reply. */
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint8_t pattern_byte(uint64_t seed, size_t i)
{
	return (uint8_t)(mix64(seed * 0x100000001b3ull ^ (uint64_t)(i / 8)) >> (8 * (i % 8)));
}

static void fill_pattern(uint8_t *p, size_t len, uint64_t seed)
{
	size_t i;

	for (i = 0; i < len; i += 8) {
		uint64_t w = mix64(seed * 0x100000001b3ull ^ (uint64_t)(i / 8));
		size_t n = len - i < 8 ? len - i : 8;

		memcpy(p + i, &w, n);  /* little-endian byte order, as pattern_byte */
	}
}

/* 0 if p[0..len) holds the pattern, else fills msg and returns 1. */
static int check_pattern(const uint8_t *p, size_t len, uint64_t seed, char *msg, size_t msglen)
{
	size_t i, bad = 0, first = 0;

	for (i = 0; i < len; i++) {
		if (p[i] != pattern_byte(seed, i)) {
			if (!bad)
				first = i;
			bad++;
		}
	}
	if (!bad)
		return 0;
	snprintf(msg, msglen, "%zu of %zu bytes wrong, first at offset %zu: got 0x%02x, want 0x%02x",
		 bad, len, first, p[first], pattern_byte(seed, first));
	return 1;
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end)
		return -1;
	*out = v;
	return 0;
}

/* ---- socketpair protocol ---- */

static int write_full(int fd, const void *p, size_t len)
{
	const char *c = p;

	while (len) {
		ssize_t n = send(fd, c, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

/* timeout_ms < 0: wait forever. Returns 0, or -1 (error, EOF: errno 0, timeout: ETIMEDOUT). */
static int read_full(int fd, void *p, size_t len, int timeout_ms)
{
	char *c = p;
	uint64_t deadline = timeout_ms < 0 ? 0 : demo_now_ns() + (uint64_t)timeout_ms * 1000000ull;

	while (len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int wait_ms = -1, r;
		ssize_t n;

		if (timeout_ms >= 0) {
			uint64_t now = demo_now_ns();

			if (now >= deadline) {
				errno = ETIMEDOUT;
				return -1;
			}
			wait_ms = (int)((deadline - now) / 1000000ull) + 1;
		}
		r = poll(&pfd, 1, wait_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			continue;
		n = recv(fd, c, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			errno = 0;
			return -1;
		}
		if (n < 0)
			return -1;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

static const char *peer_of(const struct demo *d)
{
	return d->is_client ? "server" : "client";
}

int demo_send_msg(struct demo *d, const struct demo_msg *m)
{
	if (write_full(d->sock, m, sizeof(*m))) {
		demo_err(d, "socketpair: sending to the %s: %s", peer_of(d), strerror(errno));
		return -1;
	}
	return 0;
}

int demo_recv_msg(struct demo *d, struct demo_msg *m, int timeout_ms)
{
	if (read_full(d->sock, m, sizeof(*m), timeout_ms)) {
		if (errno == 0)
			demo_err(d, "socketpair: the %s exited unexpectedly", peer_of(d));
		else if (errno == ETIMEDOUT)
			demo_err(d, "socketpair: no answer from the %s in %d ms", peer_of(d), timeout_ms);
		else
			demo_err(d, "socketpair: %s", strerror(errno));
		return -1;
	}
	m->text[sizeof(m->text) - 1] = 0;
	return 0;
}

int demo_request(struct demo *d, struct demo_msg *m, struct demo_msg *reply, int timeout_ms)
{
	if (demo_send_msg(d, m) || demo_recv_msg(d, reply, timeout_ms))
		return -1;
	if (reply->type != M_REPLY) {
		demo_err(d, "protocol error: unexpected message %u from the server", reply->type);
		return -1;
	}
	if (reply->status < 0) {
		demo_err(d, "server: %s", reply->text);
		return -1;
	}
	return 0;
}

/* ---- completions and posting ---- */

static const char *opcode_name(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	default: return "other";
	}
}

static int wc_ok(struct demo *d, const struct ibv_wc *wc, const char *what)
{
	if (wc->status == IBV_WC_SUCCESS)
		return 1;
	demo_err(d, "%s: completion with error: %s (status %d, opcode %s, vendor_err 0x%x, wr_id %" PRIu64 ")",
		 what, ibv_wc_status_str(wc->status), wc->status,
		 opcode_name(wc->opcode), wc->vendor_err, (uint64_t)wc->wr_id);
	return 0;
}

int demo_reap_cq(struct demo *d, struct ibv_cq *cq, int max, const char *what)
{
	struct ibv_wc wc[16];
	int n, i;

	if (max > 16)
		max = 16;
	n = ibv_poll_cq(cq, max, wc);
	if (n < 0) {
		demo_err(d, "%s: ibv_poll_cq failed (%d)", what, n);
		return -1;
	}
	for (i = 0; i < n; i++)
		if (!wc_ok(d, &wc[i], what))
			return -1;
	return n;
}

int demo_wait_cq(struct demo *d, struct ibv_cq *cq, int n, struct ibv_wc *wcs, const char *what)
{
	uint64_t deadline = demo_now_ns() + DEMO_CQ_TIMEOUT_MS * 1000000ull;
	unsigned spins = 0;
	int got = 0;

	while (got < n) {
		struct ibv_wc wc[16];
		int want = n - got < 16 ? n - got : 16;
		int r = ibv_poll_cq(cq, want, wc), i;

		if (r < 0) {
			demo_err(d, "%s: ibv_poll_cq failed (%d)", what, r);
			return -1;
		}
		for (i = 0; i < r; i++) {
			if (!wc_ok(d, &wc[i], what))
				return -1;
			if (wcs)
				wcs[got] = wc[i];
			got++;
		}
		if (r)
			continue;
		if (++spins % DEMO_YIELD_SPINS == 0) {
			if (demo_now_ns() > deadline) {
				demo_err(d, "%s: timed out after %d ms waiting for completions (%d of %d)",
					 what, DEMO_CQ_TIMEOUT_MS, got, n);
				return -1;
			}
			sched_yield();
		}
	}
	return 0;
}

static const char *wr_name(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WR_RDMA_WRITE_WITH_IMM: return "RDMA_WRITE_WITH_IMM";
	case IBV_WR_SEND: return "SEND";
	case IBV_WR_SEND_WITH_IMM: return "SEND_WITH_IMM";
	case IBV_WR_RDMA_READ: return "RDMA_READ";
	case IBV_WR_ATOMIC_CMP_AND_SWP: return "ATOMIC_CMP_AND_SWP";
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return "ATOMIC_FETCH_AND_ADD";
	default: return "?";
	}
}

int demo_post_send(struct demo *d, enum ibv_wr_opcode op, size_t loff, size_t len,
		   uint64_t roff, uint32_t imm_host, unsigned flags, uint64_t wr_id)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(d->buf + loff),
		.length = (uint32_t)len,
		.lkey = d->mr->lkey,
	};
	struct ibv_send_wr wr, *bad = NULL;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = flags;
	if (op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htonl(imm_host);
	if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_RDMA_READ) {
		wr.wr.rdma.remote_addr = d->remote.addr + roff;
		wr.wr.rdma.rkey = d->remote.rkey;
	}
	rc = ibv_post_send(d->qp, &wr, &bad);
	if (rc) {
		demo_err(d, "ibv_post_send(%s, %zu bytes): %s", wr_name(op), len, strerror(rc));
		return -1;
	}
	return 0;
}

static int post_atomic(struct demo *d, enum ibv_wr_opcode op, size_t loff, uint64_t roff,
		       uint64_t compare_add, uint64_t swap)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(d->buf + loff),
		.length = 8,
		.lkey = d->mr->lkey,
	};
	struct ibv_send_wr wr, *bad = NULL;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xa7;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = d->remote.addr + roff;
	wr.wr.atomic.compare_add = compare_add;
	wr.wr.atomic.swap = swap;
	wr.wr.atomic.rkey = d->remote.rkey;
	rc = ibv_post_send(d->qp, &wr, &bad);
	if (rc) {
		demo_err(d, "ibv_post_send(%s): %s", wr_name(op), strerror(rc));
		return -1;
	}
	return 0;
}

int demo_post_recv(struct demo *d, size_t loff, size_t len, uint64_t wr_id)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(d->buf + loff),
		.length = (uint32_t)len,
		.lkey = d->mr->lkey,
	};
	struct ibv_recv_wr wr, *bad = NULL;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	rc = ibv_post_recv(d->qp, &wr, &bad);
	if (rc) {
		demo_err(d, "ibv_post_recv(%zu bytes): %s", len, strerror(rc));
		return -1;
	}
	return 0;
}

/* ---- setup, connect, teardown ---- */

static int setup(struct demo *d, size_t size)
{
	struct ibv_qp_init_attr qa;
	union ibv_gid gid;
	size_t size_r = (size + 63) & ~(size_t)63;
	long page = sysconf(_SC_PAGESIZE);
	int n = 0, cqe, rc;

	d->data_len = size;
	d->lat_tx_off = size_r;
	d->lat_rx_off = size_r + DEMO_LAT_MAX;
	d->atom_off = size_r + 2 * DEMO_LAT_MAX;
	d->res_off = d->atom_off + 64;
	d->buflen = d->res_off + 64;
	if (page <= 0)
		page = 4096;
	d->buflen = (d->buflen + (size_t)page - 1) & ~((size_t)page - 1);
	if (posix_memalign((void **)&d->buf, (size_t)page, d->buflen)) {
		d->buf = NULL;
		demo_err(d, "cannot allocate %zu bytes", d->buflen);
		return -1;
	}
	memset(d->buf, 0, d->buflen);

	errno = 0;
	d->list = ibv_get_device_list(&n);
	if (!d->list) {
		demo_err(d, "no RDMA devices found (ibv_get_device_list: %s)", strerror(errno ? errno : ENODEV));
		return -1;
	}
	if (n <= 0) {
		const char *nd = getenv("UROCE_NETDEV");

		demo_err(d, "no RDMA devices found (UROCE_NETDEV=%s)", nd ? nd : "");
		return -1;
	}
	d->devname = ibv_get_device_name(d->list[0]);
	d->ctx = ibv_open_device(d->list[0]);
	if (!d->ctx) {
		demo_err(d, "ibv_open_device(%s): %s", d->devname, strerror(errno ? errno : EIO));
		return -1;
	}
	if (ibv_query_device(d->ctx, &d->dattr)) {
		demo_err(d, "ibv_query_device(%s): %s", d->devname, strerror(errno ? errno : EIO));
		return -1;
	}
	rc = ibv_query_port(d->ctx, 1, &d->pattr);
	if (rc) {
		demo_err(d, "ibv_query_port(%s, 1): %s", d->devname, strerror(rc > 0 ? rc : errno));
		return -1;
	}
	if (d->pattr.state != IBV_PORT_ACTIVE) {
		demo_err(d, "%s port 1 is not ACTIVE (state %s)", d->devname,
			 ibv_port_state_str(d->pattr.state));
		return -1;
	}
	if (ibv_query_gid(d->ctx, 1, 0, &gid)) {
		demo_err(d, "ibv_query_gid(%s, 1, 0): %s", d->devname, strerror(errno ? errno : EIO));
		return -1;
	}
	if (d->pattr.max_msg_sz && size > d->pattr.max_msg_sz) {
		demo_err(d, "--size %zu is over the port's max_msg_sz %u", size, d->pattr.max_msg_sz);
		return -1;
	}
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd) {
		demo_err(d, "ibv_alloc_pd: %s", strerror(errno ? errno : ENOMEM));
		return -1;
	}
	d->mr = ibv_reg_mr(d->pd, d->buf, d->buflen,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!d->mr) {
		demo_err(d, "ibv_reg_mr(%zu bytes, local write + remote read/write/atomic): %s",
			 d->buflen, strerror(errno ? errno : ENOMEM));
		return -1;
	}
	cqe = 512;
	if (d->dattr.max_cqe > 0 && cqe > d->dattr.max_cqe)
		cqe = d->dattr.max_cqe;
	d->scq = ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
	if (!d->scq) {
		demo_err(d, "ibv_create_cq(%d): %s", cqe, strerror(errno ? errno : ENOMEM));
		return -1;
	}
	d->rcq = ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
	if (!d->rcq) {
		demo_err(d, "ibv_create_cq(%d): %s", cqe, strerror(errno ? errno : ENOMEM));
		return -1;
	}

	memset(&qa, 0, sizeof(qa));
	qa.send_cq = d->scq;
	qa.recv_cq = d->rcq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 0;
	qa.cap.max_send_wr = 256;
	qa.cap.max_recv_wr = 256;
	if (d->dattr.max_qp_wr > 0 && qa.cap.max_send_wr > (uint32_t)d->dattr.max_qp_wr) {
		qa.cap.max_send_wr = (uint32_t)d->dattr.max_qp_wr;
		qa.cap.max_recv_wr = (uint32_t)d->dattr.max_qp_wr;
	}
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = 64;
	d->qp = ibv_create_qp(d->pd, &qa);
	if (!d->qp) {
		/* Maybe no inline support: try without. */
		qa.cap.max_inline_data = 0;
		d->qp = ibv_create_qp(d->pd, &qa);
	}
	if (!d->qp) {
		demo_err(d, "ibv_create_qp(RC, %u send / %u recv WRs): %s", qa.cap.max_send_wr,
			 qa.cap.max_recv_wr, strerror(errno ? errno : ENOMEM));
		return -1;
	}
	d->max_inline = qa.cap.max_inline_data;
	d->sq_depth = qa.cap.max_send_wr;
	d->rq_depth = qa.cap.max_recv_wr;

	memset(&d->local, 0, sizeof(d->local));
	d->local.qpn = d->qp->qp_num;
	d->local.psn = (uint32_t)lrand48() & 0xffffff;
	memcpy(d->local.gid, gid.raw, 16);
	d->local.addr = (uintptr_t)d->buf;
	d->local.size = d->buflen;
	d->local.rkey = d->mr->rkey;
	d->local.mtu = d->pattr.active_mtu;
	d->local.max_dest_rd_atomic = (uint32_t)(d->dattr.max_qp_rd_atom < 16 ? d->dattr.max_qp_rd_atom : 16);
	d->local.lid = d->pattr.lid;
	return 0;
}

static int connect_qp(struct demo *d)
{
	struct ibv_qp_attr a;
	uint32_t init_rd = (uint32_t)(d->dattr.max_qp_init_rd_atom < 16 ? d->dattr.max_qp_init_rd_atom : 16);
	int rc;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	rc = ibv_modify_qp(d->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc) {
		demo_err(d, "ibv_modify_qp(RESET -> INIT): %s", strerror(rc));
		return -1;
	}

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)(d->local.mtu < d->remote.mtu ? d->local.mtu : d->remote.mtu);
	a.dest_qp_num = d->remote.qpn;
	a.rq_psn = d->remote.psn;
	a.max_dest_rd_atomic = (uint8_t)d->local.max_dest_rd_atomic;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, d->remote.gid, 16);
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.dlid = (uint16_t)d->remote.lid;
	a.ah_attr.sl = 0;
	a.ah_attr.src_path_bits = 0;
	a.ah_attr.port_num = 1;
	rc = ibv_modify_qp(d->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc) {
		demo_err(d, "ibv_modify_qp(INIT -> RTR, dest QPN 0x%06x): %s", d->remote.qpn, strerror(rc));
		return -1;
	}

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = d->local.psn;
	a.max_rd_atomic = (uint8_t)(init_rd < d->remote.max_dest_rd_atomic ? init_rd : d->remote.max_dest_rd_atomic);
	rc = ibv_modify_qp(d->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc) {
		demo_err(d, "ibv_modify_qp(RTR -> RTS): %s", strerror(rc));
		return -1;
	}
	return 0;
}

/* Returns 0, or -1 with d->err set (the first failure wins). */
static int teardown(struct demo *d)
{
	int bad = 0, rc;

#define TD_FAIL(...)                                  \
	do {                                          \
		if (!bad)                             \
			demo_err(d, __VA_ARGS__);     \
		bad = 1;                              \
	} while (0)
	if (d->qp && (rc = ibv_destroy_qp(d->qp)))
		TD_FAIL("ibv_destroy_qp: %s", strerror(rc));
	if (d->mr && (rc = ibv_dereg_mr(d->mr)))
		TD_FAIL("ibv_dereg_mr: %s", strerror(rc));
	if (d->scq && (rc = ibv_destroy_cq(d->scq)))
		TD_FAIL("ibv_destroy_cq: %s", strerror(rc));
	if (d->rcq && (rc = ibv_destroy_cq(d->rcq)))
		TD_FAIL("ibv_destroy_cq: %s", strerror(rc));
	if (d->pd && (rc = ibv_dealloc_pd(d->pd)))
		TD_FAIL("ibv_dealloc_pd: %s", strerror(rc));
	if (d->ctx && (rc = ibv_close_device(d->ctx)))
		TD_FAIL("ibv_close_device: %s", strerror(rc ? rc : errno));
#undef TD_FAIL
	if (d->list)
		ibv_free_device_list(d->list);
	free(d->buf);
	d->qp = NULL;
	d->mr = NULL;
	d->scq = d->rcq = NULL;
	d->pd = NULL;
	d->ctx = NULL;
	d->list = NULL;
	d->buf = NULL;
	return bad ? -1 : 0;
}

/* Both sides: set up, swap demo_conn, connect, confirm. */
struct hello {
	int32_t status;
	char text[512];
	struct demo_conn conn;
};

static int handshake(struct demo *d, size_t size)
{
	struct hello mine, peer;
	int ok;

	memset(&mine, 0, sizeof(mine));
	ok = setup(d, size) == 0;
	mine.status = ok ? 0 : -1;
	if (ok)
		mine.conn = d->local;
	else
		snprintf(mine.text, sizeof(mine.text), "%s", d->err);
	if (write_full(d->sock, &mine, sizeof(mine)) ||
	    read_full(d->sock, &peer, sizeof(peer), SOCK_TIMEOUT_MS)) {
		if (ok)
			demo_err(d, "socketpair: exchanging connection info with the %s failed (%s)",
				 peer_of(d), errno ? strerror(errno) : "peer exited");
		return -1;
	}
	peer.text[sizeof(peer.text) - 1] = 0;
	if (!ok)
		return -1;
	if (peer.status) {
		/* The client reports the server's error; the server just stops. */
		if (d->is_client)
			demo_err(d, "server: %s", peer.text);
		return -1;
	}
	d->remote = peer.conn;

	ok = connect_qp(d) == 0;
	mine.status = ok ? 0 : -1;
	snprintf(mine.text, sizeof(mine.text), "%s", ok ? "" : d->err);
	if (write_full(d->sock, &mine, sizeof(mine)) ||
	    read_full(d->sock, &peer, sizeof(peer), SOCK_TIMEOUT_MS)) {
		if (ok)
			demo_err(d, "socketpair: confirming the connection with the %s failed (%s)",
				 peer_of(d), errno ? strerror(errno) : "peer exited");
		return -1;
	}
	peer.text[sizeof(peer.text) - 1] = 0;
	if (!ok)
		return -1;
	if (peer.status) {
		if (d->is_client)
			demo_err(d, "server: %s", peer.text);
		return -1;
	}
	return 0;
}

/* ---- server ---- */

static void reply(struct demo *d, int32_t status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply(struct demo *d, int32_t status, const char *fmt, ...)
{
	struct demo_msg r;
	va_list ap;

	memset(&r, 0, sizeof(r));
	r.type = M_REPLY;
	r.status = status;
	va_start(ap, fmt);
	vsnprintf(r.text, sizeof(r.text), fmt, ap);
	va_end(ap);
	if (write_full(d->sock, &r, sizeof(r)))
		fprintf(stderr, "uroce demo: server: cannot reply to the client: %s\n", strerror(errno));
}

static void reply_err(struct demo *d)
{
	reply(d, -1, "%s", d->err);
}

static void srv_imm_check(struct demo *d, const struct demo_msg *m)
{
	size_t n1 = m->a, n2 = m->b;
	uint64_t seed1 = m->c & 0xffffffff, seed2 = m->c >> 32;
	uint32_t imm1 = (uint32_t)m->d, imm2 = (uint32_t)(m->d >> 32);
	struct ibv_wc wc[2];
	char t1[200] = "ok", t2[200] = "ok", tmp[160];
	int bad = 0, i;

	if (demo_wait_cq(d, d->rcq, 2, wc, "server RECV (IMM)")) {
		reply_err(d);
		return;
	}
	for (i = 0; i < 2; i++) {
		const struct ibv_wc *w = &wc[i];

		if (w->opcode == IBV_WC_RECV) {
			if (!(w->wc_flags & IBV_WC_WITH_IMM)) {
				snprintf(t1, sizeof(t1), "RECV completion without IBV_WC_WITH_IMM");
				bad |= 1;
			} else if (ntohl(w->imm_data) != imm1) {
				snprintf(t1, sizeof(t1), "imm_data 0x%08x, want 0x%08x", ntohl(w->imm_data), imm1);
				bad |= 1;
			} else if (w->byte_len != n1) {
				snprintf(t1, sizeof(t1), "byte_len %u, want %zu", w->byte_len, n1);
				bad |= 1;
			} else if (check_pattern(d->buf, n1, seed1, tmp, sizeof(tmp))) {
				snprintf(t1, sizeof(t1), "data: %s", tmp);
				bad |= 1;
			}
		} else if (w->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			if (!(w->wc_flags & IBV_WC_WITH_IMM)) {
				snprintf(t2, sizeof(t2), "RECV_RDMA_WITH_IMM completion without IBV_WC_WITH_IMM");
				bad |= 2;
			} else if (ntohl(w->imm_data) != imm2) {
				snprintf(t2, sizeof(t2), "imm_data 0x%08x, want 0x%08x", ntohl(w->imm_data), imm2);
				bad |= 2;
			} else if (w->byte_len != n2) {
				snprintf(t2, sizeof(t2), "byte_len %u, want %zu", w->byte_len, n2);
				bad |= 2;
			} else if (check_pattern(d->buf + n1, n2, seed2, tmp, sizeof(tmp))) {
				snprintf(t2, sizeof(t2), "data: %s", tmp);
				bad |= 2;
			}
		} else {
			snprintf(i ? t2 : t1, sizeof(t1), "unexpected completion opcode %s (%d)",
				 opcode_name(w->opcode), w->opcode);
			bad |= i ? 2 : 1;
		}
	}
	if (wc[0].opcode == wc[1].opcode) {
		snprintf(t2, sizeof(t2), "two %s completions", opcode_name(wc[0].opcode));
		bad |= 3;
	}
	reply(d, bad, "%s|%s", t1, t2);
}

static int server_loop(struct demo *d)
{
	struct demo_msg m;
	char msg[200];
	struct ibv_wc wc;
	uint64_t *atom;

	for (;;) {
		if (demo_recv_msg(d, &m, -1)) {
			fprintf(stderr, "uroce demo: server: %s\n", d->err);
			return -1;
		}
		switch (m.type) {
		case M_WRITE_CHECK:
			if (check_pattern(d->buf, m.a, m.b, msg, sizeof(msg)))
				reply(d, 1, "%s", msg);
			else
				reply(d, 0, "ok");
			break;
		case M_READ_PREP:
			fill_pattern(d->buf, m.a, m.b);
			reply(d, 0, "ok");
			break;
		case M_RECV_PREP:
			memset(d->buf, 0, m.a);
			if (demo_post_recv(d, 0, m.a, 0x5ec))
				reply_err(d);
			else
				reply(d, 0, "ok");
			break;
		case M_RECV_CHECK:
			if (demo_wait_cq(d, d->rcq, 1, &wc, "server RECV")) {
				reply_err(d);
			} else if (wc.opcode != IBV_WC_RECV) {
				reply(d, 1, "completion opcode %s (%d), want RECV", opcode_name(wc.opcode), wc.opcode);
			} else if (wc.byte_len != m.a) {
				reply(d, 1, "byte_len %u, want %" PRIu64, wc.byte_len, m.a);
			} else if (wc.wc_flags & IBV_WC_WITH_IMM) {
				reply(d, 1, "IBV_WC_WITH_IMM set on a plain SEND");
			} else if (check_pattern(d->buf, m.a, m.b, msg, sizeof(msg))) {
				reply(d, 1, "%s", msg);
			} else {
				reply(d, 0, "ok");
			}
			break;
		case M_IMM_PREP:
			memset(d->buf, 0, m.a + m.b);
			if (demo_post_recv(d, 0, m.a, 0x1a) || demo_post_recv(d, 0, m.a, 0x1b))
				reply_err(d);
			else
				reply(d, 0, "ok");
			break;
		case M_IMM_CHECK:
			srv_imm_check(d, &m);
			break;
		case M_ATOM_PREP:
			atom = (uint64_t *)(d->buf + d->atom_off);
			atom[0] = ATOM_COUNTER0;
			atom[1] = ATOM_SWAP0;
			reply(d, 0, "%" PRIu64, (uint64_t)d->atom_off);
			break;
		case M_ATOM_CHECK:
			atom = (uint64_t *)(d->buf + d->atom_off);
			reply(d, 0, "counter %" PRIu64 " swap 0x%016" PRIx64, atom[0], atom[1]);
			break;
		case M_BW:
			reply(d, 0, "ok");
			break;
		case M_LAT:
			if (demo_lat_serve(d, m.a, (long)m.b))
				reply_err(d);
			else
				reply(d, 0, "ok");
			break;
		case M_QUIT:
			if (teardown(d))
				reply_err(d);
			else
				reply(d, 0, "ok");
			return 0;
		default:
			reply(d, -1, "unknown command %u", m.type);
			break;
		}
	}
}

static int server_main(struct demo *d, size_t size)
{
	if (handshake(d, size)) {
		teardown(d);
		return 1;
	}
	if (server_loop(d)) {
		teardown(d);
		return 1;
	}
	return 0;
}

/* ---- client: the checks ---- */

struct tally {
	int pass, fail;
};

static void result(struct tally *t, int ok, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void result(struct tally *t, int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("%s  %-20s ", ok ? "PASS" : "FAIL", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (ok)
		t->pass++;
	else
		t->fail++;
}

static double ms_since(uint64_t t0)
{
	return (double)(demo_now_ns() - t0) / 1e6;
}

/* One signaled work request of len bytes from the start of the buffer,
 * and its completion; a failure is reported as label's result. */
static int post_and_wait(struct demo *d, struct tally *t, enum ibv_wr_opcode op, size_t len,
			 uint64_t wr_id, const char *what, const char *label)
{
	if (demo_post_send(d, op, 0, len, 0, 0, IBV_SEND_SIGNALED, wr_id) ||
	    demo_wait_cq(d, d->scq, 1, NULL, what)) {
		result(t, 0, label, "%s", d->err);
		return -1;
	}
	return 0;
}

/* Asks the server to check what the client sent (m: the check request,
 * m->a bytes) and reports its verdict, timed from t0. */
static int server_verdict(struct demo *d, struct tally *t, struct demo_msg *m, const char *label,
			  uint64_t t0)
{
	struct demo_msg r;

	if (demo_request(d, m, &r, SOCK_TIMEOUT_MS))
		return -1;
	if (r.status)
		result(t, 0, label, "%zu bytes client -> server: %s", (size_t)m->a, r.text);
	else
		result(t, 1, label, "%zu bytes client -> server, verified by the server (%.2f ms)",
		       (size_t)m->a, ms_since(t0));
	return 0;
}

/* Each check returns 0 (ran; passed or failed is in the tally) or -1 (fatal:
 * a verbs or socketpair error; d->err says what). */
static int check_write(struct demo *d, struct tally *t, size_t size_unused, long iters_unused)
{
	(void)size_unused; /* d->data_len */
	(void)iters_unused;
	struct demo_msg m = { .type = M_WRITE_CHECK };
	size_t len = d->data_len;
	uint64_t seed = 0x1001, t0;

	fill_pattern(d->buf, len, seed);
	t0 = demo_now_ns();
	if (post_and_wait(d, t, IBV_WR_RDMA_WRITE, len, 1, "RDMA_WRITE", "RDMA_WRITE"))
		return -1;
	m.a = len;
	m.b = seed;
	return server_verdict(d, t, &m, "RDMA_WRITE", t0);
}

static int check_read(struct demo *d, struct tally *t, size_t size_unused, long iters_unused)
{
	(void)size_unused; /* d->data_len */
	(void)iters_unused;
	struct demo_msg m = { .type = M_READ_PREP }, r;
	size_t len = d->data_len;
	uint64_t seed = 0x2002, t0;
	char msg[200];

	m.a = len;
	m.b = seed;
	if (demo_request(d, &m, &r, SOCK_TIMEOUT_MS))
		return -1;
	memset(d->buf, 0, len);
	t0 = demo_now_ns();
	if (post_and_wait(d, t, IBV_WR_RDMA_READ, len, 2, "RDMA_READ", "RDMA_READ"))
		return -1;
	if (check_pattern(d->buf, len, seed, msg, sizeof(msg)))
		result(t, 0, "RDMA_READ", "%zu bytes server -> client: %s", len, msg);
	else
		result(t, 1, "RDMA_READ", "%zu bytes server -> client, verified (%.2f ms)", len, ms_since(t0));
	return 0;
}

static int check_send(struct demo *d, struct tally *t, size_t size_unused, long iters_unused)
{
	(void)size_unused; /* d->data_len */
	(void)iters_unused;
	struct demo_msg m = { .type = M_RECV_PREP }, r;
	size_t len = d->data_len;
	uint64_t seed = 0x3003, t0;

	m.a = len;
	if (demo_request(d, &m, &r, SOCK_TIMEOUT_MS))
		return -1;
	fill_pattern(d->buf, len, seed);
	t0 = demo_now_ns();
	if (post_and_wait(d, t, IBV_WR_SEND, len, 3, "SEND", "SEND/RECV"))
		return -1;
	m.type = M_RECV_CHECK;
	m.a = len;
	m.b = seed;
	return server_verdict(d, t, &m, "SEND/RECV", t0);
}

static int check_imm(struct demo *d, struct tally *t, size_t size_unused, long iters_unused)
{
	(void)size_unused; /* d->data_len */
	(void)iters_unused;
	struct demo_msg m = { .type = M_IMM_PREP }, r;
	size_t n1 = d->data_len / 2 < 4096 ? d->data_len / 2 : 4096;
	size_t n2 = d->data_len - n1;
	uint64_t seed1 = 0x4004, seed2 = 0x5005;
	char *bar;

	m.a = n1;
	m.b = n2;
	if (demo_request(d, &m, &r, SOCK_TIMEOUT_MS))
		return -1;
	fill_pattern(d->buf, n1, seed1);
	fill_pattern(d->buf + n1, n2, seed2);
	if (demo_post_send(d, IBV_WR_SEND_WITH_IMM, 0, n1, 0, IMM_SEND, IBV_SEND_SIGNALED, 4) ||
	    demo_post_send(d, IBV_WR_RDMA_WRITE_WITH_IMM, n1, n2, n1, IMM_WRITE, IBV_SEND_SIGNALED, 5) ||
	    demo_wait_cq(d, d->scq, 2, NULL, "SEND_WITH_IMM/RDMA_WRITE_WITH_IMM")) {
		result(t, 0, "SEND_WITH_IMM", "%s", d->err);
		return -1;
	}
	m.type = M_IMM_CHECK;
	m.a = n1;
	m.b = n2;
	m.c = seed1 | seed2 << 32;
	m.d = IMM_SEND | (uint64_t)IMM_WRITE << 32;
	if (demo_request(d, &m, &r, SOCK_TIMEOUT_MS))
		return -1;
	bar = strchr(r.text, '|');
	if (bar)
		*bar++ = 0;
	if (r.status & 1)
		result(t, 0, "SEND_WITH_IMM", "%zu bytes, imm 0x%08x: %s", n1, IMM_SEND, r.text);
	else
		result(t, 1, "SEND_WITH_IMM", "%zu bytes, imm 0x%08x, verified by the server", n1, IMM_SEND);
	if (r.status & 2)
		result(t, 0, "RDMA_WRITE_WITH_IMM", "%zu bytes, imm 0x%08x: %s", n2, IMM_WRITE, bar ? bar : "");
	else
		result(t, 1, "RDMA_WRITE_WITH_IMM", "%zu bytes, imm 0x%08x, verified by the server", n2, IMM_WRITE);
	return 0;
}

static int check_atomics(struct demo *d, struct tally *t, size_t size_unused, long iters_unused)
{
	(void)size_unused; /* d->data_len */
	(void)iters_unused;
	struct demo_msg m = { .type = M_ATOM_PREP }, r;
	uint64_t *res = (uint64_t *)(d->buf + d->res_off);
	uint64_t counter = 0, swapv = 0, roff;
	int faa_ok, cas_ok;

	if (d->dattr.atomic_cap == IBV_ATOMIC_NONE)
		printf("note: the device reports atomic_cap NONE; trying atomics anyway\n");
	if (demo_request(d, &m, &r, SOCK_TIMEOUT_MS))
		return -1;
	roff = strtoull(r.text, NULL, 10);  /* the server's atomic area */
	res[0] = res[1] = res[2] = ~0ull;
	if (post_atomic(d, IBV_WR_ATOMIC_FETCH_AND_ADD, d->res_off, roff, ATOM_ADD, 0) ||
	    demo_wait_cq(d, d->scq, 1, NULL, "ATOMIC_FETCH_AND_ADD")) {
		result(t, 0, "FETCH_AND_ADD", "%s", d->err);
		return -1;
	}
	if (post_atomic(d, IBV_WR_ATOMIC_CMP_AND_SWP, d->res_off + 8, roff + 8, ATOM_SWAP0, ATOM_SWAP1) ||
	    demo_wait_cq(d, d->scq, 1, NULL, "ATOMIC_CMP_AND_SWP")) {
		result(t, 0, "CMP_AND_SWP", "%s", d->err);
		return -1;
	}
	/* A compare that does not match: returns the value, swaps nothing. */
	if (post_atomic(d, IBV_WR_ATOMIC_CMP_AND_SWP, d->res_off + 16, roff + 8, ATOM_SWAP0, 0xbadbadbadull) ||
	    demo_wait_cq(d, d->scq, 1, NULL, "ATOMIC_CMP_AND_SWP")) {
		result(t, 0, "CMP_AND_SWP", "%s", d->err);
		return -1;
	}
	m.type = M_ATOM_CHECK;
	if (demo_request(d, &m, &r, SOCK_TIMEOUT_MS))
		return -1;
	if (sscanf(r.text, "counter %" SCNu64 " swap 0x%" SCNx64, &counter, &swapv) != 2) {
		demo_err(d, "protocol error: bad atomic reply '%s'", r.text);
		return -1;
	}
	faa_ok = res[0] == ATOM_COUNTER0 && counter == ATOM_COUNTER0 + ATOM_ADD;
	result(t, faa_ok, "FETCH_AND_ADD", "%" PRIu64 " + %" PRIu64 ": fetched %" PRIu64 " (want %" PRIu64
	       "), server now %" PRIu64 " (want %" PRIu64 ")",
	       ATOM_COUNTER0, ATOM_ADD, res[0], ATOM_COUNTER0, counter, ATOM_COUNTER0 + ATOM_ADD);
	cas_ok = res[1] == ATOM_SWAP0 && res[2] == ATOM_SWAP1 && swapv == ATOM_SWAP1;
	result(t, cas_ok, "CMP_AND_SWP", "fetched 0x%016" PRIx64 " then 0x%016" PRIx64
	       " (want 0x%016" PRIx64 " then 0x%016" PRIx64 "), server now 0x%016" PRIx64,
	       res[1], res[2], ATOM_SWAP0, ATOM_SWAP1, swapv);
	return 0;
}

static int step_bw(struct demo *d, struct tally *t, size_t size, long iters)
{
	(void)t;
	return demo_bw_table(d, size, iters);
}

static int step_lat(struct demo *d, struct tally *t, size_t size, long iters)
{
	(void)t;
	return demo_lat_table(d, size, iters);
}

static const struct {
	const char *name;
	int (*fn)(struct demo *d, struct tally *t, size_t size, long iters);
} steps[] = {
	{ "RDMA_WRITE", check_write },
	{ "RDMA_READ", check_read },
	{ "SEND/RECV", check_send },
	{ "IMM", check_imm },
	{ "ATOMIC", check_atomics },
	{ "bandwidth", step_bw },
	{ "latency", step_lat },
};

static int client_main(struct demo *d, size_t size, long iters)
{
	struct tally t = { 0, 0 };
	struct demo_msg m, r;
	char ip[64];
	int fatal = 0, i;

	if (handshake(d, size)) {
		fprintf(stderr, "uroce demo: %s\n", d->err);
		teardown(d);
		return -1;
	}
	if (!inet_ntop(AF_INET6, d->local.gid, ip, sizeof(ip)))
		snprintf(ip, sizeof(ip), "?");
	printf("uroce demo: device %s, port 1, GID[0] %s, path MTU %d\n", d->devname, ip,
	       128 << (d->local.mtu < d->remote.mtu ? d->local.mtu : d->remote.mtu));
	printf("uroce demo: client QPN 0x%06x PSN 0x%06x  <->  server QPN 0x%06x PSN 0x%06x\n",
	       d->local.qpn, d->local.psn, d->remote.qpn, d->remote.psn);
	result(&t, 1, "connect", "RC QPs RESET -> INIT -> RTR -> RTS on both sides");

	/* A step returning -1 hit a verbs, completion or socketpair error: the
	 * QP may be unusable, so the remaining steps are skipped. A step that
	 * did not print its own FAIL line gets one here. */
	for (i = 0; i < (int)(sizeof(steps) / sizeof(steps[0])) && !fatal; i++) {
		int before = t.fail;

		if (steps[i].fn(d, &t, size, iters)) {
			fatal = 1;
			if (t.fail == before)
				result(&t, 0, steps[i].name, "%s", d->err);
		}
	}
	if (fatal)
		printf("uroce demo: stopped after the first fatal error\n");

	/* Ask the server to finish (even after a failure, if it still listens). */
	memset(&m, 0, sizeof(m));
	m.type = M_QUIT;
	if (demo_request(d, &m, &r, SOCK_TIMEOUT_MS))
		result(&t, 0, "shutdown", "%s", d->err);
	if (teardown(d))
		result(&t, 0, "teardown", "%s", d->err);
	printf("uroce demo: %d passed, %d failed\n", t.pass, t.fail);
	return t.fail ? -1 : 0;
}

/* ---- main ---- */

static void watchdog(int sig)
{
	static const char msg[] = "uroce demo: watchdog: the demo took too long, giving up\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing left to do */
	}
	_exit(1);
}

/* quiet: do not report a plain non-zero exit (the client failed already). */
static int wait_child(pid_t pid, int timeout_ms, int quiet)
{
	uint64_t deadline = demo_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int st;

	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			fprintf(stderr, "uroce demo: waitpid: %s\n", strerror(errno));
			return -1;
		}
		if (demo_now_ns() > deadline) {
			fprintf(stderr, "uroce demo: the server did not exit; killing it\n");
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		usleep(10000);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFEXITED(st) && quiet)
		return -1;
	if (WIFSIGNALED(st))
		fprintf(stderr, "uroce demo: the server was killed by signal %d (%s)\n",
			WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		fprintf(stderr, "uroce demo: the server exited with status %d\n", WEXITSTATUS(st));
	return -1;
}

int cmd_demo(int argc, char **argv)
{
	uint64_t size = DEFAULT_SIZE;
	long iters = 0;
	struct demo d;
	int sv[2], i, rc;
	pid_t parent, pid;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage_demo(stdout);
			return 0;
		}
		if (!strcmp(a, "--gpu"))
			return demo_gpu(size < (16u << 20) ? (16u << 20) : size);
		if (!strcmp(a, "--iters") || !strcmp(a, "--size")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "uroce demo: %s needs an argument\n", a);
				return CLI_EXIT_USAGE;
			}
			v = argv[++i];
		} else if (!strncmp(a, "--iters=", 8)) {
			v = a + 8;
			a = "--iters";
		} else if (!strncmp(a, "--size=", 7)) {
			v = a + 7;
			a = "--size";
		} else {
			fprintf(stderr, "uroce demo: unknown argument '%s'\n\n", a);
			usage_demo(stderr);
			return CLI_EXIT_USAGE;
		}
		if (!strcmp(a, "--iters")) {
			char *end;

			errno = 0;
			iters = strtol(v, &end, 10);
			if (errno || end == v || *end || iters < 1 || iters > 100000000) {
				fprintf(stderr, "uroce demo: bad --iters '%s' (1 .. 100000000)\n", v);
				return CLI_EXIT_USAGE;
			}
		} else if (parse_size(v, &size) || size < MIN_SIZE || size > MAX_SIZE) {
			fprintf(stderr, "uroce demo: bad --size '%s' (%u .. 1G)\n", v, MIN_SIZE);
			return CLI_EXIT_USAGE;
		}
	}

	if (!getenv("UROCE_NETDEV"))
		setenv("UROCE_NETDEV", "lo", 1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("uroce demo: UROCE_NETDEV=%s, transfer size %" PRIu64 " bytes\n",
	       getenv("UROCE_NETDEV"), size);
	fflush(NULL);

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		fprintf(stderr, "uroce demo: socketpair: %s\n", strerror(errno));
		return 1;
	}
	signal(SIGALRM, watchdog);
	alarm(iters ? WATCHDOG_ITERS_S : WATCHDOG_S);
	parent = getpid();
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "uroce demo: fork: %s\n", strerror(errno));
		return 1;
	}
	memset(&d, 0, sizeof(d));
	srand48((long)getpid() ^ (long)demo_now_ns());
	if (pid == 0) {
		/* server: dies with the client */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		alarm(iters ? WATCHDOG_ITERS_S + 10 : WATCHDOG_S + 10);
		close(sv[0]);
		d.role = "server";
		d.is_client = 0;
		d.sock = sv[1];
		rc = server_main(&d, (size_t)size);
		close(d.sock);
		exit(rc);
	}
	close(sv[1]);
	d.role = "client";
	d.is_client = 1;
	d.sock = sv[0];
	rc = client_main(&d, (size_t)size, iters);
	close(d.sock);
	if (wait_child(pid, 10000, rc != 0))
		rc = -1;
	alarm(0);
	if (rc)
		printf("uroce demo: FAILED\n");
	else
		printf("uroce demo: all checks passed\n");
	return rc ? 1 : 0;
}
