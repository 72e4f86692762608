/*
 * Core internals shared by the files of ripc/.  No libfabric here: the
 * transports are reached only through ripc_prov.h.
 *
 * Layers (docs/ARCHITECTURE.md has the picture), each calling only down:
 *
 *   api*.c      public entry points: check, initialise, lock, wait
 *   init.c      lifecycle: the module table (init, fini, fork), exit
 *   progress.c  the engine: polls transports, hands completions to their
 *               owners, timers, the progress thread
 *   send.c recv.c dispatch.c pull.c retbuf.c service.c windows.c
 *               messaging policy; never polls, never waits, never inits
 *   txq.c       the transmit queue: post now or queue for the engine
 *   expose.c    exposures: registrations peers may access, and how they
 *               ended
 *   peer.c registry.c resolver.c directory.c   naming
 *   buffers.c locality.c                       memory
 *   wire.c util.c errors.c env.c log.c         pure helpers
 *
 * Concurrency: one mutex (ctx.lock) protects all core state and serialises
 * every call into a transport.  It is taken in two places only: the public
 * entry points (api*.c) and the progress thread (progress.c).  Threads
 * that wait (receive, send into a full queue, resolution, release) sleep
 * outside the lock on their own eventfd.
 */
#ifndef RIPC_INT_H
#define RIPC_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "env.h"
#include "log.h"
#include "ripc.h"
#include "registry.h"
#include "ripc_prov.h"
#include "wire.h"

#define RIPC_API __attribute__((visibility("default")))

#define RIPC_SLOT_SIZE ((RIPC_WIRE_MAX + 4095) & ~(size_t)4095)

/* ---- small helpers (util.c) ----------------------------------------- */

uint64_t ripc__now_ns(void);
static inline uint64_t ripc__ms_ns(int64_t ms)
{
	return (uint64_t)ms * 1000000ull;
}
/* Random bytes from the kernel CSPRNG; 0 or a negative errno. */
int ripc__random(void *buf, size_t len);
/* 64 random bits from a pooled CSPRNG draw (lock held). */
int ripc__random_u64(uint64_t *out);

int ripc__set_err(int err);
int ripc__err_from_errno(int neg_errno);

/* A zeroed record of a message's life (a pull, a read, an exposure...),
 * freed with free().  Not calloc: glibc's calloc (2.36, Debian 12) bypasses
 * the per-thread cache that malloc takes small blocks from, while free()
 * puts them there; a calloc/free pair of these records took ~500
 * instructions, malloc/memset/free ~120 (callgrind, perf_notes.md). */
static inline void *ripc__zalloc(size_t size)
{
	void *p = malloc(size);

	/* Hidden from the compiler, which would make the pair a calloc. */
	__asm__("" : "+r"(p));
	if (p)
		memset(p, 0, size);
	return p;
}

/* Intrusive doubly linked list. */
struct ripc_list {
	struct ripc_list *prev, *next;
};
#define RIPC_LIST_INIT(l) { &(l), &(l) }
static inline void ripc_list_init(struct ripc_list *l)
{
	l->prev = l->next = l;
}
static inline bool ripc_list_empty(const struct ripc_list *l)
{
	return l->next == l;
}
static inline void ripc_list_add_tail(struct ripc_list *l,
				      struct ripc_list *e)
{
	e->prev = l->prev;
	e->next = l;
	l->prev->next = e;
	l->prev = e;
}
static inline void ripc_list_del(struct ripc_list *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = e;
}
#define ripc_container_of(ptr, type, member)                                 \
	((type *)((char *)(ptr) - offsetof(type, member)))
#define ripc_list_for_each_safe(pos, tmp, head)                              \
	for (pos = (head)->next, tmp = pos->next; pos != (head);             \
	     pos = tmp, tmp = pos->next)

/* Thread-local state of the library (48 bytes in all).  initial-exec:
 * each access is one %fs-relative load instead of a call to
 * __tls_get_addr, which the default model for a shared library makes on
 * every public call (callgrind: ~66 instructions per shm round trip).  A
 * libripc loaded with dlopen() takes these bytes from the static TLS
 * glibc keeps for such libraries (glibc.rtld.optional_static_tls, 512
 * bytes by default); test/scripts/check-dlopen.sh loads it so. */
#define RIPC_TLS __thread __attribute__((tls_model("initial-exec")))

/*
 * A thread that waits inside a public call sleeps on its own eventfd.
 * Whoever makes its condition true (a message queued on its service, its
 * queued send posted, an exposure ended, finalize) writes the eventfd.
 * `link` is on the list of what it waits for; `sleep` on ctx.sleepers,
 * so that finalize can wake every sleeper.
 */
struct ripc_waiter {
	struct ripc_list link;
	struct ripc_list sleep;
	int efd;
};
void ripc__waiter_wake(struct ripc_waiter *w);
void ripc__waiters_wake(struct ripc_list *waiters); /* via w->link */
/* The calling thread's waiter (NULL: no eventfd could be made). */
struct ripc_waiter *ripc__waiter_self(void);
/* Public calls of the calling thread inside the library. */
extern RIPC_TLS unsigned ripc__tls_calls;
void ripc__thread_fork_child(void);

/* ---- operation contexts handed to transports ------------------------ */

enum ripc_op_kind {
	RIPC_OP_RECV = 1, /* a receive slot */
	RIPC_OP_SEND,     /* a tx bounce slot */
	RIPC_OP_READ,     /* one chunk of a pull */
	RIPC_OP_WRITE,    /* one return-buffer write */
};

struct ripc_op {
	uint8_t kind; /* enum ripc_op_kind; first member of every context */
};

/* A deadline was set (lock held): a progress thread that sleeps past it
 * is woken (util.c). */
void ripc__timer_note(uint64_t when);

struct ripc_peer;

/* ---- doorbells (bell.c) ---------------------------------------------
 * A process whose progress thread sleeps is woken by peers on this host
 * over a datagram socket; see bell.c for the protocol.  All lock held. */
int ripc__bell_open(void);
void ripc__bell_close(void);
void ripc__bell_forget(void);
/* The socket to sleep on, or -1 (no doorbell: poll shm instead). */
int ripc__bell_fd(void);
/* Before sleeping: from now on peers ring.  Poll the transports once more
 * after arming, then sleep on ripc__bell_fd(). */
void ripc__bell_arm(void);
/* After waking: stop wanting rings; the caller drains the socket. */
void ripc__bell_disarm(void);
/* An application thread starts busy-polling: peers need not ring the
 * sleepers meanwhile.  unhush when the last one stops: true if sleepers
 * are armed again, and the caller must then make one progress pass. */
void ripc__bell_hush(void);
bool ripc__bell_unhush(void);
/* After posting work for a same-host peer: ring it if it sleeps.  A
 * branch for peers on other hosts. */
void ripc__bell_ring(const struct ripc_peer *peer);
/* The watchdog thread, without the library lock: wake process pid of
 * this host if its progress sleeps (a watchdog op asked for it). */
void ripc__bell_wake_pid(int32_t pid);
/* A message for a same-host peer not linked over shm yet: as a datagram
 * to its doorbell.  0 sent, -EAGAIN not (queue it as usual). */
int ripc__bell_post(const struct ripc_peer *peer, const void *buf,
		    size_t len);
/* One datagram from the doorbell socket: a ring, a message sent by
 * ripc__bell_post (its length and sender in *len, *pid), or one dropped
 * for the reason named.  buf: a receive slot, or NULL if none was free.
 * From the engine, which drains the socket after clearing the mail word
 * and dispatches the messages. */
enum ripc_bell_in {
	RIPC_BELL_EMPTY,
	RIPC_BELL_RING,
	RIPC_BELL_MSG,
	RIPC_BELL_NO_ROOM,  /* a message, and no slot to take it */
	RIPC_BELL_TOO_LONG, /* longer than any message */
	RIPC_BELL_FOREIGN,  /* another user's, or no credentials */
};
enum ripc_bell_in ripc__bell_recv(void *buf, size_t room, size_t *len,
				  pid_t *pid);
void ripc__bell_mail_clear(void);
void ripc__bell_mail_again(void);
/* Has a peer sent us a message through the doorbell since we last read
 * it?  One load, on every progress pass. */
static inline bool ripc__bell_has_mail(void);

/* ---- memory (buffers.c) --------------------------------------------- */

/* A local registration (for FI_MR_LOCAL descriptors). */
struct ripc_lreg {
	struct ripc_list link;
	uint8_t *base;
	size_t len;
	bool from_alloc; /* made by ripc_buf_alloc (freed with it) */
	bool user;       /* made by ripc_buf_register */
	bool pull_mem;   /* counted in mem.pull_mem until freed */
	size_t map_len;  /* bytes mapped (from_alloc) */
	struct ripc_prov_mr mr[RIPC_PROV_MAX];
};

/* One buffer of RIPC_SLOT_SIZE bytes in an arena chunk, registered with
 * every transport.  Used as a posted receive (op.kind RECV), as the home of
 * a received message's short items until the application frees them
 * (HELD), or as a transmit bounce buffer (op.kind SEND, state TX). */
struct ripc_slot {
	struct ripc_op op;
	int8_t tp;        /* transport it is posted on, -1 if none */
	uint8_t state;    /* SLOT_FREE, SLOT_POSTED, SLOT_HELD, SLOT_TX */
	struct ripc_arena *arena;
	uint8_t *buf;
	struct ripc_slot *next_free;
};
enum { SLOT_FREE = 0, SLOT_POSTED, SLOT_HELD, SLOT_TX };

struct ripc_arena {
	struct ripc_arena *next;
	uint8_t *base;
	size_t nslots;
	struct ripc_lreg *lreg;
	struct ripc_slot slot[];
};

#define RIPC_LIBBUF_CACHE 8
#define RIPC_ARENAS_MAX 128 /* x 16 slots: ~140 MiB of receive slots */

struct ripc_mem {
	struct ripc_list lregs;   /* struct ripc_lreg */
	struct ripc_arena *arenas;
	/* The live arenas keyed by base / arena length, open addressing, at
	 * most half full (buffers.c): ripc_buf_free() finds the slot of a
	 * short item with at most two look-ups.  A list walk was 13 % of a
	 * receiver's time at 1 000 messages held, a binary search 3-4 %,
	 * 40 % of that on its mispredicted branch (perf_notes.md). */
	struct ripc_arena_ix {
		uintptr_t key;
		struct ripc_arena *a; /* NULL: empty */
	} arena_ix[2 * RIPC_ARENAS_MAX];
	/* Arenas kept after finalize because the application still holds
	 * short items in them: unmapped when the last is freed. */
	struct ripc_arena *retired;
	struct ripc_slot *free_slots;
	size_t nslots;
	uint64_t pull_mem;        /* library bytes allocated by pulls */
	/* Freed library buffers kept for reuse (registration included). */
	struct ripc_lreg *libbuf_cache[RIPC_LIBBUF_CACHE];
	size_t libbuf_cached_bytes;
	/* The CSPRNG pool behind ripc__random_u64. */
	uint8_t pool[4096];
	size_t pool_left;
};

/* ---- transports and peers ------------------------------------------- */

/* Same-host peers beyond which (and beyond those left by the last sweep)
 * dead ones are looked for (ripc__peers_sweep). */
#define RIPC_SWEEP_MIN 32u

struct ripc_tp {
	int id; /* enum ripc_prov_id */
	bool open;
	const struct ripc_prov_ops *ops;
	struct ripc_prov *p;
	struct ripc_prov_attr attr;
	uint8_t addr[RIPC_ADDR_MAX];
	size_t addrlen;
	size_t tx_inflight; /* posted sends/reads/writes not yet completed */
	size_t tx_max;
	unsigned rx_posted;
	/* Spares taken for slots handed to the application (dispatch.c),
	 * posted at the start of this transport's next poll rather than
	 * while the message waits to be taken: off the receive's path. */
	struct ripc_slot *owed;
	unsigned nowed;
	uint64_t last_event_ns; /* last completion seen */
	uint64_t last_poll_ns;
	unsigned npeers;        /* peers on this transport */
	unsigned sweep_at;      /* same-host: look for dead peers at npeers */
	uint64_t last_peer_ns;  /* same-host: the peer that made a sweep due */
	uint64_t learnt_inc;    /* same-host: last sender known to be a peer */
};

/* A remote process reachable on one transport. */
struct ripc_peer {
	struct ripc_peer *hnext; /* hash chain by (tp, address) */
	uint64_t inc;            /* the process's incarnation */
	uint64_t handle;         /* transport peer handle */
	uint64_t last_used_ns;
	struct ripc_peer *inext; /* hash chain by incarnation */
	uint32_t refs;           /* routes, sends, pulls, offers using it */
	int32_t reg_slot1;       /* same host: its registry record + 1 */
	int32_t proc_slot1;      /* a process of this host, any transport:
				  * its registry record + 1 (the sweep) */
	uint32_t nqueued;        /* messages waiting in the transmit queue */
	uint32_t flush_gen;      /* last flush pass that found it busy */
	uint32_t read_gen;       /* last read-posting pass it refused */
	uint64_t check_ns;       /* next look at whether its process ended */
	uint64_t check_gap_ns;   /* and the gap to the one after */
	int8_t tp;
	bool dead;               /* a sweep found its process gone */
	bool ended;              /* ripc__peer_ended saw it gone */
	bool unrecorded;         /* ... found no record of it: not looked at */
	bool mapped;             /* handle is valid: av_insert done */
	bool map_pending;        /* counted in nunmapped: the engine maps it */
	bool ready;              /* may be sent to (ripc__peer_ready) */
	bool linked;             /* a message of ours went over tp */
	/* A done message held back for our next short message to it
	 * (pull.c); cookie 0: none.  Listed in CTX->pl.dones meanwhile. */
	uint64_t done_cookie, done_inc, done_due;
	struct ripc_list done_link;
	uint8_t addrlen;
	uint8_t addr[RIPC_ADDR_MAX];
};

/* Cached resolution of a remote service ID. */
struct ripc_route {
	uint64_t reg_version; /* registry version it was made at */
	uint64_t res_version; /* resolver cache version it was made at */
	uint64_t dir_version; /* directory cache version it was made at */
	struct ripc_peer *peer;
	uint64_t inc;
	uint64_t host_id;
	uint64_t verified_ns; /* last time the owner was seen alive */
	bool mcast;
	uint16_t nmembers;
	struct ripc_peer **members; /* multicast: one peer per member */
	uint64_t *member_inc;
};

/* ---- messages and services ------------------------------------------ */

enum ripc_item_origin {
	RIPC_ORIGIN_WINDOW = 1, /* an application receive window */
	RIPC_ORIGIN_LIBBUF,     /* allocated by the library (ripc_buf_free) */
	RIPC_ORIGIN_RETBUF,     /* the application's own return buffer */
	RIPC_ORIGIN_NONE,       /* not delivered */
	RIPC_ORIGIN_EMPTY,      /* a zero-length item: nothing to place */
};

struct ripc_window {
	struct ripc_list link;
	uint8_t *base;
	size_t size;
	int32_t service; /* -1 = process-wide */
	struct ripc_lreg *lreg; /* local registration when mr_local */
};

struct ripc_pull;

/* Items of each kind whose state fits in a received message's record. */
#define RIPC_MSG_INLINE 4

/* A received message queued on a service (service.c owns it). */
struct ripc_msg {
	struct ripc_list link;
	uint16_t from, to;
	uint64_t src_inc;
	bool ready;  /* false while long items are still being pulled */
	int err;     /* RIPC_OK, RIPC_EPULL, RIPC_ETRUNC */
	struct ripc_slot *slot; /* holds the short items; NULL if none */
	uint16_t nshort, nlong;
	struct ripc_pull *pull; /* the pull filling it, until it is done */
	/* Per-item state, nshort and nlong entries (the counts it was
	 * allocated for: ripc__msg_alloc).  They point into the record:
	 * into the inline arrays below for a message of at most
	 * RIPC_MSG_INLINE items of each kind, the common case, whose
	 * records are cached; past the end of the record, allocated with
	 * it, for a larger one.  Arrays for every possible item made the
	 * record 1.6 KiB, above the 1 032 bytes glibc's per-thread cache
	 * serves: every record that did not come from the library's cache
	 * went through malloc's slow paths, ~600 instructions a message
	 * for a receiver behind its senders (the 64 B message rate under
	 * callgrind). */
	void **short_ptr;
	uint32_t *short_len;
	void **long_ptr;
	uint32_t *long_len;
	uint8_t *long_origin;
	bool big; /* the arrays are past the end: never cached */
	struct {
		void *short_ptr[RIPC_MSG_INLINE];
		void *long_ptr[RIPC_MSG_INLINE];
		uint32_t short_len[RIPC_MSG_INLINE];
		uint32_t long_len[RIPC_MSG_INLINE];
		uint8_t long_origin[RIPC_MSG_INLINE];
	} in;
};

struct ripc_service {
	uint16_t id;
	bool mcast;
	struct ripc_list queue; /* struct ripc_msg, arrival order */
	unsigned qlen;
	unsigned nready;
	struct ripc_list waiters; /* struct ripc_waiter: receives asleep */
};

/* ---- pulls (pull.c) ---------------------------------------------------- */

/* A long message being pulled by this process.  Owned by pull.c; the
 * message it fills may be freed meanwhile (msg set to NULL): the pull then
 * ends at the next chance without delivering. */
struct ripc_pull {
	struct ripc_list link;   /* pl.pulls */
	struct ripc_msg *msg;    /* NULL once abandoned */
	struct ripc_peer *peer;
	uint64_t cookie;
	uint64_t deadline;
	uint16_t n;
	unsigned chunks_out;     /* reads posted, not completed */
	int err;
	struct ripc_list readq;  /* link in pl.readq while it has chunks */
	bool queued;
	/* n of them, allocated with the pull: a record for every possible
	 * item (4.6 KiB) was zeroed per long message, and an allocation of
	 * that size had glibc consolidate its fast bins each time. */
	struct ripc_pull_item {
		uint64_t raddr, key;
		uint32_t len;
		uint64_t next; /* next byte offset to post */
		uint64_t done; /* bytes completed */
		uint8_t *dst;
		void *desc;
		struct ripc_window *win; /* window used (returned on error) */
		bool libbuf;             /* dst is a library buffer */
	} item[];
};

struct ripc_read_op {
	struct ripc_op op;
	struct ripc_pull *pull;
	uint16_t item;
	uint64_t off;
	uint64_t len;
	int8_t tp;
	uint8_t retries;
	struct ripc_list retry;  /* in pl.read_retry while waiting */
	struct ripc_list posted; /* in pl.reads while with the transport */
};

struct ripc_pull_state {
	struct ripc_list pulls;      /* struct ripc_pull */
	struct ripc_list readq;      /* pulls with chunks left to post */
	struct ripc_list read_retry; /* read chunks to post again */
	struct ripc_list reads;      /* read chunks posted, not completed */
	uint32_t read_gen;           /* posting passes (peer.read_gen) */
	struct ripc_list dones;      /* peers with a done message held back */
	uint64_t done_next;          /* the earliest of their done_due */
};

/* ---- the transmit queue (txq.c) ------------------------------------- */

/* A message the transport did not take at once.  Posted by the engine in
 * order, per peer.  A waiting caller owns it (waiter set) and frees it;
 * otherwise (detached) the queue frees it when it leaves. */
struct ripc_txreq {
	struct ripc_list link;   /* tx.queue (oldest first), then tx.done */
	struct ripc_peer *peer;  /* held */
	struct ripc_slot *slot;  /* the encoded message */
	size_t len;
	uint32_t off;            /* sent in fragments: bytes gone so far */
	uint64_t deadline;
	uint64_t expo[2];        /* exposures to end if it is never sent */
	struct ripc_waiter *waiter;
	uint8_t state;           /* TXR_QUEUED, TXR_SENT, TXR_FAILED */
	int err;                 /* TXR_FAILED: why */
};
enum { TXR_QUEUED = 1, TXR_SENT, TXR_FAILED };

struct ripc_txq {
	struct ripc_list queue;  /* struct ripc_txreq */
	struct ripc_list done;   /* left the queue, its waiter not yet back */
	unsigned n;
	uint32_t flush_gen;
};

/* ---- exposures (expose.c) ------------------------------------------- */

enum ripc_expo_kind {
	RIPC_EXPO_LONG = 1,   /* long-send items: remote read */
	RIPC_EXPO_RETURN,     /* offered return buffers: remote write */
};

/* Memory this process exposes to one peer for one message: one
 * registration per item, for exactly its bytes, with a fresh key. */
struct ripc_expo {
	struct ripc_list link;   /* ex.live */
	uint64_t id;             /* cookie on the wire; never 0 */
	uint8_t kind;
	struct ripc_peer *peer;  /* held */
	uint64_t peer_inc;
	uint16_t src, dest;      /* our service, the peer's service */
	uint64_t send_seq;       /* the public call it belongs to */
	uint64_t since;          /* when it began */
	uint64_t deadline;
	uint16_t n;
	struct ripc_expo_item {
		const uint8_t *buf;
		uint32_t len;
		struct ripc_prov_mr mr;
	} item[];
};

/* How an exposure of an item ended (ripc_wait_released, events). */
struct ripc_release_rec {
	const uint8_t *buf;
	uint32_t len;
	uint64_t send_seq;
	uint16_t dest;
	uint8_t kind;   /* RIPC_RELEASE_* */
	uint8_t status; /* RIPC_OK, RIPC_EPEER, RIPC_EEXPIRED, ... */
};

#define RIPC_RELEASE_RING 1024

struct ripc_expose_state {
	struct ripc_list live;    /* struct ripc_expo */
	unsigned nlive;
	uint64_t send_seq;
	struct ripc_list waiters; /* ripc_wait_released asleep */
	/* The last RIPC_RELEASE_RING endings, for ripc_wait_released. */
	struct ripc_release_rec ring[RIPC_RELEASE_RING];
	unsigned ring_head, ring_n;
	/* Events for ripc_release_poll, once the application asked. */
	bool events_on;
	struct ripc_release_rec *ev;
	unsigned ev_head, ev_n, ev_cap;
};

/* ---- return buffers (retbuf.c) -------------------------------------- */

struct ripc_retbuf_state {
	struct ripc_list grants;  /* peer side: buffers offered to us */
	struct ripc_list replies; /* replies being written */
	struct ripc_list writeq;  /* replies with writes left to post */
	struct ripc_list writes;  /* write ops with the transport */
	unsigned ngrants;
};

/* ---- receive-side bookkeeping (service.c) ---------------------------- */

struct ripc_recv_state {
	struct ripc_msg *msg_cache; /* recycled message records */
	unsigned msg_cached;
	unsigned queued_total;    /* ready messages over all services */
	int app_fd;               /* eventfd of ripc_get_fd(), or -1 */
	bool app_fd_set;          /* its counter is non-zero */
};

/* Messages arriving in fragments (frag.c): each held in the slot of its
 * first fragment until the rest is in. */
#define RIPC_FRAG_PARTIALS 64
struct ripc_frag_state {
	struct ripc_partial {
		uint64_t src_inc;
		struct ripc_slot *s; /* the first fragment's, SLOT_HELD */
		uint32_t total, got;
		int8_t tp;
		uint64_t deadline;
	} p[RIPC_FRAG_PARTIALS];
	unsigned n;
};

/* ---- the engine (progress.c) ---------------------------------------- */

struct ripc_engine {
	pthread_t thread;
	bool thread_running;
	int wake_fd;              /* eventfd: wakes the progress thread */
	unsigned spinners;        /* app threads busy-polling in a receive */
	unsigned nwaiters;        /* app threads asleep in the library */
	uint64_t app_active_ns;   /* last time an app thread was in a call */
	uint64_t app_recv_ns;     /* last time a receive polled the provider */
	uint64_t last_traffic_ns; /* last time the progress thread saw events */
	uint64_t next_timer_ns;   /* next timeout scan */
	/* The earliest deadline of anything with a timeout (exposures,
	 * pulls, grants, announcements), as of the last scan or lowered by
	 * ripc__timer_note(): when the progress thread must wake. */
	uint64_t next_deadline_ns;
	uint64_t sleep_until;     /* the progress thread sleeps until then */
	bool timers_due;          /* run the timers on the next pass */
	bool idle;                /* the progress thread sleeps for long */
	/* Direct wake: who sleeps on the transports' fds and the doorbell.
	 * watcher: an application thread in a receive does; pt_watching:
	 * the progress thread does; delegated: the progress thread sleeps
	 * without them because a watcher has them. */
	bool watcher, pt_watching, delegated;
	bool watcher_bell;        /* the watcher armed the doorbell */
	uint8_t watch_tp[RIPC_PROV_MAX]; /* the transport of each watched fd */
	uint8_t nwatch_tp;
	bool unquiet; /* watch_begin's trywait failed: api_sleep need not ask */
	int leave_fd;             /* timerfd: a watcher left (engine_leave),
				   * or spinners began (spin_begin) and
				   * the last stopped (spin_left) */
	bool leave_set;           /* leave_fd is armed */
	uint64_t leave_due;       /* when it fires, if armed */
	/* The progress thread sleeps on no timer but leave_fd while
	 * application threads spin: armed as they begin, pushed on when
	 * the last stops (ripc__engine_spin_begin, _spin_left). */
	bool pt_untimed;
	struct ripc_stats published; /* as last put in the registry */
	unsigned poll_calls;
	uint64_t clock_ns;        /* the last clock read of a progress pass */
	uint64_t last_resolver_ns;
	uint64_t stats_published_ns;
	/* The watchdog thread (transport watchdog ops). */
	pthread_t wd_thread;
	bool wd_running, wd_stop;
	/* Waiting its idle period: written by the watchdog, read by
	 * ripc__engine_active; all three atomic, no lock (see
	 * progress.c: a nudge may come from any thread at any moment). */
	bool wd_long;
	uint32_t wd_seq;          /* futex word: bumped by every nudge */
	/* Work seen since the watchdog's last look (the progress thread
	 * woke from an idle sleep, or an application thread took the
	 * library lock): set by them, cleared by the watchdog, which waits
	 * its long period only after a quiet spell (progress.c). */
	bool wd_busy;
};

/* ---- the context ---------------------------------------------------- */

struct ripc_ctx {
	pthread_mutex_t lock;
	pthread_t lock_owner;     /* valid while locked (exit path) */
	pthread_cond_t idle;      /* finalize waits for calls to leave */
	bool initialized;         /* read without the lock: atomics */
	bool shutting_down;       /* finalize (or exit) under way */
	bool exiting;             /* process exit: touch nothing any more */
	unsigned calls;           /* public calls inside the library */
	struct ripc_list sleepers; /* struct ripc_waiter (sleep) */
	uint64_t incarnation;
	uint64_t host_id;
	pid_t pid;

	struct ripc_tp tp[RIPC_PROV_MAX];
	unsigned ntp;

	struct ripc_service *svc[RIPC_MAX_SERVICE_ID + 1];
	struct ripc_route *route[RIPC_MAX_SERVICE_ID + 1];
	/* Public sends holding a route across an unlock (api_send waits with
	 * it): while any does, the sweep frees no route (peer.c). */
	unsigned routes_held;
	/* Routes that let go of their peer to make room in the peer table
	 * (peers_evict): the next sweep looks for them (peer.c). */
	bool route_shells;
	unsigned nsvc;

	struct ripc_peer *peer_hash[256];
	struct ripc_peer *inc_hash[256];
	unsigned npeers;
	/* Incarnations a same-host sender claimed that the registry does
	 * not know (a lie, or a process gone): not looked up again. */
	uint64_t unknown_inc[32];
	unsigned unknown_next;
	bool sweep_due;          /* ripc__peers_sweep() from the engine */
	bool sweep_reaping;      /* marked dead peers are still to be freed */
	uint32_t accept_seen;    /* registry accept requests looked at */
	/* Processes found without shm room lately (peer.c same_host_room):
	 * asked again only after a while, so that many clients falling
	 * back to tcp do not queue on the registry lock at every route
	 * look-up. */
	struct {
		uint64_t inc;
		uint64_t until_ns;
	} no_room[16];
	unsigned no_room_next;
	uint64_t sweep_retry_ns; /* a dead peer was still in use: again then */
	unsigned nunmapped;      /* same-host peers the engine is to map */
	uint64_t map_retry_ns;   /* a mapping failed: not again before */
	uint64_t map_since_ns;   /* nunmapped went from 0 to 1 then */

	/* Our doorbell (bell.c): the socket others ring, one to ring them
	 * with, and the registry word that says we sleep. */
	struct {
		int fd, out;
		uint32_t *word;
		uint32_t *mail; /* bumped by peers that sent us datagrams */
		unsigned armed; /* threads that armed it and sleep on fd */
		bool hushed;    /* a spinner cleared the word (bell_hush) */
		unsigned uid;   /* our euid, read at open: names the sockets */
	} bell;

	struct ripc_mem mem;
	struct ripc_list windows; /* struct ripc_window */
	struct ripc_txq tx;
	struct ripc_expose_state ex;
	struct ripc_retbuf_state rb;
	struct ripc_pull_state pl;
	struct ripc_recv_state rx;
	struct ripc_frag_state fr;
	struct ripc_engine eng;

	/* configuration, loaded at initialisation */
	struct {
		uint64_t resolve_timeout_ns, send_timeout_ns, long_timeout_ns,
			pull_timeout_ns, spin_ns, spin_pull_ns, poll_interval_us,
			busy_poll_us;
		unsigned rx_depth, queue_max;
		unsigned shm_peers; /* RIPC_SHM_PEERS */
		unsigned peers_max; /* RIPC_TEST_PEERS_MAX (4096) */
		uint64_t test_spin_end_ns; /* RIPC_TEST_SPIN_END_US (0) */
		bool doorbell;
		bool direct_wake; /* RIPC_DIRECT_WAKE */
		uint64_t return_timeout_ms;
		uint64_t pull_mem_max;
		uint64_t read_chunk; /* RIPC_READ_CHUNK, 0 unset: ripc__rma_chunk */
		uint64_t done_delay_ns; /* RIPC_DONE_DELAY_US */
		uint32_t frag_max;      /* RIPC_FRAG_MAX */
		bool manual_progress;
		/* The scheduler tick's period (ripc__tick_grid_ns), 0 when
		 * unknown: the leave timer's grid. */
		uint64_t tick_grid_ns;
	} cfg;

	struct ripc_stats stats;
};

extern struct ripc_ctx ripc__ctx;
#define CTX (&ripc__ctx)

/* Largest single RDMA read (pull.c) or write (retbuf.c) posted on the
 * transport with attributes `a`: RIPC_READ_CHUNK when set, else the
 * transport's own choice (struct ripc_prov_attr), else 8 MiB; never above
 * what one operation may move (max_msg_size). */
#define RIPC_RMA_CHUNK_DEFAULT (8ul << 20)
static inline size_t ripc__rma_chunk(const struct ripc_prov_attr *a)
{
	size_t c = CTX->cfg.read_chunk ? CTX->cfg.read_chunk
		   : a->rma_chunk      ? a->rma_chunk
				       : RIPC_RMA_CHUNK_DEFAULT;

	/* (0 from a provider would make every read empty: no limit then.) */
	return a->max_msg_size && c > a->max_msg_size ? a->max_msg_size : c;
}

static inline bool ripc__bell_has_mail(void)
{
	return CTX->bell.mail &&
	       __atomic_load_n(CTX->bell.mail, __ATOMIC_SEQ_CST) != 0;
}

/* ---- lifecycle (init.c; called by the API layer only) ---------------- */

/* Lazily initialise; RIPC_OK or an error code. */
int ripc__ensure_init(void);
/* Stop everything and free it; the caller holds no lock and is not
 * counted as a call in flight.  `exiting`: called on the exit path. */
void ripc__lifecycle_fini(bool exiting);
void ripc__load_config(void);

/* lock_owner is read without the lock by the exit path (is the exiting
 * thread the one inside the library?) and by the watchdog: atomic. */
static inline void ripc__lock(void)
{
	pthread_mutex_lock(&CTX->lock);
	__atomic_store_n(&CTX->lock_owner, pthread_self(), __ATOMIC_RELAXED);
}
static inline void ripc__unlock(void)
{
	__atomic_store_n(&CTX->lock_owner, (pthread_t)0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&CTX->lock);
}
static inline bool ripc__lock_is_mine(void)
{
	return pthread_equal(__atomic_load_n(&CTX->lock_owner,
					     __ATOMIC_RELAXED),
			     pthread_self());
}

/* ---- the engine (progress.c) ---------------------------------------- */
/* One pass over the transports and what waits for them.  Lock held.
 * Between its clock reads (every 8th pass), a pass leaves out a costly
 * transport that has been quiet (tcp beside shm): see progress.c. */
int ripc__progress(void);
/* The same pass, but it reads the clock and so polls every transport
 * not polled for COLD_POLL_NS: for a single call (ripc_progress(3)) and
 * for the last look before a timeout.  Lock held. */
int ripc__progress_now(void);
/* A thread that polled the transports itself is about to sleep relying
 * on the progress thread: true if every transport with a wait fd passes
 * fi_trywait.  False means events are pending inside the provider that
 * no fd will signal any more (libfabric's trywait rule): the caller must
 * poll again soon instead of sleeping on, and the transport is marked hot
 * so that its next pass polls it.  Lock held. */
bool ripc__engine_quiet(void);
/* Make the progress thread look now (a thread is about to sleep). */
void ripc__engine_kick(void);
/* An application thread took the library lock (the API layer calls it
 * after every ripc__lock): the watchdog's next look counts the process
 * busy, and the watchdog, if it waits its idle period, goes back to its
 * short one (an atomic increment and a futex wake, at most once a
 * watchdog period; otherwise two loads and a branch, and a store once a
 * look).  Lock held. */
void ripc__engine_active(void);
/* Direct wake (progress.c): an application thread about to sleep in a
 * receive watches the transports itself, so that what arrives wakes it
 * and not the progress thread, which would then have to wake it.  Lock
 * held.  watch_begin fills pfd[0..n-1] with the transports' wait fds and
 * the doorbell (room for RIPC_PROV_MAX + 1) and returns n > 0: sleep on
 * them, then call watch_end; 0: this thread cannot watch (another does,
 * a transport can neither wake nor ring it, a trywait failed, or direct
 * wake is off): sleep the usual way; -1: a pass found events: look again
 * (watch_end already done).  engine_leave: a receive is done; if the
 * progress thread left the transports to a watcher that is gone, it
 * takes them back. */
struct pollfd;
int ripc__engine_watch_begin(struct pollfd *pfd);
void ripc__engine_watch_end(void);
/* The watcher's sleep ended with revents on pfd[0..n-1] (the array that
 * watch_begin filled): the transports that fired are marked hot, so the
 * next pass polls them whatever the clock says.  Lock held. */
void ripc__engine_watch_woke(const struct pollfd *pfd, unsigned n);
void ripc__engine_leave(void);
/* The kernel's scheduler tick period, the resolution of
 * CLOCK_MONOTONIC_COARSE (1 / HZ: 4 ms at Debian's HZ=250); the tick
 * falls on its multiples of the monotonic clock.  0 when the kernel gives
 * none between RIPC_TICK_GRID_MIN_NS and RIPC_TICK_GRID_MAX_NS. */
#define RIPC_TICK_GRID_MIN_NS 1000000ull  /* HZ=1000 */
#define RIPC_TICK_GRID_MAX_NS 10000000ull /* HZ=100 */
uint64_t ripc__tick_grid_ns(void);
/* When leave_fd, armed at `now` (ns, the monotonic clock), is to fire:
 * `interval_ns` on, rounded up to a multiple of `grid_ns` (the tick's
 * period, cfg.tick_grid_ns) from 1 ms up, so that arming it reprograms
 * no CPU timer (progress.c); exactly `interval_ns` on when grid_ns is 0.
 * Pure. */
uint64_t ripc__leave_due(uint64_t now, uint64_t interval_ns,
			 uint64_t grid_ns);
/* The calling thread stopped spinning (lock held; now: a recent clock
 * read).  If it was the last and the progress thread sleeps on leave_fd
 * meanwhile, the thread comes back within RIPC_POLL_INTERVAL_US (rounded
 * up to the tick's grid, ripc__leave_due) unless somebody spins again
 * (leave_fd; pushed on at most every half interval, and mostly armed
 * already by spin_begin).  Costs nothing otherwise. */
void ripc__engine_spin_left(uint64_t now);
/* The calling thread starts spinning (lock held; now: a recent clock
 * read): leave_fd is armed one interval ahead (ripc__leave_due) unless
 * it is armed for more than half an interval already, so that
 * spin_left, when the message is there, finds it armed and makes no
 * system call (a timerfd_settime cost 10-35 us on the receive's path
 * when it reprogrammed the CPU's timer, perf_notes.md). */
void ripc__engine_spin_begin(uint64_t now);
int ripc__engine_start(void);
/* Without the lock, after shutting_down is set: joins the threads. */
void ripc__engine_stop(void);
/* Stops only the watchdog; never takes the library lock. */
void ripc__watchdog_stop(void);

/* ---- memory (buffers.c) --------------------------------------------- */
int ripc__mem_init(void);
void ripc__mem_deregister(void);
void ripc__mem_unmap(void);
struct ripc_slot *ripc__slot_get(void);
void ripc__slot_put(struct ripc_slot *s);
struct ripc_slot *ripc__slot_of(const void *p);
/* ripc_buf_free of a received message's buffer (short_items[0]). */
void ripc__slot_release_held(struct ripc_slot *s);
int ripc__post_slot(struct ripc_tp *t, struct ripc_slot *s);
void ripc__owe_slot(struct ripc_tp *t, struct ripc_slot *s);
void ripc__post_owed(struct ripc_tp *t);
int ripc__replenish(struct ripc_tp *t);
void *ripc__desc_for(int tp, const void *p, size_t len);
struct ripc_lreg *ripc__lreg_add(void *base, size_t len, int *err);
void ripc__lreg_del(struct ripc_lreg *r);
struct ripc_lreg *ripc__lreg_alloc_of(const void *p);
struct ripc_lreg *ripc__lreg_user_of(const void *p);
void *ripc__libbuf_alloc(size_t len, bool pull_mem);
/* Bytes ripc_buf_alloc(len) maps: whole pages, whole 2 MiB huge pages
 * from 1 MiB (buffers.c). */
size_t ripc__buf_alloc_len(size_t len);
void ripc__libbuf_free(void *p);
int ripc__key_new(struct ripc_tp *t, uint64_t *key);

/* ---- peers and routes (peer.c) -------------------------------------- */
struct ripc_peer *ripc__peer_get(int tp, const void *addr, size_t len,
				 uint64_t inc, int *err);
void ripc__peers_fini(void);
/* A message came over same-host transport tp from incarnation inc: make
 * the sender a peer (so that it can be forgotten when it ends). */
void ripc__peer_learn(int tp, uint64_t inc);
/* Forget same-host peers whose process ended (engine only). */
void ripc__peers_sweep(void);
/* Has the peer's process ended?  For a transfer with it that has waited
 * since `since` (engine only): only processes of this host can be told,
 * and they are looked at when the transfer has waited RIPC_PEER_CHECK_NS,
 * then at growing gaps up to a second.  *next: when to ask again
 * (unchanged if never). */
bool ripc__peer_ended(struct ripc_peer *p, uint64_t since, uint64_t now,
		      uint64_t *next);
#define RIPC_PEER_CHECK_NS 10000000ull
/* May we post to this peer now?  Over shm, not before it has mapped us
 * (registry.h, accepting a pair); meanwhile it is rung and the caller
 * treats the peer as busy (-EAGAIN).  Cheap once true (one flag). */
bool ripc__peer_ready(struct ripc_peer *p);
/* The same without the ring (the transmit queue may send the message
 * through the doorbell instead, which wakes the peer itself). */
bool ripc__peer_mapped_us(struct ripc_peer *p);
/* Map the processes that formed shm pairs with us (engine only; a load
 * when nobody did). */
void ripc__peers_accept(void);
/* Map the same-host peers made since the last pass (engine only, when
 * CTX->nunmapped): peer_get leaves that to the engine, so that a first
 * message leaves without waiting for it (bell.c). */
void ripc__peers_map(void);
static inline struct ripc_peer *ripc__peer_hold(struct ripc_peer *p)
{
	p->refs++;
	return p;
}
static inline void ripc__peer_put(struct ripc_peer *p)
{
	if (p)
		p->refs--;
}
/* Non-blocking: the route to dest, or RIPC_ENOSERVICE when nobody is
 * known to hold it yet (a query has been sent: wait and ask again).  now:
 * the caller's clock read (a route is re-verified after a second). */
int ripc__route_get(uint16_t dest, uint64_t now, struct ripc_route **out);
void ripc__route_drop(uint16_t dest);
bool ripc__route_current(const struct ripc_route *r);
int ripc__pick_tp(const struct ripc_reg_proc_info *owner);

/* ---- transmit queue (txq.c) ----------------------------------------- */
/* Encode m and hand it to the transport now, or queue it until deadline.
 * Returns RIPC_OK (taken), RIPC_EINPROGRESS with *req (queued; waiter
 * NULL means detached: nobody will look at *req), or an error.  expo[]
 * (0 = none): exposures the message announces; they end with RIPC_EPEER
 * if it is never sent, and a LONG exposure's deadline restarts when it
 * is. */
#define RIPC_EINPROGRESS (-1)
int ripc__tx_send(struct ripc_peer *peer, const struct ripc_wire_out *m,
		  uint64_t deadline, struct ripc_waiter *waiter,
		  const uint64_t *expo, struct ripc_txreq **req);
/* A waiter gives up on its queued request (timeout, shutdown, the route
 * moved): its exposures end quietly and it is freed. */
void ripc__tx_cancel(struct ripc_txreq *r);
/* A waiter is done with a request that left the queue; frees it. */
void ripc__tx_free(struct ripc_txreq *r);
/* Engine: post what was queued; a SEND completion. */
void ripc__tx_flush(uint64_t now);
void ripc__tx_send_done(struct ripc_tp *t, struct ripc_slot *s, int err);
bool ripc__tx_pending(void);
void ripc__tx_fini(void);

/* ---- exposures (expose.c) ------------------------------------------- */
/* Register items for peer (access RIPC_ACC_*), fresh keys; describe them
 * in desc[].  Zero-length items are described as {0, 0, 0}. */
int ripc__expose(struct ripc_peer *peer, uint64_t peer_inc, uint8_t kind,
		 uint16_t src, uint16_t dest, void *const *buf,
		 const uint32_t *len, uint16_t n, uint64_t deadline,
		 struct ripc_wire_desc *desc, struct ripc_expo **out);
struct ripc_expo *ripc__expose_find(uint64_t id, uint64_t peer_inc);
struct ripc_expo *ripc__expose_by_id(uint64_t id);
/* End an exposure: registrations closed, outcome recorded (status
 * RIPC_OK / RIPC_EPEER / RIPC_EEXPIRED / RIPC_ECANCELED / RIPC_ESHUTDOWN;
 * quiet: the peer never learnt of it, no event). */
void ripc__expose_end(struct ripc_expo *e, int status, bool quiet);
void ripc__expose_end_id(uint64_t id, int status);
void ripc__expose_end_id_quiet(uint64_t id);
/* The same with a status per item (an offer: written ones RIPC_OK). */
void ripc__expose_end_each(struct ripc_expo *e, const uint8_t *status);
/* Record the end of a use of the application's memory that was not an
 * exposure (a reply written into a peer's return buffer). */
void ripc__expose_note(const void *buf, uint32_t len, uint16_t dest,
		       int status);
/* Timers return their next deadline (UINT64_MAX: none). */
uint64_t ripc__expose_timers(uint64_t now);
bool ripc__expose_covers(const void *p);
/* Outcome of the most recent exposure of p: RIPC_OK if none known. */
int ripc__expose_outcome(const void *p);
uint64_t ripc__expose_new_seq(void);
int ripc__expose_events(struct ripc_release *ev, int max);
bool ripc__expose_events_pending(void);
void ripc__expose_fini(void);

/* ---- messaging: sends (send.c) -------------------------------------- */
struct ripc_send_args {
	uint16_t src, dest;
	void **buf;
	uint32_t *len;
	uint16_t n;
	void **rbuf;
	uint32_t *rlen;
	uint16_t nr;
	uint64_t total;
	uint64_t now; /* the call's clock read: deadlines count from it */
};
/* One attempt along route r: RIPC_OK (handed to the transport),
 * RIPC_EINPROGRESS (*req queued for waiter, who waits for it or cancels
 * it), or an error.  A multicast send never returns RIPC_EINPROGRESS:
 * members that cannot take their copy at once get it queued, detached. */
int ripc__send_short(const struct ripc_send_args *a, struct ripc_route *r,
		     struct ripc_waiter *waiter, struct ripc_txreq **req);
int ripc__send_long(const struct ripc_send_args *a, struct ripc_route *r,
		    struct ripc_waiter *waiter, struct ripc_txreq **req);

/* ---- messaging: services and their queues (service.c) ---------------- */
struct ripc_service *ripc__svc_new(uint16_t id, bool mcast);
void ripc__svc_destroy(struct ripc_service *svc);
void ripc__svc_fini(void);
struct ripc_msg *ripc__msg_alloc(unsigned nshort, unsigned nlong);
void ripc__msg_free(struct ripc_msg *m);
void ripc__msg_enqueue(struct ripc_service *svc, struct ripc_msg *m);
void ripc__msg_ready(struct ripc_msg *m);
struct ripc_msg *ripc__msg_take(struct ripc_service *svc);
void ripc__msg_putback(struct ripc_service *svc, struct ripc_msg *m);
/* Make ripc_get_fd()'s eventfd tell the truth again (util.c). */
void ripc__appfd_update(void);

/* ---- messaging: receiving (recv.c, dispatch.c, pull.c, windows.c) ---- */
struct ripc_recv_out {
	uint16_t *from;
	void ***short_items;
	uint32_t **short_sizes;
	uint16_t *num_short;
	void ***long_items;
	uint32_t **long_sizes;
	uint16_t *num_long;
};
/* Hand a taken message to the caller: RIPC_OK or the message's own code
 * (RIPC_ETRUNC, RIPC_EPULL); RIPC_ENOMEM leaves it untouched (put it
 * back).  Frees it otherwise. */
int ripc__recv_hand_over(struct ripc_msg *m, const struct ripc_recv_out *o);
void ripc__dispatch(struct ripc_tp *t, struct ripc_slot *s, size_t len);
/* Give a received slot back to t's receives (or to the pool). */
void ripc__slot_repost(struct ripc_tp *t, struct ripc_slot *s);
/* Framing (frag.c), before the decoder: true with (*s, *len) a whole
 * message to decode; false when the slot was consumed (a fragment kept
 * or copied, or refused). */
bool ripc__frag_input(struct ripc_tp *t, struct ripc_slot **s, size_t *len);
/* Drop messages whose fragments stopped coming; the next deadline. */
uint64_t ripc__frag_timers(uint64_t now);
void ripc__frag_fini(void);
/* A message that came through the doorbell socket (bell.c) from process
 * pid: dispatched as if it came over t once its sender proves to be the
 * process the registry knows by the incarnation it claims.  The slot is
 * taken over (never posted). */
void ripc__dispatch_mail(struct ripc_tp *t, struct ripc_slot *s, size_t len,
			 pid_t pid);
void ripc__recv_slot_done(struct ripc_tp *t, struct ripc_slot *s, int err,
			  size_t len);
void ripc__pull_start(struct ripc_peer *peer, uint64_t cookie,
		      struct ripc_msg *m, const struct ripc_wire_desc *descs,
		      const uint16_t *pos, unsigned count);
void ripc__pull_read_done(struct ripc_read_op *op, int err);
void ripc__pull_post_reads(void);
uint64_t ripc__pull_timers(uint64_t now);
bool ripc__pull_pending(void);
void ripc__pull_fini(void);
/* Done messages held back (see pull.c).  take: the one held for `peer`
 * at incarnation `inc`, handed to the caller to carry in its short
 * message (0: none); give_back: that message did not go, send it alone;
 * flush: send alone those due at `now`, or all of them (now == 0). */
uint64_t ripc__done_take(struct ripc_peer *peer, uint64_t inc);
void ripc__done_give_back(struct ripc_peer *peer, uint64_t cookie);
void ripc__done_flush(uint64_t now);
bool ripc__svc_pulling(const struct ripc_service *svc);
struct ripc_window *ripc__window_take(uint16_t service, size_t len);
void ripc__window_return(struct ripc_window *w);
void ripc__window_consumed(struct ripc_window *w);
void ripc__windows_fini(void);
void ripc__windows_drop_service(uint16_t service);
int ripc__window_add(void *base, size_t size, int32_t service);
int ripc__window_remove(void *base);

#endif
