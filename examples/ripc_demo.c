/*
 * ripc_demo - two processes on this host talk by service ID.
 *
 * The parent forks a server and acts as the client.  Neither knows the
 * other's address: the server registers a service ID, the client sends to
 * that ID, and libripc resolves it through the host registry.  The client
 * measures short-message latency (ping-pong) and long-send bandwidth (the
 * server pulls the data with RDMA reads), and the server checks every byte
 * it pulled.  The check is not part of the time measured: the server
 * answers as soon as the pull is done, and checks afterwards.
 *
 * Usage: ripc_demo [-p shm|tcp] [-n round_trips] [-m long_MiB] [-q]
 *   -q  leave out the closing "next steps" (for scripts that run the demo
 *       more than once)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ripc.h>

#define DEMO_SERVICE 4000

/* Where `make install` puts the example sources; the build passes the
 * configured path, a program built by hand from the installed source says
 * where to look. */
#ifndef RIPC_EXAMPLEDIR
#define RIPC_EXAMPLEDIR "<prefix>/share/doc/libripc/examples"
#endif

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int reply(uint16_t me, uint16_t to, const char *text)
{
	void *b[1] = { (void *)text };
	uint32_t l[1] = { (uint32_t)strlen(text) + 1 };

	return ripc_send_short(me, to, b, l, 1, NULL, NULL, 0);
}

static int server(uint16_t id)
{
	void **si, **li;
	uint32_t *ss, *ls;
	uint16_t ns, nl, from;

	printf("[server %d] registered service %u, waiting\n", (int)getpid(),
	       id);
	for (;;) {
		uint8_t r = ripc_receive(id, &from, &si, &ss, &ns, &li, &ls, &nl);

		if (r) {
			printf("[server] receive: %s\n", ripc_strerror(r));
			return 1;
		}
		if (nl) {
			/* A long message: ripc_receive() returned once the
			 * items were pulled into library buffers.  Tell the
			 * client at once, so that its clock measures the
			 * transfer only; then check the data and send the
			 * verdict in a second message. */
			const uint8_t *p = li[0];
			size_t bad = 0;

			reply(id, from, "pulled");
			for (uint32_t k = 0; k < ls[0]; k++)
				bad += p[k] != (uint8_t)(k * 7 + 3);
			reply(id, from, bad ? "corrupt" : "intact");
			ripc_buf_free(li[0]);
			free(li);
			free(ls);
			continue;
		}
		if (ns == 1 && !strcmp(si[0], "bye")) {
			printf("[server] client %u said bye\n", from);
			ripc_buf_free(si[0]);
			free(si);
			free(ss);
			return 0;
		}
		/* Echo short messages straight from the receive buffer. */
		ripc_send_short(id, from, si, ss, ns, NULL, NULL, 0);
		ripc_buf_free(si[0]);
		free(si);
		free(ss);
	}
}

/* Receive one short message and say whether it is the text expected. */
static int expect(uint16_t me, const char *text)
{
	void **si, **li;
	uint32_t *ss, *ls;
	uint16_t ns, nl, from;
	int ok;

	if (ripc_receive(me, &from, &si, &ss, &ns, &li, &ls, &nl)) {
		printf("[client] receive: %s\n",
		       ripc_strerror(ripc_last_error()));
		return 0;
	}
	ok = ns == 1 && !strcmp(si[0], text);
	if (!ok)
		printf("[client] expected \"%s\", got \"%s\"\n", text,
		       ns == 1 ? (char *)si[0] : "?");
	if (ns)
		ripc_buf_free(si[0]);
	free(si);
	free(ss);
	return ok;
}

static void next_steps(void)
{
	printf("\nNext steps:\n"
	       "  * README.md, \"A first program\": start the echo server "
	       "(ripc_echo server &)\n"
	       "    and send it a message from a program of your own\n"
	       "  * man 7 ripc: the model, RETURN CONVENTIONS, the RIPC_* "
	       "variables, faults\n"
	       "  * man 3 ripc_send_short, man 3 ripc_receive: the calls "
	       "every program makes\n"
	       "  * ripc_info: the transports, limits and variables this "
	       "host has\n"
	       "  * programs to copy (ripc_echo.c, ripc_reqrep.c, "
	       "ripc_bulk.c):\n"
	       "    examples/ in the sources, installed in %s\n",
	       RIPC_EXAMPLEDIR);
}

int main(int argc, char **argv)
{
	int n = 20000, mib = 64, c, status, quiet = 0;
	const char *prov = NULL;
	pid_t child;
	int pfd[2];

	while ((c = getopt(argc, argv, "p:n:m:q")) != -1) {
		if (c == 'p')
			prov = optarg;
		else if (c == 'n')
			n = atoi(optarg);
		else if (c == 'm')
			mib = atoi(optarg);
		else if (c == 'q')
			quiet = 1;
		else
			goto usage;
	}
	if (optind != argc || n < 1 || mib < 1 || mib > 4095)
		goto usage;
	if (prov)
		setenv("RIPC_PROVIDER", prov, 1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("libripc demo: a client and a server process on this host, "
	       "transport %s\n", prov ? prov : "automatic");

	if (pipe(pfd))
		return 1;
	child = fork();
	if (child == 0) {
		/* Take the well-known ID, or any free one if it is taken. */
		uint16_t id = ripc_register_service_id(DEMO_SERVICE)
				      ? DEMO_SERVICE
				      : ripc_register_random_service_id();

		if (id == RIPC_INVALID_SERVICE_ID) {
			printf("[server] cannot register: %s\n",
			       ripc_strerror(ripc_last_error()));
			_exit(1);
		}
		if (write(pfd[1], &id, sizeof(id)) != sizeof(id))
			_exit(1);
		c = server(id);
		ripc_finalize(); /* _exit skips atexit handlers */
		_exit(c);
	}
	uint16_t srv;

	if (read(pfd[0], &srv, sizeof(srv)) != sizeof(srv)) {
		printf("[client] server did not start\n");
		return 1;
	}
	uint16_t me = ripc_register_random_service_id();

	if (me == RIPC_INVALID_SERVICE_ID) {
		printf("[client] cannot register: %s\n",
		       ripc_strerror(ripc_last_error()));
		kill(child, SIGTERM);
		return 1;
	}
	printf("[client %d] registered service %u; server %u is reached "
	       "over %s\n",
	       (int)getpid(), me, srv, ripc_transport_of(srv));

	/* Short messages: ping-pong, median one-way latency. */
	double *rtt = calloc((size_t)n, sizeof(double));
	uint64_t word = 0x6c6962726970632e; /* 8 bytes */
	void *b[1] = { &word };
	uint32_t l[1] = { sizeof(word) };
	void **si, **li;
	uint32_t *ss, *ls;
	uint16_t ns, nl, from;
	int fails = 0;

	for (int i = 0; i < n + 1000; i++) {
		double t0 = now();

		if (ripc_send_short(me, srv, b, l, 1, NULL, NULL, 0) ||
		    ripc_receive(me, &from, &si, &ss, &ns, &li, &ls, &nl)) {
			fails++;
			break;
		}
		if (i >= 1000) /* after warm-up */
			rtt[i - 1000] = now() - t0;
		if (ns != 1 || ss[0] != 8 || memcmp(si[0], &word, 8))
			fails++;
		ripc_buf_free(si[0]);
		free(si);
		free(ss);
	}
	qsort(rtt, (size_t)n, sizeof(double), cmp_double);
	printf("[client] short: %d round trips of 8 B, all echoed intact: %s; "
	       "one-way latency median %.2f us, 99th percentile %.2f us\n",
	       n, fails ? "NO" : "yes", rtt[n / 2] / 2 * 1e6,
	       rtt[(size_t)n * 99 / 100] / 2 * 1e6);

	/* Long messages: the server pulls 64 MiB with RDMA reads.  The clock
	 * runs from the send to the server's "pulled"; its check of the data
	 * comes after, in an "intact" or "corrupt" message. */
	size_t sz = (size_t)mib << 20;
	uint8_t *big = ripc_buf_alloc(sz);
	double best = 0;

	if (!big) {
		printf("[client] ripc_buf_alloc(%zu): %s\n", sz,
		       ripc_strerror(ripc_last_error()));
		fails++;
	}
	for (size_t k = 0; big && k < sz; k++)
		big[k] = (uint8_t)(k * 7 + 3);
	for (int rep = 0; rep < 5 && !fails; rep++) {
		void *lb[1] = { big };
		uint32_t ll[1] = { (uint32_t)sz };
		double t0 = now(), t, mbps;

		if (ripc_send_long(me, srv, lb, ll, 1, NULL, NULL, 0)) {
			printf("[client] send_long: %s\n",
			       ripc_strerror(ripc_last_error()));
			fails++;
			break;
		}
		if (!expect(me, "pulled")) {
			fails++;
			break;
		}
		t = now() - t0;
		mbps = (double)sz / t / 1e6;
		best = mbps > best ? mbps : best;
		if (!expect(me, "intact"))
			fails++;
		printf("[client] long: %d MiB pulled by the server in %.1f ms, "
		       "%.0f MB/s; %s\n",
		       mib, t * 1e3, mbps,
		       fails ? "the data arrived CORRUPT"
			     : "the server checked it afterwards: intact");
		ripc_wait_released(big, 5000);
	}
	printf("[client] long-send bandwidth, best of 5: %.0f MB/s "
	       "(transfer only, the check not included)\n",
	       best);

	const char *bye = "bye";
	b[0] = (void *)bye;
	l[0] = 4;
	ripc_send_short(me, srv, b, l, 1, NULL, NULL, 0);
	waitpid(child, &status, 0);
	ripc_buf_free(big);
	free(rtt);
	fails += !WIFEXITED(status) || WEXITSTATUS(status);
	if (fails) {
		printf("demo FAILED\n"
		       "ripc_info shows which transports work here; "
		       "RIPC_LOG_LEVEL=info makes the library say more.\n");
		return 1;
	}
	printf("demo finished: everything arrived intact\n");
	if (!quiet)
		next_steps();
	return 0;
usage:
	fprintf(stderr, "usage: %s [-p shm|tcp] [-n N] [-m MiB] [-q]\n",
		argv[0]);
	return 2;
}
