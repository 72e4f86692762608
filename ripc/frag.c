/*
 * Messages that arrive in fragments: the receiver's side of the framing
 * in wire.h.
 *
 * Why: libfabric 1.17's shm injects a send of up to 4096 bytes through a
 * buffer in the receiver's region, but moves every larger one by CMA: the
 * receiver calls process_vm_readv on the sender's buffer and answers
 * before the sender's send completes (ref §2), ~3 us here where an inject
 * is ~0.4.  A 4 KiB payload plus libripc's header is just over the limit,
 * so the sender (txq.c) sends such messages, up to RIPC_FRAG_MAX bytes,
 * as a train of injects instead, and they are put together here.
 *
 * The first fragment lands in a receive slot large enough for any whole
 * message; it is held (a spare takes its place among the posted receives)
 * and every continuation's bytes are copied in behind it, in order, from
 * the slot they arrived in, which goes straight back.  When the last byte
 * is in, the flag comes off and the whole message goes to the decoder
 * like any other.  Fragments of one message leave their process back to
 * back on one ordered channel (txq.c keeps a peer's messages in order),
 * so a message is keyed by the transport and the sender's incarnation.
 *
 * A peer may lie: a continuation must start exactly where the message
 * stands and not run past its announced end, or the message is dropped;
 * one with no message open is dropped; at most RIPC_FRAG_PARTIALS
 * messages are open at once, and one whose fragments stop coming (its
 * sender died or gave up) is dropped after the send timeout plus a
 * second.  Lock held throughout; nothing here sends or waits.
 */
#include <string.h>

#include "ripc_int.h"

#define FRAG_GRACE_NS 1000000000ull

static struct ripc_partial *find(int8_t tp, uint64_t src_inc)
{
	struct ripc_frag_state *fr = &CTX->fr;

	for (unsigned i = 0; i < fr->n; i++)
		if (fr->p[i].tp == tp && fr->p[i].src_inc == src_inc)
			return &fr->p[i];
	return NULL;
}

/* The message is complete or abandoned: out of the table (its slot is
 * the caller's). */
static void forget(struct ripc_partial *p)
{
	struct ripc_frag_state *fr = &CTX->fr;

	*p = fr->p[--fr->n];
}

static void drop(struct ripc_partial *p)
{
	struct ripc_slot *s = p->s;

	forget(p);
	ripc__slot_put(s);
}

static void refuse(struct ripc_tp *t, struct ripc_slot *s, const char *why)
{
	CTX->stats.drops_malformed++;
	ripc__log_rl(RIPC_LOG_INFO, "%s: dropped fragment: %s", t->attr.name,
		     why);
	ripc__slot_repost(t, s);
}

static void first(struct ripc_tp *t, struct ripc_slot *s,
		  const struct ripc_wire_frag *f)
{
	struct ripc_frag_state *fr = &CTX->fr;
	struct ripc_partial *p = find(t->id, f->src_inc);
	struct ripc_slot *spare = NULL;
	uint64_t now = ripc__now_ns();

	if (p) {
		/* Its sender began another: the rest of this one will not
		 * come (a fragment of it timed out in the sender's queue). */
		CTX->stats.drops_stale++;
		drop(p);
	}
	if (fr->n == RIPC_FRAG_PARTIALS)
		ripc__frag_timers(now);
	if (fr->n == RIPC_FRAG_PARTIALS) {
		CTX->stats.drops_queue_full++;
		ripc__log_rl(RIPC_LOG_WARN,
			     "%s: %u messages in fragments at once: dropping",
			     t->attr.name, fr->n);
		ripc__slot_repost(t, s);
		return;
	}
	/* The slot stays out of the receives: a replacement first, as for
	 * a short message handed to the application (dispatch.c). */
	if (t->rx_posted + t->nowed < CTX->cfg.rx_depth &&
	    !(spare = ripc__slot_get())) {
		CTX->stats.drops_queue_full++;
		ripc__slot_repost(t, s);
		return;
	}
	s->state = SLOT_HELD;
	s->tp = -1;
	if (spare)
		ripc__owe_slot(t, spare);
	fr->p[fr->n++] = (struct ripc_partial){
		.src_inc = f->src_inc,
		.s = s,
		.total = f->total,
		.got = f->len,
		.tp = (int8_t)t->id,
		.deadline = now + CTX->cfg.send_timeout_ns + FRAG_GRACE_NS,
	};
	ripc__timer_note(fr->p[fr->n - 1].deadline);
}

/* A continuation in *sp: copied behind its message; true with the whole
 * message in (*sp, *len) once the last one is in. */
static bool continuation(struct ripc_tp *t, struct ripc_slot **sp, size_t *len,
		 const struct ripc_wire_frag *f)
{
	struct ripc_slot *s = *sp;
	struct ripc_partial *p = find(t->id, f->src_inc);
	struct ripc_slot *whole;
	size_t total;

	if (!p) {
		/* The rest of a message dropped here, or a lie. */
		CTX->stats.drops_stale++;
		ripc__slot_repost(t, s);
		return false;
	}
	if (f->off != p->got || f->len > p->total - p->got) {
		drop(p);
		refuse(t, s, "out of order or past the message's end");
		return false;
	}
	memcpy(p->s->buf + p->got, s->buf + RIPC_WIRE_HDR, f->len);
	p->got += f->len;
	ripc__slot_repost(t, s);
	if (p->got < p->total)
		return false;
	whole = p->s;
	total = p->total;
	forget(p);
	ripc__wire_frag_mark(whole->buf, false);
	CTX->stats.frag_msgs_recv++;
	*sp = whole;
	*len = total;
	return true;
}

bool ripc__frag_input(struct ripc_tp *t, struct ripc_slot **s, size_t *len)
{
	struct ripc_wire_frag f;

	switch (ripc__wire_frag_peek((*s)->buf, *len, RIPC_SLOT_SIZE, &f)) {
	case RIPC_FRAG_NONE:
		return true;
	case RIPC_FRAG_FIRST:
		first(t, *s, &f);
		return false;
	case RIPC_FRAG_NEXT:
		return continuation(t, s, len, &f);
	case RIPC_FRAG_BAD:
	default:
		refuse(t, *s, "bad framing");
		return false;
	}
}

uint64_t ripc__frag_timers(uint64_t now)
{
	struct ripc_frag_state *fr = &CTX->fr;
	uint64_t next = UINT64_MAX;

	for (unsigned i = 0; i < fr->n;) {
		struct ripc_partial *p = &fr->p[i];

		if (now >= p->deadline) {
			CTX->stats.drops_stale++;
			ripc__log_rl(RIPC_LOG_INFO,
				     "a message in fragments stopped "
				     "arriving (%u of %u bytes): dropped",
				     p->got, p->total);
			drop(p); /* the last one moved to i */
			continue;
		}
		if (p->deadline < next)
			next = p->deadline;
		i++;
	}
	return next;
}

/* Teardown, before the slots are unmapped (init.c). */
void ripc__frag_fini(void)
{
	while (CTX->fr.n)
		drop(&CTX->fr.p[0]);
}
