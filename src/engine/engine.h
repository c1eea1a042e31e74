/* The transport engine: the software NIC behind the verbs objects.
 *
 * Threads. Each open device context has one or more engine threads
 * (UROCE_ENGINES), each running its own QPs. Application
 * threads touch only the rings (SQ, RQ, CQ) and the doorbell; everything
 * else (packets, PSNs, timers, QP transport state) belongs to the engine
 * thread. Control verbs that change transport state (modify/destroy QP,
 * deregistering memory, destroying a CQ) run their critical part on the
 * engine thread through uroce_eng_call(), so no transport state has a lock.
 *
 * The CQE format is struct ibv_wc itself, so ibv_poll_cq copies entries out
 * of the ring with no translation. */
#ifndef UROCE_ENGINE_H
#define UROCE_ENGINE_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "mem.h"
#include "util.h"
#include "net.h"
#include "wire.h"

#define UROCE_MAX_SGE 32
#define UROCE_MAX_INLINE 512
#define UROCE_MAX_QP_WR 16384
#define UROCE_MAX_CQE (1 << 20)
#define UROCE_MAX_RD_ATOMIC 16
#define UROCE_MAX_MSG (1u << 31)
#define UROCE_MAX_QP 65536
#define UROCE_MAX_MCAST_GRP 64       /* groups per device context */
#define UROCE_MAX_MCAST_QP_ATTACH 16 /* QPs per group per device context */
/* GRH area in front of every UD receive (IBA 11.4.1.2; RoCEv2 IPv4: the
 * IPv4 header in its last 20 bytes). */
#define UROCE_GRH_LEN 40
#define UROCE_MCAST_QPN 0xffffffu     /* DestQP of multicast datagrams (IBA 10.5.2.2) */
#define UROCE_MAX_XSRQ 4096           /* XRC SRQs per device context */

/* Selective repeat (UROCE_RETRANS=sr): PSNs tracked ahead of the
 * cumulative point, at most the largest window (UROCE_WINDOW <= 4096). */
#define SR_BITS 4096u

struct uroce_engine;
struct uroce_ctx;

#include "counters.h"
#include "cc.h"

struct uroce_pd {
	struct ibv_pd ibpd;
	atomic_int refs;             /* MRs, QPs, SRQs using it */
};

struct uroce_comp_channel {
	struct ibv_comp_channel ch;  /* ch.fd is an eventfd in semaphore mode */
	pthread_mutex_t lock;
	struct uroce_cq **q;         /* pending events, a ring of CQs */
	uint32_t qcap, qhead, qlen;
};

struct uroce_cq {
	struct ibv_cq ibcq;
	struct ibv_wc *ring;
	uint32_t size;               /* entries, power of 2 */
	_Atomic uint32_t prod;       /* written by the engine */
	_Atomic uint32_t cons;       /* written by pollers */
	pthread_spinlock_t poll_lock;
	/* serialises the engines that complete into it (QPs on several
	 * engine threads may share a CQ) */
	pthread_spinlock_t push_lock;
	atomic_int armed;            /* 0, 1 next completion, 2 solicited only */
	struct uroce_comp_channel *chan;
	atomic_int refs;             /* QPs using it */
	uint32_t events_pending;     /* queued in the channel, not yet returned */
};

/* A receive WQE as stored in a RQ or SRQ ring. */
struct uroce_rwqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t length;             /* sum of SGE lengths */
	struct ibv_sge sge[];
};

struct uroce_rq {
	uint8_t *ring;               /* entries of 'stride' bytes */
	uint32_t size;               /* power of 2 */
	uint32_t max_wr, max_sge, stride;
	_Atomic uint32_t head;       /* producer (ibv_post_recv) */
	_Atomic uint32_t tail;       /* consumer (engine) */
	pthread_spinlock_t lock;     /* serialises posters */
	pthread_spinlock_t take_lock; /* serialises consumers: an SRQ's QPs may
				       * run on several engine threads */
};

/* An XRC domain (ibv_open_xrcd(3)): XRC SRQs and target QPs of one
 * process that belong together. */
struct uroce_xrcd {
	struct ibv_xrcd ibxrcd;
	int opens;                   /* ibv_open_xrcd calls not closed (context's xsrq_lock) */
	atomic_int refs;             /* SRQs and target QPs in it */
	dev_t dev;                   /* the inode it was opened for (fd), or 0 */
	ino_t ino;
	struct uroce_xrcd *next;     /* the context's XRCDs opened by inode */
};

struct uroce_srq {
	struct ibv_srq ibsrq;
	struct uroce_pd *pd;
	/* XRC SRQ: its domain, CQ and number (the XRCETH of a request names
	 * it); 0 for a basic SRQ */
	struct uroce_xrcd *xrcd;
	struct uroce_cq *cq;
	uint32_t srqn;
	struct uroce_rq rq;
	uint32_t limit;              /* srq_limit: async event when fewer WQEs remain */
	atomic_int armed_limit;
	atomic_int refs;
};

enum swqe_flags {
	SWQE_SIGNALED = 1 << 0,
	SWQE_SOLICITED = 1 << 1,
	SWQE_INLINE = 1 << 2,
	SWQE_FENCE = 1 << 3,
	SWQE_ASSIGNED = 1 << 4,      /* has its PSN range */
	SWQE_KEYED = 1 << 5,         /* stage_key given early (a prefetch) */
};

/* Pinned buffers a QP gathers GPU placements in, at most (UROCE_GPU_RXBUFS). */
#define UROCE_RXS_MAX 8

struct uroce_swqe {
	uint64_t wr_id;
	uint32_t opcode;             /* enum ibv_wr_opcode */
	uint32_t flags;              /* enum swqe_flags */
	uint32_t imm_be;             /* immediate data, network order */
	uint32_t rkey;
	uint64_t remote_addr;
	uint64_t compare_add, swap;
	uint32_t length;             /* message bytes */
	uint32_t num_sge;
	/* engine state */
	uint32_t first_psn;          /* PSN of the first packet */
	uint32_t npkts;              /* PSNs the message uses */
	uint32_t resp_next;          /* READ: next response PSN expected */
	uint32_t req_hi;             /* READ: PSN after the last response requested */
	uint32_t status;             /* enum ibv_wc_status once decided */
	uint64_t atomic_orig;
	uint64_t stage_key;          /* staging identity (unique per WQE) */
	uint32_t xrc_srqn;           /* XRC initiator: the target's XRC SRQ */
	/* UD: the destination from the address handle and the WR */
	uint32_t ud_ip4;             /* network order */
	uint32_t ud_qpn, ud_qkey;
	uint8_t ud_tos;
	struct ibv_sge *sge;         /* num_sge entries (qp->sq_sge) */
	uint8_t *inl;                /* inline bytes (qp->sq_inline) */
};

/* Responder resources for READ responses being sent. */
struct uroce_rd_res {
	uint32_t psn;                /* PSN of the first response */
	uint32_t rkey;
	uint64_t va;
	uint32_t len;                /* bytes */
	uint32_t sent;               /* bytes sent so far */
	uint64_t stage_key;
	uint32_t end;                /* stop after this many bytes (a retried
				      * READ superseded the rest) */
	int dup;                     /* the re-execution of a duplicate READ */
};

struct uroce_atomic_res {
	uint32_t psn;
	int valid;
	uint64_t orig;
};

enum { RESP_MSG_NONE, RESP_MSG_SEND, RESP_MSG_WRITE };

/* Selective repeat, responder: which PSNs after ePSN are placed, and the
 * multi-packet WRITEs whose FIRST packet was seen (in order or not), so
 * that their later packets can be placed before ePSN reaches them. */
#define SR_WCTX 32
struct uroce_sr_wctx {
	uint32_t first_psn, npkts;   /* npkts 0: slot free */
	uint32_t rkey, len;
	uint64_t va;
};
struct uroce_sr_rx {
	uint64_t placed[SR_BITS / 64];
	struct uroce_sr_wctx w[SR_WCTX];
	uint32_t last;               /* slot of the last hit */
};

/* Something the engine receives from (epoll data.ptr): a port socket, a
 * QP's flow socket or the mailbox (net.h). */
enum { RXS_PORT, RXS_FLOW, RXS_MAILBOX, RXS_INBOX, RXS_MCAST };
struct uroce_rxsrc {
	int fd;
	int kind;                    /* RXS_*; INBOX: a connection to the mailbox */
	uint32_t ip4;                /* local address (port and flow sockets) */
	uint32_t drops;              /* SO_RXQ_OVFL: the kernel's drop count so far */
	struct uroce_rxsrc *next, *prev; /* the engine's inboxes */
};

struct uroce_qp {
	struct ibv_qp_ex qpx;        /* qpx.qp_base is the ibv_qp */
	struct uroce_ctx *ctx;
	struct uroce_engine *eng;    /* the engine thread that runs it (set at creation) */
	struct uroce_counters *cnt;  /* that engine's counters */
	enum ibv_qp_type type;       /* IBV_QPT_RC, UC, UD, XRC_SEND or XRC_RECV */
	struct uroce_xrcd *xrcd;     /* XRC target: its domain */
	struct uroce_pd *pd;
	struct uroce_cq *scq, *rcq;
	struct uroce_srq *srq;
	struct uroce_rq rq;
	struct ibv_qp_cap cap;
	int sq_sig_all;

	/* Attributes as set through ibv_modify_qp (for ibv_query_qp). */
	struct ibv_qp_attr attr;
	_Atomic int state;           /* enum ibv_qp_state, read by posters */

	/* SQ ring. */
	struct uroce_swqe *sq;
	struct ibv_sge *sq_sge;      /* sq size * max_sge */
	uint8_t *sq_inline;          /* sq size * max_inline */
	uint32_t sq_size;            /* power of 2 */
	_Atomic uint32_t sq_head;    /* next slot to post (posters) */
	_Atomic uint32_t sq_tail;    /* oldest slot not retired (engine) */
	pthread_spinlock_t sq_lock;

	void *wrx;                   /* ibv_wr_* pending list (verbs.c) */

	/* Staging for sends out of CUDA memory (engine thread): a window of
	 * device memory copied to pinned host memory, packets point into it;
	 * while it is served, the next window of the same message is copied
	 * into the other buffer on the QP's own stream (docs/design.md). */
	struct {
		uint8_t *buf[2];
		size_t cap;
		int pinned[2];
		int cur;                    /* buf[cur] holds the window served */
		const struct uroce_mr *mr;  /* whose bytes are staged, NULL: none */
		uint64_t key;               /* the WQE or READ they belong to */
		uint64_t next_key;
		uint64_t va;                /* first staged address (MR's iova space) */
		size_t len;
		const struct uroce_mr *pf_mr; /* the next window, in buf[cur ^ 1] */
		uint64_t pf_key, pf_va;
		size_t pf_len;
		void *pf_ev;                /* set when its copy finished */
	} stage;
	/* Staging for placements into CUDA memory: contiguous payloads are
	 * gathered in pinned memory and copied to the GPU asynchronously,
	 * one buffer filling while the others are copied (a ring of n,
	 * UROCE_GPU_RXBUFS); nothing (ACK, CQE, READ) reveals them as done
	 * before their copy completed. */
	struct {
		uint8_t *buf[UROCE_RXS_MAX];
		size_t cap, len;            /* len: bytes gathered in buf[cur] */
		int pinned[UROCE_RXS_MAX];
		int cur, n;                 /* n: buffers in the ring, 0 until chosen */
		int inflight;               /* copies in flight (busy[] set) */
		const struct uroce_mr *mr;
		uint64_t va;
		void *ev[UROCE_RXS_MAX];
		int busy[UROCE_RXS_MAX];    /* buf[i]'s copy to the GPU is in flight */
	} rxs;
	void *cu_stream, *cu_ctx;    /* the QP's copy stream and its CUDA context */

	/* Selective repeat state, allocated on first use, cleared by resets,
	 * freed with the QP. srx: responder (UROCE_RETRANS=sr). sr_sack:
	 * requester, a bitmap of SR_BITS bits (PSN mod SR_BITS) of the PSNs
	 * after una the responder reported placed. */
	struct uroce_sr_rx *srx;
	uint64_t *sr_sack;
	int sr;                      /* UROCE_RETRANS=sr: the responder places ahead */
	/* Reordering (docs/design.md): packets after a gap wait in ooo until
	 * it fills; the gap is reported once gap_after packets came after it
	 * or it is gap_wait_ns old. */
	struct uroce_ooo *ooo;
	uint64_t *rd_got;            /* requester: READ responses placed ahead (PSN mod SR_BITS) */
	uint32_t gap_after;
	uint64_t gap_wait_ns;

	/* Doorbell (lock-free stack of QPs with new work). */
	struct uroce_qp *db_next;
	atomic_int db_queued;

	/* ---- engine thread only below ---- */
	uint32_t qpn, dest_qpn;
	uint32_t peer_ip4, src_ip4;  /* network order */
	uint16_t sport, peer_sport;
	uint8_t peer_mac[6];         /* for captures; zero until known */
	uint8_t tos;                 /* IP TOS of our packets (GRH traffic class) */
	uint64_t last_cnp;           /* when we last sent a CNP, ns */
	uint8_t peer_mac_tries;
	int tx_fd;
	struct uroce_rxsrc flow;     /* flow socket, fd -1 while there is none */
	uint16_t flow_sport;         /* the peer port it is connected to */
	uint8_t relearns;            /* times it was pointed at another port */
	uint8_t rx_on;               /* RTR or later: in the engine's QPN table */
	uint8_t mcast_if;            /* UD: the send socket has IP_MULTICAST_IF */
	uint8_t nmcast;              /* UD: multicast groups attached */
	uint8_t touched;             /* on the engine's touched list */
	struct uroce_qp *touch_next;
	uint32_t pmtu;               /* bytes: min(path_mtu, active mtu) */
	int eng_state;               /* transport state */
	int in_active;               /* on the engine's active list */
	struct uroce_qp *all_next, *all_prev; /* every QP of the engine */
	struct uroce_qp *act_next, *act_prev;

	struct {
		uint32_t psn;            /* next PSN to send */
		uint32_t una;            /* oldest PSN not known done */
		uint32_t cur;            /* SQ index being sent */
		uint32_t cur_pkt;        /* packet index inside it */
		uint32_t rd_out;         /* READ/atomic requests outstanding */
		uint32_t max_rd;         /* max_rd_atomic (at least 1) */
		uint32_t window;         /* packets in flight at most (congestion window) */
		uint32_t window_max;     /* its ceiling */
		uint32_t window_acc;     /* additive-increase accumulator */
		uint32_t last_una;       /* una at the last window update */
		int aimd;                /* UROCE_AIMD=1: halve the window on loss */
		int slow_start;          /* regrowing after a timeout: +acked per ACK */
		int retry_left, rnr_left;
		int heard;               /* the peer QP sent something since the last timeout */
		int excused;             /* timeouts not charged since the last progress */
		int deferred;            /* timeouts deferred for lag since the last progress */
		uint64_t deadline;       /* local ACK timeout, ns; 0 = off */
		uint64_t fast_deadline;  /* early retransmission, ns; 0 = off */
		uint64_t fast_rto_ns;    /* early retransmission interval */
		uint64_t fast_cur_ns;    /* the same after backoff */
		uint64_t srtt_ns, rttvar_ns; /* smoothed round trip (RFC 6298) */
		uint64_t rtt_start;      /* a timed packet is in flight since then */
		uint32_t rtt_psn;        /* its PSN */
		uint32_t hi_psn;         /* next PSN never sent before */
		uint64_t fast_min_ns;    /* UROCE_RTO_US */
		uint32_t gap_psn;        /* READ response gap already rewound for */
		uint64_t stall_until;    /* CQ was full: try retiring again then */
		uint64_t timeout_ns;     /* 4.096 us * 2^timeout; 0 = infinite */
		uint64_t rnr_until;      /* no sending before this (RNR wait) */
		uint32_t rewind_psn;     /* pending go-back-N target */
		int rewind;
		int error;               /* QP moving to error: status to report */
		uint32_t pkts_since_ackreq;
		/* selective repeat (only with a peer whose NAKs carry SACKs) */
		uint32_t sack_base;      /* sr_sack bits below this are cleared */
		uint32_t sack_hi;        /* one past the highest PSN reported received */
		uint32_t rtx_next;       /* next PSN the selective scan looks at */
		uint32_t rtx_lim;        /* the scan stops here */
		uint32_t rec_end;        /* the recovery episode ends when una passes this */
		int in_rec;              /* in a recovery episode */
		int sr_tried;            /* a timer resent selectively since progress */
		int probed;              /* the early timer sent its one probe since progress */
		uint64_t rec_deadline;   /* recovery: resend the holes again then, ns */
		uint64_t una_sent_at;    /* when the PSN at una was last (re)sent or became una */
		/* a gap in READ responses: since when (0: none), responses after it */
		uint64_t rd_gap_start;
		uint32_t rd_gap_pkts;
		struct uroce_cc cc;      /* DCQCN reaction point and pacer (cc.h) */
	} req;

	struct {
		uint32_t epsn;           /* expected PSN */
		uint32_t msn;            /* 24-bit message sequence number */
		int msg;                 /* RESP_MSG_* in progress */
		uint32_t msg_off;        /* bytes placed so far */
		uint32_t wr_rkey;        /* WRITE in progress */
		uint64_t wr_va;
		uint32_t wr_len;
		int have_rwqe;
		uint64_t rwqe_id;
		uint32_t rwqe_nsge, rwqe_len;
		struct ibv_sge rwqe_sge[UROCE_MAX_SGE];
		int nak_sent;            /* sequence NAK sent for epsn */
		int ack_now;             /* an ACK is due at the end of this batch */
		uint64_t ack_held;       /* held in this application turn (its id) */
		int answer;              /* a receive completed: a reply may follow */
		uint64_t hold_until;     /* the engine holds the ACK for it until */
		uint32_t unacked;        /* packets since the last ACK */
		uint64_t ack_deadline;
		struct uroce_rd_res rd[UROCE_MAX_RD_ATOMIC * 2];
		uint32_t rd_head, rd_len;
		struct uroce_atomic_res atm[UROCE_MAX_RD_ATOMIC];
		uint32_t atm_next;
		int comm_est;
		int uc_drop;             /* UC: drop until the next FIRST/ONLY (9.8.3) */
		/* selective repeat: the run of placed PSNs to report next */
		uint32_t blk_lo, blk_hi;
		int sack_due;
		int gap_sacked;          /* a SACK went out for the gap at ePSN */
		/* the gap at ePSN: since when (0: none), packets after it */
		uint64_t gap_start;
		uint32_t gap_pkts;
	} resp;
};

static inline int sr_test(const uint64_t *m, uint32_t psn)
{
	return (int)((m[(psn % SR_BITS) / 64] >> (psn % 64)) & 1);
}
static inline void sr_set(uint64_t *m, uint32_t psn)
{
	m[(psn % SR_BITS) / 64] |= 1ull << (psn % 64);
}
static inline void sr_clear(uint64_t *m, uint32_t psn)
{
	m[(psn % SR_BITS) / 64] &= ~(1ull << (psn % 64));
}
/* Clears / sets the bits of n PSNs from psn on. */
void uroce_sr_clear_range(uint64_t *m, uint32_t psn, uint32_t n);
void uroce_sr_set_range(uint64_t *m, uint32_t psn, uint32_t n);
/* A SACK's MSN field (docs/wire.md): the run [lo, hi] placed ahead of the
 * NAK's PSN (ePSN) as hi - ePSN (12 bits) and the run's length - 1. */
#define SACK_OFF_SHIFT 12
#define SACK_LEN_MASK 0xfffu

/* An address handle (UD): where its datagrams go. */
struct uroce_ah {
	struct ibv_ah ibah;
	struct ibv_ah_attr attr;
	uint32_t ip4;                /* destination, network order (a group for multicast) */
	uint8_t tos;                 /* GRH traffic class */
};

static inline struct uroce_ah *to_uah(struct ibv_ah *a)
{
	return container_of(a, struct uroce_ah, ibah);
}

/* The async event queue of a context (ibv_get_async_event). Each object
 * with events handed out and not yet acknowledged has an entry in out[]
 * with their count: destroying it waits until the count is back to zero
 * (ibv_get_async_event(3)), and its events still queued are dropped
 * (uroce_async_forget). */
struct uroce_async_out {
	const void *obj;
	uint32_t n;
};
struct uroce_async {
	pthread_mutex_t lock;
	pthread_cond_t acked;
	struct ibv_async_event *q;
	uint32_t cap, head, len;
	struct uroce_async_out *out;
	uint32_t nout, outcap;
	int efd;                     /* context.async_fd, an eventfd (semaphore) */
};

struct uroce_ctx {
	struct uroce_netdev dev;
	/* XRC SRQs by number - 1 (written by the app under xsrq_lock,
	 * removed through an engine call; read by the engine) */
	_Atomic(struct uroce_srq *) *xsrq;
	pthread_mutex_t xsrq_lock;
	struct uroce_xrcd *xrcds;    /* opened by inode (fd), under xsrq_lock */
	/* Engine threads (UROCE_ENGINES, docs/design.md "Several engine
	 * threads"): eng is the first, started with the context; the others
	 * start when a QP is first given to them, and stay till close.
	 * Written under eng_lock, read without it once non-NULL. */
	struct uroce_engine *eng;
	_Atomic(struct uroce_engine *) engs[UROCE_MAX_ENGINES];
	int max_engs;                /* how many this context may start */
	unsigned next_eng;           /* round robin over them for new QPs */
	pthread_mutex_t eng_lock;
	struct uroce_mr_table mrs;
	struct uroce_async async;
	struct uroce_stat_file *cntf; /* the stat file, or a private copy without /dev/shm */
	struct uroce_counters *cnt;  /* the first engine's (cntf->cnt); each engine writes its own */
	struct uroce_stat_file *stat;
	char stat_path[96];
	atomic_int nqps;
	_Atomic(void *) cuctx;       /* CUDA context of the last CUDA MR (engine threads) */
	struct verbs_context vctx;   /* must be last: ibv_context ends it */
};

static inline struct uroce_ctx *to_uctx(struct ibv_context *c)
{
	return container_of(c, struct uroce_ctx, vctx.context);
}
static inline struct uroce_qp *to_uqp(struct ibv_qp *q)
{
	return container_of(q, struct uroce_qp, qpx.qp_base);
}
static inline struct uroce_cq *to_ucq(struct ibv_cq *c)
{
	return container_of(c, struct uroce_cq, ibcq);
}
static inline struct uroce_pd *to_upd(struct ibv_pd *p)
{
	return container_of(p, struct uroce_pd, ibpd);
}
static inline struct uroce_srq *to_usrq(struct ibv_srq *s)
{
	return container_of(s, struct uroce_srq, ibsrq);
}
static inline struct uroce_xrcd *to_uxrcd(struct ibv_xrcd *x)
{
	return container_of(x, struct uroce_xrcd, ibxrcd);
}

/* Whether the QP takes packets from its peer: RTR, RTS, SQD or SQE (IBA
 * 10.3.1; in RESET, INIT and ERR they are dropped). */
static inline int uroce_qp_takes_packets(const struct uroce_qp *qp)
{
	return qp->eng_state == IBV_QPS_RTR || qp->eng_state == IBV_QPS_RTS ||
	       qp->eng_state == IBV_QPS_SQD || qp->eng_state == IBV_QPS_SQE;
}

/* Whether the QP's requests are acknowledged (RC, XRC): timers, retries,
 * READ and atomics. */
static inline int uroce_qp_waits_acks(const struct uroce_qp *qp)
{
	return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_XRC_SEND ||
	       qp->type == IBV_QPT_XRC_RECV;
}

/* The transport bits of a QP's opcodes (IBA 9.2.1 table 38). */
static inline uint8_t uroce_qp_transport(const struct uroce_qp *qp)
{
	switch (qp->type) {
	case IBV_QPT_UC:
		return OP_UC;
	case IBV_QPT_UD:
		return OP_UD;
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		return OP_XRC;
	default:
		return OP_RC;
	}
}
static inline struct uroce_mr *to_umr(struct ibv_mr *m)
{
	return container_of(m, struct uroce_mr, ibmr);
}

/* engine.c */
int uroce_eng_start(struct uroce_ctx *ctx);
void uroce_eng_stop(struct uroce_ctx *ctx);
/* Runs fn(arg) on every engine thread of the context, one after the
 * other, and waits for each: after it returns, no engine still works with
 * what fn took away. uroce_eng_cur() is the engine fn runs on. */
void uroce_eng_call(struct uroce_ctx *ctx, void (*fn)(void *), void *arg);
/* Runs fn(arg) on the QP's engine thread and waits for it. */
void uroce_eng_call_qp(struct uroce_qp *qp, void (*fn)(void *), void *arg);
/* Runs fn(arg) once, while every engine thread of the context waits. */
void uroce_eng_call_excl(struct uroce_ctx *ctx, void (*fn)(void *), void *arg);
struct uroce_engine *uroce_eng_cur(void);
/* The engine a new QP goes to (round robin, starting it if needed); the
 * first engine when another cannot start. */
struct uroce_engine *uroce_eng_pick(struct uroce_ctx *ctx);
struct uroce_counters *uroce_eng_counters(struct uroce_engine *e);
/* Tells the engine a QP has new send (or flush) work. Lock-free. behind:
 * a one-packet message, with other WQEs of the QP outstanding before it,
 * so a polling application will take a turn soon (the post may be left
 * to it when it comes in a burst). 0 when nothing was done here; 1 the
 * engine thread was woken; 2 sent from this thread's turn; 3 left to the
 * poller's next turn. */
int uroce_eng_doorbell(struct uroce_qp *qp, int behind);
/* UROCE_PROGRESS=app (the default): an application thread in
 * ibv_poll_cq/ibv_post_send runs the engine's turn itself when the engine
 * is idle (1 if it did); polling 0: a poll of an armed CQ, which reads
 * the sockets but does not park the engine thread (the program is about to
 * sleep on its channel); unpark: it stops polling (arms a CQ). */
int uroce_eng_app_turn(struct uroce_ctx *ctx, int polling);
void uroce_eng_polled(struct uroce_ctx *ctx);
/* which application thread's turn is running (they count up), 0: none */
uint64_t uroce_eng_app_turn_id(const struct uroce_engine *e);
void uroce_eng_unpark(struct uroce_ctx *ctx);
/* How long the engine thread's turn may hold an ACK for the reply its
 * completion is about to cause (UROCE_REPLY_HOLD_US), 0: send it now;
 * nonzero only for an engine thread that spins anyway and has nothing
 * else queued to send this turn. */
uint64_t uroce_eng_reply_hold_ns(const struct uroce_engine *e);
void uroce_eng_activate(struct uroce_engine *e, struct uroce_qp *qp);
void uroce_eng_deactivate(struct uroce_engine *e, struct uroce_qp *qp);
void uroce_eng_attach(struct uroce_engine *e, struct uroce_qp *qp);
void uroce_eng_detach(struct uroce_engine *e, struct uroce_qp *qp);
/* Receive demultiplexing (docs/design.md): the engine's slot (the top 8
 * bits of its QPNs) and backend; a QP entering RTR joins the engine's QPN
 * table (its address's port socket opened on first use), leaves it at
 * reset or destruction. */
unsigned uroce_eng_slot(const struct uroce_engine *e);
const struct uroce_backend *uroce_eng_backend(const struct uroce_engine *e);
int uroce_eng_bind_qp(struct uroce_engine *e, struct uroce_qp *qp);
void uroce_eng_unbind_qp(struct uroce_engine *e, struct uroce_qp *qp);

/* Multicast (UD): a QP joins or leaves the IPv4 group (network order)
 * on the engine thread. 0 or an errno. */
int uroce_eng_mcast_attach(struct uroce_engine *e, struct uroce_qp *qp, uint32_t group);
int uroce_eng_mcast_detach(struct uroce_engine *e, struct uroce_qp *qp, uint32_t group);
void uroce_eng_mcast_detach_all(struct uroce_engine *e, struct uroce_qp *qp);

/* What the engine knows of a received datagram beyond its UDP payload. */
struct uroce_rx_meta {
	uint32_t saddr, daddr;       /* network order (daddr: a group for multicast) */
	uint16_t sport;              /* host order */
	uint16_t ip_id;              /* as the ICRC check found it */
	uint16_t seg;                /* segment of its GRO buffer: the ID to try first */
	uint8_t tos;                 /* IP TOS byte */
	uint32_t len;                /* UDP payload bytes */
};

/* Packet output: header bytes plus payload iovecs; the engine adds pad
 * and ICRC and batches the datagram. */
struct uroce_txpkt {
	uint32_t dst_ip4;            /* UD: destination (network order); 0: the QP's peer */
	struct wire_pkt h;
	const struct iovec *pay;     /* payload pieces (may be NULL) */
	int npay;
	uint32_t paylen;
};
void uroce_eng_send(struct uroce_engine *e, struct uroce_qp *qp, struct uroce_txpkt *p);
void uroce_eng_flush(struct uroce_engine *e);
/* len (<= 4096) bytes at src copied into the engine's bounce buffer
 * without trusting that src is still mapped: the copy, or NULL when src
 * is not readable (engine.c). The buffer holds one packet's payload:
 * send it, then uroce_eng_flush, before the next call. */
const void *uroce_eng_bounce(struct uroce_engine *e, const void *src, size_t len);
uint64_t uroce_eng_now(struct uroce_engine *e);
/* The engine's longest recent turn, wall time (engine.c, turn_lag). */
uint64_t uroce_eng_lag_ns(const struct uroce_engine *e);

/* Host pointer to len bytes at va of a CUDA MR, staged (qp.c). */
uint8_t *uroce_stage(struct uroce_qp *qp, const struct uroce_mr *mr, uint64_t key, uint64_t va,
		     size_t len, size_t want);
/* Forgets staged bytes of an MR being deregistered (engine thread). */
void uroce_eng_forget_mr(struct uroce_engine *e, const struct uroce_mr *mr);
/* Every QP of the engine (engine thread). */
struct uroce_qp *uroce_eng_all_qps(struct uroce_engine *e);
void uroce_stage_forget(struct uroce_qp *qp, const struct uroce_mr *mr);
/* UROCE_GPU_AHEAD and UROCE_GPU_RXBUFS as the engine read them at open. */
int uroce_eng_gpu_ahead(const struct uroce_engine *e);
int uroce_eng_gpu_rxbufs(const struct uroce_engine *e);
/* The next WQE's first window is copied ahead (engine thread). */
void uroce_stage_ahead(struct uroce_qp *qp, const struct uroce_mr *mr, uint64_t key, uint64_t va,
		       size_t len);
/* Copies a packet's pieces into the stage as one run (qp.c). */
uint8_t *uroce_stage_linear(struct uroce_qp *qp, const struct uroce_mr *cudamr, size_t len);
void uroce_stage_free(struct uroce_qp *qp);
/* CUDA stream, events and pinned staging buffers made ahead of traffic
 * (qp.c: allocating pinned memory while a kernel runs can deadlock). */
void uroce_qp_cuda_prepare(struct uroce_qp *qp, void *cuctx);
/* Writes payload into an MR (host: memcpy; CUDA: staged). 0 or -1. */
int uroce_place(struct uroce_qp *qp, const struct uroce_mr *mr, uint64_t va, const void *src,
		size_t len);
/* Pushes staged placements to the GPU and waits for them. 0 or -1 (then
 * the QP fails). */
int uroce_place_flush(struct uroce_qp *qp);
/* Starts copying what was gathered, without waiting. 0 or -1. */
int uroce_place_kick(struct uroce_qp *qp);
/* 1 while placements may still be on their way to the GPU. */
int uroce_place_pending(struct uroce_qp *qp);
static inline int uroce_place_dirty(const struct uroce_qp *qp)
{
	return qp->rxs.len || qp->rxs.inflight;
}

/* qp.c: state changes, completions and flushes (engine thread). */
int uroce_cq_push(struct uroce_cq *cq, const struct ibv_wc *wc, int solicited);
int uroce_cq_space(struct uroce_cq *cq);
enum ibv_wc_opcode uroce_wc_opcode(uint32_t op);
void uroce_qp_to_error(struct uroce_qp *qp);
void uroce_qp_flush(struct uroce_qp *qp);
void uroce_async_event(struct uroce_ctx *ctx, enum ibv_event_type type, void *obj);
/* The QP, CQ or SRQ an event is about (NULL: port or device). */
const void *uroce_async_obj(const struct ibv_async_event *ev);
/* Before an object is freed (ibv_destroy_qp/cq/srq): its queued events are
 * dropped, and events of it that the application holds unacknowledged are
 * waited for, as rdma-core does (at most 5 s, then a warning), so that no
 * event ever points at freed memory. */
void uroce_async_forget(struct uroce_ctx *ctx, const void *obj);
/* ibv_ack_async_event: the event's object may be destroyed now. */
void uroce_async_ack(const struct ibv_async_event *ev);
/* ibv_get_async_event hands out an event of obj (under the queue's lock). */
void uroce_async_out_add(struct uroce_async *a, const void *obj);
int uroce_rq_empty(const struct uroce_rq *rq);
struct uroce_rwqe *uroce_rq_peek(struct uroce_rq *rq);
void uroce_rq_pop(struct uroce_rq *rq);
/* Opens the sockets for a QP entering RTR (engine thread). */
int uroce_qp_connect(struct uroce_qp *qp);
void uroce_qp_disconnect(struct uroce_qp *qp);
void uroce_qp_reset_transport(struct uroce_qp *qp);
/* UROCE_RETRANS: 1 for "sr" (selective repeat), 0 for "gbn" (default). */
int uroce_retrans_sr(void);

/* req.c: requester and completer (engine thread). */
void uroce_req_progress(struct uroce_engine *e, struct uroce_qp *qp, uint64_t now);
void uroce_comp_rx(struct uroce_engine *e, struct uroce_qp *qp, const struct wire_pkt *p,
		   uint64_t now);
void uroce_req_timers(struct uroce_engine *e, struct uroce_qp *qp, uint64_t now);
/* Gathers [off, off+len) of a WQE's data into iovecs (host memory in
 * place, CUDA memory staged): 0 or a completion status. */
int uroce_req_gather(struct uroce_qp *qp, struct uroce_swqe *w, uint32_t off, uint32_t len,
		     struct iovec *iov, int *niov);
uint64_t uroce_req_next_deadline(const struct uroce_qp *qp);
/* A CNP for the QP arrived (DCQCN reaction point, cc.h). */
void uroce_req_cnp(struct uroce_qp *qp, uint64_t now);
/* The QP's pacer for its responder traffic (READ responses): may one leave
 * now (else cc.pace_until says when), and what one cost. */
int uroce_req_cc_may_send(struct uroce_qp *qp, uint64_t now);
void uroce_req_cc_sent(struct uroce_qp *qp, uint64_t now, uint32_t paylen);
int uroce_req_busy(const struct uroce_qp *qp);

/* ud.c: UD requester and receiver (engine thread). */
void uroce_ud_progress(struct uroce_engine *e, struct uroce_qp *qp, uint64_t now);
void uroce_ud_rx(struct uroce_engine *e, struct uroce_qp *qp, const struct wire_pkt *p,
		 const struct uroce_rx_meta *m);

/* resp.c: responder (engine thread). */
void uroce_resp_rx(struct uroce_engine *e, struct uroce_qp *qp, const struct wire_pkt *p,
		   uint64_t now);
void uroce_resp_progress(struct uroce_engine *e, struct uroce_qp *qp, uint64_t now);
void uroce_resp_flush_ack(struct uroce_engine *e, struct uroce_qp *qp, uint64_t now);
int uroce_resp_busy(const struct uroce_qp *qp);
/* When the responder reports the gap at ePSN unless it fills (0: none). */
uint64_t uroce_resp_deadline(const struct uroce_qp *qp);
/* Frees the packets held for reordering (reset, error, destroy). */
void uroce_resp_ooo_free(struct uroce_qp *qp);
/* UROCE_GAP_PKTS and UROCE_GAP_US (docs/design.md, "Reordering"). */
void uroce_gap_params(uint32_t *pkts, uint64_t *ns);
/* Takes the next receive WQE (RQ or SRQ) into qp->resp: 1, or 0 if none. */
int uroce_resp_take_rwqe(struct uroce_qp *qp);
/* Scatters bytes into the taken receive WQE at qp->resp.msg_off. */
enum ibv_wc_status uroce_resp_place_send(struct uroce_qp *qp, const uint8_t *src, uint32_t len);

uint32_t uroce_qpn_port(uint32_t qpn);

#endif
