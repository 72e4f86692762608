/*
 * mr_cost - what libripc's per-message registrations cost (issue 5,
 * "Measurement"; DESIGN.md §5 and §6).
 *
 * libripc exposes every long-send item through a registration of its own
 * with a fresh random key, and closes it when the receiver's DONE arrives
 * (ripc/send.c ripc__expose_items, ripc/buffers.c ripc__key_new).  The
 * alternative it refuses for security reasons is one long-lived
 * registration of the buffer whose key stays valid for every message.
 * This program measures the difference with the core's own transport ops
 * (ripc__prov_table[], the code libripc runs; libfabric underneath), in
 * two processes on this host:
 *
 *   server (the long sender, target of the reads; CPU 0)
 *     per message:  [draw key, mr_reg]  send DESC{addr,key,len}
 *                   wait for DONE       [mr_close]
 *   client (the receiver; CPU 1)
 *     per message:  wait for DESC, fi_read len bytes, send DONE
 *
 * which is libripc's long-send protocol without the rest of the library.
 * "mr_per_msg" does the bracketed steps every time, "mr_long_lived"
 * registers once.  The two modes alternate in rounds so that drift of a
 * shared machine hits both alike.  Also measured, in the server alone:
 * the raw cost of drawing a key (getrandom), fi_mr_reg and fi_close.
 *
 * Output, one line per measurement (format of ../shared/bench/peers):
 *
 *   system transport size_bytes metric value unit
 *
 *   mr_per_msg / mr_long_lived  lat_us    half the median cycle (a cycle
 *                                         is a round trip: DESC out, DONE
 *                                         back, the read in between)
 *                               cycle_us  the median cycle
 *   mr_key   key_us      getrandom of one 8-byte key (size column 8)
 *   mr_reg   cost_us     fi_mr_reg, median
 *   mr_close cost_us     fi_close of the registration, median
 *
 * Usage: mr_cost [-p shm,tcp] [-S 4096,1048576] [-n iters] [-N iters]
 *                [-r rounds] [-t seconds] [-C srvcpu,clicpu]
 *   -n  cycles per mode for sizes up to 64 KiB (default 20000),
 *   -N  for larger sizes (default 2000), split over -r rounds (10);
 *   -t  time budget per size and mode (default 20 s);
 *   -C  CPUs for server and client (default 0,1; -C - : no pinning).
 * The program forks server and client (before any libfabric call) and
 * pins them (sched_setaffinity, as taskset -c does); they exchange
 * endpoint names over a socketpair; the server ends the client with a
 * message, and the parent ends either by pid if it outlives its time.
 * Environment: FI_TCP_IFACE=lo is set if unset; tcp binds 127.0.0.1.
 */
#include <errno.h>
#include <glob.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ripc_prov.h"

enum { M_HELLO = 1, M_DESC, M_DONE, M_QUIT };

struct msg {
	uint32_t type;
	uint32_t len;
	uint64_t addr;
	uint64_t key;
	uint64_t seq;
};

#define NRX 16
#define KEY_MASK 0x7fffffff7fffffffull /* as ripc__key_new: bit 31 clear */

static struct {
	const char *provs;
	size_t sizes[16];
	int nsizes;
	long iters_small, iters_large;
	int rounds;
	double budget;
	int cpu[2];
} opt = {
	.provs = "shm,tcp",
	.sizes = { 4096, 1048576 },
	.nsizes = 2,
	.iters_small = 20000,
	.iters_large = 2000,
	.rounds = 10,
	.budget = 20,
	.cpu = { 0, 1 },
};

/* One side's transport state. */
static const struct ripc_prov_ops *ops;
static struct ripc_prov *prov;
static struct ripc_prov_attr attr;
static uint64_t peer;
static uint8_t rxbuf[NRX][256] __attribute__((aligned(64)));
static struct ripc_prov_mr rx_mr;
static int rxctx[NRX];
static int read_ctx;
static struct msg inbox[64];
static unsigned in_head, in_tail;
static bool read_done;
static int read_err;
static const char *role = "server";

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "mr_cost[%s]: ", role);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		fprintf(stderr, "mr_cost[%s]: cannot pin to CPU %d: %s\n",
			role, cpu, strerror(errno));
}

static void post(int i)
{
	int r;

	rxctx[i] = i;
	r = ops->post_recv(prov, rxbuf[i], sizeof(rxbuf[i]),
			   attr.mr_local ? rx_mr.desc : NULL, &rxctx[i]);
	if (r)
		die("post_recv: %d", r);
}

/* Drain completions: messages into the inbox, read completions into
 * read_done/read_err.  The caller loops; tcp needs the target of a read
 * to poll too, which the server does while it waits for DONE. */
static void pump(void)
{
	struct ripc_cqe c[16];
	int n = ops->poll(prov, c, 16);

	if (n < 0)
		die("poll: %d", n);
	for (int i = 0; i < n; i++) {
		if (c[i].ctx == &read_ctx) {
			read_done = true;
			read_err = c[i].err;
		} else if (c[i].kind == RIPC_CQE_RECV ||
			   (c[i].ctx >= (void *)rxctx &&
			    c[i].ctx < (void *)(rxctx + NRX))) {
			int k = *(int *)c[i].ctx;

			if (c[i].err)
				die("receive failed: %d", c[i].err);
			if (in_tail - in_head >= 64)
				die("inbox overflow");
			memcpy(&inbox[in_tail++ % 64], rxbuf[k],
			       sizeof(struct msg));
			post(k);
		} else if (c[i].err) {
			die("operation failed: %d", c[i].err);
		}
	}
}

static struct msg wait_msg(double limit)
{
	double end = now() + limit;

	while (in_head == in_tail) {
		if (now() > end)
			die("no message for %.0f s", limit);
		pump();
	}
	return inbox[in_head++ % 64];
}

static void send_msg(uint32_t type, uint64_t addr, uint64_t key, uint32_t len,
		     uint64_t seq)
{
	struct msg m = { type, len, addr, key, seq };
	double end = now() + 10;
	int r;

	/* inject: no completion to wait for, the buffer is free at once
	 * (libripc sends its control messages the same way when they fit). */
	while ((r = ops->inject(prov, peer, &m, sizeof(m))) == -EAGAIN &&
	       now() < end)
		pump();
	if (r)
		die("inject: %d", r);
}

static void open_side(const char *name, int sock)
{
	struct ripc_prov_opts o = { .src_addr = "127.0.0.1" };
	uint8_t me[RIPC_ADDR_MAX], them[RIPC_ADDR_MAX];
	size_t len = sizeof(me);
	uint32_t n;
	int tp = -1, r;

	for (int i = 0; i < RIPC_PROV_MAX; i++)
		if (!strcmp(name, ripc__prov_names[i]))
			tp = i;
	if (tp < 0 || !ripc__prov_table[tp])
		die("unknown provider %s", name);
	ops = ripc__prov_table[tp];
	r = ops->open(&o, &prov, &attr);
	if (r == -ENODEV)
		exit(77);
	if (r)
		die("open %s: %d", name, r);
	if (sizeof(struct msg) > attr.inject_size)
		die("%s: inject size %zu too small", name, attr.inject_size);
	if (attr.mr_local &&
	    ops->mr_reg(prov, rxbuf, sizeof(rxbuf), RIPC_ACC_LOCAL, 1, &rx_mr))
		die("registering receive buffers");
	for (int i = 0; i < NRX; i++)
		post(i);
	if (ops->getname(prov, me, &len))
		die("getname");
	/* Endpoint names over the socketpair: length, then bytes. */
	n = (uint32_t)len;
	if (write(sock, &n, 4) != 4 || write(sock, me, len) != (ssize_t)len)
		die("socketpair write");
	if (read(sock, &n, 4) != 4 || n > sizeof(them) ||
	    read(sock, them, n) != (ssize_t)n)
		die("socketpair read");
	if (ops->av_insert(prov, them, n, &peer))
		die("av_insert");
}

/* ---- client: the receiver that pulls ------------------------------------ */

static int client(const char *name, int sock)
{
	size_t max = 0;
	uint8_t *dst;
	struct ripc_prov_mr dmr = { 0 };

	role = "client";
	pin(opt.cpu[1]);
	open_side(name, sock);
	for (int i = 0; i < opt.nsizes; i++)
		if (opt.sizes[i] > max)
			max = opt.sizes[i];
	/* The receive window: long-lived, like a registered libripc window
	 * (local access only; nobody reads or writes it remotely). */
	dst = aligned_alloc(4096, (max + 4095) & ~(size_t)4095);
	if (!dst)
		die("no memory");
	memset(dst, 0, max);
	if (attr.mr_local &&
	    ops->mr_reg(prov, dst, max, RIPC_ACC_LOCAL, 2, &dmr))
		die("registering the window");
	send_msg(M_HELLO, 0, 0, 0, 0);
	for (;;) {
		struct msg m = wait_msg(120);
		double end;
		int r;

		if (m.type == M_QUIT)
			break;
		if (m.type != M_DESC || m.len > max)
			die("unexpected message %u", m.type);
		read_done = false;
		end = now() + 10;
		while ((r = ops->read(prov, peer, dst, m.len,
				      attr.mr_local ? dmr.desc : NULL, m.addr,
				      m.key, &read_ctx)) == -EAGAIN &&
		       now() < end)
			pump();
		if (r)
			die("read: %d", r);
		while (!read_done) {
			if (now() > end)
				die("read did not complete");
			pump();
		}
		if (read_err)
			die("read failed: %d", read_err);
		/* The server stamps the first and last byte with the
		 * sequence number: the data really moved. */
		if (dst[0] != (uint8_t)m.seq || dst[m.len - 1] != (uint8_t)m.seq)
			die("stale data at seq %lu", (unsigned long)m.seq);
		send_msg(M_DONE, 0, 0, 0, m.seq);
	}
	if (attr.mr_local)
		ops->mr_close(prov, &dmr);
	ops->close(prov);
	return 0;
}

/* ---- server: the long sender -------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, long n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n ? (n & 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

/* A key as libripc draws it (ripc__key_new): 8 random bytes from the
 * kernel's CSPRNG, bit 31 and bit 63 clear, never 0. */
static uint64_t draw_key(void)
{
	uint64_t k;

	if (getrandom(&k, sizeof(k), 0) != sizeof(k))
		die("getrandom");
	k &= KEY_MASK;
	return k ? k : 1;
}

static void reg(void *buf, size_t len, struct ripc_prov_mr *mr)
{
	int r;

	/* A collision with a live key fails with -EEXIST: draw again. */
	while ((r = ops->mr_reg(prov, buf, len, RIPC_ACC_REMOTE_READ,
				draw_key(), mr)) == -EEXIST)
		;
	if (r)
		die("mr_reg: %d", r);
}

/* fi_mr_reg and fi_close alone, and the key, in this process. */
static void raw_costs(const char *name, uint8_t *buf, size_t size, long n,
		      double *t_reg, double *t_close)
{
	struct ripc_prov_mr mr;

	for (long i = 0; i < n; i++) {
		uint64_t key = draw_key();
		double t0 = now(), t1, t2;
		int r = ops->mr_reg(prov, buf, size, RIPC_ACC_REMOTE_READ, key,
				    &mr);

		t1 = now();
		if (r == -EEXIST) {
			i--;
			continue;
		}
		if (r)
			die("mr_reg: %d", r);
		ops->mr_close(prov, &mr);
		t2 = now();
		t_reg[i] = (t1 - t0) * 1e6;
		t_close[i] = (t2 - t1) * 1e6;
	}
	printf("mr_reg %s %zu cost_us %.3f us\n", name, size, median(t_reg, n));
	printf("mr_close %s %zu cost_us %.3f us\n", name, size,
	       median(t_close, n));
}

/* n cycles in one mode; appends the cycle times (us) to t[*k...]. */
static void cycles(uint8_t *buf, size_t size, bool per_msg,
		   struct ripc_prov_mr *lived, long n, double *t, long *k,
		   double end, uint64_t *seq)
{
	for (long i = 0; i < n && now() < end; i++) {
		struct ripc_prov_mr fresh, *mr = per_msg ? &fresh : lived;
		double t0;
		struct msg m;

		(*seq)++;
		buf[0] = buf[size - 1] = (uint8_t)*seq;
		t0 = now();
		if (per_msg)
			reg(buf, size, &fresh);
		send_msg(M_DESC, mr->base, mr->key, (uint32_t)size, *seq);
		m = wait_msg(30);
		if (m.type != M_DONE || m.seq != *seq)
			die("expected DONE %lu", (unsigned long)*seq);
		if (per_msg)
			ops->mr_close(prov, &fresh);
		t[(*k)++] = (now() - t0) * 1e6;
	}
}

static void measure(const char *name, size_t size)
{
	long n = size <= 65536 ? opt.iters_small : opt.iters_large;
	long per_round = (n + opt.rounds - 1) / opt.rounds, k[2] = { 0, 0 };
	long warm = per_round < 100 ? per_round : 100;
	double *t[2], *scratch, end[2];
	struct ripc_prov_mr lived;
	uint64_t seq = 0;
	uint8_t *buf;
	double tmp[100];
	long dummy = 0;

	buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	t[0] = calloc((size_t)per_round * opt.rounds, sizeof(double));
	t[1] = calloc((size_t)per_round * opt.rounds, sizeof(double));
	scratch = calloc((size_t)n, 2 * sizeof(double));
	if (!buf || !t[0] || !t[1] || !scratch)
		die("no memory");
	memset(buf, 0x5a, size);

	raw_costs(name, buf, size, n, scratch, scratch + n);

	reg(buf, size, &lived);
	/* Warm up both paths (tcp connects on first use; page faults on
	 * both sides), untimed. */
	cycles(buf, size, true, &lived, warm, tmp, &dummy, now() + 30, &seq);
	dummy = 0;
	cycles(buf, size, false, &lived, warm, tmp, &dummy, now() + 30, &seq);
	end[0] = end[1] = now() + opt.budget;
	for (int r = 0; r < opt.rounds; r++) {
		/* Alternate which mode goes first. */
		for (int j = 0; j < 2; j++) {
			int mode = (r + j) & 1; /* 0: per message, 1: lived */

			cycles(buf, size, mode == 0, &lived, per_round,
			       t[mode], &k[mode], end[mode], &seq);
		}
	}
	ops->mr_close(prov, &lived);
	for (int mode = 0; mode < 2; mode++) {
		const char *sys = mode ? "mr_long_lived" : "mr_per_msg";
		double med = median(t[mode], k[mode]);

		printf("%s %s %zu lat_us %.3f us\n", sys, name, size, med / 2);
		printf("%s %s %zu cycle_us %.3f us\n", sys, name, size, med);
		if (k[mode] < n)
			fprintf(stderr,
				"mr_cost: %s %s %zu: time budget: %ld of %ld "
				"cycles\n",
				sys, name, size, k[mode], n);
	}
	fflush(stdout);
	free(buf);
	free(t[0]);
	free(t[1]);
	free(scratch);
}

static void key_cost(const char *name)
{
	enum { N = 20000 };
	static double t[N];

	for (int i = 0; i < N; i++) {
		double t0 = now();

		(void)draw_key();
		t[i] = (now() - t0) * 1e6;
	}
	printf("mr_key %s 8 cost_us %.3f us\n", name, median(t, N));
}

static void shm_cleanup(pid_t pid)
{
	char pat[64];
	glob_t g;

	/* libfabric shm names its regions /dev/shm/<pid>:...; a killed
	 * process cannot remove them. */
	snprintf(pat, sizeof(pat), "/dev/shm/%d:*", (int)pid);
	if (glob(pat, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			unlink(g.gl_pathv[i]);
		globfree(&g);
	}
}

/* The server's work after the client said hello. */
static int server(const char *name, int sock)
{
	double end;

	role = "server";
	pin(opt.cpu[0]);
	open_side(name, sock);
	if (wait_msg(30).type != M_HELLO)
		die("no hello from the client");
	key_cost(name);
	for (int i = 0; i < opt.nsizes; i++)
		measure(name, opt.sizes[i]);
	send_msg(M_QUIT, 0, 0, 0, 0);
	/* Progress a little longer so that the QUIT leaves (tcp), then
	 * close; the client exits on it. */
	for (end = now() + 0.2; now() < end;)
		pump();
	ops->close(prov);
	return 0;
}

/* Wait for pid until the deadline; kill it by pid after that. */
static int reap(pid_t pid, double deadline)
{
	int st = 0;

	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (now() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			break;
		}
		usleep(20000);
	}
	shm_cleanup(pid);
	return st;
}

/* Both sides are forked from this process, which never touches
 * libfabric itself: each starts from a fresh libfabric state. */
static int run_provider(const char *name)
{
	int sv[2], sst, cst;
	pid_t srv, cli;
	double deadline;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		die("socketpair: %s", strerror(errno));
	fflush(stdout);
	cli = fork();
	if (cli == 0) {
		close(sv[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(client(name, sv[1]));
	}
	srv = cli > 0 ? fork() : -1;
	if (srv == 0) {
		close(sv[1]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(server(name, sv[0]));
	}
	close(sv[0]);
	close(sv[1]);
	if (cli < 0 || srv < 0) {
		if (cli > 0)
			reap(cli, 0);
		die("fork: %s", strerror(errno));
	}
	/* Generous: every size and mode may use its budget, plus the raw
	 * loops and the warm-up. */
	deadline = now() + 120 + opt.nsizes * (2 * opt.budget + 60);
	sst = reap(srv, deadline);
	/* The client ends on QUIT, or when the server is gone (its
	 * receive times out); do not wait long for it. */
	cst = reap(cli, now() + (WIFEXITED(sst) && !WEXITSTATUS(sst) ? 10 : 1));
	if (WIFEXITED(sst) && WEXITSTATUS(sst) == 77) {
		printf("# %s: not available here\n", name);
		return 0;
	}
	if (!WIFEXITED(sst) || WEXITSTATUS(sst) || !WIFEXITED(cst) ||
	    WEXITSTATUS(cst)) {
		fprintf(stderr, "mr_cost: %s failed (server status %d, client "
			"status %d)\n", name, sst, cst);
		return 1;
	}
	return 0;
}

static size_t parse_size(const char *s)
{
	char *e;
	unsigned long long v = strtoull(s, &e, 10);

	switch (*e) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	}
	return (size_t)v;
}

int main(int argc, char **argv)
{
	char *provs, *tok, *save;
	int c, fail = 0;

	while ((c = getopt(argc, argv, "p:S:n:N:r:t:C:h")) != -1) {
		switch (c) {
		case 'p':
			opt.provs = optarg;
			break;
		case 'S':
			opt.nsizes = 0;
			for (tok = strtok_r(optarg, ",", &save);
			     tok && opt.nsizes < 16;
			     tok = strtok_r(NULL, ",", &save))
				opt.sizes[opt.nsizes++] = parse_size(tok);
			break;
		case 'n':
			opt.iters_small = atol(optarg);
			break;
		case 'N':
			opt.iters_large = atol(optarg);
			break;
		case 'r':
			opt.rounds = atoi(optarg);
			break;
		case 't':
			opt.budget = atof(optarg);
			break;
		case 'C':
			if (!strcmp(optarg, "-"))
				opt.cpu[0] = opt.cpu[1] = -1;
			else if (sscanf(optarg, "%d,%d", &opt.cpu[0],
					&opt.cpu[1]) != 2)
				die("-C srvcpu,clicpu");
			break;
		default:
			fprintf(stderr,
				"usage: mr_cost [-p shm,tcp] [-S sizes] [-n iters] "
				"[-N iters] [-r rounds] [-t sec] [-C cpu,cpu]\n");
			return 2;
		}
	}
	for (int i = 0; i < opt.nsizes; i++)
		if (opt.sizes[i] == 0 || opt.sizes[i] > UINT32_MAX)
			die("bad size");
	if (opt.rounds < 1 || opt.iters_small < 1 || opt.iters_large < 1)
		die("bad iteration counts");
	setenv("FI_TCP_IFACE", "lo", 0);
	provs = strdup(opt.provs);
	for (tok = strtok_r(provs, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		fail |= run_provider(tok);
	}
	free(provs);
	return fail;
}
