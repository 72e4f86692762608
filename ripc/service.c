/*
 * Service IDs owned by this process: registration through the host
 * registry, the per-service message queue and its waiters.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "dir_core.h"
#include "directory.h"
#include "resolver.h"
#include "retbuf.h"
#include "ripc_int.h"

#define RANDOM_ID_MIN 1024 /* random IDs stay clear of well-known ones */
#define RANDOM_ID_TRIES 4096

struct ripc_service *ripc__svc_get(uint16_t id)
{
	return id <= RIPC_MAX_SERVICE_ID ? CTX->svc[id] : NULL;
}

void ripc__wake_waiters(struct ripc_service *svc)
{
	struct ripc_list *pos, *tmp;
	uint64_t one = 1;

	ripc_list_for_each_safe(pos, tmp, &svc->waiters)
	{
		struct ripc_waiter *w =
			ripc_container_of(pos, struct ripc_waiter, link);

		if (write(w->efd, &one, sizeof(one)) < 0)
			(void)0; /* counter saturated: already awake */
	}
}

static struct ripc_service *svc_new(uint16_t id, bool mcast)
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

static int do_register(int service_id, bool mcast)
{
	int err, ret;

	if (service_id < 0 || service_id > RIPC_MAX_SERVICE_ID)
		return RIPC_EBADID;
	if ((err = ripc__ensure_init()))
		return err;
	ripc__lock();
	/* issue 13: or another thread is registering it right now. */
	if (CTX->svc[service_id] ||
	    ripc__dir_core_busy((uint16_t)service_id)) {
		ripc__unlock();
		return RIPC_EINUSE;
	}
	ret = mcast ? ripc__reg_join((uint16_t)service_id)
		    : ripc__reg_claim((uint16_t)service_id);
	if (ret) {
		ripc__unlock();
		return ret == -EEXIST ? RIPC_EINUSE
		       : ret == -ENOSPC ? RIPC_ENOMEM
					: RIPC_EREGISTRY;
	}
	/* issue 13: across hosts, through the directory or a duplicate
	 * probe over multicast; drops the lock while it waits. */
	if ((err = ripc__dir_core_register((uint16_t)service_id, mcast))) {
		ripc__reg_release((uint16_t)service_id);
		ripc__unlock();
		return err;
	}
	if (!svc_new((uint16_t)service_id, mcast)) {
		ripc__dir_release((uint16_t)service_id, mcast); /* issue 13 */
		ripc__reg_release((uint16_t)service_id);
		ripc__unlock();
		return RIPC_ENOMEM;
	}
	/* Caches on other hosts follow a restart or a move at once. */
	ripc__resolver_announce((uint16_t)service_id, true, mcast);
	ripc__unlock();
	return RIPC_OK;
}

RIPC_API uint8_t ripc_register_service_id(int service_id)
{
	int err = do_register(service_id, false);

	if (err) {
		ripc__set_err(err);
		return 0;
	}
	return 1;
}

RIPC_API uint8_t ripc_register_multicast_service_id(int service_id)
{
	int err = do_register(service_id, true);

	if (err) {
		ripc__set_err(err);
		return 0;
	}
	return 1;
}

RIPC_API uint16_t ripc_register_random_service_id(void)
{
	int err = RIPC_EINUSE;

	for (int i = 0; i < RANDOM_ID_TRIES; i++) {
		uint32_t r;
		uint16_t id;

		if (ripc__random(&r, sizeof(r))) {
			err = RIPC_ETRANSPORT;
			break;
		}
		id = (uint16_t)(RANDOM_ID_MIN +
				r % (RIPC_MAX_SERVICE_ID + 1 - RANDOM_ID_MIN));
		err = do_register(id, false);
		if (err == RIPC_OK)
			return id;
		if (err != RIPC_EINUSE)
			break;
	}
	ripc__set_err(err);
	return RIPC_INVALID_SERVICE_ID;
}

RIPC_API uint8_t ripc_unregister_service_id(int service_id)
{
	struct ripc_service *svc;
	struct ripc_list *pos, *tmp;

	if (service_id < 0 || service_id > RIPC_MAX_SERVICE_ID)
		return (uint8_t)ripc__set_err(RIPC_EBADID);
	if (!CTX->initialized)
		return (uint8_t)ripc__set_err(RIPC_ENOTOWNER);
	ripc__lock();
	svc = CTX->svc[service_id];
	if (!svc) {
		ripc__unlock();
		return (uint8_t)ripc__set_err(RIPC_ENOTOWNER);
	}
	ripc__reg_release((uint16_t)service_id);
	ripc__dir_release((uint16_t)service_id, svc->mcast); /* issue 13 */
	ripc__resolver_announce((uint16_t)service_id, false, svc->mcast);
	CTX->svc[service_id] = NULL;
	CTX->nsvc--;
	ripc_list_for_each_safe(pos, tmp, &svc->queue)
	{
		struct ripc_msg *m =
			ripc_container_of(pos, struct ripc_msg, link);

		ripc_list_del(&m->link);
		if (m->ready)
			ripc__queued_dec();
		ripc__msg_free(m);
	}
	ripc__windows_drop_service((uint16_t)service_id);
	/* Blocked receivers notice the service is gone and return. */
	ripc__wake_waiters(svc);
	ripc_list_for_each_safe(pos, tmp, &svc->waiters)
		ripc_list_del(pos);
	free(svc);
	ripc__unlock();
	return RIPC_OK;
}
