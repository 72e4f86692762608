/*
 * Wake-ups after idle periods (issue 12): both sides think between
 * messages long enough for their progress threads to fall asleep, and
 * every message must still arrive.
 *
 * libfabric 1.17's shm has no wait object: an idle progress thread sleeps
 * on its doorbell and relies on the sender to ring it (ripc(7), NOTES).
 * It has no periodic poll to fall back on, so a ring that is missing
 * anywhere (a short message, the first message to a new peer, whose
 * connection request the sleeper must take before the send can go, an
 * RDMA read of a sleeping owner's long items with RIPC_SHM_CHECKED=1, a
 * reply written into a sleeping client's return buffer) leaves the
 * message undelivered and this test fails on a receive timeout.  The
 * timeouts are only bounds on a hang: nothing here measures time.
 *
 * Each round the client sleeps 20-250 ms, then sends (round-robin) a short
 * request, a long one (the server pulls it from the sleeping client), or
 * a short one with a return buffer (the server writes its reply into it);
 * the server, asleep in ripc_receive, answers (over shm a short one only
 * after 5 ms, when the client's progress thread sleeps armed, so that the
 * answer must ring it).  At the end the server
 * reports its doorbell counters; over shm both sides must have used the
 * doorbell, over tcp neither (tcp's sockets wake the thread themselves).
 *
 * A receive that sleeps watches the transports itself (direct wake):
 * the server must report such wake-ups, and none with -x nodirect, which
 * leaves every wake-up to the progress thread.
 *
 *   -x checked   RIPC_SHM_CHECKED=1 on both sides (shm's RMA then needs
 *                the owner's progress)
 *   -x nodirect  RIPC_DIRECT_WAKE=0 on both sides
 *   -x evloop    the server, quiet for a few milliseconds before each
 *                request (its progress thread asleep, armed on the
 *                doorbell), takes one request in a receive that
 *                busy-polls through the client's think time
 *                (RIPC_SPIN_US=400000: the doorbell is hushed meanwhile,
 *                bell.c) and the next by waiting on ripc_get_fd(3) with
 *                poll(), as an event loop does, which only the progress
 *                thread can make readable.  Over shm every request taken
 *                so must have been rung for (counted: ripc_stats'
 *                bell_wakeups); a doorbell left hushed after the spin
 *                leaves the thread asleep until its next deadline
 *   -x spinedge  the server, quiet 5 ms before each receive (its progress
 *                thread asleep, armed), spins 1 ms and then, hushed,
 *                pauses 30 ms (RIPC_TEST_SPIN_END_US) between the spin's
 *                last pass and its end; the client thinks 10-30 ms, so
 *                that over shm its request comes in that window, unrung.
 *                The receive must still return it: a pass made at the
 *                spin's end that queued the request and then let the
 *                receive sleep on the transports lost it until the
 *                receive's timeout (valgrind and TSan CI, 7e79221).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

#define LONG_LEN 300000
#define RET_LEN 4096

static bool spinedge(void)
{
	return ft.extra && !strcmp(ft.extra, "spinedge");
}

static void think(uint64_t *rng)
{
	long ms = spinedge() ? 10 + (long)(ft_rand(rng) % 21)
			     : 20 + (long)(ft_rand(rng) % 231);

	nanosleep(&(struct timespec){ ms / 1000, (ms % 1000) * 1000000 },
		  NULL);
}

static bool want_bells(void)
{
	const char *d = getenv("RIPC_DOORBELL");

	return ft.prov && !strcmp(ft.prov, "shm") && !(d && !strcmp(d, "0"));
}

static bool direct_off(void)
{
	const char *d = getenv("RIPC_DIRECT_WAKE");

	return d && !strcmp(d, "0");
}

/* Quiet long enough (5 ms) for the progress thread to arm the doorbell,
 * which it does once 2 ms have passed without traffic. */
static void quiet_spell(void)
{
	nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
}

static bool evloop(void)
{
	return ft.extra && !strcmp(ft.extra, "evloop");
}

/* -x evloop: the next request, taken as an event loop takes it (the
 * receive that follows finds it queued).  Odd rounds busy-poll in the
 * receive instead, which the long RIPC_SPIN_US keeps spinning until the
 * request comes.  Both after a quiet spell: the progress thread arms
 * the doorbell once 2 ms have passed without traffic. */
static long evloop_polled, evloop_rung; /* poll rounds after a spin */

static void evloop_recv(uint16_t me, struct ft_msg *m, long round)
{
	struct pollfd pfd = { .fd = ripc_get_fd(), .events = POLLIN };
	struct ripc_stats a, b;
	int r;

	quiet_spell();
	if (round % 2) {
		ft_recv_ok(me, m, 60000);
		return;
	}
	FT_CHECK(pfd.fd >= 0, "ripc_get_fd");
	FT_EXPECT(ripc_stats(&a, sizeof(a)), RIPC_OK);
	do
		r = poll(&pfd, 1, 20000);
	while (r < 0 && errno == EINTR);
	FT_CHECK(r == 1, "round %ld: ripc_get_fd readable for a request "
		 "(poll: %d): the progress thread was not woken", round, r);
	ft_recv_ok(me, m, 0);
	FT_EXPECT(ripc_stats(&b, sizeof(b)), RIPC_OK);
	/* Over shm a ring woke the thread; without one it finds the
	 * request only at its next deadline, which the poll above may
	 * well outlast unnoticed: counted, not timed. */
	if (round > 0) {
		evloop_polled++;
		evloop_rung += b.bell_wakeups > a.bell_wakeups;
	}
}

/* -x spinedge: after a quiet spell (the progress thread arms), a receive
 * whose spin ends hushed, paused, while the request comes.  Counted (not
 * asserted: the timing is the machine's) are requests neither rung for
 * nor seen by a direct wake: those the window was about. */
static long edge_unrung;

static void spinedge_recv(uint16_t me, struct ft_msg *m)
{
	struct ripc_stats a, b;

	quiet_spell();
	FT_EXPECT(ripc_stats(&a, sizeof(a)), RIPC_OK);
	ft_recv_ok(me, m, 60000);
	FT_EXPECT(ripc_stats(&b, sizeof(b)), RIPC_OK);
	edge_unrung += b.bell_wakeups == a.bell_wakeups &&
		       b.direct_wakeups == a.direct_wakeups;
}

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	static uint8_t reply[RET_LEN];
	struct ripc_stats st;
	struct ft_msg m;
	uint16_t from;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_fill(reply, sizeof(reply), 7);
	ft_ready(me);
	for (long round = 0;; round++) {
		if (evloop()) {
			evloop_recv(me, &m, round);
		} else if (spinedge()) {
			spinedge_recv(me, &m);
		} else {
			ft_recv_ok(me, &m, 60000);
		}
		from = m.from;
		if (ft_is_word(&m, "quit")) {
			uint64_t v[3];
			void *b[1] = { v };
			uint32_t l[1] = { sizeof(v) };

			ft_msg_free(&m, false);
			FT_EXPECT(ripc_stats(&st, sizeof(st)), RIPC_OK);
			v[0] = st.bell_wakeups;
			v[1] = st.bell_rings;
			v[2] = st.direct_wakeups;
			FT_EXPECT(ripc_send_short(me, from, b, l, 1, NULL, NULL,
						  0),
				  RIPC_OK);
			if (evloop() && want_bells())
				FT_CHECK(evloop_polled > 0 &&
						 evloop_rung == evloop_polled,
					 "after a spin, the progress thread "
					 "was rung for every request (%ld of "
					 "%ld)",
					 evloop_rung, evloop_polled);
			if (spinedge())
				ft_log("requests found at a spin's end, "
				       "neither rung for nor direct: %ld",
				       edge_unrung);
			if (evloop())
				ft_log("requests taken by poll() after a "
				       "spin: %ld, rung for: %ld",
				       evloop_polled, evloop_rung);
			break;
		}
		if (m.nl == 1) {
			FT_CHECK(m.ls[0] == LONG_LEN &&
					 ft_verify(m.li[0], LONG_LEN, 3) ==
						 (size_t)-1,
				 "long request: %u bytes", m.ls[0]);
			ft_msg_free(&m, true);
			FT_EXPECT(ft_send_word(me, from, "long ok"), RIPC_OK);
		} else if (ft_is_word(&m, "ret")) {
			void *b[1] = { reply };
			uint32_t l[1] = { RET_LEN };

			ft_msg_free(&m, false);
			/* Into the client's return buffer (RDMA write). */
			FT_EXPECT(ripc_send_long(me, from, b, l, 1, NULL, NULL,
						 0),
				  RIPC_OK);
		} else {
			FT_CHECK(ft_is_word(&m, "ping"), "request");
			ft_msg_free(&m, false);
			/* Answered only once the client's progress thread
			 * (its receive asleep) has armed the doorbell: the
			 * pong must ring it.  Answered at once, every answer
			 * may come while the thread still polls after the
			 * request, and the client is rung in no round (seen
			 * under the load of CI: "the sleeping client was
			 * rung" failed 1-2 times in 25 runs). */
			if (want_bells())
				quiet_spell();
			FT_EXPECT(ft_send_word(me, from, "pong"), RIPC_OK);
		}
	}
	return 0;
}

static int client(void)
{
	uint16_t srv = (uint16_t)ft.server_id;
	uint16_t me = ripc_register_random_service_id();
	static uint8_t big[LONG_LEN], ret[RET_LEN];
	uint64_t rng = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull;
	struct ripc_stats st;
	struct ft_msg m;
	uint64_t v[3];

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_fill(big, sizeof(big), 3);
	for (long it = 0; it < ft.iterations; it++) {
		think(&rng);
		switch (it % 3) {
		case 0:
			FT_EXPECT(ft_send_word(me, srv, "ping"), RIPC_OK);
			ft_recv_ok(me, &m, 20000);
			FT_CHECK(ft_is_word(&m, "pong"), "round %ld: pong", it);
			ft_msg_free(&m, false);
			break;
		case 1: {
			void *b[1] = { big };
			uint32_t l[1] = { LONG_LEN };

			FT_EXPECT(ripc_send_long(me, srv, b, l, 1, NULL, NULL,
						 0),
				  RIPC_OK);
			ft_recv_ok(me, &m, 20000);
			FT_CHECK(ft_is_word(&m, "long ok"), "round %ld: long",
				 it);
			ft_msg_free(&m, false);
			FT_EXPECT(ripc_wait_released(big, 20000), RIPC_OK);
			break;
		}
		default: {
			void *w[1] = { (void *)"ret" };
			uint32_t wl[1] = { 4 };
			void *rb[1] = { ret };
			uint32_t rl[1] = { RET_LEN };

			memset(ret, 0, sizeof(ret));
			FT_EXPECT(ripc_send_short(me, srv, w, wl, 1, rb, rl, 1),
				  RIPC_OK);
			ft_recv_ok(me, &m, 20000);
			FT_CHECK(m.nl == 1 && m.ls[0] == RET_LEN &&
					 m.li[0] == (void *)ret,
				 "round %ld: reply in the return buffer", it);
			FT_CHECK(ft_verify(ret, RET_LEN, 7) == (size_t)-1,
				 "round %ld: reply bytes", it);
			ft_msg_free(&m, false);
			break;
		}
		}
	}
	think(&rng);
	FT_EXPECT(ft_send_word(me, srv, "quit"), RIPC_OK);
	ft_recv_ok(me, &m, 20000);
	FT_CHECK(m.ns == 1 && m.ss[0] == sizeof(v), "server's counters");
	memcpy(v, m.si[0], sizeof(v));
	ft_msg_free(&m, false);
	FT_EXPECT(ripc_stats(&st, sizeof(st)), RIPC_OK);
	ft_log("client rang %llu, woke %llu; server woke %llu, rang %llu; "
	       "direct wake-ups: server %llu, client %llu",
	       (unsigned long long)st.bell_rings,
	       (unsigned long long)st.bell_wakeups,
	       (unsigned long long)v[0], (unsigned long long)v[1],
	       (unsigned long long)v[2],
	       (unsigned long long)st.direct_wakeups);
	/* The server sleeps in ripc_receive through every think time: with
	 * direct wake on, each request wakes it from the transports. */
	if (direct_off())
		FT_CHECK(v[2] == 0 && st.direct_wakeups == 0,
			 "RIPC_DIRECT_WAKE=0: no direct wake-ups");
	else if (!evloop()) /* its server never sleeps in a receive */
		FT_CHECK(v[2] > 0, "the sleeping server was woken directly");
	if (want_bells() && !spinedge()) { /* its requests come unrung */
		FT_CHECK(st.bell_rings > 0 && v[0] > 0,
			 "over shm the sleeping server was rung");
		FT_CHECK(v[1] > 0 && st.bell_wakeups > 0,
			 "over shm the sleeping client was rung");
	} else if (ft.prov && !strcmp(ft.prov, "tcp")) {
		FT_CHECK(st.bell_rings == 0 && v[1] == 0,
			 "nobody rings a tcp peer");
	}
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_wake", 12, 0);
	if (ft.extra && !strcmp(ft.extra, "checked"))
		setenv("RIPC_SHM_CHECKED", "1", 1);
	if (ft.extra && !strcmp(ft.extra, "nodirect"))
		setenv("RIPC_DIRECT_WAKE", "0", 1);
	if (evloop() && ft.server)
		setenv("RIPC_SPIN_US", "400000", 1); /* > the longest think */
	if (spinedge() && ft.server) {
		setenv("RIPC_TEST_SPIN_END_US", "30000", 1);
		setenv("RIPC_SPIN_US", "1000", 1);
	}
	/* Nothing but the requests may wake the idle progress thread (a
	 * resolver datagram would, and it would then find a request by
	 * polling, unrung); both processes are on this host. */
	if (evloop() || spinedge())
		setenv("RIPC_RESOLVER", "0", 1);
	ft_lib_init();
	return ft.server ? server() : client();
}
