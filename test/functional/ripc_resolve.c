/*
 * Resolution on one host: a send to an ID nobody holds fails with
 * RIPC_ENOSERVICE after RIPC_RESOLVE_TIMEOUT_MS (checked within +-20 %),
 * and a send whose destination registers while the send waits succeeds.
 */
#include <signal.h>
#include <sys/prctl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	struct ft_msg m;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_ready(me);
	ft_recv_ok(me, &m, 60000);
	FT_CHECK(ft_is_word(&m, "quit"), "quit");
	ft_msg_free(&m, false);
	return 0;
}

static uint16_t unused_id(uint16_t avoid)
{
	/* An ID nobody in this test's registry holds. */
	uint16_t id = (uint16_t)(200 + (getpid() % 500));

	return id == avoid ? id + 1 : id;
}

static int client(void)
{
	uint16_t srv = (uint16_t)ft.server_id;
	uint16_t me = ripc_register_random_service_id();
	uint16_t ghost = unused_id(srv), late = (uint16_t)(ghost + 1000);
	const double timeout = 0.6; /* RIPC_RESOLVE_TIMEOUT_MS set below */
	double t0, dt;
	int pfd[2], st;
	pid_t child;
	char c;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	/* Never existed: error within the timeout +-20 %. */
	t0 = ft_now();
	FT_EXPECT(ft_send_word(me, ghost, "anyone?"), RIPC_ENOSERVICE);
	dt = ft_now() - t0;
	FT_CHECK(dt >= timeout * 0.8 && dt <= timeout * 1.2,
		 "failed after %.3f s, timeout %.3f s", dt, timeout);
	ft_log("unknown destination: error after %.3f s", dt);

	/* Appears while the send waits.  The child initialises the library
	 * first (slow under valgrind) and says so; only then does the parent
	 * send, and the child registers 200 ms into that send's wait. */
	int ready[2];

	FT_CHECK(pipe(pfd) == 0 && pipe(ready) == 0, "pipe");
	child = fork();
	FT_CHECK(child >= 0, "fork");
	if (child == 0) {
		struct ft_msg cm;
		int code = 0;

		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		if (ripc_init() || write(ready[1], "i", 1) != 1 ||
		    read(pfd[0], &c, 1) != 1)
			_exit(3);
		usleep(200000); /* the parent is already sending */
		if (!ripc_register_service_id(late))
			code = 4;
		else if (ft_recv(late, &cm, 10000) ||
			 !ft_is_word(&cm, "late hi"))
			code = 5;
		else
			ft_msg_free(&cm, false);
		ripc_finalize(); /* _exit skips atexit: close the endpoint */
		_exit(code);
	}
	FT_CHECK(read(ready[0], &c, 1) == 1, "child did not initialise");
	FT_CHECK(write(pfd[1], "g", 1) == 1, "pipe");
	t0 = ft_now();
	/* One send: it waits (up to 0.6 s) for the ID to appear. */
	FT_EXPECT(ft_send_word(me, late, "late hi"), RIPC_OK);
	ft_log("late destination reached after %.3f s", ft_now() - t0);
	FT_CHECK(waitpid(child, &st, 0) == child, "waitpid");
	FT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);

	FT_EXPECT(ft_send_word(me, srv, "quit"), RIPC_OK);
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_resolve", 1, 0);
	/* Set before the library reads it (at init). */
	setenv("RIPC_RESOLVE_TIMEOUT_MS", "600", 1);
	ft_lib_init();
	return ft.server ? server() : client();
}
