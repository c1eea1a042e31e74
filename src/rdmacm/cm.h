/* uroce's librdmacm: internal declarations (docs/rdmacm.md).
 *
 * This layer sits on top of the public verbs API only (<infiniband/verbs.h>
 * against uroce's libibverbs.so.1); the structs it hands out are those of
 * the system headers <rdma/rdma_cma.h>, which are the ABI.
 *
 * Concurrency: one process-wide mutex (cm.lock) guards every id, channel,
 * event queue and socket below. One background thread (cm_thread) owns the
 * epoll set of CM sockets and the timers; application threads take the lock
 * for each call and never block while holding it (verbs calls that move
 * QPs are made with the lock released). */
#ifndef UROCE_RDMACM_CM_H
#define UROCE_RDMACM_CM_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define CM_EXPORT __attribute__((visibility("default")))
#define CM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CM_CONTAINER(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- IBTA CM MADs (IBA vol 1, chapter 12), carried on the TCP side channel */

#define CM_MAD_SIZE 256 /* one MAD: 24-byte common header + 232 data bytes */
#define CM_MAD_HDR 24
#define CM_MGMT_CLASS 0x07
#define CM_CLASS_VERSION 2
#define CM_METHOD_SEND 0x03

enum cm_attr {
	CM_REQ = 0x0010,
	CM_MRA = 0x0011,
	CM_REJ = 0x0012,
	CM_REP = 0x0013,
	CM_RTU = 0x0014,
	CM_DREQ = 0x0015,
	CM_DREP = 0x0016,
	CM_SIDR_REQ = 0x0017,
	CM_SIDR_REP = 0x0018,
};

/* Private data bytes per message (table 106 ff.) */
#define CM_REQ_PDATA 92
#define CM_MRA_PDATA 222
#define CM_REJ_PDATA 148
#define CM_REP_PDATA 196
#define CM_RTU_PDATA 224
#define CM_DREQ_PDATA 220
#define CM_DREP_PDATA 224
#define CM_SIDR_REQ_PDATA 216
#define CM_SIDR_REP_PDATA 136
#define CM_PDATA_MAX 224

/* The 36-byte header rdma_cm puts in front of REQ and SIDR_REQ private data
 * (so user data is 92 - 36 = 56 bytes in a REQ, 216 - 36 = 180 in SIDR). */
#define CM_CMA_HDR 36

/* REJ reasons (IBA table 112) and SIDR_REP status values we use */
enum {
	CM_REJ_TIMEOUT = 4,
	CM_REJ_INVALID_SERVICE_ID = 8,
	CM_REJ_CONSUMER_DEFINED = 28,
	CM_REJ_VENDOR_OPTION_NOT_SUPPORTED = 35,
};
enum {
	CM_SIDR_SUCCESS = 0,
	CM_SIDR_UNSUPPORTED = 1, /* no listener for the service ID */
	CM_SIDR_REJECT = 2,
};
/* MRA/REJ "message" field */
enum { CM_MSG_REQ = 0, CM_MSG_REP = 1, CM_MSG_OTHER = 2 };

/* One decoded CM message: the union of the fields of every message type. */
struct cm_msg {
	uint16_t attr;
	uint64_t tid;
	uint32_t attr_mod;       /* ECE options, as the kernel carries them */
	uint32_t local_comm_id;  /* SIDR: request ID */
	uint32_t remote_comm_id;
	uint32_t vendor_id;      /* 24 bits (ECE) */
	uint64_t service_id;
	uint64_t ca_guid;
	uint32_t qkey;
	uint32_t qpn;            /* REQ/REP: sender's QPN; DREQ: receiver's; SIDR_REP: the QP */
	uint32_t psn;            /* starting PSN of the sender's send queue */
	uint8_t resp_res;
	uint8_t init_depth;
	uint8_t remote_cm_timeout; /* 5-bit IBA timeout codes */
	uint8_t local_cm_timeout;
	uint8_t transport;       /* 0 RC, 1 UC */
	uint8_t flow_control;
	uint8_t retry_count;     /* 3 bits */
	uint8_t rnr_retry;       /* 3 bits */
	uint8_t max_cm_retries;
	uint8_t srq;
	uint8_t mtu;             /* enum ibv_mtu */
	uint16_t pkey;
	/* primary path (REQ) */
	uint16_t local_lid, remote_lid;
	uint8_t local_gid[16], remote_gid[16];
	uint32_t flow_label;
	uint8_t packet_rate, traffic_class, hop_limit, sl, subnet_local;
	uint8_t local_ack_timeout;
	/* REP */
	uint8_t target_ack_delay;
	uint8_t failover;
	/* REJ, MRA */
	uint8_t msg;             /* which message is rejected / MRAed */
	uint8_t service_timeout;
	uint16_t reason;
	uint8_t ari_len;
	uint8_t ari[72];
	/* SIDR_REP */
	uint8_t status;
	/* private data: the whole field of this message type */
	uint8_t pdata[CM_PDATA_MAX];
};

size_t cm_pdata_size(uint16_t attr);
void cm_mad_build(const struct cm_msg *m, uint8_t mad[CM_MAD_SIZE]);
int cm_mad_parse(const uint8_t mad[CM_MAD_SIZE], struct cm_msg *m);
void cm_hdr_build(uint8_t *p, uint16_t src_port, uint32_t src_ip, uint32_t dst_ip);
int cm_hdr_check(const uint8_t *p);

/* ---- objects ------------------------------------------------------------ */

struct cm_dev {
	struct ibv_context *verbs;
	struct ibv_pd *pd;         /* the default PD, one per device (rdma_create_qp(3)) */
	uint64_t guid;             /* node GUID, big endian as queried */
	int ngids;
	union ibv_gid gid[16];
	enum ibv_mtu active_mtu;
	uint8_t max_resp_res;      /* max_qp_rd_atom */
	uint8_t max_init_depth;    /* max_qp_init_rd_atom */
	uint8_t ack_delay;         /* local_ca_ack_delay */
	int max_qp_wr;
};

struct cm_id;

/* One TCP socket: a bound or listening one, or one CM connection. */
struct cm_conn {
	int fd;
	int listening;             /* accepted by the CM thread (rdma_listen) */
	int prelistening;          /* listen()ed at bind time, not yet accepting */
	int family;                /* of the socket: AF_INET, or AF_INET6 (wildcard) */
	int up;                    /* a TCP connection exists or is being made */
	int connecting;            /* non-blocking connect() in flight */
	int closing;               /* close once out[] is flushed */
	int dead;                  /* closed; freed by the CM thread later */
	uint32_t ev;               /* epoll mask registered */
	struct cm_id *id;          /* owner, NULL for a pre-REQ socket */
	struct cm_id *listener;    /* pre-REQ socket: its listener */
	uint64_t deadline;         /* pre-REQ or closing socket: give up then */
	uint8_t in[CM_MAD_SIZE];
	size_t in_len;
	uint8_t *out;
	size_t out_len, out_cap;
	struct cm_conn *next;      /* listener's pre-REQ list, or the graveyard */
};

enum cm_state {
	CM_IDLE,
	CM_ADDR_BOUND,
	CM_ADDR_RESOLVED,
	CM_ROUTE_RESOLVED,
	CM_LISTEN,
	CM_REQ_SENT,     /* active: REQ (or SIDR_REQ) out, waiting for REP/REJ */
	CM_REP_RCVD,     /* active: REP in, its event not yet retrieved */
	CM_RESPONSE,     /* active without QP: CONNECT_RESPONSE, waiting for rdma_establish */
	CM_REQ_RCVD,     /* passive: waiting for rdma_accept/rdma_reject */
	CM_REP_SENT,     /* passive: waiting for RTU */
	CM_ESTABLISHED,
	CM_DREQ_SENT,
	CM_DREQ_RCVD,
	CM_TIMEWAIT,
	CM_DISCONNECTED, /* after timewait */
	CM_FAILED,       /* rejected, unreachable, reset */
	CM_UD_DONE,      /* SIDR exchange finished */
};

enum cm_timer { CM_T_NONE, CM_T_REQ, CM_T_REQ_RESEND, CM_T_RTU, CM_T_DREQ, CM_T_TIMEWAIT };

/* A REQ (or SIDR_REQ) whose TCP connection is refused, reset or closed
 * before any answer (not even an MRA) is sent again, on a new connection
 * from the same address, until CM_REQ_RESEND_WINDOW_MS after rdma_connect;
 * only then does "nobody listens" reach the application. The listener may
 * be between two rdma_listen calls on its port (ib_write_bw -R). The model
 * is IBTA CM's REQ retransmission: a REQ that gets no answer within the
 * remote CM response timeout is sent again, up to the REQ's Max CM Retries
 * times (IBA vol. 1, 12.6, 12.7), and an IB CM resends a SIDR_REQ too. The
 * delays start at CM_REQ_RESEND_FIRST_MS and double. docs/rdmacm.md. */
#define CM_REQ_RESEND_WINDOW_MS 250
#define CM_REQ_RESEND_FIRST_MS 10

struct cm_mc {
	struct cm_mc *next;
	struct cm_id *id;
	void *context;
	struct sockaddr_storage addr;
	union ibv_gid mgid;
	int sendonly;
	int attached;
	unsigned reported, acked;
};

struct cm_channel {
	struct rdma_event_channel ch;  /* ch.fd: eventfd counting queued events */
	struct cm_event *head, **tail;
	struct cm_channel *next;       /* every live channel (cm_channel_live) */
	int waiters;                   /* threads in rdma_get_cm_event's wait */
	int dead;                      /* destroyed under a waiter: it frees */
};

struct cm_id {
	struct rdma_cm_id id;          /* public part; id.channel is a cm_channel */
	enum cm_state state;
	int sync;                      /* private channel: operations block */
	int destroying;
	int connect_error;             /* CONNECT_ERROR reported: drop later conn events */
	struct cm_dev *dev;
	int sgid_index;
	struct cm_conn *sock;          /* the bound (or listening) socket */
	struct cm_conn *conn;          /* the connection socket */
	int port_explicit;             /* bound to a port the application chose */
	int mra_rcvd;
	/* active, while CM_REQ_SENT: the REQ (SIDR_REQ) as sent, the address
	 * its socket was bound to, and the resend schedule (CM_REQ_RESEND_*) */
	struct cm_msg *req;
	struct sockaddr_storage req_src;
	socklen_t req_src_len;
	int req_family;
	uint64_t req_resend_end;       /* ns: no resend after this */
	unsigned req_resend_ms;        /* the next resend's delay */
	enum cm_timer timer;
	uint64_t deadline;             /* ns, CLOCK_MONOTONIC */
	/* rdma_set_option */
	uint8_t tos;
	int tos_set;
	int reuseaddr;
	int afonly, afonly_set;
	uint8_t ack_timeout;
	int ack_timeout_set;
	/* the connection (values for this side's QP) */
	uint32_t local_comm, remote_comm;
	uint32_t local_qpn, remote_qpn;
	uint32_t local_psn, remote_psn;
	uint8_t resp_res;              /* RTR max_dest_rd_atomic */
	uint8_t init_depth;            /* RTS max_rd_atomic */
	uint8_t retry_count, rnr_retry;
	uint8_t timeout;               /* local ACK timeout code */
	enum ibv_mtu mtu;
	uint8_t remote_srq, flow_control;
	uint8_t req_resp_res, req_init_depth; /* as in the REQ (passive) */
	uint32_t remote_qkey;
	struct ibv_ece local_ece, remote_ece;
	/* events */
	unsigned reported, acked;      /* events handed out / acknowledged */
	pthread_cond_t cond;
	struct cm_id *listener;        /* a connection request's listener */
	struct ibv_qp_init_attr *qp_init_attr; /* rdma_create_ep, passive side */
	uint8_t *connect_pdata;        /* rdma_create_ep: ai_connect */
	size_t connect_pdata_len;
	struct cm_mc *mcs;
	struct ibv_sa_path_rec path;
	struct cm_id *next, **pprev;   /* every id */
};

/* Internal event kinds resolved at rdma_get_cm_event time, as librdmacm does. */
enum { CM_EV_USER = 0, CM_EV_REP = 1 };

struct cm_event {
	struct rdma_cm_event ev;       /* public part */
	struct cm_event *next;
	struct cm_id *owner;           /* counted against this id (listener for CONNECT_REQUEST) */
	struct cm_id *conn_id;         /* CONNECT_REQUEST: the new id */
	struct cm_mc *mc;
	int internal;
	uint8_t pdata[CM_PDATA_MAX];
};

struct cm_global {
	pthread_mutex_t lock;
	int epfd;
	int wakefd;
	pthread_t thread;
	struct cm_id *ids;
	struct cm_conn *graveyard;
	int ndevs;
	struct cm_dev *devs;
	int devs_loaded;
	uint64_t timeout_ns;           /* UROCE_CM_TIMEOUT_MS */
	int debug;
};

extern struct cm_global cm;

/* cm_core.c */
int cm_init(void);
uint64_t cm_now(void);
void cm_wake(void);
void cm_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cm_devs_load(void);
struct cm_dev *cm_dev_by_ip(uint32_t ip, int *gid_index);
struct cm_dev *cm_dev_by_verbs(struct ibv_context *verbs);
int cm_route_src(uint32_t dst, uint32_t *src);
struct cm_event *cm_event_new(struct cm_id *owner, enum rdma_cm_event_type type, int status);
void cm_queue(struct cm_id *id, struct cm_event *e);
struct cm_channel *cm_channel_new(void);
void cm_channel_free(struct cm_channel *ch);
int cm_channel_live(const struct cm_channel *ch);
int cm_channel_dup_fd(const struct cm_channel *ch);
void cm_channel_unlink(struct cm_channel *ch, struct cm_event *e);
struct cm_conn *cm_conn_new(int fd, struct cm_id *id);
int cm_conn_send(struct cm_conn *c, const struct cm_msg *m);
void cm_conn_finish(struct cm_conn *c);
void cm_conn_kill(struct cm_conn *c);
void cm_conn_error(struct cm_conn *c, int err);
void cm_listener_gone(struct cm_id *l);
void cm_conn_watch(struct cm_conn *c);
void cm_set_timer(struct cm_id *id, enum cm_timer t, uint64_t ns);
void cm_fail(struct cm_id *id, enum rdma_cm_event_type type, int status, const struct cm_msg *m);
void cm_enter_timewait(struct cm_id *id);
void cm_send_simple(struct cm_id *id, uint16_t attr, uint16_t reason, const void *pd, size_t len);
int cm_req_socket(struct cm_id *id);
void cm_req_connect(struct cm_id *id, struct cm_conn *c);
void cm_req_drop(struct cm_id *id);
uint32_t cm_rand32(void);
uint64_t cm_service_id(enum rdma_port_space ps, uint16_t port);
void cm_fill_ud_ah(struct cm_id *id, struct ibv_ah_attr *ah, const union ibv_gid *dgid);
struct cm_id *cm_new_conn_id(struct cm_id *listener, struct cm_conn *c, const struct cm_msg *m);
void cm_fill_route(struct cm_id *id, const union ibv_gid *dgid);

/* cma.c */
struct cm_id *cm_id_alloc(struct cm_channel *ch, void *context, enum rdma_port_space ps,
			  enum ibv_qp_type qp_type);
void cm_id_set_dev(struct cm_id *id, struct cm_dev *dev, int gid_index);

static inline struct cm_id *cm_id_of(struct rdma_cm_id *id)
{
	return CM_CONTAINER(id, struct cm_id, id);
}

static inline struct cm_channel *cm_channel_of(struct rdma_event_channel *ch)
{
	return CM_CONTAINER(ch, struct cm_channel, ch);
}

static inline uint32_t cm_sin_ip(const struct sockaddr *sa)
{
	return ((const struct sockaddr_in *)sa)->sin_addr.s_addr;
}

static inline uint16_t cm_sin_port(const struct sockaddr *sa)
{
	return ntohs(((const struct sockaddr_in *)sa)->sin_port);
}

#endif
