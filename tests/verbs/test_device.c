/* Device discovery and queries: the list, open/close, device, port, GID and
 * P_Key attributes as uroce reports them on loopback. */
#include "common.h"

#include <dlfcn.h>
#include <net/if.h>

static const char *netdev(void)
{
	const char *n = getenv("UROCE_NETDEV");

	return n ? n : "lo";
}

T_CASE(device_list)
{
	struct ibv_device **l;
	char want[64];
	int n = -1;

	setenv("UROCE_NETDEV", "lo", 0);
	l = ibv_get_device_list(&n);
	T_ASSERTF(l != NULL, "ibv_get_device_list: %s", strerror(errno));
	T_GE_INT(n, 1);
	T_EQ_PTR(l[n], NULL);
	for (int i = 0; i < n; i++) {
		T_ASSERT(l[i] != NULL);
		T_ASSERT(ibv_get_device_name(l[i]) != NULL);
		T_EQ_STR(ibv_get_device_name(l[i]), l[i]->name);
		T_ASSERTF(!strncmp(l[i]->name, "uroce_", 6), "device name %s", l[i]->name);
		T_EQ_INT(l[i]->node_type, IBV_NODE_CA);
		T_EQ_INT(l[i]->transport_type, IBV_TRANSPORT_IB);
	}
	snprintf(want, sizeof(want), "uroce_%s", netdev());
	if (!strcmp(netdev(), "lo")) {
		T_EQ_INT(n, 1);
		T_EQ_STR(ibv_get_device_name(l[0]), want);
	}
	t_log("%d device(s), first %s guid 0x%016" PRIx64, n, l[0]->name,
	      (uint64_t)be64toh(ibv_get_device_guid(l[0])));
	ibv_free_device_list(l);
}

T_CASE(device_list_null_num)
{
	struct ibv_device **l;

	setenv("UROCE_NETDEV", "lo", 0);
	l = ibv_get_device_list(NULL);
	T_ASSERT(l != NULL);
	T_ASSERT(l[0] != NULL);
	ibv_free_device_list(l);
	/* A second list is independent of the first. */
	l = ibv_get_device_list(NULL);
	T_ASSERT(l != NULL && l[0] != NULL);
	ibv_free_device_list(l);
}

T_CASE(open_close)
{
	struct ibv_device **l;
	struct ibv_context *c1, *c2;
	int n = 0;

	setenv("UROCE_NETDEV", "lo", 0);
	l = ibv_get_device_list(&n);
	T_ASSERT(l && n >= 1);
	c1 = ibv_open_device(l[0]);
	T_ASSERTF(c1 != NULL, "ibv_open_device: %s", strerror(errno));
	c2 = ibv_open_device(l[0]);
	T_ASSERTF(c2 != NULL, "second ibv_open_device: %s", strerror(errno));
	T_ASSERT(c1 != c2);
	T_EQ_PTR(c1->device, l[0]);
	T_EQ_PTR(c2->device, l[0]);
	T_GE_INT(c1->num_comp_vectors, 1);
	T_GE_INT(c1->async_fd, 0);
	T_GE_INT(c2->async_fd, 0);
	T_NE_INT(c1->async_fd, c2->async_fd);
	/* The list may be freed while contexts stay open. */
	ibv_free_device_list(l);
	T_EQ_INT(ibv_close_device(c1), 0);
	/* c2 still works after c1 is gone. */
	{
		struct ibv_device_attr a;

		T_EQ_INT(ibv_query_device(c2, &a), 0);
	}
	T_EQ_INT(ibv_close_device(c2), 0);
}

T_CASE(query_device)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_device_attr a;

	memset(&a, 0xa5, sizeof(a));
	T_EQ_INT(ibv_query_device(ctx, &a), 0);
	t_log("fw_ver '%s' vendor 0x%x part 0x%x max_qp %d max_qp_wr %d max_sge %d "
	      "max_cqe %d max_mr_size %" PRIu64 " max_qp_rd_atom %d init_rd_atom %d atomic_cap %d",
	      a.fw_ver, a.vendor_id, a.vendor_part_id, a.max_qp, a.max_qp_wr, a.max_sge,
	      a.max_cqe, (uint64_t)a.max_mr_size, a.max_qp_rd_atom,
	      a.max_qp_init_rd_atom, (int)a.atomic_cap);
	T_ASSERT(memchr(a.fw_ver, 0, sizeof(a.fw_ver)) != NULL);
	T_EQ_INT(a.phys_port_cnt, 1);
	T_GE_INT(a.max_qp, 64);
	T_GE_INT(a.max_qp_wr, 1024);
	T_GE_INT(a.max_sge, 16);
	T_GE_INT(a.max_cq, 64);
	T_GE_INT(a.max_cqe, 4096);
	T_GE_INT(a.max_mr, 64);
	T_GE_INT(a.max_pd, 16);
	T_GE_INT((long long)(a.max_mr_size >> 20), 1024); /* >= 1 GiB */
	T_GE_INT(a.max_qp_rd_atom, 1);
	T_GE_INT(a.max_qp_init_rd_atom, 1);
	T_GE_INT(a.max_res_rd_atom, a.max_qp_rd_atom);
	T_NE_INT(a.atomic_cap, IBV_ATOMIC_NONE);
	T_NE_INT(a.vendor_id, 0x02c9);   /* Mellanox */
	T_NE_INT(a.vendor_id, 0x15b3);   /* Mellanox PCI id */
	T_NE_INT(a.page_size_cap, 0);
	T_NE_INT(a.sys_image_guid, 0);
	T_EQ_U64(a.node_guid, ibv_get_device_guid(ctx->device));
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(query_device_ex)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_device_attr a;
	struct ibv_device_attr_ex ax;

	T_EQ_INT(ibv_query_device(ctx, &a), 0);
	memset(&ax, 0, sizeof(ax));
	T_EQ_INT(ibv_query_device_ex(ctx, NULL, &ax), 0);
	T_EQ_INT(ax.orig_attr.max_qp, a.max_qp);
	T_EQ_INT(ax.orig_attr.max_qp_wr, a.max_qp_wr);
	T_EQ_INT(ax.orig_attr.max_sge, a.max_sge);
	T_EQ_INT(ax.orig_attr.max_cqe, a.max_cqe);
	T_EQ_U64(ax.orig_attr.max_mr_size, a.max_mr_size);
	T_EQ_INT(ax.orig_attr.max_qp_rd_atom, a.max_qp_rd_atom);
	T_EQ_INT(ax.orig_attr.atomic_cap, a.atomic_cap);
	T_EQ_INT(ax.orig_attr.vendor_id, a.vendor_id);
	T_EQ_INT(ax.orig_attr.phys_port_cnt, a.phys_port_cnt);
	T_EQ_U64(ax.orig_attr.node_guid, a.node_guid);
	T_EQ_STR(ax.orig_attr.fw_ver, a.fw_ver);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(query_port)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_port_attr p;

	memset(&p, 0xa5, sizeof(p));
	T_EQ_INT(ibv_query_port(ctx, 1, &p), 0);
	t_log("state %d link_layer %d active_mtu %d max_mtu %d gid_tbl_len %d "
	      "pkey_tbl_len %d max_msg_sz %u", p.state, p.link_layer, p.active_mtu,
	      p.max_mtu, p.gid_tbl_len, p.pkey_tbl_len, p.max_msg_sz);
	T_EQ_INT(p.state, IBV_PORT_ACTIVE);
	T_EQ_INT(p.link_layer, IBV_LINK_LAYER_ETHERNET);
	if (!strcmp(netdev(), "lo"))
		T_EQ_INT(p.active_mtu, IBV_MTU_4096);
	T_GE_INT(p.max_mtu, p.active_mtu);
	T_GE_INT(p.gid_tbl_len, 1);
	T_GE_INT(p.pkey_tbl_len, 1);
	T_GE_INT(p.max_msg_sz, (64u << 20) + 13);
	T_EQ_INT(p.phys_state, 5); /* LinkUp */
	T_EQ_INT(ibv_close_device(ctx), 0);
}

/* NCCL (its own verbs headers) and rdma-core 50's inline ibv_query_port
 * call the context's query_port with the newer 56-byte struct, whose
 * active_speed_ex sits at offset 52, without clearing it first, and NCCL
 * computes the link speed from it: every byte of the given length must be
 * written, the same way on every call. */
T_CASE(query_port_56_bytes_uncleared)
{
	struct ibv_context *ctx = tv_open_device();
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);
	struct ibv_port_attr p;
	uint8_t a[64], b[64];
	uint32_t speed_ex;

	T_ASSERTF(vctx, "the context has no extended query_port");
	memset(&p, 0, sizeof(p));
	T_EQ_INT(ibv_query_port(ctx, 1, &p), 0);
	memset(a, 0xa5, sizeof(a));
	memset(b, 0x5a, sizeof(b));
	T_EQ_INT(vctx->query_port(ctx, 1, (struct ibv_port_attr *)a, 56), 0);
	T_EQ_INT(vctx->query_port(ctx, 1, (struct ibv_port_attr *)b, 56), 0);
	/* the same 56 bytes whatever was there before */
	T_EQ_MEM(a, b, 56);
	/* and nothing past the length given */
	T_EQ_INT(a[56], 0xa5);
	T_EQ_INT(b[56], 0x5a);
	memcpy(&speed_ex, a + 52, 4);
	t_log("active_speed %d active_width %d active_speed_ex %u", p.active_speed,
	      p.active_width, speed_ex);
	T_EQ_INT(speed_ex, p.active_speed);
	T_EQ_MEM(a, &p, offsetof(struct ibv_port_attr, port_cap_flags2) + 2);
	/* a longer struct than uroce knows: the rest is zeroed */
	memset(a, 0xa5, sizeof(a));
	T_EQ_INT(vctx->query_port(ctx, 1, (struct ibv_port_attr *)a, sizeof(a)), 0);
	for (size_t i = 56; i < sizeof(a); i++)
		T_EQ_INT(a[i], 0);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(query_port_out_of_range)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_port_attr p;

	T_NE_INT(ibv_query_port(ctx, 0, &p), 0);
	T_NE_INT(ibv_query_port(ctx, 2, &p), 0);
	T_NE_INT(ibv_query_port(ctx, 255, &p), 0);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

static const uint8_t gid_lo[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
				    127, 0, 0, 1 };

T_CASE(query_gid0)
{
	struct ibv_context *ctx = tv_open_device();
	union ibv_gid g;

	if (strcmp(netdev(), "lo"))
		T_SKIP("UROCE_NETDEV is not lo");
	memset(&g, 0xa5, sizeof(g));
	T_EQ_INT(ibv_query_gid(ctx, 1, 0, &g), 0);
	T_EQ_MEM(g.raw, gid_lo, 16);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(query_gid_out_of_range)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_port_attr p;
	union ibv_gid g;

	T_EQ_INT(ibv_query_port(ctx, 1, &p), 0);
	T_EQ_INT(ibv_query_gid(ctx, 1, p.gid_tbl_len, &g), -1);
	T_EQ_INT(ibv_query_gid(ctx, 1, -1, &g), -1);
	T_EQ_INT(ibv_query_gid(ctx, 2, 0, &g), -1);
	T_EQ_INT(ibv_query_gid(ctx, 0, 0, &g), -1);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(query_gid_ex)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_gid_entry e;
	union ibv_gid g;

	memset(&e, 0xa5, sizeof(e));
	T_EQ_INT(ibv_query_gid_ex(ctx, 1, 0, &e, 0), 0);
	T_EQ_INT(e.gid_type, IBV_GID_TYPE_ROCE_V2);
	T_EQ_INT(e.gid_index, 0);
	T_EQ_INT(e.port_num, 1);
	T_EQ_INT(ibv_query_gid(ctx, 1, 0, &g), 0);
	T_EQ_MEM(e.gid.raw, g.raw, 16);
	T_EQ_INT(e.ndev_ifindex, if_nametoindex(netdev()));
	if (!strcmp(netdev(), "lo"))
		T_EQ_MEM(e.gid.raw, gid_lo, 16);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(query_gid_ex_out_of_range)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_port_attr p;
	struct ibv_gid_entry e;

	T_EQ_INT(ibv_query_port(ctx, 1, &p), 0);
	T_NE_INT(ibv_query_gid_ex(ctx, 1, p.gid_tbl_len, &e, 0), 0);
	T_NE_INT(ibv_query_gid_ex(ctx, 2, 0, &e, 0), 0);
	T_NE_INT(ibv_query_gid_ex(ctx, 0, 0, &e, 0), 0);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(query_gid_table)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_gid_entry e[16];
	ssize_t n;

	memset(e, 0, sizeof(e));
	n = ibv_query_gid_table(ctx, e, 16, 0);
	T_GE_INT(n, 1);
	T_EQ_INT(e[0].gid_index, 0);
	T_EQ_INT(e[0].port_num, 1);
	T_EQ_INT(e[0].gid_type, IBV_GID_TYPE_ROCE_V2);
	if (!strcmp(netdev(), "lo"))
		T_EQ_MEM(e[0].gid.raw, gid_lo, 16);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

/* ibv_query_gid_type is IBVERBS_PRIVATE_34 (used by ibv_devinfo); it is not in
 * the public header, so it is looked up at run time.
 * enum ibv_gid_type_sysfs { IB_ROCE_V1 = 0, ROCE_V2 = 1 }. */
T_CASE(query_gid_type)
{
	struct ibv_context *ctx = tv_open_device();
	int (*fn)(struct ibv_context *, uint8_t, unsigned int, int *);
	int type = -1;

	*(void **)&fn = dlsym(RTLD_DEFAULT, "ibv_query_gid_type");
	T_ASSERTF(fn != NULL, "ibv_query_gid_type not exported");
	T_EQ_INT(fn(ctx, 1, 0, &type), 0);
	T_EQ_INT(type, 1);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(query_pkey)
{
	struct ibv_context *ctx = tv_open_device();
	struct ibv_port_attr p;
	__be16 pkey = 0;

	T_EQ_INT(ibv_query_port(ctx, 1, &p), 0);
	T_EQ_INT(ibv_query_pkey(ctx, 1, 0, &pkey), 0);
	T_EQ_INT(ntohs(pkey), 0xffff);
	T_EQ_INT(ibv_query_pkey(ctx, 1, p.pkey_tbl_len, &pkey), -1);
	T_EQ_INT(ibv_query_pkey(ctx, 2, 0, &pkey), -1);
	T_EQ_INT(ibv_get_pkey_index(ctx, 1, htons(0xffff)), 0);
	T_ASSERT(ibv_get_pkey_index(ctx, 1, htons(0x1234)) < 0);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

T_CASE(async_fd_exists)
{
	struct ibv_context *ctx = tv_open_device();
	struct pollfd pfd;

	T_GE_INT(ctx->async_fd, 0);
	T_GE_INT(fcntl(ctx->async_fd, F_GETFL), 0);
	pfd.fd = ctx->async_fd;
	pfd.events = POLLIN;
	pfd.revents = 0;
	/* No event is pending on a fresh context. */
	T_EQ_INT(poll(&pfd, 1, 50), 0);
	T_EQ_INT(ibv_close_device(ctx), 0);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
