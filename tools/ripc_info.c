/*
 * ripc_info - what libripc sees on this host, like fi_info for libfabric.
 *
 *   ripc_info            versions, transports (usable here or why not),
 *                        limits
 *   ripc_info -e         every RIPC_* variable: default, value, help
 *   ripc_info -s         services registered on this host
 *   ripc_info -t         hardware topology and placement (hwloc)
 *   ripc_info -c         counters of every libripc process on this host
 *   ripc_info -a         all of the above
 *
 * Output is for people and for grep: every line is "key: value", keys are
 * dotted words and never change for a given fact; facts that repeat
 * (services, NUMA nodes, NICs) are one line each, "kind: name field=value
 * ...".  The man page ripc_info(1) lists the keys.
 *
 * The tool links the core library statically (libripc_core.la) to reach
 * its internals: the table of variables, the transports' ops table, the
 * registry and the locality module.  It does not initialise the library:
 * it opens each transport on its own, so that it can tell why one fails,
 * and reads the registry without publishing itself in it.
 */
#include <dirent.h>
#include <poll.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "directory.h"
#include "locality.h"
#include "ripc_int.h"

/* ---- output --------------------------------------------------------- */

/* "key: value", without a trailing blank when the value is empty. */
static void kv(const char *key, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void kv(const char *key, const char *fmt, ...)
{
	char val[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(val, sizeof(val), fmt, ap);
	va_end(ap);
	printf("%s:%s%s\n", key, *val ? " " : "", val);
}

static const char *yesno(bool b)
{
	return b ? "yes" : "no";
}

/* ---- transports ----------------------------------------------------- */

struct tp_probe {
	bool selected;       /* RIPC_PROVIDER / RIPC_SHM allow it */
	char why_not[160];   /* why it is not selected */
	int err;             /* 0: opened; negative errno */
	struct ripc_prov_attr attr;
};

static struct tp_probe probe[RIPC_PROV_MAX];
static bool probed;

/* Is `name` in the comma-separated RIPC_PROVIDER list (empty: all)?  The
 * same rule as the library's (ripc/init.c). */
static bool provider_listed(const char *name)
{
	const char *list = ripc__env_str(RIPC_ENV_PROVIDER);
	size_t n = strlen(name);

	if (!*list)
		return true;
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len == n && !strncmp(p, name, n))
			return true;
		if (!e)
			break;
		p = e + 1;
	}
	return false;
}

static unsigned test_mr_bits(void)
{
	const char *v = ripc__env_str(RIPC_ENV_TEST_MR_BITS);

	return (strstr(v, "local") ? RIPC_MRF_LOCAL : 0) |
	       (strstr(v, "prov_key") ? RIPC_MRF_PROV_KEY : 0) |
	       (strstr(v, "key32") ? RIPC_MRF_KEY32 : 0);
}

/* Open every transport once, as the library would, and close it again. */
static void probe_transports(void)
{
	struct ripc_prov_opts opts = {
		.src_addr = ripc__env_str(RIPC_ENV_TCP_ADDR),
		.shm_checked = ripc__env_bool(RIPC_ENV_SHM_CHECKED),
		.tcp_native = ripc__env_bool(RIPC_ENV_TCP_NATIVE),
		.force_mr_bits = test_mr_bits(),
	};

	if (probed)
		return;
	probed = true;
	for (int i = 0; i < RIPC_PROV_MAX; i++) {
		struct tp_probe *t = &probe[i];
		struct ripc_prov *p = NULL;

		t->selected = true;
		if (!provider_listed(ripc__prov_names[i])) {
			t->selected = false;
			snprintf(t->why_not, sizeof(t->why_not),
				 "not listed in RIPC_PROVIDER=%s",
				 ripc__env_str(RIPC_ENV_PROVIDER));
		} else if (i == RIPC_PROV_SHM &&
			   !ripc__env_bool(RIPC_ENV_SHM)) {
			t->selected = false;
			snprintf(t->why_not, sizeof(t->why_not),
				 "disabled by RIPC_SHM=%s",
				 ripc__env_str(RIPC_ENV_SHM));
		}
		t->err = ripc__prov_table[i]->open(&opts, &p, &t->attr);
		if (!t->err)
			ripc__prov_table[i]->close(p);
	}
	/* As ripc_init does: shm without CMA gives way to a transport that
	 * reaches this host's processes too (ripc(7), TRANSPORTS). */
	if (!probe[RIPC_PROV_SHM].err && probe[RIPC_PROV_SHM].selected &&
	    probe[RIPC_PROV_SHM].attr.reads_need_peer) {
		for (int i = 0; i < RIPC_PROV_MAX; i++) {
			if (probe[i].err || !probe[i].selected ||
			    probe[i].attr.same_host_only)
				continue;
			probe[RIPC_PROV_SHM].selected = false;
			snprintf(probe[RIPC_PROV_SHM].why_not,
				 sizeof(probe[RIPC_PROV_SHM].why_not),
				 "no CMA here: peers on this host use %s",
				 ripc__prov_names[i]);
			break;
		}
	}
}

/* Number of entries in a sysfs class directory, -1 if it is absent. */
static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) && n < 1000)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Why transport i could not be opened, in words. */
static void unavailable_reason(int i, int err, char *out, size_t len)
{
	if (err != -ENODEV) {
		snprintf(out, len, "libfabric setup failed: %s",
			 strerror(-err));
		return;
	}
	switch (i) {
	case RIPC_PROV_VERBS:
		if (count_dir("/sys/class/infiniband") <= 0)
			snprintf(out, len,
				 "no RDMA device (/sys/class/infiniband is "
				 "empty or absent)");
		else
			snprintf(out, len,
				 "libfabric's verbs provider offers no "
				 "reliable-datagram endpoint on the RDMA "
				 "devices here (FI_LOG_LEVEL=info tells why)");
		break;
	case RIPC_PROV_TCP:
		snprintf(out, len,
			 "libfabric's tcp provider found no interface with "
			 "RIPC_TCP_ADDR=%s (or none allowed by FI_TCP_IFACE)",
			 ripc__env_str(RIPC_ENV_TCP_ADDR));
		break;
	default:
		snprintf(out, len,
			 "libfabric has no usable shm provider here");
		break;
	}
}

static void show_transports(void)
{
	char key[64], why[256];

	/* rma_chunk below depends on RIPC_READ_CHUNK: the configuration the
	 * library would load, not the zeroed one of a process that never
	 * initialised it. */
	ripc__load_config();
	probe_transports();
	for (int i = 0; i < RIPC_PROV_MAX; i++) {
		const struct tp_probe *t = &probe[i];
		const struct ripc_prov_attr *a = &t->attr;
		const char *n = ripc__prov_names[i];

#define K(field) (snprintf(key, sizeof(key), "transport.%s.%s", n, field), key)
		if (t->err) {
			unavailable_reason(i, t->err, why, sizeof(why));
			kv(K("status"), "unavailable");
			kv(K("reason"), "%s", why);
			continue;
		}
		kv(K("status"), "available");
		if (t->selected)
			kv(K("used"), "yes");
		else
			kv(K("used"), "no (%s)", t->why_not);
		kv(K("provider"), "%s", a->fabric_name);
		kv(K("inject_size"), "%zu", a->inject_size);
		kv(K("max_msg_size"), "%zu", a->max_msg_size);
		kv(K("tx_depth"), "%zu", a->tx_depth);
		kv(K("rx_depth"), "%zu", a->rx_depth);
		kv(K("key_bytes"), "%u", a->key_bytes);
		kv(K("mr_local"), "%s", yesno(a->mr_local));
		kv(K("mr_virt_addr"), "%s", yesno(a->mr_virt_addr));
		kv(K("mr_prov_key"), "%s", yesno(a->mr_prov_key));
		kv(K("wait_fd"), "%s", yesno(a->wait_fd >= 0));
		kv(K("same_host_only"), "%s", yesno(a->same_host_only));
		kv(K("checks_rma_keys"), "%s", yesno(a->checks_rma_keys));
		kv(K("reads_need_peer"), "%s", yesno(a->reads_need_peer));
		kv(K("rma_chunk"), "%zu", ripc__rma_chunk(a));
#undef K
	}
}

/* ---- limits --------------------------------------------------------- */

static void show_limits(void)
{
	static const struct {
		enum ripc_limit which;
		const char *key;
	} lim[] = {
		{ RIPC_LIMIT_SHORT_PAYLOAD, "limit.short_payload_bytes" },
		{ RIPC_LIMIT_ITEMS, "limit.items" },
		{ RIPC_LIMIT_RETURN_BUFS, "limit.return_bufs" },
		{ RIPC_LIMIT_LONG_ITEM, "limit.long_item_bytes" },
		{ RIPC_LIMIT_QUEUE, "limit.queue_messages" },
		{ RIPC_LIMIT_RESOLVE_TIMEOUT_MS, "limit.resolve_timeout_ms" },
		{ RIPC_LIMIT_SEND_TIMEOUT_MS, "limit.send_timeout_ms" },
		{ RIPC_LIMIT_LONG_TIMEOUT_MS, "limit.long_timeout_ms" },
	};

	for (unsigned i = 0; i < sizeof(lim) / sizeof(lim[0]); i++)
		kv(lim[i].key, "%" PRIu64, ripc_limit(lim[i].which));
	/* ripc_limit() has loaded the configuration the library would use
	 * (clamped as at initialisation); the rest comes from there. */
	kv("limit.pull_timeout_ms", "%" PRIu64,
	   CTX->cfg.pull_timeout_ns / 1000000);
	kv("limit.return_timeout_ms", "%" PRIu64, CTX->cfg.return_timeout_ms);
	kv("limit.pull_mem_max_bytes", "%" PRIu64, CTX->cfg.pull_mem_max);
	/* 0: unset, each transport's own (transport.NAME.rma_chunk). */
	kv("limit.read_chunk_bytes", "%" PRIu64, CTX->cfg.read_chunk);
	kv("limit.rx_depth", "%u", CTX->cfg.rx_depth);
	/* RIPC_FRAG_MAX as used: auto resolved by the CPU (0: no trains). */
	kv("limit.frag_max_bytes", "%u", CTX->cfg.frag_max);
	kv("limit.receive_buffer_bytes", "%zu", (size_t)RIPC_SLOT_SIZE);
	kv("limit.service_id_max", "%u", RIPC_MAX_SERVICE_ID);
	kv("limit.registry_processes", "%u", RIPC_REG_MAX_PROCS);
	kv("limit.multicast_memberships", "%u", RIPC_REG_MAX_MCAST);
	/* 0: the kernel's tick is unknown, the timer is not rounded. */
	kv("limit.takeover_grid_us", "%" PRIu64,
	   CTX->cfg.tick_grid_ns / 1000);
}

/* ---- environment ---------------------------------------------------- */

static void show_env(void)
{
	char key[96];

	for (int i = 0; i < RIPC_ENV_COUNT; i++) {
		const struct ripc_env_var *v = &ripc__env_table[i];
		const char *set = getenv(v->name);

#define K(field) (snprintf(key, sizeof(key), "env.%s.%s", v->name, field), key)
		kv(K("default"), "%s", v->def);
		kv(K("value"), "%s", ripc__env_str(i));
		kv(K("source"), "%s",
		   set && *set ? "environment" : "default");
		kv(K("help"), "%s", v->help);
#undef K
	}
}

/* ---- services ------------------------------------------------------- */

static void show_service(uint16_t id, bool mcast,
			 const struct ripc_reg_proc_info *o, void *arg)
{
	unsigned *count = arg;
	char tps[64] = "";

	for (int i = 0; i < RIPC_PROV_MAX; i++)
		if (o->addr[i].len)
			snprintf(tps + strlen(tps), sizeof(tps) - strlen(tps),
				 "%s%s", *tps ? "," : "", ripc__prov_names[i]);
	printf("service: %u kind=%s pid=%d incarnation=0x%016" PRIx64
	       " host=0x%016" PRIx64 " transports=%s\n",
	       id, mcast ? "multicast" : "unicast", (int)o->pid,
	       o->incarnation, o->host_id, *tps ? tps : "none");
	(*count)++;
}

static int show_services(void)
{
	unsigned count = 0;
	int ret;

	/* Opening maps the file; it is created (empty) if no libripc
	 * process has run yet, as the first one would.  Nothing is
	 * published: ripc_info is not a process of the registry. */
	ret = ripc__reg_open(ripc__env_str(RIPC_ENV_REGISTRY));
	if (ret) {
		kv("registry.path", "%s", ripc__reg_path());
		kv("registry.status", "unusable (%s)", strerror(-ret));
		return 1;
	}
	kv("registry.path", "%s", ripc__reg_path());
	kv("registry.status", "ok");
	ripc__reg_foreach(show_service, &count);
	ripc__reg_close();
	kv("services.count", "%u", count);
	return 0;
}

/* ---- topology ------------------------------------------------------- */

static void node_text(int node, char *out, size_t len)
{
	if (node >= 0)
		snprintf(out, len, "%d", node);
	else
		snprintf(out, len, "%s", node == RIPC_LOC_ANY ? "any" : "none");
}

static int show_topology(void)
{
	const char *source = ripc__env_str(RIPC_ENV_TOPOLOGY);
	struct ripc_loc *l = ripc__loc_load(source, true);
	struct ripc_loc_nic_req req[RIPC_PROV_MAX];
	struct ripc_loc_summary s;
	struct ripc_loc_node_info n;
	struct ripc_loc_dev_info d;
	struct ripc_loc_place pl;
	struct ripc_loc_cfg cfg;
	unsigned nreq = 0, i;
	char key[64], nodes[16];

	kv("topology.hwloc", "%s", ripc__loc_hwloc_version());
	if (!l) {
		kv("topology.source", "%s", *source ? source : "this machine");
		kv("topology.status", "unusable (hwloc could not load it)");
		return 1;
	}
	ripc__loc_summary(l, &s);
	kv("topology.source", "%s", s.source);
	kv("topology.this_machine", "%s", yesno(s.this_system));
	kv("topology.numa_nodes", "%u", s.nodes);
	kv("topology.packages", "%u", s.packages);
	kv("topology.cores", "%u", s.cores);
	kv("topology.pus", "%u", s.pus);
	for (i = 0; i < 4096 && ripc__loc_node_at(l, i, &n); i++)
		printf("node: %d cpus=%s cores=%u pus=%u memory_mib=%" PRIu64
		       "\n",
		       n.os_index, *n.cpus ? n.cpus : "none", n.cores, n.pus,
		       n.memory >> 20);
	for (i = 0; i < 4096 && ripc__loc_dev_at(l, i, &d); i++) {
		node_text(d.node, nodes, sizeof(nodes));
		printf("nic: %s kind=%s pci=%s node=%s\n", d.name, d.kind,
		       *d.pci ? d.pci : "none", nodes);
	}
	kv("topology.nics", "%u", i);

	/* The NIC each usable transport would use, and its node. */
	probe_transports();
	for (int t = 0; t < RIPC_PROV_MAX; t++) {
		struct ripc_loc_nic_req r = {
			.tp = t,
			.dev = t == RIPC_PROV_TCP
				       ? ripc__env_str(RIPC_ENV_TCP_ADDR)
				       : NULL,
		};
		char nic[32];
		int node;

		snprintf(key, sizeof(key), "locality.%s", ripc__prov_names[t]);
		if (probe[t].err || !probe[t].selected) {
			kv(key, "not in use");
			continue;
		}
		req[nreq++] = r;
		if (t == RIPC_PROV_SHM) {
			node = ripc__loc_cpus_node(l, NULL);
			node_text(node, nodes, sizeof(nodes));
			kv(key, "nic=none node=%s (the node of this process's "
				"CPUs)", nodes);
			continue;
		}
		node = ripc__loc_nic_node(l, &r, nic, sizeof(nic));
		node_text(node, nodes, sizeof(nodes));
		kv(key, "nic=%s node=%s%s", *nic ? nic : "none", nodes,
		   node == RIPC_LOC_NODEV && *nic
			   ? " (not a device of the topology: virtual?)"
			   : "");
	}
	/* The library's decision, with the same rules and settings. */
	ripc__loc_cfg_from_env(&cfg);
	ripc__loc_decide(l, &cfg, req, nreq, &pl);
	kv("placement.node", pl.node >= 0 ? "%d" : "none", pl.node);
	kv("placement.reason", "%s", pl.why);
	kv("placement.binds", "%s",
	   yesno(pl.node >= 0 && s.this_system));
	ripc__loc_unload(l);
	return 0;
}

/* ---- resolution across hosts ---------------------------------------- */

/* The directory engines compiled in and, with RIPC_DIRECTORY set, the
 * directory's state: a session of our own (never claiming anything) and
 * one lookup, answered or not within 3 s. */
static int show_resolution(void)
{
	const char *url = ripc__env_str(RIPC_ENV_DIRECTORY);
	const char *engines = ripc__dir_engines();
	bool dir_set = *url != '\0';
	struct ripc_dir_cfg cfg = { .session_timeout_ms = 4000 };
	struct ripc_reg_proc_info out[1];
	uint64_t t0, end;
	char state[600];
	bool mcast;
	int ret = 0, r;

	kv("resolution.directory_engines", "%s", *engines ? engines : "none");
	kv("resolution.directory", "%s", dir_set ? url : "none");
	if (!ripc__env_bool(RIPC_ENV_RESOLVER))
		kv("resolution.multicast", "off (RIPC_RESOLVER=%s)",
		   ripc__env_str(RIPC_ENV_RESOLVER));
	else if (dir_set && !ripc__env_is_set(RIPC_ENV_RESOLVER))
		kv("resolution.multicast", "off (RIPC_DIRECTORY is set)");
	else
		kv("resolution.multicast", "on (%s:%s via %s)",
		   ripc__env_str(RIPC_ENV_RESOLVER_GROUP),
		   ripc__env_str(RIPC_ENV_RESOLVER_PORT),
		   *ripc__env_str(RIPC_ENV_RESOLVER_ADDR)
			   ? ripc__env_str(RIPC_ENV_RESOLVER_ADDR)
			   : ripc__env_str(RIPC_ENV_TCP_ADDR));
	if (!dir_set)
		return 0;
	r = ripc__dir_open(url, &cfg);
	if (r) {
		kv("resolution.directory_state", "unusable (%s)",
		   r == -ENOTSUP ? "built without this engine"
				 : r == -EINVAL ? "malformed URL" : strerror(-r));
		return 1;
	}
	t0 = ripc__now_ns();
	end = t0 + 3000000000ull;
	for (;;) {
		struct pollfd p = { .fd = ripc__dir_wait_fd(), .events = POLLIN };
		uint64_t v;

		r = ripc__dir_lookup(RIPC_MAX_SERVICE_ID, out, 1, &mcast);
		if (r >= 0 || ripc__now_ns() >= end)
			break;
		if (poll(&p, 1, 50) > 0 && read(p.fd, &v, sizeof(v)) < 0)
			(void)0;
	}
	ripc__dir_describe(state, sizeof(state));
	kv("resolution.directory_state", "%s", state);
	if (r >= 0) {
		kv("resolution.directory_answer_ms", "%.1f",
		   (double)(ripc__now_ns() - t0) / 1e6);
	} else {
		kv("resolution.directory_answer_ms", "none within 3000");
		ret = 1;
	}
	ripc__dir_close();
	return ret;
}

/* ---- counters ------------------------------------------------------- */

/* Every field of struct ripc_stats, in order. */
#define STAT(f) { #f, offsetof(struct ripc_stats, f) }
static const struct {
	const char *name;
	size_t off;
} stat_fields[] = {
	STAT(short_sent),	  STAT(short_recv),
	STAT(long_sent),	  STAT(long_recv),
	STAT(bytes_sent_short),	  STAT(bytes_recv_short),
	STAT(bytes_exposed_long), STAT(bytes_pulled_long),
	STAT(bytes_return_written),
	STAT(return_replies_sent), STAT(return_replies_recv),
	STAT(drops_malformed),	  STAT(drops_no_service),
	STAT(drops_stale),	  STAT(drops_queue_full),
	STAT(drops_forged),	  STAT(send_retries),
	STAT(send_timeouts),	  STAT(resolutions),
	STAT(resolve_failures),	  STAT(registrations),
	STAT(deregistrations),	  STAT(long_released),
	STAT(long_timeouts),	  STAT(pulls_failed),
	STAT(window_hits),	  STAT(library_buffers),
	STAT(release_events_dropped), STAT(bell_rings),
	STAT(bell_wakeups),	  STAT(shm_fallback_tcp),
	STAT(peers_reaped),	  STAT(resolve_gone),
	STAT(direct_wakeups),	  STAT(bell_msgs_sent),
	STAT(bell_msgs_recv),	  STAT(peers_evicted),
	STAT(peer_ended_transfers), STAT(dones_carried),
	STAT(dones_alone),	  STAT(dones_carried_recv),
	STAT(frag_msgs_sent),	  STAT(frag_msgs_recv),
	STAT(spin_yields),	  STAT(spin_yields_slow),
	STAT(routes_freed),
};
#undef STAT
/* A counter added to struct ripc_stats must be named above too. */
_Static_assert(sizeof(stat_fields) / sizeof(stat_fields[0]) ==
		       sizeof(struct ripc_stats) / sizeof(uint64_t),
	       "struct ripc_stats changed: update stat_fields in ripc_info.c");

static void show_proc_counters(const struct ripc_reg_proc_info *proc,
			       const uint64_t *stats, unsigned n, void *arg)
{
	char key[96];

	(void)arg;
	kv("process", "%d", (int)proc->pid);
	for (unsigned i = 0; i < sizeof(stat_fields) / sizeof(stat_fields[0]);
	     i++) {
		unsigned k = stat_fields[i].off / sizeof(uint64_t);

		snprintf(key, sizeof(key), "stats.%d.%s", (int)proc->pid,
			 stat_fields[i].name);
		if (k < n)
			kv(key, "%" PRIu64, stats[k]);
		else
			kv(key, "%s", "-");
	}
}

/* Counters live in each process, which republishes them in the host
 * registry every second: show every live process's. */
static void show_counters(void)
{
	if (ripc__reg_open(ripc__env_str(RIPC_ENV_REGISTRY)) != 0) {
		kv("stats", "%s", "no registry");
		return;
	}
	ripc__reg_foreach_proc(show_proc_counters, NULL);
	ripc__reg_close();
}

/* ---- main ----------------------------------------------------------- */

static void usage(FILE *f, const char *argv0)
{
	fprintf(f,
		"usage: %s [-a] [-e] [-s] [-t] [-c] [-h]\n"
		"  (none)  versions, transports and limits\n"
		"  -e      RIPC_* environment variables\n"
		"  -s      services registered on this host\n"
		"  -t      hardware topology and memory placement\n"
		"  -c      counters of every libripc process on this host\n"
		"  -a      all of the above\n"
		"  -h      this help\n"
		"See ripc_info(1).\n",
		argv0);
}

int main(int argc, char **argv)
{
	bool env = false, svc = false, topo = false, cnt = false;
	bool all = false;
	unsigned v = fi_version();
	int c, ret = 0;

	while ((c = getopt(argc, argv, "aesthc")) != -1) {
		switch (c) {
		case 'a':
			all = env = svc = topo = cnt = true;
			break;
		case 'e':
			env = true;
			break;
		case 's':
			svc = true;
			break;
		case 't':
			topo = true;
			break;
		case 'c':
			cnt = true;
			break;
		case 'h':
			usage(stdout, argv[0]);
			return 0;
		default:
			usage(stderr, argv[0]);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr, argv[0]);
		return 2;
	}
	ripc__env_load_log_level();
	if (all || !(env || svc || topo || cnt)) {
		kv("version.libripc", "%d.%d.%d", RIPC_VERSION_MAJOR,
		   RIPC_VERSION_MINOR, RIPC_VERSION_PATCH);
		kv("version.libfabric", "%u.%u", FI_MAJOR(v), FI_MINOR(v));
		kv("version.hwloc", "%s", ripc__loc_hwloc_version());
		show_transports();
		show_limits();
		ret |= show_resolution();
	}
	if (env)
		show_env();
	if (svc)
		ret |= show_services();
	if (topo)
		ret |= show_topology();
	if (cnt)
		show_counters();
	return ret;
}
