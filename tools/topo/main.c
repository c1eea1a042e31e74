/* uroce-topo: `uroce topo` as its own program, so that only it needs
 * libhwloc at run time (the uroce CLI and library run without it). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--usage")) {
		usage_topo(stdout);
		return 0;
	}
	return cmd_topo(argc, argv);
}
