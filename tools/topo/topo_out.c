/* uroce topo: JSON and SVG output. */
#include "cli.h"
#include "topo.h"

#include <string.h>

/* ---- JSON ---- */

/* "key": "value", with the separator chosen by the caller. */
static void jstr(FILE *f, const char *key, const char *val, const char *sep)
{
	cli_json_str(f, key);
	fputs(": ", f);
	cli_json_str(f, val);
	fputs(sep, f);
}

/* A comma list as a JSON array of strings. */
static void jlist(FILE *f, const char *key, const char *list, const char *sep)
{
	char buf[256], *tok, *save = NULL;
	int first = 1;

	snprintf(buf, sizeof(buf), "%s", list);
	cli_json_str(f, key);
	fputs(": [", f);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		fputs(first ? "" : ", ", f);
		cli_json_str(f, tok);
		first = 0;
	}
	fprintf(f, "]%s", sep);
}

static void json_link(FILE *f, const struct topo_link *l)
{
	fprintf(f, "\"link\": {\"gbytes_per_s\": %.2f", l->gbytes);
	if (l->have_sysfs) {
		fputs(", ", f);
		jstr(f, "current_speed", l->cur_speed, ", ");
		jstr(f, "max_speed", l->max_speed, ", ");
		fprintf(f, "\"current_width\": %d, \"max_width\": %d, \"below_max\": %s",
			l->cur_width, l->max_width, l->slow_speed || l->narrow ? "true" : "false");
	}
	fputs("}", f);
}

static void json_dev(FILE *f, const struct topo_dev *d, int last)
{
	fputs("    {", f);
	jstr(f, "label", d->label, ", ");
	jstr(f, "name", d->name, ", ");
	jstr(f, "busid", d->busid, ", ");
	jstr(f, "model", d->model, ", ");
	if (!d->is_gpu) {
		jlist(f, "rdma", d->rdma, ", ");
		jlist(f, "netdevs", d->netdevs, ", ");
		jlist(f, "uroce", d->soft, ", ");
	}
	jstr(f, "cpu_affinity", d->cpus, ", ");
	jstr(f, "numa_affinity", d->nodes, ", ");
	json_link(f, &d->link);
	fprintf(f, "}%s\n", last ? "" : ",");
}

static const struct topo_dev *dev_at(const struct topo *tp, int i)
{
	return i < tp->ngpu ? &tp->gpu[i] : &tp->nic[i - tp->ngpu];
}

static void json_matrix(const struct topo *tp, FILE *f)
{
	int n = tp->ngpu + tp->nnic, i, j;
	char cell[16];

	fputs("  \"matrix\": {\"labels\": [", f);
	for (j = 0; j < n; j++) {
		fputs(j ? ", " : "", f);
		cli_json_str(f, dev_at(tp, j)->label);
	}
	fputs("],\n    \"rows\": [", f);
	for (i = 0; i < n; i++) {
		fputs(i ? ",\n      [" : "\n      [", f);
		for (j = 0; j < n; j++) {
			topo_cell(tp, dev_at(tp, i), dev_at(tp, j), cell, sizeof(cell));
			fputs(j ? ", " : "", f);
			cli_json_str(f, cell);
		}
		fputs("]", f);
	}
	fputs("]},\n", f);
}

static void json_pairs(const struct topo *tp, FILE *f)
{
	char why[512], cell[16];
	int i, j, first = 1;

	fputs("  \"gpudirect\": [", f);
	for (i = 0; i < tp->ngpu; i++)
		for (j = 0; j < tp->nnic; j++) {
			const char *v = topo_gdr(tp, &tp->gpu[i], &tp->nic[j], why, sizeof(why));

			topo_cell(tp, &tp->gpu[i], &tp->nic[j], cell, sizeof(cell));
			fputs(first ? "\n    {" : ",\n    {", f);
			jstr(f, "gpu", tp->gpu[i].label, ", ");
			jstr(f, "nic", tp->nic[j].label, ", ");
			jstr(f, "path", cell, ", ");
			jstr(f, "verdict", v, ", ");
			jstr(f, "reason", why, "}");
			first = 0;
		}
	fputs("],\n  \"best_nic\": [", f);
	for (i = 0; i < tp->ngpu; i++) {
		const struct topo_dev *n = topo_best_nic(tp, &tp->gpu[i]);

		if (!n)
			continue;
		topo_cell(tp, &tp->gpu[i], n, cell, sizeof(cell));
		fputs(i ? ",\n    {" : "\n    {", f);
		jstr(f, "gpu", tp->gpu[i].label, ", ");
		jstr(f, "nic", n->label, ", ");
		jstr(f, "name", n->name, ", ");
		jstr(f, "path", cell, "}");
	}
	fputs("],\n", f);
}

int topo_write_json(const struct topo *tp, FILE *f)
{
	int i;

	fputs("{\n  ", f);
	jstr(f, "source", tp->input ? tp->input : "this machine", ",\n");
	fprintf(f, "  \"packages\": %d, \"numa_nodes\": %d, \"cores\": %d, \"pus\": %d,\n",
		hwloc_get_nbobjs_by_type(tp->t, HWLOC_OBJ_PACKAGE),
		hwloc_get_nbobjs_by_type(tp->t, HWLOC_OBJ_NUMANODE),
		hwloc_get_nbobjs_by_type(tp->t, HWLOC_OBJ_CORE),
		hwloc_get_nbobjs_by_type(tp->t, HWLOC_OBJ_PU));
	fputs("  \"gpus\": [\n", f);
	for (i = 0; i < tp->ngpu; i++)
		json_dev(f, &tp->gpu[i], i == tp->ngpu - 1);
	fputs("  ],\n  \"nics\": [\n", f);
	for (i = 0; i < tp->nnic; i++)
		json_dev(f, &tp->nic[i], i == tp->nnic - 1);
	fputs("  ],\n  \"soft_devices\": [", f);
	for (i = 0; i < tp->nsoft; i++) {
		fputs(i ? ", {" : "{", f);
		jstr(f, "name", tp->soft[i].name, ", ");
		jstr(f, "netdev", tp->soft[i].netdev, "}");
	}
	fputs("],\n", f);
	json_matrix(tp, f);
	json_pairs(tp, f);
	fputs("  \"host\": ", f);
	if (tp->host.known) {
		fprintf(f, "{\"peermem\": %s, \"dmabuf\": %s, \"iommu_translates\": %s, ",
			tp->host.peermem ? "true" : "false", tp->host.dmabuf ? "true" : "false",
			tp->host.iommu_translates ? "true" : "false");
		jstr(f, "peermem_why", tp->host.peermem_why, ", ");
		jstr(f, "dmabuf_why", tp->host.dmabuf_why, ", ");
		jstr(f, "iommu_why", tp->host.iommu_why, "},\n  ");
	} else {
		fputs("null,\n  ", f);
	}
	jstr(f, "nvlink", tp->nvml_note, ",\n  ");
	jstr(f, "not_read", tp->notes, "\n}\n");
	return ferror(f) ? -1 : 0;
}

/* ---- SVG: the part of the tree that leads to GPUs and NICs ---- */

#define SVG_MAX 512
#define SVG_COL 118     /* pixels per leaf */
#define SVG_ROW 64      /* pixels per level */

struct vnode {
	hwloc_obj_t o;
	int parent, depth;
	double x;
	const struct topo_dev *dev;
};

struct vtree {
	struct vnode n[SVG_MAX];
	int count, leaves, maxdepth;
	hwloc_obj_t want[SVG_MAX];  /* objects on the way to a device */
	int nwant;
};

static int shown_type(hwloc_obj_t o)
{
	return o->type == HWLOC_OBJ_MACHINE || o->type == HWLOC_OBJ_PACKAGE ||
	       o->type == HWLOC_OBJ_GROUP || o->type == HWLOC_OBJ_DIE ||
	       o->type == HWLOC_OBJ_BRIDGE || o->type == HWLOC_OBJ_PCI_DEVICE;
}

static int wanted(const struct vtree *v, hwloc_obj_t o)
{
	for (int i = 0; i < v->nwant; i++)
		if (v->want[i] == o)
			return 1;
	return 0;
}

static void want_chain(struct vtree *v, hwloc_obj_t o)
{
	for (; o; o = o->parent)
		if (shown_type(o) && !wanted(v, o) && v->nwant < SVG_MAX)
			v->want[v->nwant++] = o;
}

static const struct topo_dev *dev_of(const struct topo *tp, hwloc_obj_t o)
{
	for (int i = 0; i < tp->ngpu + tp->nnic; i++)
		if (dev_at(tp, i)->pci == o)
			return dev_at(tp, i);
	return NULL;
}

/* Depth-first over hwloc's tree (normal and I/O children), keeping the
 * wanted objects in their order so that no two edges cross. */
static void collect(const struct topo *tp, struct vtree *v, hwloc_obj_t o, int parent, int depth)
{
	hwloc_obj_t c;
	int me = parent;

	if (wanted(v, o) && v->count < SVG_MAX) {
		me = v->count++;
		v->n[me].o = o;
		v->n[me].parent = parent;
		v->n[me].depth = depth++;
		v->n[me].dev = dev_of(tp, o);
		if (depth > v->maxdepth)
			v->maxdepth = depth;
	}
	for (c = o->first_child; c; c = c->next_sibling)
		collect(tp, v, c, me, depth);
	for (c = o->io_first_child; c; c = c->next_sibling)
		collect(tp, v, c, me, depth);
}

/* Leaves in order, parents centred over their children. */
static double place(struct vtree *v, int i)
{
	double sum = 0;
	int kids = 0;

	for (int j = i + 1; j < v->count; j++)
		if (v->n[j].parent == i) {
			sum += place(v, j);
			kids++;
		}
	v->n[i].x = kids ? sum / kids : (v->leaves++ + 0.5) * SVG_COL;
	return v->n[i].x;
}

static double node_y(const struct vnode *n)
{
	return 20 + n->depth * SVG_ROW;
}

static void node_label(const struct vnode *n, char *a, char *b, size_t len)
{
	hwloc_obj_t o = n->o;
	const char *p;

	b[0] = 0;
	if (n->dev) {
		snprintf(a, len, "%s", n->dev->label);
		snprintf(b, len, "%.16s", n->dev->is_gpu ? n->dev->busid + 5 : n->dev->name);
	} else if (o->type == HWLOC_OBJ_MACHINE) {
		p = hwloc_obj_get_info_by_name(o, "DMIProductName");
		snprintf(a, len, "Machine");
		snprintf(b, len, "%.16s", p ? p : "");
	} else if (o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
		snprintf(a, len, "HostBridge");
		snprintf(b, len, "bus %02x", o->attr->bridge.downstream.pci.secondary_bus);
	} else if (o->type == HWLOC_OBJ_BRIDGE) {
		snprintf(a, len, "bridge %04x", o->attr->pcidev.vendor_id);
		snprintf(b, len, "%02x:%02x.%x", o->attr->pcidev.bus, o->attr->pcidev.dev,
			 o->attr->pcidev.func);
	} else {
		snprintf(a, len, "%s P#%u", hwloc_obj_type_string(o->type), o->os_index);
		if (o->nodeset)
			hwloc_bitmap_list_snprintf(b, len, o->nodeset);
		if (o->nodeset) {
			char tmp[64];

			snprintf(tmp, sizeof(tmp), "NUMA %s", b);
			snprintf(b, len, "%s", tmp);
		}
	}
}

static int vindex(const struct vtree *v, hwloc_obj_t o)
{
	for (int i = 0; i < v->count; i++)
		if (v->n[i].o == o)
			return i;
	return -1;
}

static const char *path_color(enum topo_path p)
{
	switch (p) {
	case TP_PIX: case TP_PXB: return "#2a9d3a";
	case TP_PHB: case TP_NODE: return "#e08a00";
	default: return "#d62828";
	}
}

/* The path from a GPU up to the common ancestor and down to its NIC. */
static void draw_path(FILE *f, const struct topo *tp, const struct vtree *v,
		      const struct topo_dev *g, const struct topo_dev *n, int k)
{
	int ia = vindex(v, g->pci), ib = vindex(v, n->pci), up[64], down[64], nu = 0, nd = 0;
	double off = (k % 5 - 2) * 3.0;

	for (int i = ia; i >= 0 && nu < 64; i = v->n[i].parent)
		up[nu++] = i;
	for (int i = ib; i >= 0 && nd < 64; i = v->n[i].parent) {
		int j;

		for (j = 0; j < nu && up[j] != i; j++)
			;
		if (j < nu) {       /* the common ancestor */
			nu = j + 1;
			break;
		}
		down[nd++] = i;
	}
	fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"4\" stroke-opacity=\"0.6\" points=\"",
		path_color(topo_path(tp, g, n)));
	for (int i = 0; i < nu; i++)
		fprintf(f, "%.0f,%.0f ", v->n[up[i]].x + off, node_y(&v->n[up[i]]) + 14 + off);
	for (int i = nd - 1; i >= 0; i--)
		fprintf(f, "%.0f,%.0f ", v->n[down[i]].x + off, node_y(&v->n[down[i]]) + 14 + off);
	fputs("\"/>\n", f);
}

static void xml_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
}

static void draw_nodes(FILE *f, const struct vtree *v)
{
	for (int i = 0; i < v->count; i++) {
		const struct vnode *n = &v->n[i];
		const char *fill = !n->dev ? "#f4f4f4" : n->dev->is_gpu ? "#cde8c5" : "#c9dcf2";
		char a[64], b[64];

		node_label(n, a, b, sizeof(a));
		if (n->parent >= 0)
			fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#999\"/>\n",
				v->n[n->parent].x, node_y(&v->n[n->parent]) + 28, n->x, node_y(n));
		fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"28\" rx=\"4\" fill=\"%s\" stroke=\"#555\"/>\n",
			n->x - SVG_COL / 2 + 6, node_y(n), SVG_COL - 12, fill);
		fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">", n->x, node_y(n) + 12);
		xml_text(f, a);
		fprintf(f, "</text>\n<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#444\">",
			n->x, node_y(n) + 24);
		xml_text(f, b);
		fputs("</text>\n", f);
	}
}

int topo_write_svg(const struct topo *tp, FILE *f)
{
	static struct vtree v;
	int w, h, k = 0;

	memset(&v, 0, sizeof(v));
	for (int i = 0; i < tp->ngpu + tp->nnic; i++)
		if (dev_at(tp, i)->pci)
			want_chain(&v, dev_at(tp, i)->pci);
	collect(tp, &v, hwloc_get_root_obj(tp->t), -1, 0);
	if (v.count)
		place(&v, 0);
	w = v.leaves * SVG_COL > 520 ? v.leaves * SVG_COL : 520;
	h = 20 + v.maxdepth * SVG_ROW + 30;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"font-family=\"sans-serif\" font-size=\"10\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", w, h);
	draw_nodes(f, &v);
	for (int i = 0; i < tp->ngpu; i++) {
		const struct topo_dev *n = topo_best_nic(tp, &tp->gpu[i]);

		if (n && n->pci)
			draw_path(f, tp, &v, &tp->gpu[i], n, k++);
	}
	fprintf(f, "<text x=\"8\" y=\"%d\" font-size=\"11\">GPU to its best NIC:</text>\n"
		"<text x=\"130\" y=\"%d\" font-size=\"11\" fill=\"#2a9d3a\">PIX/PXB (GPUDirect)</text>\n"
		"<text x=\"260\" y=\"%d\" font-size=\"11\" fill=\"#e08a00\">PHB/NODE</text>\n"
		"<text x=\"340\" y=\"%d\" font-size=\"11\" fill=\"#d62828\">SYS</text>\n</svg>\n",
		h - 14, h - 14, h - 14, h - 14);
	return ferror(f) ? -1 : 0;
}
