/*
 * timeline shim: an LD_PRELOAD library that timestamps a process's socket,
 * wait and timer system calls (and libripc's send and receive calls), so
 * that the phases of one transfer can be lined up across the two processes
 * of a benchmark pair (both use CLOCK_MONOTONIC).  Side experiment of
 * perf_notes.md, built and run by timeline.sh; not part of the library.
 *
 * Each call is recorded as "t_enter_ns t_leave_ns tid call fd-or-arg ret"
 * into a preallocated ring (no I/O on the data path) and written to
 * $TIMELINE_OUT.<pid> when the process exits normally.  A call costs one
 * extra clock read on entry and one on return (about 30 ns each here).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define RING (1u << 22) /* events; the rest of a longer run is dropped */

struct ev {
	uint64_t t0, t1;
	int64_t ret;
	int32_t call, arg, tid;
};

static struct ev *ring;
static uint64_t pos;
static __thread int my_tid;

static const char *const names[] = {
	"sendmsg", "sendto", "recvfrom", "recvmsg", "read", "write",
	"epoll_wait", "ppoll", "poll", "send", "recv", "readv", "writev",
	"ripc_send_long", "ripc_send_short", "ripc_receive_timeout",
	"timerfd_settime", "sched_yield",
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void record(int call, int arg, int64_t ret, uint64_t t0)
{
	uint64_t i = __atomic_fetch_add(&pos, 1, __ATOMIC_RELAXED);

	if (i >= RING)
		return;
	if (!my_tid)
		my_tid = (int)syscall(SYS_gettid);
	ring[i] = (struct ev){ t0, now_ns(), ret, call, arg, my_tid };
}

__attribute__((constructor)) static void shim_init(void)
{
	if (getenv("TIMELINE_OUT"))
		ring = calloc(RING, sizeof(*ring));
}

__attribute__((destructor)) static void shim_dump(void)
{
	const char *out = getenv("TIMELINE_OUT");
	uint64_t n = pos < RING ? pos : RING;
	char path[512];
	FILE *f;

	if (!out || !ring)
		return;
	snprintf(path, sizeof(path), "%s.%d", out, (int)getpid());
	if (!(f = fopen(path, "w")))
		return;
	for (uint64_t i = 0; i < n; i++)
		fprintf(f, "%llu %llu %d %s %d %lld\n",
			(unsigned long long)ring[i].t0,
			(unsigned long long)ring[i].t1, ring[i].tid,
			names[ring[i].call], ring[i].arg,
			(long long)ring[i].ret);
	fclose(f);
}

/* The real function, looked up once; the call timed when recording. */
#define WRAP(ret_t, name, idx, proto, args, arg)                          \
	ret_t name proto                                                  \
	{                                                                 \
		static ret_t(*real) proto;                                \
		uint64_t t0;                                              \
		ret_t r;                                                  \
		if (!real)                                                \
			real = (ret_t(*) proto)dlsym(RTLD_NEXT, #name);   \
		if (!ring)                                                \
			return real args;                                 \
		t0 = now_ns();                                            \
		r = real args;                                            \
		record(idx, (int)(arg), (int64_t)r, t0);                  \
		return r;                                                 \
	}

WRAP(ssize_t, sendmsg, 0, (int fd, const struct msghdr *m, int fl),
     (fd, m, fl), fd)
WRAP(ssize_t, sendto, 1,
     (int fd, const void *b, size_t l, int fl, const struct sockaddr *a,
      socklen_t al),
     (fd, b, l, fl, a, al), fd)
WRAP(ssize_t, recvfrom, 2,
     (int fd, void *b, size_t l, int fl, struct sockaddr *a, socklen_t *al),
     (fd, b, l, fl, a, al), fd)
WRAP(ssize_t, recvmsg, 3, (int fd, struct msghdr *m, int fl), (fd, m, fl), fd)
WRAP(ssize_t, read, 4, (int fd, void *b, size_t l), (fd, b, l), fd)
WRAP(ssize_t, write, 5, (int fd, const void *b, size_t l), (fd, b, l), fd)
WRAP(int, epoll_wait, 6, (int e, struct epoll_event *ev, int m, int to),
     (e, ev, m, to), e)
WRAP(int, ppoll, 7,
     (struct pollfd *p, nfds_t n, const struct timespec *t,
      const sigset_t *s),
     (p, n, t, s), n)
WRAP(int, poll, 8, (struct pollfd *p, nfds_t n, int t), (p, n, t), n)
WRAP(ssize_t, send, 9, (int fd, const void *b, size_t l, int fl),
     (fd, b, l, fl), fd)
WRAP(ssize_t, recv, 10, (int fd, void *b, size_t l, int fl), (fd, b, l, fl),
     fd)
WRAP(ssize_t, readv, 11, (int fd, const struct iovec *v, int n), (fd, v, n),
     fd)
WRAP(ssize_t, writev, 12, (int fd, const struct iovec *v, int n), (fd, v, n),
     fd)
/* libripc's API, resolved only in processes that link it. */
WRAP(uint8_t, ripc_send_long, 13,
     (uint16_t a, uint16_t b, void **c, uint32_t *d, uint16_t e, void **f,
      uint32_t *g, uint16_t h),
     (a, b, c, d, e, f, g, h), e)
WRAP(uint8_t, ripc_send_short, 14,
     (uint16_t a, uint16_t b, void **c, uint32_t *d, uint16_t e, void **f,
      uint32_t *g, uint16_t h),
     (a, b, c, d, e, f, g, h), e)
WRAP(uint8_t, ripc_receive_timeout, 15,
     (uint16_t a, uint16_t *b, void ***c, uint32_t **d, uint16_t *e,
      void ***f, uint32_t **g, uint16_t *h, int i),
     (a, b, c, d, e, f, g, h, i), i)
/* A timerfd_settime that reprograms the CPU's timer was 12-23 us on this VM
 * (perf_notes.md, "a timer on the answer's path"). */
WRAP(int, timerfd_settime, 16,
     (int fd, int fl, const struct itimerspec *n, struct itimerspec *o),
     (fd, fl, n, o), fd)
WRAP(int, sched_yield, 17, (void), (), 0)
