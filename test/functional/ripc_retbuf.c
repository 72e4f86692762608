/*
 * Return buffers.  The client offers buffers of its own with a request;
 * the server answers with a long send, which the library writes straight
 * into them (RDMA write) where they fit and pulls the rest.
 *
 *  1. 2 items + one 4 KiB return buffer, 1000-byte long reply: lands in
 *     the return buffer byte for byte; a registered window stays unused;
 *     the buffer is no longer exposed afterwards.
 *  2. A reply larger than every offered buffer goes by the pull path (into
 *     the window); the unused offer stays until cancelled.
 *  3. Two long replies to one offer: the first uses it, the second needs
 *     the window.
 *  4. Mixed: buffers {4096, 100, 4096}, items {3000, 5000, 50}: items 0 and
 *     2 are written (first fit), item 1 is pulled.
 *  5. A short reply never uses return buffers.
 *  6. An offer nobody answers is released after RIPC_RETURN_TIMEOUT_MS
 *     (set to 800 ms here), and ripc_return_bufs_cancel releases at once.
 * Canary bytes around every return buffer must stay intact.
 */
#include <string.h>
#include <unistd.h>

#include "common.h"

enum { OP_LONG = 1, OP_LONG2, OP_SHORT, OP_NONE, OP_QUIT };

struct req {
	uint32_t op, n;
	uint32_t size[4];
	uint64_t seed;
};

#define CANARY 64
#define WIN (1u << 20)

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	static uint8_t data[4][16384];
	struct ft_msg m;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_ready(me);
	for (;;) {
		struct req r;
		void *b[4];

		ft_recv_ok(me, &m, 30000);
		FT_CHECK(m.ns >= 1 && m.ss[0] == sizeof(r), "request");
		memcpy(&r, m.si[0], sizeof(r));
		FT_CHECK(r.n <= 4, "n");
		for (unsigned i = 0; i < r.n; i++) {
			FT_CHECK(r.size[i] <= sizeof(data[i]), "size");
			ft_fill(data[i], r.size[i], r.seed + i);
			b[i] = data[i];
		}
		switch (r.op) {
		case OP_LONG2:
			FT_EXPECT(ripc_send_long(me, m.from, b, r.size,
						 (uint16_t)r.n, NULL, NULL, 0),
				  RIPC_OK);
			FT_EXPECT(ripc_wait_released(b[0], 10000), RIPC_OK);
			/* a second reply follows */
			__attribute__((fallthrough));
		case OP_LONG:
			FT_EXPECT(ripc_send_long(me, m.from, b, r.size,
						 (uint16_t)r.n, NULL, NULL, 0),
				  RIPC_OK);
			for (unsigned i = 0; i < r.n; i++)
				FT_EXPECT(ripc_wait_released(b[i], 10000),
					  RIPC_OK);
			break;
		case OP_SHORT:
			FT_EXPECT(ripc_send_short(me, m.from, b, r.size,
						  (uint16_t)r.n, NULL, NULL, 0),
				  RIPC_OK);
			break;
		case OP_NONE:
			FT_EXPECT(ft_send_word(me, m.from, "ignored"), RIPC_OK);
			break;
		case OP_QUIT:
			ft_msg_free(&m, false);
			return 0;
		}
		ft_msg_free(&m, false);
	}
}

static uint16_t me, srv;
static uint8_t *arena, *win;

/* Return buffer k lives at arena + k * 8 KiB, canaries around it. */
static uint8_t *rb(unsigned k)
{
	return arena + CANARY + k * 8192;
}

static void check_canaries(void)
{
	for (unsigned k = 0; k < 4; k++) {
		const uint8_t *c0 = rb(k) - CANARY;

		for (unsigned i = 0; i < CANARY; i++)
			FT_CHECK(c0[i] == 0xA5, "canary before buffer %u", k);
	}
}

static void request(uint32_t op, unsigned n, const uint32_t *sizes,
		    unsigned nrb, const uint32_t *rblen, uint64_t seed)
{
	struct req r = { op, n, { 0 }, seed };
	char extra[] = "second item";
	void *b[2] = { &r, extra }, *rbs[4];
	uint32_t l[2] = { sizeof(r), sizeof(extra) }, rl[4];

	for (unsigned i = 0; i < n; i++)
		r.size[i] = sizes[i];
	for (unsigned k = 0; k < nrb; k++)
		rbs[k] = rb(k), rl[k] = rblen[k];
	FT_EXPECT(ripc_send_short(me, srv, b, l, 2, nrb ? rbs : NULL,
				  nrb ? rl : NULL, (uint16_t)nrb),
		  RIPC_OK);
}

static void expect_reply(struct ft_msg *m, unsigned n, const uint32_t *sizes,
			 uint64_t seed, void *const *where)
{
	ft_recv_ok(me, m, 20000);
	FT_CHECK(m->from == srv && m->ns == 0 && m->nl == n,
		 "reply: %u short, %u long", m->ns, m->nl);
	for (unsigned i = 0; i < n; i++) {
		FT_CHECK(m->ls[i] == sizes[i], "item %u size %u", i, m->ls[i]);
		FT_CHECK(ft_verify(m->li[i], m->ls[i], seed + i) == (size_t)-1,
			 "item %u data", i);
		FT_CHECK(m->li[i] == where[i], "item %u at %p, expected %p", i,
			 m->li[i], where[i]);
	}
	check_canaries();
}

static void rearm_window(void)
{
	ripc_unreg_recv_window(win);
	FT_EXPECT(ripc_reg_recv_window(win, WIN), RIPC_OK);
}

static int client(void)
{
	struct ft_msg m;
	double t0;

	me = ripc_register_random_service_id();
	srv = (uint16_t)ft.server_id;
	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	arena = malloc(4 * 8192 + 2 * CANARY);
	win = malloc(WIN);
	FT_CHECK(arena && win, "malloc");
	memset(arena, 0xA5, 4 * 8192 + 2 * CANARY);
	rearm_window();

	/* 1: into the return buffer; the window stays unused. */
	{
		uint32_t s[1] = { 1000 }, rl[1] = { 4096 };
		void *where[1] = { rb(0) };

		request(OP_LONG, 1, s, 1, rl, 100);
		expect_reply(&m, 1, s, 100, where);
		FT_CHECK(rb(0)[1000] == 0xA5, "wrote past the reply");
		FT_EXPECT(ripc_unreg_recv_window(win), RIPC_OK); /* unused */
		FT_CHECK(!ripc_buf_exposed(rb(0)), "used buffer still exposed");
		ft_msg_free(&m, false);
		memset(rb(0), 0xA5, 4096);
		rearm_window();
	}
	/* 2: too large for the offer: pulled into the window. */
	{
		uint32_t s[1] = { 8192 }, rl[1] = { 4096 };
		void *where[1] = { win };

		request(OP_LONG, 1, s, 1, rl, 200);
		expect_reply(&m, 1, s, 200, where);
		FT_CHECK(ripc_buf_exposed(rb(0)), "unused offer revoked early");
		FT_EXPECT(ripc_return_bufs_cancel(srv), RIPC_OK);
		FT_CHECK(!ripc_buf_exposed(rb(0)), "cancel did not release");
		ft_msg_free(&m, false);
		rearm_window();
	}
	/* 3: two replies, one offer: the second needs the window. */
	{
		uint32_t s[1] = { 1000 }, rl[1] = { 4096 };
		void *first[1] = { rb(0) }, *second[1] = { win };

		request(OP_LONG2, 1, s, 1, rl, 300);
		expect_reply(&m, 1, s, 300, first);
		ft_msg_free(&m, false);
		expect_reply(&m, 1, s, 300, second);
		ft_msg_free(&m, false);
		memset(rb(0), 0xA5, 4096);
		rearm_window();
	}
	/* 4: mixed written and pulled items. */
	{
		uint32_t s[3] = { 3000, 5000, 50 }, rl[3] = { 4096, 100, 4096 };
		void *where[3] = { rb(0), win, rb(1) };

		request(OP_LONG, 3, s, 3, rl, 400);
		expect_reply(&m, 3, s, 400, where);
		FT_CHECK(!ripc_buf_exposed(rb(2)),
			 "rest of a used offer still exposed");
		ft_msg_free(&m, false);
		for (unsigned k = 0; k < 3; k++)
			memset(rb(k), 0xA5, 4096);
		rearm_window();
	}
	/* 5: a short reply does not touch the offered buffer. */
	{
		uint32_t s[1] = { 500 }, rl[1] = { 4096 };

		request(OP_SHORT, 1, s, 1, rl, 500);
		ft_recv_ok(me, &m, 20000);
		FT_CHECK(m.ns == 1 && m.nl == 0 && m.ss[0] == 500, "short");
		FT_CHECK(ft_verify(m.si[0], 500, 500) == (size_t)-1, "data");
		for (unsigned i = 0; i < 4096; i++)
			FT_CHECK(rb(0)[i] == 0xA5, "buffer written by a short");
		ft_msg_free(&m, false);
		FT_EXPECT(ripc_return_bufs_cancel(srv), RIPC_OK);
	}
	/* 6: an unanswered offer is released after the timeout. */
	{
		uint32_t rl[1] = { 4096 };

		request(OP_NONE, 0, NULL, 1, rl, 0);
		ft_recv_ok(me, &m, 20000);
		FT_CHECK(ft_is_word(&m, "ignored"), "ignored");
		ft_msg_free(&m, false);
		FT_CHECK(ripc_buf_exposed(rb(0)), "offer gone too early");
		t0 = ft_now();
		while (ripc_buf_exposed(rb(0)) && ft_now() - t0 < 10)
			usleep(10000);
		FT_CHECK(!ripc_buf_exposed(rb(0)), "offer never released");
		ft_log("unanswered offer released after %.2f s", ft_now() - t0);
	}
	check_canaries();
	request(OP_QUIT, 0, NULL, 0, NULL, 0);
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_retbuf", 1, 0);
	setenv("RIPC_RETURN_TIMEOUT_MS", "800", 1);
	ft_lib_init();
	return ft.server ? server() : client();
}
