/*
 * Shared by the files of the API layer (api.c, api_mem.c): entering and
 * leaving the library.  A public call that uses the library's state runs
 * between ripc__api_enter (initialise, lock, count the call) and
 * ripc__api_leave (uncount, unlock, record the error for
 * ripc_last_error).
 */
#ifndef RIPC_API_H
#define RIPC_API_H

#include "ripc_int.h"

/* Initialise if needed, lock, count: RIPC_OK, or an error (then not
 * locked): RIPC_ESHUTDOWN while finalize runs. */
int ripc__api_enter(void);
/* The same for calls that make no sense before initialisation (and must
 * not start the library): RIPC_ESHUTDOWN when it does not run. */
int ripc__api_enter_running(void);
/* Uncount, unlock; returns err, recorded as the thread's last error. */
int ripc__api_leave(int err);

/* A spin's budget counts time spent waiting, not working (api.c, where
 * the rule is explained): readings of the clock go through here.  last
 * is the previous reading (0: none to compare with, as after a sleep);
 * usual the last interval taken as waiting; work whether the last
 * interval was taken as work. */
struct ripc_spin_clock {
	uint64_t last;
	uint64_t usual;
	bool work;
};

/* Takes the reading `now`: an interval that stands out (more than
 * SPIN_WORK_NS and SPIN_WORK_RATIO times the usual one, and not right
 * after another such) moves *until on by its length, but not past cap.
 * Never blocks; no lock needed (the state is the caller's). */
void ripc__spin_clock_read(struct ripc_spin_clock *c, uint64_t now,
			   uint64_t *until, uint64_t cap);

/* A blocking receive's budget for polling past its spin while a message
 * of its service is being pulled (RIPC_SPIN_PULL_US, api.c explains
 * why): until is its end, counted from the call's first poll; spent
 * whether the call has polled for a pull past its spin; woke whether it
 * slept since its last clock reading. */
struct ripc_pull_budget {
	uint64_t until;
	bool spent;
	bool woke;
};

/* The call slept: a budget not spent yet is counted afresh from the next
 * clock reading, the wake-up; one spent on a pull (a stalled one) is not
 * given again.  No lock needed (the state is the caller's). */
static inline void ripc__pull_budget_slept(struct ripc_pull_budget *b)
{
	b->woke = !b->spent;
}

/* At the clock reading `now`: whether the receive keeps polling, because
 * its spin lasts (now < spin_until) or because a message of its service
 * is being pulled (`pulling`) and the budget of `ns` lasts.  Never
 * blocks; no lock needed. */
bool ripc__pull_budget_poll(struct ripc_pull_budget *b, uint64_t now,
			    uint64_t spin_until, bool pulling, uint64_t ns);

/* Whether a spin may yield its CPU (api.c explains why it yields, and why
 * not always): shut until quiet_until after a yield that gave the CPU
 * away for long.  One per thread: the CPUs and their loads are the
 * thread's. */
struct ripc_yield_gate {
	uint64_t quiet_until;
};

static inline bool ripc__yield_gate_open(const struct ripc_yield_gate *g,
					 uint64_t now)
{
	return now >= g->quiet_until;
}

/* A yield ran from t0 to t1 (clock readings, ns): true, and the gate shut
 * for RIPC_YIELD_QUIET_NS, when it took longer than RIPC_YIELD_SLOW_NS
 * (somebody else had the CPU for a slice).  No lock needed. */
bool ripc__yield_gate_note(struct ripc_yield_gate *g, uint64_t t0,
			   uint64_t t1);
#define RIPC_YIELD_SLOW_NS 500000ull
#define RIPC_YIELD_QUIET_NS 100000000ull

#endif
