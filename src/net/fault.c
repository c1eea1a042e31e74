/* Fault injection settings from the environment (see fault.h). */
#include "fault.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

static int prob(const char *name, double *out)
{
	const char *s = getenv(name);
	char *end;
	double v;

	*out = 0;
	if (!s || !*s)
		return 0;
	v = strtod(s, &end);
	if (*end || v < 0 || v > 1) {
		uroce_err("%s=%s: want a probability between 0 and 1 (0.01 is 1%%)", name, s);
		return -1;
	}
	*out = v;
	return 0;
}

static int count(const char *name, uint64_t *out, uint64_t max)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	*out = 0;
	if (!s || !*s)
		return 0;
	v = strtoull(s, &end, 0);
	if (*end || v > max) {
		uroce_err("%s=%s: want a whole number up to %llu", name, s, (unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
}

/* UROCE_DROP_NTH: a comma-separated list of packet numbers. */
static int nth_list(struct uroce_fault *f)
{
	const char *s = getenv("UROCE_DROP_NTH");
	char *end;

	if (!s || !*s)
		return 0;
	while (*s) {
		unsigned long long v = strtoull(s, &end, 10);

		if (end == s || !v || f->ndrop_nth == (int)ARRAY_SIZE(f->drop_nth) ||
		    (*end && *end != ',')) {
			uroce_err("UROCE_DROP_NTH=%s: want up to %d packet numbers from 1, "
				  "separated by commas", getenv("UROCE_DROP_NTH"),
				  (int)ARRAY_SIZE(f->drop_nth));
			return -1;
		}
		f->drop_nth[f->ndrop_nth++] = v;
		s = *end ? end + 1 : end;
	}
	return 0;
}

int uroce_fault_init(struct uroce_fault *f)
{
	const char *dir = getenv("UROCE_FAULT_DIR");
	uint64_t reorder, reorder_us, delay_us, seed;
	int bad = 0;

	memset(f, 0, sizeof(*f));
	bad |= prob("UROCE_LOSS", &f->loss);
	bad |= prob("UROCE_DUP", &f->dup);
	bad |= prob("UROCE_CORRUPT", &f->corrupt);
	bad |= prob("UROCE_ECN_MARK", &f->ecn_mark);
	bad |= count("UROCE_REORDER", &reorder, 256);
	bad |= count("UROCE_REORDER_US", &reorder_us, 10000000);
	bad |= count("UROCE_DELAY_US", &delay_us, 10000000);
	bad |= count("UROCE_SEED", &seed, UINT64_MAX);
	bad |= nth_list(f);
	if (bad)
		return -1;
	f->reorder = (uint32_t)reorder;
	f->delay_ns = delay_us * 1000;
	f->reorder_ns = (getenv("UROCE_REORDER_US") && *getenv("UROCE_REORDER_US") ? reorder_us : 50) * 1000;
	f->dir = FAULT_RX;
	if (dir && !strcmp(dir, "tx"))
		f->dir = FAULT_TX;
	else if (dir && !strcmp(dir, "both"))
		f->dir = FAULT_RX | FAULT_TX;
	else if (dir && *dir && strcmp(dir, "rx")) {
		uroce_err("UROCE_FAULT_DIR=%s: want rx, tx or both", dir);
		return -1;
	}
	f->rng = getenv("UROCE_SEED") ? seed : uroce_now_ns();
	f->rng = f->rng * 0x9E3779B97F4A7C15ull + 1; /* never zero */
	if (!f->rng)
		f->rng = 1;
	f->enabled = f->loss > 0 || f->dup > 0 || f->corrupt > 0 || f->ecn_mark > 0 || f->reorder ||
		     f->delay_ns || f->ndrop_nth;
	return 0;
}
