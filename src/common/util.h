/* Small helpers shared by every layer. */
#ifndef UROCE_UTIL_H
#define UROCE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define UROCE_EXPORT __attribute__((visibility("default")))

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

static inline uint64_t uroce_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Copies a path pattern, "%p" replaced by the pid. */
void uroce_expand_pid(const char *in, char *out, size_t n);

/* Logging: UROCE_LOG=error|warn|info|debug (default warn), to stderr. */
enum { UROCE_LOG_ERROR, UROCE_LOG_WARN, UROCE_LOG_INFO, UROCE_LOG_DEBUG };
extern int uroce__log_level;
/* UROCE_SEGV_BACKTRACE=1: SIGUSR2 prints the backtrace of the thread it hits (log.c) */
extern int uroce__usr2_backtrace;
void uroce__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define uroce_err(...) uroce__log(UROCE_LOG_ERROR, __VA_ARGS__)
#define uroce_warn(...)                                              \
	do {                                                         \
		if (uroce__log_level >= UROCE_LOG_WARN)              \
			uroce__log(UROCE_LOG_WARN, __VA_ARGS__);     \
	} while (0)
#define uroce_info(...)                                              \
	do {                                                         \
		if (uroce__log_level >= UROCE_LOG_INFO)              \
			uroce__log(UROCE_LOG_INFO, __VA_ARGS__);     \
	} while (0)
#define uroce_dbg(...)                                               \
	do {                                                         \
		if (unlikely(uroce__log_level >= UROCE_LOG_DEBUG))   \
			uroce__log(UROCE_LOG_DEBUG, __VA_ARGS__);    \
	} while (0)

#endif
