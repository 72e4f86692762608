/*
 * Zero-length items, as original libRIPC programs send them: the libRIPC
 * demo passes an array of size_t as the uint32_t lengths, so on a 64-bit
 * little-endian machine its second item has length 0 (the high half of
 * the first length).  libRIPC sent such items; libripc delivers them as
 * items of length 0, short and long (nothing is registered for an empty
 * long item), next to the non-empty ones, which arrive intact.
 *
 * The client sends, -I times: a short message laid out like the libRIPC
 * demo's (one real item, the size_t high half as a second), a short
 * message with an empty item in the middle and a NULL empty one at the
 * end, and a long message with empty items between two real ones.  The
 * server checks every length and byte and answers "ok" each time.
 */
#include <string.h>

#include "common.h"

#define NSHORT_B 3
#define NLONG 4

static const uint32_t long_len[NLONG] = { 70000, 0, 0, 4096 };

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	struct ft_msg m;
	long rounds = 0;
	uint16_t from;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_ready(me);
	for (;;) {
		ft_recv_ok(me, &m, 30000);
		if (ft_is_word(&m, "quit"))
			break;
		/* 1: the libRIPC demo's layout: {len, 0}. */
		FT_CHECK(m.ns == 2 && m.nl == 0, "demo: %u short, %u long",
			 m.ns, m.nl);
		FT_CHECK(m.ss[0] == 1000 && m.ss[1] == 0, "demo sizes %u %u",
			 m.ss[0], m.ss[1]);
		FT_CHECK(ft_verify(m.si[0], 1000, 1) == (size_t)-1,
			 "demo item bytes");
		ft_msg_free(&m, false);
		/* 2: {5, 0, 7, 0(NULL)} */
		ft_recv_ok(me, &m, 30000);
		FT_CHECK(m.ns == 4, "%u short items", m.ns);
		FT_CHECK(m.ss[0] == 5 && m.ss[1] == 0 && m.ss[2] == 7 &&
				 m.ss[3] == 0,
			 "sizes %u %u %u %u", m.ss[0], m.ss[1], m.ss[2],
			 m.ss[3]);
		FT_CHECK(!memcmp(m.si[0], "abcde", 5) &&
				 !memcmp(m.si[2], "1234567", 7),
			 "short bytes");
		ft_msg_free(&m, false);
		/* 3: long {70000, 0, 0, 4096} */
		ft_recv_ok(me, &m, 30000);
		from = m.from;
		FT_CHECK(m.ns == 0 && m.nl == NLONG, "%u long items", m.nl);
		for (int i = 0; i < NLONG; i++)
			FT_CHECK(m.ls[i] == long_len[i], "long %d: %u bytes", i,
				 m.ls[i]);
		FT_CHECK(ft_verify(m.li[0], long_len[0], 2) == (size_t)-1 &&
				 ft_verify(m.li[3], long_len[3], 3) ==
					 (size_t)-1,
			 "long bytes");
		ft_msg_free(&m, true);
		rounds++;
		FT_EXPECT(ft_send_word(me, from, "ok"), RIPC_OK);
	}
	ft_msg_free(&m, false);
	FT_CHECK(rounds == ft.iterations, "%ld rounds", rounds);
	return 0;
}

static int client(void)
{
	uint16_t srv = (uint16_t)ft.server_id;
	uint16_t me = ripc_register_random_service_id();
	static uint8_t big[70000], small[4096], demo[1000];
	char a[5] = "abcde", b[7] = "1234567";
	struct ft_msg m;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_fill(demo, sizeof(demo), 1);
	ft_fill(big, sizeof(big), 2);
	ft_fill(small, sizeof(small), 3);
	for (long it = 0; it < ft.iterations; it++) {
		/* The libRIPC demo: size_t lengths read as uint32_t. */
		size_t demo_len[1] = { sizeof(demo) };
		void *dbuf[2] = { demo, demo };
		void *sbuf[4] = { a, a, b, NULL };
		uint32_t slen[4] = { 5, 0, 7, 0 };
		void *lbuf[NLONG] = { big, big, NULL, small };

		FT_EXPECT(ripc_send_short(me, srv, dbuf, (uint32_t *)demo_len,
					  2, NULL, NULL, 0),
			  RIPC_OK);
		FT_EXPECT(ripc_send_short(me, srv, sbuf, slen, 4, NULL, NULL,
					  0),
			  RIPC_OK);
		FT_EXPECT(ripc_send_long(me, srv, lbuf, (uint32_t *)long_len,
					 NLONG, NULL, NULL, 0),
			  RIPC_OK);
		ft_recv_ok(me, &m, 30000);
		FT_CHECK(ft_is_word(&m, "ok"), "answer");
		ft_msg_free(&m, false);
		FT_EXPECT(ripc_wait_released(big, 10000), RIPC_OK);
	}
	FT_EXPECT(ft_send_word(me, srv, "quit"), RIPC_OK);
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_zerolen", 5, 0);
	ft_lib_init();
	return ft.server ? server() : client();
}
