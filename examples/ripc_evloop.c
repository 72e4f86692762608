/*
 * ripc_evloop - libripc in an epoll event loop: messages, release events
 * and a timer, without a thread that blocks in the library.
 *
 *   ripc_evloop [-p shm|tcp] [-n N]
 *
 * The process forks a worker service.  The main process keeps a pool of
 * four 1 MiB buffers and runs one epoll loop over
 *   - ripc_get_fd(): readable while a message waits or a release event is
 *     pending (release events are turned on by a first
 *     ripc_release_poll(NULL, 0));
 *   - a timerfd that fires every 20 ms: each tick long-sends the next
 *     chunk from a free pool buffer to the worker (the worker pulls it);
 *   - nothing else: an application would add its sockets here.
 * A release event gives a buffer back to the pool; its status tells
 * whether the worker pulled the chunk (RIPC_OK) or not (the worker gave
 * up, the exposure expired: reported, and the run fails).  The worker
 * checks every chunk and answers with its checksum.  Exit status 0 when N
 * chunks were acknowledged intact.
 *
 * Build: cc ripc_evloop.c $(pkg-config --cflags --libs libripc)
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ripc.h>

#define CHUNK (1u << 20)
#define POOL 4
#define WORKER_ID 4300

static uint32_t sum32(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i < n; i++)
		s = s * 31 + p[i];
	return s;
}

static void fill(uint8_t *p, size_t n, uint32_t seq)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seq * 7 + i / 4096 + i);
}

/* The worker: a plain blocking service. */
static int worker(void)
{
	if (!ripc_register_service_id(WORKER_ID)) {
		fprintf(stderr, "worker: register: %s\n",
			ripc_strerror(ripc_last_error()));
		return 1;
	}
	for (;;) {
		void **si, **li;
		uint32_t *ss, *ls, reply[2];
		uint16_t ns, nl, from;
		uint8_t err = ripc_receive(WORKER_ID, &from, &si, &ss, &ns,
					   &li, &ls, &nl);
		void *rb[1] = { reply };
		uint32_t rl[1] = { sizeof(reply) };

		if (err != RIPC_OK) {
			fprintf(stderr, "worker: receive: %s\n",
				ripc_strerror(err));
			return 1;
		}
		if (nl == 0) { /* a short message: "stop" */
			if (ns)
				ripc_buf_free(si[0]);
			free(si), free(ss), free(li), free(ls);
			return 0;
		}
		/* Item 0: the sequence number (short part of the chunk). */
		memcpy(&reply[0], li[0], sizeof(uint32_t));
		reply[1] = sum32(li[1], ls[1]);
		ripc_buf_free(li[0]);
		ripc_buf_free(li[1]);
		free(si), free(ss), free(li), free(ls);
		ripc_send_short(WORKER_ID, from, rb, rl, 1, NULL, NULL, 0);
	}
}

struct slot {
	uint8_t *buf;
	uint32_t seq; /* chunk in it */
	int busy;
};

int main(int argc, char **argv)
{
	static struct slot pool[POOL];
	static uint32_t seqs[POOL];
	int n = 50, opt, ep, tfd, rfd, status, next = 0, acked = 0, bad = 0;
	uint16_t me;
	pid_t child;

	while ((opt = getopt(argc, argv, "p:n:")) != -1) {
		if (opt == 'p')
			setenv("RIPC_PROVIDER", optarg, 1);
		else if (opt == 'n')
			n = atoi(optarg);
		else {
			fprintf(stderr, "usage: %s [-p shm|tcp] [-n N]\n",
				argv[0]);
			return 2;
		}
	}
	child = fork();
	if (child == 0)
		return worker();

	me = ripc_register_random_service_id();
	if (me == RIPC_INVALID_SERVICE_ID) {
		fprintf(stderr, "register: %s\n",
			ripc_strerror(ripc_last_error()));
		kill(child, SIGTERM);
		return 1;
	}
	for (int i = 0; i < POOL; i++)
		pool[i].buf = malloc(CHUNK);
	ripc_release_poll(NULL, 0); /* record release events from now on */
	rfd = ripc_get_fd();
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	ep = epoll_create1(EPOLL_CLOEXEC);
	timerfd_settime(tfd, 0,
			&(struct itimerspec){ { 0, 20000000 }, { 0, 20000000 } },
			NULL);
	epoll_ctl(ep, EPOLL_CTL_ADD, rfd,
		  &(struct epoll_event){ .events = EPOLLIN, .data.fd = rfd });
	epoll_ctl(ep, EPOLL_CTL_ADD, tfd,
		  &(struct epoll_event){ .events = EPOLLIN, .data.fd = tfd });

	while (acked < n && !bad) {
		struct epoll_event ev[4];
		int k = epoll_wait(ep, ev, 4, 10000);

		if (k <= 0) {
			fprintf(stderr, "nothing happened for 10 s\n");
			bad = 1;
			break;
		}
		for (int e = 0; e < k; e++) {
			if (ev[e].data.fd == tfd) {
				uint64_t ticks;

				if (read(tfd, &ticks, sizeof(ticks)) < 0)
					continue;
				/* A free buffer: send the next chunk. */
				for (int i = 0; i < POOL && next < n; i++) {
					struct slot *s = &pool[i];
					void *b[2] = { &seqs[i], s->buf };
					uint32_t l[2] = { sizeof(uint32_t),
							  CHUNK };
					uint8_t err;

					if (s->busy)
						continue;
					s->seq = seqs[i] = (uint32_t)next;
					fill(s->buf, CHUNK, s->seq);
					err = ripc_send_long(me, WORKER_ID, b, l,
							     2, NULL, NULL, 0);
					if (err != RIPC_OK) {
						fprintf(stderr, "send: %s\n",
							ripc_strerror(err));
						break; /* try on the next tick */
					}
					s->busy = 1;
					next++;
					break; /* one chunk per tick */
				}
				continue;
			}
			/* ripc_get_fd(): release events first ... */
			struct ripc_release rel[8];
			int m;

			while ((m = ripc_release_poll(rel, 8)) > 0) {
				for (int j = 0; j < m; j++) {
					for (int i = 0; i < POOL; i++) {
						if (rel[j].buf != pool[i].buf)
							continue;
						pool[i].busy = 0;
						if (rel[j].status == RIPC_OK)
							continue;
						fprintf(stderr,
							"chunk %u not pulled: "
							"%s\n",
							pool[i].seq,
							ripc_strerror(
								rel[j].status));
						bad = 1;
					}
				}
			}
			/* ... then messages: never block in the loop. */
			for (;;) {
				void **si;
				uint32_t *ss, r[2];
				uint16_t ns;
				uint8_t err = ripc_receive_timeout(
					me, NULL, &si, &ss, &ns, NULL, NULL,
					NULL, 0);

				if (err == RIPC_EAGAIN)
					break;
				if (err != RIPC_OK || ns != 1 ||
				    ss[0] != sizeof(r)) {
					fprintf(stderr, "bad answer: %s\n",
						ripc_strerror(err));
					bad = 1;
					break;
				}
				memcpy(r, si[0], sizeof(r));
				ripc_buf_free(si[0]);
				free(si);
				free(ss);
				/* The worker's checksum of chunk r[0]. */
				{
					uint8_t *tmp = malloc(CHUNK);

					fill(tmp, CHUNK, r[0]);
					if (sum32(tmp, CHUNK) != r[1]) {
						fprintf(stderr,
							"chunk %u damaged\n",
							r[0]);
						bad = 1;
					}
					free(tmp);
				}
				acked++;
			}
		}
	}
	{
		char stop[] = "stop";
		void *b[1] = { stop };
		uint32_t l[1] = { sizeof(stop) };

		ripc_send_short(me, WORKER_ID, b, l, 1, NULL, NULL, 0);
	}
	waitpid(child, &status, 0);
	/* Buffers still exposed are released (the worker has exited: at
	 * the latest when the exposure times out) before they are freed. */
	for (int i = 0; i < POOL; i++)
		if (ripc_buf_exposed(pool[i].buf))
			ripc_wait_released(pool[i].buf, -1);
	printf("ripc_evloop: %d chunks of %u KiB acknowledged intact, "
	       "buffers reused on release events; worker exit %d\n",
	       acked, CHUNK >> 10, WEXITSTATUS(status));
	for (int i = 0; i < POOL; i++)
		free(pool[i].buf);
	close(tfd);
	close(ep);
	ripc_finalize();
	return bad || acked < n || !WIFEXITED(status) ||
	       WEXITSTATUS(status);
}
