/* The engine thread: doorbells, commands, timers, packet batching.
 *
 * Loop: run queued commands, drain doorbells, receive (epoll over the
 * QPs' rx sockets and the doorbell eventfd), then let every active QP send
 * (requester, READ responses, ACKs), flush the tx batch. While there is
 * work, or for UROCE_POLL_US after the last work, the loop spins with a
 * zero epoll timeout; then it sleeps until the next timer, a packet or a
 * doorbell, so an idle process uses no CPU. */
#include "engine.h"
#include "fault.h"
#include "pcap.h"
#include "trace.h"

#include <errno.h>
#include <netinet/udp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#define TX_BATCH 64
#define RX_BATCH 16
#define RX_BUF 65536              /* a GRO buffer */
#define PKT_MAX 9216
#define GSO_MAX_BYTES 65000
#define GSO_MAX_SEGS 64
#define MAX_EVENTS 64
#define TX_IOV (UROCE_MAX_SGE + 2)

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
};

struct eng_cmd {
	void (*fn)(void *);
	void *arg;
	int done;
	struct eng_cmd *next;
};

struct uroce_engine {
	struct uroce_ctx *ctx;
	pthread_t thr;
	int running;
	int epfd, efd;
	atomic_int sleeping;
	atomic_int stop;
	_Atomic(struct uroce_qp *) db_head;

	pthread_mutex_t cmd_lock;
	pthread_cond_t cmd_cond;
	struct eng_cmd *cmd_head, **cmd_tail;
	atomic_int cmd_pending;

	struct uroce_qp *active;     /* doubly linked list */
	struct uroce_qp *all;        /* every QP, for diagnostics */
	uint64_t now;
	uint64_t spin_ns;

	uint64_t queued;             /* datagrams handed to uroce_eng_send */

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
	/* GSO: runs of the batch glued into one datagram each */
	struct mmsghdr gso_msg[TX_BATCH];
	struct iovec gso_iov[TX_BATCH * TX_IOV];
	uint8_t gso_ctl[TX_BATCH][CMSG_SPACE(sizeof(uint16_t))];
	unsigned gso_cnt[TX_BATCH];

	/* fault injection */
	struct uroce_fault fault;
	struct held_pkt *held;
	uint32_t nheld, held_cap;
	uint64_t pkt_seq;            /* packets seen by the fault injector */

	/* rx */
	struct mmsghdr rx_msg[RX_BATCH];
	struct iovec rx_iov[RX_BATCH];
	uint8_t rx_ctl[RX_BATCH][2 * CMSG_SPACE(sizeof(int))];
	int rx_ce;                   /* the packet being handled was CE-marked */
	uint8_t rx_tos;              /* TOS byte of the datagram being handled */
	uint8_t *rx_buf;
};

uint64_t uroce_eng_now(struct uroce_engine *e)
{
	return e->now;
}

int uroce_eng_is_self(struct uroce_ctx *ctx)
{
	struct uroce_engine *e = ctx->eng;

	return !e || !e->running || pthread_equal(pthread_self(), e->thr);
}

static void wake(struct uroce_engine *e)
{
	uint64_t one = 1;

	if (write(e->efd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the engine is awake anyway */
	}
}

int uroce_eng_doorbell(struct uroce_ctx *ctx, struct uroce_qp *qp)
{
	struct uroce_engine *e = ctx->eng;

	if (!atomic_exchange(&qp->db_queued, 1)) {
		struct uroce_qp *old = atomic_load(&e->db_head);

		do {
			qp->db_next = old;
		} while (!atomic_compare_exchange_weak(&e->db_head, &old, qp));
	}
	if (atomic_load(&e->sleeping)) {
		wake(e);
		return 1;
	}
	return 0;
}

void uroce_eng_call(struct uroce_ctx *ctx, void (*fn)(void *), void *arg)
{
	struct uroce_engine *e = ctx->eng;
	struct eng_cmd c = { .fn = fn, .arg = arg };

	if (uroce_eng_is_self(ctx)) {
		fn(arg);
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

void uroce_eng_forget_mr(struct uroce_engine *e, const struct uroce_mr *mr)
{
	for (struct uroce_qp *qp = e->all; qp; qp = qp->all_next)
		uroce_stage_forget(qp, mr);
}

int uroce_eng_watch(struct uroce_engine *e, struct uroce_qp *qp)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = qp };

	return epoll_ctl(e->epfd, EPOLL_CTL_ADD, qp->rx_fd, &ev) < 0 ? errno : 0;
}

void uroce_eng_unwatch(struct uroce_engine *e, struct uroce_qp *qp)
{
	if (qp->rx_fd >= 0)
		epoll_ctl(e->epfd, EPOLL_CTL_DEL, qp->rx_fd, NULL);
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
	if (dst)
		h->dst = *dst;
	/* Reordering holds a packet behind 1..N later ones (at most 1 ms);
	 * delay holds it for the configured time. */
	h->due = e->now + (f->delay_ns ? f->delay_ns : 1000000);
	h->after_seq = f->reorder ? e->pkt_seq + 1 + uroce_fault_rand(f) % f->reorder : UINT64_MAX;
	e->nheld++;
	if (f->reorder)
		e->ctx->cnt->fault_reordered++;
	if (f->delay_ns)
		e->ctx->cnt->fault_delayed++;
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
		if (h.dir == FAULT_RX && h.qp && h.qp->rx_fd >= 0) {
			rx_packet(e, h.qp, h.buf, h.len);
			uroce_resp_flush_ack(e, h.qp, e->now);
		} else if (h.dir == FAULT_TX && h.qp) {
			if (sendto(h.fd, h.buf, h.len, 0, (struct sockaddr *)&h.dst, sizeof(h.dst)) > 0) {
				e->ctx->cnt->tx_pkts++;
				e->ctx->cnt->tx_bytes += h.len;
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
		if (uroce_fault_hit(f, f->loss)) {
			e->ctx->cnt->fault_dropped++;
			continue;
		}
		if (uroce_fault_hit(f, f->dup)) {
			e->ctx->cnt->fault_duplicated++;
			copies = 2;
		}
		for (int c = 0; c < copies; c++) {
			if (uroce_fault_hit(f, f->corrupt)) {
				uint64_t bit = uroce_fault_rand(f) % ((uint64_t)len * 8);

				pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
				e->ctx->cnt->fault_corrupted++;
			}
			if (f->reorder || f->delay_ns) {
				hold(e, e->cur_tx_qp[i], FAULT_TX, pkt, len, e->tx_fd,
				     (struct sockaddr_in *)m->msg_name);
				continue;
			}
			if (sendto(e->tx_fd, pkt, len, 0, m->msg_name, m->msg_namelen) > 0) {
				e->ctx->cnt->tx_pkts++;
				e->ctx->cnt->tx_bytes += len;
			}
		}
	}
	e->ntx = 0;
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
		       e->tx_len[i] <= seg) {
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
				e->ctx->cnt->tx_pkts += segs ? segs[i] : 1;
				e->ctx->cnt->tx_bytes += m[i].msg_len;
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
		e->ctx->cnt->drop_tx_full += segs ? segs[done] : 1;
		uroce_dbg("sendmmsg: %s", strerror(errno));
		done++;
	}
	return 0;
}

void uroce_eng_flush(struct uroce_engine *e)
{
	if (unlikely(e->fault.enabled && (e->fault.dir & FAULT_TX))) {
		flush_faulty(e);
		return;
	}
	if (uroce_net_gso && e->ntx > 1) {
		if (!send_all(e, e->gso_msg, gso_pack(e), e->gso_cnt)) {
			e->ntx = 0;
			return;
		}
		/* no GSO here: fall back to plain datagrams for good */
		uroce_info("UDP GSO unavailable (%s); sending datagram by datagram", strerror(errno));
		uroce_net_gso = 0;
	}
	send_all(e, e->tx_msg, e->ntx, NULL);
	e->ntx = 0;
}

/* Records a datagram of qp, sent (tx) or received, with the headers it
 * has on the wire. */
static void capture(struct uroce_qp *qp, int tx, const struct iovec *iov, int n)
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
		h.daddr = qp->peer_ip4;
		h.sport = qp->sport;
	} else {
		h.tos = qp->ctx->eng->rx_tos;
		if (qp->ctx->eng->rx_ce)
			h.tos |= 3; /* CE, also when fault injection marked it */
		h.smac = qp->peer_mac;
		h.dmac = qp->ctx->dev.mac;
		h.saddr = qp->peer_ip4;
		h.daddr = qp->src_ip4;
		h.sport = qp->peer_sport;
	}
	uroce_pcap_write(&h, iov, n);
}

void uroce_eng_send(struct uroce_engine *e, struct uroce_qp *qp, struct uroce_txpkt *p)
{
	struct wire_ip4 ip = {
		.saddr = qp->src_ip4, .daddr = qp->peer_ip4,
		.sport = qp->sport, .dport = ROCE_V2_PORT, .ip_id = 0,
	};
	unsigned i, pad;
	struct iovec *iov;
	size_t hl;
	uint32_t icrc;
	int n = 0;

	if (e->ntx && (e->tx_fd != qp->tx_fd || e->ntx == TX_BATCH))
		uroce_eng_flush(e);
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

	memset(&e->tx_dst[i], 0, sizeof(e->tx_dst[i]));
	e->tx_dst[i].sin_family = AF_INET;
	e->tx_dst[i].sin_port = htons(ROCE_V2_PORT);
	e->tx_dst[i].sin_addr.s_addr = qp->peer_ip4;
	memset(&e->tx_msg[i], 0, sizeof(e->tx_msg[i]));
	e->tx_msg[i].msg_hdr.msg_name = &e->tx_dst[i];
	e->tx_msg[i].msg_hdr.msg_namelen = sizeof(e->tx_dst[i]);
	e->tx_msg[i].msg_hdr.msg_iov = iov;
	e->tx_msg[i].msg_hdr.msg_iovlen = (size_t)n;
	e->cur_tx_qp[i] = qp;
	e->tx_len[i] = (uint32_t)(hl + p->paylen + pad + ICRC_LEN);
	if (unlikely(uroce_pcap_on))
		capture(qp, 1, iov, n);
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

	if (qp->last_cnp && e->now - qp->last_cnp < 50000)
		return;
	qp->last_cnp = e->now;
	memset(&tp, 0, sizeof(tp));
	tp.h.opcode = OP_CNP;
	tp.h.pkey = DEFAULT_PKEY;
	tp.h.dqpn = qp->dest_qpn;
	tp.h.becn = 1;
	tp.pay = &iov;
	tp.npay = 1;
	tp.paylen = sizeof(reserved);
	uroce_eng_send(e, qp, &tp);
	e->ctx->cnt->cnp_sent++;
}

static void rx_packet(struct uroce_engine *e, struct uroce_qp *qp, const uint8_t *buf,
		      size_t len)
{
	struct uroce_counters *c = e->ctx->cnt;
	struct wire_pkt p;
	struct iovec iov;
	struct wire_ip4 ip = {
		.saddr = qp->peer_ip4, .daddr = qp->src_ip4,
		.sport = qp->peer_sport, .dport = ROCE_V2_PORT, .ip_id = 0,
	};
	uint32_t icrc, got;
	uint16_t id;

	c->rx_pkts++;
	c->rx_bytes += len;
	if (unlikely(uroce_pcap_on)) {
		struct iovec whole = { (void *)buf, len };

		capture(qp, 0, &whole, 1);
	}
	memset(&p, 0, sizeof(p));
	if (wire_parse(buf, len, &p) != WIRE_OK) {
		c->drop_malformed++;
		return;
	}
	iov.iov_base = (void *)buf;
	iov.iov_len = len - ICRC_LEN;
	icrc = wire_icrc_v4(&ip, &iov, 1);
	got = (uint32_t)buf[len - 4] | (uint32_t)buf[len - 3] << 8 | (uint32_t)buf[len - 2] << 16 |
	      (uint32_t)buf[len - 1] << 24;
	if (icrc != got) {
		if (!wire_icrc_solve_id(icrc, got, 8 + len, &id)) {
			c->icrc_errors++;
			return;
		}
		c->icrc_id_recovered++;
	}
	if (p.dqpn != qp->qpn) {
		c->drop_bad_qpn++;
		return;
	}
	uroce_trace("pkt_rx", "qpn=0x%x op=%s psn=0x%x payload=%u bytes=%zu", qp->qpn,
		    wire_opcode_name(p.opcode), p.psn, p.paylen, len);
	if (unlikely(p.opcode == OP_CNP)) {
		/* Reaction point: counted. uroce does not shape its rate yet
		 * (no DCQCN), see docs/design.md. */
		c->cnp_handled++;
		return;
	}
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
	if (uroce_fault_hit(f, f->loss)) {
		e->ctx->cnt->fault_dropped++;
		return;
	}
	if (uroce_fault_hit(f, f->dup)) {
		e->ctx->cnt->fault_duplicated++;
		copies = 2;
	}
	if (uroce_fault_hit(f, f->ecn_mark))
		e->rx_ce = 1; /* as if a switch had marked it */
	for (int c = 0; c < copies && qp->rx_fd >= 0; c++) {
		if (uroce_fault_hit(f, f->corrupt)) {
			uint64_t bit = uroce_fault_rand(f) % ((uint64_t)len * 8);

			buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			e->ctx->cnt->fault_corrupted++;
		}
		if (f->reorder || f->delay_ns)
			hold(e, qp, FAULT_RX, buf, len, -1, NULL);
		else
			rx_packet(e, qp, buf, len);
	}
	release_held(e, 0);
}

static void rx_socket(struct uroce_engine *e, struct uroce_qp *qp)
{
	for (int round = 0; round < 4; round++) {
		int n;

		for (int i = 0; i < RX_BATCH; i++) {
			e->rx_iov[i].iov_base = e->rx_buf + (size_t)i * RX_BUF;
			e->rx_iov[i].iov_len = RX_BUF;
			memset(&e->rx_msg[i].msg_hdr, 0, sizeof(e->rx_msg[i].msg_hdr));
			e->rx_msg[i].msg_hdr.msg_iov = &e->rx_iov[i];
			e->rx_msg[i].msg_hdr.msg_iovlen = 1;
			e->rx_msg[i].msg_hdr.msg_control = e->rx_ctl[i];
			e->rx_msg[i].msg_hdr.msg_controllen = sizeof(e->rx_ctl[i]);
		}
		n = recvmmsg(qp->rx_fd, e->rx_msg, RX_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			break;
		for (int i = 0; i < n && qp->rx_fd >= 0; i++) {
			struct msghdr *m = &e->rx_msg[i].msg_hdr;
			uint8_t *buf = e->rx_buf + (size_t)i * RX_BUF;
			uint32_t len = e->rx_msg[i].msg_len, seg = len;

			if ((m->msg_flags & MSG_TRUNC) || !len) {
				e->ctx->cnt->drop_malformed++;
				continue;
			}
			e->rx_tos = 0;
			for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
				if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
					int gs;

					memcpy(&gs, CMSG_DATA(c), sizeof(gs));
					if (gs > 0)
						seg = (uint32_t)gs;
				} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
					e->rx_tos = *(uint8_t *)CMSG_DATA(c);
				}
			}
			/* A GRO buffer holds datagrams of seg bytes, the last
			 * one possibly shorter. */
			for (uint32_t off = 0; off < len && qp->rx_fd >= 0; off += seg) {
				uint32_t l = MIN(seg, len - off);

				/* ECN field 11: congestion experienced */
				e->rx_ce = (e->rx_tos & 3) == 3;
				if (unlikely(e->fault.enabled && (e->fault.dir & FAULT_RX)))
					rx_faulty(e, qp, buf + off, l);
				else
					rx_packet(e, qp, buf + off, l);
			}
		}
		uroce_resp_flush_ack(e, qp, e->now);
		if (qp->rxs.len && uroce_place_kick(qp))
			uroce_place_flush(qp); /* the error shows at the next ACK or CQE */
		if (n < RX_BATCH)
			break;
	}
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

		c->fn(c->arg);
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

	for (struct uroce_qp *qp = e->active; qp; qp = qp->act_next) {
		uint64_t d = uroce_req_next_deadline(qp);

		if (d < best)
			best = d;
		if (qp->resp.ack_deadline && qp->resp.ack_deadline < best)
			best = qp->resp.ack_deadline;
	}
	return best;
}

static void *engine_main(void *arg)
{
	struct uroce_engine *e = arg;
	struct epoll_event evs[MAX_EVENTS];
	uint64_t last_work, last_dump = 0;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	prctl(PR_SET_NAME, "uroce-engine", 0, 0, 0);
	uroce_trace_set_engine_thread();
	e->now = last_work = uroce_now_ns();
	while (!atomic_load(&e->stop)) {
		struct timespec ts, *tsp = &ts;
		int work = 0, nev;

		if (atomic_load(&e->cmd_pending)) {
			drain_doorbells(e);
			run_cmds(e);
			work = 1;
		}
		work |= drain_doorbells(e);
		ts.tv_sec = 0;
		ts.tv_nsec = 0;
		if (!work && !e->active && e->now - last_work > e->spin_ns) {
			tsp = NULL; /* nothing at all to wait for */
		} else if (!work && e->now - last_work > e->spin_ns) {
			uint64_t d = next_deadline(e);

			if (d == UINT64_MAX) {
				tsp = NULL;
			} else if (d > e->now) {
				ts.tv_sec = (time_t)((d - e->now) / 1000000000ull);
				ts.tv_nsec = (long)((d - e->now) % 1000000000ull);
			}
		}
		if (tsp != &ts || ts.tv_sec || ts.tv_nsec) {
			atomic_store(&e->sleeping, 1);
			if (atomic_load(&e->db_head) || atomic_load(&e->cmd_pending)) {
				tsp = &ts;
				ts.tv_sec = 0;
				ts.tv_nsec = 0;
			}
		}
		nev = epoll_pwait2(e->epfd, evs, MAX_EVENTS, tsp, NULL);
		atomic_store(&e->sleeping, 0);
		e->now = uroce_now_ns();
		for (int i = 0; i < nev; i++) {
			if (!evs[i].data.ptr) {
				uint64_t v;

				if (read(e->efd, &v, sizeof(v)) < 0) {
					/* EAGAIN: already drained */
				}
				continue;
			}
			rx_socket(e, evs[i].data.ptr);
			work = 1;
		}
		if (e->nheld)
			release_held(e, 0);
		for (struct uroce_qp *qp = e->active, *next; qp; qp = next) {
			uint64_t before = e->queued;
			uint32_t tail = atomic_load_explicit(&qp->sq_tail, memory_order_relaxed);

			next = qp->act_next;
			uroce_req_timers(e, qp, e->now);
			uroce_req_progress(e, qp, e->now);
			uroce_resp_progress(e, qp, e->now);
			uroce_resp_flush_ack(e, qp, e->now);
			/* Anything sent or retired is work: keep polling. */
			if (e->queued != before ||
			    atomic_load_explicit(&qp->sq_tail, memory_order_relaxed) != tail)
				work = 1;
			if (!uroce_req_busy(qp) && !uroce_resp_busy(qp))
				uroce_eng_deactivate(e, qp);
		}
		uroce_eng_flush(e);
		if (work)
			last_work = e->now;
		if (unlikely(uroce__log_level >= UROCE_LOG_DEBUG) && e->now - last_dump > 200000000ull) {
			last_dump = e->now;
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
					  qp->resp.msg, e->ctx->cnt->retrans_pkts,
					  e->ctx->cnt->timeouts, e->ctx->cnt->seq_naks_sent,
					  e->ctx->cnt->seq_naks_rcvd);
		}
	}
	return NULL;
}

int uroce_eng_start(struct uroce_ctx *ctx)
{
	struct uroce_engine *e = calloc(1, sizeof(*e));
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	const char *s = getenv("UROCE_POLL_US");
	int ret;

	if (!e)
		return ENOMEM;
	e->ctx = ctx;
	e->cmd_tail = &e->cmd_head;
	e->spin_ns = (s ? strtoull(s, NULL, 0) : 0) * 1000ull;
	if ((s = getenv("UROCE_GSO")) && !strcmp(s, "0"))
		uroce_net_gso = 0;
	if ((s = getenv("UROCE_GRO")) && !strcmp(s, "0"))
		uroce_net_gro = 0;
	if (uroce_fault_init(&e->fault)) {
		free(e);
		return EINVAL;
	}
	if (e->fault.enabled)
		uroce_info("fault injection on (%s): loss %g dup %g corrupt %g reorder %u delay %lu us",
			   e->fault.dir == FAULT_RX ? "rx" : e->fault.dir == FAULT_TX ? "tx" : "both",
			   e->fault.loss, e->fault.dup, e->fault.corrupt, e->fault.reorder,
			   (unsigned long)(e->fault.delay_ns / 1000));
	pthread_mutex_init(&e->cmd_lock, NULL);
	pthread_cond_init(&e->cmd_cond, NULL);
	e->rx_buf = malloc((size_t)RX_BATCH * RX_BUF);
	e->epfd = epoll_create1(EPOLL_CLOEXEC);
	e->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!e->rx_buf || e->epfd < 0 || e->efd < 0)
		goto fail;
	if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->efd, &ev) < 0)
		goto fail;
	ctx->eng = e;
	ret = pthread_create(&e->thr, NULL, engine_main, e);
	if (ret) {
		ctx->eng = NULL;
		errno = ret;
		goto fail;
	}
	e->running = 1;
	return 0;
fail:
	ret = errno ? errno : ENOMEM;
	if (e->epfd >= 0)
		close(e->epfd);
	if (e->efd >= 0)
		close(e->efd);
	free(e->rx_buf);
	free(e);
	return ret;
}

void uroce_eng_stop(struct uroce_ctx *ctx)
{
	struct uroce_engine *e = ctx->eng;

	if (!e)
		return;
	atomic_store(&e->stop, 1);
	wake(e);
	pthread_join(e->thr, NULL);
	e->running = 0;
	for (uint32_t i = 0; i < e->nheld; i++)
		free(e->held[i].buf);
	free(e->held);
	close(e->epfd);
	close(e->efd);
	free(e->rx_buf);
	pthread_mutex_destroy(&e->cmd_lock);
	pthread_cond_destroy(&e->cmd_cond);
	free(e);
	ctx->eng = NULL;
}
