/* The engine thread: doorbells, commands, timers, packet batching.
 *
 * Loop: run queued commands, drain doorbells, receive (epoll over the
 * port sockets, the QPs' flow sockets, the mailbox and the doorbell
 * eventfd; every packet goes to the QP its BTH DestQP names, or to the
 * engine owning that QPN), then let every active QP send
 * (requester, READ responses, ACKs), flush the tx batch. While there is
 * work, or for UROCE_POLL_US after the last work, the loop spins with a
 * zero epoll timeout; then it sleeps until the next timer, a packet or a
 * doorbell, so an idle process uses no CPU. */
#include "auto.h"
#include "engine.h"
#include "fault.h"
#include "pcap.h"
#include "trace.h"

#include <errno.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define TX_BATCH 64
#define RX_BATCH 16
#define RX_BUF 65536              /* a GRO buffer */
#define PKT_MAX 9216
#define GSO_MAX_BYTES 65000
#define GSO_MAX_SEGS 64
#define MAX_EVENTS 1024          /* per loop turn, which also walks every active QP */
#define TX_IOV (UROCE_MAX_SGE + 2)
#define MAX_PORTS 8               /* local addresses an engine receives on */
#define QTAB_SIZE 65536           /* QPN table, by the QPN's low 16 bits */
#define MAX_RELEARNS 8            /* times a flow socket follows a new peer port */
/* Flow sockets a context opens at most (UROCE_FLOW_SOCKETS), shared
 * evenly by its engine threads: the kernel finds a datagram's socket by
 * walking every socket bound to (ip, 4791) (Linux before 6.13 has no
 * 4-tuple hash for UDP), so thousands of them would cost more than the
 * forwarding they save. 128: 32 per engine with 4 engines (the cap that
 * held with 16,000 QPs in 4 processes), and on 2 cores (one engine) every
 * QP of ib_write_bw -q 128 gets one: -q 64 at 64 KiB went from 14.2-20.5
 * Gb/s with 32 to 21.0-22.5 (docs/performance.md). */
#define FLOW_SOCKETS_DEFAULT 128

/* A packet held back by fault injection (reorder, delay). */
struct held_pkt {
	struct uroce_qp *qp;
	int dir;                     /* FAULT_RX or FAULT_TX */
	uint64_t due;                /* release at this time at the latest */
	uint64_t after_seq;          /* or once this many packets went by */
	uint32_t len;
	uint8_t *buf;
	int fd;
	struct sockaddr_in dst;
	struct uroce_rx_meta m;      /* rx: where it came from */
};

struct eng_cmd {
	void (*fn)(void *);
	void *arg;
	int done;
	struct eng_cmd *next;
};

struct uroce_engine {
	struct uroce_ctx *ctx;
	unsigned idx;                /* in ctx->engs */
	struct uroce_counters *cnt;  /* this engine's block of the stat file */
	pthread_t thr;
	int running;
	int epfd, efd;
	atomic_int sleeping;
	atomic_int stop;
	/* Progress in the application's threads (UROCE_PROGRESS=app, docs/
	 * design.md "Who runs the transport"): whoever holds run does the
	 * engine's work, the engine thread or an application thread in
	 * ibv_poll_cq/ibv_post_send that found it asleep. While the
	 * application polls, the engine thread parks on park_fd (its eventfd
	 * only), so arriving packets wake nobody: the poller reads them. */
	pthread_mutex_t run;
	int app_progress;
	int park_fd;                 /* epoll set with efd alone */
	_Atomic uint64_t app_poll_ns; /* an application thread's last turn */
	/* When the sleeping engine thread wakes by itself (UINT64_MAX: only
	 * for an event; 0: awake). A turn of an application thread may arm a
	 * timer due before that, and must then wake it: the application may
	 * never poll this engine again (it posts on one context and polls
	 * another), and a lost last packet would wait forever. */
	_Atomic uint64_t sleep_until;
	uint64_t park_ns, park_max_ns;
	uint64_t app_turn_id;    /* the application thread's turn running, 0: none */
	/* The socket that last delivered packets: a polling application's
	 * turn reads it directly, and asks epoll about every source only
	 * every HOT_TURNS-th turn (see app_turn). */
	struct uroce_rxsrc *hot;
	unsigned hot_turns;
	int hot_alone;               /* epoll last found at most one source ready */
	uint64_t app_turns;
	uint64_t last_dump;          /* UROCE_LOG=debug: the last QP dump */
	atomic_uint full_polls;      /* polls that found completions (no turn) */
	atomic_uint deferred;        /* posts left to the poller's next turn (doorbell) */
	unsigned post_batch;         /* at most this many in a row (UROCE_POST_BATCH) */
	_Atomic uint64_t last_post_ns; /* the last doorbell's time: a burst of posts? */
	_Atomic(struct uroce_qp *) db_head;

	pthread_mutex_t cmd_lock;
	pthread_cond_t cmd_cond;
	struct eng_cmd *cmd_head, **cmd_tail;
	atomic_int cmd_pending;

	struct uroce_qp *active;     /* doubly linked list */
	struct uroce_qp *all;        /* every QP, for diagnostics */
	uint64_t now;
	uint64_t spin_ns;
	uint64_t reply_hold_ns; /* UROCE_REPLY_HOLD_US */
	int gpu_ahead;          /* UROCE_GPU_AHEAD */
	int gpu_rxbufs;         /* UROCE_GPU_RXBUFS */

	uint64_t queued;             /* datagrams handed to uroce_eng_send */
	/* This turn left received datagrams unread (a socket had more than a
	 * turn's share), and since when that has been so every turn. */
	int rx_backlog;
	uint64_t backlog_since;
	/* The longest recent turn (see turn_lag), and when it ended. */
	uint64_t lag_ns, lag_at;
	uint64_t stall_ns;           /* UROCE_STALL_US (fault injection) */

	/* tx batch: datagrams for one socket */
	int tx_fd;
	unsigned ntx;
	struct mmsghdr tx_msg[TX_BATCH];
	struct iovec tx_iov[TX_BATCH][TX_IOV];
	uint8_t tx_hdr[TX_BATCH][MAX_HDR_LEN];
	uint8_t tx_trl[TX_BATCH][8];
	struct sockaddr_in tx_dst[TX_BATCH];
	struct uroce_qp *cur_tx_qp[TX_BATCH];
	uint32_t tx_len[TX_BATCH];
	uint8_t tx_pad[TX_BATCH];    /* where the ICRC starts in tx_trl */
	/* GSO: runs of the batch glued into one datagram each */
	struct mmsghdr gso_msg[TX_BATCH];
	struct iovec gso_iov[TX_BATCH * TX_IOV];
	uint8_t gso_ctl[TX_BATCH][CMSG_SPACE(sizeof(uint16_t))];
	unsigned gso_cnt[TX_BATCH];
	uint8_t bounce[4096];        /* uroce_eng_bounce */

	/* fault injection */
	struct uroce_fault fault;
	struct held_pkt *held;
	uint32_t nheld, held_cap;
	uint64_t pkt_seq;            /* packets seen by the fault injector */
	uint64_t flt_last_ns;        /* when the injector last held a packet */
	uint64_t flt_gap_ns;         /* mean gap between those (EWMA, 1/8) */

	/* rx */
	struct mmsghdr rx_msg[RX_BATCH];
	struct iovec rx_iov[RX_BATCH];
	uint8_t rx_ctl[RX_BATCH][3 * CMSG_SPACE(sizeof(int))]; /* GRO, TOS, RXQ_OVFL */
	struct sockaddr_in rx_from[RX_BATCH];
	int rx_ce;                   /* the packet being handled was CE-marked */
	/* CE marking where the queue is (UROCE_ECN_QUEUE_KB=KMIN[,KMAX[,PMAX]]):
	 * ECT packets are marked when the receive socket's backlog is over
	 * KMIN, with a probability rising to PMAX at KMAX (RED-ECN as in the
	 * DCQCN paper; KMAX = KMIN: a step). 0: off. */
	uint64_t ecnq_min, ecnq_max; /* bytes */
	double ecnq_pmax;
	double rx_qmark;             /* mark probability for the batch being handled */
	uint64_t ecnq_rng;
	/* UROCE_RX_RATE_GBPS: the engine reads its receive sockets at most
	 * at this rate, a receive port of that speed whose switch buffer is
	 * the socket's (UROCE_RCVBUF_KB): an incast bottleneck for make
	 * bench-incast. A token bucket; a source that ran dry leaves the
	 * epoll set until the bucket has refilled. */
	double rxr_rate;             /* bytes per ns; 0: off */
	int64_t rxr_tokens;          /* bytes, negative: debt */
	uint64_t rxr_at;             /* last refill, ns */
	uint64_t rxr_resume;         /* paused sources return then; 0: none paused */
	struct uroce_rxsrc *rxr_paused[64];
	int rxr_npaused;
	struct uroce_rx_meta rxm;    /* the datagram being handled */
	uint8_t *rx_buf;

	/* receive demultiplexing (docs/design.md) */
	const struct uroce_backend *be;
	unsigned slot;               /* our QPNs' top 8 bits; names the mailbox */
	struct uroce_rxsrc mailbox;
	struct uroce_rxsrc port[MAX_PORTS];
	int nports;
	struct uroce_qp **qtab;      /* QPs in RTR or later, by QPN & 0xffff */
	struct uroce_qp *touched;    /* QPs that got packets in this batch */
	uint64_t others_at;          /* when others_present was last asked */
	int others;
	uid_t uid;
	int nflows, max_flows;       /* flow sockets open; the context's cap (see flow_cap) */
	struct uroce_rxsrc *inbox;   /* connections other engines opened to us */
	/* packets on their way to other engines, batched per slot */
	struct fwd_out {
		int fd;                  /* connection to its mailbox, -1: none */
		uint32_t len, npkts;
		uint8_t *buf;            /* UROCE_FWD_MSG_MAX bytes */
	} out[UROCE_MAX_SLOTS];
	uint16_t out_dirty[UROCE_MAX_SLOTS];
	unsigned ndirty;

	/* multicast groups joined for attached UD QPs: a socket each */
	struct mcast_grp {
		uint32_t group;          /* network order */
		struct uroce_rxsrc src;
		struct uroce_qp *qps[UROCE_MAX_MCAST_QP_ATTACH];
		int nqps;
	} mcast[UROCE_MAX_MCAST_GRP];
	int nmcast;
};

uint64_t uroce_eng_now(struct uroce_engine *e)
{
	return e->now;
}

/* The engine whose turn this thread runs (it holds that engine's run lock). */
static __thread struct uroce_engine *turn_of;
/* The engine a uroce_eng_call function runs on. */
static __thread struct uroce_engine *call_of;

static int eng_is_self(struct uroce_engine *e)
{
	return !e->running || turn_of == e || pthread_equal(pthread_self(), e->thr);
}

struct uroce_counters *uroce_eng_counters(struct uroce_engine *e)
{
	return e->cnt;
}

struct uroce_engine *uroce_eng_cur(void)
{
	return call_of ? call_of : turn_of;
}

static void wake(struct uroce_engine *e)
{
	uint64_t one = 1;

	if (write(e->efd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the engine is awake anyway */
	}
}

static int app_turn(struct uroce_engine *e, int rx);

static struct timespec ts_of_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	return ts;
}

/* Whether an application thread polled within park_max_ns before NOW. The
 * poll may be later than NOW (read when a turn began): that is the
 * freshest, not the oldest (unsigned, it once looked 584 years old, and
 * an engine woken per packet stayed so while the application polled
 * hardest). */
static int app_polls_at(const struct uroce_engine *e, uint64_t now)
{
	uint64_t polled = atomic_load_explicit(&e->app_poll_ns, memory_order_relaxed);

	return polled && (int64_t)(now - polled) < (int64_t)e->park_max_ns;
}

int uroce_eng_doorbell(struct uroce_qp *qp, int behind)
{
	struct uroce_engine *e = qp->eng;

	if (!atomic_exchange(&qp->db_queued, 1)) {
		struct uroce_qp *old = atomic_load(&e->db_head);

		do {
			qp->db_next = old;
		} while (!atomic_compare_exchange_weak(&e->db_head, &old, qp));
	}
	/* A one-packet post in a burst (another post came since the last
	 * poll) behind outstanding work of its QP, while an application thread polls, is
	 * left to that poller's next turn (up to UROCE_POST_BATCH in a row):
	 * the turn then sends them all in one sendmmsg, same-sized packets
	 * glued by UDP GSO, instead of a system call per post (perftest posts
	 * one WR per ibv_post_send: ib_write_bw -s 8 on 2 cores made 0.12
	 * million messages a second, docs/performance.md). The poll takes a
	 * turn whenever doorbells wait (uroce_eng_polled), and if nobody polls
	 * again the parked engine thread takes them within UROCE_PARK_US.
	 * The first post after a poll goes at once: a ping-pong's or a
	 * collective step's one message never waits (deferring those made a
	 * 2-rank MPI_Allreduce of 8 B 60% slower). */
	if (e->app_progress && e->post_batch) {
		uint64_t now = uroce_now_ns();
		uint64_t prev = atomic_exchange_explicit(&e->last_post_ns, now, memory_order_relaxed);

		if (behind && app_polls_at(e, now) &&
		    prev > atomic_load_explicit(&e->app_poll_ns, memory_order_relaxed) &&
		    atomic_fetch_add_explicit(&e->deferred, 1, memory_order_relaxed) < e->post_batch) {
			/* posting threads may race: the one counter not under the turn */
			__atomic_fetch_add(&e->cnt->posts_deferred, 1, __ATOMIC_RELAXED);
			return 3;
		}
	}
	if (app_turn(e, 0))
		return 2; /* sent from this thread, no system call to wake anyone */
	/* Someone holds the turn: an application thread, or the engine
	 * thread about to park (it holds the turn until it sleeps). If an
	 * application thread polls, its next turn takes this doorbell (the
	 * engine thread parked meanwhile runs it itself after at most a
	 * park when no turn came): waking the engine thread made it a
	 * second transport thread beside the poller (ib_write_bw -q 64 on 2
	 * cores: 2,600-4,000 such wakeups a second, docs/performance.md). */
	if (e->app_progress && app_polls_at(e, uroce_now_ns()))
		return 0;
	if (atomic_load(&e->sleeping)) {
		wake(e);
		return 1;
	}
	return 0;
}

static void run_call(struct uroce_engine *e, void (*fn)(void *), void *arg)
{
	struct uroce_engine *was = call_of;

	call_of = e;
	fn(arg);
	call_of = was;
}

static void call_on(struct uroce_engine *e, void (*fn)(void *), void *arg)
{
	struct eng_cmd c = { .fn = fn, .arg = arg };

	if (eng_is_self(e)) {
		run_call(e, fn, arg);
		return;
	}
	pthread_mutex_lock(&e->cmd_lock);
	*e->cmd_tail = &c;
	e->cmd_tail = &c.next;
	atomic_store(&e->cmd_pending, 1);
	pthread_mutex_unlock(&e->cmd_lock);
	wake(e);
	pthread_mutex_lock(&e->cmd_lock);
	while (!c.done)
		pthread_cond_wait(&e->cmd_cond, &e->cmd_lock);
	pthread_mutex_unlock(&e->cmd_lock);
}

void uroce_eng_call(struct uroce_ctx *ctx, void (*fn)(void *), void *arg)
{
	for (int i = 0; i < UROCE_MAX_ENGINES; i++) {
		struct uroce_engine *e = atomic_load(&ctx->engs[i]);

		if (e)
			call_on(e, fn, arg);
	}
}

void uroce_eng_call_qp(struct uroce_qp *qp, void (*fn)(void *), void *arg)
{
	call_on(qp->eng, fn, arg);
}

/* uroce_eng_call_excl: engine k runs a command that hands the chain on to
 * the next engine and waits there; the last one runs fn. Every caller
 * goes through the engines in the same order, so two chains never wait
 * on each other. */
struct excl_chain {
	struct uroce_ctx *ctx;
	int next;
	void (*fn)(void *);
	void *arg;
};

static void excl_step(void *arg)
{
	struct excl_chain *c = arg;

	while (c->next < UROCE_MAX_ENGINES) {
		struct uroce_engine *e = atomic_load(&c->ctx->engs[c->next++]);

		if (e) {
			call_on(e, excl_step, c);
			return;
		}
	}
	c->fn(c->arg);
}

void uroce_eng_call_excl(struct uroce_ctx *ctx, void (*fn)(void *), void *arg)
{
	struct excl_chain c = { .ctx = ctx, .fn = fn, .arg = arg };

	excl_step(&c);
}

void uroce_eng_activate(struct uroce_engine *e, struct uroce_qp *qp)
{
	if (qp->in_active)
		return;
	qp->in_active = 1;
	qp->act_prev = NULL;
	qp->act_next = e->active;
	if (e->active)
		e->active->act_prev = qp;
	e->active = qp;
}

void uroce_eng_deactivate(struct uroce_engine *e, struct uroce_qp *qp)
{
	if (!qp->in_active)
		return;
	if (qp->act_prev)
		qp->act_prev->act_next = qp->act_next;
	else
		e->active = qp->act_next;
	if (qp->act_next)
		qp->act_next->act_prev = qp->act_prev;
	qp->in_active = 0;
	qp->act_next = qp->act_prev = NULL;
}

static void drop_held(struct uroce_engine *e, struct uroce_qp *qp);

void uroce_eng_attach(struct uroce_engine *e, struct uroce_qp *qp)
{
	qp->all_prev = NULL;
	qp->all_next = e->all;
	if (e->all)
		e->all->all_prev = qp;
	e->all = qp;
}

void uroce_eng_detach(struct uroce_engine *e, struct uroce_qp *qp)
{
	drop_held(e, qp);
	if (qp->all_prev)
		qp->all_prev->all_next = qp->all_next;
	else if (e->all == qp)
		e->all = qp->all_next;
	if (qp->all_next)
		qp->all_next->all_prev = qp->all_prev;
	qp->all_next = qp->all_prev = NULL;
}

struct uroce_qp *uroce_eng_all_qps(struct uroce_engine *e)
{
	return e->all;
}

void uroce_eng_forget_mr(struct uroce_engine *e, const struct uroce_mr *mr)
{
	for (struct uroce_qp *qp = e->all; qp; qp = qp->all_next)
		uroce_stage_forget(qp, mr);
}

/* ---- receive sources and the QPN table ---- */

static int watch(struct uroce_engine *e, struct uroce_rxsrc *src)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = src };

	return epoll_ctl(e->epfd, EPOLL_CTL_ADD, src->fd, &ev) < 0 ? errno : 0;
}

static void close_src(struct uroce_engine *e, struct uroce_rxsrc *src)
{
	for (int i = 0; i < e->rxr_npaused; i++)
		if (e->rxr_paused[i] == src)
			e->rxr_paused[i--] = e->rxr_paused[--e->rxr_npaused];
	if (e->hot == src)
		e->hot = NULL;
	if (src->fd < 0)
		return;
	epoll_ctl(e->epfd, EPOLL_CTL_DEL, src->fd, NULL);
	close(src->fd);
	src->fd = -1;
}

unsigned uroce_eng_slot(const struct uroce_engine *e)
{
	return e->slot;
}

const struct uroce_backend *uroce_eng_backend(const struct uroce_engine *e)
{
	return e->be;
}

/* The port socket of a local address, opened on first use. */
static int port_for(struct uroce_engine *e, uint32_t ip4)
{
	struct uroce_rxsrc *p;
	int fd, err;

	for (int i = 0; i < e->nports; i++)
		if (e->port[i].ip4 == ip4)
			return 0;
	if (e->nports == MAX_PORTS)
		return ENOSPC;
	fd = e->be->port_open(ip4);
	if (fd < 0)
		return -fd;
	p = &e->port[e->nports];
	p->fd = fd;
	p->kind = RXS_PORT;
	p->ip4 = ip4;
	err = watch(e, p);
	if (err) {
		close(fd);
		p->fd = -1;
		return err;
	}
	e->nports++;
	return 0;
}

/* Whether another engine shares the network namespace (asked at most once
 * a second: a probe costs up to UROCE_MAX_SLOTS system calls). */
static int others_present(struct uroce_engine *e)
{
	uint64_t now = uroce_now_ns();

	if (!e->others_at || now - e->others_at > 1000000000ull) {
		e->others = e->be->others_present(e->slot);
		e->others_at = now;
	}
	return e->others;
}

/* This engine's share of its context's flow sockets: the budget split
 * evenly, the remainder to the first engines (6 over 4: 2, 2, 1, 1). */
static int flow_cap(const struct uroce_engine *e)
{
	int n = e->ctx->max_engs > 1 ? e->ctx->max_engs : 1;

	if (e->max_flows <= 0)
		return 0;
	return e->max_flows / n + ((int)e->idx < e->max_flows % n);
}

/* Points the QP's flow socket at the peer's port (opening it if needed). */
static int flow_point(struct uroce_engine *e, struct uroce_qp *qp, uint16_t peer_sport)
{
	int fd, err;

	if (qp->flow.fd >= 0) {
		err = -e->be->flow_connect(qp->flow.fd, qp->peer_ip4, peer_sport);
		if (!err)
			qp->flow_sport = peer_sport;
		return err;
	}
	if (e->nflows >= flow_cap(e))
		return EMFILE;
	fd = e->be->flow_open(qp->src_ip4, qp->peer_ip4, peer_sport);
	if (fd < 0)
		return -fd;
	qp->flow.fd = fd;
	qp->flow.drops = 0;
	qp->flow.kind = RXS_FLOW;
	qp->flow.ip4 = qp->src_ip4;
	err = watch(e, &qp->flow);
	if (err) {
		close(fd);
		qp->flow.fd = -1;
		return err;
	}
	e->nflows++;
	qp->flow_sport = peer_sport;
	return 0;
}

int uroce_eng_bind_qp(struct uroce_engine *e, struct uroce_qp *qp)
{
	int err = port_for(e, qp->src_ip4);

	if (err)
		return err;
	e->qtab[qp->qpn & (QTAB_SIZE - 1)] = qp;
	qp->rx_on = 1;
	qp->relearns = 0;
	/* where a uroce peer sends from (its QPN's low 16 bits); a foreign
	 * peer's port shows with its first packet */
	qp->peer_sport = (uint16_t)uroce_qpn_port(qp->dest_qpn);
	/* With company in the namespace, a flow socket at once: a uroce
	 * peer's packets then go straight to us. Alone, the port socket
	 * hears everything and the QP needs no receive descriptor. */
	if (others_present(e) && qp->peer_sport >= 1024) {
		err = flow_point(e, qp, qp->peer_sport);
		if (err)
			uroce_dbg("qp 0x%x: no flow socket (%s); the mailbox still delivers",
				  qp->qpn, strerror(err));
	}
	return 0;
}

void uroce_eng_unbind_qp(struct uroce_engine *e, struct uroce_qp *qp)
{
	if (qp->rx_on && e->qtab[qp->qpn & (QTAB_SIZE - 1)] == qp)
		e->qtab[qp->qpn & (QTAB_SIZE - 1)] = NULL;
	qp->rx_on = 0;
	if (qp->flow.fd >= 0)
		e->nflows--;
	close_src(e, &qp->flow);
}

/* ---- tx ---- */

static void rx_packet(struct uroce_engine *e, struct uroce_qp *qp, const uint8_t *buf,
		      size_t len);

static void hold(struct uroce_engine *e, struct uroce_qp *qp, int dir, const uint8_t *buf,
		 uint32_t len, int fd, const struct sockaddr_in *dst)
{
	struct uroce_fault *f = &e->fault;
	struct held_pkt *h;

	if (e->nheld == e->held_cap) {
		uint32_t ncap = e->held_cap ? e->held_cap * 2 : 64;
		struct held_pkt *nh = realloc(e->held, sizeof(*nh) * ncap);

		if (!nh)
			return; /* out of memory: the packet is lost, GBN recovers */
		e->held = nh;
		e->held_cap = ncap;
	}
	h = &e->held[e->nheld];
	h->buf = malloc(len);
	if (!h->buf)
		return;
	memcpy(h->buf, buf, len);
	h->qp = qp;
	h->dir = dir;
	h->len = len;
	h->fd = fd;
	h->m = e->rxm;
	if (dst)
		h->dst = *dst;
	/* Delay holds a packet for the configured time. Reordering holds it
	 * behind k = 1..N later ones, as a slower path of a fabric would, and
	 * such a path makes it late by about k packet times: where no k
	 * packets follow (a message's tail), it leaves after k mean gaps
	 * between arrivals, never later than UROCE_REORDER_US. */
	if (f->reorder) {
		uint64_t t = uroce_now_ns(), k = 1 + uroce_fault_rand(f) % f->reorder;

		/* a gap longer than the cap is the flow pausing, not a
		 * packet time */
		if (e->flt_last_ns && t - e->flt_last_ns < f->reorder_ns)
			e->flt_gap_ns = (7 * e->flt_gap_ns + (t - e->flt_last_ns)) / 8;
		e->flt_last_ns = t;
		h->after_seq = e->pkt_seq + k;
		h->due = e->now + MIN(f->reorder_ns, k * e->flt_gap_ns);
	} else {
		h->after_seq = UINT64_MAX;
		h->due = e->now + f->delay_ns;
	}
	if (f->delay_ns)
		h->due = e->now + f->delay_ns;
	e->nheld++;
	if (f->reorder)
		e->cnt->fault_reordered++;
	if (f->delay_ns)
		e->cnt->fault_delayed++;
}

/* Releases due packets in the order they were held (a delay alone must
 * not reorder). */
static void release_held(struct uroce_engine *e, int force)
{
	uint32_t keep = 0, n = e->nheld;

	for (uint32_t i = 0; i < n; i++) {
		struct held_pkt h = e->held[i];

		if (!force && e->now < h.due && e->pkt_seq < h.after_seq) {
			e->held[keep++] = h;
			continue;
		}
		if (h.dir == FAULT_RX && h.qp && h.qp->rx_on) {
			e->rxm = h.m;
			rx_packet(e, h.qp, h.buf, h.len);
			uroce_resp_flush_ack(e, h.qp, e->now);
		} else if (h.dir == FAULT_TX && h.qp) {
			if (sendto(h.fd, h.buf, h.len, 0, (struct sockaddr *)&h.dst, sizeof(h.dst)) > 0) {
				e->cnt->tx_pkts++;
				e->cnt->tx_bytes += h.len;
			}
		}
		free(h.buf);
	}
	/* rx_packet may have held more packets meanwhile: keep those too */
	for (uint32_t i = n; i < e->nheld; i++)
		e->held[keep++] = e->held[i];
	e->nheld = keep;
}

/* Forgets held packets of a QP going away. */
static void drop_held(struct uroce_engine *e, struct uroce_qp *qp)
{
	for (uint32_t i = 0; i < e->nheld;) {
		if (e->held[i].qp == qp) {
			free(e->held[i].buf);
			e->held[i] = e->held[--e->nheld];
		} else {
			i++;
		}
	}
}

static uint32_t linearize(const struct msghdr *m, uint8_t *out, uint32_t cap)
{
	uint32_t n = 0;

	for (size_t k = 0; k < m->msg_iovlen; k++) {
		uint32_t l = (uint32_t)MIN(m->msg_iov[k].iov_len, (size_t)(cap - n));

		memcpy(out + n, m->msg_iov[k].iov_base, l);
		n += l;
	}
	return n;
}

/* The slow path of uroce_eng_flush with tx faults: one datagram at a time. */
static void flush_faulty(struct uroce_engine *e)
{
	struct uroce_fault *f = &e->fault;
	static __thread uint8_t pkt[PKT_MAX];

	for (unsigned i = 0; i < e->ntx; i++) {
		struct msghdr *m = &e->tx_msg[i].msg_hdr;
		uint32_t len = linearize(m, pkt, sizeof(pkt));
		int copies = 1;

		e->pkt_seq++;
		if (uroce_fault_hit(f, f->loss) || uroce_fault_nth(f, e->pkt_seq)) {
			e->cnt->fault_dropped++;
			continue;
		}
		if (uroce_fault_hit(f, f->dup)) {
			e->cnt->fault_duplicated++;
			copies = 2;
		}
		for (int c = 0; c < copies; c++) {
			if (uroce_fault_hit(f, f->corrupt)) {
				uint64_t bit = uroce_fault_rand(f) % ((uint64_t)len * 8);

				pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
				e->cnt->fault_corrupted++;
			}
			if (f->reorder || f->delay_ns) {
				hold(e, e->cur_tx_qp[i], FAULT_TX, pkt, len, e->tx_fd,
				     (struct sockaddr_in *)m->msg_name);
				continue;
			}
			if (sendto(e->tx_fd, pkt, len, 0, m->msg_name, m->msg_namelen) > 0) {
				e->cnt->tx_pkts++;
				e->cnt->tx_bytes += len;
			}
		}
	}
	e->ntx = 0;
}

/* XORs the ICRC of every segment after the first of each GSO run with
 * the change its IP ID brings (segment k gets ID k); twice undoes it. */
static void gso_fix_icrc(struct uroce_engine *e, unsigned k)
{
	unsigned i = 0;

	for (unsigned r = 0; r < k; r++) {
		for (unsigned j = 0; j < e->gso_cnt[r]; j++, i++) {
			uint8_t *t = e->tx_trl[i] + e->tx_pad[i];
			uint32_t d;

			if (!j)
				continue;
			d = wire_icrc_id_delta((uint16_t)j, 8 + e->tx_len[i]);
			t[0] ^= (uint8_t)d;
			t[1] ^= (uint8_t)(d >> 8);
			t[2] ^= (uint8_t)(d >> 16);
			t[3] ^= (uint8_t)(d >> 24);
		}
	}
}

/* Glues runs of same-sized datagrams into GSO datagrams (UDP_SEGMENT):
 * every segment is already a complete RoCEv2 packet, so the kernel's
 * fixed-size cut gives exactly the packets we built. Returns the number
 * of datagrams in e->gso_msg. */
static unsigned gso_pack(struct uroce_engine *e)
{
	unsigned k = 0, iv = 0;

	for (unsigned i = 0; i < e->ntx;) {
		uint32_t seg = e->tx_len[i], total = 0;
		unsigned cnt = 0;
		struct msghdr *m = &e->gso_msg[k].msg_hdr;

		memset(&e->gso_msg[k], 0, sizeof(e->gso_msg[k]));
		m->msg_name = e->tx_msg[i].msg_hdr.msg_name;
		m->msg_namelen = e->tx_msg[i].msg_hdr.msg_namelen;
		m->msg_iov = &e->gso_iov[iv];
		while (i < e->ntx && cnt < GSO_MAX_SEGS && total + e->tx_len[i] <= GSO_MAX_BYTES &&
		       e->tx_len[i] <= seg &&
		       e->tx_dst[i].sin_addr.s_addr == ((struct sockaddr_in *)m->msg_name)->sin_addr.s_addr) {
			struct msghdr *p = &e->tx_msg[i].msg_hdr;

			memcpy(&e->gso_iov[iv], p->msg_iov, sizeof(struct iovec) * p->msg_iovlen);
			iv += (unsigned)p->msg_iovlen;
			total += e->tx_len[i];
			cnt++;
			if (e->tx_len[i++] < seg)
				break; /* a shorter one ends the run */
		}
		m->msg_iovlen = (size_t)(&e->gso_iov[iv] - m->msg_iov);
		if (cnt > 1) {
			struct cmsghdr *c = (struct cmsghdr *)e->gso_ctl[k];
			uint16_t gs = (uint16_t)seg;

			m->msg_control = c;
			m->msg_controllen = sizeof(e->gso_ctl[k]);
			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(gs));
			memcpy(CMSG_DATA(c), &gs, sizeof(gs));
		}
		e->gso_cnt[k++] = cnt;
	}
	return k;
}

/* Sends n datagrams (each standing for segs[i] packets, or one when segs
 * is NULL), waiting briefly when the socket is full. Returns -1 when the
 * kernel refuses GSO (only possible when segs is given), else 0. */
static int send_all(struct uroce_engine *e, struct mmsghdr *m, unsigned n, const unsigned *segs)
{
	unsigned done = 0;
	int tries = 0;

	while (done < n) {
		int r = sendmmsg(e->tx_fd, m + done, n - done, 0);

		if (r > 0) {
			for (unsigned i = done; i < done + (unsigned)r; i++) {
				e->cnt->tx_pkts += segs ? segs[i] : 1;
				e->cnt->tx_bytes += m[i].msg_len;
			}
			done += (unsigned)r;
			continue;
		}
		if ((errno == EAGAIN || errno == ENOBUFS) && tries++ < 100) {
			struct pollfd pfd = { .fd = e->tx_fd, .events = POLLOUT };

			poll(&pfd, 1, 1);
			continue;
		}
		if (errno == EINTR)
			continue;
		if (segs && done == 0 && (errno == EINVAL || errno == EIO || errno == EOPNOTSUPP))
			return -1;
		/* Drop this datagram; go-back-N recovers it. */
		e->cnt->drop_tx_full += segs ? segs[done] : 1;
		uroce_dbg("sendmmsg: %s", strerror(errno));
		done++;
	}
	return 0;
}

/* A READ re-executed for a duplicate request (C9-104) reads memory whose
 * owner may have let go of it since the first execution: the requester
 * completed the READ from the first responses, the peer application was
 * told so and freed the buffer. A NIC reads pinned pages, which outlive
 * the unmap; here the range may no longer be mapped while the MR is still
 * registered (UCX's registration cache deregisters after the munmap), and
 * reading it directly killed the process (SIGSEGV in the ICRC, CI of
 * 2026-12-07, mpi/loss-c-np2). process_vm_readv on our own pid reports
 * EFAULT instead of faulting (process_vm_readv(2): no ptrace check for a
 * process's own threads). Where seccomp refuses it (EPERM, ENOSYS), the
 * copy is a plain one, as before. */
const void *uroce_eng_bounce(struct uroce_engine *e, const void *src, size_t len)
{
	struct iovec to = { e->bounce, len }, from = { (void *)(uintptr_t)src, len };
	ssize_t n;

	if (len > sizeof(e->bounce))
		return NULL;
	n = process_vm_readv(getpid(), &to, 1, &from, 1, 0);
	if (n == (ssize_t)len)
		return e->bounce;
	if (n < 0 && (errno == EPERM || errno == ENOSYS)) {
		memcpy(e->bounce, src, len);
		return e->bounce;
	}
	return NULL;
}

void uroce_eng_flush(struct uroce_engine *e)
{
	if (unlikely(e->fault.enabled && (e->fault.dir & FAULT_TX))) {
		flush_faulty(e);
		return;
	}
	if (uroce_net_gso && e->ntx > 1) {
		unsigned k = gso_pack(e);

		/* the ICRCs must be those of the IDs the segments will carry */
		gso_fix_icrc(e, k);
		if (!send_all(e, e->gso_msg, k, e->gso_cnt)) {
			e->ntx = 0;
			return;
		}
		gso_fix_icrc(e, k); /* back to ID 0 for plain datagrams */
		/* no GSO here: fall back to plain datagrams for good */
		uroce_info("UDP GSO unavailable (%s); sending datagram by datagram", strerror(errno));
		uroce_net_gso = 0;
	}
	send_all(e, e->tx_msg, e->ntx, NULL);
	e->ntx = 0;
}

/* Records a datagram of qp, sent (tx) or received, with the headers it
 * has on the wire. */
static void capture(struct uroce_qp *qp, int tx, uint32_t daddr, const struct iovec *iov, int n)
{
	static const uint8_t zero[6];
	struct uroce_cap_hdr h = { .ttl = 64, .dport = ROCE_V2_PORT };

	if (!memcmp(qp->peer_mac, zero, 6) && qp->peer_mac_tries < 64 && !qp->ctx->dev.loopback) {
		qp->peer_mac_tries++;
		uroce_net_peer_mac(qp->ctx->dev.ifindex, qp->peer_ip4, qp->peer_mac);
	}
	if (tx) {
		h.tos = qp->tos;
		h.smac = qp->ctx->dev.mac;
		h.dmac = qp->peer_mac;
		h.saddr = qp->src_ip4;
		h.daddr = daddr;
		h.sport = qp->sport;
	} else {
		const struct uroce_rx_meta *m = &qp->eng->rxm;

		h.tos = m->tos;
		if (qp->eng->rx_ce)
			h.tos |= 3; /* CE, also when fault injection marked it */
		h.smac = qp->peer_mac;
		h.dmac = qp->ctx->dev.mac;
		h.saddr = m->saddr;
		h.daddr = m->daddr;
		h.sport = m->sport;
		h.ip_id = m->ip_id;
	}
	uroce_pcap_write(&h, iov, n);
}

void uroce_eng_send(struct uroce_engine *e, struct uroce_qp *qp, struct uroce_txpkt *p)
{
	uint32_t daddr = p->dst_ip4 ? p->dst_ip4 : qp->peer_ip4;
	struct wire_ip4 ip = {
		.saddr = qp->src_ip4, .daddr = daddr,
		.sport = qp->sport, .dport = ROCE_V2_PORT, .ip_id = 0,
	};
	unsigned i, pad;
	struct iovec *iov;
	size_t hl;
	uint32_t icrc;
	int n = 0;

	if (e->ntx && (e->tx_fd != qp->tx_fd || e->ntx == TX_BATCH))
		uroce_eng_flush(e);
	/* The packetisers speak RC; UC and XRC opcodes are the RC ones plus
	 * their transport bits (IBA 9.2.1 table 38). UD builds its own. */
	if (p->h.opcode < OP_UC && qp->type != IBV_QPT_UD)
		p->h.opcode |= uroce_qp_transport(qp);
	e->tx_fd = qp->tx_fd;
	i = e->ntx;
	iov = e->tx_iov[i];
	pad = (4 - (p->paylen & 3)) & 3;
	p->h.padcnt = (uint8_t)pad;
	hl = wire_build(e->tx_hdr[i], &p->h);
	iov[n].iov_base = e->tx_hdr[i];
	iov[n++].iov_len = hl;
	for (int k = 0; k < p->npay; k++)
		if (p->pay[k].iov_len)
			iov[n++] = p->pay[k];
	memset(e->tx_trl[i], 0, 4);
	iov[n].iov_base = e->tx_trl[i];
	iov[n].iov_len = pad;
	icrc = wire_icrc_v4(&ip, iov, n + 1);
	/* ICRC is carried least significant byte first (A17.3.3). */
	e->tx_trl[i][pad] = (uint8_t)icrc;
	e->tx_trl[i][pad + 1] = (uint8_t)(icrc >> 8);
	e->tx_trl[i][pad + 2] = (uint8_t)(icrc >> 16);
	e->tx_trl[i][pad + 3] = (uint8_t)(icrc >> 24);
	iov[n++].iov_len = pad + ICRC_LEN;
	e->tx_pad[i] = (uint8_t)pad;

	memset(&e->tx_dst[i], 0, sizeof(e->tx_dst[i]));
	e->tx_dst[i].sin_family = AF_INET;
	e->tx_dst[i].sin_port = htons(ROCE_V2_PORT);
	e->tx_dst[i].sin_addr.s_addr = daddr;
	memset(&e->tx_msg[i], 0, sizeof(e->tx_msg[i]));
	e->tx_msg[i].msg_hdr.msg_name = &e->tx_dst[i];
	e->tx_msg[i].msg_hdr.msg_namelen = sizeof(e->tx_dst[i]);
	e->tx_msg[i].msg_hdr.msg_iov = iov;
	e->tx_msg[i].msg_hdr.msg_iovlen = (size_t)n;
	e->cur_tx_qp[i] = qp;
	e->tx_len[i] = (uint32_t)(hl + p->paylen + pad + ICRC_LEN);
	if (unlikely(uroce_pcap_on))
		capture(qp, 1, daddr, iov, n);
	uroce_trace("pkt_tx", "qpn=0x%x dqpn=0x%x op=%s psn=0x%x payload=%u bytes=%zu", qp->qpn,
		    p->h.dqpn, wire_opcode_name(p->h.opcode), p->h.psn, p->paylen,
		    hl + p->paylen + pad + ICRC_LEN);
	e->ntx++;
	e->queued++;
}

/* ---- rx ---- */

/* Notification point (RoCEv2 annex A17.9): a CNP to the peer QP for
 * CE-marked packets, at most one per 50 us per QP. */
static void send_cnp(struct uroce_engine *e, struct uroce_qp *qp)
{
	static const uint8_t reserved[16];
	struct iovec iov = { (void *)reserved, sizeof(reserved) };
	struct uroce_txpkt tp;

	/* a fresh clock: e->now is the loop turn's, and a busy receiver's
	 * turn (64 rounds of a GRO batch) outlasts 50 us many times over */
	uint64_t now = uroce_now_ns();

	if (qp->last_cnp && now - qp->last_cnp < 50000)
		return;
	/* a QP that takes no packets is no flow to slow down, and its
	 * CNPs would tell a requester that its peer is alive (req.c's
	 * uncharged timeouts) */
	if (!uroce_qp_takes_packets(qp))
		return;
	qp->last_cnp = now;
	memset(&tp, 0, sizeof(tp));
	tp.h.opcode = OP_CNP;
	tp.h.pkey = DEFAULT_PKEY;
	tp.h.dqpn = qp->dest_qpn;
	tp.h.becn = 1;
	tp.pay = &iov;
	tp.npay = 1;
	tp.paylen = sizeof(reserved);
	uroce_eng_send(e, qp, &tp);
	e->cnt->cnp_sent++;
}

static void rx_packet(struct uroce_engine *e, struct uroce_qp *qp, const uint8_t *buf,
		      size_t len)
{
	struct uroce_counters *c = e->cnt;
	struct wire_pkt p;
	struct iovec iov;
	struct wire_ip4 ip = {
		.saddr = e->rxm.saddr, .daddr = e->rxm.daddr,
		.sport = e->rxm.sport, .dport = ROCE_V2_PORT, .ip_id = 0,
	};
	uint32_t icrc = 0, got = 0;
	uint16_t id = 0;
	int icrc_ok;

	c->rx_pkts++;
	c->rx_bytes += len;
	/* The ICRC first, so that a capture shows the IP ID it implies (UDP
	 * GSO numbers a datagram's segments 0, 1, 2...). */
	e->rxm.ip_id = 0;
	e->rxm.len = (uint32_t)len;
	icrc_ok = len >= BTH_LEN + ICRC_LEN;
	if (icrc_ok) {
		iov.iov_base = (void *)buf;
		iov.iov_len = len - ICRC_LEN;
		icrc = wire_icrc_v4(&ip, &iov, 1);
		got = (uint32_t)buf[len - 4] | (uint32_t)buf[len - 3] << 8 |
		      (uint32_t)buf[len - 2] << 16 | (uint32_t)buf[len - 1] << 24;
		if (icrc != got) {
			/* a GSO sender's segment k carries ID k (wire.h): try
			 * that before solving for any ID */
			if (e->rxm.seg && (icrc ^ wire_icrc_id_delta(e->rxm.seg, 8 + len)) == got) {
				id = e->rxm.seg;
				icrc_ok = 1;
			} else {
				icrc_ok = wire_icrc_solve_id(icrc, got, 8 + len, &id);
			}
			if (icrc_ok)
				e->rxm.ip_id = id;
		}
	}
	if (unlikely(uroce_pcap_on)) {
		struct iovec whole = { (void *)buf, len };

		capture(qp, 0, 0, &whole, 1);
	}
	memset(&p, 0, sizeof(p));
	if (wire_parse(buf, len, &p) != WIRE_OK) {
		c->drop_malformed++;
		return;
	}
	if (!icrc_ok) {
		c->icrc_errors++;
		return;
	}
	if (e->rxm.ip_id)
		c->icrc_id_recovered++;
	if (p.dqpn != qp->qpn && !(p.dqpn == UROCE_MCAST_QPN && qp->type == IBV_QPT_UD)) {
		c->drop_bad_qpn++;
		return;
	}
	/* The opcode's transport must be the QP's (IBA 9.2.1, C9-? (9.6.1.1));
	 * an XRC initiator takes only responses, a target only requests. */
	if (p.opcode != OP_CNP &&
	    ((p.opcode & OP_TRANSPORT_MASK) != uroce_qp_transport(qp) ||
	     (qp->type == IBV_QPT_XRC_SEND && (wire_opcodes[p.opcode].flags & OPF_REQ)) ||
	     (qp->type == IBV_QPT_XRC_RECV && !(wire_opcodes[p.opcode].flags & OPF_REQ)))) {
		c->drop_opcode++;
		return;
	}
	uroce_trace("pkt_rx", "qpn=0x%x op=%s psn=0x%x payload=%u bytes=%zu", qp->qpn,
		    wire_opcode_name(p.opcode), p.psn, p.paylen, len);
	if (unlikely(p.opcode == OP_CNP)) {
		/* Reaction point (annex A17.9.2): DCQCN cuts the QP's rate
		 * (req.c, cc.c; nothing with UROCE_CC=none). */
		c->cnp_handled++;
		uroce_req_cnp(qp, e->now);
		return;
	}
	if (qp->type == IBV_QPT_UD) {
		if (unlikely(e->rx_ce))
			c->ecn_marked++; /* no flow to notify: CNPs are per RC/UC QP */
		uroce_ud_rx(e, qp, &p, &e->rxm);
		return;
	}
	/* From here on UC and XRC packets are handled as the RC ones they
	 * extend (the XRCETH, if any, is in p.xrc_srqn). */
	if (p.opcode != OP_CNP)
		p.opcode &= (uint8_t)~OP_TRANSPORT_MASK;
	if (unlikely(e->rx_ce)) {
		c->ecn_marked++;
		send_cnp(e, qp);
	}
	uroce_eng_activate(e, qp);
	if (wire_opcodes[p.opcode].flags & OPF_REQ)
		uroce_resp_rx(e, qp, &p, e->now);
	else
		uroce_comp_rx(e, qp, &p, e->now);
}

/* Receive-side faults: drop, duplicate, corrupt, reorder, delay. */
static void rx_faulty(struct uroce_engine *e, struct uroce_qp *qp, uint8_t *buf, uint32_t len)
{
	struct uroce_fault *f = &e->fault;
	int copies = 1;

	e->pkt_seq++;
	if (uroce_fault_hit(f, f->loss) || uroce_fault_nth(f, e->pkt_seq)) {
		e->cnt->fault_dropped++;
		return;
	}
	if (uroce_fault_hit(f, f->dup)) {
		e->cnt->fault_duplicated++;
		copies = 2;
	}
	if (uroce_fault_hit(f, f->ecn_mark))
		e->rx_ce = 1; /* as if a switch had marked it */
	for (int c = 0; c < copies && qp->rx_on; c++) {
		if (uroce_fault_hit(f, f->corrupt)) {
			uint64_t bit = uroce_fault_rand(f) % ((uint64_t)len * 8);

			buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			e->cnt->fault_corrupted++;
		}
		if (f->reorder || f->delay_ns)
			hold(e, qp, FAULT_RX, buf, len, -1, NULL);
		else
			rx_packet(e, qp, buf, len);
	}
	release_held(e, 0);
}

static void touch(struct uroce_engine *e, struct uroce_qp *qp)
{
	if (qp->touched)
		return;
	qp->touched = 1;
	qp->touch_next = e->touched;
	e->touched = qp;
}

/* After a receive batch: the coalesced ACKs, GPU placements started. */
static void flush_touched(struct uroce_engine *e)
{
	struct uroce_qp *qp;

	while ((qp = e->touched)) {
		e->touched = qp->touch_next;
		qp->touched = 0;
		qp->touch_next = NULL;
		uroce_resp_flush_ack(e, qp, e->now);
		if (qp->rxs.len && uroce_place_kick(qp))
			uroce_place_flush(qp); /* the error shows at the next ACK or CQE */
	}
}

/* A forwarded packet shows that the kernel hands the flow to another
 * engine's port socket: a flow socket connected to the port it really
 * comes from makes the kernel bring the rest here (a foreign peer's port
 * is learned this way; a few times at most, so a peer spraying ports
 * cannot make us reconnect forever). */
static void learn(struct uroce_engine *e, struct uroce_qp *qp, uint16_t sport)
{
	int err;

	if (qp->flow.fd >= 0 && qp->flow_sport == sport)
		return; /* sent before the socket was connected */
	if (qp->relearns >= MAX_RELEARNS)
		return;
	qp->relearns++;
	err = flow_point(e, qp, sport);
	if (err) {
		uroce_dbg("qp 0x%x: flow socket to port %u: %s", qp->qpn, sport, strerror(err));
		return;
	}
	e->cnt->flows_learned++;
	uroce_trace("flow_learn", "qpn=0x%x peer_port=%u", qp->qpn, sport);
}

/* Sends what was batched for each engine. */
static void flush_out(struct uroce_engine *e)
{
	struct uroce_counters *c = e->cnt;

	for (unsigned i = 0; i < e->ndirty; i++) {
		struct fwd_out *o = &e->out[e->out_dirty[i]];
		int err = o->len ? -e->be->mailbox_send(o->fd, o->buf, o->len) : 0;

		if (!err) {
			c->rx_fwd_out += o->npkts;
		} else {
			c->fwd_failed += o->npkts; /* full, or the owner went away */
			if (err != EAGAIN && err != ENOBUFS) {
				close(o->fd);
				o->fd = -1;
			}
		}
		o->len = o->npkts = 0;
	}
	e->ndirty = 0;
}

/* Queues a packet for the engine in slot: 0, or the errno why not
 * (ECONNREFUSED, ENOENT: no such engine). */
static int forward(struct uroce_engine *e, unsigned slot, const struct uroce_fwd_hdr *h,
		   const uint8_t *pkt, uint32_t len)
{
	struct fwd_out *o = &e->out[slot];
	uint32_t rec = (uint32_t)sizeof(*h) + ((len + 3) & ~3u);

	if (!o->buf) {
		o->buf = malloc(UROCE_FWD_MSG_MAX);
		if (!o->buf)
			return ENOMEM;
	}
	if (o->fd < 0) {
		int fd = e->be->mailbox_connect(slot);

		if (fd < 0)
			return -fd;
		o->fd = fd;
	}
	if (o->len + rec > UROCE_FWD_MSG_MAX) {
		/* full: send the batches now (every slot's; the others just
		 * go a little early) */
		flush_out(e);
		if (o->fd < 0)
			return EPIPE;
	}
	if (!o->len)
		e->out_dirty[e->ndirty++] = (uint16_t)slot;
	memcpy(o->buf + o->len, h, sizeof(*h));
	memcpy(o->buf + o->len + sizeof(*h), pkt, len);
	o->len += rec;
	o->npkts++;
	return 0;
}

/* QPNs no uroce engine owns: QP0 (SMI), QP1 (GSI), the multicast QPN
 * (IBA 9.6.1.1; uroce allocates none of them). */
static int qpn_reserved(uint32_t qpn)
{
	return qpn <= 1 || qpn == 0xffffff;
}

static void deliver(struct uroce_engine *e, struct uroce_qp *qp, uint8_t *buf, uint32_t len)
{
	touch(e, qp);
	if (unlikely(e->fault.enabled && (e->fault.dir & FAULT_RX)))
		rx_faulty(e, qp, buf, len);
	else
		rx_packet(e, qp, buf, len);
}

static struct mcast_grp *mcast_find(struct uroce_engine *e, uint32_t group)
{
	for (int i = 0; i < e->nmcast; i++)
		if (e->mcast[i].group == group)
			return &e->mcast[i];
	return NULL;
}

/* A datagram to a group: a copy for every QP of ours attached to it (IBA
 * 10.5.2.2; the kernel gives each engine's group socket its own copy). */
static void mcast_deliver(struct uroce_engine *e, uint32_t dqpn, uint8_t *buf, uint32_t len)
{
	struct mcast_grp *g = mcast_find(e, e->rxm.daddr);
	static __thread uint8_t copy[PKT_MAX];

	if (!g || dqpn != UROCE_MCAST_QPN || !g->nqps) {
		e->cnt->rx_pkts++;
		e->cnt->rx_bytes += len;
		e->cnt->drop_bad_qpn++;
		return;
	}
	for (int i = 0; i < g->nqps; i++) {
		uint8_t *b = buf;

		if (g->nqps > 1 && len <= sizeof(copy)) {
			/* fault injection may corrupt what it is given */
			memcpy(copy, buf, len);
			b = copy;
		}
		deliver(e, g->qps[i], b, len);
	}
}

int uroce_eng_mcast_attach(struct uroce_engine *e, struct uroce_qp *qp, uint32_t group)
{
	struct mcast_grp *g = mcast_find(e, group);

	if (!g) {
		int fd;

		if (e->nmcast == UROCE_MAX_MCAST_GRP)
			return ENOMEM;
		fd = e->be->mcast_open(group, qp->src_ip4, e->ctx->dev.ifindex);
		if (fd < 0)
			return -fd;
		g = &e->mcast[e->nmcast];
		memset(g, 0, sizeof(*g));
		g->group = group;
		g->src.fd = fd;
		g->src.kind = RXS_MCAST;
		g->src.ip4 = group;
		if (watch(e, &g->src)) {
			close(fd);
			return ENOMEM;
		}
		e->nmcast++;
	}
	for (int i = 0; i < g->nqps; i++)
		if (g->qps[i] == qp)
			return 0; /* attached already */
	if (g->nqps == UROCE_MAX_MCAST_QP_ATTACH)
		return ENOMEM;
	g->qps[g->nqps++] = qp;
	qp->nmcast++;
	return 0;
}

int uroce_eng_mcast_detach(struct uroce_engine *e, struct uroce_qp *qp, uint32_t group)
{
	struct mcast_grp *g = mcast_find(e, group);
	int i;

	if (!g)
		return EINVAL;
	for (i = 0; i < g->nqps && g->qps[i] != qp; i++)
		;
	if (i == g->nqps)
		return EINVAL;
	g->qps[i] = g->qps[--g->nqps];
	qp->nmcast--;
	if (!g->nqps) {
		/* The last member leaves: the socket (and its membership) go,
		 * and the last group fills the hole. This runs as an engine
		 * command, before the turn's epoll_wait, so no event in hand
		 * points at the entry that moves; epoll's own pointer is
		 * updated. */
		close_src(e, &g->src);
		*g = e->mcast[--e->nmcast];
		if (g != &e->mcast[e->nmcast]) {
			struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &g->src };

			epoll_ctl(e->epfd, EPOLL_CTL_MOD, g->src.fd, &ev);
		}
	}
	return 0;
}

void uroce_eng_mcast_detach_all(struct uroce_engine *e, struct uroce_qp *qp)
{
	for (int i = e->nmcast - 1; i >= 0; i--)
		uroce_eng_mcast_detach(e, qp, e->mcast[i].group);
}

/* Whether to mark the next packet CE, at the batch's probability. */
static int queue_mark(struct uroce_engine *e)
{
	uint64_t x = e->ecnq_rng;

	if (e->rx_qmark >= 1)
		return 1;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	e->ecnq_rng = x;
	return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53 < e->rx_qmark;
}

/* The mark probability for what a receive socket holds now: 0 up to
 * KMIN bytes of backlog, rising to PMAX at KMAX, 1 above (RED-ECN). */
static void queue_probe(struct uroce_engine *e, int fd)
{
	int64_t q = e->be->rx_backlog ? e->be->rx_backlog(fd) : -1;

	if (q < 0 || (uint64_t)q <= e->ecnq_min)
		e->rx_qmark = 0;
	else if ((uint64_t)q > e->ecnq_max)
		e->rx_qmark = 1;
	else
		e->rx_qmark = e->ecnq_pmax * (double)((uint64_t)q - e->ecnq_min) /
			      (double)(e->ecnq_max - e->ecnq_min);
}

/* UROCE_ECN_QUEUE_KB=KMIN[,KMAX[,PMAX]]: 0 or -1 with a message. */
static int queue_mark_init(struct uroce_engine *e)
{
	const char *s = getenv("UROCE_ECN_QUEUE_KB");
	double kmin, kmax, pmax = 1;
	int n;
	char extra;

	if (!s || !*s)
		return 0;
	n = sscanf(s, "%lf,%lf,%lf%c", &kmin, &kmax, &pmax, &extra);
	if (n == 1)
		kmax = kmin;
	if (n < 1 || n > 3 || !(kmin >= 0) || !(kmax >= kmin) || !(pmax > 0 && pmax <= 1) ||
	    kmax > 1e9) {
		uroce_err("UROCE_ECN_QUEUE_KB=%s: want KMIN[,KMAX[,PMAX]] (KiB, KMIN <= KMAX, "
			  "0 < PMAX <= 1)", s);
		return -1;
	}
	e->ecnq_min = (uint64_t)(kmin * 1024);
	e->ecnq_max = (uint64_t)(kmax * 1024);
	e->ecnq_pmax = pmax;
	e->ecnq_rng = uroce_now_ns() * 0x9E3779B97F4A7C15ull | 1;
	if (!e->ecnq_min)
		e->ecnq_min = 1; /* "0": anything queued at all */
	if (e->ecnq_max < e->ecnq_min)
		e->ecnq_max = e->ecnq_min;
	uroce_info("CE marking at a receive backlog over %.0f KiB (to %.0f KiB, p %g)", kmin, kmax,
		   pmax);
	return 0;
}

/* One RoCEv2 packet (UDP payload) from saddr:sport to daddr. */
static void rx_dispatch(struct uroce_engine *e, int kind, uint32_t saddr, uint16_t sport,
			uint32_t daddr, uint8_t *buf, uint32_t len)
{
	struct uroce_counters *c = e->cnt;
	struct uroce_qp *qp;
	uint32_t dqpn;

	if (len < BTH_LEN + ICRC_LEN) {
		c->rx_pkts++;
		c->rx_bytes += len;
		c->drop_malformed++;
		return;
	}
	dqpn = (uint32_t)buf[5] << 16 | (uint32_t)buf[6] << 8 | buf[7]; /* BTH DestQP */
	e->rxm.saddr = saddr;
	e->rxm.daddr = daddr;
	e->rxm.sport = sport;
	/* ECN field 11: congestion experienced */
	e->rx_ce = (e->rxm.tos & 3) == 3;
	if (unlikely(e->rx_qmark > 0) && (e->rxm.tos & 3) && !e->rx_ce && queue_mark(e)) {
		/* our receive queue is the congested one: mark an ECT packet
		 * CE as a switch would (RFC 3168), forwarded ones included */
		e->rx_ce = 1;
		e->rxm.tos |= 3;
		e->cnt->ecn_queue_marked++;
	}
	if (kind == RXS_MCAST) {
		mcast_deliver(e, dqpn, buf, len);
		return;
	}
	qp = e->qtab[dqpn & (QTAB_SIZE - 1)];
	if (!qp || qp->qpn != dqpn) {
		struct uroce_fwd_hdr h = {
			.magic = UROCE_FWD_MAGIC, .saddr = saddr, .daddr = daddr, .sport = sport,
			.len = (uint16_t)len, .tos = e->rxm.tos,
		};
		int err;

		/* Another engine's QPN: hand it over, once (never back from a
		 * mailbox). Nobody's: dropped, counted like a wrong QPN. */
		if (kind != RXS_INBOX && (dqpn >> 16) != e->slot && !qpn_reserved(dqpn) &&
		    len <= UROCE_FWD_MSG_MAX - sizeof(h)) {
			err = forward(e, dqpn >> 16, &h, buf, len);
			if (!err)
				return;
			if (err == EAGAIN || err == ENOBUFS || err == ENOMEM || err == EPIPE) {
				c->fwd_failed++; /* the owner's backlog is full */
				return;
			}
		}
		c->rx_pkts++;
		c->rx_bytes += len;
		c->drop_bad_qpn++;
		return;
	}
	/* An RC or UC QP hears only its peer's address, a UD QP anyone's, at
	 * the address it uses (the source port is flow entropy: any is
	 * accepted). */
	if (!qp->rx_on || (qp->type != IBV_QPT_UD && saddr != qp->peer_ip4) ||
	    daddr != qp->src_ip4) {
		c->rx_pkts++;
		c->rx_bytes += len;
		if (qp->rx_on)
			c->drop_bad_qpn++;
		else
			c->drop_state++;
		return;
	}
	if (qp->type != IBV_QPT_UD) {
		qp->peer_sport = sport; /* the flow's port, for flow sockets */
		if (kind == RXS_INBOX)
			learn(e, qp, sport); /* a datagram QP has no one flow */
	}
	deliver(e, qp, buf, len);
}

/* A mailbox message: records of a header and a packet each. */
static void rx_inbox_msg(struct uroce_engine *e, uint8_t *buf, uint32_t len)
{
	struct uroce_fwd_hdr h;

	for (uint32_t off = 0; off < len;) {
		if (len - off < sizeof(h)) {
			e->cnt->drop_malformed++;
			return;
		}
		memcpy(&h, buf + off, sizeof(h));
		off += (uint32_t)sizeof(h);
		if (h.magic != UROCE_FWD_MAGIC || h.len > len - off) {
			e->cnt->rx_pkts++;
			e->cnt->drop_malformed++;
			return;
		}
		e->cnt->rx_fwd_in++;
		e->rxm.tos = h.tos;
		rx_dispatch(e, RXS_INBOX, h.saddr, h.sport, h.daddr, buf + off, h.len);
		off += (h.len + 3u) & ~3u;
	}
}

static void inbox_close(struct uroce_engine *e, struct uroce_rxsrc *in)
{
	close_src(e, in);
	if (in->prev)
		in->prev->next = in->next;
	else
		e->inbox = in->next;
	if (in->next)
		in->next->prev = in->prev;
	free(in);
}

/* Connections to our mailbox: each one an inbox in the epoll set. */
static void accept_inboxes(struct uroce_engine *e)
{
	for (;;) {
		int fd = e->be->mailbox_accept(e->mailbox.fd, e->uid);
		struct uroce_rxsrc *in;

		if (fd == -EPERM)
			continue;
		if (fd < 0)
			return;
		in = calloc(1, sizeof(*in));
		if (!in) {
			close(fd);
			return;
		}
		in->fd = fd;
		in->kind = RXS_INBOX;
		if (watch(e, in)) {
			close(fd);
			free(in);
			return;
		}
		in->next = e->inbox;
		if (e->inbox)
			e->inbox->prev = in;
		e->inbox = in;
	}
}

#define RXR_BUCKET (256 << 10)

/* UROCE_RX_RATE_GBPS: whether src may be read now; if not, it leaves the
 * epoll set (level-triggered, it would wake the loop at once) until the
 * bucket has refilled. */
static int rx_rate_ok(struct uroce_engine *e, struct uroce_rxsrc *src)
{
	uint64_t now = uroce_now_ns();
	struct epoll_event ev = { .events = 0, .data.ptr = src };

	e->rxr_tokens += (int64_t)((double)(now - e->rxr_at) * e->rxr_rate);
	e->rxr_at = now;
	if (e->rxr_tokens > RXR_BUCKET)
		e->rxr_tokens = RXR_BUCKET;
	if (e->rxr_tokens >= 0)
		return 1;
	if (e->rxr_npaused < (int)ARRAY_SIZE(e->rxr_paused) &&
	    !epoll_ctl(e->epfd, EPOLL_CTL_MOD, src->fd, &ev)) {
		e->rxr_paused[e->rxr_npaused++] = src;
		e->rxr_resume = now + (uint64_t)((double)-e->rxr_tokens / e->rxr_rate) + 1;
	}
	return 0;
}

/* Puts paused sources back once the bucket has refilled. */
static void rx_rate_resume(struct uroce_engine *e)
{
	if (!e->rxr_resume || e->now < e->rxr_resume)
		return;
	for (int i = 0; i < e->rxr_npaused; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = e->rxr_paused[i] };

		epoll_ctl(e->epfd, EPOLL_CTL_MOD, e->rxr_paused[i]->fd, &ev);
	}
	e->rxr_npaused = 0;
	e->rxr_resume = 0;
}

static int rx_rate_init(struct uroce_engine *e)
{
	const char *s = getenv("UROCE_RX_RATE_GBPS");
	char *end;
	double g;

	if (!s || !*s)
		return 0;
	g = strtod(s, &end);
	if (*end || !(g > 0 && g <= 10000)) {
		uroce_err("UROCE_RX_RATE_GBPS=%s: want a rate in Gb/s, above 0", s);
		return -1;
	}
	e->rxr_rate = g / 8; /* Gb/s = bits per ns */
	e->rxr_at = uroce_now_ns();
	uroce_info("receiving at most %g Gb/s (UROCE_RX_RATE_GBPS)", g);
	return 0;
}

/* Reads a source's datagrams (a turn's share). Returns whether it had any
 * (or, for the mailbox listener, whether it was looked at). */
static int rx_source(struct uroce_engine *e, struct uroce_rxsrc *src)
{
	/* A flow socket holds one flow; a port socket or the mailbox may hold
	 * every QP's packets, so it gets a larger share of each loop turn
	 * (the turn also walks every active QP). */
	int rounds = src->kind == RXS_FLOW ? 4 : 64;
	int limit = e->rxr_rate > 0 && (src->kind == RXS_PORT || src->kind == RXS_FLOW);
	int got = 0;

	if (src->kind == RXS_MAILBOX) {
		accept_inboxes(e);
		return 1;
	}
	for (int round = 0; round < rounds; round++) {
		int n;

		for (int i = 0; i < RX_BATCH; i++) {
			e->rx_iov[i].iov_base = e->rx_buf + (size_t)i * RX_BUF;
			e->rx_iov[i].iov_len = RX_BUF;
			memset(&e->rx_msg[i].msg_hdr, 0, sizeof(e->rx_msg[i].msg_hdr));
			e->rx_msg[i].msg_hdr.msg_iov = &e->rx_iov[i];
			e->rx_msg[i].msg_hdr.msg_iovlen = 1;
			e->rx_msg[i].msg_hdr.msg_control = e->rx_ctl[i];
			e->rx_msg[i].msg_hdr.msg_controllen = sizeof(e->rx_ctl[i]);
			if (src->kind != RXS_INBOX) {
				e->rx_msg[i].msg_hdr.msg_name = &e->rx_from[i];
				e->rx_msg[i].msg_hdr.msg_namelen = sizeof(e->rx_from[i]);
			}
		}
		if (unlikely(limit) && !rx_rate_ok(e, src))
			break;
		/* rate-limited: a few datagrams (GRO buffers) at a time */
		n = recvmmsg(src->fd, e->rx_msg, limit ? 2 : RX_BATCH, MSG_DONTWAIT, NULL);
		if (unlikely(limit))
			for (int i = 0; i < n; i++)
				e->rxr_tokens -= e->rx_msg[i].msg_len;
		/* what is still queued behind this batch decides its CE marks */
		e->rx_qmark = 0;
		if (unlikely(e->ecnq_min) && n > 0 && src->kind != RXS_INBOX)
			queue_probe(e, src->fd);
		if (src->kind == RXS_INBOX && (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ||
					       (n > 0 && e->rx_msg[0].msg_len == 0))) {
			/* the other engine closed its end */
			inbox_close(e, src);
			return 1;
		}
		if (n <= 0)
			return got; /* drained */
		got = 1;
		if (src->kind == RXS_PORT || src->kind == RXS_FLOW)
			e->hot = src;
		for (int i = 0; i < n && src->fd >= 0; i++) {
			struct msghdr *m = &e->rx_msg[i].msg_hdr;
			uint8_t *buf = e->rx_buf + (size_t)i * RX_BUF;
			uint32_t len = e->rx_msg[i].msg_len, seg = len;
			uint32_t saddr = e->rx_from[i].sin_addr.s_addr;
			uint16_t sport = ntohs(e->rx_from[i].sin_port);

			if ((m->msg_flags & MSG_TRUNC) || !len) {
				e->cnt->rx_pkts++;
				e->cnt->drop_malformed++;
				continue;
			}
			if (src->kind == RXS_INBOX) {
				rx_inbox_msg(e, buf, len);
				continue;
			}
			e->rxm.tos = 0;
			for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
				if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
					int gs;

					memcpy(&gs, CMSG_DATA(c), sizeof(gs));
					if (gs > 0)
						seg = (uint32_t)gs;
				} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
					e->rxm.tos = *(uint8_t *)CMSG_DATA(c);
				} else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
					uint32_t d;

					/* socket(7): datagrams this socket dropped so far */
					memcpy(&d, CMSG_DATA(c), sizeof(d));
					e->cnt->rx_sock_drops += d - src->drops;
					src->drops = d;
				}
			}
			/* A GRO buffer holds datagrams of seg bytes, the last
			 * one possibly shorter. */
			e->rxm.seg = 0;
			for (uint32_t off = 0; off < len && src->fd >= 0; off += seg, e->rxm.seg++)
				rx_dispatch(e, src->kind, saddr, sport, src->ip4, buf + off,
					    MIN(seg, len - off));
		}
		flush_touched(e);
		if (e->ndirty)
			flush_out(e);
		if (n < (limit ? 2 : RX_BATCH))
			return 1;
	}
	if (!limit)
		e->rx_backlog = 1; /* every round full, more left unread: see hold_timers() */
	return got;
}

/* ---- loop ---- */

static void run_cmds(struct uroce_engine *e)
{
	struct eng_cmd *c;

	pthread_mutex_lock(&e->cmd_lock);
	c = e->cmd_head;
	e->cmd_head = NULL;
	e->cmd_tail = &e->cmd_head;
	atomic_store(&e->cmd_pending, 0);
	pthread_mutex_unlock(&e->cmd_lock);
	while (c) {
		struct eng_cmd *next = c->next;

		run_call(e, c->fn, c->arg);
		uroce_eng_flush(e);
		pthread_mutex_lock(&e->cmd_lock);
		c->done = 1;
		pthread_cond_broadcast(&e->cmd_cond);
		pthread_mutex_unlock(&e->cmd_lock);
		c = next;
	}
}

static int drain_doorbells(struct uroce_engine *e)
{
	struct uroce_qp *qp = atomic_exchange(&e->db_head, NULL);
	int n = 0;

	atomic_store_explicit(&e->deferred, 0, memory_order_relaxed);

	while (qp) {
		struct uroce_qp *next = qp->db_next;

		atomic_store(&qp->db_queued, 0);
		uroce_eng_activate(e, qp);
		qp = next;
		n++;
	}
	return n;
}

static uint64_t next_deadline(struct uroce_engine *e)
{
	uint64_t best = UINT64_MAX;

	for (uint32_t i = 0; i < e->nheld; i++)
		if (e->held[i].due < best)
			best = e->held[i].due;
	if (e->rxr_resume && e->rxr_resume < best)
		best = e->rxr_resume;

	for (struct uroce_qp *qp = e->active; qp; qp = qp->act_next) {
		uint64_t d = uroce_req_next_deadline(qp);

		if (d < best)
			best = d;
		if (qp->resp.ack_deadline && qp->resp.ack_deadline < best)
			best = qp->resp.ack_deadline;
		d = uroce_resp_deadline(qp);
		if (d && d < best)
			best = d;
	}
	return best;
}

/* The part of a turn before waiting: commands and doorbells. */
static int turn_begin(struct uroce_engine *e)
{
	int work = 0;

	if (atomic_load(&e->cmd_pending)) {
		drain_doorbells(e);
		run_cmds(e);
		work = 1;
	}
	work |= drain_doorbells(e);
	return work;
}

/* Whether the requesters' retransmission timers wait this turn: they do
 * while this engine's own sockets hold datagrams it has not read yet (the
 * ACKs may be among them), up to BACKLOG_HOLD_NS of unbroken backlog. A
 * NIC reads its input at line rate, so its timers never fire on answers
 * waiting inside it; a software engine behind on its input would resend
 * what was already answered, charge retries for its own slowness, and,
 * each resend costing it more, fail QPs whose peers are alive (16,000 QPs
 * in one process, one WRITE each: RETRY_EXC_ERR with 20,000 datagrams
 * unread). The bound keeps a flood from hiding a dead peer for long. */
#define BACKLOG_HOLD_NS 1000000000ull

static int hold_timers(struct uroce_engine *e)
{
	if (!e->rx_backlog) {
		e->backlog_since = 0;
		return 0;
	}
	if (!e->backlog_since)
		e->backlog_since = e->now;
	if (e->now - e->backlog_since > BACKLOG_HOLD_NS)
		return 0;
	e->cnt->timer_holds++;
	return 1;
}

/* How late this engine may be to look at anything: the longest turn of
 * late that did work (a turn that took d is forgotten 4 d after it
 * ended, when a later one with work ends). A turn's
 * wall time includes the time its thread waited for a CPU, so on a host
 * with more runnable threads than cores it grows with the load; a peer
 * on the same host, and every engine forwarding between them, is as
 * slow. uroce_req_timers judges no timeout shorter than a few of these
 * (docs/design.md, "Timers on a loaded host"). */
static void turn_lag(struct uroce_engine *e, uint64_t start)
{
	uint64_t end = uroce_now_ns(), d = end - start;

	if (d >= e->lag_ns || end - e->lag_at > 4 * e->lag_ns) {
		e->lag_ns = d;
		e->lag_at = end;
	}
}

uint64_t uroce_eng_lag_ns(const struct uroce_engine *e)
{
	return e->lag_ns;
}

/* The part of a turn after waiting: nev events from the epoll set, held
 * packets, timers, the active QPs, the tx batch. Only the engine thread
 * (own) reads its eventfd: that counter is the wakeup of a sleeping engine
 * thread, and an application's turn that read it before the woken thread
 * ran would leave that thread's epoll_wait finding nothing ready and
 * sleeping on, with no timeout if it had nothing to wait for when it
 * went to sleep (a sender's QP then never saw its timers again). */
static int turn_end(struct uroce_engine *e, const struct epoll_event *evs, int nev, int own)
{
	int work = 0, hold;
	uint64_t start = e->now = uroce_now_ns();

	e->rx_backlog = 0;
	for (int i = 0; i < nev; i++) {
		if (!evs[i].data.ptr) {
			uint64_t v;

			if (!own)
				continue;
			if (read(e->efd, &v, sizeof(v)) < 0) {
				/* EAGAIN: already drained */
			}
			continue;
		}
		work |= rx_source(e, evs[i].data.ptr);
	}
	if (e->nheld)
		release_held(e, 0);
	if (unlikely(e->rxr_resume))
		rx_rate_resume(e);
	hold = hold_timers(e);
	for (struct uroce_qp *qp = e->active, *next; qp; qp = next) {
		uint64_t before = e->queued;
		uint32_t tail = atomic_load_explicit(&qp->sq_tail, memory_order_relaxed);

		next = qp->act_next;
		if (qp->type == IBV_QPT_UD) {
			uroce_ud_progress(e, qp, e->now);
		} else {
			if (!hold)
				uroce_req_timers(e, qp, e->now);
			uroce_req_progress(e, qp, e->now);
			uroce_resp_progress(e, qp, e->now);
			uroce_resp_flush_ack(e, qp, e->now);
		}
		/* Anything sent or retired is work: keep polling. */
		if (e->queued != before ||
		    atomic_load_explicit(&qp->sq_tail, memory_order_relaxed) != tail)
			work = 1;
		if (!uroce_req_busy(qp) && !uroce_resp_busy(qp))
			uroce_eng_deactivate(e, qp);
	}
	uroce_eng_flush(e);
	if (unlikely(e->stall_ns)) {
		struct timespec st = ts_of_ns(e->stall_ns);

		nanosleep(&st, NULL);
	}
	/* a turn that found nothing to do needs no second clock read: its
	 * length says nothing about answers waiting (and polling loops run
	 * such turns back to back) */
	if (work || unlikely(e->stall_ns))
		turn_lag(e, start);
	return work;
}

/* epoll_pwait2 (Linux 5.11) waits with nanosecond timeouts; on older
 * kernels (a container on a RHEL 8 host: 4.18) and under valgrind it is
 * ENOSYS, and the engine threads would spin without ever sleeping.
 * epoll_wait then, the timeout rounded up to whole milliseconds: timers
 * fire up to 1 ms late, nothing spins. */
static int eng_wait(int fd, struct epoll_event *evs, int n, const struct timespec *ts)
{
	static atomic_int no_pwait2;
	int ms;

	if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
		int r = epoll_pwait2(fd, evs, n, ts, NULL);

		if (r >= 0 || errno != ENOSYS)
			return r;
		atomic_store(&no_pwait2, 1);
		uroce_info("epoll_pwait2: %s; waiting with epoll_wait (millisecond timers)",
			   strerror(ENOSYS));
	}
	if (!ts)
		ms = -1;
	else if (ts->tv_sec > 1000000)
		ms = 1000000000;
	else
		ms = (int)(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000);
	return epoll_wait(fd, evs, n, ms);
}

/* After an application thread's turn: wake the sleeping engine thread if
 * a timer is now due well before it wakes by itself. Up to park_max_ns
 * late is accepted: the engine thread parks no longer than that while an
 * application polls, and waking it per turn would cost the system call
 * that application progress saves. */
static void wake_for_deadline(struct uroce_engine *e)
{
	uint64_t until = atomic_load(&e->sleep_until), d;

	if (!until || !atomic_load(&e->sleeping))
		return;
	d = next_deadline(e);
	if (d == UINT64_MAX || d + e->park_max_ns >= until)
		return;
	atomic_store(&e->sleep_until, 0); /* one wakeup; it sets a new time */
	wake(e);
}

uint64_t uroce_eng_reply_hold_ns(const struct uroce_engine *e)
{
	/* the engine thread's own turn, which spins after work anyway: the
	 * hold's deadline never costs a wakeup. Anything already queued
	 * leaves in this turn's system call: the ACK goes with it. */
	if (!e->reply_hold_ns || e->ntx || turn_of != e || !e->running ||
	    !pthread_equal(pthread_self(), e->thr))
		return 0;
	return e->reply_hold_ns;
}

/* An application thread's turn, if the engine is idle (nobody holds run):
 * what the engine thread would do on waking, without the wakeup. 1 if
 * it ran. */
uint64_t uroce_eng_app_turn_id(const struct uroce_engine *e)
{
	return e->app_turn_id;
}

#define FULL_POLL_TURNS 16 /* a power of 2 */

/* A poll that found completions takes no turn but is still a poll: the
 * engine thread stays parked. Without this, an engine thread that beat
 * the poller to every packet kept the CQ from ever being empty when
 * polled, so nothing marked the application as polling, and every
 * message cost the engine thread a wakeup again. */
void uroce_eng_polled(struct uroce_ctx *ctx)
{
	struct uroce_engine *e = ctx->eng;

	if (!e || !e->app_progress)
		return;
	atomic_store_explicit(&e->app_poll_ns, uroce_now_ns(), memory_order_relaxed);
	/* Posts left to this poller's turn (uroce_eng_doorbell) go now. */
	if (atomic_load_explicit(&e->db_head, memory_order_relaxed)) {
		app_turn(e, 3);
		return;
	}
	/* Every FULL_POLL_TURNS-th such poll takes a turn all the same: a
	 * poller that always finds completions (64 QPs' worth) would
	 * otherwise leave the sockets, the ACKs in them and the timers to
	 * the parked engine thread's wakeups. */
	if ((atomic_fetch_add_explicit(&e->full_polls, 1, memory_order_relaxed) &
	     (FULL_POLL_TURNS - 1)) == FULL_POLL_TURNS - 1)
		app_turn(e, 3);
}

int uroce_eng_app_turn(struct uroce_ctx *ctx, int polling)
{
	/* application progress runs one engine per context (uroce_eng_start) */
	return ctx->eng ? app_turn(ctx->eng, polling ? 1 : 2) : 0;
}

/* A polling application's turns read the hot socket (the last one that
 * delivered packets) with no epoll_wait first, and ask epoll about every
 * source each HOT_TURNS-th turn: a reply then costs one system call to
 * notice instead of two, and no other source waits more than
 * HOT_TURNS - 1 polls (docs/design.md, "Who runs the transport"). Only
 * while epoll last found at most one source ready: with several flows
 * busy, every turn asks epoll. */
#define HOT_TURNS 4

/* The sources this turn reads, without waiting: the hot socket alone, or
 * what epoll says is ready. */
static int poll_sources(struct uroce_engine *e, struct epoll_event *evs)
{
	int n;

	if (e->hot && e->hot_alone && ++e->hot_turns < HOT_TURNS && !e->rxr_rate) {
		evs[0].events = EPOLLIN;
		evs[0].data.ptr = e->hot;
		return 1;
	}
	e->hot_turns = 0;
	n = epoll_wait(e->epfd, evs, MAX_EVENTS, 0);
	e->hot_alone = n <= 1;
	return n;
}

/* rx: 0 a post's turn (sends only), 1 a poll's, 2 the poll of an armed
 * CQ, 3 a poll that found completions (uroce_eng_polled). */
static int app_turn(struct uroce_engine *e, int rx)
{
	struct epoll_event evs[MAX_EVENTS];
	int nev = 0;

	if (!e->app_progress || turn_of == e || atomic_load(&e->stop))
		return 0;
	/* Only a poll parks the engine thread: a post's turn reads nothing, so
	 * a program that posts here and polls elsewhere (or sleeps on a
	 * channel) leaves the sockets to the engine thread. Nor does the poll
	 * of an armed CQ (rx 2): an event loop arms, drains the CQ and then
	 * sleeps on its channel, and an engine thread parked by that drain
	 * left arriving packets unread for up to UROCE_PARK_US (ib_send_bw -e
	 * fell from 20 to 6 Gb/s when the park grew from 200 to 1000 us). */
	if (rx == 1)
		atomic_store_explicit(&e->app_poll_ns, uroce_now_ns(), memory_order_relaxed);
	if (pthread_mutex_trylock(&e->run))
		return 0; /* the engine (or another thread) is at work */
	turn_of = e;
	if (rx == 3) {
		e->cnt->full_poll_turns++; /* a poll that found completions */
		rx = 1;
	}
	turn_begin(e);
	/* A post's turn only sends: what arrived is read by the poller's
	 * next turn (or the engine thread), not on the way out. */
	if (rx)
		nev = poll_sources(e, evs);
	e->app_turn_id = ++e->app_turns;
	turn_end(e, evs, nev > 0 ? nev : 0, 0);
	e->app_turn_id = 0;
	wake_for_deadline(e);
	turn_of = NULL;
	pthread_mutex_unlock(&e->run);
	return 1;
}

/* The application stopped polling (it arms a CQ to sleep on its channel):
 * the engine thread must watch the sockets again. */
void uroce_eng_unpark(struct uroce_ctx *ctx)
{
	struct uroce_engine *e = ctx->eng;

	if (!e || !e->app_progress)
		return;
	atomic_store(&e->app_poll_ns, 0);
	if (atomic_load(&e->sleeping))
		wake(e);
}

static void dump_qps(struct uroce_engine *e)
{
	for (struct uroce_qp *qp = e->all; qp; qp = qp->all_next)
		uroce_dbg("qp 0x%x->0x%x act %d st %d psn 0x%x una 0x%x cur %u/%u head %u tail %u "
			  "rd_out %u rewind %d dl %ld fdl %ld rnr %ld epsn 0x%x rd_len %u rd0 0x%x+%u/%u/%u msg %d "
			  "retrans %lu timeouts %lu seqnak %lu/%lu",
			  qp->qpn, qp->dest_qpn, qp->in_active, qp->eng_state, qp->req.psn, qp->req.una, qp->req.cur,
			  qp->req.cur_pkt, atomic_load(&qp->sq_head),
			  atomic_load(&qp->sq_tail), qp->req.rd_out, qp->req.rewind,
			  qp->req.deadline ? (long)(qp->req.deadline - e->now) : -1,
			  qp->req.fast_deadline ? (long)(qp->req.fast_deadline - e->now) : -1,
			  qp->req.rnr_until ? (long)(qp->req.rnr_until - e->now) : -1,
			  qp->resp.epsn, qp->resp.rd_len,
			  qp->resp.rd[qp->resp.rd_head].psn, qp->resp.rd[qp->resp.rd_head].sent,
			  qp->resp.rd[qp->resp.rd_head].end, qp->resp.rd[qp->resp.rd_head].len,
			  qp->resp.msg, e->cnt->retrans_pkts,
			  e->cnt->timeouts, e->cnt->seq_naks_sent,
			  e->cnt->seq_naks_rcvd);
}

static int app_polls(const struct uroce_engine *e)
{
	return app_polls_at(e, e->now);
}

/* UROCE_LOG=debug: the busy QPs, every 200 ms of the engine thread's life. */
static void dump_due(struct uroce_engine *e)
{
	if (unlikely(uroce__log_level >= UROCE_LOG_DEBUG) && e->now - e->last_dump > 200000000ull) {
		e->last_dump = e->now;
		dump_qps(e);
	}
}

/* The engine thread sleeps on FD until TSP (NULL: an event) with run
 * released. Parked until a timeout, and an application thread took turns
 * meanwhile: those turns did this thread's work (timers included, up to a
 * park late), so it parks again rather than compete with the poller for
 * its sockets and QPs (counter park_skips). A poll that keeps finding
 * completions takes no turn, so then this thread runs one. Returns with
 * run held, as epoll_wait. */
static int park_wait(struct uroce_engine *e, int fd, struct epoll_event *evs,
		     struct timespec *tsp)
{
	uint64_t turns = e->app_turns; /* written under run */
	struct timespec ts;
	int nev;

	turn_of = NULL;
	pthread_mutex_unlock(&e->run);
	for (;;) {
		nev = eng_wait(fd, evs, MAX_EVENTS, tsp);
		pthread_mutex_lock(&e->run);
		if (fd != e->park_fd || nev != 0 || e->app_turns == turns ||
		    atomic_load(&e->cmd_pending) || atomic_load(&e->stop))
			break;
		e->now = uroce_now_ns();
		if (!app_polls(e))
			break;
		e->park_ns = MIN(e->park_ns * 2, e->park_max_ns);
		ts = ts_of_ns(e->park_ns);
		tsp = &ts;
		atomic_store(&e->sleep_until, e->now + e->park_ns);
		e->cnt->park_skips++;
		dump_due(e);
		turns = e->app_turns;
		pthread_mutex_unlock(&e->run);
	}
	turn_of = e;
	return nev;
}

static void *engine_main(void *arg)
{
	struct uroce_engine *e = arg;
	struct epoll_event evs[MAX_EVENTS];
	uint64_t last_work;
	sigset_t all;

	sigfillset(&all);
	if (uroce__usr2_backtrace)
		sigdelset(&all, SIGUSR2); /* UROCE_SEGV_BACKTRACE: where is it stuck? */
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	prctl(PR_SET_NAME, "uroce-engine", 0, 0, 0);
	/* The DCQCN pacer sleeps until a packet's time: without this the
	 * kernel may wake the thread up to 50 us late (timer slack). */
	if (uroce_cc_config()->mode == UROCE_CC_DCQCN)
		prctl(PR_SET_TIMERSLACK, 1000ul, 0, 0, 0);
	uroce_trace_set_engine_thread();
	pthread_mutex_lock(&e->run);
	turn_of = e;
	e->now = last_work = uroce_now_ns();
	while (!atomic_load(&e->stop)) {
		struct timespec ts, *tsp = &ts;
		int work, nev, fd = e->epfd, yield;

		work = turn_begin(e);
		ts.tv_sec = 0;
		ts.tv_nsec = 0;
		/* An application thread polls: it takes the turns, so after
		 * one of its own (a timer, a wakeup) this thread parks again
		 * even if there was work, and leaves doorbells rung meanwhile
		 * to the poller's next turn. Going on while posts kept coming
		 * made it a second transport thread beside a poller that
		 * spins anyway: on 2 cores it took the receiving engine's CPU
		 * (ib_write_bw -q 64, docs/performance.md). */
		yield = e->app_progress && app_polls(e);
		if (!work && !e->active && !e->nheld && !e->rxr_resume &&
		    e->now - last_work > e->spin_ns) {
			tsp = NULL; /* nothing at all to wait for */
		} else if ((!work && e->now - last_work > e->spin_ns) || yield) {
			uint64_t d = next_deadline(e);

			if (d == UINT64_MAX) {
				tsp = NULL;
			} else if (d > e->now) {
				ts = ts_of_ns(d - e->now);
			}
		}
		if (tsp != &ts || ts.tv_sec || ts.tv_nsec) {
			/* An application thread polled lately: it reads the
			 * sockets itself, so sleep on the eventfd alone (no
			 * wakeup per packet), for a while that doubles as long
			 * as it keeps polling. Timers still bound the sleep. */
			if (yield) {
				uint64_t cur = tsp ? (uint64_t)ts.tv_sec * 1000000000ull +
							     (uint64_t)ts.tv_nsec
						   : UINT64_MAX;

				e->park_ns = e->park_ns ? MIN(e->park_ns * 2, e->park_max_ns)
							: e->park_max_ns / 16;
				if (cur > e->park_ns) {
					tsp = &ts;
					ts = ts_of_ns(e->park_ns);
				}
				fd = e->park_fd;
			} else {
				e->park_ns = 0;
			}
			atomic_store(&e->sleeping, 1);
			if ((!yield && atomic_load(&e->db_head)) || atomic_load(&e->cmd_pending)) {
				tsp = &ts;
				ts.tv_sec = 0;
				ts.tv_nsec = 0;
			}
		}
		if (tsp != &ts || ts.tv_sec || ts.tv_nsec) {
			/* asleep: application threads may take turns meanwhile */
			atomic_store(&e->sleep_until,
				     tsp ? e->now + (uint64_t)ts.tv_sec * 1000000000ull +
						   (uint64_t)ts.tv_nsec
					 : UINT64_MAX);
			nev = park_wait(e, fd, evs, tsp);
			atomic_store(&e->sleep_until, 0);
			if (fd == e->park_fd && nev > 0) {
				/* woken on the eventfd (a command, a doorbell,
				 * unpark): read the sockets too */
				int n2 = epoll_wait(e->epfd, evs + nev, MAX_EVENTS - nev, 0);

				nev += n2 > 0 ? n2 : 0;
			}
		} else if (fd == e->epfd) {
			nev = poll_sources(e, evs); /* spinning, as app_turn */
		} else {
			nev = eng_wait(fd, evs, MAX_EVENTS, tsp);
		}
		atomic_store(&e->sleeping, 0);
		work |= turn_end(e, evs, nev > 0 ? nev : 0, 1);
		if (work)
			last_work = e->now;
		dump_due(e);
	}
	turn_of = NULL;
	pthread_mutex_unlock(&e->run);
	return NULL;
}

/* CPUs this process may run on. */
static int cpus_allowed(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set))
		return 1;
	return CPU_COUNT(&set);
}

/* UROCE_PARK_US's default: how long at most a parked engine thread sleeps
 * before it looks whether the application still polls. Each such look
 * preempts a polling thread where cores are few: 1000 rather than 200 took
 * ib_send_lat 8 B p99 on 2 cores from 38 to 22 us and make bench-mpi's
 * small allreduce a quarter lower (docs/performance.md). */
#define PARK_US_DEFAULT 1000
#define POST_BATCH_DEFAULT 32

/* The environment's integer name in [lo, hi] into *v, or dflt when it is
 * unset or empty; anything else fails the open with a message. */
static int env_range(const char *name, unsigned long dflt, unsigned long lo, unsigned long hi,
		     const char *what, unsigned long *v)
{
	const char *k = getenv(name);
	char *end;

	*v = dflt;
	if (!k || !*k)
		return 0;
	errno = 0;
	*v = strtoul(k, &end, 10);
	if (errno || *end || *v < lo || *v > hi) {
		uroce_err("%s=%s: expected %s from %lu to %lu", name, k, what, lo, hi);
		return -1;
	}
	return 0;
}

/* UROCE_PROGRESS=auto|app|engine and UROCE_PARK_US (docs/design.md, "Who
 * runs the transport"). */
static int progress_init(struct uroce_engine *e)
{
	const char *p = getenv("UROCE_PROGRESS");
	unsigned long us;
	int n = cpus_allowed();

	/* auto by default (docs/design.md, "Who runs the transport"): app
	 * where the engine thread would queue for a core behind the
	 * application's pollers, engine where cores are spare */
	e->app_progress = 0;
	if (!p || !*p || !strcmp(p, "auto")) {
		e->app_progress = uroce_auto_app_progress(n);
		/* With cores to spare the engine thread also polls a while
		 * after its last work before sleeping, so that a reply does
		 * not wait for a wakeup: ib_send_lat 2 B on 16 cores, p50
		 * 11.0 -> 6.7 us (sockperf UDP 6.7) at no more CPU per run
		 * (docs/performance.md). UROCE_POLL_US overrides. */
		if (!e->app_progress && !getenv("UROCE_POLL_US"))
			e->spin_ns = AUTO_POLL_US * 1000ull;
		if (!e->idx)
			uroce_info("UROCE_PROGRESS=auto: %s progress (%d CPU%s allowed; application "
			   "threads take the engine's turns up to %d; polling %llu us after work)",
			   e->app_progress ? "app" : "engine", n, n == 1 ? "" : "s", AUTO_APP_MAX_CPUS,
			   (unsigned long long)(e->spin_ns / 1000));
	} else {
		if (!strcmp(p, "engine")) {
			e->app_progress = 0;
		} else if (!strcmp(p, "app")) {
			e->app_progress = 1;
		} else {
			uroce_err("UROCE_PROGRESS=%s: expected auto, app or engine", p);
			return -1;
		}
	}
	if (env_range("UROCE_PARK_US", PARK_US_DEFAULT, 16, 1000000, "microseconds", &us))
		return -1;
	e->park_max_ns = us * 1000ull;
	/* UROCE_POST_BATCH: posts in a row that may wait for the poller's
	 * turn (uroce_eng_doorbell); 0 sends every post at once */
	if (env_range("UROCE_POST_BATCH", POST_BATCH_DEFAULT, 0, 4096, "a number of posts", &us))
		return -1;
	e->post_batch = (unsigned)us;
	/* UROCE_REPLY_HOLD_US (docs/design.md, "ACK coalescing"): an
	 * engine thread that spins after work holds the ACK of a completed
	 * receive a few microseconds for the reply, which then carries it in
	 * one system call; never longer than the spin, so it never costs a
	 * wakeup, and never in application progress (its held ACK waits for
	 * the application's next turn instead). */
	if (env_range("UROCE_REPLY_HOLD_US", AUTO_REPLY_HOLD_US, 0, 1000000, "microseconds", &us))
		return -1;
	e->reply_hold_ns = !e->app_progress && e->spin_ns > us * 1000ull ? us * 1000ull : 0;
	/* UROCE_STALL_US (fault injection, src/net/fault.h): every turn
	 * loses the CPU this long, as on a host with more runnable threads
	 * than cores. */
	if (env_range("UROCE_STALL_US", 0, 0, 1000000, "microseconds", &us))
		return -1;
	e->stall_ns = us * 1000ull;
	/* UROCE_GPU_AHEAD=0|1, UROCE_GPU_RXBUFS=2..8 (docs/design.md, "GPU
	 * memory"): copying the next WQE's GPU bytes ahead, and the ring of
	 * buffers for payload on its way into GPU memory. */
	if (env_range("UROCE_GPU_AHEAD", 0, 0, 1, "a switch", &us))
		return -1;
	e->gpu_ahead = (int)us;
	if (env_range("UROCE_GPU_RXBUFS", 2, 2, UROCE_RXS_MAX, "buffers", &us))
		return -1;
	e->gpu_rxbufs = (int)us;
	return 0;
}

int uroce_eng_gpu_ahead(const struct uroce_engine *e)
{
	return e->gpu_ahead;
}

int uroce_eng_gpu_rxbufs(const struct uroce_engine *e)
{
	return e->gpu_rxbufs;
}

static int eng_new(struct uroce_ctx *ctx, unsigned idx)
{
	struct uroce_engine *e = calloc(1, sizeof(*e));
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	const char *s = getenv("UROCE_POLL_US");
	int ret;

	if (!e)
		return ENOMEM;
	e->ctx = ctx;
	e->idx = idx;
	e->cnt = idx ? &ctx->cntf->more[idx - 1] : &ctx->cntf->cnt;
	e->cmd_tail = &e->cmd_head;
	e->epfd = e->efd = e->park_fd = e->mailbox.fd = -1;
	for (unsigned i = 0; i < UROCE_MAX_SLOTS; i++)
		e->out[i].fd = -1;
	e->uid = getuid();
	e->max_flows = getenv("UROCE_FLOW_SOCKETS") ? atoi(getenv("UROCE_FLOW_SOCKETS"))
						   : FLOW_SOCKETS_DEFAULT;
	e->be = uroce_net_backend();
	if (!e->be) {
		uroce_err("UROCE_BACKEND=%s: no such network backend (there is: udp)",
			  getenv("UROCE_BACKEND"));
		free(e);
		return EINVAL;
	}
	e->spin_ns = (s ? strtoull(s, NULL, 0) : 0) * 1000ull;
	if ((s = getenv("UROCE_GSO")) && !strcmp(s, "0"))
		uroce_net_gso = 0;
	if ((s = getenv("UROCE_GRO")) && !strcmp(s, "0"))
		uroce_net_gro = 0;
	/* The CRC was chosen when the library loaded (wire_crc_select); a
	 * name it could not take is an error, or a warning when it only
	 * lacks this CPU. */
	if ((s = getenv("UROCE_CRC")) && *s && strcmp(s, "auto") && strcmp(s, wire_crc_name())) {
		if (wire_crc_select(s) == -EINVAL) {
			uroce_err("UROCE_CRC=%s: expected auto, zlib, isal or vpclmul", s);
			free(e);
			return EINVAL;
		}
		if (!idx)
			uroce_warn("UROCE_CRC=%s: not in this build or CPU; using %s", s,
				   wire_crc_name());
	}
	if (!idx)
		uroce_info("ICRC: %s CRC-32", wire_crc_name());
	if (uroce_fault_init(&e->fault) || queue_mark_init(e) || rx_rate_init(e)) {
		free(e);
		return EINVAL;
	}
	if (e->fault.enabled && !idx)
		uroce_info("fault injection on (%s): loss %g dup %g corrupt %g reorder %u delay %lu us",
			   e->fault.dir == FAULT_RX ? "rx" : e->fault.dir == FAULT_TX ? "tx" : "both",
			   e->fault.loss, e->fault.dup, e->fault.corrupt, e->fault.reorder,
			   (unsigned long)(e->fault.delay_ns / 1000));
	pthread_mutex_init(&e->cmd_lock, NULL);
	pthread_cond_init(&e->cmd_cond, NULL);
	pthread_mutex_init(&e->run, NULL);
	if (progress_init(e)) {
		free(e);
		return EINVAL;
	}
	e->rx_buf = malloc((size_t)RX_BATCH * RX_BUF);
	e->qtab = calloc(QTAB_SIZE, sizeof(*e->qtab));
	e->epfd = epoll_create1(EPOLL_CLOEXEC);
	e->park_fd = epoll_create1(EPOLL_CLOEXEC);
	e->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!e->rx_buf || !e->qtab || e->epfd < 0 || e->efd < 0 || e->park_fd < 0)
		goto fail;
	if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->efd, &ev) < 0 ||
	    epoll_ctl(e->park_fd, EPOLL_CTL_ADD, e->efd, &ev) < 0)
		goto fail;
	e->mailbox.fd = e->be->mailbox_open(&e->slot);
	if (e->mailbox.fd < 0) {
		errno = -e->mailbox.fd;
		uroce_err("no engine slot (%s): %d uroce device contexts are open in this network "
			  "namespace already", strerror(errno), UROCE_MAX_SLOTS);
		goto fail;
	}
	e->mailbox.kind = RXS_MAILBOX;
	if (watch(e, &e->mailbox))
		goto fail;
	ret = pthread_create(&e->thr, NULL, engine_main, e);
	if (ret) {
		errno = ret;
		goto fail;
	}
	pthread_setname_np(e->thr, "uroce-engine"); /* top, /proc/PID/task: where the time goes */
	e->running = 1;
	if (!idx)
		ctx->eng = e;
	atomic_store(&ctx->engs[idx], e);
	return 0;
fail:
	ret = errno ? errno : ENOMEM;
	if (e->epfd >= 0)
		close(e->epfd);
	if (e->efd >= 0)
		close(e->efd);
	if (e->park_fd >= 0)
		close(e->park_fd);
	if (e->mailbox.fd >= 0)
		close(e->mailbox.fd);
	free(e->rx_buf);
	free(e->qtab);
	free(e);
	return ret;
}

/* UROCE_ENGINES=auto|N: engine threads per context (docs/design.md,
 * "Several engine threads"). auto: one with application progress (its
 * turns run one engine), else one per 4 CPUs allowed, at most 4. */
static int engines_config(const struct uroce_engine *e0)
{
	const char *v = getenv("UROCE_ENGINES");
	char *end;
	long n;

	if (!v || !*v || !strcmp(v, "auto")) {
		if (e0->app_progress)
			return 1;
		return uroce_auto_engines(cpus_allowed());
	}
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || *end || n < 1 || n > UROCE_MAX_ENGINES) {
		uroce_err("UROCE_ENGINES=%s: expected auto or 1 to %d", v, UROCE_MAX_ENGINES);
		return -1;
	}
	if (n > 1 && e0->app_progress) {
		uroce_warn("UROCE_ENGINES=%ld: application progress runs one engine thread; "
			   "UROCE_PROGRESS=engine runs several",
			   n);
		return 1;
	}
	return (int)n;
}

int uroce_eng_start(struct uroce_ctx *ctx)
{
	int ret;

	pthread_mutex_init(&ctx->eng_lock, NULL);
	ret = eng_new(ctx, 0);
	if (ret)
		return ret;
	ctx->max_engs = engines_config(ctx->eng);
	if (ctx->max_engs < 0) {
		uroce_eng_stop(ctx);
		return EINVAL;
	}
	if (ctx->max_engs > 1)
		uroce_info("%s: up to %d engine threads, QPs spread over them", ctx->dev.ibname,
			   ctx->max_engs);
	return 0;
}

struct uroce_engine *uroce_eng_pick(struct uroce_ctx *ctx)
{
	struct uroce_engine *e;
	unsigned i;

	if (ctx->max_engs <= 1)
		return ctx->eng;
	pthread_mutex_lock(&ctx->eng_lock);
	i = ctx->next_eng++ % (unsigned)ctx->max_engs;
	e = atomic_load(&ctx->engs[i]);
	if (!e) {
		int err = eng_new(ctx, i);

		if (err) {
			/* no slot left, no thread: the QPs share the others */
			uroce_dbg("engine %u not started (%s)", i, strerror(err));
			ctx->max_engs = (int)i > 0 ? (int)i : 1;
			ctx->next_eng = 0;
		}
		e = atomic_load(&ctx->engs[i]);
		if (!e)
			e = ctx->eng;
	}
	pthread_mutex_unlock(&ctx->eng_lock);
	return e;
}

static void eng_free(struct uroce_engine *e)
{
	atomic_store(&e->stop, 1);
	wake(e);
	pthread_join(e->thr, NULL);
	e->running = 0;
	for (uint32_t i = 0; i < e->nheld; i++)
		free(e->held[i].buf);
	free(e->held);
	for (int i = 0; i < e->nports; i++)
		close(e->port[i].fd);
	for (int i = 0; i < e->nmcast; i++)
		close(e->mcast[i].src.fd);
	while (e->inbox)
		inbox_close(e, e->inbox);
	for (unsigned i = 0; i < UROCE_MAX_SLOTS; i++) {
		if (e->out[i].fd >= 0)
			close(e->out[i].fd);
		free(e->out[i].buf);
	}
	close(e->mailbox.fd);
	close(e->epfd);
	close(e->efd);
	close(e->park_fd);
	free(e->rx_buf);
	free(e->qtab);
	pthread_mutex_destroy(&e->run);
	pthread_mutex_destroy(&e->cmd_lock);
	pthread_cond_destroy(&e->cmd_cond);
	free(e);
}

void uroce_eng_stop(struct uroce_ctx *ctx)
{
	for (int i = UROCE_MAX_ENGINES - 1; i >= 0; i--) {
		struct uroce_engine *e = atomic_exchange(&ctx->engs[i], NULL);

		if (e)
			eng_free(e);
	}
	ctx->eng = NULL;
}
