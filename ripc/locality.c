/*
 * Locality with hwloc: which NUMA node is nearest the NIC a transport
 * uses, and placing memory and the progress thread there.  Contracts in
 * locality.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hwloc.h>
#include <hwloc/glibc-sched.h>

#include "env.h"
#include "locality.h"
#include "log.h"
#include "ripc_prov.h"

struct ripc_loc {
	hwloc_topology_t topo;
	bool this_system;
	char source[128];
};

/* ---- loading -------------------------------------------------------- */

struct ripc_loc *ripc__loc_load(const char *source, bool io)
{
	struct ripc_loc *l = calloc(1, sizeof(*l));
	int ret = 0;

	if (!l)
		return NULL;
	if (hwloc_topology_init(&l->topo) < 0) {
		ripc__log(RIPC_LOG_WARN, "hwloc: cannot initialise: %s",
			  strerror(errno));
		free(l);
		return NULL;
	}
	if (!source || !*source) {
		snprintf(l->source, sizeof(l->source), "this machine");
	} else if (strchr(source, '/')) {
		ret = hwloc_topology_set_xml(l->topo, source);
		snprintf(l->source, sizeof(l->source), "xml %s", source);
	} else {
		ret = hwloc_topology_set_synthetic(l->topo, source);
		snprintf(l->source, sizeof(l->source), "synthetic %s", source);
	}
	if (ret < 0) {
		ripc__log(RIPC_LOG_WARN, "hwloc: cannot use topology %s: %s",
			  source, strerror(errno));
		goto fail;
	}
	/* Plugins we do not need: hwloc's Linux backend finds PCI devices
	 * and NICs in sysfs by itself, while the pci plugin (libpciaccess)
	 * leaks memory on every load and the GPU ones pull in large
	 * libraries.  Blacklisting one that is not installed is harmless. */
	hwloc_topology_set_components(l->topo,
				      HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
				      "pci");
	hwloc_topology_set_components(l->topo,
				      HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
				      "opencl");
	hwloc_topology_set_components(l->topo,
				      HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
				      "gl");
	/* Caches are irrelevant here and only cost discovery time; PCI
	 * and OS devices (NICs) are only discovered when asked for, since
	 * scanning them is most of the cost of loading. */
	hwloc_topology_set_cache_types_filter(l->topo,
					      HWLOC_TYPE_FILTER_KEEP_NONE);
	hwloc_topology_set_io_types_filter(l->topo,
					   io ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT
					      : HWLOC_TYPE_FILTER_KEEP_NONE);
	if (hwloc_topology_load(l->topo) < 0) {
		ripc__log(RIPC_LOG_WARN, "hwloc: cannot load topology (%s): %s",
			  l->source, strerror(errno));
		goto fail;
	}
	l->this_system = hwloc_topology_is_thissystem(l->topo);
	return l;
fail:
	hwloc_topology_destroy(l->topo);
	free(l);
	return NULL;
}

void ripc__loc_unload(struct ripc_loc *l)
{
	if (!l)
		return;
	hwloc_topology_destroy(l->topo);
	free(l);
}

bool ripc__loc_is_this_system(const struct ripc_loc *l)
{
	return l && l->this_system;
}

unsigned ripc__loc_nnodes(const struct ripc_loc *l)
{
	int n;

	if (!l)
		return 0;
	n = hwloc_get_nbobjs_by_type(l->topo, HWLOC_OBJ_NUMANODE);
	return n > 0 ? (unsigned)n : 0;
}

static hwloc_obj_t node_obj(const struct ripc_loc *l, int node)
{
	if (!l || node < 0)
		return NULL;
	return hwloc_get_numanode_obj_by_os_index(l->topo, (unsigned)node);
}

bool ripc__loc_node_exists(const struct ripc_loc *l, int node)
{
	return node_obj(l, node) != NULL;
}

/* The one node of a nodeset, or RIPC_LOC_ANY. */
static int single_node(hwloc_const_nodeset_t set)
{
	if (!set || hwloc_bitmap_weight(set) != 1)
		return RIPC_LOC_ANY;
	return hwloc_bitmap_first(set);
}

/* ---- devices -------------------------------------------------------- */

static bool is_nic(hwloc_obj_t o)
{
	return o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK ||
	       o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
}

static int osdev_node(const struct ripc_loc *l, hwloc_obj_t o)
{
	hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(l->topo, o);

	return anc ? single_node(anc->nodeset) : RIPC_LOC_ANY;
}

int ripc__loc_dev_node(const struct ripc_loc *l, const char *name)
{
	hwloc_obj_t o = NULL;

	if (!l || !name || !*name)
		return RIPC_LOC_NODEV;
	/* Bounded by the number of OS devices in the topology. */
	while ((o = hwloc_get_next_osdev(l->topo, o)))
		if (is_nic(o) && o->name && !strcmp(o->name, name))
			return osdev_node(l, o);
	return RIPC_LOC_NODEV;
}

/* Name of the interface that holds IP address `ip` on this machine. */
static bool ifname_of_addr(const char *ip, char *name, size_t len)
{
	unsigned char want[sizeof(struct in6_addr)];
	struct ifaddrs *ifs, *i;
	int fam;
	bool found = false;

	if (inet_pton(AF_INET, ip, want) == 1)
		fam = AF_INET;
	else if (inet_pton(AF_INET6, ip, want) == 1)
		fam = AF_INET6;
	else
		return false;
	if (getifaddrs(&ifs) < 0)
		return false;
	for (i = ifs; i && !found; i = i->ifa_next) {
		const struct sockaddr_in *a4;
		const struct sockaddr_in6 *a6;
		const void *have;

		if (!i->ifa_addr || i->ifa_addr->sa_family != fam)
			continue;
		a4 = (const struct sockaddr_in *)i->ifa_addr;
		a6 = (const struct sockaddr_in6 *)i->ifa_addr;
		have = fam == AF_INET ? (const void *)&a4->sin_addr
				      : (const void *)&a6->sin6_addr;
		if (!memcmp(have, want,
			    fam == AF_INET ? sizeof(struct in_addr)
					   : sizeof(struct in6_addr))) {
			snprintf(name, len, "%s", i->ifa_name);
			found = true;
		}
	}
	freeifaddrs(ifs);
	return found;
}

static int first_rdma_dev(const struct ripc_loc *l, char *nic, size_t len)
{
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_osdev(l->topo, o)))
		if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS &&
		    o->name) {
			snprintf(nic, len, "%s", o->name);
			return osdev_node(l, o);
		}
	return RIPC_LOC_NODEV;
}

int ripc__loc_nic_node(const struct ripc_loc *l,
		       const struct ripc_loc_nic_req *req, char *nic,
		       size_t nic_len)
{
	char ifname[IF_NAMESIZE + 1] = "";

	if (nic_len)
		nic[0] = '\0';
	if (!l || !req)
		return RIPC_LOC_NODEV;
	switch (req->tp) {
	case RIPC_PROV_VERBS:
		if (!req->dev || !*req->dev)
			return first_rdma_dev(l, nic, nic_len);
		snprintf(nic, nic_len, "%s", req->dev);
		return ripc__loc_dev_node(l, req->dev);
	case RIPC_PROV_TCP:
		if (!req->dev || !*req->dev)
			return RIPC_LOC_NODEV;
		/* An address is looked up among this machine's interfaces;
		 * anything else is taken as an interface name. */
		if (!ifname_of_addr(req->dev, ifname, sizeof(ifname))) {
			if (strchr(req->dev, '.') || strchr(req->dev, ':'))
				return RIPC_LOC_NODEV; /* not ours, 0.0.0.0 */
			snprintf(ifname, sizeof(ifname), "%s", req->dev);
		}
		snprintf(nic, nic_len, "%s", ifname);
		return ripc__loc_dev_node(l, ifname);
	default:
		return RIPC_LOC_NODEV; /* shm: no NIC */
	}
}

/* ---- CPUs ----------------------------------------------------------- */

int ripc__loc_cpus_node(const struct ripc_loc *l, const char *cpus)
{
	hwloc_bitmap_t set, nodes;
	int node = RIPC_LOC_ANY, ok;

	if (!l)
		return RIPC_LOC_ANY;
	set = hwloc_bitmap_alloc();
	nodes = hwloc_bitmap_alloc();
	if (!set || !nodes)
		goto out;
	if (cpus) {
		ok = hwloc_bitmap_list_sscanf(set, cpus) == 0;
	} else {
		cpu_set_t aff;

		/* The affinity mask, not hwloc_get_cpubind(): it also works
		 * for a topology that is not this machine's. */
		CPU_ZERO(&aff);
		ok = sched_getaffinity(0, sizeof(aff), &aff) == 0 &&
		     hwloc_cpuset_from_glibc_sched_affinity(
			     l->topo, set, &aff, sizeof(aff)) == 0;
	}
	/* Only CPUs the topology knows count. */
	hwloc_bitmap_and(set, set, hwloc_topology_get_topology_cpuset(l->topo));
	if (ok && !hwloc_bitmap_iszero(set) &&
	    hwloc_cpuset_to_nodeset(l->topo, set, nodes) == 0)
		node = single_node(nodes);
out:
	hwloc_bitmap_free(set);
	hwloc_bitmap_free(nodes);
	return node;
}

/* ---- the decision --------------------------------------------------- */

void ripc__loc_cfg_from_env(struct ripc_loc_cfg *cfg)
{
	const char *v = ripc__env_str(RIPC_ENV_NUMA_NODE);
	char *end;
	long n;

	cfg->enabled = ripc__env_bool(RIPC_ENV_LOCALITY);
	cfg->node = -1;
	cfg->cpus = NULL;
	if (!*v)
		return;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < 0 || n > 65535)
		ripc__log(RIPC_LOG_WARN,
			  "ignoring RIPC_NUMA_NODE=%s: not a node number", v);
	else
		cfg->node = (int)n;
}

static const char *tp_name(int tp)
{
	return tp >= 0 && tp < RIPC_PROV_MAX ? ripc__prov_names[tp] : "?";
}

static void place(struct ripc_loc_place *out, int node, const char *fmt,
		  const char *a, const char *b)
{
	out->node = node;
	snprintf(out->why, sizeof(out->why), fmt, a, b);
}

int ripc__loc_decide(const struct ripc_loc *l, const struct ripc_loc_cfg *cfg,
		     const struct ripc_loc_nic_req *req, unsigned nreq,
		     struct ripc_loc_place *out)
{
	/* NICs by preference: the bulk data of verbs is DMAed by its HCA;
	 * tcp's passes through the kernel, but still through its NIC. */
	static const int nic_pref[] = { RIPC_PROV_VERBS, RIPC_PROV_TCP };
	char nic[sizeof(out->nic)];
	int node;

	memset(out, 0, sizeof(*out));
	out->node = -1;
	out->tp = -1;
	if (!cfg->enabled) {
		place(out, -1, "disabled by RIPC_LOCALITY", "", "");
		return -1;
	}
	if (!l) {
		place(out, -1, "no topology (hwloc failed)", "", "");
		return -1;
	}
	if (ripc__loc_nnodes(l) <= 1) {
		place(out, -1, "single NUMA node: plain allocation", "", "");
		return -1;
	}
	if (cfg->node >= 0) {
		if (ripc__loc_node_exists(l, cfg->node)) {
			place(out, cfg->node, "set by RIPC_NUMA_NODE", "", "");
			return out->node;
		}
		ripc__log(RIPC_LOG_WARN,
			  "ignoring RIPC_NUMA_NODE=%d: no such NUMA node",
			  cfg->node);
	}
	for (unsigned k = 0; k < sizeof(nic_pref) / sizeof(nic_pref[0]); k++)
		for (unsigned i = 0; i < nreq; i++) {
			if (req[i].tp != nic_pref[k])
				continue;
			node = ripc__loc_nic_node(l, &req[i], nic, sizeof(nic));
			if (node < 0)
				continue;
			out->tp = req[i].tp;
			snprintf(out->nic, sizeof(out->nic), "%s", nic);
			place(out, node, "nearest the NIC %s of %s", nic,
			      tp_name(req[i].tp));
			return node;
		}
	node = ripc__loc_cpus_node(l, cfg->cpus);
	if (node >= 0) {
		place(out, node, "the node of the CPUs this process runs on",
		      "", "");
		return node;
	}
	place(out, -1,
	      "no NIC with a locality and the CPUs span several nodes: "
	      "plain allocation",
	      "", "");
	return -1;
}

/* ---- description ---------------------------------------------------- */

void ripc__loc_summary(const struct ripc_loc *l, struct ripc_loc_summary *s)
{
	memset(s, 0, sizeof(*s));
	if (!l)
		return;
	s->this_system = l->this_system;
	s->nodes = ripc__loc_nnodes(l);
	s->packages = (unsigned)hwloc_get_nbobjs_by_type(l->topo,
							 HWLOC_OBJ_PACKAGE);
	s->cores = (unsigned)hwloc_get_nbobjs_by_type(l->topo, HWLOC_OBJ_CORE);
	s->pus = (unsigned)hwloc_get_nbobjs_by_type(l->topo, HWLOC_OBJ_PU);
	snprintf(s->source, sizeof(s->source), "%s", l->source);
}

bool ripc__loc_node_at(const struct ripc_loc *l, unsigned i,
		       struct ripc_loc_node_info *out)
{
	hwloc_obj_t o;

	memset(out, 0, sizeof(*out));
	if (!l || !(o = hwloc_get_obj_by_type(l->topo, HWLOC_OBJ_NUMANODE, i)))
		return false;
	out->os_index = (int)o->os_index;
	out->memory = o->attr ? o->attr->numanode.local_memory : 0;
	if (o->cpuset) {
		int n = hwloc_get_nbobjs_inside_cpuset_by_type(
			l->topo, o->cpuset, HWLOC_OBJ_CORE);

		out->cores = n > 0 ? (unsigned)n : 0;
		n = hwloc_get_nbobjs_inside_cpuset_by_type(l->topo, o->cpuset,
							   HWLOC_OBJ_PU);
		out->pus = n > 0 ? (unsigned)n : 0;
		if (!hwloc_bitmap_iszero(o->cpuset))
			hwloc_bitmap_list_snprintf(out->cpus,
						   sizeof(out->cpus),
						   o->cpuset);
	}
	return true;
}

bool ripc__loc_dev_at(const struct ripc_loc *l, unsigned i,
		      struct ripc_loc_dev_info *out)
{
	hwloc_obj_t o = NULL;
	unsigned k = 0;

	memset(out, 0, sizeof(*out));
	if (!l)
		return false;
	while ((o = hwloc_get_next_osdev(l->topo, o))) {
		hwloc_obj_t p;

		if (!is_nic(o) || !o->name || k++ != i)
			continue;
		snprintf(out->name, sizeof(out->name), "%s", o->name);
		out->kind = o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK
				    ? "network"
				    : "rdma";
		out->node = osdev_node(l, o);
		for (p = o->parent; p && p->type == HWLOC_OBJ_OS_DEVICE;
		     p = p->parent)
			;
		if (p && p->type == HWLOC_OBJ_PCI_DEVICE)
			snprintf(out->pci, sizeof(out->pci),
				 "%04x:%02x:%02x.%01x",
				 p->attr->pcidev.domain, p->attr->pcidev.bus,
				 p->attr->pcidev.dev, p->attr->pcidev.func);
		return true;
	}
	return false;
}

const char *ripc__loc_hwloc_version(void)
{
	/* The release we were built with: hwloc_get_api_version() gives the
	 * API version (2.8.0 for hwloc 2.9.x), which is not what people
	 * look for; the ABI is checked by the library's soname. */
#ifdef HWLOC_VERSION
	return HWLOC_VERSION;
#else
	static char buf[32];
	unsigned v = hwloc_get_api_version();

	snprintf(buf, sizeof(buf), "api %u.%u.%u", v >> 16, (v >> 8) & 0xff,
		 v & 0xff);
	return buf;
#endif
}

/* ---- process-wide placement ----------------------------------------- */

static struct {
	struct ripc_loc *l;
	struct ripc_loc_place place;
	hwloc_nodeset_t nodeset; /* of place.node; NULL: bind nothing */
	hwloc_cpuset_t cpuset;
} g = { .place = { .node = -1, .tp = -1 } };

/* Does the kernel see a single NUMA node?  Read from sysfs so that the
 * common case costs no hwloc load (~3 ms for the plugins alone). */
static bool single_node_machine(void)
{
	char buf[64] = "";
	FILE *f = fopen("/sys/devices/system/node/online", "re");
	bool single = true; /* no NUMA support in the kernel: one node */

	if (f) {
		if (fgets(buf, sizeof(buf), f))
			single = !strchr(buf, '-') && !strchr(buf, ',');
		fclose(f);
	}
	return single;
}

int ripc__loc_setup(const struct ripc_loc_nic_req *req, unsigned nreq)
{
	const char *source = ripc__env_str(RIPC_ENV_TOPOLOGY);
	struct ripc_loc_cfg cfg;
	hwloc_obj_t o;

	ripc__loc_teardown();
	ripc__loc_cfg_from_env(&cfg);
	if (cfg.enabled && !*source && single_node_machine()) {
		/* Decide on a stand-in: the answer is known without hwloc. */
		memset(&g.place, 0, sizeof(g.place));
		g.place.node = -1;
		g.place.tp = -1;
		snprintf(g.place.why, sizeof(g.place.why),
			 "single NUMA node: plain allocation");
		ripc__log(RIPC_LOG_DEBUG, "locality: %s", g.place.why);
		return -1;
	}
	if (cfg.enabled)
		g.l = ripc__loc_load(source, cfg.node < 0);
	ripc__loc_decide(g.l, &cfg, req, nreq, &g.place);
	if (g.place.node >= 0)
		ripc__log(RIPC_LOG_INFO,
			  "locality: memory and progress thread on NUMA node "
			  "%d (%s)%s",
			  g.place.node, g.place.why,
			  g.l->this_system ? "" : "; not this machine's "
						  "topology: nothing bound");
	else
		ripc__log(RIPC_LOG_INFO, "locality: %s", g.place.why);
	o = g.place.node >= 0 && g.l->this_system ? node_obj(g.l, g.place.node)
						  : NULL;
	if (o && o->nodeset && o->cpuset) {
		g.nodeset = hwloc_bitmap_dup(o->nodeset);
		g.cpuset = hwloc_bitmap_dup(o->cpuset);
		if (!g.nodeset || !g.cpuset) {
			hwloc_bitmap_free(g.nodeset);
			hwloc_bitmap_free(g.cpuset);
			g.nodeset = g.cpuset = NULL;
		}
	}
	return g.place.node;
}

const struct ripc_loc_place *ripc__loc_current(void)
{
	return &g.place;
}

#define HUGE_SIZE (2ul << 20)

static void *loc_alloc(size_t len, bool huge)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *p;

	len = (len + pg - 1) & ~(pg - 1);
	if (!len)
		len = pg;
	huge = huge && len >= HUGE_SIZE;
	p = mmap(NULL, huge ? len + HUGE_SIZE : len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (huge) {
		/* Keep the 2 MiB-aligned len bytes, give back the rest. */
		uint8_t *a = (uint8_t *)(((uintptr_t)p + HUGE_SIZE - 1) &
					 ~(uintptr_t)(HUGE_SIZE - 1));

		if (a > p)
			munmap(p, (size_t)(a - p));
		if (HUGE_SIZE - (size_t)(a - p))
			munmap(a + len, HUGE_SIZE - (size_t)(a - p));
		p = a;
		/* Only advice: without THP (or with it off) nothing changes. */
		(void)madvise(p, len, MADV_HUGEPAGE);
	}
	/* Before the first touch, so the pages are born on the node.  Not
	 * HWLOC_MEMBIND_STRICT: a full node should not make us fail. */
	if (g.nodeset &&
	    hwloc_set_area_membind(g.l->topo, p, len, g.nodeset,
				   HWLOC_MEMBIND_BIND,
				   HWLOC_MEMBIND_BYNODESET) < 0)
		ripc__log_rl(RIPC_LOG_INFO,
			     "locality: cannot bind memory to node %d: %s",
			     g.place.node, strerror(errno));
	return p;
}

void *ripc__loc_alloc(size_t len)
{
	return loc_alloc(len, false);
}

void *ripc__loc_alloc_huge(size_t len)
{
	return loc_alloc(len, true);
}

int ripc__loc_bind_thread(pthread_t th)
{
	hwloc_bitmap_t set;
	int ret = 0;

	if (!g.cpuset || hwloc_bitmap_iszero(g.cpuset))
		return 0; /* no placement, or a node without CPUs */
	set = hwloc_bitmap_alloc();
	if (!set)
		return -ENOMEM;
	if (hwloc_get_cpubind(g.l->topo, set, HWLOC_CPUBIND_THREAD) < 0)
		hwloc_bitmap_copy(set, g.cpuset);
	else
		hwloc_bitmap_and(set, set, g.cpuset);
	if (hwloc_bitmap_iszero(set)) {
		ripc__log(RIPC_LOG_INFO,
			  "locality: this process may not run on node %d; "
			  "progress thread left unbound",
			  g.place.node);
	} else if (hwloc_set_thread_cpubind(g.l->topo, th, set, 0) < 0) {
		ret = -errno;
		ripc__log(RIPC_LOG_INFO,
			  "locality: cannot bind the progress thread: %s",
			  strerror(errno));
	}
	hwloc_bitmap_free(set);
	return ret;
}

void ripc__loc_teardown(void)
{
	hwloc_bitmap_free(g.nodeset);
	hwloc_bitmap_free(g.cpuset);
	g.nodeset = g.cpuset = NULL;
	ripc__loc_unload(g.l);
	g.l = NULL;
	memset(&g.place, 0, sizeof(g.place));
	g.place.node = -1;
	g.place.tp = -1;
}
