/* uroce stat: live counters of running uroce processes, read from their
 * stat files in /dev/shm (src/obs/counters.h). */
#include "cli.h"
#include "statfile.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void usage_stat(FILE *f)
{
	fprintf(f,
		"usage: uroce stat [--json] [-a] [-i SECONDS [-n COUNT]] [PID|DEVICE]\n"
		"\n"
		"Live counters (hw_counters-style) of every running process that has a\n"
		"uroce device open, read from /dev/shm/uroce-<pid>-<n>.stat. With a PID\n"
		"or a device name (uroce_lo) only those. -a prints zero counters too;\n"
		"-i refreshes every SECONDS with per-second rates, -n stops after COUNT\n"
		"refreshes; --json prints one JSON document (one per refresh).\n");
}

static void print_json(struct statf_src *srcs, int n, double dt)
{
	printf("{\"processes\":[");
	for (int i = 0; i < n; i++) {
		const struct uroce_stat_file *f = &srcs[i].snap;
		const uint64_t *v = (const uint64_t *)&f->cnt;

		printf("%s{\"pid\":%d,\"comm\":", i ? "," : "", f->pid);
		cli_json_str(stdout, f->comm);
		printf(",\"device\":");
		cli_json_str(stdout, f->ibdev);
		printf(",\"netdev\":");
		cli_json_str(stdout, f->ifname);
		printf(",\"port\":1,\"qps\":%u,\"counters\":{", f->nqps);
		for (size_t k = 0; k < STATF_NCOUNTERS; k++)
			printf("%s\"%s\":%llu", k ? "," : "", statf_names[k], (unsigned long long)v[k]);
		printf("}");
		if (dt > 0 && srcs[i].have_prev) {
			printf(",\"rates_per_s\":{");
			for (size_t k = 0; k < STATF_NCOUNTERS; k++)
				printf("%s\"%s\":%.1f", k ? "," : "", statf_names[k],
				       (double)(v[k] - srcs[i].prev[k]) / dt);
			printf("}");
		}
		printf("}");
	}
	printf("]}\n");
}

static void print_text(struct statf_src *srcs, int n, int all, double dt)
{
	if (!n) {
		printf("no running uroce process has a device open\n");
		return;
	}
	for (int i = 0; i < n; i++) {
		const struct uroce_stat_file *f = &srcs[i].snap;
		const uint64_t *v = (const uint64_t *)&f->cnt;

		printf("%s pid %d (%s) port 1 netdev %s, %u QPs\n", f->ibdev, f->pid, f->comm,
		       f->ifname, f->nqps);
		for (size_t k = 0; k < STATF_NCOUNTERS; k++) {
			if (!all && !v[k] && !(srcs[i].have_prev && srcs[i].prev[k]))
				continue;
			if (dt > 0 && srcs[i].have_prev)
				printf("  %-20s %16llu %14.1f/s  %s\n", statf_names[k],
				       (unsigned long long)v[k], (double)(v[k] - srcs[i].prev[k]) / dt,
				       statf_descs[k]);
			else
				printf("  %-20s %16llu  %s\n", statf_names[k], (unsigned long long)v[k],
				       statf_descs[k]);
		}
	}
}

int cmd_stat(int argc, char **argv)
{
	static struct statf_src srcs[STATF_MAX];
	const char *filter = NULL;
	int json = 0, all = 0, count = -1, n;
	double interval = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "-a")) {
			all = 1;
		} else if (!strcmp(argv[i], "-i") && i + 1 < argc) {
			interval = atof(argv[++i]);
			if (interval <= 0) {
				fprintf(stderr, "uroce stat: -i wants a positive number of seconds\n");
				return CLI_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
			count = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage_stat(stdout);
			return 0;
		} else if (argv[i][0] != '-' && !filter) {
			filter = argv[i];
		} else {
			usage_stat(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	n = statf_scan(srcs, STATF_MAX, filter);
	if (json)
		print_json(srcs, n, 0);
	else
		print_text(srcs, n, all, 0);
	for (int round = 1; interval > 0 && (count < 0 || round < count); round++) {
		struct timespec ts = { (time_t)interval,
				       (long)((interval - (double)(time_t)interval) * 1e9) };

		fflush(stdout);
		for (int i = 0; i < n; i++) {
			memcpy(srcs[i].prev, &srcs[i].snap.cnt, sizeof(srcs[i].prev));
			srcs[i].have_prev = 1;
		}
		nanosleep(&ts, NULL);
		/* Look again: processes come and go between refreshes. */
		{
			static struct statf_src fresh[STATF_MAX];
			int m = statf_scan(fresh, STATF_MAX, filter);

			for (int k = 0; k < m; k++)
				for (int i = 0; i < n; i++)
					if (!strcmp(fresh[k].path, srcs[i].path)) {
						memcpy(fresh[k].prev, srcs[i].prev, sizeof(fresh[k].prev));
						fresh[k].have_prev = srcs[i].have_prev;
					}
			memcpy(srcs, fresh, sizeof(fresh[0]) * (size_t)m);
			n = m;
		}
		if (!json)
			printf("\n");
		if (json)
			print_json(srcs, n, interval);
		else
			print_text(srcs, n, all, interval);
	}
	return n || filter == NULL ? 0 : 1;
}
