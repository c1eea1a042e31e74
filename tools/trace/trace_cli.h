/* uroce trace: shared between cmd_trace.c (options, running, pcap merge),
 * trace_explain.c (reading UROCE_TRACE files) and trace_xfer.c (the
 * built-in two-process transfer). */
#ifndef UROCE_TRACE_CLI_H
#define UROCE_TRACE_CLI_H

#include <stddef.h>
#include <stdint.h>

enum xfer_op {
	XOP_WRITE,      /* values are enum ibv_wr_opcode */
	XOP_WRITE_IMM,
	XOP_SEND,
	XOP_SEND_IMM,
	XOP_READ,
	XOP_CSWAP,
	XOP_FADD,
	XOP_COUNT
};

/* Names as used by --op (write, write_imm, send, ...) and as the verbs name
 * the WR opcode (RDMA_WRITE, ...). */
extern const char *const xfer_op_opt[XOP_COUNT];
extern const char *const xfer_op_name[XOP_COUNT];
int xfer_op_parse(const char *s);

/* A trace line's "key=value ..." part (trace_explain.c): the value of key
 * copied into buf (NULL if absent), or as a number (-1 if absent). */
const char *trace_kv(const char *kvs, const char *key, char *buf, size_t len);
int64_t trace_num(const char *kvs, const char *key);

struct xfer_opts {
	int op;             /* enum xfer_op */
	uint64_t size;      /* bytes per WR (atomics: 8) */
	unsigned mtu;       /* path MTU in bytes, 0 = the port's active MTU */
	unsigned count;     /* WRs */
	int rnr;            /* responder posts its RECVs late: RNR NAKs */
	unsigned hold_ms;   /* both processes stay alive this long after the transfer */
	int quiet;
};

/* What the built-in transfer tells the explanation (responder's MR). */
struct xfer_result {
	int req_pid, resp_pid;
	uint64_t resp_mr_addr, resp_mr_len;
	uint64_t req_buf_addr;
	unsigned mtu;
};

/* Runs the built-in transfer: forks a responder and a requester. Returns
 * an exit status (0 ok). */
int xfer_run(const struct xfer_opts *o, struct xfer_result *res);

struct explain_opts {
	int op;              /* enum xfer_op wanted, -1: the first post_send */
	int json;
	const struct xfer_result *builtin;  /* NULL when a CMD ran */
};

/* Reads every file DIR/trace.* and explains the first matching WR. Returns
 * 0 when every step was found, 1 when some were missing, 2 on no trace. */
int explain_dir(const char *dir, const struct explain_opts *o);

#endif
