#ifndef RIPC_LOG_H
#define RIPC_LOG_H

#include "ripc.h" /* enum ripc_log_level */

extern int ripc__log_level;

void ripc__log_init(void);
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
