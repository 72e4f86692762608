#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "env.h"
#include "log.h"

/* clang-format off */
const struct ripc_env_var ripc__env_table[RIPC_ENV_COUNT] = {
	[RIPC_ENV_PROVIDER] = { "RIPC_PROVIDER", "",
		"Transports to open, comma separated (shm, tcp, verbs). Empty: all "
		"that work here; peers on this host use shm, others verbs, else tcp." },
	[RIPC_ENV_LOG_LEVEL] = { "RIPC_LOG_LEVEL", "warn",
		"Log level: none, error, warn, info, debug." },
	[RIPC_ENV_REGISTRY] = { "RIPC_REGISTRY", "",
		"Path of the host-local service registry. Empty: "
		"/dev/shm/ripc4-<euid>-<network namespace inode>.reg (4 is the file's "
		"layout version)." },
	[RIPC_ENV_TCP_ADDR] = { "RIPC_TCP_ADDR", "127.0.0.1",
		"Local IP address the tcp transport binds to." },
	[RIPC_ENV_TCP_NATIVE] = { "RIPC_TCP_NATIVE", "0",
		"1: over libfabric 1.17, the tcp transport uses its native RDM "
		"provider net (what 1.18 and later call tcp) instead of "
		"tcp;ofi_rxm: faster, but it cannot talk to processes on "
		"tcp;ofi_rxm, so every process must set the same. From "
		"libfabric 1.18 on, always native." },
	[RIPC_ENV_RESOLVE_TIMEOUT_MS] = { "RIPC_RESOLVE_TIMEOUT_MS", "3000",
		"How long a send waits for an unregistered destination to appear." },
	[RIPC_ENV_SEND_TIMEOUT_MS] = { "RIPC_SEND_TIMEOUT_MS", "5000",
		"How long a send may wait for transport resources or an "
		"unreachable peer before it fails." },
	[RIPC_ENV_LONG_TIMEOUT_MS] = { "RIPC_LONG_TIMEOUT_MS", "30000",
		"How long long-send buffers stay exposed without the receiver's "
		"done message before they are revoked." },
	[RIPC_ENV_PULL_TIMEOUT_MS] = { "RIPC_PULL_TIMEOUT_MS", "30000",
		"How long a receiver waits for the pull of one long message." },
	[RIPC_ENV_PROGRESS] = { "RIPC_PROGRESS", "thread",
		"thread: a library thread drives transfers; manual: only calls "
		"into the library do (see ripc_progress(3))." },
	[RIPC_ENV_SPIN_US] = { "RIPC_SPIN_US", "200",
		"Microseconds a blocking receive polls before it sleeps, "
		"counting time spent waiting, not in passes that worked (see "
		"ripc(7))." },
	[RIPC_ENV_SPIN_PULL_US] = { "RIPC_SPIN_PULL_US", "20000",
		"Microseconds a blocking receive may keep polling, beyond "
		"RIPC_SPIN_US, while a long message for its service is being "
		"pulled (0: never beyond RIPC_SPIN_US)." },
	[RIPC_ENV_POLL_INTERVAL_US] = { "RIPC_POLL_INTERVAL_US", "1000",
		"Progress thread's polling period for shm when it has no doorbell "
		"(RIPC_DOORBELL=0, or none could be made), and while an "
		"application thread was active within the last millisecond." },
	[RIPC_ENV_BUSY_POLL_US] = { "RIPC_BUSY_POLL_US", "20",
		"Progress thread's polling period for transports without a wait "
		"file descriptor (shm) while a transfer is under way; also how "
		"long a waiting call sleeps while a transport's fi_trywait "
		"fails." },
	[RIPC_ENV_RX_DEPTH] = { "RIPC_RX_DEPTH", "32",
		"Receive buffers kept posted per transport." },
	[RIPC_ENV_QUEUE_MAX] = { "RIPC_QUEUE_MAX", "1024",
		"Messages queued per service before further ones are dropped." },
	[RIPC_ENV_SHM] = { "RIPC_SHM", "1",
		"0: never use shm; co-located peers are reached over tcp (for "
		"peers that are not trusted, see ripc(7) SECURITY)." },
	[RIPC_ENV_SHM_CHECKED] = { "RIPC_SHM_CHECKED", "0",
		"1: make shm verify RMA keys (slower; a bad key then wedges the "
		"pair, see ripc(7))." },
	[RIPC_ENV_SHM_PEERS] = { "RIPC_SHM_PEERS", "160",
		"Processes a process may talk to over shm at once (libfabric 1.17's "
		"shm endpoint holds 256); pairs beyond use tcp. At most 224." },
	[RIPC_ENV_DOORBELL] = { "RIPC_DOORBELL", "1",
		"0: no doorbell; the progress thread polls shm every "
		"RIPC_POLL_INTERVAL_US instead of sleeping until a peer on this "
		"host rings." },
	[RIPC_ENV_DIRECT_WAKE] = { "RIPC_DIRECT_WAKE", "1",
		"0: a receive that sleeps is woken by the progress thread; 1: it "
		"sleeps on the transports and the doorbell itself (one wake-up "
		"per message instead of two)." },
	[RIPC_ENV_PULL_MEM_MAX] = { "RIPC_PULL_MEM_MAX", "4g",
		"Bytes of library buffers that pulls in flight may allocate." },
	[RIPC_ENV_READ_CHUNK] = { "RIPC_READ_CHUNK", "",
		"Largest single RDMA read a pull posts (and RDMA write of a "
		"reply), on every transport. Empty: each transport's own, "
		"tcp 512k, the others 8m." },
	[RIPC_ENV_DONE_DELAY_US] = { "RIPC_DONE_DELAY_US", "1000",
		"Microseconds a finished pull's done message may wait to ride in "
		"the receiver's next short message to the sender (its answer) "
		"instead of going alone; sent alone at the latest then, or when "
		"the receiver next calls ripc_receive (0: always at once, at "
		"most 1000000)." },
	[RIPC_ENV_FRAG_MAX] = { "RIPC_FRAG_MAX", "auto",
		"Largest message (header included) sent to a peer on this host "
		"as a train of 4096-byte shm injects instead of one send, which "
		"libfabric's shm moves by CMA (see ripc(7) TRANSPORTS); 0: "
		"never; auto: 8144 on Intel CPUs, 20k on others." },
	[RIPC_ENV_RETURN_TIMEOUT_MS] = { "RIPC_RETURN_TIMEOUT_MS", "30000",
		"How long offered return buffers stay exposed if unused." },
	[RIPC_ENV_RESOLVER] = { "RIPC_RESOLVER", "1",
		"0: resolve only through the host registry (no UDP multicast)." },
	[RIPC_ENV_RESOLVER_GROUP] = { "RIPC_RESOLVER_GROUP", "239.255.82.73",
		"IPv4 multicast group of the resolver." },
	[RIPC_ENV_RESOLVER_PORT] = { "RIPC_RESOLVER_PORT", "47473",
		"UDP port of the resolver's multicast group." },
	[RIPC_ENV_RESOLVER_ADDR] = { "RIPC_RESOLVER_ADDR", "",
		"Address of the interface the resolver uses. Empty: "
		"RIPC_TCP_ADDR." },
	[RIPC_ENV_RESOLVER_TTL_MS] = { "RIPC_RESOLVER_TTL_MS", "5000",
		"Age after which a cached remote resolution is refreshed; "
		"unanswered, it is dropped at twice this age." },
	[RIPC_ENV_RESOLVER_PROBE_MS] = { "RIPC_RESOLVER_PROBE_MS", "20",
		"Without a directory: how long a registration listens for "
		"objections to its multicast probe for the ID (duplicate "
		"detection across hosts); 0: no probe." },
	[RIPC_ENV_DIRECTORY] = { "RIPC_DIRECTORY", "",
		"Service directory for resolution across hosts, e.g. "
		"zk://h1:2181,h2:2181,h3:2181/chroot (ZooKeeper). Empty: none. "
		"When set, multicast resolution is off unless RIPC_RESOLVER=1 "
		"is set explicitly." },
	[RIPC_ENV_DIRECTORY_SESSION_MS] = { "RIPC_DIRECTORY_SESSION_MS", "4000",
		"Directory session timeout: a holder that dies on another host "
		"is replaced after about this long (the servers may clamp it)." },
	[RIPC_ENV_DIRECTORY_TIMEOUT_MS] = { "RIPC_DIRECTORY_TIMEOUT_MS", "5000",
		"How long a registration waits for the directory's answer "
		"before it fails with RIPC_ETIMEDOUT." },
	[RIPC_ENV_TEST_MR_BITS] = { "RIPC_TEST_MR_BITS", "",
		"Testing: behave as if the provider required these memory "
		"registration modes (local,prov_key,key32)." },
	[RIPC_ENV_TEST_PEERS_MAX] = { "RIPC_TEST_PEERS_MAX", "4096",
		"Testing: the size of the peer table (remote processes known "
		"at once), 16 to 4096." },
	[RIPC_ENV_TEST_SPIN_END_US] = { "RIPC_TEST_SPIN_END_US", "0",
		"Testing: pause this long (0 to 1000000) between a busy-poll's "
		"last look at the transports and its end, while peers on this "
		"host do not ring." },
	[RIPC_ENV_LOCALITY] = { "RIPC_LOCALITY", "1",
		"0: do not place library memory and the progress thread on the "
		"NUMA node nearest the NIC; leave them to the kernel." },
	[RIPC_ENV_NUMA_NODE] = { "RIPC_NUMA_NODE", "",
		"NUMA node (OS number) for library memory and the progress "
		"thread. Empty: the node nearest the NIC in use." },
	[RIPC_ENV_TOPOLOGY] = { "RIPC_TOPOLOGY", "",
		"Testing: an hwloc XML file (a path with a '/') or synthetic "
		"description to decide placement on instead of this machine; "
		"nothing is bound then." },
};
/* clang-format on */

const char *ripc__env_str(enum ripc_env_id id)
{
	const char *v = getenv(ripc__env_table[id].name);

	return (v && *v) ? v : ripc__env_table[id].def;
}

static int parse_int(const char *s, int64_t *out)
{
	char *end;
	long long v;

	long long mult = 1;

	errno = 0;
	v = strtoll(s, &end, 10); /* decimal: "010" is ten */
	if (errno || end == s)
		return -1;
	switch (tolower((unsigned char)*end)) {
	case 'k':
		mult = 1024LL, end++;
		break;
	case 'm':
		mult = 1024LL * 1024, end++;
		break;
	case 'g':
		mult = 1024LL * 1024 * 1024, end++;
		break;
	}
	if (*end || v > LLONG_MAX / mult || v < LLONG_MIN / mult)
		return -1; /* trailing junk, or it would overflow */
	v *= mult;
	*out = v;
	return 0;
}

int64_t ripc__env_int(enum ripc_env_id id)
{
	const char *v = ripc__env_str(id), *def = ripc__env_table[id].def;
	int64_t out = 0;

	if (!strcmp(def, "auto") && !strcasecmp(v, "auto"))
		return RIPC_INT_AUTO;
	if (parse_int(v, &out) < 0) {
		ripc__log(RIPC_LOG_WARN, "ignoring %s=%s: not a number",
			  ripc__env_table[id].name, v);
		if (parse_int(def, &out) < 0)
			return RIPC_INT_AUTO;
	}
	return out;
}

bool ripc__env_is_set(enum ripc_env_id id)
{
	const char *v = getenv(ripc__env_table[id].name);

	return v && *v;
}

bool ripc__env_bool(enum ripc_env_id id)
{
	const char *v = ripc__env_str(id);

	return !(!strcmp(v, "0") || !strcasecmp(v, "no") ||
		 !strcasecmp(v, "off") || !strcasecmp(v, "false") || !*v);
}

/* The log level from RIPC_LOG_LEVEL; a word that names no level is
 * reported (naming it) and the default kept. */
void ripc__env_load_log_level(void)
{
	const char *v = ripc__env_str(RIPC_ENV_LOG_LEVEL);
	int level = ripc__log_level_of(v);

	if (level < 0) {
		level = ripc__log_level_of(ripc__env_table[RIPC_ENV_LOG_LEVEL].def);
		ripc__log_level = level;
		ripc__log(RIPC_LOG_WARN,
			  "RIPC_LOG_LEVEL=\"%s\": unknown level (none, error, "
			  "warn, info, debug); using %s",
			  v, ripc__env_table[RIPC_ENV_LOG_LEVEL].def);
		return;
	}
	ripc__log_level = level;
}
