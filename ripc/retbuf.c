/*
 * Return buffers.
 *
 * Owner side: each send that carries return buffers creates an *offer*: an
 * exposure of kind RETURN (expose.c) to one peer process and service,
 * every buffer registered for exactly its bytes, remote-write only, with a
 * fresh random key.  An offer serves one reply: when a RETURN message
 * naming its buffers arrives, the buffers it names are reported to the
 * application as long items and the whole offer ends (written buffers with
 * RIPC_OK, the others RIPC_ECANCELED).  Offers also end by
 * ripc_return_bufs_cancel(3) or after RIPC_RETURN_TIMEOUT_MS.
 *
 * Peer side: the offered descriptors are kept as a *grant* per owner
 * process and service.  A long send from the offered-to service to the
 * owner writes each item into the first unused granted buffer that fits
 * (RDMA write), exposes the rest for pulling the regular way, and once the
 * writes have completed queues one RETURN message.  A grant also serves
 * one reply, and is not used once older than half the return timeout, so
 * that the owner does not revoke it under a write in flight.  Writes the
 * transport does not take at once are posted by the engine; nothing here
 * waits.
 *
 * Bounds: at most RETBUF_MAX_GRANTS grants are kept (oldest dropped).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "retbuf.h"

#define RETBUF_MAX_GRANTS 1024

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

/* One item of a reply, written into a return buffer. */
struct reply_write {
	const uint8_t *buf;
	uint32_t len;
	void *desc;
	uint64_t raddr, key, next;
};

/* A reply being written into return buffers.  Its per-item arrays hold n
 * entries (the reply's items), allocated with the record: arrays for every
 * possible item, 6.6 KiB, were zeroed per reply (callgrind: 7 360
 * instructions a reply, more than the rest of the reply's path). */
struct ripc_reply {
	struct ripc_list link;   /* rb.replies */
	struct ripc_list writeq; /* rb.writeq while writes remain to post */
	bool queued;
	struct ripc_peer *peer;  /* held */
	uint64_t inc;
	uint16_t src, dest;
	uint64_t deadline;       /* writes not posted by then: given up */
	unsigned writes_out;     /* posted, not completed */
	int err;
	uint16_t n, nret, npull;
	struct ripc_wire_desc *ret;  /* nret used */
	struct ripc_wire_desc *pull; /* npull used */
	struct reply_write *w;       /* nret used, as ret */
	uint64_t pull_expo;          /* exposure of the items to pull, or 0 */
	struct ripc_lreg **lreg;     /* by item position (mr_local) */
	/* n x ret, n x pull, n x w, n x lreg follow */
};

static struct ripc_reply *reply_new(uint16_t n)
{
	struct ripc_reply *r =
		ripc__zalloc(sizeof(*r) + n * (2 * sizeof(r->ret[0]) +
					       sizeof(r->w[0]) +
					       sizeof(r->lreg[0])));

	if (!r)
		return NULL;
	r->n = n;
	r->ret = (struct ripc_wire_desc *)(r + 1);
	r->pull = r->ret + n;
	r->w = (struct reply_write *)(r->pull + n);
	r->lreg = (struct ripc_lreg **)(r->w + n);
	return r;
}

/* ---- owner side ----------------------------------------------------- */

int ripc__retbuf_offer(struct ripc_peer *peer, uint64_t inc, uint16_t src,
		       uint16_t dest, void **rbufs, const uint32_t *rlens,
		       uint16_t nr, struct ripc_wire_desc *rdesc,
		       uint64_t *offer)
{
	struct ripc_expo *e;
	int err;

	err = ripc__expose(peer, inc, RIPC_EXPO_RETURN, src, dest, rbufs,
			   rlens, nr,
			   ripc__now_ns() +
				   ripc__ms_ns(CTX->cfg.return_timeout_ms),
			   rdesc, &e);
	if (err)
		return err;
	*offer = e->id;
	return RIPC_OK;
}

static bool is_offer_to(const struct ripc_expo *e, uint64_t peer_inc,
			uint16_t owner_svc, uint16_t peer_svc)
{
	return e->kind == RIPC_EXPO_RETURN && e->peer_inc == peer_inc &&
	       e->src == owner_svc && e->dest == peer_svc;
}

void ripc__retbuf_cancel(uint16_t dest)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->ex.live)
	{
		struct ripc_expo *e =
			ripc_container_of(pos, struct ripc_expo, link);
		struct ripc_wire_out m = {
			.type = RIPC_MT_NACK,
			.src = e->src,
			.dst = e->dest,
			.src_inc = CTX->incarnation,
			.dst_inc = e->peer_inc,
			.cookie = 0,
			.status = RIPC_ENOTFOUND,
		};

		if (e->kind != RIPC_EXPO_RETURN || e->dest != dest)
			continue;
		/* Tell the peer to forget them (best effort, queued). */
		ripc__tx_send(e->peer, &m,
			      ripc__now_ns() + CTX->cfg.send_timeout_ns, NULL,
			      NULL, NULL);
		ripc__expose_end(e, RIPC_ECANCELED, false);
	}
}

/* Find the offered buffer a RETURN descriptor names. */
static struct ripc_expo_item *offer_match(const struct ripc_wire_in *in,
					  const struct ripc_wire_desc *d,
					  struct ripc_expo **owner)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->ex.live)
	{
		struct ripc_expo *e =
			ripc_container_of(pos, struct ripc_expo, link);

		if (!is_offer_to(e, in->src_inc, in->dst, in->src))
			continue;
		for (unsigned i = 0; i < e->n; i++) {
			struct ripc_expo_item *b = &e->item[i];

			if (b->mr.handle && b->mr.base == d->addr &&
			    b->mr.key == d->key) {
				*owner = e;
				return d->len <= b->len ? b : NULL;
			}
		}
	}
	return NULL;
}

bool ripc__retbuf_on_return(const struct ripc_wire_in *in,
			    struct ripc_msg *msg)
{
	struct ripc_expo *owner[RIPC_MAX_RETURN_BUFS];
	struct ripc_expo_item *b[RIPC_MAX_RETURN_BUFS];

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

		msg->long_ptr[pos] = (void *)b[i]->buf;
		msg->long_len[pos] = in->ret_desc[i].len;
		msg->long_origin[pos] = RIPC_ORIGIN_RETBUF;
	}
	/* One reply per offer: every offer it used ends, the buffers it
	 * wrote with RIPC_OK, the others unused. */
	for (unsigned i = 0; i < in->nret; i++) {
		uint8_t status[RIPC_MAX_RETURN_BUFS];
		bool seen = false;

		for (unsigned k = 0; k < i; k++)
			seen |= owner[k] == owner[i];
		if (seen)
			continue;
		for (unsigned j = 0; j < owner[i]->n; j++) {
			status[j] = RIPC_ECANCELED;
			for (unsigned k = 0; k < in->nret; k++)
				if (b[k] == &owner[i]->item[j])
					status[j] = RIPC_OK;
		}
		ripc__expose_end_each(owner[i], status);
	}
	return true;
}

/* ---- peer side ------------------------------------------------------ */

static void grant_free(struct ripc_grant *g)
{
	ripc_list_del(&g->link);
	CTX->rb.ngrants--;
	free(g);
}

void ripc__retbuf_on_offers(const struct ripc_wire_in *in)
{
	struct ripc_grant *g;

	if (CTX->rb.ngrants >= RETBUF_MAX_GRANTS) {
		/* Bounded: the oldest grant goes. */
		CTX->stats.drops_queue_full++;
		grant_free(ripc_container_of(CTX->rb.grants.next,
					     struct ripc_grant, link));
	}
	g = ripc__zalloc(sizeof(*g) + in->nret * sizeof(g->b[0]));
	if (!g)
		return;
	g->owner_inc = in->src_inc;
	g->owner_svc = in->src;
	g->to_svc = in->dst;
	/* The owner says how long we may use them (half its own revocation
	 * timeout, so that a write never races the revocation). */
	g->usable_until = ripc__now_ns() + ripc__ms_ns(in->status);
	ripc__timer_note(g->usable_until);
	g->n = in->nret;
	for (unsigned i = 0; i < in->nret; i++) {
		g->b[i].addr = in->ret_desc[i].addr;
		g->b[i].key = in->ret_desc[i].key;
		g->b[i].len = in->ret_desc[i].len;
	}
	ripc_list_add_tail(&CTX->rb.grants, &g->link);
	CTX->rb.ngrants++;
}

/* The owner dropped its offers to us (cancel). */
void ripc__retbuf_forget(uint64_t owner_inc, uint16_t owner_svc,
			 uint16_t to_svc)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->rb.grants)
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
	for (unsigned i = 0; i < r->n; i++)
		if (r->lreg[i])
			ripc__lreg_del(r->lreg[i]);
	ripc_list_del(&r->link);
	if (r->queued)
		ripc_list_del(&r->writeq);
	ripc__peer_put(r->peer);
	free(r);
}

/* Every write has completed (or the reply was given up): queue the RETURN
 * message, or give up on the reply. */
static void reply_complete(struct ripc_reply *r)
{
	int status = r->err ? RIPC_EPEER : RIPC_OK;

	if (!r->err) {
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
		uint64_t expo[2] = { r->pull_expo, 0 };
		int err;

		if (r->npull) {
			m.flags = RIPC_WF_ADDR;
			m.cookie = r->pull_expo;
			m.addr_tp = (uint8_t)t->id;
			m.addr_len = (uint8_t)t->addrlen;
			m.addr = t->addr;
		}
		err = ripc__tx_send(r->peer, &m,
				    ripc__now_ns() + CTX->cfg.send_timeout_ns,
				    NULL, expo, NULL);
		if (err && err != RIPC_EINPROGRESS) {
			ripc__log_rl(RIPC_LOG_WARN,
				     "return reply not sent: %s",
				     ripc_strerror(err));
			status = RIPC_EPEER;
		} else {
			CTX->stats.return_replies_sent++;
			r->pull_expo = 0; /* the queue ends it if unsent */
		}
	} else {
		ripc__log_rl(RIPC_LOG_WARN, "return-buffer write failed: %s",
			     ripc_strerror(r->err));
	}
	/* The owner cannot trust partial data: on failure it gets nothing
	 * and its offer times out. */
	if (r->pull_expo)
		ripc__expose_end_id(r->pull_expo, RIPC_EPEER);
	for (unsigned i = 0; i < r->nret; i++)
		ripc__expose_note(r->w[i].buf, r->w[i].len, r->dest, status);
	reply_free(r);
}

void ripc__retbuf_write_done(struct ripc_write_op *op, int err)
{
	struct ripc_reply *r = op->reply;

	CTX->tp[op->tp].tx_inflight--;
	ripc_list_del(&op->link);
	if (err) {
		if (!r->err)
			r->err = RIPC_EPEER;
	} else {
		CTX->stats.bytes_return_written += op->len;
	}
	free(op);
	if (--r->writes_out == 0 && !r->queued)
		reply_complete(r);
}

static bool reply_all_posted(const struct ripc_reply *r)
{
	for (unsigned i = 0; i < r->nret; i++)
		if (r->w[i].next < r->w[i].len)
			return false;
	return true;
}

/* Post what the transport takes of r's writes; false when it pushed back
 * (try again on the next engine pass). */
static bool reply_post(struct ripc_reply *r, uint64_t now)
{
	struct ripc_tp *t = &CTX->tp[r->peer->tp];
	size_t chunk = ripc__rma_chunk(&t->attr);

	for (unsigned i = 0; i < r->nret && !r->err; i++) {
		struct reply_write *w = &r->w[i];

		while (w->next < w->len) {
			uint64_t n = w->len - w->next;
			struct ripc_write_op *op;
			int ret;

			if (now >= r->deadline) {
				r->err = RIPC_ETIMEDOUT;
				break;
			}
			if (!ripc__peer_ready(r->peer))
				return false; /* not mapped by it yet */
			if (t->tx_inflight >= t->tx_max)
				return false;
			if (n > chunk)
				n = chunk;
			if (!(op = ripc__zalloc(sizeof(*op)))) {
				r->err = RIPC_ENOMEM;
				break;
			}
			op->op.kind = RIPC_OP_WRITE;
			op->reply = r;
			op->len = n;
			op->tp = (int8_t)t->id;
			ret = t->ops->write(t->p, r->peer->handle,
					    w->buf + w->next, n, w->desc,
					    w->raddr + w->next, w->key,
					    &op->op);
			if (ret == -EAGAIN) {
				free(op);
				CTX->stats.send_retries++;
				ripc__bell_ring(r->peer); /* see txq.c */
				return false;
			}
			if (ret) {
				free(op);
				r->err = ripc__err_from_errno(ret);
				break;
			}
			ripc_list_add_tail(&CTX->rb.writes, &op->link);
			t->tx_inflight++;
			r->writes_out++;
			w->next += n;
			ripc__bell_ring(r->peer);
		}
	}
	return true;
}

void ripc__retbuf_post_writes(void)
{
	struct ripc_list *pos, *tmp;
	uint64_t now = ripc__now_ns();

	ripc_list_for_each_safe(pos, tmp, &CTX->rb.writeq)
	{
		struct ripc_reply *r =
			ripc_container_of(pos, struct ripc_reply, writeq);

		if (!reply_post(r, now))
			continue;
		if (r->err || reply_all_posted(r)) {
			ripc_list_del(&r->writeq);
			r->queued = false;
			if (r->writes_out == 0)
				reply_complete(r);
		}
	}
}

int ripc__retbuf_reply(struct ripc_peer *peer, uint64_t inc, uint16_t src,
		       uint16_t dest, void **buf, uint32_t *len, uint16_t n)
{
	struct ripc_tp *t = &CTX->tp[peer->tp];
	struct grant_buf *use[RIPC_MAX_ITEMS];
	struct ripc_grant *gused[RIPC_MAX_ITEMS];
	struct ripc_list *pos, *tmp;
	struct ripc_reply *r;
	uint64_t now;
	unsigned nwrite = 0;
	int err = RIPC_OK;

	/* Every long send asks: nothing before this test (the arrays, 1 KiB
	 * zeroed, and a clock read cost more than the rest of a send to a
	 * peer that offered nothing). */
	if (ripc_list_empty(&CTX->rb.grants))
		return RIPC_ENOTFOUND;
	memset(use, 0, n * sizeof(use[0]));
	memset(gused, 0, n * sizeof(gused[0]));
	now = ripc__now_ns();
	/* First fit over the owner's grants, oldest first.  Zero-length
	 * items need no buffer: they go with the items to pull. */
	for (unsigned i = 0; i < n; i++) {
		if (len[i] == 0)
			continue;
		ripc_list_for_each_safe(pos, tmp, &CTX->rb.grants)
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

	r = reply_new(n);
	if (!r) {
		err = RIPC_ENOMEM;
		goto unuse;
	}
	r->peer = ripc__peer_hold(peer);
	r->inc = inc;
	r->src = src;
	r->dest = dest;
	r->deadline = now + CTX->cfg.send_timeout_ns;
	ripc_list_init(&r->writeq);
	ripc_list_add_tail(&CTX->rb.replies, &r->link);

	/* Items without a fitting buffer are exposed for pulling. */
	if (nwrite < n) {
		void *pbuf[RIPC_MAX_ITEMS];
		uint32_t plen[RIPC_MAX_ITEMS];
		uint16_t ppos[RIPC_MAX_ITEMS];
		struct ripc_expo *e;

		for (unsigned i = 0; i < n; i++) {
			if (use[i])
				continue;
			ppos[r->npull] = (uint16_t)i;
			pbuf[r->npull] = buf[i];
			plen[r->npull] = len[i];
			r->npull++;
		}
		err = ripc__expose(peer, inc, RIPC_EXPO_LONG, src, dest, pbuf,
				   plen, r->npull,
				   r->deadline + CTX->cfg.long_timeout_ns,
				   r->pull, &e);
		if (err) {
			reply_free(r);
			goto unuse;
		}
		r->pull_expo = e->id;
		for (unsigned i = 0; i < r->npull; i++)
			r->pull[i].aux = ppos[i];
	}

	for (unsigned i = 0; i < n; i++) {
		struct reply_write *w;
		void *desc = NULL;

		if (!use[i])
			continue;
		if (t->attr.mr_local &&
		    !(desc = ripc__desc_for(t->id, buf[i], len[i]))) {
			r->lreg[i] = ripc__lreg_add(buf[i], len[i], &err);
			if (!r->lreg[i]) {
				r->err = err;
				break;
			}
			desc = r->lreg[i]->mr[t->id].desc;
		}
		r->ret[r->nret] = (struct ripc_wire_desc){
			.addr = use[i]->addr,
			.key = use[i]->key,
			.len = len[i],
			.aux = (uint32_t)i,
		};
		w = &r->w[r->nret++];
		w->buf = buf[i];
		w->len = len[i];
		w->desc = desc;
		w->raddr = use[i]->addr;
		w->key = use[i]->key;
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
	ripc_list_add_tail(&CTX->rb.writeq, &r->writeq);
	r->queued = true;
	/* Post now what the transport takes; the engine posts the rest. */
	if (reply_post(r, now) && (r->err || reply_all_posted(r))) {
		ripc_list_del(&r->writeq);
		r->queued = false;
		err = r->err;
		if (r->writes_out == 0)
			reply_complete(r);
	}
	return err;
unuse:
	for (unsigned i = 0; i < n; i++)
		if (use[i])
			use[i]->used = false;
	return err;
}

bool ripc__retbuf_busy(const void *p)
{
	struct ripc_list *pos, *tmp;
	const uint8_t *q = p;

	ripc_list_for_each_safe(pos, tmp, &CTX->rb.replies)
	{
		struct ripc_reply *r =
			ripc_container_of(pos, struct ripc_reply, link);

		for (unsigned i = 0; i < r->nret; i++)
			if (q >= r->w[i].buf && q < r->w[i].buf + r->w[i].len)
				return true;
	}
	return false;
}

/* ---- timers and teardown -------------------------------------------- */

uint64_t ripc__retbuf_timers(uint64_t now)
{
	struct ripc_list *pos, *tmp;
	uint64_t next = UINT64_MAX;

	ripc_list_for_each_safe(pos, tmp, &CTX->rb.grants)
	{
		struct ripc_grant *g =
			ripc_container_of(pos, struct ripc_grant, link);

		if (now >= g->usable_until)
			grant_free(g);
		else if (g->usable_until < next)
			next = g->usable_until;
	}
	return next;
}

bool ripc__retbuf_pending(void)
{
	return !ripc_list_empty(&CTX->rb.replies);
}

/* Teardown, after the engine stopped and before the transports close
 * (closing them cancels writes in flight without completions). */
void ripc__retbuf_fini(void)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->rb.grants)
		grant_free(ripc_container_of(pos, struct ripc_grant, link));
	ripc_list_for_each_safe(pos, tmp, &CTX->rb.writes)
	{
		ripc_list_del(pos);
		free(ripc_container_of(pos, struct ripc_write_op, link));
	}
	ripc_list_for_each_safe(pos, tmp, &CTX->rb.replies)
		reply_free(ripc_container_of(pos, struct ripc_reply, link));
	CTX->rb.ngrants = 0;
}
