/*
 * Services owned by this process, their message queues and the threads
 * waiting on them; the received-message records that live in the queues;
 * the ripc_get_fd() eventfd that tells an event loop something waits.
 *
 * Ordering: each service has one queue in arrival order.  A long message
 * is queued when its control message arrives and becomes ready when its
 * pull completes; ripc__msg_take returns the first ready message that no
 * earlier message from the same sender precedes, so messages from one
 * sending service arrive in send order while other senders may overtake a
 * slow pull.
 *
 * Registration with the registry, resolver and directory is the API
 * layer's business (api.c); this file only keeps the local objects.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ripc_int.h"

/* Message records kept for reuse, up to 1 024 of 216 bytes (~216 KiB,
 * once a queue that deep was seen).  A receiver behind its senders holds
 * a queue's worth of records, and a cache of 64 ran dry in every such
 * burst: 52 000 mallocs in 60 000 messages of the 64 B message rate under
 * callgrind, ~370 instructions a message (instr/instr.sh msgrate).  A
 * record may also be made by the progress thread and freed by the
 * application's, which glibc's per-thread cache does not carry across. */
#define MSG_CACHE_MAX 1024

/* ---- message records ------------------------------------------------- */

/* A record for nshort short and nlong long items (their state is filled by
 * the caller as far as the counts go).  The usual one, with at most
 * RIPC_MSG_INLINE of each, keeps its arrays inside and comes from the
 * cache; a larger one carries them past its end, in the same allocation,
 * and is freed, not cached. */
struct ripc_msg *ripc__msg_alloc(unsigned nshort, unsigned nlong)
{
	struct ripc_recv_state *rx = &CTX->rx;
	bool big = nshort > RIPC_MSG_INLINE || nlong > RIPC_MSG_INLINE;
	struct ripc_msg *m = big ? NULL : rx->msg_cache;

	if (m) {
		rx->msg_cache = *(struct ripc_msg **)m;
		rx->msg_cached--;
	} else if (!big) {
		if (!(m = malloc(sizeof(*m))))
			return NULL;
	} else {
		/* Pointers first, then lengths, then origins: each array
		 * starts aligned for its type. */
		size_t size = sizeof(*m) + (nshort + nlong) * sizeof(void *) +
			      (nshort + nlong) * sizeof(uint32_t) + nlong;

		if (!(m = malloc(size)))
			return NULL;
	}
	/* The item arrays are filled as far as the counts say; everything
	 * before them must start zeroed (a recycled record holds old
	 * values).  The header only, a few stores: cleared up to `in`,
	 * 112 bytes, it became a `rep stos`, whose start-up was two
	 * thirds of this function's time (perf annotate); the pointers
	 * and `big` are set below. */
	memset(m, 0, offsetof(struct ripc_msg, short_ptr));
	ripc_list_init(&m->link);
	m->big = big;
	if (!big) {
		m->short_ptr = m->in.short_ptr;
		m->short_len = m->in.short_len;
		m->long_ptr = m->in.long_ptr;
		m->long_len = m->in.long_len;
		m->long_origin = m->in.long_origin;
	} else {
		void **ptrs = (void **)(m + 1);
		uint32_t *lens = (uint32_t *)(ptrs + nshort + nlong);

		m->short_ptr = ptrs;
		m->long_ptr = ptrs + nshort;
		m->short_len = lens;
		m->long_len = lens + nshort;
		m->long_origin = (uint8_t *)(lens + nshort + nlong);
	}
	return m;
}

static void msg_release(struct ripc_msg *m)
{
	struct ripc_recv_state *rx = &CTX->rx;

	if (!m->big && rx->msg_cached < MSG_CACHE_MAX) {
		*(struct ripc_msg **)m = rx->msg_cache;
		rx->msg_cache = m;
		rx->msg_cached++;
	} else {
		free(m);
	}
}

/* Free a message the application will never see (or has taken the items
 * of: hand-over clears what became the application's). */
void ripc__msg_free(struct ripc_msg *m)
{
	if (m->pull) {
		/* Its pull owns the memory still targeted by reads; it ends
		 * at the next chance without delivering (pull.c). */
		m->pull->msg = NULL;
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

/* ---- queues ----------------------------------------------------------- */

void ripc__msg_enqueue(struct ripc_service *svc, struct ripc_msg *m)
{
	ripc_list_add_tail(&svc->queue, &m->link);
	svc->qlen++;
}

void ripc__msg_ready(struct ripc_msg *m)
{
	struct ripc_service *svc = CTX->svc[m->to];

	m->ready = true;
	if (!svc)
		return; /* not queued any more */
	svc->nready++;
	if (CTX->rx.queued_total++ == 0)
		ripc__appfd_update();
	ripc__waiters_wake(&svc->waiters);
}

static void unqueue(struct ripc_service *svc, struct ripc_msg *m)
{
	ripc_list_del(&m->link);
	svc->qlen--;
	if (m->ready) {
		svc->nready--;
		if (--CTX->rx.queued_total == 0)
			ripc__appfd_update();
	}
}

/* First ready message that no earlier message of the same sender
 * precedes. */
struct ripc_msg *ripc__msg_take(struct ripc_service *svc)
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
		unqueue(svc, m);
		return m;
	}
	return NULL;
}

/* Put a taken message back at the head (the hand-over failed). */
void ripc__msg_putback(struct ripc_service *svc, struct ripc_msg *m)
{
	ripc_list_add_tail(svc->queue.next, &m->link);
	svc->qlen++;
	svc->nready++;
	if (CTX->rx.queued_total++ == 0)
		ripc__appfd_update();
}

/* Is a message of svc still being pulled? */
bool ripc__svc_pulling(const struct ripc_service *svc)
{
	return svc->qlen > svc->nready;
}

/* ---- services --------------------------------------------------------- */

struct ripc_service *ripc__svc_new(uint16_t id, bool mcast)
{
	struct ripc_service *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->id = id;
	s->mcast = mcast;
	ripc_list_init(&s->queue);
	ripc_list_init(&s->waiters);
	CTX->svc[id] = s;
	CTX->nsvc++;
	return s;
}

/* The service goes: its queued messages are dropped, its windows
 * released, threads asleep in a receive on it woken (they find it gone). */
void ripc__svc_destroy(struct ripc_service *svc)
{
	struct ripc_list *pos, *tmp;

	CTX->svc[svc->id] = NULL;
	CTX->nsvc--;
	ripc_list_for_each_safe(pos, tmp, &svc->queue)
	{
		struct ripc_msg *m =
			ripc_container_of(pos, struct ripc_msg, link);

		unqueue(svc, m);
		ripc__msg_free(m);
	}
	ripc__windows_drop_service(svc->id);
	ripc__waiters_wake(&svc->waiters);
	ripc_list_for_each_safe(pos, tmp, &svc->waiters)
		ripc_list_del(pos);
	free(svc);
}

void ripc__svc_fini(void)
{
	for (unsigned i = 0; i <= RIPC_MAX_SERVICE_ID; i++)
		if (CTX->svc[i])
			ripc__svc_destroy(CTX->svc[i]);
	while (CTX->rx.msg_cache) {
		struct ripc_msg *m = CTX->rx.msg_cache;

		CTX->rx.msg_cache = *(struct ripc_msg **)m;
		free(m);
	}
	CTX->rx.msg_cached = 0;
	CTX->rx.queued_total = 0;
	if (CTX->rx.app_fd >= 0)
		close(CTX->rx.app_fd);
	CTX->rx.app_fd = -1;
	CTX->rx.app_fd_set = false;
}
