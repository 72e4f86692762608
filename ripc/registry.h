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
	/* Its record in this host's registry, + 1 (0: unknown, or another
	 * host's process); filled by the registry's look-ups only. */
	int32_t slot1;
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

/* Claim a unicast ID: 0, -EEXIST (live owner, or multicast ID).  random:
 * drawn by ripc_register_random_service_id (see ripc__reg_gone). */
int ripc__reg_claim(uint16_t id, bool random);
/* Join a multicast ID: 0, -EEXIST (unicast ID), -ENOSPC (too many). */
int ripc__reg_join(uint16_t id);
/* Give up an ID this process holds (unicast or membership). */
int ripc__reg_release(uint16_t id);

/* Was id a random ID whose holder on this host has ended (or given it
 * up), and nobody claimed it since?  Then nobody will register it again:
 * a sender fails at once instead of waiting to resolve it. */
bool ripc__reg_gone(uint16_t id);
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

/* ---- same-host wake-ups and shm slots (issue 12) ----------------------
 * slot: a process's record index (slot1 - 1 of its info).
 *
 * The sleep word of a process: non-zero while its progress sleeps and
 * wants a doorbell ring for new work (bell.c).  NULL if slot is invalid. */
uint32_t *ripc__reg_sleep_word(int slot);
/* Its mail word: bumped after a message was sent to it through its
 * doorbell socket (bell.c).  NULL if slot is invalid. */
uint32_t *ripc__reg_mail_word(int slot);
/* Record slot still belongs to the live process of this incarnation.  A
 * peer's slot is taken by another process once the peer has ended and its
 * record was reclaimed: its words are then the newcomer's (bell.c).  Read
 * without the lock. */
bool ripc__reg_holds(int slot, uint64_t incarnation);
int ripc__reg_self_slot(void);
/* The record of the live process pid on this host, and its incarnation
 * in *inc: its slot, or -1.  Read without any lock (the shm watchdog's
 * wake-ups, bell.c): a record changing hands meanwhile can give a wrong
 * or no answer, never a crash; ripc__reg_holds checks it again. */
int ripc__reg_pid_slot(int32_t pid, uint64_t *inc);
/* The live process with this incarnation: 0 and *out, or -ENOENT. */
int ripc__reg_find_incarnation(uint64_t incarnation,
			       struct ripc_reg_proc_info *out);
/* The slot of the record of this incarnation, whether or not its process
 * still lives (an ended one's record stays until somebody reclaims it),
 * or -1: never in this registry, or reclaimed meanwhile. */
int ripc__reg_incarnation_slot(uint64_t incarnation);
/* Process pid (as the kernel names the sender of a datagram, bell.c)
 * claims to be the process with this incarnation: 0 when the registry's
 * live record of that incarnation has this pid, -EPERM when it has
 * another, -ENOENT when there is none.  The process is then taken for
 * alive (it has just sent) without reading /proc: a pid reused by
 * another process of the same user could pass, which is within the
 * registry's trust boundary (the user ID). */
int ripc__reg_vouch(uint64_t incarnation, pid_t pid);
/* libfabric 1.17's shm provider holds at most 256 peers per endpoint and
 * misbehaves past that, so every pair of processes that talk over shm is
 * counted, in both records, before it may: returns true when this
 * process and `other` already form a pair or could form one with both
 * under `limit` pairs (it is then recorded), false when one is full (the
 * pair talks over tcp instead).  A pair lasts until one of its processes
 * leaves the registry. */
bool ripc__reg_shm_pair(int other, unsigned limit);
/* Is the process of this slot still the one with this incarnation, and
 * alive?  When it is not, its record is reclaimed (its pairs with it). */
bool ripc__reg_slot_live(int slot, uint64_t incarnation);
/* The cheap converse, for sweeping peers: true when the slot no longer
 * holds this incarnation or its pid is gone (the record is reclaimed
 * then); a process that ended but whose pid is not reaped yet (a zombie)
 * counts as not gone until it is. */
bool ripc__reg_slot_gone(int slot, uint64_t incarnation);

/*
 * Accepting a pair.  libfabric 1.17's shm maps a new sender's region when
 * it takes the sender's connection request, and dereferences NULL if the
 * sender's region file is gone by then (the sender ended at the wrong
 * moment): the receiving process crashes.  So a process that forms a pair
 * does not send over shm until the other has mapped it ahead (av_insert
 * while it is alive) and said so here; the connection request then finds
 * the mapping made.
 *
 * The process that forms a pair maps the other only after its first
 * messages have left (through the doorbell, bell.c), and says so with
 * shm_mapped(); so either side waits for the other's word.
 *
 * accepted(other): may we send to `other` over shm?  True when it has
 * mapped us (it accepted our pair, or it formed the pair and said it
 * mapped us), or when there is nothing to wait for.
 * accept_requests(): a counter other processes bump when they form a pair
 * with us: check it, and if it moved, accept_pending() lists the
 * processes (live, with their addresses) whose pairs we have not accepted
 * yet; once mapped, accept_done(slot, incarnation) tells each.
 * shm_mapped(slot, incarnation): we have mapped that process, whichever
 * of us formed the pair (accept_done when it did). */
bool ripc__reg_shm_accepted(int other);
void ripc__reg_shm_mapped(int other, uint64_t incarnation);
uint32_t ripc__reg_accept_requests(void);
int ripc__reg_accept_pending(struct ripc_reg_proc_info *out, int max);
void ripc__reg_accept_done(int slot, uint64_t incarnation);

/* Process identity helpers (also used by tests). */
uint64_t ripc__proc_starttime(pid_t pid);
bool ripc__proc_alive(pid_t pid, uint64_t starttime);
uint64_t ripc__host_id(void);

#endif
