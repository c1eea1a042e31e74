/* uroce trace --html: one self-contained HTML page of a trace.
 *
 * Time runs down, one row per trace line (the left column gives its time
 * from the first line); seven lanes run across:
 *
 *   local app | local memory | local engine | wire | remote engine | remote memory | remote app
 *
 * "local" is the process of the first post_send (the requester), "remote"
 * every other process. Each pkt_tx is one arrow from the sender's engine to
 * the receiver's engine, ending at the row of its pkt_rx (matched on
 * destination QP, PSN and opcode); data packets are blue, ACKs, NAKs and
 * retransmissions red. mem_read and place are DMA arrows between an engine
 * and its memory; with kind=cuda they are staging copies, drawn as spans.
 * The seed's steps 1 to 6 are marked on the first data packet's path.
 * Every mark carries its trace line(s) as an SVG <title> (hover). */
#include "trace_html.h"
#include "trace_cli.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HTML_MAX_EVENTS 4000
#define MATCH_WINDOW 8192 /* lines searched for a packet's receipt or earlier send */

enum lane { L_APP_L, L_MEM_L, L_ENG_L, L_WIRE, L_ENG_R, L_MEM_R, L_APP_R, L_COUNT };

/* mark x, lane left edge and width; label side (-1 left, +1 right) */
static const int lane_x[L_COUNT] = { 100, 350, 480, 600, 720, 850, 1100 };
static const int lane_l[L_COUNT] = { 80, 230, 370, 500, 700, 830, 970 };
static const int lane_w[L_COUNT] = { 150, 140, 130, 200, 130, 140, 150 };
static const int lane_side[L_COUNT] = { 1, -1, -1, 0, 1, 1, -1 };
#define PAGE_W 1130
#define TOP 132
#define ROW_H 18

enum {
	F_RTX = 1,      /* a pkt_tx of a PSN this QP sent before */
	F_NAK = 2,      /* an ACKNOWLEDGE that its receiver handled as a NAK */
	F_RNR = 4,      /* ... as an RNR NAK */
	F_LOST = 8,     /* no pkt_rx for it in the trace */
	F_ACK = 16,     /* ACKNOWLEDGE (or atomic ACK) */
	F_CNP = 32,
};

struct hev {
	uint64_t ts;
	int pid;
	long tid;
	int engine;
	long seq;
	char name[16];
	char *kv;       /* "key=value ..." */
	char *line;     /* the trace line as written */
	int64_t qpn, psn, dqpn;   /* -1 when the line has none */
	char op[28];    /* op= of packets, "" */
	int side;       /* 0 local, 1 remote */
	int lane;
	long peer;      /* pkt_tx <-> its pkt_rx, -1 */
	int flags;
	int step;       /* the seed's step 1..6 marked here, 0 */
};

struct hevs {
	struct hev *v;
	long n, cap;
};

static int64_t num(const struct hev *e, const char *key);
static const char *kv(const struct hev *e, const char *key, char *buf, size_t len);

static int read_trace(struct hevs *E, const char *path)
{
	FILE *f = fopen(path, "re");
	char line[1024];

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		struct hev e;
		char role[16];
		int off = 0;
		unsigned long long ts;
		size_t l = strlen(line);

		while (l && (line[l - 1] == '\n' || line[l - 1] == ' '))
			line[--l] = 0;
		memset(&e, 0, sizeof(e));
		if (sscanf(line, "%llu %d %ld %15s %15s %n", &ts, &e.pid, &e.tid, role, e.name, &off) < 5 ||
		    !off)
			continue;
		e.ts = ts;
		e.engine = !strcmp(role, "engine");
		e.kv = strdup(line + off);
		e.line = strdup(line);
		e.peer = -1;
		if (e.kv) {
			e.qpn = num(&e, "qpn");
			e.psn = num(&e, "psn");
			e.dqpn = num(&e, "dqpn");
			if (!kv(&e, "op", e.op, sizeof(e.op)))
				e.op[0] = 0;
		}
		if (!e.kv || !e.line) {
			free(e.kv);
			free(e.line);
			break;
		}
		if (E->n == E->cap) {
			struct hev *nv;

			E->cap = E->cap ? 2 * E->cap : 4096;
			nv = realloc(E->v, sizeof(*nv) * (size_t)E->cap);
			if (!nv) {
				free(e.kv);
				free(e.line);
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

static int cmp_hev(const void *a, const void *b)
{
	const struct hev *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static const char *kv(const struct hev *e, const char *key, char *buf, size_t len)
{
	return trace_kv(e->kv, key, buf, len);
}

static int64_t num(const struct hev *e, const char *key)
{
	return trace_num(e->kv, key);
}

static int is(const struct hev *e, const char *name)
{
	return !strcmp(e->name, name);
}

static int is_mem(const struct hev *e)
{
	return is(e, "mem_read") || is(e, "place");
}

static int is_cuda(const struct hev *e)
{
	char b[16];
	const char *k = kv(e, "kind", b, sizeof(b));

	return k && !strcmp(k, "cuda");
}

/* ---- HTML helpers ---- */

static void esc(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
	}
}

static void title(FILE *f, const char *prefix, const struct hev *a, const struct hev *b)
{
	fputs("<title>", f);
	if (prefix) {
		esc(f, prefix);
		fputc('\n', f);
	}
	if (a)
		esc(f, a->line);
	if (b) {
		fputc('\n', f);
		esc(f, b->line);
	}
	fputs("</title>", f);
}

static double row_y(long row)
{
	return TOP + (double)row * ROW_H + ROW_H / 2.0;
}

/* The seed's figure (chapter 1.4), its words in the hover text only: a
 * page must not depend on CJK fonts to be readable. */
static const char *const step_text[7] = {
	"",
	"(1) PCIe DMA, no CPU: the source buffer is read in place, by the engine",
	"(2) the NIC parses the descriptor: here the engine thread takes the work request",
	"(3) the packet leaves through the switch",
	"(4) on the network: RoCEv2, UDP port 4791",
	"(5) the remote NIC assembles the data: the remote engine receives the packet",
	"(6) PCIe DMA into the target memory: placed in the remote MR",
};
static const char *const step_seed[7] = {
	"", "PCIe DMA (无需CPU)", "硬件解析描述符", "数据包通过交换机/路由器", "网络传输 (RoCEv2/IB)",
	"硬件组装数据", "PCIe DMA",
};

static void badge(FILE *f, int n, double x, double y, const struct hev *e)
{
	static const char *const circled[7] = { "", "①", "②", "③", "④", "⑤", "⑥" };

	fprintf(f, "<g class=\"step\" data-step=\"%d\">", n);
	fprintf(f, "<title>%s ", circled[n]);
	esc(f, step_text[n] + 4);
	fprintf(f, " (seed: %s)", step_seed[n]);
	if (e) {
		fputc('\n', f);
		esc(f, e->line);
	}
	fprintf(f, "</title><circle cx=\"%.1f\" cy=\"%.1f\" r=\"8\" fill=\"#ffd000\" stroke=\"#7a5c00\"/>"
		   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" font-weight=\"bold\">%d</text></g>\n",
		x, y, x, y + 4, n);
}

/* ---- analysis ---- */

/* Index of the pkt_rx that received pkt_tx t: the first unmatched pkt_rx
 * at or after it, in another process (or, all in one process, on another
 * QP), of the same destination QP, PSN and opcode. */
static void match_packets(struct hevs *E, long lim)
{
	char *used = calloc((size_t)lim + 1, 1);

	if (!used)
		return;
	for (long i = 0; i < lim; i++) {
		struct hev *t = &E->v[i];

		if (!is(t, "pkt_tx"))
			continue;
		for (long k = i + 1; k < lim && k < i + MATCH_WINDOW; k++) {
			struct hev *r = &E->v[k];

			if (used[k] || r->qpn != t->dqpn || r->psn != t->psn || !is(r, "pkt_rx"))
				continue;
			if (r->pid == t->pid && r->qpn == t->qpn)
				continue;
			if (strcmp(t->op, r->op))
				continue;
			used[k] = 1;
			t->peer = k;
			r->peer = i;
			break;
		}
	}
	free(used);
}

static void flag_packets(struct hevs *E, long lim)
{
	for (long i = 0; i < lim; i++) {
		struct hev *t = &E->v[i];

		if (!is(t, "pkt_tx"))
			continue;
		if (!strncmp(t->op, "ACKNOWLEDGE", 11) || !strncmp(t->op, "ATOMIC_ACKNOWLEDGE", 18))
			t->flags |= F_ACK;
		if (!strcmp(t->op, "CNP"))
			t->flags |= F_CNP;
		if (t->peer < 0)
			t->flags |= F_LOST;
		/* a PSN this QP sent before, with the same opcode */
		if (!(t->flags & F_ACK)) {
			for (long k = i - 1; k >= 0 && k > i - MATCH_WINDOW; k--) {
				const struct hev *o = &E->v[k];

				if (o->pid == t->pid && o->qpn == t->qpn && o->psn == t->psn &&
				    is(o, "pkt_tx") && !strcmp(o->op, t->op)) {
					t->flags |= F_RTX;
					break;
				}
			}
		}
		/* an ACK the requester treated as a NAK (nak_rx / rnr_rx right after) */
		if ((t->flags & F_ACK) && t->peer >= 0) {
			const struct hev *r = &E->v[t->peer];

			for (long k = t->peer + 1; k < lim && k <= t->peer + 8; k++) {
				const struct hev *x = &E->v[k];

				if (x->pid != r->pid || x->qpn != r->qpn)
					continue;
				if (is(x, "nak_rx") && x->psn == r->psn)
					t->flags |= F_NAK;
				else if (is(x, "rnr_rx") && x->psn == r->psn)
					t->flags |= F_RNR;
				if (is(x, "pkt_rx") || is(x, "pkt_tx"))
					break;
			}
		}
	}
}

/* Local side: the first post_send's process; when everything is one
 * process (two contexts), its QP. */
static void assign_sides(struct hevs *E)
{
	int A = -1, one_pid = 1;
	int64_t qpn = -1;

	for (long i = 0; i < E->n && A < 0; i++)
		if (is(&E->v[i], "post_send")) {
			A = E->v[i].pid;
			qpn = num(&E->v[i], "qpn");
		}
	for (long i = 0; i < E->n && A < 0; i++)
		if (is(&E->v[i], "pkt_tx") && num(&E->v[i], "payload") > 0) {
			A = E->v[i].pid;
			qpn = num(&E->v[i], "qpn");
		}
	if (A < 0 && E->n)
		A = E->v[0].pid;
	for (long i = 1; i < E->n; i++)
		if (E->v[i].pid != E->v[0].pid)
			one_pid = 0;
	for (long i = 0; i < E->n; i++) {
		struct hev *e = &E->v[i];
		int remote = one_pid ? (qpn >= 0 && e->qpn != qpn) : e->pid != A;

		e->side = remote;
		if (is_mem(e))
			e->lane = remote ? L_MEM_R : L_MEM_L;
		else if (!e->engine)
			e->lane = remote ? L_APP_R : L_APP_L;
		else
			e->lane = remote ? L_ENG_R : L_ENG_L;
	}
}

/* The seed's steps on the first data packet: 1 its memory read, 2 the
 * descriptor, 3 the send, 4 the wire, 5 the receive, 6 the placement.
 * Returns the index of that pkt_tx or -1. */
/* The place right after pkt_rx r (same process and QP), or -1. */
static long place_after(const struct hevs *E, long r)
{
	for (long k = r + 1; k < E->n; k++) {
		const struct hev *e = &E->v[k];

		if (e->pid != E->v[r].pid || e->qpn != E->v[r].qpn)
			continue;
		if (is(e, "place"))
			return k;
		if (is(e, "pkt_rx"))
			break;
	}
	return -1;
}

static long mark_steps(struct hevs *E, long lim)
{
	long t = -1, first = -1;

	/* the first data packet that was placed (an RNR NAK'd one was not) */
	for (long i = 0; i < lim && t < 0; i++)
		if (is(&E->v[i], "pkt_tx") && num(&E->v[i], "payload") > 0 && E->v[i].peer >= 0) {
			if (first < 0)
				first = i;
			if (place_after(E, E->v[i].peer) >= 0)
				t = i;
		}
	if (t < 0)
		t = first;
	if (t < 0)
		return -1;
	{
		struct hev *T = &E->v[t];
		int64_t q = T->qpn;
		long r = T->peer;

		for (long k = t - 1; k >= 0; k--) {
			struct hev *e = &E->v[k];

			if (e->pid != T->pid || e->qpn != q)
				continue;
			if (is(e, "mem_read") && !e->step) {
				e->step = 1;
				break;
			}
		}
		/* the descriptor: the requester's WQE, or (a READ response) the
		 * request the responder received */
		for (int pass = 0, done = 0; pass < 2 && !done; pass++)
			for (long k = t - 1; k >= 0; k--) {
				struct hev *e = &E->v[k];

				if (e->pid != T->pid || e->qpn != q)
					continue;
				if (is(e, pass ? "pkt_rx" : "wqe_take")) {
					e->step = 2;
					done = 1;
					break;
				}
			}
		T->step = 3;
		E->v[r].step = 5;
		if (place_after(E, r) >= 0)
			E->v[place_after(E, r)].step = 6;
	}
	return t;
}

/* ---- drawing ---- */

static const char *ev_color(const struct hev *e)
{
	if (is(e, "nak_rx") || is(e, "rnr_rx") || is(e, "rtx") || is(e, "sack_rx") || is(e, "sack_tx"))
		return "#d62728";
	if (is(e, "cqe") || is(e, "poll_cq"))
		return "#2ca02c";
	if (!e->engine)
		return "#6a3d9a";
	return "#444444";
}

/* A short label for the row of e. */
static void ev_label(const struct hev *e, char *buf, size_t len)
{
	char op[40], b[40];

	if (is(e, "pkt_tx") || is(e, "pkt_rx"))
		snprintf(buf, len, "%s %s", e->name, kv(e, "op", op, sizeof(op)) ? op : "");
	else if (is(e, "post_send")) {
		int64_t o = num(e, "opcode");

		snprintf(buf, len, "post_send %s, %s B", o >= 0 && o < XOP_COUNT ? xfer_op_name[o] : "?",
			 kv(e, "len", b, sizeof(b)) ? b : "?");
	}
	else if (is(e, "wqe_take"))
		snprintf(buf, len, "wqe_take PSN %s, %s pkts", kv(e, "first_psn", op, sizeof(op)) ? op : "?",
			 kv(e, "packets", b, sizeof(b)) ? b : "?");
	else if (is(e, "mem_read") || is(e, "place"))
		snprintf(buf, len, "%s %s B%s", e->name, kv(e, "len", op, sizeof(op)) ? op : "?",
			 is_cuda(e) ? " GPU" : "");
	else if (is(e, "doorbell") || is(e, "poll_cq"))
		snprintf(buf, len, "%s syscall=%s", e->name, kv(e, "syscall", op, sizeof(op)) ? op : "?");
	else if (is(e, "ack_rx") || is(e, "nak_rx") || is(e, "rnr_rx") || is(e, "rtx"))
		snprintf(buf, len, "%s PSN %s", e->name, kv(e, "psn", op, sizeof(op)) ? op : "?");
	else
		snprintf(buf, len, "%s", e->name);
}

static void draw_packet(FILE *f, const struct hevs *E, long i, long rows)
{
	const struct hev *t = &E->v[i];
	const struct hev *r = t->peer >= 0 && t->peer < rows ? &E->v[t->peer] : NULL;
	int from = t->side ? L_ENG_R : L_ENG_L, to = t->side ? L_ENG_L : L_ENG_R;
	double x1 = lane_x[from], y1 = row_y(i), x2, y2, mx, my;
	const char *cls, *color, *kind;
	char psn[32], op[40], lab[80];
	int red = t->flags & (F_ACK | F_NAK | F_RNR | F_RTX);

	if (!kv(t, "psn", psn, sizeof(psn)))
		snprintf(psn, sizeof(psn), "?");
	if (!kv(t, "op", op, sizeof(op)))
		snprintf(op, sizeof(op), "?");
	if (r) {
		x2 = lane_x[to];
		y2 = row_y(t->peer);
	} else {
		x2 = lane_x[L_WIRE] + (t->side ? -30 : 30);
		y2 = y1 + ROW_H;
	}
	if (t->flags & F_NAK)
		kind = "nak";
	else if (t->flags & F_RNR)
		kind = "rnr";
	else if (t->flags & F_RTX)
		kind = "rtx";
	else if (t->flags & F_ACK)
		kind = "ack";
	else if (t->flags & F_CNP)
		kind = "cnp";
	else
		kind = "data";
	cls = kind;
	color = red ? "#d62728" : (t->flags & F_CNP) ? "#8c564b" : "#1f5fbf";
	fprintf(f, "<g class=\"pkt %s%s\" data-pkt=\"%ld\" data-psn=\"%s\" data-op=\"%s\"%s>", cls,
		r ? "" : " lost", i, psn, op, t->step ? " data-step-packet=\"3\"" : "");
	{
		char pre[160];

		snprintf(pre, sizeof(pre), "%s %s PSN %s%s%s%s", kind, op, psn,
			 t->flags & F_RTX ? " (retransmission)" : "",
			 t->flags & (F_NAK | F_RNR) ? " (handled as a NAK by its receiver)" : "",
			 r ? "" : (t->peer >= 0 ? " (received below the rows drawn)" : " (no pkt_rx in the trace: lost?)"));
		title(f, pre, t, r);
	}
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%s\"%s "
		   "marker-end=\"url(#%s)\"/>",
		x1, y1, x2, y2, color, t->flags & (F_NAK | F_RNR) ? "2.6" : "1.4",
		t->flags & F_RTX ? " stroke-dasharray=\"5 3\"" : "", red ? "ar" : "ab");
	if (!r)
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#d62728\" font-size=\"12\" text-anchor=\"middle\">✗</text>",
			x2 + (t->side ? -8 : 8), y2 + 4);
	mx = (x1 + x2) / 2;
	my = (y1 + y2) / 2;
	/* no spaces: the arrow under the label would show through them */
	if (t->flags & F_NAK)
		snprintf(lab, sizeof(lab), "NAK:psn=%s", psn);
	else if (t->flags & F_RNR)
		snprintf(lab, sizeof(lab), "RNR-NAK:psn=%s", psn);
	else if (t->flags & F_RTX)
		snprintf(lab, sizeof(lab), "rtx:psn=%s", psn);
	else
		snprintf(lab, sizeof(lab), "%spsn=%s", t->flags & F_ACK ? "ACK:" : "", psn);
	fprintf(f, "<text class=\"psn\" x=\"%.1f\" y=\"%.1f\" fill=\"%s\" text-anchor=\"middle\">", mx, my - 5,
		color);
	esc(f, lab);
	fprintf(f, "</text></g>\n");
	if (t->step && r)
		badge(f, 4, mx, my + 10, t);
}

/* GPU staging: the copy before a read runs between the previous engine
 * line of that process and the read; the copy after a placement between
 * the placement and the next engine line. The trace has no line for the
 * copy itself, so the span is as long as the rows around it. */
static void draw_span(FILE *f, const struct hevs *E, long i, long rows)
{
	const struct hev *e = &E->v[i];
	long a = i, b = i;
	int read = is(e, "mem_read");
	double x = lane_x[e->lane] + (e->side ? 20 : -20);

	if (read) {
		for (long k = i - 1; k >= 0; k--)
			if (E->v[k].pid == e->pid && E->v[k].engine && !is_mem(&E->v[k])) {
				a = k;
				break;
			}
	} else {
		for (long k = i + 1; k < rows; k++)
			if (E->v[k].pid == e->pid && E->v[k].engine && !is_mem(&E->v[k])) {
				b = k;
				break;
			}
	}
	fprintf(f, "<g class=\"gpu-copy\" data-copy=\"%s\">", read ? "d2h" : "h2d");
	title(f, read ? "GPU -> host staging copy (the engine's CUDA stream) before this read"
		      : "host -> GPU staging copy (the engine's CUDA stream) after this placement",
	      e, NULL);
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"%.1f\" rx=\"3\" fill=\"#ff7f0e\" "
		   "fill-opacity=\"0.75\" stroke=\"#b35900\"/></g>\n",
		x - 6, row_y(a) - 6, row_y(b) - row_y(a) + 12);
}

static void draw_event(FILE *f, const struct hevs *E, long i)
{
	const struct hev *e = &E->v[i];
	double x = lane_x[e->lane], y = row_y(i);
	int side = lane_side[e->lane];
	char lab[120];

	if (is(e, "pkt_rx") && e->peer >= 0)
		return;   /* drawn with its packet */
	if (is(e, "pkt_rx")) {
		/* its sender was not traced: an arrow from the wire */
		int to = e->side ? L_ENG_R : L_ENG_L;
		double x1 = lane_x[L_WIRE] + (e->side ? 30 : -30);
		char op[40], psn[32];

		fprintf(f, "<g class=\"pkt rx-only\" data-pkt-rx=\"%ld\">", i);
		title(f, "received from a process that was not traced", e, NULL);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#777777\" stroke-width=\"1.2\" "
			   "marker-end=\"url(#ag)\"/>",
			x1, y - ROW_H, lane_x[to], y);
		fprintf(f, "<text class=\"psn\" x=\"%.1f\" y=\"%.1f\" fill=\"#777777\" text-anchor=\"middle\">%s PSN %s</text></g>\n",
			(x1 + lane_x[to]) / 2, y - ROW_H / 2.0 - 2, kv(e, "op", op, sizeof(op)) ? op : "?",
			kv(e, "psn", psn, sizeof(psn)) ? psn : "?");
		return;
	}
	fprintf(f, "<g class=\"ev\" data-ev=\"%s\">", e->name);
	title(f, NULL, e, NULL);
	if (is_mem(e)) {
		/* a DMA arrow between the engine and its memory */
		int eng = e->side ? L_ENG_R : L_ENG_L;
		int rd = is(e, "mem_read");
		double xa = rd ? x : lane_x[eng], xb = rd ? lane_x[eng] : x;

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.4\" "
			   "stroke-dasharray=\"3 2\" marker-end=\"url(#%s)\"/>",
			xa, y, xb + (xb > xa ? -4 : 4), y, is_cuda(e) ? "#b35900" : "#555555",
			is_cuda(e) ? "ao" : "ag");
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>", x - 5, y - 5,
			is_cuda(e) ? "#ff7f0e" : "#8da0cb");
	} else {
		fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\"/>", x, y, ev_color(e));
	}
	ev_label(e, lab, sizeof(lab));
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", x + side * 9, y + 4,
		side < 0 ? "end" : "start");
	esc(f, lab);
	fprintf(f, "</text></g>\n");
}

struct counts {
	long events, pkts, data, acks, naks, rtx, lost, cuda, rx_only;
	int pids[16], npids;
};

static void count(const struct hevs *E, long rows, struct counts *c)
{
	memset(c, 0, sizeof(*c));
	c->events = E->n;
	for (long i = 0; i < E->n; i++) {
		const struct hev *e = &E->v[i];
		int k;

		for (k = 0; k < c->npids && c->pids[k] != e->pid; k++)
			;
		if (k == c->npids && c->npids < 16)
			c->pids[c->npids++] = e->pid;
		if (i >= rows)
			continue;
		if (is(e, "pkt_tx")) {
			c->pkts++;
			c->acks += !!(e->flags & F_ACK);
			c->naks += !!(e->flags & (F_NAK | F_RNR));
			c->rtx += !!(e->flags & F_RTX);
			c->lost += !!(e->flags & F_LOST);
			c->data += !(e->flags & (F_ACK | F_CNP));
		} else if (is(e, "pkt_rx") && e->peer < 0) {
			c->rx_only++;
		}
		c->cuda += is_mem(e) && is_cuda(e);
	}
}

static const char CSS[] =
	"body{font-family:sans-serif;margin:16px;color:#222;background:#fff}"
	"h1{font-size:20px;margin:0 0 4px}p{margin:4px 0;max-width:1100px}"
	"code{background:#f3f3f3;padding:0 3px}"
	".legend span{display:inline-block;margin-right:14px}"
	".sw{display:inline-block;width:22px;height:0;border-top:2px solid;vertical-align:middle;margin-right:4px}"
	"ol.steps{margin:4px 0 8px;columns:2;max-width:1100px;font-size:13px}"
	"svg text{font-size:10px}svg text.psn{font-size:9px;paint-order:stroke;stroke:#fff;stroke-width:4px}"
	"svg g.ev:hover text,svg g.pkt:hover text{font-weight:bold}"
	"svg g.pkt:hover line{stroke-width:3}"
	"details{margin-top:10px}pre{font-size:11px;max-height:400px;overflow:auto;background:#f7f7f7}";

int trace_html(const char *dir, const char *out, const struct html_opts *o)
{
	struct hevs E = { 0 };
	struct counts c;
	char path[4096], tmp[4096 + 8];
	long rows, lim, max = o && o->max_events > 0 ? o->max_events : HTML_MAX_EVENTS, first_data;
	int nfiles = 0, rc = 0;
	FILE *f;
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t t0;

	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "trace.", 6) || !strcmp(de->d_name, "trace.all"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!read_trace(&E, path))
			nfiles++;
	}
	if (d)
		closedir(d);
	if (!nfiles || !E.n) {
		fprintf(stderr, "uroce trace: --html: no data-path trace in %s (did the command use a uroce "
				"device?); %s not written\n",
			dir, out);
		free(E.v);
		return 2;
	}
	qsort(E.v, (size_t)E.n, sizeof(*E.v), cmp_hev);
	rows = E.n < max ? E.n : max;
	assign_sides(&E);
	lim = E.n < rows + MATCH_WINDOW ? E.n : rows + MATCH_WINDOW;
	match_packets(&E, lim);
	flag_packets(&E, lim);
	first_data = mark_steps(&E, lim);
	count(&E, rows, &c);
	t0 = E.v[0].ts;

	snprintf(tmp, sizeof(tmp), "%s.tmp", out);
	f = fopen(tmp, "we");
	if (!f) {
		fprintf(stderr, "uroce trace: --html: %s: %s\n", tmp, strerror(errno));
		rc = -1;
		goto done;
	}
	fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
		   "<meta name=\"viewport\" content=\"width=device-width\">"
		   "<link rel=\"icon\" href=\"data:,\"><title>uroce trace: the data path</title>"
		   "<style>%s</style></head>\n<body>\n",
		CSS);
	fprintf(f, "<h1>uroce trace: the data path</h1>\n<p><b>");
	esc(f, o && o->command ? o->command : "");
	fprintf(f, "</b></p>\n<p>%ld trace lines from %d process%s", c.events, c.npids, c.npids == 1 ? "" : "es");
	for (int i = 0; i < c.npids; i++)
		fprintf(f, "%s%d", i ? ", " : " (pids ", c.pids[i]);
	fprintf(f, ")%s; %ld packets sent: %ld data, %ld ACK, %ld NAK, %ld retransmitted, %ld not seen "
		   "received; %ld GPU staging copies.</p>\n",
		rows < E.n ? "; in the first rows, the ones drawn (see below)" : "", c.pkts, c.data, c.acks,
		c.naks, c.rtx, c.lost, c.cuda);
	fprintf(f, "<p>Time runs down, one row per trace line (left: microseconds since the first line, "
		   "CLOCK_MONOTONIC, one clock for every process). Local is the process that posted first "
		   "(the requester), remote the others. Hover a mark for the trace line behind it.</p>\n");
	fprintf(f, "<p class=\"legend\"><span><i class=\"sw\" style=\"border-color:#1f5fbf\"></i>data packet "
		   "(PSN)</span><span><i class=\"sw\" style=\"border-color:#d62728\"></i>ACK</span>"
		   "<span><i class=\"sw\" style=\"border-color:#d62728;border-top-width:3px\"></i>NAK / RNR NAK</span>"
		   "<span><i class=\"sw\" style=\"border-color:#d62728;border-top-style:dashed\"></i>retransmission</span>"
		   "<span>✗ no pkt_rx (lost)</span>"
		   "<span><i class=\"sw\" style=\"border-color:#555;border-top-style:dotted\"></i>DMA: memory read / "
		   "placement</span><span><i class=\"sw\" style=\"border-color:#ff7f0e;border-top-width:8px\"></i>GPU "
		   "staging copy</span></p>\n");
	fprintf(f, "<p>The seed's steps, marked on the first data packet%s:</p>\n<ol class=\"steps\">",
		first_data < 0 ? " (none in this trace)" : "");
	for (int i = 1; i <= 6; i++) {
		static const char *const circled[7] = { "", "①", "②", "③", "④", "⑤", "⑥" };

		fprintf(f, "<li data-step-legend=\"%d\">%s ", i, circled[i]);
		esc(f, step_text[i] + 4);
		fprintf(f, "</li>");
	}
	fprintf(f, "</ol>\n");

	/* the SVG */
	{
		double h = TOP + (double)rows * ROW_H + 40;
		int has_gpu[2] = { 0, 0 };

		for (long i = 0; i < rows; i++)
			if (is_mem(&E.v[i]) && is_cuda(&E.v[i]))
				has_gpu[E.v[i].side] = 1;
		fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"path\" width=\"%d\" height=\"%.0f\" "
			   "viewBox=\"0 0 %d %.0f\" font-family=\"sans-serif\" data-events=\"%ld\" data-rows=\"%ld\" "
			   "data-pkt-tx=\"%ld\">\n",
			PAGE_W, h, PAGE_W, h, E.n, rows, c.pkts);
		fprintf(f, "<defs>"
			   "<marker id=\"ab\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
			   "orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#1f5fbf\"/></marker>"
			   "<marker id=\"ar\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
			   "orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#d62728\"/></marker>"
			   "<marker id=\"ag\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" "
			   "orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#555555\"/></marker>"
			   "<marker id=\"ao\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" "
			   "orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#b35900\"/></marker></defs>\n");
		/* lanes */
		for (int l = 0; l < L_COUNT; l++) {
			static const char *const name[L_COUNT] = { "application", "memory", "engine (NIC)", "wire",
								  "engine (NIC)", "memory", "application" };
			const char *fill = l == L_WIRE ? "#eef3fb" : l % 2 ? "#f6f6f6" : "#fbfbfb";
			char sub[64];

			fprintf(f, "<rect class=\"lane\" data-lane=\"%d\" x=\"%d\" y=\"60\" width=\"%d\" height=\"%.0f\" fill=\"%s\"/>",
				l, lane_l[l], lane_w[l], h - 70, fill);
			if (l == L_MEM_L || l == L_MEM_R)
				snprintf(sub, sizeof(sub), "%s", has_gpu[l == L_MEM_R] ? "host + GPU" : "host");
			else if (l == L_WIRE)
				snprintf(sub, sizeof(sub), "RoCEv2, UDP 4791");
			else if (l == L_APP_L || l == L_APP_R)
				snprintf(sub, sizeof(sub), "thread");
			else
				snprintf(sub, sizeof(sub), "thread");
			fprintf(f, "<text x=\"%d\" y=\"92\" text-anchor=\"middle\" font-size=\"12\" font-weight=\"bold\">%s</text>"
				   "<text x=\"%d\" y=\"106\" text-anchor=\"middle\" font-size=\"10\">%s</text>\n",
				lane_l[l] + lane_w[l] / 2, name[l], lane_l[l] + lane_w[l] / 2, sub);
		}
		{
			int lp = -1, rp = -1;

			for (long i = 0; i < E.n && (lp < 0 || rp < 0); i++) {
				if (!E.v[i].side && lp < 0)
					lp = E.v[i].pid;
				if (E.v[i].side && rp < 0)
					rp = E.v[i].pid;
			}
			fprintf(f, "<text x=\"%d\" y=\"76\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">"
				   "local (pid %d)</text>",
				(lane_l[L_APP_L] + lane_l[L_WIRE]) / 2, lp);
			if (rp >= 0)
				fprintf(f, "<text x=\"%d\" y=\"76\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">"
					   "remote (pid %d%s)</text>\n",
					(lane_l[L_ENG_R] + PAGE_W) / 2, rp, c.npids > 2 ? " and others" : "");
		}
		fprintf(f, "<text x=\"4\" y=\"106\" font-size=\"10\">time, us</text>\n");
		/* time gutter, spans, events, packets, steps */
		for (long i = 0; i < rows; i++)
			fprintf(f, "<text x=\"72\" y=\"%.1f\" text-anchor=\"end\" fill=\"#666666\">%+.1f</text>\n",
				row_y(i) + 4, ((double)E.v[i].ts - (double)t0) / 1000.0);
		for (long i = 0; i < rows; i++)
			if (is_mem(&E.v[i]) && is_cuda(&E.v[i]))
				draw_span(f, &E, i, rows);
		for (long i = 0; i < rows; i++)
			if (!is(&E.v[i], "pkt_tx"))
				draw_event(f, &E, i);
		for (long i = 0; i < rows; i++)
			if (is(&E.v[i], "pkt_tx"))
				draw_packet(f, &E, i, rows);
		for (long i = 0; i < rows; i++) {
			const struct hev *e = &E.v[i];
			double x = lane_x[e->lane];

			int eng = e->side ? L_ENG_R : L_ENG_L, toward = e->side ? -1 : 1;

			if (!e->step || e->step == 4)
				continue;
			if (e->step == 1 || e->step == 6)
				x = (lane_x[e->lane] + lane_x[eng]) / 2.0;   /* on the DMA arrow */
			else if (e->step == 5)
				x = lane_x[eng] - toward * 16;
			else
				x = lane_x[eng] + toward * 16;
			badge(f, e->step, x, row_y(i), e);
		}
		fprintf(f, "</svg>\n");
	}
	if (rows < E.n)
		fprintf(f, "<p>Drawn: the first %ld of %ld trace lines (--html draws at most %ld rows).</p>\n", rows,
			E.n, max);
	fprintf(f, "<details><summary>the merged trace (%ld lines)</summary><pre>", E.n);
	for (long i = 0; i < E.n && i < 20000; i++) {
		esc(f, E.v[i].line);
		fputc('\n', f);
	}
	fprintf(f, "</pre></details>\n<p>Made by <code>uroce trace --html</code>; docs/uroce.1.md describes "
		   "the trace lines.</p>\n</body></html>\n");
	if (ferror(f) | fclose(f)) {
		fprintf(stderr, "uroce trace: --html: cannot write %s\n", tmp);
		remove(tmp);
		rc = -1;
		goto done;
	}
	if (rename(tmp, out)) {
		fprintf(stderr, "uroce trace: --html: %s: %s\n", out, strerror(errno));
		remove(tmp);
		rc = -1;
		goto done;
	}
	fprintf(stderr, "uroce trace: %ld trace lines from %d process%s, %ld packets (%ld data, %ld ACK, %ld NAK, "
			"%ld retransmitted)%s in %s\n",
		E.n, c.npids, c.npids == 1 ? "" : "es", c.pkts, c.data, c.acks, c.naks, c.rtx,
		rows < E.n ? " in the first rows drawn" : "", out);
	if (rows < E.n)
		fprintf(stderr, "uroce trace: --html drew the first %ld of %ld trace lines\n", rows, E.n);
done:
	for (long i = 0; i < E.n; i++) {
		free(E.v[i].kv);
		free(E.v[i].line);
	}
	free(E.v);
	return rc;
}
