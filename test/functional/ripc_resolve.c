/*
 * Resolution on one host: a send to an ID nobody holds fails with
 * RIPC_ENOSERVICE after RIPC_RESOLVE_TIMEOUT_MS (checked within +-20 %),
 * and a send whose destination registers while the send waits succeeds.
 * With the multicast resolver on a loopback address (the runner's, and the
 * default), the library sends nothing to the group: only this host hears
 * it there, and its processes ignore their own host's answers and
 * announcements (ripc_protocol(7), RESOLUTION).  The client listens on the
 * group through all of the above and expects no query, probe or
 * announcement of its IDs, and its own test datagram (it hears the group).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/prctl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	struct ft_msg m;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_ready(me);
	ft_recv_ok(me, &m, 60000);
	FT_CHECK(ft_is_word(&m, "quit"), "quit");
	ft_msg_free(&m, false);
	return 0;
}

static uint16_t unused_id(uint16_t avoid)
{
	/* An ID nobody in this test's registry holds. */
	uint16_t id = (uint16_t)(200 + (getpid() % 500));

	return id == avoid ? id + 1 : id;
}

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);

	return v && *v ? v : dflt;
}

/* A socket on the resolver's group as the library joins it (the variables
 * of ripc(7) and their defaults), or -1 when the resolver is off or not on
 * a loopback address: nothing to check then. */
static int sniff_open(void)
{
	const char *on = getenv("RIPC_RESOLVER");
	const char *addr = env_or("RIPC_RESOLVER_ADDR",
				  env_or("RIPC_TCP_ADDR", "127.0.0.1"));
	struct sockaddr_in grp = { .sin_family = AF_INET };
	struct ip_mreq mreq;
	int fd, one = 1;

	if ((on && (!strcmp(on, "0") || !strcasecmp(on, "no") ||
		    !strcasecmp(on, "off") || !strcasecmp(on, "false") ||
		    !*on)) ||
	    (!on && *env_or("RIPC_DIRECTORY", "")))
		return -1;
	if (inet_pton(AF_INET, addr, &mreq.imr_interface) != 1 ||
	    (ntohl(mreq.imr_interface.s_addr) >> 24) != 127)
		return -1;
	FT_CHECK(inet_pton(AF_INET, env_or("RIPC_RESOLVER_GROUP",
					   "239.255.82.73"),
			   &grp.sin_addr) == 1,
		 "group");
	grp.sin_port = htons((uint16_t)atoi(env_or("RIPC_RESOLVER_PORT",
						   "47473")));
	mreq.imr_multiaddr = grp.sin_addr;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	FT_CHECK(fd >= 0, "socket");
	FT_CHECK(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
			    sizeof(one)) == 0 &&
			 bind(fd, (struct sockaddr *)&grp, sizeof(grp)) == 0 &&
			 setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq,
				    sizeof(mreq)) == 0 &&
			 setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF,
				    &mreq.imr_interface,
				    sizeof(mreq.imr_interface)) == 0,
		 "join the resolver's group");
	return fd;
}

/* Send a datagram to the group from the interface, as the library would. */
static void sniff_probe(int fd)
{
	struct sockaddr_in grp;
	socklen_t len = sizeof(grp);
	struct ip_mreq mreq;
	socklen_t mlen = sizeof(mreq.imr_interface);
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	FT_CHECK(s >= 0 && getsockname(fd, (struct sockaddr *)&grp, &len) == 0,
		 "socket");
	FT_CHECK(getsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF,
			    &mreq.imr_interface, &mlen) == 0 &&
			 setsockopt(s, IPPROTO_IP, IP_MULTICAST_IF,
				    &mreq.imr_interface,
				    sizeof(mreq.imr_interface)) == 0,
		 "multicast interface");
	FT_CHECK(sendto(s, "sniff-test", 10, 0, (struct sockaddr *)&grp,
			sizeof(grp)) == 10,
		 "sendto the group");
	close(s);
}

/* Count the group's datagrams of libripc's resolver (magic "RPIR";
 * ripc_protocol(7): the service ID little-endian at byte 6) for the IDs in
 * ids, and our own test datagram. */
static void sniff_count(int fd, const uint16_t *ids, unsigned nids,
			unsigned *ours, unsigned *tests)
{
	uint8_t d[1500];
	ssize_t n;

	while ((n = recv(fd, d, sizeof(d), MSG_DONTWAIT)) >= 0) {
		uint16_t id;

		if (n == 10 && !memcmp(d, "sniff-test", 10))
			++*tests;
		if (n < 40 || memcmp(d, "RPIR", 4))
			continue;
		id = (uint16_t)(d[6] | d[7] << 8);
		for (unsigned i = 0; i < nids; i++)
			*ours += id == ids[i];
	}
}

static int client(void)
{
	uint16_t srv = (uint16_t)ft.server_id;
	int sniff = sniff_open(); /* before our registration */
	uint16_t me = ripc_register_random_service_id();
	uint16_t ghost = unused_id(srv), late = (uint16_t)(ghost + 1000);
	const double timeout = 0.6; /* RIPC_RESOLVE_TIMEOUT_MS set below */
	double t0, dt;
	int pfd[2], st;
	pid_t child;
	char c;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	/* Never existed: error within the timeout +-20 %. */
	t0 = ft_now();
	FT_EXPECT(ft_send_word(me, ghost, "anyone?"), RIPC_ENOSERVICE);
	dt = ft_now() - t0;
	FT_CHECK(dt >= timeout * 0.8 && dt <= timeout * 1.2,
		 "failed after %.3f s, timeout %.3f s", dt, timeout);
	ft_log("unknown destination: error after %.3f s", dt);

	/* Appears while the send waits.  The child initialises the library
	 * first (slow under valgrind) and says so; only then does the parent
	 * send, and the child registers 200 ms into that send's wait. */
	int ready[2];

	FT_CHECK(pipe(pfd) == 0 && pipe(ready) == 0, "pipe");
	child = fork();
	FT_CHECK(child >= 0, "fork");
	if (child == 0) {
		struct ft_msg cm;
		int code = 0;

		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		if (ripc_init() || write(ready[1], "i", 1) != 1 ||
		    read(pfd[0], &c, 1) != 1)
			_exit(3);
		usleep(200000); /* the parent is already sending */
		if (!ripc_register_service_id(late))
			code = 4;
		else if (ft_recv(late, &cm, 10000) ||
			 !ft_is_word(&cm, "late hi"))
			code = 5;
		else
			ft_msg_free(&cm, false);
		ripc_finalize(); /* _exit skips atexit: close the endpoint */
		_exit(code);
	}
	FT_CHECK(read(ready[0], &c, 1) == 1, "child did not initialise");
	FT_CHECK(write(pfd[1], "g", 1) == 1, "pipe");
	t0 = ft_now();
	/* One send: it waits (up to 0.6 s) for the ID to appear. */
	FT_EXPECT(ft_send_word(me, late, "late hi"), RIPC_OK);
	ft_log("late destination reached after %.3f s", ft_now() - t0);
	FT_CHECK(waitpid(child, &st, 0) == child, "waitpid");
	FT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);

	if (sniff >= 0) {
		const uint16_t ids[] = { me, ghost, late };
		unsigned ours = 0, tests = 0;

		/* Past the last repeat (300 ms) of an announcement. */
		usleep(400000);
		sniff_probe(sniff);
		usleep(100000);
		sniff_count(sniff, ids, 3, &ours, &tests);
		ft_log("on the group (loopback): %u datagrams about our IDs, "
		       "%u test datagrams",
		       ours, tests);
		FT_CHECK(tests == 1, "the test datagram: heard %u", tests);
		FT_CHECK(ours == 0,
			 "%u datagrams about our IDs on a loopback resolver",
			 ours);
		close(sniff);
	}
	FT_EXPECT(ft_send_word(me, srv, "quit"), RIPC_OK);
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_resolve", 1, 0);
	/* Set before the library reads it (at init). */
	setenv("RIPC_RESOLVE_TIMEOUT_MS", "600", 1);
	ft_lib_init();
	return ft.server ? server() : client();
}
