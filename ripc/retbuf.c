/*
 * Return buffers.
 *
 * Owner side: each send that carries return buffers creates an *offer*:
 * every buffer registered for exactly its bytes, remote-write only, with a
 * fresh random key, offered to one peer process and service.  An offer
 * serves one reply: when a RETURN message naming its buffers arrives, the
 * buffers it names are reported to the application as long items and the
 * whole offer is revoked.  Offers also end by ripc_return_bufs_cancel(3)
 * or after RIPC_RETURN_TIMEOUT_MS.
 *
 * Peer side: the offered descriptors are kept as a *grant* per owner
 * process and service.  A long send from the offered-to service to the
 * owner writes each item into the first unused granted buffer that fits
 * (RDMA write), pulls the rest the regular way, and after the writes have
 * completed sends one RETURN message.  A grant also serves one reply, and
 * is not used once older than half the return timeout, so that the owner
 * does not revoke it under a write in flight.
 *
 * Bounds: at most RETBUF_MAX_GRANTS grants are kept (oldest dropped) and
 * RETBUF_MAX_OFFERS offers may be outstanding per process.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "retbuf.h"

#define RETBUF_MAX_GRANTS 1024
#define RETBUF_MAX_OFFERS 4096

struct ripc_offer {
	struct ripc_list link;
	uint64_t id;
	struct ripc_peer *peer;
	uint64_t peer_inc;
	uint16_t owner_svc, peer_svc;
	uint64_t deadline;
	uint16_t n;
	struct offer_buf {
		uint8_t *buf;
		uint32_t len;
		struct ripc_prov_mr mr;
	} b[];
};

struct ripc_grant {
	struct ripc_list link;
	uint64_t owner_inc;
	uint16_t owner_svc, to_svc;
	uint64_t usable_until;
	uint16_t n;
	struct grant_buf {
		uint64_t addr, key;
		uint32_t len;
		bool used;
	} b[];
};

/* A reply being written into return buffers. */
struct ripc_reply {
	struct ripc_list link;
	struct ripc_peer *peer;
	uint64_t inc;
	uint16_t src, dest;
	unsigned writes_out;
	int err;
	uint16_t nret, npull;
	struct ripc_wire_desc ret[RIPC_MAX_ITEMS];
	struct ripc_wire_desc pull[RIPC_MAX_ITEMS];
	const uint8_t *wbuf[RIPC_MAX_ITEMS];
	uint32_t wlen[RIPC_MAX_ITEMS];
	struct ripc_lsend *ls; /* items to pull, or NULL */
	struct ripc_lreg *lreg[RIPC_MAX_ITEMS]; /* temporary (mr_local) */
};

static struct ripc_list offers = RIPC_LIST_INIT(offers);
static struct ripc_list grants = RIPC_LIST_INIT(grants);
static struct ripc_list replies = RIPC_LIST_INIT(replies);
static unsigned noffers, ngrants;

/* ---- owner side ----------------------------------------------------- */

static void offer_free(struct ripc_offer *o)
{
	struct ripc_tp *t = &CTX->tp[o->peer->tp];

	for (unsigned i = 0; i < o->n; i++)
		if (o->b[i].mr.handle) {
			t->ops->mr_close(t->p, &o->b[i].mr);
			CTX->stats.deregistrations++;
		}
	ripc_list_del(&o->link);
	ripc__peer_put(o->peer);
	noffers--;
	free(o);
}

int ripc__retbuf_offer(struct ripc_peer *peer, uint64_t inc, uint16_t src,
		       uint16_t dest, void **rbufs, const uint32_t *rlens,
		       uint16_t nr, struct ripc_wire_desc *rdesc,
		       uint64_t *offer_id)
{
	struct ripc_tp *t = &CTX->tp[peer->tp];
	struct ripc_prov_mr mr[RIPC_MAX_RETURN_BUFS];
	struct ripc_offer *o;
	int err;

	if (noffers >= RETBUF_MAX_OFFERS)
		return RIPC_ENOMEM;
	o = calloc(1, sizeof(*o) + nr * sizeof(o->b[0]));
	if (!o)
		return RIPC_ENOMEM;
	if (ripc__random_u64(&o->id)) {
		free(o);
		return RIPC_ETRANSPORT;
	}
	err = ripc__expose_items(t, rbufs, rlens, nr, RIPC_ACC_REMOTE_WRITE,
				 mr, rdesc);
	if (err) {
		free(o);
		return err;
	}
	o->peer = ripc__peer_hold(peer);
	o->peer_inc = inc;
	o->owner_svc = src;
	o->peer_svc = dest;
	o->deadline = ripc__now_ns() + ripc__ms_ns(CTX->cfg.return_timeout_ms);
	o->n = nr;
	for (unsigned i = 0; i < nr; i++) {
		o->b[i].buf = rbufs[i];
		o->b[i].len = rlens[i];
		o->b[i].mr = mr[i];
	}
	ripc_list_add_tail(&offers, &o->link);
	noffers++;
	*offer_id = o->id;
	return RIPC_OK;
}

void ripc__retbuf_revoke_offer(uint64_t offer_id)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &offers)
	{
		struct ripc_offer *o =
			ripc_container_of(pos, struct ripc_offer, link);

		if (o->id == offer_id) {
			offer_free(o);
			return;
		}
	}
}

/* Find the offered buffer a RETURN descriptor names. */
static struct offer_buf *offer_match(const struct ripc_wire_in *in,
				     const struct ripc_wire_desc *d,
				     struct ripc_offer **owner)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &offers)
	{
		struct ripc_offer *o =
			ripc_container_of(pos, struct ripc_offer, link);

		if (o->peer_inc != in->src_inc || o->owner_svc != in->dst ||
		    o->peer_svc != in->src)
			continue;
		for (unsigned i = 0; i < o->n; i++) {
			struct offer_buf *b = &o->b[i];

			if (b->mr.handle && b->mr.base == d->addr &&
			    b->mr.key == d->key) {
				*owner = o;
				return d->len <= b->len ? b : NULL;
			}
		}
	}
	return NULL;
}

bool ripc__retbuf_on_return(const struct ripc_wire_in *in,
			    struct ripc_msg *msg)
{
	struct ripc_offer *owner[RIPC_MAX_RETURN_BUFS];
	struct offer_buf *b[RIPC_MAX_RETURN_BUFS];

	/* Every claim must match an offered, unused buffer, within its
	 * length, and no buffer may be named twice. */
	for (unsigned i = 0; i < in->nret; i++) {
		b[i] = offer_match(in, &in->ret_desc[i], &owner[i]);
		if (!b[i])
			return false;
		for (unsigned k = 0; k < i; k++)
			if (b[k] == b[i])
				return false;
	}
	for (unsigned i = 0; i < in->nret; i++) {
		unsigned pos = in->ret_desc[i].aux;

		msg->long_ptr[pos] = b[i]->buf;
		msg->long_len[pos] = in->ret_desc[i].len;
		msg->long_origin[pos] = RIPC_ORIGIN_RETBUF;
	}
	/* One reply per offer: revoke every offer it used. */
	for (unsigned i = 0; i < in->nret; i++) {
		bool seen = false;

		for (unsigned k = 0; k < i; k++)
			seen |= owner[k] == owner[i];
		if (!seen)
			offer_free(owner[i]);
	}
	return true;
}

bool ripc__retbuf_exposed(const void *p)
{
	struct ripc_list *pos, *tmp;
	const uint8_t *q = p;

	ripc_list_for_each_safe(pos, tmp, &offers)
	{
		struct ripc_offer *o =
			ripc_container_of(pos, struct ripc_offer, link);

		for (unsigned i = 0; i < o->n; i++)
			if (q >= o->b[i].buf && q < o->b[i].buf + o->b[i].len)
				return true;
	}
	ripc_list_for_each_safe(pos, tmp, &replies)
	{
		struct ripc_reply *r =
			ripc_container_of(pos, struct ripc_reply, link);

		for (unsigned i = 0; i < r->nret; i++)
			if (q >= r->wbuf[i] && q < r->wbuf[i] + r->wlen[i])
				return true;
	}
	return false;
}

RIPC_API uint8_t ripc_return_bufs_cancel(uint16_t dest)
{
	struct ripc_list *pos, *tmp;
	unsigned n = 0;

	if (dest > RIPC_MAX_SERVICE_ID)
		return (uint8_t)ripc__set_err(RIPC_EBADID);
	if (!CTX->initialized)
		return RIPC_OK;
	ripc__lock();
	ripc_list_for_each_safe(pos, tmp, &offers)
	{
		struct ripc_offer *o =
			ripc_container_of(pos, struct ripc_offer, link);

		if (o->peer_svc != dest)
			continue;
		/* Tell the peer to forget them (best effort). */
		struct ripc_wire_out m = {
			.type = RIPC_MT_NACK,
			.src = o->owner_svc,
			.dst = o->peer_svc,
			.src_inc = CTX->incarnation,
			.dst_inc = o->peer_inc,
			.cookie = 0,
			.status = RIPC_ENOTFOUND,
		};
		ripc__send_msg(o->peer, &m,
			       ripc__now_ns() + CTX->cfg.send_timeout_ns);
		offer_free(o);
		n++;
	}
	ripc__unlock();
	(void)n;
	return RIPC_OK;
}

/* ---- peer side ------------------------------------------------------ */

static void grant_free(struct ripc_grant *g)
{
	ripc_list_del(&g->link);
	ngrants--;
	free(g);
}

void ripc__retbuf_on_offers(const struct ripc_wire_in *in)
{
	struct ripc_grant *g;

	if (ngrants >= RETBUF_MAX_GRANTS) {
		/* Bounded: the oldest grant goes. */
		CTX->stats.drops_queue_full++;
		grant_free(ripc_container_of(grants.next, struct ripc_grant,
					     link));
	}
	g = calloc(1, sizeof(*g) + in->nret * sizeof(g->b[0]));
	if (!g)
		return;
	g->owner_inc = in->src_inc;
	g->owner_svc = in->src;
	g->to_svc = in->dst;
	/* The owner says how long we may use them (half its own revocation
	 * timeout, so that a write never races the revocation). */
	g->usable_until = ripc__now_ns() + ripc__ms_ns(in->status);
	g->n = in->nret;
	for (unsigned i = 0; i < in->nret; i++) {
		g->b[i].addr = in->ret_desc[i].addr;
		g->b[i].key = in->ret_desc[i].key;
		g->b[i].len = in->ret_desc[i].len;
	}
	ripc_list_add_tail(&grants, &g->link);
	ngrants++;
}

/* The owner dropped its offers to us (cancel). */
void ripc__retbuf_forget(uint64_t owner_inc, uint16_t owner_svc,
			 uint16_t to_svc)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &grants)
	{
		struct ripc_grant *g =
			ripc_container_of(pos, struct ripc_grant, link);

		if (g->owner_inc == owner_inc && g->owner_svc == owner_svc &&
		    g->to_svc == to_svc)
			grant_free(g);
	}
}

static void reply_free(struct ripc_reply *r)
{
	for (unsigned i = 0; i < RIPC_MAX_ITEMS; i++)
		if (r->lreg[i])
			ripc__lreg_del(r->lreg[i]);
	ripc_list_del(&r->link);
	ripc__peer_put(r->peer);
	free(r);
}

/* An lsend that never went on the list (reply failed before sending). */
static void reply_drop_ls(struct ripc_lsend *ls)
{
	struct ripc_tp *t = &CTX->tp[ls->peer->tp];

	for (unsigned i = 0; i < ls->n; i++)
		t->ops->mr_close(t->p, &ls->mr[i]);
	ripc__peer_put(ls->peer);
	free(ls);
}

static void reply_send(struct ripc_reply *r)
{
	struct ripc_tp *t = &CTX->tp[r->peer->tp];
	struct ripc_wire_out m = {
		.type = RIPC_MT_RETURN,
		.src = r->src,
		.dst = r->dest,
		.src_inc = CTX->incarnation,
		.dst_inc = r->inc,
		.nret = r->nret,
		.ret_desc = r->ret,
		.nlong = r->npull,
		.long_desc = r->pull,
	};
	int err;

	if (r->npull) {
		m.flags = RIPC_WF_ADDR;
		m.cookie = r->ls->cookie;
		m.addr_tp = (uint8_t)t->id;
		m.addr_len = (uint8_t)t->addrlen;
		m.addr = t->addr;
		r->ls->deadline = ripc__now_ns() + CTX->cfg.long_timeout_ns;
		ripc_list_add_tail(&CTX->lsends, &r->ls->link);
	}
	err = ripc__send_msg(r->peer, &m,
			     ripc__now_ns() + CTX->cfg.send_timeout_ns);
	if (err) {
		ripc__log_rl(RIPC_LOG_WARN, "return reply not sent: %s",
			     ripc_strerror(err));
		if (r->npull) {
			ripc__lsend_release(r->ls, false);
			CTX->stats.long_released--;
		}
	} else {
		CTX->stats.return_replies_sent++;
	}
	r->ls = NULL;
}

/* Drop one reference (a write in flight, or the poster's guard); the last
 * one sends the RETURN message, or gives up if a write failed. */
static void reply_put(struct ripc_reply *r, int err)
{
	if (err && !r->err) {
		ripc__log_rl(RIPC_LOG_WARN, "return-buffer write failed: %s",
			     strerror(-err));
		r->err = RIPC_EPEER;
	}
	if (--r->writes_out)
		return;
	if (r->err) {
		/* The owner cannot trust partial data; it gets nothing and
		 * its offer times out. */
		if (r->ls) {
			reply_drop_ls(r->ls);
			r->ls = NULL;
		}
	} else {
		reply_send(r);
	}
	reply_free(r);
}

void ripc__retbuf_write_done(struct ripc_write_op *op, int err)
{
	struct ripc_reply *r = op->reply;

	CTX->tp[op->tp].tx_inflight--;
	free(op);
	reply_put(r, err);
}

static int post_write(struct ripc_reply *r, struct ripc_tp *t,
		      const uint8_t *src, uint64_t len, void *desc,
		      uint64_t raddr, uint64_t key)
{
	uint64_t deadline = ripc__now_ns() + CTX->cfg.send_timeout_ns;
	size_t chunk = CTX->cfg.read_chunk;

	if (chunk > t->attr.max_msg_size)
		chunk = t->attr.max_msg_size;
	for (uint64_t off = 0; off < len;) {
		uint64_t n = len - off > chunk ? chunk : len - off;
		struct ripc_write_op *op = calloc(1, sizeof(*op));
		int ret;

		if (!op)
			return RIPC_ENOMEM;
		op->op.kind = RIPC_OP_WRITE;
		op->reply = r;
		op->tp = (int8_t)t->id;
		for (;;) {
			ret = t->ops->write(t->p, r->peer->handle, src + off, n,
					    desc, raddr + off, key, &op->op);
			if (ret != -EAGAIN || ripc__now_ns() >= deadline)
				break;
			CTX->stats.send_retries++;
			ripc__progress_locked();
		}
		if (ret) {
			free(op);
			return ret == -EAGAIN ? RIPC_ETIMEDOUT
					      : ripc__err_from_errno(ret);
		}
		t->tx_inflight++;
		r->writes_out++;
		off += n;
	}
	return RIPC_OK;
}

int ripc__retbuf_reply(struct ripc_peer *peer, uint64_t inc, uint16_t src,
		       uint16_t dest, void **buf, uint32_t *len, uint16_t n,
		       void **rbufs, uint32_t *rlens, uint16_t nr)
{
	struct ripc_tp *t = &CTX->tp[peer->tp];
	struct grant_buf *use[RIPC_MAX_ITEMS] = { 0 };
	struct ripc_grant *gused[RIPC_MAX_ITEMS] = { 0 };
	struct ripc_list *pos, *tmp;
	struct ripc_reply *r;
	uint64_t now = ripc__now_ns();
	unsigned nwrite = 0;
	int err = RIPC_OK;

	(void)rbufs;
	(void)rlens;
	if (nr || ripc_list_empty(&grants))
		return RIPC_ENOTFOUND;
	/* First fit over the owner's grants, oldest first. */
	for (unsigned i = 0; i < n; i++) {
		ripc_list_for_each_safe(pos, tmp, &grants)
		{
			struct ripc_grant *g =
				ripc_container_of(pos, struct ripc_grant, link);

			if (g->owner_inc != inc || g->owner_svc != dest ||
			    g->to_svc != src)
				continue;
			if (now >= g->usable_until) {
				grant_free(g);
				continue;
			}
			for (unsigned k = 0; k < g->n && !use[i]; k++) {
				if (!g->b[k].used && g->b[k].len >= len[i]) {
					g->b[k].used = true;
					use[i] = &g->b[k];
					gused[i] = g;
				}
			}
			if (use[i])
				break;
		}
		nwrite += use[i] != NULL;
	}
	if (!nwrite)
		return RIPC_ENOTFOUND;

	r = calloc(1, sizeof(*r));
	if (!r)
		return RIPC_ENOMEM;
	r->peer = ripc__peer_hold(peer);
	r->inc = inc;
	r->src = src;
	r->dest = dest;
	ripc_list_init(&r->link);
	ripc_list_add_tail(&replies, &r->link);

	/* Items without a fitting buffer are exposed for pulling. */
	if (nwrite < n) {
		void *pbuf[RIPC_MAX_ITEMS];
		uint32_t plen[RIPC_MAX_ITEMS];
		uint16_t ppos[RIPC_MAX_ITEMS];
		struct ripc_lsend *ls = calloc(1, sizeof(*ls));

		if (!ls || ripc__random_u64(&ls->cookie)) {
			free(ls);
			err = RIPC_ENOMEM;
			goto fail;
		}
		for (unsigned i = 0; i < n; i++) {
			if (use[i])
				continue;
			ppos[r->npull] = (uint16_t)i;
			pbuf[r->npull] = buf[i];
			plen[r->npull] = len[i];
			r->npull++;
		}
		err = ripc__expose_items(t, pbuf, plen, r->npull,
					 RIPC_ACC_REMOTE_READ, ls->mr, r->pull);
		if (err) {
			free(ls);
			goto fail;
		}
		for (unsigned i = 0; i < r->npull; i++) {
			r->pull[i].aux = ppos[i];
			ls->buf[i] = pbuf[i];
			ls->len[i] = plen[i];
		}
		ripc_list_init(&ls->link);
		ls->peer = ripc__peer_hold(peer);
		ls->peer_inc = inc;
		ls->n = r->npull;
		r->ls = ls;
	}

	/* Count the writes before posting any, so that an early completion
	 * cannot finish the reply while others are still being posted. */
	r->writes_out = 1;
	for (unsigned i = 0; i < n; i++) {
		void *desc = NULL;

		if (!use[i])
			continue;
		if (t->attr.mr_local &&
		    !(desc = ripc__desc_for(t->id, buf[i], len[i]))) {
			r->lreg[i] = ripc__lreg_add(buf[i], len[i], &err);
			if (!r->lreg[i])
				break;
			desc = r->lreg[i]->mr[t->id].desc;
		}
		r->ret[r->nret] = (struct ripc_wire_desc){
			.addr = use[i]->addr,
			.key = use[i]->key,
			.len = len[i],
			.aux = (uint32_t)i,
		};
		r->wbuf[r->nret] = buf[i];
		r->wlen[r->nret] = len[i];
		r->nret++;
		err = post_write(r, t, buf[i], len[i], desc, use[i]->addr,
				 use[i]->key);
		if (err)
			break;
		CTX->stats.bytes_return_written += len[i];
	}
	/* One reply per grant: whatever else it offered is not used. */
	for (unsigned i = 0; i < n; i++) {
		if (!gused[i])
			continue;
		for (unsigned k = i + 1; k < n; k++)
			if (gused[k] == gused[i])
				gused[k] = NULL;
		grant_free(gused[i]);
	}
	if (err)
		r->err = err;
	/* Drop the guard; completes now if all writes are done. */
	reply_put(r, 0);
	return err;
fail:
	for (unsigned i = 0; i < n; i++)
		if (use[i])
			use[i]->used = false;
	reply_free(r);
	return err;
}

/* ---- timers and teardown -------------------------------------------- */

void ripc__retbuf_timers(uint64_t now)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &offers)
	{
		struct ripc_offer *o =
			ripc_container_of(pos, struct ripc_offer, link);

		if (now >= o->deadline)
			offer_free(o);
	}
	ripc_list_for_each_safe(pos, tmp, &grants)
	{
		struct ripc_grant *g =
			ripc_container_of(pos, struct ripc_grant, link);

		if (now >= g->usable_until)
			grant_free(g);
	}
}

bool ripc__retbuf_pending(void)
{
	return !ripc_list_empty(&offers) || !ripc_list_empty(&replies);
}

void ripc__retbuf_fini(void)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &offers)
		offer_free(ripc_container_of(pos, struct ripc_offer, link));
	ripc_list_for_each_safe(pos, tmp, &grants)
		grant_free(ripc_container_of(pos, struct ripc_grant, link));
	ripc_list_for_each_safe(pos, tmp, &replies)
	{
		struct ripc_reply *r =
			ripc_container_of(pos, struct ripc_reply, link);

		if (r->ls)
			reply_drop_ls(r->ls);
		reply_free(r);
	}
	noffers = ngrants = 0;
}
