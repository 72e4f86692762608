/*
 * The transmit queue.
 *
 * A message is encoded and handed to the transport at once when it takes
 * it; otherwise (the transport pushes back with -EAGAIN: its queue is full,
 * rxm is still connecting, the peer is down) it is queued here and posted
 * by the engine (ripc__tx_flush) as completions free resources.  Nothing
 * here polls or waits: a caller that must know the outcome (a public send)
 * waits for its request in the API layer; handlers that answer (DONE, NACK,
 * RETURN) and multicast copies leave their requests detached, and the
 * queue frees them when they leave it.
 *
 * Order: messages to one peer leave in the order they were handed in (a
 * message is queued whenever the peer already has queued ones); a peer that
 * pushes back is skipped for the rest of a flush pass, so a slow peer does
 * not hold up the others.
 *
 * Messages up to the transport's inject size are injected (the buffer is
 * free again at once); larger ones are sent from a registered bounce slot
 * that their SEND completion frees, except that on a transport whose
 * larger sends are slow (shm) those up to RIPC_FRAG_MAX go as a train of
 * injects (frag.c, wire.h): the first one the message's first bytes, each
 * next one a continuation header and the next bytes.  A train stalled by
 * the transport is queued with what has gone, and the rest follows before
 * any later message to that peer.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ripc_int.h"

#define TXQ_MAX 4096 /* queued messages; beyond, sends fail RIPC_ENOMEM */

/* After a post to a peer on this host (ret: what the transport said, or
 * -EAGAIN if the peer could not be posted to yet): 0 when the message is
 * on its way, else ret.
 *
 * A post that went links the pair: from now on it talks over the
 * transport (shm), and the peer is rung if it sleeps.  A peer that cannot
 * take the message over shm yet (it has not mapped us, or shm has its
 * connection request still unanswered) and has not been linked gets it
 * through its doorbell instead (bell.c), which also wakes it.  Failing
 * that the peer is rung anyway: shm refuses (-EAGAIN) until the peer has
 * taken our connection request or made room, which it does only while it
 * makes progress. */
static int after_post(struct ripc_peer *peer, const void *buf, size_t len,
		      int ret)
{
	if (ret == 0) {
		peer->linked = true;
		ripc__bell_ring(peer);
		return 0;
	}
	if (ret != -EAGAIN)
		return ret;
	if (!peer->linked && peer->reg_slot1 &&
	    ripc__bell_post(peer, buf, len) == 0)
		return 0;
	ripc__bell_ring(peer);
	return ret;
}

static bool frag_pays(const struct ripc_tp *t, size_t len)
{
	return t->attr.frag_injects && len <= CTX->cfg.frag_max &&
	       len > t->attr.inject_size &&
	       t->attr.inject_size > 2 * RIPC_WIRE_HDR;
}

/* Post what is left of a train from slot s, *off bytes of it gone: 0 when
 * all went (s is free again), -EAGAIN with *off advanced, or another
 * negative errno. */
static int post_frags(struct ripc_peer *peer, struct ripc_slot *s, size_t len,
		      uint32_t *off)
{
	struct ripc_tp *t = &CTX->tp[peer->tp];
	size_t room = t->attr.inject_size < 4096 ? t->attr.inject_size : 4096;
	uint8_t buf[4096] __attribute__((aligned(8)));
	uint64_t src_inc, dst_inc;
	int ret = 0;

	if (*off == 0) {
		ripc__wire_frag_mark(s->buf, true);
		ret = t->ops->inject(t->p, peer->handle, s->buf, room);
		ripc__wire_frag_mark(s->buf, false); /* whole again */
		if (ret) {
			/* Nothing went: as any message, whole through the
			 * doorbell if the pair is not linked yet. */
			ret = after_post(peer, s->buf, len, ret);
			if (ret == 0)
				ripc__slot_put(s);
			return ret;
		}
		peer->linked = true;
		*off = (uint32_t)room;
	}
	memcpy(&src_inc, s->buf + 8, 8); /* as encoded: no byte swaps */
	memcpy(&dst_inc, s->buf + 16, 8);
	while (*off < len) {
		uint32_t n = (uint32_t)(len - *off < room - RIPC_WIRE_HDR
						? len - *off
						: room - RIPC_WIRE_HDR);
		size_t flen = ripc__wire_frag_encode(buf, le64toh(src_inc),
						     le64toh(dst_inc), *off,
						     s->buf + *off, n);

		ret = t->ops->inject(t->p, peer->handle, buf, flen);
		if (ret)
			goto out;
		*off += n;
	}
	CTX->stats.frag_msgs_sent++;
	ripc__slot_put(s);
out:
	/* Rung when the rest went, and when shm pushes back: it refuses
	 * until the peer makes progress (after_post). */
	if (ret == 0 || ret == -EAGAIN)
		ripc__bell_ring(peer);
	return ret;
}

/* One attempt to post an encoded message from slot s (*off bytes of it
 * gone already as fragments): 0 (s is the transport's until its
 * completion, or free again if injected or sent through the doorbell),
 * -EAGAIN, or another negative errno (s is still the caller's). */
static int post_once(struct ripc_peer *peer, struct ripc_slot *s, size_t len,
		     uint32_t *off)
{
	struct ripc_tp *t = &CTX->tp[peer->tp];
	struct iovec iov;
	void *desc;
	int ret;

	if (*off || (ripc__peer_mapped_us(peer) && frag_pays(t, len)))
		return post_frags(peer, s, len, off);
	if (!ripc__peer_mapped_us(peer)) {
		/* It has not mapped us yet (peer.c). */
		ret = after_post(peer, s->buf, len, -EAGAIN);
		if (ret == 0)
			ripc__slot_put(s);
		return ret;
	}
	if (len <= t->attr.inject_size) {
		ret = t->ops->inject(t->p, peer->handle, s->buf, len);
		ret = after_post(peer, s->buf, len, ret);
		if (ret == 0)
			ripc__slot_put(s);
		return ret;
	}
	s->op.kind = RIPC_OP_SEND;
	s->state = SLOT_TX;
	s->tp = peer->tp;
	iov = (struct iovec){ s->buf, len };
	desc = ripc__desc_for(t->id, s->buf, len);
	ret = t->ops->send(t->p, peer->handle, &iov, &desc, 1, &s->op);
	if (ret == 0) {
		t->tx_inflight++;
		return after_post(peer, s->buf, len, 0);
	}
	s->state = SLOT_FREE;
	s->tp = -1;
	ret = after_post(peer, s->buf, len, ret);
	if (ret == 0)
		ripc__slot_put(s); /* it went through the doorbell */
	return ret;
}

/* A message small enough to inject, built on the stack: the common short
 * send costs no slot. */
static int inject_now(struct ripc_peer *peer, const struct ripc_wire_out *m,
		      size_t len)
{
	struct ripc_tp *t = &CTX->tp[peer->tp];
	uint8_t buf[4096] __attribute__((aligned(8)));

	ripc__wire_encode_sized(m, buf, len);
	if (!ripc__peer_mapped_us(peer))
		return after_post(peer, buf, len, -EAGAIN);
	return after_post(peer, buf, len,
			  t->ops->inject(t->p, peer->handle, buf, len));
}

/* A train straight from the caller's items, fragment by fragment through
 * one stack buffer: a message that all goes is never gathered into a slot
 * (a copy that stays in cache: at 16 KiB the one-way time moved within the
 * noise, perf_notes.md 12-02; it spares memory traffic, not latency).
 * Returns 0 when all went, or what the transport said with *off the bytes
 * that went (0: none, and the caller's slot path tries again, doorbell
 * included; else the rest must follow from a slot). */
static int train_now(struct ripc_peer *peer, const struct ripc_wire_out *m,
		     size_t len, uint32_t *off)
{
	struct ripc_tp *t = &CTX->tp[peer->tp];
	size_t room = t->attr.inject_size < 4096 ? t->attr.inject_size : 4096;
	uint8_t buf[4096] __attribute__((aligned(8)));
	struct ripc_wire_cursor c = { .m = m };
	size_t head = ripc__wire_encode_head(m, buf, len);
	int ret;

	if (head >= room)
		return -EAGAIN; /* many descriptors: the slot path's */
	ripc__wire_gather(&c, buf + head, room - head);
	ripc__wire_frag_mark(buf, true);
	ret = t->ops->inject(t->p, peer->handle, buf, room);
	if (ret)
		return ret;
	peer->linked = true;
	*off = (uint32_t)room;
	while (*off < len) {
		uint32_t n = (uint32_t)(len - *off < room - RIPC_WIRE_HDR
						? len - *off
						: room - RIPC_WIRE_HDR);

		ripc__wire_frag_head(buf, m->src_inc, m->dst_inc, *off, n);
		ripc__wire_gather(&c, buf + RIPC_WIRE_HDR, n);
		ret = t->ops->inject(t->p, peer->handle, buf,
				     RIPC_WIRE_HDR + n);
		if (ret)
			break;
		*off += n;
	}
	if (ret == 0)
		CTX->stats.frag_msgs_sent++;
	if (ret == 0 || ret == -EAGAIN)
		ripc__bell_ring(peer); /* as post_frags */
	return ret;
}

int ripc__tx_send(struct ripc_peer *peer, const struct ripc_wire_out *m,
		  uint64_t deadline, struct ripc_waiter *waiter,
		  const uint64_t *expo, struct ripc_txreq **out)
{
	struct ripc_tp *t = &CTX->tp[peer->tp];
	size_t len = ripc__wire_size(m);
	struct ripc_txreq *r;
	struct ripc_slot *s;
	bool tried = false;
	uint32_t off = 0;
	int ret;

	if (len == 0)
		return RIPC_EINVAL;
	if (!t->open)
		return RIPC_ESHUTDOWN;
	if (peer->nqueued == 0 && len <= t->attr.inject_size && len <= 4096) {
		ret = inject_now(peer, m, len);
		if (ret != -EAGAIN)
			return ripc__err_from_errno(ret);
		tried = true;
	}
	if (!(s = ripc__slot_get()))
		return RIPC_ENOMEM;
	if (peer->nqueued == 0 && !tried && ripc__peer_mapped_us(peer) &&
	    frag_pays(t, len)) {
		/* The slot is taken first so that a train that stalls can
		 * always be queued with what has gone. */
		ret = train_now(peer, m, len, &off);
		if (ret != -EAGAIN) {
			ripc__slot_put(s);
			return ripc__err_from_errno(ret);
		}
		tried = off > 0; /* else none went: as any message below */
	}
	ripc__wire_encode_sized(m, s->buf, len);
	if (peer->nqueued == 0 && !tried) {
		ret = post_once(peer, s, len, &off);
		if (ret != -EAGAIN) {
			if (ret)
				ripc__slot_put(s);
			return ripc__err_from_errno(ret);
		}
	}
	CTX->stats.send_retries++;
	if (CTX->tx.n >= TXQ_MAX || !(r = ripc__zalloc(sizeof(*r)))) {
		ripc__slot_put(s);
		return RIPC_ENOMEM;
	}
	r->peer = ripc__peer_hold(peer);
	r->slot = s;
	r->len = len;
	r->off = off;
	r->deadline = deadline;
	if (expo) {
		r->expo[0] = expo[0];
		r->expo[1] = expo[1];
	}
	r->waiter = waiter;
	r->state = TXR_QUEUED;
	peer->nqueued++;
	CTX->tx.n++;
	ripc_list_add_tail(&CTX->tx.queue, &r->link);
	if (out)
		*out = r;
	return RIPC_EINPROGRESS;
}

/* The request leaves the queue with `state`; its waiter (if any) is woken
 * and frees it, else it is freed here. */
static void leave(struct ripc_txreq *r, uint8_t state, int err)
{
	ripc_list_del(&r->link);
	r->peer->nqueued--;
	CTX->tx.n--;
	r->state = state;
	r->err = err;
	if (state == TXR_FAILED && r->slot) {
		ripc__slot_put(r->slot);
		r->slot = NULL;
	}
	for (int k = 0; k < 2; k++) {
		struct ripc_expo *e;

		if (!r->expo[k] || !(e = ripc__expose_by_id(r->expo[k])))
			continue;
		if (state == TXR_SENT && e->kind == RIPC_EXPO_LONG)
			/* Its time runs from when the receiver can know. */
			e->deadline = ripc__now_ns() + CTX->cfg.long_timeout_ns;
		else if (state == TXR_FAILED)
			/* The receiver never heard of these buffers; a waiter
			 * reports the failure itself. */
			ripc__expose_end(e, RIPC_EPEER, r->waiter != NULL);
	}
	if (r->waiter) {
		/* Still listed, so that its owner is always the context
		 * (a forked child's copy included), until the waiter frees
		 * it. */
		ripc_list_add_tail(&CTX->tx.done, &r->link);
		ripc__waiter_wake(r->waiter);
		return;
	}
	ripc__peer_put(r->peer);
	free(r);
}

void ripc__tx_free(struct ripc_txreq *r)
{
	ripc_list_del(&r->link);
	ripc__peer_put(r->peer);
	free(r);
}

void ripc__tx_cancel(struct ripc_txreq *r)
{
	if (r->state == TXR_QUEUED) {
		r->waiter = NULL;
		for (int k = 0; k < 2; k++) {
			struct ripc_expo *e = r->expo[k]
				? ripc__expose_by_id(r->expo[k]) : NULL;

			if (e)
				ripc__expose_end(e, RIPC_ECANCELED, true);
			r->expo[k] = 0;
		}
		leave(r, TXR_FAILED, RIPC_ECANCELED);
		return;
	}
	ripc__tx_free(r);
}

void ripc__tx_flush(uint64_t now)
{
	struct ripc_list *pos, *tmp;
	uint32_t gen = ++CTX->tx.flush_gen;

	ripc_list_for_each_safe(pos, tmp, &CTX->tx.queue)
	{
		struct ripc_txreq *r =
			ripc_container_of(pos, struct ripc_txreq, link);
		int ret;

		if (r->peer->flush_gen == gen)
			continue; /* an older message of this peer waits */
		if (now >= r->deadline) {
			CTX->stats.send_timeouts++;
			ripc__log_rl(RIPC_LOG_INFO,
				     "a queued message was not taken in time; "
				     "dropped");
			leave(r, TXR_FAILED, RIPC_ETIMEDOUT);
			continue;
		}
		ret = post_once(r->peer, r->slot, r->len, &r->off);
		if (ret == -EAGAIN) {
			r->peer->flush_gen = gen;
			continue;
		}
		if (ret) {
			ripc__log_rl(RIPC_LOG_INFO, "queued send failed: %s",
				     strerror(-ret));
			leave(r, TXR_FAILED, ripc__err_from_errno(ret));
			continue;
		}
		r->slot = NULL; /* the transport's, or freed (inject) */
		leave(r, TXR_SENT, RIPC_OK);
	}
}

void ripc__tx_send_done(struct ripc_tp *t, struct ripc_slot *s, int err)
{
	t->tx_inflight--;
	if (err)
		ripc__log_rl(RIPC_LOG_INFO, "%s: send failed: %s",
			     t->attr.name, strerror(-err));
	ripc__slot_put(s);
}

bool ripc__tx_pending(void)
{
	return CTX->tx.n > 0;
}

/* Teardown: queued messages are dropped; waiters have left already. */
void ripc__tx_fini(void)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->tx.queue)
	{
		struct ripc_txreq *r =
			ripc_container_of(pos, struct ripc_txreq, link);

		r->waiter = NULL;
		leave(r, TXR_FAILED, RIPC_ESHUTDOWN);
	}
}
