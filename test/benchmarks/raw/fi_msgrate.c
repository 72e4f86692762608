/*
 * fi_msgrate.c - raw libfabric message rate on FI_EP_RDM endpoints: the
 * floor under ripc_msgrate, with the same messages and the same credits.
 *
 * Server:  fi_msgrate -p PROV -s [-P port] [-c counts]
 * Client:  fi_msgrate -p PROV [-P port] [-c counts] [-t secs] [-W credits]
 *
 * -c is a list of sender counts (e.g. 1,4), the same on both sides.  The
 * client runs the largest count of sender processes (itself and forked
 * children, each with its own fabric, domain and endpoint); the server
 * takes that many bootstrap connections on 127.0.0.1:port (a plain TCP
 * socket that swaps endpoint names and tells each sender its index, as
 * fi_rma_bench does), and everything after that is libfabric.
 *
 * Per count C: C senders send 64-byte messages (fi_inject) at the same
 * time for -t seconds.  Credits as in ripc_msgrate: the total window -W
 * (1024) is split among the C senders; a sender has at most W/C messages
 * unacknowledged and asks for an ack on every (W/C/4)-th; the server
 * answers those with an fi_inject of the highest sequence number it has
 * received from that sender.  The server keeps min(W, rx size) receives
 * posted (64-byte slots, reposted as soon as each is handled), so that
 * every message finds one: the natural design of a raw receiver under
 * credit flow control.  The CQs are read in batches of 64; nobody sleeps.
 *
 * -m BYTES (client): messages of that size, 64 to 256, instead of 64: the
 * raw cost of the bytes libripc puts on the wire for a 64-byte item (its
 * header and item table come on top).  Up to the provider's inject size
 * a message goes by fi_inject, above it by fi_send from a ring of slots.
 *
 * -j BYTES asks the provider for that inject size (tcp;ofi_rxm grants it;
 * its default is 64).  -d (client) sends every message with 8 bytes of
 * remote CQ data (fi_injectdata / fi_senddata; the server reads its
 * completions as ever, without the data): what a protocol that carries
 * its header in the CQ data would cost.  Both measure where rxm's fast
 * path ends (docs/PERFORMANCE.md, tcp message rate).
 *
 * Printed by the client (bench format; MSG = messages confirmed by the
 * server, counted from the first sender's start to the last sender's
 * final confirmation):
 *   fi_rdm_msgrate <transport> 64 msg_rate <kmsg/s> kmsg_s           C = 1
 *   fi_rdm_msgrate_<C>senders <transport> 64 msg_rate <kmsg/s> kmsg_s
 * (-S PREFIX replaces "fi_rdm"; -X LABEL replaces the provider name.)
 *
 * Several senders share the client's CPU: when a run has more than one,
 * a sender that is out of credits calls sched_yield() between polls, so
 * that its spinning does not take the time slice of one that could send.
 *
 * Every loop is bounded by a count or a deadline, the process by
 * alarm(-T).  The server exits on the client's BYE.  The forked senders'
 * pids are appended to the file BENCH_PIDS names, if any (run_bench.sh
 * stops processes by pid).  Standalone: the
 * fabric setup is fi_rma_bench.c's (a copy of the peers' program).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define MSG_SIZE 64
#define SLOT 256 /* receive slot: the largest -m */
#define TX_SLOTS 256
#define MAX_SENDERS 64
#define MAX_RX 4096
#define ACK_SLOTS 64
#define CQ_BATCH 64
#define ACK_TIMEOUT 5.0

enum { M_DATA = 0x41544144, M_FIN = 0x204e4946, M_BYE = 0x20455942,
       M_ACK = 0x204b4341 };
#define F_ACK_REQ 1u

struct msg {
	uint32_t magic, flags;
	uint64_t run, seq;
	uint32_t idx; /* the sender's index, for the server's ack */
	uint8_t pad[MSG_SIZE - 28];
};

struct ack {
	uint32_t magic, fin;
	uint64_t run, seq, received, lost;
};

_Static_assert(sizeof(struct msg) == MSG_SIZE, "message size");

static struct {
	const char *prov, *sys, *tr, *counts;
	int port, server, verbose, timeout, data;
	long window, warmup;
	size_t msg_size, inject;
	double max_sec;
} opt = {
	.sys = "fi_rdm", .port = 47641, .counts = "1", .timeout = 120,
	.window = 1024, .warmup = 20000, .max_sec = 1.0, .msg_size = MSG_SIZE,
};

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_cq *cq;
static struct fid_ep *ep;
static uint64_t mr_mode;
static size_t inject_size;

#define CHK(call) do { int _r = (int)(call); if (_r) { \
	fprintf(stderr, "%s:%d %s = %d (%s)\n", __FILE__, __LINE__, #call, \
		_r, fi_strerror(-_r)); exit(1); } } while (0)

static void on_alarm(int sig)
{
	static const char m[] = "fi_msgrate: time limit reached, exiting\n";

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
	fprintf(stderr, "fi_msgrate[%d]: %s\n", (int)getpid(), what);
	exit(1);
}

/* ---- plain TCP bootstrap: swap endpoint names, nothing else ---- */

static void xfer(int fd, void *buf, size_t len, int send_it)
{
	char *p = buf;

	while (len) {
		ssize_t n = send_it ? send(fd, p, len, MSG_NOSIGNAL)
				    : recv(fd, p, len, 0);
		if (n <= 0) {
			perror("bootstrap socket");
			exit(1);
		}
		p += n;
		len -= n;
	}
}

static int oob_listen(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(opt.port) };
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (void *)&sa, sizeof(sa)) || listen(lfd, MAX_SENDERS)) {
		perror("bootstrap bind/listen");
		exit(1);
	}
	return lfd;
}

static int oob_connect(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(opt.port) };
	int fd, i;

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	for (i = 0; i < 100; i++) { /* server may not be up yet: 100 x 50 ms */
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(fd, (void *)&sa, sizeof(sa)))
			return fd;
		close(fd);
		usleep(50000);
	}
	fprintf(stderr, "cannot reach bootstrap port %d\n", opt.port);
	exit(1);
}

/* ---- libfabric setup (fi_rma_bench.c's, FI_MSG only) ---- */

static void open_fabric(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_MSG,
				      .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_UNSPEC };
	const char *node = NULL;
	uint64_t flags = 0;

	/* Side experiment, as in fi_rma_bench.c: FI_RMA_BENCH_WAIT_FD=1
	 * opens the CQ with a wait fd (as libripc's over tcp must be, to
	 * sleep) and still busy-polls it: what the wait object alone costs. */
	if (getenv("FI_RMA_BENCH_WAIT_FD") &&
	    !strcmp(getenv("FI_RMA_BENCH_WAIT_FD"), "1"))
		cq_attr.wait_obj = FI_WAIT_FD;
	hints->caps = FI_MSG;
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
	/* -j: ask for a larger inject size (rxm grants what is asked) */
	hints->tx_attr->inject_size = opt.inject;
	if (opt.data)
		hints->domain_attr->cq_data_size = 8;
	if (strncmp(opt.prov, "shm", 3)) { /* network providers: loopback */
		node = "127.0.0.1";
		flags = FI_SOURCE;
	}
	CHK(fi_getinfo(FI_VERSION(1, 9), node, NULL, flags, hints, &info));
	fi_freeinfo(hints);
	mr_mode = info->domain_attr->mr_mode;
	inject_size = info->tx_attr->inject_size;
	if (opt.verbose)
		fprintf(stderr, "# %s: provider=%s inject=%zu rx_size=%zu "
			"tx_size=%zu\n", opt.server ? "server" : "client",
			info->fabric_attr->prov_name, inject_size,
			info->rx_attr->size, info->tx_attr->size);
	CHK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHK(fi_domain(fabric, info, &domain, NULL));
	cq_attr.size = MAX_RX + ACK_SLOTS + 64;
	CHK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	if (info->domain_attr->av_type != FI_AV_UNSPEC)
		av_attr.type = info->domain_attr->av_type;
	CHK(fi_av_open(domain, &av_attr, &av, NULL));
	CHK(fi_endpoint(domain, info, &ep, NULL));
	CHK(fi_ep_bind(ep, &av->fid, 0));
	CHK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHK(fi_enable(ep));
}

static struct fid_mr *reg_local(void *buf, size_t len)
{
	struct fid_mr *mr;

	if (!(mr_mode & FI_MR_LOCAL))
		return NULL;
	CHK(fi_mr_reg(domain, buf, len, FI_SEND | FI_RECV, 0, 1, 0, &mr,
		      NULL));
	if (mr_mode & FI_MR_ENDPOINT) {
		CHK(fi_mr_bind(mr, &ep->fid, 0));
		CHK(fi_mr_enable(mr));
	}
	return mr;
}

static void close_fabric(void)
{
	fi_close(&ep->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
}

/* Swap names over the bootstrap socket (server first); returns the
 * peer's fi_addr. */
static fi_addr_t swap_names(int oob)
{
	char name[256], peer_name[256];
	size_t addrlen = sizeof(name);
	uint64_t len;
	fi_addr_t a;

	CHK(fi_getname(&ep->fid, name, &addrlen));
	if (opt.server) {
		len = addrlen;
		xfer(oob, &len, 8, 1);
		xfer(oob, name, len, 1);
		xfer(oob, &len, 8, 0);
		if (len > sizeof(peer_name))
			die("peer name too long");
		xfer(oob, peer_name, len, 0);
	} else {
		xfer(oob, &len, 8, 0);
		if (len > sizeof(peer_name))
			die("peer name too long");
		xfer(oob, peer_name, len, 0);
		len = addrlen;
		xfer(oob, &len, 8, 1);
		xfer(oob, name, len, 1);
	}
	if (fi_av_insert(av, peer_name, 1, &a, 0, NULL) != 1)
		die("fi_av_insert failed");
	return a;
}

static long max_count(void)
{
	long m = 0;
	char *dup = strdup(opt.counts), *tok, *save;

	for (tok = strtok_r(dup, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		if (atol(tok) > m)
			m = atol(tok);
	free(dup);
	if (m < 1 || m > MAX_SENDERS)
		die("-c: sender counts are 1 to 64");
	return m;
}

static void cq_fail(ssize_t n)
{
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };

		fi_cq_readerr(cq, &err, 0);
		fprintf(stderr, "cq error: %s (prov: %s)\n",
			fi_strerror(err.err),
			fi_cq_strerror(cq, err.prov_errno, err.err_data, NULL,
				       0));
		exit(1);
	}
	fprintf(stderr, "fi_cq_read: %s\n", fi_strerror((int)-n));
	exit(1);
}

/* ---- server ------------------------------------------------------------ */

struct sender_state {
	fi_addr_t addr;
	uint64_t run, seq, received, lost;
};

static struct sender_state peers[MAX_SENDERS];
static unsigned npeers;

static char *rx_buf;
static struct fid_mr *rx_mr;
static struct fi_context rx_ctx[MAX_RX];
static unsigned nrx;

/* Completions read while an inject waited for room; handled in order by
 * the main loop.  At most one per posted receive can be pending. */
static struct fi_cq_msg_entry backlog[MAX_RX];
static unsigned bl_head, bl_len;

static void drive(void)
{
	struct fi_cq_msg_entry e[CQ_BATCH];
	size_t room = MAX_RX - bl_len;
	ssize_t n = fi_cq_read(cq, e, room < CQ_BATCH ? room : CQ_BATCH);

	if (n == -FI_EAGAIN)
		return;
	if (n < 0)
		cq_fail(n);
	for (ssize_t i = 0; i < n; i++)
		backlog[(bl_head + bl_len++) % MAX_RX] = e[i];
}

static void repost(unsigned slot)
{
	ssize_t r;

	/* Bounded: the provider gives room back as its queue drains. */
	for (long i = 0; (r = fi_recv(ep, rx_buf + (size_t)slot * SLOT, SLOT,
				      rx_mr ? fi_mr_desc(rx_mr) : NULL,
				      FI_ADDR_UNSPEC, &rx_ctx[slot])) ==
			 -FI_EAGAIN;
	     i++) {
		if (i > 100000000)
			die("fi_recv: no room");
		drive();
	}
	if (r)
		die("fi_recv failed");
}

static void inject_ack(const struct sender_state *s, uint32_t magic, int fin)
{
	struct ack a = { .magic = magic, .fin = (uint32_t)fin, .run = s->run,
			 .seq = s->seq, .received = s->received,
			 .lost = s->lost };
	ssize_t r;
	double end = now() + ACK_TIMEOUT;

	while ((r = fi_inject(ep, &a, sizeof(a), s->addr)) == -FI_EAGAIN) {
		drive();
		if (now() > end)
			die("fi_inject (ack): no room for 5 s");
	}
	if (r)
		die("fi_inject (ack) failed");
}

/* The last word to a sender: sent and completed (bounded), so that it is
 * not lost when the endpoint closes right after. */
static void send_bye(const struct sender_state *s)
{
	static struct fi_context ctx;
	struct ack a = { .magic = M_BYE };
	double end = now() + 0.5;
	ssize_t r;

	while ((r = fi_send(ep, &a, sizeof(a), NULL, s->addr, &ctx)) ==
		       -FI_EAGAIN &&
	       now() < end)
		drive();
	if (r)
		return;
	while (now() < end) {
		struct fi_cq_msg_entry e;
		ssize_t n = fi_cq_read(cq, &e, 1);

		if (n == 1 && e.op_context == &ctx)
			return;
		if (n < 0 && n != -FI_EAGAIN)
			return;
	}
}

static void run_server(void)
{
	long m = max_count();
	int lfd = oob_listen();
	uint64_t total = 0, lost = 0;

	open_fabric();
	/* Every sender connects once, at its start. */
	for (long i = 0; i < m; i++) {
		int fd = accept(lfd, NULL, NULL);
		uint32_t idx = (uint32_t)i;

		if (fd < 0) {
			perror("accept");
			exit(1);
		}
		peers[i].addr = swap_names(fd);
		peers[i].run = UINT64_MAX;
		xfer(fd, &idx, 4, 1);
		close(fd);
	}
	npeers = (unsigned)m;
	close(lfd);

	nrx = opt.window < (long)info->rx_attr->size ? (unsigned)opt.window
						      : (unsigned)info->rx_attr->size;
	if (nrx > MAX_RX)
		nrx = MAX_RX;
	if (nrx < 16)
		nrx = 16;
	rx_buf = aligned_alloc(4096, (size_t)nrx * SLOT);
	memset(rx_buf, 0, (size_t)nrx * SLOT);
	rx_mr = reg_local(rx_buf, (size_t)nrx * SLOT);
	for (unsigned i = 0; i < nrx; i++)
		repost(i);
	if (opt.verbose)
		fprintf(stderr, "# server: %u senders, %u receives posted\n",
			npeers, nrx);

	/* Until BYE, or the alarm. */
	for (;;) {
		struct fi_cq_msg_entry e;
		struct msg msg;
		unsigned slot;

		if (!bl_len) {
			drive();
			continue;
		}
		e = backlog[bl_head];
		bl_head = (bl_head + 1) % MAX_RX;
		bl_len--;
		if (!(e.flags & FI_RECV))
			continue;
		slot = (unsigned)((struct fi_context *)e.op_context - rx_ctx);
		if (slot >= nrx)
			die("completion of an unknown receive");
		memcpy(&msg, rx_buf + (size_t)slot * SLOT, sizeof(msg));
		repost(slot);
		if (e.len < MSG_SIZE || msg.idx >= npeers) {
			fprintf(stderr, "unexpected message of %zu bytes\n",
				e.len);
			continue;
		}
		struct sender_state *s = &peers[msg.idx];

		if (msg.magic == M_BYE) {
			send_bye(s);
			break;
		}
		if (msg.run != s->run) {
			s->run = msg.run;
			s->seq = s->received = s->lost = 0;
		}
		if (msg.magic == M_FIN) {
			inject_ack(s, M_ACK, 1);
			continue;
		}
		if (msg.seq != s->seq + 1 && msg.seq > s->seq) {
			s->lost += msg.seq - s->seq - 1;
			lost += msg.seq - s->seq - 1;
		}
		if (msg.seq > s->seq)
			s->seq = msg.seq;
		s->received++;
		total++;
		if (msg.flags & F_ACK_REQ)
			inject_ack(s, M_ACK, 0);
	}
	if (opt.verbose || lost)
		fprintf(stderr, "# server: %llu messages, %llu lost\n",
			(unsigned long long)total, (unsigned long long)lost);
	if (rx_mr)
		fi_close(&rx_mr->fid);
}

/* ---- one sender --------------------------------------------------------- */

struct result {
	uint64_t received, lost, sent;
	double t0, t1;
};

struct command {
	char op; /* 'g': run, 'q': leave */
	uint32_t senders;
	uint64_t run;
};

static fi_addr_t server_addr;
static uint32_t my_idx;
static char *ack_buf;
static struct fid_mr *ack_mr;
static struct fi_context ack_ctx[ACK_SLOTS];
static uint64_t acked, cur_run;
static unsigned cur_senders; /* senders of the current run */
static struct ack last_fin;
static int fin_seen;
/* -m above the inject size: fi_send from these slots */
static char *tx_buf;
static struct fid_mr *tx_mr;
static struct fi_context tx_ctx[TX_SLOTS]; /* FI_CONTEXT: one per op */
static uint64_t tx_posted, tx_done;

static void post_ack_slot(unsigned i)
{
	ssize_t r;

	for (long k = 0; (r = fi_recv(ep, ack_buf + (size_t)i * SLOT, SLOT,
				      ack_mr ? fi_mr_desc(ack_mr) : NULL,
				      FI_ADDR_UNSPEC, &ack_ctx[i])) ==
			 -FI_EAGAIN;
	     k++)
		if (k > 100000000)
			die("fi_recv (ack): no room");
	if (r)
		die("fi_recv (ack) failed");
}

/* Read the CQ once, take the acks that arrived. */
static void sender_progress(void)
{
	struct fi_cq_msg_entry e[CQ_BATCH];
	ssize_t n = fi_cq_read(cq, e, CQ_BATCH);

	if (n == -FI_EAGAIN)
		return;
	if (n < 0)
		cq_fail(n);
	for (ssize_t i = 0; i < n; i++) {
		unsigned slot;
		struct ack a;

		if (!(e[i].flags & FI_RECV)) {
			tx_done += (e[i].flags & FI_SEND) != 0;
			continue;
		}
		slot = (unsigned)((struct fi_context *)e[i].op_context -
				  ack_ctx);
		if (slot >= ACK_SLOTS)
			die("completion of an unknown receive");
		memcpy(&a, ack_buf + (size_t)slot * SLOT, sizeof(a));
		post_ack_slot(slot);
		if (a.magic == M_BYE) {
			fin_seen = 2;
			continue;
		}
		if (a.magic != M_ACK || a.run != cur_run)
			continue;
		if (a.seq > acked)
			acked = a.seq;
		if (a.fin) {
			last_fin = a;
			fin_seen = 1;
		}
	}
}

/* Messages of -m bytes: up to the inject size an fi_inject from the
 * stack, as libripc's short send does; above it an fi_send from a ring of
 * registered slots, each reused once its completion came (libripc copies
 * such messages into a library buffer and fi_sends that). */
static void send_msg(uint32_t magic, uint32_t flags, uint64_t seq)
{
	struct msg m = { .magic = magic, .flags = flags, .run = cur_run,
			 .seq = seq, .idx = my_idx };
	uint8_t buf[SLOT];
	double end = 0;
	ssize_t r;

	if (opt.msg_size > inject_size) {
		char *slot = tx_buf + (tx_posted % TX_SLOTS) * SLOT;

		/* Bounded: a completion per send, or die after 5 s. */
		while (tx_posted - tx_done >= TX_SLOTS) {
			sender_progress();
			if (!end)
				end = now() + ACK_TIMEOUT;
			else if (now() > end)
				die("fi_send: no completion for 5 s");
		}
		memcpy(slot, &m, sizeof(m));
		memset(slot + sizeof(m), (int)seq, opt.msg_size - sizeof(m));
		end = 0;
		void *d = tx_mr ? fi_mr_desc(tx_mr) : NULL;
		void *ctx = &tx_ctx[tx_posted % TX_SLOTS];

		while ((r = opt.data ? fi_senddata(ep, slot, opt.msg_size, d,
						   seq, server_addr, ctx)
				     : fi_send(ep, slot, opt.msg_size, d,
					       server_addr, ctx)) ==
		       -FI_EAGAIN) {
			sender_progress();
			if (!end)
				end = now() + ACK_TIMEOUT;
			else if (now() > end)
				die("fi_send: no room for 5 s");
		}
		if (r)
			die("fi_send failed");
		tx_posted++;
		return;
	}
	memcpy(buf, &m, sizeof(m));
	memset(buf + sizeof(m), (int)seq, opt.msg_size - sizeof(m));
	while ((r = opt.data ? fi_injectdata(ep, buf, opt.msg_size, seq,
					     server_addr)
			     : fi_inject(ep, buf, opt.msg_size, server_addr)) ==
	       -FI_EAGAIN) {
		sender_progress();
		if (!end)
			end = now() + ACK_TIMEOUT;
		else if (now() > end)
			die("fi_inject: no room for 5 s");
	}
	if (r)
		die("fi_inject failed");
}

/* One run: at most `window` unacknowledged messages, an ack asked for on
 * every `every`-th; stops after `max` messages or at `deadline` (checked
 * every 64 messages), then FIN. */
static struct result sender_run(uint64_t run, uint64_t window, uint64_t every,
				uint64_t max, double deadline)
{
	struct result res = { 0 };
	uint64_t seq = 0;
	double end;

	cur_run = run;
	acked = 0;
	fin_seen = 0;
	res.t0 = now();
	for (;;) {
		if (seq - acked >= window) {
			end = now() + ACK_TIMEOUT;
			while (seq - acked >= window) {
				sender_progress();
				if (now() > end)
					die("no ack for 5 s");
				/* Several senders share one CPU here: a
				 * sender that cannot send gives its time
				 * slice to one that can (the libripc
				 * senders sleep in their receive).  Alone,
				 * it has nobody to give it to. */
				if (cur_senders > 1 && seq - acked >= window)
					sched_yield();
			}
		}
		if (seq >= max || (!(seq & 63) && seq && now() > deadline))
			break;
		seq++;
		send_msg(M_DATA, seq % every ? 0 : F_ACK_REQ, seq);
		/* Poll as often as a library would: once per message. */
		sender_progress();
	}
	send_msg(M_FIN, 0, seq + 1);
	end = now() + ACK_TIMEOUT;
	while (fin_seen != 1) {
		sender_progress();
		if (now() > end)
			die("no answer to FIN for 5 s");
	}
	res.t1 = now();
	res.sent = seq;
	res.received = last_fin.received;
	res.lost = last_fin.lost;
	return res;
}

static void credits(unsigned c, uint64_t *window, uint64_t *every)
{
	cur_senders = c;
	*window = (uint64_t)opt.window / c ? (uint64_t)opt.window / c : 1;
	*every = *window / 4 ? *window / 4 : 1;
}

static void sender_init(void)
{
	int oob;

	open_fabric();
	oob = oob_connect();
	server_addr = swap_names(oob);
	xfer(oob, &my_idx, 4, 0);
	close(oob);
	ack_buf = aligned_alloc(4096, ACK_SLOTS * SLOT);
	memset(ack_buf, 0, ACK_SLOTS * SLOT);
	ack_mr = reg_local(ack_buf, ACK_SLOTS * SLOT);
	for (unsigned i = 0; i < ACK_SLOTS; i++)
		post_ack_slot(i);
	tx_buf = aligned_alloc(4096, TX_SLOTS * SLOT);
	memset(tx_buf, 0, TX_SLOTS * SLOT);
	tx_mr = reg_local(tx_buf, TX_SLOTS * SLOT);
}

static void warm_up(unsigned c)
{
	uint64_t w, e;

	credits(c, &w, &e);
	if (opt.warmup)
		sender_run(0, w, e, (uint64_t)opt.warmup, now() + 10);
}

/* A script that stops processes by pid (run_bench.sh) learns of the
 * forked senders from the file named by BENCH_PIDS, one pid a line. */
static void note_pid(pid_t p)
{
	const char *f = getenv("BENCH_PIDS");
	FILE *fp = f && *f ? fopen(f, "a") : NULL;

	if (fp) {
		fprintf(fp, "%d\n", (int)p);
		fclose(fp);
	}
}

static void xwrite(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		die("pipe write");
}

static int xread(int fd, void *p, size_t n)
{
	ssize_t r;

	do
		r = read(fd, p, n);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return 0;
	if (r != (ssize_t)n)
		die("pipe read");
	return 1;
}

static void sender_exit(void)
{
	double end = now() + 1.0;

	/* Sends still in flight must complete before their slots go. */
	while (tx_done < tx_posted && now() < end)
		sender_progress();
	if (ack_mr)
		fi_close(&ack_mr->fid);
	if (tx_mr)
		fi_close(&tx_mr->fid);
	close_fabric();
}

static int child(int cmd_fd, int res_fd, unsigned maxc)
{
	struct command cmd;
	char ready = 'R';

	alarm(opt.timeout); /* fork() does not carry the alarm over */
	sender_init();
	warm_up(maxc);
	xwrite(res_fd, &ready, 1);
	while (xread(cmd_fd, &cmd, sizeof(cmd)) && cmd.op == 'g') {
		uint64_t w, e;
		struct result res;

		credits(cmd.senders, &w, &e);
		res = sender_run(cmd.run, w, e, UINT64_MAX, now() + opt.max_sec);
		xwrite(res_fd, &res, sizeof(res));
	}
	sender_exit();
	return 0;
}

static void run_client(void)
{
	unsigned maxc = (unsigned)max_count();
	int cmd_fd[MAX_SENDERS], res_fd[MAX_SENDERS];
	pid_t pid[MAX_SENDERS];
	char *list, *tok, *save;
	uint64_t run = 0;

	for (unsigned i = 1; i < maxc; i++) {
		int c[2], r[2];

		if (pipe(c) || pipe(r))
			die("pipe");
		pid[i] = fork();
		if (pid[i] < 0)
			die("fork");
		if (pid[i] == 0) {
			for (unsigned j = 1; j < i; j++)
				close(cmd_fd[j]), close(res_fd[j]);
			close(c[1]);
			close(r[0]);
			exit(child(c[0], r[1], maxc));
		}
		note_pid(pid[i]);
		close(c[0]);
		close(r[1]);
		cmd_fd[i] = c[1];
		res_fd[i] = r[0];
	}
	sender_init();
	warm_up(maxc);
	for (unsigned i = 1; i < maxc; i++) {
		char ready;

		if (!xread(res_fd[i], &ready, 1) || ready != 'R')
			die("a sender did not start");
	}

	list = strdup(opt.counts);
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		unsigned c = (unsigned)atol(tok);
		struct command cmd = { .op = 'g', .senders = c, .run = ++run };
		struct result res[MAX_SENDERS];
		uint64_t w, e, received = 0, lost = 0, sent = 0;
		double t0, t1;

		if (c < 1 || c > maxc)
			die("bad sender count");
		for (unsigned i = 1; i < c; i++)
			xwrite(cmd_fd[i], &cmd, sizeof(cmd));
		credits(c, &w, &e);
		res[0] = sender_run(cmd.run, w, e, UINT64_MAX,
				    now() + opt.max_sec);
		for (unsigned i = 1; i < c; i++)
			if (!xread(res_fd[i], &res[i], sizeof(res[i])))
				die("a sender died");
		t0 = res[0].t0;
		t1 = res[0].t1;
		for (unsigned i = 0; i < c; i++) {
			received += res[i].received;
			lost += res[i].lost;
			sent += res[i].sent;
			t0 = res[i].t0 < t0 ? res[i].t0 : t0;
			t1 = res[i].t1 > t1 ? res[i].t1 : t1;
		}
		if (c == 1)
			printf("%s_msgrate %s %zu msg_rate %.2f kmsg_s\n",
			       opt.sys, opt.tr, opt.msg_size,
			       received / (t1 - t0) / 1e3);
		else
			printf("%s_msgrate_%usenders %s %zu msg_rate %.2f "
			       "kmsg_s\n", opt.sys, c, opt.tr, opt.msg_size,
			       received / (t1 - t0) / 1e3);
		fflush(stdout);
		if (lost || received != sent)
			fprintf(stderr, "fi_msgrate: %u senders: %llu sent, "
				"%llu received, %llu lost\n", c,
				(unsigned long long)sent,
				(unsigned long long)received,
				(unsigned long long)lost);
		if (opt.verbose)
			fprintf(stderr, "# %u senders: window %llu, ack every "
				"%llu, %llu messages in %.3f s\n", c,
				(unsigned long long)w, (unsigned long long)e,
				(unsigned long long)received, t1 - t0);
	}
	free(list);

	struct command quit = { .op = 'q' };

	for (unsigned i = 1; i < maxc; i++) {
		xwrite(cmd_fd[i], &quit, sizeof(quit));
		close(cmd_fd[i]);
	}
	for (unsigned i = 1; i < maxc; i++) {
		int st;

		if (waitpid(pid[i], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			fprintf(stderr, "fi_msgrate: sender pid %d did not exit "
				"cleanly\n", (int)pid[i]);
		close(res_fd[i]);
	}
	/* BYE, then wait (bounded, 2 s) for the server's, so that ours is
	 * known to have arrived before this endpoint closes. */
	{
		double end = now() + 2.0;

		cur_run = UINT64_MAX;
		fin_seen = 0;
		send_msg(M_BYE, 0, 0);
		while (fin_seen != 2 && now() < end)
			sender_progress();
		if (fin_seen != 2)
			fprintf(stderr, "fi_msgrate: no BYE from server\n");
	}
	sender_exit();
}

static void usage(const char *p)
{
	fprintf(stderr,
		"usage: %s -p PROV [-s] [-P PORT] [-c COUNTS] [-t SECS] [-W N]\n"
		"  -p  provider (tcp, shm)   -s  server   -P  bootstrap port\n"
		"  -c  sender counts, e.g. 1,4 (same on both sides)\n"
		"  -t  seconds per count (1.0)   -T  hard time limit, s (120)\n"
		"  -W  credits of all senders together (1024)\n"
		"  -m  message bytes, 64 to 256 (64); client side\n"
		"  -j  inject size to ask the provider for (its default)\n"
		"  -d  client: 8 bytes of remote CQ data with every message\n"
		"  -S  system prefix (fi_rdm)  -X  transport label  -v  verbose\n",
		p);
	exit(2);
}

int main(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "p:sP:c:t:T:W:w:m:S:X:j:dvh")) != -1) {
		switch (c) {
		case 'p': opt.prov = optarg; break;
		case 's': opt.server = 1; break;
		case 'P': opt.port = atoi(optarg); break;
		case 'c': opt.counts = optarg; break;
		case 't': opt.max_sec = atof(optarg); break;
		case 'T': opt.timeout = atoi(optarg); break;
		case 'W': opt.window = atol(optarg); break;
		case 'm': opt.msg_size = (size_t)atol(optarg); break;
		case 'w': opt.warmup = atol(optarg); break;
		case 'S': opt.sys = optarg; break;
		case 'X': opt.tr = optarg; break;
		case 'j': opt.inject = (size_t)atol(optarg); break;
		case 'd': opt.data = 1; break;
		case 'v': opt.verbose = 1; break;
		default: usage(argv[0]);
		}
	}
	if (!opt.prov || opt.window < 1 || opt.max_sec <= 0 ||
	    opt.msg_size < MSG_SIZE || opt.msg_size > SLOT)
		usage(argv[0]);
	if (!opt.tr)
		opt.tr = opt.prov;
	signal(SIGALRM, on_alarm);
	alarm(opt.timeout);
	if (opt.server) {
		run_server();
		close_fabric();
	} else {
		run_client();
	}
	return 0;
}
