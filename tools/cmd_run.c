/* uroce run: exec a verbs program with uroce's libibverbs.so.1 first in
 * LD_LIBRARY_PATH. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
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
		"usage: uroce run [--netdev IF[,IF...]] [--] CMD [ARGS...]\n"
		"\n"
		"Run CMD, any dynamically linked program that uses libibverbs, on uroce:\n"
		"uroce's library directory (the 'lib' directory next to the 'bin'\n"
		"directory of this program) is put first in LD_LIBRARY_PATH and CMD is\n"
		"executed in place of uroce (searched for in PATH). Without '--', the\n"
		"first argument that is not an option is CMD.\n"
		"\n"
		"options:\n"
		"  --netdev IF[,IF...]  set UROCE_NETDEV: expose only these interfaces\n"
		"                       (the first one is the first device)\n"
		"  -h, --help           print this help\n"
		"\n"
		"exit status: that of CMD; 125 if uroce failed (bad usage, library not\n"
		"found), 126 if CMD cannot be executed, 127 if CMD is not found.\n"
		"\n"
		"examples:\n"
		"  uroce run -- ibv_devinfo\n"
		"  uroce run --netdev lo ib_write_bw -d uroce_lo -x 0\n");
}

int cmd_run(int argc, char **argv)
{
	const char *netdev = NULL;
	char libdir[PATH_MAX];
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

	fflush(NULL);
	execvp(argv[i], argv + i);
	if (errno == ENOENT) {
		fprintf(stderr, "uroce run: %s: command not found\n", argv[i]);
		return RUN_EXIT_NOTFOUND;
	}
	fprintf(stderr, "uroce run: cannot execute %s: %s\n", argv[i], strerror(errno));
	return RUN_EXIT_NOEXEC;
}
