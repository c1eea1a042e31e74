/* The sysfs files of uroce's devices: see sysfs.h. */
#include "sysfs.h"
#include "util.h"
#include "verbs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*show_fn)(const struct uroce_netdev *nd, unsigned i, char *out, size_t n);

/* One file. path is relative to the device's directory (or, with verbs, to
 * its uverbs directory); a "%u" in it stands for an index 0..count-1. */
struct entry {
	const char *path;
	unsigned count;
	int verbs;
	show_fn show;
};

static void guid_str(char *out, size_t n, uint64_t guid_be)
{
	const uint8_t *g = (const uint8_t *)&guid_be;

	snprintf(out, n, "%02x%02x:%02x%02x:%02x%02x:%02x%02x", g[0], g[1], g[2], g[3], g[4], g[5],
		 g[6], g[7]);
}

#define TEXT(fn, ...)                                                                  \
	static int fn(const struct uroce_netdev *nd, unsigned i, char *out, size_t n) \
	{                                                                              \
		(void)nd;                                                              \
		(void)i;                                                               \
		snprintf(out, n, __VA_ARGS__);                                         \
		return 0;                                                              \
	}

TEXT(show_board_id, "UROCE_SOFT_ROCE")
TEXT(show_fw_ver, "%s", UROCE_FW_VER)
TEXT(show_hw_rev, "%d", UROCE_HW_VER)
TEXT(show_hca_type, "uroce")
TEXT(show_node_type, "1: CA")
/* The port as fill_port() in device.c reports it: ACTIVE, LinkUp, 4X EDR. */
TEXT(show_state, "4: ACTIVE")
TEXT(show_phys_state, "5: LinkUp")
TEXT(show_rate, "100 Gb/sec (4X EDR)")
TEXT(show_link_layer, "Ethernet")
TEXT(show_cap_mask, "0x%08x", (unsigned)(IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS))
TEXT(show_zero_lid, "0x0")
TEXT(show_zero, "0")
TEXT(show_pkey, "0xffff")
TEXT(show_ibdev, "%s", nd->ibname)
TEXT(show_abi_version, "1")
TEXT(show_lid, "0x%x", uroce_port_lid(nd->ip4)) /* synthetic LID, docs/design.md */

static int show_guid(const struct uroce_netdev *nd, unsigned i, char *out, size_t n)
{
	guid_str(out, n, nd->guid);
	return 0;
}

static int show_node_desc(const struct uroce_netdev *nd, unsigned i, char *out, size_t n)
{
	char host[HOST_NAME_MAX + 1] = "localhost";

	gethostname(host, sizeof(host) - 1);
	snprintf(out, n, "%s %s", host, nd->ibname);
	return 0;
}

/* Every index of the table exists, unused ones hold the zero GID (as the
 * kernel shows them); types and ndevs exist for the GIDs in use only. */
static int show_gid(const struct uroce_netdev *nd, unsigned i, char *out, size_t n)
{
	static const uint8_t zero[16];
	const uint8_t *g = (int)i < nd->ngids ? nd->gid[i] : zero;

	snprintf(out, n, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
		 g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12],
		 g[13], g[14], g[15]);
	return 0;
}

static int show_gid_type(const struct uroce_netdev *nd, unsigned i, char *out, size_t n)
{
	if ((int)i >= nd->ngids)
		return -1;
	snprintf(out, n, "RoCE v2");
	return 0;
}

static int show_gid_ndev(const struct uroce_netdev *nd, unsigned i, char *out, size_t n)
{
	if ((int)i >= nd->ngids)
		return -1;
	snprintf(out, n, "%s", nd->ifname);
	return 0;
}

static const struct entry table[] = {
	{ "board_id", 1, 0, show_board_id },
	{ "fw_ver", 1, 0, show_fw_ver },
	{ "hw_rev", 1, 0, show_hw_rev },
	{ "hca_type", 1, 0, show_hca_type },
	{ "node_type", 1, 0, show_node_type },
	{ "node_guid", 1, 0, show_guid },
	{ "sys_image_guid", 1, 0, show_guid },
	{ "node_desc", 1, 0, show_node_desc },
	{ "ports/1/state", 1, 0, show_state },
	{ "ports/1/phys_state", 1, 0, show_phys_state },
	{ "ports/1/rate", 1, 0, show_rate },
	{ "ports/1/lid", 1, 0, show_lid },
	{ "ports/1/sm_lid", 1, 0, show_zero_lid },
	{ "ports/1/sm_sl", 1, 0, show_zero },
	{ "ports/1/lid_mask_count", 1, 0, show_zero },
	{ "ports/1/link_layer", 1, 0, show_link_layer },
	{ "ports/1/cap_mask", 1, 0, show_cap_mask },
	{ "ports/1/gids/%u", UROCE_GID_TBL_LEN, 0, show_gid },
	{ "ports/1/gid_attrs/types/%u", UROCE_GID_TBL_LEN, 0, show_gid_type },
	{ "ports/1/gid_attrs/ndevs/%u", UROCE_GID_TBL_LEN, 0, show_gid_ndev },
	{ "ports/1/pkeys/%u", 1, 0, show_pkey },
	{ "ibdev", 1, 1, show_ibdev },
	{ "abi_version", 1, 1, show_abi_version },
};

/* Whether rel names e's file; *idx gets the index of a "%u" path. */
static int entry_match(const struct entry *e, const char *rel, unsigned *idx)
{
	const char *pct = strstr(e->path, "%u");
	size_t pre;
	char *end;
	unsigned long v;

	*idx = 0;
	if (!pct)
		return !strcmp(e->path, rel);
	pre = (size_t)(pct - e->path);
	if (strncmp(rel, e->path, pre) || rel[pre] < '0' || rel[pre] > '9')
		return 0;
	errno = 0;
	v = strtoul(rel + pre, &end, 10);
	if (errno || *end || v >= e->count)
		return 0;
	*idx = (unsigned)v;
	return 1;
}

int uroce_sysfs_file(const struct uroce_netdev *nd, int verbs, const char *rel, char *out,
		     size_t n)
{
	unsigned idx;

	if (!n)
		return -1;
	for (size_t k = 0; k < ARRAY_SIZE(table); k++) {
		const struct entry *e = &table[k];

		if (e->verbs != !!verbs || !entry_match(e, rel, &idx))
			continue;
		if (e->show(nd, idx, out, n))
			return -1;
		return (int)strlen(out);
	}
	return -1;
}

/* A PCI function's directory name: dddd:bb:dd.f */
static int is_pci_name(const char *s)
{
	unsigned a, b, c, d;
	int len = 0;

	return strlen(s) == 12 && sscanf(s, "%4x:%2x:%2x.%1x%n", &a, &b, &c, &d, &len) == 4 &&
	       len == 12;
}

int uroce_sysfs_device_target(const char *ifname, char *out, size_t n)
{
	char path[PATH_MAX], real[PATH_MAX];

	snprintf(path, sizeof(path), "/sys/class/net/%s/device", ifname);
	if (realpath(path, real)) {
		char *p = real;

		for (;;) {
			char *slash = strrchr(p, '/');

			if (!slash || slash == p)
				break;
			if (is_pci_name(slash + 1)) {
				snprintf(out, n, "%s", real);
				return 0;
			}
			*slash = '\0';
		}
		/* Not below a PCI device (a platform NIC): the device itself. */
		if (realpath(path, real)) {
			snprintf(out, n, "%s", real);
			return 0;
		}
	}
	/* No device (lo, veth, bridges): the interface's own directory. */
	snprintf(path, sizeof(path), "/sys/class/net/%s", ifname);
	if (!realpath(path, real))
		return -1;
	snprintf(out, n, "%s", real);
	return 0;
}

/* mkdir -p of path's parent directory. */
static int mkdir_parents(const char *path)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

/* Replaces path's content with text and a newline, atomically: readers see
 * the old or the new file, never a partial one. */
static int write_text(const char *path, const char *text)
{
	char tmp[PATH_MAX], buf[512];
	const char *base = strrchr(path, '/');
	int fd, len, ret = 0;

	base = base ? base + 1 : path;
	snprintf(tmp, sizeof(tmp), "%.*s.%s.new", (int)(base - path), path, base);
	len = snprintf(buf, sizeof(buf), "%s\n", text);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)len) != len)
		ret = errno ? -errno : -EIO;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

/* ---- counters ---- */

#define OFF(f) ((int)offsetof(struct uroce_counters, f))

/* A counter file: the sum of one or two uroce counters (off2 -1: none),
 * divided by div; off -1: always 0 (the event cannot happen on uroce). */
struct cfile {
	const char *name;
	int off, off2;
	unsigned div;
};

/* hw_counters under the names real NICs use (mlx5, rxe) for what uroce
 * counts the same way; every uroce counter not named here appears under
 * its own name (src/obs/counters.h). rxe's ack_deferred and
 * completer_retry_err have no uroce counterpart and are left out. */
static const struct cfile hw_alias[] = {
	{ "sent_pkts", OFF(tx_pkts), -1, 1 },
	{ "rcvd_pkts", OFF(rx_pkts), -1, 1 },
	{ "duplicate_request", OFF(dup_requests), -1, 1 },
	{ "out_of_sequence", OFF(seq_naks_sent), -1, 1 },
	{ "out_of_seq_request", OFF(seq_naks_sent), -1, 1 },
	{ "packet_seq_err", OFF(seq_naks_rcvd), -1, 1 },
	{ "rcvd_seq_err", OFF(seq_naks_rcvd), -1, 1 },
	{ "implied_nak_seq_err", OFF(implied_naks), -1, 1 },
	{ "local_ack_timeout_err", OFF(timeouts), -1, 1 },
	{ "retry_exceeded_err", OFF(retry_exceeded), -1, 1 },
	{ "rnr_nak_retry_err", OFF(rnr_retry_exceeded), -1, 1 },
	{ "retry_rnr_exceeded_err", OFF(rnr_retry_exceeded), -1, 1 },
	{ "rcvd_rnr_err", OFF(rnr_naks_rcvd), -1, 1 },
	{ "send_rnr_err", OFF(rnr_naks_sent), -1, 1 },
	{ "req_remote_invalid_request", OFF(rem_inv_req_errs), -1, 1 },
	{ "np_cnp_sent", OFF(cnp_sent), -1, 1 },
	{ "rp_cnp_handled", OFF(cnp_handled), -1, 1 },
	{ "np_ecn_marked_roce_packets", OFF(ecn_marked), -1, 1 },
	{ "link_downed", -1, -1, 1 },
};

/* ports/1/counters: the port counters (PMA) of IB/RoCE NICs. *_data is in
 * 4-byte words, as there; uroce counts UDP payload bytes (BTH to ICRC). */
static const struct cfile port_counters[] = {
	{ "port_xmit_packets", OFF(tx_pkts), -1, 1 },
	{ "port_rcv_packets", OFF(rx_pkts), -1, 1 },
	{ "unicast_xmit_packets", OFF(tx_pkts), -1, 1 },
	{ "unicast_rcv_packets", OFF(rx_pkts), -1, 1 },
	{ "port_xmit_data", OFF(tx_bytes), -1, 4 },
	{ "port_rcv_data", OFF(rx_bytes), -1, 4 },
	{ "port_rcv_errors", OFF(icrc_errors), OFF(drop_malformed), 1 },
	{ "port_xmit_discards", OFF(drop_tx_full), -1, 1 },
};

static const struct cfile own[] = {
#define X(nm, d) { #nm, OFF(nm), -1, 1 },
	UROCE_COUNTERS(X)
#undef X
};

static uint64_t cfile_value(const struct cfile *f, const struct uroce_counters *c)
{
	const char *b = (const char *)c;
	uint64_t v, w = 0;

	if (f->off < 0)
		return 0;
	memcpy(&v, b + f->off, sizeof(v));
	if (f->off2 >= 0)
		memcpy(&w, b + f->off2, sizeof(w));
	return (v + w) / f->div;
}

static int aliased(int off)
{
	for (size_t k = 0; k < ARRAY_SIZE(hw_alias); k++)
		if (hw_alias[k].off == off)
			return 1;
	return 0;
}

static int write_cfile(const char *dir, const struct cfile *f, const struct uroce_counters *now,
		       const struct uroce_counters *old)
{
	char path[PATH_MAX], val[32];
	uint64_t v = cfile_value(f, now);

	if (old && cfile_value(f, old) == v)
		return 0;
	snprintf(path, sizeof(path), "%s/%s", dir, f->name);
	snprintf(val, sizeof(val), "%llu", (unsigned long long)v);
	return write_text(path, val);
}

int uroce_sysfs_write_counters(const char *dev_dir, const struct uroce_counters *now,
			       const struct uroce_counters *old, unsigned lifespan_ms)
{
	char hw[PATH_MAX], port[PATH_MAX], val[32];
	int ret = 0;

	snprintf(hw, sizeof(hw), "%s/ports/1/hw_counters", dev_dir);
	snprintf(port, sizeof(port), "%s/ports/1/counters", dev_dir);
	for (size_t k = 0; k < ARRAY_SIZE(hw_alias) && !ret; k++)
		ret = write_cfile(hw, &hw_alias[k], now, old);
	for (size_t k = 0; k < ARRAY_SIZE(own) && !ret; k++)
		if (!aliased(own[k].off))
			ret = write_cfile(hw, &own[k], now, old);
	for (size_t k = 0; k < ARRAY_SIZE(port_counters) && !ret; k++)
		ret = write_cfile(port, &port_counters[k], now, old);
	if (!old && !ret) {
		snprintf(val, sizeof(val), "%u", lifespan_ms);
		snprintf(hw, sizeof(hw), "%s/ports/1/hw_counters/lifespan", dev_dir);
		ret = write_text(hw, val);
	}
	return ret;
}

/* ---- the whole tree ---- */

static int render_entries(const struct uroce_netdev *nd, int verbs, const char *dir)
{
	char rel[128], path[PATH_MAX], text[256];
	int ret;

	for (size_t k = 0; k < ARRAY_SIZE(table); k++) {
		const struct entry *e = &table[k];

		if (e->verbs != verbs)
			continue;
		for (unsigned i = 0; i < e->count; i++) {
			snprintf(rel, sizeof(rel), e->path, i); /* "%u" or none */
			if (e->show(nd, i, text, sizeof(text)))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, rel);
			ret = mkdir_parents(path);
			if (!ret)
				ret = write_text(path, text);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static int link_device(const struct uroce_netdev *nd, const char *dir)
{
	char target[PATH_MAX], path[PATH_MAX];

	if (uroce_sysfs_device_target(nd->ifname, target, sizeof(target)))
		return 0; /* no sysfs for this interface: no link */
	snprintf(path, sizeof(path), "%s/device", dir);
	unlink(path);
	return symlink(target, path) ? -errno : 0;
}

int uroce_sysfs_render(const char *ib_dir, const char *verbs_dir, struct uroce_netdev *nds,
		       int max, unsigned lifespan_ms)
{
	static const struct uroce_counters zero;
	char dir[PATH_MAX], path[PATH_MAX];
	int n = uroce_net_discover(nds, max), ret = 0;

	for (int i = 0; i < n && !ret; i++) {
		snprintf(dir, sizeof(dir), "%s/%s", ib_dir, nds[i].ibname);
		snprintf(path, sizeof(path), "%s/ports/1/hw_counters/x", dir);
		ret = mkdir_parents(path);
		snprintf(path, sizeof(path), "%s/ports/1/counters/x", dir);
		if (!ret)
			ret = mkdir_parents(path);
		if (!ret)
			ret = render_entries(&nds[i], 0, dir);
		if (!ret)
			ret = link_device(&nds[i], dir);
		if (!ret)
			ret = uroce_sysfs_write_counters(dir, &zero, NULL, lifespan_ms);
		snprintf(dir, sizeof(dir), "%s/uverbs%d", verbs_dir, i);
		snprintf(path, sizeof(path), "%s/x", dir);
		if (!ret)
			ret = mkdir_parents(path);
		if (!ret)
			ret = render_entries(&nds[i], 1, dir);
		if (!ret)
			ret = link_device(&nds[i], dir);
	}
	/* The uverbs ABI of the kernel this mimics (rdma-core 44 needs 6). */
	snprintf(path, sizeof(path), "%s/abi_version", verbs_dir);
	if (!ret)
		ret = write_text(path, "6");
	return ret ? ret : n;
}
