/*
 * Long sends (256 MiB) whose peer is killed in the middle of the pull,
 * and (shm) peers killed holding a region lock.
 * Run by test/scripts/faults.sh with RIPC_PROVIDER set.
 *
 *   ripc_longfault receiver-dies
 *       This process long-sends to a child that is SIGKILLed while it
 *       pulls.  The registrations must be released, with RIPC_EPEER, once
 *       the library has seen that the child ended (a process of this
 *       host: long before RIPC_LONG_TIMEOUT_MS, 2 s here, which must not
 *       be what ended it), and the process keep working.
 *   ripc_longfault replier-dies
 *       This process offers a return buffer with a request to a child
 *       that is SIGKILLed once it has the request, before it replies.
 *       The offer must end with RIPC_EPEER because the child ended (not
 *       at RIPC_RETURN_TIMEOUT_MS, 4 s here), and the process keep
 *       working.
 *   ripc_longfault sender-dies
 *       A child long-sends to this process and is SIGKILLed before this
 *       process can have pulled it all.  The receive must end with
 *       RIPC_EPULL before RIPC_PULL_TIMEOUT_MS (3 s here): the reads fail,
 *       or the library sees that the sender's process ended.  A message
 *       from another sender must still arrive.
 *   ripc_longfault sender-dies-locked   (shm only)
 *       As sender-dies, but the child dies holding its own shm region's
 *       spinlock, as a process SIGKILLed inside libfabric 1.17's shm
 *       critical sections does (ref §4.3), and stays an unreaped zombie
 *       while this process pulls from it.  The pull must still end with
 *       RIPC_EPULL (the shm watchdog releases a dead process's lock)
 *       instead of spinning forever.  Exit 77 where the region is not
 *       the 1.17 layout the watchdog knows.
 *       In both, this process drives its library itself
 *       (RIPC_PROGRESS=manual) and calls it only once the sender is dead:
 *       the sender dies before its long send is pulled, whatever the load.
 *       (A sender that slept 5 ms before dying was, on a loaded machine,
 *       sometimes dead only after a 256 MiB pull had finished: "the pull
 *       from a killed sender succeeded".  Stopping this process with
 *       SIGSTOP instead hung: stopped inside shm's critical section, it
 *       kept its region's lock, which the sender's send spun on.)
 *   ripc_longfault idle-sender-dies-locked   (shm only)
 *       As sender-dies-locked, but in thread mode and after a silence:
 *       this process sleeps in its receive for 4 s (the progress thread
 *       and the watchdog idle), then the sender long-sends, takes its
 *       region's lock and is killed.  The receive wakes, pulls, and
 *       spins inside libfabric holding the library's lock until the
 *       watchdog frees the dead process's lock.  It must end with
 *       RIPC_EPULL and the process keep working; how long after the
 *       send is printed, not judged (the receive, taking the library's
 *       lock as it wakes, wakes the watchdog: ~2.2 s, against 5-10 s
 *       when only the progress thread's waking did).  Exit 77 as
 *       sender-dies-locked.
 *   ripc_longfault client-dies-locked   (shm only)
 *       Not a long send: the lifecycle case of a server whose client is
 *       killed inside shm's critical section holding the server's own
 *       region lock, which the next clients need to send.  A client sends
 *       this process 50 messages, pauses 300 ms (this process sleeps
 *       idle, its receives done), takes this process's region lock and is
 *       killed; a second client then sends one message, spinning inside
 *       libfabric until this process's watchdog frees the lock.  The
 *       message must arrive, and before the watchdog's idle period
 *       (5 s) has passed since the lock was taken: the watchdog had seen
 *       work less than a second before, and once it sees the lock held
 *       it must keep looking every 200 ms (~2.2 s in all; 5-10 s when it
 *       went to its idle period at the first idle look, or while
 *       watching the held lock).  Exit 77 as sender-dies-locked.
 *   ripc_longfault idle-client-dies-locked   (shm only)
 *       As client-dies-locked, but after 2 s of silence, with this
 *       process asleep in the receive that waits for the next client's
 *       message (the first client tells the next one to send): its
 *       watchdog is in its idle period, and nothing of this process
 *       wakes it.  The next client's watchdog, seeing our lock held at
 *       two looks, must have us woken (our doorbell): the message must
 *       arrive within 5 s of the lock being taken (~2.6 s; ~6 s when only
 *       our watchdog's idle period ended the stall).  Exit 77 as
 *       sender-dies-locked.  Native builds only: under GCC 12's ASan a
 *       thread created in a child forked from this multi-threaded
 *       process sometimes never starts (docs/FAULTS.md), and a client
 *       without its watchdog cannot have us woken.
 * The last line says what happened; exit 0 if it is what must happen.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ripc.h>

#include "common.h"

#define BIG (256u << 20)

/* A forked peer ended (killed if it still runs) and reaped, its shm
 * region removed. */
static void reap(pid_t child)
{
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	ft_shm_cleanup(child);
}

/* The forked sender's first message, "hello": true if it came. */
static bool take_hello(uint16_t me, uint16_t *from)
{
	struct ft_msg m;
	bool ok = !ft_recv(me, &m, 20000) && ft_is_word(&m, "hello");

	if (from)
		*from = m.from;
	ft_msg_free(&m, true);
	return ok;
}

static int fail(const char *what)
{
	printf("FAIL: %s (%s)\n", what, ripc_strerror(ripc_last_error()));
	return 1;
}

/* Still working: a message to ourselves arrives. */
static bool still_works(uint16_t me)
{
	struct ft_msg m;
	bool ok;

	if (ft_send_word(me, me, "still here") || ft_recv(me, &m, 5000))
		return false;
	ok = ft_is_word(&m, "still here");
	ft_msg_free(&m, true);
	return ok;
}

static int receiver_dies(void)
{
	int pfd[2];
	uint16_t rid, me;
	pid_t child;
	uint8_t *buf;
	double t0, t_rel;
	struct ripc_stats st;
	uint8_t rel;

	if (pipe(pfd))
		return 1;
	child = fork();
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		/* The receiver: registers, tells its ID, pulls, is killed. */
		uint16_t id = ripc_register_random_service_id();

		if (write(pfd[1], &id, sizeof(id)) != sizeof(id))
			_exit(1);
		for (;;)
			ripc_receive(id, NULL, NULL, NULL, NULL, NULL, NULL,
				     NULL);
	}
	if (read(pfd[0], &rid, sizeof(rid)) != sizeof(rid) ||
	    rid == RIPC_INVALID_SERVICE_ID)
		return fail("receiver did not start");
	me = ripc_register_random_service_id();
	buf = ripc_buf_alloc(BIG);
	if (me == RIPC_INVALID_SERVICE_ID || !buf)
		return fail("setup");
	memset(buf, 0x5a, BIG);
	void *b[1] = { buf };
	uint32_t l[1] = { BIG };

	if (ripc_send_long(me, rid, b, l, 1, NULL, NULL, 0))
		return fail("long send");
	t0 = ft_now();
	usleep(20000); /* the receiver is pulling now */
	reap(child);
	/* Released because the receiver's process ended, and the owner is
	 * told that nobody finished pulling (RIPC_EPEER), not "released" as
	 * if pulled. */
	rel = ripc_wait_released(buf, 10000);
	if (rel == RIPC_ETIMEDOUT)
		return fail("registrations never released");
	t_rel = ft_now() - t0;
	ripc_stats(&st, sizeof(st));
	if (rel != RIPC_EPEER)
		return fail("released, but not reported as RIPC_EPEER");
	if (st.peer_ended_transfers != 1 || st.long_timeouts != 0)
		return fail("released by the timeout, not because the "
			    "receiver's process ended");
	if (!still_works(me))
		return fail("process unusable after its receiver died");
	printf("receiver killed 20 ms into the pull: registrations released "
	       "%.3f s after (its process ended; reported %s), process still "
	       "works\n",
	       t_rel, ripc_strerror(rel));
	return 0;
}

static int replier_dies(void)
{
	static uint8_t rbuf[65536];
	int pfd[2], gfd[2];
	uint16_t rid, me;
	pid_t child;
	double t0, t_rel;
	struct ripc_stats st;
	uint8_t rel;
	char got;

	if (pipe(pfd) || pipe(gfd))
		return 1;
	child = fork();
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		/* The replier: registers, tells its ID, takes the request,
		 * says so, and waits to be killed without replying. */
		uint16_t id = ripc_register_random_service_id();
		char one = 1;

		if (write(pfd[1], &id, sizeof(id)) != sizeof(id))
			_exit(1);
		if (ripc_receive(id, NULL, NULL, NULL, NULL, NULL, NULL, NULL) ||
		    write(gfd[1], &one, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(gfd[1]);
	if (read(pfd[0], &rid, sizeof(rid)) != sizeof(rid) ||
	    rid == RIPC_INVALID_SERVICE_ID)
		return fail("replier did not start");
	me = ripc_register_random_service_id();
	if (me == RIPC_INVALID_SERVICE_ID)
		return fail("register");
	const char *req = "reply into this";
	void *b[1] = { (void *)req }, *rb[1] = { rbuf };
	uint32_t l[1] = { 16 }, rl[1] = { sizeof(rbuf) };

	if (ripc_send_short(me, rid, b, l, 1, rb, rl, 1))
		return fail("request with a return buffer");
	if (read(gfd[0], &got, 1) != 1)
		return fail("the replier ended before it had the request");
	reap(child);
	t0 = ft_now();
	rel = ripc_wait_released(rbuf, 10000);
	if (rel == RIPC_ETIMEDOUT)
		return fail("the offer never ended");
	t_rel = ft_now() - t0;
	ripc_stats(&st, sizeof(st));
	if (rel != RIPC_EPEER)
		return fail("the offer ended, but not with RIPC_EPEER");
	if (st.peer_ended_transfers != 1)
		return fail("the offer ended by its timeout, not because the "
			    "replier's process ended");
	if (!still_works(me))
		return fail("process unusable after its replier died");
	printf("replier killed with the request in hand: the offered return "
	       "buffer ended %.3f s after (its process ended; reported %s), "
	       "process still works\n",
	       t_rel, ripc_strerror(rel));
	return 0;
}

/* Takes the spinlock of the shm region of process `owner` the way
 * libfabric 1.17 does inside its critical sections (layout as
 * prov/shm/shm.c checks it: version 4 at 0, the owner's pid at 4, the
 * region's address in its owner at 16, the lock at 24): our own region,
 * or a peer's as mapped here.  false if no such region is mapped. */
static bool lock_region(pid_t owner)
{
	FILE *maps = fopen("/proc/self/maps", "re");
	char line[512];
	bool done = false;

	while (maps && !done && fgets(line, sizeof(line), maps)) {
		unsigned long lo, hi;
		char *name = strstr(line, "/dev/shm/");
		int pid, a, b;

		if (!name || !strstr(line, "rw-s") ||
		    sscanf(line, "%lx-%lx", &lo, &hi) != 2 ||
		    sscanf(name + 9, "%d:%d:%d", &pid, &a, &b) != 3 ||
		    pid != owner)
			continue;
		const uint8_t *r = (const uint8_t *)lo;
		int rpid;
		uintptr_t base;

		memcpy(&rpid, r + 4, sizeof(rpid));
		memcpy(&base, r + 16, sizeof(base));
		if (r[0] != 4 || rpid != pid ||
		    (owner == getpid() && base != lo))
			continue;
		pthread_spin_lock((pthread_spinlock_t *)(uintptr_t)(lo + 24));
		done = true;
	}
	if (maps)
		fclose(maps);
	return done;
}

/* What a sender that locked its region tells the test before it dies. */
struct lock_report {
	char ok;       /* it found and took its region's lock */
	double t_sent; /* ft_now() after its long send */
};

/* The forked sender of the sender-dies cases; never returns.  Says hello
 * (over tcp the connection needs the receiver's progress, which it makes
 * in the receive that takes the hello); with idle_s, waits for the answer
 * (both processes have mapped each other then) and idle_s of silence;
 * long-sends 256 MiB; with report_fd >= 0 takes its own region's lock and
 * reports on report_fd; is killed. */
static void __attribute__((noreturn))
sender_child(uint16_t me, int report_fd, unsigned idle_s)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
	uint16_t id = ripc_register_random_service_id();
	uint8_t *buf = ripc_buf_alloc(BIG);
	void *b[1] = { buf };
	uint32_t l[1] = { BIG };
	struct lock_report rep = { 0, 0 };

	if (!buf || ft_send_word(id, me, "hello"))
		_exit(1);
	if (idle_s) {
		if (ripc_receive_timeout(id, NULL, NULL, NULL, NULL, NULL, NULL,
					 NULL, 20000))
			_exit(1);
		sleep(idle_s);
	}
	if (ripc_send_long(id, me, b, l, 1, NULL, NULL, 0))
		_exit(1);
	if (report_fd >= 0) {
		rep.ok = lock_region(getpid());
		rep.t_sent = ft_now();
		if (write(report_fd, &rep, sizeof(rep)) != sizeof(rep))
			_exit(1);
	}
	raise(SIGKILL);
	_exit(1);
}

/* The locked sender's report: 0 if it holds its lock, else the test's
 * result (it ended before it wrote; 77 where shm's region is not the
 * one lock_region knows). */
static int take_report(int fd, struct lock_report *rep)
{
	if (read(fd, rep, sizeof(*rep)) != sizeof(*rep))
		return fail("the sender ended before it locked");
	if (!rep->ok) {
		printf("Notrun: no shm region of the libfabric 1.17 layout in "
		       "the sender\n");
		return 77;
	}
	return 0;
}

static int sender_dies(bool locked)
{
	uint16_t me = ripc_register_random_service_id();
	pid_t child;
	void **si, **li;
	uint32_t *ss, *ls;
	uint16_t ns, nl, from;
	double t0;
	int r, lpfd[2];

	if (me == RIPC_INVALID_SERVICE_ID)
		return fail("register");
	if (locked && pipe(lpfd))
		return fail("pipe");
	child = fork();
	if (child == 0)
		sender_child(me, locked ? lpfd[1] : -1, 0);
	if (locked)
		close(lpfd[1]); /* EOF if the sender ends before it writes */
	if (!take_hello(me, NULL)) {
		reap(child);
		return fail("no hello from the sender");
	}
	if (locked && (r = take_report(lpfd[0], &(struct lock_report){ 0 }))) {
		reap(child);
		return r;
	}
	/* Outside the library (manual progress: nothing is pulled) until the
	 * sender is dead; not reaped, a zombie as a crashed process whose
	 * parent has not looked yet. */
	siginfo_t si_child;

	if (waitid(P_PID, (id_t)child, &si_child, WEXITED | WNOWAIT))
		return fail("waitid");
	if (si_child.si_code != CLD_KILLED) {
		reap(child);
		return fail("the sender failed before it was killed");
	}
	t0 = ft_now();
	r = ripc_receive_timeout(me, &from, &si, &ss, &ns, &li, &ls, &nl,
				 20000);
	reap(child);
	if (r == RIPC_OK)
		return fail("the pull from a killed sender succeeded");
	if (r != RIPC_EPULL)
		return fail("expected RIPC_EPULL");
	double t_err = ft_now() - t0;

	/* Not by RIPC_PULL_TIMEOUT_MS (3 s): the reads failed (tcp: the
	 * connection closed; shm: CMA from a process that is gone), or the
	 * library saw the sender's process end (shm: reads to a process
	 * that ended before it had mapped us are refused, not failed).
	 * Holding its lock, the sender keeps us spinning in libfabric until
	 * the watchdog frees the lock (2 s and its period). */
	if (!locked && t_err >= 2.5)
		return fail("the pull ended by its timeout");

	/* Another sender's message still arrives. */
	child = fork();
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		uint16_t id = ripc_register_random_service_id();

		r = ft_send_word(id, me, "next");
		ripc_finalize();
		_exit(r);
	}
	struct ft_msg m;
	bool next = !ft_recv(me, &m, 20000) && ft_is_word(&m, "next");

	ft_msg_free(&m, true);
	waitpid(child, NULL, 0);
	if (!next)
		return fail("no message after the failed pull");
	printf("sender killed%s before its long send was pulled: receive "
	       "ended with RIPC_EPULL after %.2f s; the next message "
	       "arrived\n",
	       locked ? " holding its shm region lock" : "", t_err);
	return 0;
}

/* Long enough for the watchdog to be waiting its long period: it does
 * from its first look after the progress thread went to sleep idle with
 * the library's lock free (200 ms later, progress.c). */
#define IDLE_S 4

static int idle_sender_dies_locked(void)
{
	uint16_t me = ripc_register_random_service_id(), from = 0;
	struct lock_report word;
	pid_t child;
	void **si, **li;
	uint32_t *ss, *ls;
	uint16_t ns, nl;
	double t_err;
	int r, lpfd[2];

	if (me == RIPC_INVALID_SERVICE_ID)
		return fail("register");
	if (pipe(lpfd))
		return fail("pipe");
	child = fork();
	if (child == 0)
		sender_child(me, lpfd[1], IDLE_S);
	close(lpfd[1]); /* EOF if the child ends before it writes */
	if (!take_hello(me, &from)) {
		reap(child);
		return fail("no hello from the sender");
	}
	if (ft_send_word(me, from, "ack"))
		return fail("answer to the hello");
	/* Asleep in the receive (thread mode: as the transports' watcher,
	 * the progress thread asleep too) until the long send comes. */
	r = ripc_receive_timeout(me, NULL, &si, &ss, &ns, &li, &ls, &nl,
				 20000);
	int rep = take_report(lpfd[0], &word);

	t_err = ft_now() - word.t_sent;
	reap(child);
	if (rep)
		return rep;
	if (r == RIPC_OK)
		return fail("the pull from a killed sender succeeded");
	if (r != RIPC_EPULL)
		return fail("expected RIPC_EPULL");
	if (!still_works(me))
		return fail("the process no longer works after the pull");
	printf("sender killed holding its shm region lock after %d s of "
	       "silence: receive ended with RIPC_EPULL %.2f s after the "
	       "send; the process still works\n",
	       IDLE_S, t_err);
	return 0;
}

#define TICKS 50

/* A client of client-dies-locked: says hello and waits for the answer
 * `rounds` times (the first messages to a new same-host peer travel as
 * doorbell datagrams, ripc/bell.c: after these the pair talks over shm),
 * then waits for a byte on go_fd. */
static uint16_t warm_client(uint16_t server, unsigned rounds, int go_fd)
{
	uint16_t id = ripc_register_random_service_id();
	struct ft_msg a;
	char go;

	for (unsigned i = 0; i < rounds; i++) {
		if (ft_send_word(id, server, "hello") ||
		    ft_recv(id, &a, 20000))
			_exit(1);
		ft_msg_free(&a, true);
	}
	if (read(go_fd, &go, 1) != 1)
		_exit(1);
	return id;
}

/* Answers `rounds` hellos (warm_client). */
static bool serve_hellos(uint16_t me, unsigned rounds)
{
	for (unsigned i = 0; i < rounds; i++) {
		uint16_t from = 0;

		if (!take_hello(me, &from) || ft_send_word(me, from, "ack"))
			return false;
	}
	return true;
}

/* Long enough for this process's watchdog to be waiting its idle period
 * (it does after five quiet looks, ~1 s, progress.c). */
#define QUIET_MS 2000

static int client_dies_locked(bool idle)
{
	uint16_t me = ripc_register_random_service_id();
	struct lock_report rep;
	struct ft_msg m;
	pid_t locker, next, server = getpid();
	int r = 1, lpfd[2], goa[2], gob[2];
	const unsigned warm = 10, pause_ms = idle ? QUIET_MS : 300;
	const char *why = NULL;
	bool got;
	double dt;

	if (me == RIPC_INVALID_SERVICE_ID)
		return fail("register");
	if (pipe(lpfd) || pipe(goa) || pipe(gob))
		return fail("pipe");
	if ((locker = fork()) < 0)
		return fail("fork");
	if (locker == 0) {
		/* The client that dies holding our lock: traffic, then
		 * (told to) a pause, the lock, the report, SIGKILL.  idle:
		 * it also tells the next client to send, since we wait in
		 * our receive meanwhile. */
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		uint16_t id = warm_client(me, warm, goa[0]);

		for (int i = 0; i < TICKS; i++)
			if (ft_send_word(id, me, "tick"))
				_exit(1);
		usleep(pause_ms * 1000);
		rep.ok = lock_region(server);
		rep.t_sent = ft_now();
		if (write(lpfd[1], &rep, sizeof(rep)) != sizeof(rep) ||
		    (idle && write(gob[1], "g", 1) != 1))
			_exit(1);
		raise(SIGKILL);
		_exit(1);
	}
	close(lpfd[1]); /* EOF if the child ends before it writes */
	if ((next = fork()) < 0) {
		reap(locker);
		return fail("fork");
	}
	if (next == 0) {
		/* The next client: connected over shm before the lock is
		 * taken, sends once it is. */
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		uint16_t id = warm_client(me, warm, gob[0]);

		r = ft_send_word(id, me, "next");
		ripc_finalize();
		_exit(r);
	}
	why = "the clients' hellos";
	if (!serve_hellos(me, 2 * warm))
		goto out;
	why = "the first client's traffic did not come";
	if (write(goa[1], "g", 1) != 1)
		goto out;
	for (int i = 0; i < TICKS; i++) {
		bool tick = !ft_recv(me, &m, 20000) && ft_is_word(&m, "tick");

		ft_msg_free(&m, true);
		if (!tick)
			goto out;
	}
	if (!idle) {
		/* Outside the library, as a server asleep between requests,
		 * until the first client holds our lock and is dead; our
		 * receive below then wakes our watchdog. */
		why = NULL; /* take_report says why */
		if ((r = take_report(lpfd[0], &rep)))
			goto out;
		r = 1;
		why = "the next client's message did not arrive";
		if (write(gob[1], "g", 1) != 1)
			goto out;
	}
	/* idle: asleep in this receive since the traffic, the watchdog in
	 * its idle period; only the next client (its watchdog) can have
	 * ours woken. */
	got = !ft_recv(me, &m, 20000) && ft_is_word(&m, "next");
	ft_msg_free(&m, true);
	if (idle) {
		why = NULL;
		if ((r = take_report(lpfd[0], &rep)))
			goto out;
		r = 1;
	}
	dt = ft_now() - rep.t_sent;
	siginfo_t si_child;

	why = "the first client did not die as planned";
	if (waitid(P_PID, (id_t)locker, &si_child, WEXITED | WNOWAIT) ||
	    si_child.si_code != CLD_KILLED)
		goto out;
	why = "the next client's message did not arrive";
	if (!got)
		goto out;
	why = NULL;
	if (dt >= 5.0) {
		printf("the next client's message arrived %.2f s after the "
		       "lock was taken: the watchdog waited its idle period\n",
		       dt);
		goto out;
	}
	why = "the process no longer works";
	if (!still_works(me))
		goto out;
	why = NULL;
	r = 0;
	printf("client killed holding this process's shm region lock after "
	       "a %u ms pause in traffic%s: the next client's message "
	       "arrived %.2f s after the lock was taken; the process still "
	       "works\n",
	       pause_ms, idle ? ", this process asleep in a receive" : "", dt);
out:
	reap(next);
	reap(locker);
	return why ? fail(why) : r;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	setenv("RIPC_LONG_TIMEOUT_MS", "2000", 1);
	setenv("RIPC_PULL_TIMEOUT_MS", "3000", 1);
	setenv("RIPC_RETURN_TIMEOUT_MS", "4000", 1);
	if (argc == 2 && !strncmp(argv[1], "sender-dies", 11))
		setenv("RIPC_PROGRESS", "manual", 1); /* see sender-dies */
	if (argc == 2 && !strcmp(argv[1], "receiver-dies"))
		return receiver_dies();
	if (argc == 2 && !strcmp(argv[1], "replier-dies"))
		return replier_dies();
	if (argc == 2 && !strcmp(argv[1], "sender-dies"))
		return sender_dies(false);
	if (argc == 2 && !strcmp(argv[1], "sender-dies-locked"))
		return sender_dies(true);
	if (argc == 2 && !strcmp(argv[1], "idle-sender-dies-locked"))
		return idle_sender_dies_locked();
	if (argc == 2 && !strcmp(argv[1], "client-dies-locked"))
		return client_dies_locked(false);
	if (argc == 2 && !strcmp(argv[1], "idle-client-dies-locked"))
		return client_dies_locked(true);
	fprintf(stderr,
		"usage: %s receiver-dies|replier-dies|sender-dies|"
		"sender-dies-locked|idle-sender-dies-locked|"
		"client-dies-locked|idle-client-dies-locked\n",
		argv[0]);
	return 2;
}
