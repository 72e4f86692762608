/*
 * The API layer: the public entry points of services, sends, receives,
 * releases and queries.  Each one checks its arguments, initialises the
 * library on first use, takes the lock, calls the messaging code below,
 * and -- only here -- waits: for a destination to be resolved, for a
 * queued message to be handed to the transport, for a message to arrive,
 * for an exposure to end.  A thread that waits sleeps outside the lock on
 * its own eventfd and is woken by whoever makes its condition true, or by
 * finalize (the call then returns RIPC_ESHUTDOWN).  Calls in flight are
 * counted so that finalize can wait for them to leave.
 *
 * Buffers and windows are in api_mem.c.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "dir_core.h"
#include "directory.h"
#include "resolver.h"
#include "retbuf.h"

#define RANDOM_ID_MIN 1024 /* random IDs stay clear of well-known ones */
#define RANDOM_ID_TRIES 4096
#define RIPC_EMOVED (-2)   /* internal: the destination moved, try again */

/* ---- calls in flight ------------------------------------------------ */

/* Every lock an application thread takes: the engine learns of work in
 * the library (its watchdog may be waiting its idle period). */
static inline void api_lock(void)
{
	ripc__lock();
	ripc__engine_active();
}

int ripc__api_enter(void)
{
	int err = ripc__ensure_init();

	if (err)
		return err;
	api_lock();
	if (CTX->shutting_down || !CTX->initialized) {
		ripc__unlock();
		return RIPC_ESHUTDOWN;
	}
	CTX->calls++;
	ripc__tls_calls++;
	return RIPC_OK;
}

/* Like ripc__api_enter for calls that make no sense before the library
 * runs (they do not start it): RIPC_ESHUTDOWN when it does not run. */
int ripc__api_enter_running(void)
{
	if (!__atomic_load_n(&CTX->initialized, __ATOMIC_ACQUIRE))
		return RIPC_ESHUTDOWN;
	api_lock();
	if (CTX->shutting_down || !CTX->initialized) {
		ripc__unlock();
		return RIPC_ESHUTDOWN;
	}
	CTX->calls++;
	ripc__tls_calls++;
	return RIPC_OK;
}

int ripc__api_leave(int err)
{
	CTX->calls--;
	ripc__tls_calls--;
	if (CTX->shutting_down)
		pthread_cond_broadcast(&CTX->idle);
	ripc__unlock();
	return err ? ripc__set_err(err) : RIPC_OK;
}

/* Sleep without the lock for at most ns, on w's eventfd (and the nwatch
 * fds of a receive that watches the transports itself: the engine's
 * direct wake), listed on `on` (if not NULL) and on ctx.sleepers.  In
 * manual progress mode the sleep is cut to the poll interval and progress
 * is run afterwards: nobody else would.  Returns -1 if a signal
 * interrupted it. */
static int api_sleep(struct ripc_waiter *w, struct ripc_list *on, uint64_t ns,
		     const struct pollfd *watch, unsigned nwatch)
{
	struct pollfd pfd[RIPC_PROV_MAX + 2] = {
		{ .fd = w->efd, .events = POLLIN }
	};
	struct ripc_engine *g = &CTX->eng;
	struct timespec ts;
	int r;

	if (CTX->cfg.manual_progress &&
	    ns > CTX->cfg.poll_interval_us * 1000)
		ns = CTX->cfg.poll_interval_us * 1000;
	/* Not watching the transports: what wakes us is the progress
	 * thread, asleep on their fds when idle.  If they hold events that
	 * no fd will signal (tcp's fi_trywait itself may read a message off
	 * the socket into the queue rxm takes it from, and fail: seen in
	 * strace, docs/FAULTS.md 11-27), nobody would look until the next
	 * message came: sleep only briefly, then poll (a trywait that keeps
	 * failing costs a wake-up per RIPC_BUSY_POLL_US, as it does the
	 * progress thread). */
	if (!nwatch && (g->unquiet || !ripc__engine_quiet()) &&
	    ns > CTX->cfg.busy_poll_us * 1000)
		ns = CTX->cfg.busy_poll_us * 1000;
	g->unquiet = false; /* asked once, not twice */
	ts.tv_sec = (time_t)(ns / 1000000000ull);
	ts.tv_nsec = (long)(ns % 1000000000ull);
	for (unsigned i = 0; i < nwatch && i < RIPC_PROV_MAX + 1; i++)
		pfd[1 + i] = watch[i];
	ripc_list_add_tail(&CTX->sleepers, &w->sleep);
	if (on)
		ripc_list_add_tail(on, &w->link);
	/* What we wait for (a message, a send's completion, a release) is
	 * the progress thread's to find now, unless we watch for it.  One
	 * that keeps out of the way of application threads on a timer must
	 * look at once, as must one that left the transports to a watcher
	 * that is gone; one asleep on every fd (idle) wakes for what comes
	 * anyway. */
	if ((g->nwaiters++ == 0 && !g->idle && !nwatch) ||
	    (g->delegated && !g->watcher))
		ripc__engine_kick();
	ripc__unlock();
	r = ppoll(pfd, 1 + nwatch, &ts, NULL);
	if (r < 0)
		r = -errno; /* what follows may set errno */
	if (r > 0 && (pfd[0].revents & POLLIN)) {
		uint64_t v;

		if (read(w->efd, &v, sizeof(v)) < 0)
			(void)0;
	}
	api_lock();
	CTX->eng.nwaiters--;
	ripc_list_del(&w->sleep);
	if (on)
		ripc_list_del(&w->link);
	if (nwatch) {
		if (r > 0)
			ripc__engine_watch_woke(pfd + 1, nwatch);
		ripc__engine_watch_end();
		for (unsigned i = 1; r > 0 && i <= nwatch; i++)
			if (pfd[i].revents) {
				CTX->stats.direct_wakeups++;
				break;
			}
	}
	if (r == -EINTR) {
		/* A ring the watcher drained is answered by a pass. */
		if (nwatch && !CTX->shutting_down)
			ripc__progress();
		return -1;
	}
	if (CTX->cfg.manual_progress && !CTX->shutting_down)
		ripc__progress();
	return 0;
}

/* One round of an application thread's busy-poll (lock held, let go for
 * a pause, or a yield once the spin has gone on a while): the progress
 * thread keeps off the transports while anybody spins (progress.c).
 *
 * The yield is for the peer on this host that our send just woke: Linux
 * queues a thread woken by a loopback socket or a pipe on the waker's CPU
 * when it finds no idle CPU it may use, and in a virtual machine an idle
 * vCPU that the host has descheduled does not count as idle.  Queued
 * behind a spinner, the peer ran only when the spin ended, so a request
 * sent after 10 ms of quiet waited the whole spin for its answer twice
 * (shm and tcp, 8 B: ~300 us one-way, perf_notes.md).  Not from the
 * start: a yield costs a system call, and on shm one in every eighth
 * round of a ping-pong's spin cost a third of its latency.  After 10 us,
 * past a same-host round trip over shm, the peer waits at most that. */
#define SPIN_YIELD_NS 10000ull

/* But a yield gives the CPU to whatever else is runnable on it, and a
 * CPU-bound process there keeps it for a whole slice (3-4 ms here)
 * before the spin polls again: beside two busy loops, a 64 KiB shm long
 * send pair paid one per message and fell from ~7 000 to 16-22 MB/s,
 * where the raw pull, which never yields, kept 2 594 and libripc
 * without the yield 2 729 (perf_notes.md, "a yield per message to a
 * busy CPU").  A peer our send woke runs for a moment; a yield that took
 * longer than RIPC_YIELD_SLOW_NS went to somebody else, so this thread
 * stops yielding for RIPC_YIELD_QUIET_NS (api.h): on a loaded CPU one
 * slice is lost every 100 ms, not one per message. */
bool ripc__yield_gate_note(struct ripc_yield_gate *g, uint64_t t0,
			   uint64_t t1)
{
	if (t1 - t0 <= RIPC_YIELD_SLOW_NS)
		return false;
	g->quiet_until = t1 + RIPC_YIELD_QUIET_NS;
	return true;
}

static __thread struct ripc_yield_gate yield_gate;

/* A spin's budget (RIPC_SPIN_US) counts time spent waiting, not time
 * spent working.  Over tcp a peer's read of our long send is answered
 * inside a progress pass: one 1 MiB sendmsg took 230-300 us, more than
 * the budget, so the receive that waited for the peer's answer slept and
 * was woken 10-40 us later, in a third of 1 MiB long sends
 * (perf_notes.md; since then tcp reads 512 KiB at a time, ~100 us a
 * sendmsg, but several passes in a row can still outlast the budget,
 * and RIPC_READ_CHUNK may bring the big reads back).  So an interval
 * between two clock readings of a receive that stands out from those
 * before it (SPIN_WORK_RATIO times the last ordinary one, and more than
 * SPIN_WORK_NS: eight empty rounds take at most ~25 us here) moves the spin's end on by its length, up to
 * `cap` (the longest spin, RIPC_SPIN_PULL_US).  Only one interval in a
 * row: when the next is as long, that is the thread's pace (valgrind, an
 * overloaded host) and the budget runs out as before. */
#define SPIN_WORK_NS 50000ull
#define SPIN_WORK_RATIO 4

void ripc__spin_clock_read(struct ripc_spin_clock *c, uint64_t now,
			   uint64_t *until, uint64_t cap)
{
	uint64_t gap = now - c->last;
	bool work = c->last && !c->work && gap > SPIN_WORK_NS &&
		    (!c->usual || gap > SPIN_WORK_RATIO * c->usual);

	if (work && *until < cap)
		*until = *until + gap < cap ? *until + gap : cap;
	else if (c->last && !work)
		c->usual = gap;
	c->work = work;
	c->last = now;
}

/* A receive polls past its spin while a message of its service is being
 * pulled: the caller, not the progress thread, then completes the pull it
 * waits for (handing the message over from the thread to a sleeping
 * caller cost 10-25 % of long-send bandwidth).  The budget counts from
 * the call's first poll, or, when the call slept first, from its
 * wake-up: the long message that woke it is pulled while it polls.  Left
 * to the wake-ups of whoever sleeps on the transport, a tcp pull drains
 * its socket a segment per wake-up; the sender, held by the receive
 * window in the connection's first transfers, then counts them as rounds
 * in which its bandwidth did not grow, and under BBR (this VM's default)
 * leaves STARTUP and paces the connection below the speed of its copy for
 * the connection's whole life (perf_notes.md: a lone 256 KiB pair, 2 676
 * against 3 628 MB/s).  One budget a call: a call that spent it on a
 * stalled pull sleeps through later wake-ups. */
bool ripc__pull_budget_poll(struct ripc_pull_budget *b, uint64_t now,
			    uint64_t spin_until, bool pulling, uint64_t ns)
{
	if (b->woke) {
		b->until = now + ns;
		b->woke = false;
	}
	if (now < spin_until)
		return true;
	if (pulling && now < b->until) {
		b->spent = true;
		return true;
	}
	return false;
}

static uint64_t spin_longest(void)
{
	return CTX->cfg.spin_pull_ns > CTX->cfg.spin_ns ? CTX->cfg.spin_pull_ns
							: CTX->cfg.spin_ns;
}

static void api_spin(bool *spinning, uint64_t now, bool yield)
{
	if (!*spinning) {
		/* Peers need not ring our sleepers while we poll (bell.c). */
		if (CTX->eng.spinners++ == 0)
			ripc__bell_hush();
		*spinning = true;
		/* The progress thread's timer for when we stop, set now
		 * while we wait rather than when the message is here. */
		ripc__engine_spin_begin(now);
	}
	if (yield && ripc__yield_gate_open(&yield_gate, now)) {
		bool slow;

		/* Callers yield only on rounds that read the clock: `now`
		 * is when the yield began. */
		ripc__unlock();
		sched_yield();
		slow = ripc__yield_gate_note(&yield_gate, now, ripc__now_ns());
		api_lock();
		CTX->stats.spin_yields++;
		CTX->stats.spin_yields_slow += slow;
		return;
	}
	ripc__unlock();
	__builtin_ia32_pause();
	api_lock();
}

/* The latest clock reading at hand, without reading the clock: the last
 * progress pass's or an application call's, whichever is later.  Lock
 * held. */
static uint64_t recent_now(void)
{
	const struct ripc_engine *g = &CTX->eng;

	return g->clock_ns > g->app_active_ns ? g->clock_ns
					      : g->app_active_ns;
}

/* Testing (RIPC_TEST_SPIN_END_US): widen the window between a spin's
 * last pass and its end, where peers send without ringing. */
static void api_pause_unlocked(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull),
			       (long)(ns % 1000000000ull) };

	ripc__unlock();
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	api_lock();
}

/* The spin is over.  True when the caller must make a pass before it
 * sleeps or returns: what peers on this host sent after our last pass
 * was not rung for (we hushed the doorbell, bell.c).  The caller makes
 * that pass itself, where it looks for what it waits for: a pass made
 * here found a receive's own message, queued it for the service, and the
 * receive then slept on the transports with the message beside it until
 * its timeout (valgrind and TSan runs, CI of 7e79221). */
static bool api_spin_end(bool *spinning)
{
	bool pass = false;

	if (*spinning) {
		*spinning = false;
		if (CTX->cfg.test_spin_end_ns)
			api_pause_unlocked(CTX->cfg.test_spin_end_ns);
		pass = --CTX->eng.spinners == 0 && ripc__bell_unhush();
		/* The last spin's clock read stands for now: the timer
		 * (armed as the spin began) is only pushed on every half
		 * interval. */
		ripc__engine_spin_left(CTX->eng.app_active_ns);
	}
	return pass;
}

/* ---- resolution ------------------------------------------------------ */

/* The route to dest, waiting up to RIPC_RESOLVE_TIMEOUT_MS for somebody
 * to register it (the host registry changes, or a resolver answer comes). */
static int api_resolve(uint16_t dest, uint64_t now, struct ripc_route **out)
{
	uint64_t deadline = now + CTX->cfg.resolve_timeout_ns;
	int err;

	for (;;) {
		err = ripc__route_get(dest, now, out);
		if (err != RIPC_ENOSERVICE)
			return err;
		if (CTX->shutting_down)
			return RIPC_ESHUTDOWN;
		if ((now = ripc__now_ns()) >= deadline)
			break;
		/* A client's random ID whose process ended on this host: no
		 * one will register it again, do not wait (a service replying
		 * to clients that died would stall for each of them). */
		if (ripc__reg_gone(dest)) {
			CTX->stats.resolve_gone++;
			return RIPC_ENOSERVICE;
		}
		/* Not registered (yet): let others use the library while we
		 * wait for the registry to change or an answer to come. */
		ripc__resolver_wait_enter();
		ripc__unlock();
		ripc__resolver_wait(1000); /* an answer, or 1 ms */
		api_lock();
		ripc__resolver_wait_leave();
		ripc__resolver_input();
	}
	CTX->stats.resolve_failures++;
	/* Say what was asked where (rate-limited). */
	ripc__dir_core_lookup_failed(dest, CTX->cfg.resolve_timeout_ns);
	return RIPC_ENOSERVICE;
}

/* ---- services -------------------------------------------------------- */

/* Listen for objections to id over multicast for the probe window (no
 * directory: like ARP's duplicate address detection). */
static int probe_wait(uint16_t id, bool mcast)
{
	uint64_t end = ripc__now_ns() + ripc__resolver_probe_ns();
	struct ripc_reg_proc_info by;
	int ret = ripc__resolver_probe_begin(id, mcast);

	if (ret)
		/* Another thread of ours probes it: it is being taken. */
		return ret == -EALREADY ? RIPC_EINUSE : RIPC_OK;
	while ((ret = ripc__resolver_probe_result(id)) == 0) {
		uint64_t now = ripc__now_ns();

		if (now >= end)
			break;
		ripc__resolver_wait_enter();
		ripc__unlock();
		ripc__resolver_wait(end - now > 1000000
					    ? 1000
					    : (unsigned)((end - now) / 1000) + 1);
		api_lock();
		ripc__resolver_wait_leave();
		ripc__resolver_input();
		if (CTX->shutting_down) {
			ripc__resolver_probe_end(id, &by);
			return RIPC_ESHUTDOWN;
		}
	}
	ripc__resolver_probe_end(id, &by);
	return ripc__dir_core_probe_result(id, ret, &by);
}

/* After the host registry's claim: is id free across hosts?  Waits
 * without the lock for the directory's answer or the probe window. */
static int claim_across_hosts(uint16_t id, bool mcast)
{
	int how = ripc__dir_core_how(), ret;

	if (how == DIR_NONE)
		return RIPC_OK;
	ripc__dir_core_set_busy(id, true);
	if (how == DIR_PROBE) {
		ret = probe_wait(id, mcast);
	} else {
		uint64_t deadline =
			ripc__now_ns() + ripc__dir_core_claim_timeout_ns();

		/* The engine blocks until its service answers. */
		ripc__unlock();
		ret = ripc__dir_claim(id, mcast, deadline);
		api_lock();
		ret = ripc__dir_core_claim_result(id, ret);
		if (ret == RIPC_OK && CTX->shutting_down) {
			ripc__dir_release(id, mcast);
			ret = RIPC_ESHUTDOWN;
		}
	}
	ripc__dir_core_set_busy(id, false);
	return ret;
}

static int do_register(int service_id, bool mcast, bool random)
{
	uint16_t id = (uint16_t)service_id;
	int err, ret;

	if (service_id < 0 || service_id > RIPC_MAX_SERVICE_ID)
		return RIPC_EBADID;
	if ((err = ripc__api_enter()))
		return err;
	/* Held here, or another thread of ours is registering it. */
	if (CTX->svc[id] || ripc__dir_core_busy(id))
		return ripc__api_leave(RIPC_EINUSE);
	ret = mcast ? ripc__reg_join(id) : ripc__reg_claim(id, random);
	if (ret)
		return ripc__api_leave(ret == -EEXIST   ? RIPC_EINUSE
				       : ret == -ENOSPC ? RIPC_ENOMEM
							: RIPC_EREGISTRY);
	/* Across hosts: the directory, or a duplicate probe. */
	if ((err = claim_across_hosts(id, mcast))) {
		ripc__reg_release(id);
		return ripc__api_leave(err);
	}
	if (!ripc__svc_new(id, mcast)) {
		ripc__dir_release(id, mcast);
		ripc__reg_release(id);
		return ripc__api_leave(RIPC_ENOMEM);
	}
	/* Caches on other hosts follow a restart or a move at once. */
	ripc__resolver_announce((uint16_t)service_id, true, mcast);
	return ripc__api_leave(RIPC_OK);
}

RIPC_API uint8_t ripc_register_service_id(int service_id)
{
	int err = do_register(service_id, false, false);

	if (err) {
		ripc__set_err(err);
		return 0;
	}
	return 1;
}

RIPC_API uint8_t ripc_register_multicast_service_id(int service_id)
{
	int err = do_register(service_id, true, false);

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
		err = do_register(id, false, true);
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
	int err;

	if (service_id < 0 || service_id > RIPC_MAX_SERVICE_ID)
		return (uint8_t)ripc__set_err(RIPC_EBADID);
	if ((err = ripc__api_enter_running()))
		return (uint8_t)ripc__set_err(err == RIPC_ESHUTDOWN
						      ? RIPC_ENOTOWNER
						      : err);
	svc = CTX->svc[service_id];
	if (!svc)
		return (uint8_t)ripc__api_leave(RIPC_ENOTOWNER);
	ripc__reg_release((uint16_t)service_id);
	ripc__dir_release((uint16_t)service_id, svc->mcast);
	ripc__resolver_announce((uint16_t)service_id, false, svc->mcast);
	ripc__svc_destroy(svc);
	return (uint8_t)ripc__api_leave(RIPC_OK);
}

/* ---- sends ----------------------------------------------------------- */

/* Validate the application's item arrays (DESIGN §6: never UB).  Items of
 * length 0 are allowed (libRIPC sent them; they arrive as items of length
 * 0) and may then be NULL. */
static int check_items(void **buf, uint32_t *length, uint16_t n,
		       unsigned max, bool allow_empty, uint64_t *total)
{
	uint64_t sum = 0;

	if (n > max)
		return RIPC_ETOOMANY;
	if (n && (!buf || !length))
		return RIPC_EINVAL;
	for (unsigned i = 0; i < n; i++) {
		if (length[i] == 0 && allow_empty)
			continue;
		if (!buf[i] || length[i] == 0)
			return RIPC_EINVAL;
		sum += length[i];
	}
	if (total)
		*total = sum;
	return RIPC_OK;
}

/* Wait until the queued request left the queue (handed to the transport,
 * or failed), the deadline passes, the route moves, or shutdown. */
static int wait_tx(struct ripc_waiter *w, struct ripc_txreq *req,
		   const struct ripc_route *r, uint64_t deadline)
{
	for (;;) {
		uint64_t now;

		if (req->state != TXR_QUEUED) {
			int err = req->state == TXR_SENT ? RIPC_OK : req->err;

			ripc__tx_free(req);
			return err;
		}
		ripc__progress();
		if (req->state != TXR_QUEUED)
			continue;
		if (CTX->shutting_down) {
			ripc__tx_cancel(req);
			return RIPC_ESHUTDOWN;
		}
		if (!ripc__route_current(r)) {
			/* Restarted or moved meanwhile: send to where it
			 * is now. */
			ripc__tx_cancel(req);
			return RIPC_EMOVED;
		}
		now = ripc__now_ns();
		if (now >= deadline) {
			ripc__tx_cancel(req);
			CTX->stats.send_timeouts++;
			return RIPC_ETIMEDOUT;
		}
		/* The engine (progress thread) posts it as resources free
		 * up and wakes us; look again at least every millisecond.
		 * An engine asleep on its fds (idle) would not look at the
		 * queue until something arrives: wake it. */
		if (CTX->eng.idle)
			ripc__engine_kick();
		if (api_sleep(w, NULL,
			      deadline - now < 1000000 ? deadline - now
						       : 1000000,
			      NULL, 0) < 0) {
			ripc__tx_cancel(req);
			return RIPC_EINTR;
		}
	}
}

static uint8_t api_send(bool is_long, uint16_t src, uint16_t dest,
			void **buf, uint32_t *length, uint16_t num_items,
			void **return_bufs, uint32_t *return_buf_lengths,
			uint16_t num_return_bufs)
{
	struct ripc_send_args a = {
		.src = src, .dest = dest,
		.buf = buf, .len = length, .n = num_items,
		.rbuf = return_bufs, .rlen = return_buf_lengths,
		.nr = num_return_bufs,
	};
	struct ripc_waiter *w;
	uint64_t until;
	int err;

	/* Every argument is checked before anything happens, so a bad call
	 * fails at once whatever the state of the destination. */
	if (src > RIPC_MAX_SERVICE_ID || dest > RIPC_MAX_SERVICE_ID)
		return (uint8_t)ripc__set_err(RIPC_EBADID);
	if ((err = check_items(buf, length, num_items, RIPC_MAX_ITEMS, true,
			       &a.total)) ||
	    (err = check_items(return_bufs, return_buf_lengths,
			       num_return_bufs, RIPC_MAX_RETURN_BUFS, false,
			       NULL)))
		return (uint8_t)ripc__set_err(err);
	if (is_long && num_items == 0)
		return (uint8_t)ripc__set_err(RIPC_EINVAL);
	if (!is_long && a.total > RIPC_SHORT_MAX)
		return (uint8_t)ripc__set_err(RIPC_E2BIG);
	if ((err = ripc__api_enter()))
		return (uint8_t)ripc__set_err(err);
	if (!CTX->svc[src])
		return (uint8_t)ripc__api_leave(RIPC_ENOTOWNER);
	if (!(w = ripc__waiter_self()))
		return (uint8_t)ripc__api_leave(RIPC_ENOMEM);
	/* One clock read for the whole call (resolution, route check,
	 * queue deadline): a read costs about as much as encoding. */
	a.now = CTX->eng.app_active_ns = ripc__now_ns();
	until = a.now + CTX->cfg.send_timeout_ns;
	/* r stays ours across wait_tx's unlocks and progress passes. */
	CTX->routes_held++;
	do {
		struct ripc_txreq *req = NULL;
		struct ripc_route *r;

		if ((err = api_resolve(dest, a.now, &r)))
			break;
		ripc__expose_new_seq();
		err = is_long ? ripc__send_long(&a, r, w, &req)
			      : ripc__send_short(&a, r, w, &req);
		if (err == RIPC_EINPROGRESS)
			err = wait_tx(w, req, r, until);
		if (err == RIPC_EMOVED && ripc__now_ns() >= until)
			err = RIPC_ETIMEDOUT;
	} while (err == RIPC_EMOVED);
	CTX->routes_held--;
	if (err == RIPC_ETIMEDOUT || err == RIPC_EPEER)
		ripc__route_drop(dest);
	return (uint8_t)ripc__api_leave(err);
}

RIPC_API uint8_t ripc_send_short(uint16_t src, uint16_t dest, void **buf,
				 uint32_t *length, uint16_t num_items,
				 void **return_bufs,
				 uint32_t *return_buf_lengths,
				 uint16_t num_return_bufs)
{
	return api_send(false, src, dest, buf, length, num_items, return_bufs,
			return_buf_lengths, num_return_bufs);
}

RIPC_API uint8_t ripc_send_long(uint16_t src, uint16_t dest, void **buf,
				uint32_t *length, uint16_t num_items,
				void **return_bufs,
				uint32_t *return_buf_lengths,
				uint16_t num_return_bufs)
{
	return api_send(true, src, dest, buf, length, num_items, return_bufs,
			return_buf_lengths, num_return_bufs);
}

/* ---- receive --------------------------------------------------------- */

RIPC_API uint8_t ripc_receive_timeout(uint16_t service_id,
				      uint16_t *from_service_id,
				      void ***short_items,
				      uint32_t **short_item_sizes,
				      uint16_t *num_short_items,
				      void ***long_items,
				      uint32_t **long_item_sizes,
				      uint16_t *num_long_items, int timeout_ms)
{
	const struct ripc_recv_out out = {
		.from = from_service_id,
		.short_items = short_items,
		.short_sizes = short_item_sizes,
		.num_short = num_short_items,
		.long_items = long_items,
		.long_sizes = long_item_sizes,
		.num_long = num_long_items,
	};
	struct ripc_engine *g = &CTX->eng;
	struct ripc_service *svc = NULL;
	struct ripc_msg *m = NULL;
	uint64_t start, last, deadline, spin_until, spin_cap;
	struct ripc_pull_budget pb = { 0 };
	struct ripc_spin_clock sc;
	bool spinning = false, slept = false;
	unsigned spins = 0;
	int err;

	if (service_id > RIPC_MAX_SERVICE_ID)
		return (uint8_t)ripc__set_err(RIPC_EBADID);
	if ((err = ripc__api_enter()))
		return (uint8_t)ripc__set_err(err);
	/* Not answering now: done messages held back for answers go. */
	if (!ripc_list_empty(&CTX->pl.dones))
		ripc__done_flush(0);
	/* The clock is read where it is needed: a read costs ~25 ns here,
	 * a twentieth of a short message's one-way time (perf_notes.md).
	 * A positive timeout counts from the call's start; without one, a
	 * receive that finds its message in its first 8 passes reads none,
	 * and the spin budgets count from the first read. */
	start = last = timeout_ms > 0 ? ripc__now_ns() : 0;
	deadline = timeout_ms < 0 ? UINT64_MAX
				  : start + ripc__ms_ns(timeout_ms);
	spin_until = start + CTX->cfg.spin_ns;
	pb.until = start + CTX->cfg.spin_pull_ns;
	spin_cap = start + spin_longest();
	sc = (struct ripc_spin_clock){ .last = start };

	for (;;) {
		/* Looked up afresh every time: it may have gone meanwhile. */
		svc = CTX->svc[service_id];
		if (!svc) {
			err = RIPC_ENOTOWNER;
			break;
		}
		if ((m = ripc__msg_take(svc)))
			break;
		ripc__progress();
		if ((m = ripc__msg_take(svc)))
			break;
		if (CTX->shutting_down) {
			err = RIPC_ESHUTDOWN;
			break;
		}
		if (timeout_ms == 0) {
			err = RIPC_EAGAIN; /* a poll found nothing */
			break;
		}
		if (!spinning && !start && CTX->cfg.spin_ns) {
			/* No deadline: the spin begins on the send's (or last
			 * pass's) clock reading, and its first clock read
			 * comes 8 rounds on, with the others. */
			api_spin(&spinning, recent_now(), false);
			continue;
		}
		if (spinning && (++spins & 7)) {
			/* Between clock reads: keep spinning. */
			ripc__unlock();
			__builtin_ia32_pause();
			api_lock();
			continue;
		}
		uint64_t now = last = ripc__now_ns();

		ripc__spin_clock_read(&sc, now, &spin_until, spin_cap);
		if (!start) {
			start = now;
			spin_until = start + CTX->cfg.spin_ns;
			pb.until = start + CTX->cfg.spin_pull_ns;
			spin_cap = start + spin_longest();
			/* The reading the spin began on may be old (a send
			 * before a long computation): the timer is checked
			 * again, still while we wait. */
			if (spinning)
				ripc__engine_spin_begin(now);
		}
		g->app_active_ns = now;
		if (now >= deadline) {
			/* A last look at every transport: the pass above may
			 * have left out a quiet costly one (progress.c). */
			ripc__progress_now();
			if ((m = ripc__msg_take(svc)))
				break;
			err = RIPC_ETIMEDOUT;
			break;
		}
		if (ripc__pull_budget_poll(&pb, now, spin_until,
					   ripc__svc_pulling(svc),
					   CTX->cfg.spin_pull_ns)) {
			/* Busy-poll: lowest latency while messages flow, and
			 * while a message of this service is being pulled
			 * (what the caller waits for, above
			 * ripc__pull_budget_poll).  The progress thread keeps
			 * away while we spin. */
			api_spin(&spinning, now,
				 now - start >= SPIN_YIELD_NS);
			continue;
		}
		if (api_spin_end(&spinning))
			continue; /* the pass above, then sleep */
		/* Sleep: on the transports themselves where we may (direct
		 * wake: the first to see the message is this thread), else
		 * until the progress thread (or, in manual mode, our own
		 * periodic polling) queues the message and wakes us. */
		struct ripc_waiter *w = ripc__waiter_self();
		struct pollfd watch[RIPC_PROV_MAX + 1];
		uint64_t wait_ns = deadline - now;
		int nwatch;

		if (!w) {
			err = RIPC_ENOMEM;
			break;
		}
		if ((nwatch = ripc__engine_watch_begin(watch)) < 0)
			continue; /* the pass before sleeping found events */
		if (wait_ns > 3600000000000ull)
			wait_ns = 3600000000000ull; /* timespec arithmetic */
		int r = api_sleep(w, &svc->waiters, wait_ns, watch,
				  (unsigned)nwatch);

		slept = true;
		sc.last = 0; /* asleep is neither */
		ripc__pull_budget_slept(&pb);
		if (r < 0) {
			err = RIPC_EINTR;
			break;
		}
	}
	if (api_spin_end(&spinning))
		ripc__progress(); /* for the others: ours is taken */
	/* The last clock read stands for "now" unless we slept: a clock read
	 * costs as much as a tenth of a receive that finds its message.
	 * Without one, the last pass's (or send's) reading does: recent
	 * while calls come quickly, and only old (the thread then takes
	 * the transports back sooner) when they do not. */
	if (slept)
		last = ripc__now_ns();
	else if (!last)
		last = recent_now();
	g->app_active_ns = g->app_recv_ns = last;
	if (m) {
		err = ripc__recv_hand_over(m, &out);
		if (err == RIPC_ENOMEM)
			ripc__msg_putback(svc, m); /* nothing is lost */
	}
	ripc__engine_leave(); /* a watcher gives the transports back */
	return (uint8_t)ripc__api_leave(err);
}

RIPC_API uint8_t ripc_receive(uint16_t service_id, uint16_t *from_service_id,
			      void ***short_items, uint32_t **short_item_sizes,
			      uint16_t *num_short_items, void ***long_items,
			      uint32_t **long_item_sizes,
			      uint16_t *num_long_items)
{
	return ripc_receive_timeout(service_id, from_service_id, short_items,
				    short_item_sizes, num_short_items,
				    long_items, long_item_sizes,
				    num_long_items, -1);
}

/* ---- releases -------------------------------------------------------- */

/* Truthful also while finalize runs: exposures end inside its teardown,
 * under the lock, after which nothing reaches the memory any more. */
RIPC_API int ripc_buf_exposed(const void *buf)
{
	int r = 0;

	if (!buf)
		return 0;
	api_lock();
	if (CTX->initialized)
		r = ripc__expose_covers(buf) || ripc__retbuf_busy(buf);
	ripc__unlock();
	return r;
}

RIPC_API uint8_t ripc_wait_released(const void *buf, int timeout_ms)
{
	struct ripc_engine *g = &CTX->eng;
	uint64_t start, deadline, spin_until, spin_pull_until, spin_cap;
	struct ripc_spin_clock sc;
	bool spinning = false;
	int err;

	if (!buf)
		return (uint8_t)ripc__set_err(RIPC_EINVAL);
	if (ripc__api_enter_running())
		return RIPC_OK; /* nothing is exposed */
	start = ripc__now_ns();
	deadline = timeout_ms < 0 ? UINT64_MAX
				  : start + ripc__ms_ns(timeout_ms);
	spin_until = start + CTX->cfg.spin_ns;
	spin_pull_until = start + CTX->cfg.spin_pull_ns;
	spin_cap = start + spin_longest();
	sc = (struct ripc_spin_clock){ .last = start };
	for (;;) {
		struct ripc_waiter *w;
		uint64_t now;
		bool exposed;

		ripc__progress();
		exposed = ripc__expose_covers(buf);
		if (!exposed && !ripc__retbuf_busy(buf)) {
			err = ripc__expose_outcome(buf);
			break;
		}
		if (CTX->shutting_down) {
			err = RIPC_ESHUTDOWN;
			break;
		}
		now = g->app_active_ns = ripc__now_ns();
		ripc__spin_clock_read(&sc, now, &spin_until, spin_cap);
		if (now >= deadline) {
			err = RIPC_ETIMEDOUT;
			break;
		}
		/* Poll a while first, as a receive does: the release of a
		 * long send comes once the receiver's pull is done, the
		 * time of the transfer, and over tcp the pull itself needs
		 * our progress (handing it to the progress thread and being
		 * woken by it cost a third of the bandwidth at 64 KiB). */
		if (now < spin_until || (now < spin_pull_until && exposed)) {
			api_spin(&spinning, now,
				 now - start >= SPIN_YIELD_NS);
			continue;
		}
		if (api_spin_end(&spinning))
			continue; /* the pass above, then sleep */
		if (!(w = ripc__waiter_self())) {
			err = RIPC_ENOMEM;
			break;
		}
		if (api_sleep(w, &CTX->ex.waiters,
			      deadline - now < 100000000 ? deadline - now
							 : 100000000,
			      NULL, 0) < 0) {
			err = RIPC_EINTR;
			break;
		}
		sc.last = 0; /* asleep is neither */
	}
	if (api_spin_end(&spinning))
		ripc__progress();
	return (uint8_t)ripc__api_leave(err);
}

RIPC_API int ripc_release_poll(struct ripc_release *events, int max)
{
	int err, n;

	if (max < 0 || (max > 0 && !events)) {
		ripc__set_err(RIPC_EINVAL);
		return -1;
	}
	if ((err = ripc__api_enter())) {
		ripc__set_err(err);
		return -1;
	}
	n = ripc__expose_events(events, max);
	if (n < 0) {
		ripc__api_leave(-n);
		return -1;
	}
	ripc__api_leave(RIPC_OK);
	return n;
}

RIPC_API uint8_t ripc_return_bufs_cancel(uint16_t dest)
{
	if (dest > RIPC_MAX_SERVICE_ID)
		return (uint8_t)ripc__set_err(RIPC_EBADID);
	if (ripc__api_enter_running())
		return RIPC_OK; /* nothing was offered */
	ripc__retbuf_cancel(dest);
	return (uint8_t)ripc__api_leave(RIPC_OK);
}

/* ---- lifecycle and queries ------------------------------------------ */

RIPC_API uint8_t ripc_init(void)
{
	int err = ripc__ensure_init();

	return (uint8_t)(err ? ripc__set_err(err) : RIPC_OK);
}

RIPC_API void ripc_finalize(void)
{
	ripc__lifecycle_fini(false);
}

RIPC_API void ripc_set_log_handler(ripc_log_handler handler, void *arg)
{
	ripc__log_set_handler(handler, arg);
	/* The level may not have been read yet (no init so far). */
	ripc__env_load_log_level();
}

RIPC_API int ripc_progress(void)
{
	int n;

	if (ripc__api_enter_running())
		return 0;
	/* One call per wake-up of the application's loop: every transport
	 * is looked at, a quiet costly one too. */
	n = ripc__progress_now();
	ripc__api_leave(RIPC_OK);
	return n;
}

RIPC_API int ripc_get_fd(void)
{
	int fd;

	if (ripc__api_enter())
		return -1;
	/* Created on first request: without a reader, keeping it current
	 * would cost two syscalls per message. */
	if (CTX->rx.app_fd < 0) {
		CTX->rx.app_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		CTX->rx.app_fd_set = false;
		if (CTX->rx.app_fd < 0)
			return ripc__api_leave(RIPC_ENOMEM), -1;
		ripc__appfd_update();
	}
	fd = CTX->rx.app_fd;
	ripc__api_leave(RIPC_OK);
	return fd;
}

RIPC_API uint64_t ripc_limit(enum ripc_limit which)
{
	/* The values in force: loaded (and clamped) as at initialisation. */
	if (!__atomic_load_n(&CTX->initialized, __ATOMIC_ACQUIRE)) {
		api_lock();
		if (!CTX->initialized)
			ripc__load_config();
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
	api_lock();
	memcpy(stats, &CTX->stats,
	       size < sizeof(CTX->stats) ? size : sizeof(CTX->stats));
	ripc__unlock();
	return RIPC_OK;
}

RIPC_API const char *ripc_transport_of(uint16_t service)
{
	struct ripc_route *r;
	const char *name = NULL;
	int err;

	if (service > RIPC_MAX_SERVICE_ID) {
		ripc__set_err(RIPC_EBADID);
		return NULL;
	}
	if ((err = ripc__api_enter())) {
		ripc__set_err(err);
		return NULL;
	}
	err = api_resolve(service, ripc__now_ns(), &r);
	if (!err) {
		if (!r->mcast)
			name = ripc__prov_names[r->peer->tp];
		else if (r->nmembers)
			name = ripc__prov_names[r->members[0]->tp];
		else
			err = RIPC_ENOSERVICE; /* a group without members */
	}
	ripc__api_leave(err);
	return name;
}
