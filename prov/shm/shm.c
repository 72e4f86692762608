/*
 * shm transport: libfabric's shared-memory provider, for peers on the same
 * host.  Its CQ has no wait fd in 1.17 (the progress thread polls it), it
 * allows 256 peers per endpoint, and with FI_MR_VIRT_ADDR granted its RMA
 * uses process_vm_readv/writev without checking keys (ref §2, §3.2): the
 * trust boundary is the user id.  RIPC_SHM_CHECKED withholds VIRT_ADDR.
 */
#include <rdma/fabric.h>

#include "ofi.h"

static const struct ripc_ofi_row shm_row = {
	.name = "shm",
	.prov_legacy = "shm",
	.prov_current = "shm",
	.mr_mode_offer = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
			 FI_MR_PROV_KEY | FI_MR_ENDPOINT,
	.bind_src_addr = false,
	.same_host_only = true,
	.wait_fd = false,
	.unchecked_fast_rma = true,
};

static int shm_open(const struct ripc_prov_opts *opts, struct ripc_prov **out,
		    struct ripc_prov_attr *attr)
{
	return ripc__ofi_open(&shm_row, opts, out, attr);
}

const struct ripc_prov_ops ripc__prov_shm_ops = RIPC_OFI_OPS(shm_open);
