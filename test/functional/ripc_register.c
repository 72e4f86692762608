/*
 * Service IDs: an ID held by a live process cannot be taken; IDs outside
 * 0..65534 are refused; random IDs are distinct and usable at once; one
 * process holds several services; unregistering frees an ID; a child
 * forked by a running process registers and talks afresh; an ID held by a
 * process that was killed is reclaimed automatically.
 */
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define NRANDOM 64

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	struct ft_msg m;
	int seen[NRANDOM] = { 0 }, n = 0;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_ready(me);
	for (;;) {
		ft_recv_ok(me, &m, 30000);
		if (ft_is_word(&m, "quit"))
			break;
		if (ft_is_word(&m, "child")) {
			/* From a forked child of the client: answer it. */
			FT_EXPECT(ft_send_word(me, m.from, "welcome"), RIPC_OK);
			ft_msg_free(&m, false);
			continue;
		}
		/* "hello <k>" from each random service of the client */
		int k = atoi((char *)m.si[0] + 6);

		FT_CHECK(k >= 0 && k < NRANDOM && !seen[k], "bad hello %d", k);
		seen[k] = m.from;
		n++;
		FT_EXPECT(ft_send_word(me, m.from, "welcome"), RIPC_OK);
		ft_msg_free(&m, false);
	}
	ft_msg_free(&m, false);
	FT_CHECK(n == NRANDOM, "heard from %d services", n);
	return 0;
}

static int client(void)
{
	uint16_t srv = (uint16_t)ft.server_id;
	uint16_t ids[NRANDOM];
	struct ft_msg m;
	int pfd[2];
	pid_t child;
	char c;

	/* Taken by a live process / out of range. */
	FT_CHECK(!ripc_register_service_id(srv), "took a live server's ID");
	FT_CHECK(ripc_last_error() == RIPC_EINUSE, "error %d",
		 ripc_last_error());
	FT_CHECK(!ripc_register_service_id(-1), "-1 accepted");
	FT_CHECK(ripc_last_error() == RIPC_EBADID, "error");
	FT_CHECK(!ripc_register_service_id(65535), "65535 accepted");
	FT_CHECK(ripc_last_error() == RIPC_EBADID, "error");
	FT_CHECK(!ripc_register_service_id(1 << 20), "1<<20 accepted");
	FT_EXPECT(ripc_unregister_service_id(srv), RIPC_ENOTOWNER);

	/* Random IDs: distinct, each usable at once. */
	for (int i = 0; i < NRANDOM; i++) {
		char word[32];

		ids[i] = ripc_register_random_service_id();
		FT_CHECK(ids[i] != RIPC_INVALID_SERVICE_ID, "random %d", i);
		for (int k = 0; k < i; k++)
			FT_CHECK(ids[k] != ids[i], "duplicate random ID");
		snprintf(word, sizeof(word), "hello %d", i);
		FT_EXPECT(ft_send_word(ids[i], srv, word), RIPC_OK);
		ft_recv_ok(ids[i], &m, 10000);
		FT_CHECK(ft_is_word(&m, "welcome") && m.from == srv, "reply");
		ft_msg_free(&m, false);
	}
	/* Twice in one process is refused; unregister frees it. */
	FT_CHECK(!ripc_register_service_id(ids[0]), "registered twice");
	for (int i = 0; i < NRANDOM; i++)
		FT_EXPECT(ripc_unregister_service_id(ids[i]), RIPC_OK);
	FT_EXPECT(ripc_unregister_service_id(ids[0]), RIPC_ENOTOWNER);
	FT_CHECK(ripc_register_service_id(ids[0]), "re-register freed ID");
	FT_EXPECT(ripc_unregister_service_id(ids[0]), RIPC_OK);

	/* A child forked while the library runs (its progress thread may be
	 * inside libfabric at that instant) starts afresh: it registers, and
	 * it talks to the server both ways.  Then it dies holding the ID,
	 * and the ID is reclaimed. */
	FT_CHECK(pipe(pfd) == 0, "pipe");
	child = fork();
	FT_CHECK(child >= 0, "fork");
	if (child == 0) {
		int ok;

		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		ok = ripc_register_service_id(ids[1]);
		if (ok && ft_send_word(ids[1], srv, "child") == RIPC_OK &&
		    ft_recv(ids[1], &m, 10000) == RIPC_OK)
			ok = ft_is_word(&m, "welcome") && m.from == srv;
		else
			ok = 0;
		if (write(pfd[1], ok ? "y" : "n", 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	/* Bounded: a child stuck at start-up fails the test, not hangs it. */
	FT_CHECK(poll(&(struct pollfd){ .fd = pfd[0], .events = POLLIN }, 1,
		      30000) == 1,
		 "forked child silent for 30 s");
	FT_CHECK(read(pfd[0], &c, 1) == 1 && c == 'y',
		 "forked child could not register or talk to the server");
	FT_CHECK(!ripc_register_service_id(ids[1]), "took a live child's ID");
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	ft_shm_cleanup(child);
	FT_CHECK(ripc_register_service_id(ids[1]),
		 "dead owner's ID not reclaimed: %s",
		 ripc_strerror(ripc_last_error()));

	FT_EXPECT(ft_send_word(ids[1], srv, "quit"), RIPC_OK);
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_register", 1, 0);
	ft_lib_init();
	return ft.server ? server() : client();
}
