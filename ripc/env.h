/*
 * RIPC_* environment variables.  Every variable the library reads is
 * declared exactly once, in the table in env.c, with its default and help
 * text; ripc_info -e prints that table and ripc(7) documents it.
 */
#ifndef RIPC_ENV_H
#define RIPC_ENV_H

#include <stdbool.h>
#include <stdint.h>

enum ripc_env_id {
	RIPC_ENV_PROVIDER,
	RIPC_ENV_LOG_LEVEL,
	RIPC_ENV_REGISTRY,
	RIPC_ENV_TCP_ADDR,
	RIPC_ENV_TCP_NATIVE,
	RIPC_ENV_RESOLVE_TIMEOUT_MS,
	RIPC_ENV_SEND_TIMEOUT_MS,
	RIPC_ENV_LONG_TIMEOUT_MS,
	RIPC_ENV_PULL_TIMEOUT_MS,
	RIPC_ENV_PROGRESS,
	RIPC_ENV_SPIN_US,
	RIPC_ENV_SPIN_PULL_US,
	RIPC_ENV_POLL_INTERVAL_US,
	RIPC_ENV_BUSY_POLL_US,
	RIPC_ENV_RX_DEPTH,
	RIPC_ENV_QUEUE_MAX,
	RIPC_ENV_SHM,
	RIPC_ENV_SHM_CHECKED,
	RIPC_ENV_SHM_PEERS,
	RIPC_ENV_DOORBELL,
	RIPC_ENV_DIRECT_WAKE,
	RIPC_ENV_PULL_MEM_MAX,
	RIPC_ENV_READ_CHUNK,
	RIPC_ENV_DONE_DELAY_US,
	RIPC_ENV_FRAG_MAX,
	RIPC_ENV_RETURN_TIMEOUT_MS,
	RIPC_ENV_RESOLVER,
	RIPC_ENV_RESOLVER_GROUP,
	RIPC_ENV_RESOLVER_PORT,
	RIPC_ENV_RESOLVER_ADDR,
	RIPC_ENV_RESOLVER_TTL_MS,
	RIPC_ENV_RESOLVER_PROBE_MS,
	RIPC_ENV_DIRECTORY,
	RIPC_ENV_DIRECTORY_SESSION_MS,
	RIPC_ENV_DIRECTORY_TIMEOUT_MS,
	RIPC_ENV_TEST_MR_BITS,
	RIPC_ENV_TEST_PEERS_MAX,
	RIPC_ENV_TEST_SPIN_END_US,
	RIPC_ENV_LOCALITY,
	RIPC_ENV_NUMA_NODE,
	RIPC_ENV_TOPOLOGY,
	RIPC_ENV_COUNT
};

struct ripc_env_var {
	const char *name;
	const char *def;   /* default value as text */
	const char *help;
};

extern const struct ripc_env_var ripc__env_table[RIPC_ENV_COUNT];

/* Value of the variable, or its default when unset or empty. */
const char *ripc__env_str(enum ripc_env_id id);
/* Integer value; an unparsable value logs a warning and gives the default.
 * Accepts k/m/g suffixes (powers of 1024).  A variable whose default is
 * "auto" may be set to "auto" too: then, and when its value is unparsable,
 * RIPC_INT_AUTO, and the caller chooses (ripc__load_config). */
int64_t ripc__env_int(enum ripc_env_id id);
#define RIPC_INT_AUTO INT64_MIN
bool ripc__env_bool(enum ripc_env_id id);
/* Set the log level from RIPC_LOG_LEVEL (a bad word is reported). */
void ripc__env_load_log_level(void);
/* Is the variable set (to a non-empty value) in the environment, as
 * opposed to taking its default? */
bool ripc__env_is_set(enum ripc_env_id id);

#endif
