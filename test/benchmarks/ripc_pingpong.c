/*
 * ripc_pingpong - short-message latency of libripc: one-way time = half
 * the round trip of a ping-pong between two processes.
 *
 *   server:  ripc_pingpong -s -p shm -r ready.txt       (prints its ID)
 *   client:  ripc_pingpong -p shm -S 8,64,1k,64k ID
 *
 * The client sends one short message of SIZE bytes (one item) to the
 * server's service ID; the server echoes the items straight from the
 * library's receive buffer (no copy, as a libRIPC server would) and frees
 * it.  Each client iteration is timed on its own: send, receive the echo,
 * check its length and first and last bytes, free the receive buffer.
 * Releasing the buffer is part of the loop because the library reposts
 * it then, just as a raw libfabric ping-pong reposts its receive.
 *
 * Per size: -w warm-up round trips (untimed; the first one resolves the
 * service and connects), then up to -n timed ones or -t seconds,
 * whichever ends first.  Printed: the median one-way latency (lat_us) and
 * with -m the minimum (lat_min_us):
 *
 *     libripc shm 8 lat_us 1.23 us
 *
 * The client ends the server with a two-item "BYE" message and waits
 * (bounded) for its answer, so that nothing is left in flight when the
 * endpoints close.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define BYE "BYE"
#define MIN_TIMED 100 /* at least this many samples, budget or not */

static bool is_bye(uint16_t ns, void **si, const uint32_t *ss)
{
	/* Pings always have one item: two items cannot be a ping. */
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

static void free_msg(uint16_t ns, void **si, uint32_t *ss)
{
	if (ns)
		ripc_buf_free(si[0]); /* all items share one buffer */
	free(si);
	free(ss);
}

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	uint64_t echoed = 0;

	if (me == RIPC_INVALID_SERVICE_ID)
		bench_die("register: %s", ripc_strerror(ripc_last_error()));
	bench_ready(me);
	for (;;) {
		void **si = NULL, **li = NULL;
		uint32_t *ss = NULL, *ls = NULL;
		uint16_t ns = 0, nl = 0, from;
		uint8_t r;

		/* Blocking receive, as an ordinary server would; the
		 * library's receive spins RIPC_SPIN_US before it sleeps. */
		r = ripc_receive(me, &from, &si, &ss, &ns, &li, &ls, &nl);
		if (r)
			bench_die("receive: %s", ripc_strerror(r));
		if (nl) {
			for (unsigned i = 0; i < nl; i++)
				ripc_buf_free(li[i]);
			free(li);
			free(ls);
		}
		if (is_bye(ns, si, ss)) {
			send_bye(me, from);
			free_msg(ns, si, ss);
			break;
		}
		if (ns) {
			r = ripc_send_short(me, from, si, ss, ns, NULL, NULL,
					    0);
			if (r)
				bench_die("echo to %u: %s", from,
					  ripc_strerror(r));
			echoed++;
		}
		free_msg(ns, si, ss);
	}
	if (bo.verbose) {
		struct ripc_stats st;

		ripc_stats(&st, sizeof(st));
		bench_log("echoed %llu messages; send retries %llu, drops "
			  "%llu",
			  (unsigned long long)echoed,
			  (unsigned long long)st.send_retries,
			  (unsigned long long)(st.drops_queue_full +
					       st.drops_malformed));
	}
	return 0;
}

/* One round trip of `size` bytes; returns false on a bad echo. */
static bool round_trip(uint16_t me, uint16_t srv, uint8_t *buf,
		       uint32_t size)
{
	void *b[1] = { buf };
	uint32_t l[1] = { size };
	void **si = NULL, **li = NULL;
	uint32_t *ss = NULL, *ls = NULL;
	uint16_t ns = 0, nl = 0, from;
	uint8_t r;
	bool ok;

	r = ripc_send_short(me, srv, b, l, 1, NULL, NULL, 0);
	if (r)
		bench_die("send %u bytes: %s", size, ripc_strerror(r));
	r = ripc_receive(me, &from, &si, &ss, &ns, &li, &ls, &nl);
	if (r)
		bench_die("receive: %s", ripc_strerror(r));
	/* Cheap check of the echo: length, first and last byte. */
	ok = from == srv && ns == 1 && nl == 0 && ss[0] == size &&
	     ((uint8_t *)si[0])[0] == buf[0] &&
	     ((uint8_t *)si[0])[size - 1] == buf[size - 1];
	free_msg(ns, si, ss);
	return ok;
}

static int client(void)
{
	uint16_t me = ripc_register_random_service_id();
	size_t *sizes, nsizes = bench_sizes(bo.sizes, &sizes), max;
	double *t;
	uint8_t *buf;
	const char *tr;

	if (me == RIPC_INVALID_SERVICE_ID)
		bench_die("register: %s", ripc_strerror(ripc_last_error()));
	max = bench_max_size(sizes, nsizes);
	if (max > RIPC_SHORT_MAX)
		bench_die("size %zu is above the short maximum %d", max,
			  RIPC_SHORT_MAX);
	/* Make sure we measure the transport we were asked for. */
	tr = ripc_transport_of(bo.server_id);
	if (!tr)
		bench_die("server %u unreachable: %s", bo.server_id,
			  ripc_strerror(ripc_last_error()));
	if (bo.prov && strcmp(tr, bo.prov))
		bench_die("server reached over %s, not %s", tr, bo.prov);

	buf = malloc(max);
	t = malloc(((size_t)bo.iters + 1) * sizeof(*t));
	if (!buf || !t)
		bench_die("out of memory");
	for (size_t i = 0; i < max; i++)
		buf[i] = (uint8_t)(i * 7 + 3);

	for (size_t k = 0; k < nsizes; k++) {
		uint32_t size = (uint32_t)sizes[k];
		long n = 0;
		double deadline;

		/* Vary the payload per size so a stale echo shows. */
		buf[0] = (uint8_t)k;
		buf[size - 1] = (uint8_t)(k + 100);
		for (long i = 0; i < bo.warmup; i++)
			if (!round_trip(me, bo.server_id, buf, size))
				bench_die("bad echo of %u bytes (warm-up)",
					  size);
		/* t[i] = start of iteration i; t[n] = end of the last. */
		deadline = bench_now() + bo.max_sec;
		t[0] = bench_now();
		while (n < bo.iters) {
			if (!round_trip(me, bo.server_id, buf, size))
				bench_die("bad echo of %u bytes", size);
			t[++n] = bench_now();
			if (t[n] > deadline && n >= MIN_TIMED)
				break;
		}
		/* Round trip i = t[i+1] - t[i]; one-way = half of it. */
		for (long i = 0; i < n; i++)
			t[i] = (t[i + 1] - t[i]) * 1e6 / 2;
		bench_emit(bo.system, bo.label, size, "lat_us",
			   bench_median(t, (size_t)n), "us");
		if (bo.print_min)
			bench_emit(bo.system, bo.label, size, "lat_min_us",
				   t[0], "us");
		if (bo.verbose)
			bench_log("size %u: %ld round trips, p99 %.2f us", size,
				  n, t[(size_t)n * 99 / 100]);
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
		free_msg(ns, si, ss);
		if (bye)
			break;
	}
	free(buf);
	free(t);
	free(sizes);
	return 0;
}

int main(int argc, char **argv)
{
	int ret;

	bo = (struct bench_opts){
		.sizes = "8,64,256,1k,4k,16k,64k",
		.system = "libripc",
		.iters = 20000,
		.warmup = 1000,
		.max_sec = 1.0,
		.time_limit = 120,
		.window = 1,
	};
	bench_parse(argc, argv, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_lib_init();
	ret = bo.server ? server() : client();
	ripc_finalize();
	return ret;
}
