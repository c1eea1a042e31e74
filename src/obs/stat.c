/* Live counter files in /dev/shm, removed at close and at exit. */
#include "stat.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define MAX_FILES 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *paths[MAX_FILES];
static atomic_uint seq;
static int atexit_done;

static void remove_all(void)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_FILES; i++) {
		if (paths[i]) {
			unlink(paths[i]);
			free(paths[i]);
			paths[i] = NULL;
		}
	}
	pthread_mutex_unlock(&lock);
}

static void remember(const char *path)
{
	pthread_mutex_lock(&lock);
	if (!atexit_done) {
		atexit(remove_all);
		atexit_done = 1;
	}
	for (int i = 0; i < MAX_FILES; i++) {
		if (!paths[i]) {
			paths[i] = strdup(path);
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

static void forget(const char *path)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_FILES; i++) {
		if (paths[i] && !strcmp(paths[i], path)) {
			free(paths[i]);
			paths[i] = NULL;
		}
	}
	pthread_mutex_unlock(&lock);
}

struct uroce_stat_file *uroce_stat_create(const char *ibdev, const char *ifname, char *path,
					  size_t pathlen)
{
	struct uroce_stat_file *f;
	struct timespec ts;
	int fd;

	if (getenv("UROCE_NO_STAT"))
		return NULL;
	snprintf(path, pathlen, "%s/%s%d-%u.stat", UROCE_STAT_DIR, UROCE_STAT_PREFIX, (int)getpid(),
		 atomic_fetch_add(&seq, 1));
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, sizeof(*f)) < 0) {
		close(fd);
		unlink(path);
		return NULL;
	}
	f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED) {
		unlink(path);
		return NULL;
	}
	memset(f, 0, sizeof(*f));
	f->version = UROCE_STAT_VERSION;
	f->size = sizeof(*f);
	f->pid = (int32_t)getpid();
	clock_gettime(CLOCK_REALTIME, &ts);
	f->start_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	snprintf(f->ibdev, sizeof(f->ibdev), "%s", ibdev);
	snprintf(f->ifname, sizeof(f->ifname), "%s", ifname);
	prctl(PR_GET_NAME, f->comm, 0, 0, 0);
	__atomic_store_n(&f->magic, UROCE_STAT_MAGIC, __ATOMIC_RELEASE);
	remember(path);
	return f;
}

void uroce_stat_destroy(struct uroce_stat_file *f, const char *path)
{
	if (!f)
		return;
	unlink(path);
	forget(path);
	munmap(f, sizeof(*f));
}
