/*
 * Shared helpers of the libripc benchmarks (ripc_pingpong, ripc_long_bw,
 * ripc_reqrep, ripc_msgrate, ripc_filefetch).
 *
 * Every benchmark is one program that runs as server (-s) or client (one
 * positional argument: the server's service ID).  The server announces
 * its service ID on stdout and, with -r FILE, in FILE (written whole, then
 * renamed, so a script polling for it never reads half a line).
 *
 * Clients print one line per message size, in the format shared with
 * ../shared/bench/peers:
 *
 *     system transport size_bytes metric value unit
 *
 * lat_us = one-way latency = half a round trip; bw_MBps = 10^6 bytes/s.
 * Diagnostics go to stderr.  Every loop is bounded by an iteration count
 * and a time budget; the whole process by alarm(-T seconds).
 */
#ifndef RIPC_BENCH_COMMON_H
#define RIPC_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ripc.h>

struct bench_opts {
	bool server;
	bool standalone;        /* set before bench_parse: neither server
				 * nor client, no positional argument */
	const char *prov;       /* -p: RIPC_PROVIDER (shm, tcp) */
	const char *ready_file; /* -r: server writes its service ID here */
	const char *sizes;      /* -S: comma-separated sizes */
	const char *system;     /* -N: first column of the result lines */
	const char *label;      /* -X: transport column (default: prov) */
	long iters;             /* -n: most timed iterations per size */
	long warmup;            /* -w: untimed iterations per size */
	double max_sec;         /* -t: time budget per size, s */
	int time_limit;         /* -T: hard limit of the process, s */
	int window;             /* -W: messages in flight (ripc_long_bw) */
	const char *mode;       /* -x: benchmark-specific mode */
	const char *counts;     /* -c: list of sender counts (ripc_msgrate) */
	bool verbose;           /* -v */
	bool print_min;         /* -m: also print lat_min_us lines */
	uint16_t server_id;     /* client: positional argument */
};

extern struct bench_opts bo;

/* Parse the common options (defaults set by the caller in bo first). */
void bench_parse(int argc, char **argv, const char *usage_extra);
/* Start the library on the chosen transport; exits with a message if it
 * cannot (status 77 when the transport is absent, as the tests do). */
void bench_lib_init(void);
/* Server side: write "<id>\n" to stdout and to the ready file. */
void bench_ready(uint16_t id);

double bench_now(void);
void bench_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* -v: the library's counters (ripc_stats(3)) on one line of stderr. */
void bench_log_stats(void);
void bench_die(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));

/* Parse a size list ("8,64,1k,64k,1m"); returns the count, sizes in *out
 * (malloc'd).  Exits on a malformed list. */
size_t bench_sizes(const char *list, size_t **out);
size_t bench_max_size(const size_t *sizes, size_t n);

/* Median and minimum of v[0..n) (sorts v in place). */
double bench_median(double *v, size_t n);

/* Test data: word k of a buffer of `size` bytes is a function of k and
 * size, so that data left over from another size does not pass.
 * bench_verify checks every whole word but the first and the last two
 * (where the benchmarks stamp sequence numbers; the tail stamp may overlap
 * the last whole word when size is not a multiple of 8). */
void bench_fill(uint8_t *buf, size_t size);
bool bench_verify(const uint8_t *buf, size_t size);

/* Anonymous memory of len bytes, every page faulted in (first touch must
 * not be timed).  Exits when the mapping fails. */
void *bench_map(size_t len);
/* The same from ripc_buf_alloc, as ripc_send_short(3) advises for return
 * buffers of 1 MiB and up (huge pages: a peer's process_vm_writev over shm
 * pins the pages it writes one by one).  ripc_reqrep and ripc_filefetch
 * land their replies here in both modes, window or return buffer, so the
 * two stay comparable (a window's pages made no measurable difference);
 * ripc_long_bw's windows stay bench_map's plain pages, like the raw pull's
 * buffer it is held against. */
void *bench_land(size_t len);

/* Client: make sure the server is reached over the transport asked for
 * with -p (a silent fallback would measure the wrong thing). */
void bench_check_transport(uint16_t server);

/* Release what ripc_receive handed out: the short items' buffer and the
 * four arrays (long items themselves are the caller's business). */
void bench_free_msg(uint16_t ns, void **si, uint32_t *ss, void **li,
		    uint32_t *ls);

/* A script that stops processes by pid (run_bench.sh) learns of the
 * processes a benchmark forks from the file named by BENCH_PIDS, one pid a
 * line.  No-op when BENCH_PIDS is unset. */
void bench_note_pid(int pid);

/* Remove the /dev/shm files named "<pid>:..." that libfabric shm endpoints
 * of process pid left (it exited without closing them, or was killed).
 * Returns how many were removed. */
int bench_shm_cleanup(int pid);

/* p-th percentile (0..100) of v[0..n) sorted ascending: the value at rank
 * ceil(p/100 * n) (nearest rank), so p99 of 100 samples is the 99th. */
double bench_percentile(const double *sorted, size_t n, double p);

/* One result line on stdout, flushed at once so a killed run keeps what
 * it measured. */
void bench_emit(const char *system, const char *transport, size_t size,
		const char *metric, double value, const char *unit);

#endif
