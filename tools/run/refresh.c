/* hw_counters from the live counters: the helper of uroce run's view (see
 * run.h). Every open device context has a stat file
 * /dev/shm/uroce-<pid>-<n>.stat that its engine updates in place
 * (src/obs/counters.h). The helper maps each one as it appears (inotify),
 * so that when the file is removed at close it still holds the final
 * values; those go into a per-device base, so the hw_counters files only
 * grow, like a NIC's. While any context is open it sums every RUN_REFRESH_MS
 * and rewrites the files whose value changed; with none open it sleeps in
 * poll() until a file appears or the program exits. */
#include "run.h"
#include "stat/statfile.h"
#include "sysfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum src_state { SRC_PENDING, SRC_LIVE, SRC_IGNORED };

/* A stat file seen in /dev/shm. */
struct src {
	char name[NAME_MAX + 1];
	enum src_state state;
	int dev;                     /* index into nds while LIVE */
	pid_t pid;
	uint64_t seen_ns;            /* when it appeared (PENDING gives up after 2 s) */
	struct uroce_stat_file *map; /* while LIVE */
};

struct refresh {
	const struct uroce_netdev *nds;
	int ndev;
	struct src *srcs;
	int nsrc, cap;
	struct stat netns;                              /* our network namespace */
	struct uroce_counters base[UROCE_MAX_DEVS];     /* of contexts closed since */
	struct uroce_counters written[UROCE_MAX_DEVS];  /* what the files hold */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void add_block(struct uroce_counters *to, const struct uroce_counters *from)
{
	uint64_t *t = (uint64_t *)to;
	const uint64_t *f = (const uint64_t *)from;

	for (size_t k = 0; k < STATF_NCOUNTERS; k++)
		t[k] += __atomic_load_n(&f[k], __ATOMIC_RELAXED);
}

/* A context's counters: every engine thread's block. */
static void add(struct uroce_counters *to, const struct uroce_stat_file *f)
{
	add_block(to, &f->cnt);
	for (int i = 0; i < UROCE_MAX_ENGINES - 1; i++)
		add_block(to, &f->more[i]);
}

static int is_stat_name(const char *nm)
{
	size_t l = strlen(nm);

	return !strncmp(nm, UROCE_STAT_PREFIX, strlen(UROCE_STAT_PREFIX)) && l > 5 &&
	       !strcmp(nm + l - 5, ".stat");
}

static struct src *find(struct refresh *r, const char *nm)
{
	for (int i = 0; i < r->nsrc; i++)
		if (!strcmp(r->srcs[i].name, nm))
			return &r->srcs[i];
	return NULL;
}

/* A context is gone: its last values join the base. */
static void retire(struct refresh *r, struct src *s)
{
	if (s->state == SRC_LIVE) {
		add(&r->base[s->dev], s->map);
		munmap(s->map, sizeof(*s->map));
	}
	*s = r->srcs[--r->nsrc];
}

static void track(struct refresh *r, const char *nm)
{
	struct src *s = find(r, nm);

	if (s)
		retire(r, s); /* a new file under an old name */
	if (r->nsrc == r->cap) {
		int cap = r->cap ? 2 * r->cap : 64;
		struct src *n = realloc(r->srcs, (size_t)cap * sizeof(*n));

		if (!n)
			return;
		r->srcs = n;
		r->cap = cap;
	}
	s = &r->srcs[r->nsrc++];
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", nm);
	s->state = SRC_PENDING;
	s->seen_ns = now_ns();
}

/* Whether pid lives in our network namespace: uroce_lo of another one is
 * another device. Unknown (another user's process) counts as no. */
static int same_netns(const struct refresh *r, pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	return !stat(path, &st) && st.st_ino == r->netns.st_ino && st.st_dev == r->netns.st_dev;
}

static int alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno != ESRCH;
}

/* PENDING -> LIVE (mapped; a context on one of our devices) or IGNORED.
 * The file may still be empty, or its header not yet written. */
static void try_map(struct refresh *r, struct src *s)
{
	char path[PATH_MAX];
	struct uroce_stat_file *f;
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", UROCE_STAT_DIR, s->name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		s->state = SRC_IGNORED; /* gone already, or not ours to read */
		return;
	}
	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(*f)) {
		close(fd);
		goto later;
	}
	f = mmap(NULL, sizeof(*f), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED) {
		s->state = SRC_IGNORED;
		return;
	}
	if (__atomic_load_n(&f->magic, __ATOMIC_ACQUIRE) != UROCE_STAT_MAGIC) {
		munmap(f, sizeof(*f));
		goto later;
	}
	s->state = SRC_IGNORED;
	if (f->version != UROCE_STAT_VERSION || f->size != sizeof(*f) || !alive(f->pid) ||
	    !same_netns(r, f->pid)) {
		munmap(f, sizeof(*f));
		return;
	}
	for (int i = 0; i < r->ndev; i++)
		if (!strncmp(f->ibdev, r->nds[i].ibname, sizeof(f->ibdev))) {
			s->state = SRC_LIVE;
			s->dev = i;
			s->pid = f->pid;
			s->map = f;
			return;
		}
	munmap(f, sizeof(*f));
	return;
later:
	if (now_ns() - s->seen_ns > 2000000000ull)
		s->state = SRC_IGNORED;
}

static void scan(struct refresh *r)
{
	DIR *d = opendir(UROCE_STAT_DIR);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (is_stat_name(de->d_name) && !find(r, de->d_name))
			track(r, de->d_name);
	closedir(d);
}

/* After an inotify overflow: forget what is gone, track what is new. */
static void rescan(struct refresh *r)
{
	char path[PATH_MAX];
	struct stat st;

	for (int i = 0; i < r->nsrc;) {
		snprintf(path, sizeof(path), "%s/%s", UROCE_STAT_DIR, r->srcs[i].name);
		if (stat(path, &st))
			retire(r, &r->srcs[i]);
		else
			i++;
	}
	scan(r);
}

/* Sums and writes; returns whether any file is still worth polling. */
static int refresh(struct refresh *r)
{
	struct uroce_counters sum[UROCE_MAX_DEVS];
	int busy = 0;

	for (int i = 0; i < r->nsrc;) {
		struct src *s = &r->srcs[i];

		if (s->state == SRC_PENDING)
			try_map(r, s);
		/* A process killed by SIGKILL leaves its file behind. */
		if (s->state == SRC_LIVE && !alive(s->pid)) {
			retire(r, s);
			continue;
		}
		busy |= s->state != SRC_IGNORED;
		i++;
	}
	memcpy(sum, r->base, sizeof(sum));
	for (int i = 0; i < r->nsrc; i++)
		if (r->srcs[i].state == SRC_LIVE)
			add(&sum[r->srcs[i].dev], r->srcs[i].map);
	for (int d = 0; d < r->ndev; d++) {
		char dir[PATH_MAX];

		if (!memcmp(&sum[d], &r->written[d], sizeof(sum[d])))
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", UROCE_SYSFS_IB, r->nds[d].ibname);
		if (!uroce_sysfs_write_counters(dir, &sum[d], &r->written[d], RUN_REFRESH_MS))
			r->written[d] = sum[d];
	}
	return busy;
}

static void drain(struct refresh *r, int ifd)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t len;

	while ((len = read(ifd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				rescan(r);
				continue;
			}
			if (!ev->len || !is_stat_name(ev->name))
				continue;
			if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
				track(r, ev->name);
			} else if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
				struct src *s = find(r, ev->name);

				if (s)
					retire(r, s);
			}
		}
	}
}

void run_refresh(pid_t prog, int pidfd, const struct uroce_netdev *nds, int n)
{
	static struct refresh r; /* the base and sums: 2 x 16 devices x ~400 bytes */
	struct pollfd pfd[2];
	int ifd, busy;

	r.nds = nds;
	r.ndev = n;
	if (stat("/proc/self/ns/net", &r.netns))
		memset(&r.netns, 0, sizeof(r.netns));
	ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (ifd >= 0 &&
	    inotify_add_watch(ifd, UROCE_STAT_DIR, IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM) < 0) {
		close(ifd);
		ifd = -1;
	}
	scan(&r);
	busy = refresh(&r);
	for (;;) {
		int timeout = busy || ifd < 0 ? RUN_REFRESH_MS : -1;

		/* Without pidfd (Linux < 5.3), look for the program once a second. */
		if (pidfd < 0 && (timeout < 0 || timeout > 1000))
			timeout = 1000;
		pfd[0] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = ifd, .events = POLLIN };
		if (poll(pfd, 2, timeout) < 0 && errno != EINTR)
			break;
		if (pidfd >= 0 ? (pfd[0].revents & POLLIN) != 0 : !alive(prog))
			break;
		if (pfd[1].revents & POLLIN)
			drain(&r, ifd);
		else if (ifd < 0)
			rescan(&r);
		busy = refresh(&r);
	}
}
