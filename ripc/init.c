/*
 * Lifecycle: initialisation on first use, finalize, fork, process exit.
 *
 * Every module of the core has a line in one table with what it does at
 * initialisation, at teardown and in a forked child.  Initialisation runs
 * the table top down, teardown bottom up, and a forked child runs every
 * module's fork hook: nothing is torn down by hand elsewhere.
 *
 * Only the API layer (api*.c) calls into this file.  Finalize wakes every
 * call that waits inside the library (they return RIPC_ESHUTDOWN) and
 * waits until they have left before it tears anything down.  Process exit
 * never waits for the library lock (see exit_handler below).
 */
#include <errno.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dir_core.h"
#include "directory.h"
#include "locality.h"
#include "resolver.h"
#include "retbuf.h"
#include "ripc_int.h"

struct ripc_ctx ripc__ctx = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.idle = PTHREAD_COND_INITIALIZER,
	.sleepers = RIPC_LIST_INIT(ripc__ctx.sleepers),
	.mem = { .lregs = RIPC_LIST_INIT(ripc__ctx.mem.lregs) },
	.rx = { .app_fd = -1 },
	.eng = { .wake_fd = -1, .leave_fd = -1 },
};

/* The process has gone through exit: the library does not start again. */
static bool exited;

/* ---- configuration -------------------------------------------------- */

/* Milliseconds from the environment; negative values mean 0. */
static uint64_t env_ms(enum ripc_env_id id)
{
	int64_t v = ripc__env_int(id);

	return ripc__ms_ns(v < 0 ? 0 : v);
}

/* RIPC_FRAG_MAX=auto (the default).  Whether a message a little above
 * shm's inject size is faster as a train of injects or as one CMA send
 * depends on the CPU: on the AMD EPYC hosts measured, trains up to about
 * 20 KiB (16 KiB of items 3.7 against 4.9 us one-way); on the Intel Xeon
 * hosts, where copying data another core has just written costs more and
 * CMA less, trains of at most two fragments and CMA above (16 KiB 4.75
 * against 7.23 us with 20k, test/benchmarks/ab/ab.sh, perf_notes.md
 * 12-02 afternoon; ripc(7) TRANSPORTS).  The vendor stands for what was
 * measured: nothing cheaper tells at initialisation, and a process that
 * knows better sets the variable. */
static int64_t frag_max_auto(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;

	/* "GenuineIntel" in EBX, EDX, ECX */
	if (__get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547 &&
	    d == 0x49656e69 && c == 0x6c65746e)
		return 8144;
#endif
	return 20 * 1024;
}

void ripc__load_config(void)
{
	int64_t v;

	CTX->cfg.resolve_timeout_ns = env_ms(RIPC_ENV_RESOLVE_TIMEOUT_MS);
	CTX->cfg.send_timeout_ns = env_ms(RIPC_ENV_SEND_TIMEOUT_MS);
	CTX->cfg.long_timeout_ns = env_ms(RIPC_ENV_LONG_TIMEOUT_MS);
	CTX->cfg.pull_timeout_ns = env_ms(RIPC_ENV_PULL_TIMEOUT_MS);
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
	/* Unset: each transport's own (ripc__rma_chunk). */
	v = ripc__env_is_set(RIPC_ENV_READ_CHUNK)
		    ? ripc__env_int(RIPC_ENV_READ_CHUNK)
		    : 0;
	CTX->cfg.read_chunk = v == 0 ? 0 : v < 4096 ? 4096 : (uint64_t)v;
	v = ripc__env_int(RIPC_ENV_DONE_DELAY_US);
	CTX->cfg.done_delay_ns = v < 0 ? 0 : v > 1000000 ? 1000000000ull
							  : (uint64_t)v * 1000;
	v = ripc__env_int(RIPC_ENV_SHM_PEERS);
	CTX->cfg.shm_peers = v < 0 ? 0 : v > 224 ? 224 : (unsigned)v;
	v = ripc__env_int(RIPC_ENV_TEST_PEERS_MAX);
	CTX->cfg.peers_max = v < 16 ? 16 : v > 4096 ? 4096 : (unsigned)v;
	v = ripc__env_int(RIPC_ENV_TEST_SPIN_END_US);
	CTX->cfg.test_spin_end_ns = v <= 0 ? 0 : v > 1000000 ? 1000000000ull
							     : (uint64_t)v * 1000;
	CTX->cfg.doorbell = ripc__env_bool(RIPC_ENV_DOORBELL);
	CTX->cfg.direct_wake = ripc__env_bool(RIPC_ENV_DIRECT_WAKE);
	v = ripc__env_int(RIPC_ENV_FRAG_MAX);
	if (v == RIPC_INT_AUTO)
		v = frag_max_auto();
	CTX->cfg.frag_max = v < 0 ? 0 : v > RIPC_WIRE_MAX ? RIPC_WIRE_MAX
							  : (uint32_t)v;
	CTX->cfg.manual_progress =
		!strcmp(ripc__env_str(RIPC_ENV_PROGRESS), "manual");
	CTX->cfg.tick_grid_ns = ripc__tick_grid_ns();
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

/* Which transports RIPC_PROVIDER selects (bit per enum ripc_prov_id); an
 * unknown word is an error that names it, not a silent "no transport". */
static int provider_selection(unsigned *sel)
{
	const char *list = ripc__env_str(RIPC_ENV_PROVIDER);
	const char *p = list;

	*sel = 0;
	if (!*list) {
		*sel = (1u << RIPC_PROV_MAX) - 1;
		return RIPC_OK;
	}
	while (*p) {
		size_t len = strcspn(p, ", ");
		bool known = false;

		for (unsigned i = 0; len && i < RIPC_PROV_MAX; i++) {
			if (strlen(ripc__prov_names[i]) == len &&
			    !strncmp(p, ripc__prov_names[i], len)) {
				*sel |= 1u << i;
				known = true;
			}
		}
		if (len && !known) {
			ripc__log(RIPC_LOG_ERROR,
				  "RIPC_PROVIDER=\"%s\": unknown transport "
				  "\"%.*s\" (known: shm, tcp, verbs)",
				  list, (int)len, p);
			return RIPC_EINVAL;
		}
		p += len;
		p += strspn(p, ", ");
	}
	return RIPC_OK;
}

/* ---- transports ----------------------------------------------------- */

/*
 * shm without CMA (FI_SHM_DISABLE_CMA, seccomp, Yama: attr.reads_need_peer)
 * cannot pull safely: a read to a process that ended wedges the endpoint
 * (ripc_prov.h).  When another transport reaches this host's processes
 * (tcp), shm is closed and they use that one; our shm address is then not
 * published, so peers use it too.  Alone, shm stays, with a warning.
 */
static void shm_without_cma(void)
{
	struct ripc_tp *shm = &CTX->tp[RIPC_PROV_SHM];
	bool other = false;

	if (!shm->open || !shm->attr.reads_need_peer)
		return;
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		other |= i != RIPC_PROV_SHM && CTX->tp[i].open &&
			 !CTX->tp[i].attr.same_host_only;
	if (!other) {
		ripc__log(RIPC_LOG_WARN,
			  "shm has no CMA here (FI_SHM_DISABLE_CMA, seccomp or "
			  "Yama): a peer that ends while this process pulls "
			  "its long send stalls later shm transfers; add tcp "
			  "to RIPC_PROVIDER to avoid it");
		return;
	}
	ripc__log(RIPC_LOG_INFO,
		  "shm has no CMA here (FI_SHM_DISABLE_CMA, seccomp or Yama): "
		  "peers on this host use tcp");
	shm->ops->close(shm->p);
	shm->open = false;
	shm->addrlen = 0;
	CTX->ntp--;
}

static int transports_open(void)
{
	struct ripc_prov_opts opts = {
		.src_addr = ripc__env_str(RIPC_ENV_TCP_ADDR),
		.shm_checked = ripc__env_bool(RIPC_ENV_SHM_CHECKED),
		.tcp_native = ripc__env_bool(RIPC_ENV_TCP_NATIVE),
		.force_mr_bits = test_mr_bits(),
	};
	unsigned sel;
	int err;

	if ((err = provider_selection(&sel)))
		return err;
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
		struct ripc_tp *t = &CTX->tp[i];
		int ret;

		t->id = (int)i;
		if (!(sel & (1u << i)))
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
		t->owed = NULL;
		t->nowed = 0;
		t->open = true;
		CTX->ntp++;
		ripc__log(RIPC_LOG_INFO, "transport %s open (%s)",
			  ripc__prov_names[i], t->attr.fabric_name);
	}
	shm_without_cma();
	if (!CTX->ntp)
		ripc__log(RIPC_LOG_ERROR,
			  "no transport could be opened (RIPC_PROVIDER=\"%s\"); "
			  "RIPC_LOG_LEVEL=info says why",
			  ripc__env_str(RIPC_ENV_PROVIDER));
	return CTX->ntp ? RIPC_OK : RIPC_ENOPROVIDER;
}

static void transports_close(void)
{
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
		struct ripc_tp *t = &CTX->tp[i];

		if (t->open)
			t->ops->close(t->p);
		t->open = false;
		/* Spares not yet posted are free slots of the arenas that
		 * ripc__mem_unmap takes away next. */
		t->owed = NULL;
		t->nowed = 0;
	}
	CTX->ntp = 0;
}

/* Memory and the progress thread near the NICs in use (hwloc). */
static int locality_setup(void)
{
	struct ripc_loc_nic_req req[RIPC_PROV_MAX];
	unsigned nreq = 0;

	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		if (CTX->tp[i].open)
			req[nreq++] = (struct ripc_loc_nic_req){
				.tp = (int)i,
				.dev = i == RIPC_PROV_TCP
					       ? ripc__env_str(RIPC_ENV_TCP_ADDR)
					       : NULL
			};
	ripc__loc_setup(req, nreq);
	return RIPC_OK;
}

/* ---- naming --------------------------------------------------------- */

/* This process as the registry and the directory publish it. */
static void self_info(struct ripc_reg_proc_info *self)
{
	memset(self, 0, sizeof(*self));
	self->incarnation = CTX->incarnation;
	self->host_id = CTX->host_id;
	self->pid = CTX->pid;
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
		if (!CTX->tp[i].open)
			continue;
		self->addr[i].len = (uint8_t)CTX->tp[i].addrlen;
		memcpy(self->addr[i].addr, CTX->tp[i].addr,
		       CTX->tp[i].addrlen);
	}
}

static int registry_open(void)
{
	struct ripc_reg_proc_info self;

	if (ripc__reg_open(ripc__env_str(RIPC_ENV_REGISTRY))) {
		ripc__log(RIPC_LOG_ERROR, "host registry %s unusable",
			  ripc__reg_path());
		return RIPC_EREGISTRY;
	}
	self_info(&self);
	if (ripc__reg_attach(&self)) {
		ripc__reg_close();
		return RIPC_EREGISTRY;
	}
	return RIPC_OK;
}

static void registry_close(void)
{
	ripc__reg_detach();
	ripc__reg_close();
}

/* The service directory of RIPC_DIRECTORY, if any (issue 13). */
static int directory_open(void)
{
	struct ripc_reg_proc_info self;

	self_info(&self); /* what goes into our records */
	return ripc__dir_core_open(&self);
}

/* The services go first at teardown: peers stop finding us before
 * anything else is taken down. */
static void services_fini(void)
{
	for (unsigned i = 0; i <= RIPC_MAX_SERVICE_ID; i++)
		if (CTX->svc[i])
			ripc__resolver_announce((uint16_t)i, false,
						CTX->svc[i]->mcast);
	ripc__svc_fini();
}

static int lists_init(void)
{
	ripc_list_init(&CTX->windows);
	ripc_list_init(&CTX->tx.queue);
	ripc_list_init(&CTX->tx.done);
	ripc_list_init(&CTX->ex.live);
	ripc_list_init(&CTX->ex.waiters);
	ripc_list_init(&CTX->rb.grants);
	ripc_list_init(&CTX->rb.replies);
	ripc_list_init(&CTX->rb.writeq);
	ripc_list_init(&CTX->rb.writes);
	ripc_list_init(&CTX->pl.pulls);
	ripc_list_init(&CTX->pl.readq);
	ripc_list_init(&CTX->pl.read_retry);
	ripc_list_init(&CTX->pl.reads);
	ripc_list_init(&CTX->pl.dones);
	CTX->pl.done_next = UINT64_MAX;
	return RIPC_OK;
}

static int identity(void)
{
	ripc__env_load_log_level();
	ripc__load_config();
	do {
		if (ripc__random(&CTX->incarnation, sizeof(CTX->incarnation)))
			return RIPC_ETRANSPORT;
	} while (CTX->incarnation == 0);
	CTX->host_id = ripc__host_id();
	CTX->pid = getpid();
	return RIPC_OK;
}

/* ---- the module table ----------------------------------------------- */

struct ripc_module {
	const char *name;
	int (*init)(void);        /* lock held; RIPC_OK or an error */
	void (*fini)(void);       /* lock held; bottom up */
	void (*fork_child)(void); /* in a forked child: forget, never close */
};


/* Top down at initialisation; bottom up at teardown.  Teardown order
 * matters: services are withdrawn first; exposures end (their
 * registrations close) before the memory module closes every other
 * registration, which happens before the transports close (an MR goes
 * before its domain); receive slots are unmapped last, since libfabric
 * owns posted buffers until its endpoints are closed. */
static const struct ripc_module modules[] = {
	{ "identity", identity, NULL, NULL },
	{ "lists", lists_init, NULL, NULL },
	{ "slots", NULL, ripc__mem_unmap, NULL },
	{ "transports", transports_open, transports_close, NULL },
	{ "locality", locality_setup, ripc__loc_teardown, ripc__loc_teardown },
	{ "memory", ripc__mem_init, ripc__mem_deregister, NULL },
	{ "registry", registry_open, registry_close, ripc__reg_forget },
	{ "doorbell", ripc__bell_open, ripc__bell_close, ripc__bell_forget },
	{ "resolver", ripc__resolver_open, ripc__resolver_close,
	  ripc__resolver_close },
	{ "directory", directory_open, ripc__dir_close, ripc__dir_forget },
	{ "peers", NULL, ripc__peers_fini, NULL },
	{ "exposures", NULL, ripc__expose_fini, NULL },
	{ "transmit queue", NULL, ripc__tx_fini, NULL },
	{ "fragments", NULL, ripc__frag_fini, NULL },
	{ "return buffers", NULL, ripc__retbuf_fini, NULL },
	{ "pulls", NULL, ripc__pull_fini, NULL },
	{ "windows", NULL, ripc__windows_fini, NULL },
	{ "services", NULL, services_fini, NULL },
	{ "threads", NULL, NULL, ripc__thread_fork_child },
	{ "engine", ripc__engine_start, NULL, NULL }, /* stopped unlocked */
};
#define NMODULES (sizeof(modules) / sizeof(modules[0]))

static void fini_from(size_t top)
{
	for (size_t i = top; i-- > 0;)
		if (modules[i].fini)
			modules[i].fini();
}

static int init_locked(void)
{
	for (size_t i = 0; i < NMODULES; i++) {
		int err = modules[i].init ? modules[i].init() : RIPC_OK;

		if (err) {
			ripc__log(RIPC_LOG_ERROR,
				  "initialisation failed (%s): %s",
				  modules[i].name, ripc_strerror(err));
			fini_from(i);
			return err;
		}
	}
	return RIPC_OK;
}

/* ---- fork ----------------------------------------------------------- */

/* The parent's state as the child found it: kept reachable, never used. */
static struct ripc_ctx *abandoned;

/* Around fork(): every libfabric call is made under the library lock, so
 * holding it across the fork guarantees that no library thread is inside
 * libfabric (holding its internal locks) in the instant the child is
 * created; the child would otherwise deadlock on them. */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&CTX->lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&CTX->lock);
}

/* The child shares nothing usable with the parent's library state
 * (endpoints, threads, registry locks, timers): it starts afresh on first
 * use.  The parent's resources are left alone, never closed (that would
 * close the parent's); a copy of the context keeps them reachable, so
 * leak checkers do not report them. */
static void atfork_child(void)
{
	bool was = CTX->initialized;

	if (was && !abandoned && (abandoned = malloc(sizeof(*abandoned))))
		memcpy(abandoned, CTX, sizeof(*abandoned));
	if (was)
		for (size_t i = 0; i < NMODULES; i++)
			if (modules[i].fork_child)
				modules[i].fork_child();
	memset(CTX, 0, sizeof(*CTX));
	pthread_mutex_init(&CTX->lock, NULL);
	pthread_cond_init(&CTX->idle, NULL);
	ripc_list_init(&CTX->sleepers);
	ripc_list_init(&CTX->mem.lregs);
	CTX->rx.app_fd = -1;
	CTX->eng.wake_fd = CTX->eng.leave_fd = -1;
	CTX->bell.fd = CTX->bell.out = -1;
}

/* ---- process exit --------------------------------------------------- */


/* Tear down what others would notice (registrations, endpoints and their
 * /dev/shm files) without freeing anything another thread might still
 * hold: used when exit finds threads inside the library.  Lock held. */
static void quick_teardown(void)
{
	CTX->shutting_down = true;
	CTX->exiting = true;
	ripc__watchdog_stop();
	ripc__resolver_close();
	ripc__bell_close();
	registry_close();
	transports_close();
}

static bool lock_within(uint64_t ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ns / 1000000000ull);
	ts.tv_nsec += (long)(ns % 1000000000ull);
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	if (pthread_mutex_timedlock(&CTX->lock, &ts))
		return false;
	__atomic_store_n(&CTX->lock_owner, pthread_self(), __ATOMIC_RELAXED);
	return true;
}

/*
 * stdout and stderr flushed before _exit(), each only if its lock can be
 * had.  Not fflush(NULL): it takes the lock of every open stream, and the
 * interrupted code may be inside one (libfabric reads /proc/kallsyms with
 * getline() during fi_getinfo for ~0.15 s; SIGTERM there deadlocked the
 * exit: lifecycle sigterm -p tcp, once in ~840 runs).
 */
static void flush_std_streams(void)
{
	FILE *const streams[] = { stdout, stderr };

	for (size_t i = 0; i < sizeof(streams) / sizeof(streams[0]); i++) {
		if (ftrylockfile(streams[i]))
			continue;
		fflush_unlocked(streams[i]);
		funlockfile(streams[i]);
	}
}

/*
 * Registered with on_exit() at the first initialisation.  exit() may run
 * in any thread, also from a signal handler that interrupted a thread
 * inside the library: Debian's libfabric loads libinfinipath, whose
 * handlers for SIGINT, SIGTERM, SIGSEGV... call exit() (see ripc(7)
 * NOTES).  So this never waits for the lock it may itself hold, and never
 * waits long for other threads:
 *
 *  - the exiting thread was interrupted inside the library (it holds the
 *    lock, maybe inside libfabric, whose own locks it may hold too):
 *    nothing can be torn down, and libfabric's destructor, which runs
 *    after the exit handlers, would wait for a lock this thread holds.
 *    The exit is completed here: stdio flushed, _exit(status).
 *  - nobody else is inside the library: the ordinary finalize;
 *  - others are (asleep in a receive, say): they are woken and given
 *    200 ms to leave, then a quick teardown closes what peers would notice
 *    (registrations, endpoints and their /dev/shm files) without freeing
 *    anything those threads might still hold;
 *  - the lock cannot be had within 200 ms: nothing is done, and the
 *    `exiting` flag keeps the progress thread out of libfabric.
 */
static void exit_handler(int status, void *arg)
{
	unsigned mine = ripc__tls_calls;
	uint64_t deadline;

	(void)arg;
	exited = true;
	if (ripc__lock_is_mine()) {
		__atomic_store_n(&CTX->exiting, true, __ATOMIC_RELEASE);
		flush_std_streams();
		_exit(status);
	}
	if (!__atomic_load_n(&CTX->initialized, __ATOMIC_ACQUIRE))
		return;
	if (!lock_within(200000000ull)) {
		__atomic_store_n(&CTX->exiting, true, __ATOMIC_RELEASE);
		return;
	}
	if (!CTX->initialized || CTX->shutting_down) {
		ripc__unlock();
		return;
	}
	if (CTX->calls == mine) {
		/* Nobody else inside: the ordinary finalize. */
		ripc__unlock();
		ripc__lifecycle_fini(true);
		return;
	}
	/* Others wait inside: wake them, give them a moment to leave. */
	CTX->shutting_down = true;
	{
		struct ripc_list *pos, *tmp;

		ripc_list_for_each_safe(pos, tmp, &CTX->sleepers)
			ripc__waiter_wake(ripc_container_of(
				pos, struct ripc_waiter, sleep));
	}
	deadline = ripc__now_ns() + 200000000ull;
	while (CTX->calls > mine && ripc__now_ns() < deadline) {
		struct timespec ts = { 0, 1000000 };

		ripc__unlock();
		nanosleep(&ts, NULL);
		if (!lock_within(50000000ull)) {
			__atomic_store_n(&CTX->exiting, true,
					 __ATOMIC_RELEASE);
			return;
		}
	}
	quick_teardown();
	ripc__unlock();
}

/* ---- entry points for the API layer ---------------------------------- */

int ripc__ensure_init(void)
{
	static bool handlers;
	int err = RIPC_OK;

	if (__atomic_load_n(&CTX->initialized, __ATOMIC_ACQUIRE))
		return RIPC_OK;
	ripc__lock();
	if (exited) {
		err = RIPC_ESHUTDOWN;
	} else if (!CTX->initialized) {
		if (!handlers) {
			pthread_atfork(atfork_prepare, atfork_parent,
				       atfork_child);
			on_exit(exit_handler, NULL);
			handlers = true;
		}
		err = init_locked();
		if (!err)
			__atomic_store_n(&CTX->initialized, true,
					 __ATOMIC_RELEASE);
	}
	ripc__unlock();
	return err;
}

/* Wake every thread asleep inside the library.  Lock held. */
static void wake_all(void)
{
	struct ripc_list *pos, *tmp;

	ripc_list_for_each_safe(pos, tmp, &CTX->sleepers)
		ripc__waiter_wake(
			ripc_container_of(pos, struct ripc_waiter, sleep));
	ripc__engine_kick();
}

void ripc__lifecycle_fini(bool exiting)
{
	unsigned mine = ripc__tls_calls;
	uint64_t deadline = ripc__now_ns() + 200000000ull;

	ripc__lock();
	if (!CTX->initialized || CTX->shutting_down) {
		/* Not started, or another thread is finalizing. */
		ripc__unlock();
		return;
	}
	CTX->shutting_down = true;
	wake_all();
	/* Calls in flight return RIPC_ESHUTDOWN; wait until they are out
	 * (on the exit path only briefly: see exit_handler). */
	while (CTX->calls > mine) {
		struct timespec ts;

		if (exiting && ripc__now_ns() >= deadline) {
			quick_teardown();
			ripc__unlock();
			return;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		__atomic_store_n(&CTX->lock_owner, (pthread_t)0,
				 __ATOMIC_RELAXED);
		pthread_cond_timedwait(&CTX->idle, &CTX->lock, &ts);
		__atomic_store_n(&CTX->lock_owner, pthread_self(),
				 __ATOMIC_RELAXED);
		wake_all();
	}
	ripc__unlock();
	ripc__engine_stop();
	ripc__lock();
	fini_from(NMODULES);
	__atomic_store_n(&CTX->initialized, false, __ATOMIC_RELEASE);
	CTX->shutting_down = false;
	ripc__unlock();
}
