/*
 * pullgap shim: an LD_PRELOAD library for the reading side of an shm
 * long-send pair.  libfabric's shm reads a peer's memory with
 * syscall(SYS_process_vm_readv, ...) (its fast RMA path, CMA); this times
 * each such call and the gap since the previous one ended, which in a
 * pair with one message in flight is everything but the copy: the answer,
 * the sender's next send, both sides noticing.  Side experiment of
 * perf_notes.md ("the leave timer on the tick's grid"), run by
 * pullgap.sh; not part of the library.
 *
 * At exit, writes "copy_us gap_us start_us" per call after the first
 * fifth (warm-up) to $PULLGAP_OUT, and a summary line to stderr.  Two
 * clock reads per call (~25 ns each here).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define N 400000

static double copy[N], gap[N], at[N];
static long n;
static double last_end;

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	long a[6], r;
	double t0, t1;
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (!real)
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	if (nr != SYS_process_vm_readv)
		return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	t0 = now_us();
	r = real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	t1 = now_us();
	if (n < N) {
		at[n] = t0;
		copy[n] = t1 - t0;
		gap[n] = last_end ? t0 - last_end : 0;
		n++;
	}
	last_end = t1;
	return r;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

__attribute__((destructor)) static void dump(void)
{
	const char *out = getenv("PULLGAP_OUT");
	long k = n / 5, m = n - k;
	double sc = 0, sg = 0;
	FILE *f;

	if (m < 100)
		return;
	if (out && (f = fopen(out, "w"))) {
		for (long i = k; i < n; i++)
			fprintf(f, "%.3f %.3f %.3f\n", copy[i], gap[i], at[i]);
		fclose(f);
	}
	for (long i = k; i < n; i++)
		sc += copy[i], sg += gap[i];
	qsort(copy + k, m, sizeof(double), cmp);
	qsort(gap + k, m, sizeof(double), cmp);
	fprintf(stderr,
		"pullgap %ld reads: copy mean %.2f median %.2f p90 %.2f | "
		"gap mean %.2f median %.2f p90 %.2f us\n",
		m, sc / m, copy[k + m / 2], copy[k + m * 9 / 10], sg / m,
		gap[k + m / 2], gap[k + m * 9 / 10]);
}
