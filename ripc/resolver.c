/*
 * UDP multicast resolver (see resolver.h).
 *
 * Sockets: one bound to the group's port and joined to the group on the
 * configured interface (queries and announces from everybody), and one
 * private unicast socket from which this process sends and on which it
 * receives answers to its own queries.  Several processes on one host share
 * the group port (SO_REUSEADDR); an answer goes to the querier's private
 * port so that exactly the asking process gets it.
 *
 * Datagrams are hostile input like any other: every field is checked, the
 * cache is bounded (RES_MAX_RECORDS records, RIPC_RES_MAX_MEMBERS members
 * each), and at most RES_INPUT_BATCH datagrams are handled per call.
 *
 * Duplicate detection (issue 13), like ARP's: before a registration is
 * final, the registering process multicasts a PROBE for the ID and
 * listens for RIPC_RESOLVER_PROBE_MS; a process that holds the ID, or
 * probes for it too with a lower incarnation, answers with a DEFEND sent
 * to the prober's private port, and the registration fails.  Multicast
 * memberships do not conflict with each other.  Only when no directory
 * is configured (the directory decides then), and not on loopback, where
 * nobody but this host can hear and the host registry already decides.
 *
 * On loopback the resolver sends nothing of its own at all: no probe, no
 * query and no announcement.  Only processes of this host hear the group
 * there (a network namespace is a host, ripc__host_id), and a process
 * ignores answers and announcements from its own host, whose registry is
 * authoritative; each datagram would only wake every libripc process of
 * the host.  The sockets stay open (ripc_info, hostile-input counters).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "directory.h"
#include "resolver.h"
#include "ripc_int.h"

#define RES_MAGIC 0x52495052u /* bytes "RPIR" */
#define RES_VERSION 1
#define RES_MAX_RECORDS 4096
#define RES_INPUT_BATCH 64
#define RES_QUERY_GAP_NS 50000000ull /* per-ID query rate limit */
#define RES_ANNOUNCE_REPEATS 3

enum {
	RES_QUERY = 1,
	RES_ANSWER = 2,
	RES_ANNOUNCE = 3,
	RES_PROBE = 4,  /* "I am about to take this ID: object now" */
	RES_DEFEND = 5, /* "it is mine (or my probe came first)" */
};
#define RES_MAX_PROBES 16 /* registrations probing at one time */
#define RES_F_MCAST 0x1u
#define RES_F_DOWN 0x2u

struct res_member {
	struct ripc_reg_proc_info info;
	uint64_t learned_ns;
};

struct res_rec {
	bool mcast;
	uint16_t n;
	uint64_t last_query_ns;
	struct res_member m[RIPC_RES_MAX_MEMBERS];
};


/* A registration of this process that is listening for objections. */
struct res_probe {
	bool used, mcast, conflict;
	uint16_t id;
	uint8_t sent;
	uint64_t nonce, start_ns;
	struct ripc_reg_proc_info by; /* who objected */
};

struct res_announce {
	uint16_t id;
	bool up, mcast;
	int left;
	uint64_t next_ns;
};

static struct {
	bool enabled;
	int mfd, ufd;
	/* Threads waiting for an answer (ripc__resolver_wait) sleep on ufd
	 * and on wfd: whichever thread reads an answer off ufd first (often
	 * the progress thread) writes wfd, so a waiter whose datagram was
	 * taken from under it wakes at once.  waiters: under the lock. */
	int wfd;
	unsigned waiters;
	struct sockaddr_in group;
	uint64_t version, ttl_ns;
	struct res_rec **rec; /* [65535], allocated on open */
	unsigned nrec;
	struct res_announce ann[64];
	unsigned nann;
	struct in_addr ifaddr;
	bool loopback;     /* the interface is loopback: this host only */
	uint64_t probe_ns; /* duplicate detection window, 0: none */
	struct res_probe probe[RES_MAX_PROBES];
} res = { .mfd = -1, .ufd = -1, .wfd = -1 };

bool ripc__resolver_enabled(void)
{
	return res.enabled;
}

uint64_t ripc__resolver_version(void)
{
	return res.version;
}

int ripc__resolver_fd(int which)
{
	return which ? res.ufd : res.mfd;
}

/* ---- encoding ------------------------------------------------------- */

static void put16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, 2);
}
static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}
static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return le16toh(v);
}
static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}
static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

size_t ripc__res_encode(const struct res_dgram *d, uint8_t *buf)
{
	size_t off = RES_HDR;
	unsigned naddr = 0;

	put32(buf, RES_MAGIC);
	buf[4] = RES_VERSION;
	buf[5] = d->type;
	put16(buf + 6, d->service);
	put64(buf + 8, d->nonce);
	put16(buf + 16, d->reply_port);
	buf[18] = d->flags;
	put32(buf + 20, (uint32_t)d->info.pid);
	put64(buf + 24, d->info.incarnation);
	put64(buf + 32, d->info.host_id);
	for (unsigned t = 0; t < RIPC_PROV_MAX; t++) {
		const struct ripc_reg_addr *a = &d->info.addr[t];

		if (!a->len || a->len > RIPC_ADDR_MAX)
			continue;
		buf[off] = (uint8_t)t;
		buf[off + 1] = a->len;
		memcpy(buf + off + 2, a->addr, a->len);
		off += 2 + a->len;
		naddr++;
	}
	buf[19] = (uint8_t)naddr;
	return off;
}

/* Validate a datagram; false if anything is off. */
bool ripc__res_decode(const uint8_t *buf, size_t len, struct res_dgram *d)
{
	size_t off = RES_HDR;

	if (len < RES_HDR || get32(buf) != RES_MAGIC || buf[4] != RES_VERSION)
		return false;
	memset(d, 0, sizeof(*d));
	d->type = buf[5];
	d->service = get16(buf + 6);
	d->nonce = get64(buf + 8);
	d->reply_port = get16(buf + 16);
	d->flags = buf[18];
	d->naddr = buf[19];
	d->info.pid = (int32_t)get32(buf + 20);
	d->info.incarnation = get64(buf + 24);
	d->info.host_id = get64(buf + 32);
	if (d->type < RES_QUERY || d->type > RES_DEFEND ||
	    d->service > RIPC_MAX_SERVICE_ID ||
	    (d->flags & ~(RES_F_MCAST | RES_F_DOWN)) ||
	    d->naddr > RIPC_PROV_MAX || d->info.incarnation == 0)
		return false;
	for (unsigned i = 0; i < d->naddr; i++) {
		uint8_t tp, alen;

		if (off + 2 > len)
			return false;
		tp = buf[off];
		alen = buf[off + 1];
		if (tp >= RIPC_PROV_MAX || alen == 0 || alen > RIPC_ADDR_MAX ||
		    off + 2 + alen > len || d->info.addr[tp].len)
			return false;
		d->info.addr[tp].len = alen;
		memcpy(d->info.addr[tp].addr, buf + off + 2, alen);
		off += 2 + (size_t)alen;
	}
	return off == len;
}

/* This process as the resolver describes it. */
static void self_info(struct ripc_reg_proc_info *info)
{
	memset(info, 0, sizeof(*info));
	info->incarnation = CTX->incarnation;
	info->host_id = CTX->host_id;
	info->pid = getpid();
	for (unsigned t = 0; t < RIPC_PROV_MAX; t++) {
		if (!CTX->tp[t].open)
			continue;
		info->addr[t].len = (uint8_t)CTX->tp[t].addrlen;
		memcpy(info->addr[t].addr, CTX->tp[t].addr,
		       CTX->tp[t].addrlen);
	}
}

static void send_to(const struct res_dgram *d, const struct sockaddr_in *to)
{
	uint8_t buf[RES_MAX_DGRAM];
	size_t n = ripc__res_encode(d, buf);

	if (sendto(res.ufd, buf, n, MSG_DONTWAIT, (const struct sockaddr *)to,
		   sizeof(*to)) < 0)
		ripc__log_rl(RIPC_LOG_INFO, "resolver: sendto: %s",
			     strerror(errno));
}

/* ---- sockets -------------------------------------------------------- */

int ripc__resolver_open(void)
{
	const char *grp = ripc__env_str(RIPC_ENV_RESOLVER_GROUP);
	const char *ifa = ripc__env_str(RIPC_ENV_RESOLVER_ADDR);
	int64_t port = ripc__env_int(RIPC_ENV_RESOLVER_PORT);
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct in_addr ifaddr;
	struct ip_mreq mreq;
	int one = 1, ttl = 1;
	unsigned char loop = 1;

	if (!ripc__env_bool(RIPC_ENV_RESOLVER))
		return RIPC_OK;
	/* With a directory, multicast is off unless asked for explicitly. */
	if (*ripc__env_str(RIPC_ENV_DIRECTORY) &&
	    !ripc__env_is_set(RIPC_ENV_RESOLVER)) {
		ripc__log(RIPC_LOG_INFO, "resolver off: RIPC_DIRECTORY is set "
					 "(RIPC_RESOLVER=1 turns it on)");
		return RIPC_OK;
	}
	if (!*ifa)
		ifa = ripc__env_str(RIPC_ENV_TCP_ADDR);
	res.ttl_ns = ripc__ms_ns(ripc__env_int(RIPC_ENV_RESOLVER_TTL_MS));
	if (res.ttl_ns < ripc__ms_ns(100))
		res.ttl_ns = ripc__ms_ns(100);
	memset(&res.group, 0, sizeof(res.group));
	res.group.sin_family = AF_INET;
	res.group.sin_port = htons((uint16_t)port);
	if (port <= 0 || port > 65535 ||
	    inet_pton(AF_INET, grp, &res.group.sin_addr) != 1 ||
	    !IN_MULTICAST(ntohl(res.group.sin_addr.s_addr)) ||
	    inet_pton(AF_INET, ifa, &ifaddr) != 1) {
		ripc__log(RIPC_LOG_WARN,
			  "resolver disabled: bad group %s, port %ld or "
			  "interface address %s",
			  grp, (long)port, ifa);
		return RIPC_OK;
	}
	if (!res.rec) {
		res.rec = calloc(RIPC_MAX_SERVICE_ID + 1, sizeof(*res.rec));
		if (!res.rec)
			return RIPC_ENOMEM;
	}

	res.mfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	res.ufd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	res.wfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	res.waiters = 0;
	if (res.mfd < 0 || res.ufd < 0 || res.wfd < 0)
		goto fail;
	/* Everybody on this host shares the group port. */
	setsockopt(res.mfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	any.sin_port = res.group.sin_port;
	any.sin_addr = res.group.sin_addr;
	if (bind(res.mfd, (struct sockaddr *)&any, sizeof(any)) < 0)
		goto fail;
	mreq.imr_multiaddr = res.group.sin_addr;
	mreq.imr_interface = ifaddr;
	if (setsockopt(res.mfd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq,
		       sizeof(mreq)) < 0)
		goto fail;
	/* The private socket: sends (to the group or to a querier) and our
	 * answers; bound to the interface address, ephemeral port. */
	any.sin_addr = ifaddr;
	any.sin_port = 0;
	if (bind(res.ufd, (struct sockaddr *)&any, sizeof(any)) < 0 ||
	    setsockopt(res.ufd, IPPROTO_IP, IP_MULTICAST_IF, &ifaddr,
		       sizeof(ifaddr)) < 0 ||
	    setsockopt(res.ufd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop,
		       sizeof(loop)) < 0 ||
	    setsockopt(res.ufd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl,
		       sizeof(ttl)) < 0)
		goto fail;
	res.enabled = true;
	res.ifaddr = ifaddr;
	res.loopback = (ntohl(ifaddr.s_addr) >> 24) == 127;
	{
		int64_t ms = ripc__env_int(RIPC_ENV_RESOLVER_PROBE_MS);

		res.probe_ns = res.loopback || *ripc__env_str(RIPC_ENV_DIRECTORY) ||
					       ms <= 0
				       ? 0
				       : ripc__ms_ns(ms > 10000 ? 10000 : ms);
	}
	memset(res.probe, 0, sizeof(res.probe));
	ripc__log(RIPC_LOG_INFO, "resolver on %s:%ld via %s", grp, (long)port,
		  ifa);
	return RIPC_OK;
fail:
	ripc__log(RIPC_LOG_WARN, "resolver disabled: %s (group %s, interface "
				 "%s)",
		  strerror(errno), grp, ifa);
	ripc__resolver_close();
	return RIPC_OK; /* the host registry still works */
}

void ripc__resolver_close(void)
{
	if (res.mfd >= 0)
		close(res.mfd);
	if (res.ufd >= 0)
		close(res.ufd);
	if (res.wfd >= 0)
		close(res.wfd);
	res.mfd = res.ufd = res.wfd = -1;
	res.enabled = false;
	res.probe_ns = 0;
	memset(res.probe, 0, sizeof(res.probe));
	if (res.rec) {
		for (unsigned i = 0; i <= RIPC_MAX_SERVICE_ID; i++)
			free(res.rec[i]);
		free(res.rec);
		res.rec = NULL;
	}
	res.nrec = 0;
	res.nann = 0;
}

/* ---- the cache ------------------------------------------------------ */

static struct res_rec *rec_get(uint16_t id, bool create)
{
	if (!res.rec[id] && create && res.nrec < RES_MAX_RECORDS) {
		res.rec[id] = calloc(1, sizeof(struct res_rec));
		if (res.rec[id])
			res.nrec++;
	}
	return res.rec[id];
}

static void rec_drop(uint16_t id)
{
	if (res.rec[id]) {
		free(res.rec[id]);
		res.rec[id] = NULL;
		res.nrec--;
		res.version++;
	}
}

/* Record that `info` holds (or, down, no longer holds) id. */
static void learn(uint16_t id, const struct ripc_reg_proc_info *info,
		  bool mcast, bool down)
{
	struct res_rec *r = rec_get(id, !down);
	uint64_t now = ripc__now_ns();
	unsigned i;

	if (!r)
		return;
	if (!mcast && !down) {
		/* A unicast ID has one owner: the latest word wins. */
		if (r->mcast || r->n != 1 ||
		    r->m[0].info.incarnation != info->incarnation)
			res.version++;
		r->mcast = false;
		r->n = 1;
		r->m[0].info = *info;
		r->m[0].learned_ns = now;
		return;
	}
	if (mcast && !r->mcast) {
		r->n = 0;
		r->mcast = true;
		res.version++;
	}
	for (i = 0; i < r->n; i++)
		if (r->m[i].info.incarnation == info->incarnation)
			break;
	if (down) {
		if (i < r->n) {
			r->m[i] = r->m[--r->n];
			res.version++;
		}
		if (r->n == 0)
			rec_drop(id);
		return;
	}
	if (i == r->n) {
		if (r->n >= RIPC_RES_MAX_MEMBERS)
			return;
		r->n++;
		res.version++;
	}
	r->m[i].info = *info;
	r->m[i].learned_ns = now;
}

int ripc__resolver_lookup(uint16_t id, struct ripc_reg_proc_info *out,
			  int max, bool *mcast)
{
	struct res_rec *r;
	uint64_t now;
	int n = 0;
	bool stale = false;

	*mcast = false;
	if (!res.enabled || !(r = res.rec[id]))
		return 0;
	now = ripc__now_ns();
	for (unsigned i = 0; i < r->n && n < max; i++) {
		uint64_t age = now - r->m[i].learned_ns;

		if (age > 2 * res.ttl_ns)
			continue; /* expired: not used any more */
		stale |= age > res.ttl_ns;
		out[n++] = r->m[i].info;
	}
	/* Refresh in the background while the record is still usable; a
	 * group is asked again now and then to learn new members. */
	if (stale || (r->mcast && now - r->last_query_ns > res.ttl_ns / 2))
		ripc__resolver_query(id);
	*mcast = r->mcast;
	return n;
}

void ripc__resolver_forget(uint16_t id)
{
	if (res.enabled)
		rec_drop(id);
}

void ripc__resolver_query(uint16_t id)
{
	struct res_rec *r;
	struct res_dgram d = { .type = RES_QUERY, .service = id };
	struct sockaddr_in me;
	socklen_t len = sizeof(me);
	uint64_t now;

	/* Not on loopback (see the top): only this host would hear it, and
	 * its answers are ignored. */
	if (!res.enabled || res.loopback || !(r = rec_get(id, true)))
		return;
	now = ripc__now_ns();
	if (r->last_query_ns && now - r->last_query_ns < RES_QUERY_GAP_NS)
		return;
	r->last_query_ns = now;
	if (getsockname(res.ufd, (struct sockaddr *)&me, &len) < 0)
		return;
	d.reply_port = ntohs(me.sin_port);
	self_info(&d.info);
	memset(d.info.addr, 0, sizeof(d.info.addr)); /* not needed */
	if (ripc__random(&d.nonce, sizeof(d.nonce)))
		return;
	send_to(&d, &res.group);
}

void ripc__resolver_announce(uint16_t id, bool up, bool mcast)
{
	struct res_announce *a;

	/* Not on loopback (see the top): three datagrams that would wake
	 * every libripc process of the host for nothing, for each client
	 * that comes and goes, one of them beside a new process's first
	 * exchange. */
	if (!res.enabled || res.loopback)
		return;
	if (res.nann >= sizeof(res.ann) / sizeof(res.ann[0]))
		res.nann--; /* drop the oldest repeat schedule: still sent once */
	a = &res.ann[res.nann++];
	*a = (struct res_announce){ id, up, mcast, RES_ANNOUNCE_REPEATS, 0 };
	ripc__timer_note(ripc__resolver_timers(ripc__now_ns()));
}

uint64_t ripc__resolver_timers(uint64_t now)
{
	uint64_t next = UINT64_MAX;

	for (unsigned i = 0; i < res.nann;) {
		struct res_announce *a = &res.ann[i];

		if (now >= a->next_ns) {
			struct res_dgram d = {
				.type = RES_ANNOUNCE,
				.service = a->id,
				.flags = (a->mcast ? RES_F_MCAST : 0) |
					 (a->up ? 0 : RES_F_DOWN),
			};

			self_info(&d.info);
			send_to(&d, &res.group);
			/* 0, 100, 300 ms: a lost datagram is repaired soon */
			a->next_ns = now + ripc__ms_ns(100) *
						   (RES_ANNOUNCE_REPEATS -
						    a->left + 1);
			if (--a->left == 0) {
				res.ann[i] = res.ann[--res.nann];
				continue;
			}
		}
		if (a->next_ns < next)
			next = a->next_ns;
		i++;
	}
	return next;
}

/* ---- duplicate detection ------------------------------------------- */

static struct res_probe *probe_find(uint16_t id)
{
	for (unsigned i = 0; i < RES_MAX_PROBES; i++)
		if (res.probe[i].used && res.probe[i].id == id)
			return &res.probe[i];
	return NULL;
}

static void probe_send(struct res_probe *p)
{
	struct res_dgram d = { .type = RES_PROBE,
			       .service = p->id,
			       .nonce = p->nonce,
			       .flags = p->mcast ? RES_F_MCAST : 0 };
	struct sockaddr_in me;
	socklen_t len = sizeof(me);

	if (getsockname(res.ufd, (struct sockaddr *)&me, &len) < 0)
		return;
	d.reply_port = ntohs(me.sin_port);
	self_info(&d.info);
	memset(d.info.addr, 0, sizeof(d.info.addr)); /* not needed */
	send_to(&d, &res.group);
	p->sent++;
}

uint64_t ripc__resolver_probe_ns(void)
{
	return res.enabled ? res.probe_ns : 0;
}

bool ripc__resolver_loopback(void)
{
	return res.enabled && res.loopback;
}

int ripc__resolver_probe_begin(uint16_t id, bool mcast)
{
	struct res_probe *p = NULL;

	if (!ripc__resolver_probe_ns())
		return -ENOSYS;
	if (probe_find(id))
		return -EALREADY;
	for (unsigned i = 0; i < RES_MAX_PROBES && !p; i++)
		if (!res.probe[i].used)
			p = &res.probe[i];
	if (!p)
		return -EBUSY;
	memset(p, 0, sizeof(*p));
	if (ripc__random(&p->nonce, sizeof(p->nonce)))
		return -EIO;
	p->used = true;
	p->id = id;
	p->mcast = mcast;
	p->start_ns = ripc__now_ns();
	probe_send(p);
	return 0;
}

int ripc__resolver_probe_result(uint16_t id)
{
	struct res_probe *p = probe_find(id);

	if (!p)
		return -ENOENT;
	if (p->conflict)
		return -EEXIST;
	/* A second probe halfway: one lost datagram does not let a
	 * duplicate through. */
	if (p->sent < 2 && ripc__now_ns() - p->start_ns >= res.probe_ns / 2)
		probe_send(p);
	return 0;
}

void ripc__resolver_probe_end(uint16_t id, struct ripc_reg_proc_info *by)
{
	struct res_probe *p = probe_find(id);

	if (!p)
		return;
	if (by)
		*by = p->by;
	p->used = false;
}

void ripc__resolver_describe(char *buf, unsigned len)
{
	char ifa[INET_ADDRSTRLEN] = "", grp[INET_ADDRSTRLEN] = "";

	if (!res.enabled) {
		snprintf(buf, len, "off");
		return;
	}
	inet_ntop(AF_INET, &res.ifaddr, ifa, sizeof(ifa));
	inet_ntop(AF_INET, &res.group.sin_addr, grp, sizeof(grp));
	snprintf(buf, len, "multicast %s:%u via %s%s", grp,
		 ntohs(res.group.sin_port), ifa,
		 res.loopback ? " (loopback: this host only)" : "");
}

/* A PROBE from another process: object if we hold the ID, or probe for it
 * ourselves and come first (the lower incarnation wins, so that two
 * processes probing at once do not both give up or both go on). */
static void probe_input(const struct res_dgram *d,
			const struct sockaddr_in *from)
{
	struct ripc_service *svc = CTX->svc[d->service];
	bool other_mcast = d->flags & RES_F_MCAST;
	struct res_probe *p;
	bool defend = false, mcast = false;

	if (svc && !CTX->shutting_down) {
		defend = !(svc->mcast && other_mcast);
		mcast = svc->mcast;
	} else if ((p = probe_find(d->service)) &&
		   !(p->mcast && other_mcast)) {
		if (CTX->incarnation < d->info.incarnation) {
			defend = true;
			mcast = p->mcast;
		} else {
			p->conflict = true;
			p->by = d->info;
		}
	}
	if (defend) {
		struct res_dgram a = { .type = RES_DEFEND,
				       .service = d->service,
				       .nonce = d->nonce,
				       .flags = mcast ? RES_F_MCAST : 0 };
		struct sockaddr_in to = *from;

		self_info(&a.info);
		to.sin_port = htons(d->reply_port);
		send_to(&a, &to);
	}
}

/* ---- input ---------------------------------------------------------- */

static void handle(const struct res_dgram *d, const struct sockaddr_in *from)
{
	struct ripc_service *svc;

	if (d->info.incarnation == CTX->incarnation)
		return; /* our own multicast, looped back */
	switch (d->type) {
	case RES_QUERY:
		svc = CTX->svc[d->service];
		if (svc && !CTX->shutting_down) {
			struct res_dgram a = {
				.type = RES_ANSWER,
				.service = d->service,
				.nonce = d->nonce,
				.flags = svc->mcast ? RES_F_MCAST : 0,
			};
			struct sockaddr_in to = *from;

			self_info(&a.info);
			to.sin_port = htons(d->reply_port);
			send_to(&a, &to);
		}
		break;
	case RES_ANSWER:
	case RES_ANNOUNCE:
		/* Same-host owners are in the registry, which is the better
		 * source (liveness is checked there). */
		if (d->info.host_id == CTX->host_id)
			break;
		svc = CTX->svc[d->service];
		if (d->type == RES_ANNOUNCE && svc && !(d->flags & RES_F_DOWN) &&
		    !(svc->mcast && (d->flags & RES_F_MCAST)))
			/* Both of us hold it: the probes missed each other
			 * (a partition, lost datagrams, probing off). */
			ripc__log_rl(RIPC_LOG_WARN,
				     "service %u is also registered by process "
				     "%d of host %016llx: duplicate "
				     "registration",
				     d->service, (int)d->info.pid,
				     (unsigned long long)d->info.host_id);
		learn(d->service, &d->info, d->flags & RES_F_MCAST,
		      d->flags & RES_F_DOWN);
		break;
	case RES_PROBE:
		probe_input(d, from);
		break;
	case RES_DEFEND: {
		struct res_probe *p = probe_find(d->service);

		if (p && p->nonce == d->nonce) {
			p->conflict = true;
			p->by = d->info;
		}
		break;
	}
	}
}

void ripc__resolver_wait_enter(void)
{
	res.waiters++;
}

void ripc__resolver_wait_leave(void)
{
	res.waiters--;
}

void ripc__resolver_wait(unsigned timeout_us)
{
	/* Without the lock: only the sockets and the directory's eventfd
	 * are looked at (an answer of the directory also ends the wait). */
	struct pollfd pfd[3];
	struct timespec ts = { 0, (long)timeout_us * 1000 };
	int dfd = ripc__dir_wait_fd();
	unsigned n = 0, wk = 0, dk = 0;

	if (res.enabled && res.ufd >= 0 && res.wfd >= 0) {
		pfd[n++] = (struct pollfd){ .fd = res.ufd, .events = POLLIN };
		wk = n;
		pfd[n++] = (struct pollfd){ .fd = res.wfd, .events = POLLIN };
	}
	if (dfd >= 0) {
		dk = n + 1;
		pfd[n++] = (struct pollfd){ .fd = dfd, .events = POLLIN };
	}
	if (!n) {
		nanosleep(&ts, NULL);
		return;
	}
	if (ppoll(pfd, n, &ts, NULL) > 0) {
		uint64_t v;

		/* Drained by the first waiter to wake: another waiter may
		 * then sleep out its timeout (1 ms), never longer. */
		if (wk && (pfd[wk].revents & POLLIN) &&
		    read(res.wfd, &v, sizeof(v)) < 0)
			(void)0;
		if (dk && (pfd[dk - 1].revents & POLLIN) &&
		    read(dfd, &v, sizeof(v)) < 0)
			(void)0;
	}
}

int ripc__resolver_input(void)
{
	uint8_t buf[RES_MAX_DGRAM + 1];
	int handled = 0;

	if (!res.enabled)
		return 0;
	for (int s = 0; s < 2; s++) {
		int fd = s ? res.ufd : res.mfd;

		for (int k = 0; k < RES_INPUT_BATCH; k++) {
			struct sockaddr_in from;
			socklen_t flen = sizeof(from);
			struct res_dgram d;
			ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT,
					     (struct sockaddr *)&from, &flen);

			if (n < 0)
				break;
			handled++;
			if (flen != sizeof(from) || from.sin_family != AF_INET ||
			    !ripc__res_decode(buf, (size_t)n, &d)) {
				CTX->stats.drops_malformed++;
				continue;
			}
			handle(&d, &from);
		}
	}
	if (handled && res.waiters) {
		uint64_t one = 1;

		if (write(res.wfd, &one, sizeof(one)) < 0)
			(void)0; /* counter full: readable anyway */
	}
	return handled;
}
