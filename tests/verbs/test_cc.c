/* Congestion control end to end (docs/design.md, "Congestion control"):
 * with CE marks at the receiver (UROCE_ECN_MARK, or the engine's own
 * receive backlog, UROCE_ECN_QUEUE_KB) a DCQCN sender cuts its rate and
 * paces, one with UROCE_CC=none does not, and the data arrives exact
 * either way.
 *
 * No timed threshold that a loaded machine could break: the DCQCN runs
 * set a low line rate (UROCE_CC_RATE_GBPS=0.5), which a paced QP can
 * never exceed, so their goodput has a hard ceiling; the runs that must
 * not slow down only have to beat twice that ceiling (loopback moves
 * 10-30 Gb/s here). Counters decide the rest. */
#include "common.h"
#include "counters.h"

#define CHUNK (1u << 20)
#define LINE_GBPS 0.5

/* The process's counters (both contexts) as the transfer ended: a
 * context's stat file goes with it. */
static struct uroce_counters cnt;

#define K(n) (cnt.n)

static void snap(void)
{
#define X(n, d) cnt.n = TV_COUNTER(n);
	UROCE_COUNTERS(X)
#undef X
}

/* Two QPs in contexts (engines) of their own, 16 MiB buffers each. */
static void open_pair(struct tv_pair *p, struct tv_buf *a, struct tv_buf *b, enum ibv_mtu mtu)
{
	struct tv_opts o = tv_opts_default();

	setenv("UROCE_SEED", "7", 0);
	o.mtu = mtu;
	o.separate_ctx = 1; /* an engine each: the notification and the reaction point */
	o.max_send_wr = 64;
	o.max_recv_wr = 64;
	o.cqe = 256;
	tv_pair_open(p, &o);
	tv_buf_alloc(a, p->a.pd, 16u * CHUNK, TV_ACCESS_ALL);
	tv_buf_alloc(b, p->b.pd, 16u * CHUNK, TV_ACCESS_ALL);
}

static void close_pair(struct tv_pair *p, struct tv_buf *a, struct tv_buf *b)
{
	snap();
	tv_buf_free(a);
	tv_buf_free(b);
	tv_pair_close(p);
}

/* n MiB a -> b (WRITE) or b -> a (READ) in 1 MiB WRs over 16 slots, 16 in
 * flight; returns the seconds it took. */
static double stream16(struct tv_pair *p, struct tv_buf *a, struct tv_buf *b, size_t n,
		       enum ibv_wr_opcode op, enum ibv_wc_opcode wc)
{
	double t0 = tv_now();

	for (size_t k = 0; k < n; k++) {
		size_t slot = k % 16;

		if (k >= 16)
			tv_expect_wc_to(p->a.scq, p->a.qp, k - 16, IBV_WC_SUCCESS, wc, 120);
		T_EQ_INT(tv_post1(p->a.qp, op, k, a, slot * CHUNK, CHUNK,
				  (uintptr_t)b->p + slot * CHUNK, b->mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	}
	for (size_t k = n > 16 ? n - 16 : 0; k < n; k++)
		tv_expect_wc_to(p->a.scq, p->a.qp, k, IBV_WC_SUCCESS, wc, 120);
	return tv_now() - t0;
}

/* Moves mb MiB a -> b as WRITEs (depth 16), then mb/4 MiB each of READ
 * and SEND, checking every byte. Returns the WRITE goodput in Gb/s. */
static double xfer(size_t mb, enum ibv_mtu mtu)
{
	struct tv_pair p;
	struct tv_buf a, b;
	size_t buf = 16u * CHUNK, n = mb, small = mb / 4 < 1 ? 1 : mb / 4 > 16 ? 16 : mb / 4;
	double secs;

	open_pair(&p, &a, &b, mtu);
	tv_fill(a.p, buf, 11);
	secs = stream16(&p, &a, &b, n, IBV_WR_RDMA_WRITE, IBV_WC_RDMA_WRITE);
	T_PATTERN(b.p, n < 16 ? n * CHUNK : buf, 11, 0);

	/* READ b -> a, SEND a -> b: paced or not, exact */
	tv_fill(b.p, small * CHUNK, 12);
	for (size_t k = 0; k < small; k++)
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_READ, k, &a, k * CHUNK, CHUNK,
				  (uintptr_t)b.p + k * CHUNK, b.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
	for (size_t k = 0; k < small; k++)
		tv_expect_wc_to(p.a.scq, p.a.qp, k, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 120);
	T_PATTERN(a.p, small * CHUNK, 12, 0);
	tv_fill(a.p, small * CHUNK, 13);
	for (size_t k = 0; k < small; k++)
		T_EQ_INT(tv_post_recv1(p.b.qp, k, &b, k * CHUNK, CHUNK), 0);
	for (size_t k = 0; k < small; k++)
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, k, &a, k * CHUNK, CHUNK, 0, 0, 0,
				  IBV_SEND_SIGNALED), 0);
	for (size_t k = 0; k < small; k++)
		tv_expect_wc_to(p.b.rcq, p.b.qp, k, IBV_WC_SUCCESS, IBV_WC_RECV, 120);
	for (size_t k = 0; k < small; k++)
		tv_expect_wc_to(p.a.scq, p.a.qp, k, IBV_WC_SUCCESS, IBV_WC_SEND, 120);
	T_PATTERN(b.p, small * CHUNK, 13, 0);
	close_pair(&p, &a, &b);
	return (double)n * CHUNK * 8 / secs / 1e9;
}

/* READs only: a pulls mb MiB from b (depth 16, every byte checked), so
 * the data flow is b's READ responses. Returns its goodput in Gb/s. */
static double xfer_read(size_t mb, enum ibv_mtu mtu)
{
	struct tv_pair p;
	struct tv_buf a, b;
	double secs;

	open_pair(&p, &a, &b, mtu);
	tv_fill(b.p, 16u * CHUNK, 14);
	secs = stream16(&p, &a, &b, mb, IBV_WR_RDMA_READ, IBV_WC_RDMA_READ);
	T_PATTERN(a.p, mb < 16 ? mb * CHUNK : 16u * CHUNK, 14, 0);
	close_pair(&p, &a, &b);
	return (double)mb * CHUNK * 8 / secs / 1e9;
}

static void log_counters(const char *what, double gbps)
{
	t_log("%s: %.2f Gb/s; ecn_marked %llu (queue %llu) cnp tx/rx %llu/%llu cc_rate_cuts %llu "
	      "cc_rate_incs %llu cc_pace_waits %llu", what, gbps,
	      (unsigned long long)K(ecn_marked),
	      (unsigned long long)K(ecn_queue_marked),
	      (unsigned long long)K(cnp_sent), (unsigned long long)K(cnp_handled),
	      (unsigned long long)K(cc_rate_cuts),
	      (unsigned long long)K(cc_rate_incs),
	      (unsigned long long)K(cc_pace_waits));
}

static void line_rate(void)
{
	char s[32];

	snprintf(s, sizeof(s), "%g", LINE_GBPS);
	setenv("UROCE_CC_RATE_GBPS", s, 1);
}

/* Half the packets marked CE at the receiver: CNPs cut the sender's rate
 * well below the line rate it would otherwise hold (the next case). The
 * bound cannot fail on a slow machine: slowness only lowers goodput. MTU
 * 1024: at 0.5 Gb/s a 4 KiB packet takes 70 us, longer than DCQCN's
 * 55 us timers and the 50 us between CNPs, which are set for 40 Gb/s. */
T_CASE(dcqcn_slows_down_on_marks)
{
	double g;

	setenv("UROCE_CC", "dcqcn", 1);
	line_rate();
	setenv("UROCE_ECN_MARK", "0.5", 1);
	g = xfer(4, IBV_MTU_1024);
	log_counters("dcqcn, 50% marked", g);
	T_GT_INT(K(cnp_handled), 0);
	T_GT_INT(K(cc_rate_cuts), 0);
	T_GT_INT(K(cc_pace_waits), 0);
	T_GT_INT(K(cc_rate_incs), 0); /* and it recovers between cuts */
	T_ASSERTF(g < LINE_GBPS / 2, "goodput %.3f Gb/s: not below half the %.1f Gb/s line rate",
		  g, LINE_GBPS);
}

/* No marks: no CNP, no cut, and the pacer holds the QP at the line rate,
 * a ceiling (10% for the bucket and the clock); the floor of half of it
 * is 20x below what loopback moves. */
T_CASE(dcqcn_without_marks_holds_line_rate)
{
	double g;

	setenv("UROCE_CC", "dcqcn", 1);
	line_rate();
	g = xfer(16, IBV_MTU_1024);
	log_counters("dcqcn, no marks", g);
	T_EQ_INT(K(cnp_handled), 0);
	T_EQ_INT(K(cc_rate_cuts), 0);
	T_GT_INT(K(cc_pace_waits), 0);
	T_ASSERTF(g <= LINE_GBPS * 1.1, "goodput %.3f Gb/s above the %.1f Gb/s line rate", g,
		  LINE_GBPS);
	T_ASSERTF(g > LINE_GBPS / 2, "goodput %.3f Gb/s without a single CNP", g);
}

/* The same marks with UROCE_CC=none: CNPs are counted and ignored, and
 * nothing paces (twice the line rate a DCQCN QP would be held to). */
T_CASE(none_ignores_marks)
{
	double g;

	setenv("UROCE_CC", "none", 1);
	line_rate(); /* unused by none */
	setenv("UROCE_ECN_MARK", "0.5", 1);
	g = xfer(96, IBV_MTU_4096);
	log_counters("none, 50% marked", g);
	T_GT_INT(K(cnp_handled), 0);
	T_EQ_INT(K(cc_rate_cuts), 0);
	T_EQ_INT(K(cc_pace_waits), 0);
	T_ASSERTF(g > 2 * LINE_GBPS, "goodput %.3f Gb/s: not above twice the %.1f Gb/s a "
		  "DCQCN sender is held to", g, LINE_GBPS);
}

/* READ responses are the responder's data flow: CE on them reaches the
 * responder as CNPs, and its DCQCN paces them as it paces requests. The
 * READ requests themselves are 4 per MiB, so whatever holds goodput
 * under half the line rate is the responses' pacer. */
T_CASE(dcqcn_paces_read_responses)
{
	double g;

	setenv("UROCE_CC", "dcqcn", 1);
	line_rate();
	setenv("UROCE_ECN_MARK", "0.5", 1);
	g = xfer_read(4, IBV_MTU_1024);
	log_counters("dcqcn READ, 50% marked", g);
	T_GT_INT(K(cnp_handled), 0);
	T_GT_INT(K(cc_rate_cuts), 0);
	T_GT_INT(K(cc_pace_waits), 0);
	T_ASSERTF(g < LINE_GBPS / 2, "READ goodput %.3f Gb/s: not below half the %.1f Gb/s "
		  "line rate", g, LINE_GBPS);
}

/* ... and with UROCE_CC=none the same READs run unpaced. */
T_CASE(none_leaves_read_responses_unpaced)
{
	double g;

	setenv("UROCE_CC", "none", 1);
	line_rate();
	setenv("UROCE_ECN_MARK", "0.5", 1);
	g = xfer_read(64, IBV_MTU_4096);
	log_counters("none READ, 50% marked", g);
	T_GT_INT(K(cnp_handled), 0);
	T_EQ_INT(K(cc_pace_waits), 0);
	T_ASSERTF(g > 2 * LINE_GBPS, "READ goodput %.3f Gb/s: not above twice the %.1f Gb/s a "
		  "DCQCN responder is held to", g, LINE_GBPS);
}

/* The default line rate (100 Gb/s) never holds a packet here. */
T_CASE(dcqcn_default_rate_never_paces)
{
	double g;

	setenv("UROCE_CC", "dcqcn", 1);
	g = xfer(96, IBV_MTU_4096);
	log_counters("dcqcn at 100 Gb/s, no marks", g);
	T_EQ_INT(K(cc_rate_cuts), 0);
	T_EQ_INT(K(cc_pace_waits), 0);
}

/* The receiving engine marks CE itself once its receive socket holds more
 * than UROCE_ECN_QUEUE_KB (here: anything at all), and DCQCN reacts. */
T_CASE(queue_backlog_marks_ce)
{
	double g;

	setenv("UROCE_CC", "dcqcn", 1);
	setenv("UROCE_ECN_QUEUE_KB", "0", 1);
	g = xfer(128, IBV_MTU_4096);
	log_counters("dcqcn, CE at any backlog", g);
	T_GT_INT(K(ecn_queue_marked), 0);
	T_GE_INT(K(ecn_marked), K(ecn_queue_marked));
	T_GT_INT(K(cnp_sent), 0);
	T_GT_INT(K(cc_rate_cuts), 0);
}

/* Not-ECT packets are never marked (RFC 3168: a router drops those
 * instead); UROCE_ECN=0 sends them so. */
T_CASE(queue_marks_only_ect)
{
	setenv("UROCE_CC", "dcqcn", 1);
	setenv("UROCE_ECN", "0", 1);
	setenv("UROCE_ECN_QUEUE_KB", "0", 1);
	xfer(64, IBV_MTU_4096);
	log_counters("not-ECT, CE at any backlog", 0);
	T_EQ_INT(K(ecn_queue_marked), 0);
	T_EQ_INT(K(cnp_sent), 0);
	T_EQ_INT(K(cc_rate_cuts), 0);
}

/* UROCE_RX_RATE_GBPS: the receiving engine reads at most that rate, a
 * ceiling for what the sender gets (the incast benchmark's bottleneck). */
T_CASE(rx_rate_caps_goodput)
{
	double g;

	setenv("UROCE_CC", "none", 1);
	setenv("UROCE_RX_RATE_GBPS", "1", 1);
	g = xfer(32, IBV_MTU_4096);
	log_counters("UROCE_RX_RATE_GBPS=1", g);
	T_ASSERTF(g <= 1.15, "goodput %.3f Gb/s above the 1 Gb/s receive rate", g);
}

T_CASE(bad_queue_setting_fails_open)
{
	struct ibv_device **l;
	struct ibv_context *c;

	setenv("UROCE_ECN_QUEUE_KB", "64,32", 1);
	l = ibv_get_device_list(NULL);
	T_ASSERT(l && l[0]);
	c = ibv_open_device(l[0]);
	T_ASSERTF(!c, "ibv_open_device accepted UROCE_ECN_QUEUE_KB=64,32");
	T_EQ_INT(errno, EINVAL);
	ibv_free_device_list(l);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
