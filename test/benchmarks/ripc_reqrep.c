/*
 * ripc_reqrep - request/reply with long replies, with and without return
 * buffers (issue 3).
 *
 *   server:  ripc_reqrep -s -p shm -r ready.txt          (prints its ID)
 *   client:  ripc_reqrep -p shm -x retbuf -S 4k,1m,64m ID
 *            ripc_reqrep -p shm -x pull   -S 4k,1m,64m ID
 *
 * The client short-sends a 24-byte request naming the reply size; the
 * server answers with a long send of that many bytes from one buffer of
 * its own (ripc_buf_alloc memory, the way the man pages suggest for
 * memory that is long-sent).  One request is outstanding at a time.
 *
 * Where the reply lands (-x, client side; the server does the same in
 * both modes, a long send without return buffers of its own):
 *   retbuf  every request offers one return buffer of exactly the reply
 *           size; the server's library RDMA-writes the reply into it and
 *           sends one message naming it (ripc_send_short(3), "Return
 *           buffers").  Each offer is registered afresh by the library.
 *   pull    no return buffer: the server's library exposes the reply and
 *           the client's library pulls it with RDMA reads into a receive
 *           window that the client registered for its service, and
 *           registers again after every reply (a window takes one item).
 * The client's buffer, return buffer or window, comes from ripc_buf_alloc
 * (bench_land), as ripc_send_short(3) advises for return buffers: the
 * server's library writes into one over shm with process_vm_writev,
 * 2-2.5x slower into plain pages from 1 MiB up.
 *
 * Printed per size (the client):
 *
 *     libripc_reqrep_retbuf shm 1048576 lat_us 123.45 us
 *     libripc_reqrep_retbuf shm 1048576 bw_MBps 8500.00 MBps
 *
 * lat_us is the median time from the request's send to the reply's
 * receive (a whole request-to-reply time, not half of it as in the
 * ping-pong); bw_MBps is reply bytes x replies / time (MB = 10^6 B).
 *
 * Checks: the server stamps the reply's first and last 8 bytes with the
 * request's sequence number, so every reply is known to be the answer to
 * its own request and to have landed (the client clears both ends of its
 * buffer before each request); replies that did not land where the mode
 * says (the return buffer, or the window) are counted on stderr, because
 * the figure would then be a mix of both paths.  The first warm-up request
 * of each size is checked byte for byte.
 *
 * The server rewrites the stamps only once the previous reply has been
 * released (ripc_wait_released), as the ownership rules require; after a
 * return-buffer write that is the case as soon as the write completed,
 * after a pull once the client's library said it is done, which it says
 * at the latest inside the client's next request (RIPC_DONE_DELAY_US:
 * the done rides in it and is handled before it), so the wait is normally
 * empty.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define REQ_MAGIC 0x51455252u /* "RREQ" */
#define BYE_MAGIC 0x20455942u /* "BYE " */
#define MIN_TIMED 4
#define WARM_BYTES (64ull << 20) /* warm-up budget per size, besides -w */
#define REPLY_TIMEOUT_MS 30000

struct request {
	uint32_t magic;
	uint32_t size;   /* reply bytes */
	uint64_t seq;    /* stamped into both ends of the reply */
	uint32_t verify; /* informational: the client checks every byte */
	uint32_t pad;
};

/* ---- server ----------------------------------------------------------- */

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	uint8_t *buf = NULL;
	size_t cap = 0, cur = 0;
	uint64_t replies = 0, waits = 0;

	if (me == RIPC_INVALID_SERVICE_ID)
		bench_die("register: %s", ripc_strerror(ripc_last_error()));
	bench_ready(me);
	for (;;) {
		void **si = NULL, **li = NULL;
		uint32_t *ss = NULL, *ls = NULL;
		uint16_t ns = 0, nl = 0, from;
		struct request rq;
		uint8_t r;

		r = ripc_receive(me, &from, &si, &ss, &ns, &li, &ls, &nl);
		if (r)
			bench_die("receive: %s", ripc_strerror(r));
		for (unsigned i = 0; i < nl; i++)
			ripc_buf_free(li[i]);
		if (ns != 1 || ss[0] != sizeof(rq)) {
			bench_log("unexpected message (%u short, %u long "
				  "items): ignored",
				  ns, nl);
			bench_free_msg(ns, si, ss, li, ls);
			continue;
		}
		memcpy(&rq, si[0], sizeof(rq));
		bench_free_msg(ns, si, ss, li, ls);
		if (rq.magic == BYE_MAGIC) {
			void *b[1] = { &rq };
			uint32_t l[1] = { sizeof(rq) };

			r = ripc_send_short(me, from, b, l, 1, NULL, NULL, 0);
			if (r)
				bench_log("BYE: %s", ripc_strerror(r));
			break;
		}
		if (rq.magic != REQ_MAGIC || rq.size < 16)
			bench_die("bad request (magic %#x, size %u)", rq.magic,
				  rq.size);
		/* The reply buffer may change only once released; count
		 * the times that meant waiting (-v), as a wait sleeps. */
		if (buf && ripc_buf_exposed(buf)) {
			waits++;
			if (ripc_wait_released(buf, REPLY_TIMEOUT_MS))
				bench_die("reply buffer still exposed after "
					  "%d ms",
					  REPLY_TIMEOUT_MS);
		}
		if (rq.size != cur) {
			/* A new size: happens at the start of a size's
			 * warm-up only, never in the timed part. */
			if (rq.size > cap) {
				ripc_buf_free(buf);
				buf = ripc_buf_alloc(rq.size);
				if (!buf)
					bench_die("ripc_buf_alloc(%u): %s",
						  rq.size,
						  ripc_strerror(
							  ripc_last_error()));
				cap = rq.size;
			}
			bench_fill(buf, rq.size);
			cur = rq.size;
		}
		memcpy(buf, &rq.seq, 8);
		memcpy(buf + rq.size - 8, &rq.seq, 8);

		void *item[1] = { buf };
		uint32_t len[1] = { rq.size };

		/* No return buffers of our own: that lets the library use
		 * the one the client offered, if any. */
		r = ripc_send_long(me, from, item, len, 1, NULL, NULL, 0);
		if (r)
			bench_die("reply of %u bytes to %u: %s", rq.size, from,
				  ripc_strerror(r));
		replies++;
	}
	if (buf) {
		if (ripc_wait_released(buf, 5000))
			bench_log("reply buffer still exposed at exit");
		ripc_buf_free(buf);
	}
	if (bo.verbose) {
		struct ripc_stats st;

		ripc_stats(&st, sizeof(st));
		bench_log("%llu replies (%llu waited for the previous one's "
			  "release); %llu into return buffers (%llu "
			  "bytes written), %llu long sends in all",
			  (unsigned long long)replies, (unsigned long long)waits,
			  (unsigned long long)st.return_replies_sent,
			  (unsigned long long)st.bytes_return_written,
			  (unsigned long long)st.long_sent);
	}
	return 0;
}

/* ---- client ----------------------------------------------------------- */

static bool retbuf_mode;
static uint8_t *land;  /* the return buffer, or the receive window */
static size_t land_cap;
static uint64_t seq;

/* One request and its reply; returns false when the reply did not land
 * where the mode says (it is then checked and released anyway). */
static bool request(uint16_t me, uint32_t size, bool check)
{
	struct request rq = { .magic = REQ_MAGIC, .size = size,
			      .seq = ++seq, .verify = check };
	void *b[1] = { &rq };
	uint32_t l[1] = { sizeof(rq) };
	void *rb[1] = { land };
	uint32_t rl[1] = { size };
	void **si = NULL, **li = NULL;
	uint32_t *ss = NULL, *ls = NULL;
	uint16_t ns = 0, nl = 0, from;
	uint64_t head, tail;
	bool where;
	uint8_t r;

	/* Clear both ends, so that a reply that did not land shows. */
	memset(land, 0, 8);
	memset(land + size - 8, 0, 8);
	if (check)
		memset(land, 0, size);
	r = ripc_send_short(me, bo.server_id, b, l, 1, retbuf_mode ? rb : NULL,
			    retbuf_mode ? rl : NULL, retbuf_mode ? 1 : 0);
	if (r)
		bench_die("request of %u bytes: %s", size, ripc_strerror(r));
	/* Bounded: a lost reply ends the run instead of hanging it. */
	r = ripc_receive_timeout(me, &from, &si, &ss, &ns, &li, &ls, &nl,
				 REPLY_TIMEOUT_MS);
	if (r)
		bench_die("waiting for the reply of %u bytes: %s", size,
			  ripc_strerror(r));
	if (from != bo.server_id || nl != 1 || ns != 0 || ls[0] != size ||
	    !li[0])
		bench_die("unexpected reply (%u short, %u long items, %u "
			  "bytes) to a request of %u bytes",
			  ns, nl, nl ? ls[0] : 0, size);
	memcpy(&head, li[0], 8);
	memcpy(&tail, (uint8_t *)li[0] + size - 8, 8);
	if (head != seq || tail != seq)
		bench_die("reply %llu of %u bytes carries stamps %llu/%llu",
			  (unsigned long long)seq, size,
			  (unsigned long long)head, (unsigned long long)tail);
	if (check && !bench_verify(li[0], size))
		bench_die("reply of %u bytes is corrupt", size);
	where = li[0] == land;
	if (!where)
		ripc_buf_free(li[0]); /* a library buffer */
	/* A window takes one item: register it again for the next reply. */
	if (!retbuf_mode && where &&
	    ripc_reg_recv_window_for_service(land, land_cap, me))
		bench_die("receive window again: %s",
			  ripc_strerror(ripc_last_error()));
	bench_free_msg(ns, si, ss, li, ls);
	return where;
}

static int client(void)
{
	uint16_t me = ripc_register_random_service_id();
	size_t *sizes, nsizes = bench_sizes(bo.sizes, &sizes);
	double *t = malloc(((size_t)bo.iters + 1) * sizeof(*t));

	if (!bo.mode || (strcmp(bo.mode, "retbuf") && strcmp(bo.mode, "pull")))
		bench_die("-x must be retbuf or pull");
	retbuf_mode = !strcmp(bo.mode, "retbuf");
	if (!t)
		bench_die("out of memory");
	if (me == RIPC_INVALID_SERVICE_ID)
		bench_die("register: %s", ripc_strerror(ripc_last_error()));
	land_cap = bench_max_size(sizes, nsizes);
	if (land_cap > RIPC_LONG_ITEM_MAX)
		bench_die("size %zu is above the long item maximum", land_cap);
	bench_check_transport(bo.server_id);
	land = bench_land(land_cap);
	if (!retbuf_mode &&
	    ripc_reg_recv_window_for_service(land, land_cap, me))
		bench_die("receive window: %s",
			  ripc_strerror(ripc_last_error()));

	for (size_t k = 0; k < nsizes; k++) {
		uint32_t size = (uint32_t)sizes[k];
		long warm = bo.warmup, n = 0, missed = 0;
		double deadline;

		if (size < 16)
			bench_die("sizes must be at least 16 bytes");
		if ((uint64_t)warm * size > WARM_BYTES)
			warm = (long)(WARM_BYTES / size);
		if (warm < 1)
			warm = 1;
		/* The first warm-up reply is checked byte for byte. */
		for (long i = 0; i < warm; i++)
			missed += !request(me, size, i == 0);
		if (missed)
			bench_log("size %u: %ld of %ld warm-up replies missed "
				  "the %s",
				  size, missed, warm,
				  retbuf_mode ? "return buffer" : "window");
		missed = 0;
		/* t[i] = start of request i; t[n] = end of the last. */
		deadline = bench_now() + bo.max_sec;
		t[0] = bench_now();
		while (n < bo.iters) {
			missed += !request(me, size, false);
			t[++n] = bench_now();
			if (t[n] > deadline && n >= MIN_TIMED)
				break;
		}
		double total = t[n] - t[0];

		for (long i = 0; i < n; i++)
			t[i] = (t[i + 1] - t[i]) * 1e6;
		bench_emit(bo.system, bo.label, size, "lat_us",
			   bench_median(t, (size_t)n), "us");
		bench_emit(bo.system, bo.label, size, "bw_MBps",
			   (double)size * (double)n / total / 1e6, "MBps");
		if (missed)
			bench_log("size %u: %ld of %ld replies missed the %s "
				  "(the figure mixes both paths)",
				  size, missed, n,
				  retbuf_mode ? "return buffer" : "window");
		if (bo.verbose)
			bench_log("size %u: %ld requests in %.3f s, p99 %.1f us",
				  size, n, total, t[(size_t)n * 99 / 100]);
	}

	/* Offers that were never answered must end before the memory goes;
	 * every request was answered, so this normally finds nothing. */
	if (retbuf_mode)
		ripc_return_bufs_cancel(bo.server_id);
	else
		ripc_unreg_recv_window(land);
	ripc_buf_free(land);
	if (bo.verbose) {
		struct ripc_stats st;

		ripc_stats(&st, sizeof(st));
		bench_log("return replies received %llu, window hits %llu, "
			  "library buffers %llu",
			  (unsigned long long)st.return_replies_recv,
			  (unsigned long long)st.window_hits,
			  (unsigned long long)st.library_buffers);
	}

	/* BYE, and wait up to 2 s for the server's BYE. */
	struct request bye = { .magic = BYE_MAGIC };
	void *b[1] = { &bye };
	uint32_t l[1] = { sizeof(bye) };

	if (ripc_send_short(me, bo.server_id, b, l, 1, NULL, NULL, 0))
		bench_log("sending BYE: %s", ripc_strerror(ripc_last_error()));
	for (int tries = 0; tries < 4; tries++) {
		void **si = NULL, **li = NULL;
		uint32_t *ss = NULL, *ls = NULL;
		uint16_t ns = 0, nl = 0, from;
		bool done;

		if (ripc_receive_timeout(me, &from, &si, &ss, &ns, &li, &ls,
					 &nl, 500))
			continue;
		done = ns == 1 && ss[0] == sizeof(bye) &&
		       ((struct request *)si[0])->magic == BYE_MAGIC;
		for (unsigned i = 0; i < nl; i++)
			if (li[i] && li[i] != land)
				ripc_buf_free(li[i]);
		bench_free_msg(ns, si, ss, li, ls);
		if (done)
			break;
	}
	free(t);
	free(sizes);
	return 0;
}

int main(int argc, char **argv)
{
	int ret;

	bo = (struct bench_opts){
		.sizes = "4k,16k,64k,256k,1m,4m,16m,64m",
		.system = NULL,
		.iters = 20000,
		.warmup = 20,
		.max_sec = 1.0,
		.time_limit = 120,
		.window = 1,
	};
	bench_parse(argc, argv,
		    "  -x retbuf|pull  client: the reply is written into a "
		    "return buffer, or pulled into a receive window\n");
	/* The system column names the mode unless -N says otherwise. */
	if (!bo.system)
		bo.system = bo.mode && !strcmp(bo.mode, "pull")
				    ? "libripc_reqrep_pull"
				    : "libripc_reqrep_retbuf";
	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_lib_init();
	ret = bo.server ? server() : client();
	ripc_finalize();
	return ret;
}
