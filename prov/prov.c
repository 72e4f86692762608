/* The transports compiled into the library, in preference order for a
 * peer that can be reached by several: shm (same host), verbs, tcp. */
#include "ripc_prov.h"
#include "util/ofi.h"

extern const struct ripc_prov_ops ripc__prov_shm_ops;
extern const struct ripc_prov_ops ripc__prov_verbs_ops;
extern const struct ripc_prov_ops ripc__prov_tcp_ops;

const struct ripc_prov_ops *const ripc__prov_table[RIPC_PROV_MAX] = {
	[RIPC_PROV_SHM] = &ripc__prov_shm_ops,
	[RIPC_PROV_VERBS] = &ripc__prov_verbs_ops,
	[RIPC_PROV_TCP] = &ripc__prov_tcp_ops,
};

const char *const ripc__prov_names[RIPC_PROV_MAX] = {
	[RIPC_PROV_SHM] = "shm",
	[RIPC_PROV_VERBS] = "verbs",
	[RIPC_PROV_TCP] = "tcp",
};

/* The rows of the libfabric transports (prov/util/ofi.h). */
extern const struct ripc_ofi_row ripc__shm_row, ripc__verbs_row,
	ripc__tcp_row;

const struct ripc_ofi_row *const ripc__ofi_rows[] = {
	&ripc__shm_row, &ripc__verbs_row, &ripc__tcp_row, NULL
};
