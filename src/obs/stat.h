/* Live counter files (see counters.h). */
#ifndef UROCE_STAT_H
#define UROCE_STAT_H

#include <stddef.h>

#include "counters.h"

/* Creates and maps a stat file for one open device; NULL if /dev/shm is
 * not usable (counters then live in private memory). */
struct uroce_stat_file *uroce_stat_create(const char *ibdev, const char *ifname, char *path,
					  size_t pathlen);
void uroce_stat_destroy(struct uroce_stat_file *f, const char *path);

#endif
