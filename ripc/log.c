#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

int ripc__log_level = RIPC_LOG_WARN;

/* The application's handler; read and written atomically as a pair under
 * this lock, which is never held while the handler runs. */
static pthread_mutex_t handler_lock = PTHREAD_MUTEX_INITIALIZER;
static ripc_log_handler handler;
static void *handler_arg;

void ripc__log_set_handler(ripc_log_handler fn, void *arg)
{
	pthread_mutex_lock(&handler_lock);
	handler = fn;
	handler_arg = arg;
	pthread_mutex_unlock(&handler_lock);
}

static const char *const level_names[] = { "none", "error", "warn", "info",
					   "debug" };

int ripc__log_level_of(const char *word)
{
	for (int i = 0; i <= RIPC_LOG_DEBUG; i++)
		if (!strcasecmp(word, level_names[i]))
			return i;
	return -1;
}

int ripc__log_ratelimit(long *last)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	if (ts.tv_sec == *last)
		return 0;
	*last = ts.tv_sec;
	return 1;
}

void ripc__log_emit(int level, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "libripc[%d] %s: ", (int)getpid(),
		     level_names[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&handler_lock);
	ripc_log_handler fn = handler;
	void *arg = handler_arg;
	pthread_mutex_unlock(&handler_lock);
	if (fn) {
		/* The handler gets the text without the prefix and newline. */
		fn(level, line + n, arg);
		return;
	}
	strcat(line, "\n");
	fputs(line, stderr);
}
