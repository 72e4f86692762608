/*
 * verbs transport: InfiniBand, RoCE, iWARP through rxm over verbs MSG
 * endpoints.  Written to the documented contract (fi_verbs(7), ref §1.4):
 * verbs requires FI_MR_LOCAL (every local buffer registered, descriptors
 * passed), FI_MR_VIRT_ADDR (peers address by virtual address),
 * FI_MR_ALLOCATED and FI_MR_PROV_KEY (the HCA picks 32-bit keys).  The core
 * handles all four from the attributes ripc__ofi_open reports; the same
 * code paths are exercised on tcp/shm with RIPC_TEST_MR_BITS.  Without an
 * RDMA device fi_getinfo returns ENODATA and the transport is skipped.
 */
#include <rdma/fabric.h>

#include "ofi.h"

const struct ripc_ofi_row ripc__verbs_row = {
	.name = "verbs",
	.prov_legacy = "verbs;ofi_rxm",
	.prov_current = "verbs;ofi_rxm",
	.mr_mode_offer = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
			 FI_MR_PROV_KEY | FI_MR_ENDPOINT,
	/* The IPoIB/RoCE address is the provider's choice, not RIPC_TCP_ADDR. */
	.bind_src_addr = false,
	.same_host_only = false,
	.wait_fd = true,
	.unchecked_fast_rma = false,
};

static int verbs_open(const struct ripc_prov_opts *opts,
		      struct ripc_prov **out, struct ripc_prov_attr *attr)
{
	return ripc__ofi_open(&ripc__verbs_row, opts, out, attr);
}

const struct ripc_prov_ops ripc__prov_verbs_ops = RIPC_OFI_OPS(verbs_open);
