/* Fault injection: a bad network on demand, without netem.
 *
 *   UROCE_LOSS=P  UROCE_DUP=P  UROCE_CORRUPT=P   probabilities (0.01 is 1%)
 *   UROCE_REORDER=N   hold every packet back behind 1..N later ones (a
 *                     permutation with displacement up to N); one with
 *                     no k packets behind it leaves after k mean packet
 *                     gaps, and never later than UROCE_REORDER_US
 *                     (default 50 us): the spread of paths in a fabric,
 *                     not a stall
 *   UROCE_DELAY_US=N  hold every packet N microseconds
 *   UROCE_STALL_US=N  every engine turn loses the CPU N microseconds (a
 *                     loaded host; read by the engine, src/engine/engine.c)
 *   UROCE_FAULT_DIR=rx|tx|both   where faults apply (default rx)
 *   UROCE_ECN_MARK=P  receive packets as if a switch had marked them CE
 *   UROCE_DROP_NTH=K[,K...]  drop exactly the K-th packets (from 1) that
 *                     pass the injector: deterministic loss for tests
 *   UROCE_SEED=N      deterministic choices (default: from the clock)
 */
#ifndef UROCE_FAULT_H
#define UROCE_FAULT_H

#include <stdint.h>

enum { FAULT_RX = 1, FAULT_TX = 2 };

struct uroce_fault {
	int enabled;
	int dir;                 /* FAULT_RX | FAULT_TX */
	double loss, dup, corrupt;
	double ecn_mark;         /* UROCE_ECN_MARK: mark packets CE on receive */
	uint32_t reorder;        /* window, packets */
	uint64_t reorder_ns;     /* longest hold for reordering */
	uint64_t delay_ns;
	uint64_t rng;            /* xorshift64* state */
	uint64_t drop_nth[16];   /* UROCE_DROP_NTH, ascending */
	int ndrop_nth;
};

/* Reads the environment; returns 0, or -1 with a message for bad values. */
int uroce_fault_init(struct uroce_fault *f);

static inline uint64_t uroce_fault_rand(struct uroce_fault *f)
{
	uint64_t x = f->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	f->rng = x;
	return x * 0x2545F4914F6CDD1Dull;
}

static inline int uroce_fault_hit(struct uroce_fault *f, double p)
{
	return p > 0 && (double)(uroce_fault_rand(f) >> 11) * 0x1.0p-53 < p;
}

/* Whether the seq-th packet (from 1) is one UROCE_DROP_NTH names. */
static inline int uroce_fault_nth(const struct uroce_fault *f, uint64_t seq)
{
	for (int i = 0; i < f->ndrop_nth; i++)
		if (f->drop_nth[i] == seq)
			return 1;
	return 0;
}

#endif
