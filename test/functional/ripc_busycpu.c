/*
 * A busy-polling receive on a CPU it shares with a CPU-bound process
 * (ripc(7) RIPC_SPIN_US).  Past its first 10 us a receive yields its CPU
 * between polls, so that a peer on this host that our send woke can run;
 * but a yield gives the CPU to whatever else is runnable, and a busy loop
 * keeps it for a whole time slice (milliseconds) before the receive polls
 * again.  So a yield that gave the CPU away for over 0.5 ms stops the
 * thread's yields for 100 ms (ripc_stats: spin_yields_slow).  Without
 * that rule every message paid a slice: a 64 KiB shm long-send pair fell
 * from ~7 GB/s to 16-22 MB/s beside two busy loops (perf_notes.md, "a
 * yield per message to a busy CPU").
 *
 * The client pins itself, and a busy loop it forks, to one CPU, and makes
 * -I request/reply rounds; the server busy-waits DELAY_US before each
 * answer, so that the client's receive polls past 10 us and yields.
 * Checked: every answer, and that the client's slow yields stay within
 * the rule's bound, one per 100 ms of the rounds plus one; without the
 * rule that count is about one per round (each yield a slice of the
 * loop's).  The loop is stopped by its pid, and dies with the client
 * (PR_SET_PDEATHSIG) or after 120 s in any case.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define DELAY_US 50

static pid_t hog = -1;

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	struct ft_msg m;
	long rounds = 0;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_ready(me);
	for (;;) {
		uint64_t seq;
		void *b[1] = { &seq };
		uint32_t l[1] = { sizeof(seq) };
		double until;

		ft_recv_ok(me, &m, 30000);
		if (ft_is_word(&m, "quit")) {
			ft_msg_free(&m, false);
			break;
		}
		if (ft_is_word(&m, "hello")) {
			ft_msg_free(&m, false);
			continue;
		}
		FT_CHECK(m.ns == 1 && m.ss[0] == sizeof(seq), "round %ld: "
			 "%u short items", rounds, m.ns);
		memcpy(&seq, m.si[0], sizeof(seq));
		seq++;
		/* The client's receive waits longer than its 10 us. */
		until = ft_now() + DELAY_US * 1e-6;
		while (ft_now() < until)
			;
		FT_EXPECT(ripc_send_short(me, m.from, b, l, 1, NULL, NULL, 0),
			  RIPC_OK);
		ft_msg_free(&m, false);
		rounds++;
	}
	ft_log("server: %ld rounds", rounds);
	return 0;
}

/* Pin this process to the CPU it runs on, and fork the busy loop there
 * (before the library starts its threads). */
static void start_hog(void)
{
	int cpu = sched_getcpu();
	pid_t parent = getpid();
	cpu_set_t set;

	FT_CHECK(cpu >= 0, "sched_getcpu: %s", strerror(errno));
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	FT_CHECK(sched_setaffinity(0, sizeof(set), &set) == 0,
		 "sched_setaffinity: %s", strerror(errno));
	hog = fork();
	FT_CHECK(hog >= 0, "fork: %s", strerror(errno));
	if (hog == 0) {
		volatile unsigned long spin = 0;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		alarm(120);
		for (;;)
			spin++;
	}
	ft_log("client and busy loop %d on CPU %d", (int)hog, cpu);
}

static void stop_hog(void)
{
	if (hog > 0) {
		kill(hog, SIGKILL);
		waitpid(hog, NULL, 0);
		hog = -1;
	}
}

static int client(void)
{
	uint16_t me = ripc_register_random_service_id();
	uint16_t srv = (uint16_t)ft.server_id;
	struct ripc_stats s0 = { 0 }, s1 = { 0 };
	uint64_t yields, slow, bound;
	double t0, secs;
	struct ft_msg m;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	/* The route and the connection, before anything is counted. */
	FT_EXPECT(ft_send_word(me, srv, "hello"), RIPC_OK);
	FT_EXPECT(ripc_stats(&s0, sizeof(s0)), RIPC_OK);
	t0 = ft_now();
	for (long r = 0; r < ft.iterations; r++) {
		uint64_t seq = (uint64_t)r * 7 + 1, got;
		void *b[1] = { &seq };
		uint32_t l[1] = { sizeof(seq) };

		FT_EXPECT(ripc_send_short(me, srv, b, l, 1, NULL, NULL, 0),
			  RIPC_OK);
		ft_recv_ok(me, &m, 30000);
		FT_CHECK(m.ns == 1 && m.ss[0] == sizeof(got), "round %ld: "
			 "%u short items", r, m.ns);
		memcpy(&got, m.si[0], sizeof(got));
		FT_CHECK(got == seq + 1, "round %ld: answer %llu to %llu", r,
			 (unsigned long long)got, (unsigned long long)seq);
		ft_msg_free(&m, false);
	}
	secs = ft_now() - t0;
	FT_EXPECT(ripc_stats(&s1, sizeof(s1)), RIPC_OK);
	stop_hog();
	FT_EXPECT(ft_send_word(me, srv, "quit"), RIPC_OK);
	yields = s1.spin_yields - s0.spin_yields;
	slow = s1.spin_yields_slow - s0.spin_yields_slow;
	/* One slow yield shuts the yields for 100 ms. */
	bound = 1 + (uint64_t)(secs / 0.1);
	ft_log("client: %ld rounds in %.3f s, %llu yields, %llu slow (at most "
	       "%llu)",
	       ft.iterations, secs, (unsigned long long)yields,
	       (unsigned long long)slow, (unsigned long long)bound);
	FT_CHECK(slow <= yields, "more slow yields than yields");
	FT_CHECK(slow <= bound,
		 "%llu yields gave the CPU to the busy loop for over 0.5 ms "
		 "in %.3f s: a slow yield must stop the yields for 100 ms",
		 (unsigned long long)slow, secs);
	return 0;
}

int main(int argc, char **argv)
{
	int ret;

	ft_init(argc, argv, "ripc_busycpu", 300, 0);
	/* Only the client has a busy loop beside it. */
	if (!ft.server)
		start_hog();
	ft_lib_init();
	ret = ft.server ? server() : client();
	stop_hog();
	return ret;
}
