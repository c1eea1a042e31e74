/* uroce mpirun: Open MPI's mpirun with everything set for uroce (issue 13).
 *
 * What it adds to the user's mpirun arguments (docs/mpi.md has the why):
 *   - transport uroce: --mca pml ucx (Open MPI 4.1 lowers pml ucx's
 *     priority unless sysfs names an mlx driver), --mca btl ^openib,ofi,
 *     UCX_TLS=rc_v,self (rc_verbs with ud_verbs as its auxiliary transport;
 *     no posix/sysv/cma: UCX counts shared memory as reachable across
 *     network namespaces), UCX_UD_VERBS_RX_QUEUE_LEN_INIT=4096 and
 *     UCX_RNDV_SEND_NBR_THRESH=32768 (below),
 *     and every daemon and rank under `uroce run`
 *     (the sysfs and /dev view UCX needs): mpirun itself for the ranks it
 *     starts, and orte_launch_agent "<uroce> mpirun --daemon=uroce orted"
 *     for the daemons on the other hosts.
 *   - per host, UROCE_NETDEV (and UCX_NET_DEVICES for ucx-tcp) = that
 *     host's interface (the default route's, else the first with an IPv4
 *     address that is not loopback), unless the user set it: with uroce_lo
 *     also exposed, UCX 1.13 takes it as a second rail that every peer
 *     "reaches" (its RoCE reachability does not look at subnets), and sends
 *     to 127.0.0.1 of its own host.
 *   - every UROCE_* and UCX_* variable of the caller goes to every rank (-x).
 *   - --netns[=NS]: the hosts are network namespaces (ip netns). Remote
 *     daemons start through plm_rsh_agent "<uroce> mpirun --agent", which
 *     enters the namespace named by the host (and a UTS namespace whose
 *     hostname is that name, so that Open MPI's node names are the
 *     namespaces'), as `ip netns exec HOST sh -c "$*"` would; mpirun itself
 *     runs in namespace NS (default: the first host of --host/-H or of the
 *     hostfile), since the daemons connect back to it. --bind-to none
 *     unless given: the namespaces share the machine's cores.
 *   - --allow-run-as-root when run as root.
 *
 * Hidden modes (what Open MPI calls back):
 *   uroce mpirun --agent HOST WORD...     plm_rsh_agent of --netns
 *   uroce mpirun --daemon=T CMD [ARGS]    orte_launch_agent: per-host
 *                                         variables, then uroce run */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#define MPIRUN_EXIT_FAIL 125

/* The variables set per host by uroce mpirun (not by the user): a daemon
 * that inherits them from mpirun's host computes its own. */
#define AUTO_MARK "UROCE_MPIRUN_AUTO"

extern char **environ;

enum transport { T_UROCE, T_UCX_TCP, T_TCP };
static const char *tnames[] = {"uroce", "ucx-tcp", "tcp"};

void usage_mpirun(FILE *f)
{
	fprintf(f,
		"usage: uroce mpirun [--netns[=NS]] [--transport uroce|ucx-tcp|tcp]\n"
		"                    [--netdev IF[,IF...]] [--dry-run] [--] MPIRUN-ARGS... PROGRAM [ARGS...]\n"
		"\n"
		"Open MPI's mpirun with what uroce needs set: pml ucx on uroce's rc_verbs\n"
		"(UCX_TLS=rc_v,self), every rank and daemon under 'uroce run', each host's\n"
		"interface as its uroce device, and every UROCE_* and UCX_* variable of\n"
		"this environment passed to every rank. MPIRUN-ARGS are mpirun's own\n"
		"(-np, --host, --hostfile, --map-by, -x, --mca, ...); uroce mpirun's own\n"
		"options come first.\n"
		"\n"
		"options:\n"
		"  --netns[=NS]         the hosts are network namespaces (ip netns; root):\n"
		"                       daemons start in the namespace named by their host\n"
		"                       (hostname = that name); mpirun runs in NS (default:\n"
		"                       the first host of --host/-H or of the hostfile);\n"
		"                       --bind-to none unless given (one machine's cores)\n"
		"  --transport T        uroce (default): pml ucx, UCX_TLS=rc_v,self on uroce;\n"
		"                       ucx-tcp: pml ucx, UCX_TLS=tcp,self (no uroce);\n"
		"                       tcp: Open MPI's own TCP (pml ob1, btl tcp,self; no uroce)\n"
		"  --netdev IF[,IF...]  the interfaces to use on every host (UROCE_NETDEV,\n"
		"                       for ucx-tcp UCX_NET_DEVICES); default, per host: the\n"
		"                       default route's interface, else the first one with\n"
		"                       an IPv4 address that is not loopback, else lo\n"
		"  --dry-run            print the mpirun command line, run nothing\n"
		"  -h, --help           print this help\n"
		"\n"
		"environment:\n"
		"  MPIRUN               the mpirun program (default: mpirun)\n"
		"  UROCE_*, UCX_*       passed to every rank; UCX_TLS defaults as above\n"
		"\n"
		"Every host needs this uroce at the same path. Exit status: mpirun's;\n"
		"125 if uroce mpirun itself failed.\n"
		"\n"
		"examples:\n"
		"  uroce mpirun -np 4 ./allreduce                  # one host\n"
		"  uroce mpirun -np 4 --host node1:2,node2:2 ./allreduce\n"
		"  uroce mpirun --netns -np 4 --host nsa:2,nsb:2 ./allreduce\n"
		"  UROCE_LOSS=0.01 uroce mpirun --netns -np 4 --host nsa:2,nsb:2 python3 prog.py\n");
}

/* ------------------------------------------------------------ argv building */

struct argv {
	char **v;
	int n, cap;
};

static void av_add(struct argv *a, const char *s)
{
	if (a->n + 2 > a->cap) {
		a->cap = a->cap ? 2 * a->cap : 64;
		a->v = realloc(a->v, (size_t)a->cap * sizeof(*a->v));
		if (!a->v) {
			fprintf(stderr, "uroce mpirun: out of memory\n");
			exit(MPIRUN_EXIT_FAIL);
		}
	}
	a->v[a->n++] = strdup(s);
	a->v[a->n] = NULL;
}

static void print_quoted(FILE *f, char **v)
{
	for (int i = 0; v[i]; i++) {
		const char *s = v[i];
		int plain = *s != 0;

		for (const char *p = s; *p; p++)
			if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=/.,:@%^", *p))
				plain = 0;
		fputs(i ? " " : "", f);
		if (plain) {
			fputs(s, f);
			continue;
		}
		fputc('\'', f);
		for (const char *p = s; *p; p++)
			if (*p == '\'')
				fputs("'\\''", f);
			else
				fputc(*p, f);
		fputc('\'', f);
	}
	fputc('\n', f);
}

/* ------------------------------------------------------- per-host variables */

/* The interface of the default route (IPv4), into buf; 0 when found. */
static int default_route_if(char *buf, size_t n)
{
	FILE *f = fopen("/proc/net/route", "re");
	char line[512], ifn[64];
	unsigned long dst, mask;
	int found = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %lx %*x %*x %*d %*d %*d %lx", ifn, &dst, &mask) == 3 &&
		    dst == 0 && mask == 0 && strcmp(ifn, "lo")) {
			snprintf(buf, n, "%s", ifn);
			found = 0;
			break;
		}
	fclose(f);
	return found;
}

/* This host's interface for MPI traffic (see the usage). */
static void host_netdev(char *buf, size_t n)
{
	struct ifaddrs *ifa, *p;
	char dr[IF_NAMESIZE + 1] = "";
	int have_dr = !default_route_if(dr, sizeof(dr));

	snprintf(buf, n, "lo");
	if (getifaddrs(&ifa))
		return;
	for (p = ifa; p; p = p->ifa_next)
		if (have_dr && p->ifa_addr && p->ifa_addr->sa_family == AF_INET && !strcmp(p->ifa_name, dr)) {
			snprintf(buf, n, "%s", dr);
			freeifaddrs(ifa);
			return;
		}
	for (p = ifa; p; p = p->ifa_next)
		if (p->ifa_addr && p->ifa_addr->sa_family == AF_INET && !(p->ifa_flags & IFF_LOOPBACK) &&
		    (p->ifa_flags & IFF_UP)) {
			snprintf(buf, n, "%s", p->ifa_name);
			break;
		}
	freeifaddrs(ifa);
}

static int is_auto(const char *var)
{
	const char *m = getenv(AUTO_MARK);
	size_t l = strlen(var);

	for (; m && *m; m += strcspn(m, " "), m += strspn(m, " "))
		if (!strncmp(m, var, l) && (m[l] == ' ' || !m[l]))
			return 1;
	return 0;
}

/* Sets the per-host variables of transport t that the user did not set
 * (or that a daemon inherited from another host's uroce mpirun). */
static void set_host_vars(enum transport t)
{
	const char *vars[2] = {"UROCE_NETDEV", t == T_UCX_TCP ? "UCX_NET_DEVICES" : NULL};
	char nd[IF_NAMESIZE + 1], host[256] = "?", mark[128] = "";

	if (t == T_TCP)
		return; /* Open MPI's TCP BTL leaves loopback out by itself */
	host_netdev(nd, sizeof(nd));
	gethostname(host, sizeof(host) - 1);
	for (int i = 0; i < 2 && vars[i]; i++) {
		if (getenv(vars[i]) && !is_auto(vars[i]))
			continue;
		setenv(vars[i], nd, 1);
		snprintf(mark + strlen(mark), sizeof(mark) - strlen(mark), "%s%s", *mark ? " " : "", vars[i]);
		if (cli_log_info())
			fprintf(stderr, "uroce mpirun: info: host %s: %s=%s\n", host, vars[i], nd);
	}
	if (*mark)
		setenv(AUTO_MARK, mark, 1);
	else
		unsetenv(AUTO_MARK);
}

/* 1 if MPIRUN-ARGS set MCA parameter name themselves (--mca/-mca/--gmca
 * NAME VALUE) or the environment does (OMPI_MCA_NAME). */
static int user_sets_mca(int argc, char **argv, const char *name)
{
	char env[128];

	for (int k = 0; k + 1 < argc; k++)
		if ((!strcmp(argv[k], "--mca") || !strcmp(argv[k], "-mca") || !strcmp(argv[k], "--gmca") ||
		     !strcmp(argv[k], "-gmca")) &&
		    !strcmp(argv[k + 1], name))
			return 1;
	snprintf(env, sizeof(env), "OMPI_MCA_%s", name);
	return getenv(env) != NULL;
}

/* --netns: the hosts are this machine's network namespaces, not nodes of
 * a batch system's allocation. Under one, Open MPI's ras and plm
 * components see its variables (SLURM_JOBID, PBS_JOBID, LSB_JOBID,
 * PE_HOSTFILE) and take their node list, which holds none of the
 * namespaces ("All nodes which are allocated for this job are already
 * filled" for --host a:1,b:1). So mpirun does not get them. Returns how
 * many were dropped. */
static int drop_batch_env(void)
{
	static const char *const pfx[] = {"SLURM_", "PBS_", "LSB_", "PE_HOSTFILE=", "FLUX_"};
	int n = 0;
	char **e = environ;

	/* unsetenv() rewrites environ: after each removal, walk it again */
	while (*e) {
		size_t k = 0, l = strcspn(*e, "=");

		while (k < sizeof(pfx) / sizeof(pfx[0]) && strncmp(*e, pfx[k], strlen(pfx[k])))
			k++;
		if (k == sizeof(pfx) / sizeof(pfx[0]) || l >= 256) {
			e++;
			continue;
		}
		char name[256];

		snprintf(name, sizeof(name), "%.*s", (int)l, *e);
		unsetenv(name);
		n++;
		e = environ;
	}
	return n;
}

/* ------------------------------------------------------- network namespaces */

/* Moves this process into network namespace ns, as `ip netns exec` does
 * (a mount namespace of its own with /sys remounted, so that /sys/class/net
 * shows the namespace's interfaces), and into a UTS namespace whose
 * hostname is ns. */
static int enter_netns(const char *ns)
{
	char path[PATH_MAX];
	int fd;

	if (!*ns || strchr(ns, '/')) {
		fprintf(stderr, "uroce mpirun: bad namespace name '%s'\n", ns);
		return -1;
	}
	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0) {
		fprintf(stderr, "uroce mpirun: no network namespace '%s' (/run/netns/%s: %s; see ip netns list)\n",
			ns, ns, strerror(errno));
		return -1;
	}
	if (setns(fd, CLONE_NEWNET)) {
		fprintf(stderr, "uroce mpirun: setns into network namespace '%s': %s%s\n", ns, strerror(errno),
			errno == EPERM ? " (needs root)" : "");
		close(fd);
		return -1;
	}
	close(fd);
	if (unshare(CLONE_NEWNS | CLONE_NEWUTS)) {
		fprintf(stderr, "uroce mpirun: unshare(CLONE_NEWNS|CLONE_NEWUTS): %s\n", strerror(errno));
		return -1;
	}
	if (mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL))
		fprintf(stderr, "uroce mpirun: warning: mount --make-rslave /: %s\n", strerror(errno));
	if (umount2("/sys", MNT_DETACH) || mount(ns, "/sys", "sysfs", 0, NULL))
		fprintf(stderr, "uroce mpirun: warning: remounting /sys in namespace '%s': %s\n", ns,
			strerror(errno));
	if (sethostname(ns, strlen(ns)))
		fprintf(stderr, "uroce mpirun: warning: sethostname %s: %s\n", ns, strerror(errno));
	return 0;
}

/* plm_rsh_agent of --netns: HOST WORD... -> sh -c "WORD ..." in HOST. */
static int agent(int argc, char **argv)
{
	size_t len = 1;
	char *cmd;

	if (argc < 2) {
		fprintf(stderr, "uroce mpirun --agent: usage: HOST COMMAND...\n");
		return MPIRUN_EXIT_FAIL;
	}
	for (int i = 1; i < argc; i++)
		len += strlen(argv[i]) + 1;
	cmd = calloc(1, len);
	if (!cmd)
		return MPIRUN_EXIT_FAIL;
	for (int i = 1; i < argc; i++) {
		strcat(cmd, argv[i]);
		if (i + 1 < argc)
			strcat(cmd, " ");
	}
	if (enter_netns(argv[0]))
		return MPIRUN_EXIT_FAIL;
	fflush(NULL);
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	fprintf(stderr, "uroce mpirun --agent: /bin/sh: %s\n", strerror(errno));
	return MPIRUN_EXIT_FAIL;
}

/* Runs argv (NULL-terminated) under uroce run (t == T_UROCE), else as is. */
static int exec_under(enum transport t, char **argv)
{
	if (t == T_UROCE) {
		struct argv r = {0};

		av_add(&r, "run");
		av_add(&r, "--");
		for (int i = 0; argv[i]; i++)
			av_add(&r, argv[i]);
		return cmd_run(r.n, r.v); /* execs, or returns its error status */
	}
	fflush(NULL);
	execvp(argv[0], argv);
	fprintf(stderr, "uroce mpirun: cannot execute %s: %s\n", argv[0], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

static int parse_transport(const char *s, enum transport *t)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, tnames[i])) {
			*t = (enum transport)i;
			return 0;
		}
	fprintf(stderr, "uroce mpirun: unknown transport '%s' (uroce, ucx-tcp, tcp)\n", s);
	return -1;
}

/* orte_launch_agent: per-host variables, then CMD under uroce run. */
static int daemon_mode(enum transport t, int argc, char **argv)
{
	if (argc < 1) {
		fprintf(stderr, "uroce mpirun --daemon: no command\n");
		return MPIRUN_EXIT_FAIL;
	}
	set_host_vars(t);
	return exec_under(t, argv);
}

/* ------------------------------------------------------------- first host */

static void first_of_list(const char *list, char *buf, size_t n)
{
	size_t l = strcspn(list, ",: \t\n");

	snprintf(buf, n, "%.*s", (int)(l < n ? l : n - 1), list);
}

static int first_of_file(const char *file, char *buf, size_t n)
{
	FILE *f = fopen(file, "re");
	char line[1024];

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *s = line + strspn(line, " \t");

		if (*s == '#' || *s == '\n' || !*s)
			continue;
		first_of_list(s, buf, n);
		fclose(f);
		return 0;
	}
	fclose(f);
	return -1;
}

/* The first host named by mpirun's --host/-H or --hostfile/--machinefile. */
static int first_host(int argc, char **argv, char *buf, size_t n)
{
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		int file = 0;

		if (!strcmp(a, "--host") || !strcmp(a, "-host") || !strcmp(a, "-H"))
			v = i + 1 < argc ? argv[i + 1] : NULL;
		else if (!strncmp(a, "--host=", 7))
			v = a + 7;
		else if (!strcmp(a, "--hostfile") || !strcmp(a, "-hostfile") || !strcmp(a, "--machinefile") ||
			 !strcmp(a, "-machinefile") || !strcmp(a, "--default-hostfile"))
			v = i + 1 < argc ? argv[i + 1] : NULL, file = 1;
		if (!v)
			continue;
		if (!file) {
			first_of_list(v, buf, n);
			return *buf ? 0 : -1;
		}
		return first_of_file(v, buf, n);
	}
	return -1;
}

/* ------------------------------------------------------------------- main */

int cmd_mpirun(int argc, char **argv)
{
	enum transport t = T_UROCE;
	const char *netns = NULL, *netdev = NULL, *mpirun = getenv("MPIRUN");
	char self[PATH_MAX], hnp[256], buf[PATH_MAX + 64];
	int i, dry = 0, netns_mode = 0;
	struct argv m = {0};

	if (argc >= 2 && !strcmp(argv[1], "--agent"))
		return agent(argc - 2, argv + 2);
	if (argc >= 2 && !strncmp(argv[1], "--daemon=", 9)) {
		if (parse_transport(argv[1] + 9, &t))
			return MPIRUN_EXIT_FAIL;
		return daemon_mode(t, argc - 2, argv + 2);
	}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage_mpirun(stdout);
			return 0;
		}
		if (!strcmp(a, "--dry-run")) {
			dry = 1;
		} else if (!strcmp(a, "--netns")) {
			netns_mode = 1;
		} else if (!strncmp(a, "--netns=", 8)) {
			netns_mode = 1;
			netns = a + 8;
		} else if (!strcmp(a, "--transport") || !strcmp(a, "--netdev")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "uroce mpirun: %s needs an argument\n", a);
				return MPIRUN_EXIT_FAIL;
			}
			if (a[2] == 't' && parse_transport(argv[i + 1], &t))
				return MPIRUN_EXIT_FAIL;
			if (a[2] == 'n')
				netdev = argv[i + 1];
			i++;
		} else if (!strncmp(a, "--transport=", 12)) {
			if (parse_transport(a + 12, &t))
				return MPIRUN_EXIT_FAIL;
		} else if (!strncmp(a, "--netdev=", 9)) {
			netdev = a + 9;
		} else {
			break; /* mpirun's arguments from here on */
		}
	}
	if (i >= argc) {
		fprintf(stderr, "uroce mpirun: no mpirun arguments (at least the program)\n\n");
		usage_mpirun(stderr);
		return MPIRUN_EXIT_FAIL;
	}
	if (netdev && *netdev) {
		setenv("UROCE_NETDEV", netdev, 1);
		if (t == T_UCX_TCP)
			setenv("UCX_NET_DEVICES", netdev, 1);
	}
	if (netns_mode && !netns) {
		if (first_host(argc - i, argv + i, hnp, sizeof(hnp))) {
			fprintf(stderr, "uroce mpirun: --netns: no --host/-H or --hostfile to take mpirun's "
					"namespace from (or name it: --netns=NS)\n");
			return MPIRUN_EXIT_FAIL;
		}
		netns = hnp;
	}
	if (!realpath("/proc/self/exe", self)) {
		fprintf(stderr, "uroce mpirun: cannot resolve /proc/self/exe: %s\n", strerror(errno));
		return MPIRUN_EXIT_FAIL;
	}
	if (t == T_UROCE && !dry && cli_lib_dir(buf, sizeof(buf), 1))
		return MPIRUN_EXIT_FAIL;

	av_add(&m, mpirun && *mpirun ? mpirun : "mpirun");
	if (geteuid() == 0)
		av_add(&m, "--allow-run-as-root");
	switch (t) {
	case T_UROCE:
	case T_UCX_TCP:
		av_add(&m, "--mca");
		av_add(&m, "pml");
		av_add(&m, "ucx");
		av_add(&m, "--mca");
		av_add(&m, "btl");
		av_add(&m, "^openib,ofi");
		/* pml ucx's own checks: a device whose driver is not mlx* keeps
		 * its priority below ob1 (forced above anyway), and a transport
		 * not in pml_ucx_tls (rc_verbs, ud_verbs, mlx5...) disqualifies
		 * it: "any" for UCX's tcp */
		av_add(&m, "--mca");
		av_add(&m, "pml_ucx_devices");
		av_add(&m, "any");
		/* MPI one-sided (MPI_Put, MPI_Get, MPI_Accumulate, ...) over
		 * UCX, hence over uroce's WRITE, READ and atomics. Debian's
		 * openmpi-mca-params.conf has "osc = ^ucx,pt2pt", which leaves
		 * osc rdma on Open MPI's BTLs: between namespaces
		 * MPI_Win_allocate then fails, and on one host (vader)
		 * MPI_Compare_and_swap crashes (Open MPI 4.1.4, seen here;
		 * tests/mpi/rma_check.c). */
		if (!user_sets_mca(argc - i, argv + i, "osc")) {
			av_add(&m, "--mca");
			av_add(&m, "osc");
			av_add(&m, "ucx");
		}
		if (t == T_UCX_TCP) {
			av_add(&m, "--mca");
			av_add(&m, "pml_ucx_tls");
			av_add(&m, "any");
		}
		if (!getenv("UCX_TLS"))
			setenv("UCX_TLS", t == T_UROCE ? "rc_v,self" : "tcp,self", 1);
		/* UCX 1.13's UD (the auxiliary transport that wires RC up)
		 * asserts or crashes when datagrams of a connection being set
		 * up are lost and an endpoint id is reused (openucx/ucx#8743,
		 * #11107, fixed in 1.20); with 128 receives posted at first,
		 * an all-to-all wire-up of 8 ranks overflows them. */
		if (t == T_UROCE && !getenv("UCX_UD_VERBS_RX_QUEUE_LEN_INIT"))
			setenv("UCX_UD_VERBS_RX_QUEUE_LEN_INIT", "4096", 1);
		/* A blocking send (pml ucx: ucp_tag_send_nbr) goes eager in
		 * 8 KiB bcopy fragments up to UCX_RNDV_SEND_NBR_THRESH (256
		 * KiB); on uroce each fragment is a SEND with its own turn,
		 * completion and two copies, which a NIC hides and a software
		 * engine cannot. Rendezvous (one READ) from 32 KiB: 2-rank
		 * allreduce 128 KiB 243 -> 181 us, 256 KiB 470 -> 276
		 * (docs/design.md, "MPI over UCX"). */
		if (t == T_UROCE && !getenv("UCX_RNDV_SEND_NBR_THRESH"))
			setenv("UCX_RNDV_SEND_NBR_THRESH", "32768", 1);
		break;
	case T_TCP:
		av_add(&m, "--mca");
		av_add(&m, "pml");
		av_add(&m, "ob1");
		av_add(&m, "--mca");
		av_add(&m, "btl");
		av_add(&m, "tcp,self");
		av_add(&m, "--mca");
		av_add(&m, "osc");
		av_add(&m, "^ucx");
		break;
	}
	if (t != T_TCP) {
		snprintf(buf, sizeof(buf), "%s mpirun --daemon=%s orted", self, tnames[t]);
		av_add(&m, "--mca");
		av_add(&m, "orte_launch_agent");
		av_add(&m, buf);
	}
	if (netns_mode) {
		int bind = 0, dropped = drop_batch_env();

		if (dropped && cli_log_info())
			fprintf(stderr, "uroce mpirun: info: --netns: %d batch-system variable%s "
					"(SLURM_*, PBS_*, LSB_*, PE_HOSTFILE, FLUX_*) left out of mpirun's environment\n",
				dropped, dropped == 1 ? "" : "s");

		/* Every "host" shares this machine's cores: each daemon would
		 * bind its first rank to core 0, and ranks of two namespaces
		 * would take turns on one core (a ping-pong of 4 ms, the
		 * scheduler's tick). */
		for (int k = i; k < argc; k++)
			bind |= !strcmp(argv[k], "--bind-to") || !strcmp(argv[k], "-bind-to");
		if (!bind) {
			av_add(&m, "--bind-to");
			av_add(&m, "none");
		}
		snprintf(buf, sizeof(buf), "%s mpirun --agent", self);
		av_add(&m, "--mca");
		av_add(&m, "plm_rsh_agent");
		av_add(&m, buf);
		/* the launcher that uses that agent, whatever the environment
		 * chose: containers often set OMPI_MCA_plm=isolated (no remote
		 * launches; the GPU machine does), and Open MPI then maps every
		 * rank to this one "node": "not enough slots available" */
		av_add(&m, "--mca");
		av_add(&m, "plm");
		av_add(&m, "rsh");
	}
	/* the caller's UROCE_* and UCX_* to every rank (the per-host ones are
	 * each host's own: set below and by every daemon) */
	for (char **e = environ; *e; e++) {
		size_t l = strcspn(*e, "=");

		if ((!strncmp(*e, "UROCE_", 6) || !strncmp(*e, "UCX_", 4)) && (*e)[l] == '=') {
			snprintf(buf, sizeof(buf), "%.*s", (int)l, *e);
			if (!strcmp(buf, AUTO_MARK) || is_auto(buf))
				continue;
			av_add(&m, "-x");
			av_add(&m, buf);
		}
	}
	for (; i < argc; i++)
		av_add(&m, argv[i]);

	if (dry) {
		if (netns_mode)
			printf("# in network namespace %s, hostname %s%s:\n", netns, netns,
			       t == T_UROCE ? ", under uroce run" : "");
		else if (t == T_UROCE)
			printf("# under uroce run:\n");
		print_quoted(stdout, m.v);
		return 0;
	}
	if (netns_mode && enter_netns(netns))
		return MPIRUN_EXIT_FAIL;
	set_host_vars(t);
	return exec_under(t, m.v);
}
