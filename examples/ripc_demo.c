/*
 * ripc_demo - two processes on this host talk by service ID.
 *
 * The parent forks a server and acts as the client.  Neither knows the
 * other's address: the server registers a service ID, the client sends to
 * that ID, and libripc resolves it through the host registry.  The client
 * measures short-message latency (ping-pong) and long-send bandwidth (the
 * server pulls the data with RDMA reads and checks it).
 *
 * Usage: ripc_demo [-p shm|tcp] [-n round_trips] [-m long_MiB]
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
			/* A long message: the items were pulled into library
			 * buffers.  Check them and say so. */
			const uint8_t *p = li[0];
			char verdict[64];
			size_t bad = 0;
			void *b[1] = { verdict };
			uint32_t l[1];

			for (uint32_t k = 0; k < ls[0]; k++)
				bad += p[k] != (uint8_t)(k * 7 + 3);
			snprintf(verdict, sizeof(verdict), "%s",
				 bad ? "corrupt" : "intact");
			l[0] = (uint32_t)strlen(verdict) + 1;
			ripc_send_short(id, from, b, l, 1, NULL, NULL, 0);
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

int main(int argc, char **argv)
{
	int n = 20000, mib = 64, c, status;
	const char *prov = NULL;
	pid_t child;
	int pfd[2];

	while ((c = getopt(argc, argv, "p:n:m:")) != -1) {
		if (c == 'p')
			prov = optarg;
		else if (c == 'n')
			n = atoi(optarg);
		else if (c == 'm')
			mib = atoi(optarg);
		else {
			fprintf(stderr, "usage: %s [-p shm|tcp] [-n N] [-m MiB]\n",
				argv[0]);
			return 2;
		}
	}
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

	/* Long messages: the server pulls 64 MiB with RDMA reads. */
	size_t sz = (size_t)mib << 20;
	uint8_t *big = ripc_buf_alloc(sz);
	double best = 0;

	for (size_t k = 0; k < sz; k++)
		big[k] = (uint8_t)(k * 7 + 3);
	for (int rep = 0; rep < 5 && !fails; rep++) {
		void *lb[1] = { big };
		uint32_t ll[1] = { (uint32_t)sz };
		double t0 = now(), mbps;

		if (ripc_send_long(me, srv, lb, ll, 1, NULL, NULL, 0) ||
		    ripc_receive(me, &from, &si, &ss, &ns, &li, &ls, &nl)) {
			fails++;
			break;
		}
		mbps = (double)sz / (now() - t0) / 1e6;
		best = mbps > best ? mbps : best;
		if (strcmp(si[0], "intact"))
			fails++;
		printf("[client] long: %d MiB pulled by the server: %s, %.0f "
		       "MB/s\n",
		       mib, (char *)si[0], mbps);
		ripc_buf_free(si[0]);
		free(si);
		free(ss);
		ripc_wait_released(big, 5000);
	}
	printf("[client] long-send bandwidth, best of 5: %.0f MB/s\n", best);

	const char *bye = "bye";
	b[0] = (void *)bye;
	l[0] = 4;
	ripc_send_short(me, srv, b, l, 1, NULL, NULL, 0);
	waitpid(child, &status, 0);
	ripc_buf_free(big);
	free(rtt);
	printf("demo %s\n", !fails && WIFEXITED(status) && !WEXITSTATUS(status)
				    ? "finished: everything arrived intact"
				    : "FAILED");
	return fails || !WIFEXITED(status) || WEXITSTATUS(status);
}
