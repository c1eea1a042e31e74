/* A fake libcuda.so.1 for machines without a GPU: just enough of the driver
 * API for uroce's GPU path (src/mem/cuda.c) and tests/verbs/test_gpu_nccl.c.
 *
 * "Device memory" is an address range the CPU cannot touch (PROT_NONE);
 * its bytes live in a shadow mapping that only the cuMemcpy* calls reach.
 * So a library that takes device memory for host memory faults instead of
 * passing. cuMemAlloc memory has a context; cuMem (VMM) memory has none,
 * as with the real driver, and is found by cuMemRetainAllocationHandle.
 * Copies are synchronous; streams and events are tokens. No dma-bufs
 * (cuMemGetHandleForAddressRange is absent, so those cases skip).
 *
 *   cc -shared -fPIC -o DIR/libcuda.so.1 tests/gpu/fakecuda.c
 *   LD_LIBRARY_PATH=DIR build/tests/verbs/test_gpu_nccl */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;

#define API __attribute__((visibility("default")))
enum { OK = 0, INVALID_VALUE = 1, NOT_READY = 600 };

struct range {
	uintptr_t dev;    /* the untouchable address range */
	uint8_t *shadow;  /* where its bytes are */
	size_t len;
	int vmm, mapped;  /* cuMem: mapped once cuMemMap'ed */
	uint64_t handle;
};

#define MAXR 256
static struct range r[MAXR];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ctx_token = 1;
static uint64_t next_handle = 1;
static struct {
	uint8_t *shadow;
	size_t len;
	uint64_t handle;
} phys[MAXR];

static struct range *find(uintptr_t a, size_t n)
{
	for (int i = 0; i < MAXR; i++)
		if (r[i].len && a >= r[i].dev && a + n <= r[i].dev + r[i].len &&
		    (!r[i].vmm || r[i].mapped))
			return &r[i];
	return NULL;
}

static struct range *slot(void)
{
	for (int i = 0; i < MAXR; i++)
		if (!r[i].len)
			return &r[i];
	return NULL;
}

static uintptr_t reserve(size_t len)
{
	void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? 0 : (uintptr_t)p;
}

API CUresult cuInit(unsigned f) { return OK; }
API CUresult cuDeviceGetCount(int *n) { *n = 1; return OK; }
API CUresult cuDeviceGet(int *d, int ord) { if (ord) return INVALID_VALUE; *d = 0; return OK; }
API CUresult cuDevicePrimaryCtxRetain(void **c, int d) { *c = &ctx_token; return OK; }
API CUresult cuCtxSetCurrent(void *c) { return OK; }
/* a context of uroce's own (for VMM memory): pushed by create, popped at once */
static int own_ctx_token;
API CUresult cuCtxCreate_v2(void **c, unsigned f, int d) { *c = &own_ctx_token; return OK; }
API CUresult cuCtxPopCurrent_v2(void **c) { if (c) *c = &own_ctx_token; return OK; }
API CUresult cuCtxSynchronize(void) { return OK; }
API CUresult cuGetErrorString(CUresult e, const char **s) { *s = "fake CUDA error"; return OK; }
API CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
	*v = attr == 110; /* GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED; no dma-buf (124) */
	return OK;
}

API CUresult cuMemAlloc_v2(CUdeviceptr *d, size_t len)
{
	struct range *x;

	pthread_mutex_lock(&lock);
	x = slot();
	if (x) {
		x->dev = reserve(len);
		x->shadow = calloc(1, len);
		x->len = len;
		x->vmm = 0;
	}
	pthread_mutex_unlock(&lock);
	if (!x || !x->dev || !x->shadow)
		return 2; /* OUT_OF_MEMORY */
	*d = x->dev;
	return OK;
}

API CUresult cuMemFree_v2(CUdeviceptr d)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAXR; i++)
		if (r[i].len && !r[i].vmm && r[i].dev == d) {
			munmap((void *)r[i].dev, r[i].len);
			free(r[i].shadow);
			memset(&r[i], 0, sizeof(r[i]));
		}
	pthread_mutex_unlock(&lock);
	return OK;
}

API CUresult cuMemGetAllocationGranularity(size_t *g, const void *prop, int opt)
{
	*g = 2u << 20;
	return OK;
}

API CUresult cuMemCreate(uint64_t *h, size_t len, const void *prop, unsigned long long f)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAXR; i++)
		if (!phys[i].len) {
			phys[i].shadow = calloc(1, len);
			phys[i].len = len;
			phys[i].handle = *h = next_handle++;
			pthread_mutex_unlock(&lock);
			return OK;
		}
	pthread_mutex_unlock(&lock);
	return 2;
}

API CUresult cuMemAddressReserve(CUdeviceptr *d, size_t len, size_t align, CUdeviceptr hint,
				 unsigned long long f)
{
	*d = reserve(len);
	return *d ? OK : 2;
}

API CUresult cuMemMap(CUdeviceptr d, size_t len, size_t off, uint64_t h, unsigned long long f)
{
	struct range *x;

	pthread_mutex_lock(&lock);
	x = slot();
	for (int i = 0; x && i < MAXR; i++)
		if (phys[i].len && phys[i].handle == h) {
			x->dev = d;
			x->shadow = phys[i].shadow + off;
			x->len = len;
			x->vmm = x->mapped = 1;
			x->handle = h;
			pthread_mutex_unlock(&lock);
			return OK;
		}
	pthread_mutex_unlock(&lock);
	return INVALID_VALUE;
}

API CUresult cuMemSetAccess(CUdeviceptr d, size_t len, const void *desc, size_t n) { return OK; }

API CUresult cuMemUnmap(CUdeviceptr d, size_t len)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAXR; i++)
		if (r[i].len && r[i].vmm && r[i].dev == d)
			memset(&r[i], 0, sizeof(r[i]));
	pthread_mutex_unlock(&lock);
	return OK;
}

API CUresult cuMemRelease(uint64_t h)
{
	/* a retained handle is released too: only free memory nothing maps */
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAXR; i++)
		if (phys[i].len && phys[i].handle == h) {
			int used = 0;

			for (int j = 0; j < MAXR; j++)
				used |= r[j].len && r[j].vmm && r[j].handle == h;
			if (!used) {
				free(phys[i].shadow);
				memset(&phys[i], 0, sizeof(phys[i]));
			}
		}
	pthread_mutex_unlock(&lock);
	return OK;
}

API CUresult cuMemAddressFree(CUdeviceptr d, size_t len)
{
	munmap((void *)d, len);
	return OK;
}

API CUresult cuMemRetainAllocationHandle(uint64_t *h, void *addr)
{
	struct range *x;

	pthread_mutex_lock(&lock);
	x = find((uintptr_t)addr, 1);
	if (x && x->vmm)
		*h = x->handle;
	pthread_mutex_unlock(&lock);
	return x && x->vmm ? OK : INVALID_VALUE;
}

struct prop {
	int type, handle_types;
	struct {
		int type, id;
	} loc;
};

API CUresult cuMemGetAllocationPropertiesFromHandle(struct prop *p, uint64_t h)
{
	memset(p, 0, sizeof(*p));
	p->type = 1;
	p->handle_types = 1;
	p->loc.type = 1; /* device */
	p->loc.id = 0;
	return OK;
}

/* MEMORY_TYPE 2, CONTEXT 1, IS_MANAGED 8, DEVICE_ORDINAL 9, MAPPED 13 */
static void attr_of(int a, void *data, struct range *x)
{
	switch (a) {
	case 2: *(unsigned *)data = x ? 2 : 0; break;
	case 1: *(void **)data = x && !x->vmm ? &ctx_token : NULL; break;
	case 8: *(unsigned *)data = 0; break;
	case 9: *(int *)data = x ? 0 : -2; break;
	case 13: *(unsigned char *)data = x != NULL; break;
	default: break;
	}
}

API CUresult cuPointerGetAttributes(unsigned n, int *which, void **data, CUdeviceptr p)
{
	struct range *x;

	pthread_mutex_lock(&lock);
	x = find(p, 1);
	for (unsigned i = 0; i < n; i++)
		attr_of(which[i], data[i], x);
	pthread_mutex_unlock(&lock);
	return OK;
}

API CUresult cuPointerGetAttribute(void *data, int a, CUdeviceptr p)
{
	struct range *x;

	pthread_mutex_lock(&lock);
	x = find(p, 1);
	pthread_mutex_unlock(&lock);
	if (!x)
		return INVALID_VALUE;
	attr_of(a, data, x);
	return OK;
}

static uint8_t *shadow_of(CUdeviceptr d, size_t n)
{
	struct range *x;
	uint8_t *s = NULL;

	pthread_mutex_lock(&lock);
	x = find(d, n);
	if (x)
		s = x->shadow + (d - x->dev);
	pthread_mutex_unlock(&lock);
	return s;
}

API CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n)
{
	uint8_t *s = shadow_of(d, n);

	if (!s)
		return INVALID_VALUE;
	memcpy(s, h, n);
	return OK;
}

API CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n)
{
	uint8_t *s = shadow_of(d, n);

	if (!s)
		return INVALID_VALUE;
	memcpy(h, s, n);
	return OK;
}

API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, void *st)
{
	return cuMemcpyHtoD_v2(d, h, n);
}

API CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, void *st)
{
	return cuMemcpyDtoH_v2(h, d, n);
}

API CUresult cuMemHostAlloc(void **p, size_t n, unsigned f)
{
	*p = malloc(n);
	return *p ? OK : 2;
}

API CUresult cuMemFreeHost(void *p) { free(p); return OK; }
API CUresult cuStreamCreate(void **s, unsigned f) { *s = malloc(1); return OK; }
API CUresult cuStreamDestroy_v2(void *s) { free(s); return OK; }
API CUresult cuEventCreate(void **e, unsigned f) { *e = malloc(1); return OK; }
API CUresult cuEventDestroy_v2(void *e) { free(e); return OK; }
API CUresult cuEventRecord(void *e, void *s) { return OK; }
API CUresult cuEventQuery(void *e) { return OK; }
API CUresult cuEventSynchronize(void *e) { return OK; }
