/*
 * Dispatch: what happens to a received message once the engine hands over
 * its receive slot.  The decoder (wire.c) validates every field first;
 * handlers then queue messages on services, start pulls, end exposures.
 * A handler that must answer (NACK here, DONE in pull.c, RETURN in
 * retbuf.c) queues its answer on the transmit queue and never waits for
 * it: dispatch runs inside the engine and must not poll or block.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "retbuf.h"
#include "ripc_int.h"

/* A slot done with goes back to the transport, unless the transport
 * has its receives posted (the slot of a message that came through the
 * doorbell, or the spare taken for it, bell.c). */
void ripc__slot_repost(struct ripc_tp *t, struct ripc_slot *s)
{
	if (CTX->shutting_down ||
	    t->rx_posted + t->nowed >= CTX->cfg.rx_depth ||
	    ripc__post_slot(t, s) != 0)
		ripc__slot_put(s);
}

/* A receive completed: dispatch it, or give the slot back on error. */
void ripc__recv_slot_done(struct ripc_tp *t, struct ripc_slot *s, int err,
			  size_t len)
{
	t->rx_posted--;
	s->tp = -1;
	if (err) {
		/* Canceled at close, or a transport error: the buffer itself
		 * is fine. */
		ripc__slot_repost(t, s);
		return;
	}
	ripc__dispatch(t, s, len);
}

/* Receiver refuses a message whose sender can be answered. */
static void send_nack(struct ripc_peer *peer, const struct ripc_wire_in *m,
		      uint32_t why)
{
	struct ripc_wire_out o = {
		.type = RIPC_MT_NACK,
		.src = m->dst,
		.dst = m->src,
		.src_inc = CTX->incarnation,
		.dst_inc = m->src_inc,
		.cookie = m->cookie,
		.status = why,
	};
	int err = ripc__tx_send(peer, &o,
				ripc__now_ns() + CTX->cfg.send_timeout_ns,
				NULL, NULL, NULL);

	if (err && err != RIPC_EINPROGRESS)
		ripc__log_rl(RIPC_LOG_INFO, "nack not sent: %s",
			     ripc_strerror(err));
}

static struct ripc_service *accepting_service(const struct ripc_wire_in *m)
{
	struct ripc_service *svc = CTX->svc[m->dst];

	if (!svc) {
		CTX->stats.drops_no_service++;
		return NULL;
	}
	if (svc->qlen >= CTX->cfg.queue_max) {
		CTX->stats.drops_queue_full++;
		ripc__log_rl(RIPC_LOG_WARN,
			     "service %u: queue full (%u), dropping messages",
			     m->dst, svc->qlen);
		return NULL;
	}
	return svc;
}

static void deliver_short(struct ripc_tp *t, struct ripc_slot *s,
			  const struct ripc_wire_in *in)
{
	struct ripc_service *svc = accepting_service(in);
	struct ripc_slot *spare = NULL;
	struct ripc_msg *m;

	if (!svc)
		goto drop;
	/* The slot goes to the application: take a replacement first, or
	 * drop the message if there is none (bounded memory).  A slot that
	 * was not posted (doorbell mail) needs none.  The replacement is
	 * posted by the transport's next poll (ripc__owe_slot). */
	if (in->nshort && t->rx_posted + t->nowed < CTX->cfg.rx_depth &&
	    !(spare = ripc__slot_get())) {
		CTX->stats.drops_queue_full++;
		goto drop;
	}
	if (!(m = ripc__msg_alloc(in->nshort, 0))) {
		if (spare)
			ripc__slot_put(spare);
		goto drop;
	}
	if (in->nret)
		ripc__retbuf_on_offers(in);
	m->from = in->src;
	m->to = in->dst;
	m->src_inc = in->src_inc;
	m->nshort = in->nshort;
	for (unsigned i = 0; i < in->nshort; i++) {
		m->short_ptr[i] = in->short_ptr[i];
		m->short_len[i] = in->short_len[i];
	}
	ripc__msg_enqueue(svc, m);
	CTX->stats.short_recv++;
	if (in->nshort) {
		size_t total = 0;

		for (unsigned i = 0; i < in->nshort; i++)
			total += in->short_len[i];
		CTX->stats.bytes_recv_short += total;
		m->slot = s;
		s->state = SLOT_HELD;
		s->tp = -1;
		if (spare)
			ripc__owe_slot(t, spare);
	} else {
		ripc__slot_repost(t, s);
	}
	ripc__msg_ready(m);
	return;
drop:
	ripc__slot_repost(t, s);
}

static void handle_long(struct ripc_tp *t, const struct ripc_wire_in *in)
{
	struct ripc_service *svc;
	struct ripc_peer *peer;
	struct ripc_msg *m;
	uint16_t pos[RIPC_MAX_ITEMS];
	int err;

	if (in->addr_tp != t->id) {
		CTX->stats.drops_malformed++;
		return;
	}
	peer = ripc__peer_get(t->id, in->addr, in->addr_len, in->src_inc,
			      &err);
	if (!peer)
		return;
	if (!(svc = accepting_service(in))) {
		/* The sender may release its buffers now. */
		send_nack(peer, in, RIPC_ENOSERVICE);
		return;
	}
	if (!(m = ripc__msg_alloc(0, in->nlong))) {
		send_nack(peer, in, RIPC_ENOMEM);
		return;
	}
	if (in->nret)
		ripc__retbuf_on_offers(in);
	m->from = in->src;
	m->to = in->dst;
	m->src_inc = in->src_inc;
	m->nlong = in->nlong;
	ripc__msg_enqueue(svc, m);
	for (unsigned i = 0; i < in->nlong; i++)
		pos[i] = (uint16_t)i;
	ripc__pull_start(peer, in->cookie, m, in->long_desc, pos, in->nlong);
}

static void handle_return(struct ripc_tp *t, const struct ripc_wire_in *in)
{
	struct ripc_service *svc;
	struct ripc_peer *peer = NULL;
	struct ripc_msg *m;
	uint16_t pos[RIPC_MAX_ITEMS];
	int err;

	if (in->nlong) {
		if (in->addr_tp != t->id) {
			CTX->stats.drops_malformed++;
			return;
		}
		peer = ripc__peer_get(t->id, in->addr, in->addr_len,
				      in->src_inc, &err);
		if (!peer)
			return;
	}
	if (!(svc = accepting_service(in))) {
		/* The replier may release what it exposed for pulling. */
		if (peer)
			send_nack(peer, in, RIPC_ENOSERVICE);
		return;
	}
	if (!(m = ripc__msg_alloc(0, in->nlong + in->nret)))
		return;
	m->from = in->src;
	m->to = in->dst;
	m->src_inc = in->src_inc;
	m->nlong = in->nlong + in->nret;
	if (!ripc__retbuf_on_return(in, m)) {
		/* Forged or stale: the owner never sees it.  Items the
		 * sender exposed for pulling are released by the NACK. */
		CTX->stats.drops_forged++;
		if (peer)
			send_nack(peer, in, RIPC_ENOTFOUND);
		ripc__msg_free(m);
		return;
	}
	CTX->stats.return_replies_recv++;
	ripc__msg_enqueue(svc, m);
	if (!in->nlong) {
		CTX->stats.long_recv++;
		ripc__msg_ready(m);
		return;
	}
	for (unsigned i = 0; i < in->nlong; i++)
		pos[i] = (uint16_t)in->long_desc[i].aux;
	ripc__pull_start(peer, in->cookie, m, in->long_desc, pos, in->nlong);
}

/* The receiver of a long send (or of a reply's items to pull) is done:
 * a DONE message, or a short message that carries one (status 0). */
static void handle_done(uint64_t cookie, uint64_t src_inc, uint32_t status)
{
	struct ripc_expo *e = ripc__expose_find(cookie, src_inc);

	if (!e || e->kind != RIPC_EXPO_LONG) {
		CTX->stats.drops_stale++;
		return;
	}
	ripc__expose_end(e, status ? RIPC_EPEER : RIPC_OK, false);
}

static void handle_nack(const struct ripc_wire_in *in)
{
	struct ripc_expo *e;

	if (in->cookie == 0 && in->status == RIPC_ENOTFOUND) {
		/* The owner cancelled return buffers it offered us. */
		ripc__retbuf_forget(in->src_inc, in->src, in->dst);
		return;
	}
	/* The destination refused: sends to it look it up afresh. */
	ripc__route_drop(in->src);
	e = ripc__expose_find(in->cookie, in->src_inc);
	if (e && e->kind == RIPC_EXPO_LONG)
		ripc__expose_end(e, RIPC_EPEER, false);
	else
		CTX->stats.drops_stale++;
}

static bool decode(struct ripc_tp *t, struct ripc_slot *s, size_t len,
		   struct ripc_wire_in *in)
{
	int werr = ripc__wire_decode(s->buf, len, in);

	if (werr) {
		CTX->stats.drops_malformed++;
		ripc__log_rl(RIPC_LOG_INFO, "%s: dropped message: %s",
			     t->attr.name, ripc__wire_strerror(werr));
		ripc__slot_repost(t, s);
		return false;
	}
	return true;
}

static void dispatch_in(struct ripc_tp *t, struct ripc_slot *s,
			const struct ripc_wire_in *in);

void ripc__dispatch(struct ripc_tp *t, struct ripc_slot *s, size_t len)
{
	struct ripc_wire_in in;

	if (ripc__wire_maybe_frag(s->buf, len) &&
	    !ripc__frag_input(t, &s, &len))
		return;
	if (decode(t, s, len, &in))
		dispatch_in(t, s, &in);
}

void ripc__dispatch_mail(struct ripc_tp *t, struct ripc_slot *s, size_t len,
			 pid_t pid)
{
	struct ripc_wire_in in;

	if (!decode(t, s, len, &in))
		return;
	/* A live process of another pid holds that incarnation: somebody
	 * else's words in its name.  No live record at all is a sender
	 * that has ended since (its message stands, as it would over shm)
	 * or a claim nobody can check (as over shm). */
	if (ripc__reg_vouch(in.src_inc, pid) == -EPERM) {
		CTX->stats.drops_forged++;
		ripc__log_rl(RIPC_LOG_INFO,
			     "doorbell: pid %d is not incarnation %016llx: "
			     "dropped", (int)pid,
			     (unsigned long long)in.src_inc);
		ripc__slot_repost(t, s);
		return;
	}
	dispatch_in(t, s, &in);
}

static void dispatch_in(struct ripc_tp *t, struct ripc_slot *s,
			const struct ripc_wire_in *in)
{
	if (t->attr.same_host_only)
		ripc__peer_learn(t->id, in->src_inc);
	if (in->dst_inc != CTX->incarnation) {
		/* Meant for an earlier process at this address. */
		CTX->stats.drops_stale++;
		ripc__slot_repost(t, s);
		return;
	}
	switch (in->type) {
	case RIPC_MT_SHORT:
		/* Its done first, as if it had come alone just before. */
		if (in->flags & RIPC_WF_DONE) {
			CTX->stats.dones_carried_recv++;
			handle_done(in->cookie, in->src_inc, 0);
		}
		deliver_short(t, s, in);
		return; /* the slot was reposted or handed over */
	case RIPC_MT_LONG:
		handle_long(t, in);
		break;
	case RIPC_MT_RETURN:
		handle_return(t, in);
		break;
	case RIPC_MT_DONE:
		handle_done(in->cookie, in->src_inc, in->status);
		break;
	case RIPC_MT_NACK:
		handle_nack(in);
		break;
	}
	ripc__slot_repost(t, s);
}
