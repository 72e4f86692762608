/*
 * Receive windows: memory the application registers in advance for
 * incoming long items.  Each window takes one item (placed at its base)
 * and is then consumed; the application registers it again to reuse it.
 * A service's own windows are tried before the process-wide ones, each
 * list in registration order, first fit.
 */
#include <stdlib.h>

#include "ripc_int.h"

static bool overlaps(const uint8_t *b, size_t len)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->windows)
	{
		struct ripc_window *w =
			ripc_container_of(pos, struct ripc_window, link);

		if (b < w->base + w->size && w->base < b + len)
			return true;
	}
	return false;
}

static int window_add(void *base, size_t size, int32_t service)
{
	struct ripc_window *w;
	bool need_reg = false;
	int err;

	if (!base || size == 0 || (uintptr_t)base + size < (uintptr_t)base)
		return RIPC_EINVAL;
	if ((err = ripc__ensure_init()))
		return err;
	ripc__lock();
	if (service >= 0 && !CTX->svc[service]) {
		ripc__unlock();
		return RIPC_ENOTOWNER;
	}
	if (overlaps(base, size)) {
		ripc__unlock();
		return RIPC_EINVAL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		ripc__unlock();
		return RIPC_ENOMEM;
	}
	w->base = base;
	w->size = size;
	w->service = service;
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		need_reg |= CTX->tp[i].open && CTX->tp[i].attr.mr_local;
	if (need_reg && !(w->lreg = ripc__lreg_add(base, size, &err))) {
		free(w);
		ripc__unlock();
		return err;
	}
	ripc_list_add_tail(&CTX->windows, &w->link);
	ripc__unlock();
	return RIPC_OK;
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

static void window_free(struct ripc_window *w)
{
	if (w->lreg)
		ripc__lreg_del(w->lreg);
	free(w);
}

void ripc__window_consumed(struct ripc_window *w)
{
	window_free(w);
}

RIPC_API uint8_t ripc_unreg_recv_window(void *base)
{
	struct ripc_list *pos, *tmp;
	int err = RIPC_ENOTFOUND;

	if (!base || !CTX->initialized)
		return (uint8_t)ripc__set_err(RIPC_ENOTFOUND);
	ripc__lock();
	ripc_list_for_each_safe(pos, tmp, &CTX->windows)
	{
		struct ripc_window *w =
			ripc_container_of(pos, struct ripc_window, link);

		if (w->base == base) {
			ripc_list_del(&w->link);
			window_free(w);
			err = RIPC_OK;
			break;
		}
	}
	ripc__unlock();
	return (uint8_t)(err ? ripc__set_err(err) : RIPC_OK);
}

static struct ripc_window *find_fit(int32_t service, size_t len)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->windows)
	{
		struct ripc_window *w =
			ripc_container_of(pos, struct ripc_window, link);

		if (w->service == service && w->size >= len)
			return w;
	}
	return NULL;
}

struct ripc_window *ripc__window_take(uint16_t service, size_t len)
{
	struct ripc_window *w = find_fit(service, len);

	if (!w)
		w = find_fit(-1, len);
	if (w)
		ripc_list_del(&w->link);
	return w;
}

void ripc__window_return(struct ripc_window *w)
{
	/* Back at the front: it was the first fit before. */
	if (w->service >= 0 && !CTX->svc[w->service]) {
		window_free(w);
		return;
	}
	ripc_list_add_tail(CTX->windows.next, &w->link);
}

void ripc__windows_drop_service(uint16_t service)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->windows)
	{
		struct ripc_window *w =
			ripc_container_of(pos, struct ripc_window, link);

		if (w->service == service) {
			ripc_list_del(&w->link);
			window_free(w);
		}
	}
}

void ripc__windows_fini(void)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->windows)
	{
		struct ripc_window *w =
			ripc_container_of(pos, struct ripc_window, link);

		ripc_list_del(&w->link);
		window_free(w);
	}
}
