/*
 * Services that crash, restart and move, driven by
 * test/scripts/faults.sh (one host, or network namespaces as hosts).
 *
 *   ripc_failover service <id> <label>
 *       Registers <id>, prints "REG <label> <t_ns> <incarnation>", and
 *       answers every request with "<label> <seq>" until SIGTERM (exit) or
 *       SIGUSR1 (unregister, print "UNREG <label> <t_ns>", exit): a move.
 *   ripc_failover client <id> <duration_ms> <interval_ms>
 *       Sends a request every <interval_ms> for <duration_ms> and prints one
 *       line per request: "REQ <seq> <t_start_ns> <t_end_ns> <outcome>
 *       <label>", outcome being ok, or the error of the send or of the wait
 *       for the answer.  Every request ends: nothing may hang.  A wait
 *       that fails adds "STATS <seq> short_recv <n> ..." (the library's
 *       counters then); an answer that comes after its request gave up,
 *       "LATE <seq> <t_ns> <seq waited for then>".
 *   ripc_failover services <first_id> <n> <label>
 *       Registers n IDs and waits for SIGTERM (for resolve).
 *   ripc_failover resolve <first_id> <n>
 *       Measures the first resolution of n IDs held on another host and
 *       prints "libripc resolver 0 lat_us <median> us" lines.
 * Times are CLOCK_MONOTONIC, the same clock in every namespace.
 *
 * For test/scripts/directory.sh (issue 13), in the environment of
 * `service`: RIPC_TEST_REG_TRIES (default 300) registration attempts 10 ms
 * apart, after which it prints "REGFAIL <label> <t_ns> <error>" and exits
 * 1; RIPC_TEST_MCAST=1 registers <id> as a multicast ID;
 * RIPC_TEST_TRACE=1 prints "ANS <seq> <t_received_ns> <t_answered_ns>
 * <send result>" per request (where a slow request lost its time).
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ripc.h>

static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
	stop_sig = sig;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int service(uint16_t id, const char *label)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct ripc_stats st;
	const char *t = getenv("RIPC_TEST_REG_TRIES");
	const char *m = getenv("RIPC_TEST_MCAST");
	int tries = t ? atoi(t) : 300;
	bool mcast = m && !strcmp(m, "1");

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	/* A restarted instance may start before the old one is reaped: retry
	 * for a while (the registry reclaims dead owners). */
	for (int i = 1;
	     !(mcast ? ripc_register_multicast_service_id(id)
		     : ripc_register_service_id(id));
	     i++) {
		if (i >= tries) {
			int e = ripc_last_error();

			printf("REGFAIL %s %llu %s\n", label,
			       (unsigned long long)now_ns(),
			       e == RIPC_EINUSE	    ? "EINUSE"
			       : e == RIPC_ETIMEDOUT ? "ETIMEDOUT"
						     : "other");
			fprintf(stderr, "service %s: register %u: %s\n", label,
				id, ripc_strerror(e));
			return 1;
		}
		usleep(10000);
	}
	printf("REG %s %llu\n", label, (unsigned long long)now_ns());
	fflush(stdout);
	bool trace = getenv("RIPC_TEST_TRACE") &&
		     !strcmp(getenv("RIPC_TEST_TRACE"), "1");

	while (!stop_sig) {
		void **si;
		uint32_t *ss;
		uint16_t ns, from;
		char reply[64];
		int r = ripc_receive_timeout(id, &from, &si, &ss, &ns, NULL,
					     NULL, NULL, 100);

		if (r == RIPC_ETIMEDOUT || r == RIPC_EINTR)
			continue;
		if (r) {
			fprintf(stderr, "service %s: receive: %s\n", label,
				ripc_strerror(r));
			continue;
		}
		if (ns == 1 && ss[0] == 8) {
			uint64_t seq, t_recv = now_ns();
			void *b[1] = { reply };
			uint32_t l[1];

			memcpy(&seq, si[0], 8);
			snprintf(reply, sizeof(reply), "%s %llu", label,
				 (unsigned long long)seq);
			l[0] = (uint32_t)strlen(reply) + 1;
			/* A reply that cannot go out is the client's loss. */
			r = ripc_send_short(id, from, b, l, 1, NULL, NULL, 0);
			if (trace)
				printf("ANS %llu %llu %llu %d\n",
				       (unsigned long long)seq,
				       (unsigned long long)t_recv,
				       (unsigned long long)now_ns(), r);
		}
		if (ns)
			ripc_buf_free(si[0]);
		free(si);
		free(ss);
	}
	if (stop_sig == SIGUSR1) {
		ripc_unregister_service_id(id);
		printf("UNREG %s %llu\n", label, (unsigned long long)now_ns());
	}
	ripc_stats(&st, sizeof(st));
	fprintf(stderr,
		"service %s: %llu requests, %llu drops (no service), %llu "
		"answers, %llu send retries, %llu send timeouts\n",
		label, (unsigned long long)st.short_recv,
		(unsigned long long)st.drops_no_service,
		(unsigned long long)st.short_sent,
		(unsigned long long)st.send_retries,
		(unsigned long long)st.send_timeouts);
	fflush(stdout);
	ripc_finalize();
	return 0;
}

static int client(uint16_t id, long duration_ms, long interval_ms)
{
	uint16_t me = ripc_register_random_service_id();
	uint64_t end = now_ns() + (uint64_t)duration_ms * 1000000;
	uint64_t seq = 0;

	if (me == RIPC_INVALID_SERVICE_ID) {
		fprintf(stderr, "client: register: %s\n",
			ripc_strerror(ripc_last_error()));
		return 1;
	}
	while (now_ns() < end) {
		uint64_t t0 = now_ns(), t1, want = seq;
		void *b[1] = { &seq };
		uint32_t l[1] = { 8 };
		char outcome[64] = "ok", label[32] = "-";
		int r = ripc_send_short(me, id, b, l, 1, NULL, NULL, 0);

		if (r) {
			snprintf(outcome, sizeof(outcome), "send:%d", r);
		} else {
			/* Wait for this request's answer; older ones that
			 * arrive late are skipped. */
			for (;;) {
				void **si;
				uint32_t *ss;
				uint16_t ns, from;
				unsigned long long got = 0;
				char lab[32];

				r = ripc_receive_timeout(me, &from, &si, &ss,
							 &ns, NULL, NULL, NULL,
							 200);
				if (r) {
					struct ripc_stats st;

					snprintf(outcome, sizeof(outcome),
						 "recv:%d", r);
					/* What the library had seen by then. */
					ripc_stats(&st, sizeof(st));
					printf("STATS %llu short_sent %llu "
					       "short_recv %llu drops %llu/%llu/"
					       "%llu/%llu/%llu (malformed, no "
					       "service, stale, queue full, forged) "
					       "resolutions %llu send_retries %llu "
					       "direct_wakeups %llu peers_reaped "
					       "%llu\n",
					       (unsigned long long)want,
					       (unsigned long long)st.short_sent,
					       (unsigned long long)st.short_recv,
					       (unsigned long long)st.drops_malformed,
					       (unsigned long long)st.drops_no_service,
					       (unsigned long long)st.drops_stale,
					       (unsigned long long)st.drops_queue_full,
					       (unsigned long long)st.drops_forged,
					       (unsigned long long)st.resolutions,
					       (unsigned long long)st.send_retries,
					       (unsigned long long)st.direct_wakeups,
					       (unsigned long long)st.peers_reaped);
					break;
				}
				int k = ns == 1 ? sscanf(si[0], "%31s %llu",
							 lab, &got)
						: 0;

				if (k == 2 && got == want)
					snprintf(label, sizeof(label), "%s", lab);
				else if (k == 2 && got < want)
					/* An answer after its request gave up:
					 * when it came says where it was held. */
					printf("LATE %llu %llu %llu\n", got,
					       (unsigned long long)now_ns(),
					       (unsigned long long)want);
				if (ns)
					ripc_buf_free(si[0]);
				free(si);
				free(ss);
				if (got == want && strcmp(label, "-"))
					break;
			}
		}
		t1 = now_ns();
		printf("REQ %llu %llu %llu %s %s\n", (unsigned long long)seq,
		       (unsigned long long)t0, (unsigned long long)t1, outcome,
		       label);
		seq++;
		if (t1 - t0 < (uint64_t)interval_ms * 1000000)
			usleep((useconds_t)(interval_ms * 1000 -
					    (long)((t1 - t0) / 1000)));
	}
	fflush(stdout);
	ripc_finalize();
	return 0;
}

static int services(uint16_t first, int n, const char *label)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGTERM, &sa, NULL);
	for (int i = 0; i < n; i++)
		if (!ripc_register_service_id(first + i)) {
			fprintf(stderr, "services: register %d: %s\n",
				first + i, ripc_strerror(ripc_last_error()));
			return 1;
		}
	printf("REG %s %llu\n", label, (unsigned long long)now_ns());
	fflush(stdout);
	while (!stop_sig)
		pause();
	ripc_finalize();
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static int resolve(uint16_t first, int n)
{
	uint64_t *lat = calloc((size_t)n, sizeof(*lat));
	int got = 0;

	if (!lat || ripc_init())
		return 1;
	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		const char *tp = ripc_transport_of(first + i);

		if (tp && strcmp(tp, "shm"))
			lat[got++] = now_ns() - t0;
	}
	if (!got) {
		fprintf(stderr, "resolve: nothing resolved\n");
		free(lat);
		return 1;
	}
	qsort(lat, (size_t)got, sizeof(*lat), cmp_u64);
	printf("libripc resolver 0 lat_us %.1f us\n", (double)lat[got / 2] / 1e3);
	printf("libripc resolver_max 0 lat_us %.1f us\n",
	       (double)lat[got - 1] / 1e3);
	fprintf(stderr, "resolve: %d of %d IDs resolved\n", got, n);
	free(lat);
	ripc_finalize();
	return got == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "service"))
		return service((uint16_t)atoi(argv[2]), argv[3]);
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client((uint16_t)atoi(argv[2]), atol(argv[3]),
			      atol(argv[4]));
	if (argc == 5 && !strcmp(argv[1], "services"))
		return services((uint16_t)atoi(argv[2]), atoi(argv[3]),
				argv[4]);
	if (argc == 4 && !strcmp(argv[1], "resolve"))
		return resolve((uint16_t)atoi(argv[2]), atoi(argv[3]));
	fprintf(stderr,
		"usage: %s service <id> <label> | client <id> <ms> <interval> "
		"| services <id> <n> <label> | resolve <id> <n>\n",
		argv[0]);
	return 2;
}
