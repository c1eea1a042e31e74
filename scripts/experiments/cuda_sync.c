/* scripts/experiments/cuda_sync.c: does a copy into GPU memory finish while
 * a kernel of the same process spins waiting for those very bytes, and the
 * application thread meanwhile calls an implicitly synchronizing CUDA API
 * (cuMemAlloc, cuMemFree, a memset on the NULL stream)? This is NCCL's GDR
 * receive under PyTorch: the collective kernel polls its buffer, Python
 * allocates tensors, uroce's engine places the bytes.
 * Build: gcc -O1 -o cuda_sync cuda_sync.c -I/usr/local/cuda/include -ldl -pthread
 * Run (GPU machine): ./cuda_sync   -> one line per method x memory x interference */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../tests/gpu/spin_ptx.h"

#define F(name, ret, args) static ret(*p_##name) args
F(cuInit, CUresult, (unsigned));
F(cuDeviceGet, CUresult, (CUdevice *, int));
F(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice));
F(cuCtxSetCurrent, CUresult, (CUcontext));
F(cuCtxCreate_v2, CUresult, (CUcontext *, unsigned, CUdevice));
F(cuMemAlloc_v2, CUresult, (CUdeviceptr *, size_t));
F(cuMemFree_v2, CUresult, (CUdeviceptr));
F(cuMemsetD32_v2, CUresult, (CUdeviceptr, unsigned, size_t));
F(cuMemHostAlloc, CUresult, (void **, size_t, unsigned));
F(cuStreamCreate, CUresult, (CUstream *, unsigned));
F(cuStreamQuery, CUresult, (CUstream));
F(cuStreamSynchronize, CUresult, (CUstream));
F(cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr, const void *, size_t, CUstream));
F(cuMemcpyHtoD_v2, CUresult, (CUdeviceptr, const void *, size_t));
F(cuModuleLoadData, CUresult, (CUmodule *, const void *));
F(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *));
F(cuLaunchKernel, CUresult, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
			     unsigned, unsigned, CUstream, void **, void **));
F(cuMemCreate, CUresult, (CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
			  unsigned long long));
F(cuMemAddressReserve, CUresult, (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long));
F(cuMemMap, CUresult, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
		       unsigned long long));
F(cuMemSetAccess, CUresult, (CUdeviceptr, size_t, const CUmemAccessDesc *, size_t));
F(cuMemGetAllocationGranularity, CUresult, (size_t *, const CUmemAllocationProp *,
					    CUmemAllocationGranularity_flags));

static void load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) { printf("no libcuda: %s\n", dlerror()); exit(77); }
#define L(name) if (!(p_##name = dlsym(h, #name))) { printf("no %s\n", #name); exit(77); }
	L(cuInit) L(cuDeviceGet) L(cuDevicePrimaryCtxRetain) L(cuCtxSetCurrent) L(cuCtxCreate_v2)
	L(cuMemAlloc_v2) L(cuMemFree_v2) L(cuMemsetD32_v2) L(cuMemHostAlloc) L(cuStreamCreate)
	L(cuStreamQuery) L(cuStreamSynchronize) L(cuMemcpyHtoDAsync_v2) L(cuMemcpyHtoD_v2)
	L(cuModuleLoadData) L(cuModuleGetFunction) L(cuLaunchKernel) L(cuMemCreate)
	L(cuMemAddressReserve) L(cuMemMap) L(cuMemSetAccess) L(cuMemGetAllocationGranularity)
}

#define CK(x) do { CUresult r_ = (x); if (r_) { printf("  %s -> %d\n", #x, r_); fflush(stdout); _exit(3); } } while (0)

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

enum { M_PRIM, M_PRIV, M_PRIVSYNC, M_N };
static const char *mname[] = { "primary-ctx async", "private-ctx async", "private-ctx sync" };
enum { X_NONE, X_MALLOC, X_FREE, X_MEMSET, X_N };
static const char *xname[] = { "none", "cuMemAlloc", "cuMemFree", "memset on NULL stream" };

static CUcontext prim, priv;
static CUstream cstream;
static CUdeviceptr flag;
static unsigned *one;
static int method;
static double t0;

static void *engine(void *arg)
{
	CUresult r;

	usleep(200000);
	p_cuCtxSetCurrent(method == M_PRIM ? prim : priv);
	if (method == M_PRIVSYNC) {
		r = p_cuMemcpyHtoD_v2(flag, one, 4);
	} else {
		r = p_cuMemcpyHtoDAsync_v2(flag, one, 4, cstream);
		if (!r)
			r = p_cuStreamSynchronize(cstream);
	}
	printf("  engine copy returned %d after %.3f s\n", r, now() - t0);
	fflush(stdout);
	return NULL;
}

static int child(int vmm, int x)
{
	CUdevice dev;
	CUmodule mod;
	CUfunction fn;
	CUstream s1;
	CUdeviceptr done, junk = 0;
	pthread_t th;
	void *args[2];

	CK(p_cuInit(0));
	CK(p_cuDeviceGet(&dev, 0));
	CK(p_cuDevicePrimaryCtxRetain(&prim, dev));
	CK(p_cuCtxSetCurrent(prim));
	if (vmm) {
		CUmemAllocationProp prop;
		CUmemGenericAllocationHandle hd;
		CUmemAccessDesc ad;
		size_t g;

		memset(&prop, 0, sizeof(prop));
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = dev;
		CK(p_cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
		CK(p_cuMemCreate(&hd, g, &prop, 0));
		CK(p_cuMemAddressReserve(&flag, g, 0, 0, 0));
		CK(p_cuMemMap(flag, g, 0, hd, 0));
		memset(&ad, 0, sizeof(ad));
		ad.location = prop.location;
		ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		CK(p_cuMemSetAccess(flag, g, &ad, 1));
	} else {
		CK(p_cuMemAlloc_v2(&flag, 4096));
	}
	CK(p_cuMemsetD32_v2(flag, 0, 1));
	CK(p_cuMemAlloc_v2(&done, 4096));
	CK(p_cuMemsetD32_v2(done, 0, 1));
	if (x == X_FREE)
		CK(p_cuMemAlloc_v2(&junk, 1 << 20));
	CK(p_cuMemHostAlloc((void **)&one, 4096, 1 /* PORTABLE */));
	*one = 1;
	CK(p_cuModuleLoadData(&mod, uroce_spin_ptx));
	CK(p_cuModuleGetFunction(&fn, mod, "spin"));
	CK(p_cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	if (method == M_PRIM) {
		CK(p_cuStreamCreate(&cstream, CU_STREAM_NON_BLOCKING));
	} else {
		CK(p_cuCtxCreate_v2(&priv, 0, dev));
		if (method == M_PRIV)
			CK(p_cuStreamCreate(&cstream, CU_STREAM_NON_BLOCKING));
		CK(p_cuCtxSetCurrent(prim));
	}
	args[0] = &flag;
	args[1] = &done;
	t0 = now();
	CK(p_cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s1, args, NULL));
	pthread_create(&th, NULL, engine, NULL);
	usleep(50000);
	if (x == X_MALLOC) {
		CUdeviceptr p;
		CK(p_cuMemAlloc_v2(&p, 64 << 20));
	} else if (x == X_FREE) {
		CK(p_cuMemFree_v2(junk));
	} else if (x == X_MEMSET) {
		CUdeviceptr p;
		CK(p_cuMemAlloc_v2(&p, 4096));
		CK(p_cuMemsetD32_v2(p, 7, 1));
	}
	printf("  application call returned after %.3f s\n", now() - t0);
	fflush(stdout);
	while (now() - t0 < 5) {
		if (p_cuStreamQuery(s1) == CUDA_SUCCESS) {
			printf("  kernel finished after %.3f s\n", now() - t0);
			return 0;
		}
		usleep(1000);
	}
	printf("  kernel still spinning after 5 s\n");
	return 2;
}

int main(void)
{
	load();
	for (int vmm = 1; vmm >= 0; vmm--)
		for (method = 0; method < M_N; method++)
			for (int x = 0; x < X_N; x++) {
				pid_t p;
				int st = 0, i;

				printf("%s, %s memory, application: %s\n", mname[method],
				       vmm ? "cuMem (VMM)" : "cuMemAlloc", xname[x]);
				fflush(stdout);
				p = fork();
				if (p == 0)
					_exit(child(vmm, x));
				for (i = 0; i < 70 && waitpid(p, &st, WNOHANG) == 0; i++)
					usleep(100000);
				if (i == 70) {
					kill(p, SIGKILL);
					waitpid(p, &st, 0);
					printf("=> HANG (killed after 7 s)\n");
				} else {
					printf("=> %s (exit %d)\n", WIFEXITED(st) && !WEXITSTATUS(st) ? "ok" : "FAIL",
					       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
				}
				fflush(stdout);
			}
	return 0;
}
