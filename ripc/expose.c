/*
 * Exposures: memory this process lets one peer access for one message.
 *
 * A long send exposes its items (remote read); a send with return buffers
 * exposes them (remote write).  Each item gets its own registration for
 * exactly its bytes with a fresh random key (DESIGN §6); zero-length items
 * are described but nothing is registered.  An exposure is identified on
 * the wire by its id (the LONG message's cookie) and ends in exactly one
 * way, recorded with it:
 *
 *   RIPC_OK         the peer said DONE (pulled) / wrote its reply into it
 *   RIPC_EPEER      the peer refused it or gave up (NACK, DONE with error),
 *                   or the message announcing it could not be sent
 *   RIPC_EEXPIRED   no word from the peer before the deadline
 *   RIPC_ECANCELED  this process cancelled it, or an offer went unused
 *   RIPC_ESHUTDOWN  finalize
 *
 * The last RIPC_RELEASE_RING endings are remembered per item, so that
 * ripc_wait_released() can tell "pulled" from "given up" after the fact;
 * once the application has called ripc_release_poll(), every ending is
 * also queued as an event (bounded; the oldest is dropped and counted).
 * This file is the only one that registers memory for peers or closes
 * such registrations.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ripc_int.h"

#define EXPO_MAX 65536     /* live exposures per process */
#define EVENTS_MAX 4096    /* queued release events */

uint64_t ripc__expose_new_seq(void)
{
	return ++CTX->ex.send_seq;
}

int ripc__expose(struct ripc_peer *peer, uint64_t peer_inc, uint8_t kind,
		 uint16_t src, uint16_t dest, void *const *buf,
		 const uint32_t *len, uint16_t n, uint64_t deadline,
		 struct ripc_wire_desc *desc, struct ripc_expo **out)
{
	struct ripc_tp *t = &CTX->tp[peer->tp];
	unsigned access = kind == RIPC_EXPO_LONG ? RIPC_ACC_REMOTE_READ
						 : RIPC_ACC_REMOTE_WRITE;
	struct ripc_expo *e;
	unsigned regs = 0;
	int ret = 0;

	if (CTX->ex.nlive >= EXPO_MAX)
		return RIPC_ENOMEM;
	e = ripc__zalloc(sizeof(*e) + n * sizeof(e->item[0]));
	if (!e)
		return RIPC_ENOMEM;
	do {
		if (ripc__random_u64(&e->id)) {
			free(e);
			return RIPC_ETRANSPORT;
		}
	} while (e->id == 0);
	for (unsigned i = 0; i < n; i++) {
		struct ripc_expo_item *it = &e->item[i];

		it->buf = buf[i];
		it->len = len[i];
		desc[i] = (struct ripc_wire_desc){ 0 };
		if (len[i] == 0)
			continue; /* described, nothing registered */
		do {
			uint64_t key;

			if ((ret = ripc__key_new(t, &key)))
				break;
			ret = t->ops->mr_reg(t->p, buf[i], len[i], access, key,
					     &it->mr);
		} while (ret == -EEXIST); /* key collision: draw again */
		if (ret)
			break;
		regs++;
		desc[i].addr = it->mr.base;
		desc[i].key = it->mr.key;
		desc[i].len = len[i];
	}
	if (ret) {
		for (unsigned i = 0; i < n; i++)
			if (e->item[i].mr.handle)
				t->ops->mr_close(t->p, &e->item[i].mr);
		free(e);
		return ripc__err_from_errno(ret);
	}
	e->kind = kind;
	e->peer = ripc__peer_hold(peer);
	e->peer_inc = peer_inc;
	e->src = src;
	e->dest = dest;
	e->send_seq = CTX->ex.send_seq;
	e->since = ripc__now_ns();
	e->deadline = deadline;
	ripc__timer_note(deadline);
	e->n = n;
	ripc_list_add_tail(&CTX->ex.live, &e->link);
	CTX->ex.nlive++;
	CTX->stats.registrations += regs;
	*out = e;
	return RIPC_OK;
}

struct ripc_expo *ripc__expose_by_id(uint64_t id)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->ex.live)
	{
		struct ripc_expo *e =
			ripc_container_of(pos, struct ripc_expo, link);

		if (e->id == id)
			return e;
	}
	return NULL;
}

struct ripc_expo *ripc__expose_find(uint64_t id, uint64_t peer_inc)
{
	struct ripc_expo *e = ripc__expose_by_id(id);

	return e && e->peer_inc == peer_inc ? e : NULL;
}

static void record(const struct ripc_expo *e, const struct ripc_expo_item *it,
		   int status)
{
	struct ripc_expose_state *x = &CTX->ex;
	struct ripc_release_rec rec = {
		.buf = it->buf,
		.len = it->len,
		.send_seq = e->send_seq,
		.dest = e->dest,
		.kind = e->kind == RIPC_EXPO_LONG ? RIPC_RELEASE_LONG
						  : RIPC_RELEASE_RETURN,
		.status = (uint8_t)status,
	};

	x->ring[x->ring_head] = rec;
	x->ring_head = (x->ring_head + 1) % RIPC_RELEASE_RING;
	if (x->ring_n < RIPC_RELEASE_RING)
		x->ring_n++;
	if (!x->events_on || !x->ev)
		return;
	if (x->ev_n == x->ev_cap) {
		/* Bounded: the oldest event goes. */
		x->ev_head = (x->ev_head + 1) % x->ev_cap;
		x->ev_n--;
		CTX->stats.release_events_dropped++;
	}
	x->ev[(x->ev_head + x->ev_n) % x->ev_cap] = rec;
	x->ev_n++;
}

/* An item of the application's that the library used for a peer without
 * exposing it (a reply written into the peer's return buffer): its use is
 * over with `status`. */
void ripc__expose_note(const void *buf, uint32_t len, uint16_t dest,
		       int status)
{
	struct ripc_expo e = { .kind = RIPC_EXPO_LONG, .dest = dest,
			       .send_seq = CTX->ex.send_seq };
	struct ripc_expo_item it = { .buf = buf, .len = len };
	bool had_events = CTX->ex.ev_n > 0;

	record(&e, &it, status);
	ripc__waiters_wake(&CTX->ex.waiters);
	if (!had_events && CTX->ex.ev_n)
		ripc__appfd_update();
}

void ripc__expose_end_each(struct ripc_expo *e, const uint8_t *status)
{
	struct ripc_tp *t = &CTX->tp[e->peer->tp];
	bool had_events = CTX->ex.ev_n > 0;

	for (unsigned i = 0; i < e->n; i++) {
		struct ripc_expo_item *it = &e->item[i];

		if (it->mr.handle) {
			if (t->open)
				t->ops->mr_close(t->p, &it->mr);
			CTX->stats.deregistrations++;
		}
		record(e, it, status[i]);
	}
	ripc_list_del(&e->link);
	CTX->ex.nlive--;
	ripc__peer_put(e->peer);
	free(e);
	ripc__waiters_wake(&CTX->ex.waiters);
	if (!had_events && CTX->ex.ev_n)
		ripc__appfd_update();
}

void ripc__expose_end(struct ripc_expo *e, int status, bool quiet)
{
	struct ripc_tp *t = &CTX->tp[e->peer->tp];
	bool had_events = CTX->ex.ev_n > 0;

	for (unsigned i = 0; i < e->n; i++) {
		struct ripc_expo_item *it = &e->item[i];

		if (it->mr.handle) {
			if (t->open)
				t->ops->mr_close(t->p, &it->mr);
			CTX->stats.deregistrations++;
		}
		if (!quiet)
			record(e, it, status);
	}
	if (e->kind == RIPC_EXPO_LONG && !quiet) {
		if (status == RIPC_EEXPIRED)
			CTX->stats.long_timeouts++;
		else
			CTX->stats.long_released++;
	}
	ripc_list_del(&e->link);
	CTX->ex.nlive--;
	ripc__peer_put(e->peer);
	free(e);
	ripc__waiters_wake(&CTX->ex.waiters);
	if (!had_events && CTX->ex.ev_n)
		ripc__appfd_update();
}

/* An exposure whose announcing message never left: nobody learns of it. */
void ripc__expose_end_id_quiet(uint64_t id)
{
	struct ripc_expo *e = ripc__expose_by_id(id);

	if (e)
		ripc__expose_end(e, RIPC_ECANCELED, true);
}

void ripc__expose_end_id(uint64_t id, int status)
{
	struct ripc_expo *e = ripc__expose_by_id(id);

	if (e)
		ripc__expose_end(e, status, false);
}

uint64_t ripc__expose_timers(uint64_t now)
{
	struct ripc_list *pos, *tmp;
	uint64_t next = UINT64_MAX;

	ripc_list_for_each_safe(pos, tmp, &CTX->ex.live)
	{
		struct ripc_expo *e =
			ripc_container_of(pos, struct ripc_expo, link);

		if (ripc__peer_ended(e->peer, e->since, now, &next)) {
			/* Nobody will pull it or write into it: at once,
			 * not at the deadline (a stopped peer is alive). */
			ripc__log_rl(RIPC_LOG_INFO,
				     "peer process ended; revoking the "
				     "registrations exposed to it");
			CTX->stats.peer_ended_transfers++;
			ripc__expose_end(e, RIPC_EPEER, false);
			continue;
		}
		if (now < e->deadline) {
			if (e->deadline < next)
				next = e->deadline;
			continue;
		}
		if (e->kind == RIPC_EXPO_LONG)
			ripc__log_rl(RIPC_LOG_INFO,
				     "long send not completed by its receiver "
				     "in time; revoking its registrations");
		ripc__expose_end(e, RIPC_EEXPIRED, false);
	}
	return next;
}

static bool item_covers(const uint8_t *buf, uint32_t len, const uint8_t *p)
{
	return len && p >= buf && p < buf + len;
}

bool ripc__expose_covers(const void *p)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->ex.live)
	{
		struct ripc_expo *e =
			ripc_container_of(pos, struct ripc_expo, link);

		for (unsigned i = 0; i < e->n; i++)
			if (item_covers(e->item[i].buf, e->item[i].len, p))
				return true;
	}
	return false;
}

/* How the latest exposure of p ended: of the items of the latest public
 * call that exposed p (several for a multicast long send), the first
 * ending that was not RIPC_OK, else RIPC_OK. */
int ripc__expose_outcome(const void *p)
{
	const struct ripc_expose_state *x = &CTX->ex;
	uint64_t seq = 0;
	int status = RIPC_OK;

	for (unsigned k = 0; k < x->ring_n; k++) {
		const struct ripc_release_rec *r =
			&x->ring[(x->ring_head + RIPC_RELEASE_RING - 1 - k) %
				 RIPC_RELEASE_RING];

		if (!item_covers(r->buf, r->len, p))
			continue;
		if (seq && r->send_seq != seq)
			break;
		seq = r->send_seq;
		if (r->status != RIPC_OK)
			status = r->status;
	}
	return status;
}

int ripc__expose_events(struct ripc_release *ev, int max)
{
	struct ripc_expose_state *x = &CTX->ex;
	int n = 0;

	if (!x->events_on) {
		x->ev = calloc(EVENTS_MAX, sizeof(*x->ev));
		if (!x->ev)
			return -RIPC_ENOMEM;
		x->ev_cap = EVENTS_MAX;
		x->events_on = true;
	}
	while (n < max && x->ev_n) {
		const struct ripc_release_rec *r = &x->ev[x->ev_head];

		ev[n++] = (struct ripc_release){
			.buf = r->buf,
			.length = r->len,
			.service = r->dest,
			.kind = r->kind,
			.status = r->status,
		};
		x->ev_head = (x->ev_head + 1) % x->ev_cap;
		x->ev_n--;
	}
	if (n && !x->ev_n)
		ripc__appfd_update();
	return n;
}

bool ripc__expose_events_pending(void)
{
	return CTX->ex.ev_n > 0;
}

/* Teardown, before the transports close: every exposure ends. */
void ripc__expose_fini(void)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->ex.live)
		ripc__expose_end(ripc_container_of(pos, struct ripc_expo, link),
				 RIPC_ESHUTDOWN, false);
	free(CTX->ex.ev);
	CTX->ex.ev = NULL;
	CTX->ex.ev_n = CTX->ex.ev_head = CTX->ex.ev_cap = 0;
	CTX->ex.events_on = false;
}
