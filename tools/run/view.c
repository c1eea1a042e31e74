/* The sysfs view of uroce run: a private mount namespace (inside an
 * unprivileged user namespace when not root) whose /sys/class and /dev show
 * uroce's devices. See run.h and docs/design.md, "The sysfs view".
 *
 * Who does what:
 *   P, the uroce run process, forks I, which forks H and exits, so that H is
 *   not a child of the program P becomes (programs that wait for all their
 *   children would wait for it).
 *   H unshares the namespaces, mounts, writes the device files, and sends P
 *   the namespace descriptors ("O") or the reason it failed ("E").
 *   P joins with setns() and tells H ("J"); H then detaches (setsid, stdio
 *   on /dev/null) and keeps hw_counters live until P's program exits.
 * Everything that can fail happens in H, so a failure leaves P as it was. */
#include "run.h"
#include "sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define MSG_MAX 512

struct err {
	char *buf;
	size_t n;
};

static int fail(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct err *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->buf, e->n, fmt, ap);
	va_end(ap);
	return -1;
}

static int exists_dir(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* A view made by an outer uroce run: its /sys/class/infiniband is ours. */
static int in_view(void)
{
	struct statfs sf;

	return !statfs(UROCE_SYSFS_IB, &sf) && sf.f_type == TMPFS_MAGIC;
}

static long read_long(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* Why an unprivileged user namespace was refused, as far as we can tell. */
static const char *userns_hint(void)
{
	if (read_long("/proc/sys/kernel/unprivileged_userns_clone") == 0)
		return "; sysctl kernel.unprivileged_userns_clone=0";
	if (read_long("/proc/sys/user/max_user_namespaces") == 0)
		return "; sysctl user.max_user_namespaces=0";
	if (read_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1)
		return "; sysctl kernel.apparmor_restrict_unprivileged_userns=1";
	return "; a seccomp filter or container may forbid it";
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t len = (ssize_t)strlen(text), w;

	if (fd < 0)
		return -1;
	w = write(fd, text, (size_t)len);
	close(fd);
	return w == len ? 0 : -1;
}

/* New namespaces for H: the mount namespace alone as root, else inside a
 * user namespace that maps our own uid and gid to themselves. */
static int make_ns(int *userns, struct err *e)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char map[64];
	int err;

	*userns = 0;
	if (uid == 0 && !unshare(CLONE_NEWNS))
		goto mounts;
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS)) {
		err = errno;
		return fail(e, "unshare(CLONE_NEWUSER|CLONE_NEWNS): %s%s", strerror(err),
			    err == EPERM || err == ENOSPC || err == EINVAL || err == ENOSYS ?
				    userns_hint() :
				    "");
	}
	*userns = 1;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if (write_file("/proc/self/uid_map", map))
		return fail(e, "writing uid_map: %s", strerror(errno));
	if (write_file("/proc/self/setgroups", "deny") && errno != ENOENT)
		return fail(e, "writing setgroups: %s", strerror(errno));
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (write_file("/proc/self/gid_map", map))
		return fail(e, "writing gid_map: %s", strerror(errno));
mounts:
	/* Slave, not private: mounts the host makes later (a netns bind under
	 * /run/netns, a USB stick) still reach us, ours never leave. */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL)) {
		err = errno;
		return fail(e, "making / a slave mount: %s%s", strerror(err),
			    *userns && err == EPERM ? userns_hint() : "");
	}
	return 0;
}

static int tmpfs_on(const char *dir, unsigned long flags, struct err *e)
{
	if (mount("uroce", dir, "tmpfs", flags, "mode=0755,size=4m")) {
		int err = errno;

		return fail(e, "mounting a tmpfs on %s: %s%s", dir, strerror(err),
			    err == EPERM ? userns_hint() : "");
	}
	return 0;
}

/* Bind-mounts what the open file fd refers to onto path. */
static int bind_fd(int fd, const char *name, const char *path)
{
	char src[PATH_MAX];

	if (name)
		snprintf(src, sizeof(src), "/proc/self/fd/%d/%s", fd, name);
	else
		snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	return mount(src, path, NULL, MS_BIND | MS_REC, NULL);
}

static int is_fresh(const char *name, const char *const *fresh)
{
	for (; *fresh; fresh++)
		if (!strcmp(name, *fresh))
			return 1;
	return 0;
}

/* Covers dir with a tmpfs that shows what dir showed: each directory, device
 * node or file bind-mounted from the original (with everything mounted below
 * it), each symlink copied (a relative link resolves as before, since it
 * sits at the same place). The names in fresh become empty directories.
 * Needed where a directory we must add is missing (/sys/class/infiniband on
 * a host without RDMA): sysfs cannot get new entries, devtmpfs only from
 * the kernel, and an overlay cannot use sysfs as a lower layer, nor open
 * device nodes when a user namespace mounted it. */
static int shadow(const char *dir, const char *const *fresh, unsigned long flags, int *nmounts,
		  struct err *e)
{
	char path[PATH_MAX], target[PATH_MAX];
	int ofd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;
	struct dirent *de;
	DIR *d;

	if (ofd < 0)
		return fail(e, "%s: %s", dir, strerror(errno));
	d = fdopendir(dup(ofd));
	if (!d) {
		close(ofd);
		return fail(e, "%s: %s", dir, strerror(errno));
	}
	if (tmpfs_on(dir, flags, e)) {
		closedir(d);
		close(ofd);
		return -1;
	}
	while (!ret && (de = readdir(d))) {
		const char *nm = de->d_name;
		struct stat st;

		if (!strcmp(nm, ".") || !strcmp(nm, "..") || is_fresh(nm, fresh))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, nm);
		if (fstatat(ofd, nm, &st, AT_SYMLINK_NOFOLLOW))
			continue; /* gone meanwhile */
		if (S_ISLNK(st.st_mode)) {
			ssize_t l = readlinkat(ofd, nm, target, sizeof(target) - 1);

			if (l < 0)
				continue;
			target[l] = '\0';
			if (symlink(target, path))
				ret = fail(e, "symlink %s: %s", path, strerror(errno));
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (mkdir(path, st.st_mode & 07777))
				ret = fail(e, "mkdir %s: %s", path, strerror(errno));
		} else {
			int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

			if (fd < 0)
				ret = fail(e, "creating %s: %s", path, strerror(errno));
			else
				close(fd);
		}
		if (!ret && bind_fd(ofd, nm, path))
			ret = fail(e, "bind-mounting %s/%s: %s", dir, nm, strerror(errno));
		(*nmounts)++;
	}
	for (; !ret && *fresh; fresh++) {
		snprintf(path, sizeof(path), "%s/%s", dir, *fresh);
		if (mkdir(path, 0755))
			ret = fail(e, "mkdir %s: %s", path, strerror(errno));
	}
	closedir(d);
	close(ofd);
	return ret;
}

/* H: the namespaces, the mounts and the files. */
static int build(int *userns, struct uroce_netdev *nds, int *ndev, struct err *e)
{
	static const char *const sys_fresh[] = { "infiniband", "infiniband_verbs", NULL };
	static const char *const dev_fresh[] = { "infiniband", NULL };
	const unsigned long sysflags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
	char path[PATH_MAX];
	int nullfd, n, nmounts = 0;

	if (make_ns(userns, e))
		return -1;

	/* /sys/class: a tmpfs on each class directory where they exist (a host
	 * with RDMA devices: the view then hides them), else over /sys/class. */
	if (exists_dir(UROCE_SYSFS_IB) && exists_dir(UROCE_SYSFS_VERBS)) {
		if (tmpfs_on(UROCE_SYSFS_IB, sysflags, e) || tmpfs_on(UROCE_SYSFS_VERBS, sysflags, e))
			return -1;
	} else if (shadow("/sys/class", sys_fresh, sysflags, &nmounts, e)) {
		return -1;
	}
	n = uroce_sysfs_render(UROCE_SYSFS_IB, UROCE_SYSFS_VERBS, nds, UROCE_MAX_DEVS,
			       RUN_REFRESH_MS);
	if (n < 0)
		return fail(e, "writing %s: %s", UROCE_SYSFS_IB, strerror(-n));

	/* /dev/infiniband/uverbsN: a character device that programs may open
	 * read-write (UCX checks); /dev/null is one, and can be bind-mounted
	 * where mknod is not allowed. */
	nullfd = open("/dev/null", O_PATH | O_CLOEXEC);
	if (nullfd < 0)
		return fail(e, "/dev/null: %s", strerror(errno));
	if (exists_dir("/dev/infiniband")) {
		if (tmpfs_on("/dev/infiniband", MS_NOSUID | MS_NOEXEC, e))
			goto out;
	} else if (shadow("/dev", dev_fresh, MS_NOSUID | MS_NOEXEC, &nmounts, e)) {
		goto out;
	}
	for (int i = 0; i < n; i++) {
		int fd;

		snprintf(path, sizeof(path), "/dev/infiniband/uverbs%d", i);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			fail(e, "creating %s: %s", path, strerror(errno));
			goto out;
		}
		close(fd);
		if (bind_fd(nullfd, NULL, path)) {
			fail(e, "bind-mounting /dev/null on %s: %s", path, strerror(errno));
			goto out;
		}
	}
	close(nullfd);
	*ndev = n;
	if (getenv("UROCE_RUN_DEBUG"))
		fprintf(stderr, "uroce run: view: %s namespace, %d bind mounts, %d devices\n",
			*userns ? "user+mount" : "mount", nmounts, n);
	return 0;
out:
	close(nullfd);
	return -1;
}

static int send_msg(int sock, const char *text, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)text, .iov_len = strlen(text) + 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	return sendmsg(sock, &mh, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* Receives a message (NUL-terminated into text) and up to 2 descriptors. */
static ssize_t recv_msg(int sock, char *text, size_t n, int *fds, int *nfds)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = text, .iov_len = n - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c;
	ssize_t r;

	*nfds = 0;
	do
		r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -1;
	text[r] = '\0';
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (int i = 0; i < k; i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(c) + (size_t)i * sizeof(int), sizeof(int));
				if (*nfds < 2)
					fds[(*nfds)++] = fd;
				else
					close(fd);
			}
		}
	return r;
}

/* Closes every descriptor from lo up. */
static void close_from(int lo)
{
	if (syscall(SYS_close_range, (unsigned)lo, ~0u, 0) == 0)
		return;
	for (int fd = lo; fd < 65536; fd++)
		close(fd);
}

/* H. sock is its end of the socketpair with P; prog is P's pid. */
static void __attribute__((noreturn)) helper(int sock, pid_t prog)
{
	struct uroce_netdev nds[UROCE_MAX_DEVS];
	char why[MSG_MAX - 1], msg[MSG_MAX], reply[8];
	struct err e = { why, sizeof(why) };
	int userns, ndev = 0, fds[2], nfds, null, pidfd;

	prctl(PR_SET_NAME, "uroce-sysfs", 0, 0, 0);
	umask(022); /* the view's files are world-readable, whatever P's umask */
	/* Hold nothing of P's: a pipe we kept open would keep its reader
	 * waiting for EOF. */
	if (sock != 3) {
		if (dup2(sock, 3) < 0)
			_exit(1);
		sock = 3;
	}
	close_from(4);
	/* While P waits for us it is alive: the pidfd refers to it for sure. */
	pidfd = (int)syscall(SYS_pidfd_open, prog, 0);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		if (!getenv("UROCE_RUN_DEBUG"))
			dup2(null, 2);
		close(null);
	}
	if (build(&userns, nds, &ndev, &e)) {
		snprintf(msg, sizeof(msg), "E%s", why);
		send_msg(sock, msg, NULL, 0);
		_exit(1);
	}
	nfds = 0;
	if (userns)
		fds[nfds++] = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
	fds[nfds++] = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	for (int i = 0; i < nfds; i++)
		if (fds[i] < 0) {
			snprintf(msg, sizeof(msg), "Eopening /proc/self/ns: %s", strerror(errno));
			send_msg(sock, msg, NULL, 0);
			_exit(1);
		}
	snprintf(msg, sizeof(msg), "O%d", userns);
	if (send_msg(sock, msg, fds, nfds))
		_exit(1);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	/* P joins or gives up; only then go on. */
	if (recv_msg(sock, reply, sizeof(reply), fds, &nfds) <= 0 || reply[0] != 'J')
		_exit(0);
	close(sock);
	setsid();
	if (chdir("/"))
		_exit(1);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 2);
		close(null);
	}
	run_refresh(prog, pidfd, nds, ndev);
	_exit(0);
}

int run_view_enter(char *why, size_t n)
{
	char msg[MSG_MAX], dir[PATH_MAX];
	int sv[2], fds[2], nfds = 0, cwd, st, userns;
	pid_t me = getpid(), pid;
	ssize_t r;

	if (in_view())
		return 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		snprintf(why, n, "socketpair: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		snprintf(why, n, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (!pid) {
		close(sv[0]);
		pid = fork();
		if (pid)
			_exit(pid < 0 ? 1 : 0);
		helper(sv[1], me);
	}
	close(sv[1]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	/* It takes milliseconds; a mount that hangs must not hang CMD. */
	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){ .tv_sec = 10 },
		   sizeof(struct timeval));
	r = recv_msg(sv[0], msg, sizeof(msg), fds, &nfds);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		snprintf(why, n, "the helper did not answer within 10 s");
		goto fail;
	}
	if (r <= 0 || (msg[0] != 'O' && msg[0] != 'E')) {
		snprintf(why, n, "the helper process died");
		goto fail;
	}
	if (msg[0] == 'E') {
		snprintf(why, n, "%s", msg + 1);
		goto fail;
	}
	userns = msg[1] == '1';
	if (nfds != 1 + userns) {
		snprintf(why, n, "the helper sent %d namespaces", nfds);
		goto fail;
	}
	/* setns(CLONE_NEWNS) moves us to the namespace's root directory: back
	 * to the same path, now in the view's mount tree (the old directory
	 * itself only if that fails: it would lead ".." into the old tree). */
	if (!getcwd(dir, sizeof(dir)))
		dir[0] = '\0';
	cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (userns && setns(fds[0], CLONE_NEWUSER)) {
		snprintf(why, n, "setns(user namespace): %s", strerror(errno));
		if (cwd >= 0)
			close(cwd);
		goto fail;
	}
	if (setns(fds[userns], CLONE_NEWNS)) {
		snprintf(why, n, "setns(mount namespace): %s", strerror(errno));
		if (cwd >= 0)
			close(cwd);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		close(sv[0]);
		return userns ? -2 : -1;
	}
	if (!dir[0] || chdir(dir)) {
		if (cwd < 0 || fchdir(cwd))
			(void)!chdir("/");
	}
	if (cwd >= 0)
		close(cwd);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	send_msg(sv[0], "J", NULL, 0);
	close(sv[0]);
	return 0;
fail:
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	close(sv[0]);
	return -1;
}
