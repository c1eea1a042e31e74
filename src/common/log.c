/* Logging to stderr, level from UROCE_LOG. */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int uroce__log_level = UROCE_LOG_WARN;

__attribute__((constructor)) static void uroce__log_init(void)
{
	const char *s = getenv("UROCE_LOG");

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
