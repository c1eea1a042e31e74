/* The verbs objects: PD, MR, CQ, completion channel, SRQ, RC QP, posting
 * and polling. Entry points validate their arguments (the errno values of
 * the man pages) and hand transport work to the engine. */
#include "verbs_int.h"
#include "trace.h"
#include "cuda.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

void uroce__init_ops_device(struct uroce_ctx *ctx);

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

static void engine_barrier_fn(void *arg)
{
	(void)arg;
}

struct forget_args {
	struct uroce_ctx *ctx;
	struct uroce_mr *mr;
};

static void forget_mr_fn(void *arg)
{
	struct forget_args *a = arg;

	uroce_eng_forget_mr(uroce_eng_cur(), a->mr);
}

/* ---- PD ---- */

UROCE_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct uroce_pd *pd = calloc(1, sizeof(*pd));

	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->ibpd.context = context;
	return &pd->ibpd;
}

UROCE_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct uroce_pd *pd = to_upd(ibpd);

	if (atomic_load(&pd->refs))
		return EBUSY;
	free(pd);
	return 0;
}

/* ---- MR ---- */

#define MR_ACCESS_KNOWN                                                                      \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |         \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |             \
	 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_OPTIONAL_RANGE)

/* A CUDA MR: every QP of the context gets its CUDA resources now, before
 * kernels run (uroce_qp_cuda_prepare). */
static void cuda_prepare_fn(void *arg)
{
	struct uroce_mr *mr = arg;
	struct uroce_ctx *ctx = to_uctx(mr->ibmr.context);

	atomic_store(&ctx->cuctx, mr->cuctx);
	uroce_cuda_sync_prepare(mr->cuctx);
	for (struct uroce_qp *qp = uroce_eng_all_qps(uroce_eng_cur()); qp; qp = qp->all_next)
		uroce_qp_cuda_prepare(qp, mr->cuctx);
}

static int check_access(int access)
{
	/* ibv_reg_mr(3): remote write or atomic access needs local write. */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	if (access & ~MR_ACCESS_KNOWN & ~IBV_ACCESS_OPTIONAL_RANGE)
		return EINVAL;
	return 0;
}

UROCE_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *ibpd, void *addr, size_t length,
					     uint64_t iova, unsigned int access)
{
	struct uroce_pd *pd = to_upd(ibpd);
	struct uroce_ctx *ctx = to_uctx(ibpd->context);
	struct uroce_mr *mr;
	int ret = check_access((int)access);

	if (!ret && length && !addr)
		ret = EINVAL;
	if (ret) {
		errno = ret;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	mr->pd = pd;
	mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
	mr->length = length;
	mr->host = addr;
	mr->access = (int)access;
	mr->kind = UROCE_MEM_HOST;
	/* GPUDirect semantics: CUDA device memory registers like host
	 * memory; the engine moves it through staging copies. */
	if (length) {
		int cuda = uroce_cuda_probe(addr, &mr->cuctx);

		if (cuda < 0) {
			free(mr);
			errno = EFAULT;
			return NULL;
		}
		if (cuda) {
			mr->kind = UROCE_MEM_CUDA;
			mr->dev = (uintptr_t)addr;
			mr->host = NULL;
			uroce_info("MR %p+%zu is CUDA device memory", addr, length);
		}
	}
	mr->ibmr.context = ibpd->context;
	mr->ibmr.pd = ibpd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;
	ret = uroce_mr_insert(&ctx->mrs, mr);
	if (ret) {
		free(mr);
		errno = ret;
		return NULL;
	}
	mr->ibmr.handle = mr->ibmr.lkey;
	atomic_fetch_add(&pd->refs, 1);
	if (mr->kind == UROCE_MEM_CUDA)
		uroce_eng_call(ctx, cuda_prepare_fn, mr);
	return &mr->ibmr;
}

UROCE_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

UROCE_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					    uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

/* Reads a dma-buf's exporter and size from /proc/self/fdinfo. 0, or an
 * errno: EBADF (no such fd), EINVAL (not a dma-buf). */
static int dmabuf_info(int fd, char *exp, size_t explen, uint64_t *size)
{
	char path[64], line[256];
	FILE *f;
	int have = 0;

	if (fd < 0 || fcntl(fd, F_GETFD) < 0)
		return EBADF;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	if (!f)
		return EINVAL;
	exp[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;

		if (sscanf(line, "size: %llu", &v) == 1) {
			*size = v;
			have |= 1;
		} else if (sscanf(line, "exp_name: %63s", exp) == 1 && explen >= 64) {
			have |= 2;
		}
	}
	fclose(f);
	return have == 3 ? 0 : EINVAL;
}

/* ibv_reg_dmabuf_mr(3). uroce has no kernel driver to pin and map the
 * buffer's pages, so it reaches the memory the way the exporter allows a
 * process to: a dma-buf that can be mmap'ed (udmabuf, DMA heaps) is host
 * memory; one exported by CUDA (cuMemGetHandleForAddressRange, as NCCL and
 * UCX do) is device memory at iova, which must then be the CUDA address of
 * the range in this process (that is how those callers pass it), checked
 * with cuPointerGetAttribute. */
UROCE_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					      uint64_t iova, int fd, int access)
{
	char exp[64];
	uint64_t size = 0;
	void *map, *cuctx;
	struct ibv_mr *mr;
	int ret = check_access(access);

	/* NCCL probes for dma-buf support with (offset 0, length 0, iova 0,
	 * fd -1): EBADF means supported, as from a kernel that has it. */
	if (!ret && fd < 0)
		ret = EBADF;
	if (!ret && (!length || (access & IBV_ACCESS_ZERO_BASED)))
		ret = EINVAL;
	if (!ret)
		ret = dmabuf_info(fd, exp, sizeof(exp), &size);
	if (!ret && (offset > size || length > size - offset))
		ret = EINVAL;
	if (ret) {
		errno = ret;
		return NULL;
	}
	map = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map != MAP_FAILED) {
		mr = ibv_reg_mr_iova2(pd, (uint8_t *)map + offset, length, iova, (unsigned int)access);
		if (!mr) {
			ret = errno;
			munmap(map, (size_t)size);
			errno = ret;
			return NULL;
		}
		to_umr(mr)->dmabuf_map = map;
		to_umr(mr)->dmabuf_len = (size_t)size;
		uroce_info("dma-buf MR fd %d (%s) mapped as host memory", fd, exp);
		return mr;
	}
	if (uroce_cuda_probe((void *)(uintptr_t)iova, &cuctx) == 1 &&
	    uroce_cuda_probe((void *)(uintptr_t)(iova + length - 1), &cuctx) == 1) {
		mr = ibv_reg_mr_iova2(pd, (void *)(uintptr_t)iova, length, iova, (unsigned int)access);
		if (mr)
			uroce_info("dma-buf MR fd %d (%s): CUDA memory at 0x%llx", fd, exp,
				   (unsigned long long)iova);
		return mr;
	}
	uroce_warn("ibv_reg_dmabuf_mr: dma-buf fd %d (exporter %s) cannot be mapped, and iova "
		   "0x%llx is not CUDA device memory of this process",
		   fd, exp, (unsigned long long)iova);
	errno = EOPNOTSUPP;
	return NULL;
}

UROCE_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct uroce_mr *mr = to_umr(ibmr);
	struct uroce_ctx *ctx = to_uctx(ibmr->context);

	struct forget_args fa = { ctx, mr };

	uroce_mr_remove(&ctx->mrs, mr);
	/* The engine looks keys up per packet; once it has passed a barrier
	 * no packet can still be using this MR (nor its staged bytes). */
	uroce_eng_call(ctx, forget_mr_fn, &fa);
	atomic_fetch_sub(&mr->pd->refs, 1);
	if (mr->dmabuf_map)
		munmap(mr->dmabuf_map, mr->dmabuf_len);
	free(mr);
	return 0;
}

UROCE_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *ibpd, void *addr,
			      size_t length, int access)
{
	struct uroce_mr *mr = to_umr(ibmr);
	struct uroce_ctx *ctx = to_uctx(ibmr->context);

	if (flags & ~(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
		      IBV_REREG_MR_CHANGE_ACCESS))
		return EINVAL;
	if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && check_access(access))
		return EINVAL;
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && length && !addr)
		return EINVAL;
	struct forget_args fa = { ctx, mr };

	uroce_mr_remove(&ctx->mrs, mr);
	uroce_eng_call(ctx, forget_mr_fn, &fa);
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		atomic_fetch_sub(&mr->pd->refs, 1);
		mr->pd = to_upd(ibpd);
		mr->ibmr.pd = ibpd;
		atomic_fetch_add(&mr->pd->refs, 1);
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->host = addr;
		mr->iova = (uintptr_t)addr;
		mr->length = length;
		mr->ibmr.addr = addr;
		mr->ibmr.length = length;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		mr->access = access;
	if (uroce_mr_insert(&ctx->mrs, mr))
		return ENOMEM;
	mr->ibmr.handle = mr->ibmr.lkey;
	return 0;
}

/* ---- completion channels and CQs ---- */

UROCE_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct uroce_comp_channel *ch = calloc(1, sizeof(*ch));

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	ch->ch.context = context;
	pthread_mutex_init(&ch->lock, NULL);
	return &ch->ch;
}

UROCE_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct uroce_comp_channel *ch = container_of(channel, struct uroce_comp_channel, ch);

	if (channel->refcnt)
		return EBUSY;
	close(channel->fd);
	pthread_mutex_destroy(&ch->lock);
	free(ch->q);
	free(ch);
	return 0;
}

static int poll_cq(struct ibv_cq *ibcq, int num, struct ibv_wc *wc)
{
	struct uroce_cq *cq = to_ucq(ibcq);
	uint32_t cons, prod, n;
	int turn = 0, polling;

	if (num <= 0)
		return num < 0 ? -1 : 0;
	/* Nothing there: if the engine is idle, do its work from here (the
	 * packets this poll waits for may be in a socket already). The poll
	 * of an armed CQ (an event loop's drain before it sleeps on its
	 * channel) does not count as polling: the engine thread keeps
	 * watching the sockets. */
	polling = !atomic_load_explicit(&cq->armed, memory_order_relaxed);
	if (atomic_load_explicit(&cq->prod, memory_order_acquire) ==
	    atomic_load_explicit(&cq->cons, memory_order_relaxed))
		turn = uroce_eng_app_turn(to_uctx(ibcq->context), polling);
	else if (polling)
		uroce_eng_polled(to_uctx(ibcq->context));
	pthread_spin_lock(&cq->poll_lock);
	cons = atomic_load_explicit(&cq->cons, memory_order_relaxed);
	prod = atomic_load_explicit(&cq->prod, memory_order_acquire);
	n = MIN(prod - cons, (uint32_t)num);
	for (uint32_t i = 0; i < n; i++)
		wc[i] = cq->ring[(cons + i) & (cq->size - 1)];
	atomic_store_explicit(&cq->cons, cons + n, memory_order_release);
	pthread_spin_unlock(&cq->poll_lock);
	for (uint32_t i = 0; i < n; i++)
		uroce_trace("poll_cq", "qpn=0x%x wr_id=%llu status=%d opcode=%d byte_len=%u syscall=0 turn=%d",
			    wc[i].qp_num, (unsigned long long)wc[i].wr_id, (int)wc[i].status,
			    (int)wc[i].opcode, wc[i].byte_len, turn);
	return (int)n;
}

static int req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	atomic_store(&to_ucq(ibcq)->armed, solicited_only ? 2 : 1);
	atomic_thread_fence(memory_order_seq_cst); /* see uroce_cq_push */
	/* the application is going to sleep on its channel: the engine
	 * thread must watch the sockets again */
	uroce_eng_unpark(to_uctx(ibcq->context));
	return 0;
}

UROCE_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
					  struct ibv_comp_channel *channel, int comp_vector)
{
	struct uroce_cq *cq;

	if (cqe < 1 || cqe >= UROCE_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= context->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	cq->size = pow2_at_least((uint32_t)cqe + 1);
	cq->ring = calloc(cq->size, sizeof(*cq->ring));
	if (!cq->ring) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	pthread_spin_init(&cq->poll_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&cq->push_lock, PTHREAD_PROCESS_PRIVATE);
	cq->ibcq.context = context;
	cq->ibcq.channel = channel;
	cq->ibcq.cq_context = cq_context;
	cq->ibcq.cqe = (int)cq->size - 1;
	pthread_mutex_init(&cq->ibcq.mutex, NULL);
	pthread_cond_init(&cq->ibcq.cond, NULL);
	if (channel) {
		cq->chan = container_of(channel, struct uroce_comp_channel, ch);
		channel->refcnt++;
	}
	return &cq->ibcq;
}

struct resize_args {
	struct uroce_cq *cq;
	struct ibv_wc *ring;
	uint32_t size;
	int ret;
};

static void resize_fn(void *arg)
{
	struct resize_args *a = arg;
	struct uroce_cq *cq = a->cq;
	uint32_t cons, prod, n;

	pthread_spin_lock(&cq->poll_lock);
	cons = atomic_load(&cq->cons);
	prod = atomic_load(&cq->prod);
	n = prod - cons;
	if (n > a->size - 1) {
		a->ret = EINVAL;
	} else {
		for (uint32_t i = 0; i < n; i++)
			a->ring[i] = cq->ring[(cons + i) & (cq->size - 1)];
		free(cq->ring);
		cq->ring = a->ring;
		cq->size = a->size;
		atomic_store(&cq->cons, 0);
		atomic_store(&cq->prod, n);
		cq->ibcq.cqe = (int)a->size - 1;
		a->ring = NULL;
	}
	pthread_spin_unlock(&cq->poll_lock);
}

UROCE_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct resize_args a = { .cq = to_ucq(ibcq) };

	if (cqe < 1 || cqe >= UROCE_MAX_CQE)
		return EINVAL;
	a.size = pow2_at_least((uint32_t)cqe + 1);
	a.ring = calloc(a.size, sizeof(*a.ring));
	if (!a.ring)
		return ENOMEM;
	/* every engine stands still: any of them may push into it */
	uroce_eng_call_excl(to_uctx(ibcq->context), resize_fn, &a);
	free(a.ring);
	return a.ret;
}

static void cq_unqueue_events(struct uroce_cq *cq)
{
	struct uroce_comp_channel *ch = cq->chan;
	uint32_t keep = 0;

	pthread_mutex_lock(&ch->lock);
	for (uint32_t i = 0; i < ch->qlen; i++) {
		struct uroce_cq *c = ch->q[(ch->qhead + i) % ch->qcap];

		if (c != cq)
			ch->q[(ch->qhead + keep++) % ch->qcap] = c;
	}
	ch->qlen = keep;
	pthread_mutex_unlock(&ch->lock);
}

UROCE_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct uroce_cq *cq = to_ucq(ibcq);

	if (atomic_load(&cq->refs))
		return EBUSY;
	uroce_eng_call(to_uctx(ibcq->context), engine_barrier_fn, NULL);
	uroce_async_forget(to_uctx(ibcq->context), ibcq);
	if (cq->chan) {
		cq_unqueue_events(cq);
		cq->chan->ch.refcnt--;
	}
	pthread_spin_destroy(&cq->poll_lock);
	pthread_spin_destroy(&cq->push_lock);
	free(cq->ring);
	free(cq);
	return 0;
}

UROCE_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq_out,
				  void **cq_context)
{
	struct uroce_comp_channel *ch = container_of(channel, struct uroce_comp_channel, ch);
	struct uroce_cq *cq;
	uint64_t v;

	for (;;) {
		if (read(channel->fd, &v, sizeof(v)) != sizeof(v))
			return -1;
		pthread_mutex_lock(&ch->lock);
		if (ch->qlen)
			break;
		/* the event's CQ was destroyed: wait for the next one */
		pthread_mutex_unlock(&ch->lock);
	}
	cq = ch->q[ch->qhead];
	ch->qhead = (ch->qhead + 1) % ch->qcap;
	ch->qlen--;
	cq->events_pending--;
	pthread_mutex_unlock(&ch->lock);
	*cq_out = &cq->ibcq;
	*cq_context = cq->ibcq.cq_context;
	return 0;
}

UROCE_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* ---- receive queues and SRQ ---- */

static int rq_init(struct uroce_rq *rq, uint32_t max_wr, uint32_t max_sge)
{
	rq->max_wr = max_wr;
	rq->max_sge = max_sge ? max_sge : 1;
	rq->size = pow2_at_least(max_wr ? max_wr : 1);
	rq->stride = (uint32_t)(sizeof(struct uroce_rwqe) + sizeof(struct ibv_sge) * rq->max_sge);
	rq->ring = calloc(rq->size, rq->stride);
	pthread_spin_init(&rq->lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&rq->take_lock, PTHREAD_PROCESS_PRIVATE);
	return rq->ring ? 0 : ENOMEM;
}

static void rq_fini(struct uroce_rq *rq)
{
	free(rq->ring);
	pthread_spin_destroy(&rq->lock);
	pthread_spin_destroy(&rq->take_lock);
}

static int rq_post(struct uroce_rq *rq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	int ret = 0;

	pthread_spin_lock(&rq->lock);
	for (; wr; wr = wr->next) {
		uint32_t head = atomic_load_explicit(&rq->head, memory_order_relaxed);
		struct uroce_rwqe *r;
		uint64_t len = 0;

		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge) {
			ret = EINVAL;
			break;
		}
		if (head - atomic_load_explicit(&rq->tail, memory_order_acquire) >= rq->max_wr) {
			ret = ENOMEM;
			break;
		}
		r = (struct uroce_rwqe *)(rq->ring + (size_t)(head & (rq->size - 1)) * rq->stride);
		r->wr_id = wr->wr_id;
		r->num_sge = (uint32_t)wr->num_sge;
		for (int i = 0; i < wr->num_sge; i++) {
			r->sge[i] = wr->sg_list[i];
			len += wr->sg_list[i].length;
		}
		r->length = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
		atomic_store_explicit(&rq->head, head + 1, memory_order_release);
	}
	pthread_spin_unlock(&rq->lock);
	if (ret)
		*bad = wr;
	return ret;
}

static int post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return rq_post(&to_usrq(ibsrq)->rq, wr, bad);
}

static struct uroce_srq *srq_new(struct ibv_pd *pd, struct ibv_srq_attr *a, void *srq_context)
{
	struct uroce_srq *srq;

	if (a->max_wr < 1 || a->max_wr > UROCE_MAX_QP_WR || a->max_sge > UROCE_MAX_SGE) {
		errno = EINVAL;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq || rq_init(&srq->rq, a->max_wr, a->max_sge)) {
		free(srq);
		errno = ENOMEM;
		return NULL;
	}
	srq->pd = to_upd(pd);
	srq->limit = a->srq_limit;
	atomic_store(&srq->armed_limit, srq->limit ? 1 : 0);
	srq->ibsrq.context = pd->context;
	srq->ibsrq.srq_context = srq_context;
	srq->ibsrq.pd = pd;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	a->max_sge = srq->rq.max_sge;
	atomic_fetch_add(&srq->pd->refs, 1);
	return srq;
}

UROCE_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct uroce_srq *srq = srq_new(pd, &attr->attr, attr->srq_context);

	return srq ? &srq->ibsrq : NULL;
}

/* ibv_create_srq_ex(3): basic SRQs, and XRC SRQs (a domain, a CQ, a
 * number); tag matching is EOPNOTSUPP. */
static struct ibv_srq *create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *ax)
{
	enum ibv_srq_type t = (ax->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? ax->srq_type : IBV_SRQT_BASIC;
	struct uroce_srq *srq;
	int err;

	if (ax->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
					IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ)) {
		errno = (ax->comp_mask & IBV_SRQ_INIT_ATTR_TM) ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	if (t != IBV_SRQT_BASIC && t != IBV_SRQT_XRC) {
		errno = t == IBV_SRQT_TM ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	if (!(ax->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !ax->pd || ax->pd->context != context ||
	    (t == IBV_SRQT_XRC &&
	     (!(ax->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !ax->xrcd ||
	      !(ax->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !ax->cq))) {
		errno = EINVAL;
		return NULL;
	}
	srq = srq_new(ax->pd, &ax->attr, ax->srq_context);
	if (!srq || t == IBV_SRQT_BASIC)
		return srq ? &srq->ibsrq : NULL;
	srq->xrcd = to_uxrcd(ax->xrcd);
	srq->cq = to_ucq(ax->cq);
	err = uroce__xsrq_add(to_uctx(context), srq);
	if (err) {
		atomic_fetch_sub(&srq->pd->refs, 1);
		rq_fini(&srq->rq);
		free(srq);
		errno = err;
		return NULL;
	}
	atomic_fetch_add(&srq->xrcd->refs, 1);
	atomic_fetch_add(&srq->cq->refs, 1);
	return &srq->ibsrq;
}

UROCE_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct uroce_srq *srq = to_usrq(ibsrq);

	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	if ((mask & IBV_SRQ_MAX_WR) && (attr->max_wr < 1 || attr->max_wr > srq->rq.size))
		return EINVAL; /* growing the ring in place is not supported */
	if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit > srq->rq.max_wr)
		return EINVAL;
	if (mask & IBV_SRQ_MAX_WR)
		srq->rq.max_wr = attr->max_wr;
	if (mask & IBV_SRQ_LIMIT) {
		srq->limit = attr->srq_limit;
		atomic_store(&srq->armed_limit, attr->srq_limit ? 1 : 0);
	}
	return 0;
}

UROCE_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct uroce_srq *srq = to_usrq(ibsrq);

	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->limit;
	return 0;
}

UROCE_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct uroce_srq *srq = to_usrq(ibsrq);

	if (atomic_load(&srq->refs))
		return EBUSY;
	if (srq->xrcd) {
		uroce__xsrq_remove(to_uctx(ibsrq->context), srq);
		atomic_fetch_sub(&srq->xrcd->refs, 1);
		atomic_fetch_sub(&srq->cq->refs, 1);
	}
	atomic_fetch_sub(&srq->pd->refs, 1);
	uroce_async_forget(to_uctx(ibsrq->context), ibsrq);
	rq_fini(&srq->rq);
	free(srq);
	return 0;
}

/* ---- QP ---- */

static int post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
static void init_qp_ex_ops(struct uroce_qp *qp);
static void attach_fn(void *arg);
static void free_qp_ex(struct uroce_qp *qp);

struct qp_cmd {
	struct uroce_qp *qp;
	struct ibv_qp_attr *attr;
	int mask;
	int ret;
	enum ibv_qp_state cur;       /* the state the transition was checked from */
};

/* Binds the send socket to a free port P; the QPN is (engine slot << 16)
 * | P, so the engine owning a QPN and the port its flow sends from both
 * follow from the QPN (docs/design.md, "Receive demultiplexing"). */
static int alloc_qpn(struct uroce_qp *qp)
{
	const struct uroce_engine *e = qp->eng;
	const uint32_t lo = 1024, n = 65535 - lo; /* ports 1024..65534 */
	/* Random probes above 4791 first: capture tools (tshark) pick the
	 * dissector of the lower port of a UDP datagram, and many below 4791
	 * are registered to other protocols. Then a sweep of the whole range:
	 * a nearly full host still finds the free ports. */
	const uint32_t hi_lo = ROCE_V2_PORT + 1, hi_n = 65535 - hi_lo;
	uint32_t start = uroce_random32() % n;

	for (uint32_t tries = 0; tries < 64 + n; tries++) {
		uint32_t k = tries < 64 ? hi_lo - lo + uroce_random32() % hi_n : (start + tries - 64) % n;
		uint16_t port = (uint16_t)(lo + k);
		int fd;

		if (port == ROCE_V2_PORT)
			continue;
		fd = uroce_eng_backend(e)->tx_open(qp->src_ip4, port);
		if (fd == -EADDRINUSE || fd == -EACCES)
			continue;
		if (fd < 0)
			return -fd;
		qp->tx_fd = fd;
		qp->sport = port;
		qp->qpn = uroce_eng_slot(e) << 16 | port;
		return 0;
	}
	return EADDRINUSE;
}

/* What each QP type has (ibv_create_qp_ex(3)): XRC initiators send only
 * (no receive queue or CQ), XRC targets only receive, through the XRC
 * SRQs their requests name (no queues, CQs or PD of their own). */
static int qp_has_sq(enum ibv_qp_type t)
{
	return t != IBV_QPT_XRC_RECV;
}

static int qp_has_rq(enum ibv_qp_type t)
{
	return t != IBV_QPT_XRC_SEND && t != IBV_QPT_XRC_RECV;
}

static struct ibv_qp *create_qp(struct ibv_context *context, struct ibv_pd *ibpd,
				struct ibv_qp_init_attr *init, struct ibv_xrcd *xrcd)
{
	struct uroce_ctx *ctx = to_uctx(context);
	struct uroce_qp *qp;
	struct ibv_qp_cap *cap = &init->cap;
	enum ibv_qp_type t = init->qp_type;
	int ret;

	if (t != IBV_QPT_RC && t != IBV_QPT_UC && t != IBV_QPT_UD && t != IBV_QPT_XRC_SEND &&
	    t != IBV_QPT_XRC_RECV) {
		errno = t == IBV_QPT_RAW_PACKET || t == IBV_QPT_DRIVER ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	if (t == IBV_QPT_XRC_RECV) {
		/* the target's queues are its SRQs' */
		if (!xrcd) {
			errno = EINVAL;
			return NULL;
		}
		memset(cap, 0, sizeof(*cap));
		init->send_cq = init->recv_cq = NULL;
		init->srq = NULL;
		ibpd = NULL;
	} else if (!ibpd || !init->send_cq) {
		errno = EINVAL;
		return NULL;
	}
	if (t == IBV_QPT_XRC_SEND) {
		init->recv_cq = NULL;
		init->srq = NULL;
		cap->max_recv_wr = cap->max_recv_sge = 0;
	}
	if ((qp_has_rq(t) && !init->recv_cq) || cap->max_send_wr > UROCE_MAX_QP_WR ||
	    cap->max_send_sge > UROCE_MAX_SGE || cap->max_inline_data > UROCE_MAX_INLINE ||
	    (!init->srq && (cap->max_recv_wr > UROCE_MAX_QP_WR || cap->max_recv_sge > UROCE_MAX_SGE))) {
		errno = EINVAL;
		return NULL;
	}
	if (atomic_load(&ctx->nqps) >= UROCE_MAX_QP) {
		errno = ENOMEM;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->ctx = ctx;
	qp->eng = uroce_eng_pick(ctx);
	qp->cnt = uroce_eng_counters(qp->eng);
	qp->type = t;
	qp->pd = ibpd ? to_upd(ibpd) : NULL;
	qp->scq = init->send_cq ? to_ucq(init->send_cq) : NULL;
	qp->rcq = init->recv_cq ? to_ucq(init->recv_cq) : NULL;
	qp->xrcd = xrcd ? to_uxrcd(xrcd) : NULL;
	qp->srq = init->srq ? to_usrq(init->srq) : NULL;
	qp->sq_sig_all = init->sq_sig_all;
	qp->cap = *cap;
	if (qp->cap.max_send_sge == 0)
		qp->cap.max_send_sge = 1;
	qp->tx_fd = qp->flow.fd = -1;
	qp->src_ip4 = ctx->dev.ip4;
	qp->sq_size = pow2_at_least(cap->max_send_wr ? cap->max_send_wr : 1);
	qp->sq = calloc(qp->sq_size, sizeof(*qp->sq));
	qp->sq_sge = calloc((size_t)qp->sq_size * qp->cap.max_send_sge, sizeof(*qp->sq_sge));
	if (cap->max_inline_data)
		qp->sq_inline = malloc((size_t)qp->sq_size * cap->max_inline_data);
	ret = (!qp->sq || !qp->sq_sge || (cap->max_inline_data && !qp->sq_inline)) ? ENOMEM : 0;
	if (!ret && !qp->srq && qp_has_rq(t))
		ret = rq_init(&qp->rq, cap->max_recv_wr, cap->max_recv_sge);
	if (!ret)
		ret = alloc_qpn(qp);
	if (ret) {
		free(qp->sq);
		free(qp->sq_sge);
		free(qp->sq_inline);
		if (qp->rq.ring)
			rq_fini(&qp->rq);
		free(qp);
		errno = ret;
		return NULL;
	}
	for (uint32_t i = 0; i < qp->sq_size; i++) {
		qp->sq[i].sge = qp->sq_sge + (size_t)i * qp->cap.max_send_sge;
		if (qp->sq_inline)
			qp->sq[i].inl = qp->sq_inline + (size_t)i * cap->max_inline_data;
	}
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->eng_state = IBV_QPS_RESET;
	atomic_store(&qp->state, IBV_QPS_RESET);
	qp->attr.cap = qp->cap;

	qp->qpx.qp_base.context = context;
	qp->qpx.qp_base.qp_context = init->qp_context;
	qp->qpx.qp_base.pd = ibpd;
	qp->qpx.qp_base.send_cq = init->send_cq;
	qp->qpx.qp_base.recv_cq = init->recv_cq;
	qp->qpx.qp_base.srq = init->srq;
	qp->qpx.qp_base.qp_num = qp->qpn;
	qp->qpx.qp_base.handle = qp->qpn;
	qp->qpx.qp_base.state = IBV_QPS_RESET;
	qp->qpx.qp_base.qp_type = qp->type;
	pthread_mutex_init(&qp->qpx.qp_base.mutex, NULL);
	pthread_cond_init(&qp->qpx.qp_base.cond, NULL);
	init_qp_ex_ops(qp);

	if (t == IBV_QPT_XRC_RECV) {
		atomic_fetch_add(&qp->xrcd->refs, 1);
	} else {
		atomic_fetch_add(&qp->pd->refs, 1);
		atomic_fetch_add(&qp->scq->refs, 1);
		if (qp->rcq)
			atomic_fetch_add(&qp->rcq->refs, 1);
		if (qp->srq)
			atomic_fetch_add(&qp->srq->refs, 1);
	}
	atomic_fetch_add(&ctx->nqps, 1);
	if (ctx->stat)
		ctx->stat->nqps = (uint32_t)atomic_load(&ctx->nqps);
	uroce_eng_call_qp(qp, attach_fn, qp);
	init->cap = qp->cap;
	return &qp->qpx.qp_base;
}

UROCE_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	/* ibv_create_qp_ex() with only a PD comes here (verbs.h), XRC
	 * initiators too; a target needs a domain, hence the extended call,
	 * and fails in create_qp without one */
	return create_qp(pd->context, pd, init, NULL);
}

#define SEND_OPS_SUPPORTED                                                                   \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |                             \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

static struct ibv_qp *create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *ax)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp *qp;

	struct ibv_xrcd *xrcd = (ax->comp_mask & IBV_QP_INIT_ATTR_XRCD) ? ax->xrcd : NULL;

	if (ax->qp_type == IBV_QPT_XRC_RECV ? !xrcd
					    : (!(ax->comp_mask & IBV_QP_INIT_ATTR_PD) || !ax->pd)) {
		errno = EINVAL;
		return NULL;
	}
	if (ax->comp_mask & ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			      IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_XRCD)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (((ax->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ax->create_flags) ||
	    ((ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	     (ax->send_ops_flags & ~(uint64_t)SEND_OPS_SUPPORTED))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	memset(&init, 0, sizeof(init));
	init.qp_context = ax->qp_context;
	init.send_cq = ax->send_cq;
	init.recv_cq = ax->recv_cq;
	init.srq = ax->srq;
	init.cap = ax->cap;
	init.qp_type = ax->qp_type;
	init.sq_sig_all = ax->sq_sig_all;
	qp = create_qp(context, ax->qp_type == IBV_QPT_XRC_RECV ? NULL : ax->pd, &init, xrcd);
	if (qp)
		ax->cap = init.cap;
	return qp;
}

static void attach_fn(void *arg)
{
	struct uroce_qp *qp = arg;

	uroce_eng_attach(qp->eng, qp);
}

static void destroy_fn(void *arg)
{
	struct uroce_qp *qp = arg;

	/* Datagrams and UC messages posted just before the QP goes away
	 * leave first, as a NIC would have sent them by then (mckey -o posts
	 * its sends and destroys the QP at once). Nothing waits for them. */
	for (int pass = 0; pass < 64 && qp->eng_state == IBV_QPS_RTS &&
			   atomic_load(&qp->sq_tail) != atomic_load(&qp->sq_head) &&
			   (qp->type == IBV_QPT_UD || qp->type == IBV_QPT_UC);
	     pass++) {
		uint64_t now = uroce_eng_now(qp->eng);

		if (qp->type == IBV_QPT_UD)
			uroce_ud_progress(qp->eng, qp, now);
		else
			uroce_req_progress(qp->eng, qp, now);
	}
	uroce_eng_flush(qp->eng);
	uroce_eng_detach(qp->eng, qp);
	uroce_eng_deactivate(qp->eng, qp);
	uroce_qp_disconnect(qp);
	if (qp->tx_fd >= 0)
		close(qp->tx_fd);
	qp->tx_fd = -1;
	uroce_stage_free(qp);
}

UROCE_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct uroce_qp *qp = to_uqp(ibqp);

	/* as the kernel's uverbs: a QP still attached to a multicast group
	 * cannot be destroyed (detach first) */
	if (qp->nmcast)
		return EBUSY;

	uroce_eng_call_qp(qp, destroy_fn, qp);
	/* no event of it may outlive it (UCX read a freed QP's) */
	uroce_async_forget(qp->ctx, ibqp);
	if (qp->type == IBV_QPT_XRC_RECV) {
		/* pd, rcq and srq were its last request's SRQ's, not its own */
		atomic_fetch_sub(&qp->xrcd->refs, 1);
	} else {
		atomic_fetch_sub(&qp->pd->refs, 1);
		atomic_fetch_sub(&qp->scq->refs, 1);
		if (qp->rcq)
			atomic_fetch_sub(&qp->rcq->refs, 1);
		if (qp->srq)
			atomic_fetch_sub(&qp->srq->refs, 1);
	}
	if (qp->rq.ring)
		rq_fini(&qp->rq);
	atomic_fetch_sub(&qp->ctx->nqps, 1);
	if (qp->ctx->stat)
		qp->ctx->stat->nqps = (uint32_t)atomic_load(&qp->ctx->nqps);
	pthread_spin_destroy(&qp->sq_lock);
	free(qp->sq);
	free(qp->sq_sge);
	free(qp->sq_inline);
	free(qp->srx);
	free(qp->sr_sack);
	free(qp->rd_got);
	uroce_resp_ooo_free(qp);
	free_qp_ex(qp);
	free(qp);
	return 0;
}

/* ibv_modify_qp(3) / IBA 10.3.1 table 91: attributes each transition
 * requires and allows (besides IBV_QP_STATE), per QP type. */
struct transition {
	int req, opt;
	int ok;
};

#define OPT_RTS (IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | \
		 IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)

static struct transition transition_rc(enum ibv_qp_state cur, enum ibv_qp_state next);

/* UD (IBA 10.3.1 table 91, UD column): a Q_Key instead of access flags,
 * no address vector, no ACK timers. */
static struct transition transition_ud(enum ibv_qp_state cur, enum ibv_qp_state next)
{
	struct transition t = { 0, 0, 0 };

	switch (cur) {
	case IBV_QPS_RESET:
		if (next == IBV_QPS_INIT) {
			t.ok = 1;
			t.req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
		}
		break;
	case IBV_QPS_INIT:
		if (next == IBV_QPS_INIT || next == IBV_QPS_RTR) {
			t.ok = 1;
			t.opt = IBV_QP_PKEY_INDEX | IBV_QP_QKEY | (next == IBV_QPS_INIT ? IBV_QP_PORT : 0);
		}
		break;
	case IBV_QPS_RTR:
		if (next == IBV_QPS_RTS) {
			t.ok = 1;
			t.req = IBV_QP_SQ_PSN;
			t.opt = IBV_QP_CUR_STATE | IBV_QP_QKEY;
		}
		break;
	case IBV_QPS_RTS:
	case IBV_QPS_SQD:
	case IBV_QPS_SQE:
		if (next == IBV_QPS_RTS) {
			t.ok = 1;
			t.opt = IBV_QP_CUR_STATE | IBV_QP_QKEY;
		} else if (next == IBV_QPS_SQD && cur == IBV_QPS_RTS) {
			t.ok = 1;
			t.opt = IBV_QP_EN_SQD_ASYNC_NOTIFY;
		} else if (next == IBV_QPS_SQD && cur == IBV_QPS_SQD) {
			t.ok = 1;
			t.opt = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
		}
		break;
	default:
		break;
	}
	return t;
}

static struct transition transition_of(enum ibv_qp_type type, enum ibv_qp_state cur,
				       enum ibv_qp_state next)
{
	struct transition t = { 0, 0, 0 };
	/* UC (table 91, UC column): RC's without the ACK, retry and
	 * READ/atomic attributes */
	const int not_uc = type == IBV_QPT_UC
				   ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_TIMEOUT |
					     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_MAX_QP_RD_ATOMIC
				   : 0;

	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) {
		t.ok = 1;
		t.opt = IBV_QP_CUR_STATE;
		return t;
	}
	/* XRC (the kernel's table for XRC_INI/XRC_TGT): an initiator has no
	 * responder attributes, a target no requester ones but a timeout */
	const int not_ini = IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	const int not_tgt = IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

	if (type == IBV_QPT_UD)
		return transition_ud(cur, next);
	t = transition_rc(cur, next);
	if (type == IBV_QPT_XRC_SEND) {
		t.req &= ~not_ini;
		t.opt &= ~not_ini;
	} else if (type == IBV_QPT_XRC_RECV) {
		if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS)
			t.req = IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
		t.req &= ~not_tgt;
		t.opt &= ~not_tgt;
	}
	t.req &= ~not_uc;
	t.opt &= ~not_uc;
	return t;
}

/* RC (table 91, RC column). */
static struct transition transition_rc(enum ibv_qp_state cur, enum ibv_qp_state next)
{
	struct transition t = { 0, 0, 0 };

	switch (cur) {
	case IBV_QPS_RESET:
		if (next == IBV_QPS_INIT) {
			t.ok = 1;
			t.req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		}
		break;
	case IBV_QPS_INIT:
		if (next == IBV_QPS_INIT) {
			t.ok = 1;
			t.opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		} else if (next == IBV_QPS_RTR) {
			t.ok = 1;
			t.req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
			t.opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
		}
		break;
	case IBV_QPS_RTR:
		if (next == IBV_QPS_RTS) {
			t.ok = 1;
			t.req = IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_MAX_QP_RD_ATOMIC;
			t.opt = OPT_RTS;
		}
		break;
	case IBV_QPS_RTS:
		if (next == IBV_QPS_RTS) {
			t.ok = 1;
			t.opt = OPT_RTS;
		} else if (next == IBV_QPS_SQD) {
			t.ok = 1;
			t.opt = IBV_QP_EN_SQD_ASYNC_NOTIFY;
		}
		break;
	case IBV_QPS_SQD:
		if (next == IBV_QPS_RTS) {
			t.ok = 1;
			t.opt = OPT_RTS;
		} else if (next == IBV_QPS_SQD) {
			t.ok = 1;
			t.opt = IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH |
				IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE |
				IBV_QP_PKEY_INDEX | IBV_QP_CUR_STATE;
		}
		break;
	case IBV_QPS_SQE:
		if (next == IBV_QPS_RTS) {
			t.ok = 1;
			t.opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER;
		}
		break;
	default:
		break;
	}
	return t;
}

static int check_values(struct uroce_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct uroce_ctx *ctx = qp->ctx;

	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
		return EINVAL;
	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (a->qp_access_flags & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
		return EINVAL;
	if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
		return EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > QPN_MASK)
		return EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > UROCE_MAX_RD_ATOMIC)
		return EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > UROCE_MAX_RD_ATOMIC)
		return EINVAL;
	if (mask & IBV_QP_AV) {
		const struct ibv_ah_attr *ah = &a->ah_attr;
		static const uint8_t v4pre[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

		if (ah->port_num && ah->port_num != 1)
			return EINVAL;
		if (!ah->is_global) {
			/* No GRH: the synthetic LID names the peer (see
			 * uroce_port_lid); LID 0 names nobody. */
			if (!ah->dlid || !uroce_port_lid(ctx->dev.ip4))
				return EINVAL;
		} else {
			/* uroce carries IPv4 RoCEv2 GIDs. */
			if (ah->grh.sgid_index >= ctx->dev.ngids)
				return EINVAL;
			if (memcmp(ah->grh.dgid.raw, v4pre, 12))
				return EINVAL;
		}
	}
	if ((mask & IBV_QP_CUR_STATE) &&
	    a->cur_qp_state != (enum ibv_qp_state)atomic_load(&qp->state))
		return EINVAL;
	/* A controlled Q_Key (high bit set, IBA 10.2.5) is for privileged
	 * users; the kernel's uverbs asks for CAP_NET_RAW. */
	if ((mask & IBV_QP_QKEY) && (a->qkey & 0x80000000u) && !uroce__cap_net_raw())
		return EPERM;
	return 0;
}

static void apply_fn(void *arg)
{
	struct qp_cmd *c = arg;
	struct uroce_qp *qp = c->qp;
	struct ibv_qp_attr *a = c->attr;
	int mask = c->mask;
	enum ibv_qp_state cur = (enum ibv_qp_state)qp->eng_state;
	/* without IBV_QP_STATE the caller asked to stay where it checked */
	enum ibv_qp_state next = (mask & IBV_QP_STATE) ? a->qp_state : c->cur;

	c->ret = 0;
	/* The engine moved the QP to the error state after the caller
	 * checked its transition (a fatal NAK, retries exhausted): only
	 * the transitions allowed from any state still apply (IBA 10.3.1,
	 * figure 124: to Reset and to Error). */
	if (cur != c->cur && next != IBV_QPS_RESET && next != IBV_QPS_ERR) {
		c->ret = EINVAL;
		return;
	}
	if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT && qp->type == IBV_QPT_UD) {
		/* A datagram QP has no peer: it hears anyone at the device's
		 * address, datagrams at most the port's active MTU. */
		int ret;

		qp->peer_ip4 = 0;
		qp->dest_qpn = 0;
		qp->tos = (getenv("UROCE_ECN") && !strcmp(getenv("UROCE_ECN"), "0")) ? 0 : 2;
		if (qp->tos) {
			int tos = qp->tos;

			setsockopt(qp->tx_fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
		}
		qp->pmtu = 128u << uroce_net_active_mtu(uroce_net_mtu(qp->ctx->dev.ifname));
		qp->resp.epsn = 0;
		ret = uroce_qp_connect(qp);
		if (ret) {
			c->ret = ret;
			return;
		}
	} else if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
		uint32_t sip = qp->ctx->dev.ip4;
		int ret;

		if (a->ah_attr.is_global) {
			memcpy(&qp->peer_ip4, &a->ah_attr.grh.dgid.raw[12], 4);
			memcpy(&sip, qp->ctx->dev.gid[a->ah_attr.grh.sgid_index] + 12, 4);
		} else {
			qp->peer_ip4 = uroce_lid_to_ip4(qp->ctx->dev.ip4, a->ah_attr.dlid);
		}
		if (sip != qp->src_ip4) {
			/* another source address: same port, new socket */
			int fd = uroce_eng_backend(qp->eng)->tx_open(sip, qp->sport);

			if (fd < 0) {
				c->ret = -fd;
				return;
			}
			close(qp->tx_fd);
			qp->tx_fd = fd;
			qp->src_ip4 = sip;
		}
		qp->dest_qpn = a->dest_qp_num;
		qp->tos = a->ah_attr.is_global ? a->ah_attr.grh.traffic_class : 0;
		/* ECN-capable transport (ECT(0)) unless the traffic class says
		 * otherwise or UROCE_ECN=0: RoCE NICs with ECN on do the same,
		 * so congested queues mark instead of dropping. */
		if (!(qp->tos & 3) && !(getenv("UROCE_ECN") && !strcmp(getenv("UROCE_ECN"), "0")))
			qp->tos |= 2;
		if (qp->tos) {
			int tos = qp->tos;

			/* the GRH traffic class is the IP TOS byte (DSCP + ECN) */
			setsockopt(qp->tx_fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
		}
		qp->pmtu = 128u << MIN((int)a->path_mtu,
				       uroce_net_active_mtu(uroce_net_mtu(qp->ctx->dev.ifname)));
		qp->resp.epsn = a->rq_psn & PSN_MASK;
		/* a QP connected after CUDA memory was registered gets its CUDA
		 * resources now, not during a kernel (uroce_qp_cuda_prepare) */
		if (atomic_load(&qp->ctx->cuctx))
			uroce_qp_cuda_prepare(qp, atomic_load(&qp->ctx->cuctx));
		/* selective repeat is a responder choice of RC (no ACKs on UC) */
		qp->sr = qp->type == IBV_QPT_RC && uroce_retrans_sr();
		uroce_gap_params(&qp->gap_after, &qp->gap_wait_ns);
		ret = uroce_qp_connect(qp);
		if (ret) {
			c->ret = ret;
			return;
		}
	}
	if (next == IBV_QPS_RTS && cur == IBV_QPS_RTR) {
		uint32_t psn = a->sq_psn & PSN_MASK;
		const char *rto = getenv("UROCE_RTO_US");

		qp->req.psn = qp->req.una = qp->req.hi_psn = psn;
		qp->req.cur = atomic_load(&qp->sq_tail);
		if (uroce_qp_waits_acks(qp)) {
			/* UC and UD have no ACKs, hence no timers or retries */
			qp->req.timeout_ns = a->timeout ? (uint64_t)(4096ull << a->timeout) : 0;
			qp->req.retry_left = a->retry_cnt;
			qp->req.rnr_left = a->rnr_retry;
		}
		qp->req.max_rd = uroce_qp_waits_acks(qp) && a->max_rd_atomic ? a->max_rd_atomic : 1;
		{
			const char *w = getenv("UROCE_WINDOW");
			unsigned long wm = w ? strtoul(w, NULL, 0) : 256;

			qp->req.window_max = (uint32_t)MIN(MAX(wm, 16ul), 4096ul);
			qp->req.window = qp->req.window_max;
			qp->req.last_una = psn;
			qp->req.aimd = getenv("UROCE_AIMD") && !strcmp(getenv("UROCE_AIMD"), "1");
		}
		qp->req.fast_rto_ns = (rto ? strtoull(rto, NULL, 0) : 5000) * 1000ull;
		qp->req.fast_min_ns = qp->req.fast_rto_ns;
		if (qp->req.timeout_ns && qp->req.fast_rto_ns > qp->req.timeout_ns)
			qp->req.fast_rto_ns = qp->req.timeout_ns;
		qp->req.gap_psn = PSN_MASK + 1;
	}
	/* Commit the attributes. */
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->attr.port_num = a->port_num;
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->attr.qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_AV)
		qp->attr.ah_attr = a->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		qp->attr.path_mtu = a->path_mtu;
	if (mask & IBV_QP_DEST_QPN)
		qp->attr.dest_qp_num = a->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN)
		qp->attr.rq_psn = a->rq_psn & PSN_MASK;
	if (mask & IBV_QP_SQ_PSN)
		qp->attr.sq_psn = a->sq_psn & PSN_MASK;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->attr.max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC) {
		qp->attr.max_rd_atomic = a->max_rd_atomic;
		qp->req.max_rd = a->max_rd_atomic ? a->max_rd_atomic : 1;
	}
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->attr.min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_TIMEOUT) {
		qp->attr.timeout = a->timeout;
		qp->req.timeout_ns = a->timeout ? (uint64_t)(4096ull << a->timeout) : 0;
	}
	if (mask & IBV_QP_RETRY_CNT)
		qp->attr.retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		qp->attr.rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_PATH_MIG_STATE)
		qp->attr.path_mig_state = a->path_mig_state;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		qp->attr.en_sqd_async_notify = a->en_sqd_async_notify;
	if (mask & IBV_QP_QKEY)
		qp->attr.qkey = a->qkey;

	if (next == cur)
		return;
	if (next == IBV_QPS_RESET) {
		uroce_eng_deactivate(qp->eng, qp);
		uroce_qp_disconnect(qp);
		uroce_qp_reset_transport(qp);
	} else if (next == IBV_QPS_ERR) {
		/* What was received and completed is acknowledged first: an
		 * ACK held over an application turn (or coalesced) would
		 * otherwise be dropped with the QP's state, and the peer,
		 * whose SEND this QP already completed, would retry it into
		 * RETRY_EXC_ERR (rdma_disconnect right after a receive). */
		if (cur == IBV_QPS_RTR || cur == IBV_QPS_RTS || cur == IBV_QPS_SQD)
			uroce_resp_flush_ack(qp->eng, qp, UINT64_MAX);
		uroce_qp_to_error(qp);
		uroce_eng_activate(qp->eng, qp);
	}
	qp->attr.qp_state = next;
	qp->eng_state = next;
	qp->qpx.qp_base.state = next;
	atomic_store(&qp->state, next);
	if (next == IBV_QPS_SQD && qp->attr.en_sqd_async_notify && !uroce_req_busy(qp))
		uroce_async_event(qp->ctx, IBV_EVENT_SQ_DRAINED, &qp->qpx.qp_base);
	if (next == IBV_QPS_RTS)
		uroce_eng_activate(qp->eng, qp);
}

UROCE_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct uroce_qp *qp = to_uqp(ibqp);
	struct qp_cmd c = { .qp = qp, .attr = attr };
	enum ibv_qp_state cur = (enum ibv_qp_state)atomic_load(&qp->state), next;
	struct transition t;
	int extra, ret;

	if (!attr)
		return EINVAL;
	/* As the kernel's uverbs (modify_qp_mask): an XRC initiator's
	 * responder attributes and a target's requester attributes are
	 * dropped, not refused (perftest -c XRC passes RC's set to both). */
	if (qp->type == IBV_QPT_XRC_SEND)
		mask &= ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	else if (qp->type == IBV_QPT_XRC_RECV)
		mask &= ~(IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY);
	c.mask = mask;
	c.cur = cur;
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (next > IBV_QPS_ERR)
		return EINVAL;
	t = transition_of(qp->type, cur, next);
	extra = mask & ~IBV_QP_STATE;
	if (!t.ok || (extra & t.req) != t.req || (extra & ~(t.req | t.opt))) {
		uroce_dbg("modify_qp 0x%x: %d -> %d with mask 0x%x: missing 0x%x, not allowed 0x%x",
			  qp->qpn, cur, next, mask, t.req & ~extra, extra & ~(t.req | t.opt));
		return EINVAL;
	}
	ret = check_values(qp, attr, mask);
	if (ret) {
		uroce_dbg("modify_qp 0x%x: invalid attribute values (mask 0x%x, is_global %d)",
			  qp->qpn, mask, attr->ah_attr.is_global);
		return ret;
	}
	uroce_eng_call_qp(qp, apply_fn, &c);
	return c.ret;
}

UROCE_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
			      struct ibv_qp_init_attr *init)
{
	struct uroce_qp *qp = to_uqp(ibqp);

	*attr = qp->attr;
	attr->qp_state = (enum ibv_qp_state)atomic_load(&qp->state);
	attr->cur_qp_state = attr->qp_state;
	attr->cap = qp->cap;
	attr->sq_draining = 0;
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = ibqp->qp_context;
		init->send_cq = ibqp->send_cq;
		init->recv_cq = ibqp->recv_cq;
		init->srq = ibqp->srq;
		init->cap = qp->cap;
		init->qp_type = qp->type;
		init->sq_sig_all = qp->sq_sig_all;
	}
	return 0;
}

UROCE_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
					    uint32_t flags)
{
	/* Packets are placed in PSN order, but nothing promises it. */
	return 0;
}

UROCE_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

UROCE_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

/* The operations each service offers (IBA 9.4, table 40 of 9.7.7 and
 * 9.8): UC has no READ or atomics, UD only SEND. */
static int opcode_ok(enum ibv_qp_type type, enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return 1;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return type != IBV_QPT_UD;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND;
	default:
		return 0;
	}
}

static int post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct uroce_qp *qp = to_uqp(ibqp);
	int st = atomic_load(&qp->state), ret = 0, posted = 0, behind = 0;

	/* ibv_post_send(3): the QP must be at least RTS (ERR flushes); an XRC
	 * target has no send queue. */
	if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR || !qp_has_sq(qp->type)) {
		*bad = wr;
		return EINVAL;
	}
	pthread_spin_lock(&qp->sq_lock);
	for (; wr; wr = wr->next) {
		uint32_t head = atomic_load_explicit(&qp->sq_head, memory_order_relaxed);
		struct uroce_swqe *w;
		uint64_t len = 0;
		int atomic = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
			     wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;

		if (!opcode_ok(qp->type, wr->opcode) || wr->num_sge < 0 ||
		    (uint32_t)wr->num_sge > qp->cap.max_send_sge) {
			ret = EINVAL;
			break;
		}
		for (int i = 0; i < wr->num_sge; i++)
			len += wr->sg_list[i].length;
		if (len > UROCE_MAX_MSG || (atomic && (wr->num_sge != 1 || len != 8))) {
			ret = EINVAL;
			break;
		}
		/* UD: an address handle of this PD, a message in one packet
		 * (IBA 9.8.4; as rxe, a longer one is refused at post) */
		if (qp->type == IBV_QPT_UD &&
		    (!wr->wr.ud.ah || wr->wr.ud.ah->pd != ibqp->pd || len > qp->pmtu ||
		     wr->wr.ud.remote_qpn > QPN_MASK)) {
			ret = EINVAL;
			break;
		}
		if ((wr->send_flags & IBV_SEND_INLINE) && !atomic && wr->opcode != IBV_WR_RDMA_READ &&
		    len > qp->cap.max_inline_data) {
			ret = EINVAL;
			break;
		}
		if (head - atomic_load_explicit(&qp->sq_tail, memory_order_acquire) >=
		    qp->cap.max_send_wr) {
			ret = ENOMEM;
			break;
		}
		/* a message of one packet behind others of the QP may wait for
		 * the poller's turn (uroce_eng_doorbell); a longer one fills
		 * its own GSO run and goes at once */
		if (!posted)
			behind = head != atomic_load_explicit(&qp->sq_tail, memory_order_relaxed) &&
				 len <= qp->pmtu;
		w = &qp->sq[head & (qp->sq_size - 1)];
		w->wr_id = wr->wr_id;
		w->opcode = wr->opcode;
		w->flags = 0;
		if (wr->send_flags & IBV_SEND_SIGNALED)
			w->flags |= SWQE_SIGNALED;
		if (wr->send_flags & IBV_SEND_SOLICITED)
			w->flags |= SWQE_SOLICITED;
		if (wr->send_flags & IBV_SEND_FENCE)
			w->flags |= SWQE_FENCE;
		w->imm_be = wr->imm_data;
		w->length = (uint32_t)len;
		/* XRC: the target's XRC SRQ, named in every request (XRCETH) */
		w->xrc_srqn = qp->type == IBV_QPT_XRC_SEND ? wr->qp_type.xrc.remote_srqn & QPN_MASK : 0;
		w->status = 0;
		if (qp->type == IBV_QPT_UD) {
			const struct uroce_ah *ah = to_uah(wr->wr.ud.ah);

			w->ud_ip4 = ah->ip4;
			w->ud_tos = ah->tos;
			w->ud_qpn = wr->wr.ud.remote_qpn;
			/* IBA 10.2.5: a WR's Q_Key with the high bit set means
			 * the QP's own Q_Key */
			w->ud_qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->attr.qkey
									  : wr->wr.ud.remote_qkey;
		} else if (atomic) {
			w->remote_addr = wr->wr.atomic.remote_addr;
			w->rkey = wr->wr.atomic.rkey;
			w->compare_add = wr->wr.atomic.compare_add;
			w->swap = wr->wr.atomic.swap;
		} else {
			w->remote_addr = wr->wr.rdma.remote_addr;
			w->rkey = wr->wr.rdma.rkey;
		}
		if ((wr->send_flags & IBV_SEND_INLINE) && !atomic && wr->opcode != IBV_WR_RDMA_READ) {
			uint8_t *p = w->inl;

			/* Inline data is copied now; the buffers need no key. */
			for (int i = 0; i < wr->num_sge; i++) {
				memcpy(p, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
				p += wr->sg_list[i].length;
			}
			w->flags |= SWQE_INLINE;
			w->num_sge = 0;
		} else {
			w->num_sge = (uint32_t)wr->num_sge;
			if (wr->num_sge)
				memcpy(w->sge, wr->sg_list, sizeof(*w->sge) * (size_t)wr->num_sge);
		}
		uroce_trace("post_send", "qpn=0x%x wr_id=%llu opcode=%d len=%u addr=0x%llx signaled=%d",
			    qp->qpn, (unsigned long long)wr->wr_id, (int)wr->opcode, w->length,
			    wr->num_sge ? (unsigned long long)wr->sg_list[0].addr : 0ull,
			    !!(w->flags & SWQE_SIGNALED) || qp->sq_sig_all);
		atomic_store_explicit(&qp->sq_head, head + 1, memory_order_release);
		posted++;
	}
	pthread_spin_unlock(&qp->sq_lock);
	if (posted) {
		int r = uroce_eng_doorbell(qp, behind);

		uroce_trace("doorbell", "qpn=0x%x syscall=%d turn=%d deferred=%d", qp->qpn, r == 1,
			    r == 2, r == 3);
	}
	if (ret)
		*bad = wr;
	return ret;
}

static int post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct uroce_qp *qp = to_uqp(ibqp);
	int st = atomic_load(&qp->state), ret;

	if (qp->srq || st == IBV_QPS_RESET || !qp_has_rq(qp->type)) {
		*bad = wr;
		return EINVAL;
	}
	ret = rq_post(&qp->rq, wr, bad);
	uroce_trace("post_recv", "qpn=0x%x wr_id=%llu", qp->qpn,
		    wr ? (unsigned long long)wr->wr_id : 0ull);
	if (st == IBV_QPS_ERR)
		uroce_eng_doorbell(qp, 0); /* flush them */
	return ret;
}

/* ---- memory windows (address handles and multicast: ud.c) ---- */

static struct ibv_mw *alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	return EOPNOTSUPP;
}

static int dealloc_mw(struct ibv_mw *mw)
{
	return EOPNOTSUPP;
}

/* ---- the new post-send API (ibv_wr_post(3)) on top of post_send ---- */

struct wr_pending {
	struct ibv_send_wr wr;
	struct ibv_sge sge[UROCE_MAX_SGE];
	uint8_t inl[UROCE_MAX_INLINE];
};

struct qpx_state {
	struct wr_pending *p;
	uint32_t n, cap;
	int err;
};

static struct qpx_state *qpx_of(struct ibv_qp_ex *qx);

static struct ibv_send_wr *wr_new(struct ibv_qp_ex *qx, enum ibv_wr_opcode op)
{
	struct qpx_state *s = qpx_of(qx);
	struct wr_pending *w;

	if (s->n == s->cap) {
		uint32_t ncap = s->cap ? s->cap * 2 : 8;
		struct wr_pending *np = realloc(s->p, sizeof(*np) * ncap);

		if (!np) {
			s->err = ENOMEM;
			return NULL;
		}
		s->p = np;
		s->cap = ncap;
	}
	w = &s->p[s->n++];
	memset(&w->wr, 0, sizeof(w->wr));
	w->wr.wr_id = qx->wr_id;
	w->wr.send_flags = (int)qx->wr_flags;
	w->wr.opcode = op;
	w->wr.sg_list = w->sge;
	return &w->wr;
}

static struct ibv_send_wr *wr_last(struct ibv_qp_ex *qx)
{
	struct qpx_state *s = qpx_of(qx);

	return s->n ? &s->p[s->n - 1].wr : NULL;
}

static void wr_start(struct ibv_qp_ex *qx)
{
	struct qpx_state *s = qpx_of(qx);

	s->n = 0;
	s->err = 0;
}

static int wr_complete(struct ibv_qp_ex *qx)
{
	struct qpx_state *s = qpx_of(qx);
	struct ibv_send_wr *bad;
	int ret;

	if (s->err) {
		ret = s->err;
		s->n = 0;
		return ret;
	}
	if (!s->n)
		return 0;
	for (uint32_t i = 0; i < s->n; i++) {
		s->p[i].wr.sg_list = s->p[i].sge;
		s->p[i].wr.next = i + 1 < s->n ? &s->p[i + 1].wr : NULL;
	}
	ret = post_send(&qx->qp_base, &s->p[0].wr, &bad);
	s->n = 0;
	return ret;
}

static void wr_abort(struct ibv_qp_ex *qx)
{
	qpx_of(qx)->n = 0;
}

static void wr_send(struct ibv_qp_ex *qx)
{
	wr_new(qx, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qx, __be32 imm)
{
	struct ibv_send_wr *w = wr_new(qx, IBV_WR_SEND_WITH_IMM);

	if (w)
		w->imm_data = imm;
}

static void wr_rdma(struct ibv_qp_ex *qx, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
		    __be32 imm)
{
	struct ibv_send_wr *w = wr_new(qx, op);

	if (w) {
		w->wr.rdma.rkey = rkey;
		w->wr.rdma.remote_addr = addr;
		w->imm_data = imm;
	}
}

static void wr_rdma_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr)
{
	wr_rdma(qx, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, __be32 imm)
{
	wr_rdma(qx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void wr_rdma_read(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr)
{
	wr_rdma(qx, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void wr_atomic(struct ibv_qp_ex *qx, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
		      uint64_t cmp_add, uint64_t swap)
{
	struct ibv_send_wr *w = wr_new(qx, op);

	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = addr;
		w->wr.atomic.compare_add = cmp_add;
		w->wr.atomic.swap = swap;
	}
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, uint64_t cmp,
			      uint64_t swap)
{
	wr_atomic(qx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, cmp, swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, uint64_t add)
{
	wr_atomic(qx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

static void wr_set_ud_addr(struct ibv_qp_ex *qx, struct ibv_ah *ah, uint32_t remote_qpn,
			   uint32_t remote_qkey)
{
	struct ibv_send_wr *w = wr_last(qx);

	if (!w)
		return;
	w->wr.ud.ah = ah;
	w->wr.ud.remote_qpn = remote_qpn;
	w->wr.ud.remote_qkey = remote_qkey;
}

/* ibv_open_qp(3) opens an XRC target QP that another process created:
 * uroce's XRC domains do not span processes (xrc.c). */
static struct ibv_qp *open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *qx, uint32_t remote_srqn)
{
	struct ibv_send_wr *w = wr_last(qx);

	if (w)
		w->qp_type.xrc.remote_srqn = remote_srqn;
}

static void wr_set_sge(struct ibv_qp_ex *qx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_send_wr *w = wr_last(qx);

	if (!w)
		return;
	w->sg_list[0].lkey = lkey;
	w->sg_list[0].addr = addr;
	w->sg_list[0].length = length;
	w->num_sge = 1;
}

static void wr_set_sge_list(struct ibv_qp_ex *qx, size_t n, const struct ibv_sge *sg)
{
	struct ibv_send_wr *w = wr_last(qx);

	if (!w)
		return;
	if (n > UROCE_MAX_SGE) {
		qpx_of(qx)->err = EINVAL;
		return;
	}
	memcpy(w->sg_list, sg, sizeof(*sg) * n);
	w->num_sge = (int)n;
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qx, size_t n, const struct ibv_data_buf *b)
{
	struct qpx_state *s = qpx_of(qx);
	struct wr_pending *p;
	size_t len = 0;

	if (!s->n)
		return;
	p = &s->p[s->n - 1];
	for (size_t i = 0; i < n; i++) {
		if (len + b[i].length > UROCE_MAX_INLINE) {
			s->err = EINVAL;
			return;
		}
		memcpy(p->inl + len, b[i].addr, b[i].length);
		len += b[i].length;
	}
	p->sge[0].addr = (uintptr_t)p->inl;
	p->sge[0].length = (uint32_t)len;
	p->sge[0].lkey = 0;
	p->wr.num_sge = 1;
	p->wr.send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *qx, void *addr, size_t length)
{
	struct ibv_data_buf b = { .addr = addr, .length = length };

	wr_set_inline_data_list(qx, 1, &b);
}

/* The qp_ex pending list lives beside the QP; allocated with it. */
static struct qpx_state *qpx_of(struct ibv_qp_ex *qx)
{
	struct uroce_qp *qp = container_of(qx, struct uroce_qp, qpx);

	return (struct qpx_state *)qp->wrx;
}

static void init_qp_ex_ops(struct uroce_qp *qp)
{
	struct ibv_qp_ex *x = &qp->qpx;

	qp->wrx = calloc(1, sizeof(struct qpx_state));
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
}

static void free_qp_ex(struct uroce_qp *qp)
{
	struct qpx_state *s = qp->wrx;

	if (s)
		free(s->p);
	free(s);
}

UROCE_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	return &to_uqp(qp)->qpx;
}

void uroce__init_ops(struct uroce_ctx *ctx)
{
	struct ibv_context_ops *o = &ctx->vctx.context.ops;

	o->poll_cq = poll_cq;
	o->req_notify_cq = req_notify_cq;
	o->post_send = post_send;
	o->post_recv = post_recv;
	o->post_srq_recv = post_srq_recv;
	o->alloc_mw = alloc_mw;
	o->bind_mw = bind_mw;
	o->dealloc_mw = dealloc_mw;
	ctx->vctx.create_qp_ex = create_qp_ex;
	ctx->vctx.create_srq_ex = create_srq_ex;
	ctx->vctx.get_srq_num = uroce__get_srq_num;
	ctx->vctx.open_xrcd = uroce__open_xrcd;
	ctx->vctx.close_xrcd = uroce__close_xrcd;
	ctx->vctx.open_qp = open_qp;
	pthread_mutex_init(&ctx->xsrq_lock, NULL);
	uroce__init_ops_device(ctx);
}
