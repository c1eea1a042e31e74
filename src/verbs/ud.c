/* Address handles and multicast: what UD QPs send to (ibv_create_ah(3),
 * ibv_attach_mcast(3)). RoCEv2 addresses are GIDs holding IPv4 addresses
 * (::ffff:a.b.c.d); a multicast GID holds an IPv4 group (224.0.0.0/4), as
 * rdma_cm maps them. Programs that address by LID without a GRH get the
 * synthetic LIDs of docs/design.md. */
#include "verbs_int.h"

#include <errno.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* The IPv4 address a GID holds (network order), or 0. */
static uint32_t gid_ip4(const union ibv_gid *g)
{
	uint32_t ip;

	if (memcmp(g->raw, v4mapped, sizeof(v4mapped)))
		return 0;
	memcpy(&ip, g->raw + 12, 4);
	return ip;
}

static void ip4_gid(union ibv_gid *g, uint32_t ip)
{
	memset(g, 0, sizeof(*g));
	memcpy(g->raw, v4mapped, sizeof(v4mapped));
	memcpy(g->raw + 12, &ip, 4);
}

UROCE_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct uroce_ctx *ctx;
	struct uroce_ah *ah;
	uint32_t ip;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	ctx = to_uctx(pd->context);
	if (attr->port_num && attr->port_num != 1) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->is_global) {
		/* uroce carries IPv4 RoCEv2 GIDs */
		if (attr->grh.sgid_index >= ctx->dev.ngids || !(ip = gid_ip4(&attr->grh.dgid))) {
			errno = EINVAL;
			return NULL;
		}
	} else {
		/* no GRH: the synthetic LID names an address in our /16 */
		if (!attr->dlid || !uroce_port_lid(ctx->dev.ip4)) {
			errno = EINVAL;
			return NULL;
		}
		ip = uroce_lid_to_ip4(ctx->dev.ip4, attr->dlid);
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->ibah.context = pd->context;
	ah->ibah.pd = pd;
	ah->ibah.handle = (uint32_t)(uintptr_t)ah;
	ah->attr = *attr;
	ah->ip4 = ip;
	ah->tos = attr->is_global ? attr->grh.traffic_class : 0;
	/* ECT(0) unless the traffic class sets ECN bits or UROCE_ECN=0, as
	 * for RC (verbs.c) */
	if (!(ah->tos & 3) && !(getenv("UROCE_ECN") && !strcmp(getenv("UROCE_ECN"), "0")))
		ah->tos |= 2;
	atomic_fetch_add(&to_upd(pd)->refs, 1);
	return &ah->ibah;
}

UROCE_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct uroce_ah *ah;

	if (!ibah)
		return EINVAL;
	ah = to_uah(ibah);
	atomic_fetch_sub(&to_upd(ibah->pd)->refs, 1);
	free(ah);
	return 0;
}

/* The GRH area of a UD receive holds the datagram's IPv4 header in its
 * last 20 bytes (RoCEv2, annex A17.4.5.1); the AH answers to its source,
 * from the GID of the address it was sent to (ibv_init_ah_from_wc(3)). */
UROCE_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
				     struct ibv_wc *wc, struct ibv_grh *grh,
				     struct ibv_ah_attr *ah_attr)
{
	struct uroce_ctx *ctx;
	struct iphdr ip;
	int idx = -1;

	if (!context || !wc || !ah_attr || (port_num && port_num != 1))
		return EINVAL;
	ctx = to_uctx(context);
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num ? port_num : 1;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0;
	if (!grh)
		return EINVAL;
	memcpy(&ip, (const uint8_t *)grh + 20, sizeof(ip));
	if (ip.version != 4)
		return EINVAL; /* uroce receives IPv4 only */
	for (int i = 0; i < ctx->dev.ngids; i++) {
		union ibv_gid g;

		memcpy(g.raw, ctx->dev.gid[i], 16);
		if (gid_ip4(&g) == ip.daddr)
			idx = i;
	}
	if (idx < 0) {
		/* sent to a group: answer from our own address (GID 0) */
		if (!IN_MULTICAST(ntohl(ip.daddr)))
			return EINVAL;
		idx = 0;
	}
	ah_attr->is_global = 1;
	ip4_gid(&ah_attr->grh.dgid, ip.saddr);
	ah_attr->grh.sgid_index = (uint8_t)idx;
	ah_attr->grh.hop_limit = ip.ttl;
	ah_attr->grh.traffic_class = ip.tos;
	return 0;
}

UROCE_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
						  struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr a;
	int ret;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	ret = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a);
	if (ret) {
		errno = ret;
		return NULL;
	}
	return ibv_create_ah(pd, &a);
}

struct mcast_cmd {
	struct uroce_qp *qp;
	uint32_t group;
	int attach;
	int ret;
};

static void mcast_fn(void *arg)
{
	struct mcast_cmd *c = arg;
	struct uroce_engine *e = c->qp->eng;

	c->ret = c->attach ? uroce_eng_mcast_attach(e, c->qp, c->group)
			   : uroce_eng_mcast_detach(e, c->qp, c->group);
}

static int mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, int attach)
{
	struct mcast_cmd c = { .attach = attach };

	if (!ibqp || !gid)
		return EINVAL;
	c.qp = to_uqp(ibqp);
	c.group = gid_ip4(gid);
	/* ibv_attach_mcast(3): UD QPs only, a multicast GID (here an IPv4
	 * group in a ::ffff: GID, as RoCEv2 maps them) */
	if (c.qp->type != IBV_QPT_UD || !IN_MULTICAST(ntohl(c.group)))
		return EINVAL;
	uroce_eng_call_qp(c.qp, mcast_fn, &c);
	return c.ret;
}

UROCE_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return mcast(qp, gid, 1);
}

UROCE_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return mcast(qp, gid, 0);
}

/* Whether the process may use a controlled Q_Key (high bit set; IBA
 * 10.2.5): the kernel asks for CAP_NET_RAW. */
int uroce__cap_net_raw(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) < 0)
		return 0;
	return !!(d[0].effective & (1u << CAP_NET_RAW));
}
