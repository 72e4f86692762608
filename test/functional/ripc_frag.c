/*
 * Short messages from several processes at once, 3 900 to 24 000 bytes:
 * around the inject size of shm (4096) and the eager limit of tcp;ofi_rxm
 * (17408 with libripc's setting), where a transport may take another path
 * for a message than for the one before it: over shm libripc sends those
 * up to RIPC_FRAG_MAX as trains of injects (ripc_protocol(7) FRAGMENTS),
 * so trains of different senders interleave in the receiver's queue.
 * They must arrive whole and, per sender, in order (ripc(7)).
 *
 * The client forks SENDERS-1 children before initialising the library, so
 * each is a process of its own with its own incarnation; each sends -I
 * messages of 1-3 items, 3 900 to 24 000 bytes in all, then a "fin".  Item
 * 0 is a header {magic, sender, seq, seed}; items 1.. are ft_fill(seed +
 * i).  The server checks every byte, that each sender's messages arrive
 * in order and none is missing, and acknowledges every ACK_EVERY-th one
 * (the senders wait for it, so no queue overflows), that nothing was
 * dropped, and that trains came over shm and only there.  The server's
 * exit status is the verdict.
 */
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define SENDERS 4
#define ACK_EVERY 16
#define MAGIC 0x4652414754455354ull
#define FIN UINT64_MAX

struct hdr {
	uint64_t magic, sender, seq, seed;
};

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	uint64_t next[SENDERS] = { 0 };
	unsigned fins = 0;
	uint64_t bytes = 0;
	struct ripc_stats st;
	struct ft_msg m;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_ready(me);
	while (fins < SENDERS) {
		const struct hdr *h;

		ft_recv_ok(me, &m, 30000);
		FT_CHECK(m.ns >= 1 && m.ss[0] == sizeof(*h) && m.nl == 0,
			 "not one of ours: %u items", m.ns);
		h = m.si[0];
		FT_CHECK(h->magic == MAGIC && h->sender < SENDERS,
			 "bad header");
		if (h->seq == FIN) {
			FT_CHECK(next[h->sender] == (uint64_t)ft.iterations,
				 "sender %lu: fin after %lu messages",
				 (unsigned long)h->sender,
				 (unsigned long)next[h->sender]);
			fins++;
			ft_msg_free(&m, false);
			continue;
		}
		FT_CHECK(h->seq == next[h->sender],
			 "sender %lu: message %lu arrived as %lu",
			 (unsigned long)h->sender, (unsigned long)h->seq,
			 (unsigned long)next[h->sender]);
		next[h->sender]++;
		for (unsigned i = 1; i < m.ns; i++) {
			size_t bad = ft_verify(m.si[i], m.ss[i], h->seed + i);

			FT_CHECK(bad == (size_t)-1,
				 "sender %lu message %lu: item %u byte %zu "
				 "differs",
				 (unsigned long)h->sender,
				 (unsigned long)h->seq, i, bad);
			bytes += m.ss[i];
		}
		if (next[h->sender] % ACK_EVERY == 0)
			FT_EXPECT(ft_send_word(me, m.from, "ack"), RIPC_OK);
		ft_msg_free(&m, false);
	}
	FT_EXPECT(ripc_stats(&st, sizeof(st)), RIPC_OK);
	ft_log("server: %d senders x %ld messages verified (%lu bytes), "
	       "%lu arrived as trains",
	       SENDERS, ft.iterations, (unsigned long)bytes,
	       (unsigned long)st.frag_msgs_recv);
	FT_CHECK(st.drops_malformed == 0 && st.drops_stale == 0 &&
			 st.drops_queue_full == 0,
		 "drops: malformed %lu stale %lu queue-full %lu",
		 (unsigned long)st.drops_malformed,
		 (unsigned long)st.drops_stale,
		 (unsigned long)st.drops_queue_full);
	if (!strcmp(ft.prov, "shm"))
		FT_CHECK(st.frag_msgs_recv > 0, "no message came as a train");
	else
		FT_CHECK(st.frag_msgs_recv == 0, "trains over %s", ft.prov);
	return 0;
}

static int sender(unsigned idx)
{
	static uint8_t pool[3 * 24000];
	uint16_t me, srv = (uint16_t)ft.server_id;
	uint64_t rs = 0x9e37 * (idx + 1) ^ (uint64_t)getpid();
	struct hdr h = { MAGIC, idx, 0, 0 };
	void *buf[4];
	uint32_t len[4];
	struct ft_msg m;

	ft_lib_init();
	me = ripc_register_random_service_id();
	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	buf[0] = &h;
	len[0] = sizeof(h);
	for (long it = 0; it < ft.iterations; it++) {
		unsigned n = 2 + (unsigned)(ft_rand(&rs) % 3);
		size_t total = 3900 + ft_rand(&rs) % (24000 - 3900), off = 0;

		h.seq = (uint64_t)it;
		h.seed = ft_rand(&rs);
		for (unsigned i = 1; i < n; i++) {
			/* Room for at least a byte in each item after it. */
			size_t rest = total - off - (n - 1 - i);
			size_t l = i == n - 1 ? total - off
					      : 1 + ft_rand(&rs) % rest;

			buf[i] = pool + off;
			len[i] = (uint32_t)l;
			ft_fill(buf[i], l, h.seed + i);
			off += l;
		}
		FT_EXPECT(ripc_send_short(me, srv, buf, len, (uint16_t)n, NULL,
					  NULL, 0),
			  RIPC_OK);
		if ((it + 1) % ACK_EVERY == 0) {
			ft_recv_ok(me, &m, 30000);
			FT_CHECK(ft_is_word(&m, "ack"), "expected an ack");
			ft_msg_free(&m, false);
		}
	}
	h.seq = FIN;
	FT_EXPECT(ripc_send_short(me, srv, buf, len, 1, NULL, NULL, 0),
		  RIPC_OK);
	ft_log("sender %u: %ld messages sent", idx, ft.iterations);
	ripc_finalize();
	return 0;
}

static int client(void)
{
	pid_t kids[SENDERS];
	int failed = 0;

	/* Children first, each its own process before the library starts. */
	for (unsigned i = 1; i < SENDERS; i++) {
		kids[i] = fork();
		FT_CHECK(kids[i] >= 0, "fork");
		if (kids[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			_exit(sender(i));
		}
	}
	failed |= sender(0);
	for (unsigned i = 1; i < SENDERS; i++) {
		int status;

		FT_CHECK(waitpid(kids[i], &status, 0) == kids[i], "waitpid");
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			ft_log("sender %u: status %#x", i, status);
			failed = 1;
		}
	}
	return failed;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_frag", 400, 0);
	if (ft.server) {
		ft_lib_init();
		return server();
	}
	return client();
}
