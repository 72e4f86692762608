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

#endif
