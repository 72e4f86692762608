/*
 * A stand-in for <criterion/criterion.h>, used only to build the unit
 * tests under ThreadSanitizer: Criterion cannot run under TSan (its runner
 * aborts, "Could not initialize inheritable arena", upstream issue
 * Snaipe/Criterion#274).  It implements the part of Criterion's API the
 * unit tests use -- Test, TestSuite with .init/.fini/.timeout, the
 * cr_assert and cr_expect families, cr_skip_test, cr_log_info -- with the
 * same semantics: every test runs in a process of its own (forked before
 * the runner ever starts a thread), a test's options override its suite's,
 * a failed assertion ends the test, a failed expectation fails it at the
 * end.  The runner prints one line per test and a Criterion-like synthesis
 * line, and exits 1 if any test failed, crashed or timed out (TSan's
 * reports make the test process exit with TSAN_OPTIONS' exitcode).
 */
#ifndef RIPC_CRSHIM_H
#define RIPC_CRSHIM_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

struct crs_opts {
	void (*init)(void);
	void (*fini)(void);
	double timeout;
	const char *description;
};

struct crs_test {
	const char *suite, *name;
	void (*fn)(void);
	const struct crs_opts *opts;
	struct crs_test *next;
};

struct crs_suite {
	const char *name;
	const struct crs_opts *opts;
	struct crs_suite *next;
};

static struct crs_test *crs_tests;
static struct crs_suite *crs_suites;
static bool crs_soft_failed;

#define TestSuite(suite, ...)                                                \
	static const struct crs_opts crs_sopts_##suite = { __VA_ARGS__ };    \
	static struct crs_suite crs_suite_##suite = { #suite,                \
						       &crs_sopts_##suite,   \
						       NULL };               \
	__attribute__((constructor)) static void crs_sreg_##suite(void)      \
	{                                                                    \
		crs_suite_##suite.next = crs_suites;                         \
		crs_suites = &crs_suite_##suite;                             \
	}

#define Test(suite, name, ...)                                               \
	static void crs_fn_##suite##_##name(void);                           \
	static const struct crs_opts crs_opts_##suite##_##name = {           \
		__VA_ARGS__                                                  \
	};                                                                   \
	static struct crs_test crs_t_##suite##_##name = {                    \
		#suite, #name, crs_fn_##suite##_##name,                      \
		&crs_opts_##suite##_##name, NULL                             \
	};                                                                   \
	__attribute__((constructor)) static void crs_reg_##suite##_##name(   \
		void)                                                        \
	{                                                                    \
		struct crs_test **pp = &crs_tests;                           \
		while (*pp)                                                  \
			pp = &(*pp)->next;                                   \
		*pp = &crs_t_##suite##_##name;                               \
	}                                                                    \
	static void crs_fn_##suite##_##name(void)

__attribute__((format(printf, 5, 6), unused)) static void
crs_report(bool fatal, const char *file, int line, const char *text,
	   const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[----] %s:%d: %s\n[----]   %s: ", file, line,
		fatal ? "Assertion Failed" : "Expectation Failed", text);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (fatal)
		exit(1);
	crs_soft_failed = true;
}

/* The message is optional, as in Criterion; "" glues it to a literal. */
#define crs_check(fatal, cond, text, ...)                                    \
	do {                                                                 \
		if (!(cond))                                                 \
			crs_report(fatal, __FILE__, __LINE__, text,          \
				   "" __VA_ARGS__);                          \
	} while (0)

#define cr_assert(cond, ...) crs_check(true, cond, #cond, __VA_ARGS__)
#define cr_expect(cond, ...) crs_check(false, cond, #cond, __VA_ARGS__)
#define cr_assert_fail(...) crs_check(true, 0, "cr_assert_fail", __VA_ARGS__)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_null(p, ...) cr_assert((p) == NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(!strcmp((a), (b)), __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) cr_assert(strcmp((a), (b)), __VA_ARGS__)
#define cr_expect_eq(a, b, ...) cr_expect((a) == (b), __VA_ARGS__)
#define cr_expect_lt(a, b, ...) cr_expect((a) < (b), __VA_ARGS__)
#define cr_log_info(...) (fprintf(stderr, "[----] " __VA_ARGS__), \
			  fputc('\n', stderr))
#define cr_skip_test(...)                                                    \
	do {                                                                 \
		fprintf(stderr, "[SKIP] " __VA_ARGS__);                      \
		fputc('\n', stderr);                                         \
		exit(77);                                                    \
	} while (0)

static const struct crs_opts *crs_suite_opts(const char *name)
{
	for (struct crs_suite *s = crs_suites; s; s = s->next)
		if (!strcmp(s->name, name))
			return s->opts;
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned tested = 0, passing = 0, failing = 0, crashing = 0;

	(void)argc;
	(void)argv;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (struct crs_test *t = crs_tests; t; t = t->next) {
		const struct crs_opts *so = crs_suite_opts(t->suite);
		void (*init)(void) = t->opts->init ? t->opts->init
				     : so		 ? so->init
							 : NULL;
		void (*fini)(void) = t->opts->fini ? t->opts->fini
				     : so		 ? so->fini
							 : NULL;
		double timeout = t->opts->timeout > 0 ? t->opts->timeout
				 : so && so->timeout > 0 ? so->timeout
							  : 120;
		int status;
		pid_t pid;

		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			alarm((unsigned)timeout);
			if (init)
				init();
			t->fn();
			if (fini)
				fini();
			exit(crs_soft_failed ? 1 : 0);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid) {
			perror("crshim: fork/waitpid");
			return 1;
		}
		tested++;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			passing++;
			printf("[PASS] %s::%s\n", t->suite, t->name);
		} else if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
			tested--;
			printf("[SKIP] %s::%s\n", t->suite, t->name);
		} else if (WIFEXITED(status)) {
			failing++;
			printf("[FAIL] %s::%s: exit %d\n", t->suite, t->name,
			       WEXITSTATUS(status));
		} else {
			crashing++;
			printf("[FAIL] %s::%s: %s\n", t->suite, t->name,
			       WTERMSIG(status) == SIGALRM
				       ? "timed out"
				       : strsignal(WTERMSIG(status)));
		}
	}
	printf("[====] Synthesis: Tested: %u | Passing: %u | Failing: %u | "
	       "Crashing: %u\n",
	       tested, passing, failing, crashing);
	return failing || crashing;
}

#endif
