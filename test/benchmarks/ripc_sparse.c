/*
 * ripc_sparse - sparse request/reply (issue 12): a client that thinks
 * between requests, and the wake-up latency of a server asleep in
 * ripc_receive.
 *
 *   server:  ripc_sparse -s -p shm -r ready.txt       (prints its ID)
 *   client:  ripc_sparse -p shm -x 1,10,50 -S 64 -n 1000 -t 3 ID
 *
 * The server blocks in ripc_receive (no timeout) and echoes each request
 * from the library's receive buffer, as ripc_pingpong's server does.  The
 * client sends one short request of -S bytes, waits for the echo in
 * ripc_receive, checks it, and then *thinks*: nanosleep() for each think
 * time of -x (milliseconds, comma separated) before the next request.  So
 * both sides really sleep in between: the server in the library's
 * blocking receive (past RIPC_SPIN_US it sleeps on the library's wait),
 * the client in nanosleep; the benchmark itself polls nothing.  With a
 * think time of 50 ms and more every request measures the wake-up of a
 * server that has been idle that long.
 *
 * Per think time: -w requests untimed (resolution, connection), then up
 * to -n timed ones or -t seconds of thinking and waiting, whichever ends
 * first (at least 20).  Each request is timed alone, from just before the
 * send to the checked echo.  Printed, one-way = half the round trip as in
 * ripc_pingpong:
 *
 *     libripc_think10ms shm 64 lat_us 3.10 us        median
 *     libripc_think10ms shm 64 lat_p99_us 12.40 us   99th percentile
 *                                                    (nearest rank)
 *
 * The first column is -N (default libripc) with "_think<T>ms" appended.
 * Back-to-back requests (no think time) are ripc_pingpong's job.
 * The client ends the server with a two-item BYE and waits (bounded) for
 * its answer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"

#define BYE "BYE"
#define MIN_TIMED 20

static bool is_bye(uint16_t ns, void **si, const uint32_t *ss)
{
	/* Requests have one item: two items cannot be a request. */
	return ns == 2 && ss[0] == sizeof(BYE) && !memcmp(si[0], BYE, 4);
}

static void send_bye(uint16_t me, uint16_t to)
{
	void *b[2] = { (void *)BYE, (void *)BYE };
	uint32_t l[2] = { sizeof(BYE), sizeof(BYE) };
	uint8_t r = ripc_send_short(me, to, b, l, 2, NULL, NULL, 0);

	if (r)
		bench_log("sending BYE: %s", ripc_strerror(r));
}

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();

	if (me == RIPC_INVALID_SERVICE_ID)
		bench_die("register: %s", ripc_strerror(ripc_last_error()));
	bench_ready(me);
	for (;;) {
		void **si = NULL, **li = NULL;
		uint32_t *ss = NULL, *ls = NULL;
		uint16_t ns = 0, nl = 0, from;
		uint8_t r;

		/* Blocking: the point is a server that sleeps here. */
		r = ripc_receive(me, &from, &si, &ss, &ns, &li, &ls, &nl);
		if (r)
			bench_die("receive: %s", ripc_strerror(r));
		for (unsigned i = 0; i < nl; i++)
			ripc_buf_free(li[i]);
		if (is_bye(ns, si, ss)) {
			send_bye(me, from);
			bench_free_msg(ns, si, ss, li, ls);
			break;
		}
		if (ns) {
			r = ripc_send_short(me, from, si, ss, ns, NULL, NULL,
					    0);
			if (r)
				bench_die("echo to %u: %s", from,
					  ripc_strerror(r));
		}
		bench_free_msg(ns, si, ss, li, ls);
	}
	return 0;
}

/* One request of `size` bytes stamped with seq; false on a bad echo. */
static bool request(uint16_t me, uint16_t srv, uint8_t *buf, uint32_t size,
		    uint64_t seq)
{
	void *b[1] = { buf };
	uint32_t l[1] = { size };
	void **si = NULL, **li = NULL;
	uint32_t *ss = NULL, *ls = NULL;
	uint16_t ns = 0, nl = 0, from;
	uint8_t r;
	bool ok;

	memcpy(buf, &seq, size < 8 ? size : 8);
	r = ripc_send_short(me, srv, b, l, 1, NULL, NULL, 0);
	if (r)
		bench_die("send %u bytes: %s", size, ripc_strerror(r));
	r = ripc_receive(me, &from, &si, &ss, &ns, &li, &ls, &nl);
	if (r)
		bench_die("receive: %s", ripc_strerror(r));
	ok = from == srv && ns == 1 && nl == 0 && ss[0] == size &&
	     !memcmp(si[0], buf, size);
	bench_free_msg(ns, si, ss, li, ls);
	return ok;
}

static void think(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int client(void)
{
	uint16_t me = ripc_register_random_service_id();
	size_t *sizes, nsizes = bench_sizes(bo.sizes, &sizes);
	uint32_t size = (uint32_t)sizes[0];
	char *list = strdup(bo.mode), *save, *tok;
	double *t = malloc((size_t)bo.iters * sizeof(*t));
	uint8_t *buf = malloc(size);
	uint64_t seq = 0;

	if (me == RIPC_INVALID_SERVICE_ID)
		bench_die("register: %s", ripc_strerror(ripc_last_error()));
	if (nsizes != 1 || size > RIPC_SHORT_MAX)
		bench_die("-S takes one size up to %d", RIPC_SHORT_MAX);
	if (!list || !t || !buf)
		bench_die("out of memory");
	bench_check_transport(bo.server_id);
	for (uint32_t i = 0; i < size; i++)
		buf[i] = (uint8_t)(i * 7 + 3);

	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		long ms = atol(tok), n = 0;
		double end, t0, t1;
		char sys[128];

		if (ms < 0)
			bench_die("bad think time '%s'", tok);
		for (long i = 0; i < bo.warmup; i++) {
			if (!request(me, bo.server_id, buf, size, ++seq))
				bench_die("bad echo (warm-up)");
			think(ms);
		}
		end = bench_now() + bo.max_sec;
		while (n < bo.iters) {
			t0 = bench_now();
			if (!request(me, bo.server_id, buf, size, ++seq))
				bench_die("bad echo of request %ld", n);
			t1 = bench_now();
			t[n++] = (t1 - t0) * 1e6 / 2;
			if (t1 > end && n >= MIN_TIMED)
				break;
			think(ms);
		}
		bench_median(t, (size_t)n); /* sorts t */
		snprintf(sys, sizeof(sys), "%s_think%ldms", bo.system, ms);
		bench_emit(sys, bo.label, size, "lat_us",
			   bench_median(t, (size_t)n), "us");
		bench_emit(sys, bo.label, size, "lat_p99_us",
			   bench_percentile(t, (size_t)n, 99), "us");
		if (bo.print_min)
			bench_emit(sys, bo.label, size, "lat_min_us", t[0],
				   "us");
		if (bo.verbose)
			bench_log("think %ld ms: %ld requests, max %.2f us", ms,
				  n, t[n - 1]);
	}

	/* BYE, and wait up to 2 s for the server's BYE. */
	send_bye(me, bo.server_id);
	for (int tries = 0; tries < 4; tries++) {
		void **si = NULL, **li = NULL;
		uint32_t *ss = NULL, *ls = NULL;
		uint16_t ns = 0, nl = 0, from;
		bool bye;

		if (ripc_receive_timeout(me, &from, &si, &ss, &ns, &li, &ls,
					 &nl, 500))
			continue;
		bye = is_bye(ns, si, ss);
		bench_free_msg(ns, si, ss, li, ls);
		if (bye)
			break;
	}
	free(list);
	free(t);
	free(buf);
	free(sizes);
	return 0;
}

int main(int argc, char **argv)
{
	int ret;

	bo = (struct bench_opts){
		.sizes = "64",
		.system = "libripc",
		.mode = "1,10,50",
		.iters = 1000,
		.warmup = 5,
		.max_sec = 3.0,
		.time_limit = 120,
		.window = 1,
	};
	bench_parse(argc, argv,
		    "  -x list   think times between requests, ms [1,10,50]\n"
		    "  -S size   request size (one) [64]\n");
	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_lib_init();
	ret = bo.server ? server() : client();
	ripc_finalize();
	return ret;
}
