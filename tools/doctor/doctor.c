/* uroce doctor: checks of the network, driver and topology settings that
 * cost RoCE bandwidth, each with pass / warn / fail, the evidence and the
 * fix. Reads only /sys and /proc (of this machine, or of a recorded tree
 * with --root), so it runs without root; what it cannot read it says. */
#include "cli.h"
#include "doctor.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


void usage_doctor(FILE *f)
{
	fprintf(f,
		"usage: uroce doctor [--root DIR] [--netdev IF[,IF...]] [--peer-mtu N] [--json]\n"
		"       uroce doctor --counters [--interval S] [--json] [PID|DEVICE]\n"
		"\n"
		"Check what steals RoCE bandwidth: interface MTU against the RoCE path MTU\n"
		"and the peer's, RoCE v2 GIDs, PFC/DSCP trust and ECN on RDMA NICs,\n"
		"GPUDirect peer memory, IOMMU mode, ACS between GPU and NIC, PCIe links\n"
		"trained below their maximum, GPU and NIC on different NUMA nodes, CPU\n"
		"frequency governor, socket buffer limits and interface drops. Each check\n"
		"prints PASS, WARN, FAIL or SKIP, the evidence, and the fix.\n"
		"\n"
		"With --counters, explain the live counters of the running uroce processes\n"
		"instead (/dev/shm/uroce-<pid>-<n>.stat, as 'uroce stat'), read twice S\n"
		"seconds apart: retransmissions and drops (and fault injection), RNR NAKs,\n"
		"local ACK timeouts, ICRC errors, receive drops by reason, duplicates,\n"
		"ECN/CNP. PID or DEVICE (uroce_lo) limits it to those processes.\n"
		"\n"
		"options:\n"
		"  --root DIR        read a recorded /sys and /proc under DIR instead\n"
		"                    of this machine's\n"
		"  --netdev IF,...   check these interfaces (default: every interface that\n"
		"                    is up, except lo)\n"
		"  --peer-mtu N      the interface MTU of the peer host, to compare\n"
		"  --counters        check the live counters of running processes\n"
		"  --interval S      seconds between the two reads (default 1)\n"
		"  --json            print the results as one JSON object\n"
		"  -h, --help        print this help\n"
		"\n"
		"exit status: 0 when no check fails (warnings allowed), 1 when a check\n"
		"fails, 2 on bad usage. --counters with no running process: a message and\n"
		"exit 0 (1 when a PID or DEVICE was named).\n");
}

/* ---- files under the root ---- */

static void unread(struct doctor *doc, const char *path, int err)
{
	size_t off = strlen(doc->unread);

	if (err == ENOENT || err == ENOTDIR || strstr(doc->unread, path))
		return;
	snprintf(doc->unread + off, sizeof(doc->unread) - off, "%s: %s%s\n", path, strerror(err),
		 err == EACCES || err == EPERM ? " (needs root)" : "");
}

static void full(const struct doctor *doc, const char *path, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", doc->root, path);
}

int doc_exists(const struct doctor *doc, const char *path)
{
	char p[PATH_MAX];

	full(doc, path, p, sizeof(p));
	return access(p, F_OK) == 0;
}

long doc_rd_file(struct doctor *doc, const char *path, unsigned char *buf, size_t len)
{
	char p[PATH_MAX];
	FILE *f;
	size_t n;

	full(doc, path, p, sizeof(p));
	f = fopen(p, "rb");
	if (!f) {
		unread(doc, path, errno);
		return -1;
	}
	n = fread(buf, 1, len, f);
	if (ferror(f)) {
		unread(doc, path, errno);
		fclose(f);
		return -1;
	}
	fclose(f);
	return (long)n;
}

int doc_rd_line(struct doctor *doc, const char *path, char *buf, size_t len)
{
	long n = doc_rd_file(doc, path, (unsigned char *)buf, len - 1);
	char *nl;

	if (n < 0)
		return -1;
	buf[n] = 0;
	nl = strchr(buf, '\n');
	if (nl)
		*nl = 0;
	return 0;
}

int doc_rd_long(struct doctor *doc, const char *path, long *v)
{
	char buf[64], *end;

	if (doc_rd_line(doc, path, buf, sizeof(buf)) < 0)
		return -1;
	errno = 0;
	*v = strtol(buf, &end, 0);
	return errno || end == buf ? -1 : 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

char **doc_list(struct doctor *doc, const char *dir)
{
	char p[PATH_MAX];
	char **names;
	size_t n = 0, cap = 16;
	struct dirent *e;
	DIR *d;

	full(doc, dir, p, sizeof(p));
	d = opendir(p);
	if (!d) {
		unread(doc, dir, errno);
		return NULL;
	}
	names = calloc(cap, sizeof(*names));
	while (names && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n + 2 > cap) {
			char **nn = realloc(names, (cap *= 2) * sizeof(*names));

			if (!nn)
				break;
			names = nn;
		}
		names[n++] = strdup(e->d_name);
		names[n] = NULL;
	}
	closedir(d);
	if (names)
		qsort(names, n, sizeof(*names), cmp_names);
	return names;
}

void doc_free_names(char **names)
{
	for (char **p = names; p && *p; p++)
		free(*p);
	free(names);
}

/* ---- results ---- */

static void vappend(char *buf, size_t len, const char *fmt, va_list ap)
{
	size_t off = strlen(buf);

	if (off + 2 >= len)
		return;
	vsnprintf(buf + off, len - off - 1, fmt, ap);
	strcat(buf, "\n");
}

void doc_add(struct doc_check *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vappend(c->evidence, sizeof(c->evidence), fmt, ap);
	va_end(ap);
}

void doc_worse(struct doc_check *c, enum doc_status st)
{
	if (c->st == DOC_SKIP || (st != DOC_SKIP && st > c->st))
		c->st = st;
}

void doc_set(struct doc_check *c, enum doc_status st, const char *fmt, ...)
{
	va_list ap;

	c->st = st;
	va_start(ap, fmt);
	vsnprintf(c->summary, sizeof(c->summary), fmt, ap);
	va_end(ap);
}

void doc_fix(struct doc_check *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->fix, sizeof(c->fix), fmt, ap);
	va_end(ap);
}

int doc_roce_mtu(int if_mtu)
{
	const int overhead = 20 + 8 + 12 + 16 + 4;
	int best = 256;

	for (int m = 256; m <= 4096; m *= 2)
		if (m + overhead <= if_mtu)
			best = m;
	return best;
}

/* ---- discovery ---- */

static int is_bdf(const char *s)
{
	unsigned d, b, s2, f;
	char end;

	return strlen(s) == 12 && sscanf(s, "%4x:%2x:%2x.%1x%c", &d, &b, &s2, &f, &end) == 4;
}

static void add_pci(struct doctor *doc, const char *path, const char *bdf, int parent)
{
	struct doc_pci *p;
	char f[PATH_MAX];
	long v;

	if (doc->npci >= DOC_MAX_PCI)
		return;
	p = &doc->pci[doc->npci++];
	snprintf(p->bdf, sizeof(p->bdf), "%s", bdf);
	snprintf(p->path, sizeof(p->path), "%s", path);
	p->parent = parent;
	snprintf(f, sizeof(f), "%s/class", path);
	p->cls = doc_rd_long(doc, f, &v) == 0 ? (unsigned)v : 0;
	snprintf(f, sizeof(f), "%s/vendor", path);
	p->vendor = doc_rd_long(doc, f, &v) == 0 ? (unsigned)v : 0;
	snprintf(f, sizeof(f), "%s/numa_node", path);
	p->numa = doc_rd_long(doc, f, &v) == 0 ? (int)v : -1;
	p->is_gpu = p->vendor == 0x10de && p->cls >> 16 == 0x03;
	p->is_nic = p->cls >> 16 == 0x02 || p->cls >> 8 == 0x0c06;
	snprintf(p->name, sizeof(p->name), "%s %s", p->is_gpu ? "GPU" : p->is_nic ? "NIC" : "bridge",
		 bdf);
}

/* Depth-first over the BDF-named directories: sysfs nests each PCI
 * function under the bridge above it. */
static void walk_pci(struct doctor *doc, const char *dir, int parent)
{
	char **names = doc_list(doc, dir);

	for (char **n = names; n && *n; n++) {
		char sub[PATH_MAX];

		if (!is_bdf(*n))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, *n);
		add_pci(doc, sub, *n, parent);
		walk_pci(doc, sub, doc->npci - 1);
	}
	doc_free_names(names);
}

static int pci_by_path(const struct doctor *doc, const char *path)
{
	for (int i = 0; i < doc->npci; i++)
		if (!strcmp(doc->pci[i].path, path))
			return i;
	return -1;
}

/* The PCI device behind <dir>/device (a symlink into /sys/devices). */
static int device_of(struct doctor *doc, const char *dir)
{
	char p[PATH_MAX], real[PATH_MAX], rootreal[PATH_MAX];
	size_t rl = 0;

	snprintf(p, sizeof(p), "%s%s/device", doc->root, dir);
	if (!realpath(p, real))
		return -1;
	if (doc->root[0]) {
		if (!realpath(doc->root, rootreal))
			return -1;
		rl = strlen(rootreal);
		if (strncmp(real, rootreal, rl))
			return -1;
	}
	return pci_by_path(doc, real + rl);
}

static void scan_rdma(struct doctor *doc)
{
	char **names = doc_list(doc, "/sys/class/infiniband");

	for (char **n = names; n && *n && doc->nrdma < DOC_MAX_RDMA; n++) {
		struct doc_rdma *r = &doc->rdma[doc->nrdma++];
		char dir[PATH_MAX];

		snprintf(r->name, sizeof(r->name), "%s", *n);
		snprintf(dir, sizeof(dir), "/sys/class/infiniband/%s", *n);
		r->pci = device_of(doc, dir);
		if (r->pci >= 0) {
			struct doc_pci *p = &doc->pci[r->pci];
			char bdf[16];

			memcpy(bdf, p->bdf, sizeof(bdf));
			snprintf(p->rdma, sizeof(p->rdma), "%s", *n);
			snprintf(p->name, sizeof(p->name), "NIC %s (%s)", *n, bdf);
		}
	}
	doc_free_names(names);
}

static int wanted_if(struct doctor *doc, const char *ifn)
{
	char buf[32], path[PATH_MAX];

	if (doc->only_if) {
		size_t n = strlen(ifn);

		for (const char *p = doc->only_if; (p = strstr(p, ifn)); p += n)
			if ((p == doc->only_if || p[-1] == ',') && (p[n] == ',' || !p[n]))
				return 1;
		return 0;
	}
	if (!strcmp(ifn, "lo"))
		return 0;
	snprintf(path, sizeof(path), "/sys/class/net/%s/operstate", ifn);
	return doc_rd_line(doc, path, buf, sizeof(buf)) == 0 &&
	       (!strcmp(buf, "up") || !strcmp(buf, "unknown"));
}

static void scan_ifs(struct doctor *doc)
{
	char **names = doc_list(doc, "/sys/class/net");

	for (char **n = names; n && *n; n++) {
		char dir[PATH_MAX];
		int pci;

		snprintf(dir, sizeof(dir), "/sys/class/net/%s", *n);
		pci = device_of(doc, dir);
		if (pci >= 0 && !doc->pci[pci].netdev[0])
			snprintf(doc->pci[pci].netdev, sizeof(doc->pci[pci].netdev), "%s", *n);
		if (doc->nif < DOC_MAX_IF && wanted_if(doc, *n))
			snprintf(doc->ifs[doc->nif++], sizeof(doc->ifs[0]), "%s", *n);
	}
	doc_free_names(names);
}

void doc_scan(struct doctor *doc)
{
	char **tops = doc_list(doc, "/sys/devices");

	for (char **t = tops; t && *t; t++) {
		char dir[PATH_MAX];

		if (strncmp(*t, "pci", 3))
			continue;
		snprintf(dir, sizeof(dir), "/sys/devices/%s", *t);
		walk_pci(doc, dir, -1);
	}
	doc_free_names(tops);
	scan_rdma(doc);
	scan_ifs(doc);
}

int doc_common_ancestor(const struct doctor *doc, int a, int b)
{
	for (int x = a; x >= 0; x = doc->pci[x].parent)
		for (int y = b; y >= 0; y = doc->pci[y].parent)
			if (x == y)
				return x;
	return -1;
}

/* ---- output ---- */

static const char *st_name(enum doc_status st)
{
	static const char *const n[] = { "PASS", "WARN", "FAIL", "SKIP" };

	return n[st];
}

void doc_print_checks(const struct doc_check *c, int n)
{
	int cnt[4] = { 0 };

	for (int i = 0; i < n; i++)
		cnt[c[i].st]++;
	printf("%d checks: %d pass, %d warn, %d fail, %d skipped\n\n", n, cnt[DOC_PASS],
	       cnt[DOC_WARN], cnt[DOC_FAIL], cnt[DOC_SKIP]);
	for (int i = 0; i < n; i++) {
		const char *p = c[i].evidence;

		printf("%s %s: %s\n", st_name(c[i].st), c[i].id, c[i].summary);
		while (*p) {
			size_t l = strcspn(p, "\n");

			printf("     %.*s\n", (int)l, p);
			p += l + (p[l] == '\n');
		}
		if (c[i].fix[0] && (c[i].st == DOC_WARN || c[i].st == DOC_FAIL))
			printf("     fix: %s\n", c[i].fix);
	}
}

static void print_text(const struct doctor *doc, const struct doc_check *c, int n)
{
	printf("uroce doctor: %s%s\n", doc->root[0] ? "recorded tree " : "this machine",
	       doc->root);
	doc_print_checks(c, n);
	if (doc->unread[0])
		printf("\nCould not read:\n%s", doc->unread);
}

void doc_json_lines(const char *key, const char *s, const char *sep)
{
	int first = 1;

	printf("\"%s\": [", key);
	while (*s) {
		size_t l = strcspn(s, "\n");
		char line[1024];

		snprintf(line, sizeof(line), "%.*s", (int)l, s);
		fputs(first ? "" : ", ", stdout);
		cli_json_str(stdout, line);
		first = 0;
		s += l + (s[l] == '\n');
	}
	printf("]%s", sep);
}

void doc_json_checks(const struct doc_check *c, int n)
{
	printf("\"checks\": [");
	for (int i = 0; i < n; i++) {
		printf("%s\n  {\"id\": \"%s\", \"status\": \"%s\", \"summary\": ", i ? "," : "",
		       c[i].id, st_name(c[i].st));
		cli_json_str(stdout, c[i].summary);
		printf(", ");
		doc_json_lines("evidence", c[i].evidence, ", ");
		printf("\"fix\": ");
		cli_json_str(stdout, c[i].fix);
		printf("}");
	}
	printf("]");
}

static void print_json(const struct doctor *doc, const struct doc_check *c, int n)
{
	printf("{\"root\": ");
	cli_json_str(stdout, doc->root[0] ? doc->root : "/");
	printf(",\n ");
	doc_json_checks(c, n);
	printf(",\n ");
	doc_json_lines("not_read", doc->unread, "}\n");
}

static int parse_args(struct doctor *doc, int argc, char **argv, int *json, struct doc_counters_opts *co)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--json")) {
			*json = 1;
		} else if (!strcmp(a, "--counters")) {
			co->on = 1;
		} else if (!strcmp(a, "--interval") && i + 1 < argc) {
			char *end;

			co->interval = strtod(argv[++i], &end);
			if (end == argv[i] || *end || !(co->interval > 0 && co->interval <= 3600)) {
				fprintf(stderr, "uroce doctor: bad --interval '%s' (seconds, > 0)\n", argv[i]);
				return CLI_EXIT_USAGE;
			}
			co->interval_set = 1;
		} else if (a[0] != '-' && !co->filter) {
			co->filter = a;
		} else if (!strcmp(a, "--root") && i + 1 < argc) {
			doc->root = argv[++i];
		} else if (!strcmp(a, "--netdev") && i + 1 < argc) {
			doc->only_if = argv[++i];
		} else if (!strcmp(a, "--peer-mtu") && i + 1 < argc) {
			doc->peer_mtu = atoi(argv[++i]);
			if (doc->peer_mtu < 68 || doc->peer_mtu > 65536) {
				fprintf(stderr, "uroce doctor: bad --peer-mtu '%s'\n", argv[i]);
				return CLI_EXIT_USAGE;
			}
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage_doctor(stdout);
			return -1;
		} else {
			fprintf(stderr, "uroce doctor: bad argument '%s'\n\n", a);
			usage_doctor(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (!co->on && (co->filter || co->interval_set)) {
		fprintf(stderr, "uroce doctor: %s is for --counters\n\n",
			co->filter ? co->filter : "--interval");
		usage_doctor(stderr);
		return CLI_EXIT_USAGE;
	}
	if (co->on && (doc->root[0] || doc->only_if || doc->peer_mtu)) {
		fprintf(stderr, "uroce doctor: --counters reads running processes: no --root, "
				"--netdev or --peer-mtu\n\n");
		usage_doctor(stderr);
		return CLI_EXIT_USAGE;
	}
	return 0;
}

int cmd_doctor(int argc, char **argv)
{
	static struct doctor doc;
	static struct doc_check res[32];
	struct doc_counters_opts co = { .interval = 1.0 };
	int json = 0, rc, fails = 0;

	doc.root = "";
	rc = parse_args(&doc, argc, argv, &json, &co);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (co.on)
		return doc_counters(&co, json);
	if (!strcmp(doc.root, "/"))
		doc.root = "";
	doc.live = !doc.root[0];
	if (!doc.live && access(doc.root, R_OK | X_OK) != 0) {
		fprintf(stderr, "uroce doctor: cannot read %s: %s\n", doc.root, strerror(errno));
		return 1;
	}
	doc_scan(&doc);
	for (int i = 0; i < doc_ncheck; i++) {
		res[i].id = doc_checks[i].id;
		res[i].st = DOC_SKIP;
		doc_checks[i].fn(&doc, &res[i]);
		fails += res[i].st == DOC_FAIL;
	}
	if (json)
		print_json(&doc, res, doc_ncheck);
	else
		print_text(&doc, res, doc_ncheck);
	return fails ? 1 : 0;
}
