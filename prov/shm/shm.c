/*
 * shm transport: libfabric's shared-memory provider, for peers on the same
 * host.  Its CQ has no wait fd in 1.17 (the progress thread polls it), it
 * allows 256 peers per endpoint, and with FI_MR_VIRT_ADDR granted its RMA
 * uses process_vm_readv/writev without checking keys (ref §2, §3.2): the
 * trust boundary is the user id.  RIPC_SHM_CHECKED withholds VIRT_ADDR.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "log.h"
#include "ofi.h"

const struct ripc_ofi_row ripc__shm_row = {
	.name = "shm",
	.prov_legacy = "shm",
	.prov_current = "shm",
	.mr_mode_offer = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
			 FI_MR_PROV_KEY | FI_MR_ENDPOINT,
	.bind_src_addr = false,
	.same_host_only = true,
	.wait_fd = false,
	.unchecked_fast_rma = true,
	.frag_injects = true,
	.region_prefix = "fi_shm://",
	.warm_av = true,
};

/*
 * Does shm's RMA have CMA here?  With it, libfabric 1.17's shm reads a
 * peer's memory with process_vm_readv and needs nothing of the peer;
 * without it (FI_SHM_DISABLE_CMA, a seccomp filter as in containers, Yama)
 * a read is a request the peer's progress must serve through shm's
 * response queue, which completes in order: a read to a process that
 * ended stays busy for ever and no later read or send of the endpoint
 * completes (docs/FAULTS.md).  libfabric checks CMA per pair on first
 * contact (smr_cma_check, ref §2) and tells nobody; these checks look at
 * the same conditions from outside.
 */
static bool env_true(const char *name)
{
	const char *v = getenv(name);

	return v && (!strcmp(v, "1") || !strcasecmp(v, "true") ||
		     !strcasecmp(v, "yes") || !strcasecmp(v, "on"));
}

/* Whether process_vm_readv from us into `pid` is allowed: the kernel
 * checks the caller's ptrace rights before it looks at the address, so a
 * read of an address nobody maps says EFAULT when allowed, EPERM (Yama,
 * another user, a process that is not dumpable) or ENOSYS/EPERM (seccomp)
 * when not. */
static int cma_probe(int pid)
{
	char c;
	struct iovec l = { &c, 1 }, r = { (void *)(uintptr_t)8, 1 };

	if (process_vm_readv(pid, &l, 1, &r, 1, 0) >= 0 || errno == EFAULT)
		return 0;
	return errno == ESRCH ? -ESRCH : -EPERM;
}

/* A small /proc or /sys file, NUL-terminated: its length, or -errno. */
static ssize_t read_text(const char *path, char *buf, size_t room)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, room - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = 0;
	return n;
}

/* Yama's ptrace_scope: 0 (or no Yama) lets a process read any of its
 * user's; 1 only its descendants, 2 only with CAP_SYS_PTRACE, 3 nobody.
 * Peers are rarely our descendants, and a descendant cannot read us, so
 * anything but 0 without the capability counts as no CMA. */
static bool yama_allows(void)
{
	char buf[4096], *cap;
	int scope;

	if (read_text("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof(buf)) <= 0)
		return true;
	scope = atoi(buf);
	if (scope == 0)
		return true;
	if (scope >= 3 || read_text("/proc/self/status", buf, sizeof(buf)) <= 0 ||
	    !(cap = strstr(buf, "CapEff:")))
		return false;
	return strtoull(cap + 7, NULL, 16) & (1ull << 19); /* CAP_SYS_PTRACE */
}

static bool cma_usable(void)
{
	return !env_true("FI_SHM_DISABLE_CMA") && cma_probe(getpid()) == 0 &&
	       yama_allows();
}

/* The start of a libfabric 1.17 region (struct smr_region): version,
 * the owner's pid, the owner's address of the region, its spinlock. */
#define SMR117_VERSION 4
#define SMR117_PID_OFF 4
#define SMR117_BASE_OFF 16
#define SMR117_LOCK_OFF 24

/* Whether this process maps /dev/shm/<name> (a live endpoint of its own,
 * opened by libripc or by the application). */
static bool region_mapped_here(const char *name)
{
	FILE *maps = fopen("/proc/self/maps", "re");
	char line[512], *f;
	size_t n = strlen(name);
	bool found = false;

	if (!maps)
		return true; /* cannot tell: hands off */
	while (!found && fgets(line, sizeof(line), maps))
		found = (f = strstr(line, "/dev/shm/")) &&
			!strncmp(f + 9, name, n) &&
			(f[9 + n] == '\n' || f[9 + n] == ' ');
	fclose(maps);
	return found;
}

/*
 * Pids are reused (pid_max is 32768 on many systems), and a process
 * SIGKILLed with its shm endpoint open leaves /dev/shm/<pid>:<uid>:<n>
 * (16 MiB) behind.  libfabric 1.17 takes such a region over when its
 * recorded owner is dead, but when the recorded pid is our own it sees a
 * live owner and fi_endpoint fails with EBUSY (smr_create, smr_retry_map):
 * a process that happens to get a killed process's pid could not open shm
 * at all (seen: one client in 2 000 of the churn test, its ripc_init
 * failing).  So, before opening: remove the regions named after our pid
 * and uid whose recorded owner is our pid and which this process does not
 * map.  A live endpoint of this process keeps its region mapped; any other
 * region claiming our pid is a dead process's.  (Like libfabric's own
 * take-over, this assumes one pid namespace per /dev/shm.)  Costs a
 * readdir of /dev/shm per open.
 */
static void stale_own_regions(void)
{
	char prefix[48], path[300];
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	size_t plen;

	if (!d)
		return;
	snprintf(prefix, sizeof(prefix), "%d:%u:", (int)getpid(),
		 (unsigned)getuid());
	plen = strlen(prefix);
	while ((e = readdir(d))) {
		const char *idx = e->d_name + plen;
		struct stat st;
		int owner = 0, fd;

		if (strncmp(e->d_name, prefix, plen) || !*idx ||
		    strspn(idx, "0123456789") != strlen(idx) ||
		    strlen(e->d_name) > 200)
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
		    st.st_uid != geteuid() ||
		    pread(fd, &owner, sizeof(owner), SMR117_PID_OFF) !=
			    (ssize_t)sizeof(owner) ||
		    owner != (int)getpid() || region_mapped_here(e->d_name)) {
			close(fd);
			continue;
		}
		close(fd);
		if (unlink(path) == 0)
			ripc__log(RIPC_LOG_INFO,
				  "shm: removed %s, left by a killed process "
				  "that had our pid",
				  path);
	}
	closedir(d);
}

static int shm_open(const struct ripc_prov_opts *opts, struct ripc_prov **out,
		    struct ripc_prov_attr *attr)
{
	int ret;

	stale_own_regions();
	ret = ripc__ofi_open(&ripc__shm_row, opts, out, attr);

	if (ret == 0)
		attr->reads_need_peer = !cma_usable();
	return ret;
}

/*
 * Quirk: libfabric 1.17's shm provider guards each endpoint's region with a
 * process-shared pthread spinlock, and holds the *target's* lock for the
 * whole CMA copy of an RMA (smr_rma.c, fast path) as well as while it
 * enqueues a command into a peer's region.  A peer SIGKILLed inside such a
 * section leaves the lock held for good, and this process then spins in
 * fi_cq_read (or in a send) forever (ref §4.3; seen in our fault tests).
 *
 * The watchdog finds the shm regions this process has mapped
 * (/dev/shm/<pid>:<n>:<n> in /proc/self/maps), checks that each looks like
 * the 1.17 layout (version 4, the pid of its name at offset 4; for our own
 * region also its own address at offset 16), and samples the spinlock
 * word at offset 24.  A lock seen held at every sample for WD_HELD_NS is
 * released when only a dead process can hold it: in a dead process's
 * region (gone, or a zombie not yet reaped), or in our own (nobody holds
 * ours that long while alive: the longest section is one read chunk's
 * copy).  Anything that does not validate is left alone.  While a lock
 * is seen held and not released, the op says so, and the watchdog thread
 * keeps looking every 200 ms even where this process is idle: the dead
 * holder of our own region's lock is met by the peers that send to us,
 * not by us, and nothing here would end the idle period.
 *
 * A live peer's lock seen held at two looks in a row (WD_WAKE_NS) is
 * only the peer's to release, and the peer may be idle, its watchdog in
 * its long period (seconds) while we spin on that lock inside libfabric:
 * a client killed in shm's critical section, holding an idle server's
 * lock, stalled the server's next clients for up to 7 s.  The op asks
 * for the peer to be woken (its doorbell, ripc/bell.c); woken, its
 * watchdog looks every 200 ms again and frees the lock 2 s after it
 * first sees it held.
 */
#define WD_REGIONS 300
#define WD_HELD_NS 2000000000ull
#define WD_WAKE_NS 100000000ull

static struct wd_region {
	uintptr_t addr;
	uint64_t held_since; /* 0: not seen held */
	unsigned seen;       /* scan that last found it mapped */
} wd[WD_REGIONS];
static unsigned wd_scan_no;

static uint64_t wd_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static struct wd_region *wd_slot(uintptr_t addr)
{
	struct wd_region *free_slot = NULL;

	for (int i = 0; i < WD_REGIONS; i++) {
		if (wd[i].addr == addr)
			return &wd[i];
		if (!wd[i].addr && !free_slot)
			free_slot = &wd[i];
	}
	if (free_slot) {
		free_slot->addr = addr;
		free_slot->held_since = 0;
	}
	return free_slot;
}

/*
 * The regions are read and written through process_vm_readv/writev on
 * ourselves, never dereferenced: libfabric unmaps a peer's region when it
 * is removed from the address vector or reconnects, at any moment relative
 * to this thread, which holds no lock; a region gone since /proc/self/maps
 * was read then reads as EFAULT instead of crashing the process.
 */
static bool wd_rw(bool write, uintptr_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)addr, len };
	ssize_t n = write ? process_vm_writev(getpid(), &l, 1, &r, 1, 0)
			  : process_vm_readv(getpid(), &l, 1, &r, 1, 0);

	return n == (ssize_t)len;
}

/* What a free spinlock's word holds here (glibc on x86: 1, elsewhere 0):
 * learnt from one of our own. */
static int spin_free_word(void)
{
	static int v = -1;
	pthread_spinlock_t l;

	if (v < 0 && pthread_spin_init(&l, PTHREAD_PROCESS_SHARED) == 0) {
		memcpy(&v, (const void *)(uintptr_t)&l, sizeof(v));
		pthread_spin_destroy(&l);
	}
	return v;
}

/* The process has ended: gone, or a zombie its parent has not reaped
 * yet.  kill(pid, 0) alone succeeds on a zombie, and the parent that has
 * not reaped its dead child is often the very process spinning on the
 * child's lock (it cannot reach its waitpid): seen in the fault test of a
 * sender killed mid-pull, which hung until it was killed. */
static bool pid_ended(int pid)
{
	char path[64], buf[512], *p;
	ssize_t n;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if ((n = read_text(path, buf, sizeof(buf))) <= 0)
		return n == -ENOENT;
	/* The command name may hold anything: the state follows the last
	 * ')'. */
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X' || p[2] == 'x');
}

/* true if the region's lock is seen held and left held (watched) */
static bool wd_check(uintptr_t start, int name_pid, uint64_t now,
		     struct ripc_wd_wake *wake)
{
	uint8_t hdr[SMR117_LOCK_OFF + sizeof(int)];
	struct wd_region *w;
	int pid, lock, free_word = spin_free_word();
	uintptr_t base;
	bool own = name_pid == getpid();

	/* Written by other processes (and by libfabric in this one) while
	 * we look; the layout check copes with any value. */
	if (!wd_rw(false, start, hdr, sizeof(hdr)))
		return false; /* unmapped meanwhile */
	memcpy(&pid, hdr + SMR117_PID_OFF, sizeof(pid));
	memcpy(&base, hdr + SMR117_BASE_OFF, sizeof(base));
	memcpy(&lock, hdr + SMR117_LOCK_OFF, sizeof(lock));
	if (hdr[0] != SMR117_VERSION || pid != name_pid ||
	    (own && base != start))
		return false; /* not a layout we know: hands off */
	if (!(w = wd_slot(start)))
		return false;
	w->seen = wd_scan_no;
	if (lock == free_word) {
		w->held_since = 0;
		return false;
	}
	if (!w->held_since) {
		w->held_since = now;
		return true;
	}
	if (!own && now - w->held_since >= WD_WAKE_NS && !pid_ended(pid)) {
		/* A live peer's own business: it is woken to look. */
		if (wake->n < RIPC_WD_WAKE_MAX)
			wake->pid[wake->n++] = pid;
		return true;
	}
	/* Here a peer's region is a dead peer's. */
	if (now - w->held_since < WD_HELD_NS)
		return true;
	ripc__log(RIPC_LOG_WARN,
		  "shm: region lock of %s held for %.1f s, its holder must "
		  "have died: releasing it",
		  own ? "this process" : "a dead peer",
		  (double)(now - w->held_since) / 1e9);
	/* What pthread_spin_unlock does: store the free word. */
	wd_rw(true, start + SMR117_LOCK_OFF, &free_word, sizeof(free_word));
	w->held_since = 0;
	return false;
}

bool ripc__shm_watchdog(struct ripc_prov *p, struct ripc_wd_wake *wake)
{
	FILE *maps = fopen("/proc/self/maps", "re");
	char line[512];
	uint64_t now = wd_now();
	bool watching = false;

	(void)p;
	if (!maps)
		return false;
	wd_scan_no++;
	while (fgets(line, sizeof(line), maps)) {
		unsigned long lo, hi;
		char *name = strstr(line, "/dev/shm/");
		int pid, a, b, n = 0;

		if (!name || sscanf(line, "%lx-%lx", &lo, &hi) != 2 ||
		    hi - lo < 4096 ||
		    sscanf(name + 9, "%d:%d:%d%n", &pid, &a, &b, &n) != 3 ||
		    (name[9 + n] != '\n' && name[9 + n] != ' '))
			continue;
		if (!strstr(line, "rw-s"))
			continue;
		watching |= wd_check((uintptr_t)lo, pid, now, wake);
	}
	fclose(maps);
	/* Regions that are gone (peers removed, churn): free their slots. */
	for (int i = 0; i < WD_REGIONS; i++)
		if (wd[i].addr && wd[i].seen != wd_scan_no)
			wd[i].addr = 0;
	return watching;
}

const struct ripc_prov_ops ripc__prov_shm_ops =
	RIPC_OFI_OPS_WATCHDOG(shm_open, ripc__shm_watchdog);
