/* uroce model calibrate: refreshes the calibration file from this host.
 *
 *   1. TCP and uroce on loopback: the numbers of the last `make bench`
 *      (BUILD/bench/latest.json) when there is one, else short runs of
 *      iperf3 and perftest (ib_write_bw, ib_write_lat through uroce run)
 *      and a built-in TCP ping-pong, CPU time from wait4().
 *   2. NCCL busbw from a `make bench-nccl` JSON (--nccl FILE or
 *      BUILD/bench/nccl*.json); none: the old value stays with its source.
 *   3. GPU copy rates from bench/gpu/gpu_bw when a GPU is there (--gpu-json
 *      FILE: its JSON line saved); none: the old values stay.
 *
 * Params with "from" follow their measurement. Nothing that was not
 * measured changes, and every value keeps the source it came with. */
#include "cli.h"
#include "model.h"
#include "mjson.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN_TIMEOUT_S 60

void usage_model_calibrate(FILE *f)
{
	fprintf(f,
		"usage: uroce model calibrate [--calibration FILE] [--out FILE] [--bench FILE.json]\n"
		"                             [--nccl FILE.json] [--gpu-json FILE] [--no-run] [--dry-run]\n"
		"\n"
		"Refresh the model's calibration file from measurements of this host, keeping\n"
		"for every number where it came from (command, date, machine):\n"
		"  TCP and uroce on loopback   from the last 'make bench' (BUILD/bench/latest.json,\n"
		"                              or --bench FILE), else short runs of iperf3,\n"
		"                              ib_write_bw and ib_write_lat (through uroce run)\n"
		"                              and a TCP ping-pong (needs perftest and iperf3)\n"
		"  NCCL all-reduce busbw       from a 'make bench-nccl' JSON (--nccl FILE or\n"
		"                              BUILD/bench/nccl*.json)\n"
		"  GPU copy rates              from BUILD/bench/gpu_bw when a GPU is present\n"
		"                              (--gpu-json FILE: its saved JSON line)\n"
		"What is not measured keeps its value and its source.\n"
		"\n"
		"  --calibration FILE  the file to refresh (default: tools/model/calibration.json\n"
		"                      of the source tree, or $UROCE_MODEL_CALIBRATION)\n"
		"  --out FILE          write there instead of over the input\n"
		"  --no-run            do not run anything; only read result files\n"
		"  --only WHAT         refresh only host (TCP, uroce), nccl or gpu\n"
		"  --dry-run           show what would change, write nothing\n"
		"  --date YYYY-MM-DD   the date to record (default: today, UTC)\n"
		"  --machine TEXT      the machine to record (default: cores, CPU, kernel)\n");
}

struct cal_ctx {
	struct calib *cb;
	char date[32];
	char machine[200];
	int changed;
};

/* Records a measurement and what follows from it. */
static void set_meas(struct cal_ctx *x, const char *key, double v, const char *cmd, const char *date,
		     const char *machine)
{
	struct cal_entry *e = calib_find(x->cb, key);

	if (!e || !isfinite(v) || v < 0)
		return;
	printf("  %-26s %10.4g -> %-10.4g %s\n", key, e->value, v, cmd);
	e->value = v;
	snprintf(e->src.command, sizeof(e->src.command), "%s", cmd);
	snprintf(e->src.date, sizeof(e->src.date), "%s", date ? date : x->date);
	snprintf(e->src.machine, sizeof(e->src.machine), "%s", machine ? machine : x->machine);
	e->refreshed = 1;
	x->changed++;
}

static void follow(struct cal_ctx *x)
{
	for (int i = 0; i < x->cb->nparams; i++) {
		struct cal_entry *p = &x->cb->params[i];
		struct cal_entry *m = p->from[0] ? calib_find(x->cb, p->from) : NULL;

		if (!m || !m->refreshed)
			continue;
		printf("  %-26s %10.4g -> %-10.4g (from %s)\n", p->key, p->value, m->value, m->key);
		p->value = m->value;
		p->src = m->src;
		p->refreshed = 1;
	}
}

static void today(char *buf, size_t len)
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%d", &tm);
}

static void this_machine(char *buf, size_t len)
{
	char model[128] = "unknown CPU", line[256];
	struct utsname u;
	FILE *f = fopen("/proc/cpuinfo", "re");

	while (f && fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':');

		if (!strncmp(line, "model name", 10) && c) {
			c++;
			while (*c == ' ')
				c++;
			c[strcspn(c, "\n")] = 0;
			snprintf(model, sizeof(model), "%s", c);
			break;
		}
	}
	if (f)
		fclose(f);
	if (uname(&u))
		snprintf(u.release, sizeof(u.release), "?");
	snprintf(buf, len, "this host: %ld cores, %s, Linux %s", sysconf(_SC_NPROCESSORS_ONLN), model,
		 u.release);
}

/* ---- running programs ---- */

static int in_path(const char *name)
{
	const char *path = getenv("PATH");
	char *copy, *tok, *save = NULL, p[PATH_MAX];
	int found = 0;

	if (!path || !(copy = strdup(path)))
		return 0;
	for (tok = strtok_r(copy, ":", &save); tok && !found; tok = strtok_r(NULL, ":", &save)) {
		snprintf(p, sizeof(p), "%s/%s", *tok ? tok : ".", name);
		found = access(p, X_OK) == 0;
	}
	free(copy);
	return found;
}

/* Starts argv with output to file out; through uroce run when uroce is set
 * (UROCE_NETDEV=lo). */
static pid_t spawn(char **argv, const char *out, int uroce)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid)
		return pid;
	setpgid(0, 0);
	{
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		int null = open("/dev/null", O_RDONLY);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (null >= 0)
			dup2(null, 0);
	}
	if (uroce) {
		int n = 0;
		char *v[32];

		setenv("UROCE_NETDEV", "lo", 1);
		v[n++] = "run";
		v[n++] = "--";
		for (int i = 0; argv[i] && n < 31; i++)
			v[n++] = argv[i];
		v[n] = NULL;
		_exit(cmd_run(n, v));
	}
	execvp(argv[0], argv);
	_exit(127);
}

/* Waits up to secs for pid; kills its group after that. Exit status (or
 * -1), CPU seconds of it and its children in *cpu. */
static int reap(pid_t pid, int secs, double *cpu)
{
	struct rusage ru;
	int st;
	struct timespec d = { 0, 20 * 1000 * 1000 };

	for (int i = 0; i < secs * 50; i++) {
		pid_t r = wait4(pid, &st, WNOHANG, &ru);

		if (r == pid) {
			if (cpu)
				*cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
				       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		if (r < 0 && errno != EINTR)
			return -1;
		nanosleep(&d, NULL);
	}
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	wait4(pid, &st, 0, &ru);
	return -1;
}

/* 1 when something listens on TCP port (IPv4 or IPv6), from /proc/net. */
static int listening(int port)
{
	static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6" };

	for (int i = 0; i < 2; i++) {
		FILE *f = fopen(files[i], "re");
		char line[512];

		while (f && fgets(line, sizeof(line), f)) {
			char local[128];
			unsigned st;
			char *colon;

			if (sscanf(line, " %*d: %127s %*s %x", local, &st) != 2)
				continue;
			colon = strrchr(local, ':');
			if (colon && st == 0x0A && strtol(colon + 1, NULL, 16) == port) {
				fclose(f);
				return 1;
			}
		}
		if (f)
			fclose(f);
	}
	return 0;
}

static int wait_listen(int port, pid_t pid)
{
	struct timespec d = { 0, 50 * 1000 * 1000 };

	for (int i = 0; i < 400; i++) {
		int st;

		if (listening(port))
			return 0;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return -1;
		nanosleep(&d, NULL);
	}
	return -1;
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (s < 0)
		return -1;
	if (!bind(s, (struct sockaddr *)&a, sizeof(a)) && !getsockname(s, (struct sockaddr *)&a, &l))
		port = ntohs(a.sin_port);
	close(s);
	return port;
}

/* The numeric row after perftest's "#bytes" header: field i. */
static double perftest_field(const char *file, int field)
{
	FILE *f = fopen(file, "re");
	char line[512];
	int hdr = 0;
	double v = NAN;

	while (f && fgets(line, sizeof(line), f)) {
		char *p = line;
		double x[12];
		int n = 0;

		while (*p == ' ' || *p == '\t')
			p++;
		if (!strncmp(p, "#bytes", 6)) {
			hdr = 1;
			continue;
		}
		if (!hdr)
			continue;
		while (n < 12) {
			char *end;

			x[n] = strtod(p, &end);
			if (end == p)
				break;
			n++;
			p = end;
		}
		if (n > field && n >= 3) {
			v = x[field];
			break;
		}
	}
	if (f)
		fclose(f);
	return v;
}

struct pair_result {
	int ok;
	double cpu_s;           /* server + client */
	char client_out[PATH_MAX];
};

/* Server, wait until it listens on port, client; both must exit 0. */
static void run_pair(char **srv, char **cli, int port, int uroce, const char *dir, const char *tag,
		     struct pair_result *r)
{
	char so[PATH_MAX];
	pid_t s, c;
	double cs = 0, cc = 0;
	int rs, rc;

	memset(r, 0, sizeof(*r));
	snprintf(so, sizeof(so), "%s/%s.server", dir, tag);
	snprintf(r->client_out, sizeof(r->client_out), "%s/%s.client", dir, tag);
	s = spawn(srv, so, uroce);
	if (s < 0)
		return;
	if (wait_listen(port, s)) {
		reap(s, 1, NULL);
		fprintf(stderr, "  %s: the server did not start (see %s)\n", tag, so);
		return;
	}
	c = spawn(cli, r->client_out, uroce);
	rc = c < 0 ? -1 : reap(c, RUN_TIMEOUT_S, &cc);
	rs = reap(s, rc == 0 ? 20 : 2, &cs);
	r->ok = rc == 0 && rs == 0;
	r->cpu_s = cs + cc;
	if (!r->ok)
		fprintf(stderr, "  %s: client exit %d, server exit %d (see %s)\n", tag, rc, rs,
			r->client_out);
}

/* Half round trip of a 1-byte TCP ping-pong on 127.0.0.1 (median), us. */
static double tcp_pingpong(int rounds)
{
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, c = -1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	double *rtt = calloc((size_t)rounds, sizeof(double)), med = NAN;
	pid_t pid = -1;
	char b = 'x';

	if (ls < 0 || !rtt || bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1) ||
	    getsockname(ls, (struct sockaddr *)&a, &l))
		goto out;
	pid = fork();
	if (pid == 0) {
		int s = accept(ls, NULL, NULL);

		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		while (s >= 0 && read(s, &b, 1) == 1 && write(s, &b, 1) == 1)
			;
		_exit(0);
	}
	if (pid < 0)
		goto out;
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)))
		goto out;
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (int i = 0; i < rounds; i++) {
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (write(c, &b, 1) != 1 || read(c, &b, 1) != 1)
			goto out;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		rtt[i] = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
	}
	for (int i = 1; i < rounds; i++)   /* insertion sort: small n */
		for (int k = i; k > 0 && rtt[k] < rtt[k - 1]; k--) {
			double t = rtt[k];

			rtt[k] = rtt[k - 1];
			rtt[k - 1] = t;
		}
	med = rtt[rounds / 2] / 2;
out:
	if (c >= 0)
		close(c);
	if (ls >= 0)
		close(ls);
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	free(rtt);
	return med;
}

static void measure_host(struct cal_ctx *x)
{
	char dir[] = "/tmp/uroce-calibrate.XXXXXX", ps[16], cmd[400];
	struct pair_result r;
	int port;
	double v;

	if (!mkdtemp(dir)) {
		fprintf(stderr, "  mkdtemp: %s\n", strerror(errno));
		return;
	}
	printf("running on loopback (files in %s):\n", dir);
	/* TCP: iperf3, one stream, 2 s */
	if (!in_path("iperf3")) {
		printf("  iperf3 not installed (scripts/deps.sh bench): TCP bandwidth and CPU kept\n");
	} else if ((port = free_port()) > 0) {
		char *srv[] = { "iperf3", "-s", "-1", "-p", ps, NULL };
		char *cli[] = { "iperf3", "-c", "127.0.0.1", "-p", ps, "-t", "2", "-J", NULL };
		struct mj *j;
		char err[128];

		snprintf(ps, sizeof(ps), "%d", port);
		run_pair(srv, cli, port, 0, dir, "iperf3", &r);
		j = r.ok ? mj_parse_file(r.client_out, err, sizeof(err)) : NULL;
		if (j) {
			double bps = mj_num(j, "end/sum_received/bits_per_second");
			double bytes = mj_num(j, "end/sum_received/bytes");

			set_meas(x, "host.tcp_gbps", bps / 1e9,
				 "uroce model calibrate: iperf3 -c 127.0.0.1 -t 2 (1 stream), receiver", NULL,
				 NULL);
			if (bytes > 0)
				set_meas(x, "host.tcp_cpu_s_per_gb", r.cpu_s / (bytes / 1e9),
					 "uroce model calibrate: iperf3 -c 127.0.0.1 -t 2, client + server "
					 "CPU time (wait4) per GB received",
					 NULL, NULL);
			mj_free(j);
		}
	}
	v = tcp_pingpong(4000);
	set_meas(x, "host.tcp_half_rtt_us", v,
		 "uroce model calibrate: TCP ping-pong, 1 byte, TCP_NODELAY, 127.0.0.1, 4000 round trips, "
		 "median / 2",
		 NULL, NULL);
	/* uroce: perftest through uroce run */
	if (!in_path("ib_write_bw") || !in_path("ib_write_lat")) {
		printf("  perftest not installed (scripts/deps.sh test): uroce numbers kept\n");
	} else {
		if ((port = free_port()) > 0) {
			char *srv[] = { "ib_write_bw", "-x", "0", "-F", "-p", ps, "-s", "65536",
					"-n", "20000", "--report_gbits", NULL };
			char *cli[] = { "ib_write_bw", "-x", "0", "-F", "-p", ps, "-s", "65536",
					"-n", "20000", "--report_gbits", "127.0.0.1", NULL };

			snprintf(ps, sizeof(ps), "%d", port);
			run_pair(srv, cli, port, 1, dir, "ib_write_bw", &r);
			v = r.ok ? perftest_field(r.client_out, 3) : NAN;
			snprintf(cmd, sizeof(cmd), "uroce model calibrate: uroce run -- ib_write_bw -x 0 -F "
						   "-s 65536 -n 20000 --report_gbits, loopback, BW average");
			set_meas(x, "host.uroce_write_gbps", v, cmd, NULL, NULL);
			if (r.ok && isfinite(v))
				set_meas(x, "host.uroce_cpu_s_per_gb", r.cpu_s / (20000.0 * 65536 / 1e9),
					 "uroce model calibrate: the same ib_write_bw run, client + server "
					 "CPU time (wait4) per GB",
					 NULL, NULL);
		}
		if ((port = free_port()) > 0) {
			char *srv[] = { "ib_write_lat", "-x", "0", "-F", "-p", ps, "-s", "2", "-n", "2000",
					NULL };
			char *cli[] = { "ib_write_lat", "-x", "0", "-F", "-p", ps, "-s", "2", "-n", "2000",
					"127.0.0.1", NULL };

			snprintf(ps, sizeof(ps), "%d", port);
			run_pair(srv, cli, port, 1, dir, "ib_write_lat", &r);
			v = r.ok ? perftest_field(r.client_out, 4) : NAN;
			set_meas(x, "host.uroce_write_lat_us", v,
				 "uroce model calibrate: uroce run -- ib_write_lat -x 0 -F -s 2 -n 2000, "
				 "loopback, t_typical",
				 NULL, NULL);
		}
	}
	{
		DIR *d = opendir(dir);
		struct dirent *de;
		char p[PATH_MAX + 300];

		while (d && (de = readdir(d)))
			if (de->d_name[0] != '.') {
				snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
				unlink(p);
			}
		if (d)
			closedir(d);
		rmdir(dir);
	}
}

/* The numbers of a `make bench` JSON (bench/report.py's schema 1). */
static int from_bench(struct cal_ctx *x, const char *file)
{
	char err[256], cmd[600], date[32] = "", machine[200];
	struct mj *j = mj_parse_file(file, err, sizeof(err));
	const struct mj *sum, *path = NULL;
	const char *start, *pname;

	if (!j) {
		fprintf(stderr, "  %s: %s\n", file, err);
		return -1;
	}
	sum = mj_get(j, "summary");
	if (sum)
		path = mj_get(sum, "lo") ? mj_get(sum, "lo") : sum->kid;
	if (!path) {
		fprintf(stderr, "  %s: no summary (not a make bench result?)\n", file);
		mj_free(j);
		return -1;
	}
	pname = path->key;
	start = mj_str(j, "settings/start");
	if (start)
		snprintf(date, sizeof(date), "%.10s", start);
	snprintf(machine, sizeof(machine), "%s: %g cores, %s, Linux %s",
		 mj_str(j, "machine/hostname") ? mj_str(j, "machine/hostname") : "bench host",
		 mj_num(j, "machine/cores"),
		 mj_str(j, "machine/cpu_model") ? mj_str(j, "machine/cpu_model") : "?",
		 mj_str(j, "machine/kernel") ? mj_str(j, "machine/kernel") : "?");
	printf("from %s (make bench, path %s):\n", file, pname);
#define B(key, jpath, what)                                                                     \
	do {                                                                                    \
		snprintf(cmd, sizeof(cmd), "make bench (%s, summary/%s/%s): %s", file, pname, jpath, \
			 what);                                                                 \
		set_meas(x, key, mj_num(path, jpath), cmd, date[0] ? date : NULL, machine);     \
	} while (0)
	B("host.tcp_gbps", "iperf3_tcp", "iperf3 TCP, 1 stream, median");
	B("host.tcp_cpu_s_per_gb", "cpu_s_per_gb/iperf3 TCP", "iperf3 TCP, client + server CPU-s per GB");
	B("host.tcp_half_rtt_us", "lat_us/sockperf_tcp/14/typical", "sockperf TCP half round trip median");
	B("host.uroce_write_gbps", "ib_write_bw_64k", "ib_write_bw 64 KiB through uroce, median");
	B("host.uroce_cpu_s_per_gb", "cpu_s_per_gb/ib_write_bw 64KiB", "ib_write_bw 64 KiB CPU-s per GB");
	B("host.uroce_write_lat_us", "lat_us/ib_write_lat/2/typical", "ib_write_lat 2 B typical");
#undef B
	mj_free(j);
	return 0;
}

/* Largest number under a key named busbw* anywhere in the document. */
static double max_busbw(const struct mj *j)
{
	double best = NAN;

	for (; j; j = j->next) {
		if (j->type == MJ_NUM && j->key && !strncmp(j->key, "busbw", 5) &&
		    (isnan(best) || j->num > best))
			best = j->num;
		if (j->kid) {
			double k = max_busbw(j->kid);

			if (!isnan(k) && (isnan(best) || k > best))
				best = k;
		}
	}
	return best;
}

static int from_nccl(struct cal_ctx *x, const char *file)
{
	char err[256], cmd[600], date[32];
	struct mj *j = mj_parse_file(file, err, sizeof(err));
	struct stat st;
	double v;

	if (!j) {
		fprintf(stderr, "  %s: %s\n", file, err);
		return -1;
	}
	v = mj_num(j, "busbw_gbs");
	if (isnan(v))
		v = max_busbw(j);
	if (isnan(v)) {
		printf("  %s: no busbw in it; nccl.busbw_gbs kept\n", file);
		mj_free(j);
		return -1;
	}
	date[0] = 0;
	if (mj_str(j, "date"))
		snprintf(date, sizeof(date), "%.10s", mj_str(j, "date"));
	else if (!stat(file, &st)) {
		struct tm tm;

		gmtime_r(&st.st_mtime, &tm);
		strftime(date, sizeof(date), "%Y-%m-%d", &tm);
	}
	snprintf(cmd, sizeof(cmd), "make bench-nccl (%s): all-reduce busbw, the largest size", file);
	printf("from %s (make bench-nccl):\n", file);
	set_meas(x, "nccl.busbw_gbs", v, cmd, date[0] ? date : NULL,
		 mj_str(j, "machine") ? mj_str(j, "machine") : NULL);
	mj_free(j);
	return 0;
}

/* gpu_bw's JSON line (the last line starting with '{'). */
static int from_gpu_json(struct cal_ctx *x, const char *file, const char *how)
{
	FILE *f = fopen(file, "re");
	char line[2048], last[2048] = "", err[128], cmd[600];
	struct mj *j;

	while (f && fgets(line, sizeof(line), f))
		if (line[0] == '{')
			snprintf(last, sizeof(last), "%s", line);
	if (f)
		fclose(f);
	if (!last[0] || !(j = mj_parse(last, err, sizeof(err)))) {
		printf("  %s: no gpu_bw JSON line; GPU copy rates kept\n", file);
		return -1;
	}
	printf("from %s (%s):\n", file, how);
	snprintf(cmd, sizeof(cmd), "%s: CUDA pinned HtoD copy ceiling (cuMemcpyHtoD)", how);
	set_meas(x, "gpu.h2d_pinned_gbs", mj_num(j, "htod_ceiling_gbps") / 8, cmd, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "%s: CUDA pinned DtoH copy ceiling (cuMemcpyDtoH)", how);
	set_meas(x, "gpu.d2h_pinned_gbs", mj_num(j, "dtoh_ceiling_gbps") / 8, cmd, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "%s: GPU->GPU RDMA WRITE over uroce loopback", how);
	set_meas(x, "gpu.uroce_gpu_write_gbps", mj_num(j, "gpu_gpu_gbps"), cmd, NULL, NULL);
	mj_free(j);
	return 0;
}

static int exists(const char *p)
{
	return !access(p, R_OK);
}

/* The newest BUILD/bench/nccl*.json. */
static int find_nccl(const char *bench_dir, char *out, size_t len)
{
	DIR *d = opendir(bench_dir);
	struct dirent *de;
	time_t best = 0;

	out[0] = 0;
	while (d && (de = readdir(d))) {
		char p[PATH_MAX + 300];
		struct stat st;
		size_t l = strlen(de->d_name);

		if (strncmp(de->d_name, "nccl", 4) || l < 5 || strcmp(de->d_name + l - 5, ".json"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", bench_dir, de->d_name);
		if (!stat(p, &st) && st.st_mtime >= best) {
			best = st.st_mtime;
			snprintf(out, len, "%s", p);
		}
	}
	if (d)
		closedir(d);
	return out[0] ? 0 : -1;
}

int model_calibrate(int argc, char **argv)
{
	const char *in = NULL, *out = NULL, *bench = NULL, *nccl = NULL, *gpu = NULL;
	const char *date = NULL, *machine = NULL, *only = NULL;
	int no_run = 0, dry = 0;
	struct calib cb;
	struct cal_ctx x = { 0 };
	char bench_dir[PATH_MAX], p[PATH_MAX + 64];

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage_model_calibrate(stdout);
			return 0;
		} else if (!strcmp(a, "--no-run")) {
			no_run = 1;
		} else if (!strcmp(a, "--dry-run")) {
			dry = 1;
		} else if (!v) {
			fprintf(stderr, "uroce model calibrate: unknown option or missing argument: %s\n\n", a);
			usage_model_calibrate(stderr);
			return CLI_EXIT_USAGE;
		} else if (!strcmp(a, "--calibration")) {
			in = argv[++i];
		} else if (!strcmp(a, "--out")) {
			out = argv[++i];
		} else if (!strcmp(a, "--bench")) {
			bench = argv[++i];
		} else if (!strcmp(a, "--nccl")) {
			nccl = argv[++i];
		} else if (!strcmp(a, "--gpu-json")) {
			gpu = argv[++i];
		} else if (!strcmp(a, "--date")) {
			date = argv[++i];
		} else if (!strcmp(a, "--machine")) {
			machine = argv[++i];
		} else if (!strcmp(a, "--only")) {
			only = argv[++i];
			if (strcmp(only, "host") && strcmp(only, "nccl") && strcmp(only, "gpu")) {
				fprintf(stderr, "uroce model calibrate: --only host, nccl or gpu\n");
				return CLI_EXIT_USAGE;
			}
		} else {
			fprintf(stderr, "uroce model calibrate: unknown option '%s'\n\n", a);
			usage_model_calibrate(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (calib_load(&cb, in))
		return 1;
	if (!cb.from_file && !out && !dry) {
		fprintf(stderr, "uroce model calibrate: no calibration file to refresh; name one with "
				"--calibration or --out\n");
		calib_free(&cb);
		return 1;
	}
	x.cb = &cb;
	if (date)
		snprintf(x.date, sizeof(x.date), "%s", date);
	else
		today(x.date, sizeof(x.date));
	if (machine)
		snprintf(x.machine, sizeof(x.machine), "%s", machine);
	else
		this_machine(x.machine, sizeof(x.machine));
	printf("calibration: %s\nmachine: %s\ndate: %s\n\n", cb.from_file ? cb.path : "(built-in)",
	       x.machine, x.date);

	/* BUILD/bench: next to this binary's bin/ */
	if (realpath("/proc/self/exe", p))
		snprintf(bench_dir, sizeof(bench_dir), "%s/bench", dirname(dirname(p)));
	else
		snprintf(bench_dir, sizeof(bench_dir), "build/bench");

	/* 1. TCP and uroce */
	if (only && strcmp(only, "host")) {
		printf("TCP and uroce: not refreshed (--only %s)\n", only);
	} else if (!bench) {
		snprintf(p, sizeof(p), "%s/latest.json", bench_dir);
		if (exists(p))
			bench = p;
	}
	if ((!only || !strcmp(only, "host")) && (!bench || from_bench(&x, bench))) {
		if (no_run)
			printf("TCP and uroce: no make bench result and --no-run: kept\n");
		else
			measure_host(&x);
	}

	/* 2. NCCL */
	{
		char f[PATH_MAX];

		if (!nccl && !find_nccl(bench_dir, f, sizeof(f)))
			nccl = f;
		if (only && strcmp(only, "nccl")) {
			printf("NCCL: not refreshed (--only %s)\n", only);
		} else if (!nccl || from_nccl(&x, nccl)) {
			struct cal_entry *e = calib_find(&cb, "nccl.busbw_gbs");

			printf("NCCL: no make bench-nccl result (%s/nccl*.json, or --nccl FILE): "
			       "nccl.busbw_gbs stays %g, from %s (%s)\n",
			       bench_dir, e->value, e->src.command, e->src.date);
		}
	}

	/* 3. GPU copies */
	if (only && strcmp(only, "gpu")) {
		printf("GPU: not refreshed (--only %s)\n", only);
	} else if (gpu) {
		from_gpu_json(&x, gpu, "gpu_bw output");
	} else {
		char gb[PATH_MAX + 32], o[] = "/tmp/uroce-gpu_bw.XXXXXX";
		int fd, done = 0;

		snprintf(gb, sizeof(gb), "%s/gpu_bw", bench_dir);
		if (!no_run && (exists("/dev/nvidiactl") || exists("/proc/driver/nvidia/version")) &&
		    !access(gb, X_OK) && (fd = mkstemp(o)) >= 0) {
			char *argv2[] = { gb, "4194304", "1", "1", NULL };
			pid_t pid;

			close(fd);
			setenv("UROCE_NETDEV", "lo", 1);
			pid = spawn(argv2, o, 0);
			if (pid > 0 && reap(pid, RUN_TIMEOUT_S, NULL) == 0)
				done = !from_gpu_json(&x, o, "build/bench/gpu_bw 4194304 1 1 (make bench-gpu)");
			unlink(o);
		}
		if (!done) {
			struct cal_entry *e = calib_find(&cb, "gpu.h2d_pinned_gbs");

			printf("GPU: %s: copy rates stay (h2d %g GB/s, from %s, %s, %s)\n",
			       no_run ? "--no-run" : "no GPU here or no gpu_bw", e->value, e->src.command,
			       e->src.date, e->src.machine);
		}
	}
	printf("\nparams following the measurements:\n");
	follow(&x);
	if (!x.changed && !out) {
		printf("  nothing measured: the file is unchanged\n");
		calib_free(&cb);
		return 0;
	}
	if (x.changed)
		snprintf(cb.updated, sizeof(cb.updated), "%s", x.date);
	if (dry) {
		printf("\n--dry-run: nothing written\n");
	} else {
		const char *to = out ? out : cb.path;

		if (calib_write(&cb, to)) {
			calib_free(&cb);
			return 1;
		}
		printf("\nwrote %s (%d measurements refreshed)\n", to, x.changed);
	}
	calib_free(&cb);
	return 0;
}
