/*
 * Unit tests of ripc/registry.c: the host registry file, its locking and
 * the reclaim of IDs whose owner died.
 *
 * Each test uses its own file under /tmp (never the default path).  The
 * registry keeps per-process state, so "other processes" are children
 * forked by the test that drop the inherited state (ripc__reg_forget),
 * open the file afresh, attach and act.  A child reports what its
 * operation returned over a pipe and then blocks reading a second pipe
 * until the test closes it (or dies), so no child outlives its test and
 * nothing waits on a clock.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "log.h"
#include "registry.h"
#include "ripc_int.h" /* ripc__bell_ring and the peer it rings */

static char path[128], path2[128];

static void setup(void)
{
	/* Refusals log errors on purpose; keep the test output clean. */
	ripc__log_level = RIPC_LOG_NONE;
	snprintf(path, sizeof(path), "/tmp/ripc-unit-reg-%d.reg",
		 (int)getpid());
	snprintf(path2, sizeof(path2), "/tmp/ripc-unit-reg-%d.alt",
		 (int)getpid());
	unlink(path);
	unlink(path2);
}

static void teardown(void)
{
	ripc__reg_close();
	unlink(path);
	unlink(path2);
}

TestSuite(registry, .init = setup, .fini = teardown, .timeout = 60);

static struct ripc_reg_proc_info my_info(uint64_t inc)
{
	struct ripc_reg_proc_info i;
	pid_t pid = getpid();

	memset(&i, 0, sizeof(i));
	i.incarnation = inc;
	i.host_id = 0x4242424242ull;
	i.pid = pid;
	i.addr[RIPC_PROV_TCP].len = 6;
	memcpy(i.addr[RIPC_PROV_TCP].addr, "tcp", 3);
	memcpy(i.addr[RIPC_PROV_TCP].addr + 3, &pid, 3);
	i.addr[RIPC_PROV_SHM].len = RIPC_ADDR_MAX;
	memset(i.addr[RIPC_PROV_SHM].addr, 0x5a, RIPC_ADDR_MAX);
	return i;
}

static void open_attach(uint64_t inc)
{
	struct ripc_reg_proc_info i = my_info(inc);

	cr_assert_eq(ripc__reg_open(path), 0);
	cr_assert_eq(ripc__reg_attach(&i), 0);
}

/* ---- other processes ------------------------------------------------ */

enum child_op {
	OP_ATTACH,
	OP_CLAIM,
	OP_CLAIM_RANDOM,
	OP_JOIN,
	OP_PAIR,
	OP_PAIR_MAPPED, /* OP_PAIR, then says it has mapped the other */
};

/* OP_PAIR: pair with this slot (the test's own), with `id` as the limit;
 * OP_PAIR_MAPPED: the incarnation there. */
static int pair_with;
static uint64_t pair_with_inc;

struct child {
	pid_t pid;
	int res;    /* read end: the child's result */
	int hold;   /* write end: closing it lets the child exit */
	int result; /* what the child's operation returned */
};

static void close_other_fds(int keep1, int keep2, int keep3)
{
	long max = sysconf(_SC_OPEN_MAX);

	if (max < 0 || max > 4096)
		max = 4096;
	for (int fd = 3; fd < max; fd++)
		if (fd != keep1 && fd != keep2 && fd != keep3)
			close(fd);
}

/*
 * Start a process that opens the registry, attaches, does `op` on `id`,
 * reports, holds until released, and withdraws cleanly first if `detach`.
 * It never returns into Criterion.
 */
static void child_start(struct child *c, enum child_op op, uint16_t id,
			bool detach)
{
	int res[2], hold[2];

	cr_assert_eq(pipe(res), 0);
	cr_assert_eq(pipe(hold), 0);
	c->pid = fork();
	cr_assert_geq(c->pid, 0);
	if (c->pid == 0) {
		struct ripc_reg_proc_info i;
		char b;
		int r;

		/* Drop the test's registry state first (it may hold the
		 * file open), then every descriptor that is not ours, so
		 * that no child keeps another child's pipe open. */
		ripc__reg_forget();
		close_other_fds(res[1], hold[0], -1);
		i = my_info(0x1000000000ull + (uint64_t)getpid());
		r = ripc__reg_open(path);
		if (!r)
			r = ripc__reg_attach(&i);
		if (!r && (op == OP_CLAIM || op == OP_CLAIM_RANDOM))
			r = ripc__reg_claim(id, op == OP_CLAIM_RANDOM);
		else if (!r && op == OP_JOIN)
			r = ripc__reg_join(id);
		else if (!r && (op == OP_PAIR || op == OP_PAIR_MAPPED))
			r = ripc__reg_shm_pair(pair_with, id) ? 0 : -ENOSPC;
		if (!r && op == OP_PAIR_MAPPED) {
			struct ripc_reg_proc_info o;

			r = ripc__reg_find_incarnation(pair_with_inc, &o);
			if (!r)
				ripc__reg_shm_mapped(pair_with, pair_with_inc);
		}
		if (write(res[1], &r, sizeof(r)) != sizeof(r))
			_exit(2);
		while (read(hold[0], &b, 1) > 0)
			;
		if (detach)
			ripc__reg_detach();
		_exit(0);
	}
	close(res[1]);
	close(hold[0]);
	c->res = res[0];
	c->hold = hold[1];
	c->result = 1;
}

static int child_result(struct child *c)
{
	ssize_t n = read(c->res, &c->result, sizeof(c->result));

	cr_assert_eq(n, (ssize_t)sizeof(c->result),
		     "child %d died before reporting", (int)c->pid);
	close(c->res);
	c->res = -1;
	return c->result;
}

static int spawn(struct child *c, enum child_op op, uint16_t id, bool detach)
{
	child_start(c, op, id, detach);
	return child_result(c);
}

/* Let the child finish normally and reap it. */
static void child_release(struct child *c)
{
	int st;

	close(c->hold);
	cr_assert_eq(waitpid(c->pid, &st, 0), c->pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "child %d status %#x", (int)c->pid, st);
}

static void child_kill(struct child *c)
{
	int st;

	cr_assert_eq(kill(c->pid, SIGKILL), 0);
	cr_assert_eq(waitpid(c->pid, &st, 0), c->pid);
	cr_assert(WIFSIGNALED(st));
	close(c->hold);
}

/* ---- opening the file ----------------------------------------------- */

Test(registry, open_creates_private_file)
{
	struct stat st;
	mode_t old = umask(0);
	int r;

	/* umask 0: the library itself must ask for 0600. */
	r = ripc__reg_open(path);
	umask(old);
	cr_assert_eq(r, 0, "open: %s", strerror(-r));
	cr_assert_str_eq(ripc__reg_path(), path);
	cr_assert_eq(lstat(path, &st), 0);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
	cr_assert_eq(st.st_uid, geteuid());
	/* Layout documented in registry.c: 4 KiB header, process records
	 * of 1536 bytes, 65535 service records of 16 bytes. */
	cr_assert_eq(st.st_size,
		     4096 + (off_t)RIPC_REG_MAX_PROCS * 1536 + 65535 * 16,
		     "size %lld", (long long)st.st_size);
	cr_assert_gt(ripc__reg_version(), 0);
	/* Opening again is harmless. */
	cr_assert_eq(ripc__reg_open(path), 0);
	/* And a second process may open the same file. */
	ripc__reg_close();
	cr_assert_eq(ripc__reg_open(path), 0);
}

Test(registry, nothing_before_open_or_attach)
{
	struct ripc_reg_proc_info out;
	bool mc = true;

	cr_assert_eq(ripc__reg_version(), 0);
	cr_assert_eq(ripc__reg_lookup(1, &out), -ENOENT);
	cr_assert_eq(ripc__reg_lookup_mcast(1, &out, 1, &mc), 0);
	cr_assert(!mc);
	cr_assert_lt(ripc__reg_claim(1, false), 0, "claim before open");
	cr_assert_lt(ripc__reg_join(1), 0, "join before open");
	cr_assert_lt(ripc__reg_release(1), 0, "release before open");

	cr_assert_eq(ripc__reg_open(path), 0);
	cr_assert_eq(ripc__reg_claim(1, false), -EBADF, "claim before attach");
	cr_assert_eq(ripc__reg_join(1), -EBADF, "join before attach");
	cr_assert_eq(ripc__reg_release(1), -EBADF, "release before attach");
	cr_assert_eq(ripc__reg_lookup(1, &out), -ENOENT);
}

/* A refused file leaves no half-open registry behind and is not
 * touched. */
static void expect_refused(int want, const char *what)
{
	struct stat before, after;
	int r;

	cr_assert_eq(lstat(path, &before), 0);
	r = ripc__reg_open(path);
	cr_assert_eq(r, want, "%s: got %d (%s), want %d (%s)", what, r,
		     strerror(-r), want, strerror(-want));
	cr_assert_eq(ripc__reg_version(), 0, "%s: registry left mapped", what);
	cr_assert_lt(ripc__reg_claim(5, false), 0, "%s: claim works", what);
	cr_assert_eq(lstat(path, &after), 0);
	cr_assert_eq(after.st_size, before.st_size, "%s: file resized", what);
	cr_assert_eq(after.st_mode, before.st_mode, "%s: mode changed", what);
}

static int make_file(mode_t mode, off_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);

	cr_assert_geq(fd, 0);
	cr_assert_eq(fchmod(fd, mode), 0);
	if (size)
		cr_assert_eq(ftruncate(fd, size), 0);
	return fd;
}

Test(registry, refuses_writable_by_others)
{
	static const mode_t modes[] = { 0666, 0622, 0660, 0620, 0602 };

	for (unsigned i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char what[32];

		close(make_file(modes[i], 0));
		snprintf(what, sizeof(what), "mode %o", modes[i]);
		expect_refused(-EPERM, what);
		unlink(path);
	}
	/* A valid registry that someone made world-writable later. */
	cr_assert_eq(ripc__reg_open(path), 0);
	ripc__reg_close();
	cr_assert_eq(chmod(path, 0666), 0);
	expect_refused(-EPERM, "valid registry, mode 666");
}

Test(registry, refuses_other_owner)
{
	int fd;

	if (geteuid() != 0)
		cr_skip_test("needs root to give a file to another user");
	cr_assert_eq(ripc__reg_open(path), 0);
	ripc__reg_close();
	fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fchown(fd, 65534, 65534), 0);
	close(fd);
	expect_refused(-EPERM, "owned by uid 65534");
}

Test(registry, refuses_symlink)
{
	int r;

	/* The link target is a perfectly good registry of ours. */
	cr_assert_eq(ripc__reg_open(path2), 0);
	ripc__reg_close();
	cr_assert_eq(symlink(path2, path), 0);
	r = ripc__reg_open(path);
	cr_assert_eq(r, -ELOOP, "got %d (%s)", r, strerror(-r));
	cr_assert_eq(ripc__reg_version(), 0);
	/* A dangling link is not followed to create the target either. */
	unlink(path2);
	r = ripc__reg_open(path);
	cr_assert_lt(r, 0);
	cr_assert_eq(access(path2, F_OK), -1, "created through the link");
}

Test(registry, refuses_other_file_types)
{
	int r;

	cr_assert_eq(mkdir(path, 0700), 0);
	r = ripc__reg_open(path);
	rmdir(path);
	cr_assert_lt(r, 0, "a directory");
	cr_assert_eq(mkfifo(path, 0600), 0);
	r = ripc__reg_open(path);
	cr_assert_eq(r, -EPERM, "a fifo: %d", r);
	cr_assert_eq(ripc__reg_version(), 0);
}

Test(registry, refuses_truncated_file)
{
	static const off_t sizes[] = { 1, 8, 4096, 4096 + 1024 * 512 };

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char what[32];

		close(make_file(0600, sizes[i]));
		snprintf(what, sizeof(what), "size %lld",
			 (long long)sizes[i]);
		expect_refused(-EINVAL, what);
		unlink(path);
	}
	/* A valid registry cut short. */
	cr_assert_eq(ripc__reg_open(path), 0);
	ripc__reg_close();
	cr_assert_eq(truncate(path, 100000), 0);
	expect_refused(-EINVAL, "valid registry cut short");
}

static void patch_file(off_t off, const void *v, size_t len)
{
	int fd = open(path, O_RDWR);

	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, v, len, off), (ssize_t)len);
	close(fd);
}

Test(registry, refuses_wrong_magic_or_layout)
{
	const uint64_t bad_magic = 0x3247455243504952ull; /* "RIPCREG2" */
	const uint32_t bad = 7;
	uint8_t head[16], now[16];
	int fd;

	/* Header: u64 magic, u32 layout, u32 nprocs (registry.c). */
	for (int field = 0; field < 3; field++) {
		cr_assert_eq(ripc__reg_open(path), 0);
		ripc__reg_close();
		if (field == 0)
			patch_file(0, &bad_magic, 8);
		else
			patch_file(field == 1 ? 8 : 12, &bad, 4);
		fd = open(path, O_RDONLY);
		cr_assert_eq(pread(fd, head, 16, 0), 16);
		expect_refused(-EPROTO, field == 0   ? "magic"
					: field == 1 ? "layout"
						     : "process count");
		/* Refused files are left as they were. */
		cr_assert_eq(pread(fd, now, 16, 0), 16);
		cr_assert(!memcmp(head, now, 16), "header rewritten");
		close(fd);
		unlink(path);
	}
}

Test(registry, refusal_then_good_file)
{
	close(make_file(0666, 0));
	cr_assert_eq(ripc__reg_open(path), -EPERM);
	cr_assert_eq(ripc__reg_open(path2), 0, "a refusal wedged the state");
	open_attach(1);
	cr_assert_str_eq(ripc__reg_path(), path2);
}

/* ---- unicast IDs ---------------------------------------------------- */

Test(registry, claim_lookup_release)
{
	struct ripc_reg_proc_info me = my_info(0xabcdef), out;
	static const uint16_t ids[] = { 0, 1, 100, 4242, RIPC_MAX_SERVICE_ID };

	cr_assert_eq(ripc__reg_open(path), 0);
	cr_assert_eq(ripc__reg_attach(&me), 0);
	for (unsigned k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
		uint16_t id = ids[k];

		cr_assert_eq(ripc__reg_lookup(id, &out), -ENOENT, "id %u", id);
		cr_assert_eq(ripc__reg_claim(id, false), 0, "id %u", id);
		memset(&out, 0, sizeof(out));
		cr_assert_eq(ripc__reg_lookup(id, &out), 0, "id %u", id);
		cr_assert_eq(out.pid, getpid());
		cr_assert_eq(out.incarnation, me.incarnation);
		cr_assert_eq(out.host_id, me.host_id);
		for (int t = 0; t < RIPC_PROV_MAX; t++) {
			cr_assert_eq(out.addr[t].len, me.addr[t].len);
			cr_assert(!memcmp(out.addr[t].addr, me.addr[t].addr,
					  me.addr[t].len));
		}
	}
	/* Neighbours are untouched. */
	cr_assert_eq(ripc__reg_lookup(2, &out), -ENOENT);
	cr_assert_eq(ripc__reg_lookup(RIPC_MAX_SERVICE_ID - 1, &out), -ENOENT);
	cr_assert_eq(ripc__reg_lookup(RIPC_INVALID_SERVICE_ID, &out),
		     -ENOENT);

	cr_assert_eq(ripc__reg_release(100), 0);
	cr_assert_eq(ripc__reg_lookup(100, &out), -ENOENT);
	cr_assert_eq(ripc__reg_release(100), -ENOENT, "released twice");
	cr_assert_eq(ripc__reg_release(101), -ENOENT, "never held");
	cr_assert_eq(ripc__reg_claim(100, false), 0, "claim after release");
	cr_assert_eq(ripc__reg_lookup(0, &out), 0, "others kept");

	/* Detach withdraws everything this process held. */
	ripc__reg_detach();
	for (unsigned k = 0; k < sizeof(ids) / sizeof(ids[0]); k++)
		cr_assert_eq(ripc__reg_lookup(ids[k], &out), -ENOENT,
			     "id %u after detach", ids[k]);
}

/* 65535 is not a service ID: no record may be claimed for it (the file
 * holds records for 0..65534 only). */
Test(registry, invalid_id_refused)
{
	struct ripc_reg_proc_info out;

	open_attach(1);
	cr_expect_lt(ripc__reg_claim(RIPC_INVALID_SERVICE_ID, false), 0,
		     "claim(65535) succeeded");
	cr_expect_lt(ripc__reg_join(RIPC_INVALID_SERVICE_ID), 0,
		     "join(65535) succeeded");
	cr_expect_eq(ripc__reg_lookup(RIPC_INVALID_SERVICE_ID, &out),
		     -ENOENT);
}

Test(registry, live_owner_keeps_its_id)
{
	struct ripc_reg_proc_info out;
	struct child c;

	/* The test holds 200; another live process cannot take it. */
	open_attach(0x77);
	cr_assert_eq(ripc__reg_claim(200, false), 0);
	cr_assert_eq(spawn(&c, OP_CLAIM, 200, true), -EEXIST);
	child_release(&c);
	cr_assert_eq(ripc__reg_lookup(200, &out), 0);
	cr_assert_eq(out.pid, getpid(), "the refused child took the ID");

	/* The other way round: a live child holds 201. */
	cr_assert_eq(spawn(&c, OP_CLAIM, 201, true), 0);
	cr_assert_eq(ripc__reg_claim(201, false), -EEXIST);
	cr_assert_eq(ripc__reg_lookup(201, &out), 0);
	cr_assert_eq(out.pid, c.pid);
	cr_assert_eq(out.incarnation, 0x1000000000ull + (uint64_t)c.pid);
	/* A clean exit (detach) frees it. */
	child_release(&c);
	cr_assert_eq(ripc__reg_lookup(201, &out), -ENOENT);
	cr_assert_eq(ripc__reg_claim(201, false), 0);
}

Test(registry, killed_owner_reclaimed)
{
	struct ripc_reg_proc_info out;
	struct child c;

	open_attach(0x78);
	cr_assert_eq(spawn(&c, OP_CLAIM, 300, false), 0);
	cr_assert_eq(ripc__reg_claim(300, false), -EEXIST);
	child_kill(&c);
	/* Nobody cleaned up: the record is still in the file, but its
	 * owner is dead. */
	cr_assert_eq(ripc__reg_lookup(300, &out), -ENOENT);
	cr_assert_eq(ripc__reg_claim(300, false), 0, "dead owner's ID not reclaimed");
	cr_assert_eq(ripc__reg_lookup(300, &out), 0);
	cr_assert_eq(out.pid, getpid());

	/* The same after a normal exit without detach. */
	cr_assert_eq(spawn(&c, OP_CLAIM, 301, false), 0);
	child_release(&c);
	cr_assert_eq(ripc__reg_claim(301, false), 0);
}

/* The watchdog's wake-ups find a process's record by pid, without the
 * lock (bell.c): the live record of that pid and its incarnation; -1 for
 * a pid with none (never attached, or detached). */
Test(registry, pid_slot_finds_live_record)
{
	struct child c, d;
	uint64_t inc = 0;
	int slot, sd;

	cr_assert_eq(ripc__reg_pid_slot(getpid(), &inc), -1,
		     "found before open");
	open_attach(0x91);
	cr_assert_eq(ripc__reg_pid_slot(getpid(), &inc),
		     ripc__reg_self_slot());
	cr_assert_eq(inc, 0x91);
	cr_assert_eq(spawn(&c, OP_ATTACH, 0, false), 0);
	cr_assert_eq(spawn(&d, OP_ATTACH, 0, true), 0);
	slot = ripc__reg_pid_slot(c.pid, &inc);
	cr_assert_geq(slot, 0);
	cr_assert_neq(slot, ripc__reg_self_slot());
	cr_assert_eq(inc, 0x1000000000ull + (uint64_t)c.pid);
	cr_assert(ripc__reg_holds(slot, inc));
	sd = ripc__reg_pid_slot(d.pid, &inc);
	cr_assert(sd >= 0 && sd != slot, "slot %d for the second child", sd);
	child_release(&d); /* detaches: its record is free */
	cr_assert_eq(ripc__reg_pid_slot(d.pid, &inc), -1);
	cr_assert_eq(ripc__reg_pid_slot(0, &inc), -1);
	cr_assert_eq(ripc__reg_pid_slot(-1, &inc), -1);
	child_release(&c);
}

/*
 * A random ID names a client: once its holder has ended (killed, exited,
 * reaped by a newcomer taking its slot, or released), it is gone for good
 * until claimed again, and senders are told so at once.  A well-known ID
 * whose holder died is never "gone": a restarted service may take it.
 */
Test(registry, random_id_gone_when_holder_ends)
{
	struct child a, b, c, d;

	open_attach(0x79);
	cr_assert_eq(spawn(&a, OP_CLAIM_RANDOM, 2000, false), 0);
	cr_assert_eq(spawn(&b, OP_CLAIM, 2001, false), 0);
	cr_assert(!ripc__reg_gone(2000), "live holder");
	cr_assert(!ripc__reg_gone(2001));
	cr_assert(!ripc__reg_gone(2002), "never claimed");
	child_kill(&a);
	child_kill(&b);
	cr_assert(ripc__reg_gone(2000), "random ID of a killed holder");
	cr_assert(!ripc__reg_gone(2001), "well-known ID of a killed holder");

	/* Its slot reaped by the next process: the tombstone stays. */
	cr_assert_eq(spawn(&c, OP_ATTACH, 0, false), 0);
	cr_assert(ripc__reg_gone(2000), "after its slot was reaped");

	/* Claimed again (well-known this time): not gone, and not after
	 * that holder dies either. */
	cr_assert_eq(spawn(&d, OP_CLAIM, 2000, false), 0);
	cr_assert(!ripc__reg_gone(2000));
	child_kill(&d);
	cr_assert(!ripc__reg_gone(2000));

	/* Released by its live holder: gone as well. */
	cr_assert_eq(ripc__reg_claim(2003, true), 0);
	cr_assert(!ripc__reg_gone(2003));
	cr_assert_eq(ripc__reg_release(2003), 0);
	cr_assert(ripc__reg_gone(2003));
	cr_assert(!ripc__reg_gone(RIPC_MAX_SERVICE_ID + 1));
	child_release(&c);
}

/*
 * An owner killed but not yet reaped by its parent is a zombie: it is
 * dead, holds no resources, and will never answer.  Its IDs must be
 * reclaimable at once, not only after its parent gets round to wait().
 */
Test(registry, zombie_owner_reclaimed)
{
	struct ripc_reg_proc_info out;
	struct child c;
	siginfo_t si;
	int lr, cr;

	open_attach(0x79);
	cr_assert_eq(spawn(&c, OP_CLAIM, 310, false), 0);
	cr_assert_eq(kill(c.pid, SIGKILL), 0);
	/* Wait until it is dead, but leave it unreaped. */
	cr_assert_eq(waitid(P_PID, (id_t)c.pid, &si, WEXITED | WNOWAIT), 0);
	lr = ripc__reg_lookup(310, &out);
	cr = ripc__reg_claim(310, false);
	waitpid(c.pid, NULL, 0);
	close(c.hold);
	cr_expect_eq(lr, -ENOENT, "lookup finds a zombie owner alive");
	cr_expect_eq(cr, 0, "claim refused: zombie owner counted as live");
}

/*
 * Eight processes race for the same 128 IDs, claimed in the same order
 * after a common start signal: each ID ends up with exactly one owner, and
 * the owner the registry names is the process that was told it won.
 */
#define RACE_N 8
#define RACE_IDS 128
#define RACE_BASE 600

static pid_t race_child(int go, int *res_rd, int *hold_wr)
{
	int res[2], hold[2];
	pid_t pid;

	cr_assert_eq(pipe(res), 0);
	cr_assert_eq(pipe(hold), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct ripc_reg_proc_info i;
		int8_t won[RACE_IDS];
		char b;

		ripc__reg_forget();
		close_other_fds(res[1], hold[0], go);
		i = my_info((uint64_t)getpid());
		if (ripc__reg_open(path) || ripc__reg_attach(&i))
			_exit(3);
		while (read(go, &b, 1) > 0)
			;
		for (int k = 0; k < RACE_IDS; k++) {
			int r = ripc__reg_claim((uint16_t)(RACE_BASE + k), false);

			won[k] = r == 0 ? 1 : r == -EEXIST ? 0 : -1;
		}
		if (write(res[1], won, sizeof(won)) != sizeof(won))
			_exit(2);
		while (read(hold[0], &b, 1) > 0)
			;
		_exit(0);
	}
	close(res[1]);
	close(hold[0]);
	*res_rd = res[0];
	*hold_wr = hold[1];
	return pid;
}

Test(registry, concurrent_claims_one_winner)
{
	int8_t won[RACE_N][RACE_IDS];
	int go[2], res[RACE_N], hold[RACE_N];
	pid_t pid[RACE_N];
	struct ripc_reg_proc_info out;

	cr_assert_eq(ripc__reg_open(path), 0); /* create it once */
	cr_assert_eq(pipe(go), 0);
	for (int c = 0; c < RACE_N; c++)
		pid[c] = race_child(go[0], &res[c], &hold[c]);
	close(go[0]);
	close(go[1]); /* all start together */
	for (int c = 0; c < RACE_N; c++) {
		cr_assert_eq(read(res[c], won[c], sizeof(won[c])),
			     (ssize_t)sizeof(won[c]),
			     "child %d died before reporting", c);
		close(res[c]);
	}
	open_attach(1);
	for (int k = 0; k < RACE_IDS; k++) {
		int winners = 0, winner = -1;

		for (int c = 0; c < RACE_N; c++) {
			cr_assert_neq(won[c][k], -1, "child %d: claim error",
				      c);
			if (won[c][k]) {
				winners++;
				winner = c;
			}
		}
		cr_assert_eq(winners, 1, "%d processes were given ID %d",
			     winners, RACE_BASE + k);
		cr_assert_eq(ripc__reg_lookup((uint16_t)(RACE_BASE + k), &out),
			     0);
		cr_assert_eq(out.pid, pid[winner], "ID %d", RACE_BASE + k);
	}
	for (int c = 0; c < RACE_N; c++) {
		close(hold[c]);
		cr_assert_eq(waitpid(pid[c], NULL, 0), pid[c]);
	}
}

/* ripc__reg_forget in a forked child must leave the parent's
 * registration alone. */
Test(registry, forget_in_child_leaves_parent)
{
	struct ripc_reg_proc_info out;
	struct child c;
	pid_t pid;
	int st;

	open_attach(0x80);
	cr_assert_eq(ripc__reg_claim(700, false), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		ripc__reg_forget();
		_exit(ripc__reg_version() == 0 && ripc__reg_claim(1, false) < 0 ? 0
									 : 1);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "child still had the registry after forget");
	/* A child that forgets, reopens, attaches and detaches. */
	cr_assert_eq(spawn(&c, OP_ATTACH, 0, true), 0);
	child_release(&c);
	cr_assert_eq(ripc__reg_lookup(700, &out), 0);
	cr_assert_eq(out.pid, getpid());
	cr_assert_eq(ripc__reg_claim(701, false), 0, "parent can still mutate");
}

/* ---- multicast IDs -------------------------------------------------- */

static bool has_pid(const struct ripc_reg_proc_info *m, int n, pid_t pid)
{
	for (int i = 0; i < n; i++)
		if (m[i].pid == pid)
			return true;
	return false;
}

Test(registry, multicast_members)
{
	enum { N = 3 };
	struct ripc_reg_proc_info m[8], out;
	struct child c[N];
	bool mc = false;
	int n;

	open_attach(0x90);
	for (int i = 0; i < N; i++)
		cr_assert_eq(spawn(&c[i], OP_JOIN, 400, false), 0);
	n = ripc__reg_lookup_mcast(400, m, 8, &mc);
	cr_assert(mc);
	cr_assert_eq(n, N);
	for (int i = 0; i < N; i++)
		cr_assert(has_pid(m, n, c[i].pid), "member %d missing", i);
	cr_assert_eq(m[0].host_id, 0x4242424242ull);

	/* The test joins too; joining twice changes nothing. */
	cr_assert_eq(ripc__reg_join(400), 0);
	cr_assert_eq(ripc__reg_join(400), 0);
	cr_assert_eq(ripc__reg_lookup_mcast(400, m, 8, &mc), N + 1);
	cr_assert(has_pid(m, N + 1, getpid()));
	/* max is respected. */
	cr_assert_eq(ripc__reg_lookup_mcast(400, m, 2, &mc), 2);
	/* It is not a unicast ID. */
	cr_assert_eq(ripc__reg_lookup(400, &out), -ENOENT);

	/* A member that died drops out. */
	child_kill(&c[1]);
	n = ripc__reg_lookup_mcast(400, m, 8, &mc);
	cr_assert_eq(n, N, "dead member still listed");
	cr_assert(!has_pid(m, n, c[1].pid));
	cr_assert(has_pid(m, n, c[0].pid) && has_pid(m, n, c[2].pid));

	/* Leaving. */
	cr_assert_eq(ripc__reg_release(400), 0);
	n = ripc__reg_lookup_mcast(400, m, 8, &mc);
	cr_assert_eq(n, N - 1);
	cr_assert(!has_pid(m, n, getpid()));
	child_release(&c[0]);
	child_release(&c[2]);
	cr_assert_eq(ripc__reg_lookup_mcast(400, m, 8, &mc), 0);
}

Test(registry, unicast_and_multicast_exclusive)
{
	struct ripc_reg_proc_info m[4];
	struct child c;
	bool mc = true;

	open_attach(0xa0);
	/* A live multicast group keeps its ID from unicast claims. */
	cr_assert_eq(spawn(&c, OP_JOIN, 410, false), 0);
	cr_assert_eq(ripc__reg_claim(410, false), -EEXIST);
	/* ... until its last member is gone. */
	child_kill(&c);
	cr_assert_eq(ripc__reg_claim(410, false), 0, "dead group's ID not free");
	cr_assert_eq(ripc__reg_lookup_mcast(410, m, 4, &mc), 0);
	cr_assert(!mc, "claimed ID still multicast");

	/* A live unicast owner keeps its ID from joins. */
	cr_assert_eq(spawn(&c, OP_CLAIM, 411, false), 0);
	cr_assert_eq(ripc__reg_join(411), -EEXIST);
	cr_assert_eq(ripc__reg_lookup_mcast(411, m, 4, &mc), 0);
	cr_assert(!mc);
	child_kill(&c);
	cr_assert_eq(ripc__reg_join(411), 0, "dead owner's ID not joinable");

	/* Within one process too. */
	cr_assert_eq(ripc__reg_claim(412, false), 0);
	cr_assert_eq(ripc__reg_join(412), -EEXIST);
	cr_assert_eq(ripc__reg_join(413), 0);
	cr_assert_eq(ripc__reg_claim(413, false), -EEXIST);
}

Test(registry, multicast_membership_limit)
{
	open_attach(0xb0);
	for (int i = 0; i < RIPC_REG_MAX_MCAST; i++)
		cr_assert_eq(ripc__reg_join((uint16_t)(1000 + i)), 0,
			     "join %d", i);
	cr_assert_eq(ripc__reg_join(2000), -ENOSPC);
	/* Leaving one makes room again. */
	cr_assert_eq(ripc__reg_release(1005), 0);
	cr_assert_eq(ripc__reg_join(2000), 0);
}

/* ---- change counter ------------------------------------------------- */

Test(registry, version_changes_on_every_mutation)
{
	struct ripc_reg_proc_info me = my_info(0xc0), out;
	struct child c;
	uint64_t v, w;

	cr_assert_eq(ripc__reg_open(path), 0);
	v = ripc__reg_version();
#define CHANGED(what)                                                        \
	do {                                                                 \
		w = ripc__reg_version();                                     \
		cr_assert_neq(w, v, "version unchanged by %s", what);        \
		v = w;                                                       \
	} while (0)
	cr_assert_eq(ripc__reg_attach(&me), 0);
	CHANGED("attach");
	cr_assert_eq(ripc__reg_claim(10, false), 0);
	CHANGED("claim");
	cr_assert_eq(ripc__reg_join(11), 0);
	CHANGED("join");
	cr_assert_eq(ripc__reg_join(12), 0);
	CHANGED("second join");
	cr_assert_eq(ripc__reg_release(10), 0);
	CHANGED("release");
	cr_assert_eq(ripc__reg_release(11), 0);
	CHANGED("leave");

	/* Another process's mutations show in this one's counter. */
	cr_assert_eq(spawn(&c, OP_CLAIM, 13, true), 0);
	CHANGED("another process's attach and claim");
	child_release(&c);
	CHANGED("another process's detach");
	cr_assert_eq(spawn(&c, OP_CLAIM, 14, false), 0);
	CHANGED("another process's claim");
	child_kill(&c);
	cr_assert_eq(ripc__reg_claim(14, false), 0);
	CHANGED("reclaim of a dead owner's ID");

	cr_assert_eq(ripc__reg_lookup(14, &out), 0);
	ripc__reg_detach();
	CHANGED("detach");
#undef CHANGED
}

/* ---- foreach -------------------------------------------------------- */

struct seen {
	int unicast, mcast;
	bool bad;
};

static void count_cb(uint16_t id, bool mcast,
		     const struct ripc_reg_proc_info *owner, void *arg)
{
	struct seen *s = arg;

	if (owner->pid != getpid())
		s->bad = true;
	if (mcast && id == 21)
		s->mcast++;
	else if (!mcast && (id == 20 || id == 22))
		s->unicast++;
	else
		s->bad = true;
}

Test(registry, foreach_lists_live_registrations)
{
	struct seen s = { 0 };
	struct child c;

	open_attach(0xd0);
	cr_assert_eq(ripc__reg_claim(20, false), 0);
	cr_assert_eq(ripc__reg_join(21), 0);
	cr_assert_eq(ripc__reg_claim(22, false), 0);
	/* A dead process's registration is not listed. */
	cr_assert_eq(spawn(&c, OP_CLAIM, 23, false), 0);
	child_kill(&c);
	ripc__reg_foreach(count_cb, &s);
	cr_assert(!s.bad, "unexpected registration listed");
	cr_assert_eq(s.unicast, 2);
	cr_assert_eq(s.mcast, 1);
}

/* ---- process identity ----------------------------------------------- */

Test(registry, starttime_and_alive)
{
	uint64_t st = ripc__proc_starttime(getpid());

	cr_assert_neq(st, 0);
	cr_assert_eq(ripc__proc_starttime(getpid()), st, "not stable");
	cr_assert(ripc__proc_alive(getpid(), st));
	/* A recycled pid has another start time. */
	cr_assert(!ripc__proc_alive(getpid(), st + 1));
	cr_assert(!ripc__proc_alive(getpid(), st - 1));
	cr_assert(!ripc__proc_alive(getpid(), 0));
	cr_assert(!ripc__proc_alive(0, st));
	cr_assert(!ripc__proc_alive(-1, st));
	cr_assert(!ripc__proc_alive(-(int)getpid(), st));
	/* pid 1 exists; when not root, kill(1, 0) fails with EPERM. */
	cr_assert(ripc__proc_alive(1, ripc__proc_starttime(1)));
}

/* A child that lives until *release is closed; its pid. */
static pid_t waiting_child(int *release)
{
	int fd[2];
	pid_t pid;
	char b;

	cr_assert_eq(pipe(fd), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(fd[1]);
		while (read(fd[0], &b, 1) > 0)
			;
		_exit(0);
	}
	close(fd[0]);
	*release = fd[1];
	return pid;
}

Test(registry, dead_process_not_alive)
{
	uint64_t st;
	pid_t pid;
	int release;

	pid = waiting_child(&release);
	st = ripc__proc_starttime(pid);
	cr_assert_neq(st, 0);
	cr_assert_geq(st, ripc__proc_starttime(getpid()),
		      "child started before its parent");
	cr_assert(ripc__proc_alive(pid, st));
	close(release);
	cr_assert_eq(waitpid(pid, NULL, 0), pid);
	/* Gone (or, if the pid was recycled already, someone else). */
	cr_assert(!ripc__proc_alive(pid, st));
}

/* A check that found a process alive is trusted for 20 ms (kill(pid, 0)
 * alone then): a process that died since and was reaped is dead at once,
 * one left a zombie is dead once the 20 ms are over. */
Test(registry, alive_cache_sees_zombie)
{
	siginfo_t si;
	uint64_t st;
	pid_t pid;
	int release;

	pid = waiting_child(&release);
	st = ripc__proc_starttime(pid);
	cr_assert_neq(st, 0);
	cr_assert(ripc__proc_alive(pid, st));
	cr_assert(ripc__proc_alive(pid, st), "second check (cached) differs");
	cr_assert(!ripc__proc_alive(pid, st + 1), "cache ignores start time");
	close(release);
	/* Dead, but not reaped: a zombie, dead at once for the cache too
	 * (a service must not reply into a client killed a moment ago). */
	cr_assert_eq(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
	cr_expect(!ripc__proc_alive(pid, st), "zombie passes for alive");
	cr_expect(!ripc__proc_alive(pid, st), "zombie alive on a second look");
	cr_assert_eq(waitpid(pid, NULL, 0), pid);
	cr_expect(!ripc__proc_alive(pid, st), "reaped process alive");
}

/*
 * The command name in /proc/<pid>/stat may contain ") " and digits; the
 * start time must still come from the real field 22.  The child reports
 * its start time read under its ordinary name, then renames itself.
 */
Test(registry, starttime_with_hostile_comm)
{
	uint64_t before, after;
	int res[2], hold[2];
	pid_t pid;
	char b;

	cr_assert_eq(pipe(res), 0);
	cr_assert_eq(pipe(hold), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		uint64_t s;

		close(hold[1]);
		s = ripc__proc_starttime(getpid());
		prctl(PR_SET_NAME, "x) S 1 2 3 4 5", 0, 0, 0);
		if (write(res[1], &s, sizeof(s)) != sizeof(s))
			_exit(1);
		while (read(hold[0], &b, 1) > 0)
			;
		_exit(0);
	}
	close(res[1]);
	close(hold[0]);
	cr_assert_eq(read(res[0], &before, sizeof(before)),
		     (ssize_t)sizeof(before));
	after = ripc__proc_starttime(pid);
	close(hold[1]);
	waitpid(pid, NULL, 0);
	cr_assert_neq(before, 0);
	cr_assert_eq(after, before, "start time %llu after rename, %llu before",
		     (unsigned long long)after, (unsigned long long)before);
}

Test(registry, host_id_stable)
{
	uint64_t h = ripc__host_id();

	cr_assert_neq(h, 0);
	cr_assert_eq(ripc__host_id(), h);
}

/* Counters a process publishes are what ripc_info -c reads back. */
struct seen_stats {
	int found;
	uint64_t vals[4];
	unsigned n;
};

static void collect_stats(const struct ripc_reg_proc_info *proc,
			  const uint64_t *stats, unsigned n, void *arg)
{
	struct seen_stats *s = arg;

	if (proc->pid != getpid())
		return;
	s->found++;
	s->n = n;
	memcpy(s->vals, stats, (n < 4 ? n : 4) * sizeof(uint64_t));
}

Test(registry, published_stats_read_back)
{
	struct ripc_reg_proc_info me = my_info(0x5747);
	const uint64_t vals[3] = { 7, 0, 123456789012345ull };
	uint64_t many[RIPC_REG_MAX_STATS + 10] = { 0 };
	struct seen_stats s = { 0 };

	cr_assert_eq(ripc__reg_open(path), 0);
	cr_assert_eq(ripc__reg_attach(&me), 0);
	ripc__reg_foreach_proc(collect_stats, &s);
	cr_assert_eq(s.found, 1);
	cr_assert_eq(s.n, 0, "nothing published yet");

	ripc__reg_publish_stats(vals, 3);
	memset(&s, 0, sizeof(s));
	ripc__reg_foreach_proc(collect_stats, &s);
	cr_assert_eq(s.found, 1);
	cr_assert_eq(s.n, 3);
	cr_assert(!memcmp(s.vals, vals, sizeof(vals)));

	/* More than fits is cut at the limit, not written past the record. */
	ripc__reg_publish_stats(many, RIPC_REG_MAX_STATS + 10);
	memset(&s, 0, sizeof(s));
	ripc__reg_foreach_proc(collect_stats, &s);
	cr_assert_eq(s.n, RIPC_REG_MAX_STATS);
}

/* ---- same-host wake-ups and shm pairs -------------------------------- */

static uint64_t child_inc(const struct child *c)
{
	return 0x1000000000ull + (uint64_t)c->pid;
}

static int child_slot(const struct child *c)
{
	struct ripc_reg_proc_info out;

	cr_assert_eq(ripc__reg_find_incarnation(child_inc(c), &out), 0);
	cr_assert_eq(out.pid, c->pid);
	cr_assert_gt(out.slot1, 0);
	return out.slot1 - 1;
}

Test(registry, find_incarnation_and_sleep_word)
{
	struct ripc_reg_proc_info out;
	struct child c;
	uint32_t *w;

	cr_assert_null(ripc__reg_sleep_word(0), "before open");
	open_attach(0x91);
	cr_assert_eq(ripc__reg_find_incarnation(0x91, &out), 0);
	cr_assert_eq(out.slot1 - 1, ripc__reg_self_slot());
	cr_assert_eq(ripc__reg_find_incarnation(0x92, &out), -ENOENT);
	cr_assert_eq(ripc__reg_find_incarnation(0, &out), -ENOENT);
	w = ripc__reg_sleep_word(ripc__reg_self_slot());
	cr_assert_not_null(w);
	cr_assert_eq(*w, 0);
	cr_assert_null(ripc__reg_sleep_word(-1));
	cr_assert_null(ripc__reg_sleep_word(RIPC_REG_MAX_PROCS));
	/* Another process's word is another word. */
	cr_assert_eq(spawn(&c, OP_ATTACH, 0, true), 0);
	cr_assert_neq(ripc__reg_sleep_word(child_slot(&c)), w);
	/* Lookups by ID fill slot1 too. */
	cr_assert_eq(ripc__reg_claim(700, false), 0);
	cr_assert_eq(ripc__reg_lookup(700, &out), 0);
	cr_assert_eq(out.slot1 - 1, ripc__reg_self_slot());
	child_release(&c);
	cr_assert_eq(ripc__reg_find_incarnation(child_inc(&c), &out), -ENOENT,
		     "a process that detached is not found");
}

/* A process's record slot goes to the next process that attaches once the
 * process has ended and the record is reclaimed: what is addressed by slot
 * (the sleep and mail words) must check the slot still holds the
 * incarnation it is meant for.  A ring for an ended peer used to take the
 * newcomer's sleep word (and send the datagram to the dead one), so the
 * newcomer slept through the ring for its own reply. */
Test(registry, slot_changes_hands)
{
	struct child a, b;
	struct ripc_peer p;
	uint64_t ia, ib;
	uint32_t *w;
	int sa;

	open_attach(0x97);
	cr_assert(ripc__reg_holds(ripc__reg_self_slot(), 0x97));
	cr_assert_eq(spawn(&a, OP_ATTACH, 0, false), 0);
	sa = child_slot(&a);
	ia = child_inc(&a);
	cr_assert(ripc__reg_holds(sa, ia));
	cr_assert(!ripc__reg_holds(sa, ia + 1), "another incarnation");
	cr_assert(!ripc__reg_holds(-1, ia));
	cr_assert(!ripc__reg_holds(RIPC_REG_MAX_PROCS, ia));
	child_kill(&a);
	cr_assert(!ripc__reg_slot_live(sa, ia)); /* reclaims the record */
	cr_assert(!ripc__reg_holds(sa, ia));
	cr_assert_eq(spawn(&b, OP_ATTACH, 0, false), 0);
	cr_assert_eq(child_slot(&b), sa, "the first free slot is reused");
	ib = child_inc(&b);
	cr_assert(ripc__reg_holds(sa, ib));
	cr_assert(!ripc__reg_holds(sa, ia));

	/* The newcomer sleeps; a ring meant for the ended peer of that
	 * slot leaves its word alone, a ring for the newcomer takes it. */
	CTX->bell.out = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	cr_assert_geq(CTX->bell.out, 0);
	w = ripc__reg_sleep_word(sa);
	__atomic_store_n(w, 1, __ATOMIC_SEQ_CST);
	memset(&p, 0, sizeof(p));
	p.reg_slot1 = sa + 1;
	p.inc = ia;
	ripc__bell_ring(&p);
	cr_assert_eq(__atomic_load_n(w, __ATOMIC_SEQ_CST), 1,
		     "a ring for the slot's previous owner took the word");
	p.inc = ib;
	ripc__bell_ring(&p);
	cr_assert_eq(__atomic_load_n(w, __ATOMIC_SEQ_CST), 0, "not rung");
	close(CTX->bell.out);
	CTX->bell.out = -1;
	child_release(&b);
}

/* A receive that busy-polls clears the doorbell's word for the sleepers
 * armed on it (peers need not ring them: the spinner finds what comes)
 * and the last spinner sets it again for those still armed, telling the
 * caller to make one more pass.  A word left clear would leave an idle
 * progress thread asleep through every later message: an event loop
 * waiting on ripc_get_fd(3) would hang. */
Test(registry, bell_hush_and_unhush)
{
	uint32_t word = 0;

	CTX->bell.word = &word;
	CTX->bell.armed = 0;
	CTX->bell.hushed = false;

	/* Nobody asleep: nothing to hush, nothing to restore. */
	ripc__bell_hush();
	cr_assert_eq(word, 0);
	cr_assert(!ripc__bell_unhush(), "no pass needed");

	/* The progress thread sleeps armed; a receive spins, then stops. */
	ripc__bell_arm();
	cr_assert_eq(word, 1);
	ripc__bell_hush();
	cr_assert_eq(word, 0, "peers must not ring while we spin");
	ripc__bell_hush(); /* once hushed, stays so */
	cr_assert_eq(word, 0);
	cr_assert(ripc__bell_unhush(), "a pass must follow the unhush");
	cr_assert_eq(word, 1, "the sleeper is armed again");
	cr_assert(!ripc__bell_unhush(), "only once");
	cr_assert_eq(word, 1);

	/* The sleeper woke (and disarmed) while we spun: nobody to ring. */
	ripc__bell_hush();
	ripc__bell_disarm();
	cr_assert_eq(CTX->bell.armed, 0);
	cr_assert(!ripc__bell_unhush());
	cr_assert_eq(word, 0);

	/* Two sleepers (the thread and a watcher); one wakes meanwhile. */
	ripc__bell_arm();
	ripc__bell_arm();
	ripc__bell_hush();
	cr_assert_eq(word, 0);
	ripc__bell_disarm(); /* sets it for the other: one ring more at worst */
	cr_assert(ripc__bell_unhush());
	cr_assert_eq(word, 1);
	ripc__bell_disarm();
	cr_assert_eq(word, 0);

	CTX->bell.word = NULL;
	CTX->bell.armed = 0;
}

Test(registry, shm_pairs_limited_both_sides)
{
	struct child a, b, c, d;
	int sa, sb, sc;

	open_attach(0x93);
	cr_assert_eq(spawn(&a, OP_ATTACH, 0, true), 0);
	cr_assert_eq(spawn(&b, OP_ATTACH, 0, true), 0);
	cr_assert_eq(spawn(&c, OP_ATTACH, 0, true), 0);
	sa = child_slot(&a);
	sb = child_slot(&b);
	sc = child_slot(&c);
	cr_assert(ripc__reg_shm_pair(ripc__reg_self_slot(), 0),
		  "to itself always");
	cr_assert(ripc__reg_shm_pair(sa, 2));
	cr_assert(ripc__reg_shm_pair(sb, 2));
	cr_assert(!ripc__reg_shm_pair(sc, 2), "third pair over limit 2");
	cr_assert(ripc__reg_shm_pair(sa, 2), "an existing pair stays");
	cr_assert(ripc__reg_shm_pair(sc, 3), "a higher limit has room");
	cr_assert(!ripc__reg_shm_pair(-1, 10));
	cr_assert(!ripc__reg_shm_pair(RIPC_REG_MAX_PROCS, 10));
	/* The other side counts too: we have 3 pairs, so a newcomer that
	 * starts a pair with us under limit 3 is refused, and under 4 not;
	 * a pair it already has needs no room. */
	pair_with = ripc__reg_self_slot();
	cr_assert_eq(spawn(&d, OP_PAIR, 3, true), -ENOSPC);
	child_release(&d);
	cr_assert_eq(spawn(&d, OP_PAIR, 4, true), 0);
	child_release(&d);
	/* d detached: its pair with us is gone, so room again under 4. */
	cr_assert_eq(spawn(&d, OP_PAIR, 4, true), 0);
	child_release(&d);
	child_release(&a);
	child_release(&b);
	child_release(&c);
}

Test(registry, shm_pair_freed_when_partner_dies)
{
	struct ripc_reg_proc_info out;
	struct child a, b;
	int sa, sb;

	open_attach(0x94);
	cr_assert_eq(spawn(&a, OP_ATTACH, 0, false), 0);
	cr_assert_eq(spawn(&b, OP_ATTACH, 0, true), 0);
	sa = child_slot(&a);
	sb = child_slot(&b);
	cr_assert(ripc__reg_slot_live(sa, child_inc(&a)));
	cr_assert(!ripc__reg_slot_live(sa, child_inc(&a) + 1),
		      "another incarnation");
	cr_assert(ripc__reg_shm_pair(sa, 1));
	cr_assert(!ripc__reg_shm_pair(sb, 1), "full");
	/* a dies without detaching: nobody noticed yet, but when we are
	 * full the registry looks for partners that ended, at most every
	 * 200 ms (the refusal above looked just now). */
	child_kill(&a);
	cr_assert(!ripc__reg_shm_pair(sb, 1), "not looked again so soon");
	usleep(250 * 1000);
	cr_assert(ripc__reg_shm_pair(sb, 1), "the dead partner's place");
	cr_assert_eq(ripc__reg_find_incarnation(child_inc(&a), &out), -ENOENT);
	cr_assert(!ripc__reg_slot_live(sa, child_inc(&a)));
	child_release(&b);
	/* b detached: its slot is not live for its incarnation any more. */
	cr_assert(!ripc__reg_slot_live(sb, child_inc(&b)));
}

Test(registry, slot_live_reclaims_dead)
{
	struct ripc_reg_proc_info out;
	struct child a;
	int sa;

	open_attach(0x95);
	cr_assert_eq(spawn(&a, OP_CLAIM, 710, false), 0);
	sa = child_slot(&a);
	cr_assert(ripc__reg_slot_live(sa, child_inc(&a)));
	child_kill(&a);
	cr_assert(!ripc__reg_slot_live(sa, child_inc(&a)));
	/* Reclaimed at once: its record and its ID. */
	cr_assert_eq(ripc__reg_find_incarnation(child_inc(&a), &out), -ENOENT);
	cr_assert_eq(ripc__reg_claim(710, false), 0);
}

/* A pull from, or a long send to, a process of this host that has ended
 * ends then, not at its timeout (ripc__peer_ended): looked at once the
 * transfer has waited RIPC_PEER_CHECK_NS, then at doubling gaps; a
 * stopped process is alive, a zombie has ended, another host's peer
 * (over tcp, no record) is looked at once; a peer made after its process
 * ended has ended, over shm or tcp; over shm one without any record
 * cannot be told.  It is not handed to
 * the sweep early (docs/FAULTS.md). */
Test(registry, transfer_peer_ended)
{
	const uint64_t C = RIPC_PEER_CHECK_NS, since = 1000 * C;
	struct ripc_peer p, remote, gone;
	struct child a, b;
	uint64_t next;
	int st;

	open_attach(0x98);
	cr_assert_eq(spawn(&a, OP_ATTACH, 0, false), 0);
	memset(&p, 0, sizeof(p));
	p.tp = RIPC_PROV_TCP; /* a process of this host over tcp */
	p.proc_slot1 = child_slot(&a) + 1;
	p.inc = child_inc(&a);
	CTX->sweep_due = false;

	next = UINT64_MAX; /* young: not looked at, but at since + C */
	cr_assert(!ripc__peer_ended(&p, since, since + C - 1, &next));
	cr_assert_eq(next, since + C);
	next = UINT64_MAX; /* alive; the next look C later, then 2C */
	cr_assert(!ripc__peer_ended(&p, since, since + C, &next));
	cr_assert_eq(next, since + 2 * C);
	next = UINT64_MAX;
	cr_assert(!ripc__peer_ended(&p, since, since + 2 * C, &next));
	cr_assert_eq(next, since + 4 * C, "the gap doubles");
	/* Another transfer with the same peer waits for the same look. */
	next = UINT64_MAX;
	cr_assert(!ripc__peer_ended(&p, since + 3 * C, since + 3 * C + 1,
				    &next));
	cr_assert_eq(next, since + 4 * C);

	cr_assert_eq(kill(a.pid, SIGSTOP), 0); /* stopped is alive */
	next = UINT64_MAX;
	cr_assert(!ripc__peer_ended(&p, since, since + 4 * C, &next));
	cr_assert_eq(kill(a.pid, SIGCONT), 0);

	memset(&remote, 0, sizeof(remote)); /* no record: another host's */
	remote.tp = RIPC_PROV_TCP;
	remote.inc = 0x77;
	next = UINT64_MAX;
	cr_assert(!ripc__peer_ended(&remote, 0, since * 10, &next));
	cr_assert_eq(next, UINT64_MAX, "nothing to look at later");
	cr_assert(!remote.dead);

	/* Killed, not reaped: a zombie has ended. */
	cr_assert_eq(kill(a.pid, SIGKILL), 0);
	cr_assert_eq(waitid(P_PID, (id_t)a.pid, &(siginfo_t){ 0 },
			    WEXITED | WNOWAIT), 0);
	next = UINT64_MAX;
	cr_assert(!ripc__peer_ended(&p, since, since + 8 * C - 1, &next),
		  "looked at before its time");
	cr_assert(ripc__peer_ended(&p, since, since + 8 * C, &next));
	cr_assert(!p.dead && !CTX->sweep_due,
		  "the sweep forgets it on its own schedule");
	cr_assert(ripc__peer_ended(&p, since, since, &next), "stays ended");
	cr_assert_eq(waitpid(a.pid, &st, 0), a.pid);
	close(a.hold);

	/* A same-host transport's peer made after its process ended (no
	 * live record then): its record, still there, says it ended. */
	CTX->tp[RIPC_PROV_SHM].attr.same_host_only = true;
	cr_assert_eq(spawn(&b, OP_ATTACH, 0, false), 0);
	child_kill(&b); /* reaped as a process; its record stays */
	memset(&gone, 0, sizeof(gone));
	gone.tp = RIPC_PROV_SHM;
	gone.inc = child_inc(&b);
	next = UINT64_MAX;
	cr_assert(ripc__peer_ended(&gone, since, since + C, &next));
	/* The same over tcp: a peer of this host by its record (a pull
	 * over libfabric's net from a killed sender: the provider refuses
	 * the reads for ever instead of failing them). */
	cr_assert_eq(spawn(&b, OP_ATTACH, 0, false), 0);
	child_kill(&b);
	memset(&gone, 0, sizeof(gone));
	gone.tp = RIPC_PROV_TCP;
	gone.inc = child_inc(&b);
	next = UINT64_MAX;
	cr_assert(ripc__peer_ended(&gone, since, since + C, &next),
		  "a tcp peer of this host whose process ended");
	/* Over tcp without a record: another host's, not looked at again. */
	memset(&gone, 0, sizeof(gone));
	gone.tp = RIPC_PROV_TCP;
	gone.inc = 0x4242;
	next = UINT64_MAX;
	cr_assert(!ripc__peer_ended(&gone, since, since + C, &next));
	cr_assert(gone.unrecorded && next == UINT64_MAX);
	cr_assert(!ripc__peer_ended(&gone, since, since + 100 * C, &next));
	cr_assert_eq(next, UINT64_MAX, "not looked at again");
	/* No record at all (reclaimed, or another registry's process):
	 * cannot tell, looked at again later. */
	memset(&gone, 0, sizeof(gone));
	gone.tp = RIPC_PROV_SHM;
	gone.inc = child_inc(&a);
	next = UINT64_MAX;
	cr_assert(!ripc__peer_ended(&gone, since, since + C, &next));
	cr_assert_eq(next, since + 2 * C);
	CTX->tp[RIPC_PROV_SHM].attr.same_host_only = false;
	CTX->sweep_due = false;
}

/* Either side of a pair sends over shm only once the other has mapped it
 * (registry.h): the one that forms the pair maps the other after its
 * first messages have gone through the doorbell. */
Test(registry, shm_pair_waits_for_both_mappings)
{
	struct ripc_reg_proc_info req[4];
	struct child a, b;
	int sa, sb, n;
	uint32_t before = 0;

	open_attach(0x96);
	pair_with = ripc__reg_self_slot();
	pair_with_inc = 0x96;
	before = ripc__reg_accept_requests();
	/* a forms a pair with us and has not mapped us yet. */
	cr_assert_eq(spawn(&a, OP_PAIR, 10, true), 0);
	sa = child_slot(&a);
	cr_assert_neq(ripc__reg_accept_requests(), before, "asked to accept");
	cr_assert(!ripc__reg_shm_accepted(sa), "a has not mapped us");
	n = ripc__reg_accept_pending(req, 4);
	cr_assert_eq(n, 1);
	cr_assert_eq(req[0].incarnation, child_inc(&a));
	/* We map a: accepted on a's side, so nothing pending any more; we
	 * still wait for a. */
	ripc__reg_shm_mapped(sa, child_inc(&a));
	cr_assert_eq(ripc__reg_accept_pending(req, 4), 0);
	cr_assert(!ripc__reg_shm_accepted(sa), "still not mapped by a");
	/* b forms a pair and maps us: we may send to b at once. */
	cr_assert_eq(spawn(&b, OP_PAIR_MAPPED, 10, true), 0);
	sb = child_slot(&b);
	cr_assert(ripc__reg_shm_accepted(sb), "b mapped us");
	cr_assert_eq(ripc__reg_accept_pending(req, 4), 1, "b waits for us");
	/* Another incarnation in b's slot changes nothing. */
	ripc__reg_shm_mapped(sb, child_inc(&b) + 1);
	cr_assert_eq(ripc__reg_accept_pending(req, 4), 1);
	ripc__reg_shm_mapped(sb, child_inc(&b));
	cr_assert_eq(ripc__reg_accept_pending(req, 4), 0);
	child_release(&a);
	child_release(&b);
}

/* A doorbell datagram's sender (pid, from the kernel) must be the process
 * the registry holds for the incarnation its message claims. */
Test(registry, vouch_and_mail_word)
{
	struct child a;
	uint32_t *mine, *theirs;

	cr_assert_null(ripc__reg_mail_word(0), "before open");
	cr_assert_eq(ripc__reg_vouch(0x97, getpid()), -ENOENT, "before open");
	open_attach(0x97);
	cr_assert_eq(spawn(&a, OP_ATTACH, 0, true), 0);
	cr_assert_eq(ripc__reg_vouch(0x97, getpid()), 0);
	cr_assert_eq(ripc__reg_vouch(child_inc(&a), a.pid), 0);
	cr_assert_eq(ripc__reg_vouch(child_inc(&a), getpid()), -EPERM,
		     "our pid in a's name");
	cr_assert_eq(ripc__reg_vouch(0x97, a.pid), -EPERM);
	cr_assert_eq(ripc__reg_vouch(0x98, getpid()), -ENOENT, "nobody's");
	cr_assert_eq(ripc__reg_vouch(0, getpid()), -ENOENT);
	cr_assert_eq(ripc__reg_vouch(0x97, 0), -ENOENT);
	mine = ripc__reg_mail_word(ripc__reg_self_slot());
	theirs = ripc__reg_mail_word(child_slot(&a));
	cr_assert_not_null(mine);
	cr_assert_not_null(theirs);
	cr_assert_neq(mine, theirs);
	cr_assert_neq(mine, ripc__reg_sleep_word(ripc__reg_self_slot()));
	cr_assert_null(ripc__reg_mail_word(-1));
	cr_assert_null(ripc__reg_mail_word(RIPC_REG_MAX_PROCS));
	child_release(&a);
	cr_assert_eq(ripc__reg_vouch(child_inc(&a), a.pid), -ENOENT,
		     "a process that detached");
}
