/*
 * zmq_bench - ZeroMQ, what a user could pick instead of libripc: REQ/REP
 * latency and PUSH/PULL throughput, in the benchmarks' line format.
 *
 *   zmq_bench lat-server EP [LIMIT]                  REP: echo until "BYE"
 *   zmq_bench lat-client EP LABEL SIZES [ITERS SEC WARMUP]
 *   zmq_bench thr-server EP LABEL SIZE COUNT [LIMIT] PULL: prints the line
 *   zmq_bench thr-client EP SIZE COUNT [LIMIT]       PUSH
 *
 * EP: tcp://127.0.0.1:PORT or ipc:///PATH (a unix domain socket).
 * LABEL: the transport column (tcp, ipc).  SIZES: comma-separated bytes.
 *
 * Adapted from ../shared/bench/peers/src/zmq_bench.c (the team's peer
 * baseline), changed so that its figures sit next to libripc's in one
 * table:
 *   - latency is the median of individually timed round trips (halved),
 *     as ripc_pingpong and raw/fi_rma_bench -M report it, not the loop's
 *     mean; ITERS, SEC and WARMUP are run_bench.sh's LAT_ITERS, LAT_SEC and
 *     LAT_WARMUP;
 *   - the PULL side receives into zmq_msg_t (no copy into a fixed buffer),
 *     so sizes up to 64 MiB work, and the high-water mark shrinks with the
 *     message size so that at most ~256 MiB are queued on either side.
 * Throughput is timed at the receiver from the first to the last message
 * (COUNT-1 messages counted), MB = 1e6 bytes.  Every receive has a timeout
 * (ZMQ_RCVTIMEO) and the process an alarm (LIMIT s, default 60).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static void on_alarm(int sig)
{
	static const char m[] = "zmq_bench: time limit reached, exiting\n";

	(void)sig;
	if (write(2, m, sizeof(m) - 1) < 0)
		(void)0;
	_exit(3);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "zmq_bench: %s: %s\n", what, zmq_strerror(zmq_errno()));
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void *sock(void *ctx, int type, int rcvtimeo_ms, int hwm)
{
	void *s = zmq_socket(ctx, type);
	int zero = 0;

	if (!s)
		die("zmq_socket");
	zmq_setsockopt(s, ZMQ_RCVTIMEO, &rcvtimeo_ms, sizeof(rcvtimeo_ms));
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	if (hwm) {
		zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof(hwm));
		zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof(hwm));
	}
	return s;
}

/* At most ~256 MiB queued per side, between 2 and 16 messages. */
static int hwm_for(size_t size)
{
	size_t h = (256u << 20) / size;

	return h < 2 ? 2 : h > 16 ? 16 : (int)h;
}

static void lat_client(void *ctx, const char *ep, const char *label,
		       const char *sizes, long iters, double sec, long warm)
{
	size_t cap = 1 << 20;
	char *buf = calloc(1, cap), *list = strdup(sizes), *save, *tok;
	double *rt = malloc(((size_t)iters + 1) * sizeof(*rt));
	void *s = sock(ctx, ZMQ_REQ, 5000, 0);

	if (!buf || !list || !rt)
		die("out of memory");
	if (zmq_connect(s, ep))
		die("connect");
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		size_t sz = strtoul(tok, NULL, 0);
		long i, done = 0;
		double deadline;

		if (sz > cap)
			die("latency size above 1 MiB");
		for (i = 0; i < warm; i++)
			if (zmq_send(s, buf, sz, 0) < 0 ||
			    zmq_recv(s, buf, cap, 0) != (int)sz)
				die("warm-up round trip");
		deadline = now() + sec;
		rt[0] = now();
		while (done < iters) {
			if (zmq_send(s, buf, sz, 0) < 0)
				die("send");
			if (zmq_recv(s, buf, cap, 0) != (int)sz)
				die("recv");
			rt[++done] = now();
			if (done >= 100 && rt[done] > deadline)
				break;
		}
		for (i = 0; i < done; i++)
			rt[i] = (rt[i + 1] - rt[i]) * 1e6 / 2;
		qsort(rt, (size_t)done, sizeof(*rt), cmp_double);
		printf("zmq_reqrep %s %zu lat_us %.2f us\n", label, sz,
		       done % 2 ? rt[done / 2]
				: (rt[done / 2 - 1] + rt[done / 2]) / 2);
		fflush(stdout);
	}
	zmq_send(s, "BYE", 3, 0);
	zmq_recv(s, buf, cap, 0);
	zmq_close(s);
	free(rt);
	free(list);
	free(buf);
}

int main(int argc, char **argv)
{
	const char *mode, *ep;
	void *ctx, *s = NULL;
	unsigned limit = 60;

	if (argc < 3) {
		fprintf(stderr,
			"usage: see the comment at the top of zmq_bench.c\n");
		return 2;
	}
	mode = argv[1];
	ep = argv[2];
	if (!strcmp(mode, "lat-server") && argc > 3)
		limit = (unsigned)atoi(argv[3]);
	else if (!strcmp(mode, "thr-server") && argc > 6)
		limit = (unsigned)atoi(argv[6]);
	else if (!strcmp(mode, "thr-client") && argc > 5)
		limit = (unsigned)atoi(argv[5]);
	signal(SIGALRM, on_alarm);
	alarm(limit);
	ctx = zmq_ctx_new();

	if (!strcmp(mode, "lat-server")) {
		size_t cap = 1 << 20;
		char *buf = calloc(1, cap);

		s = sock(ctx, ZMQ_REP, (int)limit * 1000, 0);
		if (!buf)
			die("out of memory");
		if (zmq_bind(s, ep))
			die("bind");
		for (;;) {
			int n = zmq_recv(s, buf, cap, 0);

			if (n < 0)
				die("recv (server)");
			if (zmq_send(s, buf, (size_t)n, 0) < 0)
				die("send (server)");
			if (n == 3 && !memcmp(buf, "BYE", 3))
				break;
		}
		free(buf);
	} else if (!strcmp(mode, "lat-client") && argc >= 5) {
		lat_client(ctx, ep, argv[3], argv[4],
			   argc > 5 ? atol(argv[5]) : 20000,
			   argc > 6 ? atof(argv[6]) : 1.0,
			   argc > 7 ? atol(argv[7]) : 1000);
	} else if (!strcmp(mode, "thr-server") && argc >= 6) {
		size_t sz = strtoul(argv[4], NULL, 0);
		long count = atol(argv[5]), i;
		double t0 = 0;
		zmq_msg_t msg;

		s = sock(ctx, ZMQ_PULL, 10000, hwm_for(sz));
		if (zmq_bind(s, ep))
			die("bind");
		for (i = 0; i < count; i++) {
			zmq_msg_init(&msg);
			if (zmq_msg_recv(&msg, s, 0) < 0)
				die("recv (pull)");
			if (zmq_msg_size(&msg) != sz) {
				fprintf(stderr, "zmq_bench: message of %zu bytes\n",
					zmq_msg_size(&msg));
				return 1;
			}
			zmq_msg_close(&msg);
			if (i == 0)
				t0 = now();
		}
		printf("zmq_pushpull %s %zu bw_MBps %.2f MBps\n", argv[3], sz,
		       (double)sz * (double)(count - 1) / (now() - t0) / 1e6);
		fflush(stdout);
	} else if (!strcmp(mode, "thr-client") && argc >= 5) {
		size_t sz = strtoul(argv[3], NULL, 0);
		long count = atol(argv[4]), i;
		int linger = 10000, sndtimeo = 10000;
		char *buf = calloc(1, sz);

		if (!buf)
			die("out of memory");
		s = sock(ctx, ZMQ_PUSH, 10000, hwm_for(sz));
		/* Let the queue drain before close. */
		zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
		zmq_setsockopt(s, ZMQ_SNDTIMEO, &sndtimeo, sizeof(sndtimeo));
		if (zmq_connect(s, ep))
			die("connect");
		for (i = 0; i < count; i++)
			if (zmq_send(s, buf, sz, 0) < 0)
				die("send (push)");
		zmq_close(s);
		s = NULL;
		free(buf);
	} else {
		fprintf(stderr, "zmq_bench: bad arguments\n");
		return 2;
	}
	if (s)
		zmq_close(s);
	zmq_ctx_term(ctx);
	return 0;
}
