/*
 * Memory: receive/transmit slots, library buffers (ripc_buf_alloc) and
 * local registrations (ripc_buf_register), plus MR keys.
 *
 * Slots live in arena chunks registered once with every transport, so a
 * received message can be handed to the application in place (zero copy)
 * and later returned with ripc_buf_free(short_items[0]), which finds the
 * slot from any pointer into it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "locality.h"
#include "ripc_int.h"

#define SLOTS_PER_ARENA 16
#define SLOTS_MAX 2048 /* ~140 MiB; beyond, new messages are dropped */

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
	ripc_list_add_tail(&CTX->lregs, &r->link);
	CTX->stats.registrations++;
	return r;
}

void ripc__lreg_del(struct ripc_lreg *r)
{
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		if (CTX->tp[i].open && r->mr[i].handle)
			CTX->tp[i].ops->mr_close(CTX->tp[i].p, &r->mr[i]);
	ripc_list_del(&r->link);
	CTX->stats.deregistrations++;
	free(r);
}

static struct ripc_lreg *lreg_find(const void *p, size_t len)
{
	struct ripc_list *pos, *tmp;
	const uint8_t *b = p;

	ripc_list_for_each_safe(pos, tmp, &CTX->lregs)
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

static int arena_grow(void)
{
	size_t len = SLOTS_PER_ARENA * RIPC_SLOT_SIZE;
	struct ripc_arena *a;
	uint8_t *base;
	int err;

	if (CTX->nslots + SLOTS_PER_ARENA > SLOTS_MAX)
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
		s->next_free = CTX->free_slots;
		CTX->free_slots = s;
	}
	a->next = CTX->arenas;
	CTX->arenas = a;
	CTX->nslots += a->nslots;
	return RIPC_OK;
}

int ripc__arena_init(void)
{
	unsigned want = 0;

	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		if (CTX->tp[i].open)
			want += CTX->cfg.rx_depth;
	want += 8; /* transmit bounce buffers */
	while (CTX->nslots < want) {
		int err = arena_grow();

		if (err)
			return err;
	}
	return RIPC_OK;
}

void ripc__arena_fini(void)
{
	struct ripc_arena *a = CTX->arenas, *next;

	for (; a; a = next) {
		next = a->next;
		ripc__lreg_del(a->lreg);
		munmap(a->base, a->nslots * RIPC_SLOT_SIZE);
		free(a);
	}
	CTX->arenas = NULL;
	CTX->free_slots = NULL;
	CTX->nslots = 0;
}

struct ripc_slot *ripc__slot_get(void)
{
	struct ripc_slot *s;

	if (!CTX->free_slots && arena_grow() != RIPC_OK)
		return NULL;
	s = CTX->free_slots;
	CTX->free_slots = s->next_free;
	s->next_free = NULL;
	return s;
}

void ripc__slot_put(struct ripc_slot *s)
{
	s->state = SLOT_FREE;
	s->tp = -1;
	s->next_free = CTX->free_slots;
	CTX->free_slots = s;
}

struct ripc_slot *ripc__slot_of(const void *p)
{
	const uint8_t *b = p;

	for (struct ripc_arena *a = CTX->arenas; a; a = a->next) {
		if (b >= a->base && b < a->base + a->nslots * RIPC_SLOT_SIZE)
			return &a->slot[(size_t)(b - a->base) /
					RIPC_SLOT_SIZE];
	}
	return NULL;
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

int ripc__replenish(struct ripc_tp *t)
{
	while (t->rx_posted < CTX->cfg.rx_depth) {
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
 * Freed library buffers are kept for reuse (up to LIBBUF_CACHE of them,
 * LIBBUF_CACHE_BYTES in all, none larger than LIBBUF_CACHE_ITEM): a long
 * item that finds no window would otherwise cost an mmap, a page fault per
 * page and an munmap each time.  A cached buffer keeps its registration
 * but is not a live allocation: ripc_buf_free() of it is ignored.
 */
#define LIBBUF_CACHE 8
#define LIBBUF_CACHE_BYTES (256ul << 20)
#define LIBBUF_CACHE_ITEM (64ul << 20)

static struct ripc_lreg *libbuf_cache[LIBBUF_CACHE];
static size_t libbuf_cached_bytes;

static void *libbuf_from_cache(size_t mlen)
{
	int best = -1;

	for (int i = 0; i < LIBBUF_CACHE; i++) {
		struct ripc_lreg *r = libbuf_cache[i];

		/* Big enough, and not more than twice what is needed. */
		if (r && r->map_len >= mlen && r->map_len <= 2 * mlen &&
		    (best < 0 || r->map_len < libbuf_cache[best]->map_len))
			best = i;
	}
	if (best < 0)
		return NULL;
	struct ripc_lreg *r = libbuf_cache[best];

	libbuf_cache[best] = NULL;
	libbuf_cached_bytes -= r->map_len;
	r->from_alloc = true;
	return r->base;
}

static bool libbuf_to_cache(struct ripc_lreg *r)
{
	if (r->map_len > LIBBUF_CACHE_ITEM ||
	    libbuf_cached_bytes + r->map_len > LIBBUF_CACHE_BYTES ||
	    CTX->shutting_down)
		return false;
	for (int i = 0; i < LIBBUF_CACHE; i++) {
		if (!libbuf_cache[i]) {
			libbuf_cache[i] = r;
			libbuf_cached_bytes += r->map_len;
			r->from_alloc = false; /* not a live allocation */
			r->pull_mem = false;
			return true;
		}
	}
	return false;
}

/* A forked child: the cached buffers are registered in the parent's
 * domain and listed in its context; forget them (not unmapped: the child
 * never uses the parent's state). */
void ripc__libbuf_cache_forget(void)
{
	memset(libbuf_cache, 0, sizeof(libbuf_cache));
	libbuf_cached_bytes = 0;
}

void ripc__libbuf_cache_fini(void)
{
	for (int i = 0; i < LIBBUF_CACHE; i++) {
		struct ripc_lreg *r = libbuf_cache[i];

		if (!r)
			continue;
		libbuf_cache[i] = NULL;
		void *base = r->base;
		size_t len = r->map_len;

		ripc__lreg_del(r);
		munmap(base, len);
	}
	libbuf_cached_bytes = 0;
}

void *ripc__libbuf_alloc(size_t len)
{
	size_t mlen = page_round(len ? len : 1);
	struct ripc_lreg *r;
	void *p;
	int err;

	if ((p = libbuf_from_cache(mlen)))
		return p;
	p = map_pages(mlen);
	if (!p)
		return NULL;
	r = ripc__lreg_add(p, mlen, &err);
	if (!r) {
		munmap(p, mlen);
		return NULL;
	}
	r->from_alloc = true;
	r->map_len = mlen;
	return p;
}

static struct ripc_lreg *lreg_alloc_of(const void *p)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->lregs)
	{
		struct ripc_lreg *r =
			ripc_container_of(pos, struct ripc_lreg, link);

		if (r->from_alloc && r->base == p)
			return r;
	}
	return NULL;
}

void ripc__libbuf_free(void *p)
{
	struct ripc_lreg *r = lreg_alloc_of(p);
	size_t mlen;

	if (!r)
		return;
	if (r->pull_mem)
		CTX->pull_mem -= r->map_len;
	if (libbuf_to_cache(r))
		return;
	mlen = r->map_len;
	ripc__lreg_del(r);
	munmap(p, mlen);
}

RIPC_API void *ripc_buf_alloc(size_t size)
{
	void *p;

	if (size == 0) {
		ripc__set_err(RIPC_EINVAL);
		return NULL;
	}
	if (ripc__ensure_init())
		return NULL;
	ripc__lock();
	p = ripc__libbuf_alloc(size);
	ripc__unlock();
	if (!p)
		ripc__set_err(RIPC_ENOMEM);
	return p;
}

RIPC_API void ripc_buf_free(void *buf)
{
	struct ripc_slot *s;

	if (!buf)
		return;
	ripc__lock();
	if ((s = ripc__slot_of(buf))) {
		if (s->state == SLOT_HELD)
			ripc__slot_put(s);
		else
			ripc__log_rl(RIPC_LOG_WARN,
				     "ripc_buf_free(%p): receive buffer is "
				     "not held by the application; ignored",
				     buf);
	} else if (lreg_alloc_of(buf)) {
		ripc__libbuf_free(buf);
	} else {
		ripc__log_rl(RIPC_LOG_INFO,
			     "ripc_buf_free(%p): not a libripc buffer; ignored",
			     buf);
	}
	ripc__unlock();
}

RIPC_API void *ripc_buf_realloc(void *buf, size_t size)
{
	struct ripc_lreg *r;
	void *n;

	if (!buf)
		return ripc_buf_alloc(size);
	if (size == 0) {
		ripc_buf_free(buf);
		return NULL;
	}
	if (ripc__ensure_init())
		return NULL;
	ripc__lock();
	r = lreg_alloc_of(buf);
	if (!r) {
		ripc__unlock();
		ripc__set_err(RIPC_ENOTFOUND);
		return NULL;
	}
	if (page_round(size) == r->map_len) {
		ripc__unlock();
		return buf;
	}
	n = ripc__libbuf_alloc(size);
	if (!n) {
		ripc__unlock();
		ripc__set_err(RIPC_ENOMEM);
		return NULL;
	}
	memcpy(n, buf, size < r->map_len ? size : r->map_len);
	ripc__libbuf_free(buf);
	ripc__unlock();
	return n;
}

RIPC_API uint8_t ripc_buf_register(void *buf, size_t size)
{
	struct ripc_lreg *r;
	int err;

	if (!buf || size == 0)
		return (uint8_t)ripc__set_err(RIPC_EINVAL);
	if ((err = ripc__ensure_init()))
		return (uint8_t)err;
	ripc__lock();
	r = ripc__lreg_add(buf, size, &err);
	if (r)
		r->user = true;
	ripc__unlock();
	return (uint8_t)(r ? RIPC_OK : ripc__set_err(err));
}

RIPC_API uint8_t ripc_buf_unregister(void *buf)
{
	struct ripc_list *pos, *tmp;
	uint8_t ok = 0;

	if (!buf || !CTX->initialized) {
		ripc__set_err(RIPC_ENOTFOUND);
		return 0;
	}
	ripc__lock();
	ripc_list_for_each_safe(pos, tmp, &CTX->lregs)
	{
		struct ripc_lreg *r =
			ripc_container_of(pos, struct ripc_lreg, link);

		if (r->user && r->base == buf) {
			ripc__lreg_del(r);
			ok = 1;
			break;
		}
	}
	ripc__unlock();
	if (!ok)
		ripc__set_err(RIPC_ENOTFOUND);
	return ok;
}
