/*
 * tcp_filefetch.c - the file fetch of ripc_filefetch over kernel TCP
 * sockets on 127.0.0.1: the baseline of the libRIPC paper's web-server
 * experiment.
 *
 * Server:  tcp_filefetch -s [-P port] [-S sizes] [-T secs]
 * Client:  tcp_filefetch [-P port] [-S sizes] [-n fetches] [-w warm-up]
 *                        [-t secs/size] [-T secs] [-q]
 *
 * The server holds one file per size in memory, "/files/<size>.dat", with
 * the same contents as ripc_filefetch's.  The client keeps one connection
 * (as an HTTP client with keep-alive would) and per fetch sends a request
 * line "GET /files/<size>.dat\n"; the server answers with an 8-byte length
 * (host order; all ones: no such file) followed by the file, both in one
 * sendmsg() loop.  The client reads the whole answer into its buffer.
 * Blocking sockets, TCP_NODELAY on both ends, one fetch at a time.
 *
 * Per size: -w warm-up fetches (the first checked byte for byte), then up
 * to -n timed fetches (10,000) or -t seconds.  Printed (bench format):
 *
 *     tcp_fetch tcp <size> lat_us <median of one fetch> us
 *     tcp_fetch tcp <size> bw_MBps <bytes x fetches / time> MBps
 *
 * The client clears the first and last 8 bytes of its buffer before each
 * fetch and checks them after it, as ripc_filefetch does.  -q tells the
 * server to exit at the end.  Every loop is bounded, the process by
 * alarm(-T).  Standalone (no libripc), built with the peers' flags.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 32
#define MIN_TIMED 4
#define WARM_BYTES (64ull << 20)
#define NO_FILE UINT64_MAX

static int port = 47631, timeout_s = 120, quit;
static double max_sec = 1.0;
static long iters = 10000, warmup = 100;
static const char *size_list = "1k,4k,16k,64k,256k,1m,4m,16m,64m";

static void on_alarm(int sig)
{
	static const char m[] = "tcp_filefetch: time limit reached, exiting\n";

	(void)sig;
	if (write(2, m, sizeof(m) - 1) < 0) {
	}
	_exit(3);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "tcp_filefetch: %s%s%s\n", what, errno ? ": " : "",
		errno ? strerror(errno) : "");
	exit(1);
}

/* Same contents as ripc_filefetch.c. */
static inline uint64_t pattern(size_t k, size_t size)
{
	return (k + 1) * 0x9e3779b97f4a7c15ull ^ (size * 0x2545f4914f6cdd1dull);
}

static size_t parse_sizes(const char *list, size_t *out, size_t cap)
{
	size_t n = 0;
	const char *p = list;

	while (*p && n < cap) {
		char *end;
		unsigned long long x = strtoull(p, &end, 0);

		if (end == p)
			break;
		if (*end == 'k' || *end == 'K')
			x <<= 10, end++;
		else if (*end == 'm' || *end == 'M')
			x <<= 20, end++;
		if (x < 16 || x % 8) {
			errno = 0;
			die("sizes must be multiples of 8, at least 16");
		}
		out[n++] = x;
		p = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			break;
	}
	if (*p) {
		errno = 0;
		die("bad size list");
	}
	return n;
}

static void *map_buf(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	memset(p, 0, len); /* fault it in before anything is timed */
	return p;
}

/* read exactly len bytes; 0 on EOF at the start, -1 on error */
static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n == 0 && p == (char *)buf)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 1;
}

/* Send the iovecs whole, one sendmsg() per partial write. */
static int send_all(int fd, struct iovec *iov, int cnt)
{
	while (cnt) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = cnt };
		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		while (cnt && (size_t)n >= iov->iov_len) {
			n -= iov->iov_len;
			iov++, cnt--;
		}
		if (cnt) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= n;
		}
	}
	return 0;
}

static void nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- server ----------------------------------------------------------- */

static void run_server(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	size_t sizes[MAX_FILES], n = parse_sizes(size_list, sizes, MAX_FILES);
	char names[MAX_FILES][64];
	uint64_t *data[MAX_FILES];
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1, stop = 0;

	for (size_t i = 0; i < n; i++) {
		data[i] = map_buf(sizes[i]);
		for (size_t k = 0; k < sizes[i] / 8; k++)
			data[i][k] = pattern(k, sizes[i]);
		snprintf(names[i], sizeof(names[i]), "/files/%zu.dat",
			 sizes[i]);
	}
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (void *)&sa, sizeof(sa)) || listen(lfd, 4))
		die("bind/listen");
	/* One connection at a time until a client says QUIT; bounded by
	 * alarm(-T). */
	while (!stop) {
		int fd = accept(lfd, NULL, NULL);
		char line[256];
		size_t have = 0;

		if (fd < 0)
			die("accept");
		nodelay(fd);
		for (;;) {
			char *nl = memchr(line, '\n', have);
			ssize_t r;

			if (!nl) {
				if (have == sizeof(line))
					break; /* not a request line */
				r = recv(fd, line + have, sizeof(line) - have,
					 0);
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0)
					break;
				have += r;
				continue;
			}
			*nl = 0;
			if (!strcmp(line, "QUIT")) {
				stop = 1;
				break;
			}
			uint64_t len = NO_FILE;
			struct iovec iov[2] = { { &len, 8 }, { NULL, 0 } };
			int cnt = 1;

			if (!strncmp(line, "GET ", 4))
				for (size_t i = 0; i < n; i++)
					if (!strcmp(line + 4, names[i])) {
						len = sizes[i];
						iov[1].iov_base = data[i];
						iov[1].iov_len = sizes[i];
						cnt = 2;
						break;
					}
			if (send_all(fd, iov, cnt))
				break;
			/* Keep what followed the line (nothing, as the
			 * client waits for each answer). */
			have -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, have);
		}
		close(fd);
	}
	close(lfd);
}

/* ---- client ----------------------------------------------------------- */

static int dial(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	int fd = -1;

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	for (int i = 0; i < 100; i++) { /* the server may still be starting */
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(fd, (void *)&sa, sizeof(sa)))
			break;
		close(fd);
		fd = -1;
		usleep(50000);
	}
	if (fd < 0)
		die("cannot connect");
	nodelay(fd);
	return fd;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void fetch(int fd, const char *req, size_t reqlen, uint8_t *buf,
		  size_t size, int check)
{
	uint64_t len, head, tail;

	memset(buf, 0, 8);
	memset(buf + size - 8, 0, 8);
	if (check)
		memset(buf, 0, size);
	if (send(fd, req, reqlen, MSG_NOSIGNAL) != (ssize_t)reqlen)
		die("request");
	if (read_full(fd, &len, 8) != 1)
		die("answer header");
	if (len != size) {
		errno = 0;
		die(len == NO_FILE ? "no such file (same -S on both sides?)"
				   : "wrong length");
	}
	if (read_full(fd, buf, size) != 1)
		die("answer body");
	memcpy(&head, buf, 8);
	memcpy(&tail, buf + size - 8, 8);
	errno = 0;
	if (head != pattern(0, size) || tail != pattern(size / 8 - 1, size))
		die("file did not arrive");
	if (check)
		for (size_t k = 0; k < size / 8; k++)
			if (((uint64_t *)buf)[k] != pattern(k, size))
				die("file corrupt");
}

static void run_client(void)
{
	size_t sizes[MAX_FILES], n = parse_sizes(size_list, sizes, MAX_FILES);
	size_t max = 0;
	double *t = malloc((iters + 1) * sizeof(*t));
	uint8_t *buf;
	int fd;

	if (!t)
		die("malloc");
	for (size_t i = 0; i < n; i++)
		max = sizes[i] > max ? sizes[i] : max;
	buf = map_buf(max);
	fd = dial();
	for (size_t i = 0; i < n; i++) {
		size_t size = sizes[i];
		long warm = warmup, done = 0;
		char req[64];
		size_t reqlen = snprintf(req, sizeof(req),
					 "GET /files/%zu.dat\n", size);
		double deadline, total;

		if ((uint64_t)warm * size > WARM_BYTES)
			warm = WARM_BYTES / size;
		if (warm < 1)
			warm = 1;
		for (long k = 0; k < warm; k++)
			fetch(fd, req, reqlen, buf, size, k == 0);
		deadline = now() + max_sec;
		t[0] = now();
		while (done < iters) {
			fetch(fd, req, reqlen, buf, size, 0);
			t[++done] = now();
			if (t[done] > deadline && done >= MIN_TIMED)
				break;
		}
		total = t[done] - t[0];
		for (long k = 0; k < done; k++)
			t[k] = (t[k + 1] - t[k]) * 1e6;
		qsort(t, done, sizeof(*t), cmp_double);
		printf("tcp_fetch tcp %zu lat_us %.2f us\n", size,
		       done % 2 ? t[done / 2]
				: (t[done / 2 - 1] + t[done / 2]) / 2);
		printf("tcp_fetch tcp %zu bw_MBps %.2f MBps\n", size,
		       (double)size * done / total / 1e6);
		fflush(stdout);
	}
	if (quit && send(fd, "QUIT\n", 5, MSG_NOSIGNAL) != 5)
		fprintf(stderr, "tcp_filefetch: QUIT not sent\n");
	close(fd);
	free(t);
}

int main(int argc, char **argv)
{
	int c, server = 0;

	while ((c = getopt(argc, argv, "sqP:S:n:w:t:T:")) != -1) {
		switch (c) {
		case 's': server = 1; break;
		case 'q': quit = 1; break;
		case 'P': port = atoi(optarg); break;
		case 'S': size_list = optarg; break;
		case 'n': iters = atol(optarg); break;
		case 'w': warmup = atol(optarg); break;
		case 't': max_sec = atof(optarg); break;
		case 'T': timeout_s = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-s] [-q] [-P port] [-S sizes] "
				"[-n fetches] [-w warm-up] [-t secs/size] "
				"[-T limit]\n", argv[0]);
			return 2;
		}
	}
	if (iters < 1 || warmup < 0 || max_sec <= 0) {
		fprintf(stderr, "bad -n, -w or -t\n");
		return 2;
	}
	signal(SIGALRM, on_alarm);
	alarm(timeout_s);
	if (server)
		run_server();
	else
		run_client();
	return 0;
}
