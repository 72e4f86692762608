/*
 * Return buffers (libRIPC §"return buffers"): a sender offers buffers of
 * its own; when the peer later long-sends to it, the library RDMA-writes
 * the items straight into them and sends a RETURN message naming what it
 * wrote.  Owner side: offers (exposures of kind RETURN, write-only, one
 * use).  Peer side: grants (the offered descriptors it may use, per owner)
 * and replies being written.
 */
#ifndef RIPC_RETBUF_H
#define RIPC_RETBUF_H

#include "ripc_int.h"

struct ripc_reply;

struct ripc_write_op {
	struct ripc_op op;
	struct ripc_list link; /* rb.writes while with the transport */
	struct ripc_reply *reply;
	uint64_t len;
	int8_t tp;
};

/* How long (ms) a peer may use an offer: the owner's revocation timeout
 * halved, carried in the offering message's status field. */
static inline uint32_t ripc__retbuf_lifetime_ms(void)
{
	uint64_t ms = CTX->cfg.return_timeout_ms / 2;

	return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

/* Owner: expose rbufs write-only to `peer`'s service dest and describe
 * them; *offer is the exposure's id (to end it if the offering message is
 * not sent). */
int ripc__retbuf_offer(struct ripc_peer *peer, uint64_t inc, uint16_t src,
		       uint16_t dest, void **rbufs, const uint32_t *rlens,
		       uint16_t nr, struct ripc_wire_desc *rdesc,
		       uint64_t *offer);
/* Owner: ripc_return_bufs_cancel(dest). */
void ripc__retbuf_cancel(uint16_t dest);

/* Peer: reply to `dest` using buffers it offered.  RIPC_ENOTFOUND when it
 * offered none that are usable (the caller then long-sends normally).
 * Never waits: writes the transport does not take at once are posted by
 * the engine (ripc__retbuf_post_writes). */
int ripc__retbuf_reply(struct ripc_peer *peer, uint64_t inc, uint16_t src,
		       uint16_t dest, void **buf, uint32_t *len, uint16_t n);

/* Are bytes at p being written into a peer's return buffer right now? */
bool ripc__retbuf_busy(const void *p);

/* Receive side hooks called by the dispatcher with validated messages. */
void ripc__retbuf_on_offers(const struct ripc_wire_in *m);
/* Owner got a RETURN: fills msg items written into its buffers.  Returns
 * false when the message does not match its offers (then it is dropped). */
bool ripc__retbuf_on_return(const struct ripc_wire_in *m,
			    struct ripc_msg *msg);
/* The owner cancelled what it offered to to_svc. */
void ripc__retbuf_forget(uint64_t owner_inc, uint16_t owner_svc,
			 uint16_t to_svc);

/* Engine. */
void ripc__retbuf_write_done(struct ripc_write_op *op, int err);
void ripc__retbuf_post_writes(void);
uint64_t ripc__retbuf_timers(uint64_t now);
bool ripc__retbuf_pending(void);
void ripc__retbuf_fini(void);

#endif
