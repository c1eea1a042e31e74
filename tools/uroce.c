/* uroce: command-line front end of the uroce userspace RoCEv2 stack.
 *
 *   uroce [help [COMMAND]]
 *   uroce version
 *   uroce run [--netdev IF[,IF...]] [--] CMD [ARGS...]
 *   uroce mpirun [--netns[=NS]] [--transport T] [--] MPIRUN-ARGS...
 *   uroce status [--json]
 *   uroce demo [--iters N] [--size BYTES]
 *   uroce topo [--input FILE.xml] [--json] [--svg FILE]
 *   uroce doctor [--root DIR] [--netdev IF[,IF...]] [--peer-mtu N] [--json]
 *   uroce doctor --counters [--interval S] [--json] [PID|DEVICE]
 *   uroce stat [--json] [-a] [-i SECONDS [-n COUNT]] [PID|DEVICE]
 *   uroce trace [-w FILE] [--explain [--json]] [--html FILE] [OPTIONS] [-- CMD [ARGS...]]
 *   uroce model allreduce [OPTIONS] | model calibrate [OPTIONS]
 */
#include "cli.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"uroce %s - userspace RoCEv2 RDMA stack (drop-in libibverbs.so.1)\n"
		"\n"
		"usage: uroce COMMAND [OPTIONS]\n"
		"\n"
		"commands:\n"
		"  run [--netdev IF[,IF...]] [--no-sysfs | --sysfs] [--] CMD [ARGS...]\n"
		"                 run any dynamically linked verbs program on uroce\n"
		"                 (prepends uroce's library directory to LD_LIBRARY_PATH),\n"
		"                 with uroce's devices in /sys/class/infiniband and /dev\n"
		"  mpirun [--netns[=NS]] [--transport uroce|ucx-tcp|tcp] [--] MPIRUN-ARGS...\n"
		"                 Open MPI's mpirun over UCX on uroce, every rank under\n"
		"                 uroce run; --netns: hosts are network namespaces\n"
		"  status [--json]\n"
		"                 show devices, ports and GID tables (like ibstat)\n"
		"  demo [--iters N] [--size BYTES] | demo --gpu\n"
		"                 two processes on loopback: WRITE, READ, SEND, IMM and\n"
		"                 atomic checks, then bandwidth and latency tables;\n"
		"                 --gpu: a GPU-to-GPU RDMA WRITE (needs an NVIDIA GPU)\n"
		"  topo [--input FILE.xml] [--json] [--svg FILE]\n"
		"                 GPUs, NICs and the PCIe/NVLink paths between them\n"
		"                 (like nvidia-smi topo -m), GPUDirect RDMA verdicts\n"
		"  doctor [--root DIR] [--netdev IF[,IF...]] [--peer-mtu N] [--json]\n"
		"                 check MTU, GIDs, ECN, peer memory, IOMMU, ACS, PCIe\n"
		"                 links, NUMA, governor, socket buffers, drops\n"
		"  doctor --counters [--interval S] [--json] [PID|DEVICE]\n"
		"                 explain the live counters of running processes:\n"
		"                 losses, RNR, timeouts, ICRC, drops, ECN\n"
		"  stat [--json] [-a] [-i SECONDS [-n COUNT]] [PID|DEVICE]\n"
		"                 live counters of running uroce processes\n"
		"  trace [-w FILE] [--explain [--json]] [--] [CMD [ARGS...]]\n"
		"                 capture CMD's RoCEv2 packets to a pcap file, or explain\n"
		"                 one work request step by step (no CMD: a built-in WRITE);\n"
		"                 --html FILE: the data path as a page (lanes, packets)\n"
		"  model allreduce [--nodes N] [--bytes SIZE] [--transport T] [--seed-case] ...\n"
		"                 all-reduce time on a GPU cluster: latency, network, staging\n"
		"                 copies, per transport (tcp, roce, gdr) and algorithm\n"
		"  model calibrate  refresh the model's calibration from this host\n"
		"  version        print the version\n"
		"  help [COMMAND] print this help, or the help of COMMAND\n"
		"\n"
		"environment:\n"
		"  UROCE_NETDEV=IF[,IF...]  network interfaces to expose as devices\n"
		"                           uroce_<IF> (default: every usable interface;\n"
		"                           the first named is the first device)\n"
		"  UROCE_LOG=LEVEL          library log level: error, warn (default),\n"
		"                           info or debug (to stderr)\n"
		"\n"
		"Run 'uroce help COMMAND' or 'uroce COMMAND --help' for details.\n",
		UROCE_VERSION);
}

int cli_log_info(void)
{
	const char *lv = getenv("UROCE_LOG");

	return lv && (!strcmp(lv, "info") || !strcmp(lv, "debug"));
}

int cli_lib_dir(char *buf, size_t len, int must_exist)
{
	char exe[PATH_MAX];
	char *dir;
	int n;

	if (!realpath("/proc/self/exe", exe)) {
		fprintf(stderr, "uroce: cannot resolve /proc/self/exe: %s\n", strerror(errno));
		return -1;
	}
	dir = dirname(exe);     /* .../bin */
	dir = dirname(dir);     /* .../    */
	n = snprintf(buf, len, "%s/lib", strcmp(dir, "/") ? dir : "");
	if (n < 0 || (size_t)n >= len) {
		fprintf(stderr, "uroce: library path too long\n");
		return -1;
	}
	if (must_exist) {
		char lib[PATH_MAX + 32];

		snprintf(lib, sizeof(lib), "%s/libibverbs.so.1", buf);
		if (access(lib, R_OK) != 0) {
			fprintf(stderr,
				"uroce: uroce library not found: %s: %s\n"
				"uroce: expected the 'lib' directory next to the 'bin' directory "
				"holding this program (run 'make' first?)\n",
				lib, strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int cmd_version(void)
{
	char dir[PATH_MAX];
	char lib[PATH_MAX + 32];

	printf("uroce %s\n", UROCE_VERSION);
	printf("libibverbs ABI: Debian 12 rdma-core 44 (libibverbs.so.1, IBVERBS_1.14)\n");
	if (cli_lib_dir(dir, sizeof(dir), 0) == 0) {
		snprintf(lib, sizeof(lib), "%s/libibverbs.so.1", dir);
		printf("library: %s%s\n", lib, access(lib, R_OK) ? " (missing)" : "");
	}
	return 0;
}

static int help_for(const char *cmd)
{
	if (!strcmp(cmd, "run"))
		usage_run(stdout);
	else if (!strcmp(cmd, "mpirun"))
		usage_mpirun(stdout);
	else if (!strcmp(cmd, "status"))
		usage_status(stdout);
	else if (!strcmp(cmd, "demo"))
		usage_demo(stdout);
	else if (!strcmp(cmd, "stat"))
		usage_stat(stdout);
	else if (!strcmp(cmd, "trace"))
		usage_trace(stdout);
	else if (!strcmp(cmd, "topo"))
		usage_topo(stdout);
	else if (!strcmp(cmd, "doctor"))
		usage_doctor(stdout);
	else if (!strcmp(cmd, "model"))
		usage_model(stdout);
	else if (!strcmp(cmd, "version"))
		printf("usage: uroce version\n\nPrint the version of uroce and where its library is.\n");
	else if (!strcmp(cmd, "help"))
		usage(stdout);
	else {
		fprintf(stderr, "uroce: unknown command '%s'\n", cmd);
		return CLI_EXIT_USAGE;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2) {
		usage(stdout);
		return 0;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		if (argc > 2)
			return help_for(argv[2]);
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version") || !strcmp(cmd, "-V"))
		return cmd_version();
	if (!strcmp(cmd, "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(cmd, "mpirun"))
		return cmd_mpirun(argc - 1, argv + 1);
	if (!strcmp(cmd, "status"))
		return cmd_status(argc - 1, argv + 1);
	if (!strcmp(cmd, "demo"))
		return cmd_demo(argc - 1, argv + 1);
	if (!strcmp(cmd, "topo"))
		return cmd_topo(argc - 1, argv + 1);
	if (!strcmp(cmd, "doctor"))
		return cmd_doctor(argc - 1, argv + 1);
	if (!strcmp(cmd, "stat"))
		return cmd_stat(argc - 1, argv + 1);
	if (!strcmp(cmd, "trace"))
		return cmd_trace(argc - 1, argv + 1);
	if (!strcmp(cmd, "model"))
		return cmd_model(argc - 1, argv + 1);

	fprintf(stderr, "uroce: unknown command '%s'\n\n", cmd);
	usage(stderr);
	return CLI_EXIT_USAGE;
}
