/* GPU memory (GPUDirect RDMA semantics): CUDA device buffers registered
 * with ibv_reg_mr and moved by WRITE, READ, SEND/RECV and atomics, GPU to
 * GPU, host to GPU and GPU to host. The CUDA driver is loaded with dlopen;
 * without a driver or a GPU every case skips, saying why. */
#include <dlfcn.h>

#include "common.h"

typedef int CUresult;
typedef uint64_t CUdeviceptr;

static struct {
	CUresult (*init)(unsigned);
	CUresult (*dev_get)(int *, int);
	CUresult (*dev_count)(int *);
	CUresult (*ctx_retain)(void **, int);
	CUresult (*ctx_set)(void *);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*alloc_managed)(CUdeviceptr *, size_t, unsigned);
	CUresult (*free)(CUdeviceptr);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*sync)(void);
	CUresult (*range_handle)(void *, CUdeviceptr, size_t, int, unsigned long long);
	CUresult (*attr)(int *, int, int);
} cu;
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
	SYM(alloc_managed, "cuMemAllocManaged");
	SYM(free, "cuMemFree_v2");
	SYM(htod, "cuMemcpyHtoD_v2");
	SYM(dtoh, "cuMemcpyDtoH_v2");
	SYM(sync, "cuCtxSynchronize");
	SYM(range_handle, "cuMemGetHandleForAddressRange");
	SYM(attr, "cuDeviceGetAttribute");
#undef SYM
	if (!cu.init || cu.init(0))
		T_SKIP("cuInit failed: no usable NVIDIA GPU");
	if (cu.dev_count(&n) || n < 1)
		T_SKIP("no CUDA device");
	T_EQ_INT(cu.dev_get(&dev, 0), 0);
	cu_dev = dev;
	T_EQ_INT(cu.ctx_retain(&ctx, dev), 0);
	T_EQ_INT(cu.ctx_set(ctx), 0);
}

struct gbuf {
	CUdeviceptr d;
	size_t len;
	struct ibv_mr *mr;
	int managed;
};

static void gbuf_alloc(struct gbuf *g, struct ibv_pd *pd, size_t len, int managed)
{
	g->len = len;
	g->managed = managed;
	if (managed)
		T_EQ_INT(cu.alloc_managed(&g->d, len, 1 /* CU_MEM_ATTACH_GLOBAL */), 0);
	else
		T_EQ_INT(cu.alloc(&g->d, len), 0);
	g->mr = ibv_reg_mr(pd, (void *)(uintptr_t)g->d, len, TV_ACCESS_ALL);
	T_ASSERTF(g->mr, "ibv_reg_mr of %s memory: %s", managed ? "managed" : "device",
		  strerror(errno));
}

static void gbuf_free(struct gbuf *g)
{
	T_EQ_INT(ibv_dereg_mr(g->mr), 0);
	T_EQ_INT(cu.free(g->d), 0);
}

/* Fills device memory [off, off+n) with the pattern of seed. */
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

static struct ibv_sge gsge(struct gbuf *g, size_t off, size_t len)
{
	struct ibv_sge s = { .addr = g->d + off, .length = (uint32_t)len, .lkey = g->mr->lkey };

	return s;
}

static void pair_open(struct tv_pair *p)
{
	struct tv_opts o = tv_opts_default();

	o.mtu = IBV_MTU_4096;
	o.separate_ctx = 1;
	tv_pair_open(p, &o);
}

static const size_t sizes[] = { 1, 3, 4095, 4097, 65536 + 5, (1u << 20) + 7, (64u << 20) + 13 };

/* WRITE, READ and SEND between two GPU buffers at odd offsets. */
T_CASE(gpu_to_gpu_all_ops)
{
	struct tv_pair p;
	struct gbuf a, b;
	size_t cap = (64u << 20) + 64;

	gpu_init();
	pair_open(&p);
	gbuf_alloc(&a, p.a.pd, cap, 0);
	gbuf_alloc(&b, p.b.pd, cap, 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i], oa = 1 + i, ob = 7 + 2 * i;
		struct ibv_sge s = gsge(&a, oa, n), r = gsge(&b, ob, n);
		struct ibv_wc wc;

		gfill(&a, oa, n, 100 + i);
		T_EQ_INT(tv_post(p.a.qp, IBV_WR_RDMA_WRITE, 1, &s, 1, b.d + ob, b.mr->rkey, 0,
				 IBV_SEND_SIGNALED), 0);
		tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		/* the WRITE completed: its bytes are in the remote GPU memory */
		gcheck(&b, ob, n, 100 + i);

		gfill(&b, ob, n, 200 + i);
		T_EQ_INT(tv_post(p.a.qp, IBV_WR_RDMA_READ, 2, &s, 1, b.d + ob, b.mr->rkey, 0,
				 IBV_SEND_SIGNALED), 0);
		tv_expect_wc(p.a.scq, p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
		gcheck(&a, oa, n, 200 + i);

		gfill(&a, oa, n, 300 + i);
		T_EQ_INT(tv_post_recv(p.b.qp, 3, &r, 1), 0);
		T_EQ_INT(tv_post(p.a.qp, IBV_WR_SEND, 4, &s, 1, 0, 0, 0, IBV_SEND_SIGNALED), 0);
		wc = tv_expect_wc(p.b.rcq, p.b.qp, 3, IBV_WC_SUCCESS, IBV_WC_RECV);
		T_EQ_INT(wc.byte_len, n);
		tv_expect_wc(p.a.scq, p.a.qp, 4, IBV_WC_SUCCESS, IBV_WC_SEND);
		gcheck(&b, ob, n, 300 + i);
	}
	gbuf_free(&a);
	gbuf_free(&b);
	tv_pair_close(&p);
}

/* ibv_reg_dmabuf_mr with a dma-buf of GPU memory from
 * cuMemGetHandleForAddressRange, as NCCL registers its buffers: iova is
 * the CUDA address, offset the distance from the exported (page-aligned)
 * start. A WRITE into it and a READ out of it, checked on the GPU. */
T_CASE(gpu_dmabuf_mr)
{
	struct tv_pair p;
	struct gbuf g;
	struct tv_buf h;
	struct ibv_mr *mr;
	size_t n = (2u << 20) + 5, span = 4u << 20;
	int fd = -1, ok = 0;

	gpu_init();
	if (!cu.range_handle || !cu.attr ||
	    cu.attr(&ok, 124 /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */, cu_dev) || !ok)
		T_SKIP("this driver or GPU does not export dma-bufs");
	pair_open(&p);
	gbuf_alloc(&g, p.b.pd, span, 0);
	T_EQ_INT(cu.range_handle(&fd, g.d, span, 1 /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */, 0), 0);
	T_ASSERT(fd >= 0);
	mr = ibv_reg_dmabuf_mr(p.b.pd, 4096, span - 4096, g.d + 4096, fd, TV_ACCESS_ALL);
	T_ASSERTF(mr, "ibv_reg_dmabuf_mr: %s", strerror(errno));
	/* offset and length are checked against the dma-buf's size */
	errno = 0;
	T_ASSERT(!ibv_reg_dmabuf_mr(p.b.pd, 4096, span, g.d + 4096, fd, TV_ACCESS_ALL));
	T_EQ_INT(errno, EINVAL);
	tv_buf_alloc(&h, p.a.pd, n, TV_ACCESS_ALL);
	tv_fill(h.p, n, 21);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 1, &h, 0, n, g.d + 4096 + 3, mr->rkey, 0,
			  IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	gcheck(&g, 4096 + 3, n, 21);
	gfill(&g, 4096 + 3, n, 22);
	memset(h.p, 0, n);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_READ, 2, &h, 0, n, g.d + 4096 + 3, mr->rkey, 0,
			  IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	T_PATTERN(h.p, n, 22, 0);
	/* outside the registered range: remote access error */
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 3, &h, 0, 64, g.d, mr->rkey, 0,
			  IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 3, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
	T_EQ_INT(ibv_dereg_mr(mr), 0);
	close(fd);
	tv_buf_free(&h);
	gbuf_free(&g);
	tv_pair_close(&p);
}

/* Host memory on one side, GPU memory on the other, both directions. */
T_CASE(host_gpu_mixed)
{
	struct tv_pair p;
	struct gbuf g;
	struct tv_buf h;
	size_t n = (8u << 20) + 3;

	gpu_init();
	pair_open(&p);
	gbuf_alloc(&g, p.b.pd, n + 64, 0);
	tv_buf_alloc(&h, p.a.pd, n + 64, TV_ACCESS_ALL);
	tv_fill(h.p, n, 11);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 1, &h, 0, n, g.d + 5, g.mr->rkey, 0,
			  IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	gcheck(&g, 5, n, 11);
	gfill(&g, 5, n, 12);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_READ, 2, &h, 0, n, g.d + 5, g.mr->rkey, 0,
			  IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	T_PATTERN(h.p, n, 12, 0);
	/* GPU -> host SEND */
	{
		struct ibv_sge s = gsge(&g, 5, n);

		T_EQ_INT(tv_post_recv1(p.a.qp, 3, &h, 0, n), 0);
		T_EQ_INT(tv_post(p.b.qp, IBV_WR_SEND, 4, &s, 1, 0, 0, 0, IBV_SEND_SIGNALED), 0);
		tv_expect_wc(p.a.rcq, p.a.qp, 3, IBV_WC_SUCCESS, IBV_WC_RECV);
		tv_expect_wc(p.b.scq, p.b.qp, 4, IBV_WC_SUCCESS, IBV_WC_SEND);
		T_PATTERN(h.p, n, 12, 0);
	}
	tv_buf_free(&h);
	gbuf_free(&g);
	tv_pair_close(&p);
}

/* Atomics on GPU memory are serialised by the responder's engine. */
T_CASE(gpu_atomics)
{
	struct tv_pair p;
	struct gbuf g;
	struct tv_buf h;
	uint64_t v = 40, got;

	gpu_init();
	pair_open(&p);
	gbuf_alloc(&g, p.b.pd, 64, 0);
	tv_buf_alloc(&h, p.a.pd, 64, TV_ACCESS_ALL);
	T_EQ_INT(cu.htod(g.d + 8, &v, 8), 0);
	T_EQ_INT(tv_post_atomic(p.a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, &h, 0, g.d + 8, g.mr->rkey, 2,
				0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	memcpy(&got, h.p, 8);
	T_EQ_U64(got, 40);
	T_EQ_INT(tv_post_atomic(p.a.qp, IBV_WR_ATOMIC_CMP_AND_SWP, 2, &h, 0, g.d + 8, g.mr->rkey, 42,
				7, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
	memcpy(&got, h.p, 8);
	T_EQ_U64(got, 42);
	T_EQ_INT(cu.dtoh(&v, g.d + 8, 8), 0);
	T_EQ_U64(v, 7);
	tv_buf_free(&h);
	gbuf_free(&g);
	tv_pair_close(&p);
}

/* Managed memory is CPU-accessible: it registers and moves as host memory. */
T_CASE(managed_memory)
{
	struct tv_pair p;
	struct gbuf m, d;
	size_t n = (1u << 20) + 9;

	gpu_init();
	if (!cu.alloc_managed) /* tests/gpu/fakecuda.c has no managed memory */
		T_SKIP("this libcuda has no cuMemAllocManaged");
	pair_open(&p);
	gbuf_alloc(&m, p.a.pd, n, 1);
	gbuf_alloc(&d, p.b.pd, n, 0);
	tv_fill((void *)(uintptr_t)m.d, n, 21);
	{
		struct ibv_sge s = gsge(&m, 0, n);

		T_EQ_INT(tv_post(p.a.qp, IBV_WR_RDMA_WRITE, 1, &s, 1, d.d, d.mr->rkey, 0,
				 IBV_SEND_SIGNALED), 0);
	}
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	gcheck(&d, 0, n, 21);
	gbuf_free(&m);
	gbuf_free(&d);
	tv_pair_close(&p);
}

/* One 1 GiB WRITE, GPU to GPU. */
T_CASE(gpu_write_1gib)
{
	struct tv_pair p;
	struct gbuf a, b;
	size_t n = 1u << 30;
	double t0;

	gpu_init();
	pair_open(&p);
	gbuf_alloc(&a, p.a.pd, n, 0);
	gbuf_alloc(&b, p.b.pd, n, 0);
	gfill(&a, 0, n, 77);
	t0 = tv_now();
	{
		struct ibv_sge s = gsge(&a, 0, n);

		T_EQ_INT(tv_post(p.a.qp, IBV_WR_RDMA_WRITE, 1, &s, 1, b.d, b.mr->rkey, 0,
				 IBV_SEND_SIGNALED), 0);
	}
	tv_expect_wc_to(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 300);
	t_log("1 GiB GPU->GPU WRITE in %.2f s (%.2f GB/s)", tv_now() - t0,
	      (double)n / 1e9 / (tv_now() - t0));
	gcheck(&b, 0, n, 77);
	gbuf_free(&a);
	gbuf_free(&b);
	tv_pair_close(&p);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
