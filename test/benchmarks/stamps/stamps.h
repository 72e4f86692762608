/*
 * stamps.h - TSC timestamps at fixed points of one short-message round
 * trip, for stamps.sh (a side experiment of perf_notes.md; not part of the
 * library).  stamps.patch puts STAMP(k) at the points listed in stamps.py
 * into a scratch copy of the tree; each process keeps the first
 * STAMPS_ROWS rows (row = one send and the receive after it) and writes
 * them to $STAMPS_DIR/stamps.PID when the last row is full, with the TSC
 * rate measured over the run against CLOCK_MONOTONIC on the first line.
 * One rdtsc and a store per point (~10 ns): compare systems measured the
 * same way, not with run_bench.sh's figures.
 */
#ifndef RIPC_STAMPS_H
#define RIPC_STAMPS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define STAMPS_ROWS 150000
#define STAMPS_COLS 12

struct stamps {
	uint64_t row[STAMPS_ROWS][STAMPS_COLS];
	int i;
	uint64_t tsc0, ns0;
	struct {
		const void *cq;
		uint64_t prev, last; /* starts of its last two reads */
	} poll[4];             /* per CQ: libripc polls shm's and tcp's */
};
extern struct stamps stamps;
/* In exactly one file of each program. */
#define STAMPS_DEFINE struct stamps stamps

static inline uint64_t stamps_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void stamps_dump(void)
{
	const char *dir = getenv("STAMPS_DIR");
	char f[256];
	FILE *o;

	snprintf(f, sizeof f, "%s/stamps.%d", dir ? dir : "/tmp", getpid());
	if (!(o = fopen(f, "w")))
		return;
	fprintf(o, "tsc_ghz %.6f\n",
		(double)(__rdtsc() - stamps.tsc0) / (double)(stamps_ns() - stamps.ns0));
	for (int i = 0; i < STAMPS_ROWS; i++) {
		for (int k = 0; k < STAMPS_COLS; k++)
			fprintf(o, "%lu ", (unsigned long)stamps.row[i][k]);
		fputc('\n', o);
	}
	fclose(o);
}

/* The first time point k is reached in the current row. */
#define STAMP(k)                                                        \
	do {                                                            \
		if (stamps.i < STAMPS_ROWS && !stamps.row[stamps.i][k]) \
			stamps.row[stamps.i][k] = __rdtsc();            \
	} while (0)

/* The entry of cq in stamps.poll (the last one when all are taken). */
static inline int stamps_cq(const void *cq)
{
	int i;

	for (i = 0; i < 3; i++) {
		if (stamps.poll[i].cq == cq)
			return i;
		if (!stamps.poll[i].cq) {
			stamps.poll[i].cq = cq;
			return i;
		}
	}
	return i;
}

/* Before each fi_cq_read of cq. */
#define STAMP_POLL(cq)                                \
	do {                                          \
		int _c = stamps_cq(cq);               \
		stamps.poll[_c].prev = stamps.poll[_c].last; \
		stamps.poll[_c].last = __rdtsc();     \
	} while (0)

/* The read of cq that returned a completion (with STAMP(5)): it and the
 * read of the same CQ before it began at columns 11 and 10. */
#define STAMP_POLLS(cq)                                                  \
	do {                                                             \
		int _c = stamps_cq(cq);                                  \
		if (stamps.i < STAMPS_ROWS && !stamps.row[stamps.i][11]) { \
			stamps.row[stamps.i][10] = stamps.poll[_c].prev; \
			stamps.row[stamps.i][11] = stamps.poll[_c].last; \
		}                                                        \
	} while (0)

/* A new row: at each send. */
#define STAMP_NEXT()                                          \
	do {                                                  \
		if (!stamps.tsc0) {                           \
			stamps.ns0 = stamps_ns();             \
			stamps.tsc0 = __rdtsc();              \
		}                                             \
		if (stamps.i < STAMPS_ROWS && ++stamps.i == STAMPS_ROWS) \
			stamps_dump();                        \
	} while (0)

#endif
