/* Stat files of running uroce processes (/dev/shm/uroce-<pid>-<n>.stat,
 * src/obs/counters.h): finding, validating and reading them. Shared by
 * `uroce stat` (cmd_stat.c) and `uroce doctor --counters`. */
#ifndef UROCE_STATFILE_H
#define UROCE_STATFILE_H

#include "counters.h"

#include <stddef.h>
#include <stdint.h>

/* Names and descriptions of the counters, in the order of
 * struct uroce_counters (the X-macro UROCE_COUNTERS). */
extern const char *const statf_names[];
extern const char *const statf_descs[];
#define STATF_NCOUNTERS (sizeof(struct uroce_counters) / sizeof(uint64_t))
#define STATF_MAX 256

struct statf_src {
	char path[300];
	struct uroce_stat_file snap;
	uint64_t prev[STATF_NCOUNTERS];
	int have_prev;
};

/* Copies the stat file at path into out after checking magic, version
 * and size; -1 when it cannot be read or is not one. */
int statf_load(const char *path, struct uroce_stat_file *out);
/* Whether f is the process filter names (a PID or a device); NULL: all. */
int statf_wanted(const struct uroce_stat_file *f, const char *filter);
/* Finds live stat files (have_prev cleared); files of processes that died
 * are removed when we may (the process cannot do it after SIGKILL). */
int statf_scan(struct statf_src *srcs, int max, const char *filter);
/* Index of a counter by name, or -1. */
int statf_index(const char *name);

#endif
