/*
 * The service directory under load (issue 13, docs/DIRECTORY.md); driven
 * by test/benchmarks/run_dir_bench.sh (test/scripts/directory.sh -m).
 *
 *   dir_bench hold <first_id> <n>
 *       A holder process: registers n IDs through the public API (host
 *       registry, then the directory of RIPC_DIRECTORY), prints one
 *       "R <microseconds>" line per registration and "READY", and keeps
 *       them until SIGTERM.
 *   dir_bench holdz <first_id> <n>
 *       The same through the ZooKeeper engine alone (no libfabric, no host
 *       registry): a light process for the many holders of a benchmark
 *       (a full libripc process over tcp holds about 70 MB here).
 *   dir_bench lookup <first_id> <n> <samples>
 *       Looks the IDs up through the ZooKeeper engine directly (as the
 *       core does, but without the host registry in front, which would
 *       answer for IDs of this host), in a session of its own:
 *         miss   one ID at a time, not cached: lookup, wait for the answer
 *                (eventfd), lookup again; samples random IDs
 *         hit    the same IDs again, from the cache
 *         burst  a fresh session asks for all n IDs at once and waits for
 *                every answer: lookups per second one client gets
 *       and prints benchmark lines ("system transport size_bytes metric
 *       value unit", as the other benchmarks).
 *   dir_bench burst <first_id> <n>
 *       The burst alone (several at once measure what the servers serve).
 * Exit 77 when libripc was built without ZooKeeper.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ripc.h>

#include "directory.h"
#include "ripc_int.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
	stop_sig = sig;
}

static int hold(unsigned first, unsigned n)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (ripc_init()) {
		fprintf(stderr, "hold: init: %s\n",
			ripc_strerror(ripc_last_error()));
		return 1;
	}
	for (unsigned i = 0; i < n; i++) {
		uint64_t t0 = now_ns();

		if (!ripc_register_service_id((int)(first + i))) {
			fprintf(stderr, "hold: register %u: %s\n", first + i,
				ripc_strerror(ripc_last_error()));
			return 1;
		}
		printf("R %.1f\n", (double)(now_ns() - t0) / 1e3);
	}
	printf("READY\n");
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

static void report(const char *what, uint64_t *v, unsigned n, double div,
		   const char *unit)
{
	if (!n)
		return;
	qsort(v, n, sizeof(*v), cmp_u64);
	printf("libripc zk 0 %s_median %.2f %s\n", what, v[n / 2] / div, unit);
	printf("libripc zk 0 %s_p99 %.2f %s\n", what,
	       v[(unsigned)((n - 1) * 0.99)] / div, unit);
	printf("libripc zk 0 %s_max %.2f %s\n", what, v[n - 1] / div, unit);
}

#ifdef RIPC_HAVE_ZOOKEEPER
extern const struct ripc_dir_ops ripc__dir_zk_ops;
#define Z (&ripc__dir_zk_ops)

static bool alive(const struct ripc_reg_proc_info *h, uint64_t st)
{
	return ripc__proc_alive(h->pid, st);
}

static int holdz(unsigned first, unsigned n)
{
	const char *url = ripc__env_str(RIPC_ENV_DIRECTORY);
	struct ripc_dir_cfg cfg = { .session_timeout_ms = 4000,
				    .holder_alive = alive };
	struct sigaction sa = { .sa_handler = on_signal };
	struct ripc_dir *d = NULL;

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	do {
		if (ripc__random(&cfg.self.incarnation, 8))
			return 1;
	} while (!cfg.self.incarnation);
	cfg.self.host_id = ripc__host_id();
	cfg.self.pid = getpid();
	cfg.self_starttime = ripc__proc_starttime(getpid());
	/* A tcp address as long as a real one (sockaddr_in). */
	cfg.self.addr[RIPC_PROV_TCP].len = 16;
	memset(cfg.self.addr[RIPC_PROV_TCP].addr, 7, 16);
	if (strncmp(url, "zk://", 5) || Z->open(url + 5, &cfg, &d)) {
		fprintf(stderr, "holdz: RIPC_DIRECTORY=%s unusable\n", url);
		return 1;
	}
	for (unsigned i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		int r = Z->claim(d, (uint16_t)(first + i), false,
				 t0 + 30000000000ull);

		if (r) {
			fprintf(stderr, "holdz: claim %u: %s\n", first + i,
				strerror(-r));
			return 1;
		}
		printf("Z %.1f\n", (double)(now_ns() - t0) / 1e3);
	}
	printf("READY\n");
	fflush(stdout);
	while (!stop_sig)
		pause();
	Z->close(d);
	return 0;
}

static struct ripc_dir *open_dir(void)
{
	const char *url = ripc__env_str(RIPC_ENV_DIRECTORY);
	struct ripc_dir_cfg cfg = { .session_timeout_ms = 4000 };
	struct ripc_dir *d = NULL;

	if (strncmp(url, "zk://", 5) || Z->open(url + 5, &cfg, &d)) {
		fprintf(stderr, "lookup: RIPC_DIRECTORY=%s unusable\n", url);
		exit(1);
	}
	return d;
}

/* Wait for the engine's eventfd (an answer), at most 5 s in all. */
static int answer(struct ripc_dir *d, uint16_t id)
{
	struct ripc_reg_proc_info out[4];
	uint64_t end = now_ns() + 5000000000ull;
	bool mc;
	int r;

	while ((r = Z->lookup(d, id, out, 4, &mc)) == -EAGAIN ||
	       r == -ENOTCONN) {
		struct pollfd p = { .fd = Z->wait_fd(d), .events = POLLIN };
		uint64_t v;

		if (now_ns() > end)
			break;
		if (poll(&p, 1, 5) > 0 && read(p.fd, &v, sizeof(v)) < 0)
			(void)0;
	}
	return r;
}

static int burst(unsigned first, unsigned n);

static int lookup(unsigned first, unsigned n, unsigned samples)
{
	struct ripc_dir *d = open_dir();
	uint64_t *miss = calloc(samples, sizeof(uint64_t));
	uint64_t *hit = calloc((size_t)samples * 20, sizeof(uint64_t));
	uint16_t *ids = calloc(samples, sizeof(uint16_t));
	struct ripc_reg_proc_info out[4];
	unsigned nmiss = 0, nhit = 0, found = 0;
	uint64_t t0;
	bool mc;

	if (!miss || !hit || !ids)
		return 1;
	srand((unsigned)getpid());
	/* Connected first: a session's setup is not a lookup. */
	answer(d, RIPC_MAX_SERVICE_ID);
	for (unsigned i = 0; i < samples; i++) {
		uint16_t id;
		bool again;

		do { /* distinct IDs: each one a real miss */
			id = (uint16_t)(first + (unsigned)rand() % n);
			again = false;
			for (unsigned k = 0; k < i && !again; k++)
				again = ids[k] == id;
		} while (again);
		ids[i] = id;
		t0 = now_ns();
		if (answer(d, id) == 1) {
			miss[nmiss++] = now_ns() - t0;
			found++;
		}
	}
	for (unsigned round = 0; round < 20; round++)
		for (unsigned i = 0; i < samples; i++) {
			t0 = now_ns();
			if (Z->lookup(d, ids[i], out, 4, &mc) == 1)
				hit[nhit++] = now_ns() - t0;
		}
	Z->close(d);
	printf("# lookup: %u of %u sampled IDs found\n", found, samples);
	report("lookup_miss", miss, nmiss, 1e3, "us");
	report("lookup_hit", hit, nhit, 1.0, "ns");
	free(miss);
	free(hit);
	free(ids);
	return burst(first, n) == 0 && nmiss == samples ? 0 : 1;
}

/* Every ID at once from a fresh session: how fast the answers come. */
static int burst(unsigned first, unsigned n)
{
	struct ripc_reg_proc_info out[4];
	struct ripc_dir *d = open_dir();
	unsigned found = 0, lost = 0;
	uint64_t t0, t1;
	bool mc;

	answer(d, RIPC_MAX_SERVICE_ID);
	t0 = now_ns();
	for (unsigned i = 0; i < n; i++)
		Z->lookup(d, (uint16_t)(first + i), out, 4, &mc);
	found = 0;
	for (unsigned i = 0; i < n; i++) {
		if (answer(d, (uint16_t)(first + i)) == 1)
			found++;
		else
			lost++;
	}
	t1 = now_ns();
	printf("# burst: %u of %u IDs answered in %.1f ms\n", found, n,
	       (double)(t1 - t0) / 1e6);
	printf("libripc zk 0 lookup_burst_rate %.0f lookups/s\n",
	       found / ((double)(t1 - t0) / 1e9));
	Z->close(d);
	return found == n && !lost ? 0 : 1;
}
#else
static int holdz(unsigned first, unsigned n)
{
	(void)first, (void)n;
	printf("Notrun: ZooKeeper not installed (libripc was built without "
	       "it)\n");
	return 77;
}

static int burst(unsigned first, unsigned n)
{
	return holdz(first, n);
}

static int lookup(unsigned first, unsigned n, unsigned samples)
{
	(void)first, (void)n, (void)samples;
	printf("Notrun: ZooKeeper not installed (libripc was built without "
	       "it)\n");
	return 77;
}
#endif

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "hold"))
		return hold((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "holdz"))
		return holdz((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "burst"))
		return burst((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "lookup"))
		return lookup((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]),
			      (unsigned)atoi(argv[4]));
	fprintf(stderr, "usage: %s hold|holdz <first_id> <n> | lookup <first_id> "
			"<n> <samples>\n",
		argv[0]);
	return 2;
}
