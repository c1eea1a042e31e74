/* libFuzzer target: verbs argument checks. Each input is a little program
 * of verbs calls with fuzzed arguments against a real uroce context on
 * loopback: memory registration with any access flags and lengths inside
 * our buffer, CQ creation and resizing, QP creation with any capabilities,
 * every state transition with any attribute mask and values, posts with
 * any opcode, flags, SGE count and lengths. Every call must return a
 * success or an errno value, never crash or hang.
 *   make fuzz   (clang; the library objects are built with the fuzzer) */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static uint8_t *buf;
#define BUFLEN (1u << 16)

struct rd {
	const uint8_t *p;
	size_t n;
};

static uint32_t take(struct rd *r, int bytes)
{
	uint32_t v = 0;

	for (int i = 0; i < bytes; i++)
		v = v << 8 | (r->n ? (r->n--, *r->p++) : 0);
	return v;
}

static void setup(void)
{
	struct ibv_device **l;

	setenv("UROCE_NETDEV", "lo", 0);
	setenv("UROCE_NO_STAT", "1", 0);
	l = ibv_get_device_list(NULL);
	if (!l || !l[0] || !(ctx = ibv_open_device(l[0])) || !(pd = ibv_alloc_pd(ctx)))
		abort();
	ibv_free_device_list(l);
	buf = calloc(1, BUFLEN);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r = { data, size };
	struct ibv_cq *cq;
	struct ibv_qp *qp = NULL;
	struct ibv_mr *mr = NULL;
	struct ibv_qp_init_attr ia;

	if (!ctx)
		setup();
	cq = ibv_create_cq(ctx, (int)(take(&r, 2) % 5000) - 1, NULL, NULL, 0);
	if (!cq)
		return 0;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = (enum ibv_qp_type)(take(&r, 1) % 2 ? IBV_QPT_RC : take(&r, 1));
	ia.cap.max_send_wr = take(&r, 2) % 20000;
	ia.cap.max_recv_wr = take(&r, 2) % 20000;
	ia.cap.max_send_sge = take(&r, 1) % 40;
	ia.cap.max_recv_sge = take(&r, 1) % 40;
	ia.cap.max_inline_data = take(&r, 2) % 1024;
	ia.sq_sig_all = take(&r, 1) & 1;
	qp = ibv_create_qp(pd, &ia);
	while (r.n) {
		unsigned op = take(&r, 1) % 6;

		if (op == 0) {
			uint32_t off = take(&r, 2) % BUFLEN, len = take(&r, 3) % (BUFLEN + 1);

			if (mr)
				ibv_dereg_mr(mr);
			if (off + len > BUFLEN)
				len = BUFLEN - off;
			mr = ibv_reg_mr(pd, buf + off, len, (int)take(&r, 2));
		} else if (op == 1 && qp) {
			struct ibv_qp_attr a;
			union ibv_gid gid;

			memset(&a, 0, sizeof(a));
			a.qp_state = (enum ibv_qp_state)(take(&r, 1) % 8);
			a.cur_qp_state = (enum ibv_qp_state)(take(&r, 1) % 8);
			a.path_mtu = (enum ibv_mtu)(take(&r, 1) % 7);
			a.qp_access_flags = take(&r, 1);
			a.pkey_index = (uint16_t)(take(&r, 1) % 3);
			a.port_num = (uint8_t)(take(&r, 1) % 3);
			a.dest_qp_num = take(&r, 4);
			a.rq_psn = take(&r, 4);
			a.sq_psn = take(&r, 4);
			a.timeout = (uint8_t)take(&r, 1);
			a.retry_cnt = (uint8_t)take(&r, 1);
			a.rnr_retry = (uint8_t)take(&r, 1);
			a.min_rnr_timer = (uint8_t)take(&r, 1);
			a.max_rd_atomic = (uint8_t)take(&r, 1);
			a.max_dest_rd_atomic = (uint8_t)take(&r, 1);
			a.ah_attr.is_global = (uint8_t)(take(&r, 1) & 1);
			a.ah_attr.dlid = (uint16_t)take(&r, 2);
			a.ah_attr.port_num = (uint8_t)(take(&r, 1) % 3);
			a.ah_attr.grh.sgid_index = (uint8_t)(take(&r, 1) % 20);
			if (take(&r, 1) & 1) {
				ibv_query_gid(ctx, 1, 0, &gid); /* ourselves: loopback */
				a.ah_attr.grh.dgid = gid;
			} else {
				for (int i = 0; i < 16; i++)
					a.ah_attr.grh.dgid.raw[i] = (uint8_t)take(&r, 1);
			}
			ibv_modify_qp(qp, &a, (int)take(&r, 3));
		} else if (op == 2 && qp) {
			struct ibv_sge sg[40];
			struct ibv_send_wr wr, *bad;
			int n = (int)(take(&r, 1) % 40);

			memset(&wr, 0, sizeof(wr));
			for (int i = 0; i < n; i++) {
				uint32_t off = take(&r, 2) % BUFLEN, len = take(&r, 2);

				if (off + len > BUFLEN)
					len = BUFLEN - off;
				sg[i].addr = (uintptr_t)(buf + off);
				sg[i].length = len;
				sg[i].lkey = take(&r, 1) & 1 && mr ? mr->lkey : take(&r, 4);
			}
			wr.sg_list = sg;
			wr.num_sge = n;
			wr.opcode = (enum ibv_wr_opcode)(take(&r, 1) % 16);
			wr.send_flags = take(&r, 1);
			wr.wr.rdma.remote_addr = (uintptr_t)buf + take(&r, 2);
			wr.wr.rdma.rkey = mr && (take(&r, 1) & 1) ? mr->rkey : take(&r, 4);
			ibv_post_send(qp, &wr, &bad);
		} else if (op == 3 && qp) {
			struct ibv_sge sg = { (uintptr_t)buf, take(&r, 2) % BUFLEN, mr ? mr->lkey : 0 };
			struct ibv_recv_wr wr = { .sg_list = &sg, .num_sge = (int)(take(&r, 1) % 3) },
					   *bad;

			ibv_post_recv(qp, &wr, &bad);
		} else if (op == 4) {
			struct ibv_wc wc[8];

			ibv_poll_cq(cq, (int)(take(&r, 1) % 9) - 1, wc);
		} else if (op == 5) {
			ibv_resize_cq(cq, (int)(take(&r, 2) % 5000) - 1);
		}
	}
	if (qp)
		ibv_destroy_qp(qp);
	if (mr)
		ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	return 0;
}
