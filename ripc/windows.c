/*
 * Receive windows: memory the application registers in advance for
 * incoming long items.  Each window takes one item (placed at its base)
 * and is then consumed; the application registers it again to reuse it.
 * A service's own windows are tried before the process-wide ones, each
 * list in registration order, first fit.  Lock held throughout; the
 * public functions are in api_mem.c.
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

/* Lock held; the API layer checked the arguments. */
int ripc__window_add(void *base, size_t size, int32_t service)
{
	struct ripc_window *w;
	bool need_reg = false;
	int err;

	if (service >= 0 && !CTX->svc[service])
		return RIPC_ENOTOWNER;
	if (overlaps(base, size))
		return RIPC_EINVAL;
	w = ripc__zalloc(sizeof(*w));
	if (!w)
		return RIPC_ENOMEM;
	w->base = base;
	w->size = size;
	w->service = service;
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		need_reg |= CTX->tp[i].open && CTX->tp[i].attr.mr_local;
	if (need_reg && !(w->lreg = ripc__lreg_add(base, size, &err))) {
		free(w);
		return err;
	}
	ripc_list_add_tail(&CTX->windows, &w->link);
	return RIPC_OK;
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

int ripc__window_remove(void *base)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->windows)
	{
		struct ripc_window *w =
			ripc_container_of(pos, struct ripc_window, link);

		if (w->base == base) {
			ripc_list_del(&w->link);
			window_free(w);
			return RIPC_OK;
		}
	}
	return RIPC_ENOTFOUND;
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
