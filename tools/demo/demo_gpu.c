/* uroce demo --gpu: a GPU-to-GPU RDMA WRITE between two processes, the
 * GPUDirect RDMA path in software: the sender's engine reads the source
 * GPU buffer, the receiver's engine writes the target GPU buffer, and the
 * WRITE completes only once the bytes are in the remote GPU memory. The
 * receiver then checks the data it reads back from its GPU. libcuda is
 * loaded at run time; without a GPU the demo says so and exits 77. */
#include "cli.h"

#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;

static struct {
	CUresult (*init)(unsigned);
	CUresult (*dev_get)(int *, int);
	CUresult (*retain)(void **, int);
	CUresult (*set)(void *);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*name)(char *, int, int);
} cu;

struct info {
	uint32_t qpn, rkey;
	uint64_t addr;
	union ibv_gid gid;
};

static int cuda_up(char *gpu, size_t n)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL), *ctx;
	int dev;

	if (!h)
		return -1;
	*(void **)&cu.init = dlsym(h, "cuInit");
	*(void **)&cu.dev_get = dlsym(h, "cuDeviceGet");
	*(void **)&cu.retain = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&cu.set = dlsym(h, "cuCtxSetCurrent");
	*(void **)&cu.alloc = dlsym(h, "cuMemAlloc_v2");
	*(void **)&cu.htod = dlsym(h, "cuMemcpyHtoD_v2");
	*(void **)&cu.dtoh = dlsym(h, "cuMemcpyDtoH_v2");
	*(void **)&cu.name = dlsym(h, "cuDeviceGetName");
	if (!cu.init || cu.init(0) || cu.dev_get(&dev, 0) || cu.retain(&ctx, dev) || cu.set(ctx))
		return -1;
	if (cu.name)
		cu.name(gpu, (int)n, dev);
	return 0;
}

static uint8_t pat(size_t i)
{
	return (uint8_t)(i * 2654435761u >> 13);
}

static int side(int fd, int client, size_t size)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_qp_init_attr ia = { 0 };
	struct ibv_qp_attr a;
	struct info me, peer;
	CUdeviceptr buf;
	uint8_t *host = malloc(size), ok = 0;
	char gpu[128] = "GPU";
	const char *who = client ? "client" : "server";

	if (!host || cuda_up(gpu, sizeof(gpu)) || cu.alloc(&buf, size)) {
		fprintf(stderr, "%s: CUDA setup failed\n", who);
		return 1;
	}
	if (!l || !l[0] || !(ctx = ibv_open_device(l[0]))) {
		fprintf(stderr, "%s: no RDMA device (run through uroce)\n", who);
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	mr = ibv_reg_mr(pd, (void *)(uintptr_t)buf, size,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr) {
		fprintf(stderr, "%s: ibv_reg_mr on GPU memory: %s\n", who, strerror(errno));
		return 1;
	}
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		return 1;
	me.qpn = qp->qp_num;
	me.rkey = mr->rkey;
	me.addr = buf;
	ibv_query_gid(ctx, 1, 0, &me.gid);
	if (write(fd, &me, sizeof(me)) != sizeof(me) || read(fd, &peer, sizeof(peer)) != sizeof(peer))
		return 1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = peer.qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer.gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return 1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return 1;
	if (client) {
		struct ibv_sge sg = { buf, (uint32_t)size, mr->lkey };
		struct ibv_send_wr wr = { 0 }, *bad;
		struct ibv_wc wc;
		struct timespec t0, t1;
		int n = 0;

		for (size_t i = 0; i < size; i++)
			host[i] = pat(i);
		cu.htod(buf, host, size); /* the data starts in the client's GPU */
		wr.sg_list = &sg;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = peer.addr;
		wr.wr.rdma.rkey = peer.rkey;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (ibv_post_send(qp, &wr, &bad))
			return 1;
		for (int spins = 0; !n && spins < 200000000; spins++)
			n = ibv_poll_cq(cq, 1, &wc);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (n != 1 || wc.status) {
			printf("FAIL  RDMA_WRITE GPU->GPU: %s\n", n ? ibv_wc_status_str(wc.status) : "timeout");
			return 1;
		}
		printf("client: %s, RDMA WRITE of %zu bytes from GPU memory 0x%llx completed in %.2f ms\n",
		       gpu, size, (unsigned long long)buf,
		       ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6));
		if (write(fd, "w", 1) != 1 || read(fd, &ok, 1) != 1)
			return 1;
	} else {
		char c;

		if (read(fd, &c, 1) != 1)
			return 1;
		/* The WRITE has completed at the client: the bytes must be in
		 * this GPU's memory now. Read them back from the GPU. */
		cu.dtoh(host, buf, size);
		ok = 1;
		for (size_t i = 0; i < size && ok; i++)
			if (host[i] != pat(i)) {
				printf("server: byte %zu is 0x%02x, expected 0x%02x\n", i, host[i], pat(i));
				ok = 0;
			}
		printf("%s  RDMA_WRITE GPU->GPU  %zu bytes landed in server GPU memory 0x%llx (%s)\n",
		       ok ? "PASS" : "FAIL", size, (unsigned long long)buf, gpu);
		if (write(fd, &ok, 1) != 1)
			return 1;
	}
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(l);
	free(host);
	return ok ? 0 : 1;
}

int demo_gpu(size_t size)
{
	char gpu[128];
	int sv[2], st = 0, rc;
	pid_t pid;

	/* CUDA must not be initialised before fork: probe in a child. */
	pid = fork();
	if (pid == 0)
		_exit(cuda_up(gpu, sizeof(gpu)) ? 77 : 0);
	if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		printf("uroce demo --gpu: no NVIDIA GPU / CUDA driver here (libcuda.so.1 could not "
		       "be loaded and initialised); skipping\n");
		return 77;
	}
	strcpy(gpu, "GPU");
	if (!getenv("UROCE_NETDEV"))
		setenv("UROCE_NETDEV", "lo", 1);
	printf("uroce demo --gpu: %zu bytes GPU -> GPU over %s\n", size, getenv("UROCE_NETDEV"));
	fflush(stdout);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		rc = side(sv[1], 0, size);
		fflush(stdout);
		_exit(rc);
	}
	close(sv[1]);
	rc = side(sv[0], 1, size);
	waitpid(pid, &st, 0);
	return rc || !WIFEXITED(st) || WEXITSTATUS(st) ? 1 : 0;
}
