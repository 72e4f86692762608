#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

struct ft_opts ft;
const char *ft_name = "test";

static void usage(void)
{
	fprintf(stderr,
		"usage: %s [-p shm|tcp|verbs] [-s local_addr] [-r readyfile] "
		"[-I iterations] [-S size] [-x extra] [-v] "
		"[-a server_service_id | server_service_id]\n"
		"  -s  IP address of this host's tcp endpoint and resolver "
		"(sets RIPC_TCP_ADDR)\n"
		"  -a  client: the server's service ID (as the positional "
		"argument)\n",
		ft_name);
	exit(2);
}

void ft_init(int argc, char **argv, const char *name, long def_iter,
	     long def_size)
{
	const char *server_arg = NULL;
	int c;

	ft_name = name;
	ft.iterations = def_iter;
	ft.size = def_size;
	while ((c = getopt(argc, argv, "p:s:a:r:I:S:x:vh")) != -1) {
		switch (c) {
		case 'p':
			ft.prov = optarg;
			break;
		case 's':
			/* fabtests' source address: where this side listens
			 * and multicasts its resolver traffic. */
			setenv("RIPC_TCP_ADDR", optarg, 1);
			break;
		case 'a':
			server_arg = optarg;
			break;
		case 'r':
			ft.ready_file = optarg;
			break;
		case 'I':
			ft.iterations = atol(optarg);
			break;
		case 'S':
			ft.size = atol(optarg);
			break;
		case 'x':
			ft.extra = optarg;
			break;
		case 'v':
			ft.verbose = true;
			break;
		default:
			usage();
		}
	}
	ft.argc = argc - optind;
	ft.argv = argv + optind;
	if (!server_arg && ft.argc > 0) {
		server_arg = ft.argv[0];
		ft.argc--;
		ft.argv++;
	}
	ft.server = server_arg == NULL;
	if (!ft.server) {
		char *end;
		long id = strtol(server_arg, &end, 10);

		if (*server_arg == '\0' || *end != '\0' || id < 0 || id > 65534)
			usage();
		ft.server_id = (int)id;
	}
	if (ft.prov)
		setenv("RIPC_PROVIDER", ft.prov, 1);
	setvbuf(stdout, NULL, _IOLBF, 0);
}

void ft_lib_init(void)
{
	int r = ripc_init();

	if (r == RIPC_ENOPROVIDER) {
		printf("%s: transport %s not available here: skipped\n",
		       ft_name, ft.prov ? ft.prov : "(any)");
		exit(FT_SKIP);
	}
	if (r)
		ft_fail("ripc_init: %s", ripc_strerror(r));
}

void ft_ready(uint16_t id)
{
	if (ft.ready_file) {
		char tmp[4096];
		FILE *f;

		/* Write then rename, so the runner never reads half. */
		snprintf(tmp, sizeof(tmp), "%s.tmp", ft.ready_file);
		f = fopen(tmp, "w");
		if (!f || fprintf(f, "%u\n", id) < 0 || fclose(f) ||
		    rename(tmp, ft.ready_file))
			ft_fail("cannot write ready file %s", ft.ready_file);
	}
	ft_log("server ready: service %u", id);
}

double ft_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void ft_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s[%s] FAIL: ", ft_name, ft.server ? "server" : "client");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void ft_fail_at(const char *file, int line, const char *cond,
		const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s[%s] FAIL: %s:%d: %s: ", ft_name,
		ft.server ? "server" : "client", file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void ft_log(const char *fmt, ...)
{
	va_list ap;

	if (!ft.verbose)
		return;
	printf("%s[%s] ", ft_name, ft.server ? "server" : "client");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

uint64_t ft_rand(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint8_t pat(uint64_t seed, size_t off)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + (off >> 3);

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 32;
	return (uint8_t)(x >> (8 * (off & 7)));
}

void ft_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = pat(seed, i);
}

size_t ft_verify(const void *buf, size_t len, uint64_t seed)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != pat(seed, i))
			return i;
	return (size_t)-1;
}

int ft_recv(uint16_t svc, struct ft_msg *m, int timeout_ms)
{
	memset(m, 0, sizeof(*m));
	m->ret = ripc_receive_timeout(svc, &m->from, &m->si, &m->ss, &m->ns,
				      &m->li, &m->ls, &m->nl, timeout_ms);
	return m->ret;
}

void ft_recv_ok(uint16_t svc, struct ft_msg *m, int timeout_ms)
{
	int r = ft_recv(svc, m, timeout_ms);

	if (r)
		ft_fail("receive on %u: %s", svc, ripc_strerror(r));
}

void ft_msg_free(struct ft_msg *m, bool free_long)
{
	if (m->ns)
		ripc_buf_free(m->si[0]);
	if (free_long)
		for (unsigned i = 0; i < m->nl; i++)
			if (m->li[i])
				ripc_buf_free(m->li[i]);
	free(m->si);
	free(m->ss);
	free(m->li);
	free(m->ls);
	memset(m, 0, sizeof(*m));
}

int ft_send_word(uint16_t src, uint16_t dst, const char *word)
{
	void *b[1] = { (void *)word };
	uint32_t l[1] = { (uint32_t)strlen(word) + 1 };

	return ripc_send_short(src, dst, b, l, 1, NULL, NULL, 0);
}

bool ft_is_word(const struct ft_msg *m, const char *word)
{
	return m->ns == 1 && m->ss[0] == strlen(word) + 1 &&
	       !memcmp(m->si[0], word, m->ss[0]);
}

void ft_shm_cleanup(pid_t pid)
{
	char prefix[32];
	struct dirent *d;
	DIR *dir = opendir("/dev/shm");

	snprintf(prefix, sizeof(prefix), "%d:", (int)pid);
	while (dir && (d = readdir(dir))) {
		if (!strncmp(d->d_name, prefix, strlen(prefix))) {
			char path[300];

			snprintf(path, sizeof(path), "/dev/shm/%s", d->d_name);
			unlink(path);
		}
	}
	if (dir)
		closedir(dir);
}

volatile uint64_t *ft_shared_counter(const char *name)
{
	const char *dir = getenv("RIPC_TEST_DIR");
	char path[4096];
	void *p;
	int fd;

	if (!dir)
		return NULL;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	FT_CHECK(fd >= 0 && ftruncate(fd, 4096) == 0, "counter file %s", path);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	FT_CHECK(p != MAP_FAILED, "mmap counter %s", path);
	return p;
}
