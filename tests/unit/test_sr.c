/* Selective repeat's PSN bitmaps (src/engine/qp.c): ranges of any length
 * and alignment, across the 24-bit PSN wrap, against a reference model. */
#include "t.h"

#include "engine.h"

static uint64_t map[SR_BITS / 64];
static uint8_t ref[SR_BITS];

static void check_all(const char *what)
{
	for (uint32_t i = 0; i < SR_BITS; i++)
		T_ASSERTF(sr_test(map, i) == ref[i], "%s: bit %u is %d, want %d", what, i,
			  sr_test(map, i), ref[i]);
}

static void model(uint32_t psn, uint32_t n, int v)
{
	if (n >= SR_BITS) {
		memset(ref, v, sizeof(ref));
		return;
	}
	for (uint32_t k = 0; k < n; k++)
		ref[psn_add(psn, k) % SR_BITS] = (uint8_t)v;
}

T_CASE(ranges_match_model)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	memset(map, 0, sizeof(map));
	memset(ref, 0, sizeof(ref));
	for (int i = 0; i < 20000; i++) {
		uint32_t psn, n;
		int v;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		psn = (uint32_t)(x & PSN_MASK);
		n = (uint32_t)((x >> 24) % (i % 50 == 0 ? 2 * SR_BITS : 300));
		v = (int)((x >> 40) & 1);
		if (v)
			uroce_sr_set_range(map, psn, n);
		else
			uroce_sr_clear_range(map, psn, n);
		model(psn, n, v);
		if (i % 97 == 0)
			check_all("random ranges");
	}
	check_all("random ranges");
}

T_CASE(range_across_psn_wrap)
{
	memset(map, 0, sizeof(map));
	uroce_sr_set_range(map, PSN_MASK - 69, 140); /* 0xffffba .. 0x000045 */
	for (uint32_t k = 0; k < 140; k++)
		T_ASSERT(sr_test(map, psn_add(PSN_MASK - 69, k)));
	T_ASSERT(!sr_test(map, psn_add(PSN_MASK - 69, 140)));
	T_ASSERT(!sr_test(map, PSN_MASK - 70));
	uroce_sr_clear_range(map, PSN_MASK - 5, 12);
	for (uint32_t k = 0; k < 12; k++)
		T_ASSERT(!sr_test(map, psn_add(PSN_MASK - 5, k)));
	T_ASSERT(sr_test(map, PSN_MASK - 6));
	T_ASSERT(sr_test(map, 6));
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
