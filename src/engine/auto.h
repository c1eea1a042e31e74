/* The automatic choices of progress and engine threads, from the CPUs a
 * process may run on (docs/design.md, "Who runs the transport" and
 * "Several engine threads"). Shared by the engine and by `uroce run`, which
 * sizes UCX's paths to the engine threads the library will start. */
#ifndef UROCE_AUTO_H
#define UROCE_AUTO_H

#include <stdlib.h>
#include <string.h>

/* Up to this many CPUs, UROCE_PROGRESS=auto lets application threads run
 * the engine's turns: the engine thread would wait for a core behind the
 * application's pollers. With more, the engine thread's core is a gain
 * (measured: docs/design.md, "Who runs the transport"). */
#define AUTO_APP_MAX_CPUS 4
/* and above it, the engine thread's busy-poll after work (UROCE_POLL_US) */
#define AUTO_POLL_US 20
/* and within that poll, how long the engine thread holds the ACK of a
 * completed receive for the reply it is likely to cause
 * (UROCE_REPLY_HOLD_US): off until measured on a machine with cores to
 * spare (docs/design.md, "ACK coalescing") */
#define AUTO_REPLY_HOLD_US 0
/* UROCE_ENGINES=auto: one engine thread per this many CPUs, up to
 * AUTO_MAX_ENGINES */
#define AUTO_CPUS_PER_ENGINE 4
#define AUTO_MAX_ENGINES 4

static inline int uroce_auto_app_progress(int cpus)
{
	return cpus <= AUTO_APP_MAX_CPUS;
}

static inline int uroce_auto_engines(int cpus)
{
	int n = cpus / AUTO_CPUS_PER_ENGINE;

	return n < 1 ? 1 : n > AUTO_MAX_ENGINES ? AUTO_MAX_ENGINES : n;
}

/* The engine threads a context will run under the environment's
 * UROCE_PROGRESS and UROCE_ENGINES (as engines_config() decides; an
 * invalid value counts as 1, the library refuses it anyway). */
static inline int uroce_env_engines(int cpus, int max)
{
	const char *p = getenv("UROCE_PROGRESS"), *v = getenv("UROCE_ENGINES");
	int app = p && !strcmp(p, "app");
	char *end;
	long n;

	if (!p || !*p || !strcmp(p, "auto"))
		app = uroce_auto_app_progress(cpus);
	if (app)
		return 1;
	if (!v || !*v || !strcmp(v, "auto"))
		return uroce_auto_engines(cpus);
	n = strtol(v, &end, 10);
	return *end || n < 1 || n > max ? 1 : (int)n;
}

#endif
