/* UD QPs (IBA 9.8.4, 10.2.5, 11.4.1.2): address handles, Q_Keys, the GRH
 * area in front of every received datagram, datagram semantics (a lost,
 * unwanted or oversized datagram is gone, nothing is resent), and
 * multicast over IPv4 groups. Two UD QPs in this process, on separate
 * device contexts (two engines) unless a case says otherwise. */
#include <linux/capability.h>
#include <netinet/ip.h>
#include <sys/syscall.h>

#include "common.h"

#define QKEY 0x11223344u
#define GRH 40
#define MCAST_GROUP "239.18.7.1"

struct ud {
	struct tv_pair p;
	struct ibv_ah *ab, *ba;    /* a -> b, b -> a */
	struct tv_buf sa, rb;      /* a's send buffer, b's receive buffer */
	uint32_t mtu;              /* bytes: the largest datagram */
};

static struct ibv_ah *ah_to(struct ibv_pd *pd, union ibv_gid gid)
{
	struct ibv_ah_attr a;
	struct ibv_ah *ah;

	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	a.grh.dgid = gid;
	a.grh.sgid_index = 0;
	a.grh.hop_limit = 64;
	a.port_num = 1;
	ah = ibv_create_ah(pd, &a);
	T_ASSERTF(ah, "ibv_create_ah: %s", strerror(errno));
	return ah;
}

static void ud_open(struct ud *u, int separate)
{
	struct tv_opts o = tv_opts_default();
	struct ibv_port_attr pa;

	memset(u, 0, sizeof(*u));
	o.qp_type = IBV_QPT_UD;
	o.qkey = QKEY;
	o.separate_ctx = separate;
	tv_pair_open(&u->p, &o);
	T_EQ_INT(ibv_query_port(u->p.a.ctx, 1, &pa), 0);
	u->mtu = 128u << pa.active_mtu;
	u->ab = ah_to(u->p.a.pd, tv_gid0(u->p.b.ctx));
	u->ba = ah_to(u->p.b.pd, tv_gid0(u->p.a.ctx));
	tv_buf_alloc(&u->sa, u->p.a.pd, 1u << 16, TV_ACCESS_ALL);
	tv_buf_alloc(&u->rb, u->p.b.pd, 1u << 20, TV_ACCESS_ALL);
}

static void ud_close(struct ud *u)
{
	T_EQ_INT(ibv_destroy_ah(u->ab), 0);
	T_EQ_INT(ibv_destroy_ah(u->ba), 0);
	tv_buf_free(&u->sa);
	tv_buf_free(&u->rb);
	tv_pair_close(&u->p);
}

/* Posts one UD SEND of n bytes of sa at off. */
static int ud_send(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t dqpn, uint32_t qkey,
		   struct tv_buf *b, size_t off, size_t n, uint64_t wr_id, int imm, uint32_t immv)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge s = tv_sge(b, off, n);

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = n ? &s : NULL;
	wr.num_sge = n ? 1 : 0;
	wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(immv);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = dqpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(qp, &wr, &bad);
}

static uint16_t ip_csum(const void *h)
{
	const uint8_t *b = h;
	uint32_t sum = 0;

	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)b[i] << 8 | b[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* The GRH area: 20 zero bytes, then the IPv4 header of the datagram
 * (src -> dst, UDP, a valid checksum, its total length). */
static void check_grh(const uint8_t *g, uint32_t src, uint32_t dst, size_t udp_payload)
{
	struct iphdr ip;

	for (int i = 0; i < 20; i++)
		T_ASSERTF(!g[i], "GRH byte %d is 0x%02x, want 0", i, g[i]);
	memcpy(&ip, g + 20, sizeof(ip));
	T_EQ_INT(ip.version, 4);
	T_EQ_INT(ip.ihl, 5);
	T_EQ_INT(ip.protocol, IPPROTO_UDP);
	T_EQ_U64(ip.saddr, src);
	T_EQ_U64(ip.daddr, dst);
	T_EQ_INT(ntohs(ip.tot_len), 20 + 8 + udp_payload);
	T_EQ_INT(ip_csum(g + 20), 0);
}

static uint32_t gid_ip(union ibv_gid g)
{
	uint32_t ip;

	memcpy(&ip, g.raw + 12, 4);
	return ip;
}

/* Sizes around nothing, the word and the MTU, with and without
 * immediate: every datagram lands whole behind its GRH, with the sender's
 * QPN, IBV_WC_GRH and sl 2 (RoCEv2 over IPv4, as mlx5 reports it). */
T_CASE(send_recv_grh)
{
	struct ud u;
	size_t sizes[] = { 0, 1, 3, 100, 1023, 0, 4096 };

	ud_open(&u, 1);
	sizes[5] = u.mtu - 1;
	sizes[6] = u.mtu;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int imm = 0; imm < 2; imm++) {
			size_t n = sizes[i];
			uint64_t seed = 0x55d0000 + i * 2 + (uint64_t)imm;
			struct ibv_wc wc;

			tv_canary(u.rb.p, n + GRH + 64);
			T_EQ_INT(tv_post_recv1(u.p.b.qp, 100 + i, &u.rb, 0, n + GRH + 32), 0);
			tv_fill(u.sa.p, n, seed);
			T_EQ_INT(ud_send(u.p.a.qp, u.ab, u.p.b.qp->qp_num, QKEY, &u.sa, 0, n, i, imm,
					 0xabc000 + (uint32_t)i),
				 0);
			tv_expect_wc(u.p.a.scq, u.p.a.qp, i, IBV_WC_SUCCESS, IBV_WC_SEND);
			wc = tv_expect_wc(u.p.b.rcq, u.p.b.qp, 100 + i, IBV_WC_SUCCESS, IBV_WC_RECV);
			T_EQ_INT(wc.byte_len, GRH + n);
			T_EQ_INT(wc.src_qp, u.p.a.qp->qp_num);
			T_ASSERTF(wc.wc_flags & IBV_WC_GRH, "wc_flags 0x%x", wc.wc_flags);
			T_EQ_INT(wc.sl, 2);
			T_EQ_INT(!!(wc.wc_flags & IBV_WC_WITH_IMM), imm);
			if (imm)
				T_EQ_INT(ntohl(wc.imm_data), 0xabc000 + i);
			check_grh(u.rb.p, gid_ip(tv_gid0(u.p.a.ctx)), gid_ip(tv_gid0(u.p.b.ctx)),
				  12 + 8 + (imm ? 4 : 0) + ((n + 3) & ~(size_t)3) + 4);
			T_PATTERN(u.rb.p + GRH, n, seed, 0);
			T_CANARY(u.rb.p, GRH + n, 64);
		}
	}
	ud_close(&u);
}

/* A datagram whose Q_Key is not the QP's is dropped and counted (IBA
 * 10.2.5); a WR Q_Key with the high bit set means the sender QP's own. */
T_CASE(qkey_mismatch_dropped)
{
	struct ud u;
	uint64_t before;

	ud_open(&u, 1);
	before = TV_COUNTER(drop_qkey);
	T_EQ_INT(tv_post_recv1(u.p.b.qp, 7, &u.rb, 0, 4096), 0);
	T_EQ_INT(ud_send(u.p.a.qp, u.ab, u.p.b.qp->qp_num, QKEY + 1, &u.sa, 0, 64, 1, 0, 0), 0);
	tv_expect_wc(u.p.a.scq, u.p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	tv_expect_no_wc(u.p.b.rcq, 0.3);
	T_EQ_INT(TV_COUNTER(drop_qkey), before + 1);
	/* 0x80000000: "use my QP's Q_Key", which is QKEY on both sides */
	T_EQ_INT(ud_send(u.p.a.qp, u.ab, u.p.b.qp->qp_num, 0x80000000u, &u.sa, 0, 64, 2, 0, 0), 0);
	tv_expect_wc(u.p.a.scq, u.p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_SEND);
	tv_expect_wc(u.p.b.rcq, u.p.b.qp, 7, IBV_WC_SUCCESS, IBV_WC_RECV);
	ud_close(&u);
}

/* Setting a controlled Q_Key (high bit) needs CAP_NET_RAW, as the
 * kernel's uverbs asks; without it ibv_modify_qp says EPERM. */
T_CASE(privileged_qkey)
{
	struct ud u;
	struct ibv_qp_attr a;
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	ud_open(&u, 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.qkey = 0x80010000u;
	memset(d, 0, sizeof(d));
	T_EQ_INT(syscall(SYS_capget, &h, d), 0);
	if (d[0].effective & (1u << CAP_NET_RAW)) {
		T_EQ_INT(ibv_modify_qp(u.p.a.qp, &a, IBV_QP_STATE | IBV_QP_QKEY), 0);
		/* drop the capability (this case runs in its own process) */
		d[0].effective &= ~(1u << CAP_NET_RAW);
		T_EQ_INT(syscall(SYS_capset, &h, d), 0);
	}
	a.qkey = 0x80010001u;
	T_EQ_INT(ibv_modify_qp(u.p.a.qp, &a, IBV_QP_STATE | IBV_QP_QKEY), EPERM);
	a.qkey = 0x1234;
	T_EQ_INT(ibv_modify_qp(u.p.a.qp, &a, IBV_QP_STATE | IBV_QP_QKEY), 0);
	ud_close(&u);
}

/* Bad WRs are refused at post with EINVAL (ibv_post_send(3)): no AH, an
 * AH of another PD, more than the MTU, UD opcodes other than SEND. */
T_CASE(post_errors)
{
	struct ud u;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge s;

	ud_open(&u, 0);
	s = tv_sge(&u.sa, 0, 64);
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.wr.ud.remote_qpn = u.p.b.qp->qp_num;
	wr.wr.ud.remote_qkey = QKEY;
	T_EQ_INT(ibv_post_send(u.p.a.qp, &wr, &bad), EINVAL);
	T_EQ_PTR(bad, &wr);
	wr.wr.ud.ah = u.ba; /* b's PD */
	T_EQ_INT(ibv_post_send(u.p.a.qp, &wr, &bad), EINVAL);
	wr.wr.ud.ah = u.ab;
	s.length = u.mtu + 1;
	T_EQ_INT(ibv_post_send(u.p.a.qp, &wr, &bad), EINVAL);
	s.length = 64;
	wr.opcode = IBV_WR_RDMA_WRITE;
	T_EQ_INT(ibv_post_send(u.p.a.qp, &wr, &bad), EINVAL);
	wr.opcode = IBV_WR_RDMA_READ;
	T_EQ_INT(ibv_post_send(u.p.a.qp, &wr, &bad), EINVAL);
	wr.opcode = IBV_WR_SEND;
	T_EQ_INT(ibv_post_send(u.p.a.qp, &wr, &bad), 0);
	tv_expect_wc(u.p.a.scq, u.p.a.qp, 0, IBV_WC_SUCCESS, IBV_WC_SEND);
	ud_close(&u);
}

/* Address handles: a GID that holds no IPv4 address, a bad port or GID
 * index, LID 0 without a GRH: EINVAL. */
T_CASE(ah_errors)
{
	struct ud u;
	struct ibv_ah_attr a;

	ud_open(&u, 0);
	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	a.port_num = 1;
	a.grh.dgid.raw[0] = 0xfe; /* link-local IPv6: not carried */
	errno = 0;
	T_EQ_PTR(ibv_create_ah(u.p.a.pd, &a), NULL);
	T_EQ_INT(errno, EINVAL);
	a.grh.dgid = tv_gid0(u.p.b.ctx);
	a.port_num = 2;
	T_EQ_PTR(ibv_create_ah(u.p.a.pd, &a), NULL);
	a.port_num = 1;
	a.grh.sgid_index = 200;
	T_EQ_PTR(ibv_create_ah(u.p.a.pd, &a), NULL);
	memset(&a, 0, sizeof(a));
	a.port_num = 1;
	a.dlid = 0;
	T_EQ_PTR(ibv_create_ah(u.p.a.pd, &a), NULL);
	T_EQ_INT(errno, EINVAL);
	ud_close(&u);
}

/* A datagram longer than the receive WQE completes it with
 * IBV_WC_LOC_LEN_ERR; the QP goes on receiving. */
T_CASE(recv_too_small)
{
	struct ud u;
	uint64_t before;

	ud_open(&u, 1);
	before = TV_COUNTER(ud_len_errs);
	T_EQ_INT(tv_post_recv1(u.p.b.qp, 1, &u.rb, 0, GRH + 10), 0);
	T_EQ_INT(ud_send(u.p.a.qp, u.ab, u.p.b.qp->qp_num, QKEY, &u.sa, 0, 100, 1, 0, 0), 0);
	tv_expect_wc(u.p.b.rcq, u.p.b.qp, 1, IBV_WC_LOC_LEN_ERR, -1);
	T_EQ_INT(TV_COUNTER(ud_len_errs), before + 1);
	T_EQ_INT(tv_qp_state(u.p.b.qp), IBV_QPS_RTS);
	tv_fill(u.sa.p, 100, 9);
	T_EQ_INT(tv_post_recv1(u.p.b.qp, 2, &u.rb, 0, GRH + 100), 0);
	T_EQ_INT(ud_send(u.p.a.qp, u.ab, u.p.b.qp->qp_num, QKEY, &u.sa, 0, 100, 2, 0, 0), 0);
	tv_expect_wc(u.p.b.rcq, u.p.b.qp, 2, IBV_WC_SUCCESS, IBV_WC_RECV);
	T_PATTERN(u.rb.p + GRH, 100, 9, 0);
	ud_close(&u);
}

/* No receive WQE: the datagram is dropped and counted (no RNR on UD); a
 * WQE posted later gets only what comes later. */
T_CASE(no_rwqe_dropped)
{
	struct ud u;
	struct ibv_wc wc;
	uint64_t before;

	ud_open(&u, 1);
	before = TV_COUNTER(drop_no_rwqe);
	T_EQ_INT(ud_send(u.p.a.qp, u.ab, u.p.b.qp->qp_num, QKEY, &u.sa, 0, 8, 1, 1, 1), 0);
	tv_expect_wc(u.p.a.scq, u.p.a.qp, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	for (int i = 0; i < 100 && TV_COUNTER(drop_no_rwqe) == before; i++)
		tv_msleep(5);
	T_EQ_INT(TV_COUNTER(drop_no_rwqe), before + 1);
	T_EQ_INT(tv_post_recv1(u.p.b.qp, 5, &u.rb, 0, 4096), 0);
	tv_expect_no_wc(u.p.b.rcq, 0.2);
	T_EQ_INT(ud_send(u.p.a.qp, u.ab, u.p.b.qp->qp_num, QKEY, &u.sa, 0, 8, 2, 1, 2), 0);
	wc = tv_expect_wc(u.p.b.rcq, u.p.b.qp, 5, IBV_WC_SUCCESS, IBV_WC_RECV);
	T_EQ_INT(ntohl(wc.imm_data), 2);
	ud_close(&u);
}

/* Lost means lost: under 30% injected loss some datagrams never arrive,
 * none arrives twice or out of its own content, and nothing is resent. */
T_CASE(loss_is_loss)
{
	struct ud u;
	const int n = 200; /* the receive queue holds 256 */
	int got = 0, seen[200];
	uint64_t tx_before;

	memset(seen, 0, sizeof(seen));
	setenv("UROCE_LOSS", "0.3", 1);
	setenv("UROCE_SEED", "11", 1);
	ud_open(&u, 1);
	tx_before = TV_COUNTER(tx_pkts);
	for (int i = 0; i < n; i++)
		T_EQ_INT(tv_post_recv1(u.p.b.qp, (uint64_t)i, &u.rb, (size_t)i * 256, 256), 0);
	for (int i = 0; i < n; i++) {
		uint32_t v = htonl((uint32_t)i);

		memcpy(u.sa.p + (size_t)i * 4, &v, 4);
		T_EQ_INT(ud_send(u.p.a.qp, u.ab, u.p.b.qp->qp_num, QKEY, &u.sa, (size_t)i * 4, 4,
				 (uint64_t)i, 0, 0),
			 0);
		tv_expect_wc(u.p.a.scq, u.p.a.qp, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_SEND);
	}
	for (;;) {
		struct ibv_wc wc;
		uint32_t v;

		if (!tv_poll1(u.p.b.rcq, &wc, 0.5))
			break;
		T_EQ_INT(wc.status, IBV_WC_SUCCESS);
		T_EQ_INT(wc.byte_len, GRH + 4);
		/* the datagrams land in the receive WQEs in order */
		memcpy(&v, u.rb.p + wc.wr_id * 256 + GRH, 4);
		v = ntohl(v);
		T_ASSERTF(v < (uint32_t)n && !seen[v], "datagram %u twice or bogus", v);
		seen[v] = 1;
		got++;
	}
	t_log("%d of %d datagrams arrived under 30%% loss", got, n);
	T_GT_INT(got, n / 3);
	T_LT_INT(got, n);
	/* nothing resent: exactly one packet per datagram left the sender */
	T_EQ_INT(TV_COUNTER(tx_pkts) - tx_before, n);
	T_EQ_INT(TV_COUNTER(retrans_pkts), 0);
	ud_close(&u);
}

/* ibv_init_ah_from_wc / ibv_create_ah_from_wc: the answer goes back to
 * the sender, from the address the datagram was sent to. */
T_CASE(ah_from_wc)
{
	struct ud u;
	struct ibv_ah_attr a;
	struct ibv_ah *reply;
	struct ibv_wc wc;

	ud_open(&u, 1);
	T_EQ_INT(tv_post_recv1(u.p.b.qp, 1, &u.rb, 0, 4096), 0);
	T_EQ_INT(ud_send(u.p.a.qp, u.ab, u.p.b.qp->qp_num, QKEY, &u.sa, 0, 16, 1, 0, 0), 0);
	wc = tv_expect_wc(u.p.b.rcq, u.p.b.qp, 1, IBV_WC_SUCCESS, IBV_WC_RECV);
	T_EQ_INT(ibv_init_ah_from_wc(u.p.b.ctx, 1, &wc, (struct ibv_grh *)u.rb.p, &a), 0);
	T_EQ_INT(a.is_global, 1);
	T_EQ_MEM(a.grh.dgid.raw, tv_gid0(u.p.a.ctx).raw, 16);
	T_EQ_INT(a.grh.sgid_index, 0);
	T_EQ_INT(a.grh.hop_limit, 64);
	T_EQ_INT(a.port_num, 1);
	reply = ibv_create_ah_from_wc(u.p.b.pd, &wc, (struct ibv_grh *)u.rb.p, 1);
	T_ASSERTF(reply, "ibv_create_ah_from_wc: %s", strerror(errno));
	tv_fill(u.rb.p + 8192, 32, 77);
	T_EQ_INT(tv_post_recv1(u.p.a.qp, 2, &u.sa, 4096, 4096), 0);
	T_EQ_INT(ud_send(u.p.b.qp, reply, wc.src_qp, QKEY, &u.rb, 8192, 32, 3, 0, 0), 0);
	tv_expect_wc(u.p.a.rcq, u.p.a.qp, 2, IBV_WC_SUCCESS, IBV_WC_RECV);
	T_PATTERN(u.sa.p + 4096 + GRH, 32, 77, 0);
	T_EQ_INT(ibv_destroy_ah(reply), 0);
	ud_close(&u);
}

/* Transitions follow the UD column of IBA 10.3.1 table 91: INIT needs a
 * Q_Key, RTR takes no address, RTS only a PSN; query_qp tells type and
 * Q_Key. */
T_CASE(state_machine)
{
	struct tv_opts o = tv_opts_default();
	struct tv_side s;
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	o.qp_type = IBV_QPT_UD;
	tv_side_open(&s, &o, NULL);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = 77;
	T_EQ_INT(ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);
	T_EQ_INT(ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						 IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY),
		 EINVAL);
	T_EQ_INT(ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						 IBV_QP_QKEY),
		 0);
	a.qp_state = IBV_QPS_RTR;
	T_EQ_INT(ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_AV), EINVAL);
	T_EQ_INT(ibv_modify_qp(s.qp, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_RTS;
	T_EQ_INT(ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT), EINVAL);
	T_EQ_INT(ibv_modify_qp(s.qp, &a, IBV_QP_STATE), EINVAL);
	a.sq_psn = 5;
	T_EQ_INT(ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
	memset(&a, 0, sizeof(a));
	T_EQ_INT(ibv_query_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_QKEY, &ia), 0);
	T_EQ_INT(a.qp_state, IBV_QPS_RTS);
	T_EQ_INT(a.qkey, 77);
	T_EQ_INT(ia.qp_type, IBV_QPT_UD);
	T_EQ_INT(s.qp->qp_type, IBV_QPT_UD);
	tv_side_close(&s);
}

static void gid_of_group(union ibv_gid *g, const char *group)
{
	uint32_t ip = inet_addr(group);

	memset(g, 0, sizeof(*g));
	g->raw[10] = g->raw[11] = 0xff;
	memcpy(g->raw + 12, &ip, 4);
}

/* Multicast: every attached QP (here on two other device contexts, so two
 * engines with a group socket each) gets its own copy; a detached one
 * gets none; a QP still attached cannot be destroyed (EBUSY); only UD QPs
 * and multicast GIDs attach. */
T_CASE(multicast)
{
	struct tv_opts o = tv_opts_default();
	struct tv_side snd, r[2];
	struct tv_buf sb, rb[2];
	union ibv_gid grp, plain;
	struct ibv_ah *ah;
	struct tv_info dummy;

	memset(&dummy, 0, sizeof(dummy));
	o.qp_type = IBV_QPT_UD;
	o.qkey = QKEY;
	tv_side_open(&snd, &o, NULL);
	tv_connect(&snd, &o, &dummy);
	tv_buf_alloc(&sb, snd.pd, 4096, TV_ACCESS_ALL);
	for (int i = 0; i < 2; i++) {
		tv_side_open(&r[i], &o, NULL);
		tv_connect(&r[i], &o, &dummy);
		tv_buf_alloc(&rb[i], r[i].pd, 1u << 16, TV_ACCESS_ALL);
	}
	gid_of_group(&grp, MCAST_GROUP);
	plain = tv_gid0(snd.ctx);
	T_EQ_INT(ibv_attach_mcast(r[0].qp, &plain, 0), EINVAL);
	for (int i = 0; i < 2; i++)
		T_EQ_INT(ibv_attach_mcast(r[i].qp, &grp, 0), 0);
	T_EQ_INT(ibv_attach_mcast(r[0].qp, &grp, 0), 0); /* again: no change */
	ah = ah_to(snd.pd, grp);
	for (int k = 0; k < 3; k++) {
		tv_fill(sb.p + k * 64, 64, 100 + (uint64_t)k);
		for (int i = 0; i < 2; i++)
			T_EQ_INT(tv_post_recv1(r[i].qp, (uint64_t)k, &rb[i], (size_t)k * 1024, 1024), 0);
		T_EQ_INT(ud_send(snd.qp, ah, 0xffffff, QKEY, &sb, (size_t)k * 64, 64, (uint64_t)k, 0,
				 0),
			 0);
		tv_expect_wc(snd.scq, snd.qp, (uint64_t)k, IBV_WC_SUCCESS, IBV_WC_SEND);
		for (int i = 0; i < 2; i++) {
			struct ibv_wc wc = tv_expect_wc(r[i].rcq, r[i].qp, (uint64_t)k,
							IBV_WC_SUCCESS, IBV_WC_RECV);

			T_EQ_INT(wc.byte_len, GRH + 64);
			T_EQ_INT(wc.src_qp, snd.qp->qp_num);
			check_grh(rb[i].p + k * 1024, gid_ip(tv_gid0(snd.ctx)), inet_addr(MCAST_GROUP),
				  12 + 8 + 64 + 4);
			T_PATTERN(rb[i].p + k * 1024 + GRH, 64, 100 + (uint64_t)k, 0);
		}
	}
	T_EQ_INT(ibv_destroy_qp(r[1].qp), EBUSY);
	T_EQ_INT(ibv_detach_mcast(r[1].qp, &grp, 0), 0);
	T_EQ_INT(ibv_detach_mcast(r[1].qp, &grp, 0), EINVAL);
	T_EQ_INT(tv_post_recv1(r[0].qp, 10, &rb[0], 0, 1024), 0);
	T_EQ_INT(tv_post_recv1(r[1].qp, 10, &rb[1], 0, 1024), 0);
	T_EQ_INT(ud_send(snd.qp, ah, 0xffffff, QKEY, &sb, 0, 64, 10, 0, 0), 0);
	tv_expect_wc(r[0].rcq, r[0].qp, 10, IBV_WC_SUCCESS, IBV_WC_RECV);
	tv_expect_no_wc(r[1].rcq, 0.3);
	T_EQ_INT(ibv_detach_mcast(r[0].qp, &grp, 0), 0);
	T_EQ_INT(ibv_destroy_ah(ah), 0);
	for (int i = 0; i < 2; i++) {
		tv_buf_free(&rb[i]);
		tv_side_close(&r[i]);
	}
	tv_buf_free(&sb);
	tv_side_close(&snd);
}

/* Multicast is for UD QPs only. */
T_CASE(multicast_rc_refused)
{
	struct tv_opts o = tv_opts_default();
	struct tv_side s;
	union ibv_gid grp;

	tv_side_open(&s, &o, NULL);
	gid_of_group(&grp, MCAST_GROUP);
	T_EQ_INT(ibv_attach_mcast(s.qp, &grp, 0), EINVAL);
	tv_side_close(&s);
}

/* Many datagrams in flight both ways at once, all checked; a WQE whose
 * buffer is not the sender's memory completes with a protection error and
 * the QP fails (IBA 10.8.3). */
T_CASE(burst_both_ways)
{
	struct ud u;
	struct tv_buf ra, sb;
	const int n = 200;

	ud_open(&u, 1);
	tv_buf_alloc(&ra, u.p.a.pd, (size_t)n * 512, TV_ACCESS_ALL);
	tv_buf_alloc(&sb, u.p.b.pd, (size_t)n * 256, TV_ACCESS_ALL);
	for (int i = 0; i < n; i++) {
		T_EQ_INT(tv_post_recv1(u.p.b.qp, (uint64_t)i, &u.rb, (size_t)i * 512, 512), 0);
		T_EQ_INT(tv_post_recv1(u.p.a.qp, (uint64_t)i, &ra, (size_t)i * 512, 512), 0);
	}
	for (int i = 0; i < n; i++) {
		tv_fill(u.sa.p + (size_t)i * 256, 256, 1000 + (uint64_t)i);
		tv_fill(sb.p + (size_t)i * 256, 256, 5000 + (uint64_t)i);
		T_EQ_INT(ud_send(u.p.a.qp, u.ab, u.p.b.qp->qp_num, QKEY, &u.sa, (size_t)i * 256, 256,
				 (uint64_t)i, 0, 0),
			 0);
		T_EQ_INT(ud_send(u.p.b.qp, u.ba, u.p.a.qp->qp_num, QKEY, &sb, (size_t)i * 256, 256,
				 (uint64_t)i, 0, 0),
			 0);
	}
	for (int i = 0; i < n; i++) {
		tv_expect_wc(u.p.a.scq, u.p.a.qp, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_SEND);
		tv_expect_wc(u.p.b.scq, u.p.b.qp, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_SEND);
		tv_expect_wc(u.p.b.rcq, u.p.b.qp, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RECV);
		tv_expect_wc(u.p.a.rcq, u.p.a.qp, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RECV);
		T_PATTERN(u.rb.p + (size_t)i * 512 + GRH, 256, 1000 + (uint64_t)i, 0);
		T_PATTERN(ra.p + (size_t)i * 512 + GRH, 256, 5000 + (uint64_t)i, 0);
	}
	/* a's memory on b's QP: not b's key */
	T_EQ_INT(ud_send(u.p.b.qp, u.ba, u.p.a.qp->qp_num, QKEY, &u.sa, 0, 256, 999, 0, 0), 0);
	tv_expect_wc(u.p.b.scq, u.p.b.qp, 999, IBV_WC_LOC_PROT_ERR, -1);
	T_EQ_INT(tv_qp_state(u.p.b.qp), IBV_QPS_ERR);
	tv_buf_free(&ra);
	tv_buf_free(&sb);
	ud_close(&u);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
