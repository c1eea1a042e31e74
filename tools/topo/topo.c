/* uroce topo: where the GPUs and NICs sit on the PCIe tree, how far apart
 * they are (in the classes of `nvidia-smi topo -m`), and whether GPUDirect
 * RDMA can work between each pair.
 *
 * hwloc discovers CPUs, NUMA nodes, the PCIe tree and the OS devices under
 * it (network interfaces, /sys/class/infiniband devices, GPUs), or reads a
 * recorded XML topology with --input. On this machine we add what hwloc does
 * not know: PCIe link training from sysfs, uroce's soft devices (through the
 * verbs API), NVLink through NVML (loaded at run time), peer memory and
 * IOMMU state. */
#include "cli.h"
#include "topo.h"

#include <dirent.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

void usage_topo(FILE *f)
{
	fprintf(f,
		"usage: uroce topo [--input FILE.xml] [--json] [--svg FILE]\n"
		"\n"
		"Show GPUs and NICs with the path class between every pair (X, NV#, PIX,\n"
		"PXB, PHB, NODE, SYS, as in 'nvidia-smi topo -m'), their CPU and NUMA\n"
		"affinity, the GPUDirect RDMA verdict for each GPU-NIC pair, the best NIC\n"
		"for each GPU and the PCIe link of each device (current vs maximum).\n"
		"\n"
		"options:\n"
		"  --input FILE  read a recorded hwloc XML topology instead of this machine\n"
		"                (host checks such as peer memory are then not made)\n"
		"  --json        print everything as one JSON object\n"
		"  --svg FILE    also draw the PCIe tree with the GPU-to-NIC paths\n"
		"  -h, --help    print this help\n"
		"\n"
		"exit status: 0 on success, 1 if the topology could not be loaded,\n"
		"2 on bad usage.\n");
}

void topo_note(struct topo *tp, const char *fmt, ...)
{
	size_t off = strlen(tp->notes);
	va_list ap;

	if (off + 2 >= sizeof(tp->notes))
		return;
	va_start(ap, fmt);
	vsnprintf(tp->notes + off, sizeof(tp->notes) - off - 1, fmt, ap);
	va_end(ap);
	strcat(tp->notes, "\n");
}

/* Append s to a comma-separated list. */
static void list_add(char *list, size_t len, const char *s)
{
	size_t off = strlen(list);

	snprintf(list + off, len - off, "%s%s", off ? "," : "", s);
}

static int list_has(const char *list, const char *s)
{
	size_t n = strlen(s);
	const char *p = list;

	while ((p = strstr(p, s))) {
		if ((p == list || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return 1;
		p += n;
	}
	return 0;
}

/* ---- path classes ---- */

static const char *const path_names[] = {
	[TP_X] = "X", [TP_NV] = "NV", [TP_PIX] = "PIX", [TP_PXB] = "PXB",
	[TP_PHB] = "PHB", [TP_NODE] = "NODE", [TP_SYS] = "SYS", [TP_NONE] = "-",
};

const char *topo_path_name(enum topo_path p)
{
	return path_names[p];
}

static int is_bridge(hwloc_obj_t o, hwloc_obj_bridge_type_t up)
{
	return o && o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == up;
}

/* Depth of a PCI-to-PCI bridge below its root port: root port 0, then a
 * switch's upstream port 1, its downstream ports 2, the next switch 3, 4 ...
 * A PCIe switch shows in sysfs (and hwloc) as an upstream bridge whose
 * children are downstream bridges; pairing them by depth is how NCCL
 * collapses a switch into one node. */
static int bridge_depth(hwloc_obj_t b)
{
	int d = 0;

	for (b = b->parent; is_bridge(b, HWLOC_OBJ_BRIDGE_PCI); b = b->parent)
		d++;
	return d;
}

/* The switch a bridge belongs to, named by its upstream port; NULL for a
 * root port (part of the host bridge). */
static hwloc_obj_t switch_of(hwloc_obj_t b)
{
	int d = bridge_depth(b);

	if (d == 0)
		return NULL;
	return d % 2 ? b : b->parent;
}

/* Distinct switches crossed going from o up to (and including) top. */
static int add_switches(hwloc_obj_t o, hwloc_obj_t top, hwloc_obj_t *sw, int n)
{
	for (o = o->parent; o; o = o->parent) {
		hwloc_obj_t s = is_bridge(o, HWLOC_OBJ_BRIDGE_PCI) ? switch_of(o) : NULL;
		int i;

		for (i = 0; s && i < n; i++)
			if (sw[i] == s)
				break;
		if (s && i == n && n < 64)
			sw[n++] = s;
		if (o == top)
			break;
	}
	return n;
}

/* Nearest common ancestor; hwloc_get_common_ancestor_obj() compares depths,
 * which I/O objects do not have. */
static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
	hwloc_obj_t x, y;

	for (x = a; x; x = x->parent)
		for (y = b; y; y = y->parent)
			if (x == y)
				return x;
	return NULL;
}

static enum topo_path pci_path(const struct topo *tp, hwloc_obj_t a, hwloc_obj_t b)
{
	hwloc_obj_t c = common_ancestor(a, b), sw[64];
	hwloc_obj_t na, nb;
	int n;

	if (a == b)
		return TP_X;
	if (!c)
		return TP_SYS;
	if (is_bridge(c, HWLOC_OBJ_BRIDGE_PCI) && switch_of(c)) {
		n = add_switches(a, c, sw, 0);
		n = add_switches(b, c, sw, n);
		return n <= 1 ? TP_PIX : TP_PXB;
	}
	if (c->type == HWLOC_OBJ_BRIDGE || c->type == HWLOC_OBJ_PCI_DEVICE)
		return TP_PHB;  /* host bridge, or a root port shared by both */
	na = hwloc_get_non_io_ancestor_obj(tp->t, a);
	nb = hwloc_get_non_io_ancestor_obj(tp->t, b);
	if (na && nb && na->nodeset && nb->nodeset && hwloc_bitmap_isequal(na->nodeset, nb->nodeset))
		return TP_NODE;
	return TP_SYS;
}

enum topo_path topo_path(const struct topo *tp, const struct topo_dev *a,
			 const struct topo_dev *b)
{
	if (a == b)
		return TP_X;
	if (a->is_gpu && b->is_gpu && tp->nvl[a->index][b->index])
		return TP_NV;
	if (!a->pci || !b->pci)
		return TP_NONE;
	return pci_path(tp, a->pci, b->pci);
}

void topo_cell(const struct topo *tp, const struct topo_dev *a,
	       const struct topo_dev *b, char *buf, size_t len)
{
	enum topo_path p = topo_path(tp, a, b);

	if (p == TP_NV)
		snprintf(buf, len, "NV%d", tp->nvl[a->index][b->index]);
	else
		snprintf(buf, len, "%s", topo_path_name(p));
}

/* ---- GPUDirect RDMA verdict ---- */

const char *topo_gdr(const struct topo *tp, const struct topo_dev *g,
		     const struct topo_dev *n, char *why, size_t len)
{
	enum topo_path p = topo_path(tp, g, n);
	const struct topo_host *h = &tp->host;

	if (!n->rdma[0]) {
		snprintf(why, len, "%s has no RDMA device%s", n->label,
			 n->soft[0] ? " (uroce soft devices move data through host memory)" : "");
		return "no";
	}
	if (p == TP_NONE) {
		snprintf(why, len, "%s has no PCI location", n->label);
		return "no";
	}
	if (p > TOPO_GDR_LEVEL) {
		snprintf(why, len, "path %s is farther than NCCL's default GDR level PXB "
			 "(NCCL_NET_GDR_LEVEL)", topo_path_name(p));
		return "no";
	}
	if (!h->known) {
		snprintf(why, len, "path %s is within PXB; peer memory and IOMMU not checked "
			 "(recorded topology)", topo_path_name(p));
		return "maybe";
	}
	if (!h->peermem && !h->dmabuf) {
		snprintf(why, len, "path %s, but neither nvidia_peermem nor dma-buf is available (%s; %s)",
			 topo_path_name(p), h->peermem_why, h->dmabuf_why);
		return "no";
	}
	if (h->iommu_translates) {
		snprintf(why, len, "path %s, but the IOMMU translates DMA (%s)", topo_path_name(p),
			 h->iommu_why);
		return "no";
	}
	snprintf(why, len, "path %s within PXB, %s", topo_path_name(p),
		 h->peermem ? h->peermem_why : h->dmabuf_why);
	return "yes";
}

/* Is NIC n a better choice for GPU g than NIC b? An RDMA device first, then
 * the nearer path, then the faster link. */
static int nic_better(const struct topo *tp, const struct topo_dev *g,
		      const struct topo_dev *n, const struct topo_dev *b)
{
	enum topo_path pn, pb;

	if (!b)
		return 1;
	if (!!n->rdma[0] != !!b->rdma[0])
		return !!n->rdma[0];
	pn = topo_path(tp, g, n);
	pb = topo_path(tp, g, b);
	if (pn != pb)
		return pn < pb;
	return n->link.gbytes > b->link.gbytes;
}

const struct topo_dev *topo_best_nic(const struct topo *tp, const struct topo_dev *g)
{
	const struct topo_dev *best = NULL;
	int i;

	for (i = 0; i < tp->nnic; i++)
		if (nic_better(tp, g, &tp->nic[i], best))
			best = &tp->nic[i];
	return best;
}

/* ---- discovery ---- */

static int is_gpu_osdev(hwloc_obj_t o)
{
	return o->type == HWLOC_OBJ_OS_DEVICE &&
	       (o->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU ||
		o->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC);
}

/* NVIDIA display-class devices, and any PCI device with a GPU or
 * co-processor OS device (CUDA, OpenCL, NVML, RSMI): not BMC graphics. */
static int pci_is_gpu(hwloc_obj_t o)
{
	hwloc_obj_t c;

	if (o->attr->pcidev.class_id >> 8 != 0x03)
		return 0;
	if (o->attr->pcidev.vendor_id == 0x10de)
		return 1;
	for (c = o->io_first_child; c; c = c->next_sibling)
		if (is_gpu_osdev(c))
			return 1;
	return 0;
}

/* Network (0x02xx) and old-style InfiniBand (0x0c06) controllers. */
static int pci_is_nic(hwloc_obj_t o)
{
	unsigned cls = o->attr->pcidev.class_id;

	return cls >> 8 == 0x02 || cls == 0x0c06;
}

static void fill_common(struct topo *tp, struct topo_dev *d, hwloc_obj_t o)
{
	hwloc_obj_t up = hwloc_get_non_io_ancestor_obj(tp->t, o);
	const char *s;

	d->pci = o;
	snprintf(d->busid, sizeof(d->busid), "%04x:%02x:%02x.%01x", o->attr->pcidev.domain,
		 o->attr->pcidev.bus, o->attr->pcidev.dev, o->attr->pcidev.func);
	d->link.gbytes = o->attr->pcidev.linkspeed;
	s = hwloc_obj_get_info_by_name(o, "PCIDevice");
	snprintf(d->model, sizeof(d->model), "%s", s ? s : "");
	if (up && up->cpuset)
		hwloc_bitmap_list_snprintf(d->cpus, sizeof(d->cpus), up->cpuset);
	if (up && up->nodeset)
		hwloc_bitmap_list_snprintf(d->nodes, sizeof(d->nodes), up->nodeset);
}

static void add_gpu(struct topo *tp, hwloc_obj_t o)
{
	struct topo_dev *d;
	hwloc_obj_t c;

	if (tp->ngpu >= TOPO_MAX_GPU)
		return;
	d = &tp->gpu[tp->ngpu];
	d->is_gpu = 1;
	d->index = tp->ngpu++;
	snprintf(d->label, sizeof(d->label), "GPU%d", d->index);
	fill_common(tp, d, o);
	for (c = o->io_first_child; c; c = c->next_sibling) {
		const char *m = is_gpu_osdev(c) ? hwloc_obj_get_info_by_name(c, "GPUModel") : NULL;

		if (m && !d->model[0])
			snprintf(d->model, sizeof(d->model), "%s", m);
		if (is_gpu_osdev(c) && !d->name[0])
			snprintf(d->name, sizeof(d->name), "%s", c->name);
	}
	if (!d->name[0])
		memcpy(d->name, d->busid, sizeof(d->busid));
	if (!d->model[0])
		snprintf(d->model, sizeof(d->model), "PCI %04x:%04x", o->attr->pcidev.vendor_id,
			 o->attr->pcidev.device_id);
}

static void add_nic(struct topo *tp, hwloc_obj_t o)
{
	struct topo_dev *d;
	hwloc_obj_t c;

	if (tp->nnic >= TOPO_MAX_NIC)
		return;
	d = &tp->nic[tp->nnic];
	d->index = tp->nnic++;
	snprintf(d->label, sizeof(d->label), "NIC%d", d->index);
	fill_common(tp, d, o);
	for (c = o->io_first_child; c; c = c->next_sibling) {
		if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name)
			continue;
		if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
			list_add(d->rdma, sizeof(d->rdma), c->name);
		else if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK)
			list_add(d->netdevs, sizeof(d->netdevs), c->name);
	}
}

/* Real RDMA devices straight from /sys/class/infiniband, in case hwloc
 * left one out (its I/O discovery is a plugin that can be missing). */
static void add_sysfs_rdma(struct topo *tp)
{
	DIR *dir = opendir("/sys/class/infiniband");
	struct dirent *e;

	if (!dir) {
		if (errno != ENOENT)
			topo_note(tp, "cannot read /sys/class/infiniband: %s", strerror(errno));
		return;
	}
	while ((e = readdir(dir))) {
		char path[PATH_MAX], real[PATH_MAX];
		const char *bdf;
		int i;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device", e->d_name);
		if (!realpath(path, real))
			continue;
		bdf = strrchr(real, '/') + 1;
		for (i = 0; i < tp->nnic; i++)
			if (!strcmp(tp->nic[i].busid, bdf) && !list_has(tp->nic[i].rdma, e->d_name))
				list_add(tp->nic[i].rdma, sizeof(tp->nic[i].rdma), e->d_name);
	}
	closedir(dir);
}

/* uroce's own devices, uroce_<ifname>, through the verbs API (the CLI is
 * linked against uroce's libibverbs.so.1). */
static void add_soft(struct topo *tp)
{
	struct ibv_device **list;
	int n = 0, i, j;

	list = ibv_get_device_list(&n);
	if (!list) {
		topo_note(tp, "no uroce soft devices: ibv_get_device_list: %s", strerror(errno));
		return;
	}
	for (i = 0; i < n; i++) {
		const char *name = ibv_get_device_name(list[i]);
		const char *ifn = strncmp(name, "uroce_", 6) ? NULL : name + 6;
		int placed = 0;

		for (j = 0; ifn && j < tp->nnic; j++) {
			if (list_has(tp->nic[j].netdevs, ifn)) {
				list_add(tp->nic[j].soft, sizeof(tp->nic[j].soft), name);
				placed = 1;
			}
		}
		if (!placed && tp->nsoft < TOPO_MAX_SOFT) {
			snprintf(tp->soft[tp->nsoft].name, sizeof(tp->soft[0].name), "%s", name);
			snprintf(tp->soft[tp->nsoft].netdev, sizeof(tp->soft[0].netdev), "%s",
				 ifn ? ifn : "");
			tp->nsoft++;
		}
	}
	ibv_free_device_list(list);
}

/* Read a one-line sysfs file into buf (newline stripped); 0 or -1. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	char *nl;

	if (!f)
		return -1;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	nl = strchr(buf, '\n');
	if (nl)
		*nl = 0;
	return 0;
}

static void read_link(struct topo_dev *d)
{
	char path[PATH_MAX], buf[64];
	struct topo_link *l = &d->link;
	int ok = 1;

#define LINKF(f) (snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", d->busid, f), path)
	ok &= read_line(LINKF("current_link_speed"), l->cur_speed, sizeof(l->cur_speed)) == 0;
	ok &= read_line(LINKF("max_link_speed"), l->max_speed, sizeof(l->max_speed)) == 0;
	ok &= read_line(LINKF("current_link_width"), buf, sizeof(buf)) == 0;
	l->cur_width = atoi(buf);
	ok &= read_line(LINKF("max_link_width"), buf, sizeof(buf)) == 0;
	l->max_width = atoi(buf);
#undef LINKF
	if (!ok)
		return;
	l->have_sysfs = 1;
	l->slow_speed = atof(l->cur_speed) < atof(l->max_speed);
	l->narrow = l->cur_width < l->max_width;
}

/* Peer memory, dma-buf and IOMMU state of this machine. */
static void read_host(struct topo_host *h)
{
	char buf[256];
	struct utsname u;
	DIR *d;
	struct dirent *e;
	int maj = 0, min = 0;

	h->known = 1;
	if (read_line("/sys/kernel/mm/memory_peers/nv_mem/version", buf, sizeof(buf)) == 0 ||
	    read_line("/sys/module/nvidia_peermem/version", buf, sizeof(buf)) == 0) {
		h->peermem = 1;
		snprintf(h->peermem_why, sizeof(h->peermem_why), "peer memory module %s", buf);
	} else {
		snprintf(h->peermem_why, sizeof(h->peermem_why), "nvidia_peermem not loaded");
	}
	if (uname(&u) == 0)
		sscanf(u.release, "%d.%d", &maj, &min);
	if (read_line("/proc/driver/nvidia/version", buf, sizeof(buf)) != 0)
		snprintf(h->dmabuf_why, sizeof(h->dmabuf_why), "no NVIDIA driver");
	else if (!strstr(buf, "Open Kernel Module"))
		snprintf(h->dmabuf_why, sizeof(h->dmabuf_why),
			 "dma-buf needs NVIDIA's open kernel module");
	else if (maj < 5 || (maj == 5 && min < 12))
		snprintf(h->dmabuf_why, sizeof(h->dmabuf_why), "dma-buf needs Linux 5.12, this is %s",
			 u.release);
	else {
		h->dmabuf = 1;
		snprintf(h->dmabuf_why, sizeof(h->dmabuf_why), "dma-buf (Linux %s, open module)",
			 u.release);
	}
	snprintf(h->iommu_why, sizeof(h->iommu_why), "no IOMMU");
	d = opendir("/sys/kernel/iommu_groups");
	while (d && (e = readdir(d))) {
		char path[PATH_MAX];

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/kernel/iommu_groups/%s/type", e->d_name);
		if (read_line(path, buf, sizeof(buf)) == 0 && strncmp(buf, "identity", 8)) {
			h->iommu_translates = 1;
			snprintf(h->iommu_why, sizeof(h->iommu_why),
				 "IOMMU group %s is in %s mode, not passthrough", e->d_name, buf);
			break;
		}
		snprintf(h->iommu_why, sizeof(h->iommu_why), "IOMMU in passthrough");
	}
	if (d)
		closedir(d);
}

static int topo_load(struct topo *tp)
{
	hwloc_obj_t o = NULL;

	if (hwloc_topology_init(&tp->t) < 0) {
		fprintf(stderr, "uroce topo: hwloc_topology_init: %s\n", strerror(errno));
		return -1;
	}
	/* Keep every bridge: the path classes count them. */
	hwloc_topology_set_io_types_filter(tp->t, HWLOC_TYPE_FILTER_KEEP_ALL);
	if (tp->input && hwloc_topology_set_xml(tp->t, tp->input) < 0) {
		fprintf(stderr, "uroce topo: cannot read %s: %s\n", tp->input, strerror(errno));
		return -1;
	}
	if (hwloc_topology_load(tp->t) < 0) {
		fprintf(stderr, "uroce topo: hwloc_topology_load: %s\n", strerror(errno));
		return -1;
	}
	while ((o = hwloc_get_next_pcidev(tp->t, o))) {
		if (pci_is_gpu(o))
			add_gpu(tp, o);
		else if (pci_is_nic(o))
			add_nic(tp, o);
	}
	return 0;
}

/* What only this machine can tell. */
static void topo_live(struct topo *tp)
{
	int i;

	add_sysfs_rdma(tp);
	add_soft(tp);
	for (i = 0; i < tp->ngpu; i++)
		read_link(&tp->gpu[i]);
	for (i = 0; i < tp->nnic; i++)
		read_link(&tp->nic[i]);
	read_host(&tp->host);
	topo_nvml(tp);
}

static void name_nics(struct topo *tp)
{
	int i;

	for (i = 0; i < tp->nnic; i++) {
		struct topo_dev *d = &tp->nic[i];
		const char *src = d->rdma[0] ? d->rdma : d->soft[0] ? d->soft :
				  d->netdevs[0] ? d->netdevs : d->busid;
		size_t n = strcspn(src, ",");

		snprintf(d->name, sizeof(d->name), "%.*s", (int)n, src);
	}
}

/* ---- text output ---- */

static const struct topo_dev *dev_at(const struct topo *tp, int i)
{
	return i < tp->ngpu ? &tp->gpu[i] : &tp->nic[i - tp->ngpu];
}

static void print_matrix(const struct topo *tp)
{
	int n = tp->ngpu + tp->nnic, i, j, w = 14;
	char cell[16];

	for (i = 0; i < n; i++)   /* the CPU column as wide as its widest list */
		if ((int)strlen(dev_at(tp, i)->cpus) + 2 > w)
			w = (int)strlen(dev_at(tp, i)->cpus) + 2;
	printf("%-8s", "");
	for (j = 0; j < n; j++)
		printf("%-6s", dev_at(tp, j)->label);
	printf("%-*s%s\n", w, "CPU Affinity", "NUMA Affinity");
	for (i = 0; i < n; i++) {
		const struct topo_dev *a = dev_at(tp, i);

		printf("%-8s", a->label);
		for (j = 0; j < n; j++) {
			topo_cell(tp, a, dev_at(tp, j), cell, sizeof(cell));
			printf("%-6s", cell);
		}
		printf("%-*s%s\n", w, a->cpus[0] ? a->cpus : "-", a->nodes[0] ? a->nodes : "-");
	}
}

static void print_legend(void)
{
	printf("\nLegend:\n"
	       "  X    = Self\n"
	       "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
	       "  NODE = Connection traversing PCIe and the interconnect between host bridges of one NUMA node\n"
	       "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
	       "  PXB  = Connection traversing multiple PCIe switches (without the host bridge)\n"
	       "  PIX  = Connection traversing at most a single PCIe switch\n"
	       "  NV#  = Connection traversing a bonded set of # NVLinks\n"
	       "  -    = no PCI location\n");
}

static void print_link(const struct topo_dev *d)
{
	const struct topo_link *l = &d->link;

	if (l->have_sysfs)
		printf("%s x%d (max %s x%d)%s%s", l->cur_speed, l->cur_width, l->max_speed,
		       l->max_width, l->slow_speed ? " SPEED BELOW MAX" : "",
		       l->narrow ? " WIDTH BELOW MAX" : "");
	else if (l->gbytes > 0)
		printf("%.2f GB/s (recorded; maximum unknown)", l->gbytes);
	else
		printf("unknown");
}

static void print_devices(const struct topo *tp)
{
	int i;

	printf("\nDevices:\n");
	for (i = 0; i < tp->ngpu + tp->nnic; i++) {
		const struct topo_dev *d = dev_at(tp, i);

		printf("  %-5s %s  %s", d->label, d->busid, d->is_gpu ? d->model : d->name);
		if (!d->is_gpu) {
			if (d->rdma[0])
				printf("  rdma=%s", d->rdma);
			if (d->netdevs[0])
				printf("  netdev=%s", d->netdevs);
			if (d->soft[0])
				printf("  uroce=%s", d->soft);
		}
		printf("\n        link: ");
		print_link(d);
		printf("\n");
	}
	for (i = 0; i < tp->nsoft; i++)
		printf("  soft  %s on %s (virtual interface, no PCI device)\n", tp->soft[i].name,
		       tp->soft[i].netdev[0] ? tp->soft[i].netdev : "?");
}

static void print_gdr(const struct topo *tp)
{
	char why[512];
	int i, j;

	if (!tp->ngpu || !tp->nnic)
		return;
	printf("\nGPUDirect RDMA (NCCL default GDR level PXB):\n");
	for (i = 0; i < tp->ngpu; i++)
		for (j = 0; j < tp->nnic; j++) {
			const char *v = topo_gdr(tp, &tp->gpu[i], &tp->nic[j], why, sizeof(why));

			printf("  %-5s %-5s %-5s %s\n", tp->gpu[i].label, tp->nic[j].label, v, why);
		}
	printf("\nBest NIC per GPU:\n");
	for (i = 0; i < tp->ngpu; i++) {
		const struct topo_dev *n = topo_best_nic(tp, &tp->gpu[i]);
		char cell[16];

		topo_cell(tp, &tp->gpu[i], n, cell, sizeof(cell));
		printf("  %-5s -> %s (%s) %s\n", tp->gpu[i].label, n->label, n->name, cell);
	}
}

static void print_text(const struct topo *tp)
{
	const char *prod = hwloc_obj_get_info_by_name(hwloc_get_root_obj(tp->t), "DMIProductName");
	int ncores = hwloc_get_nbobjs_by_type(tp->t, HWLOC_OBJ_CORE);
	int npu = hwloc_get_nbobjs_by_type(tp->t, HWLOC_OBJ_PU);
	int nnuma = hwloc_get_nbobjs_by_type(tp->t, HWLOC_OBJ_NUMANODE);
	int npkg = hwloc_get_nbobjs_by_type(tp->t, HWLOC_OBJ_PACKAGE);

	printf("Machine: %s%s%s\n", prod ? prod : "unknown", tp->input ? ", recorded in " : "",
	       tp->input ? tp->input : "");
	printf("CPUs: %d packages, %d NUMA nodes, %d cores, %d PUs; %d GPUs, %d NICs\n\n",
	       npkg, nnuma, ncores, npu, tp->ngpu, tp->nnic);
	if (tp->ngpu + tp->nnic)
		print_matrix(tp);
	print_legend();
	print_devices(tp);
	print_gdr(tp);
	if (tp->host.known)
		printf("\nHost: %s; %s; %s\n", tp->host.peermem_why, tp->host.dmabuf_why,
		       tp->host.iommu_why);
	if (tp->nvml_note[0])
		printf("NVLink: %s\n", tp->nvml_note);
	if (tp->notes[0])
		printf("\nNot read:\n%s", tp->notes);
}

static int write_svg_file(const struct topo *tp, const char *path)
{
	FILE *f = fopen(path, "w");
	int rc;

	if (!f) {
		fprintf(stderr, "uroce topo: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	rc = topo_write_svg(tp, f);
	if (fclose(f) != 0 || rc) {
		fprintf(stderr, "uroce topo: writing %s failed\n", path);
		return -1;
	}
	return 0;
}

int cmd_topo(int argc, char **argv)
{
	static struct topo tp;  /* large: keep it off the stack */
	const char *svg = NULL;
	int json = 0, i, rc = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--input") && i + 1 < argc) {
			tp.input = argv[++i];
		} else if (!strcmp(argv[i], "--svg") && i + 1 < argc) {
			svg = argv[++i];
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage_topo(stdout);
			return 0;
		} else {
			fprintf(stderr, "uroce topo: bad argument '%s'\n\n", argv[i]);
			usage_topo(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (topo_load(&tp) < 0)
		return 1;
	if (!tp.input)
		topo_live(&tp);
	name_nics(&tp);
	if (json)
		topo_write_json(&tp, stdout);
	else
		print_text(&tp);
	if (svg && write_svg_file(&tp, svg) < 0)
		rc = 1;
	hwloc_topology_destroy(tp.t);
	return rc;
}
