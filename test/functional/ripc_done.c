/*
 * The done message of a long send rides in the receiver's answer
 * (RIPC_DONE_DELAY_US, ripc(7)): the receiver's library holds a finished
 * pull's DONE back for a moment, and the application's next short message
 * to the sender carries it.  Whatever the receiving application does, the
 * sender's items must be released, and said released only after the pull:
 *
 *   A  the server answers at once: the answer carries the DONE;
 *   R  the server does not answer and calls ripc_receive again: the DONE
 *      goes alone then (the client waits for the release before it sends
 *      the next message, so only that can release it);
 *   S  the server stays out of the library for 1.5 s, then answers: the
 *      DONE goes alone when the delay is over, before the answer;
 *   X  the server calls exit() right after the receive: its exit
 *      handler's finalize sends the DONE.
 *
 * The client sends -I rounds of A and R, then S, then X, and checks every
 * release (RIPC_OK, never a timeout or RIPC_EPEER) and its counters; the
 * server checks its own (dones_carried, dones_alone).  That answers did
 * carry DONEs is required with -x slow only: whether an answer comes
 * within 1 ms depends on the machine (under valgrind, often not).
 *
 *   -x now   RIPC_DONE_DELAY_US=0 on both sides: every DONE goes alone at
 *            once, as before the delay existed; no counter moves.
 *   -x slow  RIPC_DONE_DELAY_US=1000000: an R round's release must come
 *            within 500 ms, i.e. from the server's next receive, not from
 *            the delay running out (S is left out: it would take 2 s).
 */
#include <string.h>
#include <time.h>

#include "common.h"

#define SIZE 65536
#define S_SLEEP_MS 1500

enum mode { DELAY_DEFAULT, DELAY_NOW, DELAY_SLOW };

static enum mode mode(void)
{
	if (ft.extra && !strcmp(ft.extra, "now"))
		return DELAY_NOW;
	if (ft.extra && !strcmp(ft.extra, "slow"))
		return DELAY_SLOW;
	return DELAY_DEFAULT;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts))
		;
}

static struct ripc_stats stats(void)
{
	struct ripc_stats st;

	FT_EXPECT(ripc_stats(&st, sizeof(st)), RIPC_OK);
	return st;
}

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	unsigned long held = 0, alone_min = 0;
	struct ft_msg m;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_ready(me);
	for (;;) {
		uint16_t from;
		uint8_t kind;
		uint64_t seed;

		ft_recv_ok(me, &m, 30000);
		if (ft_is_word(&m, "next")) {
			ft_msg_free(&m, false);
			continue;
		}
		FT_CHECK(m.ns == 0 && m.nl == 1 && m.ls[0] == SIZE,
			 "%u short, %u long items", m.ns, m.nl);
		from = m.from;
		kind = ((uint8_t *)m.li[0])[0];
		memcpy(&seed, (uint8_t *)m.li[0] + 8, sizeof(seed));
		FT_CHECK(ft_verify((uint8_t *)m.li[0] + 16, SIZE - 16, seed) ==
				 (size_t)-1,
			 "round %llu: item bytes", (unsigned long long)seed);
		ft_msg_free(&m, true);
		if (kind == 'X')
			break;
		held++;
		switch (kind) {
		case 'A':
			FT_EXPECT(ft_send_word(me, from, "ok"), RIPC_OK);
			break;
		case 'R':
			alone_min++; /* its DONE goes at our next receive */
			break;
		case 'S':
			alone_min++;
			sleep_ms(S_SLEEP_MS);
			FT_EXPECT(ft_send_word(me, from, "late"), RIPC_OK);
			break;
		default:
			ft_fail("unknown round kind %u", kind);
		}
	}
	/* X: the DONE of this last message is held back, or went alone
	 * already if its pull ended before our receive began (that
	 * receive's start sends what is held back). */
	struct ripc_stats st = stats();

	ft_log("held back %lu: carried %llu, alone %llu", held,
	       (unsigned long long)st.dones_carried,
	       (unsigned long long)st.dones_alone);
	if (mode() == DELAY_NOW) {
		FT_CHECK(st.dones_carried == 0 && st.dones_alone == 0,
			 "RIPC_DONE_DELAY_US=0 held %llu + %llu back",
			 (unsigned long long)st.dones_carried,
			 (unsigned long long)st.dones_alone);
	} else {
		FT_CHECK(st.dones_carried + st.dones_alone == held ||
				 st.dones_carried + st.dones_alone == held + 1,
			 "%lu held back (+ X), %llu carried + %llu alone",
			 held,
			 (unsigned long long)st.dones_carried,
			 (unsigned long long)st.dones_alone);
		FT_CHECK(st.dones_alone >= alone_min,
			 "%llu sent alone, at least %lu must be",
			 (unsigned long long)st.dones_alone, alone_min);
		/* An answer carries its DONE if it comes within the delay:
		 * certain with 1 s, not with 1 ms under valgrind. */
		if (mode() == DELAY_SLOW)
			FT_CHECK(st.dones_carried >= 1,
				 "no answer carried its done");
	}
	/* Without ripc_finalize: the exit handler must send the DONE. */
	exit(0);
}

/* Long-send buf as a round of `kind`; seed makes its bytes its own. */
static void send_round(uint16_t me, uint16_t srv, uint8_t *buf, uint8_t kind,
		       uint64_t seed)
{
	void *item[1] = { buf };
	uint32_t len[1] = { SIZE };

	memset(buf, 0, 16);
	buf[0] = kind;
	memcpy(buf + 8, &seed, sizeof(seed));
	ft_fill(buf + 16, SIZE - 16, seed);
	FT_EXPECT(ripc_send_long(me, srv, item, len, 1, NULL, NULL, 0),
		  RIPC_OK);
}

static void expect_word(uint16_t me, const char *word)
{
	struct ft_msg m;

	ft_recv_ok(me, &m, 30000);
	FT_CHECK(ft_is_word(&m, word), "expected \"%s\"", word);
	ft_msg_free(&m, false);
}

static int client(void)
{
	uint16_t srv = (uint16_t)ft.server_id;
	uint16_t me = ripc_register_random_service_id();
	uint8_t *buf = ripc_buf_alloc(SIZE);
	uint64_t seed = 1;
	unsigned long sent = 0;
	struct ft_msg m;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	FT_CHECK(buf, "ripc_buf_alloc");
	for (long it = 0; it < ft.iterations; it++) {
		/* A: released by the answer at the latest. */
		send_round(me, srv, buf, 'A', seed++);
		sent++;
		expect_word(me, "ok");
		FT_EXPECT(ripc_wait_released(buf, 10000), RIPC_OK);

		/* R: nothing comes back; the server's next receive must
		 * send the DONE. */
		double t0 = ft_now();

		send_round(me, srv, buf, 'R', seed++);
		sent++;
		FT_EXPECT(ripc_wait_released(buf, 10000), RIPC_OK);
		if (mode() == DELAY_SLOW)
			FT_CHECK(ft_now() - t0 < 0.5,
				 "R: released after %.3f s: not by the "
				 "server's next receive",
				 ft_now() - t0);
		FT_EXPECT(ft_send_word(me, srv, "next"), RIPC_OK);
	}
	if (mode() != DELAY_SLOW) {
		/* S: the DONE must come while the server is still out of the
		 * library, i.e. before its answer. */
		send_round(me, srv, buf, 'S', seed++);
		sent++;
		FT_EXPECT(ripc_wait_released(buf, 10000), RIPC_OK);
		FT_CHECK(ft_recv(me, &m, 0) == RIPC_EAGAIN,
			 "S: the answer came before the release");
		expect_word(me, "late");
	}
	/* X: the server exits with the DONE held back. */
	send_round(me, srv, buf, 'X', seed++);
	sent++;
	FT_EXPECT(ripc_wait_released(buf, 10000), RIPC_OK);

	struct ripc_stats st = stats();

	ft_log("sent %lu: released %llu, timeouts %llu, carried to us %llu",
	       sent, (unsigned long long)st.long_released,
	       (unsigned long long)st.long_timeouts,
	       (unsigned long long)st.dones_carried_recv);
	FT_CHECK(st.long_released == sent && st.long_timeouts == 0,
		 "%lu sent, %llu released, %llu timed out", sent,
		 (unsigned long long)st.long_released,
		 (unsigned long long)st.long_timeouts);
	if (mode() == DELAY_NOW)
		FT_CHECK(st.dones_carried_recv == 0,
			 "%llu dones carried with RIPC_DONE_DELAY_US=0",
			 (unsigned long long)st.dones_carried_recv);
	else if (mode() == DELAY_SLOW)
		FT_CHECK(st.dones_carried_recv >= 1,
			 "no done came inside an answer");
	ripc_buf_free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_done", 5, 0);
	if (mode() == DELAY_NOW)
		setenv("RIPC_DONE_DELAY_US", "0", 1);
	else if (mode() == DELAY_SLOW)
		setenv("RIPC_DONE_DELAY_US", "1000000", 1);
	ft_lib_init();
	return ft.server ? server() : client();
}
