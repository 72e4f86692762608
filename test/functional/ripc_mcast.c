/*
 * Multicast service IDs.  The server forks three member processes that
 * join one multicast ID; each member answers every message it gets on
 * that ID to the sender.  The client
 *  1. short-sends 20 messages to the group: every member answers each
 *     exactly once, with the client's ID as `from`;
 *  2. long-sends 2 messages: every member pulls its own copy;
 *  3. asks the server to SIGKILL member 1, then sends 20 more: the other
 *     two keep answering exactly once each, and no send hangs;
 *  4. return buffers with a multicast destination are refused (EINVAL).
 */
#include <signal.h>
#include <sys/prctl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define MEMBERS 3
#define GROUP_OFFSET 7 /* group ID = server ID + 7 (mod 65535) */

struct note {
	uint32_t member, seq;
	uint16_t from;
	uint8_t is_long;
};

/* A member is forked before the server starts the library: forking a
 * process whose library threads are running is ripc_lifecycle's "fork"
 * case; here (and under ASan, whose allocator in GCC 12 takes no lock
 * around fork: a child could inherit it held) members start clean. */
static int member(int k, int group_fd, int ready_fd)
{
	struct ft_msg m;
	uint16_t group;
	char c = 'r';

	ft_lib_init();
	if (read(group_fd, &group, sizeof(group)) != sizeof(group))
		ft_fail("member %d: no group ID from the server", k);
	if (!ripc_register_multicast_service_id(group))
		ft_fail("member %d: join: %s", k,
			ripc_strerror(ripc_last_error()));
	uint16_t me = ripc_register_random_service_id();

	if (write(ready_fd, &c, 1) != 1)
		_exit(1);
	for (;;) {
		struct note n = { (uint32_t)k, 0, 0, 0 };

		ft_recv_ok(group, &m, -1);
		n.from = m.from;
		if (m.nl) {
			n.is_long = 1;
			FT_CHECK(m.ns == 0 && m.ls[0] == 100000, "long size");
			FT_CHECK(ft_verify(m.li[0], m.ls[0], 77) == (size_t)-1,
				 "member %d: long data", k);
		} else {
			FT_CHECK(m.ns == 1 && m.ss[0] == 4, "short");
			memcpy(&n.seq, m.si[0], 4);
		}
		ft_msg_free(&m, true);
		void *b[1] = { &n };
		uint32_t l[1] = { sizeof(n) };

		if (ripc_send_short(me, n.from, b, l, 1, NULL, NULL, 0))
			ft_fail("member %d: answer", k);
	}
}

static int server(void)
{
	uint16_t me, group;
	pid_t pid[MEMBERS];
	int pfd[2], gfd[2];
	struct ft_msg m;
	char c;

	FT_CHECK(pipe(pfd) == 0 && pipe(gfd) == 0, "pipe");
	for (int k = 0; k < MEMBERS; k++) {
		pid[k] = fork();
		FT_CHECK(pid[k] >= 0, "fork");
		if (pid[k] == 0) {
			/* Die with the server, whatever ends it. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			_exit(member(k, gfd[0], pfd[1]));
		}
	}
	ft_lib_init();
	me = ripc_register_random_service_id();
	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	group = (uint16_t)((me + GROUP_OFFSET) % 65535);
	for (int k = 0; k < MEMBERS; k++)
		FT_CHECK(write(gfd[1], &group, sizeof(group)) ==
				 (ssize_t)sizeof(group),
			 "group ID to member %d", k);
	for (int k = 0; k < MEMBERS; k++)
		FT_CHECK(read(pfd[0], &c, 1) == 1, "member %d ready", k);
	ft_ready(me);
	for (;;) {
		ft_recv_ok(me, &m, 60000);
		if (ft_is_word(&m, "kill1")) {
			kill(pid[1], SIGKILL);
			waitpid(pid[1], NULL, 0);
			ft_shm_cleanup(pid[1]);
			pid[1] = 0;
			FT_EXPECT(ft_send_word(me, m.from, "killed"), RIPC_OK);
		} else if (ft_is_word(&m, "quit")) {
			ft_msg_free(&m, false);
			break;
		}
		ft_msg_free(&m, false);
	}
	for (int k = 0; k < MEMBERS; k++) {
		if (!pid[k])
			continue;
		kill(pid[k], SIGKILL);
		waitpid(pid[k], NULL, 0);
		ft_shm_cleanup(pid[k]);
	}
	return 0;
}

/* Collect answers to `count` messages from the members in `alive`. */
static void collect(uint16_t me, uint16_t base_seq, int count,
		    const bool *alive, bool is_long)
{
	int got[MEMBERS][64] = { { 0 } }, want = 0;
	struct ft_msg m;

	for (int k = 0; k < MEMBERS; k++)
		want += alive[k] ? count : 0;
	ft_log("collecting %d answers (messages %u..%u, %s)", want, base_seq,
	       base_seq + count - 1, is_long ? "long" : "short");
	for (int i = 0; i < want; i++) {
		struct note n;

		if (ft_recv(me, &m, 20000))
			ft_fail("answer %d of %d missing: %s", i, want,
				ripc_strerror(m.ret));
		FT_CHECK(m.ns == 1 && m.ss[0] == sizeof(n), "answer");
		memcpy(&n, m.si[0], sizeof(n));
		ft_msg_free(&m, false);
		FT_CHECK(n.member < MEMBERS && alive[n.member],
			 "answer from member %u", n.member);
		FT_CHECK(n.from == me, "member saw from=%u", n.from);
		FT_CHECK(n.is_long == is_long, "kind");
		FT_CHECK(n.seq >= base_seq && n.seq < base_seq + (uint32_t)count,
			 "seq %u", n.seq);
		FT_CHECK(++got[n.member][n.seq - base_seq] == 1,
			 "member %u got message %u twice", n.member, n.seq);
	}
	/* Nothing more must come. */
	FT_CHECK(ft_recv(me, &m, 300) == RIPC_ETIMEDOUT, "extra answer");
}

static int client(void)
{
	uint16_t srv = (uint16_t)ft.server_id;
	uint16_t group = (uint16_t)((srv + GROUP_OFFSET) % 65535);
	uint16_t me = ripc_register_random_service_id();
	bool alive[MEMBERS] = { true, true, true };
	uint8_t *big = malloc(100000);
	struct ft_msg m;
	uint32_t seq;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID && big, "setup");
	for (seq = 0; seq < 20; seq++) {
		void *b[1] = { &seq };
		uint32_t l[1] = { 4 };
		double t0 = ft_now();

		FT_EXPECT(ripc_send_short(me, group, b, l, 1, NULL, NULL, 0),
			  RIPC_OK);
		ft_log("multicast %u took %.1f ms", seq, (ft_now() - t0) * 1e3);
	}
	collect(me, 0, 20, alive, false);

	ft_fill(big, 100000, 77);
	for (int i = 0; i < 2; i++) {
		void *b[1] = { big };
		uint32_t l[1] = { 100000 };

		FT_EXPECT(ripc_send_long(me, group, b, l, 1, NULL, NULL, 0),
			  RIPC_OK);
		collect(me, 0, 1, alive, true);
		FT_EXPECT(ripc_wait_released(big, 10000), RIPC_OK);
	}

	FT_EXPECT(ft_send_word(me, srv, "kill1"), RIPC_OK);
	ft_recv_ok(me, &m, 20000);
	FT_CHECK(ft_is_word(&m, "killed"), "killed");
	ft_msg_free(&m, false);
	alive[1] = false;
	for (seq = 100; seq < 120; seq++) {
		void *b[1] = { &seq };
		uint32_t l[1] = { 4 };
		double t0 = ft_now();

		FT_EXPECT(ripc_send_short(me, group, b, l, 1, NULL, NULL, 0),
			  RIPC_OK);
		FT_CHECK(ft_now() - t0 < 10, "send took %.1f s", ft_now() - t0);
	}
	collect(me, 100, 20, alive, false);

	{
		void *b[1] = { big }, *rb[1] = { big };
		uint32_t l[1] = { 10 };

		FT_EXPECT(ripc_send_short(me, group, b, l, 1, rb, l, 1),
			  RIPC_EINVAL);
	}
	FT_EXPECT(ft_send_word(me, srv, "quit"), RIPC_OK);
	free(big);
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_mcast", 1, 0);
	if (ft.server)
		return server(); /* forks its members first */
	ft_lib_init();
	return client();
}
