/*
 * The API layer, memory half: library buffers, registrations and receive
 * windows.  Checks, initialisation and locking here; the work in
 * buffers.c and windows.c.
 */
#include <stdlib.h>
#include <string.h>

#include "api.h"

RIPC_API void *ripc_buf_alloc(size_t size)
{
	void *p;
	int err;

	if (size == 0) {
		ripc__set_err(RIPC_EINVAL);
		return NULL;
	}
	if ((err = ripc__api_enter())) {
		ripc__set_err(err);
		return NULL;
	}
	p = ripc__libbuf_alloc(size, false);
	ripc__api_leave(p ? RIPC_OK : RIPC_ENOMEM);
	return p;
}

/* Works whether the library runs or not: memory handed out before a
 * finalize can still be given back. */
RIPC_API void ripc_buf_free(void *buf)
{
	struct ripc_slot *s;

	if (!buf)
		return;
	ripc__lock();
	ripc__engine_active(); /* may repost a receive: see api.c's api_lock */
	if ((s = ripc__slot_of(buf))) {
		if (s->state == SLOT_HELD)
			ripc__slot_release_held(s);
		else
			ripc__log_rl(RIPC_LOG_WARN,
				     "ripc_buf_free(%p): receive buffer is "
				     "not held by the application; ignored",
				     buf);
	} else if (ripc__lreg_alloc_of(buf)) {
		ripc__libbuf_free(buf);
	} else {
		ripc__log_rl(RIPC_LOG_WARN,
			     "ripc_buf_free(%p): not a buffer of libripc "
			     "(ripc_buf_alloc, a library long item, or "
			     "short_items[0] of a receive); ignored",
			     buf);
	}
	ripc__unlock();
}

RIPC_API void *ripc_buf_realloc(void *buf, size_t size)
{
	struct ripc_lreg *r;
	void *n;
	int err;

	if (!buf)
		return ripc_buf_alloc(size);
	if (size == 0) {
		ripc_buf_free(buf);
		return NULL;
	}
	if ((err = ripc__api_enter())) {
		ripc__set_err(err);
		return NULL;
	}
	r = ripc__lreg_alloc_of(buf);
	if (!r) {
		ripc__api_leave(RIPC_ENOTFOUND);
		return NULL;
	}
	/* Already the size it would get: as from ripc_buf_alloc, or whole
	 * pages (a library buffer holding a long item). */
	if (r->map_len == ripc__buf_alloc_len(size) ||
	    r->map_len == ((size + 4095) & ~(size_t)4095)) {
		ripc__api_leave(RIPC_OK);
		return buf;
	}
	n = ripc__libbuf_alloc(size, false);
	if (!n) {
		ripc__api_leave(RIPC_ENOMEM);
		return NULL;
	}
	memcpy(n, buf, size < r->map_len ? size : r->map_len);
	ripc__libbuf_free(buf);
	ripc__api_leave(RIPC_OK);
	return n;
}

RIPC_API uint8_t ripc_buf_register(void *buf, size_t size)
{
	struct ripc_lreg *r;
	int err;

	if (!buf || size == 0)
		return (uint8_t)ripc__set_err(RIPC_EINVAL);
	if ((err = ripc__api_enter()))
		return (uint8_t)ripc__set_err(err);
	r = ripc__lreg_add(buf, size, &err);
	if (r)
		r->user = true;
	return (uint8_t)ripc__api_leave(r ? RIPC_OK : err);
}

RIPC_API uint8_t ripc_buf_unregister(void *buf)
{
	struct ripc_lreg *r;

	if (!buf || ripc__api_enter_running()) {
		ripc__set_err(RIPC_ENOTFOUND);
		return 0;
	}
	r = ripc__lreg_user_of(buf);
	if (r)
		ripc__lreg_del(r);
	ripc__api_leave(r ? RIPC_OK : RIPC_ENOTFOUND);
	return r ? 1 : 0;
}

static int window_add(void *base, size_t size, int32_t service)
{
	int err;

	if (!base || size == 0 || (uintptr_t)base + size < (uintptr_t)base)
		return RIPC_EINVAL;
	if ((err = ripc__api_enter()))
		return err;
	return ripc__api_leave(ripc__window_add(base, size, service));
}

RIPC_API uint8_t ripc_reg_recv_window(void *base, size_t size)
{
	int err = window_add(base, size, -1);

	return (uint8_t)(err ? ripc__set_err(err) : RIPC_OK);
}

RIPC_API uint8_t ripc_reg_recv_window_for_service(void *base, size_t size,
						  uint16_t service)
{
	int err = service > RIPC_MAX_SERVICE_ID
			  ? RIPC_EBADID
			  : window_add(base, size, service);

	return (uint8_t)(err ? ripc__set_err(err) : RIPC_OK);
}

RIPC_API uint8_t ripc_unreg_recv_window(void *base)
{
	if (!base || ripc__api_enter_running())
		return (uint8_t)ripc__set_err(RIPC_ENOTFOUND);
	return (uint8_t)ripc__api_leave(ripc__window_remove(base));
}
