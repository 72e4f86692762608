/*
 * Resolution across hosts as the core sees it (issue 13): the glue
 * between the core (init, registration, routes) and the service directory
 * (directory.h) or the multicast resolver's duplicate detection
 * (resolver.h).  Each function is one call site in the core; the policy
 * lives here, so that the call sites stay few and small.
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
 * without touching the first one's claim. */
bool ripc__dir_core_busy(uint16_t id);

/* After the host registry's claim of id succeeded: claim it in the
 * directory, or (no directory) probe for duplicates over multicast.
 * Releases the library lock while it waits and takes it again.  RIPC_OK;
 * RIPC_EINUSE (held elsewhere), RIPC_ETIMEDOUT (the directory did not
 * answer within RIPC_DIRECTORY_TIMEOUT_MS), RIPC_ESHUTDOWN, RIPC_EREGISTRY.
 * On failure the caller undoes the registry claim; on success the caller
 * creates the service before it drops the lock. */
int ripc__dir_core_register(uint16_t id, bool mcast);

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
