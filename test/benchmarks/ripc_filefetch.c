/*
 * ripc_filefetch - the libRIPC paper's web-server experiment on this
 * machine (issue 6): a client fetches files by name from a file server.
 *
 *   server:  ripc_filefetch -s -p shm -S 1k,1m,64m -r ready.txt
 *   client:  ripc_filefetch -p shm -S 1k,1m,64m -x long ID
 *            ripc_filefetch -p shm -S 1k,1m,64m -x retbuf ID
 *
 * The server holds one file per size of -S in memory (generated at start,
 * nothing on disk), named "/files/<size>.dat", in ripc_buf_alloc memory.
 * The client requests a file with a short message whose one item is the
 * name; the server looks it up and answers with a long send of the whole
 * file.  How the file reaches the client (-x, client side):
 *   long    the server's library exposes the file and the client's library
 *           pulls it with RDMA reads into a receive window the client
 *           registered for its service (and registers again after every
 *           file: a window takes one item);
 *   retbuf  every request offers the client's buffer as a return buffer;
 *           the server's library RDMA-writes the file into it.
 * The client's landing buffer, window or return buffer, is as large as
 * the largest file: a client does not know the size of what it asks for.
 * It comes from ripc_buf_alloc, as ripc_send_short(3) advises for return
 * buffers: over shm a write into plain pages took 2-2.5x as long from
 * 1 MiB up (bench_land).
 * Files are never modified, so the server sends them as they are, without
 * waiting for earlier sends of the same file to be released (a real file
 * server has many clients).
 *
 * Per size: -w warm-up fetches (the first checked byte for byte), then up
 * to -n timed fetches (default 10,000) or -t seconds, whichever ends
 * first.  Printed (the client):
 *
 *     libripc_fetch_long shm 1048576 lat_us 234.56 us
 *     libripc_fetch_long shm 1048576 bw_MBps 4470.12 MBps
 *
 * lat_us is the median time of one fetch (request sent to file received);
 * bw_MBps is file bytes x fetches / time (MB = 10^6 B).  The client clears
 * the first and last 8 bytes of its buffer before every fetch and checks
 * them afterwards, so every timed file is known to have landed; files that
 * did not land in the window or return buffer are counted on stderr.
 *
 * The kernel-TCP baseline is raw/tcp_filefetch (same names, same
 * contents, same counts).  The client ends the server with "BYE".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define BYE "BYE"
#define NOT_FOUND "404"
#define MAX_FILES 32
#define MIN_TIMED 4
#define WARM_BYTES (64ull << 20) /* warm-up budget per size, besides -w */
#define FETCH_TIMEOUT_MS 30000

/* Word k of the file of `size` bytes (raw/tcp_filefetch.c generates the
 * same contents). */
static inline uint64_t pattern(size_t k, size_t size)
{
	return (k + 1) * 0x9e3779b97f4a7c15ull ^ (size * 0x2545f4914f6cdd1dull);
}

static void file_name(char *out, size_t cap, size_t size)
{
	snprintf(out, cap, "/files/%zu.dat", size);
}

/* ---- server ----------------------------------------------------------- */

struct file {
	char name[64];
	uint8_t *data;
	uint32_t size;
};

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	size_t *sizes, nfiles = bench_sizes(bo.sizes, &sizes);
	struct file files[MAX_FILES];
	uint64_t served = 0, missing = 0;

	if (me == RIPC_INVALID_SERVICE_ID)
		bench_die("register: %s", ripc_strerror(ripc_last_error()));
	if (nfiles > MAX_FILES)
		bench_die("at most %d files", MAX_FILES);
	for (size_t i = 0; i < nfiles; i++) {
		uint64_t *w;

		if (sizes[i] < 16 || sizes[i] > RIPC_LONG_ITEM_MAX ||
		    sizes[i] % 8)
			bench_die("file sizes must be multiples of 8, 16 B "
				  "to 4 GiB");
		files[i].size = (uint32_t)sizes[i];
		file_name(files[i].name, sizeof(files[i].name), sizes[i]);
		files[i].data = ripc_buf_alloc(sizes[i]);
		if (!files[i].data)
			bench_die("ripc_buf_alloc(%zu): %s", sizes[i],
				  ripc_strerror(ripc_last_error()));
		w = (uint64_t *)files[i].data;
		for (size_t k = 0; k < sizes[i] / 8; k++)
			w[k] = pattern(k, sizes[i]);
	}
	bench_ready(me);

	for (;;) {
		void **si = NULL, **li = NULL;
		uint32_t *ss = NULL, *ls = NULL;
		uint16_t ns = 0, nl = 0, from;
		struct file *f = NULL;
		char name[64];
		uint8_t r;

		r = ripc_receive(me, &from, &si, &ss, &ns, &li, &ls, &nl);
		if (r)
			bench_die("receive: %s", ripc_strerror(r));
		for (unsigned i = 0; i < nl; i++)
			ripc_buf_free(li[i]);
		if (ns != 1 || ss[0] >= sizeof(name)) {
			bench_log("unexpected message (%u short, %u long "
				  "items): ignored",
				  ns, nl);
			bench_free_msg(ns, si, ss, li, ls);
			continue;
		}
		/* The name need not be NUL-terminated on the wire. */
		memcpy(name, si[0], ss[0]);
		name[ss[0]] = 0;
		bench_free_msg(ns, si, ss, li, ls);
		if (!strcmp(name, BYE)) {
			void *b[1] = { (void *)BYE };
			uint32_t l[1] = { sizeof(BYE) };

			if (ripc_send_short(me, from, b, l, 1, NULL, NULL, 0))
				bench_log("BYE: %s",
					  ripc_strerror(ripc_last_error()));
			break;
		}
		/* A handful of files: a linear lookup is what a hash
		 * table would cost here. */
		for (size_t i = 0; i < nfiles && !f; i++)
			if (!strcmp(files[i].name, name))
				f = &files[i];
		if (!f) {
			void *b[1] = { (void *)NOT_FOUND };
			uint32_t l[1] = { sizeof(NOT_FOUND) };

			missing++;
			r = ripc_send_short(me, from, b, l, 1, NULL, NULL, 0);
		} else {
			void *b[1] = { f->data };
			uint32_t l[1] = { f->size };

			served++;
			r = ripc_send_long(me, from, b, l, 1, NULL, NULL, 0);
		}
		if (r)
			bench_die("answer to %u: %s", from, ripc_strerror(r));
	}
	/* The last file may still be exposed: let the pull finish. */
	for (size_t i = 0; i < nfiles; i++) {
		if (ripc_wait_released(files[i].data, 5000))
			bench_log("%s still exposed at exit", files[i].name);
		ripc_buf_free(files[i].data);
	}
	if (bo.verbose || missing) {
		struct ripc_stats st;

		ripc_stats(&st, sizeof(st));
		bench_log("%llu files served, %llu unknown names; %llu into "
			  "return buffers, %llu long sends pulled",
			  (unsigned long long)served,
			  (unsigned long long)missing,
			  (unsigned long long)st.return_replies_sent,
			  (unsigned long long)st.long_sent);
	}
	free(sizes);
	return 0;
}

/* ---- client ----------------------------------------------------------- */

static bool retbuf_mode;
static uint8_t *land; /* the receive window, or the return buffer */
static size_t land_cap;

/* One fetch; returns false when the file did not land in `land`. */
static bool fetch(uint16_t me, const char *name, uint32_t size, bool check)
{
	void *b[1] = { (void *)name };
	uint32_t l[1] = { (uint32_t)strlen(name) };
	void *rb[1] = { land };
	uint32_t rl[1] = { (uint32_t)land_cap };
	void **si = NULL, **li = NULL;
	uint32_t *ss = NULL, *ls = NULL;
	uint16_t ns = 0, nl = 0, from;
	uint64_t head, tail;
	bool where;
	uint8_t r;

	memset(land, 0, 8);
	memset(land + size - 8, 0, 8);
	if (check)
		memset(land, 0, size);
	r = ripc_send_short(me, bo.server_id, b, l, 1, retbuf_mode ? rb : NULL,
			    retbuf_mode ? rl : NULL, retbuf_mode ? 1 : 0);
	if (r)
		bench_die("request for %s: %s", name, ripc_strerror(r));
	r = ripc_receive_timeout(me, &from, &si, &ss, &ns, &li, &ls, &nl,
				 FETCH_TIMEOUT_MS);
	if (r)
		bench_die("waiting for %s: %s", name, ripc_strerror(r));
	if (ns == 1 && ss[0] == sizeof(NOT_FOUND) &&
	    !memcmp(si[0], NOT_FOUND, sizeof(NOT_FOUND)))
		bench_die("%s: not found on the server (same -S on both "
			  "sides?)",
			  name);
	if (from != bo.server_id || nl != 1 || ls[0] != size || !li[0])
		bench_die("unexpected answer for %s (%u short, %u long items)",
			  name, ns, nl);
	memcpy(&head, li[0], 8);
	memcpy(&tail, (uint8_t *)li[0] + size - 8, 8);
	if (head != pattern(0, size) || tail != pattern(size / 8 - 1, size))
		bench_die("%s did not arrive (ends %#llx/%#llx)", name,
			  (unsigned long long)head, (unsigned long long)tail);
	if (check) {
		const uint64_t *w = li[0];

		for (size_t k = 0; k < size / 8; k++)
			if (w[k] != pattern(k, size))
				bench_die("%s is corrupt at byte %zu", name,
					  k * 8);
	}
	where = li[0] == land;
	if (!where)
		ripc_buf_free(li[0]);
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

	if (!bo.mode || (strcmp(bo.mode, "long") && strcmp(bo.mode, "retbuf")))
		bench_die("-x must be long or retbuf");
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
		char name[64];
		double deadline;

		if (size < 16 || size % 8)
			bench_die("file sizes must be multiples of 8, at "
				  "least 16");
		file_name(name, sizeof(name), size);
		if ((uint64_t)warm * size > WARM_BYTES)
			warm = (long)(WARM_BYTES / size);
		if (warm < 1)
			warm = 1;
		for (long i = 0; i < warm; i++)
			missed += !fetch(me, name, size, i == 0);
		if (missed)
			bench_log("%s: %ld of %ld warm-up fetches missed the "
				  "%s",
				  name, missed, warm,
				  retbuf_mode ? "return buffer" : "window");
		missed = 0;
		deadline = bench_now() + bo.max_sec;
		t[0] = bench_now();
		while (n < bo.iters) {
			missed += !fetch(me, name, size, false);
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
			bench_log("%s: %ld of %ld fetches missed the %s (the "
				  "figure mixes both paths)",
				  name, missed, n,
				  retbuf_mode ? "return buffer" : "window");
		if (bo.verbose)
			bench_log("%s: %ld fetches in %.3f s, p99 %.1f us",
				  name, n, total, t[(size_t)n * 99 / 100]);
	}

	if (retbuf_mode)
		ripc_return_bufs_cancel(bo.server_id);
	else
		ripc_unreg_recv_window(land);
	ripc_buf_free(land);

	/* BYE, and wait up to 2 s for the server's BYE. */
	void *b[1] = { (void *)BYE };
	uint32_t l[1] = { sizeof(BYE) };

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
		done = ns == 1 && ss[0] == sizeof(BYE) &&
		       !memcmp(si[0], BYE, sizeof(BYE));
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
		.sizes = "1k,4k,16k,64k,256k,1m,4m,16m,64m",
		.system = NULL,
		.iters = 10000,
		.warmup = 100,
		.max_sec = 1.0,
		.time_limit = 120,
		.window = 1,
	};
	bench_parse(argc, argv,
		    "  -x long|retbuf  client: the file is pulled into a "
		    "receive window, or written into a return buffer\n");
	if (!bo.system)
		bo.system = bo.mode && !strcmp(bo.mode, "retbuf")
				    ? "libripc_fetch_retbuf"
				    : "libripc_fetch_long";
	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_lib_init();
	ret = bo.server ? server() : client();
	ripc_finalize();
	return ret;
}
