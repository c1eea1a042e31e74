/* Stat files of running uroce processes: see statfile.h. */
#include "statfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *const statf_names[] = {
#define X(n, d) #n,
	UROCE_COUNTERS(X)
#undef X
};

const char *const statf_descs[] = {
#define X(n, d) d,
	UROCE_COUNTERS(X)
#undef X
};

_Static_assert(sizeof(statf_names) / sizeof(statf_names[0]) == STATF_NCOUNTERS,
	       "struct uroce_counters holds only the UROCE_COUNTERS");

int statf_index(const char *name)
{
	for (size_t k = 0; k < STATF_NCOUNTERS; k++)
		if (!strcmp(statf_names[k], name))
			return (int)k;
	return -1;
}

int statf_load(const char *path, struct uroce_stat_file *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	/* pread, not mmap: a file still being created (size 0) or one of an
	 * older, shorter layout would raise SIGBUS when mapped past its end */
	n = pread(fd, out, sizeof(*out), 0);
	close(fd);
	if (n != (ssize_t)sizeof(*out) || out->magic != UROCE_STAT_MAGIC ||
	    out->version != UROCE_STAT_VERSION || out->size != sizeof(*out))
		return -1;
	/* a snapshot's cnt is the whole context's: every engine thread's */
	uroce_stat_total(out, &out->cnt);
	memset(out->more, 0, sizeof(out->more));
	return 0;
}

int statf_wanted(const struct uroce_stat_file *f, const char *filter)
{
	char pid[16];

	if (!filter)
		return 1;
	snprintf(pid, sizeof(pid), "%d", f->pid);
	return !strcmp(filter, pid) || !strcmp(filter, f->ibdev);
}

int statf_scan(struct statf_src *srcs, int max, const char *filter)
{
	DIR *d = opendir(UROCE_STAT_DIR);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max) {
		struct statf_src *s = &srcs[n];

		if (strncmp(de->d_name, UROCE_STAT_PREFIX, strlen(UROCE_STAT_PREFIX)) ||
		    !strstr(de->d_name, ".stat"))
			continue;
		snprintf(s->path, sizeof(s->path), "%s/%s", UROCE_STAT_DIR, de->d_name);
		if (statf_load(s->path, &s->snap))
			continue;
		if (kill(s->snap.pid, 0) < 0 && errno == ESRCH) {
			unlink(s->path);
			continue;
		}
		if (!statf_wanted(&s->snap, filter))
			continue;
		s->have_prev = 0;
		n++;
	}
	closedir(d);
	return n;
}
