/* uroce trace --explain: reads the UROCE_TRACE files of every process of a
 * run, merges them by timestamp (CLOCK_MONOTONIC, one clock for the whole
 * host) and follows one work request through the data path:
 *
 *   1 posted by the app thread (doorbell: system call or not)
 *   2 descriptor taken by the engine thread
 *   3 local memory read in place
 *   4 packets sent
 *   5 packets received and placed at the remote side
 *   6 ACK (or READ response / atomic ACK)
 *   7 completion written, then polled by the app
 *
 * Trace lines: <ns> <pid> <tid> <app|engine> <event> key=value ... */
#include "cli.h"
#include "trace_cli.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ev {
	uint64_t ts;
	int pid;
	long tid;
	int engine;
	long seq;          /* order of reading: keeps a file's order on equal ts */
	char name[16];
	char *kv;          /* "key=value key=value" */
};

struct evs {
	struct ev *v;
	long n, cap;
};

static int read_file(struct evs *E, const char *path)
{
	FILE *f = fopen(path, "re");
	char line[1024];

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		struct ev e;
		char role[16];
		int off = 0;
		unsigned long long ts;
		size_t l;

		memset(&e, 0, sizeof(e));
		if (sscanf(line, "%llu %d %ld %15s %15s %n", &ts, &e.pid, &e.tid, role, e.name, &off) < 5 ||
		    !off)
			continue;
		l = strlen(line + off);
		while (l && (line[off + l - 1] == '\n' || line[off + l - 1] == ' '))
			line[off + --l] = 0;
		e.ts = ts;
		e.engine = !strcmp(role, "engine");
		e.kv = strdup(line + off);
		if (!e.kv)
			break;
		if (E->n == E->cap) {
			struct ev *nv;

			E->cap = E->cap ? 2 * E->cap : 4096;
			nv = realloc(E->v, sizeof(*nv) * (size_t)E->cap);
			if (!nv) {
				free(e.kv);
				break;
			}
			E->v = nv;
		}
		e.seq = E->n;
		E->v[E->n++] = e;
	}
	fclose(f);
	return 0;
}

static int cmp_ev(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Value of key in a trace line's "key=value key=value" part (copied into
 * buf), or NULL. */
const char *trace_kv(const char *kvs, const char *key, char *buf, size_t len)
{
	size_t kl = strlen(key);

	for (const char *p = kvs; p && *p;) {
		const char *end = strchr(p, ' ');
		size_t tl = end ? (size_t)(end - p) : strlen(p);

		if (tl > kl && !strncmp(p, key, kl) && p[kl] == '=') {
			size_t vl = tl - kl - 1;

			if (vl >= len)
				vl = len - 1;
			memcpy(buf, p + kl + 1, vl);
			buf[vl] = 0;
			return buf;
		}
		p = end ? end + 1 : NULL;
	}
	return NULL;
}

static const char *kv(const struct ev *e, const char *key, char *buf, size_t len)
{
	return trace_kv(e->kv, key, buf, len);
}

/* Its number (0x... or decimal; "(nil)" is 0), or -1 when absent. */
int64_t trace_num(const char *kvs, const char *key)
{
	char b[64];
	const char *s = trace_kv(kvs, key, b, sizeof(b));

	if (!s)
		return -1;
	if (!strcmp(s, "(nil)"))
		return 0;
	return (int64_t)strtoull(s, NULL, 0);
}

static int64_t num(const struct ev *e, const char *key)
{
	return trace_num(e->kv, key);
}

/* The address of a memory step: addr= (host pointer), va= (the MR's
 * virtual address) or dev= (device memory). */
static int64_t where_addr(const struct ev *e)
{
	int64_t a = num(e, "addr");

	if (a < 0)
		a = num(e, "va");
	if (a < 0)
		a = num(e, "dev");
	return a;
}

static const char *str(const struct ev *e, const char *key, char *buf, size_t len)
{
	const char *s = kv(e, key, buf, len);

	return s ? s : "?";
}

static int is(const struct ev *e, const char *name)
{
	return !strcmp(e->name, name);
}

/* PSN a - b in 24-bit serial arithmetic. */
static int32_t psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

static int psn_in(int64_t psn, uint32_t first, uint32_t n)
{
	int32_t d = psn_diff((uint32_t)psn, first);

	return psn >= 0 && d >= 0 && (uint32_t)d < n;
}

/* ---- the explanation, built as a list of steps ---- */

#define MAX_STEPS 512

struct step {
	int n;              /* seed step 1..7, 0: part of the previous one */
	const struct ev *e;
	int remote;
	char text[400];
};

struct expl {
	struct step s[MAX_STEPS];
	int ns;
	uint64_t t0;
	const char *missing[16];
	int nmissing;
	/* transport steps explained (descriptor taken, first packet received)
	 * that an application thread ran itself (UROCE_PROGRESS=app) */
	int app_work;
};

static void add(struct expl *x, int n, const struct ev *e, int remote, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void add(struct expl *x, int n, const struct ev *e, int remote, const char *fmt, ...)
{
	va_list ap;
	struct step *s;

	if (x->ns >= MAX_STEPS)
		return;
	s = &x->s[x->ns++];
	s->n = n;
	s->e = e;
	s->remote = remote;
	va_start(ap, fmt);
	vsnprintf(s->text, sizeof(s->text), fmt, ap);
	va_end(ap);
}

static void miss(struct expl *x, const char *what)
{
	if (x->nmissing < 16)
		x->missing[x->nmissing++] = what;
}

static const char *opname(int64_t op)
{
	return op >= 0 && op < XOP_COUNT ? xfer_op_name[op] : "?";
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void json_fields(const struct ev *e)
{
	int first = 1;

	putchar('{');
	for (const char *p = e->kv; p && *p;) {
		const char *end = strchr(p, ' ');
		size_t tl = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', tl);

		if (eq) {
			char k[64], v[128];
			size_t kl = (size_t)(eq - p), vl = tl - kl - 1;

			if (kl >= sizeof(k))
				kl = sizeof(k) - 1;
			if (vl >= sizeof(v))
				vl = sizeof(v) - 1;
			memcpy(k, p, kl);
			k[kl] = 0;
			memcpy(v, eq + 1, vl);
			v[vl] = 0;
			printf("%s", first ? "" : ",");
			json_str(k);
			putchar(':');
			json_str(v);
			first = 0;
		}
		p = end ? end + 1 : NULL;
	}
	putchar('}');
}

struct sys_count {
	long posts, doorbells, doorbell_syscalls, polls, poll_syscalls, recv_posts;
	long turns; /* posts and polls that took the idle engine's turn */
};

static void count_syscalls(const struct evs *E, int pid, struct sys_count *c)
{
	memset(c, 0, sizeof(*c));
	for (long i = 0; i < E->n; i++) {
		const struct ev *e = &E->v[i];

		if (e->engine || (pid && e->pid != pid))
			continue;
		if (is(e, "post_send"))
			c->posts++;
		else if (is(e, "post_recv"))
			c->recv_posts++;
		else if (is(e, "doorbell")) {
			c->doorbells++;
			c->doorbell_syscalls += num(e, "syscall") > 0;
			c->turns += num(e, "turn") > 0;
		} else if (is(e, "poll_cq")) {
			c->polls++;
			c->poll_syscalls += num(e, "syscall") > 0;
			c->turns += num(e, "turn") > 0;
		}
	}
}

/* Index of the first event after 'from' matching pid (0: any), name, qpn
 * (-1: any), wr_id (-1: any); -1 if none. */
static long find(const struct evs *E, long from, int pid, const char *name, int64_t qpn,
		 int64_t wr_id)
{
	for (long i = from < 0 ? 0 : from; i < E->n; i++) {
		const struct ev *e = &E->v[i];

		if ((pid && e->pid != pid) || !is(e, name))
			continue;
		if (qpn >= 0 && num(e, "qpn") != qpn)
			continue;
		if (wr_id >= 0 && num(e, "wr_id") != wr_id)
			continue;
		return i;
	}
	return -1;
}

static int explain(const struct evs *E, const struct explain_opts *o, struct expl *x,
		   int *out_req, int *out_resp, long *out_app_tid, long *engine_tids, int *nengine)
{
	char b1[64], b2[64];
	long ip = -1, i, last = -1;
	int64_t op, qpn, wr_id, len, addr, dqpn = -1;
	uint32_t psn0, npk, ntx_want;
	int A, B = 0, signaled, rdatomic, k = 0;
	const struct ev *P;

	/* 1: the post */
	for (i = 0; i < E->n && ip < 0; i++)
		if (is(&E->v[i], "post_send") && (o->op < 0 || num(&E->v[i], "opcode") == o->op))
			ip = i;
	if (ip < 0 && o->op >= 0) {
		ip = find(E, 0, 0, "post_send", -1, -1);
		if (ip >= 0)
			fprintf(stderr, "uroce trace: no %s in the trace; explaining the first work request\n",
				opname(o->op));
	}
	if (ip < 0) {
		miss(x, "post_send");
		return -1;
	}
	P = &E->v[ip];
	x->t0 = P->ts;
	A = P->pid;
	*out_req = A;
	*out_app_tid = P->tid;
	op = num(P, "opcode");
	qpn = num(P, "qpn");
	wr_id = num(P, "wr_id");
	len = num(P, "len");
	addr = num(P, "addr");
	signaled = num(P, "signaled") > 0;
	rdatomic = op == XOP_READ || op == XOP_CSWAP || op == XOP_FADD;
	add(x, 1, P, 0, "work request posted by the application thread %ld: %s wr_id=%lld, %lld bytes "
		       "at 0x%llx, %s; the descriptor goes into the send queue ring in memory",
	    P->tid, opname(op), (long long)wr_id, (long long)len, (unsigned long long)addr,
	    signaled ? "signaled" : "unsignaled");
	for (i = 0; i < ip; i++)
		if (E->v[i].pid == A && is(&E->v[i], "post_send") && num(&E->v[i], "qpn") == qpn)
			k++;
	i = find(E, ip + 1, A, "doorbell", qpn, -1);
	if (i >= 0 && E->v[i].tid == P->tid) {
		if (num(&E->v[i], "syscall") > 0)
			add(x, 0, &E->v[i], 0, "doorbell: syscall=1, one eventfd write, because the engine "
					       "thread was asleep (with UROCE_POLL_US it keeps polling "
					       "and posts make none); logged when the write returned, "
					       "so the engine may already be at work");
		else if (num(&E->v[i], "turn") > 0)
			add(x, 0, &E->v[i], 0, "doorbell: syscall=0, the engine was idle and the posting "
					       "thread did its work itself before returning (UROCE_PROGRESS"
					       "=app; logged after that turn)");
		else
			add(x, 0, &E->v[i], 0, "doorbell: syscall=0, the engine thread was awake: no "
					       "system call, only memory writes");
	}

	/* 2: the engine takes the (k+1)-th descriptor of this QP */
	for (i = 0; i < E->n; i++)
		if (E->v[i].pid == A && is(&E->v[i], "wqe_take") && num(&E->v[i], "qpn") == qpn && !k--)
			break;
	if (i >= E->n) {
		miss(x, "wqe_take");
		return -1;
	}
	{
		const struct ev *W = &E->v[i];

		psn0 = (uint32_t)num(W, "first_psn");
		npk = (uint32_t)num(W, "packets");
		engine_tids[(*nengine)++] = W->tid;
		if (W->engine)
			add(x, 2, W, 0, "descriptor taken by the engine thread %ld (transport work on "
					"thread %ld, not the application's %ld): PSN 0x%x, %u packet%s",
			    W->tid, W->tid, P->tid, psn0, npk, npk == 1 ? "" : "s");
		else
			add(x, 2, W, 0, "descriptor taken by the application thread %ld itself, taking "
					"the idle engine's turn (UROCE_PROGRESS=app: no hand-off, no "
					"wakeup): PSN 0x%x, %u packet%s",
			    W->tid, psn0, npk, npk == 1 ? "" : "s");
		x->app_work += !W->engine;
		last = i;
	}
	ntx_want = rdatomic ? (op == XOP_READ ? (npk + 63) / 64 : 1) : npk;

	/* 3 and 4: memory reads and packets of this WR */
	long tx0 = -1; /* the first packet's event: packets may arrive before the last leaves */
	{
		uint32_t ntx = 0, nread = 0;
		long from = last + 1;

		for (i = from; i < E->n && ntx < ntx_want; i++) {
			const struct ev *e = &E->v[i];

			if (e->pid != A || num(e, "qpn") != qpn)
				continue;
			if (is(e, "wqe_take") && ntx == 0 && !nread)
				break;
			if (is(e, "mem_read") && !rdatomic) {
				int64_t a = where_addr(e);
				int zc = num(e, "zero_copy") > 0;

				nread++;
				add(x, 3, e, 0, "local memory read%s: %lld bytes of %s memory at 0x%llx%s",
				    zc ? " in place" : "", (long long)num(e, "len"),
				    str(e, "kind", b2, sizeof(b2)), (unsigned long long)a,
				    !zc ? " (staged through a host buffer: not zero copy)"
				    : a >= addr && a < addr + len
					    ? (a == addr ? " = the application's buffer: zero copy"
							 : ", inside the application's buffer: zero copy")
					    : " (zero copy)");
			} else if (is(e, "pkt_tx") && psn_in(num(e, "psn"), psn0, npk)) {
				ntx++;
				if (tx0 < 0)
					tx0 = i;
				if (dqpn < 0)
					dqpn = num(e, "dqpn");
				add(x, 4, e, 0, "packet sent: %s PSN 0x%llx, payload %lld bytes, %lld bytes "
						"of UDP payload (BTH...ICRC) to QP 0x%llx",
				    str(e, "op", b1, sizeof(b1)), (unsigned long long)num(e, "psn"),
				    (long long)num(e, "payload"), (long long)num(e, "bytes"),
				    (unsigned long long)num(e, "dqpn"));
				last = i;
			}
		}
		if (!rdatomic && len > 0 && !nread)
			miss(x, "mem_read");
		if (ntx < ntx_want) {
			miss(x, "pkt_tx");
			if (!ntx)
				return -1;
		}
	}

	/* 5: at the responder: packets received, payload placed (or read) */
	{
		uint32_t nrx = 0, nplace = 0;
		long first_rx = -1;

		/* from the first packet sent: with a small window the first
		 * ones are received (and ACKed) before the last is sent */
		for (i = (tx0 >= 0 ? tx0 : last) + 1; i < E->n && nrx < ntx_want; i++) {
			const struct ev *e = &E->v[i];

			if (!is(e, "pkt_rx") || num(e, "qpn") != dqpn || !psn_in(num(e, "psn"), psn0, npk))
				continue;
			if (!B) {
				B = e->pid;
				*out_resp = B;
				engine_tids[(*nengine)++] = e->tid;
				first_rx = i;
				x->app_work += !e->engine;
			}
			if (e->pid != B)
				continue;
			nrx++;
			add(x, 5, e, 1, "packet received by pid %d, %s thread %ld: %s PSN 0x%llx, %lld bytes "
					"payload",
			    e->pid, e->engine ? "engine" : "application", e->tid, str(e, "op", b1, sizeof(b1)),
			    (unsigned long long)num(e, "psn"),
			    (long long)num(e, "payload"));
			last = i;
			/* what the responder did with it */
			for (long j = i + 1; j < E->n; j++) {
				const struct ev *f = &E->v[j];

				if (f->pid != B || num(f, "qpn") != dqpn)
					continue;
				if (is(f, "pkt_rx") || is(f, "pkt_tx"))
					break;
				if (is(f, "place")) {
					int64_t a = where_addr(f);
					int in_mr = o->builtin && o->builtin->resp_mr_len &&
						    (uint64_t)a >= o->builtin->resp_mr_addr &&
						    (uint64_t)a < o->builtin->resp_mr_addr + o->builtin->resp_mr_len;

					nplace++;
					add(x, 0, f, 1, "placed: %lld bytes written at 0x%llx in the remote "
							"process's %s memory%s (%s %s)",
					    (long long)num(f, "len"), (unsigned long long)a,
					    str(f, "kind", b1, sizeof(b1)),
					    in_mr ? ", inside its registered MR" : "",
					    kv(f, "rkey", b2, sizeof(b2)) ? "rkey" : "lkey",
					    kv(f, "rkey", b2, sizeof(b2)) ? b2 : str(f, "lkey", b2, sizeof(b2)));
					last = j;
				} else if (is(f, "mem_read")) {
					add(x, 0, f, 1, "remote memory read in place for the response: %lld bytes at "
							"0x%llx (rkey %s): zero copy",
					    (long long)num(f, "len"), (unsigned long long)where_addr(f),
					    str(f, "rkey", b2, sizeof(b2)));
				} else if (is(f, "cqe")) {
					add(x, 0, f, 1, "responder completion (a RECV consumed): %s bytes, written "
							"by engine thread %ld",
					    str(f, "byte_len", b2, sizeof(b2)), f->tid);
				}
			}
		}
		if (!nrx) {
			miss(x, "pkt_rx");
			return -1;
		}
		if (nrx < ntx_want)
			miss(x, "pkt_rx");
		if ((op == XOP_WRITE || op == XOP_WRITE_IMM || op == XOP_SEND || op == XOP_SEND_IMM) &&
		    len > 0 && !nplace)
			miss(x, "place");
		(void)first_rx;
	}

	/* 6: the answer: ACK, READ responses, atomic ACK; then the requester's side */
	{
		uint32_t last_psn = (psn0 + npk - 1) & 0xffffff;
		int nresp = 0, acked = 0;
		uint32_t want_resp = rdatomic ? npk : 1;

		for (i = last + 1; i < E->n && !acked; i++) {
			const struct ev *e = &E->v[i];
			int64_t psn = num(e, "psn");

			if (e->pid == B && is(e, "pkt_tx") && num(e, "qpn") == dqpn && psn >= 0 &&
			    (int)nresp < (int)want_resp &&
			    (rdatomic ? psn_in(psn, psn0, npk) : psn_diff((uint32_t)psn, last_psn) >= 0)) {
				nresp++;
				add(x, 6, e, 1, "%s sent by the responder's engine: %s PSN 0x%llx%s",
				    rdatomic ? "response" : "acknowledgement", str(e, "op", b1, sizeof(b1)),
				    (unsigned long long)psn,
				    rdatomic ? "" : " (one ACK may cover several packets)");
			} else if (e->pid == B && is(e, "mem_read") && num(e, "qpn") == dqpn && rdatomic) {
				add(x, 0, e, 1, "remote memory read in place for the response: %lld bytes at "
						"0x%llx: zero copy",
				    (long long)num(e, "len"), (unsigned long long)where_addr(e));
			} else if (e->pid == A && num(e, "qpn") == qpn &&
				   (is(e, "pkt_rx") || is(e, "place") || is(e, "ack_rx") || is(e, "cqe"))) {
				/* on the engine thread, or an application thread
				 * taking its turn (UROCE_PROGRESS=app) */
				if (is(e, "pkt_rx") && psn >= 0 &&
				    (rdatomic ? psn_in(psn, psn0, npk) : psn_diff((uint32_t)psn, last_psn) >= 0)) {
					add(x, 0, e, 0, "received by the requester (%s thread %ld): %s PSN 0x%llx",
					    e->engine ? "engine" : "application", e->tid,
					    str(e, "op", b1, sizeof(b1)), (unsigned long long)psn);
				} else if (is(e, "place") && rdatomic) {
					add(x, 0, e, 0, "response placed in the application's buffer in place: "
							"%lld bytes at 0x%llx",
					    (long long)num(e, "len"), (unsigned long long)where_addr(e));
				} else if (is(e, "ack_rx") && psn_diff((uint32_t)psn, last_psn) >= 0) {
					add(x, 0, e, 0, "ACK processed: everything up to PSN 0x%llx is done (MSN %lld)",
					    (unsigned long long)psn, (long long)num(e, "msn"));
					acked = 1;
					last = i;
				} else if (is(e, "cqe") && num(e, "wr_id") == wr_id) {
					/* a READ or atomic completes on its last response */
					acked = 1;
					last = i - 1;
				}
			}
		}
		if (!acked) {
			miss(x, "ack_rx");
			last = i - 1;
		}
	}

	/* 7: completion, then the poll */
	if (!signaled) {
		add(x, 7, NULL, 0, "no completion: the WR was unsignaled (it retires silently; a later "
				   "signaled WR's completion covers it)");
		return 0;
	}
	i = find(E, last + 1, A, "cqe", qpn, wr_id);
	if (i < 0) {
		miss(x, "cqe");
		return -1;
	}
	add(x, 7, &E->v[i], 0, "completion written to the CQ ring by the engine thread %ld (status %s)",
	    E->v[i].tid, str(&E->v[i], "status", b1, sizeof(b1)));
	i = find(E, i + 1, A, "poll_cq", qpn, wr_id);
	if (i < 0) {
		miss(x, "poll_cq");
		return -1;
	}
	add(x, 0, &E->v[i], 0, "completion polled by the application thread %ld: syscall=%s, "
			       "ibv_poll_cq only reads the ring",
	    E->v[i].tid, str(&E->v[i], "syscall", b1, sizeof(b1)));
	return 0;
}

int explain_dir(const char *dir, const struct explain_opts *o)
{
	static struct expl x;
	struct evs E = { 0 };
	char path[4096];
	int nfiles = 0, req = 0, resp = 0, neng = 0, complete;
	long app_tid = 0, eng[8];
	struct sys_count all, mine;
	FILE *out;

	{
		DIR *d = opendir(dir);
		struct dirent *de;

		while (d && (de = readdir(d))) {
			if (strncmp(de->d_name, "trace.", 6) || !strcmp(de->d_name, "trace.all"))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			if (!read_file(&E, path))
				nfiles++;
		}
		if (d)
			closedir(d);
	}
	if (!nfiles || !E.n) {
		fprintf(stderr, "uroce trace: no data-path trace: no process of the command used a "
				"uroce device (was it run through uroce?)\n");
		return 2;
	}
	qsort(E.v, (size_t)E.n, sizeof(*E.v), cmp_ev);
	/* The merged trace, for reading by hand (kept with --keep). */
	snprintf(path, sizeof(path), "%s/trace.all", dir);
	if ((out = fopen(path, "we"))) {
		for (long i = 0; i < E.n; i++)
			fprintf(out, "%" PRIu64 " %d %ld %s %s %s\n", E.v[i].ts, E.v[i].pid, E.v[i].tid,
				E.v[i].engine ? "engine" : "app", E.v[i].name, E.v[i].kv);
		fclose(out);
	}

	memset(&x, 0, sizeof(x));
	explain(&E, o, &x, &req, &resp, &app_tid, eng, &neng);
	complete = x.nmissing == 0 && x.ns > 0;
	count_syscalls(&E, 0, &all);
	count_syscalls(&E, req, &mine);

	if (o->json) {
		printf("{\"complete\":%s,\"events\":%ld,\"processes\":%d,\"requester\":{\"pid\":%d,"
		       "\"app_tid\":%ld,\"engine_tid\":%ld},\"responder\":{\"pid\":%d,\"engine_tid\":%ld},",
		       complete ? "true" : "false", E.n, nfiles, req, app_tid, neng > 0 ? eng[0] : 0L, resp,
		       neng > 1 ? eng[1] : 0L);
		if (o->builtin && o->builtin->resp_mr_len)
			printf("\"responder_mr\":{\"addr\":\"0x%" PRIx64 "\",\"len\":%" PRIu64 "},",
			       o->builtin->resp_mr_addr, o->builtin->resp_mr_len);
		printf("\"missing\":[");
		for (int i = 0; i < x.nmissing; i++) {
			printf("%s", i ? "," : "");
			json_str(x.missing[i]);
		}
		printf("],\"steps\":[");
		for (int i = 0, first = 1; i < x.ns; i++) {
			const struct step *s = &x.s[i];

			printf("%s{\"step\":%d,", first ? "" : ",", s->n);
			first = 0;
			if (s->e) {
				printf("\"event\":");
				json_str(s->e->name);
				printf(",\"side\":\"%s\",\"role\":\"%s\",\"pid\":%d,\"tid\":%ld,\"ts_ns\":%" PRIu64
				       ",\"t_us\":%.3f,\"fields\":",
				       s->remote ? "responder" : "requester", s->e->engine ? "engine" : "app",
				       s->e->pid, s->e->tid, s->e->ts,
				       ((double)s->e->ts - (double)x.t0) / 1000.0);
				json_fields(s->e);
				printf(",");
			}
			printf("\"text\":");
			json_str(s->text);
			printf("}");
		}
		printf("],\"syscalls\":{\"requester\":{\"post_send\":%ld,\"doorbells\":%ld,"
		       "\"doorbell_syscalls\":%ld,\"poll_cq\":%ld,\"poll_syscalls\":%ld},"
		       "\"all\":{\"post_send\":%ld,\"post_recv\":%ld,\"doorbells\":%ld,"
		       "\"doorbell_syscalls\":%ld,\"poll_cq\":%ld,\"poll_syscalls\":%ld}}}\n",
		       mine.posts, mine.doorbells, mine.doorbell_syscalls, mine.polls, mine.poll_syscalls,
		       all.posts, all.recv_posts, all.doorbells, all.doorbell_syscalls, all.polls,
		       all.poll_syscalls);
		goto done;
	}

	printf("uroce trace --explain: %ld trace events from %d process%s\n", E.n, nfiles,
	       nfiles == 1 ? "" : "es");
	if (x.ns) {
		printf("first %s: requester pid %d (application thread %ld", opname(num(x.s[0].e, "opcode")),
		       req, app_tid);
		if (neng > 0)
			printf(", engine thread %ld", eng[0]);
		printf(")");
		if (resp)
			printf(", responder pid %d (engine thread %ld)", resp, neng > 1 ? eng[1] : 0L);
		printf("\ntimes are from the post, CLOCK_MONOTONIC (one clock for all processes)\n\n");
	}
	for (int i = 0; i < x.ns; i++) {
		const struct step *s = &x.s[i];
		char when[32] = "";

		if (s->e)
			snprintf(when, sizeof(when), "%+10.1f us", ((double)s->e->ts - (double)x.t0) / 1000.0);
		if (s->n)
			printf("%s%13s  [%d] %-9s %-6s %s\n", i ? "\n" : "", when, s->n,
			       s->e ? s->e->name : "", s->remote ? "remote" : "local", s->text);
		else
			printf("%13s      %-9s %-6s %s\n", when, s->e ? s->e->name : "",
			       s->remote ? "remote" : "local", s->text);
	}
	if (x.nmissing) {
		printf("\nnot seen in the trace:");
		for (int i = 0; i < x.nmissing; i++)
			printf(" %s", x.missing[i]);
		printf("\n");
	}
	printf("\nkernel bypass: the requester's application threads posted %ld send WR%s and rang "
	       "%ld doorbell%s, %ld of them with a system call (an eventfd write to wake a sleeping "
	       "engine); %ld completion%s polled with %ld system calls.\n",
	       mine.posts, mine.posts == 1 ? "" : "s", mine.doorbells, mine.doorbells == 1 ? "" : "s",
	       mine.doorbell_syscalls, mine.polls, mine.polls == 1 ? "" : "s", mine.poll_syscalls);
	if (mine.turns)
		printf("  %ld of those posts and polls found the engine idle and did its work on the "
		       "application's\n  thread (UROCE_PROGRESS=app): their UDP sends and receives are "
		       "system calls, the NIC's\n  work, not the verbs'.\n", mine.turns);
	printf("  all processes: %ld send + %ld receive posts, %ld doorbell system calls, %ld polls "
	       "with %ld system calls.\n",
	       all.posts, all.recv_posts, all.doorbell_syscalls, all.polls, all.poll_syscalls);
	printf("zero copy: the engine gathered the payload from the application's registered buffer\n"
	       "  itself (the kernel's UDP send is the DMA read); the responder wrote it straight\n"
	       "  into the target MR (one copy from the socket buffer: the kernel needs a buffer\n"
	       "  before the QP is known).\n");
	if (neng > 0 && !x.app_work)
		printf("offload: segmentation, PSNs, ACKs, timers and the completion ran on engine thread%s "
		       "%ld%s%.0ld, never on the application thread %ld.\n",
		       neng > 1 ? "s" : "", eng[0], neng > 1 ? " and " : "", neng > 1 ? eng[1] : 0L,
		       app_tid);
	else if (neng > 0)
		printf("progress: segmentation, PSNs, ACKs, timers and the completion ran on thread%s "
		       "%ld%s%.0ld, application threads among them: each took the idle engine's turn\n"
		       "  in ibv_post_send or ibv_poll_cq (UROCE_PROGRESS=app: no hand-off to the engine\n"
		       "  thread, no wakeup); UROCE_PROGRESS=engine leaves all of it to the engine thread.\n",
		       neng > 1 ? "s" : "", eng[0], neng > 1 ? " and " : "", neng > 1 ? eng[1] : 0L);
done:
	for (long i = 0; i < E.n; i++)
		free(E.v[i].kv);
	free(E.v);
	return complete ? 0 : 1;
}
