/*
 * Host-local service registry: a file in /dev/shm shared by every process
 * of one user on this host (and network namespace).  No daemon: processes
 * map it, mutate it under flock(2), and reclaim the entries of owners that
 * died (checked by pid and process start time).
 */
#ifndef RIPC_REGISTRY_H
#define RIPC_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ripc.h"
#include "ripc_prov.h"

#define RIPC_REG_MAX_PROCS 1024
#define RIPC_REG_MAX_MCAST 32 /* multicast memberships per process */
#define RIPC_REG_MAX_STATS 48 /* counters a process publishes */

struct ripc_reg_addr {
	uint8_t len;
	uint8_t addr[RIPC_ADDR_MAX];
};

/* A process as published in the registry. */
struct ripc_reg_proc_info {
	uint64_t incarnation;
	uint64_t host_id;
	int32_t pid;
	struct ripc_reg_addr addr[RIPC_PROV_MAX];
};

/* Open (creating if needed) and map the registry at `path` (NULL: the
 * default for this user and network namespace).  0 or negative errno. */
int ripc__reg_open(const char *path);
void ripc__reg_close(void);
/* In a forked child: drop the parent's mapping without touching it. */
void ripc__reg_forget(void);
const char *ripc__reg_path(void);

/* Publish this process (claims a process slot). */
int ripc__reg_attach(const struct ripc_reg_proc_info *self);
/* Remove this process and every service it holds. */
void ripc__reg_detach(void);

/* Claim a unicast ID: 0, -EEXIST (live owner, or multicast ID). */
int ripc__reg_claim(uint16_t id);
/* Join a multicast ID: 0, -EEXIST (unicast ID), -ENOSPC (too many). */
int ripc__reg_join(uint16_t id);
/* Give up an ID this process holds (unicast or membership). */
int ripc__reg_release(uint16_t id);

/* Resolve a unicast ID to its live owner: 0, -ENOENT. */
int ripc__reg_lookup(uint16_t id, struct ripc_reg_proc_info *out);
/* Resolve a multicast ID to up to max live members; returns the count
 * (0 when unknown or not multicast). *is_mcast tells if it is multicast. */
int ripc__reg_lookup_mcast(uint16_t id, struct ripc_reg_proc_info *out,
			   int max, bool *is_mcast);

/* Changes whenever any registration in the file changes. */
uint64_t ripc__reg_version(void);

/* For ripc_info -s: call fn for every live registration. */
void ripc__reg_foreach(void (*fn)(uint16_t id, bool mcast,
				  const struct ripc_reg_proc_info *owner,
				  void *arg),
		       void *arg);

/* Publish this process's counters (struct ripc_stats as uint64_t[n]). */
void ripc__reg_publish_stats(const uint64_t *vals, unsigned n);
/* For ripc_info -c: every live process with its published counters. */
void ripc__reg_foreach_proc(void (*fn)(const struct ripc_reg_proc_info *proc,
				       const uint64_t *stats, unsigned n,
				       void *arg),
			    void *arg);

/* Process identity helpers (also used by tests). */
uint64_t ripc__proc_starttime(pid_t pid);
bool ripc__proc_alive(pid_t pid, uint64_t starttime);
uint64_t ripc__host_id(void);

#endif
