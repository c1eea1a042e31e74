/* Congestion control: DCQCN (Zhu et al., "Congestion Control for
 * Large-Scale RDMA Deployments", SIGCOMM 2015) at the requester, the
 * reaction point of RoCEv2 annex A17.9. A QP's CNPs cut its sending rate,
 * timers and a byte counter raise it again, and a pacer holds every packet
 * the QP sends until the rate allows it.
 *
 *   UROCE_CC=dcqcn|none        (default dcqcn; none: no rate, no pacer)
 *   UROCE_CC_RATE_GBPS=G       line rate, the rate a QP starts at (100)
 *   UROCE_CC_MIN_MBPS=M        floor of the rate (10)
 *   UROCE_CC_AI_MBPS=M         additive increase R_AI (40)
 *   UROCE_CC_HAI_MBPS=M        hyper increase R_HAI (400)
 *   UROCE_CC_G=G               alpha gain g (1/256 = 0.00390625)
 *   UROCE_CC_ALPHA_US=U        alpha decays every U us without a CNP (55)
 *   UROCE_CC_TIMER_US=U        rate increase timer T (300)
 *   UROCE_CC_BYTES_KB=K        rate increase byte counter B (10240: 10 MB)
 *   UROCE_CC_F=F               fast recovery stages (5)
 *   UROCE_CC_BURST_KB=K        the pacer's bucket: bytes sent back to back (64,
 *                              or 50 us at the current rate if more)
 *
 * Every RC, UC and XRC QP is paced at its rate, the line rate until a CNP
 * comes: the line rate is a real ceiling, so a low UROCE_CC_RATE_GBPS
 * emulates a slow link. At the default 100 Gb/s the pacer never holds a
 * packet on this kind of machine. */
#ifndef UROCE_CC_H
#define UROCE_CC_H

#include <stdint.h>

enum { UROCE_CC_NONE, UROCE_CC_DCQCN };

struct uroce_cc_cfg {
	int mode;                    /* UROCE_CC_* */
	double line_mbps, min_mbps;  /* Mb/s */
	double ai_mbps, hai_mbps;    /* R_AI, R_HAI, Mb/s */
	double g;
	uint64_t alpha_ns;           /* alpha update period K */
	uint64_t timer_ns;           /* rate increase timer T */
	uint64_t bytes;              /* rate increase byte counter B */
	uint32_t f;                  /* fast recovery stages F */
	uint32_t burst;              /* pacer bucket, bytes */
};

/* Reaction point state of one QP (engine thread). */
struct uroce_cc {
	uint8_t ready;               /* initialised from the configuration */
	uint8_t limited;             /* rc below the line rate: the increase timers run */
	double rc, rt;               /* current and target rate, Mb/s */
	double alpha;                /* congestion estimate, 0..1 */
	uint64_t alpha_at;           /* last alpha update, ns */
	uint64_t inc_at;             /* last rate increase timer event, ns */
	uint64_t bc_bytes;           /* bytes sent since the last byte counter event */
	uint32_t t_stage, b_stage;   /* timer and byte counter events since the last cut */
	uint64_t tx_next;            /* pacer: the next packet may leave then, ns */
	uint64_t pace_until;         /* a packet waits for the pacer until then; 0: none */
};

/* What a change did, for the counters. */
struct uroce_cc_stats {
	uint64_t cuts, incs;
};

/* The configuration from the environment, read once (warns about bad
 * values and keeps the defaults). */
const struct uroce_cc_cfg *uroce_cc_config(void);
/* Parses the environment into cfg: 0, or -1 with a message. */
int uroce_cc_parse(struct uroce_cc_cfg *cfg);
void uroce_cc_init(struct uroce_cc *cc, const struct uroce_cc_cfg *cfg, uint64_t now);
/* A CNP arrived: cut the rate (DCQCN, the paper's equations 1 and 2). */
void uroce_cc_cnp(struct uroce_cc *cc, const struct uroce_cc_cfg *cfg, uint64_t now,
		  struct uroce_cc_stats *st);
/* Applies the timer events (alpha decay, rate increase) due by now. */
void uroce_cc_advance(struct uroce_cc *cc, const struct uroce_cc_cfg *cfg, uint64_t now,
		      struct uroce_cc_stats *st);
/* 1 if a packet may leave now; else 0 and cc->pace_until says when. */
int uroce_cc_may_send(struct uroce_cc *cc, const struct uroce_cc_cfg *cfg, uint64_t now);
/* A packet of bytes left: the pacer and the byte counter. */
void uroce_cc_sent(struct uroce_cc *cc, const struct uroce_cc_cfg *cfg, uint64_t now,
		   uint32_t bytes, struct uroce_cc_stats *st);

#endif
