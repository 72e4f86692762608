/*
 * ripc_long_bw - long-send bandwidth of libripc.
 *
 *   server:  ripc_long_bw -s -p shm -S 64k,1m,64m -W 1 [-x window|lib]
 *   client:  ripc_long_bw -p shm -S 64k,1m,64m -W 1 ID
 *
 * The client long-sends one item of SIZE bytes; the server's library pulls
 * it with RDMA reads, the server receives the message and answers with a
 * short "done" message carrying what it found at the item's two ends.  The
 * client keeps -W such sends in flight (each from its own buffer) and
 * reports SIZE * messages / time as bw_MBps (MB = 10^6 bytes):
 *
 *     libripc shm 1048576 bw_MBps 5432.10 MBps
 *
 * Where the pulled data lands (-x, server side):
 *   window  receive windows registered in advance, one per message in
 *           flight, each registered again right after its message was
 *           received (before the answer, so it is back in place before
 *           the client can send the next message) -- the fast path;
 *   lib     no windows: the library allocates and registers a buffer per
 *           message and the server frees it (libRIPC's default path);
 *   release as window, but the server does not answer: the client waits
 *           with ripc_wait_released() until the server's library said it
 *           has pulled the item (its DONE), which is the raw pull's
 *           protocol (descriptor, read, DONE; fi_rma_bench -U).  Give -x
 *           release to both sides.  Every message is still checked: the
 *           server counts items whose two ends differ or whose stamps do
 *           not increase, and the client fails if its answer to BYE
 *           names any.  The warm-up of each size ends with a short SYNC
 *           that the server answers once it has handled every warm-up
 *           message: those are checked byte for byte, and a release
 *           comes as soon as the pull is done, so without it the first
 *           timed messages found the windows still held by that check
 *           and went to library buffers (a fresh one cost a 64 MiB
 *           message up to ~180 ms on a new VM: the timed figure was the
 *           check's, not the transfer's).
 *
 * Checks, none of them inside the timed part's hot path: the client stamps
 * the first and last 8 bytes of each item with a per-message value and
 * the server sends back what it read there, so every message is known to
 * have landed; warm-up messages carry a flag that makes the server verify
 * every byte.  In window mode the server also reports items that did not
 * land in a window (the library then used a buffer of its own); they are
 * counted on stderr, as they would make the figure a mix of both paths.
 *
 * Both sides must be given the same -S and -W (the server sizes its
 * windows from them).  The client ends the server with a short "BYE".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define BYE "BYE"
#define SYNC "SYNC"
#define VERIFY_FLAG (1ull << 63)
#define MAX_WINDOW 64
#define BYTES_BUDGET (2ull << 30) /* per size, besides -n and -t */
#define MIN_TIMED 4

/* The server's answer to one long message. */
struct reply {
	uint64_t head, tail; /* the item's first and last 8 bytes */
	uint32_t len;        /* the item's length */
	uint32_t verified;   /* 0 not checked, 1 every byte right, 2 wrong */
	uint32_t missed;     /* window mode, but it did not land in one */
	uint32_t pad;
};

/* One short item holding exactly `word` and its terminating NUL. */
static bool is_word(uint16_t ns, void **si, const uint32_t *ss,
		    const char *word)
{
	return ns == 1 && ss[0] == strlen(word) + 1 &&
	       !memcmp(si[0], word, ss[0]);
}

static bool is_bye(uint16_t ns, void **si, const uint32_t *ss)
{
	return is_word(ns, si, ss, BYE);
}

static bool is_sync(uint16_t ns, void **si, const uint32_t *ss)
{
	return is_word(ns, si, ss, SYNC);
}

static void send_word(uint16_t me, uint16_t to, const char *word)
{
	void *b[1] = { (void *)word };
	uint32_t l[1] = { (uint32_t)strlen(word) + 1 };
	uint8_t r = ripc_send_short(me, to, b, l, 1, NULL, NULL, 0);

	if (r)
		bench_log("sending %s: %s", word, ripc_strerror(r));
}

static void send_bye(uint16_t me, uint16_t to)
{
	send_word(me, to, BYE);
}

/* ---- server ----------------------------------------------------------- */

static bool release_mode(void)
{
	return bo.mode && !strcmp(bo.mode, "release");
}

static int server(void)
{
	bool windows = !bo.mode || !strcmp(bo.mode, "window") ||
		       release_mode();
	uint64_t bad = 0, last = 0;
	uint16_t me = ripc_register_random_service_id();
	size_t *sizes, nsizes = bench_sizes(bo.sizes, &sizes), max;
	uint8_t *win[MAX_WINDOW] = { 0 };
	uint64_t msgs = 0, missed = 0;

	if (bo.mode && strcmp(bo.mode, "window") && strcmp(bo.mode, "lib") &&
	    !release_mode())
		bench_die("-x must be window, lib or release");
	if (me == RIPC_INVALID_SERVICE_ID)
		bench_die("register: %s", ripc_strerror(ripc_last_error()));
	max = bench_max_size(sizes, nsizes);
	/* One window per message in flight, plus one: the client sends the
	 * next message as soon as it has our answer, which is after we
	 * registered the window again, so W + 1 is never short. */
	for (int i = 0; windows && i <= bo.window; i++) {
		win[i] = bench_map(max);
		if (ripc_reg_recv_window_for_service(win[i], max, me))
			bench_die("receive window: %s",
				  ripc_strerror(ripc_last_error()));
	}
	bench_ready(me);

	for (;;) {
		void **si = NULL, **li = NULL;
		uint32_t *ss = NULL, *ls = NULL;
		uint16_t ns = 0, nl = 0, from;
		struct reply rep = { 0 };
		uint8_t r;

		r = ripc_receive(me, &from, &si, &ss, &ns, &li, &ls, &nl);
		if (r)
			bench_die("receive: %s", ripc_strerror(r));
		if (is_bye(ns, si, ss)) {
			if (release_mode()) {
				/* The count of bad items, then BYE. */
				void *b[1] = { &bad };
				uint32_t l[1] = { sizeof(bad) };

				ripc_send_short(me, from, b, l, 1, NULL, NULL,
						0);
			}
			send_bye(me, from);
			if (bo.verbose)
				bench_log_stats();
			bench_free_msg(ns, si, ss, li, ls);
			break;
		}
		if (is_sync(ns, si, ss)) {
			/* Release mode: every message before it is handled
			 * and its window registered again. */
			send_word(me, from, SYNC);
			bench_free_msg(ns, si, ss, li, ls);
			continue;
		}
		if (nl != 1 || ls[0] < 16) {
			bench_log("unexpected message (%u short, %u long "
				  "items): ignored",
				  ns, nl);
			for (unsigned i = 0; i < nl; i++)
				ripc_buf_free(li[i]);
			bench_free_msg(ns, si, ss, li, ls);
			continue;
		}
		uint8_t *item = li[0];
		size_t len = ls[0];

		msgs++;
		rep.len = (uint32_t)len;
		memcpy(&rep.head, item, 8);
		memcpy(&rep.tail, item + (len & ~7ul) - 8, 8);
		bool in_window = false;

		for (int i = 0; i <= bo.window && windows; i++)
			in_window |= item == win[i];
		rep.missed = windows && !in_window;
		if (rep.head & VERIFY_FLAG) {
			rep.verified = bench_verify(item, len) ? 1 : 2;
			/* Clear it, so the next check sees fresh data. */
			memset(item, 0, len);
		}
		if (in_window) {
			if (ripc_reg_recv_window_for_service(item, max, me))
				bench_die("receive window again: %s",
					  ripc_strerror(ripc_last_error()));
		} else {
			missed += rep.missed;
			ripc_buf_free(item);
		}
		if (release_mode()) {
			/* No answer: the client waits for the release. */
			uint64_t stamp = rep.head & ~VERIFY_FLAG;

			bad += rep.head != rep.tail || stamp <= last ||
			       rep.verified == 2;
			last = stamp;
			bench_free_msg(ns, si, ss, li, ls);
			continue;
		}
		void *b[1] = { &rep };
		uint32_t l[1] = { sizeof(rep) };

		r = ripc_send_short(me, from, b, l, 1, NULL, NULL, 0);
		if (r)
			bench_die("answer to %u: %s", from, ripc_strerror(r));
		bench_free_msg(ns, si, ss, li, ls);
	}
	if (bo.verbose || missed)
		bench_log("%llu long messages, %llu of them missed a window",
			  (unsigned long long)msgs, (unsigned long long)missed);
	free(sizes);
	return 0;
}

/* ---- client ----------------------------------------------------------- */

struct slot {
	uint8_t *buf;
	uint64_t stamp; /* the value at both ends of the item in flight */
	bool busy;
};

static struct slot slot[MAX_WINDOW];
static uint64_t seq;
static bool released_checked; /* release mode: the server's count came */

static void post(uint16_t me, unsigned s, uint32_t size, bool check)
{
	void *b[1] = { slot[s].buf };
	uint32_t l[1] = { size };
	uint8_t r;

	/* Low byte = slot, so the answer names the slot it frees. */
	slot[s].stamp = (++seq << 8 | s) | (check ? VERIFY_FLAG : 0);
	memcpy(slot[s].buf, &slot[s].stamp, 8);
	memcpy(slot[s].buf + (size & ~7u) - 8, &slot[s].stamp, 8);
	r = ripc_send_long(me, bo.server_id, b, l, 1, NULL, NULL, 0);
	if (r)
		bench_die("long send of %u bytes: %s", size, ripc_strerror(r));
	slot[s].busy = true;
}

/* Release mode: wait until the library has released the oldest item in
 * flight (the server's DONE came); returns its slot. */
static unsigned reap_release(void)
{
	unsigned s = 0;

	for (unsigned i = 1; i < (unsigned)bo.window; i++)
		if (slot[i].busy && (!slot[s].busy ||
				     slot[i].stamp < slot[s].stamp))
			s = i;
	uint8_t r = ripc_wait_released(slot[s].buf, 30000);

	if (r)
		bench_die("waiting for the release of slot %u: %s", s,
			  ripc_strerror(r));
	slot[s].busy = false;
	return s;
}

/* Release mode, after the warm-up: the server has handled every message
 * sent so far (it checked the warm-up's items byte for byte, which takes
 * longer than their pulls) once it answers SYNC. */
static void wait_sync(uint16_t me)
{
	send_word(me, bo.server_id, SYNC);
	for (int tries = 0; tries < 60; tries++) {
		void **si = NULL, **li = NULL;
		uint32_t *ss = NULL, *ls = NULL;
		uint16_t ns = 0, nl = 0, from;
		bool sync;
		uint8_t r = ripc_receive_timeout(me, &from, &si, &ss, &ns, &li,
						 &ls, &nl, 500);

		if (r == RIPC_ETIMEDOUT)
			continue;
		if (r)
			bench_die("waiting for SYNC: %s", ripc_strerror(r));
		sync = is_sync(ns, si, ss);
		bench_free_msg(ns, si, ss, li, ls);
		if (sync)
			return;
	}
	bench_die("the server did not answer SYNC within 30 s");
}

/* Wait for one answer; returns the slot it frees. */
static unsigned reap(uint16_t me, uint32_t size, uint64_t *missed)
{
	if (release_mode())
		return reap_release();
	void **si = NULL, **li = NULL;
	uint32_t *ss = NULL, *ls = NULL;
	uint16_t ns = 0, nl = 0, from;
	struct reply rep;
	unsigned s;
	uint8_t r;

	/* Bounded: a lost answer ends the run instead of hanging it. */
	r = ripc_receive_timeout(me, &from, &si, &ss, &ns, &li, &ls, &nl,
				 30000);
	if (r)
		bench_die("waiting for the server's answer (%u bytes): %s",
			  size, ripc_strerror(r));
	if (ns != 1 || ss[0] != sizeof(rep))
		bench_die("unexpected answer (%u items)", ns);
	memcpy(&rep, si[0], sizeof(rep));
	bench_free_msg(ns, si, ss, li, ls);
	s = rep.head & 0xff;
	if (s >= (unsigned)bo.window || !slot[s].busy ||
	    rep.head != slot[s].stamp || rep.tail != slot[s].stamp ||
	    rep.len != size)
		bench_die("server read %#llx/%#llx (%u bytes), expected %#llx "
			  "(%u bytes)",
			  (unsigned long long)rep.head,
			  (unsigned long long)rep.tail, rep.len,
			  (unsigned long long)(s < MAX_WINDOW ? slot[s].stamp
							      : 0),
			  size);
	if (rep.verified == 2)
		bench_die("pulled data of %u bytes is corrupt", size);
	*missed += rep.missed;
	slot[s].busy = false;
	return s;
}

static int client(void)
{
	uint16_t me = ripc_register_random_service_id();
	size_t *sizes, nsizes = bench_sizes(bo.sizes, &sizes), max;
	unsigned w = (unsigned)bo.window;
	const char *tr;

	if (me == RIPC_INVALID_SERVICE_ID)
		bench_die("register: %s", ripc_strerror(ripc_last_error()));
	if (w > MAX_WINDOW - 1)
		bench_die("-W is at most %d", MAX_WINDOW - 1);
	max = bench_max_size(sizes, nsizes);
	if (max > RIPC_LONG_ITEM_MAX)
		bench_die("size %zu is above the long item maximum", max);
	tr = ripc_transport_of(bo.server_id);
	if (!tr)
		bench_die("server %u unreachable: %s", bo.server_id,
			  ripc_strerror(ripc_last_error()));
	if (bo.prov && strcmp(tr, bo.prov))
		bench_die("server reached over %s, not %s", tr, bo.prov);
	/* Library-allocated (registered, NUMA-placed) memory: the way the
	 * man pages suggest to allocate what will be long-sent. */
	for (unsigned s = 0; s < w; s++) {
		slot[s].buf = ripc_buf_alloc(max);
		if (!slot[s].buf)
			bench_die("ripc_buf_alloc(%zu): %s", max,
				  ripc_strerror(ripc_last_error()));
	}

	for (size_t k = 0; k < nsizes; k++) {
		uint32_t size = (uint32_t)sizes[k];
		uint64_t n = BYTES_BUDGET / size, posted = 0, done = 0;
		uint64_t missed = 0;
		long warm = bo.warmup;
		double t0, t1, deadline;

		if (size < 16)
			bench_die("sizes must be at least 16 bytes");
		if (n > (uint64_t)bo.iters)
			n = (uint64_t)bo.iters;
		if (n < MIN_TIMED)
			n = MIN_TIMED;
		for (unsigned s = 0; s < w; s++)
			bench_fill(slot[s].buf, size);

		/* Warm-up, every byte checked, one message at a time. */
		for (long i = 0; i < warm; i++) {
			post(me, 0, size, true);
			reap(me, size, &missed);
		}
		if (release_mode() && warm > 0)
			wait_sync(me);
		missed = 0;

		t0 = bench_now();
		deadline = t0 + bo.max_sec;
		for (unsigned s = 0; s < w && posted < n; s++, posted++)
			post(me, s, size, false);
		while (done < posted) {
			unsigned s = reap(me, size, &missed);

			done++;
			/* Out of time: stop posting, let the rest drain. */
			if (posted < n && done >= MIN_TIMED &&
			    bench_now() > deadline)
				n = posted;
			if (posted < n) {
				post(me, s, size, false);
				posted++;
			}
		}
		t1 = bench_now();
		bench_emit(bo.system, bo.label, size, "bw_MBps",
			   (double)size * (double)done / (t1 - t0) / 1e6,
			   "MBps");
		if (missed)
			bench_log("size %u: %llu of %llu messages missed a "
				  "receive window",
				  size, (unsigned long long)missed,
				  (unsigned long long)done);
		if (bo.verbose)
			bench_log("size %u: %llu messages, %d in flight, "
				  "%.3f s",
				  size, (unsigned long long)done, w, t1 - t0);
	}

	/* All items are back with us (every answer came); make sure the
	 * library has released them before the buffers go. */
	for (unsigned s = 0; s < w; s++) {
		if (ripc_wait_released(slot[s].buf, 5000))
			bench_log("buffer %u still exposed after 5 s", s);
		ripc_buf_free(slot[s].buf);
	}
	send_bye(me, bo.server_id);
	for (int tries = 0; tries < 4; tries++) {
		void **si = NULL, **li = NULL;
		uint32_t *ss = NULL, *ls = NULL;
		uint16_t ns = 0, nl = 0, from;
		bool bye;

		if (ripc_receive_timeout(me, &from, &si, &ss, &ns, &li, &ls,
					 &nl, 500))
			continue;
		bye = is_bye(ns, si, ss);
		if (release_mode() && ns == 1 && ss[0] == sizeof(uint64_t)) {
			uint64_t bad;

			memcpy(&bad, si[0], sizeof(bad));
			if (bad)
				bench_die("the server found %llu items damaged "
					  "or out of order",
					  (unsigned long long)bad);
			released_checked = true;
		}
		bench_free_msg(ns, si, ss, li, ls);
		if (bye)
			break;
	}
	if (release_mode() && !released_checked)
		bench_die("the server's count of damaged items did not come");
	if (bo.verbose)
		bench_log_stats();
	free(sizes);
	return 0;
}

int main(int argc, char **argv)
{
	int ret;

	bo = (struct bench_opts){
		.sizes = "64k,256k,1m,4m,16m,64m",
		.system = "libripc",
		.iters = 5000,
		.warmup = 2,
		.max_sec = 1.0,
		.time_limit = 120,
		.window = 1,
	};
	bench_parse(argc, argv,
		    "  -x window|lib   server: pull into receive windows "
		    "(default) or library buffers\n");
	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_lib_init();
	ret = bo.server ? server() : client();
	ripc_finalize();
	return ret;
}
