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

#endif
