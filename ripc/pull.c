/*
 * Pulls: the receiver's half of a long send.  For each described item the
 * receiver picks where it goes (a receive window of the service, else a
 * process-wide one, else a library buffer within RIPC_PULL_MEM_MAX), reads
 * it with RDMA reads of at most ripc__rma_chunk() bytes (RIPC_READ_CHUNK,
 * else the transport's own), in flight together, and when every read
 * has completed tells the sender DONE (queued, never waited for) and makes
 * the message ready on its service.
 *
 * The done message of a pull that delivered its message is held back for
 * up to RIPC_DONE_DELAY_US: the receiving application usually answers the
 * sender at once, and its short answer then carries the done along
 * (RIPC_WF_DONE, send.c), one message per long send fewer (on tcp, one
 * send and one receive, each a system call or two, of about four).  It
 * goes alone when the delay is over (the engine, ripc__done_flush), when
 * the receiving process next calls ripc_receive (it is not answering
 * now), when another done for the same peer is held back, and at
 * finalize.  Failures (a pull that gave up) are never held back.
 *
 * A pull belongs to this file from start to finish.  The message it fills
 * may be freed meanwhile (the service went away, finalize): ripc__msg_free
 * only clears pull->msg, and the pull then ends at its next step without
 * delivering, giving back the memory its reads no longer target.  Reads
 * are posted by the engine (ripc__pull_post_reads) as transmit resources
 * allow; nothing here polls.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ripc_int.h"

/* Tell the sender its buffers may go (status 0) or that we gave up. */
static void send_done(struct ripc_peer *peer, uint64_t cookie,
		      uint32_t status)
{
	struct ripc_wire_out m = {
		.type = RIPC_MT_DONE,
		.src_inc = CTX->incarnation,
		.dst_inc = peer->inc,
		.cookie = cookie,
		.status = status,
	};
	int err = ripc__tx_send(peer, &m,
				ripc__now_ns() + CTX->cfg.send_timeout_ns,
				NULL, NULL, NULL);

	if (err && err != RIPC_EINPROGRESS)
		ripc__log_rl(RIPC_LOG_INFO, "done message not sent: %s",
			     ripc_strerror(err));
}

/* Send the done held back for peer alone, and forget it. */
static void done_release(struct ripc_peer *peer)
{
	uint64_t cookie = peer->done_cookie;

	ripc_list_del(&peer->done_link);
	peer->done_cookie = 0;
	if (peer->done_inc == peer->inc) {
		send_done(peer, cookie, 0);
		CTX->stats.dones_alone++;
	}
	ripc__peer_put(peer);
}

/* Hold the done for (peer, cookie) back (see the top of this file). */
static void done_defer(struct ripc_peer *peer, uint64_t cookie)
{
	uint64_t due = ripc__now_ns() + CTX->cfg.done_delay_ns;

	if (peer->done_cookie)
		done_release(peer); /* one held back per peer: the older goes */
	peer->done_cookie = cookie;
	peer->done_inc = peer->inc;
	peer->done_due = due;
	ripc_list_add_tail(&CTX->pl.dones, &peer->done_link);
	ripc__peer_hold(peer);
	if (due < CTX->pl.done_next)
		CTX->pl.done_next = due;
	ripc__timer_note(due);
}

uint64_t ripc__done_take(struct ripc_peer *peer, uint64_t inc)
{
	uint64_t cookie = peer->done_cookie;

	if (!cookie || peer->done_inc != inc)
		return 0;
	ripc_list_del(&peer->done_link);
	peer->done_cookie = 0;
	ripc__peer_put(peer);
	CTX->stats.dones_carried++;
	return cookie;
}

void ripc__done_give_back(struct ripc_peer *peer, uint64_t cookie)
{
	CTX->stats.dones_carried--;
	CTX->stats.dones_alone++;
	send_done(peer, cookie, 0);
}

void ripc__done_flush(uint64_t now)
{
	struct ripc_list *pos, *tmp;
	uint64_t next = UINT64_MAX;

	ripc_list_for_each_safe(pos, tmp, &CTX->pl.dones)
	{
		struct ripc_peer *peer =
			ripc_container_of(pos, struct ripc_peer, done_link);

		if (now && now < peer->done_due) {
			if (peer->done_due < next)
				next = peer->done_due;
			continue;
		}
		done_release(peer);
	}
	CTX->pl.done_next = next;
}

static void place(struct ripc_pull *p, struct ripc_msg *m, unsigned pos,
		  const struct ripc_wire_desc *d)
{
	struct ripc_pull_item *it = &p->item[pos];
	struct ripc_window *w;

	it->raddr = d->addr;
	it->key = d->key;
	it->len = d->len;
	it->next = it->done = 0;
	m->long_len[pos] = d->len;
	if (d->len == 0) {
		/* Nothing was registered and there is nothing to read. */
		it->dst = NULL;
		m->long_origin[pos] = RIPC_ORIGIN_EMPTY;
	} else if ((w = ripc__window_take(m->to, d->len))) {
		it->dst = w->base;
		it->win = w;
		it->desc = ripc__desc_for(p->peer->tp, w->base, d->len);
		m->long_origin[pos] = RIPC_ORIGIN_WINDOW;
		CTX->stats.window_hits++;
	} else if (CTX->mem.pull_mem + d->len <= CTX->cfg.pull_mem_max &&
		   (it->dst = ripc__libbuf_alloc(d->len, true))) {
		it->libbuf = true;
		it->desc = ripc__desc_for(p->peer->tp, it->dst, d->len);
		m->long_origin[pos] = RIPC_ORIGIN_LIBBUF;
		CTX->stats.library_buffers++;
	} else {
		/* Nowhere to put it: skipped, reported as RIPC_ETRUNC. */
		it->dst = NULL;
		it->len = 0;
		m->long_origin[pos] = RIPC_ORIGIN_NONE;
		m->err = RIPC_ETRUNC;
	}
	m->long_ptr[pos] = it->dst;
}

/* Start pulling `count` items (descs[i] goes to position pos[i] of message
 * m, which is already queued on its service).  Every pos[i] is below
 * m->nlong, the pull's item count: the decoder checked a RETURN message's
 * positions (wire.c, check_aux). */
void ripc__pull_start(struct ripc_peer *peer, uint64_t cookie,
		      struct ripc_msg *m, const struct ripc_wire_desc *descs,
		      const uint16_t *pos, unsigned count)
{
	struct ripc_pull *p =
		ripc__zalloc(sizeof(*p) + m->nlong * sizeof(p->item[0]));

	if (!p) {
		m->err = RIPC_EPULL;
		send_done(peer, cookie, RIPC_ENOMEM);
		ripc__msg_ready(m);
		return;
	}
	p->msg = m;
	p->peer = ripc__peer_hold(peer);
	p->cookie = cookie;
	p->deadline = ripc__now_ns() + CTX->cfg.pull_timeout_ns;
	ripc__timer_note(p->deadline);
	p->n = m->nlong;
	for (unsigned i = 0; i < count; i++)
		place(p, m, pos[i], &descs[i]);
	m->pull = p;
	ripc_list_init(&p->readq);
	ripc_list_add_tail(&CTX->pl.pulls, &p->link);
	ripc_list_add_tail(&CTX->pl.readq, &p->readq);
	p->queued = true;
	ripc__pull_post_reads();
}

/* Every read has completed (or failed, or none was needed). */
static void finish(struct ripc_pull *p)
{
	struct ripc_msg *m = p->msg;
	uint64_t bytes = 0;

	ripc_list_del(&p->link);
	if (p->queued)
		ripc_list_del(&p->readq);
	if (m && p->err)
		m->err = RIPC_EPULL;
	for (unsigned i = 0; i < p->n; i++) {
		struct ripc_pull_item *it = &p->item[i];

		bytes += it->done;
		if (!it->dst)
			continue;
		if (p->err || !m) {
			/* Not delivered: give the memory back. */
			if (it->win)
				ripc__window_return(it->win);
			else if (it->libbuf)
				ripc__libbuf_free(it->dst);
			if (m) {
				m->long_ptr[i] = NULL;
				m->long_origin[i] = RIPC_ORIGIN_NONE;
			}
		} else if (it->win) {
			ripc__window_consumed(it->win);
		}
	}
	CTX->stats.bytes_pulled_long += bytes;
	if (p->err)
		CTX->stats.pulls_failed++;
	if (!p->err && m && CTX->cfg.done_delay_ns && !CTX->shutting_down)
		done_defer(p->peer, p->cookie);
	else
		send_done(p->peer, p->cookie, p->err ? RIPC_EPULL : 0);
	ripc__peer_put(p->peer);
	if (m) {
		m->pull = NULL;
		CTX->stats.long_recv++;
		ripc__msg_ready(m);
	}
	free(p);
}

/* libfabric tcp drops a connection, failing everything queued on it,
 * when any RMA on it faults (ref §3.2); rxm reconnects on the next use. */
static bool connection_reset(int err)
{
	return err == -ECANCELED || err == -ENOTCONN || err == -EPIPE ||
	       err == -ECONNRESET;
}

void ripc__pull_read_done(struct ripc_read_op *op, int err)
{
	struct ripc_pull *p = op->pull;

	ripc_list_del(&op->posted);
	CTX->tp[op->tp].tx_inflight--;
	if (err && connection_reset(err) && op->retries == 0 && p->msg &&
	    !p->err && !CTX->shutting_down) {
		/* Once: the chunk is posted again by ripc__pull_post_reads. */
		op->retries++;
		ripc_list_add_tail(&CTX->pl.read_retry, &op->retry);
		return;
	}
	p->chunks_out--;
	if (err) {
		if (!p->err)
			ripc__log_rl(RIPC_LOG_INFO, "pull read failed: %s",
				     strerror(-err));
		p->err = RIPC_EPULL;
	} else {
		p->item[op->item].done += op->len;
	}
	free(op);
	if (p->chunks_out == 0 && (!p->queued || p->err || !p->msg))
		finish(p);
}

static bool all_posted(const struct ripc_pull *p)
{
	for (unsigned i = 0; i < p->n; i++)
		if (p->item[i].dst && p->item[i].next < p->item[i].len)
			return false;
	return true;
}

/* A peer that refused a read (-EAGAIN) or is not ready is passed over
 * for the rest of the pass (its later chunks keep their order), but the
 * pass goes on with the other peers: one peer that cannot take reads (a
 * process that ended before libfabric's shm finished its hand-shake with
 * it, or with a read of ours outstanding; a tcp connection that refuses
 * every read until the pull times out) must not hold up the pulls from
 * everybody else.  The pass used to stop at the first -EAGAIN: a held
 * server of the lifecycle case `finalize -p shm` (docs/FAULTS.md) had the
 * pulls from clients that had finalized at the head of its queue, none
 * posted, and the check client's request behind them until it timed
 * out. */
static bool peer_refused(const struct ripc_peer *peer, uint32_t gen)
{
	return peer->read_gen == gen;
}

static void repost_retries(uint32_t gen)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->pl.read_retry)
	{
		struct ripc_read_op *op =
			ripc_container_of(pos, struct ripc_read_op, retry);
		struct ripc_pull *p = op->pull;
		struct ripc_pull_item *it = &p->item[op->item];
		struct ripc_tp *t = &CTX->tp[op->tp];
		int ret;

		if (p->err || !p->msg) {
			ret = -ECANCELED; /* given up meanwhile */
		} else if (peer_refused(p->peer, gen)) {
			continue; /* keep its order; try later */
		} else if (!ripc__peer_ready(p->peer)) {
			p->peer->read_gen = gen; /* not mapped yet: later */
			continue;
		} else {
			ret = t->ops->read(t->p, p->peer->handle,
					   it->dst + op->off, op->len, it->desc,
					   it->raddr + op->off, it->key,
					   &op->op);
			if (ret == -EAGAIN) {
				ripc__bell_ring(p->peer); /* see txq.c */
				p->peer->read_gen = gen;
				continue; /* keep its order; try later */
			}
		}
		ripc_list_del(&op->retry);
		ripc_list_add_tail(&CTX->pl.reads, &op->posted);
		t->tx_inflight++;
		if (ret)
			ripc__pull_read_done(op, ret); /* its chunk failed */
		else
			ripc__bell_ring(p->peer);
	}
}

void ripc__pull_post_reads(void)
{
	struct ripc_list *pos, *tmp;
	uint32_t gen = ++CTX->pl.read_gen;

	if (gen == 0) /* wrapped: 0 is every peer's initial value */
		gen = ++CTX->pl.read_gen;
	if (!ripc_list_empty(&CTX->pl.read_retry))
		repost_retries(gen);

	ripc_list_for_each_safe(pos, tmp, &CTX->pl.readq)
	{
		struct ripc_pull *p =
			ripc_container_of(pos, struct ripc_pull, readq);
		struct ripc_tp *t = &CTX->tp[p->peer->tp];
		size_t chunk = ripc__rma_chunk(&t->attr);

		if (!p->msg && !p->err)
			p->err = RIPC_EPULL; /* abandoned: post no more */
		if (!p->err && peer_refused(p->peer, gen))
			continue; /* it refused a read this pass */
		if (!p->err && !ripc__peer_ready(p->peer))
			continue; /* not mapped by the owner yet: later */
		for (unsigned i = 0;
		     i < p->n && !p->err && !peer_refused(p->peer, gen); i++) {
			struct ripc_pull_item *it = &p->item[i];

			while (it->dst && it->next < it->len) {
				struct ripc_read_op *op;
				uint64_t len = it->len - it->next;
				int ret;

				if (t->tx_inflight >= t->tx_max)
					return; /* resume on completions */
				if (len > chunk)
					len = chunk;
				if (!(op = ripc__zalloc(sizeof(*op)))) {
					p->err = RIPC_EPULL;
					break;
				}
				op->op.kind = RIPC_OP_READ;
				ripc_list_init(&op->posted);
				op->pull = p;
				op->item = (uint16_t)i;
				op->off = it->next;
				op->len = len;
				op->tp = (int8_t)t->id;
				ret = t->ops->read(t->p, p->peer->handle,
						   it->dst + it->next, len,
						   it->desc,
						   it->raddr + it->next,
						   it->key, &op->op);
				if (ret == -EAGAIN) {
					free(op);
					ripc__bell_ring(p->peer);
					p->peer->read_gen = gen;
					break; /* the next pull, another peer */
				}
				if (ret) {
					free(op);
					p->err = RIPC_EPULL;
					break;
				}
				ripc_list_add_tail(&CTX->pl.reads, &op->posted);
				t->tx_inflight++;
				p->chunks_out++;
				it->next += len;
				/* (shm's fast path copies without the owner;
				 * its other paths need the owner's progress) */
				ripc__bell_ring(p->peer);
			}
		}
		if (p->err || all_posted(p)) {
			ripc_list_del(&p->readq);
			p->queued = false;
			if (p->chunks_out == 0)
				finish(p);
		}
	}
}

/* A pull that overran RIPC_PULL_TIMEOUT_MS, or from a process of this
 * host that has ended (ripc__peer_ended): the message is delivered with
 * RIPC_EPULL and without its long items; the pull ends once its reads in
 * flight have come back. */
uint64_t ripc__pull_timers(uint64_t now)
{
	struct ripc_list *pos, *tmp;
	uint64_t next = UINT64_MAX;

	ripc_list_for_each_safe(pos, tmp, &CTX->pl.pulls)
	{
		struct ripc_pull *p =
			ripc_container_of(pos, struct ripc_pull, link);
		struct ripc_msg *m = p->msg;

		if (!m)
			continue;
		if (ripc__peer_ended(p->peer,
				     p->deadline - CTX->cfg.pull_timeout_ns,
				     now, &next)) {
			ripc__log_rl(RIPC_LOG_INFO,
				     "pull from a process that ended");
			CTX->stats.peer_ended_transfers++;
		} else if (now < p->deadline) {
			if (p->deadline < next)
				next = p->deadline;
			continue;
		} else {
			ripc__log_rl(RIPC_LOG_INFO, "pull timed out");
		}
		for (unsigned i = 0; i < p->n; i++) {
			m->long_ptr[i] = NULL;
			m->long_origin[i] = RIPC_ORIGIN_NONE;
		}
		m->pull = NULL;
		m->err = RIPC_EPULL;
		p->msg = NULL;
		p->err = RIPC_EPULL;
		ripc__msg_ready(m);
		if (p->chunks_out == 0)
			finish(p);
	}
	return next;
}

bool ripc__pull_pending(void)
{
	return !ripc_list_empty(&CTX->pl.pulls);
}

/* Teardown, after the engine stopped and before the transports close:
 * reads still with the transport are abandoned (closing the endpoints
 * cancels them without completions); the memory they target is given
 * back. */
void ripc__pull_fini(void)
{
	struct ripc_list *pos, *tmp;

	/* The transports are still open: what was pulled is said DONE. */
	ripc__done_flush(0);

	ripc_list_for_each_safe(pos, tmp, &CTX->pl.read_retry)
	{
		ripc_list_del(pos);
		free(ripc_container_of(pos, struct ripc_read_op, retry));
	}
	ripc_list_for_each_safe(pos, tmp, &CTX->pl.reads)
	{
		ripc_list_del(pos);
		free(ripc_container_of(pos, struct ripc_read_op, posted));
	}
	ripc_list_for_each_safe(pos, tmp, &CTX->pl.pulls)
	{
		struct ripc_pull *p =
			ripc_container_of(pos, struct ripc_pull, link);

		ripc_list_del(&p->link);
		if (p->msg) {
			/* The message must not free what is freed here. */
			for (unsigned k = 0; k < p->n; k++) {
				p->msg->long_ptr[k] = NULL;
				p->msg->long_origin[k] = RIPC_ORIGIN_NONE;
			}
			p->msg->pull = NULL;
		}
		for (unsigned k = 0; k < p->n; k++) {
			if (p->item[k].win)
				ripc__window_consumed(p->item[k].win);
			else if (p->item[k].libbuf)
				ripc__libbuf_free(p->item[k].dst);
		}
		ripc__peer_put(p->peer);
		free(p);
	}
	ripc_list_init(&CTX->pl.readq);
}
