/* Test harness implementation: see t.h. */
#include "t.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define T_EXIT_SKIP 77

static struct t_case *t_head, **t_tail = &t_head;

void t_register(struct t_case *c)
{
	*t_tail = c;
	t_tail = &c->next;
}

void t_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "  %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(NULL);
	_exit(1);
}

void t_skip(const char *fmt, ...)
{
	va_list ap;

	fprintf(stdout, "  skip: ");
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(NULL);
	_exit(T_EXIT_SKIP);
}

void t_log(const char *fmt, ...)
{
	va_list ap;

	fprintf(stdout, "  ");
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

static double t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int t_selected(const struct t_case *c, int argc, char **argv)
{
	if (argc <= 1)
		return 1;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], c->name))
			return 1;
	return 0;
}

/* Runs one case in a child process group; kills it at the timeout. */
static int t_one(const struct t_case *c, int timeout_s)
{
	double t0 = t_now();
	pid_t pid;
	int status = 0;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		setpgid(0, 0);
		c->fn();
		fflush(NULL);
		_exit(0);
	}
	setpgid(pid, pid);
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return 1;
		if (t_now() - t0 > timeout_s) {
			kill(-pid, SIGKILL);
			waitpid(pid, &status, 0);
			printf("FAIL %s (timeout after %d s)\n", c->name, timeout_s);
			return 1;
		}
		usleep(2000);
	}
	kill(-pid, SIGKILL); /* stray grandchildren */
	if (WIFEXITED(status) && WEXITSTATUS(status) == T_EXIT_SKIP) {
		printf("skip %s\n", c->name);
		return T_EXIT_SKIP;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		printf("ok   %s (%.0f ms)\n", c->name, (t_now() - t0) * 1e3);
		return 0;
	}
	if (WIFSIGNALED(status))
		printf("FAIL %s (signal %d)\n", c->name, WTERMSIG(status));
	else
		printf("FAIL %s (exit %d)\n", c->name, WEXITSTATUS(status));
	return 1;
}

int t_run(int argc, char **argv)
{
	const char *to = getenv("UROCE_TEST_TIMEOUT");
	int timeout_s = to ? atoi(to) : 120;
	int passed = 0, failed = 0, skipped = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "-l")) {
		for (struct t_case *c = t_head; c; c = c->next)
			printf("%s\n", c->name);
		return 0;
	}
	for (struct t_case *c = t_head; c; c = c->next) {
		if (!t_selected(c, argc, argv))
			continue;
		switch (t_one(c, timeout_s > 0 ? timeout_s : 120)) {
		case 0:
			passed++;
			break;
		case T_EXIT_SKIP:
			skipped++;
			break;
		default:
			failed++;
		}
	}
	printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	return failed ? 1 : 0;
}
