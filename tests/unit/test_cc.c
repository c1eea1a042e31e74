/* DCQCN reaction point and pacer (src/engine/cc.c) against the equations
 * of Zhu et al., SIGCOMM 2015: cuts on CNPs, alpha's update and decay,
 * fast recovery, additive and hyper increase, the byte counter, the
 * pacer's bucket, and the environment knobs. No clock: every time is
 * given. */
#include "t.h"

#include <math.h>
#include <stdlib.h>

#include "cc.h"

#define US 1000ull
#define MS 1000000ull

static struct uroce_cc_cfg cfg(void)
{
	struct uroce_cc_cfg c;

	unsetenv("UROCE_CC");
	T_EQ_INT(uroce_cc_parse(&c), 0);
	c.line_mbps = 10000; /* 10 Gb/s keeps the numbers readable */
	c.timer_ns = 55 * US; /* the paper's T, which the cases below count in */
	return c;
}

static int near(double a, double b)
{
	return fabs(a - b) <= 1e-6 * fmax(1, fabs(b));
}

/* The paper's g, K, F and R_AI; T is 300 us (cc.c says why). */
T_CASE(defaults)
{
	struct uroce_cc_cfg c;

	unsetenv("UROCE_CC");
	T_EQ_INT(uroce_cc_parse(&c), 0);
	T_EQ_INT(c.mode, UROCE_CC_DCQCN);
	T_ASSERT(near(c.g, 1.0 / 256));
	T_EQ_INT(c.alpha_ns, 55 * US);
	T_EQ_INT(c.timer_ns, 300 * US);
	T_EQ_INT(c.f, 5);
	T_ASSERT(near(c.ai_mbps, 40));
}

T_CASE(env_knobs)
{
	struct uroce_cc_cfg c;

	setenv("UROCE_CC", "none", 1);
	setenv("UROCE_CC_RATE_GBPS", "25", 1);
	setenv("UROCE_CC_TIMER_US", "300", 1);
	setenv("UROCE_CC_BURST_KB", "8", 1);
	T_EQ_INT(uroce_cc_parse(&c), 0);
	T_EQ_INT(c.mode, UROCE_CC_NONE);
	T_ASSERT(near(c.line_mbps, 25000));
	T_EQ_INT(c.timer_ns, 300 * US);
	T_EQ_INT(c.burst, 8192);
	setenv("UROCE_CC", "tcp", 1);
	T_EQ_INT(uroce_cc_parse(&c), -1);
	setenv("UROCE_CC", "dcqcn", 1);
	setenv("UROCE_CC_G", "2", 1);
	T_EQ_INT(uroce_cc_parse(&c), -1);
	unsetenv("UROCE_CC");
	unsetenv("UROCE_CC_G");
	unsetenv("UROCE_CC_RATE_GBPS");
	unsetenv("UROCE_CC_TIMER_US");
	unsetenv("UROCE_CC_BURST_KB");
}

/* rt = rc; rc = rc (1 - alpha / 2); alpha = (1 - g) alpha + g */
T_CASE(cnp_cuts_rate_and_raises_alpha)
{
	struct uroce_cc_cfg c = cfg();
	struct uroce_cc cc;
	struct uroce_cc_stats st = { 0, 0 };
	double a;

	uroce_cc_init(&cc, &c, 0);
	T_EQ_INT(cc.limited, 0);
	T_ASSERT(uroce_cc_may_send(&cc, &c, 0)); /* no pacer at the line rate */
	uroce_cc_cnp(&cc, &c, 1 * US, &st);
	T_EQ_INT(st.cuts, 1);
	T_EQ_INT(cc.limited, 1);
	T_ASSERT(near(cc.rt, 10000));
	T_ASSERT(near(cc.rc, 5000)); /* alpha starts at 1: halved */
	T_ASSERT(near(cc.alpha, 1)); /* (1 - g) 1 + g */
	/* a second CNP 10 us later (no timer period passed) */
	uroce_cc_cnp(&cc, &c, 11 * US, &st);
	T_EQ_INT(st.cuts, 2);
	T_ASSERT(near(cc.rt, 5000));
	T_ASSERT(near(cc.rc, 2500));
	/* alpha decays by (1 - g) per 55 us without a CNP */
	a = cc.alpha;
	uroce_cc_advance(&cc, &c, 11 * US + 10 * 55 * US, &st);
	T_ASSERT(near(cc.alpha, a * pow(1 - c.g, 10)));
	/* so the next cut is smaller than half */
	a = cc.alpha;
	{
		double before = cc.rc;

		uroce_cc_cnp(&cc, &c, 11 * US + 10 * 55 * US, &st);
		T_ASSERT(near(cc.rc, before * (1 - a / 2)));
		T_ASSERT(near(cc.alpha, (1 - c.g) * a + c.g));
	}
}

T_CASE(rate_never_below_floor)
{
	struct uroce_cc_cfg c = cfg();
	struct uroce_cc cc;
	struct uroce_cc_stats st = { 0, 0 };

	uroce_cc_init(&cc, &c, 0);
	for (int i = 0; i < 200; i++)
		uroce_cc_cnp(&cc, &c, (uint64_t)i * US, &st);
	T_ASSERT(near(cc.rc, c.min_mbps));
	T_EQ_INT(st.cuts, 200);
}

/* Fast recovery: F timer events each halve the distance to the target,
 * which stays; then additive increase moves the target by R_AI. */
T_CASE(timer_fast_recovery_then_additive)
{
	struct uroce_cc_cfg c = cfg();
	struct uroce_cc cc;
	struct uroce_cc_stats st = { 0, 0 };
	double rc = 5000, rt = 10000;

	c.line_mbps = 100000;
	uroce_cc_init(&cc, &c, 0);
	cc.rc = cc.rt = 10000;
	uroce_cc_cnp(&cc, &c, 0, &st); /* rc 5000, rt 10000 */
	T_ASSERT(near(cc.rc, rc));
	for (uint32_t i = 1; i <= c.f; i++) {
		uroce_cc_advance(&cc, &c, i * 55 * US, &st);
		rc = (rt + rc) / 2;
		T_ASSERT(near(cc.rt, rt));
		T_ASSERTF(near(cc.rc, rc), "stage %u: rc %f want %f", i, cc.rc, rc);
	}
	uroce_cc_advance(&cc, &c, (c.f + 1) * 55 * US, &st);
	rt += c.ai_mbps;
	rc = (rt + rc) / 2;
	T_ASSERT(near(cc.rt, rt));
	T_ASSERT(near(cc.rc, rc));
	T_EQ_INT(st.incs, c.f + 1);
	/* several periods at once are applied one by one (lazy timers) */
	uroce_cc_advance(&cc, &c, (c.f + 4) * 55 * US, &st);
	T_EQ_INT(st.incs, c.f + 4);
	T_ASSERT(near(cc.rt, 10000 + 4 * c.ai_mbps));
}

/* Both counters past F: hyper increase, i R_HAI. */
T_CASE(byte_counter_and_hyper_increase)
{
	struct uroce_cc_cfg c = cfg();
	struct uroce_cc cc;
	struct uroce_cc_stats st = { 0, 0 };
	double rt;

	c.line_mbps = 100000;
	c.bytes = 1 << 20;
	uroce_cc_init(&cc, &c, 0);
	cc.rc = cc.rt = 10000;
	uroce_cc_cnp(&cc, &c, 0, &st);
	/* F + 2 byte counter events, no timer event */
	for (uint32_t i = 0; i < c.f + 2; i++)
		uroce_cc_sent(&cc, &c, 0, 1 << 20, &st);
	T_EQ_INT(cc.b_stage, c.f + 2);
	T_EQ_INT(cc.t_stage, 0);
	T_ASSERT(near(cc.rt, 10000 + 2 * c.ai_mbps)); /* additive: one counter past F */
	rt = cc.rt;
	/* F + 2 timer events: both past F from the F+1st on */
	uroce_cc_advance(&cc, &c, (c.f + 2) * 55 * US, &st);
	T_EQ_INT(cc.t_stage, c.f + 2);
	/* timer events 1..F: additive (only BC is past F); F+1 and F+2:
	 * hyper, (min(T, BC) - F) R_HAI = 1 and 2 R_HAI */
	T_ASSERTF(near(cc.rt, rt + c.f * c.ai_mbps + 3 * c.hai_mbps), "rt %f", cc.rt);
}

/* Recovery ends at the line rate and switches the pacer off. */
T_CASE(recovers_to_line_rate)
{
	struct uroce_cc_cfg c = cfg();
	struct uroce_cc cc;
	struct uroce_cc_stats st = { 0, 0 };

	uroce_cc_init(&cc, &c, 0);
	uroce_cc_cnp(&cc, &c, 0, &st);
	T_EQ_INT(cc.limited, 1);
	uroce_cc_advance(&cc, &c, 2000 * MS, &st);
	T_EQ_INT(cc.limited, 0);
	T_ASSERT(near(cc.rc, c.line_mbps));
	T_ASSERT(cc.alpha < 1e-6);
	T_ASSERT(uroce_cc_may_send(&cc, &c, 2000 * MS));
}

/* The pacer: at 100 Mb/s a 1000-byte packet takes 80 us. An idle QP has
 * its bucket (here 4000 bytes, 320 us: more than the 50 us floor) and
 * then sends one packet every 80 us. */
T_CASE(pacer_spaces_packets)
{
	struct uroce_cc_cfg c = cfg();
	struct uroce_cc cc;
	struct uroce_cc_stats st = { 0, 0 };
	uint64_t now = 100 * MS;
	int sent = 0;

	c.burst = 4000;
	uroce_cc_init(&cc, &c, 0);
	uroce_cc_cnp(&cc, &c, now, &st);
	cc.rc = 100;
	while (uroce_cc_may_send(&cc, &c, now)) {
		uroce_cc_sent(&cc, &c, now, 1000, &st);
		sent++;
		T_ASSERT(sent < 100);
	}
	T_EQ_INT(sent, 5); /* 4000 bytes of bucket, the fifth at its end */
	T_EQ_INT(cc.pace_until, now + 80 * US);
	T_ASSERT(!uroce_cc_may_send(&cc, &c, now + 79 * US));
	T_ASSERT(uroce_cc_may_send(&cc, &c, now + 80 * US));
	uroce_cc_sent(&cc, &c, now + 80 * US, 1000, &st);
	T_ASSERT(!uroce_cc_may_send(&cc, &c, now + 159 * US));
	T_ASSERT(uroce_cc_may_send(&cc, &c, now + 160 * US));
	/* a late wake-up keeps the rate: 200 us late, the bucket lets the
	 * packets due meanwhile go at once */
	sent = 0;
	while (uroce_cc_may_send(&cc, &c, now + 360 * US)) {
		uroce_cc_sent(&cc, &c, now + 360 * US, 1000, &st);
		sent++;
		T_ASSERT(sent < 100);
	}
	T_EQ_INT(sent, 3); /* due at 160, 240 and 320 us */
}

/* At the line rate the bucket is at least 50 us of it: 64 packets of
 * 4 KiB (one GSO batch) leave together at 100 Gb/s. */
T_CASE(pacer_lets_gso_batches_through_at_line_rate)
{
	struct uroce_cc_cfg c = cfg();
	struct uroce_cc cc;
	struct uroce_cc_stats st = { 0, 0 };
	uint64_t now = 100 * MS;

	c.line_mbps = 100000;
	uroce_cc_init(&cc, &c, 0);
	for (int i = 0; i < 64; i++) {
		T_ASSERTF(uroce_cc_may_send(&cc, &c, now), "packet %d held", i);
		uroce_cc_sent(&cc, &c, now, 4096 + 48, &st);
	}
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
