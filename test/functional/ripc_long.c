/*
 * Long sends: items of 1 B, 4 KiB-1, 1 MiB+1 and 256 MiB (more with -S),
 * then random multi-item messages, pulled by the server into a receive
 * window that fits, past a window that is too small, or into a library
 * buffer, and checked byte for byte.  The client spins without calling
 * the library after each send: the pull must complete anyway (the library
 * drives progress), and its buffers must be released by the time the
 * server's reply is there.
 *
 * The server counts pulled messages in a file in $RIPC_TEST_DIR (set by
 * the runner) that the client watches while it spins, so the check does
 * not depend on timing.
 *
 * Server modes (-x): "lib" (no windows), "window" (a fitting window per
 * message, plus a too-small one registered first), "service" (windows for
 * the service and a process-wide one: the service's must be used).
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

#define WIN_MAX (258u << 20)

static uint64_t item_seed(uint32_t len, unsigned i)
{
	return (uint64_t)len * 131 + i;
}

/* Windows for the next message (each takes one item).  They must be in
 * place before the message arrives: the pull starts on arrival. */
static void arm_windows(const char *mode, uint16_t me, uint8_t *small,
			size_t small_len, uint8_t *win, uint8_t *gwin)
{
	if (!strcmp(mode, "window")) {
		ripc_unreg_recv_window(small);
		FT_EXPECT(ripc_reg_recv_window(small, small_len), RIPC_OK);
		ripc_unreg_recv_window(win);
		FT_EXPECT(ripc_reg_recv_window(win, WIN_MAX), RIPC_OK);
	} else if (!strcmp(mode, "service")) {
		ripc_unreg_recv_window(gwin);
		FT_EXPECT(ripc_reg_recv_window(gwin, WIN_MAX), RIPC_OK);
		ripc_unreg_recv_window(win);
		FT_EXPECT(ripc_reg_recv_window_for_service(win, WIN_MAX, me),
			  RIPC_OK);
	}
}

static int server(void)
{
	const char *mode = ft.extra ? ft.extra : "lib";
	uint16_t me = ripc_register_random_service_id();
	static uint8_t small[16];
	uint8_t *win = NULL, *gwin = NULL;
	volatile uint64_t *pulled = ft_shared_counter("pulled");
	struct ft_msg m;
	long msgs = 0;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	if (strcmp(mode, "lib")) {
		win = mmap(NULL, WIN_MAX, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		gwin = mmap(NULL, WIN_MAX, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		FT_CHECK(win != MAP_FAILED && gwin != MAP_FAILED, "mmap");
	}
	arm_windows(mode, me, small, sizeof(small), win, gwin);
	ft_ready(me);
	for (;;) {
		char verdict[64] = "ok";

		ft_recv_ok(me, &m, 60000);
		if (ft_is_word(&m, "quit")) {
			ft_msg_free(&m, false);
			break;
		}
		FT_CHECK(m.ns == 0 && m.nl >= 1, "expected a long message");
		if (pulled)
			__atomic_add_fetch(pulled, 1, __ATOMIC_SEQ_CST);
		for (unsigned i = 0; i < m.nl; i++) {
			size_t bad = ft_verify(m.li[i], m.ls[i],
					       item_seed(m.ls[i], i));

			if (bad != (size_t)-1) {
				snprintf(verdict, sizeof(verdict),
					 "item %u (%u B) differs at %zu", i,
					 m.ls[i], bad);
				break;
			}
		}
		/* Where did item 0 land? */
		if (!strcmp(mode, "window")) {
			/* First fit: the small window takes what fits it. */
			void *want = m.ls[0] <= sizeof(small) ? (void *)small
							     : (void *)win;

			if (m.li[0] != want)
				snprintf(verdict, sizeof(verdict),
					 "item 0 (%u B) not in the right window",
					 m.ls[0]);
		} else if (!strcmp(mode, "service")) {
			if (m.li[0] != win)
				snprintf(verdict, sizeof(verdict),
					 "item 0 not in the service window");
			if (m.nl > 1 && !strcmp(mode, "service") &&
			    m.li[1] != gwin)
				snprintf(verdict, sizeof(verdict),
					 "item 1 not in the global window");
		}
		/* Items not in our windows are library buffers. */
		for (unsigned i = 0; i < m.nl; i++)
			if (m.li[i] != win && m.li[i] != gwin &&
			    m.li[i] != small)
				ripc_buf_free(m.li[i]);
		arm_windows(mode, me, small, sizeof(small), win, gwin);
		FT_EXPECT(ft_send_word(me, m.from, verdict), RIPC_OK);
		ft_msg_free(&m, false);
		msgs++;
	}
	ft_log("server: %ld long messages", msgs);
	return 0;
}

static volatile uint64_t *pulled;
static uint64_t sent;

/* Busy elsewhere: no library calls until the server has the message. */
static void spin_until_pulled(void)
{
	double end = ft_now() + (pulled ? 60 : 0.1);

	sent++;
	while (ft_now() < end)
		if (pulled && __atomic_load_n(pulled, __ATOMIC_SEQ_CST) >= sent)
			return;
	FT_CHECK(!pulled, "the server could not pull while the sender was "
			  "busy (%lu of %lu pulled)",
		 (unsigned long)*pulled, (unsigned long)sent);
}

static void one_message(uint16_t me, uint16_t srv, unsigned n,
			const uint32_t *sizes, bool use_lib_alloc)
{
	void *buf[RIPC_MAX_ITEMS];
	uint32_t len[RIPC_MAX_ITEMS];
	struct ft_msg m;
	uint64_t total = 0;
	double t0;
	int r;

	for (unsigned i = 0; i < n; i++) {
		len[i] = sizes[i];
		buf[i] = use_lib_alloc ? ripc_buf_alloc(len[i])
				       : malloc(len[i]);
		FT_CHECK(buf[i], "alloc %u", len[i]);
		ft_fill(buf[i], len[i], item_seed(len[i], i));
		total += len[i];
	}
	t0 = ft_now();
	FT_EXPECT(ripc_send_long(me, srv, buf, len, (uint16_t)n, NULL, NULL, 0),
		  RIPC_OK);
	spin_until_pulled();
	r = ft_recv(me, &m, 60000);
	FT_CHECK(r == RIPC_OK, "no verdict: %s", ripc_strerror(r));
	FT_CHECK(ft_is_word(&m, "ok"), "server says: %s",
		 m.ns ? (char *)m.si[0] : "?");
	/* The done message precedes the reply: buffers are released. */
	for (unsigned i = 0; i < n; i++)
		FT_CHECK(!ripc_buf_exposed(buf[i]), "item %u still exposed", i);
	ft_log("%u items, %lu bytes: ok (%.1f ms)", n, (unsigned long)total,
	       (ft_now() - t0) * 1e3);
	ft_msg_free(&m, false);
	for (unsigned i = 0; i < n; i++)
		use_lib_alloc ? ripc_buf_free(buf[i]) : free(buf[i]);
}

static int client(void)
{
	uint16_t me = ripc_register_random_service_id();
	uint16_t srv = (uint16_t)ft.server_id;
	uint32_t fixed[] = { 1, 4095, (1u << 20) + 1, 256u << 20 };
	uint64_t rs = 42;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	pulled = ft_shared_counter("pulled");
	for (unsigned i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		one_message(me, srv, 1, &fixed[i], i & 1);
	if (ft.size > 0) { /* -S: one more, e.g. 1 GiB */
		uint32_t s = (uint32_t)ft.size;

		one_message(me, srv, 1, &s, true);
	}
	for (long it = 0; it < ft.iterations; it++) {
		uint32_t sizes[RIPC_MAX_ITEMS];
		unsigned n = 1 + (unsigned)(ft_rand(&rs) % 16);

		if (it == 0)
			n = RIPC_MAX_ITEMS; /* the maximum item count */
		for (unsigned i = 0; i < n; i++)
			sizes[i] = 1 + (uint32_t)(ft_rand(&rs) % (256u << 10));
		one_message(me, srv, n, sizes, it & 1);
	}
	FT_EXPECT(ft_send_word(me, srv, "quit"), RIPC_OK);
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_long", 20, 0);
	ft_lib_init();
	return ft.server ? server() : client();
}
