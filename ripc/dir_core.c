/*
 * Resolution across hosts, the core's side (see dir_core.h): opening the
 * directory for this process, registration (a directory claim, or a
 * duplicate probe over multicast), the directory's part of a lookup, and
 * the diagnostics that go with them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dir_core.h"
#include "directory.h"
#include "resolver.h"
#include "ripc_int.h"

#define DIR_MEMBERS_MAX 256 /* as the core's routes (peer.c MCAST_MAX) */

static uint64_t claim_timeout_ns;
static uint8_t busy[(RIPC_MAX_SERVICE_ID + 8) / 8];
static bool loopback_warned;
/* Lookup answers, used under the library lock only. */
static struct ripc_reg_proc_info dbuf[DIR_MEMBERS_MAX];

static bool holder_alive(const struct ripc_reg_proc_info *h,
			 uint64_t starttime)
{
	/* Called by the engine's threads: /proc only, no library lock. */
	return ripc__proc_alive(h->pid, starttime);
}

static bool addr_is_loopback(const char *a)
{
	struct in_addr v4;
	struct in6_addr v6;

	if (inet_pton(AF_INET, a, &v4) == 1)
		return (ntohl(v4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, a, &v6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&v6);
	return !strcmp(a, "localhost");
}

/* Resolved across hosts but reachable only from this one: every remote
 * sender would find this process and then fail to reach it. */
static void check_reachable(void)
{
	const char *tcp = ripc__env_str(RIPC_ENV_TCP_ADDR);
	bool across = ripc__dir_enabled() ||
		      (ripc__resolver_enabled() && !ripc__resolver_loopback());
	bool remote_tp = CTX->tp[RIPC_PROV_VERBS].open ||
			 (CTX->tp[RIPC_PROV_TCP].open && !addr_is_loopback(tcp));
	char how[600];

	if (!across || remote_tp || loopback_warned)
		return;
	loopback_warned = true;
	if (ripc__dir_enabled())
		snprintf(how, sizeof(how), "the directory %s", ripc__dir_url());
	else
		ripc__resolver_describe(how, sizeof(how));
	ripc__log(RIPC_LOG_WARN,
		  "this process is resolved across hosts (%s) but reachable "
		  "only from this host (%s): set RIPC_TCP_ADDR to an address "
		  "the other hosts can reach",
		  how,
		  CTX->tp[RIPC_PROV_TCP].open ? "tcp on a loopback address"
					      : "tcp not open");
}

int ripc__dir_core_open(const struct ripc_reg_proc_info *self)
{
	const char *url = ripc__env_str(RIPC_ENV_DIRECTORY);
	struct ripc_dir_cfg cfg;
	int64_t v;
	int ret;

	memset(busy, 0, sizeof(busy)); /* a forked child starts afresh */
	v = ripc__env_int(RIPC_ENV_DIRECTORY_TIMEOUT_MS);
	claim_timeout_ns = ripc__ms_ns(v < 1 ? 1 : v);
	if (*url) {
		memset(&cfg, 0, sizeof(cfg));
		v = ripc__env_int(RIPC_ENV_DIRECTORY_SESSION_MS);
		cfg.session_timeout_ms = v < 500 ? 500 : v > 600000 ? 600000
								   : (unsigned)v;
		cfg.self = *self;
		cfg.self_starttime = ripc__proc_starttime(getpid());
		cfg.holder_alive = holder_alive;
		ret = ripc__dir_open(url, &cfg);
		if (ret)
			return ret == -ENOTSUP ? RIPC_ENOTSUP
			       : ret == -ENOMEM ? RIPC_ENOMEM
						: RIPC_EINVAL;
		ripc__log(RIPC_LOG_INFO, "directory %s", url);
	}
	check_reachable();
	return RIPC_OK;
}

bool ripc__dir_core_busy(uint16_t id)
{
	return busy[id / 8] & (1u << (id % 8));
}

void ripc__dir_core_set_busy(uint16_t id, bool on)
{
	if (on)
		busy[id / 8] |= (uint8_t)(1u << (id % 8));
	else
		busy[id / 8] &= (uint8_t) ~(1u << (id % 8));
}

int ripc__dir_core_how(void)
{
	if (ripc__dir_enabled())
		return DIR_CLAIM;
	return ripc__resolver_probe_ns() ? DIR_PROBE : DIR_NONE;
}

uint64_t ripc__dir_core_claim_timeout_ns(void)
{
	return claim_timeout_ns;
}

int ripc__dir_core_probe_result(uint16_t id, int ret,
				const struct ripc_reg_proc_info *by)
{
	if (ret != -EEXIST)
		return RIPC_OK;
	ripc__log(RIPC_LOG_INFO,
		  "service %u: process %d of host %016llx objected to its "
		  "registration",
		  id, (int)by->pid, (unsigned long long)by->host_id);
	return RIPC_EINUSE;
}

int ripc__dir_core_claim_result(uint16_t id, int ret)
{
	char what[600];

	switch (ret) {
	case 0:
		return RIPC_OK;
	case -EEXIST:
		return RIPC_EINUSE;
	case -ETIMEDOUT:
	case -ENOTCONN:
	case -EAGAIN:
		ripc__dir_describe(what, sizeof(what));
		ripc__log_rl(RIPC_LOG_WARN,
			     "registration of service %u: no answer from the "
			     "directory within %llu ms (%s)",
			     id, (unsigned long long)(claim_timeout_ns / 1000000),
			     what);
		return RIPC_ETIMEDOUT;
	case -ESHUTDOWN:
		return RIPC_ESHUTDOWN;
	default:
		return RIPC_EREGISTRY;
	}
}

int ripc__dir_core_lookup(uint16_t id, struct ripc_reg_proc_info *remote,
			  int n, int max, bool *mcast)
{
	bool dmcast = false;
	int nd, k = 0;

	if (!ripc__dir_enabled())
		return n;
	if (max > DIR_MEMBERS_MAX)
		max = DIR_MEMBERS_MAX;
	nd = ripc__dir_lookup(id, dbuf, max, &dmcast);
	/* -EAGAIN: asked, the answer wakes ripc__resolver_wait; -ENOTCONN:
	 * nothing cached and the directory unreachable: the send waits out
	 * its resolve timeout and says so (ripc__dir_core_lookup_failed). */
	for (int i = 0; i < nd; i++)
		if (dbuf[i].host_id != CTX->host_id)
			dbuf[k++] = dbuf[i];
	if (k == 0)
		return n;
	if (!dmcast) {
		remote[0] = dbuf[0];
		*mcast = false;
		return 1;
	}
	if (!*mcast)
		n = 0;
	for (int i = 0; i < k && n < max; i++) {
		bool dup = false;

		for (int j = 0; j < n && !dup; j++)
			dup = remote[j].incarnation == dbuf[i].incarnation;
		if (!dup)
			remote[n++] = dbuf[i];
	}
	*mcast = true;
	return n;
}

void ripc__dir_core_lookup_failed(uint16_t id, uint64_t waited_ns)
{
	char dir[600], res[200];

	if (!ripc__dir_enabled() && !ripc__resolver_enabled())
		return; /* one host: the registry says it all */
	ripc__dir_describe(dir, sizeof(dir));
	ripc__resolver_describe(res, sizeof(res));
	ripc__log_rl(RIPC_LOG_WARN,
		     "service %u not found within %llu ms; asked the host "
		     "registry %s, the directory (%s) and the resolver (%s)",
		     id, (unsigned long long)(waited_ns / 1000000),
		     ripc__reg_path(), dir, res);
}
