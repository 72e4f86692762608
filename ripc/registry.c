/*
 * Host-local registry (see registry.h).
 *
 * File layout (all fields native-endian: the file never leaves the host):
 *   header      4 KiB   magic, layout version, change counter
 *   processes   RIPC_REG_MAX_PROCS x 1536 bytes: identity, addresses,
 *               memberships, published counters, the doorbell's sleep
 *               word, shm pairs (layout 3), the doorbell's mail
 *               counter (layout 4)
 *   services    65535 x 16 bytes: owner process slot + 1 (0 = free),
 *               flags, owner's incarnation
 *
 * Writers take flock(LOCK_EX) on the file, readers flock(LOCK_SH); the lock
 * dies with its holder, so a crashed process never wedges the registry.
 * Every mutation bumps the change counter, which senders read with one
 * atomic load to learn whether their cached routes may be stale.
 *
 * The file is trusted only as far as the user id: it is created 0600 and
 * refused if another user owns it or others can write it.  Its contents
 * are still range-checked before use, because a process that crashed
 * mid-update may leave a half-written record.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "env.h"
#include "log.h"
#include "registry.h"

#define REG_MAGIC 0x3147455243504952ull /* "RIPCREG1" */
#define REG_LAYOUT 4
#define REG_HDR_SIZE 4096
#define REG_PROC_SIZE 1536
#define REG_NSVC 65535

#define REG_MAX_PARTNERS 224 /* shm pairs a process may start (RIPC_SHM_PEERS max) */

#define PROC_FREE 0
#define PROC_LIVE 1

#define SVC_MCAST 0x1u
/* Drawn by ripc_register_random_service_id: a client's identity, never
 * taken over by a restarted process.  Kept when its holder ends (owner 0,
 * the flag stays), so that a sender learns "gone for good" at once instead
 * of waiting for somebody to register it (until the ID is claimed again). */
#define SVC_RANDOM 0x2u

struct reg_header {
	uint64_t magic;
	uint32_t layout;
	uint32_t nprocs;
	uint64_t version; /* change counter, atomically updated */
};

struct reg_proc {
	uint32_t state;
	int32_t pid;
	uint64_t starttime;
	uint64_t incarnation;
	uint64_t host_id;
	struct ripc_reg_addr addr[RIPC_PROV_MAX];
	uint16_t nmcast;
	uint16_t mcast[RIPC_REG_MAX_MCAST];
	/* The process's counters, republished every second (ripc_info -c);
	 * written without the lock: a reader may see a torn update. */
	uint32_t nstats;
	uint64_t stats[RIPC_REG_MAX_STATS];
	/* Non-zero while its progress sleeps: ring its doorbell (bell.c).
	 * Written and exchanged without the lock, atomically. */
	uint32_t sleeping;
	/* Bumped by a process on this host after it sent this one a message
	 * through its doorbell socket (bell.c).  Atomic, without the lock. */
	uint32_t mail;
	/* shm pairs this process is part of, and the processes (slot + 1)
	 * it formed them with (the other side's record counts them too). */
	uint16_t shm_pairs;
	uint16_t npartners;
	uint16_t partners[REG_MAX_PARTNERS];
	/* Bumped by a process that formed a pair with this one: it waits
	 * until this one has mapped it (accepted, bit k of the former's
	 * record for its partner k).  Atomic, without the lock. */
	uint32_t accept_req;
	uint8_t accepted[(REG_MAX_PARTNERS + 7) / 8];
	/* Bit k: this process has mapped partner k in turn (it forms pairs
	 * before it maps, so that its first messages need not wait for the
	 * mapping, bell.c); the partner sends over shm only then. */
	uint8_t mapped[(REG_MAX_PARTNERS + 7) / 8];
};
_Static_assert(sizeof(struct reg_proc) <= REG_PROC_SIZE, "proc record");

struct reg_svc {
	uint32_t owner; /* process slot + 1, 0 = free */
	uint32_t flags;
	uint64_t incarnation;
};

#define REG_FILE_SIZE                                                        \
	(REG_HDR_SIZE + (size_t)RIPC_REG_MAX_PROCS * REG_PROC_SIZE +         \
	 (size_t)REG_NSVC * sizeof(struct reg_svc))

static struct {
	int fd;
	uint8_t *map;
	char path[PATH_MAX];
	int self; /* our process slot, -1 if not attached */
	uint64_t self_start;
	uint64_t reap_after_ns; /* shm_pair: next look for dead partners */
} reg = { .fd = -1, .self = -1 };

static inline struct reg_header *hdr(void)
{
	return (struct reg_header *)reg.map;
}

static inline struct reg_proc *proc_at(unsigned i)
{
	return (struct reg_proc *)(reg.map + REG_HDR_SIZE +
				   (size_t)i * REG_PROC_SIZE);
}

static inline struct reg_svc *svc_at(uint16_t id)
{
	return (struct reg_svc *)(reg.map + REG_HDR_SIZE +
				  (size_t)RIPC_REG_MAX_PROCS * REG_PROC_SIZE) +
	       id;
}

static void lock(int how)
{
	while (flock(reg.fd, how) < 0 && errno == EINTR)
		;
}

static void unlock(void)
{
	flock(reg.fd, LOCK_UN);
}

static void bump(void)
{
	__atomic_add_fetch(&hdr()->version, 1, __ATOMIC_RELEASE);
}

/* Start time of a process (0 if it does not exist or is a zombie: a dead
 * process its parent has not waited for yet still has a pid). */
uint64_t ripc__proc_starttime(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* The command name may contain anything; fields resume after the
	 * last ')'.  starttime is field 22, i.e. the 20th after it. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X' || p[2] == 'x')
		return 0; /* field 3, the state: zombie or dead */
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", &start) != 1)
		return 0;
	return start;
}

/*
 * Reading /proc/<pid>/stat costs 20-30 us, and a first exchange with a new
 * process checks it three or four times (the accept, the sender's look-up
 * when its message arrives, the look-up of its ID for the reply).  A check
 * that found (pid, starttime) alive keeps a pidfd of that process
 * (pidfd_open(2)); later checks poll it, which costs a microsecond and is
 * exact: a pidfd becomes readable when its process ends, zombie included,
 * and it keeps naming the process it was opened for even if the pid is
 * recycled.  (An earlier cache that trusted kill(pid, 0) for 20 ms let a
 * zombie pass for alive, and a service replied into clients that had just
 * been killed.)  ALIVE_CACHE pidfds at most, the least recently opened
 * one closed first, and one closed as soon as its process is found gone;
 * without pidfd_open (ENOSYS, EMFILE...) every check reads /proc.
 */
#define ALIVE_CACHE 4

static struct {
	pthread_mutex_t lock;
	unsigned next;
	struct {
		pid_t pid; /* 0: free */
		int fd;
		uint64_t starttime;
	} e[ALIVE_CACHE];
} alive = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* 1 alive, 0 gone, -1 not cached (or the cache is busy). */
static int alive_cached(pid_t pid, uint64_t starttime)
{
	int ret = -1;

	/* trylock: a child forked while another thread held the lock only
	 * loses the cache. */
	if (pthread_mutex_trylock(&alive.lock))
		return -1;
	for (unsigned i = 0; i < ALIVE_CACHE; i++) {
		struct pollfd pfd = { .fd = alive.e[i].fd, .events = POLLIN };

		if (alive.e[i].pid != pid || alive.e[i].starttime != starttime)
			continue;
		if (poll(&pfd, 1, 0) < 0 || (pfd.revents & POLLNVAL)) {
			/* Closed behind our back: forget it, do not close
			 * a number that may be somebody else's now. */
			alive.e[i].pid = 0;
			break;
		}
		ret = !(pfd.revents & (POLLIN | POLLHUP | POLLERR));
		if (!ret) {
			close(alive.e[i].fd);
			alive.e[i].pid = 0;
		}
		break;
	}
	pthread_mutex_unlock(&alive.lock);
	return ret;
}

/* Keeps fd (a pidfd of pid, found alive with starttime) or closes it. */
static void alive_note(pid_t pid, uint64_t starttime, int fd)
{
	unsigned i;

	if (pthread_mutex_trylock(&alive.lock)) {
		close(fd);
		return;
	}
	for (i = 0; i < ALIVE_CACHE; i++)
		if (!alive.e[i].pid)
			break;
	if (i == ALIVE_CACHE) {
		i = alive.next++ % ALIVE_CACHE;
		close(alive.e[i].fd);
	}
	alive.e[i].pid = pid;
	alive.e[i].fd = fd;
	alive.e[i].starttime = starttime;
	pthread_mutex_unlock(&alive.lock);
}

bool ripc__proc_alive(pid_t pid, uint64_t starttime)
{
	int fd, hit;

	if (pid <= 0)
		return false;
	hit = alive_cached(pid, starttime);
	if (hit >= 0)
		return hit;
	if (kill(pid, 0) < 0 && errno != EPERM)
		return false;
	/* Opened before the start time is read: if the start time matches,
	 * the pidfd names that very process. */
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	/* A recycled pid has a different start time. */
	if (ripc__proc_starttime(pid) != starttime) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	if (fd >= 0)
		alive_note(pid, starttime, fd);
	return true;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
	const uint8_t *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

uint64_t ripc__host_id(void)
{
	char boot[64] = "";
	struct stat st;
	uint64_t h = 0xcbf29ce484222325ull;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (f) {
		if (!fgets(boot, sizeof(boot), f))
			boot[0] = 0;
		fclose(f);
	}
	h = fnv1a(h, boot, strlen(boot));
	/* A network namespace is a host of its own for libripc. */
	if (stat("/proc/self/ns/net", &st) == 0)
		h = fnv1a(h, &st.st_ino, sizeof(st.st_ino));
	return h ? h : 1;
}

static void default_path(char *out, size_t len)
{
	struct stat st;
	unsigned long ns = 0;

	if (stat("/proc/self/ns/net", &st) == 0)
		ns = (unsigned long)st.st_ino;
	/* The layout is part of the name: libripc versions with different
	 * layouts keep separate registries instead of refusing each other. */
	snprintf(out, len, "/dev/shm/ripc%d-%u-%lu.reg", REG_LAYOUT,
		 (unsigned)geteuid(), ns);
}

const char *ripc__reg_path(void)
{
	return reg.path;
}

int ripc__reg_open(const char *path)
{
	struct stat st;
	int fd, ret = 0;
	void *map;

	if (reg.map)
		return 0;
	if (path && *path)
		snprintf(reg.path, sizeof(reg.path), "%s", path);
	else
		default_path(reg.path, sizeof(reg.path));

	fd = open(reg.path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		ripc__log(RIPC_LOG_ERROR, "registry %s: %s", reg.path,
			  strerror(errno));
		return ret;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 022)) {
		ripc__log(RIPC_LOG_ERROR,
			  "registry %s: not a regular file of this user with "
			  "mode 0600; refusing it",
			  reg.path);
		close(fd);
		return -EPERM;
	}
	reg.fd = fd;
	lock(LOCK_EX);
	if (fstat(fd, &st) == 0 && (size_t)st.st_size < REG_FILE_SIZE) {
		if (st.st_size != 0) {
			ripc__log(RIPC_LOG_ERROR,
				  "registry %s: truncated file; remove it",
				  reg.path);
			ret = -EINVAL;
		} else if (ftruncate(fd, REG_FILE_SIZE) < 0) {
			ret = -errno;
		}
	}
	if (ret) {
		unlock();
		close(fd);
		reg.fd = -1;
		return ret;
	}
	map = mmap(NULL, REG_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   0);
	if (map == MAP_FAILED) {
		ret = -errno;
		unlock();
		close(fd);
		reg.fd = -1;
		return ret;
	}
	reg.map = map;
	if (hdr()->magic == 0) {
		hdr()->layout = REG_LAYOUT;
		hdr()->nprocs = RIPC_REG_MAX_PROCS;
		hdr()->version = 1;
		__atomic_store_n(&hdr()->magic, REG_MAGIC, __ATOMIC_RELEASE);
	} else if (hdr()->magic != REG_MAGIC || hdr()->layout != REG_LAYOUT ||
		   hdr()->nprocs != RIPC_REG_MAX_PROCS) {
		ripc__log(RIPC_LOG_ERROR,
			  "registry %s: unknown layout (another libripc "
			  "version?); set RIPC_REGISTRY or remove the file",
			  reg.path);
		ret = -EPROTO;
	}
	unlock();
	if (ret)
		ripc__reg_close();
	return ret;
}

void ripc__reg_close(void)
{
	if (reg.map)
		munmap(reg.map, REG_FILE_SIZE);
	if (reg.fd >= 0)
		close(reg.fd);
	reg.map = NULL;
	reg.fd = -1;
	reg.self = -1;
}

void ripc__reg_forget(void)
{
	/* After fork: the child must not share the parent's flock (it is
	 * per open file description) nor act as the parent's process. */
	if (reg.map)
		munmap(reg.map, REG_FILE_SIZE);
	if (reg.fd >= 0)
		close(reg.fd);
	reg.map = NULL;
	reg.fd = -1;
	reg.self = -1;
}

static bool proc_live(const struct reg_proc *p)
{
	return p->state == PROC_LIVE && ripc__proc_alive(p->pid, p->starttime);
}

/* Owner slot of a service, or -1 when free or its owner is gone. */
static int svc_owner(uint16_t id)
{
	const struct reg_svc *s = svc_at(id);
	uint32_t o = s->owner;
	const struct reg_proc *p;

	if (o == 0 || o > RIPC_REG_MAX_PROCS)
		return -1;
	p = proc_at(o - 1);
	if (p->incarnation != s->incarnation || !proc_live(p))
		return -1;
	return (int)o - 1;
}

/* A process killed without closing its libfabric shm endpoint leaves a
 * 16 MiB region file behind (ref §2).  Its name follows "fi_shm://" in the
 * published address; remove it if it is exactly "<pid>:<n>:<n>" for the
 * dead pid and is a regular file of ours, nothing else.  Not while the pid
 * names a process again (pids are reused; pid_max is often 32768): the
 * file may then be the new process's live region, and removing it would
 * make that process unreachable over shm.  A new libripc process with
 * that pid removes a dead one's region itself before it opens shm
 * (prov/shm/shm.c, stale_own_regions). */
static void remove_shm_region(const struct reg_proc *p)
{
	const struct ripc_reg_addr *a = &p->addr[RIPC_PROV_SHM];
	char name[RIPC_ADDR_MAX + 1], path[RIPC_ADDR_MAX + 16];
	const char *prefix = "fi_shm://";
	unsigned pid, x, y;
	struct stat st;
	int used = 0;

	if (a->len == 0 || a->len > RIPC_ADDR_MAX)
		return;
	memcpy(name, a->addr, a->len);
	name[a->len] = 0;
	if (strncmp(name, prefix, strlen(prefix)))
		return;
	if (sscanf(name + strlen(prefix), "%u:%u:%u%n", &pid, &x, &y, &used) !=
		    3 ||
	    name[strlen(prefix) + used] || (int)pid != p->pid ||
	    ripc__proc_starttime((pid_t)pid))
		return;
	snprintf(path, sizeof(path), "/dev/shm/%s", name + strlen(prefix));
	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == geteuid())
		unlink(path);
}

static bool bit_get(const uint8_t *bm, unsigned k)
{
	return __atomic_load_n(&bm[k / 8], __ATOMIC_ACQUIRE) & (1u << (k % 8));
}

/* LOCK_EX held: no other writer; readers read without the lock. */
static void bit_set(uint8_t *bm, unsigned k, bool v)
{
	uint8_t b = bm[k / 8];

	b = v ? (uint8_t)(b | (1u << (k % 8))) : (uint8_t)(b & ~(1u << (k % 8)));
	__atomic_store_n(&bm[k / 8], b, __ATOMIC_RELEASE);
}

static bool accepted_bit(const struct reg_proc *p, unsigned k)
{
	return bit_get(p->accepted, k);
}

/* Partner k leaves p's list: the last one takes its place.  LOCK_EX. */
static void remove_partner(struct reg_proc *p, unsigned k)
{
	unsigned last = --p->npartners;

	p->partners[k] = p->partners[last];
	bit_set(p->accepted, k, bit_get(p->accepted, last));
	bit_set(p->mapped, k, bit_get(p->mapped, last));
	p->partners[last] = 0;
	bit_set(p->accepted, last, false);
	bit_set(p->mapped, last, false);
}

/* The shm pairs a process leaves: each partner counts one less; no record
 * names it as a partner any more.  LOCK_EX held. */
static void unpair_all(unsigned slot)
{
	struct reg_proc *p = proc_at(slot);

	for (unsigned k = 0; k < p->npartners && k < REG_MAX_PARTNERS; k++) {
		uint16_t o = p->partners[k];

		if (o && o <= RIPC_REG_MAX_PROCS && o != slot + 1 &&
		    proc_at(o - 1)->shm_pairs)
			proc_at(o - 1)->shm_pairs--;
	}
	p->npartners = 0;
	memset(p->accepted, 0, sizeof(p->accepted));
	memset(p->mapped, 0, sizeof(p->mapped));
	for (unsigned i = 0; i < RIPC_REG_MAX_PROCS; i++) {
		struct reg_proc *q = proc_at(i);

		if (i == slot || q->state != PROC_LIVE)
			continue;
		for (unsigned k = 0; k < q->npartners && k < REG_MAX_PARTNERS;
		     k++) {
			if (q->partners[k] != slot + 1)
				continue;
			remove_partner(q, k);
			if (q->shm_pairs)
				q->shm_pairs--;
			break;
		}
	}
}

/* Clear a dead process's record and its unicast services.  LOCK_EX held. */
static void reap(unsigned slot)
{
	struct reg_proc *p = proc_at(slot);

	if (p->state == PROC_LIVE && p->pid != getpid())
		remove_shm_region(p);
	unpair_all(slot);
	for (unsigned id = 0; id < REG_NSVC; id++) {
		struct reg_svc *s = svc_at(id);

		if (s->owner == slot + 1) {
			s->owner = 0;
			s->flags &= SVC_RANDOM; /* the tombstone, see above */
			s->incarnation = 0;
		}
	}
	memset(p, 0, sizeof(*p));
}

int ripc__reg_attach(const struct ripc_reg_proc_info *self)
{
	int slot = -1;

	if (!reg.map)
		return -EBADF;
	lock(LOCK_EX);
	for (unsigned i = 0; i < RIPC_REG_MAX_PROCS; i++) {
		struct reg_proc *p = proc_at(i);

		if (p->state != PROC_FREE && !proc_live(p))
			reap(i);
		if (p->state == PROC_FREE && slot < 0)
			slot = (int)i;
	}
	if (slot >= 0) {
		struct reg_proc *p = proc_at(slot);

		memset(p, 0, sizeof(*p));
		p->pid = getpid();
		p->starttime = reg.self_start = ripc__proc_starttime(getpid());
		p->incarnation = self->incarnation;
		p->host_id = self->host_id;
		memcpy(p->addr, self->addr, sizeof(p->addr));
		p->state = PROC_LIVE;
		reg.self = slot;
		bump();
	}
	unlock();
	return slot >= 0 ? 0 : -ENOSPC;
}

void ripc__reg_detach(void)
{
	if (!reg.map || reg.self < 0)
		return;
	lock(LOCK_EX);
	reap((unsigned)reg.self);
	bump();
	unlock();
	reg.self = -1;
}

int ripc__reg_claim(uint16_t id, bool random)
{
	struct reg_svc *s;
	int ret = 0, owner;

	if (id > RIPC_MAX_SERVICE_ID)
		return -EINVAL;
	if (!reg.map || reg.self < 0)
		return -EBADF;
	lock(LOCK_EX);
	s = svc_at(id);
	owner = svc_owner(id);
	if (s->flags & SVC_MCAST) {
		/* A multicast ID stays one while any member is alive. */
		bool any = false;

		for (unsigned i = 0; i < RIPC_REG_MAX_PROCS && !any; i++) {
			struct reg_proc *p = proc_at(i);

			for (unsigned k = 0;
			     k < p->nmcast && k < RIPC_REG_MAX_MCAST; k++)
				if (p->mcast[k] == id && proc_live(p))
					any = true;
		}
		if (any)
			ret = -EEXIST;
	} else if (owner >= 0) {
		ret = -EEXIST;
	} else if (s->owner && s->owner <= RIPC_REG_MAX_PROCS &&
		   s->owner != (uint32_t)reg.self + 1 &&
		   proc_at(s->owner - 1)->state == PROC_LIVE &&
		   !proc_live(proc_at(s->owner - 1))) {
		/* Its owner died: clear everything it left. */
		reap(s->owner - 1);
	}
	if (!ret) {
		s->owner = (uint32_t)reg.self + 1;
		s->flags = random ? SVC_RANDOM : 0;
		s->incarnation = proc_at(reg.self)->incarnation;
		bump();
	}
	unlock();
	return ret;
}

int ripc__reg_join(uint16_t id)
{
	struct reg_proc *me;
	struct reg_svc *s;
	int ret = 0;

	if (id > RIPC_MAX_SERVICE_ID)
		return -EINVAL;
	if (!reg.map || reg.self < 0)
		return -EBADF;
	lock(LOCK_EX);
	s = svc_at(id);
	me = proc_at(reg.self);
	if (!(s->flags & SVC_MCAST) && svc_owner(id) >= 0) {
		ret = -EEXIST;
	} else if (me->nmcast >= RIPC_REG_MAX_MCAST) {
		ret = -ENOSPC;
	} else {
		for (unsigned k = 0; k < me->nmcast; k++)
			if (me->mcast[k] == id)
				goto out; /* already a member */
		s->owner = 0;
		s->flags = SVC_MCAST;
		s->incarnation = 0;
		me->mcast[me->nmcast++] = id;
		bump();
	}
out:
	unlock();
	return ret;
}

int ripc__reg_release(uint16_t id)
{
	struct reg_proc *me;
	struct reg_svc *s;
	int ret = -ENOENT;

	if (id > RIPC_MAX_SERVICE_ID)
		return -EINVAL;
	if (!reg.map || reg.self < 0)
		return -EBADF;
	lock(LOCK_EX);
	s = svc_at(id);
	me = proc_at(reg.self);
	if (s->owner == (uint32_t)reg.self + 1 && !(s->flags & SVC_MCAST)) {
		s->owner = 0;
		s->incarnation = 0;
		ret = 0;
	}
	for (unsigned k = 0; k < me->nmcast && k < RIPC_REG_MAX_MCAST; k++) {
		if (me->mcast[k] == id) {
			me->mcast[k] = me->mcast[--me->nmcast];
			ret = 0;
			break;
		}
	}
	if (!ret)
		bump();
	unlock();
	return ret;
}

static void fill_info(const struct reg_proc *p, struct ripc_reg_proc_info *o)
{
	o->slot1 = (int32_t)(((const uint8_t *)p - reg.map - REG_HDR_SIZE) /
			     REG_PROC_SIZE) + 1;
	o->incarnation = p->incarnation;
	o->host_id = p->host_id;
	o->pid = p->pid;
	memcpy(o->addr, p->addr, sizeof(o->addr));
	for (int t = 0; t < RIPC_PROV_MAX; t++)
		if (o->addr[t].len > RIPC_ADDR_MAX)
			o->addr[t].len = 0; /* torn record: unusable */
}

bool ripc__reg_gone(uint16_t id)
{
	bool gone;

	if (!reg.map || id > RIPC_MAX_SERVICE_ID)
		return false;
	lock(LOCK_SH);
	gone = (svc_at(id)->flags & SVC_RANDOM) && svc_owner(id) < 0;
	unlock();
	return gone;
}

int ripc__reg_lookup(uint16_t id, struct ripc_reg_proc_info *out)
{
	int owner, ret = -ENOENT;

	if (!reg.map || id > RIPC_MAX_SERVICE_ID)
		return -ENOENT;
	lock(LOCK_SH);
	owner = svc_owner(id);
	if (owner >= 0 && !(svc_at(id)->flags & SVC_MCAST)) {
		fill_info(proc_at(owner), out);
		ret = 0;
	}
	unlock();
	return ret;
}

int ripc__reg_lookup_mcast(uint16_t id, struct ripc_reg_proc_info *out,
			   int max, bool *is_mcast)
{
	int n = 0;

	*is_mcast = false;
	if (!reg.map || id > RIPC_MAX_SERVICE_ID)
		return 0;
	lock(LOCK_SH);
	if (svc_at(id)->flags & SVC_MCAST) {
		*is_mcast = true;
		for (unsigned i = 0; i < RIPC_REG_MAX_PROCS && n < max; i++) {
			const struct reg_proc *p = proc_at(i);

			if (p->state != PROC_LIVE)
				continue;
			for (unsigned k = 0;
			     k < p->nmcast && k < RIPC_REG_MAX_MCAST; k++) {
				if (p->mcast[k] == id && proc_live(p)) {
					fill_info(p, &out[n++]);
					break;
				}
			}
		}
	}
	unlock();
	return n;
}

uint64_t ripc__reg_version(void)
{
	return reg.map ? __atomic_load_n(&hdr()->version, __ATOMIC_ACQUIRE)
		       : 0;
}

void ripc__reg_publish_stats(const uint64_t *vals, unsigned n)
{
	struct reg_proc *me;

	if (!reg.map || reg.self < 0)
		return;
	me = proc_at((unsigned)reg.self);
	if (n > RIPC_REG_MAX_STATS)
		n = RIPC_REG_MAX_STATS;
	memcpy(me->stats, vals, n * sizeof(*vals));
	__atomic_store_n(&me->nstats, n, __ATOMIC_RELEASE);
}

void ripc__reg_foreach_proc(void (*fn)(const struct ripc_reg_proc_info *proc,
				       const uint64_t *stats, unsigned n,
				       void *arg),
			    void *arg)
{
	struct ripc_reg_proc_info info;
	uint64_t stats[RIPC_REG_MAX_STATS];

	if (!reg.map)
		return;
	lock(LOCK_SH);
	for (unsigned i = 0; i < RIPC_REG_MAX_PROCS; i++) {
		const struct reg_proc *p = proc_at(i);
		unsigned n;

		if (!proc_live(p))
			continue;
		fill_info(p, &info);
		n = __atomic_load_n(&p->nstats, __ATOMIC_ACQUIRE);
		if (n > RIPC_REG_MAX_STATS)
			n = RIPC_REG_MAX_STATS;
		memcpy(stats, p->stats, n * sizeof(*stats));
		fn(&info, stats, n, arg);
	}
	unlock();
}

void ripc__reg_foreach(void (*fn)(uint16_t id, bool mcast,
				  const struct ripc_reg_proc_info *owner,
				  void *arg),
		       void *arg)
{
	struct ripc_reg_proc_info info;

	if (!reg.map)
		return;
	lock(LOCK_SH);
	for (unsigned id = 0; id < REG_NSVC; id++) {
		int owner = svc_owner((uint16_t)id);

		if (owner >= 0 && !(svc_at(id)->flags & SVC_MCAST)) {
			fill_info(proc_at(owner), &info);
			fn((uint16_t)id, false, &info, arg);
		}
	}
	for (unsigned i = 0; i < RIPC_REG_MAX_PROCS; i++) {
		const struct reg_proc *p = proc_at(i);

		if (!proc_live(p))
			continue;
		fill_info(p, &info);
		for (unsigned k = 0; k < p->nmcast && k < RIPC_REG_MAX_MCAST;
		     k++)
			fn(p->mcast[k], true, &info, arg);
	}
	unlock();
}

/* ---- same-host wake-ups and shm pairs ---------------------------------- */

uint32_t *ripc__reg_sleep_word(int slot)
{
	if (!reg.map || slot < 0 || slot >= RIPC_REG_MAX_PROCS)
		return NULL;
	return &proc_at((unsigned)slot)->sleeping;
}

uint32_t *ripc__reg_mail_word(int slot)
{
	if (!reg.map || slot < 0 || slot >= RIPC_REG_MAX_PROCS)
		return NULL;
	return &proc_at((unsigned)slot)->mail;
}

bool ripc__reg_holds(int slot, uint64_t incarnation)
{
	const struct reg_proc *p;

	if (!reg.map || slot < 0 || slot >= RIPC_REG_MAX_PROCS)
		return false;
	p = proc_at((unsigned)slot);
	/* Without the lock: a torn read only says "not any more". */
	return __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == PROC_LIVE &&
	       __atomic_load_n(&p->incarnation, __ATOMIC_ACQUIRE) ==
		       incarnation;
}

int ripc__reg_self_slot(void)
{
	return reg.self;
}

int ripc__reg_pid_slot(int32_t pid, uint64_t *inc)
{
	if (!reg.map || pid <= 0)
		return -1;
	for (unsigned i = 0; i < RIPC_REG_MAX_PROCS; i++) {
		const struct reg_proc *p = proc_at(i);

		if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == PROC_LIVE &&
		    __atomic_load_n(&p->pid, __ATOMIC_RELAXED) == pid) {
			*inc = __atomic_load_n(&p->incarnation,
					       __ATOMIC_RELAXED);
			return (int)i;
		}
	}
	return -1;
}

int ripc__reg_vouch(uint64_t incarnation, pid_t pid)
{
	int ret = -ENOENT, fd;
	uint64_t start = 0;

	if (!reg.map || !incarnation || pid <= 0)
		return -ENOENT;
	lock(LOCK_SH);
	for (unsigned i = 0; i < RIPC_REG_MAX_PROCS; i++) {
		const struct reg_proc *p = proc_at(i);

		if (p->state == PROC_LIVE && p->incarnation == incarnation) {
			ret = p->pid == pid ? 0 : -EPERM;
			start = p->starttime;
			break;
		}
	}
	unlock();
	/* It is alive: it has just sent.  Its pidfd goes into the cache,
	 * so that the look-ups that follow (the sender as a peer, the
	 * route for the answer) do not read /proc. */
	if (ret == 0 && alive_cached(pid, start) < 0 &&
	    (fd = (int)syscall(SYS_pidfd_open, pid, 0)) >= 0)
		alive_note(pid, start, fd);
	return ret;
}

/* The slot of the record of this incarnation, alive or not, or -1.
 * Lock held. */
static int incarnation_record(uint64_t incarnation)
{
	for (unsigned i = 0; i < RIPC_REG_MAX_PROCS; i++) {
		const struct reg_proc *p = proc_at(i);

		if (p->state == PROC_LIVE && p->incarnation == incarnation)
			return (int)i;
	}
	return -1;
}

int ripc__reg_find_incarnation(uint64_t incarnation,
			       struct ripc_reg_proc_info *out)
{
	int ret = -ENOENT, slot;

	if (!reg.map || !incarnation)
		return -ENOENT;
	lock(LOCK_SH);
	slot = incarnation_record(incarnation);
	if (slot >= 0 && proc_live(proc_at((unsigned)slot))) {
		fill_info(proc_at((unsigned)slot), out);
		ret = 0;
	}
	unlock();
	return ret;
}

int ripc__reg_incarnation_slot(uint64_t incarnation)
{
	int slot;

	if (!reg.map || !incarnation)
		return -1;
	lock(LOCK_SH);
	slot = incarnation_record(incarnation);
	unlock();
	return slot;
}

static bool partners(const struct reg_proc *a, unsigned b_slot)
{
	for (unsigned k = 0; k < a->npartners && k < REG_MAX_PARTNERS; k++)
		if (a->partners[k] == b_slot + 1)
			return true;
	return false;
}

/* Reclaim the records of ended processes that share a pair with `slot`
 * (so that its count is true again).  LOCK_EX held.  Returns how many. */
static unsigned reap_dead_partners(unsigned slot)
{
	const struct reg_proc *me = proc_at(slot);
	unsigned n = 0;

	for (unsigned i = 0; i < RIPC_REG_MAX_PROCS; i++) {
		struct reg_proc *q = proc_at(i);

		/* kill(0) first: reading /proc for each of 160 live
		 * partners under the lock would hold every other process
		 * of the host up. */
		if (i == slot || q->state != PROC_LIVE ||
		    !(partners(me, i) || partners(q, slot)) ||
		    (kill(q->pid, 0) == 0 || errno == EPERM) || proc_live(q))
			continue;
		reap(i);
		n++;
	}
	if (n)
		bump();
	return n;
}

#define REAP_EVERY_NS (200ull * 1000 * 1000)

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool ripc__reg_shm_pair(int other, unsigned limit)
{
	struct reg_proc *me, *o;
	bool ok = false;

	if (!reg.map || reg.self < 0 || other < 0 ||
	    other >= RIPC_REG_MAX_PROCS)
		return false;
	if (other == reg.self)
		return true; /* to itself: its own entry, always there */
	me = proc_at((unsigned)reg.self);
	o = proc_at((unsigned)other);
	/* Already a pair (the common case: every route look-up asks): read
	 * without the lock.  A torn read only sends us the locked way. */
	if (partners(me, (unsigned)other) || partners(o, (unsigned)reg.self))
		return o->state == PROC_LIVE;
	/* Full on either side: look for pairs with ended processes at most
	 * every REAP_EVERY_NS (the owner's sweep frees them anyway), and
	 * otherwise answer without the lock.  Hundreds of processes that
	 * fall back to tcp must not queue on the lock at each look-up. */
	if ((me->shm_pairs >= limit || o->shm_pairs >= limit ||
	     me->npartners >= REG_MAX_PARTNERS) &&
	    mono_ns() < reg.reap_after_ns)
		return false;
	lock(LOCK_EX);
	for (int attempt = 0; attempt < 2 && !ok; attempt++) {
		if (o->state != PROC_LIVE)
			break;
		if (partners(me, (unsigned)other) ||
		    partners(o, (unsigned)reg.self)) {
			ok = true;
		} else if (me->shm_pairs < limit && o->shm_pairs < limit &&
			   me->npartners < REG_MAX_PARTNERS) {
			bit_set(me->accepted, me->npartners, false);
			bit_set(me->mapped, me->npartners, false);
			me->partners[me->npartners++] = (uint16_t)(other + 1);
			me->shm_pairs++;
			o->shm_pairs++;
			/* It has to map us before we send (registry.h). */
			__atomic_fetch_add(&o->accept_req, 1, __ATOMIC_SEQ_CST);
			ok = true;
		} else if (attempt == 0) {
			/* Full: maybe of processes that ended unnoticed. */
			reg.reap_after_ns = mono_ns() + REAP_EVERY_NS;
			if (!reap_dead_partners((unsigned)other) &&
			    !reap_dead_partners((unsigned)reg.self))
				break;
		}
	}
	unlock();
	return ok;
}

bool ripc__reg_slot_live(int slot, uint64_t incarnation)
{
	struct reg_proc *p;
	bool live;

	if (!reg.map || slot < 0 || slot >= RIPC_REG_MAX_PROCS)
		return false;
	p = proc_at((unsigned)slot);
	if (p->state != PROC_LIVE || p->incarnation != incarnation)
		return false;
	if (ripc__proc_alive(p->pid, p->starttime))
		return true;
	/* Dead: reclaim its record now, and the pairs with it. */
	lock(LOCK_EX);
	live = p->state == PROC_LIVE && p->incarnation == incarnation &&
	       ripc__proc_alive(p->pid, p->starttime);
	if (!live && p->state == PROC_LIVE && p->incarnation == incarnation) {
		reap((unsigned)slot);
		bump();
	}
	unlock();
	return live;
}

bool ripc__reg_slot_gone(int slot, uint64_t incarnation)
{
	const struct reg_proc *p;

	if (!reg.map || slot < 0 || slot >= RIPC_REG_MAX_PROCS)
		return true;
	p = proc_at((unsigned)slot);
	/* Read without the lock: a torn read only delays the answer. */
	if (p->state != PROC_LIVE || p->incarnation != incarnation)
		return true;
	if (kill(p->pid, 0) == 0 || errno == EPERM)
		return false;
	return !ripc__reg_slot_live(slot, incarnation); /* reclaims it */
}

/* ---- accepting pairs -------------------------------------------------- */

/* Index of partner `other` in p's list, or -1. */
static int partner_index(const struct reg_proc *p, int other)
{
	for (unsigned k = 0; k < p->npartners && k < REG_MAX_PARTNERS; k++)
		if (p->partners[k] == other + 1)
			return (int)k;
	return -1;
}

bool ripc__reg_shm_accepted(int other)
{
	const struct reg_proc *me, *o;
	int k;

	if (!reg.map || reg.self < 0 || other < 0 ||
	    other >= RIPC_REG_MAX_PROCS || other == reg.self)
		return true; /* nothing to wait for (or to know) */
	me = proc_at((unsigned)reg.self);
	/* Read without the lock: a stale "not yet" only means asking again. */
	k = partner_index(me, other);
	if (k >= 0)
		return bit_get(me->accepted, (unsigned)k);
	/* It formed the pair: it has to have mapped us in turn. */
	o = proc_at((unsigned)other);
	k = partner_index(o, reg.self);
	return k < 0 || bit_get(o->mapped, (unsigned)k);
}

void ripc__reg_shm_mapped(int other, uint64_t incarnation)
{
	struct reg_proc *me, *o;
	int k;

	if (!reg.map || reg.self < 0 || other < 0 ||
	    other >= RIPC_REG_MAX_PROCS || other == reg.self)
		return;
	me = proc_at((unsigned)reg.self);
	o = proc_at((unsigned)other);
	lock(LOCK_EX);
	if (o->state == PROC_LIVE && o->incarnation == incarnation) {
		if ((k = partner_index(me, other)) >= 0)
			bit_set(me->mapped, (unsigned)k, true);
		else if ((k = partner_index(o, reg.self)) >= 0)
			bit_set(o->accepted, (unsigned)k, true);
	}
	unlock();
}

uint32_t ripc__reg_accept_requests(void)
{
	if (!reg.map || reg.self < 0)
		return 0;
	return __atomic_load_n(&proc_at((unsigned)reg.self)->accept_req,
			       __ATOMIC_SEQ_CST);
}

int ripc__reg_accept_pending(struct ripc_reg_proc_info *out, int max)
{
	int n = 0;

	if (!reg.map || reg.self < 0)
		return 0;
	lock(LOCK_SH);
	for (unsigned i = 0; i < RIPC_REG_MAX_PROCS && n < max; i++) {
		const struct reg_proc *q = proc_at(i);
		int k;

		if ((int)i == reg.self || q->state != PROC_LIVE)
			continue;
		k = partner_index(q, reg.self);
		if (k >= 0 && !accepted_bit(q, (unsigned)k) && proc_live(q))
			fill_info(q, &out[n++]);
	}
	unlock();
	return n;
}

void ripc__reg_accept_done(int slot, uint64_t incarnation)
{
	struct reg_proc *q;
	int k;

	if (!reg.map || reg.self < 0 || slot < 0 || slot >= RIPC_REG_MAX_PROCS)
		return;
	q = proc_at((unsigned)slot);
	lock(LOCK_EX);
	if (q->state == PROC_LIVE && q->incarnation == incarnation &&
	    (k = partner_index(q, reg.self)) >= 0)
		bit_set(q->accepted, (unsigned)k, true);
	unlock();
}
