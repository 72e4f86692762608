/*
 * Resolution across hosts: an ARP-like resolver over UDP multicast (the
 * libRIPC paper's design).  A process that cannot find a service ID in its
 * host registry multicasts a QUERY; the process holding the ID answers
 * (unicast, to the querier's private port) with its incarnation, host
 * identity and transport addresses.  Answers are cached.  Registrations and
 * unregistrations are multicast as ANNOUNCEs, so caches follow a service
 * that restarts or moves without waiting for a failure.
 *
 * Datagram format and checks: ripc_protocol(7), RESOLVER.
 */
#ifndef RIPC_RESOLVER_H
#define RIPC_RESOLVER_H

#include <stdbool.h>
#include <stdint.h>

#include "registry.h"

#define RIPC_RES_MAX_MEMBERS 256
#define RES_HDR 40
#define RES_MAX_DGRAM (RES_HDR + RIPC_PROV_MAX * (2 + RIPC_ADDR_MAX))

/* A resolver datagram (layout: ripc_protocol(7), RESOLVER). */
struct res_dgram {
	uint8_t type, flags, naddr;
	uint16_t service, reply_port;
	uint64_t nonce;
	struct ripc_reg_proc_info info;
};

/* Encode (buf >= RES_MAX_DGRAM bytes) / validate-and-decode a datagram;
 * exposed for the unit tests and the fuzzer. */
size_t ripc__res_encode(const struct res_dgram *d, uint8_t *buf);
bool ripc__res_decode(const uint8_t *buf, size_t len, struct res_dgram *d);

/* Open the sockets (no-op when RIPC_RESOLVER=0).  0 or RIPC_E*. */
int ripc__resolver_open(void);
void ripc__resolver_close(void);
/* Sockets the progress thread waits on (-1 if closed). */
int ripc__resolver_fd(int which);
/* Read and handle every pending datagram.  Lock held. */
int ripc__resolver_input(void);
/* Sleep until an answer may be there (of the resolver, or of the service
 * directory: its wait fd is drained here), at most timeout_us (< 1 s).
 * Called WITHOUT the library lock, between enter and leave, which are
 * called with it held: input another thread reads meanwhile wakes the
 * waiter. */
void ripc__resolver_wait_enter(void);
void ripc__resolver_wait_leave(void);
void ripc__resolver_wait(unsigned timeout_us);
/* Timers: repeated announces, async refreshes.  Lock held.  Returns the
 * next deadline (UINT64_MAX: none). */
uint64_t ripc__resolver_timers(uint64_t now);

/* Cached knowledge of a remote ID: 1 (unicast: out[0]), the number of
 * remote members (multicast, *mcast set), or 0 if nothing fresh is known.
 * `ttl_ok` is set when the record is younger than the TTL; older records
 * are still returned while a refresh is pending (up to twice the TTL). */
int ripc__resolver_lookup(uint16_t id, struct ripc_reg_proc_info *out,
			  int max, bool *mcast);
/* Ask the network (non-blocking; rate-limited per ID). */
void ripc__resolver_query(uint16_t id);
/* Forget what is cached about id (after sends to it failed). */
void ripc__resolver_forget(uint16_t id);
/* Changes whenever the cache changes (routes are rebuilt then). */
uint64_t ripc__resolver_version(void);

/* Tell the network that this process now holds (up) or no longer holds
 * (down) an ID; repeated a few times (UDP may drop). */
void ripc__resolver_announce(uint16_t id, bool up, bool mcast);

bool ripc__resolver_enabled(void);
/* The resolver runs on a loopback interface: only this host hears it. */
bool ripc__resolver_loopback(void);
/* "multicast <group>:<port> via <address>" or "off", for messages. */
void ripc__resolver_describe(char *buf, unsigned len);

/*
 * Duplicate detection across hosts (no directory; ripc_protocol(7),
 * RESOLVER).  All four are called with the library lock held and never
 * block; the caller waits between them without the lock (for example in
 * ripc__resolver_wait), for up to ripc__resolver_probe_ns(), while answers
 * arrive through ripc__resolver_input() (the progress thread's, or the
 * caller's own after it takes the lock again).
 *
 * probe_ns: the window to listen in; 0 when there is nothing to do (the
 *   resolver is off or on loopback, a directory is configured, or
 *   RIPC_RESOLVER_PROBE_MS=0).
 * probe_begin: multicast a PROBE for id (mcast: the caller joins a
 *   multicast group, which conflicts only with unicast holders) and start
 *   listening.  0; -ENOSYS (probe_ns is 0), -EALREADY (this process is
 *   already probing id), -EBUSY (too many probes at once: the caller goes
 *   on without one), -EIO (no random nonce).
 * probe_result: 0 while nobody objected, -EEXIST once another process
 *   holds id (or probes it with a lower incarnation), -ENOENT if id is not
 *   being probed.  Sends the PROBE a second time halfway through the
 *   window.
 * probe_end: forget the probe (always, after probe_begin returned 0);
 *   `by`, if not NULL, receives who objected (zeroed if nobody did).
 */
uint64_t ripc__resolver_probe_ns(void);
int ripc__resolver_probe_begin(uint16_t id, bool mcast);
int ripc__resolver_probe_result(uint16_t id);
void ripc__resolver_probe_end(uint16_t id, struct ripc_reg_proc_info *by);

#endif
