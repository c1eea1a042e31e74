/* Devices, contexts and their queries; sysfs emulation for our devices. */
#include "verbs_int.h"
#include "stat.h"
#include "sysfs.h"
#include "pcap.h"
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#undef ibv_query_port
#undef ibv_get_device_list

static pthread_mutex_t devs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uroce_device *devs[UROCE_MAX_DEVS];
static int ndevs;

/* Finds or makes the persistent device for an interface: devices live for
 * the whole process, so contexts outlive ibv_free_device_list(). */
static struct uroce_device *device_for(const struct uroce_netdev *nd)
{
	struct uroce_device *d;

	for (int i = 0; i < ndevs; i++)
		if (!strcmp(devs[i]->nd.ifname, nd->ifname)) {
			devs[i]->nd = *nd;
			return devs[i];
		}
	if (ndevs >= UROCE_MAX_DEVS)
		return NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->nd = *nd;
	d->index = ndevs;
	d->ibdev.node_type = IBV_NODE_CA;
	d->ibdev.transport_type = IBV_TRANSPORT_IB;
	snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s", nd->ibname);
	snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs%d", ndevs);
	snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path), "/sys/class/infiniband_verbs/uverbs%d",
		 ndevs);
	snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path), "/sys/class/infiniband/%s",
		 nd->ibname);
	devs[ndevs++] = d;
	return d;
}

UROCE_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	struct uroce_netdev nds[UROCE_MAX_DEVS];
	struct ibv_device **list;
	int n = uroce_net_discover(nds, UROCE_MAX_DEVS), k = 0;

	list = calloc((size_t)n + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&devs_lock);
	for (int i = 0; i < n; i++) {
		struct uroce_device *d = device_for(&nds[i]);

		if (d)
			list[k++] = &d->ibdev;
	}
	pthread_mutex_unlock(&devs_lock);
	if (num)
		*num = k;
	return list;
}

UROCE_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

UROCE_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

UROCE_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	return to_udev(device)->nd.guid;
}

UROCE_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return to_udev(device)->index;
}

static void raise_nofile(void)
{
	struct rlimit r;

	/* Each RC QP holds two sockets; let a process open thousands. */
	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max && r.rlim_cur < 65536) {
		r.rlim_cur = r.rlim_max < 65536 ? r.rlim_max : 65536;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

UROCE_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct uroce_device *d = to_udev(device);
	struct uroce_ctx *ctx;
	struct ibv_context *c;
	int ret;

	ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	ctx->dev = d->nd;
	ctx->dev.mtu = uroce_net_mtu(d->nd.ifname);
	c = &ctx->vctx.context;
	c->device = device;
	c->num_comp_vectors = 1;
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	pthread_mutex_init(&c->mutex, NULL);
	ctx->vctx.sz = sizeof(ctx->vctx);
	pthread_mutex_init(&ctx->async.lock, NULL);
	pthread_cond_init(&ctx->async.acked, NULL);
	ctx->async.efd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	c->async_fd = ctx->async.efd;
	c->cmd_fd = eventfd(0, EFD_CLOEXEC);
	if (ctx->async.efd < 0 || c->cmd_fd < 0 || uroce_mr_table_init(&ctx->mrs)) {
		ret = errno ? errno : ENOMEM;
		goto fail;
	}
	ctx->stat = uroce_stat_create(d->nd.ibname, d->nd.ifname, ctx->stat_path,
				      sizeof(ctx->stat_path));
	ctx->cntf = ctx->stat ? ctx->stat : calloc(1, sizeof(*ctx->cntf));
	if (!ctx->cntf) {
		ret = ENOMEM;
		goto fail;
	}
	ctx->cnt = &ctx->cntf->cnt;
	uroce__init_ops(ctx);
	uroce_pcap_init();
	uroce_trace_init();
	raise_nofile();
	ret = uroce_eng_start(ctx);
	if (ret)
		goto fail;
	return c;
fail:
	if (ctx->stat)
		uroce_stat_destroy(ctx->stat, ctx->stat_path);
	else
		free(ctx->cntf);
	if (ctx->async.efd >= 0)
		close(ctx->async.efd);
	if (c->cmd_fd >= 0)
		close(c->cmd_fd);
	free(ctx);
	errno = ret;
	return NULL;
}

UROCE_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct uroce_ctx *ctx = to_uctx(context);

	uroce_eng_stop(ctx);
	if (uroce_trace_on)
		uroce_trace_flush();
	{
		struct uroce_counters sum, *k = &sum;

		uroce_stat_total(ctx->cntf, &sum);
		uroce_info("%s: tx %lu pkts rx %lu pkts retrans %lu timeouts %lu seq_nak tx/rx %lu/%lu "
			   "rnr tx/rx %lu/%lu dup_req %lu dup_resp %lu implied_nak %lu icrc_err %lu "
			   "drops malformed %lu qpn %lu state %lu tx_full %lu acks tx/rx %lu/%lu "
			   "ecn %lu (queue %lu) cnp tx/rx %lu/%lu rate_cuts %lu pace_waits %lu "
			   "sock_drops %lu ooo_held %lu gaps_filled %lu tail_probes %lu "
			   "rd_abandoned %lu posts_deferred %lu",
			   ctx->dev.ibname, k->tx_pkts, k->rx_pkts, k->retrans_pkts, k->timeouts,
			   k->seq_naks_sent, k->seq_naks_rcvd, k->rnr_naks_sent, k->rnr_naks_rcvd,
			   k->dup_requests, k->dup_responses, k->implied_naks, k->icrc_errors,
			   k->drop_malformed, k->drop_bad_qpn, k->drop_state, k->drop_tx_full,
			   k->acks_sent, k->acks_rcvd, k->ecn_marked, k->ecn_queue_marked,
			   k->cnp_sent, k->cnp_handled, k->cc_rate_cuts, k->cc_pace_waits,
			   k->rx_sock_drops, k->ooo_held, k->gap_filled, k->tail_probes,
			   k->read_resp_abandoned, k->posts_deferred);
		if (k->gpu_place_copies || k->gpu_stage_copies)
			uroce_info("%s: GPU memory: %lu copies (%lu bytes) in, %lu copies (%lu bytes) "
				   "out, %lu of them waited for, %lu copied ahead; engine waited %.3f s; "
				   "%lu ACK waits for copies",
				   ctx->dev.ibname, k->gpu_place_copies, k->gpu_place_bytes,
				   k->gpu_stage_copies, k->gpu_stage_bytes, k->gpu_stage_sync,
				   k->gpu_prefetch_hits, k->gpu_wait_ns / 1e9, k->gpu_acks_deferred);
	}
	uroce_mr_table_fini(&ctx->mrs);
	if (ctx->stat)
		uroce_stat_destroy(ctx->stat, ctx->stat_path);
	else
		free(ctx->cntf);
	close(ctx->async.efd);
	close(context->cmd_fd);
	pthread_cond_destroy(&ctx->async.acked);
	free(ctx->async.q);
	free(ctx->async.out);
	free(ctx->xsrq);
	free(ctx);
	return 0;
}

void uroce__fill_device_attr(struct uroce_ctx *ctx, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", UROCE_FW_VER);
	a->node_guid = ctx->dev.guid;
	a->sys_image_guid = ctx->dev.guid;
	a->max_mr_size = UINT64_MAX;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = UROCE_VENDOR_ID;
	a->vendor_part_id = UROCE_VENDOR_PART_ID;
	a->hw_ver = UROCE_HW_VER;
	a->max_qp = UROCE_MAX_QP;
	a->max_qp_wr = UROCE_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE |
			      IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_PORT_ACTIVE_EVENT;
	a->max_sge = UROCE_MAX_SGE;
	a->max_sge_rd = UROCE_MAX_SGE;
	a->max_cq = UROCE_MAX_QP;
	a->max_cqe = UROCE_MAX_CQE - 1;
	a->max_mr = 1 << 20;
	a->max_pd = 1 << 16;
	a->max_qp_rd_atom = UROCE_MAX_RD_ATOMIC;
	a->max_res_rd_atom = UROCE_MAX_RD_ATOMIC * UROCE_MAX_QP;
	a->max_qp_init_rd_atom = UROCE_MAX_RD_ATOMIC;
	/* Responder atomics are CPU atomic instructions on the target memory,
	 * so they are atomic with respect to each other within this host. */
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_srq = UROCE_MAX_QP;
	a->max_srq_wr = UROCE_MAX_QP_WR;
	a->max_srq_sge = UROCE_MAX_SGE;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
	a->max_ah = 1 << 16;
	a->max_mcast_grp = UROCE_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = UROCE_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = UROCE_MAX_MCAST_GRP * UROCE_MAX_MCAST_QP_ATTACH;
}

UROCE_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	uroce__fill_device_attr(to_uctx(context), attr);
	return 0;
}

static void fill_port(struct uroce_ctx *ctx, struct ibv_port_attr *a)
{
	int mtu = uroce_net_mtu(ctx->dev.ifname);

	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = (enum ibv_mtu)uroce_net_active_mtu(mtu);
	a->gid_tbl_len = UROCE_GID_TBL_LEN;
	a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	a->max_msg_sz = UROCE_MAX_MSG;
	a->pkey_tbl_len = 1;
	/* RoCE has no LIDs; uroce names each port by the low 16 bits of its
	 * IPv4 address so that programs that connect by LID without a GRH
	 * (qperf, ibv_rc_pingpong without -g) still reach their peer within
	 * the same /16 (docs/design.md). */
	a->lid = uroce_port_lid(ctx->dev.ip4);
	a->max_vl_num = 1;
	a->active_width = 2;  /* 4X */
	a->active_speed = 32; /* EDR: 25 Gb/s per lane */
	a->phys_state = 5;    /* LinkUp */
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
}

/* rdma-core newer than 44 appends active_speed_ex to struct ibv_port_attr
 * (offset 52, 56 bytes in all). Callers built against such headers (NCCL's
 * own copy, rdma-core 50's inline ibv_query_port) pass that length and may
 * not clear the struct first: every byte of len is written, the extended
 * speed equal to active_speed (as the kernel reports it), anything past
 * what uroce knows zeroed. */
struct port_attr_ext {
	struct ibv_port_attr a;
	uint32_t active_speed_ex;
};
_Static_assert(offsetof(struct port_attr_ext, active_speed_ex) == 52,
	       "active_speed_ex sits at offset 52 in rdma-core's struct ibv_port_attr");

static int query_port_ex(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr,
			 size_t len)
{
	struct port_attr_ext x;

	if (port != 1)
		return EINVAL;
	memset(&x, 0, sizeof(x));
	fill_port(to_uctx(context), &x.a);
	x.active_speed_ex = x.a.active_speed;
	if (len > sizeof(x))
		memset((uint8_t *)attr + sizeof(x), 0, len - sizeof(x));
	memcpy(attr, &x, MIN(len, sizeof(x)));
	return 0;
}

/* The old entry point: its struct ends before port_cap_flags2. */
UROCE_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port,
				struct _compat_ibv_port_attr *attr)
{
	return query_port_ex(context, port, (struct ibv_port_attr *)attr,
			     offsetof(struct ibv_port_attr, port_cap_flags2));
}

static int query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *in,
			   struct ibv_device_attr_ex *attr, size_t size)
{
	struct ibv_device_attr_ex a;

	if (in && in->comp_mask)
		return EINVAL;
	if (size < sizeof(attr->orig_attr))
		return EINVAL;
	memset(&a, 0, sizeof(a));
	uroce__fill_device_attr(to_uctx(context), &a.orig_attr);
	a.phys_port_cnt_ex = 1;
	memcpy(attr, &a, MIN(size, sizeof(a)));
	return 0;
}

UROCE_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port, int index,
			       union ibv_gid *gid)
{
	struct uroce_ctx *ctx = to_uctx(context);

	if (port != 1 || index < 0 || index >= UROCE_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	memset(gid, 0, sizeof(*gid));
	if (index < ctx->dev.ngids)
		memcpy(gid->raw, ctx->dev.gid[index], 16);
	return 0;
}

UROCE_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port, uint32_t index,
				   struct ibv_gid_entry *entry, uint32_t flags, size_t size)
{
	struct uroce_ctx *ctx = to_uctx(context);
	struct ibv_gid_entry e;

	if (flags || port != 1 || index >= UROCE_GID_TBL_LEN)
		return EINVAL;
	if ((int)index >= ctx->dev.ngids)
		return ENODATA;
	memset(&e, 0, sizeof(e));
	memcpy(e.gid.raw, ctx->dev.gid[index], 16);
	e.gid_index = index;
	e.port_num = 1;
	e.gid_type = IBV_GID_TYPE_ROCE_V2;
	e.ndev_ifindex = (uint32_t)ctx->dev.ifindex;
	memcpy(entry, &e, MIN(size, sizeof(e)));
	return 0;
}

UROCE_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context,
					  struct ibv_gid_entry *entries, size_t max_entries,
					  uint32_t flags, size_t size)
{
	struct uroce_ctx *ctx = to_uctx(context);
	size_t n = 0;

	if (flags || size < sizeof(struct ibv_gid_entry))
		return -EINVAL;
	for (int i = 0; i < ctx->dev.ngids; i++) {
		if (n >= max_entries)
			return -EINVAL;
		_ibv_query_gid_ex(context, 1, (uint32_t)i,
				  (struct ibv_gid_entry *)((char *)entries + n * size), 0, size);
		n++;
	}
	return (ssize_t)n;
}

/* Private (driver.h): 0 = IB/RoCE v1, 1 = RoCE v2 (enum ibv_gid_type_sysfs). */
UROCE_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port, unsigned int index,
				    int *type)
{
	if (port != 1 || index >= UROCE_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	*type = 1;
	return 0;
}

UROCE_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port, int index,
				__be16 *pkey)
{
	if (port != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htons(DEFAULT_PKEY);
	return 0;
}

UROCE_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port, __be16 pkey)
{
	if (port != 1 || ntohs(pkey) != DEFAULT_PKEY) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}

UROCE_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct uroce_async *a = &to_uctx(context)->async;
	uint64_t v;

	for (;;) {
		const void *obj;

		if (read(a->efd, &v, sizeof(v)) != sizeof(v))
			return -1;
		pthread_mutex_lock(&a->lock);
		if (!a->len) {
			/* its event was dropped with its object
			 * (uroce_async_forget): wait for the next one */
			pthread_mutex_unlock(&a->lock);
			continue;
		}
		*event = a->q[a->head];
		a->head = (a->head + 1) % a->cap;
		a->len--;
		obj = uroce_async_obj(event);
		if (obj)
			uroce_async_out_add(a, obj);
		pthread_mutex_unlock(&a->lock);
		return 0;
	}
}

UROCE_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	if (event)
		uroce_async_ack(event);
}

UROCE_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	errno = EOPNOTSUPP;
	return NULL;
}

UROCE_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

UROCE_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

UROCE_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

UROCE_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
}

UROCE_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
}

UROCE_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
}

UROCE_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
					     struct ibv_ah_attr *attr, uint8_t eth_mac[6],
					     uint16_t *vid)
{
	return EOPNOTSUPP;
}

/* ---- sysfs ---- */

UROCE_EXPORT const char *ibv_get_sysfs_path(void)
{
	const char *env = getenv("SYSFS_PATH");

	return env && *env ? env : "/sys";
}

/* Our device whose /sys/class/infiniband/<dev> (verbs = 0) or
 * /sys/class/infiniband_verbs/uverbsN (verbs = 1) directory dir is in;
 * *rest: the part of dir below it. */
static struct uroce_device *device_by_path(const char *dir, const char **rest, int *verbs)
{
	static const char ib[] = UROCE_SYSFS_IB "/";
	static const char uv[] = UROCE_SYSFS_VERBS "/";

	pthread_mutex_lock(&devs_lock);
	for (int i = 0; i < ndevs; i++) {
		const char *p = NULL;
		size_t l;

		if (!strncmp(dir, ib, sizeof(ib) - 1)) {
			l = strlen(devs[i]->ibdev.name);
			if (!strncmp(dir + sizeof(ib) - 1, devs[i]->ibdev.name, l))
				p = dir + sizeof(ib) - 1 + l;
			*verbs = 0;
		} else if (!strncmp(dir, uv, sizeof(uv) - 1)) {
			l = strlen(devs[i]->ibdev.dev_name);
			if (!strncmp(dir + sizeof(uv) - 1, devs[i]->ibdev.dev_name, l))
				p = dir + sizeof(uv) - 1 + l;
			*verbs = 1;
		}
		if (p && (*p == '/' || !*p)) {
			pthread_mutex_unlock(&devs_lock);
			*rest = *p ? p + 1 : p;
			return devs[i];
		}
	}
	pthread_mutex_unlock(&devs_lock);
	return NULL;
}

/* The files of our devices come from the table in sysfs.c, the one that
 * `uroce run` writes out for programs that read sysfs directly; device/...
 * is read below the device the link would point to; anything else (the
 * live hw_counters of uroce run's view) from the file system. */
UROCE_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[PATH_MAX], tmp[256];
	const char *rest;
	int verbs = 0;
	struct uroce_device *d = device_by_path(dir, &rest, &verbs);
	ssize_t len;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (d) {
		char rel[512], target[PATH_MAX];
		int n;

		snprintf(rel, sizeof(rel), "%s%s%s", rest, *rest ? "/" : "", file);
		n = uroce_sysfs_file(&d->nd, verbs, rel, tmp, sizeof(tmp));
		if (n >= 0) {
			if (!size) {
				errno = ENOENT;
				return -1;
			}
			snprintf(buf, size, "%s", tmp);
			return (int)MIN((size_t)n, size - 1);
		}
		if (!strncmp(rel, "device/", 7) &&
		    !uroce_sysfs_device_target(d->nd.ifname, target, sizeof(target)))
			snprintf(path, sizeof(path), "%s/%s", target, rel + 7);
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	len = read(fd, buf, size);
	close(fd);
	if (len < 0)
		return -1;
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	else if ((size_t)len < size)
		buf[len] = '\0';
	return (int)len;
}

/* Private: used by providers with their internal sysfs device struct. */
UROCE_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev,
					   const char *fnfmt, ...)
{
	errno = EOPNOTSUPP;
	return -1;
}

void uroce__init_ops_device(struct uroce_ctx *ctx);
void uroce__init_ops_device(struct uroce_ctx *ctx)
{
	ctx->vctx.query_port = query_port_ex;
	ctx->vctx.query_device_ex = query_device_ex;
}
