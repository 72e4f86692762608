/*
 * Short sends: random item counts (1..64) and sizes up to the 64 KiB
 * maximum, echoed back byte for byte; sends over the limits fail at the
 * sender with E2BIG / ETOOMANY and nothing reaches the server.
 *
 * Message layout: item 0 is a header {magic, seed, index}; items 1..n-1
 * are filled with ft_fill(seed + i).  The server checks every item and
 * echoes the message unchanged (zero copy from its receive buffer).
 */
#include <string.h>

#include "common.h"

struct hdr {
	uint64_t magic, seed, index;
};
#define MAGIC 0x5348525454455354ull

static void check_msg(const struct ft_msg *m, uint64_t want_index)
{
	const struct hdr *h;

	FT_CHECK(m->ns >= 1 && m->ss[0] == sizeof(*h), "bad header item");
	FT_CHECK(m->nl == 0, "unexpected long items");
	h = m->si[0];
	FT_CHECK(h->magic == MAGIC, "bad magic");
	FT_CHECK(h->index == want_index, "message %lu arrived as %lu",
		 (unsigned long)h->index, (unsigned long)want_index);
	for (unsigned i = 1; i < m->ns; i++) {
		size_t bad = ft_verify(m->si[i], m->ss[i], h->seed + i);

		FT_CHECK(bad == (size_t)-1, "item %u byte %zu differs", i, bad);
	}
}

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	uint64_t n = 0;
	struct ft_msg m;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_ready(me);
	for (;;) {
		ft_recv_ok(me, &m, 30000);
		if (ft_is_word(&m, "quit")) {
			ft_msg_free(&m, false);
			break;
		}
		check_msg(&m, n++);
		/* Echo straight out of the receive buffer. */
		FT_EXPECT(ripc_send_short(me, m.from, m.si, m.ss, m.ns, NULL,
					  NULL, 0),
			  RIPC_OK);
		ft_msg_free(&m, false);
	}
	FT_CHECK(n == (uint64_t)ft.iterations, "got %lu messages, want %ld",
		 (unsigned long)n, ft.iterations);
	ft_log("server verified %lu messages", (unsigned long)n);
	return 0;
}

static int client(void)
{
	static uint8_t pool[RIPC_SHORT_MAX + 4096];
	uint16_t me = ripc_register_random_service_id();
	uint16_t srv = (uint16_t)ft.server_id;
	uint64_t rs = 0x1234 ^ (uint64_t)ft_now();
	void *buf[RIPC_MAX_ITEMS + 1];
	uint32_t len[RIPC_MAX_ITEMS + 1];
	struct ft_msg m;
	struct hdr h = { MAGIC, 0, 0 };

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	FT_CHECK(ripc_limit(RIPC_LIMIT_SHORT_PAYLOAD) == RIPC_SHORT_MAX,
		 "limit");

	/* Over the limits: refused at the sender, nothing sent. */
	buf[0] = pool;
	len[0] = RIPC_SHORT_MAX + 1;
	FT_EXPECT(ripc_send_short(me, srv, buf, len, 1, NULL, NULL, 0),
		  RIPC_E2BIG);
	for (int i = 0; i <= RIPC_MAX_ITEMS; i++)
		buf[i] = pool, len[i] = 1;
	FT_EXPECT(ripc_send_short(me, srv, buf, len, RIPC_MAX_ITEMS + 1, NULL,
				  NULL, 0),
		  RIPC_ETOOMANY);
	len[0] = RIPC_SHORT_MAX - 63;
	FT_EXPECT(ripc_send_short(me, srv, buf, len, 65, NULL, NULL, 0),
		  RIPC_ETOOMANY);

	for (long it = 0; it < ft.iterations; it++) {
		unsigned n = 1 + (unsigned)(ft_rand(&rs) % RIPC_MAX_ITEMS);
		size_t room = RIPC_SHORT_MAX - sizeof(h), off = 0;
		int shape = (int)(ft_rand(&rs) % 4);

		h.seed = ft_rand(&rs);
		h.index = (uint64_t)it;
		buf[0] = &h;
		len[0] = sizeof(h);
		for (unsigned i = 1; i < n; i++) {
			size_t left = n - i, max = room - (left - 1), l;

			/* Shapes: tiny items, random, exactly full, big. */
			if (shape == 0)
				l = 1 + ft_rand(&rs) % 8;
			else if (shape == 2 && i == n - 1)
				l = max;
			else
				l = 1 + ft_rand(&rs) % (max / left);
			buf[i] = pool + off;
			len[i] = (uint32_t)l;
			ft_fill(buf[i], l, h.seed + i);
			off += l;
			room -= l;
		}
		FT_EXPECT(ripc_send_short(me, srv, buf, len, (uint16_t)n,
					  NULL, NULL, 0),
			  RIPC_OK);
		ft_recv_ok(me, &m, 30000);
		FT_CHECK(m.from == srv, "reply from %u", m.from);
		FT_CHECK(m.ns == n, "echo has %u items, sent %u", m.ns, n);
		for (unsigned i = 0; i < n; i++)
			FT_CHECK(m.ss[i] == len[i], "item %u size", i);
		check_msg(&m, (uint64_t)it);
		ft_msg_free(&m, false);
	}
	FT_EXPECT(ft_send_word(me, srv, "quit"), RIPC_OK);
	ft_log("client: %ld round trips verified", ft.iterations);
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_short", 300, 0);
	ft_lib_init();
	return ft.server ? server() : client();
}
