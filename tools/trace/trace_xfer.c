/* The built-in transfer of `uroce trace`: two processes (a responder and a
 * requester, forked from the CLI, joined by a socketpair) connect an RC QP
 * pair on the first device and the requester posts COUNT work requests of
 * one kind (RDMA WRITE by default: one 8 KiB WRITE, signaled). Everything
 * the data path does is then in the trace and the capture, with nothing
 * else around it: no inline data (the payload is read from the MR), one
 * completion per WR, the data checked at the other end. */
#include "cli.h"
#include "stat/statfile.h"
#include "trace_cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <glob.h>
#include <infiniband/verbs.h>
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

#define XFER_TIMEOUT_MS 10000   /* one completion, one socket message */
#define XFER_WATCHDOG_S 60
#define XFER_DEPTH 64           /* WRs outstanding */
#define XFER_IMM 0x1234abcdu
#define XFER_RNR_WAIT_MS 2000   /* --rnr: the longest wait for the first RNR NAK */

const char *const xfer_op_opt[XOP_COUNT] = { "write", "write_imm", "send", "send_imm",
					     "read", "cswap", "fadd" };
const char *const xfer_op_name[XOP_COUNT] = { "RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND",
					      "SEND_WITH_IMM", "RDMA_READ",
					      "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD" };

int xfer_op_parse(const char *s)
{
	for (int i = 0; i < XOP_COUNT; i++)
		if (!strcasecmp(s, xfer_op_opt[i]) || !strcasecmp(s, xfer_op_name[i]))
			return i;
	return -1;
}

struct conn {
	uint32_t qpn, psn, mtu, lid;
	uint8_t gid[16];
	uint64_t addr, len;
	uint32_t rkey;
};

struct side {
	const char *role;
	int sock, pipe_fd;
	const struct xfer_opts *o;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t buflen;
	struct conn local, remote;
	unsigned mtu;
};

static void die(struct side *s, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(struct side *s, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "uroce trace: %s: ", s->role);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void sock_send(struct side *s, const void *p, size_t len)
{
	const char *c = p;

	while (len) {
		ssize_t n = send(s->sock, c, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die(s, "socketpair: %s", n < 0 ? strerror(errno) : "closed");
		c += n;
		len -= (size_t)n;
	}
}

static void sock_recv(struct side *s, void *p, size_t len)
{
	char *c = p;
	uint64_t end = now_ms() + XFER_TIMEOUT_MS;

	while (len) {
		struct pollfd pfd = { .fd = s->sock, .events = POLLIN };
		uint64_t t = now_ms();
		ssize_t n;

		if (t >= end)
			die(s, "no answer from the peer process in %d ms", XFER_TIMEOUT_MS);
		if (poll(&pfd, 1, (int)(end - t)) <= 0)
			continue;
		n = recv(s->sock, c, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die(s, "the peer process exited");
		c += n;
		len -= (size_t)n;
	}
}

static int wc_poll(struct side *s, struct ibv_wc *wc)
{
	uint64_t end = now_ms() + XFER_TIMEOUT_MS;
	unsigned spins = 0;

	for (;;) {
		int n = ibv_poll_cq(s->cq, 1, wc);

		if (n < 0)
			die(s, "ibv_poll_cq failed");
		if (n) {
			if (wc->status != IBV_WC_SUCCESS)
				die(s, "completion wr_id %llu failed: %s", (unsigned long long)wc->wr_id,
				    ibv_wc_status_str(wc->status));
			return 0;
		}
		if (++spins % 256 == 0) {
			if (now_ms() > end)
				die(s, "no completion within %d ms", XFER_TIMEOUT_MS);
			sched_yield();
		}
	}
}

static enum ibv_mtu mtu_enum(unsigned bytes)
{
	switch (bytes) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	default: return IBV_MTU_4096;
	}
}

static unsigned mtu_bytes(enum ibv_mtu m)
{
	return 128u << m;
}

static void setup(struct side *s)
{
	struct ibv_qp_init_attr qa;
	struct ibv_port_attr pa;
	union ibv_gid gid;
	int n = 0;

	s->buflen = ((size_t)(s->o->size < 64 ? 64 : s->o->size) + 4095) & ~(size_t)4095;
	if (posix_memalign((void **)&s->buf, 4096, s->buflen))
		die(s, "cannot allocate %zu bytes", s->buflen);
	memset(s->buf, 0, s->buflen);
	s->list = ibv_get_device_list(&n);
	if (!s->list || n <= 0)
		die(s, "no RDMA device (UROCE_NETDEV=%s)", getenv("UROCE_NETDEV") ? getenv("UROCE_NETDEV") : "");
	s->ctx = ibv_open_device(s->list[0]);
	if (!s->ctx)
		die(s, "ibv_open_device(%s): %s", ibv_get_device_name(s->list[0]), strerror(errno));
	if (ibv_query_port(s->ctx, 1, &pa) || ibv_query_gid(s->ctx, 1, 0, &gid))
		die(s, "ibv_query_port/gid failed");
	s->pd = ibv_alloc_pd(s->ctx);
	s->mr = s->pd ? ibv_reg_mr(s->pd, s->buf, s->buflen,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
		      : NULL;
	s->cq = ibv_create_cq(s->ctx, 2 * XFER_DEPTH, NULL, NULL, 0);
	if (!s->mr || !s->cq)
		die(s, "ibv_reg_mr/ibv_create_cq: %s", strerror(errno));
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = s->cq;
	qa.recv_cq = s->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = XFER_DEPTH;
	qa.cap.max_recv_wr = XFER_DEPTH;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = 0; /* the point is to show the payload read in place */
	s->qp = ibv_create_qp(s->pd, &qa);
	if (!s->qp)
		die(s, "ibv_create_qp: %s", strerror(errno));
	memset(&s->local, 0, sizeof(s->local));
	s->local.qpn = s->qp->qp_num;
	s->local.psn = (uint32_t)(getpid() * 2654435761u) & 0xffffff;
	s->local.mtu = pa.active_mtu;
	if (s->o->mtu && mtu_enum(s->o->mtu) < pa.active_mtu)
		s->local.mtu = mtu_enum(s->o->mtu);
	s->local.lid = pa.lid;
	memcpy(s->local.gid, gid.raw, 16);
	s->local.addr = (uintptr_t)s->buf;
	s->local.len = s->buflen;
	s->local.rkey = s->mr->rkey;
}

static void connect_qp(struct side *s)
{
	struct ibv_qp_attr a;
	int rc;

	sock_send(s, &s->local, sizeof(s->local));
	sock_recv(s, &s->remote, sizeof(s->remote));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	rc = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		die(s, "ibv_modify_qp(INIT): %s", strerror(rc));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)(s->local.mtu < s->remote.mtu ? s->local.mtu : s->remote.mtu);
	a.dest_qp_num = s->remote.qpn;
	a.rq_psn = s->remote.psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 13; /* 0.96 ms: a few RNR NAKs in --rnr */
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, s->remote.gid, 16);
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.dlid = (uint16_t)s->remote.lid;
	a.ah_attr.port_num = 1;
	rc = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		die(s, "ibv_modify_qp(RTR): %s", strerror(rc));
	s->mtu = mtu_bytes(a.path_mtu);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = s->local.psn;
	a.max_rd_atomic = 1;
	rc = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc)
		die(s, "ibv_modify_qp(RTS): %s", strerror(rc));
}

static void teardown(struct side *s)
{
	ibv_destroy_qp(s->qp);
	ibv_destroy_cq(s->cq);
	ibv_dereg_mr(s->mr);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
	ibv_free_device_list(s->list);
	free(s->buf);
}

static uint8_t pat(uint64_t i, unsigned round)
{
	return (uint8_t)((i * 131 + round * 7 + (i >> 8)) & 0xff);
}

static int needs_recv(int op)
{
	return op == XOP_SEND || op == XOP_SEND_IMM || op == XOP_WRITE_IMM;
}

static void post_recvs(struct side *s, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct ibv_sge sge = { (uintptr_t)s->buf, (uint32_t)s->o->size, s->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 1000 + i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(s->qp, &wr, &bad))
			die(s, "ibv_post_recv failed");
	}
}

/* --rnr: waits until this process's engine has sent an RNR NAK (its own
 * stat file says so), so that the first SEND is refused however late it
 * comes on a loaded host; at most XFER_RNR_WAIT_MS. */
static void wait_own_rnr_nak(void)
{
	char pat[64];

	snprintf(pat, sizeof(pat), "%s/%s%d-*.stat", UROCE_STAT_DIR, UROCE_STAT_PREFIX, (int)getpid());
	for (int ms = 0; ms < XFER_RNR_WAIT_MS; ms++) {
		glob_t g;
		int seen = 0;

		if (!glob(pat, 0, NULL, &g)) {
			for (size_t i = 0; i < g.gl_pathc && !seen; i++) {
				struct uroce_stat_file f;

				seen = !statf_load(g.gl_pathv[i], &f) && f.cnt.rnr_naks_sent;
			}
			globfree(&g);
		}
		if (seen)
			return;
		sleep_ms(1);
	}
}

/* Responder: prepares its memory, takes the RECVs, checks the data. */
static int responder(struct side *s)
{
	const struct xfer_opts *o = s->o;
	char ready = 'r', done;
	int bad = 0;

	if (o->op == XOP_READ)
		for (size_t i = 0; i < o->size; i++)
			s->buf[i] = pat(i, 0);
	if (needs_recv(o->op) && !o->rnr)
		post_recvs(s, o->count);
	sock_send(s, &ready, 1);
	if (needs_recv(o->op) && o->rnr) {
		/* The requester's first SEND arrives before any RECV: RNR NAK. */
		wait_own_rnr_nak();
		post_recvs(s, o->count);
	}
	for (unsigned i = 0; needs_recv(o->op) && i < o->count; i++) {
		struct ibv_wc wc;

		wc_poll(s, &wc);
		if ((o->op != XOP_WRITE_IMM && wc.byte_len != o->size) ||
		    ((o->op == XOP_SEND_IMM || o->op == XOP_WRITE_IMM) &&
		     (!(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != XFER_IMM + i)))
			bad = 1;
	}
	sock_recv(s, &done, 1);
	if (o->op == XOP_WRITE || o->op == XOP_WRITE_IMM || o->op == XOP_SEND || o->op == XOP_SEND_IMM) {
		for (size_t i = 0; i < o->size; i++)
			if (s->buf[i] != pat(i, o->count - 1))
				bad = 1;
	} else if (o->op == XOP_FADD) {
		uint64_t v;

		memcpy(&v, s->buf, 8);
		bad |= v != o->count;
	} else if (o->op == XOP_CSWAP) {
		uint64_t v;

		memcpy(&v, s->buf, 8);
		bad |= v != o->count;
	}
	sock_send(s, &bad, sizeof(bad));
	return bad;
}

static int requester(struct side *s)
{
	const struct xfer_opts *o = s->o;
	unsigned posted = 0, completed = 0;
	char ready, done = 'd';
	int bad = 0;

	sock_recv(s, &ready, 1);
	while (completed < o->count) {
		while (posted < o->count && posted - completed < XFER_DEPTH) {
			struct ibv_sge sge = { (uintptr_t)s->buf, (uint32_t)o->size, s->mr->lkey };
			struct ibv_send_wr wr, *badwr;

			if (o->op != XOP_READ && o->op != XOP_CSWAP && o->op != XOP_FADD)
				for (size_t i = 0; i < o->size; i++)
					s->buf[i] = pat(i, posted);
			memset(&wr, 0, sizeof(wr));
			wr.wr_id = posted + 1;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = (enum ibv_wr_opcode)o->op;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.imm_data = htonl(XFER_IMM + posted);
			if (o->op == XOP_CSWAP || o->op == XOP_FADD) {
				sge.length = 8;
				wr.wr.atomic.remote_addr = s->remote.addr;
				wr.wr.atomic.rkey = s->remote.rkey;
				wr.wr.atomic.compare_add = o->op == XOP_FADD ? 1 : posted;
				wr.wr.atomic.swap = posted + 1;
			} else {
				wr.wr.rdma.remote_addr = s->remote.addr;
				wr.wr.rdma.rkey = s->remote.rkey;
			}
			if (ibv_post_send(s->qp, &wr, &badwr))
				die(s, "ibv_post_send failed");
			posted++;
			/* Payloads and atomic results share one buffer: one
			 * WR at a time (READs all fetch the same bytes). */
			if (o->op != XOP_READ)
				break;
		}
		{
			struct ibv_wc wc;

			wc_poll(s, &wc);
			if (o->op == XOP_CSWAP || o->op == XOP_FADD) {
				uint64_t old;

				memcpy(&old, s->buf, 8);
				bad |= old != wc.wr_id - 1; /* both count 0, 1, 2, ... */
			}
			completed++;
		}
	}
	if (o->op == XOP_READ)
		for (size_t i = 0; i < o->size; i++)
			if (s->buf[i] != pat(i, 0))
				bad = 1;
	sock_send(s, &done, 1);
	{
		int rbad;

		sock_recv(s, &rbad, sizeof(rbad));
		bad |= rbad << 1;
	}
	return bad;
}

static void child(struct side *s, int is_req)
{
	struct xfer_result r;
	int bad;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm(XFER_WATCHDOG_S + s->o->hold_ms / 1000);
	setup(s);
	connect_qp(s);
	memset(&r, 0, sizeof(r));
	r.mtu = s->mtu;
	if (is_req) {
		r.req_pid = getpid();
		r.req_buf_addr = (uintptr_t)s->buf;
	} else {
		r.resp_pid = getpid();
		r.resp_mr_addr = (uintptr_t)s->buf;
		r.resp_mr_len = s->buflen;
	}
	if (write(s->pipe_fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		die(s, "pipe: %s", strerror(errno));
	bad = is_req ? requester(s) : responder(s);
	if (s->o->hold_ms)
		sleep_ms(s->o->hold_ms);
	teardown(s);
	if (bad && is_req)
		fprintf(stderr, "uroce trace: %s: data check failed (%s)\n", s->role,
			bad & 1 ? "at the requester" : "at the responder");
	exit(bad ? 1 : 0);
}

int xfer_run(const struct xfer_opts *o, struct xfer_result *res)
{
	int sv[2], pp[2], st, rc = 0;
	pid_t pids[2];

	memset(res, 0, sizeof(*res));
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) || pipe(pp)) {
		perror("uroce trace: socketpair");
		return 1;
	}
	fflush(NULL);
	for (int i = 0; i < 2; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("uroce trace: fork");
			if (i)
				kill(pids[0], SIGKILL);
			return 1;
		}
		if (!pids[i]) {
			struct side s;

			memset(&s, 0, sizeof(s));
			s.role = i ? "requester" : "responder";
			s.o = o;
			s.sock = sv[i];
			close(sv[!i]);
			close(pp[0]);
			s.pipe_fd = pp[1];
			child(&s, i);
		}
	}
	close(sv[0]);
	close(sv[1]);
	close(pp[1]);
	for (int i = 0; i < 2; i++) {
		struct xfer_result r;

		if (read(pp[0], &r, sizeof(r)) != (ssize_t)sizeof(r))
			break;
		if (r.req_pid) {
			res->req_pid = r.req_pid;
			res->req_buf_addr = r.req_buf_addr;
			res->mtu = r.mtu;
		} else {
			res->resp_pid = r.resp_pid;
			res->resp_mr_addr = r.resp_mr_addr;
			res->resp_mr_len = r.resp_mr_len;
		}
	}
	close(pp[0]);
	if (!o->quiet && res->req_pid && res->resp_pid)
		fprintf(stderr,
			"uroce trace: built-in transfer: requester pid %d, responder pid %d "
			"(MR 0x%llx, %llu bytes), %u x %s of %llu bytes, MTU %u\n",
			res->req_pid, res->resp_pid, (unsigned long long)res->resp_mr_addr,
			(unsigned long long)res->resp_mr_len, o->count, xfer_op_name[o->op],
			(unsigned long long)o->size, res->mtu);
	for (int i = 1; i >= 0; i--) {
		if (waitpid(pids[i], &st, 0) < 0)
			continue;
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			rc = 1;
			if (WIFSIGNALED(st))
				fprintf(stderr, "uroce trace: %s killed by signal %d\n",
					i ? "requester" : "responder", WTERMSIG(st));
			kill(pids[!i], SIGKILL);
		}
	}
	if (!o->quiet && !rc)
		fprintf(stderr, "uroce trace: built-in transfer done, data verified\n");
	return rc;
}
