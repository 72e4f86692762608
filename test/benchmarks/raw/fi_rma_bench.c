/*
 * fi_rma_bench.c - raw libfabric baseline on an FI_EP_RDM endpoint.
 *
 *   1. send/recv ping-pong latency (one-way = half round trip)
 *   2. fi_read bandwidth: the client pulls from a buffer the server
 *      registered (the physical limit of a "receiver pulls by RDMA read"
 *      protocol).
 *
 * Server:  fi_rma_bench -p PROV -s [-P port]
 * Client:  fi_rma_bench -p PROV [-a 127.0.0.1] [-P port] [-L sizes] [-R sizes]
 *
 * The endpoint names are swapped over a plain TCP socket on 127.0.0.1
 * (the usual out-of-band bootstrap, as fi_pingpong does); after that,
 * the server sends {addr, key, len} of its registered buffer to the
 * client as an ordinary fi_send message, and everything else is libfabric.
 *
 * Memory registration modes handled (checked in info->domain_attr->mr_mode):
 *   FI_MR_LOCAL      register local buffers, pass fi_mr_desc() to every op
 *   FI_MR_VIRT_ADDR  remote address = virtual address, else offset from 0
 *   FI_MR_PROV_KEY   key chosen by the provider (we always send fi_mr_key())
 *   FI_MR_ENDPOINT   bind the MR to the endpoint and enable it
 *   FI_MR_ALLOCATED  our buffers are allocated memory, nothing to do
 *
 * Client prints one line per size, in the bench format:
 *   fi_rdm_msg  <transport> <size_bytes> lat_us <value> us
 *   fi_rdm_read <transport> <size_bytes> bw_MBps <value> MBps   (MB = 1e6 B)
 * (-S PREFIX replaces "fi_rdm"; -X LABEL replaces the provider name.)
 *
 * Every loop is bounded by an iteration count and a per-size time budget,
 * and the whole process by alarm(-T seconds).  The server exits when the
 * client says "BYE" (a 3-byte message), or at the alarm.
 *
 * libripc copy (test/benchmarks/raw/), taken from the team's
 * ../shared/bench/peers/src/fi_rma_bench.c and extended; without the new
 * options it behaves and prints exactly as the original:
 *   -M        latency = median of the individually timed round trips
 *             (the original prints the mean of the timed loop); libripc's
 *             ripc_pingpong prints medians, so both sides use the same
 *             statistic.
 *   -U sizes  "pull protocol", the raw floor of libripc's long send: per
 *             message the client sends {addr, key, len} of its registered
 *             buffer (an fi_inject), the server fi_read()s it in chunks of
 *             at most -C bytes (all posted at once, like libripc's
 *             reads; default 8 MiB, one read up to that: libripc's tcp
 *             reads 512 KiB each, see ripc(7) RIPC_READ_CHUNK) and
 *             answers an 8-byte
 *             "DONE"; one message in flight.  Prints
 *             <prefix>_pull <transport> SIZE bw_MBps.  The server needs
 *             the same -U list (it sizes its landing buffer from it).
 *   -K        with -U: register the client's buffer for every message
 *             (fresh key, closed after DONE), as libripc's long send
 *             does; prints <prefix>_pullreg.
 *   -H        with -U: the client's buffer 2 MiB-aligned and advised
 *             MADV_HUGEPAGE, as libripc's ripc_buf_alloc() makes it from
 *             2 MiB (shm reads it with process_vm_readv, faster from huge
 *             pages); prints <prefix>_pullhuge.
 *   -Z ms     sparse ping-pong, the raw floor of libripc's sparse
 *             request/reply (ripc_sparse) and the counterpart of kernel
 *             TCP's (tcp_bench -Z): the client sleeps ms between round
 *             trips, each timed alone (median); both sides open the CQ
 *             with a wait fd and, whenever they wait, sleep on it at once
 *             (fi_trywait, then poll), as a process blocked in recv()
 *             does.  Prints <prefix>_think<ms>ms <transport> SIZE lat_us
 *             and lat_p99_us.
 *             Give -Z to the server too (any value: it then blocks).
 *   -G        ping-pong with a gather copy: both sides memcpy the payload
 *             into their send buffer before every send, as libripc's
 *             short send gathers its items into a bounce buffer.  Fresh
 *             data is also what a real sender has: without -G the send
 *             buffer is never written, so its cache lines stay clean and
 *             shared between the cores.  Give it to both sides.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sys/mman.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define MAX_WINDOW 64
#define BYE "BYE"
#define PULL_MAGIC 0x4c4c5550u	/* "PULL" */

struct mr_info { uint64_t addr, key, len; };
/* -U: one pull request, sent by the client */
struct pull_req { uint32_t magic, pad; uint64_t addr, key, len; };

static struct {
	const char *prov, *addr, *sys, *tr, *lat_sizes, *rd_sizes, *pull_sizes;
	int port, server, verbose, window, timeout, median, pull_reg, gather,
	    pull_huge, think_ms;
	long lat_iters;
	double max_sec;
	size_t rd_bytes, chunk;
} opt = {
	.addr = "127.0.0.1", .sys = "fi_rdm", .port = 47611,
	.lat_sizes = "8,64,1024,65536",
	.rd_sizes = "65536,1048576,4194304,16777216",
	.window = 8, .timeout = 60, .lat_iters = 20000, .max_sec = 1.0,
	.rd_bytes = 2UL << 30, .pull_sizes = "", .chunk = 8UL << 20,
};

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_cq *cq;
static int cq_fd = -1;	/* -Z: the CQ's wait fd */
static struct fid_ep *ep;
static fi_addr_t peer;
static uint64_t mr_mode;
static int rd_skip;
static size_t inject_size;

/* completion counters, bumped by progress() */
static uint64_t n_tx, n_rx, n_rd;
static size_t last_rx_len;

#define CHK(call) do { int _r = (int)(call); if (_r) { \
	fprintf(stderr, "%s:%d %s = %d (%s)\n", __FILE__, __LINE__, #call, \
		_r, fi_strerror(-_r)); exit(1); } } while (0)

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "fi_rma_bench: time limit reached, exiting\n";
	if (write(2, m, sizeof m - 1) < 0) {}
	_exit(3);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- plain TCP bootstrap: swap endpoint names, nothing else ---- */

static void xfer(int fd, void *buf, size_t len, int send_it)
{
	char *p = buf;
	while (len) {
		ssize_t n = send_it ? send(fd, p, len, 0) : recv(fd, p, len, 0);
		if (n <= 0) { perror("bootstrap socket"); exit(1); }
		p += n; len -= n;
	}
}

static int oob_connect(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(opt.port) };
	int fd, one = 1, i;

	inet_pton(AF_INET, opt.addr, &sa.sin_addr);
	if (opt.server) {
		int lfd = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(lfd, (void *)&sa, sizeof sa) || listen(lfd, 1)) {
			perror("bootstrap bind/listen"); exit(1);
		}
		fd = accept(lfd, NULL, NULL);
		close(lfd);
		if (fd < 0) { perror("accept"); exit(1); }
		return fd;
	}
	for (i = 0; i < 100; i++) {	/* server may not be up yet: 100 x 50 ms */
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(fd, (void *)&sa, sizeof sa))
			return fd;
		close(fd);
		usleep(50000);
	}
	fprintf(stderr, "cannot reach bootstrap port %d\n", opt.port);
	exit(1);
}

/* ---- libfabric setup ---- */

static void open_fabric(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_MSG, .wait_obj = FI_WAIT_NONE };
	/* Side experiment: FI_RMA_BENCH_WAIT_FD=1 opens the CQ with a wait
	 * fd, as a process that must be able to sleep on it does (libripc on
	 * tcp), and still busy-polls it: what the wait object alone costs. */
	if ((getenv("FI_RMA_BENCH_WAIT_FD") &&
	     !strcmp(getenv("FI_RMA_BENCH_WAIT_FD"), "1")) || opt.think_ms)
		cq_attr.wait_obj = FI_WAIT_FD;
	struct fi_av_attr av_attr = { .type = FI_AV_UNSPEC };
	const char *node = NULL;
	uint64_t flags = 0;

	hints->caps = FI_MSG | FI_RMA;
	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = FI_EP_RDM;
	hints->fabric_attr->prov_name = strdup(opt.prov);
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
		FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	/* As libripc asks: with automatic progress rxm's passthrough starts
	 * a thread of its own beside this one (the pinned raw pull fell to
	 * 872 MB/s with it). */
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	if (strncmp(opt.prov, "shm", 3)) {	/* network providers: stay on loopback */
		node = "127.0.0.1";
		flags = FI_SOURCE;
	}
	CHK(fi_getinfo(FI_VERSION(1, 9), node, NULL, flags, hints, &info));
	fi_freeinfo(hints);

	mr_mode = info->domain_attr->mr_mode;
	inject_size = info->tx_attr->inject_size;
	if (opt.verbose)
		fprintf(stderr, "# %s: provider=%s fabric=%s domain=%s mr_mode=%s%s%s%s%s "
			"inject=%zu max_msg=%zu\n", opt.server ? "server" : "client",
			info->fabric_attr->prov_name, info->fabric_attr->name,
			info->domain_attr->name,
			mr_mode & FI_MR_LOCAL ? "LOCAL|" : "",
			mr_mode & FI_MR_VIRT_ADDR ? "VIRT_ADDR|" : "",
			mr_mode & FI_MR_PROV_KEY ? "PROV_KEY|" : "",
			mr_mode & FI_MR_ALLOCATED ? "ALLOCATED|" : "",
			mr_mode & FI_MR_ENDPOINT ? "ENDPOINT" : "",
			inject_size, info->ep_attr->max_msg_size);

	CHK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHK(fi_domain(fabric, info, &domain, NULL));
	CHK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	if (info->domain_attr->av_type != FI_AV_UNSPEC)
		av_attr.type = info->domain_attr->av_type;
	CHK(fi_av_open(domain, &av_attr, &av, NULL));
	CHK(fi_endpoint(domain, info, &ep, NULL));
	CHK(fi_ep_bind(ep, &av->fid, 0));
	CHK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHK(fi_enable(ep));
	if (opt.think_ms)
		CHK(fi_control(&cq->fid, FI_GETWAIT, &cq_fd));
}

/* Register buf; returns the MR (NULL when the provider does not need one
 * for local use and access holds no remote rights). */
static struct fid_mr *reg(void *buf, size_t len, uint64_t access, uint64_t want_key)
{
	struct fid_mr *mr;
	int remote = (access & (FI_REMOTE_READ | FI_REMOTE_WRITE)) != 0;

	if (!remote && !(mr_mode & FI_MR_LOCAL))
		return NULL;
	CHK(fi_mr_reg(domain, buf, len, access, 0,
		      (mr_mode & FI_MR_PROV_KEY) ? 0 : want_key, 0, &mr, NULL));
	if (mr_mode & FI_MR_ENDPOINT) {
		CHK(fi_mr_bind(mr, &ep->fid, 0));
		CHK(fi_mr_enable(mr));
	}
	return mr;
}

static void *desc(struct fid_mr *mr)
{
	return mr ? fi_mr_desc(mr) : NULL;
}

/* Drain the CQ once; count completions by kind. */
static void progress(void)
{
	struct fi_cq_msg_entry e[16];
	ssize_t n, i;

	n = fi_cq_read(cq, e, 16);
	if (n == -FI_EAGAIN)
		return;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };
		fi_cq_readerr(cq, &err, 0);
		fprintf(stderr, "cq error: %s (prov: %s)\n", fi_strerror(err.err),
			fi_cq_strerror(cq, err.prov_errno, err.err_data, NULL, 0));
		exit(1);
	}
	if (n < 0) { fprintf(stderr, "fi_cq_read: %s\n", fi_strerror(-n)); exit(1); }
	for (i = 0; i < n; i++) {
		if (e[i].flags & FI_RECV) { n_rx++; last_rx_len = e[i].len; }
		else if (e[i].flags & FI_READ) n_rd++;
		else if (e[i].flags & FI_SEND) n_tx++;
	}
}

/* Retry a post while the provider says EAGAIN, progressing meanwhile. */
#define POST(call) do { ssize_t _r; \
	while ((_r = (call)) == -FI_EAGAIN) progress(); \
	if (_r) { fprintf(stderr, "%s: %s\n", #call, fi_strerror(-_r)); exit(1); } \
} while (0)

/* -Z: sleep on the CQ's wait fd until it may have something (the
 * libfabric rule: fi_trywait first; it fails when events are pending
 * that no fd will signal). */
static void block(void)
{
	struct fid *f = &cq->fid;
	struct pollfd pfd = { .fd = cq_fd, .events = POLLIN };

	if (fi_trywait(fabric, &f, 1) == FI_SUCCESS)
		(void)poll(&pfd, 1, 1000);
}

static void wait_count(uint64_t *ctr, uint64_t target)
{
	for (;;) {
		progress();
		if (*ctr >= target)
			return;
		if (opt.think_ms)
			block();
	}
}

static struct fi_context rx_ctx, tx_ctx, rd_ctx[MAX_WINDOW];

static void send_msg(void *buf, size_t len, void *d)
{
	if (len <= inject_size) {
		POST(fi_inject(ep, buf, len, peer));
	} else {
		uint64_t t = n_tx + 1;
		POST(fi_send(ep, buf, len, d, peer, &tx_ctx));
		wait_count(&n_tx, t);
	}
}

static size_t max_of(const char *list)
{
	size_t m = 0;
	char *dup = strdup(list), *tok, *save;
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if ((size_t)atol(tok) > m) m = atol(tok);
	free(dup);
	return m;
}

/* -U, server side: read the whole item (chunks of at most opt.chunk,
 * all posted at once as libripc does) into pull[], wait for all. */
static void serve_pull(const struct pull_req *q, char *pull, size_t pull_len, void *d)
{
	uint64_t base = n_rd, posted = 0, off;

	if (q->len > pull_len) {
		fprintf(stderr, "pull of %llu bytes > buffer %zu\n",
			(unsigned long long)q->len, pull_len);
		exit(1);
	}
	for (off = 0; off < q->len; off += opt.chunk, posted++) {
		size_t n = q->len - off < opt.chunk ? q->len - off : opt.chunk;
		while (posted - (n_rd - base) >= MAX_WINDOW)
			progress();
		POST(fi_read(ep, pull + off, n, d, peer, q->addr + off, q->key,
			     &rd_ctx[posted % MAX_WINDOW]));
	}
	wait_count(&n_rd, base + posted);
	/* the client's buffer is all 'p': check both ends, then clear them
	 * so that the next pull has to bring them again */
	if (pull[0] != 'p' || pull[q->len - 1] != 'p') {
		fprintf(stderr, "pull of %llu bytes did not bring the client's data\n",
			(unsigned long long)q->len);
		exit(1);
	}
	pull[0] = pull[q->len - 1] = 0;
}

/* ---- server: echo messages, serve reads, leave on BYE ---- */

static void run_server(int oob)
{
	size_t msg_max = 1 << 20, rd_len = max_of(opt.rd_sizes);
	size_t pull_len = *opt.pull_sizes ? max_of(opt.pull_sizes) : 4096;
	char *msg = aligned_alloc(4096, msg_max);
	char *rd = aligned_alloc(4096, rd_len);
	char *pull = aligned_alloc(4096, pull_len);
	struct fid_mr *msg_mr, *rd_mr, *pull_mr;
	struct mr_info mi;
	uint64_t pid = getpid(), rx_seen;

	memset(msg, 'm', msg_max);
	memset(rd, 'r', rd_len);
	msg_mr = reg(msg, msg_max, FI_SEND | FI_RECV, 1);
	rd_mr = reg(rd, rd_len, FI_REMOTE_READ, 0xC0DE);
	memset(pull, 0, pull_len);	/* fault it in before anything is timed */
	pull_mr = reg(pull, pull_len, FI_READ, 5);

	/* pid and absolute address only for the client's CMA probe (-v). */
	xfer(oob, &pid, 8, 1);
	mi.addr = (uint64_t)(uintptr_t)rd;
	xfer(oob, &mi.addr, 8, 1);

	POST(fi_recv(ep, msg, msg_max / 2, desc(msg_mr), FI_ADDR_UNSPEC, &rx_ctx));

	/* The remote buffer description goes to the client as a message. */
	mi.addr = (mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)rd : 0;
	mi.key = fi_mr_key(rd_mr);
	mi.len = rd_len;
	{
		/* send from a separate registered slice so msg stays free for rx */
		char *tx = msg + msg_max / 2;
		memcpy(tx, &mi, sizeof mi);
		send_msg(tx, sizeof mi, desc(msg_mr));
	}

	for (rx_seen = 0;;) {
		wait_count(&n_rx, rx_seen + 1);	/* progress also serves reads */
		rx_seen = n_rx;
		size_t len = last_rx_len;
		if (len == 3 && !memcmp(msg, BYE, 3)) {
			/* acknowledge, make sure it left, then go */
			double end = now() + 0.2;
			uint64_t t = n_tx + 1;
			memcpy(msg + msg_max / 2, BYE, 3);
			POST(fi_send(ep, msg + msg_max / 2, 3, desc(msg_mr), peer, &tx_ctx));
			while (n_tx < t && now() < end)
				progress();
			break;
		}
		if (opt.gather && len != 3)	/* -G: fresh data, as a gather would */
			memcpy(msg + msg_max / 2, msg, len);
		if (len == sizeof(struct pull_req) &&
		    ((struct pull_req *)msg)->magic == PULL_MAGIC) {
			struct pull_req q;
			memcpy(&q, msg, sizeof q);	/* msg is reposted next */
			POST(fi_recv(ep, msg, msg_max / 2, desc(msg_mr), FI_ADDR_UNSPEC, &rx_ctx));
			serve_pull(&q, pull, pull_len, desc(pull_mr));
			send_msg((char *)"DONE\0\0\0", 8, NULL);
			continue;
		}
		/* echo len bytes from the upper half, repost the receive first */
		POST(fi_recv(ep, msg, msg_max / 2, desc(msg_mr), FI_ADDR_UNSPEC, &rx_ctx));
		send_msg(msg + msg_max / 2, len, desc(msg_mr));
	}
	if (msg_mr) fi_close(&msg_mr->fid);
	if (pull_mr) fi_close(&pull_mr->fid);
	fi_close(&rd_mr->fid);
}

/* ---- client ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Sorts v[0..n-1] (n > 0) and returns its median. */
static double sorted_median(double *v, long n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* -U: one message in flight; the client only posts, waits and polls
 * (its CQ polling is what lets tcp serve the server's reads). */
static void run_pull_client(char *rx, struct fid_mr *rx_mr, size_t msg_max)
{
	size_t max = max_of(opt.pull_sizes);
	size_t huge = 2ul << 20, alen = (max + huge - 1) / huge * huge;
	char *src = opt.pull_huge ? aligned_alloc(huge, alen)
				  : aligned_alloc(4096, max);

	if (opt.pull_huge && src)
		madvise(src, alen, MADV_HUGEPAGE);
	struct fid_mr *mr = NULL;
	uint64_t key = 0x10000;
	char *list = strdup(opt.pull_sizes), *tok, *save;

	memset(src, 'p', max);
	if (!opt.pull_reg)
		mr = reg(src, max, FI_REMOTE_READ, key++);
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t sz = atol(tok);
		uint64_t n = opt.rd_bytes / sz, i, warm = 2;
		double t0 = 0, deadline = 0;

		if (n < 4) n = 4;
		for (i = 0; i < warm + n; i++) {
			struct pull_req q = { .magic = PULL_MAGIC, .len = sz };
			struct fid_mr *m = mr;
			uint64_t r = n_rx + 1;

			if (i == warm) { t0 = now(); deadline = t0 + opt.max_sec; }
			if (opt.pull_reg)
				m = reg(src, sz, FI_REMOTE_READ, key++);
			q.addr = (mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)src : 0;
			q.key = fi_mr_key(m);
			POST(fi_recv(ep, rx, msg_max, desc(rx_mr), FI_ADDR_UNSPEC, &rx_ctx));
			send_msg(&q, sizeof q, NULL);
			wait_count(&n_rx, r);
			if (last_rx_len != 8 || memcmp(rx, "DONE", 4)) {
				fprintf(stderr, "pull of %zu bytes: no DONE\n", sz);
				exit(1);
			}
			if (opt.pull_reg)
				fi_close(&m->fid);
			if (i >= warm + 3 && now() > deadline) {
				i++;
				break;
			}
		}
		printf("%s_%s %s %zu bw_MBps %.2f MBps\n", opt.sys,
		       opt.pull_reg ? "pullreg" : opt.pull_huge ? "pullhuge" : "pull",
		       opt.tr, sz,
		       (double)sz * (i - warm) / (now() - t0) / 1e6);
		fflush(stdout);
	}
	free(list);
	if (mr) fi_close(&mr->fid);
	free(src);
}

static void print_line(const char *metric, size_t size, double v, const char *unit)
{
	printf("%s_%s %s %zu %s %.2f %s\n", opt.sys,
	       strcmp(metric, "lat_us") ? "read" : "msg", opt.tr, size, metric, v, unit);
	fflush(stdout);
}

static void cma_probe(pid_t pid, uint64_t addr)
{
	char b[8];
	struct iovec l = { b, 8 }, r = { (void *)(uintptr_t)addr, 8 };
	ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
	fprintf(stderr, "# cma probe (process_vm_readv on server pid %d): %s\n",
		(int)pid, n == 8 ? "ok" : strerror(errno));
}

/* -Z: one timed round trip per think time, each size; median. */
static void run_sparse(char *rx, struct fid_mr *rx_mr, char *tx,
		       struct fid_mr *tx_mr, size_t msg_max)
{
	double *rt = malloc((opt.lat_iters + 1) * sizeof(*rt));
	char *list = strdup(opt.lat_sizes), *tok, *save, name[64];
	struct timespec think = { opt.think_ms / 1000,
				  (long)(opt.think_ms % 1000) * 1000000 };

	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t sz = atol(tok);
		long i, done = 0, warm = 5;
		double deadline = now() + opt.max_sec + 0.5;

		for (i = 0; i < warm + opt.lat_iters; i++) {
			uint64_t r = n_rx + 1;

			nanosleep(&think, NULL);
			double t0 = now();
			POST(fi_recv(ep, rx, msg_max, desc(rx_mr), FI_ADDR_UNSPEC, &rx_ctx));
			send_msg(tx, sz, desc(tx_mr));
			wait_count(&n_rx, r);
			if (last_rx_len != sz) {
				fprintf(stderr, "echo of %zu bytes came back as %zu\n", sz, last_rx_len);
				exit(1);
			}
			if (i >= warm)
				rt[done++] = (now() - t0) * 1e6 / 2;
			if (done >= 20 && now() > deadline)
				break;
		}
		if (!done)
			continue;
		snprintf(name, sizeof(name), "%s_think%dms", opt.sys, opt.think_ms);
		printf("%s %s %zu lat_us %.2f us\n", name, opt.tr, sz,
		       sorted_median(rt, done));
		/* p99 by nearest rank, as tcp_bench -Z takes it */
		long k = (long)(0.99 * done);

		if (k < 0.99 * done) k++;
		if (k < 1) k = 1;
		printf("%s %s %zu lat_p99_us %.2f us\n", name, opt.tr, sz,
		       rt[(k > done ? done : k) - 1]);
		fflush(stdout);
	}
	free(list);
	free(rt);
}

static void run_client(int oob)
{
	size_t lat_max = max_of(opt.lat_sizes), rd_max = max_of(opt.rd_sizes);
	size_t msg_max = lat_max > 64 ? lat_max : 64;
	char *rx = aligned_alloc(4096, msg_max), *tx = aligned_alloc(4096, msg_max);
	char *dst = aligned_alloc(4096, rd_max);
	struct fid_mr *rx_mr, *tx_mr, *dst_mr;
	struct mr_info mi;
	uint64_t srv_pid, srv_abs;
	char *list, *tok, *save;

	memset(tx, 'c', msg_max);
	memset(dst, 0, rd_max);
	rx_mr = reg(rx, msg_max, FI_RECV, 2);
	tx_mr = reg(tx, msg_max, FI_SEND, 3);
	dst_mr = reg(dst, rd_max, FI_READ, 4);

	xfer(oob, &srv_pid, 8, 0);
	xfer(oob, &srv_abs, 8, 0);
	if (opt.verbose && !strncmp(opt.prov, "shm", 3))
		cma_probe((pid_t)srv_pid, srv_abs);

	/* 1. the server's buffer description arrives as a message */
	POST(fi_recv(ep, rx, msg_max, desc(rx_mr), FI_ADDR_UNSPEC, &rx_ctx));
	wait_count(&n_rx, 1);
	memcpy(&mi, rx, sizeof mi);
	if (opt.verbose)
		fprintf(stderr, "# remote buffer: addr=0x%llx key=0x%llx len=%llu\n",
			(unsigned long long)mi.addr, (unsigned long long)mi.key,
			(unsigned long long)mi.len);

	/* 2. ping-pong latency (-Z: sparse, see run_sparse) */
	if (opt.think_ms) {
		run_sparse(rx, rx_mr, tx, tx_mr, msg_max);
		opt.lat_sizes = "";
		rd_skip = 1;
	}
	double *rt = opt.median ? malloc((opt.lat_iters + 1) * sizeof(*rt)) : NULL;
	list = strdup(opt.lat_sizes);
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t sz = atol(tok);
		long iters = opt.lat_iters, warm = iters / 10, i, done = 0;
		double t0 = 0, deadline;

		if (sz >= 65536) iters = iters / 4;	/* fewer for big messages */
		deadline = now() + opt.max_sec + 0.5;
		for (i = 0; i < warm + iters; i++) {
			if (i == warm) { t0 = now(); deadline = t0 + opt.max_sec; }
			uint64_t r = n_rx + 1;	/* the reply may land while we send */
			POST(fi_recv(ep, rx, msg_max, desc(rx_mr), FI_ADDR_UNSPEC, &rx_ctx));
			if (opt.gather && i)	/* -G: the last echo becomes the next ping */
				memcpy(tx, rx, sz);
			send_msg(tx, sz, desc(tx_mr));
			wait_count(&n_rx, r);
			if (last_rx_len != sz) {
				fprintf(stderr, "echo of %zu bytes came back as %zu\n", sz, last_rx_len);
				exit(1);
			}
			if (i >= warm) done++;
			if (rt) {	/* -M: every round trip timed on its own */
				if (i >= warm) rt[done] = now();
				if (i == warm) rt[0] = t0;
				if (done > 100 && rt[done] > deadline)
					break;
				continue;
			}
			if ((i & 63) == 0 && now() > deadline && done > 100)
				break;
		}
		if (rt) {
			long k;
			for (k = 0; k < done; k++)
				rt[k] = (rt[k + 1] - rt[k]) * 1e6 / 2;
			print_line("lat_us", sz, sorted_median(rt, done), "us");
			continue;
		}
		print_line("lat_us", sz, (now() - t0) * 1e6 / done / 2, "us");
	}
	free(list);
	free(rt);

	/* 3. fi_read bandwidth: keep `window` reads in flight */
	list = strdup(rd_skip ? "" : opt.rd_sizes);
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t sz = atol(tok);
		uint64_t n = opt.rd_bytes / sz, posted = 0, base, w = opt.window;
		double t0, deadline;

		if (sz > mi.len) { fprintf(stderr, "read size %zu > remote %llu\n", sz,
					   (unsigned long long)mi.len); exit(1); }
		if (n < 4) n = 4;
		/* warm-up: one window; then check the data did arrive */
		dst[0] = dst[sz - 1] = 0;
		base = n_rd;
		for (posted = 0; posted < w; posted++)
			POST(fi_read(ep, dst, sz, desc(dst_mr), peer, mi.addr, mi.key,
				     &rd_ctx[posted % MAX_WINDOW]));
		wait_count(&n_rd, base + w);
		if (dst[0] != 'r' || dst[sz - 1] != 'r') {
			fprintf(stderr, "fi_read of %zu bytes did not bring the server's data\n", sz);
			exit(1);
		}

		base = n_rd;
		t0 = now();
		deadline = t0 + opt.max_sec;
		for (posted = 0; n_rd - base < n;) {
			while (posted < n && posted - (n_rd - base) < w) {
				POST(fi_read(ep, dst, sz, desc(dst_mr), peer, mi.addr,
					     mi.key, &rd_ctx[posted % MAX_WINDOW]));
				posted++;
			}
			progress();
			if (posted < n && now() > deadline)
				n = posted;	/* time is up: stop posting, drain */
		}
		print_line("bw_MBps", sz, (double)sz * n / (now() - t0) / 1e6, "MBps");
	}
	free(list);

	/* 4. -U: libripc's long-send protocol on raw libfabric */
	if (*opt.pull_sizes)
		run_pull_client(rx, rx_mr, msg_max);

	/* BYE, then wait (bounded, 2 s) for the server's BYE so that ours
	 * is known to have arrived before this endpoint closes. */
	{
		double end = now() + 2.0;
		uint64_t r = n_rx + 1;
		POST(fi_recv(ep, rx, msg_max, desc(rx_mr), FI_ADDR_UNSPEC, &rx_ctx));
		memcpy(tx, BYE, 3);
		send_msg(tx, 3, desc(tx_mr));
		while (n_rx < r && now() < end)
			progress();
		if (n_rx < r)
			fprintf(stderr, "fi_rma_bench: no BYE from server\n");
	}
	if (rx_mr) fi_close(&rx_mr->fid);
	if (tx_mr) fi_close(&tx_mr->fid);
	if (dst_mr) fi_close(&dst_mr->fid);
}

static void usage(const char *p)
{
	fprintf(stderr,
		"usage: %s -p PROV [-s] [-a ADDR] [-P PORT] [-L SIZES] [-R SIZES]\n"
		"  -p  provider (e.g. tcp, \"tcp;ofi_rxm\", shm)   -s  server mode\n"
		"  -a  server address for bootstrap (127.0.0.1)  -P  bootstrap port\n"
		"  -L  latency sizes (8,64,1024,65536; '' skips)  -n  latency iterations\n"
		"  -R  read sizes (65536,...,16777216; '' skips)  -W  reads in flight (8)\n"
		"  -t  seconds per size (1.0)   -T  hard time limit, s (60)\n"
		"  -S  system prefix (fi_rdm)   -X transport label   -v  verbose to stderr\n"
		"  -M  median latency   -U  pull sizes ('' skips)   -K  register per pull\n"
		"  -C  largest read of a pull (8 MiB)   -G  copy the payload before each send\n"
		"  -H  pull from a huge-page buffer   -Z  sparse: think ms, sleep on the CQ\n", p);
	exit(2);
}

int main(int argc, char **argv)
{
	int c, oob;
	size_t addrlen = 256;
	char name[256], peer_name[256];
	uint64_t len;

	while ((c = getopt(argc, argv, "p:sa:P:L:R:n:W:t:T:S:X:vhMU:KC:GHZ:")) != -1) {
		switch (c) {
		case 'p': opt.prov = optarg; break;
		case 's': opt.server = 1; break;
		case 'a': opt.addr = optarg; break;
		case 'P': opt.port = atoi(optarg); break;
		case 'L': opt.lat_sizes = optarg; break;
		case 'R': opt.rd_sizes = optarg; break;
		case 'n': opt.lat_iters = atol(optarg); break;
		case 'W': opt.window = atoi(optarg); break;
		case 't': opt.max_sec = atof(optarg); break;
		case 'T': opt.timeout = atoi(optarg); break;
		case 'S': opt.sys = optarg; break;
		case 'X': opt.tr = optarg; break;
		case 'v': opt.verbose = 1; break;
		case 'M': opt.median = 1; break;
		case 'U': opt.pull_sizes = optarg; break;
		case 'K': opt.pull_reg = 1; break;
		case 'H': opt.pull_huge = 1; break;
		case 'C': opt.chunk = atol(optarg); break;
		case 'G': opt.gather = 1; break;
		case 'Z': opt.think_ms = atoi(optarg); break;
		default: usage(argv[0]);
		}
	}
	if (!opt.prov) usage(argv[0]);
	if (!opt.tr) opt.tr = opt.prov;
	if (opt.window < 1 || opt.window > MAX_WINDOW) opt.window = 8;
	/* (libripc copy: the client really skips the read test on -R '') */
	if (!*opt.rd_sizes) { opt.rd_sizes = "4096"; rd_skip = 1; }	/* server still needs a buffer */

	signal(SIGALRM, on_alarm);
	alarm(opt.timeout);

	open_fabric();
	oob = oob_connect();
	CHK(fi_getname(&ep->fid, name, &addrlen));
	len = addrlen;
	/* server sends first, then client */
	if (opt.server) {
		xfer(oob, &len, 8, 1); xfer(oob, name, len, 1);
		xfer(oob, &len, 8, 0);
		if (len > sizeof peer_name) exit(1);
		xfer(oob, peer_name, len, 0);
	} else {
		xfer(oob, &len, 8, 0);
		if (len > sizeof peer_name) exit(1);
		xfer(oob, peer_name, len, 0);
		len = addrlen; xfer(oob, &len, 8, 1); xfer(oob, name, len, 1);
	}
	if (fi_av_insert(av, peer_name, 1, &peer, 0, NULL) != 1) {
		fprintf(stderr, "fi_av_insert failed\n");
		return 1;
	}

	if (opt.server)
		run_server(oob);
	else
		run_client(oob);

	close(oob);
	fi_close(&ep->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	return 0;
}
