/*
 * ripc_reqrep - request/reply with a return buffer.
 *
 *   ripc_reqrep server [-i id]        serve service id (default 4200)
 *   ripc_reqrep client [-i id] [-n N] N requests to id
 *   ripc_reqrep [-n N]                both: fork a server, run the client
 *
 * -p shm|tcp picks the transport (sets RIPC_PROVIDER).  Exit status 0 when
 * every reply was written into the client's return buffer intact.
 *
 * The client sends a short request and offers a buffer of its own for the
 * reply (a return buffer).  The server answers with a long send of a reply
 * it keeps in its own memory; because the client offered a return buffer,
 * the server's library writes the reply straight into it with an RDMA
 * write, and the client's ripc_receive() hands back a pointer into its
 * own buffer, the data already in place.  (A server may also ignore the
 * offer; the client would then get the reply in a library buffer.)
 *
 * Build: cc ripc_reqrep.c $(pkg-config --cflags --libs libripc)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ripc.h>

#define TIMEOUT_MS 10000      /* give up instead of hanging */
#define REPLY_MAX (1u << 20)  /* largest reply */

/* A request: how many bytes of reply, and a seed for their contents. */
struct request {
	uint32_t size; /* 0: stop serving */
	uint32_t seed;
};

static uint8_t pattern(uint32_t seed, uint32_t k)
{
	return (uint8_t)(seed * 31 + k * 7 + (k >> 8));
}

static int serve(uint16_t me)
{
	/* Replies are exposed from here, so they must be in memory that
	 * outlives the send: the page is reused only once released. */
	uint8_t *page = ripc_buf_alloc(REPLY_MAX);

	if (!page)
		return 1;
	for (;;) {
		struct request rq;
		void **items;
		uint32_t *sizes;
		uint16_t n, from;
		uint8_t err = ripc_receive(me, &from, &items, &sizes, &n, NULL,
					   NULL, NULL);

		if (err != RIPC_OK) {
			fprintf(stderr, "server: receive: %s\n",
				ripc_strerror(err));
			return 1;
		}
		if (n != 1 || sizes[0] != sizeof(rq)) {
			rq.size = UINT32_MAX; /* not a request: ignore it */
		} else {
			memcpy(&rq, items[0], sizeof(rq));
		}
		if (n)
			ripc_buf_free(items[0]);
		free(items);
		free(sizes);
		if (rq.size == 0)
			break;
		if (rq.size > REPLY_MAX)
			continue;

		/* The previous reply may still be in flight. */
		ripc_wait_released(page, TIMEOUT_MS);
		for (uint32_t k = 0; k < rq.size; k++)
			page[k] = pattern(rq.seed, k);
		/* No return buffers of our own (0): that lets the library
		 * use the ones the client offered with its request. */
		void *item[1] = { page };
		uint32_t len[1] = { rq.size };

		err = ripc_send_long(me, from, item, len, 1, NULL, NULL, 0);
		if (err != RIPC_OK)
			fprintf(stderr, "server: reply: %s\n",
				ripc_strerror(err));
	}
	ripc_wait_released(page, TIMEOUT_MS);
	ripc_buf_free(page);
	return 0;
}

static int client(uint16_t server, int count)
{
	uint16_t me = ripc_register_random_service_id();
	uint8_t *rbuf = ripc_buf_alloc(REPLY_MAX);
	struct request rq;
	int bad = 0, i;

	if (me == RIPC_INVALID_SERVICE_ID || !rbuf) {
		fprintf(stderr, "client: setup: %s\n",
			ripc_strerror(ripc_last_error()));
		return 1;
	}
	for (i = 0; i < count && !bad; i++) {
		void *item[1] = { &rq };
		uint32_t len[1] = { sizeof(rq) };
		void *ret[1] = { rbuf };          /* the return buffer */
		uint32_t ret_len[1] = { REPLY_MAX };
		void **li;
		uint32_t *ls;
		uint16_t nl, from;
		uint8_t err;

		rq.size = 1000u << (i % 10); /* 1 kB ... 512 kB */
		rq.seed = (uint32_t)i;
		err = ripc_send_short(me, server, item, len, 1, ret, ret_len,
				      1);
		if (err == RIPC_OK)
			err = ripc_receive_timeout(me, &from, NULL, NULL, NULL,
						   &li, &ls, &nl, TIMEOUT_MS);
		if (err != RIPC_OK) {
			fprintf(stderr, "client: request %d: %s\n", i,
				ripc_strerror(err));
			ripc_return_bufs_cancel(server);
			bad = 1;
			break;
		}
		if (nl != 1 || ls[0] != rq.size) {
			bad = 1;
		} else {
			const uint8_t *p = li[0];

			for (uint32_t k = 0; k < rq.size && !bad; k++)
				bad = p[k] != pattern(rq.seed, k);
			if (li[0] != rbuf) {
				/* The server ignored the offer: the reply
				 * was pulled into a library buffer. */
				fprintf(stderr, "client: reply %d not in the "
					"return buffer\n", i);
				ripc_buf_free(li[0]);
				bad = 1;
			}
		}
		if (i == 0 || bad)
			printf("client: reply of %u bytes %s\n", rq.size,
			       bad ? "BAD" : "written into the return buffer");
		free(li);
		free(ls);
	}
	rq.size = 0; /* stop the server */
	ripc_send_short(me, server, (void *[]){ &rq },
			(uint32_t[]){ sizeof(rq) }, 1, NULL, NULL, 0);
	if (!bad)
		printf("client: %d replies written into the return buffer "
		       "intact\n", count);
	ripc_buf_free(rbuf);
	return bad;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 && argv[1][0] != '-' ? argv[1] : "both";
	int id = 4200, count = 100, c, status, pfd[2];
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
