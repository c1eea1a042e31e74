/* uroce run: exec a verbs program with uroce's libibverbs.so.1 first in
 * LD_LIBRARY_PATH, in the sysfs view of uroce's devices (view.c). */
#include "cli.h"
#include "run.h"
#include "auto.h"
#include "counters.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Like env(1) and timeout(1): 125 = uroce itself failed, 126 = CMD found but
 * not executable, 127 = CMD not found. */
#define RUN_EXIT_FAIL 125
#define RUN_EXIT_NOEXEC 126
#define RUN_EXIT_NOTFOUND 127

void usage_run(FILE *f)
{
	fprintf(f,
		"usage: uroce run [--netdev IF[,IF...]] [--no-sysfs | --sysfs] [--] CMD [ARGS...]\n"
		"\n"
		"Run CMD, any dynamically linked program that uses libibverbs, on uroce:\n"
		"uroce's library directory (the 'lib' directory next to the 'bin'\n"
		"directory of this program) is put first in LD_LIBRARY_PATH and CMD is\n"
		"executed in place of uroce (searched for in PATH). Without '--', the\n"
		"first argument that is not an option is CMD.\n"
		"\n"
		"CMD and its children run in a private mount namespace (an unprivileged\n"
		"user namespace too when not root) where /sys/class/infiniband,\n"
		"/sys/class/infiniband_verbs and /dev/infiniband show uroce's devices,\n"
		"for programs that read them directly (NCCL, UCX, Open MPI); a helper\n"
		"process keeps hw_counters live. Where namespaces are not allowed, one\n"
		"warning is printed and CMD runs without that view.\n"
		"\n"
		"NCCL_GIN_TYPE is set to 0 when it is unset: NCCL 2.28.7-2.28.9 crash on\n"
		"devices that are not mlx5 otherwise (UROCE_LOG=info says so). For UCX,\n"
		"unless set: UCX_RC_VERBS_SEG_SIZE=8192 (whole packets per fragment) and,\n"
		"with N > 1 engine threads, UCX_IB_NUM_PATHS=N, UCX_MAX_RNDV_RAILS=N.\n"
		"\n"
		"options:\n"
		"  --netdev IF[,IF...]  set UROCE_NETDEV: expose only these interfaces\n"
		"                       (the first one is the first device)\n"
		"  --no-sysfs           no sysfs view (also UROCE_SYSFS=0)\n"
		"  --sysfs              the view is required: fail (125) without it\n"
		"                       (also UROCE_SYSFS=require)\n"
		"  -h, --help           print this help\n"
		"\n"
		"exit status: that of CMD (128+N when a signal N killed it, as the\n"
		"shell reports); 125 if uroce failed (bad usage, library not found,\n"
		"--sysfs without a view), 126 if CMD cannot be executed, 127 if CMD is\n"
		"not found.\n"
		"\n"
		"examples:\n"
		"  uroce run -- ibv_devinfo\n"
		"  uroce run --netdev lo ib_write_bw -d uroce_lo -x 0\n");
}

/* Sets name=value for CMD unless the user set name; says so (and why) at
 * UROCE_LOG=info. */
static void env_default(const char *name, const char *value, const char *why)
{
	if (getenv(name))
		return;
	setenv(name, value, 1);
	if (cli_log_info())
		fprintf(stderr, "uroce run: info: %s=%s (%s; set %s to override)\n", name, value, why,
			name);
}

/* UCX sets one RC QP per endpoint and device ("path"), and one QP is one
 * engine thread's work: with several engine threads per context (cores to
 * spare), UCX_IB_NUM_PATHS=N and UCX_MAX_RNDV_RAILS=N give each endpoint N
 * QPs, which uroce spreads over its N engine threads, and split each
 * rendezvous transfer over them (UCX 1.13: src/uct/ib/base/ib_iface.c
 * NUM_PATHS, src/ucp/wireup/select.c, one lane per path). osu_bw 1 MiB on
 * 16 cores: 2.6 GB/s with one path, 7.7 with 4 (docs/benchmarks.md). An
 * explicit setting wins. */
static void ucx_paths(void)
{
	cpu_set_t set;
	int cpus = 1, n;
	char v[16];

	CPU_ZERO(&set);
	if (!sched_getaffinity(0, sizeof(set), &set))
		cpus = CPU_COUNT(&set);
	n = uroce_env_engines(cpus, UROCE_MAX_ENGINES);
	if (n <= 1 || getenv("UCX_IB_NUM_PATHS"))
		return;
	snprintf(v, sizeof(v), "%d", n);
	if (!getenv("UCX_MAX_RNDV_RAILS") && !getenv("UCX_MAX_RNDV_LANES"))
		setenv("UCX_MAX_RNDV_RAILS", v, 1);
	env_default("UCX_IB_NUM_PATHS", v,
		    "one QP of each UCX endpoint per engine thread of a context");
}

/* UCX's rc_verbs cuts eager messages into segments of
 * UCX_RC_VERBS_SEG_SIZE, 8256 by default: 8 KiB and a 64-byte header room,
 * i.e. two full 4096-byte packets and a 64-byte third one, which costs
 * uroce a datagram of its own and ends the GSO run (a 32 KiB message: 5
 * SENDs, 14 packets). 8192 is a whole number of packets at every RoCE MTU
 * (1024, 2048, 4096). On 16 cores: MPI_Allreduce 256 KiB 263-290 -> 241-243
 * us, osu_latency 32 KiB 35 -> 28-30 us (docs/benchmarks.md). */
#define UCX_SEG_SIZE "8192"

int cmd_run(int argc, char **argv)
{
	const char *netdev = NULL, *env = getenv("UROCE_SYSFS");
	int sysfs = env && !strcmp(env, "0") ? 0 : env && !strcmp(env, "require") ? 2 : 1;
	char libdir[PATH_MAX], why[512];
	const char *old;
	char *path;
	size_t len;
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage_run(stdout);
			return 0;
		}
		if (!strcmp(a, "--netdev")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "uroce run: --netdev needs an argument\n");
				return RUN_EXIT_FAIL;
			}
			netdev = argv[++i];
			continue;
		}
		if (!strncmp(a, "--netdev=", 9)) {
			netdev = a + 9;
			continue;
		}
		if (!strcmp(a, "--no-sysfs") || !strcmp(a, "--sysfs")) {
			sysfs = a[2] == 'n' ? 0 : 2;
			continue;
		}
		if (a[0] == '-' && a[1]) {
			fprintf(stderr, "uroce run: unknown option '%s' (use '--' before CMD)\n\n", a);
			usage_run(stderr);
			return RUN_EXIT_FAIL;
		}
		break; /* first non-option: CMD */
	}
	if (i >= argc) {
		fprintf(stderr, "uroce run: no command given\n\n");
		usage_run(stderr);
		return RUN_EXIT_FAIL;
	}
	if (netdev && !*netdev) {
		fprintf(stderr, "uroce run: --netdev needs a non-empty interface list\n");
		return RUN_EXIT_FAIL;
	}

	if (cli_lib_dir(libdir, sizeof(libdir), 1))
		return RUN_EXIT_FAIL;

	old = getenv("LD_LIBRARY_PATH");
	len = strlen(libdir) + (old ? strlen(old) : 0) + 2;
	path = malloc(len);
	if (!path) {
		fprintf(stderr, "uroce run: out of memory\n");
		return RUN_EXIT_FAIL;
	}
	if (old && *old)
		snprintf(path, len, "%s:%s", libdir, old);
	else
		snprintf(path, len, "%s", libdir);
	if (setenv("LD_LIBRARY_PATH", path, 1) ||
	    (netdev && setenv("UROCE_NETDEV", netdev, 1))) {
		fprintf(stderr, "uroce run: setenv: %s\n", strerror(errno));
		free(path);
		return RUN_EXIT_FAIL;
	}
	free(path);

	/* NCCL 2.28.7-2.28.9 crash in ncclNetInit on any IB device that is not
	 * mlx5 (NVIDIA/nccl PR #1881, fixed in 2.29.2); GIN's IB back-ends need
	 * mlx5 anyway. An explicit setting wins. */
	env_default("NCCL_GIN_TYPE", "0", "NCCL 2.28.7-2.28.9 crash on devices that are not mlx5");
	ucx_paths();
	env_default("UCX_RC_VERBS_SEG_SIZE", UCX_SEG_SIZE, "eager fragments of whole packets");

	/* After UROCE_NETDEV is set: the view shows the devices CMD will see. */
	if (sysfs) {
		int r = run_view_enter(why, sizeof(why));

		if (r == -2 || (r && sysfs == 2)) {
			fprintf(stderr, "uroce run: no sysfs view of the uroce devices: %s\n", why);
			return RUN_EXIT_FAIL;
		}
		if (r)
			fprintf(stderr,
				"uroce run: warning: no sysfs view of the uroce devices (%s): programs "
				"that read /sys/class/infiniband or /dev/infiniband themselves (NCCL, "
				"UCX, Open MPI) will not find them; --no-sysfs or UROCE_SYSFS=0 "
				"silences this\n",
				why);
	}

	fflush(NULL);
	execvp(argv[i], argv + i);
	if (errno == ENOENT) {
		fprintf(stderr, "uroce run: %s: command not found\n", argv[i]);
		return RUN_EXIT_NOTFOUND;
	}
	fprintf(stderr, "uroce run: cannot execute %s: %s\n", argv[i], strerror(errno));
	return RUN_EXIT_NOEXEC;
}
