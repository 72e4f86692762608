/*
 * settime: what arming a timerfd costs, by where its expiry falls.  Each
 * of N rounds spins `every_us` (so the CPU is busy and its scheduler
 * tick runs), then arms the timer 1 ms ahead, either relative (as
 * libripc's leave timer was armed) or at the next multiple of `grid_ns`
 * of CLOCK_MONOTONIC plus `offset_ns` (absolute), and times the
 * timerfd_settime.  Prints mean, median, p90 and p99 in microseconds.
 * Side experiment of perf_notes.md ("the leave timer on the tick's
 * grid"); run by pullgap.sh settime.
 *
 *   settime GRID_NS OFFSET_NS EVERY_US    (GRID_NS 0: relative 1 ms)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <time.h>

#define N 2000

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	static double d[N];
	int64_t grid, off, every;
	double sum = 0;

	if (argc != 4 || fd < 0) {
		fprintf(stderr, "usage: settime GRID_NS OFFSET_NS EVERY_US\n");
		return 2;
	}
	grid = atoll(argv[1]);
	off = atoll(argv[2]);
	every = atoll(argv[3]) * 1000;
	for (int i = 0; i < N; i++) {
		struct itimerspec its = { { 0, 0 }, { 0, 1000000 } };
		int64_t t0 = now_ns(), t1, due;
		int flags = 0;

		while (now_ns() - t0 < every)
			;
		if (grid) {
			due = (now_ns() + 1000000 + grid - 1) / grid * grid + off;
			its.it_value.tv_sec = due / 1000000000;
			its.it_value.tv_nsec = due % 1000000000;
			flags = TFD_TIMER_ABSTIME;
		}
		t0 = now_ns();
		timerfd_settime(fd, flags, &its, NULL);
		t1 = now_ns();
		d[i] = (t1 - t0) / 1e3;
		sum += d[i];
	}
	qsort(d, N, sizeof(d[0]), cmp);
	printf("grid %lld ns offset %lld ns, every %lld us: settime mean %.2f "
	       "median %.2f p90 %.2f p99 %.2f us\n",
	       (long long)grid, (long long)off, (long long)every / 1000,
	       sum / N, d[N / 2], d[N * 9 / 10], d[N * 99 / 100]);
	return 0;
}
