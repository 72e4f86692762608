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
 *
 * Mail: the first messages to a new same-host peer.  Before a process
 * may send to another over shm, the other has to map it (the accept,
 * peer.c) and libfabric's shm has to take its connection request: two
 * passes of the other's progress, each a wake-up of an idle process,
 * plus mapping 16 MiB regions on both sides, most of a millisecond in
 * all.  Meanwhile a message that fits a receive slot travels as a
 * datagram to the peer's doorbell (ripc__bell_post), and the peer's
 * reply comes back the same way while its own connection is being made;
 * then the pair talks over shm.  The datagram itself wakes a sleeper;
 * the sender then bumps the peer's mail word in the registry, which the
 * peer's every progress pass loads (ripc__bell_has_mail) and, when it
 * moved, reads the socket (the engine, progress.c: ripc__bell_recv, then
 * the message is dispatched).
 *
 * Order: a sender posts to a peer over shm only after its datagrams to
 * it (the transmit queue keeps one order per peer, and a peer stays on
 * shm once a message went that way), and bumps the mail word after each
 * datagram, before any later shm post.  The receiver loads the word
 * after taking messages out of shm and before handling them, and reads
 * the datagrams first when it moved: a shm message it holds was posted
 * after the bump, so its load sees the bump.
 *
 * Trust: anybody on this host may send to an abstract socket.  The
 * kernel tells the receiver who sent a datagram (SO_PASSCRED): one of
 * another user is dropped, and so is a message whose source incarnation
 * the registry holds for a live process of another pid; more than shm can
 * say of its own messages.  A message from a process that has ended since
 * it sent (its record is gone) is handled, as its shm messages would be.
 * A message that arrives this way is validated like any other.
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
		     "ripc-bell-%u-%016llx", CTX->bell.uid,
		     (unsigned long long)incarnation);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* Module init: our doorbell.  Without one (no registry slot, no socket)
 * the process falls back to polling shm. */
int ripc__bell_open(void)
{
	struct sockaddr_un a;
	socklen_t len;
	int fd;

	bool same_host = false;

	CTX->bell.fd = CTX->bell.out = -1;
	CTX->bell.word = CTX->bell.mail = NULL;
	CTX->bell.armed = 0;
	CTX->bell.hushed = false;
	/* Not a system call per ring and per message received. */
	CTX->bell.uid = (unsigned)geteuid();
	len = bell_addr(CTX->incarnation, &a);
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
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, len) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &(int){ 1 },
		       sizeof(int)) < 0) {
		ripc__log(RIPC_LOG_WARN,
			  "doorbell unavailable (%s): shm is polled instead",
			  strerror(errno));
		if (fd >= 0)
			close(fd);
		CTX->bell.word = NULL;
		return RIPC_OK;
	}
	CTX->bell.fd = fd;
	CTX->bell.mail = ripc__reg_mail_word(ripc__reg_self_slot());
	/* A socket for ringing others (sendto needs no binding).  Its send
	 * buffer bounds what may be queued at any one peer: room for a few
	 * messages of a slot's size. */
	CTX->bell.out = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC |
						SOCK_NONBLOCK, 0);
	if (CTX->bell.out >= 0)
		setsockopt(CTX->bell.out, SOL_SOCKET, SO_SNDBUF,
			   &(int){ 4 * RIPC_SLOT_SIZE }, sizeof(int));
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
	CTX->bell.word = CTX->bell.mail = NULL;
	CTX->bell.armed = 0;
	CTX->bell.hushed = false;
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

/* Awake again: stop wanting rings once nobody sleeps on the socket any
 * more.  The caller drains the socket and makes a progress pass before it
 * lets go of the lock (progress.c). */
void ripc__bell_disarm(void)
{
	if (!CTX->bell.word || !CTX->bell.armed)
		return;
	__atomic_store_n(CTX->bell.word, --CTX->bell.armed ? 1 : 0,
			 __ATOMIC_SEQ_CST);
}

/* An application thread busy-polls the transports (api.c, api_spin): what
 * peers send meanwhile, it finds itself.  A ring would only wake the
 * sleepers that armed the word (the idle progress thread), and the
 * sender pays for that wake-up in its send, in the middle of a request:
 * after a quiet spell the client's spin waiting for the answer had the
 * server wake its progress thread with every answer, a second thread
 * woken on a host whose CPUs are idle.  So the first spinner clears the
 * word (sleepers stay armed) and the last one to stop sets it again.
 * Sleepers see no difference: while hushed, the spinner's passes find
 * what came; after unhush, a sender that loaded the cleared word had
 * posted before the store of 1, so the caller's pass after it finds it
 * (the same argument as arming's, file comment).  An arming or a ring
 * while hushed sets or clears the word as usual: at worst one ring more. */
void ripc__bell_hush(void)
{
	if (!CTX->bell.word || !CTX->bell.armed || CTX->bell.hushed)
		return;
	CTX->bell.hushed = true;
	__atomic_store_n(CTX->bell.word, 0, __ATOMIC_SEQ_CST);
}

bool ripc__bell_unhush(void)
{
	if (!CTX->bell.hushed)
		return false;
	CTX->bell.hushed = false;
	if (!CTX->bell.word || !CTX->bell.armed)
		return false; /* nobody asleep on the socket any more */
	__atomic_store_n(CTX->bell.word, 1, __ATOMIC_SEQ_CST);
	return true;
}

/* Ring the doorbell of registry record slot, held by incarnation inc, if
 * its progress sleeps armed: true if a datagram went.  Atomics and one
 * datagram, no lock: also called from the watchdog thread. */
static bool ring_slot(int slot, uint64_t inc)
{
	struct sockaddr_un a;
	uint32_t *word;
	socklen_t len;

	if (CTX->bell.out < 0 || !(word = ripc__reg_sleep_word(slot)))
		return false;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* A busy peer's word is 0: one load per message, nothing more.
	 * Whose word it is matters only when it is set. */
	if (!__atomic_load_n(word, __ATOMIC_RELAXED) ||
	    !ripc__reg_holds(slot, inc) ||
	    !__atomic_exchange_n(word, 0, __ATOMIC_SEQ_CST))
		return false;
	if (!ripc__reg_holds(slot, inc)) {
		/* It changed hands just now: the word we took is the
		 * newcomer's.  Give it back (at worst one ring it did not
		 * need). */
		__atomic_store_n(word, 1, __ATOMIC_SEQ_CST);
		return false;
	}
	len = bell_addr(inc, &a);
	return sendto(CTX->bell.out, "", 1, MSG_DONTWAIT,
		      (struct sockaddr *)&a, len) == 1;
}

/* After handing work to a same-host peer over shm: wake it if it sleeps.
 *
 * Only while its registry slot is still its own.  A peer that has ended
 * leaves its slot to the next process that registers, and a message still
 * queued for the dead peer is retried (and rung for) on every pass until
 * its deadline: taking the newcomer's sleep word each time, for a
 * datagram to a socket that no longer exists, left the newcomer asleep
 * through the replies it waited for (seen under valgrind: a client's
 * request answered, the answer never noticed, 10 s timeout). */
void ripc__bell_ring(const struct ripc_peer *peer)
{
	if (peer->reg_slot1 != 0 && ring_slot(peer->reg_slot1 - 1, peer->inc))
		CTX->stats.bell_rings++;
}

/* The watchdog thread (progress.c), without the library lock: its holder
 * may be the very thread that spins on process pid's shm region lock
 * (the shm watchdog op asked for it, prov/shm/shm.c).  Wakes pid if its
 * progress sleeps, so that its watchdog leaves its long period. */
void ripc__bell_wake_pid(int32_t pid)
{
	uint64_t inc = 0;
	int slot = ripc__reg_pid_slot(pid, &inc);

	if (slot >= 0 && slot != ripc__reg_self_slot() && ring_slot(slot, inc))
		ripc__log(RIPC_LOG_INFO,
			  "woke process %d: its shm region lock has been "
			  "held since our watchdog's last look",
			  (int)pid);
}

/* One datagram from the doorbell socket into buf (room bytes; NULL: no
 * room for a message).  Returns what it was, and for a message its length
 * and the sending process; RIPC_BELL_EMPTY when nothing is there.  The
 * kernel names the sender (SO_PASSCRED): another user's message is
 * RIPC_BELL_FOREIGN.  Lock held (the engine's). */
enum ripc_bell_in ripc__bell_recv(void *buf, size_t room, size_t *len,
				  pid_t *pid)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(struct ucred))];
	} cm;
	char ring[16];
	struct iovec iov = buf ? (struct iovec){ buf, room }
			       : (struct iovec){ ring, sizeof(ring) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cm.buf,
			     .msg_controllen = sizeof(cm.buf) };
	const struct ucred *cred = NULL;
	ssize_t n;

	if (CTX->bell.fd < 0)
		return RIPC_BELL_EMPTY;
	do
		n = recvmsg(CTX->bell.fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return RIPC_BELL_EMPTY;
	if (n <= 1) {
		CTX->stats.bell_wakeups++;
		return RIPC_BELL_RING;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET &&
		    c->cmsg_type == SCM_CREDENTIALS &&
		    c->cmsg_len == CMSG_LEN(sizeof(struct ucred)))
			cred = (const struct ucred *)CMSG_DATA(c);
	if (!buf)
		return RIPC_BELL_NO_ROOM;
	if (mh.msg_flags & MSG_TRUNC)
		return RIPC_BELL_TOO_LONG;
	if (!cred || (mh.msg_flags & MSG_CTRUNC) || cred->uid != CTX->bell.uid)
		return RIPC_BELL_FOREIGN;
	*len = (size_t)n;
	*pid = cred->pid;
	CTX->stats.bell_msgs_recv++;
	return RIPC_BELL_MSG;
}

/* Reading the socket: mail sent before now is read now. */
void ripc__bell_mail_clear(void)
{
	if (CTX->bell.mail)
		__atomic_store_n(CTX->bell.mail, 0, __ATOMIC_SEQ_CST);
}

/* More was left than one drain reads: the next pass reads on. */
void ripc__bell_mail_again(void)
{
	if (CTX->bell.mail)
		__atomic_store_n(CTX->bell.mail, 1, __ATOMIC_SEQ_CST);
}

/* A message for a same-host peer that cannot take it over shm yet: sent
 * to its doorbell instead.  0 when the datagram went, -EAGAIN when it did
 * not (no doorbell on either side, too large, the peer's queue is full,
 * the peer is gone): the caller queues the message as before. */
int ripc__bell_post(const struct ripc_peer *peer, const void *buf, size_t len)
{
	struct sockaddr_un a;
	uint32_t *mail;
	socklen_t alen;

	if (peer->reg_slot1 == 0 || CTX->bell.out < 0 || CTX->bell.fd < 0 ||
	    len <= 1 || len > RIPC_SLOT_SIZE ||
	    !ripc__reg_holds(peer->reg_slot1 - 1, peer->inc) ||
	    !(mail = ripc__reg_mail_word(peer->reg_slot1 - 1)))
		return -EAGAIN;
	alen = bell_addr(peer->inc, &a);
	if (sendto(CTX->bell.out, buf, len, MSG_DONTWAIT,
		   (struct sockaddr *)&a, alen) != (ssize_t)len)
		return -EAGAIN;
	/* After the datagram, before anything later goes over shm. */
	__atomic_fetch_add(mail, 1, __ATOMIC_SEQ_CST);
	CTX->stats.bell_msgs_sent++;
	return 0;
}
