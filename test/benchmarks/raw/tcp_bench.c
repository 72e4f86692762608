/*
 * tcp_bench.c - kernel TCP sockets baseline on 127.0.0.1.
 *
 * Server:  tcp_bench -s [-P port] [-T secs]
 * Client:  tcp_bench [-P port] [-L sizes] [-B sizes] [-t secs] [-b]
 *          -b: ping-pong with busy polling ('P') instead of blocking ('L')
 *          -q: tell the server to exit at the end
 *
 * Each client connection starts with an 8-byte header {char mode; pad;
 * uint32 size}:
 *   'L'  ping-pong: client sends framed messages (4-byte length + payload),
 *        server reads the whole message and sends it back; until EOF.
 *        Blocking recv() on both ends (the kernel wakes the thread up).
 *   'P'  the same ping-pong, but both ends spin on recv(MSG_DONTWAIT), as
 *        a busy-polling messaging library would (no wake-up cost).
 *   'S'  stream: client writes size-byte chunks, server reads and discards
 *        until EOF, then answers one byte; the client's clock stops on it.
 *   'Q'  server exits.
 * TCP_NODELAY is set on both ends.  Latency = half the round trip.
 * Bandwidth = bytes / time (MB = 1e6 bytes), counted up to the server's
 * final byte, so data still in socket buffers is not counted as sent.
 *
 * libripc copy (test/benchmarks/raw/), taken from the team's
 * ../shared/bench/peers/src/tcp_bench.c; options added:
 *   -M  latency = median of the individually timed round trips (the
 *       original, and this copy without -M, prints the loop's mean).
 *   -Z list  sparse request/reply (issue 12), the kernel-TCP counterpart
 *       of ripc_sparse: blocking ping-pong of each -L size where the
 *       client sleeps (nanosleep) for each think time of the list (ms)
 *       between requests, the server blocked in recv(); -n requests at
 *       most, -t seconds per think time; prints median and 99th
 *       percentile (nearest rank) of the half round trips:
 *         tcp_socket_think10ms tcp 64 lat_us / lat_p99_us
 *       -L and -B are not run as well.
 *   -F n  first contact (issue 12), the counterpart of ripc_firstcontact:
 *       n fresh processes one after another (fork + exec of
 *       /proc/self/exe), each connects to the server, sends one framed
 *       request of the first -L size and reads the echo; prints median
 *       and p99 of the time from fork() and from just before socket():
 *         tcp_socket_first tcp 64 first_us / first_p99_us /
 *         first_init_us / first_init_p99_us
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <poll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int port = 47621, timeout_s = 60, busy, quit, median;
static double max_sec = 1.0;
static long lat_iters = 20000;
static const char *lat_sizes = "8,64,1024,65536";
static const char *bw_sizes = "65536,1048576,4194304";
static size_t bw_bytes = 4UL << 30;
static const char *think_list;	/* -Z */
static long first_procs;	/* -F */
#define FIRST_ENV "TCP_BENCH_FIRST_FD"

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "tcp_bench: time limit reached, exiting\n";
	if (write(2, m, sizeof m - 1) < 0) {}
	_exit(3);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* read exactly len bytes; 0 on EOF at the start, -1 on error.
 * busy: spin on non-blocking recv() instead of sleeping in it. */
static int read_full(int fd, void *buf, size_t len, int busy)
{
	char *p = buf;
	while (len) {
		ssize_t n = recv(fd, p, len, busy ? MSG_DONTWAIT : 0);
		if (n == 0 && p == (char *)buf) return 0;
		if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
		if (n <= 0) return -1;
		p += n; len -= n;
	}
	return 1;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) { if (errno == EINTR) continue; return -1; }
		p += n; len -= n;
	}
	return 0;
}

static void nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void run_server(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	size_t cap = 16 << 20;
	char *buf = malloc(cap);

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, (void *)&sa, sizeof sa) || listen(lfd, 4)) {
		perror("bind/listen"); exit(1);
	}
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		char hdr[8];
		uint32_t size;
		if (fd < 0) { perror("accept"); exit(1); }
		nodelay(fd);
		if (read_full(fd, hdr, 8, 0) != 1) { close(fd); continue; }
		memcpy(&size, hdr + 4, 4);
		if (hdr[0] == 'Q') { close(fd); break; }
		if (hdr[0] == 'L' || hdr[0] == 'P') {
			uint32_t len;
			int busy = hdr[0] == 'P';
			while (read_full(fd, &len, 4, busy) == 1 && len <= cap - 4 &&
			       read_full(fd, buf + 4, len, busy) == 1) {
				memcpy(buf, &len, 4);
				if (write_full(fd, buf, len + 4)) break;
			}
		} else if (hdr[0] == 'S') {
			ssize_t n;
			while ((n = recv(fd, buf, cap, 0)) > 0)
				;
			write_full(fd, "k", 1);
		}
		close(fd);
	}
	close(lfd);
}

static int dial(char mode, uint32_t size)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	char hdr[8] = { mode };
	int fd = -1, i;

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	for (i = 0; i < 100; i++) {	/* server may still be starting */
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(fd, (void *)&sa, sizeof sa)) break;
		close(fd); fd = -1;
		usleep(50000);
	}
	if (fd < 0) { fprintf(stderr, "cannot connect to port %d\n", port); exit(1); }
	nodelay(fd);
	memcpy(hdr + 4, &size, 4);
	write_full(fd, hdr, 8);
	return fd;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void lat_test(size_t sz)
{
	char *buf = calloc(1, sz + 4), *rbuf = malloc(sz + 4);
	uint32_t len = sz;
	long iters = sz >= 65536 ? lat_iters / 4 : lat_iters, warm = iters / 10, i, done = 0;
	int fd = dial(busy ? 'P' : 'L', sz);
	double t0 = now(), deadline = t0 + max_sec + 0.5;
	double *rt = median ? malloc((iters + 1) * sizeof(*rt)) : NULL;

	memcpy(buf, &len, 4);
	for (i = 0; i < warm + iters; i++) {
		if (i == warm) { t0 = now(); deadline = t0 + max_sec; }
		/* one send() per message: header and payload together */
		if (write_full(fd, buf, sz + 4) || read_full(fd, rbuf, sz + 4, busy) != 1) {
			fprintf(stderr, "lat: connection broke\n"); exit(1);
		}
		if (i >= warm) done++;
		if (rt && i >= warm) {	/* -M: time every round trip */
			rt[done] = now();
			if (i == warm) rt[0] = t0;
			if (done > 100 && rt[done] > deadline) break;
			continue;
		}
		if ((i & 63) == 0 && done > 100 && now() > deadline) break;
	}
	if (rt) {
		long k;
		for (k = 0; k < done; k++)
			rt[k] = (rt[k + 1] - rt[k]) * 1e6 / 2;
		qsort(rt, done, sizeof(*rt), cmp_double);
		printf("tcp_socket %s %zu lat_us %.2f us\n", busy ? "tcp_busypoll" : "tcp", sz,
		       done % 2 ? rt[done / 2] : (rt[done / 2 - 1] + rt[done / 2]) / 2);
		fflush(stdout);
		close(fd);
		free(buf); free(rbuf); free(rt);
		return;
	}
	printf("tcp_socket %s %zu lat_us %.2f us\n", busy ? "tcp_busypoll" : "tcp", sz,
	       (now() - t0) * 1e6 / done / 2);
	fflush(stdout);
	close(fd);
	free(buf); free(rbuf);
}

static void bw_test(size_t sz)
{
	char *buf = calloc(1, sz), ack;
	uint64_t n = bw_bytes / sz, i;
	int fd = dial('S', sz);
	double t0, deadline;

	if (n < 4) n = 4;
	t0 = now();
	deadline = t0 + max_sec;
	for (i = 0; i < n; i++) {
		if (write_full(fd, buf, sz)) { fprintf(stderr, "bw: write failed\n"); exit(1); }
		if (now() > deadline) { i++; break; }
	}
	shutdown(fd, SHUT_WR);
	if (read_full(fd, &ack, 1, 0) != 1) { fprintf(stderr, "bw: no ack\n"); exit(1); }
	printf("tcp_socket tcp %zu bw_MBps %.2f MBps\n", sz, (double)sz * i / (now() - t0) / 1e6);
	fflush(stdout);
	close(fd);
	free(buf);
}


/* nearest-rank percentile of sorted v[0..n) */
static double pct(const double *v, long n, double p)
{
	double r = p / 100.0 * n;
	long k = (long)r;
	if (k < r) k++;
	if (k < 1) k = 1;
	return v[(k > n ? n : k) - 1];
}

/* -Z: blocking ping-pong with think time between requests */
static void think_test(size_t sz)
{
	char *buf = calloc(1, sz + 4), *rbuf = malloc(sz + 4), *dup = strdup(think_list), *save, *tok;
	uint32_t len = sz;
	double *rt = malloc((lat_iters + 1) * sizeof(*rt));
	int fd = dial('L', sz);

	memcpy(buf, &len, 4);
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long ms = atol(tok), n = 0, i;
		struct timespec ts;
		double end = now() + max_sec, t0, t1;

		for (i = 0; i < 5 + lat_iters; i++) {	/* 5 untimed */
			t0 = now();
			if (write_full(fd, buf, sz + 4) || read_full(fd, rbuf, sz + 4, 0) != 1) {
				fprintf(stderr, "think: connection broke\n"); exit(1);
			}
			t1 = now();
			if (i >= 5) {
				rt[n++] = (t1 - t0) * 1e6 / 2;
				if (n >= lat_iters || (t1 > end && n >= 20)) break;
			}
			ts.tv_sec = ms / 1000;
			ts.tv_nsec = (ms % 1000) * 1000000L;
			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
		}
		qsort(rt, n, sizeof(*rt), cmp_double);
		printf("tcp_socket_think%ldms tcp %zu lat_us %.2f us\n", ms, sz,
		       n % 2 ? rt[n / 2] : (rt[n / 2 - 1] + rt[n / 2]) / 2);
		printf("tcp_socket_think%ldms tcp %zu lat_p99_us %.2f us\n", ms, sz, pct(rt, n, 99));
		fflush(stdout);
	}
	close(fd);
	free(buf); free(rbuf); free(rt); free(dup);
}

struct first_report { double t_init, t_reply; int ok; };

/* -F child: a fresh process, one request/reply, times to fd */
static int first_child(int rfd, size_t sz)
{
	struct first_report rep = { 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	char *buf = calloc(1, sz + 4), *rbuf = malloc(sz + 4);
	uint32_t len = sz;
	int fd;

	rep.t_init = now();
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd >= 0 && !connect(fd, (void *)&sa, sizeof sa)) {
		char hdr[8] = { 'L' };
		nodelay(fd);
		memcpy(hdr + 4, &len, 4);
		memcpy(buf, &len, 4);
		memset(buf + 4, 0x5a, sz);
		/* header and request in one send(), as a client would */
		char *msg = malloc(sz + 12);
		memcpy(msg, hdr, 8);
		memcpy(msg + 8, buf, sz + 4);
		if (!write_full(fd, msg, sz + 12) && read_full(fd, rbuf, sz + 4, 0) == 1) {
			rep.t_reply = now();
			rep.ok = !memcmp(rbuf, buf, sz + 4);
		}
		free(msg);
	}
	if (write(rfd, &rep, sizeof rep) != sizeof rep) {}
	close(rfd);
	if (fd >= 0) close(fd);
	return rep.ok ? 0 : 1;
}

static void first_test(size_t sz, char **argv)
{
	double *f = malloc(first_procs * sizeof(*f)), *in = malloc(first_procs * sizeof(*in));
	long n = 0, failed = 0, i;
	char fdbuf[16];

	for (i = 0; i < first_procs; i++) {
		struct first_report rep = { 0 };
		struct pollfd pfd;
		int p[2], st;
		double t_fork;
		pid_t pid;

		if (pipe(p)) { perror("pipe"); exit(1); }
		t_fork = now();
		pid = fork();
		if (pid < 0) { perror("fork"); exit(1); }
		if (pid == 0) {
			close(p[0]);
			snprintf(fdbuf, sizeof fdbuf, "%d", p[1]);
			setenv(FIRST_ENV, fdbuf, 1);
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		close(p[1]);
		pfd.fd = p[0];
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 15000) == 1 && read(p[0], &rep, sizeof rep) == sizeof rep && rep.ok) {
			f[n] = (rep.t_reply - t_fork) * 1e6;
			in[n] = (rep.t_reply - rep.t_init) * 1e6;
			n++;
		} else {
			failed++;
		}
		close(p[0]);
		for (st = 0; st < 500 && waitpid(pid, NULL, WNOHANG) != pid; st++)
			usleep(10000);
		if (st == 500) { kill(pid, SIGKILL); waitpid(pid, NULL, 0); }
	}
	if (failed)
		fprintf(stderr, "tcp_bench: %ld of %ld first-contact processes failed\n", failed, first_procs);
	if (n) {
		qsort(f, n, sizeof(*f), cmp_double);
		qsort(in, n, sizeof(*in), cmp_double);
		printf("tcp_socket_first tcp %zu first_us %.2f us\n", sz, n % 2 ? f[n / 2] : (f[n / 2 - 1] + f[n / 2]) / 2);
		printf("tcp_socket_first tcp %zu first_p99_us %.2f us\n", sz, pct(f, n, 99));
		printf("tcp_socket_first tcp %zu first_init_us %.2f us\n", sz, n % 2 ? in[n / 2] : (in[n / 2 - 1] + in[n / 2]) / 2);
		printf("tcp_socket_first tcp %zu first_init_p99_us %.2f us\n", sz, pct(in, n, 99));
		fflush(stdout);
	}
	free(f); free(in);
}

static void each(const char *list, void (*fn)(size_t))
{
	char *dup = strdup(list), *save, *tok;
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		fn(atol(tok));
	free(dup);
}

int main(int argc, char **argv)
{
	int c, server = 0;

	while ((c = getopt(argc, argv, "sbqMP:L:B:n:t:T:Z:F:")) != -1) {
		switch (c) {
		case 's': server = 1; break;
		case 'b': busy = 1; break;
		case 'q': quit = 1; break;
		case 'M': median = 1; break;
		case 'P': port = atoi(optarg); break;
		case 'L': lat_sizes = optarg; break;
		case 'B': bw_sizes = optarg; break;
		case 'n': lat_iters = atol(optarg); break;
		case 't': max_sec = atof(optarg); break;
		case 'T': timeout_s = atoi(optarg); break;
		case 'Z': think_list = optarg; break;
		case 'F': first_procs = atol(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-s] [-b] [-q] [-P port] [-L sizes] [-B sizes] "
				"[-n iters] [-t secs/size] [-T limit] [-M] [-Z think_ms,...] [-F procs]\n", argv[0]);
			return 2;
		}
	}
	signal(SIGALRM, on_alarm);
	alarm(timeout_s);
	if (getenv(FIRST_ENV)) {	/* a -F child */
		alarm(20);
		return first_child(atoi(getenv(FIRST_ENV)), atol(lat_sizes));
	}
	if (server) {
		run_server();
		return 0;
	}
	if (first_procs > 0) {
		first_test(atol(lat_sizes), argv);
	} else if (think_list) {
		each(lat_sizes, think_test);
	} else {
		each(lat_sizes, lat_test);
		each(bw_sizes, bw_test);
	}
	if (quit)
		close(dial('Q', 0));
	return 0;
}
