/* GPU memory registered the ways NCCL 2.28 registers it (issue 14):
 *
 *   - its dma-buf probe, ibv_reg_dmabuf_mr(pd, 0, 0, 0, fd -1, 0): EBADF
 *     ("supported"), not EOPNOTSUPP;
 *   - cuMem (VMM) buffers, NCCL's default allocator (cuMemCreate with
 *     gpuDirectRDMACapable, cuMemAddressReserve, cuMemMap, cuMemSetAccess):
 *     ibv_reg_mr on the pointer (peer-memory style) and ibv_reg_dmabuf_mr
 *     with the fd of cuMemGetHandleForAddressRange, offset 0, the length
 *     rounded up to host pages, iova = the buffer's address, and the fd
 *     closed right after registration, as net.cc does;
 *   - the same for a cuMemAlloc (cudaMalloc) buffer;
 *   - the GDR flush: an RDMA READ on a QP connected to itself, from the
 *     registered GPU buffer into host memory;
 *   - a WRITE into cuMem memory that a running kernel polls, while the
 *     application thread is in cuMemFree (PyTorch freeing a tensor during
 *     a collective): the bytes must land without the kernel ending first.
 *
 * The probe and a host-memory flush run everywhere; the rest skips without
 * a GPU, saying why. The CUDA driver is loaded with dlopen. */
#include <dlfcn.h>
#include <pthread.h>
#include <sys/wait.h>

#include "common.h"
#include "../gpu/spin_ptx.h"

typedef int CUresult;
typedef uint64_t CUdeviceptr;

struct cu_loc {
	int type, id;
};
struct cu_prop { /* CUmemAllocationProp */
	int type, handle_types;
	struct cu_loc loc;
	void *win32;
	unsigned char compression, gdr_capable;
	unsigned short usage;
	unsigned char reserved[4];
};
struct cu_access { /* CUmemAccessDesc */
	struct cu_loc loc;
	int flags;
};

static struct {
	CUresult (*init)(unsigned);
	CUresult (*dev_get)(int *, int);
	CUresult (*dev_count)(int *);
	CUresult (*ctx_retain)(void **, int);
	CUresult (*ctx_set)(void *);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free)(CUdeviceptr);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*range_handle)(void *, CUdeviceptr, size_t, int, unsigned long long);
	CUresult (*attr)(int *, int, int);
	CUresult (*granularity)(size_t *, const struct cu_prop *, int);
	CUresult (*create)(uint64_t *, size_t, const struct cu_prop *, unsigned long long);
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*map)(CUdeviceptr, size_t, size_t, uint64_t, unsigned long long);
	CUresult (*set_access)(CUdeviceptr, size_t, const struct cu_access *, size_t);
	CUresult (*unmap)(CUdeviceptr, size_t);
	CUresult (*release)(uint64_t);
	CUresult (*addr_free)(CUdeviceptr, size_t);
	CUresult (*ptr_attrs)(unsigned, int *, void **, CUdeviceptr);
	CUresult (*mod_load)(void **, const void *);
	CUresult (*mod_fn)(void **, void *, const char *);
	CUresult (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, void *, void **, void **);
	CUresult (*stream_new)(void **, unsigned);
	CUresult (*stream_query)(void *);
} cu;
static void *cu_primary;
static int cu_dev;

static void gpu_init(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	void *ctx;
	int n = 0, dev;

	if (!h)
		T_SKIP("no CUDA driver (libcuda.so.1: %s): GPU tests need an NVIDIA GPU", dlerror());
#define SYM(f, name) cu.f = (__typeof__(cu.f))dlsym(h, name)
	SYM(init, "cuInit");
	SYM(dev_get, "cuDeviceGet");
	SYM(dev_count, "cuDeviceGetCount");
	SYM(ctx_retain, "cuDevicePrimaryCtxRetain");
	SYM(ctx_set, "cuCtxSetCurrent");
	SYM(alloc, "cuMemAlloc_v2");
	SYM(free, "cuMemFree_v2");
	SYM(htod, "cuMemcpyHtoD_v2");
	SYM(dtoh, "cuMemcpyDtoH_v2");
	SYM(range_handle, "cuMemGetHandleForAddressRange");
	SYM(attr, "cuDeviceGetAttribute");
	SYM(granularity, "cuMemGetAllocationGranularity");
	SYM(create, "cuMemCreate");
	SYM(reserve, "cuMemAddressReserve");
	SYM(map, "cuMemMap");
	SYM(set_access, "cuMemSetAccess");
	SYM(unmap, "cuMemUnmap");
	SYM(release, "cuMemRelease");
	SYM(addr_free, "cuMemAddressFree");
	SYM(ptr_attrs, "cuPointerGetAttributes");
	SYM(mod_load, "cuModuleLoadData");
	SYM(mod_fn, "cuModuleGetFunction");
	SYM(launch, "cuLaunchKernel");
	SYM(stream_new, "cuStreamCreate");
	SYM(stream_query, "cuStreamQuery");
#undef SYM
	if (!cu.init || cu.init(0))
		T_SKIP("cuInit failed: no usable NVIDIA GPU");
	if (cu.dev_count(&n) || n < 1)
		T_SKIP("no CUDA device");
	T_EQ_INT(cu.dev_get(&dev, 0), 0);
	cu_dev = dev;
	T_EQ_INT(cu.ctx_retain(&ctx, dev), 0);
	T_EQ_INT(cu.ctx_set(ctx), 0);
	cu_primary = ctx;
}

/* A GPU buffer, from cuMem (vmm) or cuMemAlloc. */
struct gbuf {
	CUdeviceptr d;
	size_t len, mapped;
	uint64_t handle;
	int vmm;
};

static void gbuf_alloc(struct gbuf *g, size_t len, int vmm)
{
	memset(g, 0, sizeof(*g));
	g->len = len;
	g->vmm = vmm;
	if (!vmm) {
		T_EQ_INT(cu.alloc(&g->d, len), 0);
		return;
	}
	{
		struct cu_prop prop;
		struct cu_access acc;
		size_t gran = 0;
		int rdma = 0;

		if (!cu.create || !cu.reserve || !cu.map || !cu.set_access || !cu.granularity)
			T_SKIP("this CUDA driver has no virtual memory management API");
		memset(&prop, 0, sizeof(prop));
		prop.type = 1;         /* CU_MEM_ALLOCATION_TYPE_PINNED */
		prop.handle_types = 1; /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, NCCL's default */
		prop.loc.type = 1;     /* CU_MEM_LOCATION_TYPE_DEVICE */
		prop.loc.id = cu_dev;
		if (!cu.attr(&rdma, 110 /* GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED */, cu_dev) && rdma)
			prop.gdr_capable = 1;
		T_EQ_INT(cu.granularity(&gran, &prop, 0), 0);
		g->mapped = (len + gran - 1) / gran * gran;
		T_EQ_INT(cu.create(&g->handle, g->mapped, &prop, 0), 0);
		T_EQ_INT(cu.reserve(&g->d, g->mapped, gran, 0, 0), 0);
		T_EQ_INT(cu.map(g->d, g->mapped, 0, g->handle, 0), 0);
		memset(&acc, 0, sizeof(acc));
		acc.loc.type = 1;
		acc.loc.id = cu_dev;
		acc.flags = 3; /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE */
		T_EQ_INT(cu.set_access(g->d, g->mapped, &acc, 1), 0);
	}
}

static void gbuf_free(struct gbuf *g)
{
	if (!g->vmm) {
		T_EQ_INT(cu.free(g->d), 0);
		return;
	}
	T_EQ_INT(cu.unmap(g->d, g->mapped), 0);
	T_EQ_INT(cu.release(g->handle), 0);
	T_EQ_INT(cu.addr_free(g->d, g->mapped), 0);
}

static void gfill(struct gbuf *g, size_t off, size_t n, uint64_t seed)
{
	uint8_t *h = malloc(n ? n : 1);

	tv_fill_at(h, n, seed, 0);
	T_EQ_INT(cu.htod(g->d + off, h, n), 0);
	free(h);
}

static void gcheck(struct gbuf *g, size_t off, size_t n, uint64_t seed)
{
	uint8_t *h = malloc(n ? n : 1);

	T_EQ_INT(cu.dtoh(h, g->d + off, n), 0);
	T_PATTERN(h, n, seed, 0);
	free(h);
}

/* What the driver says about a pointer (for the log: VMM memory has no
 * context, which is what made uroce take it for host memory before). */
static void log_attrs(const char *what, CUdeviceptr p)
{
	unsigned type = 0, managed = 0, mapped = 0;
	void *ctx = NULL;
	int ord = -1;
	int which[5] = { 2 /* MEMORY_TYPE */, 8 /* IS_MANAGED */, 1 /* CONTEXT */,
			 9 /* DEVICE_ORDINAL */, 13 /* MAPPED */ };
	void *data[5] = { &type, &managed, &ctx, &ord, &mapped };
	CUresult r = cu.ptr_attrs ? cu.ptr_attrs(5, which, data, p) : -1;

	t_log("%s 0x%llx: cuPointerGetAttributes %d: memory type %u, managed %u, context %p, "
	      "device %d, mapped %u", what, (unsigned long long)p, r, type, managed, ctx, ord,
	      mapped);
}

/* NCCL's access flags for its buffers (relaxed ordering is an optional
 * flag: a device that does not know it ignores it). */
#define NCCL_ACCESS (TV_ACCESS_ALL | IBV_ACCESS_RELAXED_ORDERING)

/* Registers g as NCCL's ncclIbRegMrDmaBufInternal2 does: iova = the
 * address rounded down to the host page, length in whole host pages,
 * offset 0 into a dma-buf of exactly the buffer (net.cc), fd closed at once. */
static struct ibv_mr *reg_like_nccl(struct ibv_pd *pd, struct gbuf *g, int dmabuf)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t addr = (uintptr_t)g->d & ~(page - 1);
	size_t pages = ((uintptr_t)g->d + g->len - addr + page - 1) / page;
	struct ibv_mr *mr;
	int fd = -1, ok = 0;

	if (!dmabuf) {
		mr = ibv_reg_mr(pd, (void *)addr, pages * page, NCCL_ACCESS);
		T_ASSERTF(mr, "ibv_reg_mr of %s memory: %s", g->vmm ? "cuMem" : "cuMemAlloc",
			  strerror(errno));
		return mr;
	}
	if (!cu.range_handle || !cu.attr ||
	    cu.attr(&ok, 124 /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */, cu_dev) || !ok)
		T_SKIP("this driver or GPU does not export dma-bufs");
	T_EQ_INT(cu.range_handle(&fd, g->d, g->len, 1 /* DMA_BUF_FD */, 0), 0);
	T_ASSERT(fd >= 0);
	mr = ibv_reg_dmabuf_mr(pd, 0, pages * page, addr, fd, NCCL_ACCESS);
	T_ASSERTF(mr, "ibv_reg_dmabuf_mr(offset 0, length %zu, iova 0x%llx) of %s memory: %s",
		  pages * page, (unsigned long long)addr, g->vmm ? "cuMem" : "cuMemAlloc",
		  strerror(errno));
	close(fd); /* NCCL closes it right after registering */
	return mr;
}

/* A QP connected to itself, as NCCL's GDR flush QP. */
static void self_qp_open(struct tv_side *s)
{
	struct tv_opts o = tv_opts_default();
	struct tv_info me;

	o.mtu = IBV_MTU_4096;
	memset(&me, 0, sizeof(me));
	tv_side_open(s, &o, NULL);
	tv_info_of(s, &me);
	tv_connect(s, &o, &me);
}

/* ---- everywhere ---- */

T_CASE(dmabuf_probe_ebadf)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);

	T_ASSERT(pd);
	errno = 0;
	T_ASSERT(!ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0));
	T_EQ_INT(errno, EBADF);
	T_EQ_INT(ibv_dealloc_pd(pd), 0);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

/* The flush READ on a self-connected QP, host memory on both ends. */
T_CASE(flush_read_self_qp_host)
{
	struct tv_side s;
	struct tv_buf src, dst;
	size_t n = (1u << 20) + 3;

	self_qp_open(&s);
	tv_buf_alloc(&src, s.pd, n, TV_ACCESS_ALL);
	tv_buf_alloc(&dst, s.pd, n, TV_ACCESS_ALL);
	tv_fill(src.p, n, 31);
	for (int i = 0; i < 3; i++) {
		size_t len = i == 0 ? 1 : i == 1 ? 4 : n; /* NCCL reads 1 byte (4 when forced) */

		memset(dst.p, 0, n);
		T_EQ_INT(tv_post1(s.qp, IBV_WR_RDMA_READ, 10 + i, &dst, 0, len,
				  (uintptr_t)src.p, src.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
		tv_expect_wc(s.scq, s.qp, 10 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
		T_PATTERN(dst.p, len, 31, 0);
	}
	tv_buf_free(&src);
	tv_buf_free(&dst);
	tv_side_close(&s);
}

/* ---- on a GPU ---- */

/* A WRITE from a GPU buffer of one context into g (registered NCCL's way
 * in another), the data checked on the GPU; a READ back; then the flush:
 * a READ of g on a self-connected QP into host memory. */
static void nccl_path(int vmm, int dmabuf)
{
	struct tv_pair p;
	struct tv_opts o = tv_opts_default();
	struct gbuf g, src;
	struct ibv_mr *mr, *smr;
	struct tv_side fl;
	struct tv_buf host;
	/* an odd transfer in a buffer of whole pages: the driver exports
	 * dma-bufs of page-aligned ranges only (CUDA_ERROR_INVALID_VALUE for
	 * 4 MiB + 100 on the H200), and NCCL's buffers are page multiples */
	size_t n = (4u << 20) + 100, cap = (n + 65535) & ~(size_t)65535;
	uint64_t copies;

	gpu_init();
	o.mtu = IBV_MTU_4096;
	o.separate_ctx = 1;
	tv_pair_open(&p, &o);
	gbuf_alloc(&g, cap, vmm);
	gbuf_alloc(&src, cap, 0);
	log_attrs(vmm ? "cuMem buffer" : "cuMemAlloc buffer", g.d);
	mr = reg_like_nccl(p.b.pd, &g, dmabuf);
	smr = reg_like_nccl(p.a.pd, &src, 0);

	gfill(&src, 0, n, 41);
	{
		struct ibv_sge s = { .addr = src.d, .length = (uint32_t)n, .lkey = smr->lkey };

		T_EQ_INT(tv_post(p.a.qp, IBV_WR_RDMA_WRITE, 1, &s, 1, g.d, mr->rkey, 0,
				 IBV_SEND_SIGNALED), 0);
		tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		/* completed at the requester: the bytes are in the remote GPU memory */
		gcheck(&g, 0, n, 41);
		gfill(&g, 0, n, 42);
		copies = TV_COUNTER(gpu_place_copies);
		T_EQ_INT(tv_post(p.a.qp, IBV_WR_RDMA_READ, 2, &s, 1, g.d, mr->rkey, 0,
				 IBV_SEND_SIGNALED), 0);
		tv_expect_wc(p.a.scq, p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
		gcheck(&src, 0, n, 42);
		/* the READ's responses reach the GPU in large copies, not one
		 * per response packet (retire() flushed for each until
		 * 2026-12-07: 1025 copies of 4 KiB here) */
		copies = TV_COUNTER(gpu_place_copies) - copies;
		t_log("READ of %zu bytes into GPU memory: %llu copies", n,
		      (unsigned long long)copies);
		T_ASSERTF(copies <= n / 16384, "%llu copies for a READ of %zu bytes",
			  (unsigned long long)copies, n);
	}

	/* the flush QP lives in the receiver's context, as in NCCL */
	{
		struct tv_opts fo = tv_opts_default();
		struct tv_info me;
		struct ibv_mr *fmr;

		fo.mtu = IBV_MTU_4096;
		memset(&me, 0, sizeof(me));
		tv_side_open(&fl, &fo, p.b.ctx);
		tv_info_of(&fl, &me);
		tv_connect(&fl, &fo, &me);
		fmr = reg_like_nccl(fl.pd, &g, dmabuf);
		tv_buf_alloc(&host, fl.pd, cap, TV_ACCESS_ALL);
		T_EQ_INT(tv_post1(fl.qp, IBV_WR_RDMA_READ, 3, &host, 0, 1, g.d, fmr->rkey, 0,
				  IBV_SEND_SIGNALED), 0);
		tv_expect_wc(fl.scq, fl.qp, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
		T_PATTERN(host.p, 1, 42, 0);
		T_EQ_INT(tv_post1(fl.qp, IBV_WR_RDMA_READ, 4, &host, 0, n, g.d, fmr->rkey, 0,
				  IBV_SEND_SIGNALED), 0);
		tv_expect_wc(fl.scq, fl.qp, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
		T_PATTERN(host.p, n, 42, 0);
		tv_buf_free(&host);
		T_EQ_INT(ibv_dereg_mr(fmr), 0);
		tv_side_close(&fl);
	}
	T_EQ_INT(ibv_dereg_mr(mr), 0);
	T_EQ_INT(ibv_dereg_mr(smr), 0);
	gbuf_free(&g);
	gbuf_free(&src);
	tv_pair_close(&p);
}

T_CASE(cumem_reg_mr) { nccl_path(1, 0); }
T_CASE(cumem_dmabuf) { nccl_path(1, 1); }
T_CASE(cumemalloc_reg_mr) { nccl_path(0, 0); }
T_CASE(cumemalloc_dmabuf) { nccl_path(0, 1); }

/* `uroce doctor --counters` on this process, whose devices are open and
 * have moved GPU memory: its gpu check must name the copies. */
static void doctor_names_gpu_copies(void)
{
	char exe[4096], cmd[4300 + 32], line[2048];
	int pass = 0, named = 0, status;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	FILE *f;

	T_ASSERT(n > 0);
	exe[n] = 0;
	*strrchr(exe, '/') = 0; /* build/tests/verbs */
	snprintf(cmd, sizeof(cmd), "%s/../../bin/uroce doctor --counters --interval 0.2 %d 2>&1",
		 exe, (int)getpid());
	f = popen(cmd, "r");
	T_ASSERT(f);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "PASS gpu: GPU memory in the data path", 37) ||
		    !strncmp(line, "WARN gpu: ", 10))
			pass = 1;
		if (strstr(line, "gpu_stage_copies") && strstr(line, "gpu_place_copies"))
			named = 1;
		if (strstr(line, "gpu_") && !strncmp(line, "    ", 4))
			t_log("doctor: %.*s", (int)strcspn(line, "\n"), line);
	}
	status = pclose(f);
	t_log("uroce doctor --counters exit status %d", WEXITSTATUS(status));
	T_ASSERTF(pass, "doctor's gpu check did not see this process's GPU copies");
	T_ASSERTF(named, "doctor's gpu evidence does not name the copy counters");
}

/* NCCL's sends: one WRITE per chunk (512 KiB by default), several posted
 * at once, each within one staging window. With UROCE_GPU_AHEAD=1, while
 * one is sent the next one's GPU bytes are copied ahead (req.c,
 * stage_next), so a chunk does not wait for its own copy. Chunks of odd sizes and offsets, the last
 * one larger than a window, a WRITE_WITH_IMM at the end, as NCCL posts. */
T_CASE(chunked_writes_copied_ahead)
{
	enum { CHUNKS = 12 };
	static const size_t sz[CHUNKS] = { 512 << 10, 512 << 10, 4096, 300000, 512 << 10, 1,
					   65536, 512 << 10, 1 << 20, 777777, 512 << 10,
					   (1 << 20) + 8192 };
	struct tv_pair p;
	struct tv_opts o = tv_opts_default();
	struct gbuf src, dst;
	struct ibv_mr *smr, *dmr;
	struct ibv_recv_wr *bad_r;
	size_t off[CHUNKS], total = 0, bytes = 0, cap;
	uint64_t hits, sync, sbytes, pbytes, resent;

	gpu_init();
	setenv("UROCE_GPU_AHEAD", "1", 1); /* off by default (qp.c) */
	o.mtu = IBV_MTU_4096;
	o.separate_ctx = 1;
	tv_pair_open(&p, &o);
	for (int i = 0; i < CHUNKS; i++) {
		off[i] = total + 64 * (size_t)i; /* not window-aligned */
		total = off[i] + sz[i];
		bytes += sz[i];
	}
	cap = (total + 65535) & ~(size_t)65535;
	gbuf_alloc(&src, cap, 1);
	gbuf_alloc(&dst, cap, 1);
	smr = reg_like_nccl(p.a.pd, &src, 0);
	dmr = reg_like_nccl(p.b.pd, &dst, 0);
	gfill(&src, 0, cap, 51);
	gfill(&dst, 0, cap, 52);
	hits = TV_COUNTER(gpu_prefetch_hits);
	sync = TV_COUNTER(gpu_stage_sync);
	sbytes = TV_COUNTER(gpu_stage_bytes);
	pbytes = TV_COUNTER(gpu_place_bytes);
	resent = TV_COUNTER(retrans_pkts);
	{
		struct ibv_recv_wr rw = { .wr_id = 99 };

		T_EQ_INT(ibv_post_recv(p.b.qp, &rw, &bad_r), 0);
	}
	for (int i = 0; i < CHUNKS; i++) {
		struct ibv_sge s = { .addr = src.d + off[i], .length = (uint32_t)sz[i],
				     .lkey = smr->lkey };

		T_EQ_INT(tv_post(p.a.qp, i == CHUNKS - 1 ? IBV_WR_RDMA_WRITE_WITH_IMM
							 : IBV_WR_RDMA_WRITE,
				 (uint64_t)i, &s, 1, dst.d + off[i], dmr->rkey, 7,
				 IBV_SEND_SIGNALED), 0);
	}
	for (int i = 0; i < CHUNKS; i++)
		tv_expect_wc(p.a.scq, p.a.qp, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	tv_expect_wc(p.b.rcq, p.b.qp, 99, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	/* every chunk where it belongs, the gaps between them untouched */
	{
		uint8_t *h = malloc(cap), *want = malloc(cap), *orig = malloc(cap);
		size_t at = 0;

		T_ASSERT(h && want && orig);
		T_EQ_INT(cu.dtoh(h, dst.d, cap), 0);
		tv_fill_at(want, cap, 51, 0);
		tv_fill_at(orig, cap, 52, 0);
		for (int i = 0; i < CHUNKS; i++) {
			T_ASSERTF(!memcmp(h + at, orig + at, off[i] - at),
				  "bytes before chunk %d were written", i);
			T_ASSERTF(!memcmp(h + off[i], want + off[i], sz[i]),
				  "chunk %d (%zu bytes at %zu) arrived wrong", i, sz[i], off[i]);
			at = off[i] + sz[i];
		}
		free(h);
		free(want);
		free(orig);
	}
	hits = TV_COUNTER(gpu_prefetch_hits) - hits;
	sync = TV_COUNTER(gpu_stage_sync) - sync;
	sbytes = TV_COUNTER(gpu_stage_bytes) - sbytes;
	pbytes = TV_COUNTER(gpu_place_bytes) - pbytes;
	resent = TV_COUNTER(retrans_pkts) - resent;
	t_log("%d chunks, %zu bytes: %llu windows prefetched, %llu copied while the engine "
	      "waited, %llu bytes out of and %llu into GPU memory, %llu packets resent", CHUNKS,
	      bytes, (unsigned long long)hits, (unsigned long long)sync,
	      (unsigned long long)sbytes, (unsigned long long)pbytes, (unsigned long long)resent);
	/* each chunk's windows were staged one way or the other */
	T_ASSERTF(hits + sync >= CHUNKS, "%llu + %llu windows staged for %d chunks",
		  (unsigned long long)hits, (unsigned long long)sync, CHUNKS);
	T_ASSERTF(sbytes >= bytes, "%llu bytes staged", (unsigned long long)sbytes);
	T_ASSERTF(pbytes >= bytes, "%llu bytes placed", (unsigned long long)pbytes);
	/* the chunks posted behind the first were copied ahead, not waited for */
	T_ASSERTF(hits >= CHUNKS / 2, "only %llu of %d chunks' windows were copied ahead",
		  (unsigned long long)hits, CHUNKS);
	T_ASSERTF(sync < CHUNKS / 2, "%llu windows were copied while the engine waited",
		  (unsigned long long)sync);
	doctor_names_gpu_copies();
	T_EQ_INT(ibv_dereg_mr(smr), 0);
	T_EQ_INT(ibv_dereg_mr(dmr), 0);
	gbuf_free(&src);
	gbuf_free(&dst);
	tv_pair_close(&p);
}

static CUdeviceptr junk;

/* The application thread: a cuMemFree while the kernel runs. By the
 * implicit synchronization rules it returns only after the kernel ends. */
static void *free_thread(void *arg)
{
	(void)arg;
	cu.ctx_set(cu_primary);
	cu.free(junk);
	return NULL;
}

/* NCCL's GDR receive under PyTorch: the collective kernel polls the
 * receive buffer (cuMem) for the bytes uroce places there, and meanwhile
 * the application frees memory. The engine's copy must not wait behind
 * that cuMemFree, which itself waits for the kernel (a deadlock on
 * 2026-12-04's H200 run: scripts/experiments/cuda_sync.c). */
T_CASE(cumem_write_while_kernel_polls)
{
	struct tv_pair p;
	struct tv_opts o = tv_opts_default();
	struct gbuf g;
	struct tv_buf src;
	struct ibv_mr *mr;
	void *mod, *fn, *stream;
	CUdeviceptr flag, done;
	void *args[2] = { &flag, &done };
	pthread_t th;
	double t0;
	int finished = 0;

	gpu_init();
	if (!cu.mod_load || !cu.mod_fn || !cu.launch || !cu.stream_new || !cu.stream_query)
		T_SKIP("this driver lacks the module or stream API");
	o.separate_ctx = 1;
	tv_pair_open(&p, &o);
	gbuf_alloc(&g, 1 << 20, 1);
	mr = reg_like_nccl(p.b.pd, &g, 0);
	tv_buf_alloc(&src, p.a.pd, 4096, TV_ACCESS_ALL);
	memset(src.p, 0, 4096);
	T_EQ_INT(cu.htod(g.d, src.p, 4096), 0);
	((uint32_t *)src.p)[0] = 1;
	flag = g.d;
	done = g.d + 64;
	T_EQ_INT(cu.mod_load(&mod, uroce_spin_ptx), 0);
	T_EQ_INT(cu.mod_fn(&fn, mod, "spin"), 0);
	T_EQ_INT(cu.stream_new(&stream, 1 /* CU_STREAM_NON_BLOCKING */), 0);
	T_EQ_INT(cu.alloc(&junk, 1 << 20), 0);
	T_EQ_INT(cu.launch(fn, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL), 0);
	T_EQ_INT(pthread_create(&th, NULL, free_thread, NULL), 0);
	usleep(100000); /* the application is in cuMemFree now */
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 1, &src, 0, 4, g.d, mr->rkey, 0,
			  IBV_SEND_SIGNALED), 0);
	t0 = tv_now();
	while (tv_now() - t0 < 10 && !(finished = cu.stream_query(stream) == 0))
		usleep(1000);
	T_ASSERTF(finished, "the kernel still waits for the WRITE's bytes after 10 s: the "
		  "engine's copy is stuck behind the application's cuMemFree");
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	T_EQ_INT(pthread_join(th, NULL), 0);
	{
		uint32_t d = 0;

		T_EQ_INT(cu.dtoh(&d, done, 4), 0);
		T_EQ_INT(d, 1);
	}
	T_EQ_INT(ibv_dereg_mr(mr), 0);
	tv_buf_free(&src);
	gbuf_free(&g);
	tv_pair_close(&p);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
