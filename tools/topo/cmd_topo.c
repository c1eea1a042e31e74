/* `uroce topo` runs <libexec>/uroce-topo (linked with hwloc), so the CLI
 * itself does not need libhwloc. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int topo_path(char *buf, size_t len)
{
	char lib[PATH_MAX];

	if (cli_lib_dir(lib, sizeof(lib), 0))
		return -1;
	/* lib is <prefix>/lib; the helper is <prefix>/libexec/uroce-topo */
	snprintf(buf, len, "%s/../libexec/uroce-topo", lib);
	return 0;
}

int cmd_topo(int argc, char **argv)
{
	char path[PATH_MAX + 32];

	if (topo_path(path, sizeof(path)))
		return 1;
	argv[0] = (char *)"topo";
	execv(path, argv);
	fprintf(stderr, "uroce topo: cannot run %s: %s (build it with make; it needs libhwloc)\n",
		path, strerror(errno));
	(void)argc;
	return 127;
}

void usage_topo(FILE *f)
{
	char path[PATH_MAX + 32];

	fflush(f);
	if (!topo_path(path, sizeof(path))) {
		char *args[] = { path, (char *)"--usage", NULL };
		pid_t pid = fork();

		if (pid == 0) {
			if (f == stderr)
				dup2(2, 1);
			execv(path, args);
			_exit(127);
		}
		if (pid > 0) {
			int st;

			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			return;
		}
	}
	fprintf(f, "usage: uroce topo [--input FILE.xml] [--json] [--svg FILE]\n");
}
