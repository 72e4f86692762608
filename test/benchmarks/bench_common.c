/*
 * Shared helpers of the libripc benchmarks; see bench_common.h.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"

struct bench_opts bo;

static const char *prog;

static void on_alarm(int sig)
{
	static const char m[] = "benchmark: time limit (-T) reached, exiting\n";

	(void)sig;
	/* Async-signal-safe only: the library may hold its lock. */
	if (write(2, m, sizeof(m) - 1) < 0)
		(void)0;
	_exit(3);
}

static void usage(const char *extra)
{
	fprintf(stderr,
		"usage: %s -s [options]            server\n"
		"       %s [options] SERVICE_ID    client\n"
		"  -p prov   transport: shm, tcp (sets RIPC_PROVIDER); net: tcp\n"
		"            with RIPC_TCP_NATIVE=1, labelled net\n"
		"  -r file   server: write the service ID to file when ready\n"
		"  -S list   sizes, comma separated (suffix k = KiB, m = MiB)\n"
		"  -n iters  timed iterations per size (upper bound)\n"
		"  -w iters  warm-up iterations per size\n"
		"  -t sec    time budget per size\n"
		"  -T sec    hard time limit of the process\n"
		"  -N name   system column      -X label  transport column\n"
		"  -W n      messages in flight -x mode   benchmark mode\n"
		"  -c list   sender counts (ripc_msgrate)\n"
		"  -m        also print minima  -v        verbose\n%s",
		prog, prog, extra ? extra : "");
	exit(2);
}

void bench_parse(int argc, char **argv, const char *usage_extra)
{
	int c;

	prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	while ((c = getopt(argc, argv, "sp:r:S:N:X:n:w:t:T:W:x:c:mvh")) != -1) {
		switch (c) {
		case 's':
			bo.server = true;
			break;
		case 'p':
			bo.prov = optarg;
			break;
		case 'r':
			bo.ready_file = optarg;
			break;
		case 'S':
			bo.sizes = optarg;
			break;
		case 'N':
			bo.system = optarg;
			break;
		case 'X':
			bo.label = optarg;
			break;
		case 'n':
			bo.iters = atol(optarg);
			break;
		case 'w':
			bo.warmup = atol(optarg);
			break;
		case 't':
			bo.max_sec = atof(optarg);
			break;
		case 'T':
			bo.time_limit = atoi(optarg);
			break;
		case 'W':
			bo.window = atoi(optarg);
			break;
		case 'x':
			bo.mode = optarg;
			break;
		case 'c':
			bo.counts = optarg;
			break;
		case 'm':
			bo.print_min = true;
			break;
		case 'v':
			bo.verbose = true;
			break;
		default:
			usage(usage_extra);
		}
	}
	if (bo.standalone) {
		if (optind != argc)
			usage(usage_extra);
	} else if (!bo.server) {
		long id;
		char *end;

		if (optind != argc - 1)
			usage(usage_extra);
		id = strtol(argv[optind], &end, 0);
		if (*end || id < 0 || id > RIPC_MAX_SERVICE_ID)
			bench_die("bad service ID '%s'", argv[optind]);
		bo.server_id = (uint16_t)id;
	} else if (optind != argc) {
		usage(usage_extra);
	}
	if (bo.iters < 1 || bo.warmup < 0 || bo.max_sec <= 0 ||
	    bo.time_limit < 1 || bo.window < 1)
		bench_die("bad -n, -w, -t, -T or -W value");
	/* "net": the tcp transport on libfabric 1.17's native provider
	 * (ripc(7), RIPC_TCP_NATIVE), named as the raw programs name that
	 * provider, so that one -p value runs both sides of a comparison. */
	if (bo.prov && !strcmp(bo.prov, "net")) {
		setenv("RIPC_TCP_NATIVE", "1", 1);
		bo.prov = "tcp";
		if (!bo.label)
			bo.label = "net";
	}
	if (bo.prov)
		setenv("RIPC_PROVIDER", bo.prov, 1);
	if (!bo.label)
		bo.label = bo.prov ? bo.prov : "auto";
	/* A wedged peer must not keep a benchmark alive forever. */
	signal(SIGALRM, on_alarm);
	alarm((unsigned)bo.time_limit);
}

void bench_lib_init(void)
{
	uint8_t r = ripc_init();

	if (r == RIPC_ENOPROVIDER) {
		bench_log("transport %s not available here",
			  bo.prov ? bo.prov : "(any)");
		exit(77);
	}
	if (r)
		bench_die("ripc_init: %s", ripc_strerror(r));
}

void bench_ready(uint16_t id)
{
	printf("service %u\n", id);
	fflush(stdout);
	if (bo.ready_file) {
		char tmp[4096];
		FILE *f;

		snprintf(tmp, sizeof(tmp), "%s.tmp", bo.ready_file);
		f = fopen(tmp, "w");
		if (!f || fprintf(f, "%u\n", id) < 0 || fclose(f) ||
		    rename(tmp, bo.ready_file))
			bench_die("cannot write ready file %s", bo.ready_file);
	}
}

double bench_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void bench_log(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[%s %s %d] ", prog ? prog : "bench",
		bo.server ? "server" : "client", (int)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void bench_log_stats(void)
{
	struct ripc_stats st = { 0 };

	if (ripc_stats(&st, sizeof(st)))
		return;
	bench_log("stats: short sent %llu recv %llu, long sent %llu recv %llu, "
		  "send retries %llu, released %llu, dones alone %llu "
		  "carried %llu carried-recv %llu, direct wake-ups %llu, "
		  "bell rings %llu, spin yields %llu (slow %llu)",
		  (unsigned long long)st.short_sent,
		  (unsigned long long)st.short_recv,
		  (unsigned long long)st.long_sent,
		  (unsigned long long)st.long_recv,
		  (unsigned long long)st.send_retries,
		  (unsigned long long)st.long_released,
		  (unsigned long long)st.dones_alone,
		  (unsigned long long)st.dones_carried,
		  (unsigned long long)st.dones_carried_recv,
		  (unsigned long long)st.direct_wakeups,
		  (unsigned long long)st.bell_rings,
		  (unsigned long long)st.spin_yields,
		  (unsigned long long)st.spin_yields_slow);
}

void bench_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[%s %s %d] error: ", prog ? prog : "bench",
		bo.server ? "server" : "client", (int)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

size_t bench_sizes(const char *list, size_t **out)
{
	size_t n = 0, cap = 16, *v = malloc(cap * sizeof(*v));
	const char *p = list;

	if (!v)
		bench_die("out of memory");
	while (p && *p) {
		char *end;
		unsigned long long x;

		errno = 0;
		x = strtoull(p, &end, 0);
		if (errno || end == p)
			bench_die("bad size list '%s'", list);
		switch (tolower((unsigned char)*end)) {
		case 'k':
			x <<= 10, end++;
			break;
		case 'm':
			x <<= 20, end++;
			break;
		case 'g':
			x <<= 30, end++;
			break;
		}
		if (*end && *end != ',')
			bench_die("bad size list '%s'", list);
		if (x == 0)
			bench_die("size 0 in '%s'", list);
		if (n == cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof(*v));
			if (!v)
				bench_die("out of memory");
		}
		v[n++] = (size_t)x;
		p = *end ? end + 1 : end;
	}
	if (!n)
		bench_die("empty size list");
	*out = v;
	return n;
}

size_t bench_max_size(const size_t *sizes, size_t n)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++)
		m = sizes[i] > m ? sizes[i] : m;
	return m;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static inline uint64_t pattern(size_t k, size_t size)
{
	return (k + 1) * 0x9e3779b97f4a7c15ull ^ size;
}

void bench_fill(uint8_t *buf, size_t size)
{
	uint64_t *w = (uint64_t *)buf;

	for (size_t k = 0; k < size / 8; k++)
		w[k] = pattern(k, size);
}

bool bench_verify(const uint8_t *buf, size_t size)
{
	const uint64_t *w = (const uint64_t *)buf;

	for (size_t k = 1; k + 2 < size / 8; k++)
		if (w[k] != pattern(k, size))
			return false;
	return true;
}

double bench_median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void bench_emit(const char *system, const char *transport, size_t size,
		const char *metric, double value, const char *unit)
{
	/* %.2f, as the peers print it. */
	printf("%s %s %zu %s %.2f %s\n", system, transport, size, metric,
	       value, unit);
	fflush(stdout);
}

void *bench_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		bench_die("mmap %zu bytes failed", len);
	memset(p, 0, len);
	return p;
}

void *bench_land(size_t len)
{
	void *p = ripc_buf_alloc(len);

	if (!p)
		bench_die("ripc_buf_alloc(%zu): %s", len,
			  ripc_strerror(ripc_last_error()));
	memset(p, 0, len);
	return p;
}

void bench_check_transport(uint16_t server)
{
	const char *tr = ripc_transport_of(server);

	if (!tr)
		bench_die("server %u unreachable: %s", server,
			  ripc_strerror(ripc_last_error()));
	if (bo.prov && strcmp(tr, bo.prov))
		bench_die("server reached over %s, not %s", tr, bo.prov);
}

void bench_free_msg(uint16_t ns, void **si, uint32_t *ss, void **li,
		    uint32_t *ls)
{
	if (ns)
		ripc_buf_free(si[0]); /* all short items share one buffer */
	free(si);
	free(ss);
	free(li);
	free(ls);
}

void bench_note_pid(int pid)
{
	const char *f = getenv("BENCH_PIDS");
	FILE *fp = f && *f ? fopen(f, "a") : NULL;

	if (fp) {
		fprintf(fp, "%d\n", pid);
		fclose(fp);
	}
}

int bench_shm_cleanup(int pid)
{
	char prefix[32], path[300];
	struct dirent *d;
	DIR *dir = opendir("/dev/shm");
	int n = 0;

	snprintf(prefix, sizeof(prefix), "%d:", pid);
	while (dir && (d = readdir(dir))) {
		if (strncmp(d->d_name, prefix, strlen(prefix)))
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", d->d_name);
		if (!unlink(path))
			n++;
	}
	if (dir)
		closedir(dir);
	return n;
}

double bench_percentile(const double *sorted, size_t n, double p)
{
	double r = p / 100.0 * (double)n;
	size_t rank = (size_t)r;

	if (!n)
		return 0;
	if ((double)rank < r) /* ceil without libm */
		rank++;
	if (rank < 1)
		rank = 1;
	return sorted[rank > n ? n - 1 : rank - 1];
}
