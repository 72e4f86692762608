/*
 * Shared code of the functional tests (fabtests style).
 *
 * Every test is one program that runs as server (no server argument) or
 * client (-a ID or positional argument: the server's service ID).  Options:
 *   -p prov   transport to use (sets RIPC_PROVIDER): shm, tcp, verbs
 *   -s addr   this host's IP address for tcp and the resolver
 *             (sets RIPC_TCP_ADDR; ports are ephemeral)
 *   -r file   server: write "<service id>\n" to file when ready
 *   -I n      iterations            -S n   size in bytes
 *   -v        verbose
 * Exit status: 0 pass, 77 not run (transport absent), other = fail.
 */
#ifndef RIPC_TEST_COMMON_H
#define RIPC_TEST_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include <ripc.h>

#define FT_SKIP 77

struct ft_opts {
	const char *prov;
	const char *ready_file;
	long iterations;
	long size;
	bool verbose;
	bool server;
	int server_id;     /* client: the server's service ID */
	int argc;          /* remaining positional arguments */
	char **argv;
	const char *extra; /* -x test-specific option */
};

extern struct ft_opts ft;
extern const char *ft_name;

/* Parse options; sets RIPC_PROVIDER.  Exits on bad usage. */
void ft_init(int argc, char **argv, const char *name, long def_iter,
	     long def_size);
/* Server: announce readiness with our service ID. */
void ft_ready(uint16_t id);
/* Initialise the library; exits 77 if the transport is absent. */
void ft_lib_init(void);

double ft_now(void);
void ft_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void ft_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void ft_fail_at(const char *file, int line, const char *cond,
		const char *fmt, ...)
	__attribute__((noreturn, format(printf, 4, 5)));
#define FT_CHECK(cond, ...)                                                  \
	do {                                                                 \
		if (!(cond))                                                 \
			ft_fail_at(__FILE__, __LINE__, #cond, __VA_ARGS__);  \
	} while (0)

/* Expect a libripc call to return `want` (0 = RIPC_OK). */
#define FT_EXPECT(call, want)                                                \
	do {                                                                 \
		int ft_r_ = (call);                                          \
		if (ft_r_ != (want))                                         \
			ft_fail("%s:%d: %s returned %d (%s), expected %d",   \
				__FILE__, __LINE__, #call, ft_r_,            \
				ripc_strerror(ft_r_), (int)(want));          \
	} while (0)

/* Deterministic pattern for (seed, offset) and its check. */
void ft_fill(void *buf, size_t len, uint64_t seed);
/* Returns the first bad offset, or (size_t)-1 if all match. */
size_t ft_verify(const void *buf, size_t len, uint64_t seed);
uint64_t ft_rand(uint64_t *state);

/* A received message, freed with ft_msg_free. */
struct ft_msg {
	uint16_t from;
	uint16_t ns, nl;
	void **si, **li;
	uint32_t *ss, *ls;
	int ret;
};
int ft_recv(uint16_t svc, struct ft_msg *m, int timeout_ms);
/* Receive and fail the test on error. */
void ft_recv_ok(uint16_t svc, struct ft_msg *m, int timeout_ms);
void ft_msg_free(struct ft_msg *m, bool free_long);

/* Remove the /dev/shm region a SIGKILLed libfabric shm endpoint leaves. */
void ft_shm_cleanup(pid_t pid);

/* Short send of one small control word ("go", "quit", ...). */
int ft_send_word(uint16_t src, uint16_t dst, const char *word);
bool ft_is_word(const struct ft_msg *m, const char *word);

/* A counter that the server and client processes of one test share, in
 * the file $RIPC_TEST_DIR/name (runripctests.sh sets the directory);
 * NULL when it is not set. */
volatile uint64_t *ft_shared_counter(const char *name);

#endif
