/*
 * ripc_msgrate - short messages per second (issue 6): 64-byte short sends
 * from one or several sender processes to one receiving service.
 *
 *   server:  ripc_msgrate -s -p shm -r ready.txt          (prints its ID)
 *   client:  ripc_msgrate -p shm -c 1,4 ID
 *
 * The client runs the largest count of -c sender processes (itself and
 * forked children, each with its own library instance and service ID,
 * all on the client's CPU); for each count C in the list, C of them send
 * at the same time for -t seconds (or -n messages each) and the client
 * prints the aggregate rate, in thousands of messages per second:
 *
 *     libripc shm 64 msg_rate 812.34 kmsg_s            (C = 1)
 *     libripc_4senders shm 64 msg_rate 790.12 kmsg_s   (C = 4)
 *
 * Credits.  A message that arrives while its service already queues
 * RIPC_QUEUE_MAX messages is dropped, so the senders must not run ahead
 * of the receiving application.  The total window -W (default: the
 * queue limit, 1024) is split among the C senders: a sender may have at
 * most W/C messages that the receiver has not acknowledged, and asks for
 * an acknowledgement on every (W/C/4)-th message (256 with one sender).
 * The receiver answers such a message with a short ack carrying the
 * highest sequence number it has taken from that sender, so at most W
 * messages are ever queued for it, whatever the scheduling.  The
 * receiver also counts gaps in each sender's sequence numbers: a message
 * lost on the way would show there, and is reported on stderr.
 *
 * The rate of a run is the number of messages the receiver confirmed (a
 * final FIN is answered once everything before it was taken) divided by
 * the time from the first sender's start to the last sender's final
 * confirmation.  Senders are started together through pipes from the
 * parent; CLOCK_MONOTONIC is shared by the processes.  Sending is not a
 * fixed-size loop: each sender stops at its deadline or after -n
 * messages, whichever comes first.
 *
 * Before the timed runs every sender sends -w messages under the same
 * credit scheme (warm-up: resolution, connection, caches).  The client
 * ends the server with a BYE (from the parent, once the children left).
 * A child leaves when the parent says so, when its command pipe closes
 * (the parent died) or at its own alarm(-T); when BENCH_PIDS names a
 * file, the children's pids are appended to it, so that a script that
 * stops processes by pid (run_bench.sh) knows them too.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"

#define MSG_SIZE 64
#define MAX_SENDERS 64
#define ACK_TIMEOUT_MS 5000

enum { M_DATA = 0x41544144, M_FIN = 0x204e4946, M_BYE = 0x20455942,
       M_ACK = 0x204b4341 };
#define F_ACK_REQ 1u

/* Sender -> receiver, exactly MSG_SIZE bytes. */
struct msg {
	uint32_t magic;
	uint32_t flags;
	uint64_t run; /* seq restarts at 1 in every run */
	uint64_t seq;
	uint8_t pad[MSG_SIZE - 24];
};

/* Receiver -> sender. */
struct ack {
	uint32_t magic;
	uint32_t fin;      /* answers a FIN: everything before it is taken */
	uint64_t run;
	uint64_t seq;      /* highest sequence number taken in this run */
	uint64_t received; /* messages taken in this run */
	uint64_t lost;     /* gaps seen in this run */
};

_Static_assert(sizeof(struct msg) == MSG_SIZE, "message size");

/* ---- server ----------------------------------------------------------- */

struct sender_state {
	uint16_t id;
	uint64_t run, seq, received, lost;
};

static struct sender_state senders[MAX_SENDERS * 4];
static unsigned nsenders;

static struct sender_state *sender_of(uint16_t id)
{
	static unsigned last;

	if (last < nsenders && senders[last].id == id)
		return &senders[last];
	for (unsigned i = 0; i < nsenders; i++)
		if (senders[i].id == id)
			return &senders[last = i];
	if (nsenders == sizeof(senders) / sizeof(senders[0]))
		bench_die("more than %u senders", nsenders);
	senders[nsenders] = (struct sender_state){ .id = id, .run = ~0ull };
	return &senders[last = nsenders++];
}

static void send_ack(uint16_t me, uint16_t to, const struct sender_state *s,
		     uint32_t magic, bool fin)
{
	struct ack a = { .magic = magic, .fin = fin, .run = s ? s->run : 0,
			 .seq = s ? s->seq : 0,
			 .received = s ? s->received : 0,
			 .lost = s ? s->lost : 0 };
	void *b[1] = { &a };
	uint32_t l[1] = { sizeof(a) };
	uint8_t r = ripc_send_short(me, to, b, l, 1, NULL, NULL, 0);

	if (r)
		bench_die("ack to %u: %s", to, ripc_strerror(r));
}

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	uint64_t total = 0, lost = 0;

	if (me == RIPC_INVALID_SERVICE_ID)
		bench_die("register: %s", ripc_strerror(ripc_last_error()));
	bench_ready(me);
	for (;;) {
		void **si = NULL;
		uint32_t *ss = NULL;
		uint16_t ns = 0, from;
		struct msg m;
		uint8_t r;

		/* Long items are never sent here: NULL lets the library
		 * skip the two long-item arrays. */
		r = ripc_receive(me, &from, &si, &ss, &ns, NULL, NULL, NULL);
		if (r)
			bench_die("receive: %s", ripc_strerror(r));
		if (ns != 1 || ss[0] != sizeof(m)) {
			bench_log("unexpected message (%u items) from %u", ns,
				  from);
			bench_free_msg(ns, si, ss, NULL, NULL);
			continue;
		}
		/* The header is all we look at; the rest is payload. */
		memcpy(&m, si[0], offsetof(struct msg, pad));
		bench_free_msg(ns, si, ss, NULL, NULL);
		if (m.magic == M_BYE) {
			send_ack(me, from, NULL, M_BYE, false);
			break;
		}
		struct sender_state *s = sender_of(from);

		if (m.run != s->run) { /* a new run of this sender */
			s->run = m.run;
			s->seq = s->received = s->lost = 0;
		}
		if (m.magic == M_FIN) {
			send_ack(me, from, s, M_ACK, true);
			continue;
		}
		if (m.seq > s->seq + 1) {
			/* Lost on the way: count it, go on. */
			s->lost += m.seq - s->seq - 1;
			lost += m.seq - s->seq - 1;
		} else if (m.seq <= s->seq) {
			/* The library promises order per sender. */
			bench_log("sender %u: seq %llu after %llu", from,
				  (unsigned long long)m.seq,
				  (unsigned long long)s->seq);
		}
		if (m.seq > s->seq)
			s->seq = m.seq;
		s->received++;
		total++;
		if (m.flags & F_ACK_REQ)
			send_ack(me, from, s, M_ACK, false);
	}
	if (bo.verbose || lost) {
		struct ripc_stats st;

		ripc_stats(&st, sizeof(st));
		bench_log("%llu messages from %u senders, %llu lost; library: "
			  "drops queue full %llu, malformed %llu, send retries "
			  "%llu",
			  (unsigned long long)total, nsenders,
			  (unsigned long long)lost,
			  (unsigned long long)st.drops_queue_full,
			  (unsigned long long)st.drops_malformed,
			  (unsigned long long)st.send_retries);
	}
	return 0;
}

/* ---- one sender --------------------------------------------------------- */

/* What a sender reports to the parent after a run. */
struct result {
	uint64_t received, lost, sent;
	double t0, t1;
};

/* Parent -> child. */
struct command {
	char op; /* 'g': run, 'q': leave */
	uint32_t senders;
	uint64_t run;
};

static uint16_t me;
static uint64_t acked; /* highest seq the receiver took, this run */

/* Take one ack (waiting up to timeout_ms); false when none came. */
static bool take_ack(uint64_t run, struct ack *out, int timeout_ms)
{
	void **si = NULL;
	uint32_t *ss = NULL;
	uint16_t ns = 0, from;
	struct ack a;
	uint8_t r;

	r = ripc_receive_timeout(me, &from, &si, &ss, &ns, NULL, NULL, NULL,
				 timeout_ms);
	/* A zero timeout on an empty queue is RIPC_EAGAIN (ripc(7)
	 * RETURN CONVENTIONS), a longer one RIPC_ETIMEDOUT. */
	if (r == RIPC_ETIMEDOUT || r == RIPC_EAGAIN)
		return false;
	if (r)
		bench_die("waiting for an ack: %s", ripc_strerror(r));
	if (ns != 1 || ss[0] != sizeof(a))
		bench_die("unexpected answer (%u items)", ns);
	memcpy(&a, si[0], sizeof(a));
	bench_free_msg(ns, si, ss, NULL, NULL);
	if (a.magic != M_ACK)
		bench_die("unexpected answer (magic %#x)", a.magic);
	if (a.run == run && a.seq > acked)
		acked = a.seq;
	if (out)
		*out = a;
	return true;
}

static void send_msg(uint32_t magic, uint32_t flags, uint64_t run,
		     uint64_t seq)
{
	struct msg m = { .magic = magic, .flags = flags, .run = run,
			 .seq = seq };
	void *b[1] = { &m };
	uint32_t l[1] = { sizeof(m) };
	uint8_t r = ripc_send_short(me, bo.server_id, b, l, 1, NULL, NULL, 0);

	if (r)
		bench_die("send: %s", ripc_strerror(r));
}

/* One run under the credit scheme: at most `window` unacknowledged
 * messages, an ack asked for every `every`-th.  Stops after `max`
 * messages or at `deadline` (checked every 64 messages). */
static struct result sender_run(uint64_t run, uint64_t window, uint64_t every,
				uint64_t max, double deadline)
{
	struct result res = { 0 };
	uint64_t seq = 0;
	struct ack a;

	acked = 0;
	res.t0 = bench_now();
	for (;;) {
		/* Bounded: each wait takes an ack or dies after 5 s. */
		while (seq - acked >= window)
			if (!take_ack(run, NULL, ACK_TIMEOUT_MS))
				bench_die("no ack for %llu s (seq %llu, acked "
					  "%llu)",
					  ACK_TIMEOUT_MS / 1000ull,
					  (unsigned long long)seq,
					  (unsigned long long)acked);
		if (seq >= max || (!(seq & 63) && seq && bench_now() > deadline))
			break;
		seq++;
		bool ask = !(seq % every);

		send_msg(M_DATA, ask ? F_ACK_REQ : 0, run, seq);
		/* Take the acks that are already here, without waiting:
		 * each one queued holds one of the library's receive
		 * buffers.  At most window/every + 1 can be waiting. */
		if (ask)
			for (uint64_t i = 0; i <= window / every + 1; i++)
				if (!take_ack(run, NULL, 0))
					break;
	}
	/* FIN: answered once the receiver took everything before it. */
	send_msg(M_FIN, 0, run, seq + 1);
	for (unsigned i = 0;; i++) {
		if (i > window / every + 16)
			bench_die("no answer to FIN");
		if (!take_ack(run, &a, ACK_TIMEOUT_MS))
			bench_die("no answer to FIN within %d ms",
				  ACK_TIMEOUT_MS);
		if (a.fin && a.run == run)
			break;
	}
	res.t1 = bench_now();
	res.sent = seq;
	res.received = a.received;
	res.lost = a.lost;
	return res;
}

/* Credits of one sender when `c` send together. */
static void credits(unsigned c, uint64_t *window, uint64_t *every)
{
	uint64_t qmax = ripc_limit(RIPC_LIMIT_QUEUE);
	uint64_t total = (uint64_t)bo.window < qmax ? (uint64_t)bo.window
						    : qmax;

	*window = total / c ? total / c : 1;
	*every = *window / 4 ? *window / 4 : 1;
}

static void sender_init(void)
{
	bench_lib_init();
	me = ripc_register_random_service_id();
	if (me == RIPC_INVALID_SERVICE_ID)
		bench_die("register: %s", ripc_strerror(ripc_last_error()));
	bench_check_transport(bo.server_id);
}

static void warm_up(unsigned c)
{
	uint64_t w, e;

	credits(c, &w, &e);
	if (bo.warmup)
		sender_run(0, w, e, (uint64_t)bo.warmup, bench_now() + 10);
}

static void xwrite(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		bench_die("pipe write: %s", strerror(errno));
}

static bool xread(int fd, void *p, size_t n)
{
	ssize_t r;

	do
		r = read(fd, p, n);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return false;
	if (r != (ssize_t)n)
		bench_die("pipe read: %s", r < 0 ? strerror(errno) : "short");
	return true;
}

/* A forked sender: warm up, then runs on command until told to leave. */
static int child(int cmd_fd, int res_fd, unsigned maxc)
{
	struct command cmd;
	char ready = 'R';

	/* fork() does not carry the parent's alarm over. */
	alarm((unsigned)bo.time_limit);
	sender_init();
	warm_up(maxc);
	xwrite(res_fd, &ready, 1);
	/* Bounded by the parent: 'q' or EOF (it died) ends the loop, and
	 * alarm(-T) ends the process in any case. */
	while (xread(cmd_fd, &cmd, sizeof(cmd)) && cmd.op == 'g') {
		uint64_t w, e;
		struct result res;

		credits(cmd.senders, &w, &e);
		res = sender_run(cmd.run, w, e, (uint64_t)bo.iters,
				 bench_now() + bo.max_sec);
		xwrite(res_fd, &res, sizeof(res));
	}
	if (bo.verbose)
		bench_log_stats();
	ripc_finalize();
	return 0;
}

/* ---- client: the parent is sender 0 ------------------------------------ */

static int client(void)
{
	size_t *counts, ncounts = bench_sizes(bo.counts ? bo.counts : "1",
					      &counts);
	unsigned maxc = (unsigned)bench_max_size(counts, ncounts);
	int cmd_fd[MAX_SENDERS], res_fd[MAX_SENDERS];
	pid_t pid[MAX_SENDERS];

	if (maxc > MAX_SENDERS)
		bench_die("at most %d senders", MAX_SENDERS);
	/* Children first: the library starts threads, and a process must
	 * not fork once it has threads. */
	for (unsigned i = 1; i < maxc; i++) {
		int c[2], r[2];

		if (pipe(c) || pipe(r))
			bench_die("pipe: %s", strerror(errno));
		pid[i] = fork();
		if (pid[i] < 0)
			bench_die("fork: %s", strerror(errno));
		if (pid[i] == 0) {
			/* Keep only this child's ends of its own pipes. */
			for (unsigned j = 1; j < i; j++)
				close(cmd_fd[j]), close(res_fd[j]);
			close(c[1]);
			close(r[0]);
			exit(child(c[0], r[1], maxc));
		}
		bench_note_pid(pid[i]);
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
			bench_die("sender %u did not start", i);
	}

	for (size_t k = 0; k < ncounts; k++) {
		unsigned c = (unsigned)counts[k];
		struct command cmd = { .op = 'g', .senders = c, .run = k + 1 };
		struct result res[MAX_SENDERS];
		uint64_t w, e, received = 0, lost = 0, sent = 0;
		double t0, t1;
		char sys[128];

		if (c < 1)
			bench_die("sender count 0");
		for (unsigned i = 1; i < c; i++)
			xwrite(cmd_fd[i], &cmd, sizeof(cmd));
		credits(c, &w, &e);
		res[0] = sender_run(cmd.run, w, e, (uint64_t)bo.iters,
				    bench_now() + bo.max_sec);
		for (unsigned i = 1; i < c; i++)
			if (!xread(res_fd[i], &res[i], sizeof(res[i])))
				bench_die("sender %u died", i);
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
			snprintf(sys, sizeof(sys), "%s", bo.system);
		else
			snprintf(sys, sizeof(sys), "%s_%usenders", bo.system,
				 c);
		bench_emit(sys, bo.label, MSG_SIZE, "msg_rate",
			   (double)received / (t1 - t0) / 1e3, "kmsg_s");
		if (lost || received != sent)
			bench_log("%u senders: %llu sent, %llu received, %llu "
				  "lost",
				  c, (unsigned long long)sent,
				  (unsigned long long)received,
				  (unsigned long long)lost);
		if (bo.verbose)
			bench_log("%u senders: window %llu, ack every %llu, "
				  "%llu messages in %.3f s",
				  c, (unsigned long long)w,
				  (unsigned long long)e,
				  (unsigned long long)received, t1 - t0);
	}

	struct command quit = { .op = 'q' };

	for (unsigned i = 1; i < maxc; i++) {
		xwrite(cmd_fd[i], &quit, sizeof(quit));
		close(cmd_fd[i]);
	}
	/* Bounded by alarm(-T) like everything else. */
	for (unsigned i = 1; i < maxc; i++) {
		int st;

		if (waitpid(pid[i], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			bench_log("sender %u (pid %d) did not exit cleanly", i,
				  (int)pid[i]);
		close(res_fd[i]);
	}

	/* BYE, and wait up to 2 s for the server's BYE. */
	send_msg(M_BYE, 0, 0, 0);
	for (int tries = 0; tries < 4; tries++) {
		void **si = NULL;
		uint32_t *ss = NULL;
		uint16_t ns = 0, from;
		bool bye;

		if (ripc_receive_timeout(me, &from, &si, &ss, &ns, NULL, NULL,
					 NULL, 500))
			continue;
		bye = ns == 1 && ss[0] == sizeof(struct ack) &&
		      ((struct ack *)si[0])->magic == M_BYE;
		bench_free_msg(ns, si, ss, NULL, NULL);
		if (bye)
			break;
	}
	free(counts);
	return 0;
}

int main(int argc, char **argv)
{
	int ret;

	bo = (struct bench_opts){
		.sizes = "64",
		.system = "libripc",
		.iters = 100000000,
		.warmup = 20000,
		.max_sec = 1.0,
		.time_limit = 120,
		.window = 1024,
	};
	bench_parse(argc, argv,
		    "  -c list   client: sender counts, e.g. 1,4 (processes)\n"
		    "  -W n      credits of all senders together (at most "
		    "RIPC_QUEUE_MAX)\n");
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (bo.server) {
		bench_lib_init();
		ret = server();
	} else {
		/* The client starts the library itself, after forking. */
		ret = client();
	}
	ripc_finalize();
	return ret;
}
