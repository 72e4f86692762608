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

#endif
