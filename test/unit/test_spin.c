/*
 * Unit tests of the spin budget's clock (ripc/api.c,
 * ripc__spin_clock_read): a receive's RIPC_SPIN_US counts time spent
 * waiting, not time spent working.  An interval between two readings that
 * stands out from the usual ones (a pass that answered a peer's RDMA read
 * over tcp) moves the spin's end on by its length, up to a cap; a thread
 * whose every interval is long (valgrind, an overloaded host) still runs
 * out of budget.
 */
#include <stdint.h>

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
