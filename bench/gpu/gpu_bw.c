/* GPU bandwidth benchmark (issue 6): RDMA WRITE bandwidth GPU->GPU,
 * host->GPU, GPU->host and host->host between two contexts of one process
 * over loopback, the latency of a 64-byte WRITE on each path (one in
 * flight, post to completion), plus the CUDA copy ceiling (pinned
 * HtoD/DtoH) measured in the same run. The paths are measured in turn,
 * REPEATS times (medians; the ratio is the median of each repeat's own).
 *
 *   gpu_bw [MSG_BYTES (4 MiB) [REPEATS (5) [SECS per point (1.5)]]]
 *
 * Prints a table and one JSON line. Built by `make bench-gpu`; needs an
 * NVIDIA GPU (exits 77 with the reason otherwise). */
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;
static CUresult (*cuInit_)(unsigned);
static CUresult (*cuDeviceGet_)(int *, int);
static CUresult (*cuCtxRetain_)(void **, int);
static CUresult (*cuCtxSet_)(void *);
static CUresult (*cuMemAlloc_)(CUdeviceptr *, size_t);
static CUresult (*cuHostAlloc_)(void **, size_t, unsigned);
static CUresult (*cuHtoD_)(CUdeviceptr, const void *, size_t);
static CUresult (*cuDtoH_)(void *, CUdeviceptr, size_t);

#include "../pair.h"

#define side bench_side
#define now bench_now

static void bench_die(const char *what)
{
	perror(what);
	exit(1);
}

/* Streams WRITEs of msg bytes (up to depth in flight) for ~secs; Gb/s.
 * With depth 1 and lat != NULL: the median completion time, in us. */
static int cmp_d(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

static double write_run(struct side *a, void *src, struct ibv_mr *smr, uint64_t dst,
			uint32_t rkey, size_t msg, double secs, int depth, double *lat)
{
	static double samples[1 << 16];
	size_t bytes = 0, ns = 0;
	int inflight = 0;
	double t0 = now(), t, tp = 0;

	do {
		while (inflight < depth) {
			struct ibv_sge sg = { (uintptr_t)src, (uint32_t)msg, smr->lkey };
			struct ibv_send_wr wr = { 0 }, *bad;

			wr.sg_list = &sg;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_RDMA_WRITE;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.rdma.remote_addr = dst;
			wr.wr.rdma.rkey = rkey;
			tp = now();
			if (ibv_post_send(a->qp, &wr, &bad))
				bench_die("post");
			inflight++;
		}
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(a->cq, 16, wc);

		for (int i = 0; i < n; i++) {
			if (wc[i].status) {
				fprintf(stderr, "wc %s\n", ibv_wc_status_str(wc[i].status));
				exit(1);
			}
			bytes += msg;
		}
		inflight -= n;
		t = now();
		if (n && lat && ns < sizeof(samples) / sizeof(samples[0]))
			samples[ns++] = (t - tp) * 1e6;
	} while (t - t0 < secs);
	while (inflight) {
		struct ibv_wc wc;

		inflight -= ibv_poll_cq(a->cq, 1, &wc);
	}
	if (lat) {
		qsort(samples, ns, sizeof(double), cmp_d);
		*lat = ns ? samples[ns / 2] : 0;
	}
	return (double)bytes * 8 / 1e9 / (now() - t0);
}

static double write_bw(struct side *a, void *src, struct ibv_mr *smr, uint64_t dst, uint32_t rkey,
		       size_t msg, double secs)
{
	return write_run(a, src, smr, dst, rkey, msg, secs, 16, NULL);
}

static double write_lat(struct side *a, void *src, struct ibv_mr *smr, uint64_t dst,
			uint32_t rkey, size_t msg)
{
	double l = 0;

	write_run(a, src, smr, dst, rkey, msg, 0.5, 1, &l);
	return l;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define REPS_MAX 32

int main(int argc, char **argv)
{
	size_t msg = argc > 1 ? strtoull(argv[1], NULL, 0) : (4u << 20), big = 256u << 20;
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	double secs = argc > 3 ? atof(argv[3]) : 1.5;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL), *cctx, *pin1, *pin2;
	struct ibv_device **l;
	struct side a, b;
	CUdeviceptr d1, d2;
	struct ibv_mr *mh1, *mh2, *md1, *md2;
	double ceil_htod, ceil_dtoh, t0;
	int dev;

	if (reps < 1 || reps > REPS_MAX || secs <= 0 || !msg || msg > big) {
		fprintf(stderr, "usage: gpu_bw [MSG_BYTES [REPEATS (1..32) [SECS]]]\n");
		return 2;
	}
	if (!h) {
		printf("skip: no CUDA driver (%s)\n", dlerror());
		return 77;
	}
	*(void **)&cuInit_ = dlsym(h, "cuInit");
	*(void **)&cuDeviceGet_ = dlsym(h, "cuDeviceGet");
	*(void **)&cuCtxRetain_ = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&cuCtxSet_ = dlsym(h, "cuCtxSetCurrent");
	*(void **)&cuMemAlloc_ = dlsym(h, "cuMemAlloc_v2");
	*(void **)&cuHostAlloc_ = dlsym(h, "cuMemHostAlloc");
	*(void **)&cuHtoD_ = dlsym(h, "cuMemcpyHtoD_v2");
	*(void **)&cuDtoH_ = dlsym(h, "cuMemcpyDtoH_v2");
	if (cuInit_(0) || cuDeviceGet_(&dev, 0) || cuCtxRetain_(&cctx, dev) || cuCtxSet_(cctx)) {
		printf("skip: no usable GPU\n");
		return 77;
	}
	if (cuMemAlloc_(&d1, big) || cuMemAlloc_(&d2, big) || cuHostAlloc_(&pin1, big, 0) ||
	    cuHostAlloc_(&pin2, big, 0))
		bench_die("cuda alloc");
	memset(pin1, 1, big);
	memset(pin2, 2, big);
	t0 = now();
	for (int i = 0; i < 4; i++)
		cuHtoD_(d1, pin1, big);
	ceil_htod = 4.0 * (double)big * 8 / 1e9 / (now() - t0);
	t0 = now();
	for (int i = 0; i < 4; i++)
		cuDtoH_(pin2, d1, big);
	ceil_dtoh = 4.0 * (double)big * 8 / 1e9 / (now() - t0);

	l = ibv_get_device_list(NULL);
	if (!l || !l[0])
		bench_die("no device (set UROCE_NETDEV=lo and run through uroce)");
	bench_side_open(&a, l[0], 256, 0);
	bench_side_open(&b, l[0], 256, 0);
	bench_connect(&a, &b);
	bench_connect(&b, &a);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	mh1 = ibv_reg_mr(a.pd, pin1, big, acc);
	md1 = ibv_reg_mr(a.pd, (void *)(uintptr_t)d1, big, acc);
	mh2 = ibv_reg_mr(b.pd, pin2, big, acc);
	md2 = ibv_reg_mr(b.pd, (void *)(uintptr_t)d2, big, acc);
	if (!mh1 || !md1 || !mh2 || !md2)
		bench_die("reg_mr");
	/* Repeats interleaved (this machine is noisy): medians, and the
	 * median of each repeat's own GPU/host ratio. */
	{
		double v[4][REPS_MAX], q[3][REPS_MAX], lt[4][REPS_MAX], m[4], mq[3], ml[4];
		void *srcs[4] = { pin1, (void *)(uintptr_t)d1, pin1, (void *)(uintptr_t)d1 };
		struct ibv_mr *smrs[4] = { mh1, md1, mh1, md1 };
		uint64_t dsts[4] = { (uintptr_t)pin2, d2, d2, (uintptr_t)pin2 };
		uint32_t rks[4] = { mh2->rkey, md2->rkey, md2->rkey, mh2->rkey };
		const char *names[4] = { "host -> host", "GPU -> GPU", "host -> GPU", "GPU -> host" };
		const char *keys[4] = { "host_host", "gpu_gpu", "host_gpu", "gpu_host" };

		for (int k = 0; k < reps; k++) {
			for (int i = 0; i < 4; i++)
				v[i][k] = write_bw(&a, srcs[i], smrs[i], dsts[i], rks[i], msg, secs);
			for (int i = 0; i < 3; i++)
				q[i][k] = v[i + 1][k] / v[0][k];
			for (int i = 0; i < 4; i++)
				lt[i][k] = write_lat(&a, srcs[i], smrs[i], dsts[i], rks[i], 64);
		}
		for (int i = 0; i < 4; i++) {
			m[i] = median(v[i], reps);
			ml[i] = median(lt[i], reps);
		}
		for (int i = 0; i < 3; i++)
			mq[i] = median(q[i], reps);
		printf("RDMA WRITE %zu-byte messages over uroce loopback, 16 in flight, "
		       "%d interleaved repeats of %.1f s (medians); latency: 64-byte WRITE, one "
		       "in flight, post to completion\n", msg, reps, secs);
		printf("| path | Gb/s | vs host->host | 64 B WRITE us |\n|---|---:|---:|---:|\n");
		for (int i = 0; i < 4; i++)
			printf("| %s | %.2f | %.2f | %.1f |\n", names[i], m[i], i ? mq[i - 1] : 1.0,
			       ml[i]);
		printf("| CUDA pinned HtoD ceiling | %.1f | | |\n| CUDA pinned DtoH ceiling | %.1f | | |\n",
		       ceil_htod, ceil_dtoh);
		printf("{\"msg\":%zu,\"reps\":%d,\"secs\":%.1f", msg, reps, secs);
		for (int i = 0; i < 4; i++)
			printf(",\"%s_gbps\":%.3f,\"%s_lat64_us\":%.2f", keys[i], m[i], keys[i], ml[i]);
		for (int i = 0; i < 3; i++)
			printf(",\"%s_vs_host\":%.3f", keys[i + 1], mq[i]);
		printf(",\"htod_ceiling_gbps\":%.2f,\"dtoh_ceiling_gbps\":%.2f}\n", ceil_htod,
		       ceil_dtoh);
	}
	return 0;
}
