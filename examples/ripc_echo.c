/*
 * ripc_echo - an echo service and its client: short sends and receives.
 *
 *   ripc_echo server [-i id] [-v]   serve service id (default 4100) until
 *                                   SIGINT or SIGTERM, or an empty message
 *   ripc_echo client [-i id] [-n N] send N messages to id, check the echoes
 *   ripc_echo [-n N]                both: fork a server, run the client
 *
 * -p shm|tcp picks the transport (sets RIPC_PROVIDER); -v makes the server
 * print every message.  Exit status 0 when every message came back intact.
 * `make install` installs it as a tool (man 1 ripc_echo): the server that
 * the first program of README.md talks to.
 *
 * The client never learns where the server runs: it sends to a service ID
 * and libripc resolves it (through the host registry here).  The server
 * echoes each message straight from the buffer it was received in, without
 * copying it, and releases that buffer with ripc_buf_free().
 *
 * Build: cc ripc_echo.c $(pkg-config --cflags --libs libripc)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ripc.h>

#define TIMEOUT_MS 10000 /* give up instead of hanging if the peer died */
#define STOP_CHECK_MS 500 /* how often the server looks at stop_signal */

/* Set by SIGINT and SIGTERM: the server returns from main(), so that the
 * library's atexit handler (ripc_finalize) releases the service ID and the
 * transport's resources instead of leaving them to be reclaimed. */
static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

static int serve(uint16_t me, int verbose)
{
	struct sigaction sa = { .sa_handler = on_stop };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (;;) {
		void **items;
		uint32_t *sizes;
		uint16_t n, from;
		uint8_t err;

		/* Long items are not expected: pass NULL for them.  The
		 * receive gives up now and then so that a stop signal is
		 * noticed. */
		err = ripc_receive_timeout(me, &from, &items, &sizes, &n, NULL,
					   NULL, NULL, STOP_CHECK_MS);
		if (stop_signal) {
			if (err == RIPC_OK && n)
				ripc_buf_free(items[0]);
			if (err == RIPC_OK) {
				free(items);
				free(sizes);
			}
			fprintf(stderr, "server: stopped by signal %d\n",
				(int)stop_signal);
			return 0;
		}
		if (err == RIPC_ETIMEDOUT || err == RIPC_EINTR)
			continue;
		if (err != RIPC_OK) {
			fprintf(stderr, "server: receive: %s\n",
				ripc_strerror(err));
			return 1;
		}
		if (n == 0) { /* an empty message ends the service */
			free(items);
			free(sizes);
			return 0;
		}
		if (verbose)
			printf("server: %u item(s) from service %u, first %u "
			       "bytes: echoed\n",
			       n, from, sizes[0]);
		/* Echo the items from where they were received: the send
		 * copies them, so the buffer can be released right after. */
		err = ripc_send_short(me, from, items, sizes, n, NULL, NULL, 0);
		if (err != RIPC_OK)
			fprintf(stderr, "server: reply to %u: %s\n", from,
				ripc_strerror(err));
		ripc_buf_free(items[0]); /* one buffer holds all items */
		free(items);
		free(sizes);
	}
}

static int client(uint16_t server, int count)
{
	uint16_t me = ripc_register_random_service_id();
	int bad = 0;

	if (me == RIPC_INVALID_SERVICE_ID) {
		fprintf(stderr, "client: register: %s\n",
			ripc_strerror(ripc_last_error()));
		return 1;
	}
	for (int i = 0; i < count && !bad; i++) {
		char text[64];
		uint32_t seq = (uint32_t)i;
		/* Two items: they are gathered into one message and come
		 * back as two items. */
		void *out[2] = { &seq, text };
		uint32_t len[2] = { sizeof(seq), 0 };
		void **in;
		uint32_t *in_len;
		uint16_t n, from;
		uint8_t err;

		len[1] = (uint32_t)snprintf(text, sizeof(text),
					    "hello number %d", i) + 1;
		err = ripc_send_short(me, server, out, len, 2, NULL, NULL, 0);
		if (err == RIPC_OK)
			err = ripc_receive_timeout(me, &from, &in, &in_len, &n,
						   NULL, NULL, NULL,
						   TIMEOUT_MS);
		if (err != RIPC_OK) {
			fprintf(stderr, "client: message %d: %s\n", i,
				ripc_strerror(err));
			return 1;
		}
		bad = from != server || n != 2 || in_len[0] != len[0] ||
		      in_len[1] != len[1] || memcmp(in[0], &seq, len[0]) ||
		      memcmp(in[1], text, len[1]);
		if (i == 0 || bad)
			printf("client: %s: \"%s\"\n",
			       bad ? "BAD echo" : "echo",
			       n == 2 ? (char *)in[1] : "?");
		if (n)
			ripc_buf_free(in[0]);
		free(in);
		free(in_len);
	}
	/* Stop the server with an empty message. */
	ripc_send_short(me, server, NULL, NULL, 0, NULL, NULL, 0);
	if (!bad)
		printf("client: %d messages echoed intact\n", count);
	return bad;
}

/* Take the ID if free, else any free one (another echo server may run). */
static uint16_t register_id(int want)
{
	if (ripc_register_service_id(want))
		return (uint16_t)want;
	return ripc_register_random_service_id();
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 && argv[1][0] != '-' ? argv[1] : "both";
	int id = 4100, count = 1000, verbose = 0, c, status, pfd[2];
	uint16_t srv;
	pid_t child;

	if (strcmp(mode, "both"))
		optind = 2;
	while ((c = getopt(argc, argv, "i:n:p:vh")) != -1) {
		if (c == 'i')
			id = atoi(optarg);
		else if (c == 'n')
			count = atoi(optarg);
		else if (c == 'p')
			setenv("RIPC_PROVIDER", optarg, 1);
		else if (c == 'v')
			verbose = 1;
		else if (c == 'h') {
			printf("usage: %s [server|client] [-i id] [-n count] "
			       "[-p shm|tcp] [-v]\n"
			       "  server  serve an echo service on id "
			       "(default 4100) until SIGINT or SIGTERM\n"
			       "  client  send count messages (default 1000) "
			       "to id and check the echoes\n"
			       "  (none)  both, in two processes\n"
			       "See man 1 ripc_echo.\n",
			       argv[0]);
			return 0;
		} else
			goto usage;
	}
	if (optind != argc || id < 0 || id > RIPC_MAX_SERVICE_ID)
		goto usage;

	if (!strcmp(mode, "server")) {
		if (!ripc_register_service_id(id)) {
			fprintf(stderr, "server: cannot register %d: %s\n", id,
				ripc_strerror(ripc_last_error()));
			return 1;
		}
		/* The ready line: scripts wait for it before they start
		 * clients. */
		printf("server: serving %d\n", id);
		fflush(stdout);
		return serve((uint16_t)id, verbose);
	}
	if (!strcmp(mode, "client"))
		return client((uint16_t)id, count);
	if (strcmp(mode, "both"))
		goto usage;

	/* Both: the child serves and tells the parent its ID over a pipe;
	 * neither touches the library before the fork. */
	if (pipe(pfd) < 0 || (child = fork()) < 0)
		return 1;
	if (child == 0) {
		srv = register_id(id);
		if (write(pfd[1], &srv, sizeof(srv)) != sizeof(srv) ||
		    srv == RIPC_INVALID_SERVICE_ID)
			_exit(1);
		c = serve(srv, 0);
		ripc_finalize(); /* _exit() skips the atexit handler */
		_exit(c);
	}
	close(pfd[1]);
	if (read(pfd[0], &srv, sizeof(srv)) != sizeof(srv) ||
	    srv == RIPC_INVALID_SERVICE_ID) {
		fprintf(stderr, "the server did not start\n");
		waitpid(child, NULL, 0);
		return 1;
	}
	c = client(srv, count);
	if (c)
		kill(child, SIGTERM); /* it may not have been told to stop */
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		c = 1;
	return c;
usage:
	fprintf(stderr,
		"usage: %s [server|client] [-i id] [-n count] [-p shm|tcp] "
		"[-v] [-h]\n",
		argv[0]);
	return 2;
}
