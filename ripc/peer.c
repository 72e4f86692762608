/*
 * Peers (remote processes on one transport) and routes (service ID ->
 * peer), resolved through the host registry, the service directory and
 * the multicast resolver.
 * Lookups never wait: when nobody is known to hold an ID, a query goes
 * out and the caller (the API layer) waits and asks again.
 *
 * A route is reused while the registry's change counter is unchanged and
 * its owner was seen alive within the last second; otherwise it is looked
 * up again, so a service that restarted or moved is found without the
 * sender doing anything, and a dead owner is noticed within a second.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dir_core.h"
#include "directory.h"
#include "resolver.h"
#include "ripc_int.h"

#define ROUTE_RECHECK_NS 1000000000ull
#define MCAST_MAX 256
#define SWEEP_SLICE_NS 200000ull

static void route_release(struct ripc_route *r);
static void route_free(struct ripc_route *r);
static unsigned routes_let_go(const struct ripc_peer *p);
/* The group route being filled: its members array is half made, and
 * routes_let_go keeps off it. */
static struct ripc_route *filling;

static unsigned peer_bucket(int tp, const void *addr, size_t len)
{
	const uint8_t *p = addr;
	uint32_t h = 2166136261u ^ (uint32_t)tp;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h & 255;
}

/*
 * A peer is one process incarnation at one address.  Incarnations and
 * addresses in messages are not authenticated, so a message never changes
 * an existing peer: a claim of a new incarnation at a known address (a
 * restart, or a lie) gets an entry of its own that shares the address's
 * transport handle, and the real peer's state is left alone.  The table
 * is bounded (RIPC_TEST_PEERS_MAX, 4096): beyond, new claims are refused
 * unless an old peer can be forgotten (peers_evict).
 */
static bool handle_shared(const struct ripc_peer *p)
{
	unsigned b = peer_bucket(p->tp, p->addr, p->addrlen);

	for (struct ripc_peer *q = CTX->peer_hash[b]; q; q = q->hnext)
		if (q != p && q->mapped && q->tp == p->tp &&
		    q->handle == p->handle)
			return true;
	return false;
}

static void peer_unlink(struct ripc_peer *p)
{
	unsigned b = peer_bucket(p->tp, p->addr, p->addrlen);
	struct ripc_peer **pp = &CTX->peer_hash[b];

	while (*pp && *pp != p)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = p->hnext;
	pp = &CTX->inc_hash[p->inc & 255];
	while (*pp && *pp != p)
		pp = &(*pp)->inext;
	if (*pp)
		*pp = p->inext;
}

/* Forget a peer nobody references any more. */
static void peer_free(struct ripc_peer *p)
{
	peer_unlink(p);
	if (p->map_pending)
		CTX->nunmapped--;
	if (p->mapped && !handle_shared(p))
		CTX->tp[p->tp].ops->av_remove(CTX->tp[p->tp].p, p->handle);
	CTX->tp[p->tp].npeers--;
	CTX->npeers--;
	free(p);
}

static bool same_host_peer_gone(struct ripc_peer *p);

/*
 * Make room from peers on a same-host transport whose process has ended:
 * up to `want` of them on transport tp (any if tp < 0), never `keep`.
 * Their routes let go of them; one a transfer still holds is marked for
 * the sweep.  The sweep forgets these too, but it waits for a quiet
 * moment (sweep_may_run): a burst of new clients came first under load,
 * and a server whose table held ended shm clients refused them all (a
 * CI run beside a soak, 12-01: 3 of 10 replies failed, "peer table
 * full").
 *
 * One mapped whose shm hand-shake never finished (it never mapped us) is
 * taken only when no other will do, and then only one: removed at once
 * in the lifecycle case sendexit -p shm, such a peer broke the next
 * peer's hand-shake (docs/FAULTS.md), but leaving them all to the sweep
 * refused new shm clients under load again (churn.sh -p shm with a table
 * of 16 beside two busy loops: 4 runs of 10 failed), since clients that
 * only ever used the doorbell end that way.
 *
 * Removing one from shm's table unmaps its region (up to a millisecond),
 * so after the first one, those beyond SWEEP_SLICE_NS are left, marked,
 * to the sweep; the first goes whatever the clock says, since the checks
 * before it (registry reads, kill, the route table) can use up the slice
 * on a loaded machine (the unit test failed so in CI, 12-01).  Each check
 * is a registry read and a kill(pid, 0), and shm holds at most 256 peers
 * an endpoint, so a full table whose same-host peers are all alive costs
 * a few hundred microseconds a refused claim.  Returns how many were
 * forgotten.
 */
static unsigned peers_forget_ended(int tp, unsigned want,
				   const struct ripc_peer *keep)
{
	uint64_t until = ripc__now_ns() + SWEEP_SLICE_NS;
	struct ripc_peer *half_shaken = NULL;
	unsigned done = 0;
	bool marked = false;

	for (unsigned b = 0; b < 256 && done < want; b++) {
		struct ripc_peer *p = CTX->peer_hash[b], *n;

		for (; p && done < want; p = n) {
			n = p->hnext;
			if ((tp >= 0 && p->tp != tp) || p == keep ||
			    !CTX->tp[p->tp].attr.same_host_only ||
			    !same_host_peer_gone(p))
				continue;
			p->dead = true;
			routes_let_go(p);
			if (!p->refs && p->mapped && !p->ready && !half_shaken)
				half_shaken = p;
			if (p->refs || (p->mapped && !p->ready) ||
			    (done && ripc__now_ns() >= until)) {
				marked = true;
				continue;
			}
			/* routes_let_go frees no peer: n stays valid. */
			peer_free(p);
			CTX->stats.peers_reaped++;
			done++;
		}
	}
	/* None other: one half-shaken peer, for the claim that wants room
	 * (nothing was freed, so the pointer is still good). */
	if (!done && half_shaken) {
		peer_free(half_shaken);
		CTX->stats.peers_reaped++;
		done++;
	}
	if (marked)
		CTX->sweep_due = true;
	return done;
}

/* Forget up to `want` unreferenced peers on transport tp (any if tp < 0),
 * least recently used first, never `keep`.  Returns how many were
 * forgotten.
 *
 * Never a live peer on a same-host transport: libfabric 1.17's shm forgets
 * a removed address on our side only, while the live peer keeps using the
 * slot it had in our endpoint (ref §2), so shm peers go only once their
 * process has ended (peers_sweep; and peers_forget_ended when nothing
 * else makes room). */
static unsigned peers_evict(int tp, unsigned want,
			    const struct ripc_peer *keep)
{
	unsigned done = 0;

	while (done < want) {
		struct ripc_peer *victim = NULL, *held = NULL;

		for (unsigned b = 0; b < 256; b++)
			for (struct ripc_peer *p = CTX->peer_hash[b]; p;
			     p = p->hnext) {
				if ((tp >= 0 && p->tp != tp) || p == keep ||
				    CTX->tp[p->tp].attr.same_host_only)
					continue;
				if (!p->refs && (!victim || p->last_used_ns <
								victim->last_used_ns))
					victim = p;
				if (p->refs && (!held || p->last_used_ns <
							      held->last_used_ns))
					held = p;
			}
		/* None free: the least recently used one that only cached
		 * routes hold (to clients that came and went, say) goes;
		 * the routes are looked up again when next used. */
		if (!victim && held && routes_let_go(held) && !held->refs)
			victim = held;
		if (!victim)
			break;
		peer_free(victim);
		CTX->stats.peers_evicted++;
		done++;
	}
	if (done < want)
		done += peers_forget_ended(tp, want - done, keep);
	return done;
}

/* Its registry record, for a peer on a same-host transport: where its
 * doorbell's sleep word is, and how a sweep learns that it ended. */
static int32_t same_host_slot1(int tp, const void *addr, size_t len,
			       uint64_t inc)
{
	struct ripc_reg_proc_info info;

	if (ripc__reg_find_incarnation(inc, &info) ||
	    info.addr[tp].len != len || memcmp(info.addr[tp].addr, addr, len))
		return 0;
	return info.slot1;
}

/* Is the process of a peer on a same-host transport alive, as the
 * registry says?  Looks its record up if it was not found when the peer
 * was made. */
static bool same_host_peer_live(struct ripc_peer *p)
{
	if (!p->reg_slot1)
		p->proc_slot1 = p->reg_slot1 =
			same_host_slot1(p->tp, p->addr, p->addrlen, p->inc);
	return p->reg_slot1 && ripc__reg_slot_live(p->reg_slot1 - 1, p->inc);
}

/* Has the process of a peer on a same-host transport ended, as far as its
 * registry record and kill(pid, 0) can tell?  No record found: not known
 * to have ended (the sweep decides those). */
static bool same_host_peer_gone(struct ripc_peer *p)
{
	if (!p->reg_slot1)
		p->proc_slot1 = p->reg_slot1 =
			same_host_slot1(p->tp, p->addr, p->addrlen, p->inc);
	return p->reg_slot1 && ripc__reg_slot_gone(p->reg_slot1 - 1, p->inc);
}

struct ripc_peer *ripc__peer_get(int tp, const void *addr, size_t len,
				 uint64_t inc, int *err)
{
	unsigned b = peer_bucket(tp, addr, len);
	struct ripc_tp *t = &CTX->tp[tp];
	struct ripc_peer *p, *same_addr = NULL;
	int ret;

	*err = RIPC_OK;
	if (len == 0 || len > RIPC_ADDR_MAX || !t->open) {
		*err = RIPC_EPEER;
		return NULL;
	}
	for (p = CTX->peer_hash[b]; p; p = p->hnext) {
		if (p->tp == tp && p->addrlen == len &&
		    !memcmp(p->addr, addr, len)) {
			if (p->inc == inc) {
				p->last_used_ns = ripc__now_ns();
				return p;
			}
			same_addr = p;
		}
	}
	/* Room is made before the new peer exists, so never by forgetting
	 * same_addr: its handle is the one the new peer is to share (a tcp
	 * client's port taken again by a new client).  Forgotten, its handle
	 * was removed from the address vector and then read from freed
	 * memory for the new peer. */
	if (CTX->npeers >= CTX->cfg.peers_max &&
	    !peers_evict(-1, 16, same_addr)) {
		ripc__log_rl(RIPC_LOG_WARN, "peer table full (%u)",
			     CTX->cfg.peers_max);
		/* Peers of this host go only once their process has ended,
		 * which the sweep finds: the next one after this is due. */
		CTX->sweep_due = true;
		*err = RIPC_ENOMEM;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		*err = RIPC_ENOMEM;
		return NULL;
	}
	if (t->attr.same_host_only) {
		/* Mapped by the engine (ripc__peers_map): its first messages
		 * go through its doorbell meanwhile. */
		p->map_pending = true;
		if (CTX->nunmapped++ == 0)
			CTX->map_since_ns = ripc__now_ns();
	} else if (same_addr) {
		p->handle = same_addr->handle;
		p->mapped = true;
	} else {
		ret = t->ops->av_insert(t->p, addr, len, &p->handle);
		if (ret && peers_evict(tp, 8, NULL))
			ret = t->ops->av_insert(t->p, addr, len, &p->handle);
		if (ret) {
			free(p);
			*err = ripc__err_from_errno(ret);
			return NULL;
		}
		p->mapped = true;
	}
	p->last_used_ns = ripc__now_ns();
	CTX->npeers++;
	p->tp = (int8_t)tp;
	p->inc = inc;
	p->addrlen = (uint8_t)len;
	memcpy(p->addr, addr, len);
	p->hnext = CTX->peer_hash[b];
	CTX->peer_hash[b] = p;
	p->inext = CTX->inc_hash[inc & 255];
	CTX->inc_hash[inc & 255] = p;
	if (t->attr.same_host_only)
		p->proc_slot1 = p->reg_slot1 =
			same_host_slot1(tp, addr, len, inc);
	/* Every RIPC_SWEEP_MIN new peers, look for ones whose process has
	 * ended (peers_sweep): over shm their slots must be given back, and
	 * the others hold memory that clients coming and going by the
	 * thousand would pile up (routes keep them referenced).  And when a
	 * same-host peer fills the table: those cannot be forgotten to make
	 * room, and a table smaller than RIPC_SWEEP_MIN (RIPC_TEST_PEERS_MAX)
	 * never saw a sweep, so a server stayed full of ended shm clients
	 * and answered no new one.  (Not for the others: eviction makes room
	 * for them, and a sweep per new peer would scan the route table.) */
	if (t->sweep_at < RIPC_SWEEP_MIN)
		t->sweep_at = RIPC_SWEEP_MIN;
	if (++t->npeers >= t->sweep_at ||
	    (t->attr.same_host_only && CTX->npeers >= CTX->cfg.peers_max)) {
		CTX->sweep_due = true;
		t->last_peer_ns = p->last_used_ns;
	}
	return p;
}

/*
 * A message came over a same-host transport from incarnation inc: make
 * sure the sender is a peer.  libfabric 1.17's shm added the sender to our
 * endpoint's address table when it first sent (at most 256 fit, and a
 * 257th overwrites a live one); only a peer of ours can be removed again
 * once its process ends (peers_sweep).  Short messages carry no address:
 * the registry has it.  The last sender is remembered, so a stream of
 * messages costs a compare.
 */
void ripc__peer_learn(int tp, uint64_t inc)
{
	struct ripc_tp *t = &CTX->tp[tp];
	struct ripc_reg_proc_info info;
	int err;

	if (inc == t->learnt_inc || !inc)
		return;
	for (struct ripc_peer *p = CTX->inc_hash[inc & 255]; p; p = p->inext)
		if (p->inc == inc && p->tp == tp) {
			t->learnt_inc = inc;
			return;
		}
	/* Claims the registry does not know are not looked up twice. */
	for (unsigned i = 0; i < 32; i++)
		if (CTX->unknown_inc[i] == inc)
			return;
	if (ripc__reg_find_incarnation(inc, &info) || !info.addr[tp].len) {
		CTX->unknown_inc[CTX->unknown_next++ & 31] = inc;
		return;
	}
	if (ripc__peer_get(tp, info.addr[tp].addr, info.addr[tp].len, inc,
			   &err))
		t->learnt_inc = inc;
}

bool ripc__peer_mapped_us(struct ripc_peer *p)
{
	if (p->ready)
		return true;
	if (!p->mapped)
		return false;
	if (!CTX->tp[p->tp].attr.same_host_only || !p->reg_slot1 ||
	    ripc__reg_shm_accepted(p->reg_slot1 - 1)) {
		p->ready = true;
		return true;
	}
	return false;
}

bool ripc__peer_ready(struct ripc_peer *p)
{
	if (ripc__peer_mapped_us(p))
		return true;
	/* It maps us when its progress looks at its requests: wake it. */
	ripc__bell_ring(p);
	return false;
}

/*
 * Pids are reused: a process of this host may come at the very address
 * (fi_shm://<pid>:<uid>:<n>) of an ended one that is still our peer (the
 * sweep forgets ended peers on its own schedule).  libfabric 1.17's shm
 * insert hands back the entry it already holds for a name, mapped to the
 * ended process's region, so all we sent the new process would go there
 * (faults.sh pidreuse-client).  So an ended namesake is forgotten first,
 * which unmaps its region.  While a transfer still holds it, the new peer
 * waits (-EAGAIN; it goes on through the doorbell meanwhile).  A namesake
 * the registry holds alive is left alone: one pid is one live process, so
 * the new claim is the wrong one (-EBUSY).
 */
static int forget_ended_namesake(struct ripc_peer *p)
{
	unsigned b = peer_bucket(p->tp, p->addr, p->addrlen);
	struct ripc_peer *q, *n;

	for (q = CTX->peer_hash[b]; q; q = n) {
		n = q->hnext;
		if (q == p || !q->mapped || q->tp != p->tp ||
		    q->inc == p->inc || q->addrlen != p->addrlen ||
		    memcmp(q->addr, p->addr, p->addrlen))
			continue;
		if (same_host_peer_live(q))
			return -EBUSY;
		q->dead = true;
		routes_let_go(q);
		if (q->refs) {
			CTX->sweep_due = true;
			return -EAGAIN;
		}
		peer_free(q);
		CTX->stats.peers_reaped++;
	}
	return 0;
}

/* Map a same-host peer: insert its address (libfabric's shm maps its
 * region, tens of microseconds) and tell it through the registry that it
 * may send to us over shm.  0 or a negative errno (tried again later). */
static int peer_map(struct ripc_peer *p)
{
	struct ripc_tp *t = &CTX->tp[p->tp];
	int ret;

	if (p->mapped)
		return 0;
	if ((ret = forget_ended_namesake(p)))
		return ret;
	ret = t->ops->av_insert(t->p, p->addr, p->addrlen, &p->handle);
	if (ret)
		return ret;
	p->mapped = true;
	if (p->map_pending) {
		p->map_pending = false;
		CTX->nunmapped--;
	}
	if (p->reg_slot1) {
		ripc__reg_shm_mapped(p->reg_slot1 - 1, p->inc);
		/* It may wait for this (a message to us queued, a pull from
		 * us): wake it if it sleeps. */
		ripc__bell_ring(p);
	}
	return 0;
}

/* A same-host peer that ended before it was mapped: the sweep forgets
 * it. */
static void peer_gone_unmapped(struct ripc_peer *p)
{
	if (p->map_pending) {
		p->map_pending = false;
		CTX->nunmapped--;
	}
	p->dead = true;
	CTX->sweep_due = true;
}

#define MAP_PER_PASS 8
#define MAP_RETRY_NS (10ull * 1000 * 1000)

void ripc__peers_map(void)
{
	unsigned done = 0;
	bool failed = false;

	if (CTX->map_retry_ns && ripc__now_ns() < CTX->map_retry_ns)
		return;
	CTX->map_retry_ns = 0;
	for (unsigned b = 0; b < 256 && done < MAP_PER_PASS; b++)
		for (struct ripc_peer *p = CTX->peer_hash[b];
		     p && done < MAP_PER_PASS; p = p->hnext) {
			int ret;

			if (!p->map_pending)
				continue;
			done++;
			if (!(ret = peer_map(p)))
				continue;
			if (ret == -ESRCH || !p->reg_slot1 ||
			    !ripc__reg_slot_live(p->reg_slot1 - 1, p->inc)) {
				/* Its process ended (or closed its endpoint)
				 * before we mapped it: nothing to map, the
				 * sweep forgets it. */
				peer_gone_unmapped(p);
				continue;
			}
			/* shm's table is full (of peers not swept yet): the
			 * pair goes on through the doorbell meanwhile, and
			 * the others are mapped. */
			ripc__log_rl(RIPC_LOG_INFO, "%s: cannot map a peer: %s",
				     CTX->tp[p->tp].attr.name, strerror(-ret));
			failed = true;
		}
	if (failed)
		CTX->map_retry_ns = ripc__now_ns() + MAP_RETRY_NS;
	if (CTX->nunmapped)
		CTX->map_since_ns = ripc__now_ns(); /* the rest: next pass */
}

void ripc__peers_accept(void)
{
	struct ripc_reg_proc_info *req;
	uint32_t now = ripc__reg_accept_requests();
	bool retry = false;
	int n;

	if (now == CTX->accept_seen)
		return;
	req = calloc(64, sizeof(*req));
	if (!req)
		return; /* looked at again next time */
	CTX->accept_seen = now;
	n = ripc__reg_accept_pending(req, 64);
	for (int i = 0; i < n; i++) {
		for (int tp = 0; tp < RIPC_PROV_MAX; tp++) {
			struct ripc_tp *t = &CTX->tp[tp];
			int err, ret = 0;

			if (!t->open || !t->attr.same_host_only ||
			    !req[i].addr[tp].len)
				continue;
			/* av_insert maps its region while it is alive. */
			struct ripc_peer *p = ripc__peer_get(
				tp, req[i].addr[tp].addr, req[i].addr[tp].len,
				req[i].incarnation, &err);

			if (p && (ret = peer_map(p)) == -ESRCH) {
				/* It closed its endpoint before we came to
				 * it (a short-lived client that had its
				 * answer through the doorbell): nothing to
				 * map, the sweep forgets it. */
				peer_gone_unmapped(p);
				continue;
			}
			if (p && ret) {
				err = ripc__err_from_errno(ret);
				p = NULL;
			}
			if (p) {
				ripc__reg_accept_done(req[i].slot1 - 1,
						      req[i].incarnation);
				/* Its first message waits for this: if its
				 * progress sleeps, wake it. */
				ripc__bell_ring(p);
				continue;
			}
			ripc__log_rl(RIPC_LOG_INFO,
				     "pid %d: cannot map it yet: %s",
				     (int)req[i].pid, ripc_strerror(err));
			retry = true;
		}
	}
	if (n == 64 || retry)
		CTX->accept_seen--; /* more: again on the next pass */
	free(req);
}

/*
 * Forget the peers on same-host transports whose process has ended: their
 * slots in libfabric's shm address table are reused only once removed.
 * Routes that lead to such a peer are looked up afresh (they would fail
 * anyway); a peer still used by a transfer waits for the next sweep.
 * Runs from the engine (never inside a route or peer look-up), when a
 * transport's peers reach sweep_at; sweep_at then moves RIPC_SWEEP_MIN above
 * what is left, so sweeps are amortised over new peers.
 */
void ripc__peers_sweep(void)
{
	bool dead_any = false, left = false;
	uint64_t until;

	CTX->sweep_due = false;
	if (CTX->sweep_reaping)
		goto reap; /* dead ones are marked: free the next batch */
	for (unsigned b = 0; b < 256; b++)
		for (struct ripc_peer *p = CTX->peer_hash[b]; p; p = p->hnext)
			if (CTX->tp[p->tp].attr.same_host_only) {
				p->dead = !same_host_peer_live(p);
				dead_any |= p->dead;
			} else if (p->proc_slot1) {
				/* A process of this host over tcp. */
				p->dead = ripc__reg_slot_gone(
					p->proc_slot1 - 1, p->inc);
				dead_any |= p->dead;
			}
	/* Routes are looked at when a peer died, or when some let go of
	 * theirs for room in a full peer table (clients of other hosts,
	 * which no sweep finds dead). */
	if (!dead_any && !CTX->route_shells)
		goto out;
	/* With a send holding a route, none is freed now: look again at the
	 * next sweep. */
	CTX->route_shells = CTX->routes_held > 0;
	for (unsigned i = 0; i <= RIPC_MAX_SERVICE_ID; i++) {
		struct ripc_route *r = CTX->route[i];
		bool dead = false;

		if (!r || r == filling)
			continue;
		dead = r->peer && r->peer->dead;
		for (unsigned k = 0; k < r->nmembers && !dead; k++)
			dead = r->members[k]->dead;
		if (dead) {
			route_release(r);
			r->reg_version = 0;
		}
		/* A route that leads nowhere (its process ended, or its
		 * look-up failed) goes, unless a send holds one: a service
		 * answering clients that come and go would otherwise keep
		 * one per client's random ID, up to all 65 536 (~6 MB;
		 * life_notes.md, soak). */
		if (!r->peer && !r->nmembers && !r->reg_version &&
		    !CTX->routes_held) {
			route_free(r);
			CTX->route[i] = NULL;
			CTX->stats.routes_freed++;
		}
	}
reap:
	/* Removing a peer from shm's table unmaps its region: a few hundred
	 * us each, and a sweep finds dozens.  Free them for at most
	 * SWEEP_SLICE_NS per pass, so that the message of the new peer
	 * that made the sweep due is not held up by all of them. */
	until = ripc__now_ns() + SWEEP_SLICE_NS;
	CTX->sweep_reaping = false;
	for (unsigned b = 0; b < 256; b++) {
		struct ripc_peer *p = CTX->peer_hash[b], *n;

		for (; p; p = n) {
			n = p->hnext;
			if (!p->dead)
				continue;
			if (p->refs) {
				left = true;
				continue;
			}
			if (CTX->sweep_reaping)
				continue;
			peer_free(p);
			CTX->stats.peers_reaped++;
			if (ripc__now_ns() >= until)
				CTX->sweep_reaping = true; /* more next pass */
		}
	}
	if (CTX->sweep_reaping)
		CTX->sweep_due = true;
out:
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++) {
		struct ripc_tp *t = &CTX->tp[i];

		t->sweep_at = t->npeers + RIPC_SWEEP_MIN;
		t->learnt_inc = 0;
	}
	/* A transfer still holds a dead peer: look again in a while. */
	CTX->sweep_retry_ns = left ? ripc__now_ns() + 100000000ull : 0;
}

/*
 * A transfer that waits on a peer (a pull from it, an exposure to it)
 * would otherwise wait for RIPC_PULL_TIMEOUT_MS or RIPC_LONG_TIMEOUT_MS
 * (30 s) when the peer's process has ended: over shm a pull from a process
 * that ended before it mapped us is refused until then, and nothing tells
 * the owner of an exposure that its receiver died.  A process of this host
 * can be asked (its registry record, a pidfd poll once known): first when
 * a transfer has waited RIPC_PEER_CHECK_NS, then at gaps that double up to
 * a second per peer, so that a peer with many slow transfers, or many
 * peers, cost a few polls a second.  A stopped process is alive.
 */
#define PEER_CHECK_MAX_NS 1000000000ull

bool ripc__peer_ended(struct ripc_peer *p, uint64_t since, uint64_t now,
		      uint64_t *next)
{
	uint64_t at;
	int32_t slot1;

	if (p->dead || p->ended)
		return true;
	slot1 = p->reg_slot1 ? p->reg_slot1 : p->proc_slot1;
	if (ripc__reg_self_slot() < 0 || p->unrecorded)
		return false; /* its transport or the timeout must tell */
	at = since + RIPC_PEER_CHECK_NS;
	if (at < p->check_ns)
		at = p->check_ns;
	if (now < at) {
		if (at < *next)
			*next = at;
		return false;
	}
	if (!slot1) {
		/* Not found alive when made, or a peer over tcp, which may
		 * be of this host or not.  A record of its incarnation
		 * whose process has ended says it ended (that is how a
		 * message handled after its sender's death leaves us, and
		 * how a pull over libfabric's native tcp learns that its
		 * sender was killed: the provider fails one read, then
		 * answers the next with -FI_EAGAIN for ever while it cannot
		 * connect); no record at all is a process of another host
		 * or registry (the resolver or the directory can pair
		 * those): cannot tell, its transport or the timeout must.
		 * A process of this host has its record from its start, so
		 * a peer over tcp without one is of another host and is not
		 * looked at again. */
		int s = ripc__reg_incarnation_slot(p->inc);

		slot1 = s < 0 ? 0 : s + 1;
		if (!slot1 && !CTX->tp[p->tp].attr.same_host_only) {
			p->unrecorded = true;
			return false;
		}
	}
	if (!slot1 || ripc__reg_slot_live(slot1 - 1, p->inc)) {
		p->check_gap_ns = p->check_gap_ns ? p->check_gap_ns * 2
						  : RIPC_PEER_CHECK_NS;
		if (p->check_gap_ns > PEER_CHECK_MAX_NS)
			p->check_gap_ns = PEER_CHECK_MAX_NS;
		p->check_ns = now + p->check_gap_ns;
		if (p->check_ns < *next)
			*next = p->check_ns;
		return false;
	}
	/* Gone.  Not marked for the sweep: forgetting it now (shm's
	 * av_remove) while a new process may take its place in shm's table
	 * broke that process's hand-shake with us (docs/FAULTS.md); the
	 * sweep finds it on its own schedule, as before. */
	p->ended = true;
	return true;
}

void ripc__peers_fini(void)
{
	for (unsigned b = 0; b < 256; b++) {
		struct ripc_peer *p = CTX->peer_hash[b], *n;

		for (; p; p = n) {
			n = p->hnext;
			free(p);
		}
		CTX->peer_hash[b] = NULL;
		CTX->inc_hash[b] = NULL;
	}
	CTX->npeers = 0;
	CTX->nunmapped = 0;
	CTX->map_retry_ns = 0;
	CTX->route_shells = false;
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		CTX->tp[i].npeers = 0;
	for (unsigned i = 0; i <= RIPC_MAX_SERVICE_ID; i++) {
		if (CTX->route[i]) {
			free(CTX->route[i]->members);
			free(CTX->route[i]->member_inc);
			free(CTX->route[i]);
			CTX->route[i] = NULL;
		}
	}
}

/* May we talk to this process over shm?  It must be on this host, and we
 * and it must have room for one more shm pair (registry.h): libfabric
 * 1.17's shm endpoint holds 256 peers and corrupts one beyond that, so
 * pairs are counted host-wide, and the rest use tcp. */
#define NO_ROOM_RETRY_NS (1000ull * 1000 * 1000)

static bool same_host_room(const struct ripc_reg_proc_info *owner)
{
	struct ripc_reg_proc_info info;
	int slot = owner->slot1 - 1;

	if (owner->host_id != CTX->host_id)
		return false;
	if (slot < 0) {
		/* Learnt from the resolver or the directory. */
		if (ripc__reg_find_incarnation(owner->incarnation, &info))
			return false;
		slot = info.slot1 - 1;
	}
	for (unsigned i = 0; i < 16; i++)
		if (CTX->no_room[i].inc == owner->incarnation) {
			if (ripc__now_ns() < CTX->no_room[i].until_ns) {
				CTX->stats.shm_fallback_tcp++;
				return false;
			}
			CTX->no_room[i].inc = 0;
		}
	if (ripc__reg_shm_pair(slot, CTX->cfg.shm_peers))
		return true;
	CTX->no_room[CTX->no_room_next].inc = owner->incarnation;
	CTX->no_room[CTX->no_room_next].until_ns =
		ripc__now_ns() + NO_ROOM_RETRY_NS;
	CTX->no_room_next = (CTX->no_room_next + 1) % 16;
	CTX->stats.shm_fallback_tcp++;
	ripc__log_rl(RIPC_LOG_INFO,
		     "pid %d: shm pairs full (RIPC_SHM_PEERS=%u); using tcp",
		     (int)owner->pid, CTX->cfg.shm_peers);
	return false;
}

int ripc__pick_tp(const struct ripc_reg_proc_info *owner)
{
	/* Preference: shm on the same host, then verbs, then tcp. */
	static const int order[] = { RIPC_PROV_SHM, RIPC_PROV_VERBS,
				     RIPC_PROV_TCP };

	for (unsigned i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		int tp = order[i];
		struct ripc_tp *t = &CTX->tp[tp];

		if (!t->open || owner->addr[tp].len == 0)
			continue;
		if (t->attr.same_host_only && !same_host_room(owner))
			continue;
		return tp;
	}
	return -1;
}

void ripc__route_drop(uint16_t dest)
{
	struct ripc_route *r = CTX->route[dest];

	if (r)
		r->reg_version = 0; /* force a lookup next time */
	/* What another host told us about it proved wrong: ask again. */
	ripc__resolver_forget(dest);
	ripc__dir_invalidate(dest);
}

static void route_free(struct ripc_route *r)
{
	route_release(r);
	free(r->members);
	free(r->member_inc);
	free(r);
}

/* Drop the route's references to its peers. */
static void route_release(struct ripc_route *r)
{
	ripc__peer_put(r->peer);
	r->peer = NULL;
	for (unsigned i = 0; i < r->nmembers; i++)
		ripc__peer_put(r->members[i]);
	r->nmembers = 0;
}

/* Let go of every route that leads to p (they are looked up again when
 * next used).  Returns how many.  A scan of the route table: only when
 * the peer table is full. */
static unsigned routes_let_go(const struct ripc_peer *p)
{
	unsigned n = 0;

	for (unsigned i = 0; i <= RIPC_MAX_SERVICE_ID; i++) {
		struct ripc_route *r = CTX->route[i];
		bool uses = false;

		if (!r || r == filling)
			continue;
		uses = r->peer == p;
		for (unsigned k = 0; k < r->nmembers && !uses; k++)
			uses = r->members[k] == p;
		if (uses) {
			route_release(r);
			r->reg_version = 0;
			n++;
		}
	}
	if (n)
		CTX->route_shells = true; /* freed by the next sweep */
	return n;
}

static int route_fill_unicast(struct ripc_route *r,
			      const struct ripc_reg_proc_info *owner)
{
	int tp = ripc__pick_tp(owner), err;
	struct ripc_peer *p;

	if (tp < 0)
		return RIPC_EPEER;
	p = ripc__peer_get(tp, owner->addr[tp].addr, owner->addr[tp].len,
			   owner->incarnation, &err);
	if (!p)
		return err;
	if (!p->proc_slot1 && owner->host_id == CTX->host_id)
		p->proc_slot1 = owner->slot1; /* 0 if not from the registry */
	route_release(r);
	r->peer = ripc__peer_hold(p);
	r->inc = owner->incarnation;
	r->host_id = owner->host_id;
	r->mcast = false;
	r->nmembers = 0;
	return RIPC_OK;
}

static int route_fill_mcast(struct ripc_route *r,
			    const struct ripc_reg_proc_info *m, int n)
{
	int k = 0, err;

	route_release(r);
	if (!r->members) {
		r->members = calloc(MCAST_MAX, sizeof(*r->members));
		r->member_inc = calloc(MCAST_MAX, sizeof(*r->member_inc));
		if (!r->members || !r->member_inc)
			return RIPC_ENOMEM;
	}
	filling = r;
	for (int i = 0; i < n; i++) {
		int tp = ripc__pick_tp(&m[i]);
		struct ripc_peer *p;

		if (tp < 0)
			continue;
		p = ripc__peer_get(tp, m[i].addr[tp].addr, m[i].addr[tp].len,
				   m[i].incarnation, &err);
		if (!p)
			continue;
		if (!p->proc_slot1 && m[i].host_id == CTX->host_id)
			p->proc_slot1 = m[i].slot1;
		r->members[k] = ripc__peer_hold(p);
		r->member_inc[k] = m[i].incarnation;
		r->nmembers = (uint16_t)(k + 1);
		k++;
	}
	filling = NULL;
	r->mcast = true;
	r->nmembers = (uint16_t)k;
	r->peer = NULL;
	return RIPC_OK;
}

/* One registry lookup; RIPC_ENOSERVICE when nobody holds the ID. */
/* Members of a group: the host registry's and the resolver's, each
 * process once. */
static int merge_members(struct ripc_reg_proc_info *m, int n,
			 const struct ripc_reg_proc_info *more, int nmore)
{
	for (int i = 0; i < nmore && n < MCAST_MAX; i++) {
		bool dup = false;

		for (int k = 0; k < n && !dup; k++)
			dup = m[k].incarnation == more[i].incarnation;
		if (!dup)
			m[n++] = more[i];
	}
	return n;
}

/* One lookup: the host registry first, then what the resolver knows about
 * other hosts.  RIPC_ENOSERVICE when neither knows the ID (a query is
 * then on its way). */
static int route_lookup(uint16_t dest, struct ripc_route *r)
{
	struct ripc_reg_proc_info owner, *members, *remote;
	uint64_t version = ripc__reg_version();
	uint64_t rversion = ripc__resolver_version();
	uint64_t dversion = ripc__dir_version();
	bool is_mcast, rmcast = false;
	int n, nr, err;

	CTX->stats.resolutions++;
	if (ripc__reg_lookup(dest, &owner) == 0) {
		err = route_fill_unicast(r, &owner);
		goto out;
	}
	members = calloc(2 * MCAST_MAX, sizeof(*members));
	if (!members)
		return RIPC_ENOMEM;
	remote = members + MCAST_MAX;
	n = ripc__reg_lookup_mcast(dest, members, MCAST_MAX, &is_mcast);
	nr = ripc__resolver_lookup(dest, remote, MCAST_MAX, &rmcast);
	/* What the directory holds (nothing without one). */
	nr = ripc__dir_core_lookup(dest, remote, nr, MCAST_MAX, &rmcast);
	if (is_mcast || (nr && rmcast)) {
		n = merge_members(members, is_mcast ? n : 0, remote,
				  rmcast ? nr : 0);
		/* A group with no live member is as good as unregistered. */
		err = n > 0 ? route_fill_mcast(r, members, n)
			    : RIPC_ENOSERVICE;
	} else if (nr) {
		err = route_fill_unicast(r, &remote[0]);
	} else {
		err = RIPC_ENOSERVICE;
	}
	free(members);
	if (err == RIPC_ENOSERVICE)
		ripc__resolver_query(dest);
out:
	if (err == RIPC_OK) {
		r->reg_version = version;
		r->res_version = rversion;
		r->dir_version = dversion;
		r->verified_ns = ripc__now_ns();
	}
	return err;
}

/* Is the cached route still what a lookup would give? */
bool ripc__route_current(const struct ripc_route *r)
{
	return r->reg_version && r->reg_version == ripc__reg_version() &&
	       r->res_version == ripc__resolver_version() &&
	       r->dir_version == ripc__dir_version();
}

int ripc__route_get(uint16_t dest, uint64_t now, struct ripc_route **out)
{
	struct ripc_route *r = CTX->route[dest];
	int err;

	/* verified_ns may be a little later than now (set by another
	 * thread's look-up since our clock read): that is recent too. */
	if (r && ripc__route_current(r) &&
	    (int64_t)(now - r->verified_ns) < (int64_t)ROUTE_RECHECK_NS) {
		*out = r;
		return RIPC_OK;
	}
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return RIPC_ENOMEM;
		CTX->route[dest] = r;
	}
	err = route_lookup(dest, r);
	if (err) {
		/* Not registered (yet), or unreachable: looked up afresh
		 * next time; the caller decides whether to wait. */
		r->reg_version = 0;
		return err;
	}
	*out = r;
	return RIPC_OK;
}
