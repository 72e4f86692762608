/*
 * ripc_bulk - bulk transfer into receive windows.
 *
 *   ripc_bulk server [-i id]        serve service id (default 4300)
 *   ripc_bulk client [-i id] [-n N] send N bulk messages to id
 *   ripc_bulk [-n N]                both: fork a server, run the client
 *
 * -p shm|tcp picks the transport (sets RIPC_PROVIDER).  Exit status 0 when
 * every item arrived intact in the server's windows.
 *
 * The server registers two receive windows for its service.  The client
 * long-sends messages of two items; the server's library pulls each item
 * with RDMA reads straight into a window (the first registered window that
 * is large enough), so ripc_receive() returns pointers into the windows.
 * A window takes one item: the server registers both again before it
 * acknowledges, so they are ready for the next message.  The client reuses
 * its buffers only once the library has released them.
 *
 * Build: cc ripc_bulk.c $(pkg-config --cflags --libs libripc)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ripc.h>

#define TIMEOUT_MS 10000            /* give up instead of hanging */
#define WINDOW_SIZE (4u << 20)      /* each of the server's two windows */
static const uint32_t item_size[2] = { 3u << 20, 1u << 20 };

static uint8_t pattern(uint32_t msg, uint32_t item, uint32_t k)
{
	return (uint8_t)(msg * 13 + item * 101 + k + (k >> 12));
}

/* The server's answer: which message, and was it intact in the windows. */
struct ack {
	uint32_t msg;
	uint32_t ok;
};

static int serve(uint16_t me)
{
	uint8_t *win[2];
	uint8_t err;
	int i;

	/* Plain memory would do as well; ripc_buf_alloc() places it near
	 * the NIC.  Registered for this service only. */
	for (i = 0; i < 2; i++) {
		win[i] = ripc_buf_alloc(WINDOW_SIZE);
		if (!win[i] || ripc_reg_recv_window_for_service(
				       win[i], WINDOW_SIZE, me) != RIPC_OK) {
			fprintf(stderr, "server: window: %s\n",
				ripc_strerror(ripc_last_error()));
			return 1;
		}
	}
	for (uint32_t msg = 0;; msg++) {
		void **si, **li;
		uint32_t *ss, *ls;
		uint16_t ns, nl, from;
		struct ack ack = { msg, 1 };

		err = ripc_receive(me, &from, &si, &ss, &ns, &li, &ls, &nl);
		if (err != RIPC_OK && err != RIPC_ETRUNC) {
			fprintf(stderr, "server: receive: %s\n",
				ripc_strerror(err));
			return 1;
		}
		if (ns || !nl) { /* a short message: the end */
			if (ns)
				ripc_buf_free(si[0]);
			free(si);
			free(ss);
			break;
		}
		ack.ok = err == RIPC_OK && nl == 2;
		for (i = 0; i < nl; i++) {
			const uint8_t *p = li[i];

			if (!p) /* found no room (RIPC_ETRUNC) */
				continue;
			if (p != win[i]) {
				/* Not in the expected window: in a library
				 * buffer, which is ours to free. */
				ack.ok = 0;
				ripc_buf_free(li[i]);
				continue;
			}
			for (uint32_t k = 0; k < ls[i] && ack.ok; k++)
				ack.ok = p[k] == pattern(msg, (uint32_t)i, k);
		}
		free(li);
		free(ls);
		/* Both windows took an item: register them again, then ask
		 * for the next message. */
		for (i = 0; i < 2; i++)
			ripc_reg_recv_window_for_service(win[i], WINDOW_SIZE,
							 me);
		err = ripc_send_short(me, from, (void *[]){ &ack },
				      (uint32_t[]){ sizeof(ack) }, 1, NULL,
				      NULL, 0);
		if (err != RIPC_OK)
			fprintf(stderr, "server: ack: %s\n",
				ripc_strerror(err));
	}
	/* Unregistering the service drops its windows; only then is their
	 * memory the application's alone again. */
	ripc_unregister_service_id(me);
	for (i = 0; i < 2; i++)
		ripc_buf_free(win[i]);
	return 0;
}

static int client(uint16_t server, int count)
{
	uint16_t me = ripc_register_random_service_id();
	uint8_t *buf[2];
	int bad = 0;

	if (me == RIPC_INVALID_SERVICE_ID)
		return 1;
	for (int i = 0; i < 2; i++)
		if (!(buf[i] = ripc_buf_alloc(item_size[i])))
			return 1;
	for (uint32_t msg = 0; msg < (uint32_t)count && !bad; msg++) {
		void *items[2] = { buf[0], buf[1] };
		uint32_t sizes[2] = { item_size[0], item_size[1] };
		void **si;
		uint32_t *ss;
		uint16_t ns, from;
		struct ack ack = { 0, 0 };
		uint8_t err;

		/* The items of the previous message must have been released
		 * before they change (the server pulled them long ago: its
		 * acknowledgement came after the pull). */
		for (int i = 0; i < 2; i++) {
			if (ripc_wait_released(buf[i], TIMEOUT_MS) != RIPC_OK)
				return 1;
			for (uint32_t k = 0; k < item_size[i]; k++)
				buf[i][k] = pattern(msg, (uint32_t)i, k);
		}
		err = ripc_send_long(me, server, items, sizes, 2, NULL, NULL,
				     0);
		if (err == RIPC_OK)
			err = ripc_receive_timeout(me, &from, &si, &ss, &ns,
						   NULL, NULL, NULL,
						   TIMEOUT_MS);
		if (err != RIPC_OK) {
			fprintf(stderr, "client: message %u: %s\n", msg,
				ripc_strerror(err));
			bad = 1;
			break;
		}
		if (ns == 1 && ss[0] == sizeof(ack))
			memcpy(&ack, si[0], sizeof(ack));
		bad = ack.msg != msg || !ack.ok;
		if (msg == 0 || bad)
			printf("client: message %u of %u + %u bytes: %s\n", msg,
			       item_size[0], item_size[1],
			       bad ? "BAD" : "pulled into the windows intact");
		if (ns)
			ripc_buf_free(si[0]);
		free(si);
		free(ss);
	}
	/* An empty short message ends the server. */
	ripc_send_short(me, server, NULL, NULL, 0, NULL, NULL, 0);
	for (int i = 0; i < 2; i++) {
		ripc_wait_released(buf[i], TIMEOUT_MS);
		ripc_buf_free(buf[i]);
	}
	if (!bad)
		printf("client: %d messages, %llu bytes, pulled into the "
		       "windows intact\n",
		       count, (unsigned long long)count *
				      (item_size[0] + item_size[1]));
	return bad;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 && argv[1][0] != '-' ? argv[1] : "both";
	int id = 4300, count = 20, c, status, pfd[2];
	uint16_t srv;
	pid_t child;

	if (strcmp(mode, "both"))
		optind = 2;
	while ((c = getopt(argc, argv, "i:n:p:")) != -1) {
		if (c == 'i')
			id = atoi(optarg);
		else if (c == 'n')
			count = atoi(optarg);
		else if (c == 'p')
			setenv("RIPC_PROVIDER", optarg, 1);
		else
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
		printf("server: serving %d\n", id);
		fflush(stdout);
		return serve((uint16_t)id);
	}
	if (!strcmp(mode, "client"))
		return client((uint16_t)id, count);
	if (strcmp(mode, "both"))
		goto usage;

	/* Both: the child serves and tells the parent its ID. */
	if (pipe(pfd) < 0 || (child = fork()) < 0)
		return 1;
	if (child == 0) {
		srv = ripc_register_service_id(id)
			      ? (uint16_t)id
			      : ripc_register_random_service_id();
		if (write(pfd[1], &srv, sizeof(srv)) != sizeof(srv) ||
		    srv == RIPC_INVALID_SERVICE_ID)
			_exit(1);
		c = serve(srv);
		ripc_finalize();
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
		kill(child, SIGTERM);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		c = 1;
	return c;
usage:
	fprintf(stderr,
		"usage: %s [server|client] [-i id] [-n count] [-p shm|tcp]\n",
		argv[0]);
	return 2;
}
