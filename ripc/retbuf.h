/*
 * Return buffers (libRIPC §"return buffers"): a sender offers buffers of
 * its own; when the peer later long-sends to it, the library RDMA-writes
 * the items straight into them and sends a RETURN message naming what it
 * wrote.  Owner side: offers (registrations, write-only, one use).  Peer
 * side: the offered descriptors it may use, per owner.
 */
#ifndef RIPC_RETBUF_H
#define RIPC_RETBUF_H

#include "ripc_int.h"

struct ripc_write_op {
	struct ripc_op op;
	struct ripc_reply *reply;
	int8_t tp;
};

/* How long (ms) a peer may use an offer: the owner's revocation timeout
 * halved, carried in the offering message's status field. */
static inline uint32_t ripc__retbuf_lifetime_ms(void)
{
	uint64_t ms = CTX->cfg.return_timeout_ms / 2;

	return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

/* Owner: register rbufs write-only for `peer` and describe them. */
int ripc__retbuf_offer(struct ripc_peer *peer, uint64_t inc, uint16_t src,
		       uint16_t dest, void **rbufs, const uint32_t *rlens,
		       uint16_t nr, struct ripc_wire_desc *rdesc,
		       uint64_t *offer_id);
void ripc__retbuf_revoke_offer(uint64_t offer_id);

/* Peer: reply to `dest` using buffers it offered.  RIPC_ENOTFOUND when it
 * offered none that are usable (the caller then long-sends normally). */
int ripc__retbuf_reply(struct ripc_peer *peer, uint64_t inc, uint16_t src,
		       uint16_t dest, void **buf, uint32_t *len, uint16_t n,
		       void **rbufs, uint32_t *rlens, uint16_t nr);

bool ripc__retbuf_exposed(const void *p);

/* Receive side hooks called by the dispatcher with validated messages. */
void ripc__retbuf_on_offers(const struct ripc_wire_in *m);
/* Owner got a RETURN: fills msg items written into its buffers.  Returns
 * false when the message does not match its offers (then it is dropped). */
bool ripc__retbuf_on_return(const struct ripc_wire_in *m,
			    struct ripc_msg *msg);
void ripc__retbuf_write_done(struct ripc_write_op *op, int err);
void ripc__retbuf_timers(uint64_t now);
bool ripc__retbuf_pending(void);
/* The owner cancelled what it offered to to_svc. */
void ripc__retbuf_forget(uint64_t owner_inc, uint16_t owner_svc,
			 uint16_t to_svc);
void ripc__retbuf_fini(void);

int ripc__expose_items(struct ripc_tp *t, void **buf, const uint32_t *length,
		       uint16_t n, unsigned access, struct ripc_prov_mr *mr,
		       struct ripc_wire_desc *desc);

#endif
