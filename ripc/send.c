/*
 * Short and long sends.
 *
 * Short send: the items are gathered into one message.  Messages up to the
 * transport's inject size are built on the stack and injected; larger ones
 * are built in a registered bounce slot and sent asynchronously, so the
 * call returns as soon as the message is handed to the transport and never
 * waits for the receiver.
 *
 * Long send: every item gets its own registration (exactly its bytes,
 * remote read only, a fresh random key) and one LONG message carries the
 * descriptors.  The receiver pulls the items and answers DONE, which
 * closes the registrations; RIPC_LONG_TIMEOUT_MS revokes them otherwise.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ripc_int.h"
#include "retbuf.h"

/* Validate the application's item arrays (DESIGN §6: never UB). */
static int check_items(void **buf, uint32_t *length, uint16_t n,
		       unsigned max, uint64_t *total)
{
	uint64_t sum = 0;

	if (n > max)
		return RIPC_ETOOMANY;
	if (n && (!buf || !length))
		return RIPC_EINVAL;
	for (unsigned i = 0; i < n; i++) {
		if (!buf[i] || length[i] == 0)
			return RIPC_EINVAL;
		sum += length[i];
	}
	if (total)
		*total = sum;
	return RIPC_OK;
}

/* The route a send in progress follows; while the transport pushes back,
 * a change of route (the service restarted or moved) ends the attempt
 * with RIPC_EAGAIN so that the caller sends to where it is now. */
static const struct ripc_route *sending_route;

static bool route_moved(void)
{
	return sending_route && !ripc__route_current(sending_route);
}

#define DEFERRED_MAX 1024

/* One attempt to post an encoded message: injected when small (the buffer
 * is free again at once), else sent from slot s, which its completion
 * frees. */
static int post_once(struct ripc_peer *peer, const void *buf, size_t len,
		     struct ripc_slot *s)
{
	struct ripc_tp *t = &CTX->tp[peer->tp];
	struct iovec iov;
	void *desc;
	int ret;

	if (len <= t->attr.inject_size)
		return t->ops->inject(t->p, peer->handle, buf, len);
	s->op.kind = RIPC_OP_SEND;
	s->state = SLOT_TX;
	s->tp = peer->tp;
	iov = (struct iovec){ s->buf, len };
	desc = ripc__desc_for(t->id, s->buf, len);
	ret = t->ops->send(t->p, peer->handle, &iov, &desc, 1, &s->op);
	if (ret == 0)
		t->tx_inflight++;
	return ret;
}

static void deferred_free(struct ripc_deferred *d)
{
	ripc_list_del(&d->link);
	d->peer->ndeferred--;
	CTX->ndeferred--;
	ripc__peer_put(d->peer);
	free(d);
}

/* Post what was deferred, oldest first, keeping each peer's order: a peer
 * that pushes back is skipped for the rest of this pass. */
void ripc__deferred_flush(uint64_t now)
{
	struct ripc_list *pos, *tmp;
	uint32_t gen = ++CTX->flush_gen;

	ripc_list_for_each_safe(pos, tmp, &CTX->deferred)
	{
		struct ripc_deferred *d =
			ripc_container_of(pos, struct ripc_deferred, link);
		struct ripc_tp *t = &CTX->tp[d->peer->tp];
		int ret;

		if (d->peer->flush_gen == gen)
			continue;
		if (now >= d->deadline) {
			CTX->stats.send_timeouts++;
			ripc__log_rl(RIPC_LOG_INFO,
				     "a deferred message was not taken in time; "
				     "dropped");
			ripc__slot_put(d->slot);
			deferred_free(d);
			continue;
		}
		ret = post_once(d->peer, d->slot->buf, d->len, d->slot);
		if (ret == -EAGAIN) {
			d->peer->flush_gen = gen;
			continue;
		}
		if (ret || d->len <= t->attr.inject_size)
			ripc__slot_put(d->slot); /* not in flight */
		if (ret)
			ripc__log_rl(RIPC_LOG_INFO, "deferred send failed: %s",
				     strerror(-ret));
		deferred_free(d);
	}
}

void ripc__deferred_fini(void)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->deferred)
	{
		struct ripc_deferred *d =
			ripc_container_of(pos, struct ripc_deferred, link);

		ripc__slot_put(d->slot);
		deferred_free(d);
	}
}

/* Hand a message to the transport now, or queue it to be posted by
 * progress until `deadline`.  RIPC_OK means taken or queued. */
static int send_or_defer(struct ripc_peer *peer, const struct ripc_wire_out *m,
			 uint64_t deadline)
{
	size_t len = ripc__wire_size(m);
	struct ripc_deferred *d;
	struct ripc_slot *s;
	int ret;

	if (len == 0)
		return RIPC_EINVAL;
	if (CTX->ndeferred >= DEFERRED_MAX || !(s = ripc__slot_get()))
		return RIPC_ENOMEM;
	ripc__wire_encode_sized(m, s->buf, len);
	if (peer->ndeferred == 0) {
		ret = post_once(peer, s->buf, len, s);
		if (ret != -EAGAIN) {
			if (ret || len <= CTX->tp[peer->tp].attr.inject_size)
				ripc__slot_put(s);
			return ripc__err_from_errno(ret);
		}
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		ripc__slot_put(s);
		return RIPC_ENOMEM;
	}
	d->peer = ripc__peer_hold(peer);
	d->slot = s;
	d->len = len;
	d->deadline = deadline;
	peer->ndeferred++;
	CTX->ndeferred++;
	ripc_list_add_tail(&CTX->deferred, &d->link);
	return RIPC_OK;
}

int ripc__send_msg(struct ripc_peer *peer, const struct ripc_wire_out *m,
		   uint64_t deadline)
{
	struct ripc_tp *t = &CTX->tp[peer->tp];
	size_t len = ripc__wire_size(m);
	struct ripc_slot *s = NULL;
	int ret;

	if (len == 0)
		return RIPC_EINVAL;
	if (len <= t->attr.inject_size && len <= 4096) {
		uint8_t buf[4096] __attribute__((aligned(8)));

		ripc__wire_encode_sized(m, buf, len);
		for (;;) {
			ret = t->ops->inject(t->p, peer->handle, buf, len);
			if (ret != -EAGAIN)
				break;
			CTX->stats.send_retries++;
			ripc__progress_locked();
			if (route_moved())
				return RIPC_EAGAIN;
			if (ripc__now_ns() >= deadline) {
				CTX->stats.send_timeouts++;
				return RIPC_ETIMEDOUT;
			}
		}
		return ripc__err_from_errno(ret);
	}

	while (!(s = ripc__slot_get())) {
		ripc__progress_locked();
		if (ripc__now_ns() >= deadline)
			return RIPC_ENOMEM;
	}
	ripc__wire_encode_sized(m, s->buf, len);
	s->op.kind = RIPC_OP_SEND;
	s->state = SLOT_TX;
	s->tp = peer->tp;
	for (;;) {
		struct iovec iov = { s->buf, len };
		void *desc = ripc__desc_for(t->id, s->buf, len);

		ret = t->ops->send(t->p, peer->handle, &iov, &desc, 1, &s->op);
		if (ret != -EAGAIN)
			break;
		CTX->stats.send_retries++;
		ripc__progress_locked();
		if (route_moved()) {
			ripc__slot_put(s);
			return RIPC_EAGAIN;
		}
		if (ripc__now_ns() >= deadline) {
			CTX->stats.send_timeouts++;
			ripc__slot_put(s);
			return RIPC_ETIMEDOUT;
		}
	}
	if (ret) {
		ripc__slot_put(s);
		return ripc__err_from_errno(ret);
	}
	t->tx_inflight++;
	return RIPC_OK;
}

void ripc__send_done(struct ripc_peer *peer, uint64_t cookie, uint32_t status)
{
	struct ripc_wire_out m = {
		.type = RIPC_MT_DONE,
		.src_inc = CTX->incarnation,
		.dst_inc = peer->inc,
		.cookie = cookie,
		.status = status,
	};
	int err = ripc__send_msg(peer, &m,
				 ripc__now_ns() + CTX->cfg.send_timeout_ns);

	if (err)
		ripc__log_rl(RIPC_LOG_INFO, "done message not sent: %s",
			     ripc_strerror(err));
}

void ripc__lsend_release(struct ripc_lsend *ls, bool timed_out)
{
	struct ripc_tp *t = &CTX->tp[ls->peer->tp];

	for (unsigned i = 0; i < ls->n; i++)
		if (ls->mr[i].handle)
			t->ops->mr_close(t->p, &ls->mr[i]);
	ripc_list_del(&ls->link);
	ripc__peer_put(ls->peer);
	if (timed_out)
		CTX->stats.long_timeouts++;
	else
		CTX->stats.long_released++;
	CTX->stats.deregistrations += ls->n;
	free(ls);
}

/* Common front half of both sends: arguments, ownership, resolution. */
static int send_prepare(uint16_t src, uint16_t dest, void **buf,
			uint32_t *length, uint16_t n, void **rbufs,
			uint32_t *rlens, uint16_t nr, bool is_long,
			uint64_t *total, struct ripc_route **route)
{
	int err;

	/* Every argument is checked before anything happens, so a bad call
	 * fails at once whatever the state of the destination. */
	if (src > RIPC_MAX_SERVICE_ID || dest > RIPC_MAX_SERVICE_ID)
		return RIPC_EBADID;
	if ((err = check_items(buf, length, n, RIPC_MAX_ITEMS, total)))
		return err;
	if (is_long && n == 0)
		return RIPC_EINVAL;
	if (!is_long && *total > RIPC_SHORT_MAX)
		return RIPC_E2BIG;
	if ((err = check_items(rbufs, rlens, nr, RIPC_MAX_RETURN_BUFS, NULL)))
		return err;
	if ((err = ripc__ensure_init()))
		return err;
	ripc__lock();
	if (CTX->shutting_down) {
		ripc__unlock();
		return RIPC_ESHUTDOWN;
	}
	if (!CTX->svc[src]) {
		ripc__unlock();
		return RIPC_ENOTOWNER;
	}
	CTX->app_active_ns = ripc__now_ns();
	err = ripc__resolve(dest, route,
			    ripc__now_ns() + CTX->cfg.resolve_timeout_ns);
	if (err)
		ripc__unlock();
	return err;
}

/* Send one short message to one peer. */
static int short_to(struct ripc_peer *peer, uint64_t inc, uint16_t src,
		    uint16_t dest, void **buf, uint32_t *length, uint16_t n,
		    void **rbufs, uint32_t *rlens, uint16_t nr, bool mcast)
{
	struct ripc_wire_desc rdesc[RIPC_MAX_RETURN_BUFS];
	struct ripc_wire_out m = {
		.type = RIPC_MT_SHORT,
		.flags = mcast ? RIPC_WF_MCAST : 0,
		.src = src,
		.dst = dest,
		.src_inc = CTX->incarnation,
		.dst_inc = inc,
		.nshort = n,
		.short_buf = buf,
		.short_len = length,
	};
	uint64_t offer = 0;
	int err;

	if (nr) {
		err = ripc__retbuf_offer(peer, inc, src, dest, rbufs, rlens,
					 nr, rdesc, &offer);
		if (err)
			return err;
		m.nret = nr;
		m.ret_desc = rdesc;
		m.status = ripc__retbuf_lifetime_ms();
	}
	if (mcast)
		err = send_or_defer(peer, &m,
				    ripc__now_ns() + CTX->cfg.send_timeout_ns);
	else
		err = ripc__send_msg(peer, &m,
				     ripc__now_ns() + CTX->cfg.send_timeout_ns);
	if (err && offer)
		ripc__retbuf_revoke_offer(offer);
	return err;
}

RIPC_API uint8_t ripc_send_short(uint16_t src, uint16_t dest, void **buf,
				 uint32_t *length, uint16_t num_items,
				 void **return_bufs,
				 uint32_t *return_buf_lengths,
				 uint16_t num_return_bufs)
{
	struct ripc_route *r;
	uint64_t total;
	int err;

	err = send_prepare(src, dest, buf, length, num_items, return_bufs,
			   return_buf_lengths, num_return_bufs, false, &total,
			   &r);
	if (err)
		return (uint8_t)ripc__set_err(err);
	if (r->mcast) {
		/* Every current member gets its own copy; a member that
		 * cannot be reached does not stop the others.  Return
		 * buffers make no sense for a group. */
		unsigned ok = 0;

		if (num_return_bufs)
			err = RIPC_EINVAL;
		for (unsigned i = 0; !err && i < r->nmembers; i++) {
			int e = short_to(r->members[i], r->member_inc[i], src,
					 dest, buf, length, num_items, NULL,
					 NULL, 0, true);

			if (e == RIPC_OK)
				ok++;
			else
				ripc__log_rl(RIPC_LOG_INFO,
					     "multicast %u: a member missed a "
					     "message: %s",
					     dest, ripc_strerror(e));
		}
		if (!err && r->nmembers && !ok)
			err = RIPC_EPEER;
		if (!err) {
			CTX->stats.short_sent += ok;
			CTX->stats.bytes_sent_short += ok * total;
		}
	} else {
		uint64_t until = ripc__now_ns() + CTX->cfg.send_timeout_ns;

		for (;;) {
			sending_route = r;
			err = short_to(r->peer, r->inc, src, dest, buf, length,
				       num_items, return_bufs,
				       return_buf_lengths, num_return_bufs,
				       false);
			sending_route = NULL;
			if (err != RIPC_EAGAIN)
				break;
			/* Moved or restarted meanwhile: follow it. */
			err = ripc__resolve(dest, &r, until);
			if (err)
				break;
			if (r->mcast || ripc__now_ns() >= until) {
				err = RIPC_ETIMEDOUT;
				break;
			}
		}
		if (!err) {
			CTX->stats.short_sent++;
			CTX->stats.bytes_sent_short += total;
		} else if (err == RIPC_ETIMEDOUT || err == RIPC_EPEER) {
			ripc__route_drop(dest);
		}
	}
	ripc__unlock();
	return (uint8_t)(err ? ripc__set_err(err) : RIPC_OK);
}

/* Register every item read-only with a fresh key and describe it. */
int ripc__expose_items(struct ripc_tp *t, void **buf, const uint32_t *length,
		       uint16_t n, unsigned access, struct ripc_prov_mr *mr,
		       struct ripc_wire_desc *desc)
{
	for (unsigned i = 0; i < n; i++) {
		int ret;

		do {
			uint64_t key;

			if ((ret = ripc__key_new(t, &key)))
				break;
			ret = t->ops->mr_reg(t->p, buf[i], length[i], access,
					     key, &mr[i]);
		} while (ret == -EEXIST); /* key collision: draw again */
		if (ret) {
			for (unsigned k = 0; k < i; k++)
				t->ops->mr_close(t->p, &mr[k]);
			return ripc__err_from_errno(ret);
		}
		desc[i].addr = mr[i].base;
		desc[i].key = mr[i].key;
		desc[i].len = length[i];
		desc[i].aux = 0;
	}
	CTX->stats.registrations += n;
	return RIPC_OK;
}

/* Send a LONG message exposing items to one peer; on success the lsend
 * record keeps the registrations until DONE or the timeout. */
static int long_to(struct ripc_peer *peer, uint64_t inc, uint16_t src,
		   uint16_t dest, void **buf, uint32_t *length, uint16_t n,
		   void **rbufs, uint32_t *rlens, uint16_t nr, bool mcast)
{
	struct ripc_tp *t = &CTX->tp[peer->tp];
	struct ripc_wire_desc desc[RIPC_MAX_ITEMS];
	struct ripc_wire_desc rdesc[RIPC_MAX_RETURN_BUFS];
	struct ripc_lsend *ls;
	uint64_t offer = 0;
	int err;

	ls = calloc(1, sizeof(*ls));
	if (!ls)
		return RIPC_ENOMEM;
	if ((err = ripc__random_u64(&ls->cookie))) {
		free(ls);
		return RIPC_ETRANSPORT;
	}
	err = ripc__expose_items(t, buf, length, n, RIPC_ACC_REMOTE_READ,
				 ls->mr, desc);
	if (err) {
		free(ls);
		return err;
	}
	ls->peer = ripc__peer_hold(peer);
	ls->peer_inc = inc;
	ls->n = n;
	for (unsigned i = 0; i < n; i++) {
		ls->buf[i] = buf[i];
		ls->len[i] = length[i];
	}
	if (nr) {
		err = ripc__retbuf_offer(peer, inc, src, dest, rbufs, rlens,
					 nr, rdesc, &offer);
		if (err)
			goto fail;
	}
	{
		struct ripc_wire_out m = {
			.type = RIPC_MT_LONG,
			.flags = RIPC_WF_ADDR | (mcast ? RIPC_WF_MCAST : 0),
			.src = src,
			.dst = dest,
			.src_inc = CTX->incarnation,
			.dst_inc = inc,
			.cookie = ls->cookie,
			.nlong = n,
			.long_desc = desc,
			.nret = nr,
			.ret_desc = rdesc,
			.status = nr ? ripc__retbuf_lifetime_ms() : 0,
			.addr_tp = (uint8_t)t->id,
			.addr_len = (uint8_t)t->addrlen,
			.addr = t->addr,
		};

		ls->deadline = ripc__now_ns() + CTX->cfg.long_timeout_ns;
		ripc_list_add_tail(&CTX->lsends, &ls->link);
		/* A group member that does not take its copy at once gets
		 * it queued, so that it does not hold up the others. */
		if (mcast)
			err = send_or_defer(peer, &m,
					    ripc__now_ns() +
						    CTX->cfg.send_timeout_ns);
		else
			err = ripc__send_msg(peer, &m,
					     ripc__now_ns() +
						     CTX->cfg.send_timeout_ns);
		if (err) {
			if (offer)
				ripc__retbuf_revoke_offer(offer);
			ripc__lsend_release(ls, false);
			CTX->stats.long_released--;
			return err;
		}
	}
	return RIPC_OK;
fail:
	for (unsigned i = 0; i < n; i++)
		t->ops->mr_close(t->p, &ls->mr[i]);
	ripc__peer_put(ls->peer);
	free(ls);
	return err;
}

RIPC_API uint8_t ripc_send_long(uint16_t src, uint16_t dest, void **buf,
				uint32_t *length, uint16_t num_items,
				void **return_bufs,
				uint32_t *return_buf_lengths,
				uint16_t num_return_bufs)
{
	struct ripc_route *r;
	uint64_t total;
	int err;

	err = send_prepare(src, dest, buf, length, num_items, return_bufs,
			   return_buf_lengths, num_return_bufs, true, &total,
			   &r);
	if (err)
		return (uint8_t)ripc__set_err(err);
	if (r->mcast) {
		unsigned ok = 0;

		if (num_return_bufs)
			err = RIPC_EINVAL;
		for (unsigned i = 0; !err && i < r->nmembers; i++)
			if (long_to(r->members[i], r->member_inc[i], src, dest,
				    buf, length, num_items, NULL, NULL, 0,
				    true) == RIPC_OK)
				ok++;
		if (!err && r->nmembers && !ok)
			err = RIPC_EPEER;
		if (!err) {
			CTX->stats.long_sent += ok;
			CTX->stats.bytes_exposed_long += ok * total;
		}
	} else {
		/* A peer that offered us return buffers gets the items
		 * written straight into them where they fit. */
		uint64_t until = ripc__now_ns() + CTX->cfg.send_timeout_ns;

		err = ripc__retbuf_reply(r->peer, r->inc, src, dest, buf,
					 length, num_items, return_bufs,
					 return_buf_lengths, num_return_bufs);
		while (err == RIPC_ENOTFOUND) {
			sending_route = r;
			err = long_to(r->peer, r->inc, src, dest, buf, length,
				      num_items, return_bufs,
				      return_buf_lengths, num_return_bufs,
				      false);
			sending_route = NULL;
			if (err != RIPC_EAGAIN)
				break;
			/* Moved or restarted meanwhile: expose to the new
			 * owner instead (the old registrations are gone). */
			err = ripc__resolve(dest, &r, until);
			if (!err && (r->mcast || ripc__now_ns() >= until))
				err = RIPC_ETIMEDOUT;
			if (!err)
				err = RIPC_ENOTFOUND;
		}
		if (!err) {
			CTX->stats.long_sent++;
			CTX->stats.bytes_exposed_long += total;
		} else if (err == RIPC_ETIMEDOUT || err == RIPC_EPEER) {
			ripc__route_drop(dest);
		}
	}
	ripc__unlock();
	return (uint8_t)(err ? ripc__set_err(err) : RIPC_OK);
}

/* ---- release notification ------------------------------------------ */

static bool exposed_locked(const void *p)
{
	struct ripc_list *pos, *tmp;
	const uint8_t *b = p;

	ripc_list_for_each_safe(pos, tmp, &CTX->lsends)
	{
		struct ripc_lsend *ls =
			ripc_container_of(pos, struct ripc_lsend, link);

		for (unsigned i = 0; i < ls->n; i++)
			if (b >= ls->buf[i] && b < ls->buf[i] + ls->len[i])
				return true;
	}
	return ripc__retbuf_exposed(p);
}

RIPC_API int ripc_buf_exposed(const void *buf)
{
	int r;

	if (!buf || !CTX->initialized)
		return 0;
	ripc__lock();
	r = exposed_locked(buf);
	ripc__unlock();
	return r;
}

RIPC_API uint8_t ripc_wait_released(const void *buf, int timeout_ms)
{
	uint64_t deadline;

	if (!buf)
		return (uint8_t)ripc__set_err(RIPC_EINVAL);
	if (!CTX->initialized)
		return RIPC_OK;
	deadline = timeout_ms < 0 ? UINT64_MAX
				  : ripc__now_ns() + ripc__ms_ns(timeout_ms);
	ripc__lock();
	while (exposed_locked(buf)) {
		if (ripc__now_ns() >= deadline) {
			ripc__unlock();
			return (uint8_t)ripc__set_err(RIPC_ETIMEDOUT);
		}
		ripc__progress_locked();
		ripc__unlock();
		ripc__progress_wait(deadline);
		ripc__lock();
	}
	ripc__unlock();
	return RIPC_OK;
}
