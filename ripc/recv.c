/*
 * The receive side: dispatch of validated messages, pulls of long items,
 * and ripc_receive.
 *
 * Ordering: each service has one queue in arrival order.  A long message
 * is queued when its control message arrives and becomes ready when its
 * pull completes; ripc_receive returns the first ready message that no
 * earlier message from the same sender precedes, so messages from one
 * sending service arrive in send order while other senders may overtake a
 * slow pull.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "retbuf.h"
#include "ripc_int.h"

#define MSG_CACHE_MAX 64

static struct ripc_msg *msg_cache;
static unsigned msg_cached;

static struct ripc_msg *msg_alloc(void)
{
	struct ripc_msg *m = msg_cache;

	if (m) {
		msg_cache = *(struct ripc_msg **)m;
		msg_cached--;
	} else {
		m = malloc(sizeof(*m));
		if (!m)
			return NULL;
	}
	/* The item arrays are filled as far as the counts say; everything
	 * else must start zeroed (a recycled record holds old values). */
	memset(m, 0, offsetof(struct ripc_msg, short_ptr));
	m->pull = NULL;
	ripc_list_init(&m->link);
	return m;
}

static void msg_release(struct ripc_msg *m)
{
	if (msg_cached < MSG_CACHE_MAX) {
		*(struct ripc_msg **)m = msg_cache;
		msg_cache = m;
		msg_cached++;
	} else {
		free(m);
	}
}

void ripc__msg_cache_fini(void)
{
	while (msg_cache) {
		struct ripc_msg *m = msg_cache;

		msg_cache = *(struct ripc_msg **)m;
		free(m);
	}
	msg_cached = 0;
}

/* Free a message the application will never see. */
void ripc__msg_free(struct ripc_msg *m)
{
	if (m->pull) {
		ripc__pull_abandon(m->pull);
		m->pull = NULL;
	} else {
		for (unsigned i = 0; i < m->nlong; i++)
			if (m->long_origin[i] == RIPC_ORIGIN_LIBBUF)
				ripc__libbuf_free(m->long_ptr[i]);
	}
	if (m->slot)
		ripc__slot_put(m->slot);
	msg_release(m);
}

/* ripc_get_fd's eventfd is readable exactly while messages wait. */
static void queued_inc(void)
{
	if (CTX->queued_total++ == 0 && CTX->app_fd >= 0) {
		uint64_t one = 1;

		if (write(CTX->app_fd, &one, sizeof(one)) < 0)
			ripc__log_rl(RIPC_LOG_WARN, "eventfd write failed");
	}
}

void ripc__queued_dec(void)
{
	if (--CTX->queued_total == 0 && CTX->app_fd >= 0) {
		uint64_t v;

		if (read(CTX->app_fd, &v, sizeof(v)) < 0)
			(void)0; /* already drained */
	}
}

void ripc__msg_ready(struct ripc_service *svc, struct ripc_msg *m)
{
	m->ready = true;
	svc->nready++;
	queued_inc();
	ripc__wake_waiters(svc);
}

static void repost(struct ripc_tp *t, struct ripc_slot *s)
{
	if (CTX->shutting_down || ripc__post_slot(t, s) != 0)
		ripc__slot_put(s);
}

/* Receiver refuses a message whose sender can be answered (LONG). */
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

	if (ripc__send_msg(peer, &o, ripc__now_ns() + CTX->cfg.send_timeout_ns))
		ripc__log_rl(RIPC_LOG_INFO, "nack not sent");
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

static void enqueue(struct ripc_service *svc, struct ripc_msg *m)
{
	ripc_list_add_tail(&svc->queue, &m->link);
	svc->qlen++;
}

static void deliver_short(struct ripc_tp *t, struct ripc_slot *s,
			  const struct ripc_wire_in *in)
{
	struct ripc_service *svc = accepting_service(in);
	struct ripc_slot *spare = NULL;
	struct ripc_msg *m;

	if (!svc)
		goto drop;
	/* The slot goes to the application: post a replacement first, or
	 * drop the message if there is none (bounded memory). */
	if (in->nshort && !(spare = ripc__slot_get())) {
		CTX->stats.drops_queue_full++;
		goto drop;
	}
	if (!(m = msg_alloc())) {
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
	enqueue(svc, m);
	CTX->stats.short_recv++;
	if (in->nshort) {
		size_t total = 0;

		for (unsigned i = 0; i < in->nshort; i++)
			total += in->short_len[i];
		CTX->stats.bytes_recv_short += total;
		m->slot = s;
		s->state = SLOT_HELD;
		s->tp = -1;
		repost(t, spare);
	} else {
		repost(t, s);
	}
	ripc__msg_ready(svc, m);
	return;
drop:
	repost(t, s);
}

/* ---- pulls ---------------------------------------------------------- */

static void pull_place(struct ripc_pull *p, struct ripc_msg *m, unsigned pos,
		       const struct ripc_wire_desc *d)
{
	struct ripc_pull_item *it = &p->item[pos];
	struct ripc_window *w;

	it->raddr = d->addr;
	it->key = d->key;
	it->len = d->len;
	m->long_len[pos] = d->len;
	if ((w = ripc__window_take(m->to, d->len))) {
		it->dst = w->base;
		it->win = w;
		it->desc = ripc__desc_for(p->peer->tp, w->base, d->len);
		m->long_origin[pos] = RIPC_ORIGIN_WINDOW;
		CTX->stats.window_hits++;
	} else if (CTX->pull_mem + d->len <= CTX->cfg.pull_mem_max &&
		   (it->dst = ripc__libbuf_alloc(d->len))) {
		struct ripc_list *pos2, *tmp;

		/* Account it until the application frees it. */
		ripc_list_for_each_safe(pos2, tmp, &CTX->lregs)
		{
			struct ripc_lreg *r = ripc_container_of(
				pos2, struct ripc_lreg, link);

			if (r->base == it->dst && r->from_alloc) {
				r->pull_mem = true;
				CTX->pull_mem += r->map_len;
				break;
			}
		}
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
	it->next = it->done = 0;
}

/* Start pulling `count` items of `in` (descs[i] goes to position pos[i]
 * of message m).  m is already queued on its service. */
static void pull_start(struct ripc_peer *peer, const struct ripc_wire_in *in,
		       struct ripc_msg *m, const struct ripc_wire_desc *descs,
		       const uint16_t *pos, unsigned count)
{
	struct ripc_pull *p = calloc(1, sizeof(*p));

	if (!p) {
		m->err = RIPC_EPULL;
		ripc__send_done(peer, in->cookie, RIPC_ENOMEM);
		ripc__msg_ready(CTX->svc[m->to], m);
		return;
	}
	p->msg = m;
	p->peer = ripc__peer_hold(peer);
	p->cookie = in->cookie;
	p->deadline = ripc__now_ns() + CTX->cfg.pull_timeout_ns;
	p->n = m->nlong;
	for (unsigned i = 0; i < count; i++)
		pull_place(p, m, pos[i], &descs[i]);
	m->pull = p;
	ripc_list_init(&p->readq);
	ripc_list_add_tail(&CTX->pulls, &p->link);
	ripc_list_add_tail(&CTX->readq, &p->readq);
	p->queued = true;
	ripc__pull_post_reads();
}

static void pull_finish(struct ripc_pull *p)
{
	struct ripc_msg *m = p->msg;
	uint64_t bytes = 0;

	ripc_list_del(&p->link);
	if (p->queued)
		ripc_list_del(&p->readq);
	for (unsigned i = 0; i < p->n; i++) {
		struct ripc_pull_item *it = &p->item[i];

		bytes += it->done;
		if (!it->dst || it->len == 0)
			continue;
		if (p->err || !m) {
			/* Not delivered: give the memory back. */
			if (it->win)
				ripc__window_return(it->win);
			else if (!m || m->long_origin[i] == RIPC_ORIGIN_LIBBUF)
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
	ripc__send_done(p->peer, p->cookie, p->err ? RIPC_EPULL : 0);
	ripc__peer_put(p->peer);
	if (m) {
		m->pull = NULL;
		if (p->err)
			m->err = RIPC_EPULL;
		CTX->stats.long_recv++;
		ripc__msg_ready(CTX->svc[m->to], m);
	}
	free(p);
}

void ripc__pull_abandon(struct ripc_pull *p)
{
	struct ripc_msg *m = p->msg;

	if (m) {
		/* Memory still targeted by reads stays with the pull until
		 * they complete; the application never sees it. */
		for (unsigned i = 0; i < p->n; i++) {
			m->long_ptr[i] = NULL;
			m->long_origin[i] = RIPC_ORIGIN_NONE;
		}
		m->pull = NULL;
	}
	p->msg = NULL;
	if (!p->err)
		p->err = RIPC_EPULL;
	if (p->chunks_out == 0)
		pull_finish(p);
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
		/* Once: the chunk is posted again by pull_post_reads. */
		op->retries++;
		ripc_list_add_tail(&CTX->read_retry, &op->retry);
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
	if (p->chunks_out == 0 && (!p->queued || p->err))
		pull_finish(p);
}

static bool pull_all_posted(const struct ripc_pull *p)
{
	for (unsigned i = 0; i < p->n; i++)
		if (p->item[i].dst && p->item[i].next < p->item[i].len)
			return false;
	return true;
}

static void repost_retries(void)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->read_retry)
	{
		struct ripc_read_op *op =
			ripc_container_of(pos, struct ripc_read_op, retry);
		struct ripc_pull *p = op->pull;
		struct ripc_pull_item *it = &p->item[op->item];
		struct ripc_tp *t = &CTX->tp[op->tp];
		int ret;

		if (p->err || !p->msg) {
			ret = -ECANCELED; /* given up meanwhile */
		} else {
			ret = t->ops->read(t->p, p->peer->handle,
					   it->dst + op->off, op->len, it->desc,
					   it->raddr + op->off, it->key,
					   &op->op);
			if (ret == -EAGAIN)
				return; /* keep order; try later */
		}
		ripc_list_del(&op->retry);
		ripc_list_add_tail(&CTX->reads, &op->posted);
		t->tx_inflight++;
		if (ret)
			ripc__pull_read_done(op, ret); /* its chunk failed */
	}
}

void ripc__pull_post_reads(void)
{
	struct ripc_list *pos, *tmp;

	if (!ripc_list_empty(&CTX->read_retry))
		repost_retries();

	ripc_list_for_each_safe(pos, tmp, &CTX->readq)
	{
		struct ripc_pull *p =
			ripc_container_of(pos, struct ripc_pull, readq);
		struct ripc_tp *t = &CTX->tp[p->peer->tp];
		size_t chunk = CTX->cfg.read_chunk;

		if (chunk > t->attr.max_msg_size)
			chunk = t->attr.max_msg_size;
		for (unsigned i = 0; i < p->n && !p->err; i++) {
			struct ripc_pull_item *it = &p->item[i];

			while (it->dst && it->next < it->len) {
				struct ripc_read_op *op;
				uint64_t len = it->len - it->next;
				int ret;

				if (t->tx_inflight >= t->tx_max)
					return; /* resume on completions */
				if (len > chunk)
					len = chunk;
				if (!(op = calloc(1, sizeof(*op)))) {
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
					return;
				}
				if (ret) {
					free(op);
					p->err = RIPC_EPULL;
					break;
				}
				ripc_list_add_tail(&CTX->reads, &op->posted);
				t->tx_inflight++;
				p->chunks_out++;
				it->next += len;
			}
		}
		if (p->err || pull_all_posted(p)) {
			ripc_list_del(&p->readq);
			p->queued = false;
			if (p->chunks_out == 0)
				pull_finish(p);
		}
	}
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
	if (!(m = msg_alloc())) {
		send_nack(peer, in, RIPC_ENOMEM);
		return;
	}
	if (in->nret)
		ripc__retbuf_on_offers(in);
	m->from = in->src;
	m->to = in->dst;
	m->src_inc = in->src_inc;
	m->nlong = in->nlong;
	enqueue(svc, m);
	for (unsigned i = 0; i < in->nlong; i++)
		pos[i] = (uint16_t)i;
	pull_start(peer, in, m, in->long_desc, pos, in->nlong);
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
	if (!(m = msg_alloc()))
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
		msg_release(m);
		return;
	}
	CTX->stats.return_replies_recv++;
	enqueue(svc, m);
	if (!in->nlong) {
		CTX->stats.long_recv++;
		ripc__msg_ready(svc, m);
		return;
	}
	for (unsigned i = 0; i < in->nlong; i++)
		pos[i] = (uint16_t)in->long_desc[i].aux;
	pull_start(peer, in, m, in->long_desc, pos, in->nlong);
}

static struct ripc_lsend *lsend_find(uint64_t cookie, uint64_t inc)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->lsends)
	{
		struct ripc_lsend *ls =
			ripc_container_of(pos, struct ripc_lsend, link);

		if (ls->cookie == cookie && ls->peer_inc == inc)
			return ls;
	}
	return NULL;
}

static void handle_done(const struct ripc_wire_in *in)
{
	struct ripc_lsend *ls = lsend_find(in->cookie, in->src_inc);

	if (!ls) {
		CTX->stats.drops_stale++;
		return;
	}
	ripc__lsend_release(ls, false);
}

static void handle_nack(const struct ripc_wire_in *in)
{
	struct ripc_lsend *ls;

	if (in->cookie == 0 && in->status == RIPC_ENOTFOUND) {
		/* The owner cancelled return buffers it offered us. */
		ripc__retbuf_forget(in->src_inc, in->src, in->dst);
		return;
	}
	ls = lsend_find(in->cookie, in->src_inc);
	ripc__route_drop(in->src);
	if (ls)
		ripc__lsend_release(ls, false);
}

void ripc__dispatch(struct ripc_tp *t, struct ripc_slot *s, size_t len)
{
	static struct ripc_wire_in in; /* under CTX->lock */
	int werr = ripc__wire_decode(s->buf, len, &in);

	if (werr) {
		CTX->stats.drops_malformed++;
		ripc__log_rl(RIPC_LOG_INFO, "%s: dropped message: %s",
			     t->attr.name, ripc__wire_strerror(werr));
		repost(t, s);
		return;
	}
	if (in.dst_inc != CTX->incarnation) {
		/* Meant for an earlier process at this address. */
		CTX->stats.drops_stale++;
		repost(t, s);
		return;
	}
	switch (in.type) {
	case RIPC_MT_SHORT:
		deliver_short(t, s, &in);
		return; /* the slot was reposted or handed over */
	case RIPC_MT_LONG:
		handle_long(t, &in);
		break;
	case RIPC_MT_RETURN:
		handle_return(t, &in);
		break;
	case RIPC_MT_DONE:
		handle_done(&in);
		break;
	case RIPC_MT_NACK:
		handle_nack(&in);
		break;
	}
	repost(t, s);
}

/* ---- ripc_receive ---------------------------------------------------- */

/* First ready message that no earlier message of the same sender
 * precedes. */
static struct ripc_msg *take_ready(struct ripc_service *svc)
{
	struct ripc_list *pos, *tmp;

	if (!svc->nready)
		return NULL;
	ripc_list_for_each_safe(pos, tmp, &svc->queue)
	{
		struct ripc_msg *m =
			ripc_container_of(pos, struct ripc_msg, link);
		struct ripc_list *q;
		bool blocked = false;

		if (!m->ready)
			continue;
		for (q = svc->queue.next; q != pos && !blocked; q = q->next) {
			struct ripc_msg *e =
				ripc_container_of(q, struct ripc_msg, link);

			blocked = !e->ready && e->src_inc == m->src_inc &&
				  e->from == m->from;
		}
		if (blocked)
			continue;
		ripc_list_del(&m->link);
		svc->qlen--;
		svc->nready--;
		ripc__queued_dec();
		return m;
	}
	return NULL;
}

static __thread struct ripc_waiter tls_waiter = { .efd = -1 };

static void tls_waiter_free(void *arg)
{
	(void)arg;
	if (tls_waiter.efd >= 0)
		close(tls_waiter.efd);
	tls_waiter.efd = -1;
}

static pthread_key_t waiter_key;
static pthread_once_t waiter_once = PTHREAD_ONCE_INIT;

static void waiter_key_init(void)
{
	pthread_key_create(&waiter_key, tls_waiter_free);
}

static int waiter_fd(void)
{
	if (tls_waiter.efd < 0) {
		pthread_once(&waiter_once, waiter_key_init);
		tls_waiter.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (tls_waiter.efd >= 0)
			pthread_setspecific(waiter_key, &tls_waiter);
	}
	return tls_waiter.efd;
}

/* Hand a message to the caller.  Returns the receive's result code. */
static int hand_over(struct ripc_msg *m, uint16_t *from, void ***short_items,
		     uint32_t **short_sizes, uint16_t *num_short,
		     void ***long_items, uint32_t **long_sizes,
		     uint16_t *num_long)
{
	void **sp = NULL, **lp = NULL;
	uint32_t *ss = NULL, *ls = NULL;
	unsigned ns = m->nshort, nl = m->nlong;

	if (m->err == RIPC_EPULL)
		nl = 0; /* nothing of it was delivered */
	if (ns && short_items) {
		sp = malloc(ns * sizeof(*sp));
		ss = malloc(ns * sizeof(*ss));
	}
	if (nl && long_items) {
		lp = malloc(nl * sizeof(*lp));
		ls = malloc(nl * sizeof(*ls));
	}
	if ((ns && short_items && (!sp || !ss)) ||
	    (nl && long_items && (!lp || !ls))) {
		free(sp), free(ss), free(lp), free(ls);
		return RIPC_ENOMEM;
	}
	for (unsigned i = 0; sp && i < ns; i++) {
		sp[i] = m->short_ptr[i];
		ss[i] = m->short_len[i];
	}
	for (unsigned i = 0; lp && i < nl; i++) {
		lp[i] = m->long_ptr[i];
		ls[i] = m->long_len[i];
	}
	if (from)
		*from = m->from;
	if (short_items) {
		*short_items = sp;
		if (short_sizes)
			*short_sizes = ss;
		else
			free(ss);
		if (num_short)
			*num_short = (uint16_t)ns;
		if (ns)
			m->slot = NULL; /* now the application's */
	} else if (num_short) {
		*num_short = 0;
	}
	if (long_items) {
		*long_items = lp;
		if (long_sizes)
			*long_sizes = ls;
		else
			free(ls);
		if (num_long)
			*num_long = (uint16_t)nl;
		if (nl)
			m->nlong = 0; /* buffers are the application's */
	} else if (num_long) {
		*num_long = 0;
	}
	return m->err;
}

RIPC_API uint8_t ripc_receive_timeout(uint16_t service_id,
				      uint16_t *from_service_id,
				      void ***short_items,
				      uint32_t **short_item_sizes,
				      uint16_t *num_short_items,
				      void ***long_items,
				      uint32_t **long_item_sizes,
				      uint16_t *num_long_items, int timeout_ms)
{
	struct ripc_service *svc;
	struct ripc_msg *m = NULL;
	uint64_t start, deadline, spin_until, spin_pull_until;
	bool spinning = false;
	unsigned spins = 0;
	int err;

	if (service_id > RIPC_MAX_SERVICE_ID)
		return (uint8_t)ripc__set_err(RIPC_EBADID);
	if ((err = ripc__ensure_init()))
		return (uint8_t)err;
	start = ripc__now_ns();
	deadline = timeout_ms < 0 ? UINT64_MAX
				  : start + ripc__ms_ns(timeout_ms);
	spin_until = start + CTX->cfg.spin_ns;
	spin_pull_until = start + CTX->cfg.spin_pull_ns;

	ripc__lock();
	for (;;) {
		svc = CTX->svc[service_id];
		if (!svc) {
			err = RIPC_ENOTOWNER;
			break;
		}
		if ((m = take_ready(svc)))
			break;
		ripc__progress_locked();
		if ((m = take_ready(svc)))
			break;
		if (CTX->shutting_down) {
			err = RIPC_ESHUTDOWN;
			break;
		}
		if (spinning && (++spins & 7) && timeout_ms != 0) {
			/* Between clock reads: keep spinning. */
			ripc__unlock();
			__builtin_ia32_pause();
			ripc__lock();
			continue;
		}
		uint64_t now = ripc__now_ns();

		CTX->app_active_ns = now;
		if (now >= deadline) {
			err = RIPC_ETIMEDOUT;
			break;
		}
		if (now < spin_until ||
		    (svc->qlen > svc->nready && now < spin_pull_until)) {
			/* Busy-poll: lowest latency while messages flow, and
			 * while a message of this service is being pulled
			 * (what the caller waits for: handing it over from
			 * the progress thread to a sleeping caller cost
			 * 10-25 % of long-send bandwidth).  The progress
			 * thread keeps away while we spin. */
			if (!spinning) {
				CTX->spinners++;
				spinning = true;
			}
			ripc__unlock();
			__builtin_ia32_pause();
			ripc__lock();
			continue;
		}
		if (spinning) {
			CTX->spinners--;
			spinning = false;
		}
		/* Sleep on our eventfd; the progress thread (or, in manual
		 * mode, our own periodic polling) wakes us. */
		struct ripc_waiter *w = &tls_waiter;
		int fd = waiter_fd();
		uint64_t wait_ns = deadline - now;
		int ms, r;

		if (fd < 0) {
			err = RIPC_ENOMEM;
			break;
		}
		if (CTX->cfg.manual_progress &&
		    wait_ns > CTX->cfg.poll_interval_us * 1000)
			wait_ns = CTX->cfg.poll_interval_us * 1000;
		ms = wait_ns > 1000000000ull ? 1000
					     : (int)((wait_ns + 999999) / 1000000);
		ripc_list_add_tail(&svc->waiters, &w->link);
		if (CTX->nwaiters++ == 0)
			ripc__progress_kick();
		ripc__unlock();
		r = poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, ms);
		if (r > 0) {
			uint64_t v;

			if (read(fd, &v, sizeof(v)) < 0)
				(void)0;
		}
		ripc__lock();
		ripc_list_del(&w->link);
		CTX->nwaiters--;
		if (r < 0 && errno == EINTR) {
			err = RIPC_EINTR;
			break;
		}
	}
	if (spinning)
		CTX->spinners--;
	CTX->app_active_ns = ripc__now_ns();
	if (m) {
		err = hand_over(m, from_service_id, short_items,
				short_item_sizes, num_short_items, long_items,
				long_item_sizes, num_long_items);
		if (err == RIPC_ENOMEM) {
			/* Put it back at the head; nothing is lost. */
			ripc_list_add_tail(svc->queue.next, &m->link);
			svc->qlen++;
			svc->nready++;
			queued_inc();
		} else {
			ripc__msg_free(m);
		}
	}
	ripc__unlock();
	return (uint8_t)(err ? ripc__set_err(err) : RIPC_OK);
}

RIPC_API uint8_t ripc_receive(uint16_t service_id, uint16_t *from_service_id,
			      void ***short_items, uint32_t **short_item_sizes,
			      uint16_t *num_short_items, void ***long_items,
			      uint32_t **long_item_sizes,
			      uint16_t *num_long_items)
{
	return ripc_receive_timeout(service_id, from_service_id, short_items,
				    short_item_sizes, num_short_items,
				    long_items, long_item_sizes,
				    num_long_items, -1);
}
