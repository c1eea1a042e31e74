/* Enum strings, rate conversions, fork helpers and kernel-struct copies
 * (src/verbs/misc.c) against the values users see from Debian 12's
 * libibverbs, plus the provider-facing stubs of src/verbs/compat.c. */
#include "t.h"

#include <errno.h>
#include <stdbool.h>

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

/* Not in any installed header (rdma-core's marshall.h / driver.h). */
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);
extern bool verbs_allow_disassociate_destroy;
void verbs_register_driver_34(const void *ops);
void __verbs_log(void *vctx, uint32_t level, const char *fmt, ...);
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link);
int execute_ioctl(void *context, void *cmdb);
void *verbs_open_device(void *device, void *private_data);
void *_verbs_init_and_alloc_context(void *device, int cmd_fd, size_t alloc_size,
				    void *context_offset, uint32_t driver_id);
int ibv_cmd_alloc_pd(void);
int ibv_cmd_post_send(void);

T_CASE(wc_status_str)
{
	T_EQ_STR(ibv_wc_status_str(IBV_WC_SUCCESS), "success");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_LOC_LEN_ERR), "local length error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_LOC_QP_OP_ERR), "local QP operation error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_LOC_EEC_OP_ERR), "local EE context operation error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_LOC_PROT_ERR), "local protection error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_MW_BIND_ERR), "memory management operation error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_BAD_RESP_ERR), "bad response error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_LOC_ACCESS_ERR), "local access error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_REM_INV_REQ_ERR), "remote invalid request error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR), "remote access error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_REM_OP_ERR), "remote operation error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR), "transport retry counter exceeded");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_RNR_RETRY_EXC_ERR), "RNR retry counter exceeded");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_LOC_RDD_VIOL_ERR), "local RDD violation error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_REM_INV_RD_REQ_ERR), "remote invalid RD request");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_REM_ABORT_ERR), "aborted error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_INV_EECN_ERR), "invalid EE context number");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_INV_EEC_STATE_ERR), "invalid EE context state");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_FATAL_ERR), "fatal error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_RESP_TIMEOUT_ERR), "response timeout error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_GENERAL_ERR), "general error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_TM_ERR), "TM error");
	T_EQ_STR(ibv_wc_status_str(IBV_WC_TM_RNDV_INCOMPLETE), "TM software rendezvous");
	T_EQ_STR(ibv_wc_status_str((enum ibv_wc_status)(IBV_WC_TM_RNDV_INCOMPLETE + 1)), "unknown");
	T_EQ_STR(ibv_wc_status_str((enum ibv_wc_status)-1), "unknown");
	T_EQ_STR(ibv_wc_status_str((enum ibv_wc_status)1000000), "unknown");
}

T_CASE(event_type_str)
{
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_CQ_ERR), "CQ error");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_QP_FATAL), "local work queue catastrophic error");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_QP_REQ_ERR), "invalid request local work queue error");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_QP_ACCESS_ERR), "local access violation work queue error");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_COMM_EST), "communication established");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_SQ_DRAINED), "send queue drained");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_PATH_MIG), "path migrated");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_PATH_MIG_ERR), "path migration request error");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_DEVICE_FATAL), "local catastrophic error");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_PORT_ACTIVE), "port active");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_PORT_ERR), "port error");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_LID_CHANGE), "LID change");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_PKEY_CHANGE), "P_Key change");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_SM_CHANGE), "SM change");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_SRQ_ERR), "SRQ catastrophic error");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_SRQ_LIMIT_REACHED), "SRQ limit reached");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_QP_LAST_WQE_REACHED), "last WQE reached");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_CLIENT_REREGISTER), "client reregistration");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_GID_CHANGE), "GID table change");
	T_EQ_STR(ibv_event_type_str(IBV_EVENT_WQ_FATAL), "WQ fatal");
	T_EQ_STR(ibv_event_type_str((enum ibv_event_type)(IBV_EVENT_WQ_FATAL + 1)), "unknown");
	T_EQ_STR(ibv_event_type_str((enum ibv_event_type)-1), "unknown");
}

T_CASE(node_type_str)
{
	T_EQ_STR(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter");
	T_EQ_STR(ibv_node_type_str(IBV_NODE_SWITCH), "InfiniBand switch");
	T_EQ_STR(ibv_node_type_str(IBV_NODE_ROUTER), "InfiniBand router");
	T_EQ_STR(ibv_node_type_str(IBV_NODE_RNIC), "iWARP NIC");
	T_EQ_STR(ibv_node_type_str(IBV_NODE_USNIC), "usNIC");
	T_EQ_STR(ibv_node_type_str(IBV_NODE_USNIC_UDP), "usNIC UDP");
	T_EQ_STR(ibv_node_type_str(IBV_NODE_UNSPECIFIED), "unspecified");
	T_EQ_STR(ibv_node_type_str(IBV_NODE_UNKNOWN), "unknown");
	T_EQ_STR(ibv_node_type_str((enum ibv_node_type)0), "unknown");
	T_EQ_STR(ibv_node_type_str((enum ibv_node_type)(IBV_NODE_UNSPECIFIED + 1)), "unknown");
	T_EQ_STR(ibv_node_type_str((enum ibv_node_type)-2), "unknown");
}

T_CASE(port_state_str)
{
	T_EQ_STR(ibv_port_state_str(IBV_PORT_NOP), "no state change (NOP)");
	T_EQ_STR(ibv_port_state_str(IBV_PORT_DOWN), "down");
	T_EQ_STR(ibv_port_state_str(IBV_PORT_INIT), "init");
	T_EQ_STR(ibv_port_state_str(IBV_PORT_ARMED), "armed");
	T_EQ_STR(ibv_port_state_str(IBV_PORT_ACTIVE), "active");
	T_EQ_STR(ibv_port_state_str(IBV_PORT_ACTIVE_DEFER), "active defer");
	T_EQ_STR(ibv_port_state_str((enum ibv_port_state)6), "unknown");
	T_EQ_STR(ibv_port_state_str((enum ibv_port_state)-1), "unknown");
}

/* enum value, multiple of 2.5 Gb/s (-1: not a multiple), Mb/s */
static const struct {
	int rate, mult, mbps;
} rates[] = {
	{ IBV_RATE_2_5_GBPS, 1, 2500 },     { IBV_RATE_5_GBPS, 2, 5000 },
	{ IBV_RATE_10_GBPS, 4, 10000 },     { IBV_RATE_20_GBPS, 8, 20000 },
	{ IBV_RATE_30_GBPS, 12, 30000 },    { IBV_RATE_40_GBPS, 16, 40000 },
	{ IBV_RATE_60_GBPS, 24, 60000 },    { IBV_RATE_80_GBPS, 32, 80000 },
	{ IBV_RATE_120_GBPS, 48, 120000 },  { IBV_RATE_14_GBPS, -1, 14062 },
	{ IBV_RATE_56_GBPS, -1, 56250 },    { IBV_RATE_112_GBPS, -1, 112500 },
	{ IBV_RATE_168_GBPS, -1, 168750 },  { IBV_RATE_25_GBPS, -1, 25781 },
	{ IBV_RATE_100_GBPS, -1, 103125 },  { IBV_RATE_200_GBPS, -1, 206250 },
	{ IBV_RATE_300_GBPS, -1, 309375 },  { IBV_RATE_28_GBPS, 11, 28125 },
	{ IBV_RATE_50_GBPS, 20, 53125 },    { IBV_RATE_400_GBPS, 160, 425000 },
	{ IBV_RATE_600_GBPS, 240, 637500 }, { IBV_RATE_800_GBPS, 320, 850000 },
	{ IBV_RATE_1200_GBPS, 480, 1275000 },
};

T_CASE(rate_header_examples)
{
	/* The examples in verbs.h's comments. */
	T_EQ_INT(ibv_rate_to_mult(IBV_RATE_5_GBPS), 2);
	T_EQ_INT(ibv_rate_to_mbps(IBV_RATE_5_GBPS), 5000);
	T_EQ_INT(mult_to_ibv_rate(2), IBV_RATE_5_GBPS);
	T_EQ_INT(mbps_to_ibv_rate(5000), IBV_RATE_5_GBPS);
	/* What RoCE links report. */
	T_EQ_INT(ibv_rate_to_mbps(IBV_RATE_100_GBPS), 103125);
	T_EQ_INT(ibv_rate_to_mbps(IBV_RATE_25_GBPS), 25781);
}

T_CASE(rate_tables)
{
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		T_EQ_INT(ibv_rate_to_mult((enum ibv_rate)rates[i].rate), rates[i].mult);
		T_EQ_INT(ibv_rate_to_mbps((enum ibv_rate)rates[i].rate), rates[i].mbps);
		T_EQ_INT(mbps_to_ibv_rate(rates[i].mbps), rates[i].rate);
		if (rates[i].mult > 0)
			T_EQ_INT(mult_to_ibv_rate(rates[i].mult), rates[i].rate);
	}
}

T_CASE(rate_invalid)
{
	T_EQ_INT(ibv_rate_to_mult(IBV_RATE_MAX), -1);
	T_EQ_INT(ibv_rate_to_mbps(IBV_RATE_MAX), -1);
	T_EQ_INT(ibv_rate_to_mult((enum ibv_rate)1), -1);
	T_EQ_INT(ibv_rate_to_mbps((enum ibv_rate)1), -1);
	T_EQ_INT(ibv_rate_to_mult((enum ibv_rate)(IBV_RATE_1200_GBPS + 1)), -1);
	T_EQ_INT(ibv_rate_to_mbps((enum ibv_rate)(IBV_RATE_1200_GBPS + 1)), -1);
	T_EQ_INT(ibv_rate_to_mbps((enum ibv_rate)-1), -1);
	T_EQ_INT(mult_to_ibv_rate(0), IBV_RATE_MAX);
	T_EQ_INT(mult_to_ibv_rate(-1), IBV_RATE_MAX);
	T_EQ_INT(mult_to_ibv_rate(3), IBV_RATE_MAX);
	T_EQ_INT(mult_to_ibv_rate(1000), IBV_RATE_MAX);
	T_EQ_INT(mbps_to_ibv_rate(0), IBV_RATE_MAX);
	T_EQ_INT(mbps_to_ibv_rate(-1), IBV_RATE_MAX);
	T_EQ_INT(mbps_to_ibv_rate(100000), IBV_RATE_MAX); /* 100G is 103125 */
	T_EQ_INT(mbps_to_ibv_rate(2501), IBV_RATE_MAX);
	/* Every other value in a wide range maps to nothing. */
	int hits = 0;
	for (int m = -10; m <= 2000; m++)
		hits += mult_to_ibv_rate(m) != IBV_RATE_MAX;
	T_EQ_INT(hits, 15);
}

T_CASE(fork_helpers)
{
	char buf[8192];

	T_EQ_INT(ibv_fork_init(), 0);
	T_EQ_INT(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
	T_EQ_INT(ibv_dontfork_range(buf, sizeof(buf)), 0);
	T_EQ_INT(ibv_dofork_range(buf, sizeof(buf)), 0);
	T_EQ_INT(ibv_fork_init(), 0);
}

static void fill(void *p, size_t n, unsigned char seed)
{
	unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		c[i] = (unsigned char)(seed + i * 7);
}

T_CASE(copy_ah_attr_from_kern)
{
	struct ib_uverbs_ah_attr k;
	struct ibv_ah_attr a;

	fill(&k, sizeof(k), 3);
	memset(&a, 0, sizeof(a));
	ibv_copy_ah_attr_from_kern(&a, &k);
	T_EQ_MEM(a.grh.dgid.raw, k.grh.dgid, 16);
	T_EQ_INT(a.grh.flow_label, k.grh.flow_label);
	T_EQ_INT(a.grh.sgid_index, k.grh.sgid_index);
	T_EQ_INT(a.grh.hop_limit, k.grh.hop_limit);
	T_EQ_INT(a.grh.traffic_class, k.grh.traffic_class);
	T_EQ_INT(a.dlid, k.dlid);
	T_EQ_INT(a.sl, k.sl);
	T_EQ_INT(a.src_path_bits, k.src_path_bits);
	T_EQ_INT(a.static_rate, k.static_rate);
	T_EQ_INT(a.is_global, k.is_global);
	T_EQ_INT(a.port_num, k.port_num);
}

T_CASE(copy_qp_attr_from_kern)
{
	struct ib_uverbs_qp_attr k;
	struct ibv_qp_attr a;

	fill(&k, sizeof(k), 11);
	k.qp_state = IBV_QPS_RTS;
	k.cur_qp_state = IBV_QPS_RTR;
	k.path_mtu = IBV_MTU_4096;
	k.path_mig_state = IBV_MIG_ARMED;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT; /* set by the caller; not overwritten */
	a.rate_limit = 12345;
	ibv_copy_qp_attr_from_kern(&a, &k);
	T_EQ_INT(a.qp_state, IBV_QPS_INIT);
	T_EQ_INT(a.cur_qp_state, IBV_QPS_RTR);
	T_EQ_INT(a.path_mtu, IBV_MTU_4096);
	T_EQ_INT(a.path_mig_state, IBV_MIG_ARMED);
	T_EQ_INT(a.qkey, k.qkey);
	T_EQ_INT(a.rq_psn, k.rq_psn);
	T_EQ_INT(a.sq_psn, k.sq_psn);
	T_EQ_INT(a.dest_qp_num, k.dest_qp_num);
	T_EQ_INT(a.qp_access_flags, k.qp_access_flags);
	T_EQ_INT(a.cap.max_send_wr, k.max_send_wr);
	T_EQ_INT(a.cap.max_recv_wr, k.max_recv_wr);
	T_EQ_INT(a.cap.max_send_sge, k.max_send_sge);
	T_EQ_INT(a.cap.max_recv_sge, k.max_recv_sge);
	T_EQ_INT(a.cap.max_inline_data, k.max_inline_data);
	T_EQ_MEM(a.ah_attr.grh.dgid.raw, k.ah_attr.grh.dgid, 16);
	T_EQ_INT(a.ah_attr.dlid, k.ah_attr.dlid);
	T_EQ_INT(a.ah_attr.port_num, k.ah_attr.port_num);
	T_EQ_MEM(a.alt_ah_attr.grh.dgid.raw, k.alt_ah_attr.grh.dgid, 16);
	T_EQ_INT(a.alt_ah_attr.grh.flow_label, k.alt_ah_attr.grh.flow_label);
	T_EQ_INT(a.alt_ah_attr.sl, k.alt_ah_attr.sl);
	T_EQ_INT(a.pkey_index, k.pkey_index);
	T_EQ_INT(a.alt_pkey_index, k.alt_pkey_index);
	T_EQ_INT(a.en_sqd_async_notify, k.en_sqd_async_notify);
	T_EQ_INT(a.sq_draining, k.sq_draining);
	T_EQ_INT(a.max_rd_atomic, k.max_rd_atomic);
	T_EQ_INT(a.max_dest_rd_atomic, k.max_dest_rd_atomic);
	T_EQ_INT(a.min_rnr_timer, k.min_rnr_timer);
	T_EQ_INT(a.port_num, k.port_num);
	T_EQ_INT(a.timeout, k.timeout);
	T_EQ_INT(a.retry_cnt, k.retry_cnt);
	T_EQ_INT(a.rnr_retry, k.rnr_retry);
	T_EQ_INT(a.alt_port_num, k.alt_port_num);
	T_EQ_INT(a.alt_timeout, k.alt_timeout);
	T_EQ_INT(a.rate_limit, 12345);
}

T_CASE(copy_path_rec_round_trip)
{
	struct ib_user_path_rec k, k2;
	struct ibv_sa_path_rec p;

	fill(&k, sizeof(k), 29);
	k.raw_traffic = 1;
	k.reversible = 1;
	k.mtu = IBV_MTU_1024;
	memset(&p, 0, sizeof(p));
	ibv_copy_path_rec_from_kern(&p, &k);
	T_EQ_MEM(p.dgid.raw, k.dgid, 16);
	T_EQ_MEM(p.sgid.raw, k.sgid, 16);
	T_EQ_INT(p.dlid, k.dlid);
	T_EQ_INT(p.slid, k.slid);
	T_EQ_INT(p.raw_traffic, 1);
	T_EQ_U64(p.flow_label, k.flow_label);
	T_EQ_INT(p.hop_limit, k.hop_limit);
	T_EQ_INT(p.traffic_class, k.traffic_class);
	T_EQ_INT(p.reversible, 1);
	T_EQ_INT(p.numb_path, k.numb_path);
	T_EQ_INT(p.pkey, k.pkey);
	T_EQ_INT(p.sl, k.sl);
	T_EQ_INT(p.mtu_selector, k.mtu_selector);
	T_EQ_INT(p.mtu, IBV_MTU_1024);
	T_EQ_INT(p.rate_selector, k.rate_selector);
	T_EQ_INT(p.rate, k.rate);
	T_EQ_INT(p.packet_life_time_selector, k.packet_life_time_selector);
	T_EQ_INT(p.packet_life_time, k.packet_life_time);
	T_EQ_INT(p.preference, k.preference);

	/* The kernel struct has no padding: back again gives the same bytes. */
	memset(&k2, 0x5a, sizeof(k2));
	ibv_copy_path_rec_to_kern(&k2, &p);
	T_EQ_MEM(&k2, &k, sizeof(k));
}

T_CASE(provider_stubs)
{
	errno = 0;
	verbs_register_driver_34(NULL);
	verbs_register_driver_34((const void *)"not a real ops table");
	__verbs_log(NULL, 1, "dropped unless UROCE_LOG=debug: %d", 42);
	T_EQ_INT(verbs_allow_disassociate_destroy, 0);
	T_EQ_INT(sizeof(verbs_allow_disassociate_destroy), 1);
	T_EQ_INT(__ioctl_final_num_attrs(5, NULL), 5);
	T_EQ_INT(execute_ioctl(NULL, NULL), EOPNOTSUPP);
	T_EQ_INT(ibv_cmd_alloc_pd(), EOPNOTSUPP);
	T_EQ_INT(ibv_cmd_post_send(), EOPNOTSUPP);
	errno = 0;
	T_ASSERT(verbs_open_device(NULL, NULL) == NULL);
	T_EQ_INT(errno, EOPNOTSUPP);
	errno = 0;
	T_ASSERT(_verbs_init_and_alloc_context(NULL, -1, 64, NULL, 0) == NULL);
	T_EQ_INT(errno, EOPNOTSUPP);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
