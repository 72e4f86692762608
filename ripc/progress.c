/*
 * The engine: pulling completions out of the transports and handing each
 * to the object that owns it (a receive slot to dispatch, a send slot to
 * the transmit queue, a read to its pull, a write to its reply), posting
 * what waits for transport resources (queued messages, reads, writes),
 * timers, and the progress thread.  The engine calls messaging code; it is
 * never called from it (a send or a handler never runs progress).
 *
 * libfabric's tcp and shm providers progress only when someone reads
 * their CQ (ref §1.3), including for RMA that targets us: the owner of a
 * long-send buffer must keep polling until the receiver has pulled it.
 * The progress thread does that while the application is elsewhere; it
 * sleeps on the transports' wait fds where they have one (tcp, verbs) and
 * polls every RIPC_POLL_INTERVAL_US otherwise (shm).  While an application
 * thread busy-polls inside a receive, the thread stays out of its way.
 */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "locality.h"
#include "resolver.h"
#include "retbuf.h"
#include "ripc_int.h"

#define POLL_BATCH 16
#define POLL_ROUNDS 4 /* batches per transport per call: bounds latency */
#define TIMER_PERIOD_NS 10000000ull
/* A transport whose poll is costly and that has been quiet for HOT_NS is
 * polled at most every COLD_POLL_NS, so that a busy-polling receiver on a
 * cheap transport (shm) does not pay for socket syscalls each round. */
#define HOT_NS 2000000ull
#define COLD_POLL_NS 20000ull
/* While application threads call into the library this recently, the
 * progress thread does not sleep on wait fds: waking on a completion would
 * preempt an application thread on the same core (two context switches
 * per message).  It polls on a timer instead. */
#define APP_ACTIVE_NS 1000000ull
/* A new same-host peer waits at most this long for a quiet pass to be
 * mapped in (progress_pass). */
#define MAP_LATE_NS 2000000ull

/* Messages read from the doorbell per drain: one pass stays short however
 * many peers write at once. */
#define MAIL_BATCH 16

/* The same-host transport a message from the doorbell counts as arriving
 * on: the one the doorbell exists for (shm). */
static struct ripc_tp *mail_tp(void)
{
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		if (CTX->tp[i].open && CTX->tp[i].attr.same_host_only)
			return &CTX->tp[i];
	return NULL;
}

/* Drain the doorbell socket: rings were only for waking, messages (a
 * same-host peer's first ones, bell.c "Mail") are dispatched as if they
 * came over shm.  Lock held.  Returns the messages. */
static int mail_input(void)
{
	struct ripc_tp *t = mail_tp();
	int got = 0;

	ripc__bell_mail_clear();
	for (unsigned n = 0; n < MAIL_BATCH; n++) {
		struct ripc_slot *s = t ? ripc__slot_get() : NULL;
		size_t len = 0;
		pid_t pid = 0;

		switch (ripc__bell_recv(s ? s->buf : NULL, RIPC_SLOT_SIZE,
					&len, &pid)) {
		case RIPC_BELL_EMPTY:
			if (s)
				ripc__slot_put(s);
			return got;
		case RIPC_BELL_MSG:
			ripc__dispatch_mail(t, s, len, pid); /* takes s */
			got++;
			continue;
		case RIPC_BELL_NO_ROOM:
			CTX->stats.drops_queue_full++;
			break;
		case RIPC_BELL_TOO_LONG:
			CTX->stats.drops_malformed++;
			break;
		case RIPC_BELL_FOREIGN:
			CTX->stats.drops_forged++;
			break;
		case RIPC_BELL_RING:
			break;
		}
		if (s)
			ripc__slot_put(s);
	}
	ripc__bell_mail_again();
	return got;
}

/* Awake again after sleeping on the doorbell: disarm, read what came. */
static void bell_wake(void)
{
	ripc__bell_disarm();
	mail_input();
}

static void handle_cqe(struct ripc_tp *t, const struct ripc_cqe *c)
{
	struct ripc_op *op = c->ctx;

	if (!op)
		return;
	switch (op->kind) {
	case RIPC_OP_RECV:
		ripc__recv_slot_done(t, (struct ripc_slot *)op, c->err, c->len);
		break;
	case RIPC_OP_SEND:
		ripc__tx_send_done(t, (struct ripc_slot *)op, c->err);
		break;
	case RIPC_OP_READ:
		ripc__pull_read_done((struct ripc_read_op *)op, c->err);
		break;
	case RIPC_OP_WRITE:
		ripc__retbuf_write_done((struct ripc_write_op *)op, c->err);
		break;
	}
}

/* For ripc_info -c in other processes: at most every second while busy,
 * and when the thread goes to sleep; only what changed. */
static void publish_stats(uint64_t now)
{
	struct ripc_engine *g = &CTX->eng;

	g->stats_published_ns = now;
	if (!memcmp(&g->published, &CTX->stats, sizeof(CTX->stats)))
		return;
	g->published = CTX->stats;
	ripc__reg_publish_stats((const uint64_t *)&CTX->stats,
				sizeof(CTX->stats) / sizeof(uint64_t));
}

static inline uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static void timers(uint64_t now)
{
	struct ripc_engine *g = &CTX->eng;
	uint64_t next;

	if (now < g->next_timer_ns && !g->timers_due)
		return;
	g->timers_due = false;
	g->next_timer_ns = now + TIMER_PERIOD_NS;
	/* What the scans leave, and what they (or their callees) note. */
	g->next_deadline_ns = UINT64_MAX;
	next = ripc__expose_timers(now);
	next = min64(next, ripc__pull_timers(now));
	next = min64(next, ripc__retbuf_timers(now));
	next = min64(next, CTX->pl.done_next);
	next = min64(next, ripc__resolver_timers(now));
	if (CTX->fr.n)
		next = min64(next, ripc__frag_timers(now));
	if (CTX->sweep_retry_ns) {
		if (now >= CTX->sweep_retry_ns)
			CTX->sweep_due = true;
		else
			next = min64(next, CTX->sweep_retry_ns);
	}
	g->next_deadline_ns = min64(g->next_deadline_ns, next);
	if (now - g->stats_published_ns > 1000000000ull)
		publish_stats(now);
}

/* Forgetting dead peers costs up to a millisecond each (shm unmaps the
 * region; a sweep finds dozens at a time): done in passes that find
 * nothing else to do, once no transport has had a completion, nor a new
 * peer made the sweep due, for SWEEP_QUIET_NS: not in the middle of the
 * exchange with the new peer; unless the peers have grown another
 * RIPC_SWEEP_MIN beyond the sweep mark meanwhile. */
#define SWEEP_QUIET_NS 2000000ull

static bool sweep_may_run(uint64_t now)
{
	bool quiet = true;

	for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
		const struct ripc_tp *t = &CTX->tp[i];

		if (!t->open)
			continue;
		if (t->npeers >= t->sweep_at + RIPC_SWEEP_MIN)
			return true;
		quiet &= now - t->last_event_ns > SWEEP_QUIET_NS &&
			 (int64_t)(now - t->last_peer_ns) > (int64_t)SWEEP_QUIET_NS;
	}
	return quiet;
}

/* Set in the progress thread. */
static RIPC_TLS bool pt_self;

/* One pass: lock held.  Returns the number of events handled.  clock:
 * read the clock (run timers, poll cold costly transports) in any case. */
static int progress_pass(bool clock)
{
	struct ripc_engine *g = &CTX->eng;
	struct ripc_cqe cqe[POLL_BATCH];
	/* Reading the clock is a good part of an empty poll's cost: in an
	 * application thread's spin, every 8th call (64th with one
	 * transport) and when timers are due.  In between, the last read
	 * stands in where a rough time does (is a transport hot?). */
	bool need_now = clock ||
			(++g->poll_calls & (CTX->ntp > 1 ? 7 : 63)) == 0 ||
			g->timers_due;
	uint64_t now = need_now ? ripc__now_ns() : 0;
	uint64_t approx = now ? (g->clock_ns = now) : g->clock_ns;
	int total = 0;

	/* Once finalize (or exit) has begun, the transports are not touched
	 * again until they are closed: a caller woken with RIPC_ESHUTDOWN
	 * may reuse what it exposed, and tcp would otherwise still send read
	 * responses from it. */
	if (CTX->shutting_down || CTX->exiting)
		return 0;
	/* Processes on this host that wait for us to map them. */
	ripc__peers_accept();
	/* First messages of same-host peers, through the doorbell. */
	if (ripc__bell_has_mail())
		total += mail_input();
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
		struct ripc_tp *t = &CTX->tp[i];

		if (!t->open)
			continue;
		/* A costly transport that is cold, beside another: only on
		 * a call that read the clock, at most every COLD_POLL_NS. */
		if (t->attr.costly_poll && CTX->ntp > 1 &&
		    approx - t->last_event_ns > HOT_NS && t->tx_inflight == 0 &&
		    (!now || now - t->last_poll_ns < COLD_POLL_NS))
			continue;
		t->last_poll_ns = approx;
		if (t->owed)
			ripc__post_owed(t);
		for (int round = 0; round < POLL_ROUNDS; round++) {
			int n = t->ops->poll(t->p, cqe, POLL_BATCH);

			if (n <= 0)
				break;
			/* Doorbell mail sent before what shm gave us goes
			 * first (bell.c, "Order"). */
			if (t->attr.same_host_only && ripc__bell_has_mail())
				total += mail_input();
			t->last_event_ns = approx;
			for (int k = 0; k < n; k++)
				handle_cqe(t, &cqe[k]);
			total += n;
			if (n < POLL_BATCH)
				break;
		}
		if (t->rx_posted + t->nowed < CTX->cfg.rx_depth &&
		    !CTX->shutting_down)
			ripc__replenish(t);
	}
	if (CTX->sweep_due && total == 0 && sweep_may_run(approx))
		ripc__peers_sweep();
	/* In a pass that found nothing (or 2 ms after the peer came, under
	 * steady traffic): mapping a new same-host peer takes tens of
	 * microseconds, under the lock that a thread about to take the
	 * message just dispatched (the peer's first, which came by the
	 * doorbell) waits for. */
	if (CTX->nunmapped &&
	    (total == 0 || (now && now - CTX->map_since_ns > MAP_LATE_NS)))
		ripc__peers_map();
	if (!ripc_list_empty(&CTX->pl.readq) ||
	    !ripc_list_empty(&CTX->pl.read_retry))
		ripc__pull_post_reads();
	if (!ripc_list_empty(&CTX->rb.writeq))
		ripc__retbuf_post_writes();
	if (approx >= CTX->pl.done_next)
		ripc__done_flush(approx); /* before the queue: they go now */
	if (ripc__tx_pending())
		ripc__tx_flush(now ? now : ripc__now_ns());
	if (now) {
		/* Resolver datagrams are rare: look every millisecond, in
		 * the progress thread's passes (it sleeps on their sockets
		 * too); an application thread's pass looks only where no
		 * thread runs.  Its first clocked pass after a quiet spell
		 * was where two empty recvfrom()s stood in the middle of a
		 * request (strace of ripc_sparse, perf_notes.md). */
		if (ripc__resolver_enabled() &&
		    (pt_self || !g->thread_running) &&
		    now - g->last_resolver_ns > 1000000) {
			g->last_resolver_ns = now;
			total += ripc__resolver_input();
		}
		timers(now);
	}
	return total;
}

int ripc__progress(void)
{
	return progress_pass(false);
}

int ripc__progress_now(void)
{
	return progress_pass(true);
}

/* Mark a transport hot: passes poll it for HOT_NS whatever the clock. */
static void tp_hot(struct ripc_tp *t)
{
	t->last_event_ns = ripc__now_ns();
}

bool ripc__engine_quiet(void)
{
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
		struct ripc_tp *t = &CTX->tp[i];

		if (t->open && t->attr.wait_fd >= 0 && !t->ops->trywait(t->p)) {
			tp_hot(t);
			return false;
		}
	}
	return true;
}

static bool work_pending(void)
{
	return CTX->ex.nlive || ripc__pull_pending() || ripc__tx_pending() ||
	       ripc__retbuf_pending() || CTX->sweep_due;
}

/* After a ppoll on pfd[0] = wake_fd, pfd[1..n-1] = the resolver's
 * sockets: reset the eventfd, read the datagrams. */
static void after_poll(const struct pollfd *pfd, unsigned n)
{
	if (pfd[0].revents & POLLIN) {
		uint64_t v;

		if (read(CTX->eng.wake_fd, &v, sizeof(v)) < 0)
			(void)0;
	}
	for (unsigned k = 1; k < n; k++) {
		if (pfd[k].revents) {
			ripc__lock();
			ripc__resolver_input();
			ripc__unlock();
			break;
		}
	}
}

static void watchdog_nudge(void);

/* How long the thread may sleep when nothing is under way: until the
 * next deadline (NULL: none, sleep until woken). */
static struct timespec *idle_timeout(struct timespec *ts, uint64_t now)
{
	struct ripc_engine *g = &CTX->eng;
	uint64_t ns;

	if (g->next_deadline_ns == UINT64_MAX) {
		g->sleep_until = UINT64_MAX;
		return NULL;
	}
	ns = g->next_deadline_ns > now ? g->next_deadline_ns - now : 0;
	if (ns < 1000000)
		ns = 1000000; /* timers need not be finer than a millisecond */
	g->sleep_until = now + ns;
	ts->tv_sec = (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
	return ts;
}

/* Is a transfer under way on a transport whose completions need polling
 * (no wait fd): shm sends and RMA complete when the peer's side acts,
 * and nobody rings us for that. */
static bool polled_inflight(void)
{
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		if (CTX->tp[i].open && CTX->tp[i].attr.wait_fd < 0 &&
		    CTX->tp[i].tx_inflight)
			return true;
	return false;
}

/* Has every open transport a wait fd (nothing to poll on a timer)? */
static bool all_fd_tp(void)
{
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		if (CTX->tp[i].open && CTX->tp[i].attr.wait_fd < 0)
			return false;
	return true;
}

/*
 * The progress thread.  Each round: one pass; if it found nothing, choose
 * how to wait.  Application threads busy-polling or active a moment ago:
 * check back on a timer, out of their way.  A transfer under way: poll
 * transports without a wait fd often.  Otherwise sleep on the wait fds
 * (tcp), the doorbell (shm: armed, then one more pass, so nothing that
 * came before the arming is missed), wake_fd and the resolver's sockets,
 * until the next deadline; with no doorbell, shm is polled every
 * RIPC_POLL_INTERVAL_US instead.  Idle, it wakes for nothing.
 */
static void *progress_main(void *arg)
{
	struct ripc_engine *g = &CTX->eng;
	struct pollfd pfd[RIPC_PROV_MAX + 4];
	unsigned fruitless = 0;
	bool armed = false;

	(void)arg;
	pt_self = true;
	{
		/* This thread's first malloc has glibc make its arena (a
		 * mapping reserved, trimmed and made writable, its first
		 * pages touched): here, rather than under the library lock
		 * in the dispatch of the first message the thread takes (a
		 * new process's first reply, perf_notes.md). */
		void *volatile warm = malloc(64);

		free(warm);
	}
	for (;;) {
		unsigned nfd = 0, nquiet;
		bool all_fd = true, can_wait, spin, busy, app_active, untimed;
		struct timespec ts, *tsp = &ts;
		uint64_t wait_us, now;
		int n = 0, leave_fd;

		ripc__lock();
		if (CTX->shutting_down) {
			ripc__unlock();
			break;
		}
		g->sleep_until = 0;
		g->pt_watching = g->delegated = g->pt_untimed = false;
		if (g->leave_set && g->leave_due <= ripc__now_ns()) {
			/* Fired, or about to: disarmed (and its count
			 * cleared).  One still ahead stays: a spinner armed
			 * it before its spin ended (ripc__engine_spin_begin),
			 * and we may be about to sleep on it; else it fires
			 * once where nobody polls it and is cleared here. */
			timerfd_settime(g->leave_fd, 0,
					&(struct itimerspec){ { 0, 0 }, { 0, 0 } },
					NULL);
			g->leave_set = false;
		}
		if (armed) {
			bell_wake();
			armed = false;
		}
		if (g->idle) {
			/* Back from a long sleep: deadlines may be due, and
			 * the watchdog goes back to its short period. */
			__atomic_store_n(&g->idle, false, __ATOMIC_RELAXED);
			__atomic_store_n(&g->wd_busy, true, __ATOMIC_RELAXED);
			g->timers_due = true;
			watchdog_nudge();
		}
		/* An application thread that is receiving polls the
		 * provider itself: stay off it while one spins, and while
		 * one polled a moment ago and is not asleep.  Two threads
		 * that take turns on the same messages (on one CPU, when
		 * pinned) cost a receiver a quarter of its message rate
		 * in lock hand-overs and preemptions (perf_notes.md). */
		spin = g->spinners > 0 ||
		       (g->nwaiters == 0 &&
			ripc__now_ns() - g->app_recv_ns < APP_ACTIVE_NS);
		if (!spin)
			n = progress_pass(true);
		if (n > 0) {
			g->last_traffic_ns = ripc__now_ns();
			ripc__unlock();
			fruitless = 0;
			continue;
		}
		now = ripc__now_ns();
		/* A transfer under way, or traffic a moment ago (a reply
		 * often follows the end of a transfer closely). */
		busy = work_pending() || polled_inflight() ||
		       now - g->last_traffic_ns < 2000000;
		/* An application thread that called in a moment ago is
		 * about to poll itself, unless it is now asleep in a
		 * receive (which pokes wake_fd when it goes to sleep). */
		app_active = now - g->app_active_ns < APP_ACTIVE_NS &&
			     g->nwaiters == 0;
		if (!spin && !app_active && !busy && !g->watcher &&
		    ripc__bell_fd() >= 0) {
			/* About to sleep: peers on this host ring from now
			 * on; what they sent before is found by this pass. */
			ripc__bell_arm();
			armed = true;
			n = progress_pass(true);
			if (n > 0) {
				g->last_traffic_ns = now;
				ripc__unlock();
				continue; /* disarmed at the top */
			}
		}
		can_wait = !spin;
		pfd[nfd++] = (struct pollfd){ .fd = g->wake_fd,
					      .events = POLLIN };
		for (int k = 0; k < 2; k++)
			if (ripc__resolver_fd(k) >= 0)
				pfd[nfd++] = (struct pollfd){
					.fd = ripc__resolver_fd(k),
					.events = POLLIN
				};
		nquiet = nfd;
		if (g->watcher && !spin && !app_active) {
			/* A receive sleeps on the transports and the doorbell
			 * (direct wake, below): stay off them, or both would
			 * wake for every message.  Poll on a timer only what
			 * nobody rings for (a transfer under way on a
			 * transport without a wait fd); else sleep until the
			 * next deadline or until the watcher is gone. */
			if ((work_pending() || polled_inflight()) && !all_fd_tp()) {
				wait_us = CTX->cfg.busy_poll_us;
				ts = (struct timespec){
					(time_t)(wait_us / 1000000),
					(long)(wait_us % 1000000) * 1000 };
				tsp = &ts;
			} else {
				tsp = idle_timeout(&ts, now);
				__atomic_store_n(&g->idle, true,
						 __ATOMIC_RELAXED);
				publish_stats(now);
			}
			g->delegated = true;
			pfd[nquiet] = (struct pollfd){ .fd = g->leave_fd,
						       .events = POLLIN };
			ripc__unlock();
			ppoll(pfd, nquiet + (g->leave_fd >= 0), tsp, NULL);
			after_poll(pfd, nquiet);
			continue;
		}
		for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
			struct ripc_tp *t = &CTX->tp[i];

			if (!t->open)
				continue;
			if (t->attr.wait_fd < 0) {
				all_fd = false;
				continue;
			}
			/* libfabric: sleep on the fd only after trywait. */
			if (can_wait && !t->ops->trywait(t->p))
				can_wait = false;
			pfd[nfd++] = (struct pollfd){ .fd = t->attr.wait_fd,
						      .events = POLLIN };
		}
		if (armed) {
			pfd[nfd++] = (struct pollfd){ .fd = ripc__bell_fd(),
						      .events = POLLIN };
			all_fd = true; /* shm rings */
		}
		/* Asleep on the transports below (a receive about to sleep
		 * moves us off them: ripc__engine_watch_begin). */
		g->pt_watching = can_wait && !app_active;
		/* While application threads spin, no timer but leave_fd,
		 * armed as they begin and pushed on by the last to stop
		 * (ripc__engine_spin_begin, _spin_left).  Only while one
		 * spins: a thread that polled a moment ago and left arms
		 * nothing, so then the timer stays. */
		g->pt_untimed = g->spinners > 0 && g->leave_fd >= 0;
		untimed = g->pt_untimed;
		leave_fd = g->leave_fd;
		if (!busy && all_fd && can_wait && !spin && !app_active) {
			tsp = idle_timeout(&ts, now);
			__atomic_store_n(&g->idle, true, __ATOMIC_RELAXED);
			publish_stats(now);
		} else {
			wait_us = busy ? 10000 : 100000;
			ts = (struct timespec){ (time_t)(wait_us / 1000000),
						(long)(wait_us % 1000000) *
							1000 };
		}
		ripc__unlock();

		if (spin || app_active) {
			/* Application threads are polling the provider or
			 * about to; stay out of their way, check back on a
			 * timer, when one of them goes to sleep (wake_fd), or
			 * when a resolver datagram arrives.  While one spins,
			 * the timer is leave_fd, which spinners arm as they
			 * begin and push on while they keep coming back (it
			 * fires during a spin only if that spin outlasts half
			 * an interval): a wake-up every interval would preempt
			 * the spinning thread on its CPU, and take the lock
			 * from it, for nothing (perf_notes.md). */
			unsigned np = nquiet;

			wait_us = CTX->cfg.poll_interval_us;
			ts = (struct timespec){ (time_t)(wait_us / 1000000),
						(long)(wait_us % 1000000) *
							1000 };
			tsp = &ts;
			if (untimed) {
				pfd[np++] = (struct pollfd){ .fd = leave_fd,
							     .events = POLLIN };
				tsp = NULL;
			}
			ppoll(pfd, np, tsp, NULL);
			after_poll(pfd, nquiet);
			continue;
		}
		if (!can_wait) {
			/* Events are pending inside the provider: poll again,
			 * but do not burn the CPU if none turn into
			 * completions. */
			if (++fruitless > 8)
				nanosleep(&(struct timespec){ 0, 50000 }, NULL);
			continue;
		}
		fruitless = 0;
		if (!all_fd) {
			/* shm without a doorbell, or while a transfer is under
			 * way: polled often then, else every interval. */
			wait_us = busy ? CTX->cfg.busy_poll_us
				       : CTX->cfg.poll_interval_us;
			ts = (struct timespec){ (time_t)(wait_us / 1000000),
						(long)(wait_us % 1000000) *
							1000 };
			tsp = &ts;
		}
		ppoll(pfd, nfd, tsp, NULL);
		after_poll(pfd, nquiet);
	}
	return NULL;
}

/* Library threads run with every signal blocked: a signal meant to
 * interrupt an application thread (say, one blocked in ripc_receive) must
 * not be delivered to them instead.  Blocked in the creating thread around
 * pthread_create, so that there is no window before the thread blocks. */
static bool create_thread(pthread_t *th, void *(*fn)(void *))
{
	sigset_t all, old;
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(th, NULL, fn, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret == 0;
}

/* ---- the watchdog thread ---------------------------------------------
 * Runs the transports' watchdog ops (ripc_prov.h) every 200 ms without
 * taking the library lock: the thread it rescues may be holding it.
 * Every WD_IDLE_S seconds only once the process has been quiet for
 * WD_QUIET_LOOKS looks in a row (~1 s): at each, the progress thread
 * sleeps idle, nobody holds the library lock, and no work was seen since
 * the last look (wd_busy: the progress thread woke from an idle sleep,
 * or an application thread took the library lock); and never while an
 * op watches a lock seen held.
 *
 * Not at the first idle look: a server answering a steady client sleeps
 * idle between requests, so a look often finds it idle.  A client killed
 * inside shm's critical section with the server's own region lock held
 * then left the next clients spinning until the end of a long period and
 * 2 s more (5.0 and 6.8 s in the TSan lifecycle run of a0df366); an op
 * that had already seen the lock held did not keep the period short.
 *
 * The progress thread waking from its idle sleep, and an application
 * thread taking the library lock while the watchdog waits its long
 * period (ripc__engine_active), nudge it back to the short period, whose
 * first run is then 200 ms later, not at once; it stays there while the
 * library lock is held when it looks.  Application threads count because
 * one that meets a dead peer's lock (say, a receive woken by a long send
 * whose sender then died inside shm's critical section, pulling as the
 * transports' watcher) spins inside libfabric holding the library's lock
 * while the progress thread sleeps on: on the long period such a thread
 * waited 5-10 s after an idle period instead of the ~2.2 s of the lock
 * rule.
 *
 * What an op cannot repair itself it may ask to have woken (struct
 * ripc_wd_wake): the thread rings those processes' doorbells, so that
 * an idle peer whose region lock we spin on looks at it within 200 ms
 * rather than at the end of its long period (bell.c,
 * ripc__bell_wake_pid). */
#define WD_IDLE_S 5
#define WD_QUIET_LOOKS 5

/* The watchdog sleeps on a futex word rather than a condition variable:
 * a nudge, made on application threads at the API layer's lock, takes
 * no lock of its own and is async-signal-safe (an atomic increment and a
 * wake), and the sleep's relative timeout runs on the monotonic clock (a
 * condition variable's default, CLOCK_REALTIME, would stretch the period
 * when the wall clock is stepped back).  A nudge or a stop between the
 * watchdog's reading of the word and its sleeping makes the sleep return
 * at once (EAGAIN), so none is lost. */
static long wd_futex(int op, uint32_t *word, uint32_t val,
		     const struct timespec *rel)
{
	return syscall(SYS_futex, word, op | FUTEX_PRIVATE_FLAG, val, rel,
		       NULL, 0);
}

static void *watchdog_main(void *arg)
{
	struct ripc_engine *g = &CTX->eng;
	bool nudged = false, watching = false;
	unsigned quiet = 0;

	(void)arg;
	for (;;) {
		/* The word before the stop flag: a stop between the two
		 * changes the word, and the sleep below returns at once. */
		uint32_t seq = __atomic_load_n(&g->wd_seq, __ATOMIC_ACQUIRE);

		if (__atomic_load_n(&g->wd_stop, __ATOMIC_ACQUIRE))
			break;
		/* Nudged: one short period whatever it finds now (the lock
		 * may be free again already), so that a stream of calls
		 * while the progress thread sleeps nudges once per period,
		 * not once per call.  The library lock is read without
		 * ordering against the nudger's reading of wd_long: a thread
		 * that takes the lock in that instant may go un-noticed for
		 * one long period, after which the held lock keeps the
		 * watchdog short. */
		bool busy = __atomic_exchange_n(&g->wd_busy, false,
						__ATOMIC_RELAXED);
		bool quiet_now = !nudged && !busy &&
				 __atomic_load_n(&g->idle, __ATOMIC_RELAXED) &&
				 !__atomic_load_n(&CTX->lock_owner,
						  __ATOMIC_RELAXED);

		quiet = quiet_now ? quiet + 1 : 0;
		/* A watched lock keeps the period short but does not end a
		 * quiet spell: an idle process that has mapped a busy
		 * peer's region often finds that lock held for an instant,
		 * and then looks once more, 200 ms later, not five times. */
		bool idle = !watching && quiet >= WD_QUIET_LOOKS;
		struct timespec rel = { idle ? WD_IDLE_S : 0,
					idle ? 0 : 200000000 };

		/* Release: a nudger that reads it true bumps the word after
		 * our reading of it. */
		__atomic_store_n(&g->wd_long, idle, __ATOMIC_RELEASE);
		long r = wd_futex(FUTEX_WAIT, &g->wd_seq, seq, &rel);
		int err = r ? errno : 0;

		__atomic_store_n(&g->wd_long, false, __ATOMIC_RELAXED);
		if (__atomic_load_n(&g->wd_stop, __ATOMIC_ACQUIRE))
			break;
		/* Nudged out of the long period: the short one starts now.
		 * Running the ops at once would put a scan of
		 * /proc/self/maps (shm) on the CPU just when the process
		 * woke for a message.  A signal (EINTR) counts as a nudge:
		 * one short period more. */
		nudged = err != ETIMEDOUT;
		if (nudged)
			continue;
		struct ripc_wd_wake wake = { .n = 0 };

		watching = false;
		for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
			struct ripc_tp *t = &CTX->tp[i];

			if (t->open && t->ops->watchdog)
				watching |= t->ops->watchdog(t->p, &wake);
		}
		/* Peers that must repair what only they may (shm: their own
		 * region's lock, seen held at two looks while we wait on
		 * it), and whose watchdog may look only every WD_IDLE_S:
		 * their doorbell wakes their progress, which nudges it. */
		for (unsigned k = 0; k < wake.n; k++)
			ripc__bell_wake_pid(wake.pid[k]);
	}
	return NULL;
}

static void watchdog_wake(void)
{
	struct ripc_engine *g = &CTX->eng;

	__atomic_add_fetch(&g->wd_seq, 1, __ATOMIC_RELEASE);
	wd_futex(FUTEX_WAKE, &g->wd_seq, 1, NULL);
}

/* The progress thread woke from an idle sleep, or an application thread
 * took the library lock while the watchdog waits its long period: back
 * to the short one.  Lock-free and async-signal-safe. */
static void watchdog_nudge(void)
{
	struct ripc_engine *g = &CTX->eng;

	/* wd_running is cleared on the exit path without the library
	 * lock; a late nudge then finds no thread and does nothing. */
	if (!__atomic_load_n(&g->wd_running, __ATOMIC_ACQUIRE))
		return;
	if (__atomic_load_n(&g->wd_long, __ATOMIC_ACQUIRE))
		watchdog_wake();
}

void ripc__engine_active(void)
{
	/* A store only when the watchdog has cleared it since: once a
	 * look, not once a call. */
	if (!__atomic_load_n(&CTX->eng.wd_busy, __ATOMIC_RELAXED))
		__atomic_store_n(&CTX->eng.wd_busy, true, __ATOMIC_RELAXED);
	if (__builtin_expect(__atomic_load_n(&CTX->eng.wd_long,
					     __ATOMIC_RELAXED),
			     0))
		watchdog_nudge();
}

/* An application thread is about to sleep: the progress thread may be
 * keeping out of its way on a timer; have it look now. */
void ripc__engine_kick(void)
{
	uint64_t one = 1;

	if (CTX->eng.thread_running && CTX->eng.wake_fd >= 0 &&
	    write(CTX->eng.wake_fd, &one, sizeof(one)) < 0)
		(void)0; /* counter full: it is awake anyway */
}

/* ---- direct wake -----------------------------------------------------
 * Woken by the progress thread, a receive that sleeps pays two wake-ups
 * per message: the transport wakes the thread, which finds the message
 * and wakes the receiver; on a machine whose CPUs idle, each is tens of
 * microseconds.  So a receive about to sleep watches the transports
 * itself: it sleeps on their wait fds and the doorbell beside its own
 * eventfd, runs the pass when one fires, and the progress thread keeps
 * off them meanwhile (sleeping until its next deadline, or polling on a
 * timer what nobody rings for).  One watcher at a time: another receive
 * sleeps the usual way and is woken by whoever queues its message.  When
 * the watcher's receive returns, engine_leave hands the transports back
 * to the progress thread.
 */
int ripc__engine_watch_begin(struct pollfd *pfd)
{
	struct ripc_engine *g = &CTX->eng;
	bool bell = false;
	unsigned n = 0;

	if (!CTX->cfg.direct_wake || !g->thread_running || g->watcher ||
	    CTX->shutting_down)
		return 0;
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
		const struct ripc_tp *t = &CTX->tp[i];

		if (!t->open || t->attr.wait_fd >= 0)
			continue;
		if (ripc__bell_fd() < 0)
			return 0; /* shm without a doorbell: polled */
		bell = true;
	}
	g->watcher = true;
	if (bell) {
		ripc__bell_arm();
		g->watcher_bell = true;
	}
	/* What came before the arming: found now, or it rings. */
	if (progress_pass(false) > 0) {
		ripc__engine_watch_end();
		return -1;
	}
	g->nwatch_tp = 0;
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
		struct ripc_tp *t = &CTX->tp[i];

		if (!t->open || t->attr.wait_fd < 0)
			continue;
		if (!t->ops->trywait(t->p)) {
			/* Events pending that its fd will not signal: the
			 * caller sleeps only briefly (api_sleep, through
			 * ripc__engine_quiet), and its next pass polls it. */
			tp_hot(t);
			g->unquiet = true;
			ripc__engine_watch_end();
			return 0;
		}
		g->watch_tp[g->nwatch_tp++] = (uint8_t)i;
		pfd[n++] = (struct pollfd){ .fd = t->attr.wait_fd,
					    .events = POLLIN };
	}
	if (bell)
		pfd[n++] = (struct pollfd){ .fd = ripc__bell_fd(),
					    .events = POLLIN };
	if (n == 0) {
		ripc__engine_watch_end();
		return 0;
	}
	/* Asleep on the same fds, the thread would wake with us.  And a
	 * thread that left the fds to an earlier watcher and sleeps until
	 * its next deadline must look again if work came meanwhile that
	 * nothing rings for (a pull waiting for a peer to map us): it then
	 * polls on a timer. */
	if (g->pt_watching ||
	    (g->delegated && (work_pending() || polled_inflight())))
		ripc__engine_kick();
	return (int)n;
}

void ripc__engine_watch_woke(const struct pollfd *pfd, unsigned n)
{
	struct ripc_engine *g = &CTX->eng;

	for (unsigned k = 0; k < n && k < g->nwatch_tp; k++)
		if (pfd[k].revents)
			tp_hot(&CTX->tp[g->watch_tp[k]]);
}

void ripc__engine_watch_end(void)
{
	struct ripc_engine *g = &CTX->eng;

	if (!g->watcher)
		return;
	g->watcher = false;
	if (g->watcher_bell) {
		bell_wake();
		g->watcher_bell = false;
	}
}

/* The tick's period is the resolution the kernel gives for
 * CLOCK_MONOTONIC_COARSE (KTIME_LOW_RES, 1 / HZ), and the kernel aligns
 * the tick to multiples of it on the monotonic clock when the first clock
 * event device registers (measured here at HZ=250: pullgap.sh settime).
 * Outside HZ=100..1000 we do not know where it falls, and no grid is
 * used. */
uint64_t ripc__tick_grid_ns(void)
{
	struct timespec ts;
	uint64_t ns;

	if (clock_getres(CLOCK_MONOTONIC_COARSE, &ts) < 0 || ts.tv_sec)
		return 0;
	ns = (uint64_t)ts.tv_nsec;
	if (ns < RIPC_TICK_GRID_MIN_NS || ns > RIPC_TICK_GRID_MAX_NS)
		return 0;
	return ns;
}

/* When leave_fd, armed at `now`, fires: one poll interval on, and from an
 * interval of 1 ms up, rounded up to a multiple of the tick's period on
 * the monotonic clock (ripc__tick_grid_ns: 4 ms at HZ=250, Debian's; 10
 * at HZ=100, 3.33 at HZ=300, 1 at HZ=1000).  That is where the kernel's
 * scheduler tick falls, and a timer that expires with the tick is no
 * earlier than the CPU's next timer event, so arming it reprograms
 * nothing.  One that becomes the earliest has the kernel write the local
 * APIC's deadline, which in a virtual machine is a VM exit: on this VM a
 * timerfd_settime one interval ahead took 20-35 us against 1.5-2 us on
 * the grid, and receives paid it on the message's path several hundred
 * times a second (perf_notes.md, "the leave timer on the tick's grid").
 * The price: the thread takes over up to one tick later.  A shorter
 * interval was asked for explicitly and is kept as it is, as is every
 * interval where the tick is not known (grid_ns 0). */
uint64_t ripc__leave_due(uint64_t now, uint64_t interval_ns, uint64_t grid_ns)
{
	uint64_t due = now + interval_ns;

	if (interval_ns < 1000000ull || !grid_ns)
		return due;
	return (due + grid_ns - 1) / grid_ns * grid_ns;
}

/* Arm leave_fd (ripc__leave_due); false (and the thread kicked instead,
 * so that it is not left asleep) if that failed. */
static bool arm_leave(void)
{
	struct ripc_engine *g = &CTX->eng;
	/* An absolute time on the clock leave_fd runs on (timerfd_create
	 * below), so that the thread woken by it finds it due (and clears
	 * it). */
	uint64_t due = ripc__leave_due(ripc__now_ns(),
				       CTX->cfg.poll_interval_us * 1000,
				       CTX->cfg.tick_grid_ns);

	if (g->leave_fd < 0 ||
	    timerfd_settime(g->leave_fd, TFD_TIMER_ABSTIME,
			    &(struct itimerspec){
				    .it_value = { (time_t)(due / 1000000000ull),
						  (long)(due % 1000000000ull) } },
			    NULL) < 0) {
		ripc__engine_kick();
		return false;
	}
	g->leave_set = true;
	g->leave_due = due;
	return true;
}

/* The thread comes back within the poll interval, the time it keeps out
 * of an active application thread's way anyway: a timer, not a kick, so
 * that the receive that just found its message (and is about to answer
 * it) does not have the thread woken beside it, on its CPU when pinned. */
void ripc__engine_leave(void)
{
	struct ripc_engine *g = &CTX->eng;

	if (!g->delegated || g->watcher || g->leave_set)
		return;
	if (!arm_leave())
		g->delegated = false;
}

/* Armed, and not due within half an interval of now: a thread that comes
 * back and stops again pushes the timer on at most every half interval,
 * one timerfd_settime, not one per message. */
static bool leave_armed_ahead(uint64_t now)
{
	const struct ripc_engine *g = &CTX->eng;

	return g->leave_set &&
	       g->leave_due > now + CTX->cfg.poll_interval_us * 500;
}

void ripc__engine_spin_left(uint64_t now)
{
	struct ripc_engine *g = &CTX->eng;

	if (!g->pt_untimed || g->spinners || leave_armed_ahead(now))
		return;
	if (!arm_leave())
		g->pt_untimed = false;
}

void ripc__engine_spin_begin(uint64_t now)
{
	/* Whether or not the thread sleeps on the timer yet: it may start
	 * to while we spin (woken by a doorbell message, say), and then
	 * spin_left needs it armed.  Where nobody polls it, it fires
	 * unheard and the thread clears it. */
	if (CTX->eng.leave_fd < 0 || leave_armed_ahead(now))
		return;
	arm_leave();
}

static void watchdog_start(void)
{
	struct ripc_engine *g = &CTX->eng;
	bool needed = false;

	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		needed |= CTX->tp[i].open && CTX->tp[i].ops->watchdog;
	if (!needed)
		return;
	__atomic_store_n(&g->wd_stop, false, __ATOMIC_RELAXED);
	__atomic_store_n(&g->wd_running,
			 create_thread(&g->wd_thread, watchdog_main),
			 __ATOMIC_RELEASE);
}

/* Never takes the library lock: safe on the exit path. */
void ripc__watchdog_stop(void)
{
	struct ripc_engine *g = &CTX->eng;

	if (!__atomic_load_n(&g->wd_running, __ATOMIC_ACQUIRE))
		return;
	__atomic_store_n(&g->wd_stop, true, __ATOMIC_RELEASE);
	watchdog_wake();
	pthread_join(g->wd_thread, NULL);
	__atomic_store_n(&g->wd_running, false, __ATOMIC_RELEASE);
}

/* Lock held (initialisation).  The progress thread unless
 * RIPC_PROGRESS=manual, and the watchdog where a transport needs one. */
int ripc__engine_start(void)
{
	struct ripc_engine *g = &CTX->eng;

	g->wake_fd = g->leave_fd = -1;
	if (!CTX->cfg.manual_progress) {
		g->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (g->wake_fd < 0)
			return RIPC_ENOMEM;
		if (!create_thread(&g->thread, progress_main)) {
			close(g->wake_fd);
			g->wake_fd = -1;
			return RIPC_ENOMEM;
		}
		/* Optional: without it a leaving watcher kicks instead. */
		g->leave_fd = timerfd_create(CLOCK_MONOTONIC,
					     TFD_CLOEXEC | TFD_NONBLOCK);
		g->thread_running = true;
		/* Near the NIC; logs failures. */
		ripc__loc_bind_thread(g->thread);
	}
	watchdog_start();
	return RIPC_OK;
}

/* Without the lock (the thread takes it to leave its loop), after
 * shutting_down was set. */
void ripc__engine_stop(void)
{
	struct ripc_engine *g = &CTX->eng;

	ripc__watchdog_stop();
	if (g->thread_running) {
		ripc__engine_kick();
		pthread_join(g->thread, NULL);
		g->thread_running = false;
	}
	if (g->wake_fd >= 0)
		close(g->wake_fd);
	g->wake_fd = -1;
	if (g->leave_fd >= 0)
		close(g->leave_fd);
	g->leave_fd = -1;
	g->leave_set = g->watcher = g->delegated = g->pt_watching = false;
	g->pt_untimed = false;
}
