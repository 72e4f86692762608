/*
 * Resolution across hosts as the core sees it (issue 13): the glue
 * between the core (init, registration, routes) and the service directory
 * (directory.h) or the multicast resolver's duplicate detection
 * (resolver.h).  The policy lives here; the waiting (a directory claim,
 * the duplicate probe's window) is the API layer's (api.c).  Nothing here
 * blocks or releases the lock.
 *
 * All are called with the library lock held.
 */
#ifndef RIPC_DIR_CORE_H
#define RIPC_DIR_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include "registry.h"

/* At initialisation, after the registry attach and the resolver: open
 * the directory of RIPC_DIRECTORY (if any) for this process, and warn
 * once if this process is resolved across hosts but reachable only on
 * loopback.  RIPC_OK or RIPC_E* (RIPC_ENOTSUP: built without the
 * engine; RIPC_EINVAL: a malformed URL). */
int ripc__dir_core_open(const struct ripc_reg_proc_info *self);

/* Is a registration of id by another thread of this process under way
 * (between its registry claim and its end)?  Checked before the
 * registry claim: a second registration then fails with RIPC_EINUSE
 * without touching the first one's claim.  set_busy marks and unmarks. */
bool ripc__dir_core_busy(uint16_t id);
void ripc__dir_core_set_busy(uint16_t id, bool busy);

/* How a registration is checked across hosts, after the host registry's
 * claim succeeded: DIR_CLAIM (a directory claim, which blocks: call
 * ripc__dir_claim without the lock, until now + claim_timeout_ns()),
 * DIR_PROBE (a duplicate probe over multicast: begin, wait up to
 * ripc__resolver_probe_ns() reading answers, end), or DIR_NONE. */
enum { DIR_NONE, DIR_CLAIM, DIR_PROBE };
int ripc__dir_core_how(void);
uint64_t ripc__dir_core_claim_timeout_ns(void);
/* The outcome of a directory claim (the engine's return value) as an
 * RIPC_E* code, logged where it says something about the directory. */
int ripc__dir_core_claim_result(uint16_t id, int ret);
/* The outcome of a probe (probe_result's last value), logged who
 * objected: RIPC_OK or RIPC_EINUSE. */
int ripc__dir_core_probe_result(uint16_t id, int ret,
				const struct ripc_reg_proc_info *by);

/* A lookup's remote part: what the directory holds about id, merged into
 * the n records the resolver found (remote[], max entries).  Records of
 * this host are left out (the host registry is authoritative for them).
 * The directory decides a unicast holder; multicast members of both are
 * kept, each process once.  Returns the new count, *mcast updated. */
int ripc__dir_core_lookup(uint16_t id, struct ripc_reg_proc_info *remote,
			  int n, int max, bool *mcast);

/* A send gave up resolving id: say (rate-limited) what was asked where. */
void ripc__dir_core_lookup_failed(uint16_t id, uint64_t waited_ns);

#endif
