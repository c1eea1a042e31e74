/* Minimal test harness (libuv style): a registry of cases, each run in a
 * forked child with a timeout, typed asserts that print both values.
 *
 *   T_CASE(name) { ...; T_EQ_INT(a, b); }
 *   int main(int argc, char **argv) { return t_run(argc, argv); }
 *
 * `prog NAME...` runs only the named cases; `prog -l` lists them.
 * UROCE_TEST_TIMEOUT (seconds, default 120) bounds each case.
 * The last line printed is "N passed, N failed, N skipped". */
#ifndef UROCE_TEST_T_H
#define UROCE_TEST_T_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct t_case {
	const char *name;
	void (*fn)(void);
	struct t_case *next;
};

void t_register(struct t_case *c);
int t_run(int argc, char **argv);
void t_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 3, 4)));
void t_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void t_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define T_CASE(name)                                                        \
	static void t_fn_##name(void);                                      \
	static struct t_case t_case_##name = { #name, t_fn_##name, NULL };  \
	__attribute__((constructor)) static void t_reg_##name(void)         \
	{                                                                   \
		t_register(&t_case_##name);                                 \
	}                                                                   \
	static void t_fn_##name(void)

#define T_ASSERT(c)                                                         \
	do {                                                                \
		if (!(c))                                                   \
			t_fail(__FILE__, __LINE__, "assertion failed: %s", #c); \
	} while (0)

#define T_ASSERTF(c, ...)                                                   \
	do {                                                                \
		if (!(c))                                                   \
			t_fail(__FILE__, __LINE__, __VA_ARGS__);            \
	} while (0)

#define T_CMP_(a, op, b, type, fmt)                                         \
	do {                                                                \
		type t_a_ = (type)(a);                                      \
		type t_b_ = (type)(b);                                      \
		if (!(t_a_ op t_b_))                                        \
			t_fail(__FILE__, __LINE__, "%s %s %s: " fmt " vs " fmt, \
			       #a, #op, #b, t_a_, t_b_);                    \
	} while (0)

#define T_EQ_INT(a, b) T_CMP_(a, ==, b, long long, "%lld")
#define T_NE_INT(a, b) T_CMP_(a, !=, b, long long, "%lld")
#define T_GE_INT(a, b) T_CMP_(a, >=, b, long long, "%lld")
#define T_LE_INT(a, b) T_CMP_(a, <=, b, long long, "%lld")
#define T_GT_INT(a, b) T_CMP_(a, >, b, long long, "%lld")
#define T_LT_INT(a, b) T_CMP_(a, <, b, long long, "%lld")
#define T_EQ_U64(a, b) T_CMP_(a, ==, b, uint64_t, "0x%" PRIx64)
#define T_EQ_PTR(a, b) T_CMP_(a, ==, b, const void *, "%p")
#define T_NE_PTR(a, b) T_CMP_(a, !=, b, const void *, "%p")
#define T_EQ_STR(a, b)                                                      \
	do {                                                                \
		const char *t_a_ = (a), *t_b_ = (b);                        \
		if (strcmp(t_a_, t_b_))                                     \
			t_fail(__FILE__, __LINE__, "%s == %s: \"%s\" vs \"%s\"", \
			       #a, #b, t_a_, t_b_);                         \
	} while (0)
#define T_EQ_MEM(a, b, n)                                                   \
	do {                                                                \
		const unsigned char *t_a_ = (const void *)(a), *t_b_ = (const void *)(b); \
		size_t t_n_ = (n);                                          \
		for (size_t t_i_ = 0; t_i_ < t_n_; t_i_++)                  \
			if (t_a_[t_i_] != t_b_[t_i_])                       \
				t_fail(__FILE__, __LINE__,                  \
				       "%s != %s at byte %zu of %zu: 0x%02x vs 0x%02x", \
				       #a, #b, t_i_, t_n_, t_a_[t_i_], t_b_[t_i_]); \
	} while (0)

#define T_SKIP(...) t_skip(__VA_ARGS__)

#endif
