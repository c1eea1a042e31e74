/* uroce doctor: the checks. Each fills one struct doc_check: a status, a
 * one-line summary, evidence lines (what was read) and the fix. A check
 * whose inputs do not exist on the machine is SKIP with the reason. */
#include "doctor.h"

#include <infiniband/verbs.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- mtu: interface MTU vs RoCE path MTU and the peer's ---- */

static void check_mtu(struct doctor *doc, struct doc_check *c)
{
	int peer = doc->peer_mtu ? doc_roce_mtu(doc->peer_mtu) : 0;
	int n = 0;

	for (int i = 0; i < doc->nif; i++) {
		char path[PATH_MAX];
		long mtu;
		int roce;

		snprintf(path, sizeof(path), "/sys/class/net/%s/mtu", doc->ifs[i]);
		if (doc_rd_long(doc, path, &mtu) < 0)
			continue;
		n++;
		roce = doc_roce_mtu((int)mtu);
		doc_add(c, "%s: MTU %ld carries RoCE path MTU %d", doc->ifs[i], mtu, roce);
		doc_worse(c, roce < 4096 ? DOC_WARN : DOC_PASS);
		if (peer && peer != roce) {
			doc_add(c, "%s: the peer's MTU %d carries RoCE path MTU %d: mismatch",
				doc->ifs[i], doc->peer_mtu, peer);
			doc_worse(c, DOC_FAIL);
		}
	}
	if (!n) {
		doc_set(c, DOC_SKIP, "no interface to check (none up besides lo; use --netdev)");
		return;
	}
	if (c->st == DOC_FAIL)
		snprintf(c->summary, sizeof(c->summary),
			 "local and peer MTU give different RoCE path MTUs: packets of the larger are dropped");
	else if (c->st == DOC_WARN)
		snprintf(c->summary, sizeof(c->summary),
			 "RoCE path MTU below 4096 (needs an interface MTU of 4200, headers included)");
	else
		snprintf(c->summary, sizeof(c->summary), "every interface carries RoCE path MTU 4096%s",
			 peer ? ", same as the peer" : "");
	doc_fix(c, "set the same MTU on both hosts and every switch port on the path: "
		"ip link set dev IF mtu 4200 (or 9000); RoCE 4096 needs at least 4156 with uroce's headers");
}

/* ---- gid: RoCE v2 GIDs and the index to pass ---- */

/* One RoCE port of a real RDMA device: its first IPv4 RoCE v2 GID. */
static void gid_port(struct doctor *doc, struct doc_check *c, const char *dev, const char *port)
{
	char base[PATH_MAX], path[PATH_MAX + 64], ll[32], gid[64], type[32];
	int best = -1, v2 = 0;

	snprintf(base, sizeof(base), "/sys/class/infiniband/%s/ports/%s", dev, port);
	snprintf(path, sizeof(path), "%s/link_layer", base);
	if (doc_rd_line(doc, path, ll, sizeof(ll)) < 0 || strcmp(ll, "Ethernet"))
		return;
	for (int i = 0; i < 256; i++) {
		snprintf(path, sizeof(path), "%s/gids/%d", base, i);
		if (doc_rd_line(doc, path, gid, sizeof(gid)) < 0)
			break;
		snprintf(path, sizeof(path), "%s/gid_attrs/types/%d", base, i);
		if (!strcmp(gid, "0000:0000:0000:0000:0000:0000:0000:0000") ||
		    doc_rd_line(doc, path, type, sizeof(type)) < 0 || strcmp(type, "RoCE v2"))
			continue;
		v2++;
		if (best < 0 && !strncmp(gid, "0000:0000:0000:0000:0000:ffff:", 30))
			best = i;
		doc_add(c, "%s port %s: GID %d %s RoCE v2", dev, port, i, gid);
	}
	if (best >= 0) {
		doc_add(c, "%s port %s: use GID index %d (perftest -x %d, ibv_rc_pingpong -g %d)",
			dev, port, best, best, best);
		doc_worse(c, DOC_PASS);
	} else {
		doc_add(c, "%s port %s: %s", dev, port,
			v2 ? "RoCE v2 GIDs but none IPv4" : "no RoCE v2 GID");
		doc_worse(c, v2 ? DOC_WARN : DOC_FAIL);
	}
}

/* uroce's soft devices on this machine, through the verbs API. */
static int gid_soft(struct doc_check *c)
{
	struct ibv_device **list;
	int n = 0, found = 0;

	list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		union ibv_gid g;

		if (!ctx)
			continue;
		if (ibv_query_gid(ctx, 1, 0, &g) == 0) {
			doc_add(c, "%s: GID 0 ::ffff:%u.%u.%u.%u RoCE v2 (uroce soft device): use -x 0 / -g 0",
				ibv_get_device_name(list[i]), g.raw[12], g.raw[13], g.raw[14], g.raw[15]);
			found++;
		}
		ibv_close_device(ctx);
	}
	if (list)
		ibv_free_device_list(list);
	return found;
}

static void check_gid(struct doctor *doc, struct doc_check *c)
{
	for (int r = 0; r < doc->nrdma; r++) {
		char dir[PATH_MAX];
		char **ports;

		snprintf(dir, sizeof(dir), "/sys/class/infiniband/%s/ports", doc->rdma[r].name);
		ports = doc_list(doc, dir);
		for (char **p = ports; p && *p; p++)
			gid_port(doc, c, doc->rdma[r].name, *p);
		doc_free_names(ports);
	}
	if (doc->live && gid_soft(c))
		doc_worse(c, DOC_PASS);
	if (c->st == DOC_SKIP)
		doc_set(c, DOC_SKIP, "no RoCE port found");
	else if (c->st == DOC_FAIL)
		snprintf(c->summary, sizeof(c->summary), "a RoCE port has no RoCE v2 GID");
	else if (c->st == DOC_WARN)
		snprintf(c->summary, sizeof(c->summary), "a RoCE port has no IPv4 RoCE v2 GID");
	else
		snprintf(c->summary, sizeof(c->summary), "RoCE v2 GIDs present; the index to use is below");
	doc_fix(c, "give the interface an IPv4 address (ip addr add A.B.C.D/N dev IF): the NIC "
		"then adds its RoCE v2 GID; pass that index to perftest -x and ibv_rc_pingpong -g");
}

/* ---- ecn: DCQCN notification (roce_np) and reaction (roce_rp) points ---- */

/* Priorities with <dir>/<0..7> = 1, as "3,4"; -1 if the directory is absent. */
static int prio_list(struct doctor *doc, const char *dir, char *out, size_t len)
{
	int any = 0;

	out[0] = 0;
	for (int p = 0; p < 8; p++) {
		char path[PATH_MAX];
		long v;

		snprintf(path, sizeof(path), "%s/%d", dir, p);
		if (doc_rd_long(doc, path, &v) < 0)
			continue;
		any = 1;
		if (v)
			snprintf(out + strlen(out), len - strlen(out), "%s%d", out[0] ? "," : "", p);
	}
	return any ? 0 : -1;
}

static void check_ecn(struct doctor *doc, struct doc_check *c)
{
	for (int i = 0; i < doc->npci; i++) {
		const struct doc_pci *p = &doc->pci[i];
		char dir[PATH_MAX], np[32], rp[32];

		if (!p->rdma[0] || !p->netdev[0])
			continue;
		snprintf(dir, sizeof(dir), "/sys/class/net/%s/ecn/roce_np/enable", p->netdev);
		if (prio_list(doc, dir, np, sizeof(np)) < 0)
			continue;
		snprintf(dir, sizeof(dir), "/sys/class/net/%s/ecn/roce_rp/enable", p->netdev);
		if (prio_list(doc, dir, rp, sizeof(rp)) < 0)
			rp[0] = 0;
		doc_add(c, "%s (%s): ECN notification point on priorities [%s], reaction point on [%s]",
			p->netdev, p->rdma, np, rp);
		doc_worse(c, np[0] && rp[0] ? DOC_PASS : DOC_WARN);
	}
	if (c->st == DOC_SKIP)
		doc_set(c, DOC_SKIP, "no RDMA NIC exposes ECN settings (/sys/class/net/IF/ecn/roce_np)");
	else if (c->st == DOC_WARN)
		snprintf(c->summary, sizeof(c->summary),
			 "ECN (DCQCN) off on a RoCE NIC: congestion turns into pauses or drops");
	else
		snprintf(c->summary, sizeof(c->summary), "ECN (DCQCN) on for notification and reaction");
	doc_fix(c, "enable both on the RoCE priority (usually 3): echo 1 > /sys/class/net/IF/ecn/roce_np/enable/3; "
		"echo 1 > /sys/class/net/IF/ecn/roce_rp/enable/3; and mark ECN on the switches");
}

/* ---- qos: PFC and DSCP trust ---- */

static void qos_if(struct doctor *doc, struct doc_check *c, const struct doc_pci *p)
{
	char path[PATH_MAX], buf[256];

	snprintf(path, sizeof(path), "/sys/class/net/%s/qos/trust", p->netdev);
	if (doc_rd_line(doc, path, buf, sizeof(buf)) == 0) {
		int dscp = strstr(buf, "dscp") != NULL;

		doc_add(c, "%s: trust %s", p->netdev, dscp ? "dscp" : buf);
		doc_worse(c, dscp ? DOC_PASS : DOC_WARN);
	}
	snprintf(path, sizeof(path), "/sys/class/net/%s/qos/pfc", p->netdev);
	if (doc_rd_line(doc, path, buf, sizeof(buf)) == 0) {
		int on = 0;

		for (const char *s = buf; *s; s++)
			on += *s == '1';
		doc_add(c, "%s: PFC %s (%s)", p->netdev, on ? "on" : "off on every priority", buf);
		doc_worse(c, on ? DOC_PASS : DOC_WARN);
	}
}

static void check_qos(struct doctor *doc, struct doc_check *c)
{
	int rdma_ifs = 0;

	for (int i = 0; i < doc->npci; i++)
		if (doc->pci[i].rdma[0] && doc->pci[i].netdev[0]) {
			rdma_ifs++;
			qos_if(doc, c, &doc->pci[i]);
		}
	if (c->st == DOC_SKIP)
		doc_set(c, DOC_SKIP, rdma_ifs ?
			"PFC and trust are not in sysfs on this kernel (check: dcb pfc show dev IF; "
			"dcb app show dev IF; or mlnx_qos -i IF)" : "no RDMA NIC");
	else if (c->st == DOC_WARN)
		snprintf(c->summary, sizeof(c->summary),
			 "PFC off or trust not DSCP: RoCE v2 priority is not honoured end to end");
	else
		snprintf(c->summary, sizeof(c->summary), "trust DSCP and PFC on");
	doc_fix(c, "mlnx_qos -i IF --trust dscp --pfc 0,0,0,1,0,0,0,0 (PFC on the RoCE priority), "
		"with the same settings on the switch ports");
}

/* ---- peermem: GPUDirect RDMA through nvidia_peermem or dma-buf ---- */

static int has_gpu(const struct doctor *doc)
{
	for (int i = 0; i < doc->npci; i++)
		if (doc->pci[i].is_gpu)
			return 1;
	return 0;
}

static int has_rdma_nic(const struct doctor *doc)
{
	for (int i = 0; i < doc->npci; i++)
		if (doc->pci[i].rdma[0])
			return 1;
	return 0;
}

static int dmabuf_ok(struct doctor *doc, struct doc_check *c)
{
	char drv[256], rel[128];
	int maj = 0, min = 0;

	if (doc_rd_line(doc, "/proc/driver/nvidia/version", drv, sizeof(drv)) < 0) {
		doc_add(c, "/proc/driver/nvidia/version: absent (NVIDIA driver not loaded)");
		return 0;
	}
	doc_add(c, "driver: %s", drv);
	if (doc_rd_line(doc, "/proc/sys/kernel/osrelease", rel, sizeof(rel)) == 0)
		sscanf(rel, "%d.%d", &maj, &min);
	doc_add(c, "kernel: %s", maj ? rel : "unknown");
	if (!strstr(drv, "Open Kernel Module"))
		return 0;
	return maj > 5 || (maj == 5 && min >= 12);
}

static void check_peermem(struct doctor *doc, struct doc_check *c)
{
	static const char *const mods[] = {
		"/sys/kernel/mm/memory_peers/nv_mem/version", "/sys/module/nvidia_peermem/version",
		"/sys/module/nv_peer_mem/version",
	};
	char v[64];

	if (!has_gpu(doc)) {
		doc_set(c, DOC_SKIP, "no NVIDIA GPU");
		return;
	}
	for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++)
		if (doc_rd_line(doc, mods[i], v, sizeof(v)) == 0) {
			doc_add(c, "%s: %s", mods[i], v);
			doc_set(c, DOC_PASS, "peer memory module loaded: NICs can DMA into GPU memory");
			return;
		}
	doc_add(c, "no /sys/module/nvidia_peermem, /sys/kernel/mm/memory_peers/nv_mem");
	if (dmabuf_ok(doc, c)) {
		doc_set(c, DOC_PASS, "no peer memory module, but dma-buf works (open module, Linux >= 5.12)");
		return;
	}
	doc_set(c, has_rdma_nic(doc) ? DOC_FAIL : DOC_WARN,
		"no GPUDirect RDMA: neither nvidia_peermem nor dma-buf; NCCL stages through host memory");
	doc_fix(c, "modprobe nvidia_peermem (shipped with the NVIDIA driver), or use NVIDIA's open "
		"kernel module on Linux >= 5.12 for dma-buf");
}

/* ---- iommu ---- */

/* Only the IOMMU words of the kernel command line. */
static void iommu_args(struct doc_check *c, char *cmd)
{
	char line[512] = "", *tok, *save = NULL;

	for (tok = strtok_r(cmd, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
		if (strstr(tok, "iommu"))
			snprintf(line + strlen(line), sizeof(line) - strlen(line), " %s", tok);
	doc_add(c, "kernel command line:%s", line[0] ? line : " no IOMMU options");
}

static void check_iommu(struct doctor *doc, struct doc_check *c)
{
	char cmd[1024] = "", **units = doc_list(doc, "/sys/class/iommu");
	char **groups;
	int ngroup = 0, translated = 0, pt, strict;

	doc_rd_line(doc, "/proc/cmdline", cmd, sizeof(cmd));
	pt = strstr(cmd, "iommu=pt") || strstr(cmd, "iommu.passthrough=1");
	strict = strstr(cmd, "iommu.strict=1") != NULL;
	iommu_args(c, cmd);
	if (!units || !units[0]) {
		doc_free_names(units);
		doc_set(c, DOC_PASS, "no IOMMU active: DMA is not translated");
		return;
	}
	doc_add(c, "/sys/class/iommu: %s%s", units[0], units[1] ? " ..." : "");
	doc_free_names(units);
	groups = doc_list(doc, "/sys/kernel/iommu_groups");
	for (char **g = groups; g && *g; g++) {
		char path[PATH_MAX], type[32];

		snprintf(path, sizeof(path), "/sys/kernel/iommu_groups/%s/type", *g);
		if (doc_rd_line(doc, path, type, sizeof(type)) < 0)
			continue;
		ngroup++;
		if (strcmp(type, "identity")) {
			if (!translated++)
				doc_add(c, "iommu group %s: type %s", *g, type);
		}
	}
	doc_free_names(groups);
	doc_add(c, "%d groups read, %d translated", ngroup, translated);
	if (translated || (!ngroup && !pt)) {
		doc_set(c, has_gpu(doc) ? DOC_FAIL : DOC_WARN,
			"IOMMU translates DMA%s: GPU-NIC peer-to-peer is redirected or blocked, every DMA costs a lookup",
			strict ? " in strict mode" : "");
		doc_fix(c, "boot with iommu=pt (e.g. intel_iommu=on iommu=pt), or turn the IOMMU off in the BIOS");
		return;
	}
	doc_set(c, DOC_PASS, "IOMMU in passthrough: DMA is not translated");
}

/* ---- acs: redirect of peer-to-peer requests on bridges between GPU and NIC ---- */

#define ACS_CAP_ID 0x000d
#define ACS_RR 0x0004   /* P2P request redirect */
#define ACS_CR 0x0008   /* P2P completion redirect */

/* ACS control word of a bridge, -1 without the capability, -2 unreadable. */
static int acs_ctrl(struct doctor *doc, const struct doc_pci *b, long *got)
{
	unsigned char cfg[4096];
	char path[PATH_MAX];
	long n;
	unsigned off = 0x100;

	snprintf(path, sizeof(path), "%s/config", b->path);
	n = doc_rd_file(doc, path, cfg, sizeof(cfg));
	*got = n;
	if (n < 0x104)
		return -2;
	for (int hops = 0; off >= 0x100 && off + 8 <= (unsigned long)n && hops < 64; hops++) {
		unsigned hdr = cfg[off] | cfg[off + 1] << 8 | cfg[off + 2] << 16 | (unsigned)cfg[off + 3] << 24;

		if ((hdr & 0xffff) == ACS_CAP_ID)
			return cfg[off + 6] | cfg[off + 7] << 8;
		off = hdr >> 20;
	}
	return -1;
}

/* Bridges from device x up to (not including) the common ancestor. */
static void acs_side(struct doctor *doc, struct doc_check *c, int x, int top, int *unread)
{
	for (int b = doc->pci[x].parent; b >= 0 && b != top; b = doc->pci[b].parent) {
		long got;
		int ctrl = acs_ctrl(doc, &doc->pci[b], &got);

		if (ctrl == -2) {
			doc_add(c, "bridge %s: config space shows %ld bytes, ACS is beyond 256 (needs root)",
				doc->pci[b].bdf, got < 0 ? 0 : got);
			(*unread)++;
		} else if (ctrl >= 0 && ctrl & (ACS_RR | ACS_CR)) {
			doc_add(c, "bridge %s: ACS control 0x%04x (request redirect %s, completion redirect %s)",
				doc->pci[b].bdf, ctrl, ctrl & ACS_RR ? "on" : "off", ctrl & ACS_CR ? "on" : "off");
			doc_worse(c, DOC_FAIL);
		} else {
			doc_add(c, "bridge %s: %s", doc->pci[b].bdf,
				ctrl < 0 ? "no ACS capability" : "ACS redirect off");
			doc_worse(c, DOC_PASS);
		}
	}
}

static void check_acs(struct doctor *doc, struct doc_check *c)
{
	int pairs = 0, unread = 0;

	for (int g = 0; g < doc->npci; g++)
		for (int n = 0; doc->pci[g].is_gpu && n < doc->npci; n++) {
			int top;

			if (!doc->pci[n].is_nic)
				continue;
			top = doc_common_ancestor(doc, g, n);
			if (top < 0)
				continue;   /* through the root complex: ACS does not matter */
			pairs++;
			doc_add(c, "%s and %s meet at %s", doc->pci[g].name, doc->pci[n].name,
				doc->pci[top].bdf);
			acs_side(doc, c, g, top, &unread);
			acs_side(doc, c, n, top, &unread);
		}
	if (!pairs) {
		doc_set(c, DOC_SKIP, "no GPU and NIC share a PCIe switch (paths through the root complex "
			"are not affected by ACS)");
		return;
	}
	if (c->st == DOC_FAIL)
		snprintf(c->summary, sizeof(c->summary),
			 "ACS redirect on a bridge between GPU and NIC: peer-to-peer goes up to the root complex");
	else if (c->st == DOC_SKIP)
		snprintf(c->summary, sizeof(c->summary), "ACS not readable (%d bridges)", unread);
	else
		snprintf(c->summary, sizeof(c->summary), "no ACS redirect between GPU and NIC");
	doc_fix(c, "disable ACS on those bridges: setpci -s BDF ECAP_ACS+6.w=0000 (each boot), or the "
		"BIOS option (PCIe ACS / IOMMU)");
}

/* ---- pcie-link: links trained below their maximum ---- */

static void link_dev(struct doctor *doc, struct doc_check *c, const struct doc_pci *p)
{
	char cs[32], ms[32], path[PATH_MAX];
	long cw, mw;
	int slow, narrow;

#define LP(f) (snprintf(path, sizeof(path), "%s/%s", p->path, f), path)
	if (doc_rd_line(doc, LP("current_link_speed"), cs, sizeof(cs)) < 0 ||
	    doc_rd_line(doc, LP("max_link_speed"), ms, sizeof(ms)) < 0 ||
	    doc_rd_long(doc, LP("current_link_width"), &cw) < 0 ||
	    doc_rd_long(doc, LP("max_link_width"), &mw) < 0)
		return;
#undef LP
	slow = atof(cs) < atof(ms);
	narrow = cw < mw;
	doc_add(c, "%s: %s x%ld, maximum %s x%ld%s", p->name, cs, cw, ms, mw,
		slow || narrow ? "  <-- below maximum" : "");
	if (narrow || (slow && !p->is_gpu))
		doc_worse(c, DOC_FAIL);
	else if (slow)
		doc_worse(c, DOC_WARN);   /* GPUs lower the speed when idle */
	else
		doc_worse(c, DOC_PASS);
}

static void check_link(struct doctor *doc, struct doc_check *c)
{
	for (int i = 0; i < doc->npci; i++)
		if (doc->pci[i].is_gpu || doc->pci[i].is_nic)
			link_dev(doc, c, &doc->pci[i]);
	if (c->st == DOC_SKIP)
		doc_set(c, DOC_SKIP, "no GPU or NIC with PCIe link information");
	else if (c->st == DOC_FAIL)
		snprintf(c->summary, sizeof(c->summary), "a PCIe link trained below its maximum");
	else if (c->st == DOC_WARN)
		snprintf(c->summary, sizeof(c->summary),
			 "a GPU link runs below its maximum speed (normal when the GPU is idle: check under load)");
	else
		snprintf(c->summary, sizeof(c->summary), "every GPU and NIC link at its maximum");
	doc_fix(c, "reseat the card in a slot wired for its full width, check risers and the BIOS "
		"link speed / bifurcation settings; 'lspci -vv -s BDF' shows LnkCap vs LnkSta");
}

/* ---- numa: GPU and NIC on different NUMA nodes ---- */

static void check_numa(struct doctor *doc, struct doc_check *c)
{
	int rdma = has_rdma_nic(doc);

	for (int g = 0; g < doc->npci; g++) {
		const struct doc_pci *gp = &doc->pci[g];
		int near = -1, any = 0;

		if (!gp->is_gpu || gp->numa < 0)
			continue;
		for (int n = 0; n < doc->npci; n++) {
			const struct doc_pci *np = &doc->pci[n];

			if (!np->is_nic || (rdma && !np->rdma[0]) || np->numa < 0)
				continue;
			any = 1;
			if (np->numa == gp->numa && near < 0)
				near = n;
		}
		if (!any)
			continue;
		if (near >= 0) {
			doc_add(c, "%s on NUMA node %d with %s", gp->name, gp->numa, doc->pci[near].name);
			doc_worse(c, DOC_PASS);
		} else {
			doc_add(c, "%s on NUMA node %d: no %sNIC on that node", gp->name, gp->numa,
				rdma ? "RDMA " : "");
			doc_worse(c, DOC_FAIL);
		}
	}
	if (c->st == DOC_SKIP)
		doc_set(c, DOC_SKIP, "no GPU and NIC with a NUMA node (numa_node -1 or absent)");
	else if (c->st == DOC_FAIL)
		snprintf(c->summary, sizeof(c->summary),
			 "a GPU has no NIC on its NUMA node: traffic crosses the CPU interconnect (SYS), no GPUDirect");
	else
		snprintf(c->summary, sizeof(c->summary), "every GPU has a NIC on its NUMA node");
	doc_fix(c, "move the NIC (or the GPU) to a slot of the same socket, or add a NIC per socket; "
		"'uroce topo' shows the matrix");
}

/* ---- governor ---- */

static void check_governor(struct doctor *doc, struct doc_check *c)
{
	char **cpus = doc_list(doc, "/sys/devices/system/cpu");
	char first_other[32] = "";
	int perf = 0, other = 0;

	for (char **p = cpus; p && *p; p++) {
		char path[PATH_MAX], gov[32];

		if (strncmp(*p, "cpu", 3) || !(*p)[3] || (*p)[3] < '0' || (*p)[3] > '9')
			continue;
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/%s/cpufreq/scaling_governor", *p);
		if (doc_rd_line(doc, path, gov, sizeof(gov)) < 0)
			continue;
		if (!strcmp(gov, "performance")) {
			perf++;
		} else if (!other++) {
			snprintf(first_other, sizeof(first_other), "%s", gov);
		}
	}
	doc_free_names(cpus);
	if (!perf && !other) {
		doc_set(c, DOC_SKIP, "no cpufreq (a VM, or no frequency driver)");
		return;
	}
	doc_add(c, "%d CPUs 'performance', %d others%s%s", perf, other, other ? ", e.g. " : "", first_other);
	if (other) {
		doc_set(c, DOC_WARN, "CPU frequency governor '%s': the engine thread and interrupts run "
			"slower after every idle period", first_other);
		doc_fix(c, "cpupower frequency-set -g performance (or tuned-adm profile network-latency)");
	} else {
		doc_set(c, DOC_PASS, "every CPU uses the performance governor");
	}
}

/* ---- sockbuf: net.core.rmem_max / wmem_max ---- */

#define UROCE_SOCKBUF (8L << 20)   /* what uroce asks for per receive socket */

static void check_sockbuf(struct doctor *doc, struct doc_check *c)
{
	static const char *const keys[] = { "rmem_max", "wmem_max" };
	int n = 0;

	for (int i = 0; i < 2; i++) {
		char path[64];
		long v;

		snprintf(path, sizeof(path), "/proc/sys/net/core/%s", keys[i]);
		if (doc_rd_long(doc, path, &v) < 0)
			continue;
		n++;
		doc_add(c, "net.core.%s = %ld (%.1f MiB)", keys[i], v, v / 1048576.0);
		doc_worse(c, v < UROCE_SOCKBUF ? DOC_WARN : DOC_PASS);
	}
	if (!n) {
		doc_set(c, DOC_SKIP, "no /proc/sys/net/core");
		return;
	}
	if (c->st == DOC_WARN)
		snprintf(c->summary, sizeof(c->summary),
			 "socket buffer limit below the 8 MiB uroce asks for: bursts overflow and are retransmitted");
	else
		snprintf(c->summary, sizeof(c->summary), "socket buffer limits allow uroce's 8 MiB");
	doc_fix(c, "sysctl -w net.core.rmem_max=16777216 net.core.wmem_max=16777216 (and in "
		"/etc/sysctl.d/); programs running as root bypass the limit");
}

/* ---- drops: interface and UDP drop counters ---- */

static void drops_if(struct doctor *doc, struct doc_check *c, const char *ifn)
{
	static const char *const ctr[] = {
		"rx_dropped", "rx_missed_errors", "rx_fifo_errors", "rx_over_errors",
		"rx_crc_errors", "tx_dropped",
	};
	char line[512] = "";
	int any = 0, bad = 0;

	for (size_t i = 0; i < sizeof(ctr) / sizeof(ctr[0]); i++) {
		char path[PATH_MAX];
		long v;

		snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/%s", ifn, ctr[i]);
		if (doc_rd_long(doc, path, &v) < 0)
			continue;
		any = 1;
		if (v) {
			bad = 1;
			snprintf(line + strlen(line), sizeof(line) - strlen(line), " %s=%ld", ctr[i], v);
		}
	}
	if (!any)
		return;
	doc_add(c, "%s:%s", ifn, bad ? line : " no drops or errors");
	doc_worse(c, bad ? DOC_WARN : DOC_PASS);
}

/* UDP RcvbufErrors/SndbufErrors from /proc/net/snmp: a header line and
 * a value line, both starting "Udp:". */
static void drops_udp(struct doctor *doc, struct doc_check *c)
{
	char buf[8192], *hdr, *val;
	long n = doc_rd_file(doc, "/proc/net/snmp", (unsigned char *)buf, sizeof(buf) - 1);
	char *hs, *vs, *h, *v;

	if (n <= 0)
		return;
	buf[n] = 0;
	hdr = strstr(buf, "\nUdp:");
	val = hdr ? strstr(hdr + 1, "\nUdp:") : NULL;
	if (!hdr || !val)
		return;
	*strchrnul(hdr + 1, '\n') = 0;
	*strchrnul(val + 1, '\n') = 0;
	h = strtok_r(hdr + 5, " ", &hs);
	v = strtok_r(val + 5, " ", &vs);
	for (; h && v; h = strtok_r(NULL, " ", &hs), v = strtok_r(NULL, " ", &vs)) {
		if (strcmp(h, "RcvbufErrors") && strcmp(h, "SndbufErrors"))
			continue;
		doc_add(c, "UDP %s = %s", h, v);
		doc_worse(c, atol(v) ? DOC_WARN : DOC_PASS);
	}
}

static void check_drops(struct doctor *doc, struct doc_check *c)
{
	for (int i = 0; i < doc->nif; i++)
		drops_if(doc, c, doc->ifs[i]);
	drops_udp(doc, c);
	if (c->st == DOC_SKIP)
		doc_set(c, DOC_SKIP, "no interface statistics to read");
	else if (c->st == DOC_WARN)
		snprintf(c->summary, sizeof(c->summary),
			 "drops since boot: each one costs uroce a retransmission (run again under load to see them grow)");
	else
		snprintf(c->summary, sizeof(c->summary), "no drops on the interfaces or UDP sockets");
	doc_fix(c, "rx_missed/fifo: larger rings (ethtool -G IF rx 4096); UDP RcvbufErrors: raise "
		"net.core.rmem_max; rx_crc_errors: cable or optics");
}

const struct doc_check_def doc_checks[] = {
	{ "mtu", "interface MTU vs RoCE path MTU and the peer", check_mtu },
	{ "gid", "RoCE v2 GIDs and the index to use", check_gid },
	{ "qos", "PFC and DSCP trust", check_qos },
	{ "ecn", "ECN (DCQCN) roce_np / roce_rp", check_ecn },
	{ "peermem", "nvidia_peermem or dma-buf", check_peermem },
	{ "iommu", "IOMMU mode", check_iommu },
	{ "acs", "ACS on bridges between GPU and NIC", check_acs },
	{ "pcie-link", "PCIe links below maximum", check_link },
	{ "numa", "GPU and NIC on one NUMA node", check_numa },
	{ "governor", "CPU frequency governor", check_governor },
	{ "sockbuf", "net.core.rmem_max / wmem_max", check_sockbuf },
	{ "drops", "interface and UDP drops", check_drops },
};
const int doc_ncheck = sizeof(doc_checks) / sizeof(doc_checks[0]);
