/* libcuda through dlopen (see cuda.h). Only the driver API is used, with
 * our own minimal declarations, so the build needs no CUDA headers. */
#include "cuda.h"
#include "util.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;
typedef void *CUcontext;

enum {
	CU_POINTER_ATTRIBUTE_CONTEXT = 1,
	CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
	CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
	CU_MEMORYTYPE_DEVICE = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
};

static struct {
	int tried, ok;
	CUresult (*ptr_attr)(void *, int, CUdeviceptr);
	CUresult (*ctx_set)(CUcontext);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*host_alloc)(void **, size_t, unsigned int);
	CUresult (*host_free)(void *);
	CUresult (*err_str)(CUresult, const char **);
} cu;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread CUcontext cur_ctx;
static __thread char last_err[128];

static int load(void)
{
	void *h;

	pthread_mutex_lock(&lock);
	if (cu.tried)
		goto out;
	cu.tried = 1;
	if (getenv("UROCE_CUDA") && !strcmp(getenv("UROCE_CUDA"), "0"))
		goto out;
	/* Only a process that already uses CUDA can hold device pointers. */
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		goto out;
	cu.ptr_attr = (CUresult(*)(void *, int, CUdeviceptr))dlsym(h, "cuPointerGetAttribute");
	cu.ctx_set = (CUresult(*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
	cu.dtoh = (CUresult(*)(void *, CUdeviceptr, size_t))dlsym(h, "cuMemcpyDtoH_v2");
	cu.htod = (CUresult(*)(CUdeviceptr, const void *, size_t))dlsym(h, "cuMemcpyHtoD_v2");
	cu.host_alloc = (CUresult(*)(void **, size_t, unsigned int))dlsym(h, "cuMemHostAlloc");
	cu.host_free = (CUresult(*)(void *))dlsym(h, "cuMemFreeHost");
	cu.err_str = (CUresult(*)(CUresult, const char **))dlsym(h, "cuGetErrorString");
	cu.ok = cu.ptr_attr && cu.ctx_set && cu.dtoh && cu.htod;
	if (!cu.ok)
		uroce_warn("libcuda is loaded but lacks the driver API uroce needs");
out:
	pthread_mutex_unlock(&lock);
	return cu.ok;
}

static int fail(const char *what, CUresult r)
{
	const char *s = NULL;

	if (cu.err_str)
		cu.err_str(r, &s);
	snprintf(last_err, sizeof(last_err), "%s: CUDA error %d (%s)", what, r, s ? s : "?");
	uroce_err("%s", last_err);
	errno = EFAULT;
	return -1;
}

const char *uroce_cuda_error(void)
{
	return last_err;
}

int uroce_cuda_probe(const void *addr, void **cuctx)
{
	unsigned int type = 0, managed = 0;
	CUresult r;

	if (!load())
		return 0;
	r = cu.ptr_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)addr);
	if (r)
		return 0; /* not memory CUDA knows: host memory */
	if (type != CU_MEMORYTYPE_DEVICE)
		return 0; /* host-pinned CUDA memory is ordinary host memory */
	if (!cu.ptr_attr(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)(uintptr_t)addr) &&
	    managed)
		return 0; /* managed memory is CPU-accessible */
	r = cu.ptr_attr(cuctx, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)(uintptr_t)addr);
	if (r)
		return fail("cuPointerGetAttribute(CONTEXT)", r);
	return 1;
}

static int use_ctx(void *cuctx)
{
	CUresult r;

	if (cur_ctx == cuctx)
		return 0;
	r = cu.ctx_set(cuctx);
	if (r)
		return fail("cuCtxSetCurrent", r);
	cur_ctx = cuctx;
	return 0;
}

int uroce_cuda_dtoh(void *cuctx, void *dst, uint64_t src_dev, size_t len)
{
	CUresult r;

	if (!cu.ok || use_ctx(cuctx))
		return -1;
	r = cu.dtoh(dst, (CUdeviceptr)src_dev, len);
	return r ? fail("cuMemcpyDtoH", r) : 0;
}

int uroce_cuda_htod(void *cuctx, uint64_t dst_dev, const void *src, size_t len)
{
	CUresult r;

	if (!cu.ok || use_ctx(cuctx))
		return -1;
	r = cu.htod((CUdeviceptr)dst_dev, src, len);
	return r ? fail("cuMemcpyHtoD", r) : 0;
}

void *uroce_cuda_host_alloc(void *cuctx, size_t len, int *pinned)
{
	void *p = NULL;

	*pinned = 0;
	if (cu.ok && cu.host_alloc && !use_ctx(cuctx) && !cu.host_alloc(&p, len, 0)) {
		*pinned = 1;
		return p;
	}
	return malloc(len);
}

void uroce_cuda_host_free(void *p, int pinned)
{
	if (pinned && cu.host_free)
		cu.host_free(p);
	else
		free(p);
}
