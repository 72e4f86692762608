/*
 * Unit tests of ripc/env.c: the table of RIPC_* variables and their
 * parsing.  Criterion runs every test in a process of its own, so
 * setenv() here never leaks into another test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "env.h"
#include "log.h"

/* Variables read as integers (their defaults must parse). */
static const enum ripc_env_id int_vars[] = {
	RIPC_ENV_RESOLVE_TIMEOUT_MS, RIPC_ENV_SEND_TIMEOUT_MS,
	RIPC_ENV_LONG_TIMEOUT_MS,    RIPC_ENV_PULL_TIMEOUT_MS,
	RIPC_ENV_SPIN_US,	     RIPC_ENV_POLL_INTERVAL_US,
	RIPC_ENV_RX_DEPTH,	     RIPC_ENV_QUEUE_MAX,
	RIPC_ENV_PULL_MEM_MAX,	     RIPC_ENV_RETURN_TIMEOUT_MS,
};
#define N_INT (sizeof(int_vars) / sizeof(int_vars[0]))

static const char *name(enum ripc_env_id id)
{
	return ripc__env_table[id].name;
}

/* Keep the warnings about invalid values (which these tests provoke on
 * purpose) out of the test log. */
static void quiet(void)
{
	ripc__log_level = RIPC_LOG_NONE;
}

TestSuite(env, .init = quiet);

Test(env, table_entries_complete)
{
	for (int i = 0; i < RIPC_ENV_COUNT; i++) {
		const struct ripc_env_var *v = &ripc__env_table[i];

		cr_assert_not_null(v->name, "entry %d has no name", i);
		cr_assert(!strncmp(v->name, "RIPC_", 5) && v->name[5],
			  "entry %d: %s does not start with RIPC_", i,
			  v->name);
		for (const char *c = v->name; *c; c++)
			cr_assert((*c >= 'A' && *c <= 'Z') ||
					  (*c >= '0' && *c <= '9') || *c == '_',
				  "%s: not an environment variable name",
				  v->name);
		cr_assert_not_null(v->def, "%s has no default", v->name);
		cr_assert(v->help && strlen(v->help) >= 10,
			  "%s has no help text", v->name);
	}
}

Test(env, names_unique)
{
	for (int i = 0; i < RIPC_ENV_COUNT; i++)
		for (int k = 0; k < i; k++)
			cr_assert_str_neq(ripc__env_table[i].name,
					  ripc__env_table[k].name,
					  "entries %d and %d", k, i);
}

Test(env, default_when_unset_or_empty)
{
	for (int i = 0; i < RIPC_ENV_COUNT; i++) {
		unsetenv(name(i));
		cr_assert_str_eq(ripc__env_str(i), ripc__env_table[i].def,
				 "%s unset", name(i));
		setenv(name(i), "", 1);
		cr_assert_str_eq(ripc__env_str(i), ripc__env_table[i].def,
				 "%s empty", name(i));
		setenv(name(i), "some value", 1);
		cr_assert_str_eq(ripc__env_str(i), "some value", "%s set",
				 name(i));
	}
}

/* Every integer default is a valid number: a typo in the table would
 * otherwise give 0 silently. */
Test(env, integer_defaults_parse)
{
	for (unsigned i = 0; i < N_INT; i++) {
		enum ripc_env_id id = int_vars[i];

		unsetenv(name(id));
		cr_assert_gt(ripc__env_int(id), 0, "%s default %s", name(id),
			     ripc__env_table[id].def);
	}
	unsetenv(name(RIPC_ENV_PULL_MEM_MAX));
	cr_assert_eq(ripc__env_int(RIPC_ENV_PULL_MEM_MAX),
		     4ll * 1024 * 1024 * 1024, "default 4g");
	/* No default of its own: each transport's (ripc__rma_chunk). */
	unsetenv(name(RIPC_ENV_READ_CHUNK));
	cr_assert(!ripc__env_is_set(RIPC_ENV_READ_CHUNK));
	cr_assert_str_eq(ripc__env_table[RIPC_ENV_READ_CHUNK].def, "");
	setenv(name(RIPC_ENV_READ_CHUNK), "512k", 1);
	cr_assert(ripc__env_is_set(RIPC_ENV_READ_CHUNK));
	cr_assert_eq(ripc__env_int(RIPC_ENV_READ_CHUNK), 512ll * 1024);
}

Test(env, integers_and_suffixes)
{
	static const struct {
		const char *text;
		int64_t want;
	} ok[] = {
		{ "0", 0 },
		{ "5", 5 },
		{ "1234567", 1234567 },
		{ "010", 10 }, /* decimal, not octal */
		{ "-5", -5 },
		{ "1k", 1024 },
		{ "1K", 1024 },
		{ "4k", 4096 },
		{ "3m", 3ll << 20 },
		{ "3M", 3ll << 20 },
		{ "2g", 2ll << 30 },
		{ "2G", 2ll << 30 },
		{ "16g", 16ll << 30 },
		{ "9223372036854775807", INT64_MAX },
	};
	const enum ripc_env_id id = RIPC_ENV_QUEUE_MAX;

	for (unsigned i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		setenv(name(id), ok[i].text, 1);
		cr_assert_eq(ripc__env_int(id), ok[i].want, "%s=%s",
			     name(id), ok[i].text);
	}
}

Test(env, invalid_integers_give_default)
{
	static const char *const bad[] = {
		"abc",	"12x", "k",   "m",	  "1kb",  "1 k", "5 ",
		" ",	"-",   "1.5", "1e3",  "0x",   "1kk", "g1",
		"0x10",	/* decimal only */
		"99999999999999999999",	/* strtoll: ERANGE */
	};
	const enum ripc_env_id id = RIPC_ENV_RX_DEPTH;
	int64_t def;

	unsetenv(name(id));
	def = ripc__env_int(id);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv(name(id), bad[i], 1);
		cr_assert_eq(ripc__env_int(id), def, "%s=\"%s\"", name(id),
			     bad[i]);
	}
}

/* A variable whose default is "auto" (RIPC_FRAG_MAX) reads as
 * RIPC_INT_AUTO when unset, set to "auto" in any case, or unparsable (its
 * default then), and as the number when set to one; "auto" is no value
 * for a variable with a numeric default. */
Test(env, auto_defaults)
{
	const enum ripc_env_id id = RIPC_ENV_FRAG_MAX, num = RIPC_ENV_RX_DEPTH;
	int64_t def;

	cr_assert_str_eq(ripc__env_table[id].def, "auto");
	unsetenv(name(id));
	cr_assert_eq(ripc__env_int(id), RIPC_INT_AUTO);
	setenv(name(id), "AUTO", 1);
	cr_assert_eq(ripc__env_int(id), RIPC_INT_AUTO);
	setenv(name(id), "junk", 1);
	cr_assert_eq(ripc__env_int(id), RIPC_INT_AUTO);
	setenv(name(id), "12k", 1);
	cr_assert_eq(ripc__env_int(id), 12288);
	setenv(name(id), "0", 1);
	cr_assert_eq(ripc__env_int(id), 0);
	unsetenv(name(num));
	def = ripc__env_int(num);
	setenv(name(num), "auto", 1);
	cr_assert_eq(ripc__env_int(num), def);
}

/*
 * A value whose suffix multiplies it past INT64_MAX is as unparsable as a
 * plain number that overflows (which strtoll refuses with ERANGE): it must
 * give the default, not a wrapped (negative or tiny) value, and must not
 * be computed with signed overflow.
 */
Test(env, suffix_overflow_gives_default)
{
	static const char *const bad[] = {
		"8589934592g",	       /* 2^33 GiB = 2^63 */
		"9223372036854775807k",
		"9007199254740992m",   /* 2^53 MiB = 2^73 */
		"-9223372036854775807g",
	};
	const enum ripc_env_id id = RIPC_ENV_PULL_MEM_MAX;
	int64_t def;

	unsetenv(name(id));
	def = ripc__env_int(id);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv(name(id), bad[i], 1);
		cr_expect_eq(ripc__env_int(id), def,
			     "%s=%s gave %lld, want the default %lld",
			     name(id), bad[i], (long long)ripc__env_int(id),
			     (long long)def);
	}
}

Test(env, booleans)
{
	static const char *const no[] = { "0",	 "no",	"No",	 "NO",
					  "off", "OFF", "Off",	 "false",
					  "FALSE", "False" };
	static const char *const yes[] = { "1", "yes", "on", "true", "2",
					   "YES" };
	const enum ripc_env_id id = RIPC_ENV_SHM;

	/* The defaults: RIPC_SHM on, RIPC_SHM_CHECKED off. */
	unsetenv(name(RIPC_ENV_SHM));
	unsetenv(name(RIPC_ENV_SHM_CHECKED));
	cr_assert(ripc__env_bool(RIPC_ENV_SHM));
	cr_assert(!ripc__env_bool(RIPC_ENV_SHM_CHECKED));
	setenv(name(RIPC_ENV_SHM), "", 1);
	setenv(name(RIPC_ENV_SHM_CHECKED), "", 1);
	cr_assert(ripc__env_bool(RIPC_ENV_SHM), "empty gives the default");
	cr_assert(!ripc__env_bool(RIPC_ENV_SHM_CHECKED),
		  "empty gives the default");

	for (unsigned i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		setenv(name(id), no[i], 1);
		cr_assert(!ripc__env_bool(id), "%s=%s is false", name(id),
			  no[i]);
	}
	for (unsigned i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		setenv(name(RIPC_ENV_SHM_CHECKED), yes[i], 1);
		cr_assert(ripc__env_bool(RIPC_ENV_SHM_CHECKED), "%s=%s is true",
			  name(RIPC_ENV_SHM_CHECKED), yes[i]);
	}
}

/* ripc_set_log_handler: messages go to the handler (without prefix or
 * newline), at the configured level only, and NULL restores stderr. */
static int got_level;
static char got_msg[512];
static int got_calls;

static void capture(int level, const char *msg, void *arg)
{
	got_level = level;
	snprintf(got_msg, sizeof(got_msg), "%s", msg);
	got_calls += arg == (void *)&got_calls;
}

Test(env, log_handler_receives_warnings)
{
	setenv("RIPC_LOG_LEVEL", "warn", 1);
	ripc_set_log_handler(capture, &got_calls);
	setenv("RIPC_QUEUE_MAX", "lots", 1);
	(void)ripc__env_int(RIPC_ENV_QUEUE_MAX); /* warns, gives default */
	cr_assert_eq(got_calls, 1);
	cr_assert_eq(got_level, RIPC_LOG_WARN);
	cr_assert(strstr(got_msg, "RIPC_QUEUE_MAX") != NULL, "%s", got_msg);
	cr_assert(strchr(got_msg, '\n') == NULL);
	cr_assert(strncmp(got_msg, "libripc[", 8) != 0);

	/* Below the level: not delivered. */
	ripc__log(RIPC_LOG_DEBUG, "not shown");
	cr_assert_eq(got_calls, 1);

	/* NULL: back to stderr, the handler is not called any more. */
	ripc_set_log_handler(NULL, NULL);
	ripc__log(RIPC_LOG_ERROR, "to stderr");
	cr_assert_eq(got_calls, 1);
}
