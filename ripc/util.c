#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "ripc_int.h"

uint64_t ripc__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ripc__random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Keys and cookies come from a pool refilled from getrandom() 4 KiB at a
 * time: one system call per 512 draws instead of one each (the call was
 * most of the cost of a per-message registration).  Under the library
 * lock; a forked child drops the pool so that it never repeats the
 * parent's values. */
static uint8_t pool[4096];
static size_t pool_left;

int ripc__random_u64(uint64_t *out)
{
	int ret;

	if (pool_left < sizeof(*out)) {
		if ((ret = ripc__random(pool, sizeof(pool))))
			return ret;
		pool_left = sizeof(pool);
	}
	pool_left -= sizeof(*out);
	memcpy(out, pool + pool_left, sizeof(*out));
	/* Used bytes are not kept around. */
	memset(pool + pool_left, 0, sizeof(*out));
	return 0;
}

void ripc__random_forget(void)
{
	memset(pool, 0, sizeof(pool));
	pool_left = 0;
}
