/* uroce trace: capture (-w FILE) and explain (--explain) the data path of a
 * command run on uroce, or of a built-in two-process transfer.
 *
 * Every uroce process of the command writes its own capture
 * (UROCE_PCAP=<tmp>/cap.%p) and trace (UROCE_TRACE=<tmp>/trace.%p); at the
 * end the captures are merged by time into FILE (mergecap when installed,
 * else libpcap loaded with dlopen) and the traces explained. */
#include "cli.h"
#include "trace_cli.h"
#include "trace_html.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcap/pcap.h>

#define TRACE_EXIT_FAIL 125   /* like uroce run */

void usage_trace(FILE *f)
{
	fprintf(f,
		"usage: uroce trace -w FILE [--explain] [OPTIONS] [-- CMD [ARGS...]]\n"
		"       uroce trace --explain [--json] [OPTIONS] [-- CMD [ARGS...]]\n"
		"       uroce trace --html FILE [--explain] [OPTIONS] [-- CMD [ARGS...]]\n"
		"       uroce trace --html FILE | --explain --from DIR\n"
		"\n"
		"Run CMD on uroce (as 'uroce run' does) and watch its data path. Every\n"
		"uroce process CMD starts (a server and a client, ranks) records its own\n"
		"packets and data-path steps; at the end they are merged by time.\n"
		"Without CMD, a built-in transfer runs: two processes on the first\n"
		"device (UROCE_NETDEV defaults to lo) and one signaled 8 KiB RDMA WRITE.\n"
		"\n"
		"  -w FILE          write every RoCEv2 packet sent and received, as\n"
		"                   Ethernet/IPv4/UDP/BTH frames with the ICRC, to the\n"
		"                   pcap FILE (open it in Wireshark or tshark)\n"
		"  --explain        explain the first WR of the kind --op names, step\n"
		"                   by step: posted, taken by the engine, memory read,\n"
		"                   packets, placed remotely, ACK, completion, poll;\n"
		"                   with the system calls made by the app threads\n"
		"  --json           --explain as one JSON document\n"
		"  --html FILE      the data path as one self-contained HTML page: lanes\n"
		"                   for the application threads, engines, wire and memory\n"
		"                   of both sides, packets as arrows with PSNs (ACKs, NAKs\n"
		"                   and retransmissions in red), GPU staging copies, the\n"
		"                   seed's steps 1-6; hover a mark for its trace line\n"
		"  --from DIR       run nothing: read the files of an earlier --keep DIR\n"
		"  --op OP          write (default), write_imm, send, send_imm, read,\n"
		"                   cswap or fadd: the WR to explain, and the built-in\n"
		"                   transfer's operation\n"
		"  --netdev IF      set UROCE_NETDEV (as 'uroce run --netdev')\n"
		"  --keep DIR       keep the per-process files (cap.PID, trace.PID and\n"
		"                   the merged trace.all) in DIR\n"
		"built-in transfer only:\n"
		"  --size BYTES     bytes per WR (default 8192; atomics: 8)\n"
		"  --count N        number of WRs, one after the other (default 1)\n"
		"  --mtu BYTES      path MTU: 256, 512, 1024, 2048 or 4096 (default:\n"
		"                   the port's active MTU)\n"
		"  --rnr            the responder posts its RECVs late (send, send_imm,\n"
		"                   write_imm): the first packet gets an RNR NAK\n"
		"  --hold MS        both processes stay MS milliseconds after the\n"
		"                   transfer (to read their counters with 'uroce stat')\n"
		"\n"
		"exit status: that of CMD (of the built-in transfer: 0 = done and data\n"
		"verified); 125 if uroce trace itself failed.\n"
		"\n"
		"examples:\n"
		"  uroce trace --explain\n"
		"  uroce trace -w /tmp/write.pcap --size 65536 --mtu 1024\n"
		"  uroce trace -w /tmp/bw.pcap -- sh -c 'ib_write_bw -x 0 -n 5 & sleep 1;\n"
		"                                       ib_write_bw -x 0 -n 5 127.0.0.1'\n");
}

/* ---- files ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Paths DIR/PREFIX* (sorted), NULL-terminated; *n set. */
static char **list_files(const char *dir, const char *prefix, int *n)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **v = NULL;
	int cap = 0;

	*n = 0;
	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		if (!strcmp(de->d_name + strlen(prefix), "all"))
			continue;
		if (*n + 2 > cap) {
			char **nv;

			cap = cap ? 2 * cap : 8;
			nv = realloc(v, sizeof(*v) * (size_t)cap);
			if (!nv)
				break;
			v = nv;
		}
		if (asprintf(&v[*n], "%s/%s", dir, de->d_name) < 0)
			break;
		(*n)++;
	}
	closedir(d);
	if (v) {
		qsort(v, (size_t)*n, sizeof(*v), cmp_str);
		v[*n] = NULL;
	}
	return v;
}

static void free_list(char **v)
{
	for (int i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static int copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	if (in < 0)
		return -1;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		close(in);
		return -1;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			n = -1;
			break;
		}
	close(in);
	if (close(out) || n < 0)
		return -1;
	return 0;
}

static void rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[PATH_MAX];

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

/* Program NAME in PATH: 1 and its path in out. */
static int in_path(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char *copy, *tok, *save = NULL;
	int found = 0;

	if (!path || !(copy = strdup(path)))
		return 0;
	for (tok = strtok_r(copy, ":", &save); tok && !found; tok = strtok_r(NULL, ":", &save)) {
		snprintf(out, len, "%s/%s", *tok ? tok : ".", name);
		found = access(out, X_OK) == 0;
	}
	free(copy);
	return found;
}

/* ---- pcap merge ---- */

struct lpcap {
	pcap_t *(*open_offline)(const char *, char *);
	pcap_t *(*open_dead)(int, int);
	int (*next_ex)(pcap_t *, struct pcap_pkthdr **, const u_char **);
	int (*datalink)(pcap_t *);
	void (*close)(pcap_t *);
	pcap_dumper_t *(*dump_open)(pcap_t *, const char *);
	void (*dump)(u_char *, const struct pcap_pkthdr *, const u_char *);
	void (*dump_close)(pcap_dumper_t *);
};

static int lpcap_load(struct lpcap *l)
{
	static const char *const sonames[] = { "libpcap.so.0.8", "libpcap.so.1", "libpcap.so" };
	void *h = NULL;

	for (size_t i = 0; i < sizeof(sonames) / sizeof(sonames[0]) && !h; i++)
		h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return -1;
	*(void **)&l->open_offline = dlsym(h, "pcap_open_offline");
	*(void **)&l->open_dead = dlsym(h, "pcap_open_dead");
	*(void **)&l->next_ex = dlsym(h, "pcap_next_ex");
	*(void **)&l->datalink = dlsym(h, "pcap_datalink");
	*(void **)&l->close = dlsym(h, "pcap_close");
	*(void **)&l->dump_open = dlsym(h, "pcap_dump_open");
	*(void **)&l->dump = dlsym(h, "pcap_dump");
	*(void **)&l->dump_close = dlsym(h, "pcap_dump_close");
	return l->open_offline && l->open_dead && l->next_ex && l->datalink && l->close &&
			       l->dump_open && l->dump && l->dump_close
		       ? 0
		       : -1;
}

/* Packets in a pcap file, -1 if it cannot be read. */
static long count_packets(struct lpcap *l, const char *file)
{
	char err[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *h;
	const u_char *d;
	pcap_t *p = l->open_offline(file, err);
	long n = 0;

	if (!p)
		return -1;
	while (l->next_ex(p, &h, &d) == 1)
		n++;
	l->close(p);
	return n;
}

static int ts_before(const struct pcap_pkthdr *a, const struct pcap_pkthdr *b)
{
	return a->ts.tv_sec < b->ts.tv_sec ||
	       (a->ts.tv_sec == b->ts.tv_sec && a->ts.tv_usec < b->ts.tv_usec);
}

/* Merges files by timestamp with libpcap (k-way, stable by file order). */
static int merge_libpcap(struct lpcap *l, char **files, int n, const char *out)
{
	char err[PCAP_ERRBUF_SIZE];
	pcap_t **in = calloc((size_t)n, sizeof(*in));
	struct pcap_pkthdr **hd = calloc((size_t)n, sizeof(*hd));
	const u_char **dt = calloc((size_t)n, sizeof(*dt));
	pcap_t *dead = NULL;
	pcap_dumper_t *dump = NULL;
	int rc = -1;

	if (!in || !hd || !dt)
		goto out;
	for (int i = 0; i < n; i++) {
		in[i] = l->open_offline(files[i], err);
		if (!in[i]) {
			fprintf(stderr, "uroce trace: %s: %s\n", files[i], err);
			goto out;
		}
		if (l->next_ex(in[i], &hd[i], &dt[i]) != 1)
			hd[i] = NULL;
	}
	dead = l->open_dead(DLT_EN10MB, 65535);
	dump = dead ? l->dump_open(dead, out) : NULL;
	if (!dump) {
		fprintf(stderr, "uroce trace: cannot write %s\n", out);
		goto out;
	}
	for (;;) {
		int best = -1;

		for (int i = 0; i < n; i++)
			if (hd[i] && (best < 0 || ts_before(hd[i], hd[best])))
				best = i;
		if (best < 0)
			break;
		l->dump((u_char *)dump, hd[best], dt[best]);
		if (l->next_ex(in[best], &hd[best], &dt[best]) != 1)
			hd[best] = NULL;
	}
	rc = 0;
out:
	if (dump)
		l->dump_close(dump);
	if (dead)
		l->close(dead);
	for (int i = 0; in && i < n; i++)
		if (in[i])
			l->close(in[i]);
	free(in);
	free(hd);
	free(dt);
	return rc;
}

static int run_wait(char **argv)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (!pid) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0)
			dup2(null, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Merges DIR/cap.* into out; 0 ok (or nothing to merge), -1 failed. */
static int merge_captures(const char *dir, const char *out, int keep)
{
	struct lpcap l = { 0 };
	int have_l = lpcap_load(&l) == 0, n, rc = 0;
	char **files = list_files(dir, "cap.", &n);
	char mergecap[PATH_MAX];
	const char *how = NULL;
	long pkts = -1;

	if (!n) {
		fprintf(stderr,
			"uroce trace: no capture: no process of the command opened a uroce device "
			"(was it run through uroce? is libpcap installed?); %s not written\n",
			out);
		free_list(files);
		return 0;
	}
	if (n == 1) {
		if (copy_file(files[0], out) == 0)
			how = "one process, copied";
	} else if (in_path("mergecap", mergecap, sizeof(mergecap))) {
		char **argv = calloc((size_t)n + 6, sizeof(*argv));
		int k = 0;

		if (argv) {
			argv[k++] = mergecap;
			argv[k++] = "-F";
			argv[k++] = "pcap";
			argv[k++] = "-w";
			argv[k++] = (char *)out;
			for (int i = 0; i < n; i++)
				argv[k++] = files[i];
			if (run_wait(argv) == 0)
				how = "merged by time with mergecap";
			free(argv);
		}
	}
	if (!how && n > 1 && have_l && merge_libpcap(&l, files, n, out) == 0)
		how = "merged by time with libpcap";
	if (!how) {
		fprintf(stderr, "uroce trace: could not write %s (%s); the per-process captures %s in %s\n",
			out, n > 1 ? "no mergecap, no libpcap" : strerror(errno),
			keep ? "are" : "were", dir);
		rc = -1;
	} else {
		if (have_l)
			pkts = count_packets(&l, out);
		if (pkts >= 0)
			fprintf(stderr, "uroce trace: %ld packets from %d process%s (%s) in %s\n", pkts, n,
				n == 1 ? "" : "es", how, out);
		else
			fprintf(stderr, "uroce trace: captures of %d process%s (%s) in %s\n", n,
				n == 1 ? "" : "es", how, out);
	}
	free_list(files);
	return rc;
}

/* ---- running ---- */

static volatile pid_t child_pid;

static void forward(int sig)
{
	if (child_pid > 0)
		kill(child_pid, sig);
}

/* Runs CMD through cmd_run (which execs it); returns its exit status in
 * the shell's convention (128 + signal). */
static int run_cmd(int argc, char **argv, const char *netdev)
{
	struct sigaction sa, old_int, old_term, old_hup;
	int st;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("uroce trace: fork");
		return TRACE_EXIT_FAIL;
	}
	if (!pid) {
		char **v = calloc((size_t)argc + 5, sizeof(*v));
		int k = 0;

		if (!v)
			_exit(TRACE_EXIT_FAIL);
		v[k++] = "run";
		if (netdev) {
			v[k++] = "--netdev";
			v[k++] = (char *)netdev;
		}
		v[k++] = "--";
		for (int i = 0; i < argc; i++)
			v[k++] = argv[i];
		_exit(cmd_run(k, v));
	}
	child_pid = pid;
	/* ^C reaches CMD from the terminal; uroce trace stays to merge. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGINT, &sa, &old_int);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			st = TRACE_EXIT_FAIL << 8;
			break;
		}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	child_pid = 0;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	default: break;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

/* What ran, for the page's heading. */
static void html_command(char *buf, size_t len, int argc, char **argv, const struct xfer_opts *xo)
{
	size_t n;

	if (!argc) {
		snprintf(buf, len, "uroce trace: the built-in transfer, %u %s of %llu bytes%s%s", xo->count,
			 xfer_op_name[xo->op], (unsigned long long)xo->size, xo->mtu ? ", MTU " : "",
			 xo->mtu ? "" : "");
		if (xo->mtu)
			snprintf(buf + strlen(buf), len - strlen(buf), "%u", xo->mtu);
		return;
	}
	n = (size_t)snprintf(buf, len, "uroce trace --");
	for (int i = 0; i < argc && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, " %s", argv[i]);
}

/* --from DIR: the files of an earlier run. */
static int trace_files(const char *dir, const char *wfile, int explain, int json, int op, const char *html)
{
	int rc = 0;

	if (wfile && merge_captures(dir, wfile, 1))
		rc = TRACE_EXIT_FAIL;
	if (explain) {
		struct explain_opts eo = { .op = op, .json = json, .builtin = NULL };

		if (explain_dir(dir, &eo) == 2)
			rc = TRACE_EXIT_FAIL;
	}
	if (html) {
		char what[PATH_MAX + 32];
		struct html_opts ho = { .command = what };

		snprintf(what, sizeof(what), "uroce trace --from %s", dir);
		if (trace_html(dir, html, &ho))
			rc = TRACE_EXIT_FAIL;
	}
	return rc;
}

int cmd_trace(int argc, char **argv)
{
	const char *wfile = NULL, *netdev = NULL, *keep = NULL, *html = NULL, *from = NULL;
	struct xfer_opts xo = { .op = XOP_WRITE, .size = 8192, .count = 1 };
	int explain = 0, json = 0, builtin_opt = 0, i, rc, erc = 0;
	char dir[PATH_MAX], env[PATH_MAX + 16];
	struct xfer_result xr;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t u;

		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage_trace(stdout);
			return 0;
		}
		if (!strcmp(a, "--explain")) {
			explain = 1;
		} else if (!strcmp(a, "--json")) {
			json = 1;
		} else if (!strcmp(a, "--rnr")) {
			xo.rnr = 1;
			builtin_opt = 1;
		} else if (a[0] == '-' && a[1] && !v) {
			fprintf(stderr, "uroce trace: unknown option or missing argument: %s\n\n", a);
			usage_trace(stderr);
			return TRACE_EXIT_FAIL;
		} else if (!strcmp(a, "-w")) {
			wfile = argv[++i];
		} else if (!strcmp(a, "--netdev")) {
			netdev = argv[++i];
		} else if (!strcmp(a, "--keep")) {
			keep = argv[++i];
		} else if (!strcmp(a, "--html")) {
			html = argv[++i];
		} else if (!strcmp(a, "--from")) {
			from = argv[++i];
		} else if (!strcmp(a, "--op")) {
			xo.op = xfer_op_parse(argv[++i]);
			if (xo.op < 0) {
				fprintf(stderr, "uroce trace: --op: unknown operation '%s'\n", argv[i]);
				return TRACE_EXIT_FAIL;
			}
		} else if (!strcmp(a, "--size") || !strcmp(a, "--count") || !strcmp(a, "--mtu") ||
			   !strcmp(a, "--hold")) {
			builtin_opt = 1;
			if (parse_u64(argv[++i], &u)) {
				fprintf(stderr, "uroce trace: %s: not a number: '%s'\n", a, argv[i]);
				return TRACE_EXIT_FAIL;
			}
			if (!strcmp(a, "--size")) {
				if (!u || u > (1u << 30)) {
					fprintf(stderr, "uroce trace: --size: 1 .. 1G\n");
					return TRACE_EXIT_FAIL;
				}
				xo.size = u;
			} else if (!strcmp(a, "--count")) {
				if (!u || u > 1000000) {
					fprintf(stderr, "uroce trace: --count: 1 .. 1000000\n");
					return TRACE_EXIT_FAIL;
				}
				xo.count = (unsigned)u;
			} else if (!strcmp(a, "--mtu")) {
				if (u != 256 && u != 512 && u != 1024 && u != 2048 && u != 4096) {
					fprintf(stderr, "uroce trace: --mtu: 256, 512, 1024, 2048 or 4096\n");
					return TRACE_EXIT_FAIL;
				}
				xo.mtu = (unsigned)u;
			} else {
				xo.hold_ms = u > 3600000 ? 3600000 : (unsigned)u;
			}
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "uroce trace: unknown option '%s' (use '--' before CMD)\n\n", a);
			usage_trace(stderr);
			return TRACE_EXIT_FAIL;
		} else {
			break; /* CMD */
		}
	}
	if (!wfile && !explain && !html) {
		fprintf(stderr, "uroce trace: say what to do: -w FILE, --explain, --html FILE\n\n");
		usage_trace(stderr);
		return TRACE_EXIT_FAIL;
	}
	if (json && !explain) {
		fprintf(stderr, "uroce trace: --json goes with --explain\n");
		return TRACE_EXIT_FAIL;
	}
	if (i < argc && builtin_opt) {
		fprintf(stderr, "uroce trace: --size, --count, --mtu, --rnr and --hold are for the "
				"built-in transfer, not with a command\n");
		return TRACE_EXIT_FAIL;
	}
	if (xo.op == XOP_CSWAP || xo.op == XOP_FADD)
		xo.size = 8;
	if (xo.rnr && xo.op != XOP_SEND && xo.op != XOP_SEND_IMM && xo.op != XOP_WRITE_IMM) {
		fprintf(stderr, "uroce trace: --rnr needs an operation that consumes a RECV "
				"(send, send_imm, write_imm)\n");
		return TRACE_EXIT_FAIL;
	}

	if (from) {
		if (i < argc || builtin_opt || keep) {
			fprintf(stderr, "uroce trace: --from reads files: no command, built-in options "
					"or --keep with it\n");
			return TRACE_EXIT_FAIL;
		}
		return trace_files(from, wfile, explain, json, xo.op, html);
	}
	if (keep) {
		if (mkdir(keep, 0755) && errno != EEXIST) {
			fprintf(stderr, "uroce trace: mkdir %s: %s\n", keep, strerror(errno));
			return TRACE_EXIT_FAIL;
		}
		snprintf(dir, sizeof(dir), "%s", keep);
	} else {
		const char *tmp = getenv("TMPDIR");

		snprintf(dir, sizeof(dir), "%s/uroce-trace.XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(dir)) {
			fprintf(stderr, "uroce trace: mkdtemp %s: %s\n", dir, strerror(errno));
			return TRACE_EXIT_FAIL;
		}
	}
	/* Our variables win over inherited ones: the files must land here. */
	if (wfile) {
		snprintf(env, sizeof(env), "%s/cap.%%p", dir);
		setenv("UROCE_PCAP", env, 1);
	} else {
		unsetenv("UROCE_PCAP");
	}
	if (explain || html) {
		snprintf(env, sizeof(env), "%s/trace.%%p", dir);
		setenv("UROCE_TRACE", env, 1);
	} else {
		unsetenv("UROCE_TRACE");
	}

	if (i < argc) {
		rc = run_cmd(argc - i, argv + i, netdev);
	} else {
		if (netdev)
			setenv("UROCE_NETDEV", netdev, 1);
		else if (!getenv("UROCE_NETDEV"))
			setenv("UROCE_NETDEV", "lo", 1);
		xo.quiet = json;
		rc = xfer_run(&xo, &xr);
	}
	unsetenv("UROCE_PCAP");
	unsetenv("UROCE_TRACE");

	if (wfile && merge_captures(dir, wfile, 1)) {
		erc = TRACE_EXIT_FAIL;
		keep = dir; /* the per-process captures are all there is */
	}
	if (explain) {
		struct explain_opts eo = { .op = xo.op,
					   .json = json, .builtin = i >= argc ? &xr : NULL };

		if (explain_dir(dir, &eo) == 2 && !rc)
			erc = TRACE_EXIT_FAIL;
	}
	if (html) {
		char what[1024];
		struct html_opts ho = { .command = what };
		int h;

		html_command(what, sizeof(what), i < argc ? argc - i : 0, argv + i, &xo);
		h = trace_html(dir, html, &ho);
		if ((h == 2 && !rc) || h < 0)
			erc = TRACE_EXIT_FAIL;
	}
	if (!keep)
		rm_tree(dir);
	else
		fprintf(stderr, "uroce trace: per-process files kept in %s\n", dir);
	return rc ? rc : erc;
}
