/* UC QPs (IBA 9.8.2-9.8.3): SEND, SEND_WITH_IMM, RDMA WRITE and WRITE
 * WITH IMMEDIATE with no ACKs; a message that misses a packet is dropped
 * whole and its receive WQE serves the next message; no RNR, no
 * retransmission, remote access violations dropped silently. Two UC QPs
 * in this process on separate device contexts. Losses are placed exactly
 * with UROCE_DROP_NTH (the receiving engine's K-th packet). */
#include "common.h"

#define MTU 1024

static void uc_open(struct tv_pair *p)
{
	struct tv_opts o = tv_opts_default();

	o.qp_type = IBV_QPT_UC;
	o.mtu = IBV_MTU_1024;
	o.separate_ctx = 1;
	tv_pair_open(p, &o);
}

static const size_t sizes[] = { 0, 1, 1023, 1024, 1025, 3 * 1024 + 7, 65537, 1u << 20 };

/* Every operation over sizes around the MTU, checked byte for byte. */
T_CASE(ops)
{
	static const enum ibv_wr_opcode ops[] = { IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
						  IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM };
	struct tv_pair p;
	struct tv_buf a, b;
	uint64_t id = 1;

	uc_open(&p);
	tv_buf_alloc(&a, p.a.pd, (1u << 20) + 64, TV_ACCESS_ALL);
	tv_buf_alloc(&b, p.b.pd, (1u << 20) + 64, TV_ACCESS_ALL);
	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++, id++) {
			size_t n = sizes[i];
			int write = ops[k] == IBV_WR_RDMA_WRITE || ops[k] == IBV_WR_RDMA_WRITE_WITH_IMM;
			int imm = ops[k] == IBV_WR_SEND_WITH_IMM || ops[k] == IBV_WR_RDMA_WRITE_WITH_IMM;
			struct ibv_wc wc;

			tv_canary(b.p, b.len);
			tv_fill(a.p, n, id);
			if (!write || imm)
				T_EQ_INT(tv_post_recv1(p.b.qp, id, &b, write ? 0 : 16, write ? 0 : n + 8),
					 0);
			T_EQ_INT(tv_post1(p.a.qp, ops[k], id, &a, 0, n, (uintptr_t)b.p + 16,
					  b.mr->rkey, (uint32_t)id, IBV_SEND_SIGNALED),
				 0);
			tv_expect_wc(p.a.scq, p.a.qp, id, IBV_WC_SUCCESS,
				     write ? IBV_WC_RDMA_WRITE : IBV_WC_SEND);
			if (!write || imm) {
				wc = tv_expect_wc(p.b.rcq, p.b.qp, id, IBV_WC_SUCCESS,
						  write ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV);
				T_EQ_INT(wc.byte_len, n);
				if (imm)
					T_EQ_INT(ntohl(wc.imm_data), (uint32_t)id);
			} else {
				/* no completion tells when a WRITE landed: a
				 * WRITE_WITH_IMM behind it does (in order) */
				T_EQ_INT(tv_post_recv1(p.b.qp, 0, &b, 0, 0), 0);
				T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 0, &a, 0, 0, 0, 0, 0,
						  IBV_SEND_SIGNALED),
					 0);
				tv_expect_wc(p.a.scq, p.a.qp, 0, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
				tv_expect_wc(p.b.rcq, p.b.qp, 0, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
			}
			T_CANARY(b.p, 0, 16);
			T_PATTERN(b.p + 16, n, id, 0);
			T_CANARY(b.p, 16 + n, 32);
		}
	}
	tv_buf_free(&a);
	tv_buf_free(&b);
	tv_pair_close(&p);
}

/* Message 1 (4 packets) loses its second packet: it is dropped whole and
 * the receive WQE it had taken receives message 2 (IBA 9.8.3.1). */
T_CASE(missing_middle_send)
{
	struct tv_pair p;
	struct tv_buf a, b;
	struct ibv_wc wc;
	uint64_t before;

	setenv("UROCE_DROP_NTH", "2", 1);
	uc_open(&p);
	tv_buf_alloc(&a, p.a.pd, 16384, TV_ACCESS_ALL);
	tv_buf_alloc(&b, p.b.pd, 16384, TV_ACCESS_ALL);
	before = TV_COUNTER(uc_msgs_dropped);
	T_EQ_INT(tv_post_recv1(p.b.qp, 1, &b, 0, 8192), 0);
	T_EQ_INT(tv_post_recv1(p.b.qp, 2, &b, 8192, 8192), 0);
	tv_fill(a.p, 4 * MTU, 1);
	tv_fill(a.p + 8192, 3 * MTU, 2);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND_WITH_IMM, 1, &a, 0, 4 * MTU, 0, 0, 1,
			  IBV_SEND_SIGNALED),
		 0);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND_WITH_IMM, 2, &a, 8192, 3 * MTU, 0, 0, 2,
			  IBV_SEND_SIGNALED),
		 0);
	/* the requester knows nothing of the loss */
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	tv_expect_wc(p.a.scq, p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_SEND);
	wc = tv_expect_wc(p.b.rcq, p.b.qp, 1, IBV_WC_SUCCESS, IBV_WC_RECV);
	T_EQ_INT(ntohl(wc.imm_data), 2);
	T_EQ_INT(wc.byte_len, 3 * MTU);
	T_PATTERN(b.p, 3 * MTU, 2, 0);
	tv_expect_no_wc(p.b.rcq, 0.2);
	T_EQ_INT(TV_COUNTER(uc_msgs_dropped), before + 1);
	T_EQ_INT(TV_COUNTER(retrans_pkts), 0);
	tv_buf_free(&a);
	tv_buf_free(&b);
	tv_pair_close(&p);
}

/* The same for WRITE WITH IMMEDIATE: no completion for the broken
 * message, its receive WQE still there for the next. */
T_CASE(missing_middle_write_imm)
{
	struct tv_pair p;
	struct tv_buf a, b;
	struct ibv_wc wc;

	setenv("UROCE_DROP_NTH", "3", 1);
	uc_open(&p);
	tv_buf_alloc(&a, p.a.pd, 16384, TV_ACCESS_ALL);
	tv_buf_alloc(&b, p.b.pd, 16384, TV_ACCESS_ALL);
	T_EQ_INT(tv_post_recv1(p.b.qp, 7, &b, 0, 0), 0);
	tv_fill(a.p, 4 * MTU, 3);
	tv_fill(a.p + 8192, 2 * MTU + 5, 4);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 1, &a, 0, 4 * MTU, (uintptr_t)b.p,
			  b.mr->rkey, 1, IBV_SEND_SIGNALED),
		 0);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 2, &a, 8192, 2 * MTU + 5,
			  (uintptr_t)b.p + 8192, b.mr->rkey, 2, IBV_SEND_SIGNALED),
		 0);
	tv_expect_wc(p.a.scq, p.a.qp, 2 - 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	tv_expect_wc(p.a.scq, p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	wc = tv_expect_wc(p.b.rcq, p.b.qp, 7, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	T_EQ_INT(ntohl(wc.imm_data), 2);
	T_PATTERN(b.p + 8192, 2 * MTU + 5, 4, 0);
	tv_expect_no_wc(p.b.rcq, 0.2);
	tv_buf_free(&a);
	tv_buf_free(&b);
	tv_pair_close(&p);
}

/* The FIRST packet is lost: the MIDDLE and LAST that follow belong to no
 * message and are dropped; the next message arrives. */
T_CASE(missing_first)
{
	struct tv_pair p;
	struct tv_buf a, b;
	struct ibv_wc wc;

	setenv("UROCE_DROP_NTH", "1", 1);
	uc_open(&p);
	tv_buf_alloc(&a, p.a.pd, 16384, TV_ACCESS_ALL);
	tv_buf_alloc(&b, p.b.pd, 16384, TV_ACCESS_ALL);
	T_EQ_INT(tv_post_recv1(p.b.qp, 1, &b, 0, 8192), 0);
	tv_fill(a.p, 3 * MTU, 5);
	tv_fill(a.p + 8192, 100, 6);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 1, &a, 0, 3 * MTU, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 2, &a, 8192, 100, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	tv_expect_wc(p.a.scq, p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_SEND);
	wc = tv_expect_wc(p.b.rcq, p.b.qp, 1, IBV_WC_SUCCESS, IBV_WC_RECV);
	T_EQ_INT(wc.byte_len, 100);
	T_PATTERN(b.p, 100, 6, 0);
	tv_buf_free(&a);
	tv_buf_free(&b);
	tv_pair_close(&p);
}

/* No receive WQE: no RNR on UC, the message is dropped and counted; the
 * requester completes all the same. A bad rkey: dropped silently, memory
 * untouched, the QP goes on. */
T_CASE(no_rwqe_and_bad_rkey)
{
	struct tv_pair p;
	struct tv_buf a, b;
	uint64_t nor, acc;

	uc_open(&p);
	tv_buf_alloc(&a, p.a.pd, 16384, TV_ACCESS_ALL);
	tv_buf_alloc(&b, p.b.pd, 16384, TV_ACCESS_ALL);
	nor = TV_COUNTER(drop_no_rwqe);
	acc = TV_COUNTER(rem_access_errs);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 1, &a, 0, 2000, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.a.scq, p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	tv_canary(b.p, b.len);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_RDMA_WRITE, 2, &a, 0, 3000, (uintptr_t)b.p,
			  b.mr->rkey ^ 0x5a5a, 0, IBV_SEND_SIGNALED),
		 0);
	tv_expect_wc(p.a.scq, p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	for (int i = 0; i < 100 && (TV_COUNTER(drop_no_rwqe) == nor ||
				     TV_COUNTER(rem_access_errs) == acc); i++)
		tv_msleep(5);
	T_EQ_INT(TV_COUNTER(drop_no_rwqe), nor + 1);
	T_EQ_INT(TV_COUNTER(rem_access_errs), acc + 1);
	T_CANARY(b.p, 0, b.len);
	T_EQ_INT(tv_qp_state(p.b.qp), IBV_QPS_RTS);
	/* still working */
	T_EQ_INT(tv_post_recv1(p.b.qp, 3, &b, 0, 64), 0);
	tv_fill(a.p, 64, 8);
	T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND, 3, &a, 0, 64, 0, 0, 0, IBV_SEND_SIGNALED), 0);
	tv_expect_wc(p.b.rcq, p.b.qp, 3, IBV_WC_SUCCESS, IBV_WC_RECV);
	T_PATTERN(b.p, 64, 8, 0);
	tv_buf_free(&a);
	tv_buf_free(&b);
	tv_pair_close(&p);
}

/* UC offers no READ or atomics (EINVAL at post) and its transitions take
 * none of RC's ACK attributes (IBA 10.3.1 table 91, UC column). */
T_CASE(verbs_rules)
{
	struct tv_opts o = tv_opts_default();
	struct tv_side s;
	struct tv_info peer;
	struct tv_buf a;
	struct ibv_qp_attr at;
	int mask;

	o.qp_type = IBV_QPT_UC;
	tv_side_open(&s, &o, NULL);
	tv_info_of(&s, &peer);
	T_EQ_INT(tv_modify_init(s.qp, o.access), 0);
	tv_rtr_attr(s.qp, &o, &peer, &at, &mask);
	T_EQ_INT(ibv_modify_qp(s.qp, &at, mask | IBV_QP_MAX_DEST_RD_ATOMIC), EINVAL);
	T_EQ_INT(ibv_modify_qp(s.qp, &at, mask), 0);
	tv_rts_attr(s.qp, &o, 1, &at, &mask);
	T_EQ_INT(ibv_modify_qp(s.qp, &at, mask | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT), EINVAL);
	T_EQ_INT(ibv_modify_qp(s.qp, &at, mask), 0);
	tv_buf_alloc(&a, s.pd, 64, TV_ACCESS_ALL);
	T_EQ_INT(tv_post1(s.qp, IBV_WR_RDMA_READ, 1, &a, 0, 8, (uintptr_t)a.p, a.mr->rkey, 0, 0),
		 EINVAL);
	T_EQ_INT(tv_post_atomic(s.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, &a, 0, (uintptr_t)a.p,
				a.mr->rkey, 1, 0, 0),
		 EINVAL);
	tv_buf_free(&a);
	tv_side_close(&s);
}

/* Under random loss every message that completes is whole and right;
 * the others never complete; nothing is resent. */
T_CASE(loss_whole_messages)
{
	struct tv_pair p;
	struct tv_buf a, b;
	const int n = 150;
	int got = 0;

	setenv("UROCE_LOSS", "0.05", 1);
	setenv("UROCE_SEED", "21", 1);
	uc_open(&p);
	tv_buf_alloc(&a, p.a.pd, (size_t)n * 4096, TV_ACCESS_ALL);
	tv_buf_alloc(&b, p.b.pd, (size_t)n * 4096, TV_ACCESS_ALL);
	for (int i = 0; i < n; i++) {
		T_EQ_INT(tv_post_recv1(p.b.qp, (uint64_t)i, &b, (size_t)i * 4096, 4096), 0);
		tv_fill(a.p + (size_t)i * 4096, 4096, 300 + (uint64_t)i);
	}
	for (int i = 0; i < n; i++) {
		T_EQ_INT(tv_post1(p.a.qp, IBV_WR_SEND_WITH_IMM, (uint64_t)i, &a, (size_t)i * 4096,
				  4096, 0, 0, (uint32_t)i, IBV_SEND_SIGNALED),
			 0);
		tv_expect_wc(p.a.scq, p.a.qp, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_SEND);
	}
	for (;;) {
		struct ibv_wc wc;
		uint32_t m;

		if (!tv_poll1(p.b.rcq, &wc, 0.5))
			break;
		T_EQ_INT(wc.status, IBV_WC_SUCCESS);
		T_EQ_INT(wc.byte_len, 4096);
		m = ntohl(wc.imm_data);
		T_ASSERT(m < (uint32_t)n);
		/* receive WQEs are used in order; a dropped message's WQE
		 * took a later message, so the WQE may be earlier than m */
		T_LE_INT(wc.wr_id, m);
		T_PATTERN(b.p + wc.wr_id * 4096, 4096, 300 + (uint64_t)m, 0);
		got++;
	}
	t_log("%d of %d 4-packet messages arrived under 5%% loss", got, n);
	T_LT_INT(got, n);
	T_GT_INT(got, n / 2);
	T_EQ_INT(TV_COUNTER(retrans_pkts), 0);
	T_GT_INT(TV_COUNTER(uc_msgs_dropped), 0);
	tv_buf_free(&a);
	tv_buf_free(&b);
	tv_pair_close(&p);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
