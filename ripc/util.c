/*
 * Small helpers of the core: the clock, random numbers, and waking a
 * thread that waits inside a public call.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

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
 * most of the cost of a per-message registration).  The pool lives in the
 * context (lock held), so a forked child, which starts with a fresh
 * context, never repeats the parent's values. */
int ripc__random_u64(uint64_t *out)
{
	struct ripc_mem *m = &CTX->mem;
	int ret;

	if (m->pool_left < sizeof(*out)) {
		if ((ret = ripc__random(m->pool, sizeof(m->pool))))
			return ret;
		m->pool_left = sizeof(m->pool);
	}
	m->pool_left -= sizeof(*out);
	memcpy(out, m->pool + m->pool_left, sizeof(*out));
	/* Used bytes are not kept around. */
	memset(m->pool + m->pool_left, 0, sizeof(*out));
	return 0;
}

void ripc__waiter_wake(struct ripc_waiter *w)
{
	uint64_t one = 1;

	if (w->efd >= 0 && write(w->efd, &one, sizeof(one)) < 0)
		(void)0; /* counter saturated: it is awake anyway */
}

void ripc__waiters_wake(struct ripc_list *waiters)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, waiters)
		ripc__waiter_wake(
			ripc_container_of(pos, struct ripc_waiter, link));
}

/* ---- the calling thread ------------------------------------------------
 * Each application thread that waits inside the library has one waiter
 * (its eventfd is created on first use and closed when the thread ends),
 * and a count of its calls inside the library (the exit path must not
 * wait for its own). */
RIPC_TLS unsigned ripc__tls_calls;
static RIPC_TLS struct ripc_waiter tls_waiter = { .efd = -1 };
static pthread_key_t waiter_key;
static pthread_once_t waiter_once = PTHREAD_ONCE_INIT;

static void tls_waiter_free(void *arg)
{
	(void)arg;
	if (tls_waiter.efd >= 0)
		close(tls_waiter.efd);
	tls_waiter.efd = -1;
}

static void waiter_key_init(void)
{
	pthread_key_create(&waiter_key, tls_waiter_free);
}

struct ripc_waiter *ripc__waiter_self(void)
{
	if (tls_waiter.efd < 0) {
		pthread_once(&waiter_once, waiter_key_init);
		tls_waiter.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (tls_waiter.efd < 0)
			return NULL;
		ripc_list_init(&tls_waiter.link);
		ripc_list_init(&tls_waiter.sleep);
		pthread_setspecific(waiter_key, &tls_waiter);
	}
	return &tls_waiter;
}

/* In a forked child: the forking thread's eventfd is shared with the
 * parent's thread; the child gets its own on first use. */
void ripc__thread_fork_child(void)
{
	if (tls_waiter.efd >= 0)
		close(tls_waiter.efd);
	tls_waiter.efd = -1;
	ripc__tls_calls = 0;
}

/* ---- the pollable fd ---------------------------------------------------
 * ripc_get_fd's eventfd is readable exactly while messages wait on some
 * service or release events are pending (once asked for).  Lock held. */
void ripc__appfd_update(void)
{
	struct ripc_recv_state *rx = &CTX->rx;
	bool want = rx->queued_total > 0 || CTX->ex.ev_n > 0;
	uint64_t v = 1;

	if (rx->app_fd < 0 || want == rx->app_fd_set)
		return;
	if (want) {
		if (write(rx->app_fd, &v, sizeof(v)) < 0)
			ripc__log_rl(RIPC_LOG_WARN, "eventfd write failed");
	} else if (read(rx->app_fd, &v, sizeof(v)) < 0) {
		(void)0; /* already drained */
	}
	rx->app_fd_set = want;
}

/* Something with a timeout was made.  The progress thread computes when it
 * must next wake from the deadlines it scanned; one set since then lowers
 * that, and wakes the thread if it sleeps past it.  Lock held. */
void ripc__timer_note(uint64_t when)
{
	struct ripc_engine *g = &CTX->eng;
	uint64_t one = 1;

	if (when >= g->next_deadline_ns)
		return;
	g->next_deadline_ns = when;
	if (g->sleep_until > when && g->wake_fd >= 0 &&
	    write(g->wake_fd, &one, sizeof(one)) < 0)
		(void)0; /* counter full: it wakes anyway */
}
