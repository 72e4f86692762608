/*
 * ripc_firstcontact - first contact (issue 12): how long a *new process*
 * takes to get its first reply from a service on this host.
 *
 *   server:  ripc_sparse -s -p shm -r ready.txt           (an echo server)
 *   driver:  ripc_firstcontact -p shm -n 200 -S 64 ID
 *
 * The driver starts -n fresh processes one after another (fork, then exec
 * of its own binary, /proc/self/exe, so no shell or libtool wrapper is
 * timed).  Each child, a new process with nothing cached: reads the clock
 * just before ripc_init(), initialises the library, registers a random
 * service ID, short-sends one request of -S bytes to service ID and waits
 * for the echo (at most 10 s), reads the clock, tells the driver both
 * times over a pipe, calls ripc_finalize() and exits.  The driver waits
 * for the child to exit (5 s at most, then kills it by pid) before it
 * starts the next one, and removes any /dev/shm file the child left.
 *
 * Printed (median and 99th percentile, nearest rank, in us):
 *
 *   libripc_first shm 64 first_us 21000.00 us       from the driver's fork()
 *   libripc_first shm 64 first_p99_us ...            (process start: fork,
 *                                                     exec, dynamic loading)
 *   libripc_first shm 64 first_init_us ...           from just before
 *   libripc_first shm 64 first_init_p99_us ...       ripc_init()
 *   libripc_first shm 64 first_send_us ...           from just before the
 *   libripc_first shm 64 first_send_p99_us ...       first ripc_send_short()
 *                                                    (the first exchange:
 *                                                    route, connection, reply)
 *
 * First column: -N (default libripc_first).  Run it with RIPC_RESOLVER=0
 * and -N libripc_first_noresolver for the variant without the multicast
 * resolver.  A child without its reply is counted as failed (stderr) and
 * makes the driver exit 1 after printing what the others measured.
 * CLOCK_MONOTONIC is one clock for all processes of the host, so times
 * taken in the driver and in the child can be subtracted.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"

#define CHILD_ENV "RIPC_FIRSTCONTACT_FD"
#define REPLY_MS 10000

struct report {
	double t_init, t_send, t_reply;
	int ok;
};

/* The child: one request/reply from a cold start, times to fd. */
static int child(int fd)
{
	struct report rep = { 0 };
	size_t *sizes;
	uint32_t size;
	uint16_t me;
	uint8_t *buf;

	bench_sizes(bo.sizes, &sizes);
	size = (uint32_t)sizes[0];
	buf = calloc(1, size);
	if (!buf)
		bench_die("out of memory");
	rep.t_init = bench_now();
	bench_lib_init();
	me = ripc_register_random_service_id();
	if (me != RIPC_INVALID_SERVICE_ID) {
		void *b[1] = { buf };
		uint32_t l[1] = { size };
		void **si = NULL, **li = NULL;
		uint32_t *ss = NULL, *ls = NULL;
		uint16_t ns = 0, nl = 0, from;
		uint8_t r;

		memcpy(buf, &me, sizeof(me) < size ? sizeof(me) : size);
		rep.t_send = bench_now();
		r = ripc_send_short(me, bo.server_id, b, l, 1, NULL, NULL, 0);
		if (r)
			bench_log("send: %s", ripc_strerror(r));
		else
			r = ripc_receive_timeout(me, &from, &si, &ss, &ns, &li,
						 &ls, &nl, REPLY_MS);
		if (!r) {
			rep.t_reply = bench_now();
			rep.ok = from == bo.server_id && ns == 1 &&
				 ss[0] == size && !memcmp(si[0], buf, size);
			bench_free_msg(ns, si, ss, li, ls);
		} else {
			bench_log("no reply: %s", ripc_strerror(r));
		}
	} else {
		bench_log("register: %s", ripc_strerror(ripc_last_error()));
	}
	if (write(fd, &rep, sizeof(rep)) != sizeof(rep))
		bench_log("cannot report to the driver");
	close(fd);
	ripc_finalize();
	free(buf);
	free(sizes);
	return rep.ok ? 0 : 1;
}

/* Wait for pid to exit, at most ms; then kill it.  Returns its status. */
static int reap(pid_t pid, int ms)
{
	int st = 0;

	for (int i = 0; i < ms / 10; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		usleep(10000);
	}
	bench_log("child %d still running: killing it", (int)pid);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return st;
}

static int driver(char **argv)
{
	double *first = malloc((size_t)bo.iters * sizeof(double));
	double *init = malloc((size_t)bo.iters * sizeof(double));
	double *xchg = malloc((size_t)bo.iters * sizeof(double));
	size_t n = 0, *sizes;
	long failed = 0, leftovers = 0;
	char fdbuf[16];
	size_t size;

	if (!first || !init || !xchg)
		bench_die("out of memory");
	bench_sizes(bo.sizes, &sizes);
	size = sizes[0];
	for (long i = 0; i < bo.iters; i++) {
		struct report rep = { 0 };
		struct pollfd pfd;
		int p[2], st, left;
		double t_fork;
		pid_t pid;

		if (pipe(p))
			bench_die("pipe: %s", strerror(errno));
		t_fork = bench_now();
		pid = fork();
		if (pid < 0)
			bench_die("fork: %s", strerror(errno));
		if (pid == 0) {
			close(p[0]);
			snprintf(fdbuf, sizeof(fdbuf), "%d", p[1]);
			setenv(CHILD_ENV, fdbuf, 1);
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		bench_note_pid(pid);
		close(p[1]);
		pfd = (struct pollfd){ .fd = p[0], .events = POLLIN };
		if (poll(&pfd, 1, REPLY_MS + 5000) == 1 &&
		    read(p[0], &rep, sizeof(rep)) == sizeof(rep) && rep.ok) {
			first[n] = (rep.t_reply - t_fork) * 1e6;
			init[n] = (rep.t_reply - rep.t_init) * 1e6;
			xchg[n] = (rep.t_reply - rep.t_send) * 1e6;
			if (bo.verbose)
				bench_log("process %ld: from fork %.0f us, from "
					  "init %.0f us, from the first send "
					  "%.0f us",
					  i + 1, first[n], init[n], xchg[n]);
			n++;
		} else {
			failed++;
		}
		close(p[0]);
		st = reap(pid, 5000);
		left = bench_shm_cleanup(pid);
		leftovers += left > 0;
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			bench_log("child %ld (pid %d) exited with status %d",
				  i + 1, (int)pid,
				  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	if (failed)
		bench_log("%ld of %ld processes got no (good) reply", failed,
			  bo.iters);
	if (leftovers)
		bench_log("%ld of %ld processes left /dev/shm files behind "
			  "(removed)",
			  leftovers, bo.iters);
	if (n) {
		bench_median(first, n);
		bench_median(init, n);
		bench_median(xchg, n);
		bench_emit(bo.system, bo.label, size, "first_us",
			   bench_median(first, n), "us");
		bench_emit(bo.system, bo.label, size, "first_p99_us",
			   bench_percentile(first, n, 99), "us");
		bench_emit(bo.system, bo.label, size, "first_init_us",
			   bench_median(init, n), "us");
		bench_emit(bo.system, bo.label, size, "first_init_p99_us",
			   bench_percentile(init, n, 99), "us");
		bench_emit(bo.system, bo.label, size, "first_send_us",
			   bench_median(xchg, n), "us");
		bench_emit(bo.system, bo.label, size, "first_send_p99_us",
			   bench_percentile(xchg, n, 99), "us");
	}
	if (bo.verbose && n)
		bench_log("%zu processes: from fork %.0f-%.0f us, from init "
			  "%.0f-%.0f us",
			  n, first[0], first[n - 1], init[0], init[n - 1]);
	free(first);
	free(init);
	free(xchg);
	free(sizes);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *fd = getenv(CHILD_ENV);

	bo = (struct bench_opts){
		.sizes = "64",
		.system = "libripc_first",
		.iters = 200,
		.max_sec = 1,
		.time_limit = 600,
		.window = 1,
	};
	bench_parse(argc, argv, "  -n procs  fresh processes, one after "
				"another [200]\n"
				"  -S size   request size [64]\n");
	if (bo.server)
		bench_die("no server here: use ripc_sparse -s");
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (fd) {
		/* A child: the driver's limit does not carry over exec. */
		alarm(REPLY_MS / 1000 + 10);
		unsetenv(CHILD_ENV);
		return child(atoi(fd));
	}
	return driver(argv);
}
