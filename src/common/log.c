/* Logging to stderr, level from UROCE_LOG. */
#include "util.h"

#include <execinfo.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int uroce__log_level = UROCE_LOG_WARN;

/* UROCE_SEGV_BACKTRACE=1: print a backtrace on SIGSEGV/SIGBUS/SIGABRT (for
 * finding where an application or uroce crashes), then die as usual. */
static void segv_handler(int sig)
{
	void *bt[64];
	int n = backtrace(bt, 64);
	static const char msg[] = "uroce: fatal signal, backtrace:\n";

	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing */
	}
	backtrace_symbols_fd(bt, n, 2);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* UROCE_SEGV_BACKTRACE=1 also makes SIGUSR2 print the backtrace of the
 * thread it is sent to and carry on: where a stuck engine thread spins
 * (tgkill(pid, tid of "uroce-engine", SIGUSR2); no debugger needed). */
static void usr2_handler(int sig)
{
	void *bt[64];
	int n = backtrace(bt, 64);
	static const char msg[] = "uroce: SIGUSR2, backtrace of this thread:\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing */
	}
	backtrace_symbols_fd(bt, n, 2);
}

int uroce__usr2_backtrace;

__attribute__((constructor)) static void uroce__log_init(void)
{
	const char *s = getenv("UROCE_LOG");
	const char *b = getenv("UROCE_SEGV_BACKTRACE");

	if (b && *b == '1') {
		signal(SIGSEGV, segv_handler);
		signal(SIGBUS, segv_handler);
		signal(SIGABRT, segv_handler);
		signal(SIGUSR2, usr2_handler);
		uroce__usr2_backtrace = 1;
	}

	if (!s)
		return;
	if (!strcmp(s, "error"))
		uroce__log_level = UROCE_LOG_ERROR;
	else if (!strcmp(s, "warn"))
		uroce__log_level = UROCE_LOG_WARN;
	else if (!strcmp(s, "info"))
		uroce__log_level = UROCE_LOG_INFO;
	else if (!strcmp(s, "debug"))
		uroce__log_level = UROCE_LOG_DEBUG;
}

void uroce__log(int level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	char buf[1024];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof(buf), "uroce[%d] %s: ", (int)getpid(), names[level]);
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(2, buf, (size_t)n) < 0) {
		/* nothing to do: stderr is gone */
	}
}

void uroce_expand_pid(const char *in, char *out, size_t len)
{
	size_t n = 0;

	for (const char *s = in; *s && n + 16 < len; s++) {
		if (s[0] == '%' && s[1] == 'p') {
			n += (size_t)snprintf(out + n, len - n, "%d", (int)getpid());
			s++;
		} else {
			out[n++] = *s;
		}
	}
	out[n] = 0;
}
