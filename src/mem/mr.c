/* MR key table: open addressing on random 32-bit keys. */
#include "mem.h"
#include "cuda.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define KEY_EMPTY 0u
#define KEY_TOMB 1u

uint32_t uroce_random32(void)
{
	uint32_t v;

	if (getrandom(&v, sizeof(v), 0) != sizeof(v)) {
		/* getrandom on Linux >= 3.17 does not fail for 4 bytes; keep a
		 * fallback that is still not trivially predictable. */
		v = (uint32_t)uroce_now_ns() * 2654435761u ^ (uint32_t)(uintptr_t)&v;
	}
	return v;
}

static inline uint32_t slot_of(uint32_t key, uint32_t cap)
{
	return (key * 2654435761u) & (cap - 1);
}

int uroce_mr_table_init(struct uroce_mr_table *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	t->cap = 256;
	t->keys = calloc(t->cap, sizeof(*t->keys));
	t->mrs = calloc(t->cap, sizeof(*t->mrs));
	return t->keys && t->mrs ? 0 : ENOMEM;
}

void uroce_mr_table_fini(struct uroce_mr_table *t)
{
	free(t->keys);
	free(t->mrs);
	pthread_mutex_destroy(&t->lock);
}

/* Rebuilds the table (doubling it when live keys fill a quarter), which
 * also clears the tombstones: without that, register/deregister cycles
 * would leave no empty slot and probing would never end. */
static int grow(struct uroce_mr_table *t)
{
	uint32_t ncap = (t->used + 1) * 4 > t->cap ? t->cap * 2 : t->cap;
	uint32_t *nk = calloc(ncap, sizeof(*nk));
	struct uroce_mr **nm = calloc(ncap, sizeof(*nm));

	if (!nk || !nm) {
		free(nk);
		free(nm);
		return ENOMEM;
	}
	for (uint32_t i = 0; i < t->cap; i++) {
		uint32_t k = t->keys[i], s;

		if (k <= KEY_TOMB)
			continue;
		for (s = slot_of(k, ncap); nk[s]; s = (s + 1) & (ncap - 1))
			;
		nk[s] = k;
		nm[s] = t->mrs[i];
	}
	free(t->keys);
	free(t->mrs);
	t->keys = nk;
	t->mrs = nm;
	t->cap = ncap;
	t->tombs = 0;
	return 0;
}

int uroce_mr_insert(struct uroce_mr_table *t, struct uroce_mr *mr)
{
	int ret = 0;

	pthread_mutex_lock(&t->lock);
	if ((t->used + t->tombs + 1) * 2 > t->cap && (ret = grow(t)))
		goto out;
	for (;;) {
		uint32_t key = uroce_random32(), s, tomb = UINT32_MAX;

		if (key <= KEY_TOMB)
			continue;
		for (s = slot_of(key, t->cap); t->keys[s] != KEY_EMPTY; s = (s + 1) & (t->cap - 1)) {
			if (t->keys[s] == key)
				break;
			if (t->keys[s] == KEY_TOMB && tomb == UINT32_MAX)
				tomb = s;
		}
		if (t->keys[s] == key)
			continue; /* taken: draw again */
		if (tomb != UINT32_MAX) {
			s = tomb;
			t->tombs--;
		}
		t->keys[s] = key;
		t->mrs[s] = mr;
		t->used++;
		mr->ibmr.lkey = mr->ibmr.rkey = key;
		break;
	}
out:
	pthread_mutex_unlock(&t->lock);
	return ret;
}

void uroce_mr_remove(struct uroce_mr_table *t, struct uroce_mr *mr)
{
	uint32_t key = mr->ibmr.lkey;

	pthread_mutex_lock(&t->lock);
	for (uint32_t s = slot_of(key, t->cap); t->keys[s] != KEY_EMPTY; s = (s + 1) & (t->cap - 1)) {
		if (t->keys[s] == key && t->mrs[s] == mr) {
			t->keys[s] = KEY_TOMB;
			t->mrs[s] = NULL;
			t->used--;
			t->tombs++;
			break;
		}
	}
	pthread_mutex_unlock(&t->lock);
}

struct uroce_mr *uroce_mr_lookup(struct uroce_mr_table *t, uint32_t key)
{
	struct uroce_mr *mr = NULL;

	if (key <= KEY_TOMB)
		return NULL;
	pthread_mutex_lock(&t->lock);
	for (uint32_t s = slot_of(key, t->cap); t->keys[s] != KEY_EMPTY; s = (s + 1) & (t->cap - 1)) {
		if (t->keys[s] == key) {
			mr = t->mrs[s];
			break;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return mr;
}

int uroce_mr_read(const struct uroce_mr *mr, uint64_t va, void *dst, size_t len)
{
	if (mr->kind == UROCE_MEM_CUDA)
		return uroce_cuda_dtoh(mr->cuctx, dst, mr->dev + (va - mr->iova), len);
	memcpy(dst, mr->host + (va - mr->iova), len);
	return 0;
}

int uroce_mr_write(const struct uroce_mr *mr, uint64_t va, const void *src, size_t len)
{
	if (mr->kind == UROCE_MEM_CUDA)
		return uroce_cuda_htod(mr->cuctx, mr->dev + (va - mr->iova), src, len);
	memcpy(mr->host + (va - mr->iova), src, len);
	return 0;
}
