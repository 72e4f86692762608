/*
 * Receive windows.  The server arms windows as the client asks, then the
 * client long-sends; the server reports where each item landed.
 *
 *  A. service window and process-wide window: the service's is used;
 *  B. only a process-wide window: used, from its base;
 *  C. only windows that are too small: a library buffer is used and the
 *     small window stays registered;
 *  D. several items, windows for some: first fit per item, service windows
 *     first, the rest in library buffers;
 *  E. (-x nolib: server runs with RIPC_PULL_MEM_MAX=0) items that fit no
 *     window are not delivered: RIPC_ETRUNC, NULL pointer, size reported,
 *     the others delivered; the next message is unaffected.
 * Guard bytes after every window must stay intact.
 */
#include <string.h>

#include "common.h"

#define GUARD 256

struct plan {
	uint32_t svc_win, glob_win, small_win; /* sizes, 0 = none */
	uint32_t n, size[4];
	uint64_t seed;
};

static uint8_t *svc_buf, *glob_buf, *small_buf;

static void guards_ok(void)
{
	FT_CHECK(svc_buf[65536] == 0x5A && glob_buf[65536] == 0x5A &&
			 small_buf[16] == 0x5A,
		 "guard overwritten");
	for (unsigned i = 0; i < GUARD; i++)
		FT_CHECK(svc_buf[65536 + i] == 0x5A &&
				 glob_buf[65536 + i] == 0x5A,
			 "guard byte %u", i);
}

static int server(void)
{
	bool nolib = ft.extra && !strcmp(ft.extra, "nolib");
	uint16_t me = ripc_register_random_service_id();
	struct ft_msg m;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	svc_buf = malloc(65536 + GUARD);
	glob_buf = malloc(65536 + GUARD);
	small_buf = malloc(16 + GUARD);
	memset(svc_buf, 0x5A, 65536 + GUARD);
	memset(glob_buf, 0x5A, 65536 + GUARD);
	memset(small_buf, 0x5A, 16 + GUARD);
	ft_ready(me);
	for (;;) {
		struct plan p;
		char where[128] = "";
		int r;

		ft_recv_ok(me, &m, 30000);
		if (ft_is_word(&m, "quit"))
			break;
		FT_CHECK(m.ns == 1 && m.ss[0] == sizeof(p), "plan");
		memcpy(&p, m.si[0], sizeof(p));
		ft_msg_free(&m, false);
		ripc_unreg_recv_window(svc_buf);
		ripc_unreg_recv_window(glob_buf);
		ripc_unreg_recv_window(small_buf);
		if (p.small_win)
			FT_EXPECT(ripc_reg_recv_window_for_service(
					  small_buf, p.small_win, me),
				  RIPC_OK);
		if (p.svc_win)
			FT_EXPECT(ripc_reg_recv_window_for_service(
					  svc_buf, p.svc_win, me),
				  RIPC_OK);
		if (p.glob_win)
			FT_EXPECT(ripc_reg_recv_window(glob_buf, p.glob_win),
				  RIPC_OK);
		FT_EXPECT(ft_send_word(me, (uint16_t)p.seed, "armed"), RIPC_OK);

		r = ft_recv(me, &m, 30000);
		FT_CHECK(r == RIPC_OK || (nolib && r == RIPC_ETRUNC),
			 "receive: %s", ripc_strerror(r));
		FT_CHECK(m.nl == p.n, "%u items", m.nl);
		for (unsigned i = 0; i < m.nl; i++) {
			const char *w;

			FT_CHECK(m.ls[i] == p.size[i], "item %u size", i);
			if (!m.li[i]) {
				w = "none";
			} else {
				FT_CHECK(ft_verify(m.li[i], m.ls[i],
						   p.seed + i) == (size_t)-1,
					 "item %u data", i);
				w = m.li[i] == svc_buf	   ? "svc"
				    : m.li[i] == glob_buf  ? "glob"
				    : m.li[i] == small_buf ? "small"
							   : "lib";
				if (!strcmp(w, "lib"))
					ripc_buf_free(m.li[i]);
			}
			strcat(where, w);
			strcat(where, " ");
		}
		/* Report the small window's state too. */
		strcat(where, ripc_unreg_recv_window(small_buf) == RIPC_OK
				      ? "small-unused"
				      : "small-gone");
		if (r == RIPC_ETRUNC)
			strcat(where, " ETRUNC");
		guards_ok();
		ft_msg_free(&m, false);
		FT_EXPECT(ft_send_word(me, (uint16_t)p.seed, where), RIPC_OK);
	}
	ft_msg_free(&m, false);
	return 0;
}

static uint16_t me, srv;

static void scenario(const char *name, struct plan p, const char *expect)
{
	static uint8_t data[4][70000];
	void *b[4];
	struct ft_msg m;

	p.seed = me; /* the server replies to this service */
	for (unsigned i = 0; i < p.n; i++) {
		ft_fill(data[i], p.size[i], p.seed + i);
		b[i] = data[i];
	}
	void *pb[1] = { &p };
	uint32_t pl[1] = { sizeof(p) };
	FT_EXPECT(ripc_send_short(me, srv, pb, pl, 1, NULL, NULL, 0), RIPC_OK);
	ft_recv_ok(me, &m, 20000);
	FT_CHECK(ft_is_word(&m, "armed"), "armed");
	ft_msg_free(&m, false);
	FT_EXPECT(ripc_send_long(me, srv, b, p.size, (uint16_t)p.n, NULL, NULL,
				 0),
		  RIPC_OK);
	ft_recv_ok(me, &m, 20000);
	FT_CHECK(m.ns == 1 && !strcmp(m.si[0], expect),
		 "%s: items landed as \"%s\", expected \"%s\"", name,
		 (char *)m.si[0], expect);
	ft_log("%s: %s", name, expect);
	ft_msg_free(&m, false);
}

static int client(void)
{
	bool nolib = ft.extra && !strcmp(ft.extra, "nolib");

	me = ripc_register_random_service_id();
	srv = (uint16_t)ft.server_id;
	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	if (!nolib) {
		scenario("A service first",
			 (struct plan){ 65536, 65536, 0, 1, { 1000 }, 0 },
			 "svc small-gone");
		scenario("B global only",
			 (struct plan){ 0, 65536, 0, 1, { 65536 }, 0 },
			 "glob small-gone");
		scenario("C too small",
			 (struct plan){ 0, 0, 16, 1, { 17 }, 0 },
			 "lib small-unused");
		scenario("D several items",
			 (struct plan){ 1000, 60000, 0, 4,
					{ 100, 50000, 200, 65536 }, 0 },
			 "svc glob lib lib small-gone");
		scenario("D' small fits first",
			 (struct plan){ 65536, 0, 16, 2, { 16, 300 }, 0 },
			 "small svc small-gone");
	} else {
		scenario("E no library buffers",
			 (struct plan){ 1000, 0, 0, 3, { 100, 5000, 200 }, 0 },
			 "svc none none small-gone ETRUNC");
		scenario("E next message unaffected",
			 (struct plan){ 1000, 0, 0, 1, { 999 }, 0 },
			 "svc small-gone");
	}
	FT_EXPECT(ft_send_word(me, srv, "quit"), RIPC_OK);
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_window", 1, 0);
	if (ft.extra && !strcmp(ft.extra, "nolib") && ft.server)
		setenv("RIPC_PULL_MEM_MAX", "0", 1);
	ft_lib_init();
	return ft.server ? server() : client();
}
