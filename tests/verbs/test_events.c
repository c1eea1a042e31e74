/* Completion channels and events: arming, poll()/epoll readiness,
 * ibv_get_cq_event/ibv_ack_cq_events, one-shot semantics, solicited-only
 * arming, non-blocking channels, the async event fd. */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>

static int fd_readable(int fd, int ms)
{
	struct pollfd pfd = { fd, POLLIN, 0 };
	int r;

	do
		r = poll(&pfd, 1, ms);
	while (r < 0 && errno == EINTR);
	T_ASSERTF(r >= 0, "poll: %s", strerror(errno));
	if (r == 1)
		T_ASSERTF(pfd.revents & POLLIN, "revents 0x%x", pfd.revents);
	return r;
}

struct ev {
	struct tv_pair p;
	struct tv_buf lb, rb;
};

static void ev_open(struct ev *e)
{
	struct tv_opts o = tv_opts_default();

	o.channel = 1;
	tv_pair_open(&e->p, &o);
	tv_buf_alloc(&e->lb, e->p.a.pd, 4096, TV_ACCESS_ALL);
	tv_buf_alloc(&e->rb, e->p.b.pd, 4096, TV_ACCESS_ALL);
}

static void ev_close(struct ev *e)
{
	tv_buf_free(&e->lb);
	tv_buf_free(&e->rb);
	tv_pair_close(&e->p);
}

static void ev_write(struct ev *e, uint64_t id)
{
	T_EQ_INT(tv_post1(e->p.a.qp, IBV_WR_RDMA_WRITE, id, &e->lb, 0, 64,
			  (uintptr_t)e->rb.p, e->rb.mr->rkey, 0, IBV_SEND_SIGNALED), 0);
}

/* Reads one event from ch and checks it is for cq. */
static void expect_event(struct ibv_comp_channel *ch, struct ibv_cq *cq)
{
	struct ibv_cq *ecq = NULL;
	void *ectx = NULL;

	T_EQ_INT(ibv_get_cq_event(ch, &ecq, &ectx), 0);
	T_EQ_PTR(ecq, cq);
	T_EQ_PTR(ectx, cq->cq_context);
	ibv_ack_cq_events(ecq, 1);
}

T_CASE(channel_fd_readable_after_completion)
{
	struct ev e;
	struct ibv_comp_channel *ch;

	ev_open(&e);
	ch = e.p.a.ch;
	T_GE_INT(ch->fd, 0);
	T_EQ_PTR(ch->context, e.p.a.ctx);
	T_EQ_PTR(e.p.a.scq->channel, ch);
	T_EQ_INT(fd_readable(ch->fd, 0), 0);
	T_EQ_INT(ibv_req_notify_cq(e.p.a.scq, 0), 0);
	T_EQ_INT(fd_readable(ch->fd, 50), 0);
	ev_write(&e, 1);
	T_EQ_INT(fd_readable(ch->fd, 10000), 1);
	expect_event(ch, e.p.a.scq);
	tv_expect_wc(e.p.a.scq, e.p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	/* The event was consumed: the fd is quiet again. */
	T_EQ_INT(fd_readable(ch->fd, 50), 0);
	/* Destroy after every event was acked. */
	ev_close(&e);
}

T_CASE(no_event_without_arming)
{
	struct ev e;

	ev_open(&e);
	ev_write(&e, 1);
	tv_expect_wc(e.p.a.scq, e.p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	T_EQ_INT(fd_readable(e.p.a.ch->fd, 200), 0);
}

T_CASE(arming_is_one_shot)
{
	struct ev e;
	int fd;

	ev_open(&e);
	fd = e.p.a.ch->fd;
	T_EQ_INT(ibv_req_notify_cq(e.p.a.scq, 0), 0);
	ev_write(&e, 1);
	T_EQ_INT(fd_readable(fd, 10000), 1);
	expect_event(e.p.a.ch, e.p.a.scq);
	tv_expect_wc(e.p.a.scq, e.p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	/* Not re-armed: the next completion makes no event. */
	ev_write(&e, 2);
	tv_expect_wc(e.p.a.scq, e.p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	T_EQ_INT(fd_readable(fd, 200), 0);
	/* Re-armed: it does. */
	T_EQ_INT(ibv_req_notify_cq(e.p.a.scq, 0), 0);
	ev_write(&e, 3);
	T_EQ_INT(fd_readable(fd, 10000), 1);
	expect_event(e.p.a.ch, e.p.a.scq);
	tv_expect_wc(e.p.a.scq, e.p.a.qp, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
}

T_CASE(channel_epoll)
{
	struct ev e;
	struct epoll_event in, out;
	int ep;

	ev_open(&e);
	ep = epoll_create1(0);
	T_GE_INT(ep, 0);
	memset(&in, 0, sizeof(in));
	in.events = EPOLLIN;
	in.data.u64 = 0xfeed;
	T_EQ_INT(epoll_ctl(ep, EPOLL_CTL_ADD, e.p.a.ch->fd, &in), 0);
	T_EQ_INT(epoll_wait(ep, &out, 1, 50), 0);
	T_EQ_INT(ibv_req_notify_cq(e.p.a.scq, 0), 0);
	ev_write(&e, 1);
	T_EQ_INT(epoll_wait(ep, &out, 1, 10000), 1);
	T_EQ_U64(out.data.u64, 0xfeed);
	T_ASSERT(out.events & EPOLLIN);
	expect_event(e.p.a.ch, e.p.a.scq);
	tv_expect_wc(e.p.a.scq, e.p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	T_EQ_INT(epoll_wait(ep, &out, 1, 50), 0);
	close(ep);
}

T_CASE(error_completion_makes_event)
{
	struct ev e;

	ev_open(&e);
	T_EQ_INT(ibv_req_notify_cq(e.p.a.scq, 0), 0);
	T_EQ_INT(tv_post1(e.p.a.qp, IBV_WR_RDMA_WRITE, 1, &e.lb, 0, 64, (uintptr_t)e.rb.p,
			  e.rb.mr->rkey ^ 0x00a5a500u, 0, IBV_SEND_SIGNALED), 0);
	T_EQ_INT(fd_readable(e.p.a.ch->fd, 10000), 1);
	expect_event(e.p.a.ch, e.p.a.scq);
	tv_expect_wc(e.p.a.scq, e.p.a.qp, 1, IBV_WC_REM_ACCESS_ERR, -1);
}

T_CASE(solicited_only_arming)
{
	struct ev e;
	struct ibv_comp_channel *ch;
	struct ibv_wc wc;

	ev_open(&e);
	ch = e.p.b.ch;
	for (int i = 0; i < 3; i++)
		T_EQ_INT(tv_post_recv1(e.p.b.qp, 10 + (uint64_t)i, &e.rb, 1024 * (size_t)i, 1024), 0);
	T_EQ_INT(ibv_req_notify_cq(e.p.b.rcq, 1), 0);
	/* An unsolicited SEND completes without an event. */
	T_EQ_INT(tv_post1(e.p.a.qp, IBV_WR_SEND, 1, &e.lb, 0, 32, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(e.p.a.scq, e.p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	T_EQ_INT(fd_readable(ch->fd, 300), 0);
	wc = tv_expect_wc(e.p.b.rcq, e.p.b.qp, 10, IBV_WC_SUCCESS, IBV_WC_RECV);
	T_EQ_INT(wc.byte_len, 32);
	T_EQ_INT(fd_readable(ch->fd, 100), 0);
	/* A solicited one does. */
	T_EQ_INT(tv_post1(e.p.a.qp, IBV_WR_SEND_WITH_IMM, 2, &e.lb, 0, 32, 0, 0, 0x77,
			  IBV_SEND_SIGNALED | IBV_SEND_SOLICITED), 0);
	T_EQ_INT(fd_readable(ch->fd, 10000), 1);
	expect_event(ch, e.p.b.rcq);
	wc = tv_expect_wc(e.p.b.rcq, e.p.b.qp, 11, IBV_WC_SUCCESS, IBV_WC_RECV);
	T_EQ_INT(ntohl(wc.imm_data), 0x77);
	tv_expect_wc(e.p.a.scq, e.p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_SEND);
}

/* Arming for all completions also fires on a solicited SEND; arming
 * solicited-only fires on a solicited RDMA_WRITE_WITH_IMM. */
T_CASE(solicited_write_with_imm)
{
	struct ev e;
	struct ibv_comp_channel *ch;
	struct ibv_wc wc;

	ev_open(&e);
	ch = e.p.b.ch;
	T_EQ_INT(tv_post_recv1(e.p.b.qp, 10, &e.rb, 2048, 64), 0);
	T_EQ_INT(ibv_req_notify_cq(e.p.b.rcq, 1), 0);
	T_EQ_INT(tv_post1(e.p.a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 1, &e.lb, 0, 100,
			  (uintptr_t)e.rb.p, e.rb.mr->rkey, 0x1234,
			  IBV_SEND_SIGNALED | IBV_SEND_SOLICITED), 0);
	T_EQ_INT(fd_readable(ch->fd, 10000), 1);
	expect_event(ch, e.p.b.rcq);
	wc = tv_expect_wc(e.p.b.rcq, e.p.b.qp, 10, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	T_EQ_INT(ntohl(wc.imm_data), 0x1234);
	T_EQ_INT(wc.byte_len, 100);
}

T_CASE(nonblocking_channel_eagain)
{
	struct ev e;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq = NULL;
	void *ctx = NULL;
	int fl;

	ev_open(&e);
	ch = e.p.a.ch;
	fl = fcntl(ch->fd, F_GETFL);
	T_GE_INT(fl, 0);
	T_EQ_INT(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK), 0);
	errno = 0;
	T_EQ_INT(ibv_get_cq_event(ch, &cq, &ctx), -1);
	T_EQ_INT(errno, EAGAIN);
	T_EQ_INT(ibv_req_notify_cq(e.p.a.scq, 0), 0);
	errno = 0;
	T_EQ_INT(ibv_get_cq_event(ch, &cq, &ctx), -1);
	T_EQ_INT(errno, EAGAIN);
	ev_write(&e, 1);
	T_EQ_INT(fd_readable(ch->fd, 10000), 1);
	expect_event(ch, e.p.a.scq);
	errno = 0;
	T_EQ_INT(ibv_get_cq_event(ch, &cq, &ctx), -1);
	T_EQ_INT(errno, EAGAIN);
	tv_expect_wc(e.p.a.scq, e.p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
}

/* Send and receive CQ on one channel: each event names its CQ. */
T_CASE(two_cqs_one_channel)
{
	struct ev e;
	struct ibv_comp_channel *ch;

	ev_open(&e);
	ch = e.p.a.ch;
	T_EQ_PTR(e.p.a.rcq->channel, ch);
	T_EQ_INT(tv_post_recv1(e.p.a.qp, 5, &e.lb, 2048, 1024), 0);
	T_EQ_INT(ibv_req_notify_cq(e.p.a.rcq, 0), 0);
	T_EQ_INT(ibv_req_notify_cq(e.p.a.scq, 0), 0);
	/* b sends to a: only a's receive CQ completes. */
	T_EQ_INT(tv_post1(e.p.b.qp, IBV_WR_SEND, 6, &e.rb, 0, 16, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(e.p.b.scq, e.p.b.qp, 6, IBV_WC_SUCCESS, IBV_WC_SEND);
	T_EQ_INT(fd_readable(ch->fd, 10000), 1);
	expect_event(ch, e.p.a.rcq);
	T_EQ_INT(fd_readable(ch->fd, 100), 0);
	tv_expect_wc(e.p.a.rcq, e.p.a.qp, 5, IBV_WC_SUCCESS, IBV_WC_RECV);
	/* a writes: its send CQ (still armed) fires. */
	ev_write(&e, 7);
	T_EQ_INT(fd_readable(ch->fd, 10000), 1);
	expect_event(ch, e.p.a.scq);
	tv_expect_wc(e.p.a.scq, e.p.a.qp, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
}

struct waiter {
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	void *ctx;
	int rc;
	volatile int done;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->rc = ibv_get_cq_event(w->ch, &w->cq, &w->ctx);
	__atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

T_CASE(blocking_get_cq_event)
{
	struct ev e;
	struct waiter w;
	pthread_t th;
	double t0;

	ev_open(&e);
	memset(&w, 0, sizeof(w));
	w.ch = e.p.a.ch;
	T_EQ_INT(ibv_req_notify_cq(e.p.a.scq, 0), 0);
	T_EQ_INT(pthread_create(&th, NULL, wait_thread, &w), 0);
	tv_msleep(100);
	T_EQ_INT(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST), 0);
	ev_write(&e, 1);
	t0 = tv_now();
	while (!__atomic_load_n(&w.done, __ATOMIC_SEQ_CST)) {
		T_ASSERTF(tv_now() - t0 < 10, "ibv_get_cq_event still blocked after 10 s");
		tv_msleep(1);
	}
	T_EQ_INT(pthread_join(th, NULL), 0);
	T_EQ_INT(w.rc, 0);
	T_EQ_PTR(w.cq, e.p.a.scq);
	T_EQ_PTR(w.ctx, e.p.a.scq->cq_context);
	ibv_ack_cq_events(w.cq, 1);
	tv_expect_wc(e.p.a.scq, e.p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
}

/* Many events acked at once with one ibv_ack_cq_events call. */
T_CASE(ack_several_events_at_once)
{
	struct ev e;

	ev_open(&e);
	for (int i = 0; i < 5; i++) {
		struct ibv_cq *cq = NULL;
		void *ctx = NULL;

		T_EQ_INT(ibv_req_notify_cq(e.p.a.scq, 0), 0);
		ev_write(&e, (uint64_t)i);
		T_EQ_INT(fd_readable(e.p.a.ch->fd, 10000), 1);
		T_EQ_INT(ibv_get_cq_event(e.p.a.ch, &cq, &ctx), 0);
		T_EQ_PTR(cq, e.p.a.scq);
		tv_expect_wc(e.p.a.scq, e.p.a.qp, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	}
	ibv_ack_cq_events(e.p.a.scq, 5);
	ev_close(&e);
}

T_CASE(destroy_channel_with_cq_fails)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq;

	T_ASSERT(ch != NULL);
	cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	T_ASSERT(cq != NULL);
	T_NE_INT(ibv_destroy_comp_channel(ch), 0);
	T_EQ_INT(ibv_destroy_cq(cq), 0);
	T_EQ_INT(ibv_destroy_comp_channel(ch), 0);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(async_fd_nonblocking_eagain)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_async_event ae;
	int fl;

	T_GE_INT(ctx->async_fd, 0);
	fl = fcntl(ctx->async_fd, F_GETFL);
	T_GE_INT(fl, 0);
	T_EQ_INT(fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK), 0);
	T_EQ_INT(fd_readable(ctx->async_fd, 50), 0);
	errno = 0;
	T_EQ_INT(ibv_get_async_event(ctx, &ae), -1);
	T_EQ_INT(errno, EAGAIN);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

/* An RC QP on an SRQ, moved to the error state: Last WQE Reached is
 * queued for it (IBA 11.6.3.1). */
struct lastwqe {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
};

static void lastwqe_open(struct lastwqe *l)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_send_sge = 1 } };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1 };
	int fl;

	l->ctx = tv_open_device();
	l->pd = ibv_alloc_pd(l->ctx);
	T_ASSERT(l->pd != NULL);
	l->cq = ibv_create_cq(l->ctx, 16, NULL, NULL, 0);
	T_ASSERT(l->cq != NULL);
	l->srq = ibv_create_srq(l->pd, &sa);
	T_ASSERT(l->srq != NULL);
	ia.send_cq = ia.recv_cq = l->cq;
	ia.srq = l->srq;
	l->qp = ibv_create_qp(l->pd, &ia);
	T_ASSERT(l->qp != NULL);
	T_EQ_INT(ibv_modify_qp(l->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					       IBV_QP_ACCESS_FLAGS), 0);
	a.qp_state = IBV_QPS_ERR;
	T_EQ_INT(ibv_modify_qp(l->qp, &a, IBV_QP_STATE), 0);
	fl = fcntl(l->ctx->async_fd, F_GETFL);
	T_EQ_INT(fcntl(l->ctx->async_fd, F_SETFL, fl | O_NONBLOCK), 0);
	T_EQ_INT(fd_readable(l->ctx->async_fd, 5000), 1);
}

static void lastwqe_close(struct lastwqe *l)
{
	if (l->qp)
		T_EQ_INT(ibv_destroy_qp(l->qp), 0);
	T_EQ_INT(ibv_destroy_srq(l->srq), 0);
	T_EQ_INT(ibv_destroy_cq(l->cq), 0);
	T_EQ_INT(ibv_dealloc_pd(l->pd), 0);
	T_EQ_INT(ibv_close_device(l->ctx), 0);
}

/* The event is there for a QP that lives (the control of the next case). */
T_CASE(last_wqe_event_names_its_qp)
{
	struct lastwqe l;
	struct ibv_async_event ae;

	lastwqe_open(&l);
	T_EQ_INT(ibv_get_async_event(l.ctx, &ae), 0);
	T_EQ_INT(ae.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
	T_EQ_PTR(ae.element.qp, l.qp);
	ibv_ack_async_event(&ae);
	lastwqe_close(&l);
}

/* A destroyed QP's queued events are dropped with it, as the kernel does
 * (ib_uverbs_release_uevent): UCX destroys its QPs right after moving them
 * to the error state, and its async thread then read the freed QP out of
 * the Last WQE Reached event (SIGSEGV in uct_ib_handle_async_event, CI of
 * 2026-12-08). The event's eventfd token stays; ibv_get_async_event
 * skips it and, on a non-blocking fd, says EAGAIN. */
T_CASE(destroyed_qp_events_dropped)
{
	struct lastwqe l;
	struct ibv_async_event ae;

	lastwqe_open(&l);
	T_EQ_INT(ibv_destroy_qp(l.qp), 0);
	l.qp = NULL;
	errno = 0;
	T_EQ_INT(ibv_get_async_event(l.ctx, &ae), -1);
	T_EQ_INT(errno, EAGAIN);
	lastwqe_close(&l);
}

struct acker {
	struct ibv_async_event ev;
	atomic_int acked;
};

static void *ack_later(void *arg)
{
	struct acker *k = arg;

	usleep(200 * 1000);
	atomic_store(&k->acked, 1);
	ibv_ack_async_event(&k->ev);
	return NULL;
}

/* ibv_get_async_event(3): destroying an object waits until its events
 * that were handed out are acknowledged. */
T_CASE(destroy_qp_waits_for_async_ack)
{
	struct lastwqe l;
	struct acker k = { .acked = 0 };
	pthread_t th;

	lastwqe_open(&l);
	T_EQ_INT(ibv_get_async_event(l.ctx, &k.ev), 0);
	T_EQ_PTR(k.ev.element.qp, l.qp);
	T_EQ_INT(pthread_create(&th, NULL, ack_later, &k), 0);
	T_EQ_INT(ibv_destroy_qp(l.qp), 0);
	l.qp = NULL;
	T_EQ_INT(atomic_load(&k.acked), 1); /* not before the acknowledgement */
	T_EQ_INT(pthread_join(th, NULL), 0);
	lastwqe_close(&l);
}

/* Any number of events may be out: with 80 QPs' Last WQE Reached events
 * handed out and none acknowledged, destroying the QP of the last one
 * still waits for its acknowledgement (the first version tracked 64). */
T_CASE(destroy_waits_with_many_events_out)
{
	enum { NQ = 80 };
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_send_sge = 1 } };
	struct ibv_context *ctx = tv_open_device();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_srq *srq;
	struct ibv_qp *qp[NQ];
	static struct ibv_async_event ev[NQ];
	struct acker k = { .acked = 0 };
	pthread_t th;
	int last = -1;

	T_ASSERT(pd != NULL && cq != NULL);
	srq = ibv_create_srq(pd, &sa);
	T_ASSERT(srq != NULL);
	ia.send_cq = ia.recv_cq = cq;
	ia.srq = srq;
	for (int i = 0; i < NQ; i++) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1 };

		qp[i] = ibv_create_qp(pd, &ia);
		T_ASSERT(qp[i] != NULL);
		T_EQ_INT(ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
							  IBV_QP_ACCESS_FLAGS), 0);
		a.qp_state = IBV_QPS_ERR;
		T_EQ_INT(ibv_modify_qp(qp[i], &a, IBV_QP_STATE), 0);
	}
	for (int i = 0; i < NQ; i++) {
		T_EQ_INT(ibv_get_async_event(ctx, &ev[i]), 0);
		T_EQ_INT(ev[i].event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
	}
	/* the QP whose event was handed out last, beyond the 64th */
	for (int j = 0; j < NQ; j++)
		if (qp[j] == ev[NQ - 1].element.qp)
			last = j;
	T_ASSERT(last >= 0);
	k.ev = ev[NQ - 1];
	T_EQ_INT(pthread_create(&th, NULL, ack_later, &k), 0);
	T_EQ_INT(ibv_destroy_qp(qp[last]), 0);
	T_EQ_INT(atomic_load(&k.acked), 1); /* not before the acknowledgement */
	T_EQ_INT(pthread_join(th, NULL), 0);
	qp[last] = NULL;
	for (int i = 0; i < NQ - 1; i++)
		ibv_ack_async_event(&ev[i]);
	for (int i = 0; i < NQ; i++)
		if (qp[i])
			T_EQ_INT(ibv_destroy_qp(qp[i]), 0);
	T_EQ_INT(ibv_destroy_srq(srq), 0);
	T_EQ_INT(ibv_destroy_cq(cq), 0);
	T_EQ_INT(ibv_dealloc_pd(pd), 0);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

/* An event loop under application progress (perftest -e, iperf-like
 * programs): arm the CQ, drain it with ibv_poll_cq, then sleep on the
 * channel. The drain is a poll of an armed CQ, and it used to count as
 * polling: the engine thread parked, and the packets that the program
 * then slept for waited in the socket until the park ran out (with the
 * 1 ms default, ib_send_bw -e 64 KiB fell from 20 to 6 Gb/s). With the
 * park at its longest (1 s) each SEND's event must come within 200 ms:
 * before the fix the fourth waited about 500 ms. */
T_CASE(event_loop_drain_does_not_park_engine)
{
	struct tv_opts o = tv_opts_default();
	struct tv_pair p;
	struct tv_buf a, b;
	enum { N = 20, MSG = 256 };

	setenv("UROCE_PROGRESS", "app", 1);
	setenv("UROCE_PARK_US", "1000000", 1);
	o.channel = 1;
	o.separate_ctx = 1;
	tv_pair_open(&p, &o);
	tv_buf_alloc(&a, p.a.pd, MSG, TV_ACCESS_ALL);
	tv_buf_alloc(&b, p.b.pd, MSG, TV_ACCESS_ALL);
	for (uint64_t i = 0; i < N; i++) {
		struct ibv_wc wc;

		T_EQ_INT(tv_post_recv1(p.b.qp, i, &b, 0, MSG), 0);
		T_EQ_INT(ibv_req_notify_cq(p.b.rcq, 0), 0);
		T_EQ_INT(ibv_poll_cq(p.b.rcq, 1, &wc), 0); /* the drain: empty */
		tv_fill(a.p, MSG, 60 + (unsigned)i);
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, i, &a, 0, MSG, 0, 0, 0, IBV_SEND_SIGNALED), 0);
		T_ASSERTF(fd_readable(p.b.ch->fd, 200) == 1,
			  "SEND %" PRIu64 ": no completion event within 200 ms", i);
		expect_event(p.b.ch, p.b.rcq);
		T_EQ_INT(ibv_poll_cq(p.b.rcq, 1, &wc), 1);
		T_EQ_U64(wc.wr_id, i);
		T_EQ_INT(wc.status, IBV_WC_SUCCESS);
		T_PATTERN(b.p, MSG, 60 + (unsigned)i, 0);
		tv_expect_wc_to(p.a.scq, p.a.qp, i, IBV_WC_SUCCESS, IBV_WC_SEND, 10);
	}
	tv_buf_free(&a);
	tv_buf_free(&b);
	tv_pair_close(&p);
	unsetenv("UROCE_PARK_US");
	unsetenv("UROCE_PROGRESS");
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
