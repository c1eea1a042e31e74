/* Memory regions: keys, bounds and access rights. */
#ifndef UROCE_MEM_H
#define UROCE_MEM_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>

struct uroce_pd;

struct uroce_mr {
	struct ibv_mr ibmr;      /* what the application sees */
	struct uroce_pd *pd;
	uint64_t iova;           /* first address remote and local keys name */
	uint64_t length;         /* bytes */
	uint8_t *host;           /* host address of iova */
	int access;              /* IBV_ACCESS_* */
	int kind;                /* UROCE_MEM_HOST or UROCE_MEM_CUDA */
	void *cuctx;             /* CUDA: the owning context */
	uint64_t dev;            /* CUDA: device address of iova */
	void *dmabuf_map;        /* ibv_reg_dmabuf_mr of a mappable dma-buf */
	size_t dmabuf_len;
};

enum { UROCE_MEM_HOST = 0, UROCE_MEM_CUDA = 1 };

/* A table of MRs keyed by their (random, unguessable) 32-bit key; lkey ==
 * rkey. Lookups happen on the engine thread; updates take the lock, and
 * destroying an MR waits for the engine (see verbs.c), so a lookup never
 * sees a freed MR. */
struct uroce_mr_table {
	pthread_mutex_t lock;
	uint32_t cap;            /* slots, power of 2 */
	uint32_t used;
	uint32_t tombs;          /* removed slots; probes end only at empty ones */
	uint32_t *keys;          /* 0 = empty, 1 = tombstone */
	struct uroce_mr **mrs;
};

int uroce_mr_table_init(struct uroce_mr_table *t);
void uroce_mr_table_fini(struct uroce_mr_table *t);
/* Assigns a fresh random key and inserts; returns 0 or an errno. */
int uroce_mr_insert(struct uroce_mr_table *t, struct uroce_mr *mr);
void uroce_mr_remove(struct uroce_mr_table *t, struct uroce_mr *mr);
struct uroce_mr *uroce_mr_lookup(struct uroce_mr_table *t, uint32_t key);

/* Checks that [va, va+len) lies inside the MR and that it grants 'need'
 * (IBV_ACCESS_* bits; 0 for local read). Returns the host address or NULL. */
static inline int uroce_mr_ok(const struct uroce_mr *mr, uint64_t va, uint64_t len, int need)
{
	if ((mr->access & need) != need)
		return 0;
	if (va < mr->iova || len > mr->length || va - mr->iova > mr->length - len)
		return 0;
	return 1;
}

/* Host memory only (CUDA MRs return NULL: use uroce_mr_read/write). */
static inline uint8_t *uroce_mr_addr(const struct uroce_mr *mr, uint64_t va, uint64_t len,
				     int need)
{
	if (mr->kind != UROCE_MEM_HOST || !uroce_mr_ok(mr, va, len, need))
		return NULL;
	return mr->host + (va - mr->iova);
}

/* Copies out of / into an MR of any kind at va (already checked). 0 or -1. */
int uroce_mr_read(const struct uroce_mr *mr, uint64_t va, void *dst, size_t len);
int uroce_mr_write(const struct uroce_mr *mr, uint64_t va, const void *src, size_t len);

uint32_t uroce_random32(void);

#endif
