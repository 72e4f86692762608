/*
 * Short and long sends: what goes into the message and what is exposed.
 *
 * Short send: the items are gathered into one message, handed to the
 * transmit queue (txq.c), which posts it at once or queues it.  A done
 * message held back for the destination's process (pull.c) rides in it.
 *
 * Long send: every item gets its own registration (exactly its bytes,
 * remote read only, a fresh random key; expose.c) and one LONG message
 * carries the descriptors.  The receiver pulls the items and answers DONE,
 * which ends the exposure; RIPC_LONG_TIMEOUT_MS ends it otherwise.  A
 * peer that offered us return buffers gets the items written straight into
 * them instead (retbuf.c).
 *
 * Everything here runs with the library lock held, called by the API
 * layer (api.c), and returns without waiting: when the transport pushes
 * back, the message is queued and the caller gets RIPC_EINPROGRESS with
 * the request to wait for.  Nothing here runs the engine.
 */
#include <stdlib.h>
#include <string.h>

#include "retbuf.h"
#include "ripc_int.h"

/* Send one short message to one peer. */
static int short_to(struct ripc_peer *peer, uint64_t inc,
		    const struct ripc_send_args *a, bool mcast,
		    struct ripc_waiter *waiter, struct ripc_txreq **req)
{
	struct ripc_wire_desc rdesc[RIPC_MAX_RETURN_BUFS];
	struct ripc_wire_out m = {
		.type = RIPC_MT_SHORT,
		.flags = mcast ? RIPC_WF_MCAST : 0,
		.src = a->src,
		.dst = a->dest,
		.src_inc = CTX->incarnation,
		.dst_inc = inc,
		.nshort = a->n,
		.short_buf = a->buf,
		.short_len = a->len,
	};
	uint64_t expo[2] = { 0, 0 };
	int err;

	if (a->nr && !mcast) {
		err = ripc__retbuf_offer(peer, inc, a->src, a->dest, a->rbuf,
					 a->rlen, a->nr, rdesc, &expo[0]);
		if (err)
			return err;
		m.nret = a->nr;
		m.ret_desc = rdesc;
		m.status = ripc__retbuf_lifetime_ms();
	}
	/* The done message of a long send from this peer, held back for
	 * this answer (pull.c), rides along. */
	if (!mcast && (m.cookie = ripc__done_take(peer, inc)))
		m.flags |= RIPC_WF_DONE;
	err = ripc__tx_send(peer, &m, a->now + CTX->cfg.send_timeout_ns,
			    waiter, expo, req);
	if (err && err != RIPC_EINPROGRESS) {
		if (expo[0])
			ripc__expose_end_id_quiet(expo[0]);
		if (m.cookie)
			ripc__done_give_back(peer, m.cookie);
	}
	return err;
}

/* Expose the items to one peer and send the LONG message describing them
 * (with return-buffer offers if any). */
static int long_to(struct ripc_peer *peer, uint64_t inc,
		   const struct ripc_send_args *a, bool mcast,
		   struct ripc_waiter *waiter, struct ripc_txreq **req)
{
	struct ripc_tp *t = &CTX->tp[peer->tp];
	struct ripc_wire_desc desc[RIPC_MAX_ITEMS];
	struct ripc_wire_desc rdesc[RIPC_MAX_RETURN_BUFS];
	uint64_t expo[2] = { 0, 0 };
	struct ripc_expo *e;
	int err;

	err = ripc__expose(peer, inc, RIPC_EXPO_LONG, a->src, a->dest, a->buf,
			   a->len, a->n,
			   a->now + CTX->cfg.long_timeout_ns, desc, &e);
	if (err)
		return err;
	expo[0] = e->id;
	if (a->nr && !mcast) {
		err = ripc__retbuf_offer(peer, inc, a->src, a->dest, a->rbuf,
					 a->rlen, a->nr, rdesc, &expo[1]);
		if (err) {
			ripc__expose_end_id_quiet(expo[0]);
			return err;
		}
	}
	struct ripc_wire_out m = {
		.type = RIPC_MT_LONG,
		.flags = RIPC_WF_ADDR | (mcast ? RIPC_WF_MCAST : 0),
		.src = a->src,
		.dst = a->dest,
		.src_inc = CTX->incarnation,
		.dst_inc = inc,
		.cookie = expo[0],
		.nlong = a->n,
		.long_desc = desc,
		.nret = expo[1] ? a->nr : 0,
		.ret_desc = rdesc,
		.status = expo[1] ? ripc__retbuf_lifetime_ms() : 0,
		.addr_tp = (uint8_t)t->id,
		.addr_len = (uint8_t)t->addrlen,
		.addr = t->addr,
	};

	err = ripc__tx_send(peer, &m, a->now + CTX->cfg.send_timeout_ns,
			    waiter, expo, req);
	if (err && err != RIPC_EINPROGRESS) {
		ripc__expose_end_id_quiet(expo[0]);
		if (expo[1])
			ripc__expose_end_id_quiet(expo[1]);
	}
	return err;
}

/* Every current member of a group gets its own copy; a member that cannot
 * take it at once gets it queued (detached), so that a slow or dead member
 * does not hold up the others.  Return buffers make no sense for a group. */
static int to_members(const struct ripc_send_args *a, struct ripc_route *r,
		      bool is_long)
{
	unsigned ok = 0;

	if (a->nr)
		return RIPC_EINVAL;
	for (unsigned i = 0; i < r->nmembers; i++) {
		int e = is_long ? long_to(r->members[i], r->member_inc[i], a,
					  true, NULL, NULL)
				: short_to(r->members[i], r->member_inc[i], a,
					   true, NULL, NULL);

		if (e == RIPC_OK || e == RIPC_EINPROGRESS)
			ok++;
		else
			ripc__log_rl(RIPC_LOG_INFO,
				     "multicast %u: a member missed a "
				     "message: %s",
				     a->dest, ripc_strerror(e));
	}
	if (r->nmembers && !ok)
		return RIPC_EPEER;
	if (is_long) {
		CTX->stats.long_sent += ok;
		CTX->stats.bytes_exposed_long += ok * a->total;
	} else {
		CTX->stats.short_sent += ok;
		CTX->stats.bytes_sent_short += ok * a->total;
	}
	return RIPC_OK;
}

int ripc__send_short(const struct ripc_send_args *a, struct ripc_route *r,
		     struct ripc_waiter *waiter, struct ripc_txreq **req)
{
	int err;

	if (r->mcast)
		return to_members(a, r, false);
	err = short_to(r->peer, r->inc, a, false, waiter, req);
	if (err == RIPC_OK || err == RIPC_EINPROGRESS) {
		CTX->stats.short_sent++;
		CTX->stats.bytes_sent_short += a->total;
	}
	return err;
}

int ripc__send_long(const struct ripc_send_args *a, struct ripc_route *r,
		    struct ripc_waiter *waiter, struct ripc_txreq **req)
{
	int err = RIPC_ENOTFOUND;

	if (r->mcast)
		return to_members(a, r, true);
	/* A peer that offered us return buffers gets the items written
	 * straight into them where they fit (not when this send offers
	 * return buffers of its own: that asks for a reply). */
	if (!a->nr)
		err = ripc__retbuf_reply(r->peer, r->inc, a->src, a->dest,
					 a->buf, a->len, a->n);
	if (err == RIPC_ENOTFOUND)
		err = long_to(r->peer, r->inc, a, false, waiter, req);
	if (err == RIPC_OK || err == RIPC_EINPROGRESS) {
		CTX->stats.long_sent++;
		CTX->stats.bytes_exposed_long += a->total;
	}
	return err;
}
