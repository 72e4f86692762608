/*
 * libripc - the libRIPC programming model over libfabric.
 *
 * Public API.  The first block of functions keeps the published libRIPC
 * signatures and return conventions so that existing libRIPC programs
 * compile and link unchanged with -lripc.  The second block holds this
 * library's extensions; every function has a man page (man 3 <name>).
 *
 * Return conventions (inherited from libRIPC):
 *   ripc_register_service_id, ripc_register_multicast_service_id and
 *   ripc_buf_unregister return 1 on success and 0 on failure;
 *   ripc_register_random_service_id returns the new ID, or
 *   RIPC_INVALID_SERVICE_ID on failure;
 *   every other uint8_t function returns 0 (RIPC_OK) on success and a
 *   RIPC_E* code on failure.  ripc_last_error() gives the code of the most
 *   recent failure in the calling thread, ripc_strerror() its text.
 */
#ifndef RIPC_H
#define RIPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Compatibility constants from libRIPC.  They are not limits of this
 * library: see ripc_limit(3) and RIPC_SHORT_MAX. */
#define RECV_BUF_SIZE 2000
#define NUM_RECV_BUFFERS 10

#define RIPC_VERSION_MAJOR 0
#define RIPC_VERSION_MINOR 2
#define RIPC_VERSION_PATCH 0

/* Service IDs are 0 ... RIPC_MAX_SERVICE_ID. */
#define RIPC_MAX_SERVICE_ID 65534
#define RIPC_INVALID_SERVICE_ID 65535

/* Protocol limits (fixed by the wire protocol, see ripc_protocol(7)). */
#define RIPC_MAX_ITEMS 64            /* items per message */
#define RIPC_MAX_RETURN_BUFS 64      /* return buffers per message */
#define RIPC_SHORT_MAX 65536         /* bytes of all short items together */
#define RIPC_LONG_ITEM_MAX 0xffffffffu /* bytes of one long item */

/* Error codes.  0 is success; every code fits in uint8_t. */
enum ripc_error {
	RIPC_OK = 0,
	RIPC_EINVAL = 1,      /* invalid argument (NULL, zero length, ...) */
	RIPC_ENOMEM = 2,      /* out of memory or registration resources */
	RIPC_EBADID = 3,      /* service ID out of range (e.g. 65535) */
	RIPC_EINUSE = 4,      /* service ID already held by a live process */
	RIPC_ENOTOWNER = 5,   /* this process does not hold that service */
	RIPC_ENOSERVICE = 6,  /* destination not registered (resolve timeout) */
	RIPC_E2BIG = 7,       /* message larger than the short maximum */
	RIPC_ETOOMANY = 8,    /* more items or return buffers than allowed */
	RIPC_ETIMEDOUT = 9,   /* operation did not complete in time */
	RIPC_EINTR = 10,      /* interrupted by a signal handler */
	RIPC_EPEER = 11,      /* peer unreachable, dead or restarted */
	RIPC_ETRANSPORT = 12, /* libfabric reported an error */
	RIPC_ENOPROVIDER = 13,/* no usable fabric provider */
	RIPC_EPULL = 14,      /* a long item could not be pulled */
	RIPC_ENOTFOUND = 15,  /* no such buffer or window */
	RIPC_EREGISTRY = 16,  /* the service registry is unusable */
	RIPC_ENOTSUP = 17,    /* not supported in this configuration */
	RIPC_ESHUTDOWN = 18,  /* the library is shutting down */
	RIPC_EAGAIN = 19,     /* nothing available (non-blocking call) */
	RIPC_ETRUNC = 20,     /* some long items found no room (ripc_receive) */
	RIPC_EEXPIRED = 21,   /* exposure ended: the peer did not finish in time */
	RIPC_ECANCELED = 22,  /* cancelled by this process (or left unused) */
	RIPC_ERROR_MAX
};

/* ---- libRIPC API ---------------------------------------------------- */

uint16_t ripc_register_random_service_id(void);
uint8_t ripc_register_service_id(int service_id);
uint8_t ripc_register_multicast_service_id(int service_id);

void *ripc_buf_alloc(size_t size);
void *ripc_buf_realloc(void *buf, size_t size);
void ripc_buf_free(void *buf);
uint8_t ripc_buf_register(void *buf, size_t size);
uint8_t ripc_buf_unregister(void *buf);

uint8_t ripc_reg_recv_window(void *base, size_t size);
uint8_t ripc_reg_recv_window_for_service(void *base, size_t size,
					 uint16_t service);

uint8_t ripc_send_short(uint16_t src, uint16_t dest, void **buf,
			uint32_t *length, uint16_t num_items,
			void **return_bufs, uint32_t *return_buf_lengths,
			uint16_t num_return_bufs);
uint8_t ripc_send_long(uint16_t src, uint16_t dest, void **buf,
		       uint32_t *length, uint16_t num_items,
		       void **return_bufs, uint32_t *return_buf_lengths,
		       uint16_t num_return_bufs);

uint8_t ripc_receive(uint16_t service_id, uint16_t *from_service_id,
		     void ***short_items, uint32_t **short_item_sizes,
		     uint16_t *num_short_items, void ***long_items,
		     uint32_t **long_item_sizes, uint16_t *num_long_items);

/* ---- Extensions ----------------------------------------------------- */

uint8_t ripc_init(void);
void ripc_finalize(void);

uint8_t ripc_unregister_service_id(int service_id);

/* timeout_ms < 0 waits forever, 0 polls once. */
uint8_t ripc_receive_timeout(uint16_t service_id, uint16_t *from_service_id,
			     void ***short_items, uint32_t **short_item_sizes,
			     uint16_t *num_short_items, void ***long_items,
			     uint32_t **long_item_sizes,
			     uint16_t *num_long_items, int timeout_ms);

/* Readable whenever a message waits in the queue of any local service, or
 * (once ripc_release_poll() was called) a release event is pending. */
int ripc_get_fd(void);

/* Drive the library's progress once (needed only with RIPC_PROGRESS=manual).
 * Returns the number of events handled. */
int ripc_progress(void);

/* Long-send buffers: is any byte of [buf, buf+1) still exposed to a peer,
 * and wait until it is not. */
int ripc_buf_exposed(const void *buf);
uint8_t ripc_wait_released(const void *buf, int timeout_ms);

/* How an exposure ended, for event loops: one event per item of a long
 * send (kind LONG) and per offered return buffer (kind RETURN).  status is
 * RIPC_OK (pulled / reply written into it), RIPC_EPEER (the peer gave up
 * or refused), RIPC_EEXPIRED (no word from the peer in time),
 * RIPC_ECANCELED (cancelled, or an offer left unused) or RIPC_ESHUTDOWN.
 * Events are recorded from the first call of ripc_release_poll() on. */
enum ripc_release_kind {
	RIPC_RELEASE_LONG = 1,
	RIPC_RELEASE_RETURN = 2,
};
struct ripc_release {
	const void *buf;  /* the item's first byte, as the application gave it */
	uint32_t length;
	uint16_t service; /* the service it was exposed to */
	uint8_t kind;     /* enum ripc_release_kind */
	uint8_t status;   /* RIPC_OK or an RIPC_E* code, see above */
};
/* Non-blocking: up to max events, oldest first; returns their number, or
 * -1 on error (ripc_last_error). */
int ripc_release_poll(struct ripc_release *events, int max);

uint8_t ripc_unreg_recv_window(void *base);

/* Return buffers offered to peers that have not been used. */
uint8_t ripc_return_bufs_cancel(uint16_t dest);

enum ripc_limit {
	RIPC_LIMIT_SHORT_PAYLOAD = 1, /* max bytes of all short items */
	RIPC_LIMIT_ITEMS,             /* max items per message */
	RIPC_LIMIT_RETURN_BUFS,       /* max return buffers per message */
	RIPC_LIMIT_LONG_ITEM,         /* max bytes of one long item */
	RIPC_LIMIT_QUEUE,             /* max queued messages per service */
	RIPC_LIMIT_RESOLVE_TIMEOUT_MS,
	RIPC_LIMIT_SEND_TIMEOUT_MS,
	RIPC_LIMIT_LONG_TIMEOUT_MS,
};
uint64_t ripc_limit(enum ripc_limit which);

const char *ripc_strerror(int err);
int ripc_last_error(void);

/* Name of the transport used to reach a service ("shm", "tcp", "verbs"),
 * resolving it if needed; NULL if unreachable. */
const char *ripc_transport_of(uint16_t service);

/* Logging: messages at or above RIPC_LOG_LEVEL go to stderr, or to the
 * application's handler once one is set (NULL restores stderr). */
enum ripc_log_level {
	RIPC_LOG_NONE = 0,
	RIPC_LOG_ERROR,
	RIPC_LOG_WARN,
	RIPC_LOG_INFO,
	RIPC_LOG_DEBUG,
};
typedef void (*ripc_log_handler)(int level, const char *message, void *arg);
void ripc_set_log_handler(ripc_log_handler handler, void *arg);

struct ripc_stats {
	uint64_t short_sent, short_recv;
	uint64_t long_sent, long_recv;
	uint64_t bytes_sent_short, bytes_recv_short;
	uint64_t bytes_exposed_long, bytes_pulled_long;
	uint64_t bytes_return_written;
	uint64_t return_replies_sent, return_replies_recv;
	uint64_t drops_malformed, drops_no_service, drops_stale,
		drops_queue_full, drops_forged;
	uint64_t send_retries, send_timeouts;
	uint64_t resolutions, resolve_failures;
	uint64_t registrations, deregistrations;
	uint64_t long_released, long_timeouts, pulls_failed;
	uint64_t window_hits, library_buffers;
	uint64_t release_events_dropped; /* ripc_release_poll queue full */
	/* Doorbells (same-host wake-ups, see ripc(7) NOTES): rung for
	 * peers whose progress slept, and received. */
	uint64_t bell_rings, bell_wakeups;
	/* Same-host peers reached over tcp because shm was full. */
	uint64_t shm_fallback_tcp;
	/* Peers forgotten because their process had ended. */
	uint64_t peers_reaped;
	/* Sends to a random ID whose holder on this host had ended: failed
	 * at once (RIPC_ENOSERVICE) instead of after the resolve timeout. */
	uint64_t resolve_gone;
	/* Receives that slept on the transports themselves and were woken
	 * by them (direct wake, see ripc(7) NOTES). */
	uint64_t direct_wakeups;
	/* Messages sent to, and received from, same-host peers through
	 * their doorbell socket while the shm connection was being set up
	 * (first contact, see ripc(7) NOTES). */
	uint64_t bell_msgs_sent, bell_msgs_recv;
	/* Peers forgotten to make room in a full peer table (their routes
	 * are looked up again when next used). */
	uint64_t peers_evicted;
	/* Pulls, long sends and return-buffer offers ended because the
	 * peer's process on this host had ended (RIPC_EPULL, RIPC_EPEER)
	 * instead of at RIPC_PULL_TIMEOUT_MS, RIPC_LONG_TIMEOUT_MS or
	 * RIPC_RETURN_TIMEOUT_MS. */
	uint64_t peer_ended_transfers;
	/* Done messages of finished pulls held back for an answer
	 * (RIPC_DONE_DELAY_US): carried by a short message of this process
	 * to the sender, or sent alone after all; and done messages
	 * received inside a short message. */
	uint64_t dones_carried, dones_alone, dones_carried_recv;
	/* Messages sent to, and received from, same-host peers as trains
	 * of shm injects (RIPC_FRAG_MAX, see ripc(7) TRANSPORTS). */
	uint64_t frag_msgs_sent, frag_msgs_recv;
	/* Yields of busy-polling calls (past their first 10 us), and those
	 * of them that gave the CPU away for over 0.5 ms, after each of
	 * which the thread did not yield for 100 ms (see ripc(7)
	 * RIPC_SPIN_US). */
	uint64_t spin_yields, spin_yields_slow;
	/* Cached routes forgotten because they led nowhere: to a process
	 * that ended, say a client that came and went (see ripc(7)
	 * LIMITS). */
	uint64_t routes_freed;
};
/* Copies min(size, sizeof(struct ripc_stats)) bytes of counters. */
uint8_t ripc_stats(struct ripc_stats *stats, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* RIPC_H */
