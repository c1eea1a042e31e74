/* Data-path trace lines (see trace.h). */
#include "trace.h"
#include "util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int uroce_trace_on;

static FILE *out;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static __thread int is_engine;
static __thread long my_tid;

void uroce_trace_flush(void);

static void open_once(void)
{
	const char *want = getenv("UROCE_TRACE");
	char path[512];

	if (!want || !*want)
		return;
	uroce_expand_pid(want, path, sizeof(path));
	out = !strcmp(path, "-") ? stderr : fopen(path, "we");
	if (!out) {
		uroce_err("UROCE_TRACE: cannot write %s", path);
		return;
	}
	/* Fully buffered: the trace must not add system calls to the
	 * application's post and poll paths it is there to show. */
	setvbuf(out, NULL, _IOFBF, 4 << 20);
	atexit(uroce_trace_flush);
	uroce_trace_on = 1;
}

void uroce_trace_flush(void)
{
	pthread_mutex_lock(&lock);
	if (out)
		fflush(out);
	pthread_mutex_unlock(&lock);
}

void uroce_trace_init(void)
{
	pthread_once(&once, open_once);
}

void uroce_trace_set_engine_thread(void)
{
	is_engine = 1;
}

void uroce__trace(const char *event, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	if (!my_tid)
		my_tid = (long)syscall(SYS_gettid);
	n = snprintf(line, sizeof(line), "%llu %d %ld %s %s ", (unsigned long long)uroce_now_ns(),
		     (int)getpid(), my_tid, is_engine ? "engine" : "app", event);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	line[n] = 0;
	pthread_mutex_lock(&lock);
	fputs(line, out);
	pthread_mutex_unlock(&lock);
}
