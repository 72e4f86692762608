/*
 * Library lifetime: lazy initialisation on first use, ripc_init and
 * ripc_finalize, fork handling, and the small query functions.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "dir_core.h"
#include "directory.h"
#include "locality.h"
#include "resolver.h"
#include "retbuf.h"
#include "ripc_int.h"

struct ripc_ctx ripc__ctx = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.lregs = RIPC_LIST_INIT(ripc__ctx.lregs),
	.wake_fd = -1,
	.app_fd = -1,
};

static bool atexit_done;

/* Milliseconds from the environment; negative values mean 0. */
static uint64_t env_ms(enum ripc_env_id id)
{
	int64_t v = ripc__env_int(id);

	return ripc__ms_ns(v < 0 ? 0 : v);
}

static void load_config(void)
{
	int64_t v;

	CTX->cfg.resolve_timeout_ns =
		env_ms(RIPC_ENV_RESOLVE_TIMEOUT_MS);
	CTX->cfg.send_timeout_ns =
		env_ms(RIPC_ENV_SEND_TIMEOUT_MS);
	CTX->cfg.long_timeout_ns =
		env_ms(RIPC_ENV_LONG_TIMEOUT_MS);
	CTX->cfg.pull_timeout_ns =
		env_ms(RIPC_ENV_PULL_TIMEOUT_MS);
	v = ripc__env_int(RIPC_ENV_SPIN_US);
	CTX->cfg.spin_ns = v < 0 ? 0 : (uint64_t)v * 1000;
	v = ripc__env_int(RIPC_ENV_SPIN_PULL_US);
	CTX->cfg.spin_pull_ns = v < 0 ? 0 : (uint64_t)v * 1000;
	v = ripc__env_int(RIPC_ENV_POLL_INTERVAL_US);
	CTX->cfg.poll_interval_us = v < 10 ? 10 : v > 999999 ? 999999 : v;
	v = ripc__env_int(RIPC_ENV_BUSY_POLL_US);
	CTX->cfg.busy_poll_us = v < 1 ? 1 : v > 999999 ? 999999 : v;
	v = ripc__env_int(RIPC_ENV_RX_DEPTH);
	CTX->cfg.rx_depth = v < 2 ? 2 : v > 1024 ? 1024 : (unsigned)v;
	v = ripc__env_int(RIPC_ENV_QUEUE_MAX);
	CTX->cfg.queue_max = v < 1 ? 1 : v > 1000000 ? 1000000 : (unsigned)v;
	v = ripc__env_int(RIPC_ENV_RETURN_TIMEOUT_MS);
	CTX->cfg.return_timeout_ms = v < 0 ? 0 : (uint64_t)v;
	v = ripc__env_int(RIPC_ENV_PULL_MEM_MAX);
	CTX->cfg.pull_mem_max = v < 0 ? 0 : (uint64_t)v;
	v = ripc__env_int(RIPC_ENV_READ_CHUNK);
	CTX->cfg.read_chunk = v < 4096 ? 4096 : (uint64_t)v;
	CTX->cfg.manual_progress =
		!strcmp(ripc__env_str(RIPC_ENV_PROGRESS), "manual");
}

static unsigned test_mr_bits(void)
{
	const char *v = ripc__env_str(RIPC_ENV_TEST_MR_BITS);
	unsigned bits = 0;

	if (strstr(v, "local"))
		bits |= RIPC_MRF_LOCAL;
	if (strstr(v, "prov_key"))
		bits |= RIPC_MRF_PROV_KEY;
	if (strstr(v, "key32"))
		bits |= RIPC_MRF_KEY32;
	return bits;
}

/* Is transport `name` selected by RIPC_PROVIDER (empty: all)? */
static bool wanted(const char *name)
{
	const char *list = ripc__env_str(RIPC_ENV_PROVIDER);
	size_t n = strlen(name);

	if (!*list)
		return true;
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len == n && !strncmp(p, name, n))
			return true;
		if (!e)
			break;
		p = e + 1;
	}
	return false;
}

static void close_transports(void)
{
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
		struct ripc_tp *t = &CTX->tp[i];

		if (t->open)
			t->ops->close(t->p);
		t->open = false;
	}
	CTX->ntp = 0;
}

static int open_transports(void)
{
	struct ripc_prov_opts opts = {
		.src_addr = ripc__env_str(RIPC_ENV_TCP_ADDR),
		.shm_checked = ripc__env_bool(RIPC_ENV_SHM_CHECKED),
		.force_mr_bits = test_mr_bits(),
	};

	for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
		struct ripc_tp *t = &CTX->tp[i];
		int ret;

		t->id = (int)i;
		if (!wanted(ripc__prov_names[i]))
			continue;
		if (i == RIPC_PROV_SHM && !ripc__env_bool(RIPC_ENV_SHM))
			continue;
		t->ops = ripc__prov_table[i];
		ret = t->ops->open(&opts, &t->p, &t->attr);
		if (ret) {
			ripc__log(ret == -ENODEV ? RIPC_LOG_INFO
						 : RIPC_LOG_WARN,
				  "transport %s unavailable: %s",
				  ripc__prov_names[i], strerror(-ret));
			continue;
		}
		t->addrlen = sizeof(t->addr);
		ret = t->ops->getname(t->p, t->addr, &t->addrlen);
		if (ret) {
			ripc__log(RIPC_LOG_WARN, "transport %s: no address",
				  ripc__prov_names[i]);
			t->ops->close(t->p);
			continue;
		}
		/* Keep half the transmit queue for sends and replies. */
		t->tx_max = t->attr.tx_depth > 8 ? t->attr.tx_depth / 2 : 4;
		t->tx_inflight = 0;
		t->rx_posted = 0;
		t->open = true;
		CTX->ntp++;
		ripc__log(RIPC_LOG_INFO, "transport %s open (%s)",
			  ripc__prov_names[i], t->attr.fabric_name);
	}
	return CTX->ntp ? RIPC_OK : RIPC_ENOPROVIDER;
}

/* The parent's state as the child found it: kept reachable, never used. */
static struct ripc_ctx *abandoned;

/* Around fork(): every libfabric call is made under the library lock, so
 * holding it across the fork guarantees that no library thread is inside
 * libfabric (holding its internal locks) in the instant the child is
 * created; the child would otherwise deadlock on them. */
static void atfork_prepare(void)
{
	ripc__lock();
}

static void atfork_parent(void)
{
	ripc__unlock();
}

static void atfork_child(void)
{
	/* The child shares nothing usable with the parent's library state
	 * (endpoints, threads, registry locks): start afresh on first use.
	 * The parent's resources are left alone in the child, not closed (that
	 * would close the parent's); a copy of the context keeps them
	 * reachable, so leak checkers do not report them. */
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

	if (CTX->initialized && !abandoned &&
	    (abandoned = malloc(sizeof(*abandoned))))
		memcpy(abandoned, CTX, sizeof(*abandoned));
	memset(CTX, 0, sizeof(*CTX));
	ripc__random_forget();
	ripc__libbuf_cache_forget();
	CTX->lock = fresh;
	ripc_list_init(&CTX->lregs);
	CTX->wake_fd = -1;
	CTX->app_fd = -1;
	ripc__reg_forget();
	/* issue 13: the parent's directory session stays the parent's. */
	ripc__dir_forget();
}

static int init_locked(void)
{
	struct ripc_reg_proc_info self;
	int err;

	ripc__log_init();
	load_config();
	ripc_list_init(&CTX->windows);
	ripc_list_init(&CTX->lsends);
	ripc_list_init(&CTX->pulls);
	ripc_list_init(&CTX->readq);
	ripc_list_init(&CTX->read_retry);
	ripc_list_init(&CTX->reads);
	ripc_list_init(&CTX->deferred);
	do {
		if (ripc__random(&CTX->incarnation, sizeof(CTX->incarnation)))
			return RIPC_ETRANSPORT;
	} while (CTX->incarnation == 0);
	CTX->host_id = ripc__host_id();

	if ((err = open_transports()))
		goto fail;
	/* Memory and the progress thread near the NICs in use (hwloc). */
	{
		struct ripc_loc_nic_req req[RIPC_PROV_MAX];
		unsigned nreq = 0;

		for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
			if (CTX->tp[i].open)
				req[nreq++] = (struct ripc_loc_nic_req){
					.tp = (int)i,
					.dev = i == RIPC_PROV_TCP
						       ? ripc__env_str(
								 RIPC_ENV_TCP_ADDR)
						       : NULL
				};
		ripc__loc_setup(req, nreq);
	}
	if ((err = ripc__arena_init()))
		goto fail;
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		if (CTX->tp[i].open && ripc__replenish(&CTX->tp[i])) {
			err = RIPC_ENOMEM;
			goto fail;
		}
	if (ripc__reg_open(ripc__env_str(RIPC_ENV_REGISTRY))) {
		err = RIPC_EREGISTRY;
		goto fail;
	}
	memset(&self, 0, sizeof(self));
	self.incarnation = CTX->incarnation;
	self.host_id = CTX->host_id;
	self.pid = getpid();
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
		if (!CTX->tp[i].open)
			continue;
		self.addr[i].len = (uint8_t)CTX->tp[i].addrlen;
		memcpy(self.addr[i].addr, CTX->tp[i].addr,
		       CTX->tp[i].addrlen);
	}
	if (ripc__reg_attach(&self)) {
		err = RIPC_EREGISTRY;
		goto fail;
	}
	if ((err = ripc__resolver_open()))
		goto fail;
	/* issue 13: the service directory (RIPC_DIRECTORY), if any. */
	if ((err = ripc__dir_core_open(&self)))
		goto fail;
	if (!CTX->cfg.manual_progress && (err = ripc__thread_start()))
		goto fail;
	ripc__watchdog_start();
	return RIPC_OK;
fail:
	ripc__dir_close(); /* issue 13 */
	ripc__resolver_close();
	ripc__reg_detach();
	ripc__reg_close();
	/* MRs before their domain; slots after the endpoints are closed. */
	for (struct ripc_arena *a = CTX->arenas; a; a = a->next)
		for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
			if (CTX->tp[i].open && a->lreg->mr[i].handle)
				CTX->tp[i].ops->mr_close(CTX->tp[i].p,
							 &a->lreg->mr[i]);
	close_transports();
	ripc__arena_fini();
	ripc__loc_teardown();
	if (CTX->app_fd >= 0)
		close(CTX->app_fd);
	CTX->app_fd = -1;
	return err;
}

int ripc__ensure_init(void)
{
	int err = RIPC_OK;

	if (__atomic_load_n(&CTX->initialized, __ATOMIC_ACQUIRE))
		return RIPC_OK;
	ripc__lock();
	if (!CTX->initialized) {
		static bool fork_handler;

		if (!fork_handler) {
			pthread_atfork(atfork_prepare, atfork_parent,
				       atfork_child);
			fork_handler = true;
		}
		err = init_locked();
		if (!err)
			__atomic_store_n(&CTX->initialized, true,
					 __ATOMIC_RELEASE);
	}
	ripc__unlock();
	if (!err && !atexit_done) {
		atexit_done = true;
		atexit(ripc_finalize);
	}
	return err ? ripc__set_err(err) : RIPC_OK;
}

RIPC_API uint8_t ripc_init(void)
{
	return (uint8_t)ripc__ensure_init();
}

RIPC_API void ripc_finalize(void)
{
	struct ripc_list *pos, *tmp;

	if (!CTX->initialized)
		return;
	ripc__lock();
	CTX->shutting_down = true;
	for (unsigned i = 0; i <= RIPC_MAX_SERVICE_ID; i++)
		if (CTX->svc[i])
			ripc__wake_waiters(CTX->svc[i]);
	ripc__unlock();
	ripc__watchdog_stop();
	ripc__thread_stop();

	ripc__lock();
	/* Withdraw first so nobody resolves us; tell other hosts. */
	for (unsigned i = 0; i <= RIPC_MAX_SERVICE_ID; i++)
		if (CTX->svc[i])
			ripc__resolver_announce((uint16_t)i, false,
						CTX->svc[i]->mcast);
	/* issue 13: ends the directory session; its records go at once. */
	ripc__dir_close();
	ripc__resolver_close();
	ripc__reg_detach();
	ripc__reg_close();
	/* Registrations exposed to peers are revoked before the endpoints
	 * go away; closing the endpoints cancels everything in flight. */
	ripc_list_for_each_safe(pos, tmp, &CTX->lsends)
		ripc__lsend_release(
			ripc_container_of(pos, struct ripc_lsend, link), false);
	ripc__retbuf_fini();
	ripc__deferred_fini();
	for (unsigned i = 0; i <= RIPC_MAX_SERVICE_ID; i++) {
		struct ripc_service *svc = CTX->svc[i];

		if (!svc)
			continue;
		ripc_list_for_each_safe(pos, tmp, &svc->queue)
		{
			struct ripc_msg *m =
				ripc_container_of(pos, struct ripc_msg, link);

			ripc_list_del(&m->link);
			if (m->pull) {
				m->pull->msg = NULL;
				m->pull = NULL;
			}
			ripc__msg_free(m);
		}
		if (!ripc_list_empty(&svc->waiters)) {
			/* A thread still sleeps in ripc_receive: it will
			 * find the service gone.  Do not free under it. */
			CTX->svc[i] = NULL;
			continue;
		}
		free(svc);
		CTX->svc[i] = NULL;
	}
	ripc_list_for_each_safe(pos, tmp, &CTX->read_retry)
	{
		ripc_list_del(pos);
		free(ripc_container_of(pos, struct ripc_read_op, retry));
	}
	/* Reads still with the transport (their pulls were abandoned): the
	 * endpoints are closed below and will not complete them. */
	ripc_list_for_each_safe(pos, tmp, &CTX->reads)
	{
		ripc_list_del(pos);
		free(ripc_container_of(pos, struct ripc_read_op, posted));
	}
	ripc_list_for_each_safe(pos, tmp, &CTX->pulls)
	{
		struct ripc_pull *p =
			ripc_container_of(pos, struct ripc_pull, link);

		ripc_list_del(&p->link);
		for (unsigned k = 0; k < p->n; k++) {
			if (p->item[k].win)
				ripc__window_consumed(p->item[k].win);
			else if (p->item[k].dst)
				ripc__libbuf_free(p->item[k].dst);
		}
		free(p);
	}
	/* Registrations are closed before their domain; the receive slots
	 * are unmapped only after the endpoints are closed, since libfabric
	 * owns posted buffers until then.  Memory from ripc_buf_alloc stays
	 * valid (ripc_buf_free still unmaps it). */
	ripc__windows_fini();
	ripc__libbuf_cache_fini();
	ripc_list_for_each_safe(pos, tmp, &CTX->lregs)
	{
		struct ripc_lreg *r =
			ripc_container_of(pos, struct ripc_lreg, link);

		for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
			if (CTX->tp[i].open && r->mr[i].handle)
				CTX->tp[i].ops->mr_close(CTX->tp[i].p,
							 &r->mr[i]);
		memset(r->mr, 0, sizeof(r->mr));
	}
	close_transports();
	ripc__arena_fini();
	ripc__loc_teardown();
	ripc_list_for_each_safe(pos, tmp, &CTX->lregs)
	{
		struct ripc_lreg *r =
			ripc_container_of(pos, struct ripc_lreg, link);

		if (!r->from_alloc) {
			ripc_list_del(&r->link);
			free(r);
		}
	}
	ripc__peers_fini();
	ripc__msg_cache_fini();
	if (CTX->app_fd >= 0)
		close(CTX->app_fd);
	CTX->app_fd = -1;
	CTX->initialized = false;
	CTX->shutting_down = false;
	CTX->nsvc = 0;
	ripc_list_init(&CTX->readq);
	ripc_list_init(&CTX->read_retry);
	ripc_list_init(&CTX->reads);
	ripc__unlock();
}

/* ---- queries -------------------------------------------------------- */

RIPC_API uint64_t ripc_limit(enum ripc_limit which)
{
	/* The values in force: loaded (and clamped) as at initialisation. */
	if (!CTX->initialized) {
		ripc__lock();
		if (!CTX->initialized)
			load_config();
		ripc__unlock();
	}
	switch (which) {
	case RIPC_LIMIT_SHORT_PAYLOAD:
		return RIPC_SHORT_MAX;
	case RIPC_LIMIT_ITEMS:
		return RIPC_MAX_ITEMS;
	case RIPC_LIMIT_RETURN_BUFS:
		return RIPC_MAX_RETURN_BUFS;
	case RIPC_LIMIT_LONG_ITEM:
		return RIPC_LONG_ITEM_MAX;
	case RIPC_LIMIT_QUEUE:
		return CTX->cfg.queue_max;
	case RIPC_LIMIT_RESOLVE_TIMEOUT_MS:
		return CTX->cfg.resolve_timeout_ns / 1000000;
	case RIPC_LIMIT_SEND_TIMEOUT_MS:
		return CTX->cfg.send_timeout_ns / 1000000;
	case RIPC_LIMIT_LONG_TIMEOUT_MS:
		return CTX->cfg.long_timeout_ns / 1000000;
	}
	ripc__set_err(RIPC_EINVAL);
	return 0;
}

RIPC_API uint8_t ripc_stats(struct ripc_stats *stats, size_t size)
{
	if (!stats)
		return (uint8_t)ripc__set_err(RIPC_EINVAL);
	ripc__lock();
	memcpy(stats, &CTX->stats,
	       size < sizeof(CTX->stats) ? size : sizeof(CTX->stats));
	ripc__unlock();
	return RIPC_OK;
}

RIPC_API int ripc_get_fd(void)
{
	int fd;

	if (ripc__ensure_init())
		return -1;
	ripc__lock();
	/* Created on first request: without a reader, keeping it current
	 * would cost two syscalls per message. */
	if (CTX->app_fd < 0) {
		CTX->app_fd = eventfd(CTX->queued_total ? 1 : 0,
				      EFD_CLOEXEC | EFD_NONBLOCK);
		if (CTX->app_fd < 0)
			ripc__set_err(RIPC_ENOMEM);
	}
	fd = CTX->app_fd;
	ripc__unlock();
	return fd;
}

RIPC_API const char *ripc_transport_of(uint16_t service)
{
	struct ripc_route *r;
	const char *name = NULL;

	if (service > RIPC_MAX_SERVICE_ID || ripc__ensure_init())
		return NULL;
	ripc__lock();
	if (ripc__resolve(service, &r,
			  ripc__now_ns() + CTX->cfg.resolve_timeout_ns) == RIPC_OK) {
		if (r->mcast)
			name = r->nmembers ? ripc__prov_names[r->members[0]->tp]
					   : NULL;
		else
			name = ripc__prov_names[r->peer->tp];
	}
	ripc__unlock();
	return name;
}
