/*
 * The service directory: resolution across hosts through an existing
 * coordination service (RIPC_DIRECTORY=zk://host:port,host:port/chroot).
 *
 * The host registry stays the fast path for services on this host; the
 * directory is authoritative across hosts.  A registration is an ephemeral
 * record that lives as long as the holder's session; lookups are cached
 * and invalidated by watches, so a restart or a move is seen without
 * polling.  Node layout and semantics: ripc_protocol(7), DIRECTORY.
 *
 * One engine per URL scheme behind struct ripc_dir_ops; directory.c holds
 * the generic part (URL parsing, engine table, the process's one
 * instance).  Engines run threads of their own (the ZooKeeper client
 * does): every op below is safe to call from any thread, with or without
 * the library lock, and an engine never calls back into the core except
 * through the holder_alive hook in its configuration, which must not take
 * the library lock.
 */
#ifndef RIPC_DIRECTORY_H
#define RIPC_DIRECTORY_H

#include <stdbool.h>
#include <stdint.h>

#include "registry.h"

struct ripc_dir; /* an engine's connection */

struct ripc_dir_cfg {
	/* Session timeout asked of the service: a holder that died on
	 * another host is replaced after at most about this long. */
	unsigned session_timeout_ms;
	/* This process, as published with each registration. */
	struct ripc_reg_proc_info self;
	uint64_t self_starttime; /* with self.pid: proves liveness on a host */
	/* Is the holder of a record still alive?  Asked only for records of
	 * this host (same host_id): a dead one is replaced at once instead
	 * of after its session expires.  Must not take the library lock. */
	bool (*holder_alive)(const struct ripc_reg_proc_info *holder,
			     uint64_t starttime);
};

struct ripc_dir_ops {
	const char *scheme; /* "zk" */

	/* Start connecting to `where` (the URL after "scheme://").  Never
	 * blocks for the network: a connection that is not up yet makes the
	 * other ops wait or answer -EAGAIN.  0 or a negative errno (-EINVAL:
	 * malformed URL). */
	int (*open)(const char *where, const struct ripc_dir_cfg *cfg,
		    struct ripc_dir **out);

	/* Close the session: this process's records disappear at once. */
	void (*close)(struct ripc_dir *d);

	/* In a forked child: drop the parent's connection without closing
	 * it (the parent's session and records stay the parent's). */
	void (*forget)(struct ripc_dir *d);

	/* Publish that this process holds `id` (unicast) or is a member of
	 * it (mcast).  Blocking, until `deadline_ns` (CLOCK_MONOTONIC, see
	 * ripc__now_ns) at the latest; called without the library lock.
	 * Returns 0, -EEXIST (a live process elsewhere holds it, or it is a
	 * multicast ID and unicast was asked or vice versa), -ETIMEDOUT (no
	 * answer: the service is unreachable or has no quorum), or another
	 * negative errno. */
	int (*claim)(struct ripc_dir *d, uint16_t id, bool mcast,
		     uint64_t deadline_ns);

	/* Withdraw a claim.  Does not wait for the answer. */
	void (*release)(struct ripc_dir *d, uint16_t id, bool mcast);

	/* Never blocks.  From the cache: the holder of a unicast ID (returns
	 * 1, out[0]) or up to `max` members of a multicast ID (returns their
	 * number, *mcast set); 0 when the directory says nobody holds it.
	 * -EAGAIN when the answer is not cached: a lookup has been started,
	 * and its answer changes version() and makes wait_fd() readable.
	 * -ENOTCONN when the directory cannot be reached and nothing is
	 * cached. */
	int (*lookup)(struct ripc_dir *d, uint16_t id,
		      struct ripc_reg_proc_info *out, int max, bool *mcast);

	/* Drop what is cached about id (sends to it failed): the next lookup
	 * asks again. */
	void (*invalidate)(struct ripc_dir *d, uint16_t id);

	/* Changes whenever anything cached changes (an answer arrived, a
	 * watch fired): routes built from older answers are rebuilt. */
	uint64_t (*version)(struct ripc_dir *d);

	/* Readable after version() changed; reading it is the caller's
	 * business (an eventfd: read 8 bytes to reset). */
	int (*wait_fd)(struct ripc_dir *d);

	/* One line for ripc_info and logs: "zk://h:p,... connected" etc. */
	void (*describe)(struct ripc_dir *d, char *buf, unsigned len);
};

/* ---- the process's directory (directory.c) ---------------------------
 * Thin wrappers over the engine chosen by RIPC_DIRECTORY; with no
 * directory configured ripc__dir_enabled() is false and the others are
 * harmless no-ops (lookup returns 0, claim 0). */
int ripc__dir_open(const char *url, const struct ripc_dir_cfg *cfg);
void ripc__dir_close(void);
void ripc__dir_forget(void);
bool ripc__dir_enabled(void);
int ripc__dir_claim(uint16_t id, bool mcast, uint64_t deadline_ns);
void ripc__dir_release(uint16_t id, bool mcast);
int ripc__dir_lookup(uint16_t id, struct ripc_reg_proc_info *out, int max,
		     bool *mcast);
void ripc__dir_invalidate(uint16_t id);
uint64_t ripc__dir_version(void);
int ripc__dir_wait_fd(void);
void ripc__dir_describe(char *buf, unsigned len);
/* The URL the instance was opened with ("" when none), for messages. */
const char *ripc__dir_url(void);
/* Engines compiled in ("zk" when built with ZooKeeper), for ripc_info. */
const char *ripc__dir_engines(void);

#endif
