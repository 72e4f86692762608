/*
 * Doorbells: waking a process on this host whose progress sleeps.
 *
 * libfabric 1.17's shm provider has no wait object (its CQ cannot be put
 * into poll()), so a process would have to poll it to notice a message.
 * Instead each process binds a datagram socket in the abstract unix
 * namespace, named after its incarnation, and its sleepers (the progress
 * thread, a receive that waits) poll that socket.  Before sleeping, a
 * process *arms* its doorbell: it sets the sleep word of its registry
 * record and then looks at its transports once more; a sender on this
 * host, after handing a message to shm, reads the receiver's sleep word
 * and only when it is set exchanges it for 0 and sends one datagram.  So
 * busy traffic costs a load per message and nothing else, and a sleeping
 * process wakes within microseconds, without any periodic polling.
 *
 * Why no message is missed: the sleeper stores 1 and then polls; the
 * sender posts and then loads (both with full fences): either the poll
 * sees the message, or the load sees the 1.
 *
 * Abstract unix sockets are scoped like the registry (per network
 * namespace) and vanish with their process.  A datagram to a process
 * that died fails with ECONNREFUSED: nothing to do.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ripc_int.h"

static socklen_t bell_addr(uint64_t incarnation, struct sockaddr_un *a)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* sun_path[0] = 0: the abstract namespace. */
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "ripc-bell-%u-%016llx", (unsigned)geteuid(),
		     (unsigned long long)incarnation);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* Module init: our doorbell.  Without one (no registry slot, no socket)
 * the process falls back to polling shm. */
int ripc__bell_open(void)
{
	struct sockaddr_un a;
	socklen_t len = bell_addr(CTX->incarnation, &a);
	int fd;

	bool same_host = false;

	CTX->bell.fd = CTX->bell.out = -1;
	CTX->bell.word = NULL;
	CTX->bell.armed = 0;
	for (unsigned i = 0; i < RIPC_PROV_MAX; i++)
		same_host |= CTX->tp[i].open && CTX->tp[i].attr.same_host_only;
	/* Only transports without a wait fd need one (shm); tcp's sockets
	 * wake us themselves. */
	if (!same_host || !CTX->cfg.doorbell)
		return RIPC_OK;
	CTX->bell.word = ripc__reg_sleep_word(ripc__reg_self_slot());
	if (!CTX->bell.word)
		return RIPC_OK;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, len) < 0) {
		ripc__log(RIPC_LOG_WARN,
			  "doorbell unavailable (%s): shm is polled instead",
			  strerror(errno));
		if (fd >= 0)
			close(fd);
		CTX->bell.word = NULL;
		return RIPC_OK;
	}
	CTX->bell.fd = fd;
	/* A socket for ringing others (sendto needs no binding). */
	CTX->bell.out = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC |
						SOCK_NONBLOCK, 0);
	return RIPC_OK;
}

/* In a forked child: the sockets are the parent's copies; close ours. */
void ripc__bell_forget(void)
{
	if (CTX->bell.fd >= 0)
		close(CTX->bell.fd);
	if (CTX->bell.out >= 0)
		close(CTX->bell.out);
	CTX->bell.fd = CTX->bell.out = -1;
	CTX->bell.word = NULL;
	CTX->bell.armed = 0;
}

void ripc__bell_close(void)
{
	/* Nobody may ring a process that has no doorbell any more. */
	if (CTX->bell.word)
		__atomic_store_n(CTX->bell.word, 0, __ATOMIC_RELAXED);
	ripc__bell_forget();
}

int ripc__bell_fd(void)
{
	return CTX->bell.fd;
}

/* About to sleep: others ring from now on.  The caller polls its
 * transports once more afterwards, then sleeps on ripc__bell_fd().
 *
 * Two threads may sleep on the doorbell at once (the progress thread and
 * a receive that watches the transports itself, progress.c), each armed
 * once; the word is set on every arming.  A ring clears the word and
 * wakes whoever polls the socket.  The first to take the lock disarms:
 * it drains the socket and, if the other still sleeps armed, sets the
 * word again for it, then (under the same lock) makes the pass that finds
 * what was rung for; the other, if it wakes at all, finds nothing to do. */
void ripc__bell_arm(void)
{
	if (!CTX->bell.word)
		return;
	CTX->bell.armed++;
	__atomic_store_n(CTX->bell.word, 1, __ATOMIC_SEQ_CST);
}

/* Awake again: drain the datagrams; stop wanting rings once nobody sleeps
 * on the socket any more.  The caller makes a progress pass before it
 * lets go of the lock. */
void ripc__bell_disarm(void)
{
	char buf[16];

	if (!CTX->bell.word || !CTX->bell.armed)
		return;
	__atomic_store_n(CTX->bell.word, --CTX->bell.armed ? 1 : 0,
			 __ATOMIC_SEQ_CST);
	while (recv(CTX->bell.fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		CTX->stats.bell_wakeups++;
}

/* After handing work to a same-host peer over shm: wake it if it sleeps. */
void ripc__bell_ring(const struct ripc_peer *peer)
{
	struct sockaddr_un a;
	uint32_t *word;
	socklen_t len;

	if (peer->reg_slot1 == 0 || CTX->bell.out < 0)
		return;
	word = ripc__reg_sleep_word(peer->reg_slot1 - 1);
	if (!word)
		return;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!__atomic_load_n(word, __ATOMIC_RELAXED) ||
	    !__atomic_exchange_n(word, 0, __ATOMIC_SEQ_CST))
		return;
	len = bell_addr(peer->inc, &a);
	if (sendto(CTX->bell.out, "", 1, MSG_DONTWAIT, (struct sockaddr *)&a,
		   len) == 1)
		CTX->stats.bell_rings++;
}
