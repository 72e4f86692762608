/*
 * The ZooKeeper directory engine: RIPC_DIRECTORY=zk://h:p,h:p,.../chroot.
 *
 * Node layout (ripc_protocol(7), DIRECTORY), base = <chroot>/ripc1:
 *
 *   base/svc/<id>               unicast: an EPHEMERAL node of the holder,
 *                               data = its holder record;
 *                               multicast: a CONTAINER node, data = the
 *                               group record
 *   base/svc/<id>/<inc>         a member of multicast <id>: EPHEMERAL,
 *                               named by its incarnation (16 hex digits),
 *                               data = its holder record
 *
 * One node per ID makes every conflict one atomic operation on the
 * server: a unicast claim is a create that fails if the ID is held in
 * either way, and a member cannot be created under a unicast holder
 * (ephemeral nodes have no children).  The server deletes a holder's
 * nodes when its session ends (close, or expiry after the session
 * timeout), and a group node when its last member is gone.
 *
 * Threads: the client library runs an I/O thread and a completion thread
 * that calls the watcher and every completion below; the engine adds a
 * maintenance thread that replaces an expired session, claims again what
 * this process holds after that, and redoes lookups that failed while the
 * servers were unreachable.  One mutex (d->mu) protects everything here;
 * every zoo_a* call is made with it held (they only queue a request), and
 * it is never held across a blocking ZooKeeper call (init is the one
 * exception, see new_handle).
 *
 * Node data comes from whoever can write to the servers: every record is
 * decoded with ripc__dir_rec_decode, and what fails is counted (malformed
 * in describe) and treated as "held, but unusable".
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "dir_record.h"
#include "directory.h"
#include "log.h"

#define ZK_IDS (RIPC_MAX_SERVICE_ID + 1)
#define ZK_CACHE_MAX 16384  /* IDs cached; least recently used go first */
#define ZK_MEMBERS_MAX 256  /* members of a group read (= the core's) */
#define ZK_PATH_MAX 600
#define ZK_CLAIM_STEPS 32   /* conflicting steps one claim may take */
#define ZK_MAINT_NS 500000000ull
#define ZK_TIMEDOUT 1       /* not a ZooKeeper code: our deadline passed */

enum ent_state {
	E_PENDING = 0, /* asked, no answer yet */
	E_ABSENT,      /* nobody holds it (an exists watch is armed) */
	E_HOLDER,      /* m[0] holds it */
	E_GROUP,       /* a multicast ID with n members */
	E_BAD,         /* held, but the record is malformed */
};

enum { HELD_NONE = 0, HELD_UNICAST, HELD_MCAST };

struct zk_ent {
	uint8_t state;
	bool fetching; /* a fetch is in flight */
	bool again;    /* a watch fired meanwhile: fetch once more */
	bool stale;    /* a fetch failed or a watch fired while offline */
	uint32_t gen;  /* completions of other generations are ignored */
	uint16_t n;
	uint64_t used_ns;
	struct ripc_reg_proc_info *m;
};

struct ripc_dir {
	pthread_mutex_t mu;
	pthread_cond_t cv;  /* completions and connection changes */
	pthread_cond_t mcv; /* work for the maintenance thread */
	pthread_t thread;
	bool thread_started;

	zhandle_t *zh;
	char url[512];
	char hosts[512];
	char base[300]; /* <chroot>/ripc1 */
	struct ripc_dir_cfg cfg;
	int efd;
	uint64_t version;

	bool connected, ever_connected, expired, stop;
	unsigned closers; /* threads closing an old handle (see closer) */
	unsigned users;   /* application threads inside claim() */
	bool retry, refetch_all, reclaim, parents_ok;
	int64_t session_id;
	unsigned negotiated_ms;
	uint64_t open_ns, down_ns;
	uint32_t gen_counter;

	struct zk_ent *ent[ZK_IDS];
	unsigned nent;
	uint8_t held[ZK_IDS];      /* HELD_* */
	uint8_t releasing[ZK_IDS]; /* HELD_* whose node is still to delete */
	unsigned nheld;

	uint64_t malformed, sessions, reclaims, lost, fetches;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct timespec abs_ts(uint64_t ns)
{
	return (struct timespec){ (time_t)(ns / 1000000000ull),
				  (long)(ns % 1000000000ull) };
}

static void bump(struct ripc_dir *d)
{
	uint64_t one = 1;

	__atomic_add_fetch(&d->version, 1, __ATOMIC_RELEASE);
	if (write(d->efd, &one, sizeof(one)) < 0)
		(void)0; /* counter full: readable anyway */
}

static void svc_path(const struct ripc_dir *d, uint16_t id, char *buf)
{
	snprintf(buf, ZK_PATH_MAX, "%s/svc/%u", d->base, id);
}

static void member_path(const struct ripc_dir *d, uint16_t id, uint64_t inc,
			char *buf)
{
	char name[17];

	ripc__dir_member_name(inc, name);
	snprintf(buf, ZK_PATH_MAX, "%s/svc/%u/%s", d->base, id, name);
}

/* base/svc/<id> (returns 1) or base/svc/<id>/<member> (2), else 0. */
static int parse_path(const struct ripc_dir *d, const char *path,
		      uint16_t *id, uint64_t *inc)
{
	size_t bl = strlen(d->base);
	const char *p;
	unsigned long v = 0;
	int digits = 0;

	if (!path || strncmp(path, d->base, bl) || strncmp(path + bl, "/svc/", 5))
		return 0;
	for (p = path + bl + 5; *p >= '0' && *p <= '9' && digits < 6; p++) {
		v = v * 10 + (unsigned long)(*p - '0');
		digits++;
	}
	if (!digits || v > RIPC_MAX_SERVICE_ID)
		return 0;
	*id = (uint16_t)v;
	if (*p == '\0')
		return 1;
	if (*p == '/' && ripc__dir_member_parse(p + 1, inc))
		return 2;
	return 0;
}

static size_t self_record(const struct ripc_dir *d, uint8_t *buf)
{
	struct ripc_dir_rec r = { .kind = RIPC_DIR_REC_HOLDER,
				  .info = d->cfg.self,
				  .starttime = d->cfg.self_starttime };

	return ripc__dir_rec_encode(&r, buf);
}

static void zk_log(const char *msg)
{
	size_t n = strlen(msg);

	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		n--;
	ripc__log(RIPC_LOG_DEBUG, "zookeeper: %.*s", (int)n, msg);
}

static void watcher(zhandle_t *zh, int type, int state, const char *path,
		    void *ctx);

/* ---- the cache -------------------------------------------------------- */

static void ent_free(struct ripc_dir *d, uint16_t id)
{
	struct zk_ent *e = d->ent[id];

	if (!e)
		return;
	free(e->m);
	free(e);
	d->ent[id] = NULL;
	d->nent--;
}

static struct zk_ent *ent_new(struct ripc_dir *d, uint16_t id)
{
	struct zk_ent *e;

	if (d->nent >= ZK_CACHE_MAX) {
		/* Evict the least recently used idle entry.  Its watches stay
		 * on the server until they fire and are then ignored. */
		int victim = -1;

		for (unsigned i = 0; i < ZK_IDS; i++)
			if (d->ent[i] && !d->ent[i]->fetching &&
			    (victim < 0 ||
			     d->ent[i]->used_ns < d->ent[victim]->used_ns))
				victim = (int)i;
		if (victim < 0)
			return NULL;
		ent_free(d, (uint16_t)victim);
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->used_ns = now_ns();
	d->ent[id] = e;
	d->nent++;
	return e;
}

/* Store an answer; a change bumps the version. */
static void install(struct ripc_dir *d, struct zk_ent *e, uint8_t state,
		    const struct ripc_reg_proc_info *m, uint16_t n)
{
	struct ripc_reg_proc_info *copy = NULL;

	if (e->state == state && e->n == n &&
	    (!n || !memcmp(e->m, m, n * sizeof(*m))))
		return;
	if (n) {
		copy = malloc(n * sizeof(*m));
		if (!copy) {
			e->stale = true; /* asked again later */
			return;
		}
		memcpy(copy, m, n * sizeof(*m));
	}
	free(e->m);
	e->m = copy;
	e->n = n;
	e->state = state;
	bump(d);
}

struct zk_op {
	struct ripc_dir *d;
	uint16_t id;
	uint32_t gen;
	struct zk_group *g;
	int idx;
};

struct zk_group {
	uint32_t gen;
	uint16_t id;
	int pending, n;
	bool failed;
	bool ok[ZK_MEMBERS_MAX];
	struct ripc_reg_proc_info m[ZK_MEMBERS_MAX];
};

static struct zk_op *op_new(struct ripc_dir *d, uint16_t id, uint32_t gen)
{
	struct zk_op *op = calloc(1, sizeof(*op));

	if (op) {
		op->d = d;
		op->id = id;
		op->gen = gen;
	}
	return op;
}

/* The entry an answer is for, if it is still the one that asked. */
static struct zk_ent *live(struct ripc_dir *d, uint16_t id, uint32_t gen)
{
	struct zk_ent *e = d->ent[id];

	return e && e->fetching && e->gen == gen ? e : NULL;
}

static void fetch_start(struct ripc_dir *d, uint16_t id);

static void fetch_end(struct ripc_dir *d, uint16_t id, struct zk_ent *e,
		      bool failed)
{
	e->fetching = false;
	if (failed) {
		e->stale = true; /* redone when connected again */
		return;
	}
	if (e->again)
		fetch_start(d, id);
}

static void on_member(int rc, const char *val, int len, const struct Stat *st,
		      const void *data)
{
	struct zk_op *op = (struct zk_op *)data;
	struct ripc_dir *d = op->d;
	struct zk_group *g = op->g;
	struct ripc_dir_rec r;
	struct zk_ent *e;

	(void)st;
	pthread_mutex_lock(&d->mu);
	if (rc == ZOK) {
		if (len >= 0 && len <= RIPC_DIR_REC_MAX &&
		    ripc__dir_rec_decode((const uint8_t *)val, (size_t)len,
					 &r) == RIPC_DIR_REC_HOLDER) {
			g->m[op->idx] = r.info;
			g->ok[op->idx] = true;
		} else {
			d->malformed++;
			ripc__log_rl(RIPC_LOG_WARN,
				     "directory: malformed member record of "
				     "service %u ignored",
				     g->id);
		}
	} else if (rc != ZNONODE) {
		g->failed = true; /* a member that left is no failure */
	}
	if (--g->pending == 0) {
		e = live(d, g->id, g->gen);
		if (e) {
			int n = 0;

			for (int i = 0; i < g->n; i++)
				if (g->ok[i])
					g->m[n++] = g->m[i];
			if (!g->failed)
				install(d, e, E_GROUP, g->m, (uint16_t)n);
			fetch_end(d, g->id, e, g->failed);
		}
		free(g);
	}
	pthread_mutex_unlock(&d->mu);
	free(op);
}

static void on_children(int rc, const struct String_vector *sv,
			const void *data)
{
	struct zk_op *op = (struct zk_op *)data;
	struct ripc_dir *d = op->d;
	struct zk_ent *e;
	struct zk_group *g = NULL;
	char path[ZK_PATH_MAX];

	pthread_mutex_lock(&d->mu);
	e = live(d, op->id, op->gen);
	if (!e)
		goto out;
	if (rc == ZNONODE) {
		e->again = true; /* the group went away: ask from the top */
		fetch_end(d, op->id, e, false);
		goto out;
	}
	if (rc != ZOK || !d->zh || !(g = calloc(1, sizeof(*g)))) {
		fetch_end(d, op->id, e, true);
		goto out;
	}
	g->gen = op->gen;
	g->id = op->id;
	g->pending = 1; /* ours, dropped below */
	for (int i = 0; sv && i < sv->count && g->n < ZK_MEMBERS_MAX; i++) {
		uint64_t inc;
		struct zk_op *m;

		if (!ripc__dir_member_parse(sv->data[i], &inc)) {
			d->malformed++;
			continue;
		}
		m = op_new(d, op->id, op->gen);
		if (!m) {
			g->failed = true;
			break;
		}
		m->g = g;
		m->idx = g->n;
		member_path(d, op->id, inc, path);
		if (zoo_aget(d->zh, path, 0, on_member, m) != ZOK) {
			free(m);
			g->failed = true;
			break;
		}
		g->n++;
		g->pending++;
	}
	if (sv && sv->count > ZK_MEMBERS_MAX)
		ripc__log_rl(RIPC_LOG_WARN,
			     "directory: service %u has %d members; the first "
			     "%d are used",
			     op->id, sv->count, ZK_MEMBERS_MAX);
	if (--g->pending == 0) {
		int n = 0;

		for (int i = 0; i < g->n; i++)
			if (g->ok[i])
				g->m[n++] = g->m[i];
		if (!g->failed)
			install(d, e, E_GROUP, g->m, (uint16_t)n);
		fetch_end(d, op->id, e, g->failed);
		free(g);
	}
out:
	pthread_mutex_unlock(&d->mu);
	free(op);
}

static void on_exists(int rc, const struct Stat *st, const void *data)
{
	struct zk_op *op = (struct zk_op *)data;
	struct ripc_dir *d = op->d;
	struct zk_ent *e;

	(void)st;
	pthread_mutex_lock(&d->mu);
	e = live(d, op->id, op->gen);
	if (e) {
		if (rc == ZNONODE) {
			install(d, e, E_ABSENT, NULL, 0);
			fetch_end(d, op->id, e, false);
		} else if (rc == ZOK) {
			e->again = true; /* created meanwhile: read it */
			fetch_end(d, op->id, e, false);
		} else {
			fetch_end(d, op->id, e, true);
		}
	}
	pthread_mutex_unlock(&d->mu);
	free(op);
}

static void on_get(int rc, const char *val, int len, const struct Stat *st,
		   const void *data)
{
	struct zk_op *op = (struct zk_op *)data;
	struct ripc_dir *d = op->d;
	struct ripc_dir_rec r;
	char path[ZK_PATH_MAX];
	struct zk_ent *e;
	int kind;

	(void)st;
	pthread_mutex_lock(&d->mu);
	e = live(d, op->id, op->gen);
	if (!e)
		goto done;
	if (rc == ZNONODE) {
		/* Absent: watch for its creation (the negative cache). */
		svc_path(d, op->id, path);
		if (d->zh && zoo_awexists(d->zh, path, watcher, d, on_exists,
					  op) == ZOK) {
			pthread_mutex_unlock(&d->mu);
			return; /* op goes on */
		}
		fetch_end(d, op->id, e, true);
		goto done;
	}
	if (rc != ZOK) {
		fetch_end(d, op->id, e, true);
		goto done;
	}
	kind = len >= 0 && len <= RIPC_DIR_REC_MAX
		       ? ripc__dir_rec_decode((const uint8_t *)val,
					      (size_t)len, &r)
		       : -EBADMSG;
	if (kind == RIPC_DIR_REC_GROUP) {
		svc_path(d, op->id, path);
		if (d->zh && zoo_awget_children(d->zh, path, watcher, d,
						on_children, op) == ZOK) {
			pthread_mutex_unlock(&d->mu);
			return;
		}
		fetch_end(d, op->id, e, true);
		goto done;
	}
	if (kind == RIPC_DIR_REC_HOLDER) {
		install(d, e, E_HOLDER, &r.info, 1);
	} else {
		d->malformed++;
		ripc__log_rl(RIPC_LOG_WARN,
			     "directory: malformed record of service %u "
			     "(%d bytes): treated as held and unusable",
			     op->id, len);
		install(d, e, E_BAD, NULL, 0);
	}
	fetch_end(d, op->id, e, false);
done:
	pthread_mutex_unlock(&d->mu);
	free(op);
}

/* Ask the servers about id, arming the watches that keep the answer
 * current.  Lock held. */
static void fetch_start(struct ripc_dir *d, uint16_t id)
{
	struct zk_ent *e = d->ent[id];
	char path[ZK_PATH_MAX];
	struct zk_op *op;

	if (!e)
		return;
	if (e->fetching) {
		e->again = true;
		return;
	}
	if (!d->zh || !d->connected) {
		e->stale = true;
		return;
	}
	e->gen = ++d->gen_counter;
	op = op_new(d, id, e->gen);
	if (!op) {
		e->stale = true;
		return;
	}
	svc_path(d, id, path);
	e->fetching = true;
	e->again = false;
	e->stale = false;
	d->fetches++;
	if (zoo_awget(d->zh, path, watcher, d, on_get, op) != ZOK) {
		e->fetching = false;
		e->stale = true;
		free(op);
	}
}

/* ---- session and watches ---------------------------------------------- */

static void session_event(struct ripc_dir *d, zhandle_t *zh, int state)
{
	if (state == ZOO_CONNECTED_STATE) {
		const clientid_t *cid = zoo_client_id(zh);
		int64_t sid = cid ? cid->client_id : 0;

		if (sid != d->session_id) {
			/* A new session: the old one's watches and
			 * ephemeral nodes are gone. */
			if (d->ever_connected) {
				d->refetch_all = true;
				d->reclaim = true;
			}
			d->session_id = sid;
			d->sessions++;
			d->parents_ok = false;
		}
		d->connected = true;
		d->ever_connected = true;
		d->retry = true;
		d->negotiated_ms = (unsigned)zoo_recv_timeout(zh);
		if (d->negotiated_ms != d->cfg.session_timeout_ms)
			ripc__log_rl(RIPC_LOG_INFO,
				     "directory: the servers set the session "
				     "timeout to %u ms (asked: %u ms)",
				     d->negotiated_ms,
				     d->cfg.session_timeout_ms);
		ripc__log(RIPC_LOG_INFO,
			  "directory: connected to %s (session 0x%" PRIx64
			  ", timeout %u ms)",
			  d->url, (uint64_t)sid, d->negotiated_ms);
	} else if (state == ZOO_EXPIRED_SESSION_STATE ||
		   state == ZOO_AUTH_FAILED_STATE) {
		if (d->connected)
			d->down_ns = now_ns();
		d->connected = false;
		d->expired = true;
		ripc__log(RIPC_LOG_WARN,
			  "directory: session %s (%s); opening a new one and "
			  "registering this process's services again",
			  state == ZOO_EXPIRED_SESSION_STATE ? "expired"
							     : "refused",
			  d->url);
	} else {
		/* CONNECTING, ASSOCIATING: the client library tries the
		 * other servers by itself. */
		if (d->connected) {
			d->down_ns = now_ns();
			ripc__log(RIPC_LOG_INFO,
				  "directory: connection to %s lost", d->url);
		}
		d->connected = false;
	}
	pthread_cond_broadcast(&d->cv);
	pthread_cond_signal(&d->mcv);
}

static void watcher(zhandle_t *zh, int type, int state, const char *path,
		    void *ctx)
{
	struct ripc_dir *d = ctx;
	uint16_t id;
	uint64_t inc;
	int kind;

	pthread_mutex_lock(&d->mu);
	if (zh != d->zh) /* a closed session's last words */
		goto out;
	if (type == ZOO_SESSION_EVENT) {
		session_event(d, zh, state);
		goto out;
	}
	if (type == ZOO_NOTWATCHING_EVENT)
		goto out;
	kind = parse_path(d, path, &id, &inc);
	if (kind == 1) {
		if (d->ent[id])
			fetch_start(d, id);
		if (type == ZOO_DELETED_EVENT && d->held[id] == HELD_UNICAST) {
			/* Our node went away under us (deleted by somebody
			 * else): put it back, or learn who took the ID. */
			d->reclaim = true;
			pthread_cond_signal(&d->mcv);
		}
	} else if (kind == 2 && type == ZOO_DELETED_EVENT &&
		   d->held[id] == HELD_MCAST &&
		   inc == d->cfg.self.incarnation) {
		d->reclaim = true;
		pthread_cond_signal(&d->mcv);
	}
out:
	pthread_mutex_unlock(&d->mu);
}

/* ---- blocking calls (claims) ------------------------------------------ */

/* One request a thread waits for.  The completion may come after the
 * waiter gave up; whoever is last frees it. */
struct zk_call {
	struct ripc_dir *d;
	int refs;
	bool done, abandoned;
	int rc;
	struct Stat stat;
	int len;
	uint8_t data[RIPC_DIR_REC_MAX];
	/* a create whose waiter gave up: undone if it succeeds anyway */
	bool is_create;
	uint16_t id;
	uint8_t want;
	char path[ZK_PATH_MAX];
};

static void noop_void(int rc, const void *data)
{
	(void)rc;
	(void)data;
}

static void noop_stat(int rc, const struct Stat *st, const void *data)
{
	(void)rc;
	(void)st;
	(void)data;
}

static void call_put(struct zk_call *c)
{
	if (--c->refs == 0)
		free(c);
}

static void call_finish(struct zk_call *c, int rc)
{
	struct ripc_dir *d = c->d;

	c->rc = rc;
	c->done = true;
	if (c->abandoned && c->is_create && rc == ZOK &&
	    c->want != HELD_NONE && d->held[c->id] != c->want && d->zh)
		zoo_adelete(d->zh, c->path, -1, noop_void, NULL);
	pthread_cond_broadcast(&d->cv);
	call_put(c);
}

static void on_call_string(int rc, const char *val, const void *data)
{
	struct zk_call *c = (struct zk_call *)data;
	struct ripc_dir *d = c->d;

	(void)val;
	pthread_mutex_lock(&d->mu);
	call_finish(c, rc);
	pthread_mutex_unlock(&d->mu);
}

static void on_call_void(int rc, const void *data)
{
	struct zk_call *c = (struct zk_call *)data;
	struct ripc_dir *d = c->d;

	pthread_mutex_lock(&d->mu);
	call_finish(c, rc);
	pthread_mutex_unlock(&d->mu);
}

static void on_call_data(int rc, const char *val, int len,
			 const struct Stat *st, const void *data)
{
	struct zk_call *c = (struct zk_call *)data;
	struct ripc_dir *d = c->d;

	pthread_mutex_lock(&d->mu);
	if (rc == ZOK) {
		if (st)
			c->stat = *st;
		c->len = len;
		if (len > 0 && len <= (int)sizeof(c->data))
			memcpy(c->data, val, (size_t)len);
	}
	call_finish(c, rc);
	pthread_mutex_unlock(&d->mu);
}

enum call_kind { C_CREATE, C_GET, C_DELETE };

/* Issue one request and wait for its answer until the deadline.  Lock
 * held (released while waiting).  Returns the ZooKeeper code, or
 * ZK_TIMEDOUT.  A create of the node of a claim (want: HELD_UNICAST or
 * HELD_MCAST) that succeeds after its waiter gave up is deleted again
 * unless the ID is held by then. */
static int call_claim(struct ripc_dir *d, enum call_kind kind,
		      const char *path, const void *val, int vlen, int mode,
		      int version, uint64_t deadline, struct zk_call **out,
		      uint16_t id, uint8_t want)
{
	struct zk_call *c = calloc(1, sizeof(*c));
	int rc;

	if (out)
		*out = NULL;
	if (!c)
		return ZSYSTEMERROR;
	if (!d->zh) {
		free(c);
		return ZINVALIDSTATE;
	}
	c->d = d;
	c->refs = 2;
	c->id = id;
	c->want = want;
	snprintf(c->path, sizeof(c->path), "%s", path);
	switch (kind) {
	case C_CREATE:
		c->is_create = true;
		rc = zoo_acreate(d->zh, path, val, vlen, &ZOO_OPEN_ACL_UNSAFE,
				 mode, on_call_string, c);
		break;
	case C_GET:
		rc = zoo_aget(d->zh, path, 0, on_call_data, c);
		break;
	default:
		rc = zoo_adelete(d->zh, path, version, on_call_void, c);
		break;
	}
	if (rc != ZOK) {
		free(c);
		return rc;
	}
	while (!c->done) {
		struct timespec ts = abs_ts(deadline);

		if (now_ns() >= deadline || d->stop) {
			c->abandoned = true;
			break;
		}
		pthread_cond_timedwait(&d->cv, &d->mu, &ts);
	}
	rc = c->done ? c->rc : ZK_TIMEDOUT;
	ripc__log(RIPC_LOG_DEBUG, "directory: %s %s: %s",
		  kind == C_CREATE ? "create" : kind == C_GET ? "get" : "delete",
		  path, rc == ZK_TIMEDOUT ? "no answer in time" : zerror(rc));
	if (out && c->done) {
		c->refs++;
		*out = c;
	}
	call_put(c);
	return rc;
}

static int call(struct ripc_dir *d, enum call_kind kind, const char *path,
		const void *val, int vlen, int mode, int version,
		uint64_t deadline, struct zk_call **out)
{
	return call_claim(d, kind, path, val, vlen, mode, version, deadline,
			  out, 0, HELD_NONE);
}

/* Wait until connected; false at the deadline, or at once for the
 * maintenance thread when the session expired (replacing it is its own
 * job).  Lock held. */
static bool wait_connected(struct ripc_dir *d, uint64_t deadline)
{
	while (!d->connected || !d->zh) {
		struct timespec ts = abs_ts(deadline);

		if (now_ns() >= deadline || d->stop ||
		    (d->expired && pthread_equal(pthread_self(), d->thread)))
			return false;
		pthread_cond_timedwait(&d->cv, &d->mu, &ts);
	}
	return true;
}

static bool conn_error(int rc)
{
	return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
	       rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE ||
	       rc == ZCLOSING || rc == ZSESSIONMOVED;
}

/* base and its ancestors, persistent.  Lock held. */
static int make_parents(struct ripc_dir *d, uint64_t deadline)
{
	char path[ZK_PATH_MAX];
	size_t n;
	int rc;

	snprintf(path, sizeof(path), "%s/svc", d->base);
	n = strlen(path);
	for (size_t i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		path[i] = '\0';
		rc = call(d, C_CREATE, path, NULL, -1, ZOO_PERSISTENT, 0,
			  deadline, NULL);
		if (i < n)
			path[i] = '/';
		if (rc != ZOK && rc != ZNODEEXISTS)
			return rc;
	}
	d->parents_ok = true;
	return ZOK;
}

/* The node of id exists and is not ours: may it be taken?  Returns 0
 * (it was removed, or vanished: try again), -EEXIST (a live holder, a
 * group with members, or garbage), or a ZooKeeper code / ZK_TIMEDOUT
 * (positive or negative, never -EEXIST) for connection trouble.  Lock
 * held. */
static int examine(struct ripc_dir *d, uint16_t id, bool for_mcast,
		   uint64_t deadline)
{
	char path[ZK_PATH_MAX];
	struct ripc_dir_rec r;
	struct zk_call *c;
	int rc, kind;

	svc_path(d, id, path);
	rc = call(d, C_GET, path, NULL, 0, 0, 0, deadline, &c);
	if (rc == ZNONODE)
		return 0;
	if (rc != ZOK)
		return rc;
	kind = c->len >= 0 && c->len <= (int)sizeof(c->data)
		       ? ripc__dir_rec_decode(c->data, (size_t)c->len, &r)
		       : -EBADMSG;
	if (kind == RIPC_DIR_REC_GROUP) {
		if (for_mcast || c->stat.numChildren > 0) {
			call_put(c);
			return for_mcast ? 0 : -EEXIST;
		}
		/* An empty group the server has not removed yet: remove
		 * it, unless somebody joins at the same moment. */
		rc = call(d, C_DELETE, path, NULL, 0, 0, c->stat.version,
			  deadline, NULL);
		call_put(c);
		if (rc == ZOK || rc == ZNONODE || rc == ZBADVERSION)
			return 0;
		return rc == ZNOTEMPTY ? -EEXIST : rc;
	}
	if (kind != RIPC_DIR_REC_HOLDER) {
		d->malformed++;
		ripc__log_rl(RIPC_LOG_WARN,
			     "directory: service %u is held by a node with a "
			     "malformed record; not taking it",
			     id);
		call_put(c);
		return -EEXIST;
	}
	if (r.info.incarnation == d->cfg.self.incarnation) {
		int64_t owner = c->stat.ephemeralOwner;

		if (owner == d->session_id) {
			call_put(c);
			return 1; /* ours already (an answer lost on the way) */
		}
		/* Ours, but of a session that ended (the servers have not
		 * expired it yet): replace it with one of this session. */
		rc = call(d, C_DELETE, path, NULL, 0, 0, c->stat.version,
			  deadline, NULL);
		call_put(c);
		if (rc == ZOK || rc == ZNONODE || rc == ZBADVERSION)
			return 0;
		return rc;
	}
	if (r.info.host_id == d->cfg.self.host_id && d->cfg.holder_alive &&
	    !d->cfg.holder_alive(&r.info, r.starttime)) {
		/* A dead holder of this host: its session has not expired
		 * yet, but we know better. */
		ripc__log(RIPC_LOG_INFO,
			  "directory: service %u: removing the record of dead "
			  "process %d of this host",
			  id, (int)r.info.pid);
		rc = call(d, C_DELETE, path, NULL, 0, 0, c->stat.version,
			  deadline, NULL);
		call_put(c);
		if (rc == ZOK || rc == ZNONODE || rc == ZBADVERSION)
			return 0;
		return rc;
	}
	call_put(c);
	return -EEXIST;
}

/* Our member node exists: 1 if it belongs to this session, else 0 after
 * removing it (a node of a session that ended goes when the servers
 * expire that session: it is replaced by one of this session), or a
 * ZooKeeper code.  Lock held. */
static int examine_member(struct ripc_dir *d, const char *path,
			  uint64_t deadline)
{
	struct zk_call *c;
	int rc = call(d, C_GET, path, NULL, 0, 0, 0, deadline, &c);

	if (rc == ZNONODE)
		return 0;
	if (rc != ZOK)
		return rc;
	if (c->stat.ephemeralOwner == d->session_id) {
		call_put(c);
		return 1;
	}
	rc = call(d, C_DELETE, path, NULL, 0, 0, c->stat.version, deadline,
		  NULL);
	call_put(c);
	return rc == ZOK || rc == ZNONODE || rc == ZBADVERSION ? 0 : rc;
}

/* Lock held (released while waiting). */
static int claim_locked(struct ripc_dir *d, uint16_t id, bool mcast,
			uint64_t deadline)
{
	uint8_t rec[RIPC_DIR_REC_MAX], grp[RIPC_DIR_REC_MAX];
	struct ripc_dir_rec g = { .kind = RIPC_DIR_REC_GROUP };
	char path[ZK_PATH_MAX], gpath[ZK_PATH_MAX];
	int len = (int)self_record(d, rec), steps = 0, rc;

	ripc__dir_rec_encode(&g, grp);
	svc_path(d, id, gpath);
	if (mcast)
		member_path(d, id, d->cfg.self.incarnation, path);
	else
		snprintf(path, sizeof(path), "%s", gpath);
	if (d->held[id] == (mcast ? HELD_MCAST : HELD_UNICAST))
		d->releasing[id] = HELD_NONE; /* a re-claim */
	while (steps++ < ZK_CLAIM_STEPS) {
		if (!wait_connected(d, deadline))
			return now_ns() >= deadline ? -ETIMEDOUT : -EAGAIN;
		rc = call_claim(d, C_CREATE, path, rec, len, ZOO_EPHEMERAL, 0,
				deadline, NULL, id,
				mcast ? HELD_MCAST : HELD_UNICAST);
		switch (rc) {
		case ZOK:
			goto ok;
		case ZNODEEXISTS:
			if (mcast) {
				/* Our own member node: of this session? */
				rc = examine_member(d, path, deadline);
				if (rc == 1)
					goto ok;
				break;
			}
			rc = examine(d, id, false, deadline);
			if (rc == 1)
				goto ok;
			if (rc == -EEXIST)
				return -EEXIST;
			break;
		case ZNOCHILDRENFOREPHEMERALS:
			/* A unicast holder where a group should be. */
			rc = examine(d, id, true, deadline);
			if (rc == -EEXIST || rc == 1)
				return -EEXIST;
			break;
		case ZNONODE:
			if (!d->parents_ok) {
				rc = make_parents(d, deadline);
				if (rc != ZOK && !conn_error(rc) &&
				    rc != ZK_TIMEDOUT)
					goto fail;
			}
			if (mcast) {
				rc = call(d, C_CREATE, gpath, grp,
					  RIPC_DIR_REC_GROUP_LEN, ZOO_CONTAINER,
					  0, deadline, NULL);
				if (rc == ZNONODE)
					d->parents_ok = false;
			}
			break;
		case ZK_TIMEDOUT:
			return -ETIMEDOUT;
		default:
			if (!conn_error(rc))
				goto fail;
			break;
		}
		if (rc == ZK_TIMEDOUT)
			return -ETIMEDOUT;
		if (now_ns() >= deadline)
			return -ETIMEDOUT;
	}
	ripc__log(RIPC_LOG_WARN,
		  "directory: service %u: no stable answer after %d steps", id,
		  ZK_CLAIM_STEPS);
	return -EAGAIN;
fail:
	ripc__log(RIPC_LOG_WARN, "directory: claiming service %u at %s: %s", id,
		  d->url, zerror(rc));
	return rc == ZNOAUTH ? -EACCES : -EIO;
ok:
	if (d->held[id] == HELD_NONE)
		d->nheld++;
	d->held[id] = mcast ? HELD_MCAST : HELD_UNICAST;
	d->releasing[id] = HELD_NONE;
	/* Watch our own node: if somebody deletes it, we put it back. */
	if (d->zh)
		zoo_awexists(d->zh, path, watcher, d, noop_stat, NULL);
	return 0;
}

static int zk_claim(struct ripc_dir *d, uint16_t id, bool mcast,
		    uint64_t deadline_ns)
{
	int ret;

	if (id > RIPC_MAX_SERVICE_ID)
		return -EINVAL;
	pthread_mutex_lock(&d->mu);
	if (d->stop) {
		pthread_mutex_unlock(&d->mu);
		return -ESHUTDOWN;
	}
	d->users++;
	ret = claim_locked(d, id, mcast, deadline_ns);
	d->users--;
	pthread_cond_broadcast(&d->cv); /* zk_close may wait for us */
	pthread_mutex_unlock(&d->mu);
	return ret;
}

/* ---- release ------------------------------------------------------------ */

static void on_release_del(int rc, const void *data)
{
	struct zk_op *op = (struct zk_op *)data;
	struct ripc_dir *d = op->d;

	pthread_mutex_lock(&d->mu);
	if (rc == ZOK || rc == ZNONODE || rc == ZBADVERSION)
		d->releasing[op->id] = HELD_NONE;
	pthread_mutex_unlock(&d->mu);
	free(op);
}

static void on_release_get(int rc, const char *val, int len,
			   const struct Stat *st, const void *data)
{
	struct zk_op *op = (struct zk_op *)data;
	struct ripc_dir *d = op->d;
	struct ripc_dir_rec r;
	char path[ZK_PATH_MAX];

	pthread_mutex_lock(&d->mu);
	if (rc == ZOK && st && d->releasing[op->id] == HELD_UNICAST) {
		bool ours = len >= 0 && len <= RIPC_DIR_REC_MAX &&
			    ripc__dir_rec_decode((const uint8_t *)val,
						 (size_t)len, &r) ==
				    RIPC_DIR_REC_HOLDER &&
			    r.info.incarnation == d->cfg.self.incarnation;

		/* Only our own node, at the version we saw. */
		if (ours && d->zh) {
			svc_path(d, op->id, path);
			if (zoo_adelete(d->zh, path, st->version,
					on_release_del, op) == ZOK) {
				pthread_mutex_unlock(&d->mu);
				return; /* op goes on */
			}
		} else {
			d->releasing[op->id] = HELD_NONE; /* not ours */
		}
	} else if (rc == ZNONODE && d->releasing[op->id] == HELD_UNICAST) {
		d->releasing[op->id] = HELD_NONE;
	}
	/* Other errors: retried when connected again (d->retry). */
	pthread_mutex_unlock(&d->mu);
	free(op);
}

/* Lock held. */
static void release_send(struct ripc_dir *d, uint16_t id)
{
	char path[ZK_PATH_MAX];
	struct zk_op *op;

	if (!d->zh || !d->connected || !(op = op_new(d, id, 0)))
		return; /* retried when connected */
	if (d->releasing[id] == HELD_MCAST) {
		member_path(d, id, d->cfg.self.incarnation, path);
		if (zoo_adelete(d->zh, path, -1, on_release_del, op) != ZOK)
			free(op);
	} else {
		/* Read first: after a lost session the node may be
		 * somebody else's now. */
		svc_path(d, id, path);
		if (zoo_aget(d->zh, path, 0, on_release_get, op) != ZOK)
			free(op);
	}
}

static void zk_release(struct ripc_dir *d, uint16_t id, bool mcast)
{
	if (id > RIPC_MAX_SERVICE_ID)
		return;
	pthread_mutex_lock(&d->mu);
	if (d->held[id] != HELD_NONE)
		d->nheld--;
	d->held[id] = HELD_NONE;
	d->releasing[id] = mcast ? HELD_MCAST : HELD_UNICAST;
	release_send(d, id);
	pthread_mutex_unlock(&d->mu);
}

/* ---- maintenance --------------------------------------------------------- */

/* A new handle; the lock is held so that its first session event, which
 * may come before zookeeper_init2 returns, finds d->zh set.  The call does
 * not wait for the network (name resolution aside). */
static zhandle_t *new_handle(struct ripc_dir *d)
{
	zhandle_t *zh = zookeeper_init2(d->hosts, watcher,
					(int)d->cfg.session_timeout_ms, NULL,
					d, 0, zk_log);

	d->zh = zh;
	return zh;
}

/* Closing a handle whose session expired can take seconds inside the
 * client library (its I/O thread sleeps out a timeout); a thread of its own
 * does it, so that the new session is up and claims are made again at
 * once.  Its pending completions (ZCLOSING) still use d: zk_close waits for
 * every closer. */
struct zk_closer {
	struct ripc_dir *d;
	zhandle_t *zh;
};

static void *closer_main(void *arg)
{
	struct zk_closer *c = arg;
	struct ripc_dir *d = c->d;

	zookeeper_close(c->zh);
	pthread_mutex_lock(&d->mu);
	d->closers--;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	free(c);
	return NULL;
}

/* Lock held. */
static void close_later(struct ripc_dir *d, zhandle_t *zh)
{
	struct zk_closer *c = malloc(sizeof(*c));
	pthread_attr_t at;
	pthread_t th;

	if (c) {
		c->d = d;
		c->zh = zh;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		d->closers++;
		if (pthread_create(&th, &at, closer_main, c) == 0) {
			pthread_attr_destroy(&at);
			return;
		}
		d->closers--;
		pthread_attr_destroy(&at);
		free(c);
	}
	pthread_mutex_unlock(&d->mu);
	zookeeper_close(zh);
	pthread_mutex_lock(&d->mu);
}

static void *maint_main(void *arg)
{
	struct ripc_dir *d = arg;

	pthread_mutex_lock(&d->mu);
	while (!d->stop) {
		struct timespec ts;

		if (d->expired || !d->zh) {
			zhandle_t *old = d->zh;

			d->expired = false;
			d->zh = NULL;
			if (old)
				close_later(d, old);
			if (d->stop)
				break;
			if (!new_handle(d)) {
				ripc__log_rl(RIPC_LOG_WARN,
					     "directory: cannot open a session "
					     "with %s: %s",
					     d->url, strerror(errno));
				d->expired = true; /* again, after a pause */
				ts = abs_ts(now_ns() + ZK_MAINT_NS);
				pthread_cond_timedwait(&d->mcv, &d->mu, &ts);
			}
			continue;
		}
		if (d->connected && (d->retry || d->refetch_all)) {
			bool all = d->refetch_all;

			d->retry = d->refetch_all = false;
			for (unsigned i = 0; i < ZK_IDS; i++) {
				struct zk_ent *e = d->ent[i];

				if (e && (all || e->stale ||
					  (e->state == E_PENDING &&
					   !e->fetching)))
					fetch_start(d, (uint16_t)i);
				if (d->releasing[i])
					release_send(d, (uint16_t)i);
			}
		}
		if (d->connected && d->reclaim) {
			uint64_t deadline =
				now_ns() + 2000000ull * d->cfg.session_timeout_ms;

			d->reclaim = false;
			ripc__log(RIPC_LOG_DEBUG,
				  "directory: claiming %u IDs again", d->nheld);
			for (unsigned i = 0; i < ZK_IDS && !d->stop; i++) {
				uint8_t h = d->held[i];
				int ret;

				if (h == HELD_NONE)
					continue;
				ret = claim_locked(d, (uint16_t)i,
						   h == HELD_MCAST, deadline);
				if (d->held[i] != h)
					continue; /* released meanwhile */
				if (ret == 0) {
					d->reclaims++;
				} else if (ret == -EEXIST) {
					d->held[i] = HELD_NONE;
					d->nheld--;
					d->lost++;
					ripc__log(RIPC_LOG_WARN,
						  "directory: service %u is "
						  "held by another process now "
						  "(this one's record was "
						  "removed or its session "
						  "lost): other hosts no "
						  "longer reach it here",
						  i);
				} else {
					d->reclaim = true; /* later */
				}
			}
		}
		if (d->expired)
			continue; /* a claim gave up for it: replace it now */
		ts = abs_ts(now_ns() + ZK_MAINT_NS);
		pthread_cond_timedwait(&d->mcv, &d->mu, &ts);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* ---- the ops ------------------------------------------------------------- */

static int zk_open(const char *where, const struct ripc_dir_cfg *cfg,
		   struct ripc_dir **out)
{
	char chroot[256];
	struct ripc_dir *d;
	pthread_condattr_t ca;
	sigset_t all, old;
	int ret;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	if (ripc__dir_where_split(where, d->hosts, sizeof(d->hosts), chroot,
				  sizeof(chroot))) {
		free(d);
		return -EINVAL;
	}
	snprintf(d->url, sizeof(d->url), "zk://%s", where);
	snprintf(d->base, sizeof(d->base), "%s/ripc1", chroot);
	d->cfg = *cfg;
	/* The servers clamp it to their own limits (by default 2 to 20
	 * ticks); describe() shows what was agreed. */
	if (d->cfg.session_timeout_ms < 500)
		d->cfg.session_timeout_ms = 500;
	if (d->cfg.session_timeout_ms > 600000)
		d->cfg.session_timeout_ms = 600000;
	d->open_ns = now_ns();
	d->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->efd < 0) {
		ret = -errno;
		free(d);
		return ret;
	}
	pthread_mutex_init(&d->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cv, &ca);
	pthread_cond_init(&d->mcv, &ca);
	pthread_condattr_destroy(&ca);

	/* Threads of the engine and of the client library take no
	 * signals meant for the application (they inherit this mask). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_mutex_lock(&d->mu);
	if (!new_handle(d)) {
		ret = errno ? -errno : -EINVAL;
		pthread_mutex_unlock(&d->mu);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		goto fail;
	}
	pthread_mutex_unlock(&d->mu);
	ret = -pthread_create(&d->thread, NULL, maint_main, d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		zookeeper_close(d->zh);
		goto fail;
	}
	d->thread_started = true;
	*out = d;
	return 0;
fail:
	close(d->efd);
	pthread_cond_destroy(&d->cv);
	pthread_cond_destroy(&d->mcv);
	pthread_mutex_destroy(&d->mu);
	free(d);
	return ret;
}

static void zk_close(struct ripc_dir *d)
{
	zhandle_t *zh;

	pthread_mutex_lock(&d->mu);
	d->stop = true;
	pthread_cond_broadcast(&d->mcv);
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	if (d->thread_started)
		pthread_join(d->thread, NULL);
	pthread_mutex_lock(&d->mu);
	zh = d->zh;
	d->zh = NULL;
	pthread_mutex_unlock(&d->mu);
	/* Ends the session: the servers delete our nodes at once.  Pending
	 * completions run (ZCLOSING) and may take d->mu: not held here. */
	if (zh)
		zookeeper_close(zh);
	pthread_mutex_lock(&d->mu);
	/* Claims that were waiting saw stop and give up; wait for them and
	 * for the threads closing old handles before freeing d. */
	while (d->closers || d->users)
		pthread_cond_wait(&d->cv, &d->mu);
	pthread_mutex_unlock(&d->mu);
	for (unsigned i = 0; i < ZK_IDS; i++)
		ent_free(d, (uint16_t)i);
	close(d->efd);
	pthread_cond_destroy(&d->cv);
	pthread_cond_destroy(&d->mcv);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

static void zk_forget(struct ripc_dir *d)
{
	/* In a forked child: the session, its threads and possibly a locked
	 * d->mu are the parent's.  Only our copy of the descriptor goes. */
	close(d->efd);
}

static int zk_lookup(struct ripc_dir *d, uint16_t id,
		     struct ripc_reg_proc_info *out, int max, bool *mcast)
{
	struct zk_ent *e;
	int n = 0;

	*mcast = false;
	if (id > RIPC_MAX_SERVICE_ID)
		return 0;
	pthread_mutex_lock(&d->mu);
	e = d->ent[id];
	if (e && e->state != E_PENDING) {
		e->used_ns = now_ns();
		switch (e->state) {
		case E_HOLDER:
			if (max > 0) {
				out[0] = e->m[0];
				n = 1;
			}
			break;
		case E_GROUP:
			*mcast = true;
			for (n = 0; n < e->n && n < max; n++)
				out[n] = e->m[n];
			break;
		}
		/* A watch fired while the servers were unreachable: the
		 * answer is kept until a fresh one comes. */
		if (e->stale && d->connected)
			fetch_start(d, id);
		pthread_mutex_unlock(&d->mu);
		return n;
	}
	if (!e && !(e = ent_new(d, id))) {
		pthread_mutex_unlock(&d->mu);
		return -ENOMEM;
	}
	e->used_ns = now_ns();
	fetch_start(d, id);
	n = d->connected ||
		    (!d->ever_connected &&
		     now_ns() - d->open_ns <
			     1000000ull * d->cfg.session_timeout_ms)
	? -EAGAIN
	: -ENOTCONN;
	pthread_mutex_unlock(&d->mu);
	return n;
}

static void zk_invalidate(struct ripc_dir *d, uint16_t id)
{
	if (id > RIPC_MAX_SERVICE_ID)
		return;
	pthread_mutex_lock(&d->mu);
	/* Answers still on their way find no entry (or a newer one) and are
	 * dropped. */
	ent_free(d, id);
	pthread_mutex_unlock(&d->mu);
}

static uint64_t zk_version(struct ripc_dir *d)
{
	return __atomic_load_n(&d->version, __ATOMIC_ACQUIRE);
}

static int zk_wait_fd(struct ripc_dir *d)
{
	return d->efd;
}

static void zk_describe(struct ripc_dir *d, char *buf, unsigned len)
{
	char state[96];

	pthread_mutex_lock(&d->mu);
	if (d->connected)
		snprintf(state, sizeof(state),
			 "connected session=0x%" PRIx64 " timeout_ms=%u",
			 (uint64_t)d->session_id, d->negotiated_ms);
	else if (d->ever_connected)
		snprintf(state, sizeof(state),
			 "disconnected for %.1f s (%s)",
			 (double)(now_ns() - d->down_ns) / 1e9,
			 d->expired || !d->zh ? "session expired, opening a new one"
					      : "reconnecting, session kept");
	else
		snprintf(state, sizeof(state), "connecting for %.1f s",
			 (double)(now_ns() - d->open_ns) / 1e9);
	snprintf(buf, len,
		 "%s %s cached=%u held=%u sessions=%" PRIu64
		 " reclaimed=%" PRIu64 " lost=%" PRIu64 " malformed=%" PRIu64,
		 d->url, state, d->nent, d->nheld, d->sessions, d->reclaims,
		 d->lost, d->malformed);
	pthread_mutex_unlock(&d->mu);
}

const struct ripc_dir_ops ripc__dir_zk_ops = {
	.scheme = "zk",
	.open = zk_open,
	.close = zk_close,
	.forget = zk_forget,
	.claim = zk_claim,
	.release = zk_release,
	.lookup = zk_lookup,
	.invalidate = zk_invalidate,
	.version = zk_version,
	.wait_fd = zk_wait_fd,
	.describe = zk_describe,
};

/* For tests (test/functional/ripc_dirtest.c): the session's credentials,
 * so that a test can end the session from outside as a server would on
 * expiry.  0, or -ENOTCONN. */
int ripc__dir_zk_session(struct ripc_dir *d, int64_t *sid, char *passwd,
			 int len);
int ripc__dir_zk_session(struct ripc_dir *d, int64_t *sid, char *passwd,
			 int len)
{
	const clientid_t *cid;
	int ret = -ENOTCONN;

	pthread_mutex_lock(&d->mu);
	if (d->zh && d->connected && (cid = zoo_client_id(d->zh))) {
		*sid = cid->client_id;
		memcpy(passwd, cid->passwd,
		       len < (int)sizeof(cid->passwd) ? (size_t)len
						       : sizeof(cid->passwd));
		ret = 0;
	}
	pthread_mutex_unlock(&d->mu);
	return ret;
}
