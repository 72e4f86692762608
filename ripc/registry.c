/*
 * Host-local registry (see registry.h).
 *
 * File layout (all fields native-endian: the file never leaves the host):
 *   header      4 KiB   magic, layout version, change counter
 *   processes   RIPC_REG_MAX_PROCS x 512 bytes
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"
#include "log.h"
#include "registry.h"

#define REG_MAGIC 0x3147455243504952ull /* "RIPCREG1" */
#define REG_LAYOUT 2
#define REG_HDR_SIZE 4096
#define REG_PROC_SIZE 1024
#define REG_NSVC 65535

#define PROC_FREE 0
#define PROC_LIVE 1

#define SVC_MCAST 0x1u

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

bool ripc__proc_alive(pid_t pid, uint64_t starttime)
{
	if (pid <= 0)
		return false;
	if (kill(pid, 0) < 0 && errno != EPERM)
		return false;
	/* A recycled pid has a different start time. */
	return ripc__proc_starttime(pid) == starttime;
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
 * dead pid and is a regular file of ours, nothing else. */
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
	    name[strlen(prefix) + used] || (int)pid != p->pid)
		return;
	snprintf(path, sizeof(path), "/dev/shm/%s", name + strlen(prefix));
	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == geteuid())
		unlink(path);
}

/* Clear a dead process's record and its unicast services.  LOCK_EX held. */
static void reap(unsigned slot)
{
	struct reg_proc *p = proc_at(slot);

	if (p->state == PROC_LIVE && p->pid != getpid())
		remove_shm_region(p);
	for (unsigned id = 0; id < REG_NSVC; id++) {
		struct reg_svc *s = svc_at(id);

		if (s->owner == slot + 1) {
			s->owner = 0;
			s->flags = 0;
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

int ripc__reg_claim(uint16_t id)
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
		s->flags = 0;
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
	o->incarnation = p->incarnation;
	o->host_id = p->host_id;
	o->pid = p->pid;
	memcpy(o->addr, p->addr, sizeof(o->addr));
	for (int t = 0; t < RIPC_PROV_MAX; t++)
		if (o->addr[t].len > RIPC_ADDR_MAX)
			o->addr[t].len = 0; /* torn record: unusable */
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
