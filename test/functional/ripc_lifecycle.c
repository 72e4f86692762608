/*
 * Lifecycle tests: the library around finalize, signals, stopped peers,
 * short timeouts and fork, the way services live.  Driven by
 * test/scripts/lifecycle.sh, which starts one server per case, runs a
 * client mode many times, and stops, continues or signals either side at
 * random moments.
 *
 * Server (no service ID argument): serves until killed.
 *   short "ping"                  -> short "pong"
 *   long {hdr, data}              -> checks data against hdr's sum, short
 *                                    "ack" {seq}
 *   short "want" {seq, len} with one return buffer offered
 *                                 -> long send of len pattern bytes (lands
 *                                    in the return buffer)
 *   -x window: also keeps a receive window registered for long items.
 *
 * Client modes (-x, positional argument: the server's service ID):
 *   finalize  -I cycles: threads resolve an unknown ID, block in a
 *             receive, ping, long-send, wait for a release; the main
 *             thread finalizes at a random moment; every call must return
 *             a documented code, every thread must come back within 5 s;
 *             then the library is used again (init after finalize).
 *   traffic   ping, long and return-buffer requests for -S milliseconds
 *             (until SIGTERM/SIGINT if -S is 0).  With RIPC_TEST_LC_TOLERANT=1
 *             (the peer is stopped at times, timeouts shorter than the
 *             stall) calls may fail with documented codes, but the last
 *             requests must succeed again: traffic resumes.
 *   sendexit  long-sends into the server, which the driver has stopped,
 *             waits up to -S ms and exits without waiting for release.
 *   firstexit a new process's first message to the server, which the
 *             driver has stopped: the send gives up (RIPC_SEND_TIMEOUT_MS)
 *             or goes, and the process finalizes and exits normally,
 *             removing its shm region.  (libfabric 1.17's shm crashed a
 *             receiver that took such a sender's connection request
 *             after the sender had gone; issue 12.)
 *   fork      traffic in a thread while the main thread forks children
 *             that use the library themselves (register, ping, long send)
 *             and exit; -I children.
 * Exit status 0 pass, 77 transport absent, else fail.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define HDR_WORDS 4 /* seq, len, sum, pad */

static uint32_t sum32(const uint8_t *p, size_t n)
{
	uint32_t s = 2166136261u;

	for (size_t i = 0; i < n; i++)
		s = (s ^ p[i]) * 16777619u;
	return s;
}

static bool tolerant;

/* Documented codes a call may return while its peer is stopped, slow or
 * gone, or the library is being finalized. */
static bool documented(int err)
{
	switch (err) {
	case RIPC_OK:
	case RIPC_ETIMEDOUT:
	case RIPC_EPEER:
	case RIPC_ENOSERVICE:
	case RIPC_ESHUTDOWN:
	case RIPC_ENOTOWNER:
	case RIPC_EPULL:
	case RIPC_EEXPIRED:
	case RIPC_ECANCELED:
	case RIPC_EAGAIN:
		return true;
	}
	return false;
}

/* ---- server ---------------------------------------------------------- */

static int server(void)
{
	long damaged = 0;
	uint16_t me = ripc_register_random_service_id();
	static uint8_t window[1 << 20];
	uint8_t *reply = malloc(1 << 20);

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID && reply, "register");
	ft_fill(reply, 1 << 20, 99);
	if (ft.extra && !strcmp(ft.extra, "window"))
		FT_EXPECT(ripc_reg_recv_window_for_service(window,
							   sizeof(window), me),
			  RIPC_OK);
	ft_ready(me);
	for (;;) {
		struct ft_msg m;
		int err = ft_recv(me, &m, -1);

		if (err == RIPC_EINTR)
			continue;
		FT_CHECK(err == RIPC_OK || err == RIPC_EPULL ||
				 err == RIPC_ETRUNC,
			 "server receive: %s", ripc_strerror(err));
		if (err != RIPC_OK) {
			ft_msg_free(&m, true);
			continue;
		}
		if (m.nl == 2 && m.ls[0] == HDR_WORDS * 4) {
			uint32_t hdr[HDR_WORDS], ack[2];
			void *b[1] = { ack };
			uint32_t l[1] = { sizeof(ack) };

			memcpy(hdr, m.li[0], sizeof(hdr));
			if (hdr[1] != m.ls[1] ||
			    sum32(m.li[1], m.ls[1]) != hdr[2]) {
				/* Tolerated only where the sender's exposure
				 * may end under the pull (it timed out or
				 * finalized): shm's fast path then reads the
				 * sender's memory as it is now (ripc(7)
				 * SECURITY).  Never acknowledged. */
				FT_CHECK(tolerant, "long item damaged");
				damaged++;
				ft_log("damaged long items so far: %ld",
				       damaged);
				ft_msg_free(&m, true);
				continue;
			}
			ack[0] = 0x61636b21; /* "ack!" */
			ack[1] = hdr[0];
			if (m.li[1] >= (void *)window &&
			    m.li[1] < (void *)(window + sizeof(window)))
				ripc_reg_recv_window_for_service(
					window, sizeof(window), me);
			ripc_send_short(me, m.from, b, l, 1, NULL, NULL, 0);
		} else if (ft_is_word(&m, "ping")) {
			ft_send_word(me, m.from, "pong");
		} else if (m.ns == 1 && m.ss[0] == 12 &&
			   !memcmp(m.si[0], "want", 4)) {
			uint32_t req[3];
			void *b[1] = { reply };
			uint32_t l[1];

			memcpy(req, m.si[0], sizeof(req));
			l[0] = req[2] < (1u << 20) ? req[2] : (1u << 20);
			/* Into the client's return buffer where it fits. */
			ripc_send_long(me, m.from, b, l, 1, NULL, NULL, 0);
		}
		ft_msg_free(&m, true);
	}
}

/* ---- client helpers ------------------------------------------------ */

static uint16_t srv;

/* One request/answer.  Returns a code; on RIPC_OK the answer was right. */
static int ping(uint16_t me, int timeout_ms)
{
	struct ft_msg m;
	int err = ft_send_word(me, srv, "ping");

	if (err)
		return err;
	for (;;) {
		err = ft_recv(me, &m, timeout_ms);
		if (err)
			return err;
		if (ft_is_word(&m, "pong")) {
			ft_msg_free(&m, true);
			return RIPC_OK;
		}
		/* A late answer to an earlier request: skip it. */
		ft_msg_free(&m, true);
	}
}

static int long_req(uint16_t me, uint8_t *data, uint32_t len, uint32_t seq,
		    int timeout_ms)
{
	uint32_t hdr[HDR_WORDS] = { seq, len, sum32(data, len), 0 };
	void *b[2] = { hdr, data };
	uint32_t l[2] = { sizeof(hdr), len };
	struct ft_msg m;
	int err = ripc_send_long(me, srv, b, l, 2, NULL, NULL, 0);
	double until = ft_now() + timeout_ms / 1000.0;

	if (err)
		return err;
	for (;;) {
		uint32_t ack[2];

		err = ft_recv(me, &m, timeout_ms);
		if (err)
			break;
		if (m.ns == 1 && m.ss[0] == sizeof(ack)) {
			memcpy(ack, m.si[0], sizeof(ack));
			if (ack[0] == 0x61636b21 && ack[1] == seq) {
				ft_msg_free(&m, true);
				break;
			}
		}
		ft_msg_free(&m, true);
		if (ft_now() > until) {
			err = RIPC_ETIMEDOUT;
			break;
		}
	}
	/* The buffers are ours again only once released. */
	{
		int rel = ripc_wait_released(hdr, tolerant ? -1 : 30000);

		FT_CHECK(documented(rel), "wait_released: %s",
			 ripc_strerror(rel));
		if (!err && rel != RIPC_OK)
			err = rel;
	}
	return err;
}

static int retbuf_req(uint16_t me, uint8_t *rbuf, uint32_t len, uint32_t seq,
		      int timeout_ms)
{
	uint32_t req[3] = { 0x746e6177 /* "want" */, seq, len };
	void *b[1] = { req }, *rb[1] = { rbuf };
	uint32_t l[1] = { sizeof(req) }, rl[1] = { 1 << 20 };
	struct ft_msg m;
	int err = ripc_send_short(me, srv, b, l, 1, rb, rl, 1);

	if (err)
		return err;
	for (;;) {
		err = ft_recv(me, &m, timeout_ms);
		if (err) {
			/* The offer must not stay exposed: cancel it. */
			ripc_return_bufs_cancel(srv);
			return err;
		}
		/* The answer has our length; anything else is a late answer
		 * to an earlier request. */
		if (m.nl == 1 && m.ls[0] == len)
			break;
		ft_msg_free(&m, m.nl == 1 && m.li[0] != rbuf);
	}
	FT_CHECK(ft_verify(m.li[0], len, 99) == (size_t)-1,
		 "reply contents");
	/* Written into our return buffer, or (a server may decline the
	 * offer, or it was withdrawn meanwhile) pulled the regular way. */
	ft_msg_free(&m, m.li[0] != rbuf);
	return err;
}

/* ---- mode traffic ---------------------------------------------------- */

static atomic_bool stop_flag;

static void on_stop_signal(int sig)
{
	(void)sig;
	atomic_store(&stop_flag, true);
}

/* Reachable from a global: a child forked while traffic() runs in another
 * thread must not see it as leaked (it never had that thread's stack). */
static uint8_t *traffic_rbuf;

static int traffic(uint16_t me, long ms, bool check_resume)
{
	uint8_t *data = ripc_buf_alloc(256 << 10);
	/* Zeroed: valgrind cannot see a peer's process_vm_writev into it. */
	uint8_t *rbuf = traffic_rbuf = calloc(1, 1 << 20);
	uint64_t rng = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull;
	double end = ms > 0 ? ft_now() + ms / 1000.0 : 1e300;
	int timeout = tolerant ? 500 : 10000;
	long ok = 0, failed = 0, streak = 0;

	FT_CHECK(data && rbuf, "alloc");
	for (uint32_t seq = 1; ft_now() < end && !atomic_load(&stop_flag);
	     seq++) {
		uint32_t len = 1 + (uint32_t)(ft_rand(&rng) % (256 << 10));
		int err;

		switch (seq % 3) {
		case 0:
			err = ping(me, timeout);
			break;
		case 1:
			ft_fill(data, len, seq);
			err = long_req(me, data, len, seq, timeout);
			break;
		default:
			err = retbuf_req(me, rbuf, len, seq, timeout);
			break;
		}
		if (err == RIPC_OK) {
			/* For lifecycle.sh: the process is past its start
			 * (see case_signal there). */
			if (ok++ == 0) {
				fprintf(stderr, "ripc_lifecycle[client] traffic: "
						"first request answered\n");
				fflush(stderr);
			}
			streak++;
			continue;
		}
		FT_CHECK(tolerant && documented(err), "request %u: %s", seq,
			 ripc_strerror(err));
		failed++;
		streak = 0;
	}
	if (check_resume)
		FT_CHECK(streak >= 3, "traffic did not resume: %ld ok, %ld "
				      "failed, last %ld ok",
			 ok, failed, streak);
	ft_log("traffic: %ld requests answered, %ld failed (tolerant %d)",
	       ok, failed, tolerant);
	ripc_buf_free(data);
	free(rbuf);
	return 0;
}

/* ---- mode finalize ----------------------------------------------------- */

struct worker {
	pthread_t th;
	int kind;
	uint16_t me;
	int codes[8];
	int ncodes;
	atomic_bool done;
};

static void note(struct worker *w, int err)
{
	FT_CHECK(documented(err), "thread kind %d: undocumented code %d (%s)",
		 w->kind, err, ripc_strerror(err));
	if (w->ncodes < 8)
		w->codes[w->ncodes++] = err;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint8_t *data = malloc(64 << 10);
	int err = RIPC_OK;

	ft_fill(data, 64 << 10, 5);
	/* Each loops until the library says it is shutting down (or the
	 * service is gone because it already shut down). */
	for (int i = 0; i < 1000; i++) {
		switch (w->kind) {
		case 0: { /* resolution of an ID nobody holds */
			char x[4] = "abc";
			void *b[1] = { x };
			uint32_t l[1] = { 4 };

			err = ripc_send_short(w->me, 64999, b, l, 1, NULL,
					      NULL, 0);
			break;
		}
		case 1: /* a receive nobody sends to */
			err = ripc_receive(w->me, NULL, NULL, NULL, NULL, NULL,
					   NULL, NULL);
			break;
		case 2:
			err = ping(w->me, 5000);
			break;
		case 3:
			err = long_req(w->me, data, 64 << 10, (uint32_t)i, 5000);
			break;
		case 4: { /* a long send, then wait for the release */
			void *b[1] = { data };
			uint32_t l[1] = { 64 << 10 };

			err = ripc_send_long(w->me, srv, b, l, 1, NULL, NULL,
					     0);
			if (!err)
				err = ripc_wait_released(data, -1);
			break;
		}
		}
		if (err != RIPC_OK) {
			note(w, err);
			if (err == RIPC_ESHUTDOWN || err == RIPC_ENOTOWNER)
				break;
		}
	}
	/* Memory the library may still expose is not freed before it is
	 * released: after finalize nothing is exposed any more. */
	while (ripc_buf_exposed(data))
		usleep(1000);
	free(data);
	atomic_store(&w->done, true);
	return NULL;
}

static int finalize_race(long cycles)
{
	uint64_t rng = (uint64_t)getpid() * 0x2545f4914f6cdd1dull;

	for (long c = 0; c < cycles; c++) {
		struct worker w[5];
		double t0;

		memset(w, 0, sizeof(w));
		for (int k = 0; k < 5; k++) {
			w[k].kind = k;
			w[k].me = ripc_register_random_service_id();
			FT_CHECK(w[k].me != RIPC_INVALID_SERVICE_ID,
				 "cycle %ld: register: %s", c,
				 ripc_strerror(ripc_last_error()));
			FT_CHECK(!pthread_create(&w[k].th, NULL, work, &w[k]),
				 "thread");
		}
		usleep((useconds_t)(ft_rand(&rng) % 100000));
		t0 = ft_now();
		ripc_finalize();
		FT_CHECK(ft_now() - t0 < 5, "finalize took %.2f s",
			 ft_now() - t0);
		for (int k = 0; k < 5; k++) {
			double until = ft_now() + 5;

			while (!atomic_load(&w[k].done) && ft_now() < until)
				usleep(1000);
			FT_CHECK(atomic_load(&w[k].done),
				 "cycle %ld: thread kind %d hangs",
				 c, k);
			pthread_join(w[k].th, NULL);
		}
		/* The library starts again on the next call. */
		uint16_t me = ripc_register_random_service_id();

		FT_CHECK(me != RIPC_INVALID_SERVICE_ID,
			 "register after finalize: %s",
			 ripc_strerror(ripc_last_error()));
		FT_EXPECT(ping(me, 10000), RIPC_OK);
		FT_EXPECT(ripc_unregister_service_id(me), RIPC_OK);
	}
	ft_log("%ld finalize cycles", cycles);
	return 0;
}

/* ---- mode sendexit ---------------------------------------------------- */

static int send_and_exit(uint16_t me, long wait_ms)
{
	uint8_t *data = malloc(512 << 10);
	void *b[2];
	uint32_t hdr[HDR_WORDS], l[2];
	int err;

	ft_fill(data, 512 << 10, 3);
	hdr[0] = 1;
	hdr[1] = 512 << 10;
	hdr[2] = sum32(data, 512 << 10);
	b[0] = hdr;
	b[1] = data;
	l[0] = sizeof(hdr);
	l[1] = 512 << 10;
	err = ripc_send_long(me, srv, b, l, 2, NULL, NULL, 0);
	FT_CHECK(documented(err), "send: %s", ripc_strerror(err));
	usleep((useconds_t)wait_ms * 1000);
	/* Exit with the items still exposed to the stopped receiver. */
	ft_log("exiting with the long send %s", ripc_strerror(err));
	_exit(0);
}

/* ---- mode firstexit ------------------------------------------------------ */

static int first_and_exit(uint16_t me)
{
	int err = ft_send_word(me, srv, "ping");

	FT_CHECK(err == RIPC_OK || err == RIPC_ETIMEDOUT,
		 "first send: %s", ripc_strerror(err));
	ft_log("first send: %s; finalizing", ripc_strerror(err));
	ripc_finalize();
	return 0;
}

/* ---- mode fork ----------------------------------------------------------- */

static void *traffic_thread(void *arg)
{
	traffic(*(uint16_t *)arg, 0, false);
	return NULL;
}

static int fork_during_traffic(uint16_t me, long children)
{
	pthread_t th;

	FT_CHECK(!pthread_create(&th, NULL, traffic_thread, &me), "thread");
	for (long i = 0; i < children; i++) {
		int status;
		pid_t pid;

		usleep(20000);
		pid = fork();
		if (pid == 0) {
			/* The child starts afresh: its own incarnation,
			 * services and endpoints. */
			uint16_t c = ripc_register_random_service_id();
			uint8_t *d = malloc(100000);

			if (c == RIPC_INVALID_SERVICE_ID || !d)
				_exit(3);
			ft_fill(d, 100000, 7);
			if (ping(c, 10000) != RIPC_OK)
				_exit(4);
			if (long_req(c, d, 100000, 1, 10000) != RIPC_OK)
				_exit(5);
			ripc_finalize();
			/* Not exit(): leak checkers would report what only the
			 * parent's other threads (absent here) referenced. */
			_exit(0);
		}
		FT_CHECK(pid > 0, "fork");
		FT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
		FT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			 "child %ld: status %#x", i, status);
		ft_shm_cleanup(pid);
	}
	atomic_store(&stop_flag, true);
	pthread_join(th, NULL);
	ft_log("%ld children used the library during traffic", children);
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	uint16_t me;

	ft_init(argc, argv, "ripc_lifecycle", 10, 2000);
	tolerant = getenv("RIPC_TEST_LC_TOLERANT") &&
		   !strcmp(getenv("RIPC_TEST_LC_TOLERANT"), "1");
	ft_lib_init();
	if (ft.server)
		return server();
	srv = (uint16_t)ft.server_id;
	if (ft.extra && !strcmp(ft.extra, "finalize"))
		return finalize_race(ft.iterations);
	me = ripc_register_random_service_id();
	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	if (ft.extra && !strcmp(ft.extra, "sendexit"))
		return send_and_exit(me, ft.size);
	if (ft.extra && !strcmp(ft.extra, "fork"))
		return fork_during_traffic(me, ft.iterations);
	if (ft.extra && !strcmp(ft.extra, "firstexit"))
		return first_and_exit(me);
	/* traffic; -S 0: until a signal, with the process's handlers left
	 * as they are (the test is about them) unless asked otherwise. */
	if (getenv("RIPC_TEST_LC_CATCH")) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_stop_signal;
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
	}
	return traffic(me, ft.size, tolerant);
}
