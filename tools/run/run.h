/* uroce run (tools/run/): executes a program on uroce, by default inside a
 * private mount namespace where /sys/class/infiniband, infiniband_verbs
 * and /dev/infiniband show uroce's devices (docs/design.md, "The sysfs
 * view"). A helper process made for the purpose builds the namespace, the
 * program's process joins it and becomes the program (same pid, its exit
 * status and signals are the program's own), and the helper stays behind,
 * outside the program's process tree, to keep hw_counters live. */
#ifndef UROCE_RUN_H
#define UROCE_RUN_H

#include <stddef.h>
#include <sys/types.h>

#include "net.h"

/* How often the helper refreshes hw_counters while a context is open. */
#define RUN_REFRESH_MS 200

/* view.c: builds the view in a helper process and moves this process
 * (single-threaded, about to exec) into it. 0: done, or this process is in
 * such a view already; -1: no view, with a one-line reason in why (this
 * process is then unchanged); -2: the view was made but joining it failed
 * half way (an error: do not run the program). */
int run_view_enter(char *why, size_t n);

/* refresh.c: the helper's loop, in the view. Sums the live counters of
 * every context open on the view's devices in this network namespace
 * (/dev/shm/uroce-*.stat of all processes) into their hw_counters files,
 * and returns when the program exits: pid prog, watched through pidfd
 * (a pidfd_open() descriptor; -1: kill(prog, 0) once a second instead). */
void run_refresh(pid_t prog, int pidfd, const struct uroce_netdev *nds, int n);

#endif
