/*
 * tcp transport: libfabric RDM over TCP.  Before 1.18 that is the rxm
 * utility provider layered over the tcp MSG provider ("tcp;ofi_rxm"); from
 * 1.18 on the tcp provider has native RDM (the former "net" provider).
 * The two wire protocols are not compatible (ref §0), so peers must run
 * libfabric versions on the same side of 1.18.
 */
#include <rdma/fabric.h>

#include "ofi.h"

static const struct ripc_ofi_row tcp_row = {
	.name = "tcp",
	.prov_legacy = "tcp;ofi_rxm",
	.prov_current = "tcp",
	/* tcp needs none of these; offering all keeps us honest. */
	.mr_mode_offer = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
			 FI_MR_PROV_KEY | FI_MR_ENDPOINT,
	.bind_src_addr = true,
	.same_host_only = false,
	.wait_fd = true,
	/* rxm/tcp progress reads sockets on every CQ poll (~1-3 us). */
	.costly_poll = true,
	.unchecked_fast_rma = false,
};

static int tcp_open(const struct ripc_prov_opts *opts, struct ripc_prov **out,
		    struct ripc_prov_attr *attr)
{
	return ripc__ofi_open(&tcp_row, opts, out, attr);
}

const struct ripc_prov_ops ripc__prov_tcp_ops = RIPC_OFI_OPS(tcp_open);
