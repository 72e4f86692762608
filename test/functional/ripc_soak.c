/*
 * ripc_soak - long-lived server and short-lived clients for the soak and
 * churn scripts (issue 12: test/scripts/soak.sh, test/scripts/churn.sh).
 * Public API only.
 *
 *   ripc_soak [-r ready] [-v]                 the server (no ID): one service,
 *                                             serves until SIGTERM/SIGINT
 *                                             or a "quit" message; with
 *                                             $SOAK_HEAP_FILE set, writes
 *                                             its malloc heap in use there
 *                                             about once a second
 *   ripc_soak [-p prov] -I n [-x think] [-S max_long] ID
 *                                             a soak client: n requests
 *   ripc_soak [-p prov] -x seq -I n ID        churn, sequential: n client
 *                                             processes one after another
 *   ripc_soak [-p prov] -x conc -I c ID       churn, concurrent: c client
 *                                             processes alive together
 *   ripc_soak [-p prov] -x idle               a process that initialises,
 *                                             registers and sleeps (the
 *                                             soak's idle-CPU probe)
 *
 * Requests: item 0 is a header {magic, seq, seed, len, kind}, item 1 is
 * len bytes of ft_fill(seed).  Short requests (kind 0) are short sends of
 * 1 B-48 KiB; long requests (kind 1) are long sends of 64 KiB to max_long
 * (-S, default 1 MiB), which the server's library pulls into its own
 * buffers.  The server checks the data and answers in kind: a short reply,
 * or a long reply from buffers it allocates and frees once they are
 * released (ripc_buf_exposed).  The reply carries the request's seq and
 * len bytes of ft_fill(seed ^ REPLY_SALT), so the client can check that
 * this reply is the answer to that request, byte for byte.
 *
 * Soak client: -I requests (it stops at the first failure), each a coin
 * toss short/long (one in four long), a random think time of 0..-x ms
 * (default 20) after each reply, a reply timeout of 15 s, and alarm(120).
 * Prints one line and exits 0 only if every request got its correct reply:
 *     soak-client pid 1234 prov shm sent 17 answered 17 bad 0
 *
 * Churn drivers: the driver initialises the library once and finalises it
 * again before its first child; its children are fork()ed without exec.
 * So each child is a distinct process that initialises the library from
 * nothing (endpoints, registry record, service, peers), while the ~0.4 s
 * that libfabric itself spends once per process (the loader running
 * libinfinipath's constructors, the first fi_getinfo loading providers
 * and reading /proc/kallsyms) is paid once, not per client: it is the
 * client's start-up, not the service's work.  Each child initialises the
 * library, registers a random service ID, sends one short request, checks
 * the reply (5 s at most) and exits.  seq: one child at a time; after
 * every 100 the driver prints "churn-seq done K ok A" (churn.sh samples
 * the server's RSS on these lines); after 10 failures in a row it gives up
 * (the rest would only add a timeout each) and says where the first
 * failure was.  conc: all children start; each, once it has its
 * reply, reports and then waits until the driver has heard from all (or
 * given up after 60 s + 0.5 s per child), so that all hold their
 * connection at the same time.  Both end with
 *     churn-seq n 2000 answered 2000 failed 0 time 123.4 s [attempted 2000]
 * and exit 0 only if all were answered.  Children are ended by pid if
 * they outstay their limit; /dev/shm files they leave are removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define REQ_MAGIC 0x534f414b52455155ull /* "SOAKREQU" */
#define REP_MAGIC 0x534f414b5245504cull /* "SOAKREPL" */
#define REPLY_SALT 0x5a5a5a5a12345678ull
#define SHORT_MAX_DATA (48 * 1024)
#define LONG_MIN_DATA (64 * 1024)
#define REPLY_MS 15000
#define MAX_PENDING 1024
#define CHURN_REPLY_MS 5000 /* churn clients: one small request each */
/* Concurrent churn clients all start at once: hundreds of processes that
 * each spend ~0.2 s of CPU starting (libfabric) on a machine with a few
 * cores.  They wait this long for their turn (send and reply). */
#define CHURN_CONC_MS 60000
#define CHURN_GIVE_UP 10    /* seq: stop after this many failures in a row */

struct hdr {
	uint64_t magic, seq, seed;
	uint32_t len, kind;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* ---- server ------------------------------------------------------------ */

/* Long replies not yet released by their client: freed when they are. */
static void *pending[MAX_PENDING][2];
static int npending;

static void reap_pending(bool wait_oldest)
{
	int k = 0;

	if (wait_oldest && npending)
		ripc_wait_released(pending[0][1], -1); /* bounded by the lib */
	for (int i = 0; i < npending; i++) {
		if (ripc_buf_exposed(pending[i][0]) ||
		    ripc_buf_exposed(pending[i][1])) {
			pending[k][0] = pending[i][0];
			pending[k][1] = pending[i][1];
			k++;
			continue;
		}
		ripc_buf_free(pending[i][0]);
		ripc_buf_free(pending[i][1]);
	}
	npending = k;
}

/* Check a request; on success fill *h with its header. */
static bool check_request(const struct ft_msg *m, struct hdr *h)
{
	void **it = m->ns ? m->si : m->li;
	uint32_t *sz = m->ns ? m->ss : m->ls;
	unsigned n = m->ns ? m->ns : m->nl;

	if (n != 2 || (m->ns && m->nl) || sz[0] != sizeof(*h) || !it[0] ||
	    !it[1])
		return false;
	memcpy(h, it[0], sizeof(*h));
	if (h->magic != REQ_MAGIC || h->len != sz[1] ||
	    h->kind != (m->nl ? 1u : 0u))
		return false;
	return ft_verify(it[1], h->len, h->seed) == (size_t)-1;
}

static int reply(uint16_t me, uint16_t to, const struct hdr *req)
{
	struct hdr h = { REP_MAGIC, req->seq, req->seed ^ REPLY_SALT, req->len,
			 req->kind };
	uint32_t l[2] = { sizeof(h), req->len };
	void *b[2];
	int r;

	if (!req->kind) {
		void *data = malloc(req->len);

		if (!data)
			return RIPC_ENOMEM;
		ft_fill(data, req->len, h.seed);
		b[0] = &h;
		b[1] = data;
		r = ripc_send_short(me, to, b, l, 2, NULL, NULL, 0);
		free(data);
		return r;
	}
	if (npending == MAX_PENDING)
		reap_pending(true);
	b[0] = ripc_buf_alloc(sizeof(h));
	b[1] = ripc_buf_alloc(req->len);
	if (!b[0] || !b[1]) {
		ripc_buf_free(b[0]);
		ripc_buf_free(b[1]);
		return RIPC_ENOMEM;
	}
	memcpy(b[0], &h, sizeof(h));
	ft_fill(b[1], req->len, h.seed);
	r = ripc_send_long(me, to, b, l, 2, NULL, NULL, 0);
	/* Even a failed long send may leave the buffers exposed for a
	 * while: let reap_pending free them when they are not. */
	pending[npending][0] = b[0];
	pending[npending][1] = b[1];
	npending++;
	return r;
}

/* The soak script's heap check: the bytes malloc has handed out and not
 * had back (every arena, and the chunks it mmapped), written about once a
 * second to $SOAK_HEAP_FILE (replaced whole, so a reader never sees half
 * a line).  Apart from the RSS, which the library's cache of freed long
 * buffers and libfabric's pools move by megabytes (soak.sh). */
static void heap_note(const char *path)
{
	struct mallinfo2 mi = mallinfo2();
	char tmp[4096];
	FILE *f;

	if (!path || snprintf(tmp, sizeof(tmp), "%s.tmp", path) >=
			     (int)sizeof(tmp))
		return;
	if (!(f = fopen(tmp, "w")))
		return;
	fprintf(f, "%zu\n", mi.uordblks + mi.hblkhd);
	if (fclose(f) == 0)
		rename(tmp, path);
}

static int server(void)
{
	uint64_t served = 0, bad = 0, failed = 0;
	uint16_t me;
	struct sigaction sa = { .sa_handler = on_signal };
	const char *heap_file = getenv("SOAK_HEAP_FILE");
	double heap_next = 0;

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	ft_lib_init();
	me = ripc_register_random_service_id();
	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_ready(me);
	printf("soak-server pid %d service %u\n", (int)getpid(), me);
	while (!stop) {
		struct ft_msg m;
		struct hdr h;
		uint16_t from;
		int r = ft_recv(me, &m, 200);

		reap_pending(false);
		if (heap_file && ft_now() >= heap_next) {
			heap_note(heap_file);
			heap_next = ft_now() + 1.0;
		}
		if (r == RIPC_ETIMEDOUT || r == RIPC_EINTR)
			continue;
		if (r) {
			/* A client that died mid-pull, a truncated message:
			 * count it and serve on, as a real server would. */
			failed++;
			if (failed < 20 || failed % 1000 == 0)
				fprintf(stderr, "soak-server: receive: %s\n",
					ripc_strerror(r));
			continue;
		}
		if (ft_is_word(&m, "quit")) {
			ft_msg_free(&m, true);
			break;
		}
		if (!check_request(&m, &h)) {
			bad++;
			fprintf(stderr, "soak-server: bad request from %u\n",
				m.from);
			ft_msg_free(&m, true);
			continue;
		}
		from = m.from;
		r = reply(me, from, &h);
		ft_msg_free(&m, true);
		if (r) {
			failed++;
			if (failed < 20 || failed % 1000 == 0)
				fprintf(stderr,
					"soak-server: reply to %u: %s\n",
					from, ripc_strerror(r));
			continue;
		}
		served++;
	}
	for (int i = 0; i < 50 && npending; i++) {
		reap_pending(false);
		usleep(100000);
	}
	printf("soak-server served %llu bad %llu errors %llu unreleased %d\n",
	       (unsigned long long)served, (unsigned long long)bad,
	       (unsigned long long)failed, npending);
	ripc_finalize();
	return 0;
}

/* ---- clients ----------------------------------------------------------- */

static uint64_t rng;

/* One request of the given kind; true if its correct reply came. */
static int reply_ms = REPLY_MS;

static bool request(uint16_t me, uint16_t srv, uint64_t seq, bool is_long,
		    size_t max_long)
{
	struct hdr h = { REQ_MAGIC, seq, ft_rand(&rng), 0, is_long };
	struct ft_msg m;
	void *b[2];
	uint32_t l[2];
	void *data;
	bool ok = false;
	int r;

	if (is_long)
		h.len = (uint32_t)(LONG_MIN_DATA +
				   ft_rand(&rng) % (max_long - LONG_MIN_DATA + 1));
	else
		h.len = (uint32_t)(1 + ft_rand(&rng) % SHORT_MAX_DATA);
	data = malloc(h.len);
	if (!data)
		return false;
	ft_fill(data, h.len, h.seed);
	b[0] = &h;
	b[1] = data;
	l[0] = sizeof(h);
	l[1] = h.len;
	r = is_long ? ripc_send_long(me, srv, b, l, 2, NULL, NULL, 0)
		    : ripc_send_short(me, srv, b, l, 2, NULL, NULL, 0);
	if (r) {
		fprintf(stderr, "soak-client %d: send %s: %s\n", (int)getpid(),
			is_long ? "long" : "short", ripc_strerror(r));
		goto out;
	}
	r = ft_recv(me, &m, reply_ms);
	if (r) {
		fprintf(stderr, "soak-client %d: no reply to %llu: %s\n",
			(int)getpid(), (unsigned long long)seq,
			ripc_strerror(r));
		goto out;
	}
	{
		void **it = m.ns ? m.si : m.li;
		uint32_t *sz = m.ns ? m.ss : m.ls;
		unsigned n = m.ns ? m.ns : m.nl;
		struct hdr rh = { 0 };

		if (m.from == srv && n == 2 && sz[0] == sizeof(rh) && it[0] &&
		    it[1]) {
			memcpy(&rh, it[0], sizeof(rh));
			ok = rh.magic == REP_MAGIC && rh.seq == seq &&
			     rh.len == h.len && sz[1] == h.len &&
			     rh.seed == (h.seed ^ REPLY_SALT) &&
			     ft_verify(it[1], rh.len, rh.seed) == (size_t)-1;
		}
		if (!ok)
			fprintf(stderr, "soak-client %d: bad reply to %llu\n",
				(int)getpid(), (unsigned long long)seq);
	}
	/* The long sender's buffers were released when our pull ended; a
	 * reply we drop here is freed all the same. */
	ft_msg_free(&m, true);
out:
	/* Our own long-send items (the header lives on this stack) must
	 * outlive their exposure. */
	if (is_long && (ripc_buf_exposed(data) || ripc_buf_exposed(&h))) {
		ripc_wait_released(data, REPLY_MS);
		ripc_wait_released(&h, REPLY_MS);
	}
	free(data);
	return ok;
}

static void think(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int soak_client(long max_think, size_t max_long)
{
	uint16_t me;
	long sent = 0, answered = 0, bad = 0;

	alarm(120); /* a wedged library must not keep us alive */
	ft_lib_init();
	me = ripc_register_random_service_id();
	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	for (long i = 0; i < ft.iterations && !stop; i++) {
		bool is_long = ft_rand(&rng) % 4 == 0;

		sent++;
		if (request(me, (uint16_t)ft.server_id, (uint64_t)i, is_long,
			    max_long)) {
			answered++;
		} else {
			/* One failure fails the client: stop here, so that a
			 * dead server costs one reply timeout, not n. */
			bad++;
			break;
		}
		if (max_think > 0)
			think((long)(ft_rand(&rng) % (uint64_t)(max_think + 1)));
	}
	printf("soak-client pid %d prov %s sent %ld answered %ld bad %ld\n",
	       (int)getpid(), ft.prov ? ft.prov : "auto", sent, answered, bad);
	ripc_finalize();
	return answered == sent ? 0 : 1;
}

/* A churn child: one request/reply from a fresh library.  fd: where to
 * report (1 byte: 1 = answered); hold: then wait until fd_hold closes. */
static int churn_child(int fd, int fd_hold)
{
	char ok = 0, c;
	uint16_t me;
	uint8_t err;

	int oom = open("/proc/self/oom_score_adj", O_WRONLY);

	/* A driver that is killed takes its children along. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(1);
	/* Hundreds of us on a shared machine: if memory runs out, the OOM
	 * killer should pick a churn client, not the server or a stranger. */
	if (oom >= 0) {
		if (write(oom, "1000", 4) != 4)
			(void)0;
		close(oom);
	}
	alarm(fd_hold >= 0 ? 300 : 120);
	reply_ms = CHURN_REPLY_MS;
	if (fd_hold >= 0) {
		char v[16];

		reply_ms = CHURN_CONC_MS;
		snprintf(v, sizeof(v), "%d", CHURN_CONC_MS);
		setenv("RIPC_SEND_TIMEOUT_MS", v, 0);
	}
	if ((err = ripc_init()) == RIPC_OK) {
		me = ripc_register_random_service_id();
		if (me != RIPC_INVALID_SERVICE_ID)
			ok = request(me, (uint16_t)ft.server_id, 1, false, 0);
		else
			fprintf(stderr, "churn-client %d: register: %s\n",
				(int)getpid(), ripc_strerror(ripc_last_error()));
	} else {
		/* The code says which step failed; the library's own log
		 * line (above it) says why. */
		fprintf(stderr, "churn-client %d: ripc_init failed: %s\n",
			(int)getpid(), ripc_strerror(err));
	}
	if (write(fd, &ok, 1) != 1)
		(void)0;
	close(fd);
	if (fd_hold >= 0) {
		while (read(fd_hold, &c, 1) < 0 && errno == EINTR)
			;
	}
	ripc_finalize();
	_exit(ok ? 0 : 1);
}

static void reap(pid_t pid, int ms)
{
	for (int i = 0; i < ms / 10; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			goto done;
		usleep(10000);
	}
	fprintf(stderr, "churn: child %d outstayed its limit: killed\n",
		(int)pid);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
done:
	ft_shm_cleanup(pid);
}

/* libfabric's once-per-process start-up, in the driver (see above). */
static void churn_warm_up(void)
{
	if (ripc_init() == 0)
		ripc_finalize();
}

static int churn_seq(void)
{
	long answered = 0, failed = 0, first_fail = 0, consec = 0, i;
	double t0;

	churn_warm_up();
	t0 = ft_now();
	for (i = 0; i < ft.iterations && !stop; i++) {
		struct pollfd pfd;
		char ok = 0;
		int p[2];
		pid_t pid;

		if (pipe(p))
			ft_fail("pipe: %s", strerror(errno));
		pid = fork();
		if (pid < 0)
			ft_fail("fork: %s", strerror(errno));
		if (pid == 0) {
			close(p[0]);
			rng ^= (uint64_t)getpid() << 20;
			churn_child(p[1], -1);
		}
		close(p[1]);
		pfd = (struct pollfd){ .fd = p[0], .events = POLLIN };
		if (poll(&pfd, 1, CHURN_REPLY_MS + 20000) == 1 &&
		    read(p[0], &ok, 1) == 1 && ok) {
			answered++;
			consec = 0;
		} else {
			failed++;
			consec++;
			if (!first_fail)
				first_fail = i + 1;
		}
		close(p[0]);
		if (stop)
			kill(pid, SIGTERM);
		reap(pid, 10000);
		if ((i + 1) % 100 == 0)
			printf("churn-seq done %ld ok %ld\n", i + 1, answered);
		if (consec == CHURN_GIVE_UP) {
			/* The server stopped answering: the rest would only
			 * add a reply timeout each. */
			printf("churn-seq gave up after %d failures in a row\n",
			       CHURN_GIVE_UP);
			i++;
			break;
		}
	}
	if (first_fail)
		printf("churn-seq first failure at client %ld\n", first_fail);
	printf("churn-seq n %ld answered %ld failed %ld time %.1f s "
	       "attempted %ld\n",
	       ft.iterations, answered, ft.iterations - answered,
	       ft_now() - t0, i);
	return answered == ft.iterations ? 0 : 1;
}

static int churn_conc(void)
{
	long n = ft.iterations, answered = 0, heard = 0;
	pid_t *pids = calloc((size_t)n, sizeof(*pids));
	double t0, deadline;
	int rep[2], hold[2];

	churn_warm_up();
	t0 = ft_now();
	if (!pids || pipe(rep) || pipe(hold))
		ft_fail("setup: %s", strerror(errno));
	for (long i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			fprintf(stderr, "churn-conc: fork %ld: %s\n", i,
				strerror(errno));
			n = i;
			break;
		}
		if (pids[i] == 0) {
			close(rep[0]);
			close(hold[1]);
			rng ^= (uint64_t)getpid() << 20;
			churn_child(rep[1], hold[0]);
		}
	}
	close(rep[1]);
	close(hold[0]);
	deadline = t0 + 60 + 0.5 * (double)n;
	while (heard < n && !stop && ft_now() < deadline) {
		struct pollfd pfd = { .fd = rep[0], .events = POLLIN };
		char ok;

		if (poll(&pfd, 1, 1000) != 1)
			continue;
		if (read(rep[0], &ok, 1) != 1)
			break; /* every child closed its end */
		heard++;
		answered += ok;
	}
	printf("churn-conc all %ld alive with their reply after %.1f s\n",
	       answered, ft_now() - t0);
	/* Release them all at once, then reap: 30 s for all together, then
	 * whoever is left is killed. */
	close(hold[1]);
	deadline = ft_now() + 30;
	for (long left = n; left > 0 && ft_now() < deadline;) {
		pid_t p = waitpid(-1, NULL, WNOHANG);

		if (p > 0) {
			ft_shm_cleanup(p);
			for (long i = 0; i < n; i++)
				if (pids[i] == p)
					pids[i] = 0;
			left--;
		} else if (p < 0) {
			break;
		} else {
			usleep(10000);
		}
	}
	for (long i = 0; i < n; i++)
		if (pids[i])
			reap(pids[i], 10);
	close(rep[0]);
	printf("churn-conc n %ld answered %ld failed %ld time %.1f s\n",
	       ft.iterations, answered, ft.iterations - answered,
	       ft_now() - t0);
	free(pids);
	return answered == ft.iterations ? 0 : 1;
}

static int idle(void)
{
	uint16_t me;

	ft_lib_init();
	me = ripc_register_random_service_id();
	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	printf("soak-idle pid %d service %u\n", (int)getpid(), me);
	while (!stop)
		sleep(1);
	ripc_finalize();
	return 0;
}

int main(int argc, char **argv)
{
	const char *x;
	struct sigaction sa = { .sa_handler = on_signal };

	ft_init(argc, argv, "ripc_soak", 10, 1 << 20);
	x = ft.extra ? ft.extra : "";
	rng = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
	if (!strcmp(x, "idle")) {
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
		return idle();
	}
	if (ft.server)
		return server();
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(x, "seq"))
		return churn_seq();
	if (!strcmp(x, "conc"))
		return churn_conc();
	if (ft.size < LONG_MIN_DATA)
		ft_fail("-S must be at least %d", LONG_MIN_DATA);
	return soak_client(*x ? atol(x) : 20, (size_t)ft.size);
}
