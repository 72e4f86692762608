/*
 * The progress thread takes over when the application stops calling into
 * the library, also right after a receive that busy-polled (ripc(7),
 * RIPC_POLL_INTERVAL_US): while a receive busy-polls, the progress thread
 * sleeps on no timer but the one the receive armed as its spin began; in
 * a spin longer than the interval that one fires meanwhile, and the
 * receive must arm it again as it stops.  Over tcp
 * a long send is pulled only while the sender's process makes progress
 * (libfabric's manual progress serves the receiver's reads), so a
 * progress thread left asleep shows as a pull that never ends.
 *
 * Each of -I rounds: the client sends "wait", and the server answers
 * wait_ns() later; the client's receive busy-polls all that time
 * (RIPC_SPIN_US is raised for it), long enough for its progress thread to
 * look, find it polling and go to sleep on that timer, and to find it
 * polling again when the timer fires.  Right after the
 * answer the client long-sends SIZE bytes and stays out of the library
 * (a busy loop) until the server has the message (a counter shared
 * through $RIPC_TEST_DIR), at most BUSY_S seconds; then it takes the
 * server's verdict and checks that its buffer was released.  shm pulls
 * without the sender's progress (CMA), so there the test only checks
 * that nothing else broke.
 */
#include <string.h>
#include <time.h>

#include "common.h"

#define SIZE (1u << 20)
/* Longer than the interval (1 ms) rounded up to the tick's grid
 * (ripc__leave_due: the period of the kernel's tick, 4 ms at HZ=250, 10 at
 * HZ=100), with a millisecond to spare: the timer armed as the spin began
 * fires during it.  The spin budget below covers the longest. */
static long wait_ns(void)
{
	struct timespec res;
	long tick = 0;

	if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && !res.tv_sec &&
	    res.tv_nsec <= 10000000L)
		tick = res.tv_nsec;
	return 1000000L + tick + 1000000L;
}
#define BUSY_S 5.0

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	volatile uint64_t *got = ft_shared_counter("takeover");
	struct ft_msg m;
	long rounds = 0;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	FT_CHECK(got, "RIPC_TEST_DIR is not set (run through runripctests.sh)");
	ft_ready(me);
	for (;;) {
		ft_recv_ok(me, &m, 30000);
		if (ft_is_word(&m, "quit")) {
			ft_msg_free(&m, false);
			break;
		}
		if (ft_is_word(&m, "wait")) {
			struct timespec ts = { 0, wait_ns() };
			uint16_t from = m.from;

			ft_msg_free(&m, false);
			nanosleep(&ts, NULL);
			FT_EXPECT(ft_send_word(me, from, "go"), RIPC_OK);
			continue;
		}
		FT_CHECK(m.ns == 0 && m.nl == 1 && m.ls[0] == SIZE,
			 "%u short, %u long items", m.ns, m.nl);
		/* The library pulled it before handing it over. */
		__atomic_add_fetch(got, 1, __ATOMIC_SEQ_CST);
		FT_EXPECT(ft_send_word(me, m.from,
				       ft_verify(m.li[0], SIZE, (uint64_t)rounds) ==
						       (size_t)-1
					       ? "ok"
					       : "bad"),
			  RIPC_OK);
		ft_msg_free(&m, true);
		rounds++;
	}
	ft_log("server: %ld long messages", rounds);
	return 0;
}

static int client(void)
{
	uint16_t me = ripc_register_random_service_id();
	uint16_t srv = (uint16_t)ft.server_id;
	volatile uint64_t *got = ft_shared_counter("takeover");
	void *buf = ripc_buf_alloc(SIZE);
	struct ft_msg m;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	FT_CHECK(got, "RIPC_TEST_DIR is not set (run through runripctests.sh)");
	FT_CHECK(buf, "ripc_buf_alloc");
	for (long r = 0; r < ft.iterations; r++) {
		void *b[1] = { buf };
		uint32_t l[1] = { SIZE };
		double t0, end;

		/* A receive that busy-polls for wait_ns(). */
		FT_EXPECT(ft_send_word(me, srv, "wait"), RIPC_OK);
		ft_recv_ok(me, &m, 10000);
		FT_CHECK(ft_is_word(&m, "go"), "expected go");
		ft_msg_free(&m, false);

		ft_fill(buf, SIZE, (uint64_t)r);
		FT_EXPECT(ripc_send_long(me, srv, b, l, 1, NULL, NULL, 0),
			  RIPC_OK);
		/* Busy elsewhere: no library call until the server has it. */
		t0 = ft_now();
		end = t0 + BUSY_S;
		while (__atomic_load_n(got, __ATOMIC_SEQ_CST) < (uint64_t)r + 1 &&
		       ft_now() < end)
			;
		FT_CHECK(__atomic_load_n(got, __ATOMIC_SEQ_CST) >= (uint64_t)r + 1,
			 "round %ld: not pulled in %.0f s while the sender "
			 "stayed out of the library after a busy-polling "
			 "receive",
			 r, BUSY_S);
		ft_recv_ok(me, &m, 10000);
		FT_CHECK(ft_is_word(&m, "ok"), "round %ld: the server says %s",
			 r, m.ns ? (char *)m.si[0] : "?");
		ft_msg_free(&m, false);
		/* The DONE came before (or with) the verdict. */
		FT_CHECK(!ripc_buf_exposed(buf), "round %ld: still exposed", r);
		if (r == 0)
			ft_log("round 0 pulled %.2f ms after the send",
			       (ft_now() - t0) * 1e3);
	}
	ripc_buf_free(buf);
	FT_EXPECT(ft_send_word(me, srv, "quit"), RIPC_OK);
	ft_log("client: %ld rounds", ft.iterations);
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_takeover", 20, 0);
	/* The receive for "go" must busy-poll longer than the progress
	 * thread's look (RIPC_POLL_INTERVAL_US): 20 ms of spin budget. */
	setenv("RIPC_SPIN_US", "20000", 1);
	ft_lib_init();
	return ft.server ? server() : client();
}
