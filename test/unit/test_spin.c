/*
 * Unit tests of the spin budget's clock (ripc/api.c,
 * ripc__spin_clock_read): a receive's RIPC_SPIN_US counts time spent
 * waiting, not time spent working.  An interval between two readings that
 * stands out from the usual ones (a pass that answered a peer's RDMA read
 * over tcp) moves the spin's end on by its length, up to a cap; a thread
 * whose every interval is long (valgrind, an overloaded host) still runs
 * out of budget.
 *
 * And the budget for polling while a message of the receive's service is
 * being pulled (ripc__pull_budget_poll): from the call's first poll, or
 * from its wake-up when it slept first, once a call.
 *
 * And the gate of the spin's yields (ripc__yield_gate_note): a yield
 * that gave the CPU away for longer than RIPC_YIELD_SLOW_NS shuts the
 * thread's yields for RIPC_YIELD_QUIET_NS.
 *
 * And when the progress thread's leave timer, armed as a receive spins,
 * fires (ripc/progress.c, ripc__leave_due): one poll interval on, from 1
 * ms up rounded up to the scheduler tick's grid, so that arming it
 * reprograms no CPU timer; and that grid, the tick's period as the kernel
 * gives it (ripc__tick_grid_ns).
 */
#include <inttypes.h>
#include <stdint.h>
#include <time.h>

#include <criterion/criterion.h>

#include "api.h"

#define US 1000ull

/* A clock that has seen `n` ordinary intervals of `step` ns from t0. */
static struct ripc_spin_clock ordinary(uint64_t t0, uint64_t step, int n,
				       uint64_t *until, uint64_t cap)
{
	struct ripc_spin_clock c = { .last = t0 };

	for (int i = 1; i <= n; i++)
		ripc__spin_clock_read(&c, t0 + (uint64_t)i * step, until, cap);
	return c;
}

Test(spin, ordinary_intervals_leave_the_budget)
{
	uint64_t t0 = 1000 * US, until = t0 + 200 * US, cap = t0 + 20000 * US;
	struct ripc_spin_clock c = ordinary(t0, 3 * US, 50, &until, cap);

	cr_assert_eq(until, t0 + 200 * US);
	cr_assert_eq(c.usual, 3 * US);
	cr_assert(!c.work);
}

Test(spin, a_working_pass_moves_the_end_on)
{
	uint64_t t0 = 1000 * US, until = t0 + 200 * US, cap = t0 + 20000 * US;
	struct ripc_spin_clock c = ordinary(t0, 3 * US, 10, &until, cap);
	uint64_t now = c.last + 300 * US; /* a 1 MiB sendmsg inside a pass */

	ripc__spin_clock_read(&c, now, &until, cap);
	cr_assert_eq(until, t0 + 500 * US);
	cr_assert(c.work);
	cr_assert_eq(c.usual, 3 * US, "the usual interval stays");
	/* Back to waiting: nothing more moves. */
	ripc__spin_clock_read(&c, now + 3 * US, &until, cap);
	cr_assert_eq(until, t0 + 500 * US);
	cr_assert(!c.work);
}

Test(spin, short_gaps_are_waiting)
{
	/* Eight rounds of yields can take tens of microseconds: below
	 * SPIN_WORK_NS (50 us) nothing counts as work, however much longer
	 * than the usual interval. */
	uint64_t t0 = 1000 * US, until = t0 + 200 * US, cap = t0 + 20000 * US;
	struct ripc_spin_clock c = ordinary(t0, 1 * US, 10, &until, cap);

	ripc__spin_clock_read(&c, c.last + 45 * US, &until, cap);
	cr_assert_eq(until, t0 + 200 * US);
	cr_assert_eq(c.usual, 45 * US);
}

Test(spin, the_thread_s_own_pace_is_not_work)
{
	/* Every interval long (valgrind): the first that stands out may
	 * count, the next as long is the pace, and then the budget runs out
	 * as before. */
	uint64_t t0 = 1000 * US, until = t0 + 200 * US, cap = t0 + 20000 * US;
	struct ripc_spin_clock c = { .last = t0 };
	uint64_t moved;

	ripc__spin_clock_read(&c, t0 + 1 * US, &until, cap);
	ripc__spin_clock_read(&c, t0 + 401 * US, &until, cap);
	moved = until;
	cr_assert_eq(moved, t0 + 600 * US);
	for (int i = 2; i < 100; i++)
		ripc__spin_clock_read(&c, t0 + 1 * US + (uint64_t)i * 400 * US,
				      &until, cap);
	cr_assert_eq(until, moved, "moved once, not for every interval");
	cr_assert_eq(c.usual, 400 * US);
}

Test(spin, never_past_the_cap)
{
	uint64_t t0 = 1000 * US, until = t0 + 200 * US, cap = t0 + 1000 * US;
	struct ripc_spin_clock c = ordinary(t0, 3 * US, 10, &until, cap);

	ripc__spin_clock_read(&c, c.last + 5000 * US, &until, cap);
	cr_assert_eq(until, cap);
	/* A budget already past the cap (RIPC_SPIN_PULL_US below
	 * RIPC_SPIN_US makes the cap RIPC_SPIN_US) is not pulled back. */
	until = cap + 10 * US;
	c = ordinary(t0, 3 * US, 10, &until, cap);
	ripc__spin_clock_read(&c, c.last + 500 * US, &until, cap);
	cr_assert_eq(until, cap + 10 * US);
}

Test(spin, no_reading_to_compare_with)
{
	/* After a sleep the caller clears `last`: sleeping is neither
	 * waiting in a spin nor work. */
	uint64_t t0 = 1000 * US, until = t0 + 200 * US, cap = t0 + 20000 * US;
	struct ripc_spin_clock c = ordinary(t0, 3 * US, 10, &until, cap);

	c.last = 0;
	ripc__spin_clock_read(&c, t0 + 900000 * US, &until, cap);
	cr_assert_eq(until, t0 + 200 * US);
	cr_assert_eq(c.last, t0 + 900000 * US);
	cr_assert_eq(c.usual, 3 * US);
}

Test(spin, first_interval_without_history)
{
	/* A receive with a timeout reads the clock as it starts; a first
	 * pass that works (no usual interval yet) counts as work. */
	uint64_t t0 = 1000 * US, until = t0 + 200 * US, cap = t0 + 20000 * US;
	struct ripc_spin_clock c = { .last = t0 };

	ripc__spin_clock_read(&c, t0 + 250 * US, &until, cap);
	cr_assert_eq(until, t0 + 450 * US);
}

/* ---- the pull budget (RIPC_SPIN_PULL_US) ------------------------------- */

#define SPIN (200 * US)
#define PULL (20000 * US)

Test(pull_budget, the_spin_polls_whether_or_not_a_pull_runs)
{
	uint64_t t0 = 1000 * US;
	struct ripc_pull_budget b = { .until = t0 + PULL };

	cr_assert(ripc__pull_budget_poll(&b, t0 + 10 * US, t0 + SPIN, false,
					 PULL));
	cr_assert(ripc__pull_budget_poll(&b, t0 + 10 * US, t0 + SPIN, true,
					 PULL));
	cr_assert(!b.spent, "polling inside the spin spends no pull budget");
}

Test(pull_budget, past_the_spin_only_a_pull_keeps_it_polling)
{
	uint64_t t0 = 1000 * US;
	struct ripc_pull_budget b = { .until = t0 + PULL };

	cr_assert(!ripc__pull_budget_poll(&b, t0 + SPIN, t0 + SPIN, false,
					  PULL));
	cr_assert(!b.spent);
	cr_assert(ripc__pull_budget_poll(&b, t0 + SPIN, t0 + SPIN, true,
					 PULL));
	cr_assert(b.spent);
	cr_assert(ripc__pull_budget_poll(&b, t0 + PULL - 1, t0 + SPIN, true,
					 PULL));
	cr_assert(!ripc__pull_budget_poll(&b, t0 + PULL, t0 + SPIN, true,
					  PULL),
		  "the budget counts from the call's first poll");
}

/* The regression this guards: a receive that slept through its budget
 * and was woken by a long message left the pull to wake-ups (a tcp
 * socket drained a segment per wake-up; BBR then paced the connection
 * for its life, perf_notes.md). */
Test(pull_budget, a_call_that_slept_first_gets_it_from_its_wake_up)
{
	uint64_t t0 = 1000 * US, woke = t0 + 3000000 * US;
	struct ripc_pull_budget b = { .until = t0 + PULL };

	cr_assert(!ripc__pull_budget_poll(&b, t0 + SPIN, t0 + SPIN, false,
					  PULL));
	ripc__pull_budget_slept(&b);
	cr_assert(ripc__pull_budget_poll(&b, woke, t0 + SPIN, true, PULL),
		  "woken while its message is pulled, the receive polls");
	cr_assert_eq(b.until, woke + PULL);
	cr_assert(ripc__pull_budget_poll(&b, woke + PULL - 1, t0 + SPIN, true,
					 PULL));
	cr_assert(!ripc__pull_budget_poll(&b, woke + PULL, t0 + SPIN, true,
					  PULL));
}

Test(pull_budget, a_wake_up_without_a_pull_keeps_the_budget_for_one)
{
	uint64_t t0 = 1000 * US, woke = t0 + 500000 * US;
	struct ripc_pull_budget b = { .until = t0 + PULL };

	ripc__pull_budget_slept(&b);
	cr_assert(!ripc__pull_budget_poll(&b, woke, t0 + SPIN, false, PULL),
		  "woken by something else, the receive sleeps again");
	ripc__pull_budget_slept(&b);
	cr_assert(ripc__pull_budget_poll(&b, woke + 1000 * US, t0 + SPIN,
					 true, PULL));
	cr_assert_eq(b.until, woke + 1000 * US + PULL);
}

Test(pull_budget, one_budget_a_call_a_stalled_pull_sleeps_through)
{
	uint64_t t0 = 1000 * US;
	struct ripc_pull_budget b = { .until = t0 + PULL };

	cr_assert(ripc__pull_budget_poll(&b, t0 + SPIN, t0 + SPIN, true,
					 PULL));
	cr_assert(!ripc__pull_budget_poll(&b, t0 + PULL, t0 + SPIN, true,
					  PULL));
	ripc__pull_budget_slept(&b);
	cr_assert(!ripc__pull_budget_poll(&b, t0 + 2 * PULL, t0 + SPIN, true,
					  PULL),
		  "a pull that stalled (a stopped peer) costs a call one "
		  "budget, not one per wake-up");
}

#define MS 1000000ull
#define GRID (4 * MS) /* HZ=250, Debian's */

/* The grids of the kernel's HZ choices (TICK_NSEC: 1e9 / HZ, rounded). */
static const uint64_t grids[] = { MS, 3333333, 4 * MS, 10 * MS };

Test(leave_due, a_short_interval_is_kept_as_asked)
{
	cr_assert_eq(ripc__leave_due(12345 * US + 7, 100 * US, GRID),
		     12345 * US + 7 + 100 * US);
	cr_assert_eq(ripc__leave_due(3 * GRID + 1, 999 * US, GRID),
		     3 * GRID + 1 + 999 * US);
}

Test(leave_due, no_grid_keeps_every_interval_as_asked)
{
	/* A kernel whose tick we could not learn: the timer costs what it
	 * did before the grid, and fires no later than asked. */
	cr_assert_eq(ripc__leave_due(3 * GRID + 1, MS, 0), 3 * GRID + 1 + MS);
	cr_assert_eq(ripc__leave_due(7, 250 * MS, 0), 7 + 250 * MS);
}

Test(leave_due, from_1_ms_on_the_grid_within_one_step)
{
	/* Every phase of `now` against each grid, at a few intervals, and
	 * a clock some years after boot. */
	static const uint64_t iv[] = { MS, 2500 * US, 4 * MS, 999999 * US };

	for (unsigned g = 0; g < sizeof(grids) / sizeof(grids[0]); g++) {
		const uint64_t grid = grids[g];
		const uint64_t base[] = { 0, 1000 * grid,
					  (uint64_t)1e17 / grid * grid };

		for (unsigned b = 0; b < sizeof(base) / sizeof(base[0]); b++)
			for (unsigned i = 0; i < sizeof(iv) / sizeof(iv[0]);
			     i++)
				for (uint64_t ph = 0; ph < 2 * grid;
				     ph += 99991) {
					uint64_t now = base[b] + ph;
					uint64_t due = ripc__leave_due(
						now, iv[i], grid);

					cr_assert_eq(due % grid, 0,
						     "on the grid of %" PRIu64,
						     grid);
					cr_assert_geq(due, now + iv[i],
						      "never before the "
						      "interval");
					cr_assert_lt(due, now + iv[i] + grid,
						     "at most one step after "
						     "it");
				}
	}
}

Test(leave_due, already_on_the_grid_is_not_pushed_a_step)
{
	for (unsigned g = 0; g < sizeof(grids) / sizeof(grids[0]); g++) {
		const uint64_t grid = grids[g];

		cr_assert_eq(ripc__leave_due(5 * grid - MS, MS, grid),
			     5 * grid);
		cr_assert_eq(ripc__leave_due(5 * grid - MS + 1, MS, grid),
			     6 * grid);
	}
}

Test(leave_due, re_arming_within_a_step_keeps_the_time)
{
	/* What makes re-arming cheap as well: receives that come back
	 * within one step ask for the same expiry. */
	uint64_t first = ripc__leave_due(7 * GRID + 1, MS, GRID);

	for (uint64_t now = 7 * GRID + 1; now <= 8 * GRID - MS; now += 1000)
		cr_assert_eq(ripc__leave_due(now, MS, GRID), first);
}

Test(tick_grid, is_the_kernels_tick_period_or_none)
{
	struct timespec ts;
	uint64_t grid = ripc__tick_grid_ns();

	cr_assert_eq(clock_getres(CLOCK_MONOTONIC_COARSE, &ts), 0);
	if (ts.tv_sec == 0 && ts.tv_nsec >= (long)RIPC_TICK_GRID_MIN_NS &&
	    ts.tv_nsec <= (long)RIPC_TICK_GRID_MAX_NS)
		cr_assert_eq(grid, (uint64_t)ts.tv_nsec,
			     "the tick's period (1 / HZ)");
	else
		cr_assert_eq(grid, 0, "no grid where the tick is unknown");
}

Test(yield_gate, quick_yields_keep_it_open)
{
	struct ripc_yield_gate g = { 0 };
	uint64_t t = 5000 * US;

	cr_assert(ripc__yield_gate_open(&g, t));
	for (int i = 0; i < 1000; i++, t += 50 * US) {
		cr_assert(!ripc__yield_gate_note(&g, t, t + 40 * US),
			  "a peer that ran for 40 us");
		cr_assert(ripc__yield_gate_open(&g, t + 50 * US));
	}
	cr_assert(!ripc__yield_gate_note(&g, t, t + RIPC_YIELD_SLOW_NS),
		  "exactly the limit is not slow");
}

Test(yield_gate, a_slow_yield_shuts_it_for_the_quiet_time)
{
	struct ripc_yield_gate g = { 0 };
	uint64_t t0 = 5000 * US, t1 = t0 + 4000 * US; /* a 4 ms slice */

	cr_assert(ripc__yield_gate_note(&g, t0, t1));
	cr_assert(!ripc__yield_gate_open(&g, t1));
	cr_assert(!ripc__yield_gate_open(&g, t1 + RIPC_YIELD_QUIET_NS - 1));
	cr_assert(ripc__yield_gate_open(&g, t1 + RIPC_YIELD_QUIET_NS),
		  "open again after the quiet time");
}

Test(yield_gate, under_a_busy_loop_one_slice_per_quiet_time)
{
	/* A spin that yields whenever the gate lets it, every 10 us of
	 * polling, each yield taking a 4 ms slice: over 10 s the gate lets
	 * through one slow yield per quiet time, not one per message. */
	struct ripc_yield_gate g = { 0 };
	uint64_t t = 1000 * US, end = t + 10000000 * US, slow = 0;

	while (t < end) {
		if (ripc__yield_gate_open(&g, t)) {
			slow += ripc__yield_gate_note(&g, t, t + 4000 * US);
			t += 4000 * US;
		} else {
			t += 10 * US;
		}
	}
	cr_assert_leq(slow, 10000000 * US / RIPC_YIELD_QUIET_NS + 1);
	cr_assert_geq(slow, 10000000 * US / (RIPC_YIELD_QUIET_NS + 4000 * US));
}
