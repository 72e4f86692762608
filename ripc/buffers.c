/*
 * Memory: receive/transmit slots, library buffers (ripc_buf_alloc and the
 * buffers pulls allocate) and local registrations, plus MR keys.
 *
 * Slots live in arena chunks registered once with every transport, so a
 * received message can be handed to the application in place (zero copy)
 * and later returned with ripc_buf_free(short_items[0]), which finds the
 * slot from any pointer into it.
 *
 * All state is in CTX->mem; every function runs with the library lock
 * held.  The public functions are in api_mem.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "locality.h"
#include "ripc_int.h"

#define SLOTS_PER_ARENA 16
/* Beyond SLOTS_MAX (~140 MiB), new messages are dropped. */
#define SLOTS_MAX (RIPC_ARENAS_MAX * SLOTS_PER_ARENA)

/* Pages on the NUMA node nearest the NICs in use (plain mmap memory, so
 * munmap releases it; see locality.h). */
static void *map_pages(size_t len)
{
	return ripc__loc_alloc(len);
}

static size_t page_round(size_t len)
{
	size_t pg = 4096;

	return (len + pg - 1) & ~(pg - 1);
}

/* ripc_buf_alloc's memory comes in whole 2 MiB huge pages from
 * RIPC_HUGE_FROM up (ripc__loc_alloc_huge), and a buffer of 1-2 MiB gets
 * a whole one: over shm a peer's read of it (or its write into it, as a
 * return buffer) is a process_vm_readv/writev that pins its pages one by
 * one, and a 1 MiB pull from 4 KiB pages took twice as long
 * (perf_notes.md, 11-29).  At most twice the memory asked for; below
 * 1 MiB plain pages, where that would be more. */
#define RIPC_HUGE_FROM (1ul << 20)
#define RIPC_HUGE_SIZE (2ul << 20)

size_t ripc__buf_alloc_len(size_t len)
{
	size_t mlen;

	if (len > SIZE_MAX - RIPC_HUGE_SIZE)
		return 0; /* no such mapping: the caller fails */
	mlen = page_round(len ? len : 1);
	if (mlen >= RIPC_HUGE_FROM)
		mlen = (mlen + RIPC_HUGE_SIZE - 1) & ~(RIPC_HUGE_SIZE - 1);
	return mlen;
}

/* ---- local registrations -------------------------------------------- */

struct ripc_lreg *ripc__lreg_add(void *base, size_t len, int *err)
{
	struct ripc_lreg *r = calloc(1, sizeof(*r));

	*err = RIPC_OK;
	if (!r) {
		*err = RIPC_ENOMEM;
		return NULL;
	}
	r->base = base;
	r->len = len;
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
		struct ripc_tp *t = &CTX->tp[i];
		int ret;

		if (!t->open || !t->attr.mr_local)
			continue;
		ret = t->ops->mr_reg(t->p, base, len, RIPC_ACC_LOCAL, 0,
				     &r->mr[i]);
		if (ret == -EEXIST) {
			uint64_t key;

			/* Requested keys must be unique per domain. */
			if (ripc__key_new(t, &key) == 0)
				ret = t->ops->mr_reg(t->p, base, len,
						     RIPC_ACC_LOCAL, key,
						     &r->mr[i]);
		}
		if (ret) {
			*err = ripc__err_from_errno(ret);
			for (unsigned k = 0; k < i; k++)
				if (CTX->tp[k].open && r->mr[k].handle)
					CTX->tp[k].ops->mr_close(CTX->tp[k].p,
								 &r->mr[k]);
			free(r);
			return NULL;
		}
	}
	ripc_list_add_tail(&CTX->mem.lregs, &r->link);
	CTX->stats.registrations++;
	return r;
}

static void lreg_close_mrs(struct ripc_lreg *r)
{
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		if (CTX->tp[i].open && r->mr[i].handle)
			CTX->tp[i].ops->mr_close(CTX->tp[i].p, &r->mr[i]);
	memset(r->mr, 0, sizeof(r->mr));
}

void ripc__lreg_del(struct ripc_lreg *r)
{
	lreg_close_mrs(r);
	ripc_list_del(&r->link);
	CTX->stats.deregistrations++;
	free(r);
}

static struct ripc_lreg *lreg_find(const void *p, size_t len)
{
	struct ripc_list *pos, *tmp;
	const uint8_t *b = p;

	ripc_list_for_each_safe(pos, tmp, &CTX->mem.lregs)
	{
		struct ripc_lreg *r =
			ripc_container_of(pos, struct ripc_lreg, link);

		if (b >= r->base && len <= r->len &&
		    (size_t)(b - r->base) <= r->len - len)
			return r;
	}
	return NULL;
}

void *ripc__desc_for(int tp, const void *p, size_t len)
{
	struct ripc_lreg *r;

	if (!CTX->tp[tp].attr.mr_local)
		return NULL;
	r = lreg_find(p, len);
	return r ? r->mr[tp].desc : NULL;
}

struct ripc_lreg *ripc__lreg_alloc_of(const void *p)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->mem.lregs)
	{
		struct ripc_lreg *r =
			ripc_container_of(pos, struct ripc_lreg, link);

		if (r->from_alloc && r->base == p)
			return r;
	}
	return NULL;
}

struct ripc_lreg *ripc__lreg_user_of(const void *p)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->mem.lregs)
	{
		struct ripc_lreg *r =
			ripc_container_of(pos, struct ripc_lreg, link);

		if (r->user && r->base == p)
			return r;
	}
	return NULL;
}

int ripc__key_new(struct ripc_tp *t, uint64_t *key)
{
	uint64_t k;
	int ret;

	if (t->attr.mr_prov_key) {
		*key = 0;
		return 0;
	}
	if ((ret = ripc__random_u64(&k)))
		return ret;
	/* Bit 31 belongs to rxm's internal keys; 4-byte keys (verbs) keep
	 * 31 random bits. */
	k &= (t->attr.key_bytes >= 8) ? 0x7fffffff7fffffffull : 0x7fffffffull;
	*key = k ? k : 1;
	return 0;
}

/* ---- slot arenas ---------------------------------------------------- */

#define ARENA_LEN (SLOTS_PER_ARENA * RIPC_SLOT_SIZE)
#define ARENA_IX_MASK (2 * RIPC_ARENAS_MAX - 1)

_Static_assert((2 * RIPC_ARENAS_MAX & ARENA_IX_MASK) == 0,
	       "the arena index's size is a power of two");

/* Arenas are ARENA_LEN long and do not overlap, so base / ARENA_LEN is
 * a distinct key for each; an address p lies in the arena of key
 * p / ARENA_LEN or in the one of the key below, if in any. */
static unsigned arena_ix_hash(uintptr_t key)
{
	return (unsigned)((key * 0x9e3779b97f4a7c15ull) >> 32) & ARENA_IX_MASK;
}

/* Room is certain: at most RIPC_ARENAS_MAX arenas (SLOTS_MAX), in twice
 * as many entries, so every probe sequence meets an empty one. */
static void arena_ix_add(struct ripc_arena *a)
{
	struct ripc_mem *m = &CTX->mem;
	uintptr_t key = (uintptr_t)a->base / ARENA_LEN;
	unsigned h = arena_ix_hash(key);

	while (m->arena_ix[h].a)
		h = (h + 1) & ARENA_IX_MASK;
	m->arena_ix[h].key = key;
	m->arena_ix[h].a = a;
}

static struct ripc_arena *arena_ix_find(uintptr_t key)
{
	const struct ripc_mem *m = &CTX->mem;

	for (unsigned h = arena_ix_hash(key);; h = (h + 1) & ARENA_IX_MASK) {
		if (!m->arena_ix[h].a)
			return NULL;
		if (m->arena_ix[h].key == key)
			return m->arena_ix[h].a;
	}
}

static int arena_grow(void)
{
	size_t len = ARENA_LEN;
	struct ripc_arena *a;
	uint8_t *base;
	int err;

	if (CTX->mem.nslots + SLOTS_PER_ARENA > SLOTS_MAX)
		return RIPC_ENOMEM;
	a = calloc(1, sizeof(*a) + SLOTS_PER_ARENA * sizeof(struct ripc_slot));
	base = map_pages(len);
	if (!a || !base) {
		free(a);
		if (base)
			munmap(base, len);
		return RIPC_ENOMEM;
	}
	a->base = base;
	a->nslots = SLOTS_PER_ARENA;
	a->lreg = ripc__lreg_add(base, len, &err);
	if (!a->lreg) {
		munmap(base, len);
		free(a);
		return err;
	}
	for (size_t i = 0; i < a->nslots; i++) {
		struct ripc_slot *s = &a->slot[i];

		s->arena = a;
		s->buf = base + i * RIPC_SLOT_SIZE;
		s->tp = -1;
		s->state = SLOT_FREE;
		s->next_free = CTX->mem.free_slots;
		CTX->mem.free_slots = s;
	}
	a->next = CTX->mem.arenas;
	CTX->mem.arenas = a;
	CTX->mem.nslots += a->nslots;
	arena_ix_add(a);
	return RIPC_OK;
}

/* Receive slots for every open transport, posted. */
int ripc__mem_init(void)
{
	unsigned want = 0;

	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		if (CTX->tp[i].open)
			want += CTX->cfg.rx_depth;
	want += 8; /* transmit bounce buffers */
	while (CTX->mem.nslots < want) {
		int err = arena_grow();

		if (err)
			return err;
	}
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		if (CTX->tp[i].open && ripc__replenish(&CTX->tp[i]))
			return RIPC_ENOMEM;
	return RIPC_OK;
}

/* Teardown, first half (before the transports close): every registration
 * goes, since an MR must be closed before its domain.  Memory from
 * ripc_buf_alloc stays valid (ripc_buf_free still unmaps it). */
void ripc__mem_deregister(void)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->mem.lregs)
		lreg_close_mrs(ripc_container_of(pos, struct ripc_lreg, link));
}

/* Teardown, second half (after the transports closed, since libfabric
 * owns posted receive buffers until then): slots and cached library
 * buffers are unmapped, bookkeeping freed. */
static bool arena_held(const struct ripc_arena *a)
{
	for (size_t i = 0; i < a->nslots; i++)
		if (a->slot[i].state == SLOT_HELD)
			return true;
	return false;
}

static void arena_unmap(struct ripc_arena *a)
{
	ripc_list_del(&a->lreg->link);
	free(a->lreg);
	munmap(a->base, a->nslots * RIPC_SLOT_SIZE);
	free(a);
}

void ripc__mem_unmap(void)
{
	struct ripc_arena *a = CTX->mem.arenas, *next;
	struct ripc_list *pos, *tmp;

	for (; a; a = next) {
		next = a->next;
		if (arena_held(a)) {
			/* Short items the application holds stay valid until
			 * it frees them, also across finalize.  Its (closed)
			 * registration record leaves the list, which the
			 * next initialisation starts afresh. */
			ripc_list_del(&a->lreg->link);
			a->next = CTX->mem.retired;
			CTX->mem.retired = a;
			continue;
		}
		arena_unmap(a);
	}
	CTX->mem.arenas = NULL;
	memset(CTX->mem.arena_ix, 0, sizeof(CTX->mem.arena_ix));
	CTX->mem.free_slots = NULL;
	CTX->mem.nslots = 0;
	for (int i = 0; i < RIPC_LIBBUF_CACHE; i++) {
		struct ripc_lreg *r = CTX->mem.libbuf_cache[i];

		if (!r)
			continue;
		CTX->mem.libbuf_cache[i] = NULL;
		munmap(r->base, r->map_len);
		ripc_list_del(&r->link);
		free(r);
	}
	CTX->mem.libbuf_cached_bytes = 0;
	CTX->mem.pull_mem = 0;
	ripc_list_for_each_safe(pos, tmp, &CTX->mem.lregs)
	{
		struct ripc_lreg *r =
			ripc_container_of(pos, struct ripc_lreg, link);

		r->pull_mem = false;
		if (!r->from_alloc) {
			ripc_list_del(&r->link);
			free(r);
		}
	}
}

struct ripc_slot *ripc__slot_get(void)
{
	struct ripc_slot *s;

	if (!CTX->mem.free_slots && arena_grow() != RIPC_OK)
		return NULL;
	s = CTX->mem.free_slots;
	CTX->mem.free_slots = s->next_free;
	s->next_free = NULL;
	return s;
}

void ripc__slot_put(struct ripc_slot *s)
{
	s->state = SLOT_FREE;
	s->tp = -1;
	s->next_free = CTX->mem.free_slots;
	CTX->mem.free_slots = s;
}

static struct ripc_slot *slot_in_one(struct ripc_arena *a, const uint8_t *b)
{
	if (b >= a->base && b < a->base + a->nslots * RIPC_SLOT_SIZE)
		return &a->slot[(size_t)(b - a->base) / RIPC_SLOT_SIZE];
	return NULL;
}

static struct ripc_slot *slot_in(struct ripc_arena *a, const uint8_t *b)
{
	struct ripc_slot *s = NULL;

	for (; a && !s; a = a->next)
		s = slot_in_one(a, b);
	return s;
}

static struct ripc_slot *slot_in_live(const uint8_t *b)
{
	uintptr_t key = (uintptr_t)b / ARENA_LEN;
	struct ripc_arena *a;
	struct ripc_slot *s = NULL;

	if ((a = arena_ix_find(key)))
		s = slot_in_one(a, b);
	if (!s && key && (a = arena_ix_find(key - 1)))
		s = slot_in_one(a, b);
	return s;
}

struct ripc_slot *ripc__slot_of(const void *p)
{
	struct ripc_slot *s = slot_in_live(p);

	/* Retired arenas (held across a finalize) are few and rare. */
	return s ? s : slot_in(CTX->mem.retired, p);
}

void ripc__slot_release_held(struct ripc_slot *s)
{
	struct ripc_arena **pp = &CTX->mem.retired;

	while (*pp && *pp != s->arena)
		pp = &(*pp)->next;
	if (!*pp) {
		ripc__slot_put(s); /* a live arena: back to the free list */
		return;
	}
	/* A retired arena: its last held slot takes it away. */
	s->state = SLOT_FREE;
	if (!arena_held(s->arena)) {
		struct ripc_arena *a = *pp;

		*pp = a->next;
		arena_unmap(a);
	}
}

int ripc__post_slot(struct ripc_tp *t, struct ripc_slot *s)
{
	int ret;

	s->op.kind = RIPC_OP_RECV;
	s->tp = (int8_t)t->id;
	s->state = SLOT_POSTED;
	ret = t->ops->post_recv(t->p, s->buf, RIPC_SLOT_SIZE,
				ripc__desc_for(t->id, s->buf, RIPC_SLOT_SIZE),
				&s->op);
	if (ret) {
		s->state = SLOT_FREE;
		s->tp = -1;
		return ret;
	}
	t->rx_posted++;
	return 0;
}

/* A spare for a slot the application took: posted by the next poll of
 * t (ripc__post_owed), which in a receive's spin comes after the message
 * was handed over, so a fi_recv is no longer between a message's arrival
 * and its receiver (perf_notes.md, "Short messages"). */
void ripc__owe_slot(struct ripc_tp *t, struct ripc_slot *s)
{
	s->next_free = t->owed;
	t->owed = s;
	t->nowed++;
}

void ripc__post_owed(struct ripc_tp *t)
{
	while (t->owed) {
		struct ripc_slot *s = t->owed;

		t->owed = s->next_free;
		s->next_free = NULL;
		t->nowed--;
		/* A failed post leaves a gap that ripc__replenish fills. */
		if (CTX->shutting_down || ripc__post_slot(t, s) != 0)
			ripc__slot_put(s);
	}
}

int ripc__replenish(struct ripc_tp *t)
{
	while (t->rx_posted + t->nowed < CTX->cfg.rx_depth) {
		struct ripc_slot *s = ripc__slot_get();
		int ret;

		if (!s)
			return -ENOMEM;
		if ((ret = ripc__post_slot(t, s))) {
			ripc__slot_put(s);
			return ret;
		}
	}
	return 0;
}

/* ---- library buffers ------------------------------------------------ */

/*
 * Freed library buffers are kept for reuse (up to RIPC_LIBBUF_CACHE of
 * them, LIBBUF_CACHE_BYTES in all, none larger than LIBBUF_CACHE_ITEM): a
 * long item that finds no window would otherwise cost an mmap, a page
 * fault per page and an munmap each time.  A cached buffer keeps its
 * registration but is not a live allocation: ripc_buf_free() of it is
 * ignored.
 */
#define LIBBUF_CACHE_BYTES (256ul << 20)
#define LIBBUF_CACHE_ITEM (64ul << 20)

/* app: for ripc_buf_alloc, which promises zeroed memory and huge pages
 * from RIPC_HUGE_FROM (mlen is then whole huge pages,
 * ripc__buf_alloc_len): the buffer is cleared, and only a 2 MiB-aligned
 * one will do, advised again (a pull's buffer below 2 MiB was not).  A
 * pull overwrites what it is given. */
static void *libbuf_from_cache(size_t mlen, bool app)
{
	struct ripc_mem *m = &CTX->mem;
	struct ripc_lreg *r;
	int best = -1;
	bool huge = app && mlen >= RIPC_HUGE_SIZE;

	for (int i = 0; i < RIPC_LIBBUF_CACHE; i++) {
		r = m->libbuf_cache[i];
		/* Big enough, and not more than twice what is needed. */
		if (r && r->map_len >= mlen && r->map_len <= 2 * mlen &&
		    (!huge || (uintptr_t)r->base % RIPC_HUGE_SIZE == 0) &&
		    (best < 0 || r->map_len < m->libbuf_cache[best]->map_len))
			best = i;
	}
	if (best < 0)
		return NULL;
	r = m->libbuf_cache[best];
	m->libbuf_cache[best] = NULL;
	m->libbuf_cached_bytes -= r->map_len;
	r->from_alloc = true;
	if (huge)
		(void)madvise(r->base, r->map_len, MADV_HUGEPAGE);
	if (app)
		memset(r->base, 0, r->map_len);
	return r->base;
}

static bool libbuf_to_cache(struct ripc_lreg *r)
{
	struct ripc_mem *m = &CTX->mem;

	if (r->map_len > LIBBUF_CACHE_ITEM ||
	    m->libbuf_cached_bytes + r->map_len > LIBBUF_CACHE_BYTES ||
	    CTX->shutting_down || !CTX->initialized)
		return false;
	for (int i = 0; i < RIPC_LIBBUF_CACHE; i++) {
		if (!m->libbuf_cache[i]) {
			m->libbuf_cache[i] = r;
			m->libbuf_cached_bytes += r->map_len;
			r->from_alloc = false; /* not a live allocation */
			return true;
		}
	}
	return false;
}

/* pull_mem: counted against RIPC_PULL_MEM_MAX until freed. */
void *ripc__libbuf_alloc(size_t len, bool pull_mem)
{
	size_t mlen = pull_mem ? page_round(len ? len : 1)
			       : ripc__buf_alloc_len(len);
	struct ripc_lreg *r;
	void *p;
	int err;

	if (!mlen)
		return NULL; /* len wrapped around */

	if ((p = libbuf_from_cache(mlen, !pull_mem))) {
		r = ripc__lreg_alloc_of(p);
	} else {
		/* ripc_buf_alloc: the application's memory, often what it
		 * sends long (read by the peer) or offers to be written;
		 * huge pages from RIPC_HUGE_FROM.  A pull's buffer: huge
		 * pages from 2 MiB, since past the cache (items over
		 * LIBBUF_CACHE_ITEM) every message maps one afresh and the
		 * pull faults in all of it: shm 128 and 256 MiB items went
		 * from 858-1 234 to 2 769-3 619 MB/s, tcp from 768-936 to
		 * 1 666-2 462 (perf_notes.md, 11-29). */
		p = ripc__loc_alloc_huge(mlen);
		if (!p)
			return NULL;
		r = ripc__lreg_add(p, mlen, &err);
		if (!r) {
			munmap(p, mlen);
			return NULL;
		}
		r->from_alloc = true;
		r->map_len = mlen;
	}
	if (pull_mem && r) {
		r->pull_mem = true;
		CTX->mem.pull_mem += r->map_len;
	}
	return p;
}

void ripc__libbuf_free(void *p)
{
	struct ripc_lreg *r = ripc__lreg_alloc_of(p);
	size_t mlen;

	if (!r)
		return;
	if (r->pull_mem) {
		CTX->mem.pull_mem -= r->map_len;
		r->pull_mem = false;
	}
	if (libbuf_to_cache(r))
		return;
	mlen = r->map_len;
	ripc__lreg_del(r);
	munmap(p, mlen);
}
