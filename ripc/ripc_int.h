/*
 * Core internals shared by the files of ripc/.  No libfabric here: the
 * transports are reached only through ripc_prov.h.
 *
 * Concurrency: one mutex (ctx.lock) protects all core state and serialises
 * every call into a transport.  Whoever holds it may poll the transports
 * (an application thread inside a send or receive, or the progress
 * thread).  Threads blocked in a receive sleep outside the lock on their
 * own eventfd, so a signal interrupts them (RIPC_EINTR).
 */
#ifndef RIPC_INT_H
#define RIPC_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "env.h"
#include "log.h"
#include "ripc.h"
#include "registry.h"
#include "ripc_prov.h"
#include "wire.h"

#define RIPC_API __attribute__((visibility("default")))

#define RIPC_SLOT_SIZE ((RIPC_WIRE_MAX + 4095) & ~(size_t)4095)

/* ---- small helpers -------------------------------------------------- */

uint64_t ripc__now_ns(void);
static inline uint64_t ripc__ms_ns(int64_t ms)
{
	return (uint64_t)ms * 1000000ull;
}
/* Random bytes from the kernel CSPRNG; aborts the operation on failure. */
int ripc__random(void *buf, size_t len);
/* 64 random bits from a pooled CSPRNG draw (lock held). */
int ripc__random_u64(uint64_t *out);
void ripc__random_forget(void);

int ripc__set_err(int err);
int ripc__err_from_errno(int neg_errno);

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

/* ---- operation contexts handed to transports ------------------------ */

enum ripc_op_kind {
	RIPC_OP_RECV = 1, /* a receive slot */
	RIPC_OP_SEND,     /* a tx bounce buffer */
	RIPC_OP_READ,     /* one chunk of a pull */
	RIPC_OP_WRITE,    /* one return-buffer write */
};

struct ripc_op {
	uint8_t kind; /* enum ripc_op_kind; first member of every context */
};

/* ---- memory --------------------------------------------------------- */

/* A local registration (for FI_MR_LOCAL descriptors). */
struct ripc_lreg {
	struct ripc_list link;
	uint8_t *base;
	size_t len;
	bool from_alloc; /* made by ripc_buf_alloc (freed with it) */
	bool user;       /* made by ripc_buf_register */
	bool pull_mem;   /* counted in ctx.pull_mem until freed */
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

/* ---- transports and peers ------------------------------------------- */

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
	uint64_t last_event_ns; /* last completion seen */
	uint64_t last_poll_ns;
};

/* A remote process reachable on one transport. */
struct ripc_peer {
	struct ripc_peer *hnext; /* hash chain by (tp, address) */
	uint64_t inc;            /* the process's incarnation */
	uint64_t handle;         /* transport peer handle */
	uint64_t last_used_ns;
	uint32_t refs;           /* routes, sends, pulls, offers using it */
	uint32_t ndeferred;      /* messages waiting in ctx.deferred */
	uint32_t flush_gen;      /* last flush pass that found it busy */
	int8_t tp;
	uint8_t addrlen;
	uint8_t addr[RIPC_ADDR_MAX];
};

/* Cached resolution of a remote service ID. */
struct ripc_route {
	uint64_t reg_version; /* registry version it was made at */
	uint64_t res_version; /* resolver cache version it was made at */
	uint64_t dir_version; /* directory cache version (issue 13) */
	struct ripc_peer *peer;
	uint64_t inc;
	uint64_t host_id;
	uint64_t verified_ns; /* last time the owner was seen alive */
	bool mcast;
	uint16_t nmembers;
	struct ripc_peer **members; /* multicast: one peer per member */
	uint64_t *member_inc;
};

/* ---- messages ------------------------------------------------------- */

enum ripc_item_origin {
	RIPC_ORIGIN_WINDOW = 1, /* an application receive window */
	RIPC_ORIGIN_LIBBUF,     /* allocated by the library (ripc_buf_free) */
	RIPC_ORIGIN_RETBUF,     /* the application's own return buffer */
	RIPC_ORIGIN_NONE,       /* not delivered */
};

struct ripc_window {
	struct ripc_list link;
	uint8_t *base;
	size_t size;
	int32_t service; /* -1 = process-wide */
	struct ripc_lreg *lreg; /* local registration when mr_local */
};

struct ripc_pull;

/* A received message queued on a service. */
struct ripc_msg {
	struct ripc_list link;
	uint16_t from, to;
	uint64_t src_inc;
	bool ready;  /* false while long items are still being pulled */
	int err;     /* RIPC_OK, RIPC_EPULL, RIPC_ETRUNC */
	struct ripc_slot *slot; /* holds the short items; NULL if none */
	uint16_t nshort, nlong;
	void *short_ptr[RIPC_MAX_ITEMS];
	uint32_t short_len[RIPC_MAX_ITEMS];
	void *long_ptr[RIPC_MAX_ITEMS];
	uint32_t long_len[RIPC_MAX_ITEMS];
	uint8_t long_origin[RIPC_MAX_ITEMS];
	struct ripc_pull *pull;
};

/* A long message being pulled by this process. */
struct ripc_pull {
	struct ripc_list link;   /* ctx.pulls */
	struct ripc_msg *msg;    /* NULL once abandoned */
	struct ripc_peer *peer;
	uint64_t cookie;
	uint64_t deadline;
	uint16_t n;
	unsigned chunks_out;     /* reads posted, not completed */
	int err;
	struct ripc_pull_item {
		uint64_t raddr, key;
		uint32_t len;
		uint64_t next; /* next byte offset to post */
		uint64_t done; /* bytes completed */
		uint8_t *dst;
		void *desc;
		struct ripc_window *win; /* window used (returned on error) */
	} item[RIPC_MAX_ITEMS];
	struct ripc_list readq;  /* link in ctx.readq while it has chunks */
	bool queued;
};

struct ripc_read_op {
	struct ripc_op op;
	struct ripc_pull *pull;
	uint16_t item;
	uint64_t off;
	uint64_t len;
	int8_t tp;
	uint8_t retries;
	struct ripc_list retry; /* in ctx.read_retry while waiting */
	struct ripc_list posted; /* in ctx.reads while with the transport */
};

/* A long send of this process whose buffers are exposed. */
struct ripc_lsend {
	struct ripc_list link;
	uint64_t cookie;
	struct ripc_peer *peer;
	uint64_t peer_inc;
	uint64_t deadline;
	uint16_t n;
	const uint8_t *buf[RIPC_MAX_ITEMS];
	uint32_t len[RIPC_MAX_ITEMS];
	struct ripc_prov_mr mr[RIPC_MAX_ITEMS];
};

/* A message the transport did not take at once, retried by progress in
 * order (multicast members: a slow member must not hold up the others). */
struct ripc_deferred {
	struct ripc_list link; /* ctx.deferred, oldest first */
	struct ripc_peer *peer;
	struct ripc_slot *slot; /* the encoded message */
	size_t len;
	uint64_t deadline;
};

/* ---- services ------------------------------------------------------- */

struct ripc_waiter {
	struct ripc_list link;
	int efd;
};

struct ripc_service {
	uint16_t id;
	bool mcast;
	struct ripc_list queue; /* struct ripc_msg, arrival order */
	unsigned qlen;
	unsigned nready;
	struct ripc_list waiters;
};

/* ---- the context ---------------------------------------------------- */

struct ripc_ctx {
	pthread_mutex_t lock;
	bool initialized;
	bool shutting_down;
	int init_err;
	uint64_t incarnation;
	uint64_t host_id;

	struct ripc_tp tp[RIPC_PROV_MAX];
	unsigned ntp;

	struct ripc_service *svc[RIPC_MAX_SERVICE_ID + 1];
	struct ripc_route *route[RIPC_MAX_SERVICE_ID + 1];
	unsigned nsvc;

	struct ripc_peer *peer_hash[256];
	unsigned npeers;

	/* memory */
	struct ripc_list lregs;   /* struct ripc_lreg */
	struct ripc_arena *arenas;
	struct ripc_slot *free_slots;
	size_t nslots;
	struct ripc_list windows; /* struct ripc_window */

	/* long messages */
	struct ripc_list lsends;  /* struct ripc_lsend */
	struct ripc_list pulls;   /* struct ripc_pull */
	struct ripc_list readq;   /* pulls with chunks left to post */
	struct ripc_list read_retry; /* read chunks to post again */
	struct ripc_list reads;      /* read chunks posted, not completed */
	struct ripc_list deferred;   /* struct ripc_deferred */
	unsigned ndeferred;
	uint32_t flush_gen;
	uint64_t pull_mem;        /* library bytes allocated by pulls */

	/* progress */
	pthread_t thread;
	bool thread_running;
	int wake_fd;              /* eventfd: wakes the progress thread */
	int app_fd;               /* eventfd: ripc_get_fd() */
	unsigned queued_total;    /* messages waiting over all services */
	unsigned spinners;        /* app threads busy-polling in a receive */
	unsigned nwaiters;        /* app threads asleep in a receive */
	uint64_t app_active_ns;   /* last time an app thread was in a call */
	uint64_t last_traffic_ns; /* last time the progress thread saw events */
	uint64_t next_timer_ns;   /* next timeout scan */
	unsigned poll_calls;
	uint64_t last_resolver_ns;
	uint64_t stats_published_ns;

	/* configuration */
	struct {
		uint64_t resolve_timeout_ns, send_timeout_ns, long_timeout_ns,
			pull_timeout_ns, spin_ns, spin_pull_ns, poll_interval_us,
			busy_poll_us;
		unsigned rx_depth, queue_max;
		uint64_t return_timeout_ms;
		uint64_t pull_mem_max, read_chunk;
		bool manual_progress;
	} cfg;

	struct ripc_stats stats;
};

extern struct ripc_ctx ripc__ctx;
#define CTX (&ripc__ctx)

/* Lazily initialise; returns RIPC_OK or an error (also set as last). */
int ripc__ensure_init(void);
static inline void ripc__lock(void)
{
	pthread_mutex_lock(&CTX->lock);
}
static inline void ripc__unlock(void)
{
	pthread_mutex_unlock(&CTX->lock);
}

/* buffers.c */
int ripc__arena_init(void);
void ripc__arena_fini(void);
struct ripc_slot *ripc__slot_get(void);
void ripc__slot_put(struct ripc_slot *s);
struct ripc_slot *ripc__slot_of(const void *p);
int ripc__post_slot(struct ripc_tp *t, struct ripc_slot *s);
int ripc__replenish(struct ripc_tp *t);
void *ripc__desc_for(int tp, const void *p, size_t len);
struct ripc_lreg *ripc__lreg_add(void *base, size_t len, int *err);
void ripc__lreg_del(struct ripc_lreg *r);
void *ripc__libbuf_alloc(size_t len);
void ripc__libbuf_free(void *p);
void ripc__libbuf_cache_fini(void);
void ripc__libbuf_cache_forget(void);
int ripc__key_new(struct ripc_tp *t, uint64_t *key);

/* peer.c */
struct ripc_peer *ripc__peer_get(int tp, const void *addr, size_t len,
				 uint64_t inc, int *err);
void ripc__peers_fini(void);
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
int ripc__resolve(uint16_t dest, struct ripc_route **out, uint64_t deadline);
void ripc__route_drop(uint16_t dest);
bool ripc__route_current(const struct ripc_route *r);
int ripc__pick_tp(const struct ripc_reg_proc_info *owner);

/* send.c */
int ripc__send_msg(struct ripc_peer *peer, const struct ripc_wire_out *m,
		   uint64_t deadline);
void ripc__lsend_release(struct ripc_lsend *ls, bool timed_out);
void ripc__send_done(struct ripc_peer *peer, uint64_t cookie,
		     uint32_t status);
void ripc__deferred_flush(uint64_t now);
void ripc__deferred_fini(void);

/* progress.c */
int ripc__progress_locked(void);
void ripc__progress_wait(uint64_t deadline);
int ripc__thread_start(void);
void ripc__thread_stop(void);
void ripc__progress_kick(void);
void ripc__watchdog_start(void);
void ripc__watchdog_stop(void);
void ripc__timers(uint64_t now);

/* recv.c */
void ripc__dispatch(struct ripc_tp *t, struct ripc_slot *s, size_t len);
void ripc__pull_read_done(struct ripc_read_op *op, int err);
void ripc__pull_post_reads(void);
void ripc__msg_ready(struct ripc_service *svc, struct ripc_msg *m);
void ripc__queued_dec(void);
void ripc__msg_free(struct ripc_msg *m);
void ripc__pull_abandon(struct ripc_pull *p);

/* service.c */
struct ripc_service *ripc__svc_get(uint16_t id);
void ripc__wake_waiters(struct ripc_service *svc);

/* windows.c */
struct ripc_window *ripc__window_take(uint16_t service, size_t len);
void ripc__window_return(struct ripc_window *w);
void ripc__window_consumed(struct ripc_window *w);
void ripc__windows_fini(void);
void ripc__windows_drop_service(uint16_t service);
void ripc__msg_cache_fini(void);

#endif
