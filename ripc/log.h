#ifndef RIPC_LOG_H
#define RIPC_LOG_H

#include "ripc.h" /* enum ripc_log_level */

/* Logging of the whole library, prov/ included.  Knows nothing of the
 * environment: env.c sets the level from RIPC_LOG_LEVEL. */
extern int ripc__log_level;

/* The level named by word ("none" ... "debug"), or -1. */
int ripc__log_level_of(const char *word);
void ripc__log_set_handler(ripc_log_handler fn, void *arg);
void ripc__log_emit(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define ripc__log(level, ...)                                                \
	do {                                                                 \
		if ((level) <= ripc__log_level)                              \
			ripc__log_emit((level), __VA_ARGS__);                \
	} while (0)

/* For the data path: at most one line per second per call site. */
#define ripc__log_rl(level, ...)                                             \
	do {                                                                 \
		static long ripc__rl_last;                                   \
		if ((level) <= ripc__log_level &&                            \
		    ripc__log_ratelimit(&ripc__rl_last))                     \
			ripc__log_emit((level), __VA_ARGS__);                \
	} while (0)

int ripc__log_ratelimit(long *last);

#endif
