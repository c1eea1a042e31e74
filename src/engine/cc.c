/* DCQCN reaction point (Zhu et al., SIGCOMM 2015, section 3.1) and the
 * per-QP pacer; see cc.h for the knobs and docs/design.md, "Congestion
 * control", for the why.
 *
 * Rates are in Mb/s. Timer events are applied lazily: whenever the QP
 * wants to send or a CNP arrives, every alpha period and rate increase
 * period that passed since the last look is applied in order, which is
 * what free-running timers would have done, without waking an idle
 * engine. */
#include "cc.h"
#include "util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static struct uroce_cc_cfg cfg_env;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

static void cfg_defaults(struct uroce_cc_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->mode = UROCE_CC_DCQCN;
	c->line_mbps = 100000;
	c->min_mbps = 10;
	c->ai_mbps = 40;             /* the paper's R_AI */
	c->hai_mbps = 400;           /* 10 R_AI, the ratio of mlx5's defaults */
	c->g = 1.0 / 256;            /* the paper's g */
	c->alpha_ns = 55000;         /* the paper's K: 55 us */
	/* T: 300 us, not the paper's 55 us. Here a cut takes effect only
	 * after two engine threads and the scheduler have run (hundreds of
	 * microseconds on a busy host); with 55 us a QP recovered before its
	 * cut had drained anything, and 8-sender incast kept dropping
	 * (docs/design.md, "Congestion control"). */
	c->timer_ns = 300000;
	c->bytes = 10ull << 20;      /* the paper's B: 10 MB */
	c->f = 5;                    /* the paper's F */
	/* 64 KiB, one GSO batch at MTU 4096: smaller buckets split the
	 * batches into small datagrams, whose per-buffer overhead filled a
	 * receiver's socket sooner (more drops in bench-incast, not fewer) */
	c->burst = 64 << 10;
}

/* A positive number from the environment, scaled; 0 when unset, -1 bad. */
static int num(const char *name, double lo, double hi, double *out)
{
	const char *s = getenv(name);
	char *end;
	double v;

	if (!s || !*s)
		return 0;
	v = strtod(s, &end);
	if (*end || !(v >= lo && v <= hi)) {
		uroce_err("%s=%s: want a number from %g to %g", name, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

int uroce_cc_parse(struct uroce_cc_cfg *c)
{
	const char *m = getenv("UROCE_CC");
	double v;
	int bad = 0;

	cfg_defaults(c);
	if (m && *m) {
		if (!strcmp(m, "none") || !strcmp(m, "0"))
			c->mode = UROCE_CC_NONE;
		else if (!strcmp(m, "dcqcn"))
			c->mode = UROCE_CC_DCQCN;
		else {
			uroce_err("UROCE_CC=%s: want dcqcn or none", m);
			bad = 1;
		}
	}
	v = c->line_mbps / 1000;
	bad |= num("UROCE_CC_RATE_GBPS", 0.001, 10000, &v);
	c->line_mbps = v * 1000;
	bad |= num("UROCE_CC_MIN_MBPS", 0.001, 1e7, &c->min_mbps);
	bad |= num("UROCE_CC_AI_MBPS", 0.001, 1e7, &c->ai_mbps);
	bad |= num("UROCE_CC_HAI_MBPS", 0.001, 1e7, &c->hai_mbps);
	bad |= num("UROCE_CC_G", 1e-6, 1, &c->g);
	v = (double)c->alpha_ns / 1000;
	bad |= num("UROCE_CC_ALPHA_US", 1, 1e7, &v);
	c->alpha_ns = (uint64_t)(v * 1000);
	v = (double)c->timer_ns / 1000;
	bad |= num("UROCE_CC_TIMER_US", 1, 1e7, &v);
	c->timer_ns = (uint64_t)(v * 1000);
	v = (double)(c->bytes >> 10);
	bad |= num("UROCE_CC_BYTES_KB", 1, 1e8, &v);
	c->bytes = (uint64_t)(v * 1024);
	v = c->f;
	bad |= num("UROCE_CC_F", 1, 1000, &v);
	c->f = (uint32_t)v;
	v = c->burst >> 10;
	bad |= num("UROCE_CC_BURST_KB", 1, 65536, &v);
	c->burst = (uint32_t)(v * 1024);
	if (c->min_mbps > c->line_mbps)
		c->min_mbps = c->line_mbps;
	return bad ? -1 : 0;
}

static void cfg_load(void)
{
	if (uroce_cc_parse(&cfg_env)) {
		uroce_warn("congestion control: bad settings, using the defaults (UROCE_CC=dcqcn)");
		cfg_defaults(&cfg_env);
	}
}

const struct uroce_cc_cfg *uroce_cc_config(void)
{
	pthread_once(&cfg_once, cfg_load);
	return &cfg_env;
}

void uroce_cc_init(struct uroce_cc *cc, const struct uroce_cc_cfg *c, uint64_t now)
{
	memset(cc, 0, sizeof(*cc));
	cc->ready = 1;
	cc->rc = cc->rt = c->line_mbps;
	cc->alpha = 1;               /* the paper starts at 1: the first cut halves */
	cc->alpha_at = cc->inc_at = now;
	cc->tx_next = now;
}

/* One rate increase event (timer or byte counter): fast recovery halves
 * the distance to the target for F events; then the target itself rises,
 * by R_AI (additive) once either counter passed F, by i R_HAI (hyper)
 * once both did (the paper's equations 3 to 5). */
static void increase(struct uroce_cc *cc, const struct uroce_cc_cfg *c, struct uroce_cc_stats *st)
{
	uint32_t hi = MAX(cc->t_stage, cc->b_stage), lo = MIN(cc->t_stage, cc->b_stage);

	if (lo > c->f)
		cc->rt += (double)(lo - c->f) * c->hai_mbps;
	else if (hi > c->f)
		cc->rt += c->ai_mbps;
	if (cc->rt > c->line_mbps)
		cc->rt = c->line_mbps;
	cc->rc = (cc->rt + cc->rc) / 2;
	/* within a kilobit of the line: recovered */
	if (cc->rc > c->line_mbps - 0.001) {
		cc->rc = cc->rt = c->line_mbps;
		cc->limited = 0;
		cc->t_stage = cc->b_stage = 0;
	}
	st->incs++;
}

void uroce_cc_advance(struct uroce_cc *cc, const struct uroce_cc_cfg *c, uint64_t now,
		      struct uroce_cc_stats *st)
{
	uint64_t n;

	if (now - cc->alpha_at >= c->alpha_ns) {
		/* alpha = (1 - g) alpha for every period without a CNP */
		n = (now - cc->alpha_at) / c->alpha_ns;
		cc->alpha_at += n * c->alpha_ns;
		for (; n && cc->alpha > 1e-9; n--)
			cc->alpha *= 1 - c->g;
		if (cc->alpha <= 1e-9)
			cc->alpha = 0;
	}
	if (!cc->limited) {
		cc->inc_at = now;
		return;
	}
	n = (now - cc->inc_at) / c->timer_ns;
	cc->inc_at += n * c->timer_ns;
	for (; n && cc->limited; n--) {
		cc->t_stage++;
		increase(cc, c, st);
	}
	if (!cc->limited)
		cc->inc_at = now;
}

void uroce_cc_cnp(struct uroce_cc *cc, const struct uroce_cc_cfg *c, uint64_t now,
		  struct uroce_cc_stats *st)
{
	uroce_cc_advance(cc, c, now, st);
	/* target = current; current = current (1 - alpha / 2); alpha =
	 * (1 - g) alpha + g; the increase counters start again */
	cc->rt = cc->rc;
	cc->rc *= 1 - cc->alpha / 2;
	if (cc->rc < c->min_mbps)
		cc->rc = c->min_mbps;
	cc->alpha = (1 - c->g) * cc->alpha + c->g;
	cc->alpha_at = cc->inc_at = now;
	cc->t_stage = cc->b_stage = 0;
	cc->bc_bytes = 0;
	cc->limited = 1;
	st->cuts++;
}

/* Nanoseconds that bytes take at the current rate. */
static inline uint64_t cost_ns(const struct uroce_cc *cc, uint64_t bytes)
{
	return (uint64_t)((double)bytes * 8000.0 / cc->rc);
}

int uroce_cc_may_send(struct uroce_cc *cc, const struct uroce_cc_cfg *c, uint64_t now)
{
	if (cc->tx_next <= now)
		return 1;
	cc->pace_until = cc->tx_next;
	return 0;
}

void uroce_cc_sent(struct uroce_cc *cc, const struct uroce_cc_cfg *c, uint64_t now,
		   uint32_t bytes, struct uroce_cc_stats *st)
{
	uint64_t burst;

	cc->pace_until = 0;
	/* A token bucket in virtual time: tx_next runs at the rate, and an
	 * idle QP saves up at most the bucket, so a late wake-up does not
	 * cost rate and a long pause buys no burst. The bucket is
	 * UROCE_CC_BURST_KB, or 50 us at the current rate if that is more:
	 * the engine's sleeps are not finer than that, and at the default
	 * line rate (100 Gb/s) the pacer must not split the 64-packet GSO
	 * batches a loopback or veth path needs for its speed. */
	burst = MAX(cost_ns(cc, c->burst), 50000ull);
	if (cc->tx_next + burst < now)
		cc->tx_next = now - burst;
	cc->tx_next += cost_ns(cc, bytes);
	cc->bc_bytes += bytes;
	while (cc->bc_bytes >= c->bytes && cc->limited) {
		cc->bc_bytes -= c->bytes;
		cc->b_stage++;
		increase(cc, c, st);
	}
}
