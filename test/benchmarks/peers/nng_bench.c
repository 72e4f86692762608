/*
 * nng_bench - NNG, what a user could pick instead of libripc: req/rep
 * latency and push/pull throughput, in the benchmarks' line format.
 *
 *   nng_bench server URL [LIMIT]                    rep0: echo until "BYE"
 *   nng_bench client URL LABEL SIZES [ITERS SEC WARMUP]
 *   nng_bench thr-server URL LABEL SIZE COUNT [LIMIT]  pull0: prints the line
 *   nng_bench thr-client URL SIZE COUNT [LIMIT]        push0
 *
 * URL: tcp://127.0.0.1:PORT or ipc:///PATH.  LABEL: the transport column.
 *
 * Adapted from ../shared/bench/peers/src/nng_bench.c: latency is the median
 * of individually timed round trips (halved), as ripc_pingpong reports it;
 * a push0/pull0 throughput mode is added (the original had latency only),
 * timed at the receiver from the first to the last message (COUNT-1
 * counted, MB = 1e6 bytes).  Receives time out (NNG_OPT_RECVTIMEO), dials
 * retry for 5 s while the listener starts, and the process has an alarm
 * (LIMIT s, default 60).
 */
#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>
#include <nng/protocol/pipeline0/push.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void on_alarm(int sig)
{
	static const char m[] = "nng_bench: time limit reached, exiting\n";

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

static void check(int rv, const char *what)
{
	if (rv) {
		fprintf(stderr, "nng_bench: %s: %s\n", what, nng_strerror(rv));
		exit(1);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The listener may still be starting: retry for up to 5 s. */
static void dial(nng_socket s, const char *url)
{
	for (int i = 0; nng_dial(s, url, NULL, 0) != 0; i++) {
		if (i == 100) {
			fprintf(stderr, "nng_bench: cannot dial %s\n", url);
			exit(1);
		}
		nng_msleep(50);
	}
}

static void client(const char *url, const char *label, const char *sizes,
		   long iters, double sec, long warm)
{
	size_t cap = 1 << 20, n;
	char *buf = calloc(1, cap), *list = strdup(sizes), *save, *tok;
	double *rt = malloc(((size_t)iters + 1) * sizeof(*rt));
	nng_socket s;

	if (!buf || !list || !rt)
		check(NNG_ENOMEM, "malloc");
	check(nng_req0_open(&s), "req0_open");
	check(nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 5000), "recvtimeo");
	check(nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, cap), "recvmaxsz");
	dial(s, url);
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		size_t sz = strtoul(tok, NULL, 0);
		long i, done = 0;
		double deadline;

		if (sz > cap)
			check(NNG_EMSGSIZE, "latency size above 1 MiB");
		for (i = 0; i < warm; i++) {
			check(nng_send(s, buf, sz, 0), "send (warm-up)");
			n = cap;
			check(nng_recv(s, buf, &n, 0), "recv (warm-up)");
		}
		deadline = now() + sec;
		rt[0] = now();
		while (done < iters) {
			check(nng_send(s, buf, sz, 0), "send");
			n = cap;
			check(nng_recv(s, buf, &n, 0), "recv");
			if (n != sz)
				check(NNG_EPROTO, "short echo");
			rt[++done] = now();
			if (done >= 100 && rt[done] > deadline)
				break;
		}
		for (i = 0; i < done; i++)
			rt[i] = (rt[i + 1] - rt[i]) * 1e6 / 2;
		qsort(rt, (size_t)done, sizeof(*rt), cmp_double);
		printf("nng_reqrep %s %zu lat_us %.2f us\n", label, sz,
		       done % 2 ? rt[done / 2]
				: (rt[done / 2 - 1] + rt[done / 2]) / 2);
		fflush(stdout);
	}
	check(nng_send(s, "BYE", 3, 0), "send BYE");
	n = cap;
	nng_recv(s, buf, &n, 0);
	nng_close(s);
	free(rt);
	free(list);
	free(buf);
}

int main(int argc, char **argv)
{
	const char *mode;
	nng_socket s;
	unsigned limit = 60;

	if (argc < 3) {
		fprintf(stderr,
			"usage: see the comment at the top of nng_bench.c\n");
		return 2;
	}
	mode = argv[1];
	if (!strcmp(mode, "server") && argc > 3)
		limit = (unsigned)atoi(argv[3]);
	else if (!strcmp(mode, "thr-server") && argc > 6)
		limit = (unsigned)atoi(argv[6]);
	else if (!strcmp(mode, "thr-client") && argc > 5)
		limit = (unsigned)atoi(argv[5]);
	signal(SIGALRM, on_alarm);
	alarm(limit);

	if (!strcmp(mode, "server")) {
		size_t cap = 1 << 20, n;
		char *buf = calloc(1, cap);

		if (!buf)
			check(NNG_ENOMEM, "malloc");
		check(nng_rep0_open(&s), "rep0_open");
		check(nng_socket_set_ms(s, NNG_OPT_RECVTIMEO,
					(nng_duration)limit * 1000),
		      "recvtimeo");
		check(nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, cap),
		      "recvmaxsz");
		check(nng_listen(s, argv[2], NULL, 0), "listen");
		for (;;) {
			n = cap;
			check(nng_recv(s, buf, &n, 0), "recv (server)");
			check(nng_send(s, buf, n, 0), "send (server)");
			if (n == 3 && !memcmp(buf, "BYE", 3))
				break;
		}
		nng_msleep(50); /* let the last reply leave */
		nng_close(s);
		free(buf);
	} else if (!strcmp(mode, "client") && argc >= 5) {
		client(argv[2], argv[3], argv[4],
		       argc > 5 ? atol(argv[5]) : 20000,
		       argc > 6 ? atof(argv[6]) : 1.0,
		       argc > 7 ? atol(argv[7]) : 1000);
	} else if (!strcmp(mode, "thr-server") && argc >= 6) {
		size_t sz = strtoul(argv[4], NULL, 0);
		long count = atol(argv[5]), i;
		double t0 = 0;
		nng_msg *msg;

		check(nng_pull0_open(&s), "pull0_open");
		check(nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 10000),
		      "recvtimeo");
		check(nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, 0), "recvmaxsz");
		check(nng_listen(s, argv[2], NULL, 0), "listen");
		for (i = 0; i < count; i++) {
			check(nng_recvmsg(s, &msg, 0), "recv (pull)");
			if (nng_msg_len(msg) != sz) {
				fprintf(stderr, "nng_bench: message of %zu bytes\n",
					nng_msg_len(msg));
				return 1;
			}
			nng_msg_free(msg);
			if (i == 0)
				t0 = now();
		}
		printf("nng_pushpull %s %zu bw_MBps %.2f MBps\n", argv[3], sz,
		       (double)sz * (double)(count - 1) / (now() - t0) / 1e6);
		fflush(stdout);
		nng_close(s);
	} else if (!strcmp(mode, "thr-client") && argc >= 5) {
		size_t sz = strtoul(argv[3], NULL, 0);
		long count = atol(argv[4]), i;
		char *buf = calloc(1, sz);

		if (!buf)
			check(NNG_ENOMEM, "malloc");
		check(nng_push0_open(&s), "push0_open");
		check(nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 10000),
		      "sendtimeo");
		dial(s, argv[2]);
		for (i = 0; i < count; i++)
			check(nng_send(s, buf, sz, 0), "send (push)");
		/* nng_close drops what is still queued: wait for the pull
		 * side, which exits after the last message. */
		nng_msleep(200);
		nng_close(s);
		free(buf);
	} else {
		fprintf(stderr, "nng_bench: bad arguments\n");
		return 2;
	}
	return 0;
}
