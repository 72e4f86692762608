/*
 * ripc_idle - what an idle libripc process costs (issue 12): CPU time and
 * wake-ups of a process that has the library up and one service
 * registered, and nothing to do.
 *
 *   ripc_idle -x recv  [-p shm|tcp] -t 20     blocked in ripc_receive()
 *   ripc_idle -x sleep [-p shm|tcp] -t 20     in sleep() after ripc_init()
 *   ripc_idle -x tcp -t 20                    kernel TCP reference: blocked
 *                                             in recv() on a connected
 *                                             loopback socket
 *
 * Without -p the library opens every transport it finds (RIPC_PROVIDER
 * unset), the transport column then says "all".
 *
 * The program forks the idle process (the child) and measures it from the
 * outside, since a process blocked in ripc_receive cannot time itself: the
 * child sets itself up and says so over a pipe; the parent waits 0.5 s
 * for start-up work to settle, then reads utime + stime (all threads) of
 * /proc/<child>/stat and the context switches of every thread of
 * /proc/<child>/task/<tid>/status, sleeps -t seconds, reads them again,
 * and ends the child by pid (SIGTERM, SIGKILL after 2 s) and removes the
 * /dev/shm files it leaves (a killed process cannot close its endpoints).
 * The parent itself never touches the library.  Printed:
 *
 *   libripc_recv shm 0 idle_cpu_pct 0.35 pct       CPU time / wall time
 *   libripc_recv shm 0 idle_wakeups 1000.00 per_s  context switches of all
 *                                                  threads per second
 *
 * First column: -N, default libripc_recv / libripc_sleep / tcp_socket.
 * CPU time comes in clock ticks (usually 10 ms): over 20 s the resolution
 * is 0.05 %.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"

/* The child: set up, tell the parent, then do nothing until killed. */
static void child(int fd)
{
	char ok = 'k';

	if (!strcmp(bo.mode, "tcp")) {
		struct sockaddr_in sa = { .sin_family = AF_INET };
		socklen_t len = sizeof(sa);
		int l = socket(AF_INET, SOCK_STREAM, 0), c, a;
		char b;

		/* A connected loopback pair, ephemeral port. */
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (l < 0 || bind(l, (void *)&sa, sizeof(sa)) || listen(l, 1) ||
		    getsockname(l, (void *)&sa, &len))
			bench_die("tcp listen: %s", strerror(errno));
		c = socket(AF_INET, SOCK_STREAM, 0);
		if (c < 0 || connect(c, (void *)&sa, sizeof(sa)))
			bench_die("tcp connect: %s", strerror(errno));
		a = accept(l, NULL, NULL);
		if (a < 0)
			bench_die("tcp accept: %s", strerror(errno));
		if (write(fd, &ok, 1) != 1)
			_exit(1);
		close(fd);
		while (recv(a, &b, 1, 0) < 0 && errno == EINTR)
			;
		_exit(0);
	}

	bench_lib_init();
	uint16_t me = ripc_register_random_service_id();

	if (me == RIPC_INVALID_SERVICE_ID)
		bench_die("register: %s", ripc_strerror(ripc_last_error()));
	if (write(fd, &ok, 1) != 1)
		_exit(1);
	close(fd);
	if (!strcmp(bo.mode, "recv")) {
		void **si = NULL, **li = NULL;
		uint32_t *ss = NULL, *ls = NULL;
		uint16_t ns = 0, nl = 0, from;

		/* Nobody sends: this returns only on an error. */
		uint8_t r = ripc_receive(me, &from, &si, &ss, &ns, &li, &ls,
					 &nl);

		bench_die("receive returned: %s", ripc_strerror(r));
	}
	for (;;)
		sleep(3600);
}

/* utime + stime of pid in ticks; -1 if it is gone. */
static long long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* comm may hold spaces: fields restart after the last ')'. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2,
			 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &ut, &st) != 2)
		return -1;
	return (long long)(ut + st);
}

/* Context switches (voluntary + not) of all threads of pid. */
static long long ctx_switches(pid_t pid)
{
	char path[300], line[256];
	struct dirent *d;
	long long sum = 0, v;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/status",
			 (int)pid, d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "voluntary_ctxt_switches: %lld", &v) ==
				    1 ||
			    sscanf(line, "nonvoluntary_ctxt_switches: %lld",
				   &v) == 1)
				sum += v;
		fclose(f);
	}
	closedir(dir);
	return sum;
}

static void stop(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	for (int i = 0; i < 200; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			goto reaped;
		usleep(10000);
	}
	bench_log("idle child %d ignores SIGTERM: killing it", (int)pid);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
reaped:
	bench_shm_cleanup(pid);
}

int main(int argc, char **argv)
{
	const char *sys;
	long long c0, c1, w0, w1;
	double t0, t1, hz = (double)sysconf(_SC_CLK_TCK);
	struct pollfd pfd;
	char ok;
	int p[2];
	pid_t pid;

	bo = (struct bench_opts){
		.standalone = true,
		.mode = "recv",
		.iters = 1,
		.max_sec = 20,
		.time_limit = 300,
		.window = 1,
	};
	bench_parse(argc, argv,
		    "  -x mode   recv (blocked in ripc_receive), sleep (in "
		    "sleep()), tcp (kernel TCP, blocked in recv) [recv]\n"
		    "  -t sec    idle time measured [20]\n");
	if (strcmp(bo.mode, "recv") && strcmp(bo.mode, "sleep") &&
	    strcmp(bo.mode, "tcp"))
		bench_die("-x takes recv, sleep or tcp");
	if (!strcmp(bo.mode, "tcp"))
		sys = "tcp_socket", bo.label = "tcp";
	else
		sys = !strcmp(bo.mode, "recv") ? "libripc_recv"
					       : "libripc_sleep";
	if (!bo.prov && strcmp(bo.mode, "tcp"))
		bo.label = "all";
	if (bo.system)
		sys = bo.system;
	if ((unsigned)bo.time_limit < bo.max_sec + 10)
		bench_die("-T must leave room for -t");
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (pipe(p))
		bench_die("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		close(p[0]);
		child(p[1]);
		_exit(0);
	}
	bench_note_pid(pid);
	close(p[1]);
	pfd = (struct pollfd){ .fd = p[0], .events = POLLIN };
	if (poll(&pfd, 1, 30000) != 1 || read(p[0], &ok, 1) != 1) {
		stop(pid);
		bench_die("the idle process did not start");
	}
	close(p[0]);
	usleep(500000);
	c0 = cpu_ticks(pid);
	w0 = ctx_switches(pid);
	t0 = bench_now();
	usleep((useconds_t)(bo.max_sec * 1e6));
	c1 = cpu_ticks(pid);
	w1 = ctx_switches(pid);
	t1 = bench_now();
	stop(pid);
	if (c0 < 0 || c1 < 0)
		bench_die("the idle process died");
	bench_emit(sys, bo.label, 0, "idle_cpu_pct",
		   100.0 * (double)(c1 - c0) / hz / (t1 - t0), "pct");
	bench_emit(sys, bo.label, 0, "idle_wakeups",
		   (double)(w1 - w0) / (t1 - t0), "per_s");
	return 0;
}
