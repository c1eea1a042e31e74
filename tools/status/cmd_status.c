/* uroce status: an ibstat-like summary of every device, through the public
 * verbs API only. Text by default, JSON with --json. */
#include "cli.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void usage_status(FILE *f)
{
	fprintf(f,
		"usage: uroce status [--json]\n"
		"\n"
		"Show every RDMA device (uroce_<IF>) with its node GUID, vendor ids,\n"
		"limits, and for each port: state, physical state, MTUs, link layer,\n"
		"speed and width, and the GID table. Only the public verbs API is used.\n"
		"UROCE_NETDEV restricts the devices shown.\n"
		"\n"
		"options:\n"
		"  --json      print the same information as one JSON object\n"
		"  -h, --help  print this help\n"
		"\n"
		"exit status: 0 on success, 1 if no device was found or a query\n"
		"failed, 2 on bad usage.\n");
}

/* ---- small formatting helpers ---- */

static const char *port_state_name(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_NOP: return "NOP";
	case IBV_PORT_DOWN: return "DOWN";
	case IBV_PORT_INIT: return "INIT";
	case IBV_PORT_ARMED: return "ARMED";
	case IBV_PORT_ACTIVE: return "ACTIVE";
	case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
	}
	return "UNKNOWN";
}

static const char *phys_state_name(uint8_t s)
{
	switch (s) {
	case 1: return "SLEEP";
	case 2: return "POLLING";
	case 3: return "DISABLED";
	case 4: return "PORT_CONFIGURATION_TRAINING";
	case 5: return "LINK_UP";
	case 6: return "LINK_ERROR_RECOVERY";
	case 7: return "PHY_TEST";
	}
	return "UNKNOWN";
}

static int mtu_bytes(enum ibv_mtu m)
{
	switch (m) {
	case IBV_MTU_256: return 256;
	case IBV_MTU_512: return 512;
	case IBV_MTU_1024: return 1024;
	case IBV_MTU_2048: return 2048;
	case IBV_MTU_4096: return 4096;
	}
	return 0;
}

static const char *link_layer_name(uint8_t ll)
{
	switch (ll) {
	case IBV_LINK_LAYER_UNSPECIFIED: return "Unspecified";
	case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
	case IBV_LINK_LAYER_ETHERNET: return "Ethernet";
	}
	return "Unknown";
}

/* Per-lane signalling rate in Gb/s, from active_speed. */
static double speed_gbps(uint8_t s, const char **name)
{
	switch (s) {
	case 1: *name = "SDR"; return 2.5;
	case 2: *name = "DDR"; return 5.0;
	case 4: *name = "QDR"; return 10.0;
	case 8: *name = "FDR10"; return 10.0;
	case 16: *name = "FDR"; return 14.0;
	case 32: *name = "EDR"; return 25.0;
	case 64: *name = "HDR"; return 50.0;
	case 128: *name = "NDR"; return 100.0;
	}
	*name = "unknown";
	return 0.0;
}

static int width_lanes(uint8_t w)
{
	switch (w) {
	case 1: return 1;
	case 2: return 4;
	case 4: return 8;
	case 8: return 12;
	case 16: return 2;
	}
	return 0;
}

static const char *gid_type_name(uint32_t t)
{
	switch (t) {
	case IBV_GID_TYPE_IB: return "IB";
	case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
	case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
	}
	return "unknown";
}

static const char *atomic_cap_name(enum ibv_atomic_cap a)
{
	switch (a) {
	case IBV_ATOMIC_NONE: return "NONE";
	case IBV_ATOMIC_HCA: return "HCA";
	case IBV_ATOMIC_GLOB: return "GLOB";
	}
	return "UNKNOWN";
}

static void fmt_guid(char *buf, size_t len, __be64 guid_be)
{
	uint64_t g = be64toh(guid_be);

	snprintf(buf, len, "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
}

static void fmt_gid_raw(char *buf, size_t len, const union ibv_gid *gid)
{
	const uint8_t *r = gid->raw;
	size_t off = 0;
	int i;

	for (i = 0; i < 16; i += 2)
		off += (size_t)snprintf(buf + off, len - off, "%s%02x%02x", i ? ":" : "", r[i], r[i + 1]);
}

static int gid_is_zero(const union ibv_gid *gid)
{
	static const uint8_t zero[16];

	return !memcmp(gid->raw, zero, 16);
}

/* Interface name from a device name uroce_<ifname>; other names give "". */
static const char *netdev_of(const char *devname)
{
	return strncmp(devname, "uroce_", 6) ? "" : devname + 6;
}

/* ---- JSON output ---- */

static void json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	for (; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\b': fputs("\\b", f); break;
		case '\f': fputs("\\f", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

/* key: "value" with escaping; comma handling is done by callers. */
static void jkv_str(FILE *f, int ind, const char *key, const char *val, int last)
{
	fprintf(f, "%*s", ind, "");
	json_str(f, key);
	fputs(": ", f);
	json_str(f, val);
	fputs(last ? "\n" : ",\n", f);
}

static void jkv_u64(FILE *f, int ind, const char *key, uint64_t val, int last)
{
	fprintf(f, "%*s", ind, "");
	json_str(f, key);
	fprintf(f, ": %" PRIu64 "%s\n", val, last ? "" : ",");
}

static void jkv_dbl(FILE *f, int ind, const char *key, double val, int last)
{
	fprintf(f, "%*s", ind, "");
	json_str(f, key);
	fprintf(f, ": %g%s\n", val, last ? "" : ",");
}

/* ---- gathering ---- */

struct gid_row {
	int index;
	union ibv_gid gid;
	int have_type;      /* ibv_query_gid_ex worked */
	uint32_t type;
	uint32_t ifindex;
};

struct port_info {
	int num;
	struct ibv_port_attr attr;
	struct gid_row *gids;
	int ngids;
	int err;            /* query failed: errno */
};

struct dev_info {
	const char *name;
	__be64 guid;
	struct ibv_device_attr attr;
	struct port_info *ports;
	int nports;
	int err;            /* errno of the failing call, 0 if fine */
	const char *err_call;
};

static int gather_gids(struct ibv_context *ctx, struct port_info *p)
{
	int len = p->attr.gid_tbl_len;
	int i;

	if (len <= 0)
		return 0;
	p->gids = calloc((size_t)len, sizeof(*p->gids));
	if (!p->gids)
		return ENOMEM;
	for (i = 0; i < len; i++) {
		struct gid_row *row = &p->gids[p->ngids];
		struct ibv_gid_entry ent;

		memset(&ent, 0, sizeof(ent));
		row->index = i;
		if (ibv_query_gid_ex(ctx, (uint32_t)p->num, (uint32_t)i, &ent, 0) == 0) {
			row->gid = ent.gid;
			row->have_type = 1;
			row->type = ent.gid_type;
			row->ifindex = ent.ndev_ifindex;
		} else {
			/* Unused entry (ENODATA) or no _ex support: fall back. */
			if (ibv_query_gid(ctx, (uint8_t)p->num, i, &row->gid))
				continue;
		}
		if (gid_is_zero(&row->gid))
			continue;
		p->ngids++;
	}
	return 0;
}

static void gather_dev(struct ibv_device *dev, struct dev_info *d)
{
	struct ibv_context *ctx;
	int i;

	d->name = ibv_get_device_name(dev);
	d->guid = ibv_get_device_guid(dev);
	ctx = ibv_open_device(dev);
	if (!ctx) {
		d->err = errno ? errno : EIO;
		d->err_call = "ibv_open_device";
		return;
	}
	if (ibv_query_device(ctx, &d->attr)) {
		d->err = errno ? errno : EIO;
		d->err_call = "ibv_query_device";
		goto out;
	}
	d->nports = d->attr.phys_port_cnt;
	d->ports = calloc(d->nports ? (size_t)d->nports : 1, sizeof(*d->ports));
	if (!d->ports) {
		d->err = ENOMEM;
		d->err_call = "calloc";
		goto out;
	}
	for (i = 0; i < d->nports; i++) {
		struct port_info *p = &d->ports[i];
		int rc;

		p->num = i + 1;
		rc = ibv_query_port(ctx, (uint8_t)p->num, &p->attr);
		if (rc) {
			p->err = rc > 0 ? rc : (errno ? errno : EIO);
			continue;
		}
		p->err = gather_gids(ctx, p);
	}
out:
	ibv_close_device(ctx);
}

static void free_dev(struct dev_info *d)
{
	int i;

	for (i = 0; i < d->nports; i++)
		free(d->ports[i].gids);
	free(d->ports);
}

/* ---- printing ---- */

static void print_text(const struct dev_info *d)
{
	char buf[64];
	int i, j;

	printf("Device: %s\n", d->name);
	printf("    netdev:            %s\n", *netdev_of(d->name) ? netdev_of(d->name) : "-");
	fmt_guid(buf, sizeof(buf), d->guid);
	printf("    node GUID:         %s\n", buf);
	if (d->err) {
		printf("    error:             %s: %s\n", d->err_call, strerror(d->err));
		return;
	}
	fmt_guid(buf, sizeof(buf), d->attr.sys_image_guid);
	printf("    sys image GUID:    %s\n", buf);
	printf("    firmware version:  %s\n", d->attr.fw_ver[0] ? d->attr.fw_ver : "-");
	printf("    vendor id:         0x%04x\n", d->attr.vendor_id);
	printf("    vendor part id:    %u\n", d->attr.vendor_part_id);
	printf("    hardware version:  0x%x\n", d->attr.hw_ver);
	printf("    physical ports:    %d\n", d->nports);
	printf("    limits:            max_qp %d, max_qp_wr %d, max_sge %d, max_cq %d, max_cqe %d,\n"
	       "                       max_mr %d, max_mr_size %" PRIu64 ", max_pd %d,\n"
	       "                       max_qp_rd_atom %d, max_qp_init_rd_atom %d, atomic_cap %s\n",
	       d->attr.max_qp, d->attr.max_qp_wr, d->attr.max_sge, d->attr.max_cq, d->attr.max_cqe,
	       d->attr.max_mr, (uint64_t)d->attr.max_mr_size, d->attr.max_pd,
	       d->attr.max_qp_rd_atom, d->attr.max_qp_init_rd_atom, atomic_cap_name(d->attr.atomic_cap));
	for (i = 0; i < d->nports; i++) {
		const struct port_info *p = &d->ports[i];
		const struct ibv_port_attr *a = &p->attr;
		const char *sname;
		double lane = speed_gbps(a->active_speed, &sname);
		int lanes = width_lanes(a->active_width);

		printf("    Port %d:\n", p->num);
		if (p->err) {
			printf("        error:            ibv_query_port: %s\n", strerror(p->err));
			continue;
		}
		printf("        state:            %s (%d)\n", port_state_name(a->state), a->state);
		printf("        physical state:   %s (%u)\n", phys_state_name(a->phys_state), a->phys_state);
		printf("        active MTU:       %d (%d)\n", mtu_bytes(a->active_mtu), a->active_mtu);
		printf("        max MTU:          %d (%d)\n", mtu_bytes(a->max_mtu), a->max_mtu);
		printf("        link layer:       %s\n", link_layer_name(a->link_layer));
		printf("        speed:            %s (%g Gb/s per lane)\n", sname, lane);
		printf("        width:            %dX\n", lanes);
		printf("        rate:             %g Gb/s\n", lane * lanes);
		printf("        max message size: %u\n", a->max_msg_sz);
		printf("        GID table:        %d entries, %d in use\n", a->gid_tbl_len, p->ngids);
		for (j = 0; j < p->ngids; j++) {
			const struct gid_row *g = &p->gids[j];
			char raw[48], ip[INET6_ADDRSTRLEN], ifn[IF_NAMESIZE];

			fmt_gid_raw(raw, sizeof(raw), &g->gid);
			if (!inet_ntop(AF_INET6, g->gid.raw, ip, sizeof(ip)))
				snprintf(ip, sizeof(ip), "?");
			printf("            [%d] %s  %-18s %-8s", g->index, raw, ip,
			       g->have_type ? gid_type_name(g->type) : "?");
			if (g->have_type && g->ifindex && if_indextoname(g->ifindex, ifn))
				printf(" %s", ifn);
			printf("\n");
		}
	}
}

static void print_json_dev(FILE *f, const struct dev_info *d, int last)
{
	char buf[64];
	int i, j;

	fprintf(f, "    {\n");
	jkv_str(f, 6, "name", d->name, 0);
	jkv_str(f, 6, "netdev", netdev_of(d->name), 0);
	fmt_guid(buf, sizeof(buf), d->guid);
	if (d->err) {
		char msg[256];

		jkv_str(f, 6, "node_guid", buf, 0);
		snprintf(msg, sizeof(msg), "%s: %s", d->err_call, strerror(d->err));
		jkv_str(f, 6, "error", msg, 1);
		fprintf(f, "    }%s\n", last ? "" : ",");
		return;
	}
	jkv_str(f, 6, "node_guid", buf, 0);
	fmt_guid(buf, sizeof(buf), d->attr.sys_image_guid);
	jkv_str(f, 6, "sys_image_guid", buf, 0);
	jkv_str(f, 6, "fw_ver", d->attr.fw_ver, 0);
	jkv_u64(f, 6, "vendor_id", d->attr.vendor_id, 0);
	jkv_u64(f, 6, "vendor_part_id", d->attr.vendor_part_id, 0);
	jkv_u64(f, 6, "hw_ver", d->attr.hw_ver, 0);
	jkv_u64(f, 6, "phys_port_cnt", (uint64_t)d->nports, 0);
	fprintf(f, "      \"limits\": {\n");
	jkv_u64(f, 8, "max_qp", (uint64_t)d->attr.max_qp, 0);
	jkv_u64(f, 8, "max_qp_wr", (uint64_t)d->attr.max_qp_wr, 0);
	jkv_u64(f, 8, "max_sge", (uint64_t)d->attr.max_sge, 0);
	jkv_u64(f, 8, "max_cq", (uint64_t)d->attr.max_cq, 0);
	jkv_u64(f, 8, "max_cqe", (uint64_t)d->attr.max_cqe, 0);
	jkv_u64(f, 8, "max_mr", (uint64_t)d->attr.max_mr, 0);
	jkv_u64(f, 8, "max_mr_size", (uint64_t)d->attr.max_mr_size, 0);
	jkv_u64(f, 8, "max_pd", (uint64_t)d->attr.max_pd, 0);
	jkv_u64(f, 8, "max_qp_rd_atom", (uint64_t)d->attr.max_qp_rd_atom, 0);
	jkv_u64(f, 8, "max_qp_init_rd_atom", (uint64_t)d->attr.max_qp_init_rd_atom, 0);
	jkv_str(f, 8, "atomic_cap", atomic_cap_name(d->attr.atomic_cap), 1);
	fprintf(f, "      },\n");
	fprintf(f, "      \"ports\": [");
	for (i = 0; i < d->nports; i++) {
		const struct port_info *p = &d->ports[i];
		const struct ibv_port_attr *a = &p->attr;
		const char *sname;
		double lane = speed_gbps(a->active_speed, &sname);
		int lanes = width_lanes(a->active_width);

		fprintf(f, "%s\n        {\n", i ? "," : "");
		jkv_u64(f, 10, "port", (uint64_t)p->num, 0);
		if (p->err) {
			char msg[256];

			snprintf(msg, sizeof(msg), "ibv_query_port: %s", strerror(p->err));
			jkv_str(f, 10, "error", msg, 1);
			fprintf(f, "        }");
			continue;
		}
		jkv_str(f, 10, "state", port_state_name(a->state), 0);
		jkv_u64(f, 10, "state_num", (uint64_t)a->state, 0);
		jkv_str(f, 10, "phys_state", phys_state_name(a->phys_state), 0);
		jkv_u64(f, 10, "phys_state_num", a->phys_state, 0);
		jkv_u64(f, 10, "active_mtu", (uint64_t)mtu_bytes(a->active_mtu), 0);
		jkv_u64(f, 10, "max_mtu", (uint64_t)mtu_bytes(a->max_mtu), 0);
		jkv_str(f, 10, "link_layer", link_layer_name(a->link_layer), 0);
		jkv_str(f, 10, "speed", sname, 0);
		jkv_u64(f, 10, "active_speed", a->active_speed, 0);
		jkv_u64(f, 10, "width", (uint64_t)lanes, 0);
		jkv_u64(f, 10, "active_width", a->active_width, 0);
		jkv_dbl(f, 10, "rate_gbps", lane * lanes, 0);
		jkv_u64(f, 10, "max_msg_sz", a->max_msg_sz, 0);
		jkv_u64(f, 10, "gid_tbl_len", (uint64_t)a->gid_tbl_len, 0);
		fprintf(f, "          \"gids\": [");
		for (j = 0; j < p->ngids; j++) {
			const struct gid_row *g = &p->gids[j];
			char raw[48], ip[INET6_ADDRSTRLEN], ifn[IF_NAMESIZE];
			const char *ndev = "";

			fmt_gid_raw(raw, sizeof(raw), &g->gid);
			if (!inet_ntop(AF_INET6, g->gid.raw, ip, sizeof(ip)))
				ip[0] = 0;
			if (g->have_type && g->ifindex && if_indextoname(g->ifindex, ifn))
				ndev = ifn;
			fprintf(f, "%s\n            {\n", j ? "," : "");
			jkv_u64(f, 14, "index", (uint64_t)g->index, 0);
			jkv_str(f, 14, "gid", raw, 0);
			jkv_str(f, 14, "ip", ip, 0);
			jkv_str(f, 14, "type", g->have_type ? gid_type_name(g->type) : "", 0);
			jkv_str(f, 14, "netdev", ndev, 1);
			fprintf(f, "            }");
		}
		fprintf(f, "%s]\n", p->ngids ? "\n          " : "");
		fprintf(f, "        }");
	}
	fprintf(f, "%s]\n", d->nports ? "\n      " : "");
	fprintf(f, "    }%s\n", last ? "" : ",");
}

int cmd_status(int argc, char **argv)
{
	struct ibv_device **list;
	struct dev_info *devs;
	int json = 0, n = 0, i, bad = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage_status(stdout);
			return 0;
		} else {
			fprintf(stderr, "uroce status: unknown argument '%s'\n\n", argv[i]);
			usage_status(stderr);
			return CLI_EXIT_USAGE;
		}
	}

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		/* The system library says ENOSYS when the kernel has no RDMA. */
		fprintf(stderr, "uroce status: no RDMA devices found (ibv_get_device_list: %s)\n",
			strerror(errno ? errno : ENODEV));
		if (json)
			printf("{\n  \"devices\": []\n}\n");
		return 1;
	}
	if (n <= 0) {
		const char *nd = getenv("UROCE_NETDEV");

		ibv_free_device_list(list);
		if (json)
			printf("{\n  \"devices\": []\n}\n");
		if (nd)
			fprintf(stderr, "uroce status: no RDMA devices found (UROCE_NETDEV=%s)\n", nd);
		else
			fprintf(stderr, "uroce status: no RDMA devices found\n");
		return 1;
	}
	devs = calloc((size_t)n, sizeof(*devs));
	if (!devs) {
		fprintf(stderr, "uroce status: out of memory\n");
		ibv_free_device_list(list);
		return 1;
	}
	for (i = 0; i < n; i++) {
		int j;

		gather_dev(list[i], &devs[i]);
		if (devs[i].err)
			bad = 1;
		for (j = 0; j < devs[i].nports; j++)
			if (devs[i].ports[j].err)
				bad = 1;
	}

	if (json) {
		printf("{\n  \"devices\": [\n");
		for (i = 0; i < n; i++)
			print_json_dev(stdout, &devs[i], i == n - 1);
		printf("  ]\n}\n");
	} else {
		for (i = 0; i < n; i++) {
			if (i)
				printf("\n");
			print_text(&devs[i]);
		}
	}

	for (i = 0; i < n; i++)
		free_dev(&devs[i]);
	free(devs);
	ibv_free_device_list(list);
	return bad ? 1 : 0;
}
