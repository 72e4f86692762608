/*
 * Threads: a server with two services, each received on by its own
 * thread, and a client whose two threads send to one service each at the
 * same time.  Every thread must get exactly its own messages, in order.
 */
#include <pthread.h>
#include <string.h>

#include "common.h"

struct tag {
	uint16_t to;
	uint16_t pad; /* sent on the wire: no uninitialised bytes */
	uint32_t seq;
	uint32_t thread;
};

static uint16_t svc_a, svc_b, cli_a, cli_b;

static void *server_thread(void *arg)
{
	uint16_t me = (uint16_t)(uintptr_t)arg;
	uint32_t next[2] = { 0, 0 };
	struct ft_msg m;

	for (long got = 0; got < 2 * ft.iterations; got++) {
		const struct tag *t;

		ft_recv_ok(me, &m, 30000);
		FT_CHECK(m.ns == 1 && m.ss[0] == sizeof(*t), "bad message");
		t = m.si[0];
		FT_CHECK(t->to == me, "thread of %u got a message for %u", me,
			 t->to);
		FT_CHECK(t->thread < 2 && t->seq == next[t->thread]++,
			 "order: seq %u from thread %u", t->seq, t->thread);
		ft_msg_free(&m, false);
	}
	FT_EXPECT(ft_send_word(me, me == svc_a ? cli_a : cli_b, "done"),
		  RIPC_OK);
	return NULL;
}

static int server(void)
{
	pthread_t ta, tb;
	struct ft_msg m;

	svc_a = ripc_register_random_service_id();
	svc_b = ripc_register_random_service_id();
	FT_CHECK(svc_a != RIPC_INVALID_SERVICE_ID &&
			 svc_b != RIPC_INVALID_SERVICE_ID,
		 "register");
	ft_ready(svc_a);
	/* Handshake on A: the client learns B and tells its two IDs. */
	ft_recv_ok(svc_a, &m, 30000);
	FT_CHECK(m.ns == 2, "hello");
	cli_a = *(uint16_t *)m.si[0];
	cli_b = *(uint16_t *)m.si[1];
	void *b[1] = { &svc_b };
	uint32_t l[1] = { sizeof(svc_b) };
	FT_EXPECT(ripc_send_short(svc_a, m.from, b, l, 1, NULL, NULL, 0),
		  RIPC_OK);
	ft_msg_free(&m, false);
	pthread_create(&ta, NULL, server_thread, (void *)(uintptr_t)svc_a);
	pthread_create(&tb, NULL, server_thread, (void *)(uintptr_t)svc_b);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	return 0;
}

struct cli_arg {
	uint16_t me;
	uint32_t thread;
};

static void *client_thread(void *arg)
{
	struct cli_arg *a = arg;
	struct ft_msg m;

	/* Each client thread sends to both server services. */
	for (uint32_t i = 0; i < (uint32_t)ft.iterations; i++) {
		for (int k = 0; k < 2; k++) {
			struct tag t = { k ? svc_b : svc_a, 0, i, a->thread };
			void *b[1] = { &t };
			uint32_t l[1] = { sizeof(t) };

			FT_EXPECT(ripc_send_short(a->me, t.to, b, l, 1, NULL,
						  NULL, 0),
				  RIPC_OK);
		}
	}
	/* Each client service gets "done" from one server service. */
	ft_recv_ok(a->me, &m, 30000);
	FT_CHECK(ft_is_word(&m, "done"), "done");
	ft_msg_free(&m, false);
	return NULL;
}

static int client(void)
{
	struct cli_arg aa, ab;
	pthread_t ta, tb;
	struct ft_msg m;
	uint16_t ids[2];

	svc_a = (uint16_t)ft.server_id;
	cli_a = ids[0] = ripc_register_random_service_id();
	cli_b = ids[1] = ripc_register_random_service_id();
	void *b[2] = { &ids[0], &ids[1] };
	uint32_t l[2] = { 2, 2 };
	FT_EXPECT(ripc_send_short(cli_a, svc_a, b, l, 2, NULL, NULL, 0),
		  RIPC_OK);
	ft_recv_ok(cli_a, &m, 30000);
	svc_b = *(uint16_t *)m.si[0];
	ft_msg_free(&m, false);
	aa = (struct cli_arg){ cli_a, 0 };
	ab = (struct cli_arg){ cli_b, 1 };
	pthread_create(&ta, NULL, client_thread, &aa);
	pthread_create(&tb, NULL, client_thread, &ab);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_threads", 400, 0);
	ft_lib_init();
	return ft.server ? server() : client();
}
