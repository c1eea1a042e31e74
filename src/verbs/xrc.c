/* XRC (eXtended Reliable Connected, IBA 14.? and ibv_open_xrcd(3)): an
 * XRC domain holds XRC SRQs and XRC target QPs; an initiator QP (an RC
 * requester) names the target's SRQ in every request (the XRCETH), so one
 * connection serves many receive queues. In uroce the initiator is an RC
 * requester whose requests carry the XRCETH, the target an RC responder
 * that takes receive WQEs, CQ and PD from the SRQ the request names
 * (resp.c, xrc_bind). A domain lives in one process: it can be opened by
 * a file's inode (the fd of ibv_xrcd_init_attr) and opened again in the
 * same process, but not shared with other processes, which would need
 * one memory across them; ibv_open_qp (a target QP of another process)
 * is EOPNOTSUPP. */
#include "verbs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int xsrq_table(struct uroce_ctx *ctx)
{
	if (!ctx->xsrq)
		ctx->xsrq = calloc(UROCE_MAX_XSRQ, sizeof(*ctx->xsrq));
	return ctx->xsrq ? 0 : ENOMEM;
}

struct ibv_xrcd *uroce__open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr)
{
	struct uroce_ctx *ctx = to_uctx(context);
	struct uroce_xrcd *x = NULL;
	struct stat st;
	int fd, oflags, err = 0;

	if (!attr ||
	    (attr->comp_mask & ~(uint32_t)(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)) ||
	    !(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD)) {
		errno = EINVAL;
		return NULL;
	}
	fd = attr->fd;
	oflags = (attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) ? attr->oflags : 0;
	if (oflags & ~(O_CREAT | O_EXCL)) {
		errno = EINVAL;
		return NULL;
	}
	/* ibv_open_xrcd(3): fd -1 is a new domain of its own (O_CREAT);
	 * otherwise the domain of the file's inode, created with O_CREAT,
	 * refused with EEXIST under O_EXCL when it exists */
	if (fd == -1 && !(oflags & O_CREAT)) {
		errno = EINVAL;
		return NULL;
	}
	if (fd != -1 && fstat(fd, &st) < 0) {
		errno = EBADF;
		return NULL;
	}
	pthread_mutex_lock(&ctx->xsrq_lock);
	err = xsrq_table(ctx);
	if (!err && fd != -1) {
		for (x = ctx->xrcds; x; x = x->next)
			if (x->dev == st.st_dev && x->ino == st.st_ino)
				break;
		if (x && (oflags & O_EXCL))
			err = EEXIST;
		else if (!x && !(oflags & O_CREAT))
			err = ENOENT;
		else if (x)
			x->opens++;
	}
	if (!err && !x) {
		x = calloc(1, sizeof(*x));
		if (!x) {
			err = ENOMEM;
		} else {
			x->ibxrcd.context = context;
			x->opens = 1;
			if (fd != -1) {
				x->dev = st.st_dev;
				x->ino = st.st_ino;
				x->next = ctx->xrcds;
				ctx->xrcds = x;
			}
		}
	}
	pthread_mutex_unlock(&ctx->xsrq_lock);
	if (err) {
		errno = err;
		return NULL;
	}
	return &x->ibxrcd;
}

/* The last close frees it; while SRQs or target QPs use the domain, the
 * last close is refused with EBUSY (as the kernel's ib_dealloc_xrcd). */
int uroce__close_xrcd(struct ibv_xrcd *ibx)
{
	struct uroce_xrcd *x = to_uxrcd(ibx);
	struct uroce_ctx *ctx = to_uctx(ibx->context);
	int last;

	pthread_mutex_lock(&ctx->xsrq_lock);
	last = x->opens == 1;
	if (last && atomic_load(&x->refs)) {
		pthread_mutex_unlock(&ctx->xsrq_lock);
		return EBUSY;
	}
	if (last) {
		for (struct uroce_xrcd **pp = &ctx->xrcds; *pp; pp = &(*pp)->next)
			if (*pp == x) {
				*pp = x->next;
				break;
			}
	}
	x->opens--;
	pthread_mutex_unlock(&ctx->xsrq_lock);
	if (last)
		free(x);
	return 0;
}

int uroce__get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct uroce_srq *srq = to_usrq(ibsrq);

	if (!srq->xrcd)
		return EINVAL; /* a basic SRQ has no number */
	*srq_num = srq->srqn;
	return 0;
}

/* Gives an XRC SRQ its number (its index in the context's table + 1). */
int uroce__xsrq_add(struct uroce_ctx *ctx, struct uroce_srq *srq)
{
	int err = ENOMEM;

	pthread_mutex_lock(&ctx->xsrq_lock);
	if (!xsrq_table(ctx))
		for (uint32_t i = 0; i < UROCE_MAX_XSRQ; i++)
			if (!atomic_load(&ctx->xsrq[i])) {
				srq->srqn = i + 1;
				atomic_store_explicit(&ctx->xsrq[i], srq, memory_order_release);
				err = 0;
				break;
			}
	pthread_mutex_unlock(&ctx->xsrq_lock);
	return err;
}

static void forget_fn(void *arg)
{
	struct uroce_srq *srq = arg;
	struct uroce_ctx *ctx = to_uctx(srq->ibsrq.context);

	atomic_store(&ctx->xsrq[srq->srqn - 1], NULL);
	/* target QPs whose last request named it let go of it (the engine
	 * thread owns their srq, pd and rcq) */
	for (struct uroce_qp *qp = uroce_eng_all_qps(uroce_eng_cur()); qp; qp = qp->all_next)
		if (qp->type == IBV_QPT_XRC_RECV && qp->srq == srq) {
			qp->srq = NULL;
			qp->rcq = NULL;
			qp->pd = NULL;
			qp->resp.have_rwqe = 0;
		}
}

/* Takes the number back, once the engine let go of the SRQ. */
void uroce__xsrq_remove(struct uroce_ctx *ctx, struct uroce_srq *srq)
{
	pthread_mutex_lock(&ctx->xsrq_lock);
	uroce_eng_call(ctx, forget_fn, srq);
	pthread_mutex_unlock(&ctx->xsrq_lock);
}
