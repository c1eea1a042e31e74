/* uroce demo: state shared by demo.c (setup, checks, protocol) and
 * demo_perf.c (bandwidth and latency tables). */
#ifndef UROCE_DEMO_H
#define UROCE_DEMO_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#define DEMO_CQ_TIMEOUT_MS 5000   /* longest wait for one completion */
#define DEMO_CQ_MOD 16            /* bandwidth: signal every 16th WR (perftest) */
#define DEMO_TX_DEPTH 128         /* bandwidth: WRs outstanding (perftest) */
#define DEMO_LAT_MAX 4096         /* latency table: 2 B .. 4 KiB */
#ifndef DEMO_YIELD_SPINS
#define DEMO_YIELD_SPINS 64       /* empty polls between sched_yield()s */
#endif

/* Connection info, exchanged over the socketpair (same binary both ends). */
struct demo_conn {
	uint32_t qpn;
	uint32_t psn;
	uint8_t gid[16];
	uint64_t addr;          /* base of the registered buffer */
	uint64_t size;          /* its length */
	uint32_t rkey;
	uint32_t mtu;           /* enum ibv_mtu of the port */
	uint32_t max_dest_rd_atomic;
	uint32_t lid;
};

/* Commands from the client to the server; the server answers M_REPLY. */
enum demo_msg_type {
	M_REPLY = 1,
	M_WRITE_CHECK,  /* a=len b=seed: verify data region */
	M_READ_PREP,    /* a=len b=seed: fill data region */
	M_RECV_PREP,    /* a=len: clear data region, post one RECV */
	M_RECV_CHECK,   /* a=len b=seed: wait for the RECV, verify */
	M_IMM_PREP,     /* a=n1 b=n2: clear, post two RECVs */
	M_IMM_CHECK,    /* a=n1 b=n2 c=seeds d=imms: wait for both, verify */
	M_ATOM_PREP,    /* set the atomic targets */
	M_ATOM_CHECK,   /* a=expected counter b=expected swap target */
	M_BW,           /* a=size: bandwidth row starts (keepalive only) */
	M_LAT,          /* a=size b=iters: serve a SEND/RECV ping-pong */
	M_QUIT,         /* tear down and exit */
};

struct demo_msg {
	uint32_t type;
	int32_t status;         /* M_REPLY: 0 ok, >0 check failed, <0 verbs/fatal error */
	uint64_t a, b, c, d;
	char text[512];
};

/* One side of the demo. buf holds, in order: the data region (data_len
 * bytes, rounded up to 64), the latency send and receive areas (4 KiB each),
 * the atomic targets (64 bytes) and the atomic results (64 bytes). */
struct demo {
	const char *role;       /* "client" or "server" */
	int is_client;
	int sock;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	const char *devname;
	uint8_t *buf;
	size_t buflen;
	size_t data_len;        /* --size */
	size_t lat_tx_off, lat_rx_off, atom_off, res_off;
	uint32_t max_inline;
	uint32_t sq_depth, rq_depth;
	struct demo_conn local, remote;
	char err[512];          /* last error (the server sends it to the client) */
};

void demo_err(struct demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t demo_now_ns(void);

int demo_send_msg(struct demo *d, const struct demo_msg *m);
int demo_recv_msg(struct demo *d, struct demo_msg *m, int timeout_ms);
/* Client: send a command, wait for the reply (status returned in *reply). */
int demo_request(struct demo *d, struct demo_msg *m, struct demo_msg *reply, int timeout_ms);

/* Waits for n successful completions on cq (wcs may be NULL); -1 on error or
 * timeout, with d->err set. */
int demo_wait_cq(struct demo *d, struct ibv_cq *cq, int n, struct ibv_wc *wcs, const char *what);
/* Non-blocking: reaps up to max completions, all must be successful. Returns
 * the number reaped or -1. */
int demo_reap_cq(struct demo *d, struct ibv_cq *cq, int max, const char *what);

int demo_post_send(struct demo *d, enum ibv_wr_opcode op, size_t loff, size_t len,
		   uint64_t roff, uint32_t imm_host, unsigned flags, uint64_t wr_id);
int demo_post_recv(struct demo *d, size_t loff, size_t len, uint64_t wr_id);

/* demo_perf.c */
int demo_bw_table(struct demo *d, uint64_t max_size, long iters);
int demo_lat_table(struct demo *d, uint64_t max_size, long iters);
int demo_lat_serve(struct demo *d, uint64_t size, long iters);

#endif
