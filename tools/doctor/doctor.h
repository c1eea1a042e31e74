/* uroce doctor: shared state of the checks (doctor_checks.c) and of the
 * framework that reads files under the root and prints results (doctor.c). */
#ifndef UROCE_DOCTOR_H
#define UROCE_DOCTOR_H

#include <stddef.h>

#define DOC_MAX_PCI 512
#define DOC_MAX_IF 64
#define DOC_MAX_RDMA 32

enum doc_status { DOC_PASS, DOC_WARN, DOC_FAIL, DOC_SKIP };

struct doc_check {
	const char *id;
	enum doc_status st;
	char summary[256];
	char evidence[4096];    /* lines */
	char fix[512];
};

/* A PCI function found under <root>/sys/devices/pci*, with its place in
 * the tree (parent: nearest PCI ancestor, -1 under the host bridge). */
struct doc_pci {
	char bdf[16];
	char path[512];         /* relative to the root, "/sys/devices/..." */
	int parent;
	unsigned cls, vendor;
	int numa;               /* -1: none reported */
	int is_gpu, is_nic;
	char name[64];          /* "GPU 0000:03:00.0", "NIC mlx5_0" */
	char rdma[64], netdev[32];
};

struct doc_rdma {
	char name[32];
	int pci;                /* index into pci[] or -1 */
};

struct doctor {
	const char *root;       /* "" for this machine */
	int live;
	const char *only_if;    /* --netdev list or NULL */
	int peer_mtu;           /* --peer-mtu, 0 if not given */
	struct doc_pci pci[DOC_MAX_PCI];
	int npci;
	char ifs[DOC_MAX_IF][32];       /* interfaces to check */
	int nif;
	struct doc_rdma rdma[DOC_MAX_RDMA];
	int nrdma;
	char unread[2048];      /* what could not be read, and why */
};

/* Files under the root. Paths are absolute on the examined machine
 * ("/sys/..."); failures other than "does not exist" are remembered in
 * doc->unread. rd_line strips the newline; rd_long parses a number. */
int doc_rd_line(struct doctor *doc, const char *path, char *buf, size_t len);
int doc_rd_long(struct doctor *doc, const char *path, long *v);
/* Whole file (binary); returns bytes read or -1. */
long doc_rd_file(struct doctor *doc, const char *path, unsigned char *buf, size_t len);
int doc_exists(const struct doctor *doc, const char *path);
/* Names in a directory, NULL-terminated array freed with doc_free_names. */
char **doc_list(struct doctor *doc, const char *dir);
void doc_free_names(char **names);

void doc_add(struct doc_check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void doc_set(struct doc_check *c, enum doc_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void doc_fix(struct doc_check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Raise the status (PASS < WARN < FAIL; SKIP is overridden by any). */
void doc_worse(struct doc_check *c, enum doc_status st);

/* Discovery of PCI devices, RDMA devices and the interfaces to check. */
void doc_scan(struct doctor *doc);
int doc_common_ancestor(const struct doctor *doc, int a, int b);

/* The checks, in the order they are printed. */
typedef void (*doc_check_fn)(struct doctor *doc, struct doc_check *c);
struct doc_check_def {
	const char *id;
	const char *what;
	doc_check_fn fn;
};
extern const struct doc_check_def doc_checks[];
extern const int doc_ncheck;

/* RoCE path MTU (256..4096) that an interface MTU carries with uroce's
 * headers (IPv4 20 + UDP 8 + BTH 12 + RETH 16 + ICRC 4). */
int doc_roce_mtu(int if_mtu);

/* Output shared with --counters (doctor.c): the count line and every
 * check as text; the "checks" array, and one string array, as JSON. */
void doc_print_checks(const struct doc_check *c, int n);
void doc_json_checks(const struct doc_check *c, int n);
void doc_json_lines(const char *key, const char *s, const char *sep);

/* uroce doctor --counters (doctor_counters.c): the live counters of
 * running processes, read twice interval seconds apart. */
struct doc_counters_opts {
	int on;
	double interval;
	int interval_set;
	const char *filter;     /* PID or device, or NULL */
};
int doc_counters(const struct doc_counters_opts *o, int json);

#endif
