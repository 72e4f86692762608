/*
 * tcp transport: libfabric RDM over TCP.  Before 1.18 that is the rxm
 * utility provider layered over the tcp MSG provider ("tcp;ofi_rxm"), or
 * with RIPC_TCP_NATIVE=1 1.17's native RDM provider "net"; from 1.18 on
 * the tcp provider has native RDM (the former "net" provider).  The two
 * wire protocols are not compatible (ref §0): the native one's addresses
 * carry a tag (ofi.h, native_*) so that the two kinds refuse each other.
 */
#include <rdma/fabric.h>

#include "ofi.h"

/* rxm (before 1.18) posts FI_OFI_RXM_MSG_RX_SIZE receive buffers of its
 * eager size (16 KiB) per endpoint: 4096 by default, 52 MB of the 77 MB a
 * tcp-only process held.  256 are plenty for one endpoint shared by all
 * services: 25 MB (measured with ripc_soak -x idle, see ripc(7)). */
/* rxm's eager limit is FI_OFI_RXM_BUFFER_SIZE (16384); above it every
 * message is rendezvous, an extra round trip (~3x the latency).  Our
 * header (48 bytes + 4 per item) would push a 16 KiB payload over: 1 KiB
 * more keeps payloads up to 16 KiB eager (+4 % buffer memory).  Both sides
 * must agree: a receiver's buffers must hold what a sender sends eagerly,
 * so every libripc process sets the same value (unless the user did). */
/* rxm handles connection events only every FI_OFI_RXM_CM_PROGRESS_INTERVAL
 * (10 ms) of CQ polling, on both sides: a new peer's first exchange took
 * 24 ms; with 1 ms, 17 ms (ripc_firstcontact -p tcp, A/B twice).  The cost
 * is one EQ read per millisecond of polling.  rxm under verbs reads it too. */
/* Over tcp rxm's "dynamic receive buffers" (on by default) turn its SAR
 * protocol off, so every message above the eager limit is rendezvous: the
 * receiver reads the data with RMA and completes the receive only then,
 * after a smaller message that followed it and completed at once.  Short
 * messages from one sender then arrived out of order (ripc_frag, 4
 * senders: message 3 delivered before 0-2), against ripc(7).  Off, rxm
 * sends messages up to 8 eager limits (139264 bytes, above any libripc
 * message) as segments on the connection, in order; rendezvous is left to
 * larger ones, which libripc never sends.  One-way, pinned, A/B x3:
 * 20 KiB 33 -> 16.5 us, 64 KiB 47 -> 42, 16 KiB 11.9 -> 12.6-13.1 (a copy
 * out of rxm's buffer), 8 B and 1 KiB unchanged; RSS unchanged. */
/* rxm's passthrough ("optimized rxm over tcp", fi_info protocol
 * FI_PROTO_RXM_TCP; off by default in 1.17): rxm keeps its connection
 * handling, and every data call goes straight to the connection's tcp MSG
 * endpoint under the tcp provider's own header, so there is no rxm header,
 * eager copy, segmentation or rendezvous, and the inject limit is tcp's 128
 * bytes instead of rxm's 64.  Pinned A/B: one-way 64 KiB 40.7 -> 24.9 us,
 * 16 KiB 12.9 -> 11.4, 8 B unchanged; 4 senders 300 -> 390 kmsg/s; first
 * exchange 12.3 -> 2.0 ms; idle RSS 26.6 -> 9.4 MB.  The two protocols do
 * not talk to each other, so every libripc process sets it (unless the
 * user did); with it on, of the settings below only the CM interval
 * applies.  Needs FI_PROGRESS_MANUAL (prov/util/ofi.c). */
static const char *const tcp_env[] = { "FI_OFI_RXM_ENABLE_PASSTHRU=1",
				       "FI_OFI_RXM_MSG_RX_SIZE=256",
				       "FI_OFI_RXM_BUFFER_SIZE=17408",
				       "FI_OFI_RXM_CM_PROGRESS_INTERVAL=1000",
				       "FI_OFI_RXM_ENABLE_DYN_RBUF=0",
				       NULL };

/* What both tcp rows share: the same sockets under both protocols. */
#define TCP_ROW_COMMON                                                         \
	.name = "tcp", .prov_current = "tcp",                                  \
	/* tcp needs none of these; offering all keeps us honest. */           \
	.mr_mode_offer = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |     \
			 FI_MR_PROV_KEY | FI_MR_ENDPOINT,                      \
	.bind_src_addr = true, .same_host_only = false, .wait_fd = true,       \
	/* From 1.18 on, either row opens the native provider. */            \
	.native_current = true,                                                \
	/* tcp progress reads sockets on every CQ poll (~1-3 us). */           \
	.costly_poll = true,                                                   \
	/* A big item pulled as reads of 512 KiB in flight together, not as    \
	 * one: the owner answers each with its own sendmsg, and one sendmsg   \
	 * of a whole MiB or more crawled on loopback TCP.  Builds with one    \
	 * read and with these alternating, 5 pairs, medians in MB/s: 1 MiB    \
	 * 2 749 -> 4 764, 4 MiB 2 967 -> 4 050, 16 MiB 2 698 -> 4 441, 64 MiB \
	 * 2 666 -> 3 935 (perf_notes.md, "tcp: a big item as several          \
	 * reads").  shm keeps one read per 8 MiB: smaller ones lost there     \
	 * (16 MiB 8 568-10 028 at 512 KiB against 10 408-11 281). */          \
	.rma_chunk = 512 << 10, .unchecked_fast_rma = false

const struct ripc_ofi_row ripc__tcp_row = {
	TCP_ROW_COMMON,
	.prov_legacy = "tcp;ofi_rxm",
	.env_defaults = tcp_env,
};

/* libfabric 1.17's native RDM over TCP, "net" (RIPC_TCP_NATIVE=1; from
 * 1.18 on both rows open the same provider, "tcp").  No rxm layer: its
 * CQ's wait fd costs nothing per message, where rxm's nested epoll_wait
 * is the whole of libripc's gap above raw tcp;ofi_rxm (one-way 8 B 4.76
 * against 6.21 us, perf_notes.md 12-02).  It does not speak rxm's
 * protocol, so it is a setting every process of an application shares,
 * not a silent default.  Everything else as above (TCP_ROW_COMMON). */
static const struct ripc_ofi_row ripc__tcp_native_row = {
	TCP_ROW_COMMON,
	.prov_legacy = "net",
	.trywait_keeps_signal = true,
	.native_legacy = true,
	/* No env_defaults: with the manual progress libripc asks for, net
	 * starts no thread of its own (a server over it ran two threads,
	 * its main one and libripc's progress thread, with and without
	 * FI_NET_DISABLE_AUTO_PROGRESS=1). */
};

static int tcp_open(const struct ripc_prov_opts *opts, struct ripc_prov **out,
		    struct ripc_prov_attr *attr)
{
	return ripc__ofi_open(opts->tcp_native ? &ripc__tcp_native_row
					       : &ripc__tcp_row,
			      opts, out, attr);
}

const struct ripc_prov_ops ripc__prov_tcp_ops = RIPC_OFI_OPS(tcp_open);
