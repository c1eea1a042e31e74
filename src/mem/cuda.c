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
	CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
	CU_POINTER_ATTRIBUTE_MAPPED = 13,
	CU_MEMORYTYPE_DEVICE = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CU_MEM_LOCATION_TYPE_DEVICE = 1,
};

/* CUmemAllocationProp (cuda.h, CUDA 11 and later): only the location is read. */
struct cu_alloc_prop {
	int type;
	int handle_types;
	struct {
		int type;
		int id;
	} location;
	void *win32;
	unsigned char rest[64];
};

#define MAX_DEVS 64

static struct {
	int tried, ok;
	CUresult (*ptr_attr)(void *, int, CUdeviceptr);
	CUresult (*ptr_attrs)(unsigned int, int *, void **, CUdeviceptr);
	CUresult (*ctx_set)(CUcontext);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*host_alloc)(void **, size_t, unsigned int);
	CUresult (*host_free)(void *);
	CUresult (*err_str)(CUresult, const char **);
	/* asynchronous copies (optional: without them copies are synchronous) */
	CUresult (*stream_new)(void **, unsigned int);
	CUresult (*stream_free)(void *);
	CUresult (*dtoh_async)(void *, CUdeviceptr, size_t, void *);
	CUresult (*htod_async)(CUdeviceptr, const void *, size_t, void *);
	CUresult (*ev_new)(void **, unsigned int);
	CUresult (*ev_free)(void *);
	CUresult (*ev_record)(void *, void *);
	CUresult (*ev_query)(void *);
	CUresult (*ev_sync)(void *);
	int async;
	/* VMM memory (cuMemCreate/cuMemMap) belongs to no context */
	CUresult (*dev_get)(int *, int);
	CUresult (*primary_retain)(CUcontext *, int);
	CUresult (*retain_handle)(uint64_t *, void *);
	CUresult (*handle_prop)(struct cu_alloc_prop *, uint64_t);
	CUresult (*handle_release)(uint64_t);
	CUcontext primary[MAX_DEVS];
	/* the engine's own context per device, for VMM memory (engine_ctx) */
	CUresult (*ctx_create)(CUcontext *, unsigned int, int);
	CUresult (*ctx_pop)(CUcontext *);
	CUcontext own[MAX_DEVS];
	char own_tried[MAX_DEVS];
	CUresult (*stream_sync)(void *);
	/* "synchronous" copies run on a non-blocking stream of their context
	 * (made at registration), never on the legacy NULL stream */
	struct {
		CUcontext ctx;
		void *stream;
	} sync[MAX_DEVS];
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
	cu.ptr_attrs = (CUresult(*)(unsigned int, int *, void **, CUdeviceptr))dlsym(h, "cuPointerGetAttributes");
	cu.ctx_set = (CUresult(*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
	cu.dtoh = (CUresult(*)(void *, CUdeviceptr, size_t))dlsym(h, "cuMemcpyDtoH_v2");
	cu.htod = (CUresult(*)(CUdeviceptr, const void *, size_t))dlsym(h, "cuMemcpyHtoD_v2");
	cu.host_alloc = (CUresult(*)(void **, size_t, unsigned int))dlsym(h, "cuMemHostAlloc");
	cu.host_free = (CUresult(*)(void *))dlsym(h, "cuMemFreeHost");
	cu.err_str = (CUresult(*)(CUresult, const char **))dlsym(h, "cuGetErrorString");
	cu.ok = cu.ptr_attr && cu.ctx_set && cu.dtoh && cu.htod;
	cu.stream_new = (CUresult(*)(void **, unsigned int))dlsym(h, "cuStreamCreate");
	cu.stream_free = (CUresult(*)(void *))dlsym(h, "cuStreamDestroy_v2");
	cu.dtoh_async = (CUresult(*)(void *, CUdeviceptr, size_t, void *))dlsym(h, "cuMemcpyDtoHAsync_v2");
	cu.htod_async = (CUresult(*)(CUdeviceptr, const void *, size_t, void *))dlsym(h, "cuMemcpyHtoDAsync_v2");
	cu.ev_new = (CUresult(*)(void **, unsigned int))dlsym(h, "cuEventCreate");
	cu.ev_free = (CUresult(*)(void *))dlsym(h, "cuEventDestroy_v2");
	cu.ev_record = (CUresult(*)(void *, void *))dlsym(h, "cuEventRecord");
	cu.ev_query = (CUresult(*)(void *))dlsym(h, "cuEventQuery");
	cu.ev_sync = (CUresult(*)(void *))dlsym(h, "cuEventSynchronize");
	cu.dev_get = (CUresult(*)(int *, int))dlsym(h, "cuDeviceGet");
	cu.primary_retain = (CUresult(*)(CUcontext *, int))dlsym(h, "cuDevicePrimaryCtxRetain");
	cu.retain_handle = (CUresult(*)(uint64_t *, void *))dlsym(h, "cuMemRetainAllocationHandle");
	cu.handle_prop = (CUresult(*)(struct cu_alloc_prop *, uint64_t))dlsym(
		h, "cuMemGetAllocationPropertiesFromHandle");
	cu.handle_release = (CUresult(*)(uint64_t))dlsym(h, "cuMemRelease");
	cu.stream_sync = (CUresult(*)(void *))dlsym(h, "cuStreamSynchronize");
	if (!(getenv("UROCE_CUDA_OWN_CTX") && !strcmp(getenv("UROCE_CUDA_OWN_CTX"), "0"))) {
		cu.ctx_create = (CUresult(*)(CUcontext *, unsigned int, int))dlsym(h, "cuCtxCreate_v2");
		cu.ctx_pop = (CUresult(*)(CUcontext *))dlsym(h, "cuCtxPopCurrent_v2");
	}
	cu.async = cu.ok && cu.stream_new && cu.stream_free && cu.dtoh_async && cu.htod_async &&
		   cu.ev_new && cu.ev_free && cu.ev_record && cu.ev_query && cu.ev_sync &&
		   !(getenv("UROCE_CUDA_ASYNC") && !strcmp(getenv("UROCE_CUDA_ASYNC"), "0"));
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

/* The primary context of device ordinal ord, retained once per process and
 * kept (it serves every VMM MR of that device until exit). */
static CUcontext primary_ctx(int ord)
{
	CUcontext c = NULL;
	int dev;

	if (ord < 0 || ord >= MAX_DEVS || !cu.dev_get || !cu.primary_retain)
		return NULL;
	pthread_mutex_lock(&lock);
	if (!cu.primary[ord] && !cu.dev_get(&dev, ord) && !cu.primary_retain(&c, dev))
		cu.primary[ord] = c;
	c = cu.primary[ord];
	pthread_mutex_unlock(&lock);
	return c;
}

/* The engine's own context on device ordinal ord, made once per process on
 * the first registration of VMM memory of that device; the primary context
 * if it cannot be made (or UROCE_CUDA_OWN_CTX=0).
 *
 * Why not the application's context: the CUDA programming guide's
 * "Implicit Synchronization" rules order every command of a context around
 * some calls (cuMemFree, cudaFree, page-locked allocations): work issued
 * after them waits for all work issued before, even on non-blocking
 * streams. NCCL's collective kernel spins until the bytes of a receive are
 * in GPU memory; if the application (PyTorch allocating and freeing
 * tensors) makes such a call while the kernel runs, the engine's copy of
 * those bytes, issued afterwards in the same context, waits for the kernel:
 * a deadlock (seen on the H200 with NCCL's GDR path, and reproduced by
 * scripts/experiments/cuda_sync.c: the copy into cuMem memory from the
 * application's context hangs after a cuMemFree, the same copy from a
 * context of the engine's own completes). A real NIC writes GPU memory by
 * PCIe DMA, outside every stream; a context of our own is the nearest a
 * CUDA API gets. VMM mappings belong to no context: every context of the
 * device reaches them once cuMemSetAccess allowed the device. Memory from
 * cuMemAlloc/cudaMalloc stays with its own context (another context's
 * copy of it waits for that context's implicit synchronization as well). */
static CUcontext engine_ctx(int ord)
{
	CUcontext c = NULL, popped;
	int dev, make = 0;

	if (ord < 0 || ord >= MAX_DEVS || !cu.ctx_create || !cu.ctx_pop || !cu.dev_get)
		return primary_ctx(ord);
	pthread_mutex_lock(&lock);
	if (!cu.own_tried[ord]) {
		cu.own_tried[ord] = 1;
		make = 1;
		/* made on the caller's thread (ibv_reg_mr): pushed, then popped,
		 * so that the application's current context stays current */
		if (cu.dev_get(&dev, ord) || cu.ctx_create(&c, 0 /* SCHED_AUTO */, dev)) {
			c = NULL;
		} else if (cu.ctx_pop(&popped) || popped != c) {
			uroce_warn("CUDA: the engine's context for device %d could not be "
				   "popped off this thread", ord);
		}
		cu.own[ord] = c;
	}
	c = cu.own[ord];
	pthread_mutex_unlock(&lock);
	if (make && !c)
		uroce_warn("CUDA: no context of uroce's own on device %d; copies into its "
			   "cuMem memory run in the primary context, where the application's "
			   "cuMemFree can stall them behind a running kernel", ord);
	else if (make)
		uroce_info("CUDA: device %d's cuMem memory is copied in uroce's own context", ord);
	return c ? c : primary_ctx(ord);
}

/* The device of a VMM mapping that pointer attributes do not describe:
 * cuMemRetainAllocationHandle answers only for cuMemMap'ed ranges. */
static int vmm_device(const void *addr)
{
	struct cu_alloc_prop prop;
	uint64_t h;
	int ord = -1;

	if (!cu.retain_handle || !cu.handle_prop || !cu.handle_release ||
	    cu.retain_handle(&h, (void *)(uintptr_t)addr))
		return -1;
	memset(&prop, 0, sizeof(prop));
	if (!cu.handle_prop(&prop, h) && prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE)
		ord = prop.location.id;
	cu.handle_release(h);
	return ord;
}

int uroce_cuda_probe(const void *addr, void **cuctx)
{
	unsigned int type = 0, managed = 0, mapped = 0;
	int ord = -1;
	CUresult r;

	if (!load())
		return 0;
	if (cu.ptr_attrs) {
		/* Unlike cuPointerGetAttribute, this one answers for memory
		 * CUDA does not know (type 0) instead of failing, so probing
		 * host buffers is not an API error (compute-sanitizer clean). */
		int which[5] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
				 CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				 CU_POINTER_ATTRIBUTE_MAPPED };
		void *data[5] = { &type, &managed, cuctx, &ord, &mapped };

		*cuctx = NULL;
		r = cu.ptr_attrs(5, which, data, (CUdeviceptr)(uintptr_t)addr);
		if (r) /* a driver older than the MAPPED attribute (CUDA 11)? */
			r = cu.ptr_attrs(3, which, data, (CUdeviceptr)(uintptr_t)addr);
		if (r)
			return 0; /* CUDA not initialised in this process: host memory */
		if (managed)
			return 0;
		if (type == CU_MEMORYTYPE_DEVICE && *cuctx)
			return 1; /* cudaMalloc, cuMemAlloc */
		/* VMM memory (cuMemCreate + cuMemMap, NCCL's default allocator,
		 * PyTorch's expandable segments) has no context: any context
		 * of its device reaches it once cuMemSetAccess allowed that
		 * device, so the engine copies in a context of its own on
		 * that device (engine_ctx). */
		if (type != CU_MEMORYTYPE_DEVICE) {
			if (type || !mapped)
				return 0; /* host or host-pinned memory, or unknown to CUDA */
			ord = vmm_device(addr);
		}
		*cuctx = engine_ctx(ord);
		if (!*cuctx && type == CU_MEMORYTYPE_DEVICE)
			*cuctx = engine_ctx(vmm_device(addr));
		if (!*cuctx) {
			snprintf(last_err, sizeof(last_err),
				 "device memory at %p has no context and no primary context of "
				 "device %d could be retained", addr, ord);
			uroce_err("%s", last_err);
			errno = EFAULT;
			return -1;
		}
		return 1;
	}
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

static int use_ctx(void *cuctx);

/* The context's stream for copies the engine waits for. A plain
 * cuMemcpyDtoH/HtoD runs on the legacy NULL stream, which waits for the
 * work of every blocking stream of the context: NCCL's collective kernel
 * spins there until the very bytes being copied arrive, and the copy never
 * starts (seen on the H200: the engine stuck in cuMemcpyDtoH, NCCL's first
 * GDR collective hung). Made when memory of the context is registered
 * (create is true), looked up by the engine. */
static void *sync_stream(void *cuctx, int create)
{
	void *s = NULL;

	if (!cu.stream_new || !cu.stream_sync || !cu.dtoh_async || !cu.htod_async)
		return NULL;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_DEVS; i++) {
		if (cu.sync[i].ctx == cuctx) {
			s = cu.sync[i].stream;
			break;
		}
		if (!cu.sync[i].ctx) {
			if (create && !use_ctx(cuctx) &&
			    !cu.stream_new(&s, 1 /* CU_STREAM_NON_BLOCKING */)) {
				cu.sync[i].ctx = cuctx;
				cu.sync[i].stream = s;
			}
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return s;
}

void uroce_cuda_sync_prepare(void *cuctx)
{
	if (cuctx && cu.ok)
		sync_stream(cuctx, 1);
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
	void *s;
	CUresult r;

	if (!cu.ok || use_ctx(cuctx))
		return -1;
	s = sync_stream(cuctx, 0);
	if (s) {
		r = cu.dtoh_async(dst, (CUdeviceptr)src_dev, len, s);
		if (!r)
			r = cu.stream_sync(s);
		return r ? fail("cuMemcpyDtoHAsync+cuStreamSynchronize", r) : 0;
	}
	r = cu.dtoh(dst, (CUdeviceptr)src_dev, len);
	return r ? fail("cuMemcpyDtoH", r) : 0;
}

int uroce_cuda_htod(void *cuctx, uint64_t dst_dev, const void *src, size_t len)
{
	void *s;
	CUresult r;

	if (!cu.ok || use_ctx(cuctx))
		return -1;
	s = sync_stream(cuctx, 0);
	if (s) {
		r = cu.htod_async((CUdeviceptr)dst_dev, src, len, s);
		if (!r)
			r = cu.stream_sync(s);
		return r ? fail("cuMemcpyHtoDAsync+cuStreamSynchronize", r) : 0;
	}
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

/* ---- asynchronous copies ---- */

enum { CU_STREAM_NON_BLOCKING = 1, CU_EVENT_DISABLE_TIMING = 2, CUDA_ERROR_NOT_READY = 600 };

void *uroce_cuda_stream_new(void *cuctx)
{
	void *s = NULL;

	if (!cu.async || use_ctx(cuctx))
		return NULL;
	return cu.stream_new(&s, CU_STREAM_NON_BLOCKING) ? NULL : s;
}

void uroce_cuda_stream_free(void *cuctx, void *stream)
{
	if (stream && !use_ctx(cuctx))
		cu.stream_free(stream);
}

int uroce_cuda_copy_async(void *cuctx, void *stream, int dir, void *host, uint64_t dev, size_t len)
{
	CUresult r;

	if (!cu.async || use_ctx(cuctx))
		return -1;
	r = dir ? cu.htod_async((CUdeviceptr)dev, host, len, stream)
		: cu.dtoh_async(host, (CUdeviceptr)dev, len, stream);
	return r ? fail(dir ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync", r) : 0;
}

void *uroce_cuda_event_new(void *cuctx)
{
	void *e = NULL;

	if (!cu.async || use_ctx(cuctx))
		return NULL;
	return cu.ev_new(&e, CU_EVENT_DISABLE_TIMING) ? NULL : e;
}

void uroce_cuda_event_free(void *cuctx, void *ev)
{
	if (ev && !use_ctx(cuctx))
		cu.ev_free(ev);
}

int uroce_cuda_event_record(void *cuctx, void *ev, void *stream)
{
	CUresult r;

	if (use_ctx(cuctx))
		return -1;
	r = cu.ev_record(ev, stream);
	return r ? fail("cuEventRecord", r) : 0;
}

int uroce_cuda_event_done(void *cuctx, void *ev)
{
	CUresult r;

	if (use_ctx(cuctx))
		return -1;
	r = cu.ev_query(ev);
	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	return r ? fail("cuEventQuery", r) : 1;
}

int uroce_cuda_event_wait(void *cuctx, void *ev)
{
	CUresult r;

	if (use_ctx(cuctx))
		return -1;
	r = cu.ev_sync(ev);
	return r ? fail("cuEventSynchronize", r) : 0;
}
