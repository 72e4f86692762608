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
#define PEERS_MAX 4096
#define MCAST_MAX 256

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
 * is bounded; beyond PEERS_MAX new claims are refused.
 */
static bool handle_shared(const struct ripc_peer *p)
{
	unsigned b = peer_bucket(p->tp, p->addr, p->addrlen);

	for (struct ripc_peer *q = CTX->peer_hash[b]; q; q = q->hnext)
		if (q != p && q->tp == p->tp && q->handle == p->handle)
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
}

/* Forget up to `want` unreferenced peers on transport tp (any if tp < 0),
 * least recently used first.  Returns how many were forgotten. */
static unsigned peers_evict(int tp, unsigned want)
{
	unsigned done = 0;

	while (done < want) {
		struct ripc_peer *victim = NULL;

		for (unsigned b = 0; b < 256; b++)
			for (struct ripc_peer *p = CTX->peer_hash[b]; p;
			     p = p->hnext)
				if (!p->refs && (tp < 0 || p->tp == tp) &&
				    (!victim ||
				     p->last_used_ns < victim->last_used_ns))
					victim = p;
		if (!victim)
			break;
		peer_unlink(victim);
		if (!handle_shared(victim))
			CTX->tp[victim->tp].ops->av_remove(
				CTX->tp[victim->tp].p, victim->handle);
		free(victim);
		CTX->npeers--;
		done++;
	}
	return done;
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
	if (CTX->npeers >= PEERS_MAX && !peers_evict(-1, 16)) {
		ripc__log_rl(RIPC_LOG_WARN, "peer table full (%u)", PEERS_MAX);
		*err = RIPC_ENOMEM;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		*err = RIPC_ENOMEM;
		return NULL;
	}
	if (same_addr) {
		p->handle = same_addr->handle;
	} else {
		ret = t->ops->av_insert(t->p, addr, len, &p->handle);
		if (ret && peers_evict(tp, 8))
			ret = t->ops->av_insert(t->p, addr, len, &p->handle);
		if (ret) {
			free(p);
			*err = ripc__err_from_errno(ret);
			return NULL;
		}
	}
	p->last_used_ns = ripc__now_ns();
	CTX->npeers++;
	p->tp = (int8_t)tp;
	p->inc = inc;
	p->addrlen = (uint8_t)len;
	memcpy(p->addr, addr, len);
	p->hnext = CTX->peer_hash[b];
	CTX->peer_hash[b] = p;
	return p;
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
	}
	CTX->npeers = 0;
	for (unsigned i = 0; i <= RIPC_MAX_SERVICE_ID; i++) {
		if (CTX->route[i]) {
			free(CTX->route[i]->members);
			free(CTX->route[i]->member_inc);
			free(CTX->route[i]);
			CTX->route[i] = NULL;
		}
	}
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
		if (t->attr.same_host_only && owner->host_id != CTX->host_id)
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

/* Drop the route's references to its peers. */
static void route_release(struct ripc_route *r)
{
	ripc__peer_put(r->peer);
	r->peer = NULL;
	for (unsigned i = 0; i < r->nmembers; i++)
		ripc__peer_put(r->members[i]);
	r->nmembers = 0;
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
	for (int i = 0; i < n; i++) {
		int tp = ripc__pick_tp(&m[i]);
		struct ripc_peer *p;

		if (tp < 0)
			continue;
		p = ripc__peer_get(tp, m[i].addr[tp].addr, m[i].addr[tp].len,
				   m[i].incarnation, &err);
		if (!p)
			continue;
		r->members[k] = ripc__peer_hold(p);
		r->member_inc[k] = m[i].incarnation;
		r->nmembers = (uint16_t)(k + 1);
		k++;
	}
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

int ripc__route_get(uint16_t dest, struct ripc_route **out)
{
	struct ripc_route *r = CTX->route[dest];
	int err;

	if (r && ripc__route_current(r) &&
	    ripc__now_ns() - r->verified_ns < ROUTE_RECHECK_NS) {
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
