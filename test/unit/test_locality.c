/*
 * Unit tests of ripc/locality.c: the placement decisions, on hwloc XML and
 * synthetic topologies, so that multi-node logic is exercised on any
 * machine (this one may well have a single NUMA node).
 *
 * The XML topologies are generated here rather than kept as files, so the
 * tests need no source directory (make distcheck) and each one states the
 * machine it is about.  Criterion runs every test in a process of its own,
 * so setenv() does not leak between tests.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "env.h"
#include "locality.h"
#include "log.h"
#include "ripc_prov.h"

/* A NIC of a generated topology. */
struct nic {
	int node;         /* package/NUMA node it hangs off; -1: machine */
	const char *name; /* OS device name */
	int rdma;         /* OpenFabrics device instead of a network one */
};

/*
 * An hwloc 2 XML topology: nnodes packages, each with one NUMA node and
 * two cores of one PU (node k has PUs 2k and 2k+1), and the given NICs,
 * each on a PCI device of its own behind a host bridge.  hwloc needs the
 * complete_* sets on every object (it crashes without them).
 */
static char *make_xml(int nnodes, const struct nic *nics, int nnics)
{
	size_t cap = 16384, n = 0;
	char *x = malloc(cap);
	unsigned all_cpus = (1u << (2 * nnodes)) - 1;
	unsigned all_nodes = (1u << nnodes) - 1;

#define PUT(...) (n += (size_t)snprintf(x + n, cap - n, __VA_ARGS__))
#define SETS(c, m)                                                           \
	PUT(" cpuset=\"0x%08x\" complete_cpuset=\"0x%08x\" nodeset=\"0x%08x\"" \
	    " complete_nodeset=\"0x%08x\"",                                  \
	    (c), (c), (m), (m))
	cr_assert_not_null(x);
	PUT("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	    "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
	    "<topology version=\"2.0\">\n");
	PUT("<object type=\"Machine\" os_index=\"0\"");
	SETS(all_cpus, all_nodes);
	PUT(">\n");
	for (int k = -1; k < nnodes; k++) {
		if (k >= 0) {
			unsigned cpus = 3u << (2 * k), nodes = 1u << k;

			PUT("<object type=\"Package\" os_index=\"%d\"", k);
			SETS(cpus, nodes);
			PUT(">\n<object type=\"NUMANode\" os_index=\"%d\"", k);
			SETS(cpus, nodes);
			PUT(" local_memory=\"%llu\"/>\n", 1ull << 34);
			for (int c = 2 * k; c < 2 * k + 2; c++) {
				PUT("<object type=\"Core\" os_index=\"%d\"", c);
				SETS(1u << c, nodes);
				PUT("><object type=\"PU\" os_index=\"%d\"", c);
				SETS(1u << c, nodes);
				PUT("/></object>\n");
			}
		}
		for (int i = 0; i < nnics; i++) {
			if (nics[i].node != k)
				continue;
			PUT("<object type=\"Bridge\" bridge_type=\"0-1\" "
			    "depth=\"0\" bridge_pci=\"0000:[%02x-%02x]\">\n",
			    0x10 + i, 0x10 + i);
			PUT("<object type=\"PCIDev\" "
			    "pci_busid=\"0000:%02x:00.0\" "
			    "pci_type=\"0200 [15b3:1017] [15b3:0000] 00\">\n",
			    0x10 + i);
			PUT("<object type=\"OSDev\" name=\"%s\" "
			    "osdev_type=\"%d\"/>\n</object>\n</object>\n",
			    nics[i].name, nics[i].rdma ? 3 : 2);
		}
		if (k >= 0)
			PUT("</object>\n");
	}
	PUT("</object>\n</topology>\n");
	cr_assert_lt(n, cap, "XML buffer too small");
#undef SETS
#undef PUT
	return x;
}

/* Write the XML to a temporary file (a path with a '/', so that
 * RIPC_TOPOLOGY and ripc__loc_load take it as XML). */
static char xml_path[64];

static const char *xml_file(int nnodes, const struct nic *nics, int nnics)
{
	char *x = make_xml(nnodes, nics, nnics);
	int fd;

	snprintf(xml_path, sizeof(xml_path), "/tmp/ripc-topo-XXXXXX.xml");
	fd = mkstemps(xml_path, 4);
	cr_assert_geq(fd, 0, "mkstemps");
	cr_assert_eq(write(fd, x, strlen(x)), (ssize_t)strlen(x));
	close(fd);
	free(x);
	return xml_path;
}

static void setup(void)
{
	/* Warnings about bad settings are provoked on purpose. */
	ripc__log_level = RIPC_LOG_NONE;
	xml_path[0] = '\0';
	unsetenv("RIPC_LOCALITY");
	unsetenv("RIPC_NUMA_NODE");
	unsetenv("RIPC_TOPOLOGY");
}

static void teardown(void)
{
	ripc__loc_teardown();
	if (xml_path[0])
		unlink(xml_path);
}

TestSuite(locality, .init = setup, .fini = teardown);

static struct ripc_loc *load_xml(int nnodes, const struct nic *nics,
				 int nnics)
{
	struct ripc_loc *l = ripc__loc_load(xml_file(nnodes, nics, nnics),
					    true);

	cr_assert_not_null(l, "the generated XML topology loads");
	cr_assert_eq(ripc__loc_nnodes(l), (unsigned)nnodes);
	cr_assert(!ripc__loc_is_this_system(l));
	return l;
}

static const struct ripc_loc_cfg auto_cfg = { .enabled = true, .node = -1,
					      .cpus = "0-3" };

/* ---- device locality ----------------------------------------------- */

Test(locality, nic_nodes_in_xml)
{
	const struct nic nics[] = { { 0, "eth0", 0 },
				    { 1, "eth1", 0 },
				    { 1, "mlx5_0", 1 },
				    { -1, "eth9", 0 } };
	struct ripc_loc *l = load_xml(2, nics, 4);
	struct ripc_loc_nic_req r;
	char nic[32];

	cr_assert_eq(ripc__loc_dev_node(l, "eth0"), 0);
	cr_assert_eq(ripc__loc_dev_node(l, "eth1"), 1);
	cr_assert_eq(ripc__loc_dev_node(l, "mlx5_0"), 1);
	cr_assert_eq(ripc__loc_dev_node(l, "eth9"), RIPC_LOC_ANY,
		     "a NIC under the machine is local to no single node");
	cr_assert_eq(ripc__loc_dev_node(l, "lo"), RIPC_LOC_NODEV);
	cr_assert_eq(ripc__loc_dev_node(l, NULL), RIPC_LOC_NODEV);

	r = (struct ripc_loc_nic_req){ RIPC_PROV_VERBS, NULL };
	cr_assert_eq(ripc__loc_nic_node(l, &r, nic, sizeof(nic)), 1);
	cr_assert_str_eq(nic, "mlx5_0", "verbs: the first RDMA device");
	r = (struct ripc_loc_nic_req){ RIPC_PROV_TCP, "eth0" };
	cr_assert_eq(ripc__loc_nic_node(l, &r, nic, sizeof(nic)), 0);
	cr_assert_str_eq(nic, "eth0");
	/* An address is mapped through this machine's interfaces: the
	 * loopback is no device of any topology. */
	r = (struct ripc_loc_nic_req){ RIPC_PROV_TCP, "127.0.0.1" };
	cr_assert_eq(ripc__loc_nic_node(l, &r, nic, sizeof(nic)),
		     RIPC_LOC_NODEV);
	r = (struct ripc_loc_nic_req){ RIPC_PROV_TCP, "192.0.2.99" };
	cr_assert_eq(ripc__loc_nic_node(l, &r, nic, sizeof(nic)),
		     RIPC_LOC_NODEV, "an address not on this machine");
	r = (struct ripc_loc_nic_req){ RIPC_PROV_SHM, "eth1" };
	cr_assert_eq(ripc__loc_nic_node(l, &r, nic, sizeof(nic)),
		     RIPC_LOC_NODEV, "shm has no NIC");
	cr_assert_str_eq(nic, "");
	ripc__loc_unload(l);
}

Test(locality, cpus_node)
{
	struct ripc_loc *l = load_xml(2, NULL, 0);

	cr_assert_eq(ripc__loc_cpus_node(l, "0-1"), 0);
	cr_assert_eq(ripc__loc_cpus_node(l, "3"), 1);
	cr_assert_eq(ripc__loc_cpus_node(l, "1-2"), RIPC_LOC_ANY);
	cr_assert_eq(ripc__loc_cpus_node(l, "40-41"), RIPC_LOC_ANY,
		     "CPUs the topology does not have");
	ripc__loc_unload(l);
}

/* ---- decisions ------------------------------------------------------- */

/* The case the module exists for: a 2-node machine with the NIC on node 1
 * puts memory and the thread on node 1, whatever CPUs the process has. */
Test(locality, two_nodes_nic_on_node1)
{
	const struct nic nics[] = { { 1, "eth1", 0 } };
	const struct ripc_loc_nic_req req[] = { { RIPC_PROV_SHM, NULL },
						{ RIPC_PROV_TCP, "eth1" } };
	struct ripc_loc *l = load_xml(2, nics, 1);
	struct ripc_loc_cfg cfg = auto_cfg;
	struct ripc_loc_place p;

	cfg.cpus = "0";
	cr_assert_eq(ripc__loc_decide(l, &cfg, req, 2, &p), 1);
	cr_assert_eq(p.node, 1);
	cr_assert_eq(p.tp, RIPC_PROV_TCP);
	cr_assert_str_eq(p.nic, "eth1");
	cr_assert(strstr(p.why, "eth1"), "reason: %s", p.why);
	ripc__loc_unload(l);
}

Test(locality, verbs_nic_preferred_over_tcp)
{
	const struct nic nics[] = { { 0, "eth0", 0 }, { 1, "mlx5_0", 1 } };
	const struct ripc_loc_nic_req req[] = { { RIPC_PROV_TCP, "eth0" },
						{ RIPC_PROV_VERBS, NULL } };
	struct ripc_loc *l = load_xml(2, nics, 2);
	struct ripc_loc_place p;

	cr_assert_eq(ripc__loc_decide(l, &auto_cfg, req, 2, &p), 1);
	cr_assert_eq(p.tp, RIPC_PROV_VERBS);
	cr_assert_str_eq(p.nic, "mlx5_0");
	/* Without verbs, tcp's NIC decides. */
	cr_assert_eq(ripc__loc_decide(l, &auto_cfg, req, 1, &p), 0);
	cr_assert_eq(p.tp, RIPC_PROV_TCP);
	ripc__loc_unload(l);
}

/* No NIC with a locality (shm only, loopback tcp, a NIC under the whole
 * machine): the node of the process's CPUs, if they are on one. */
Test(locality, no_nic_follows_cpus)
{
	const struct nic nics[] = { { -1, "eth9", 0 } };
	const struct ripc_loc_nic_req req[] = { { RIPC_PROV_SHM, NULL },
						{ RIPC_PROV_TCP, "eth9" },
						{ RIPC_PROV_TCP, "lo" } };
	struct ripc_loc *l = load_xml(2, nics, 1);
	struct ripc_loc_cfg cfg = auto_cfg;
	struct ripc_loc_place p;

	cfg.cpus = "2-3";
	cr_assert_eq(ripc__loc_decide(l, &cfg, req, 3, &p), 1);
	cr_assert_eq(p.tp, -1);
	cr_assert_str_eq(p.nic, "");
	cfg.cpus = "0";
	cr_assert_eq(ripc__loc_decide(l, &cfg, req, 1, &p), 0);
	cfg.cpus = "1-2";
	cr_assert_eq(ripc__loc_decide(l, &cfg, req, 3, &p), -1,
		     "CPUs on both nodes: no placement");
	cr_assert(strstr(p.why, "plain"), "reason: %s", p.why);
	cr_assert_eq(ripc__loc_decide(l, &cfg, NULL, 0, &p), -1);
	ripc__loc_unload(l);
}

Test(locality, single_node_is_plain)
{
	const struct nic nics[] = { { 0, "eth0", 0 }, { 0, "mlx5_0", 1 } };
	const struct ripc_loc_nic_req req[] = { { RIPC_PROV_VERBS, NULL },
						{ RIPC_PROV_TCP, "eth0" } };
	struct ripc_loc *l = load_xml(1, nics, 2);
	struct ripc_loc_cfg cfg = auto_cfg;
	struct ripc_loc_place p;

	cr_assert_eq(ripc__loc_decide(l, &cfg, req, 2, &p), -1);
	cr_assert(strstr(p.why, "single NUMA node"), "reason: %s", p.why);
	cfg.node = 0; /* even when asked for: there is nothing to choose */
	cr_assert_eq(ripc__loc_decide(l, &cfg, req, 2, &p), -1);
	ripc__loc_unload(l);

	l = ripc__loc_load("core:4 pu:2", false);
	cr_assert_not_null(l, "synthetic single-node topology");
	cr_assert_eq(ripc__loc_nnodes(l), 1);
	cr_assert_eq(ripc__loc_decide(l, &auto_cfg, req, 2, &p), -1);
	ripc__loc_unload(l);
}

Test(locality, override_node)
{
	const struct nic nics[] = { { 1, "eth1", 0 } };
	const struct ripc_loc_nic_req req[] = { { RIPC_PROV_TCP, "eth1" } };
	struct ripc_loc *l = load_xml(3, nics, 1);
	struct ripc_loc_cfg cfg = auto_cfg;
	struct ripc_loc_place p;

	cfg.node = 2;
	cr_assert_eq(ripc__loc_decide(l, &cfg, req, 1, &p), 2);
	cr_assert(strstr(p.why, "RIPC_NUMA_NODE"), "reason: %s", p.why);
	cfg.node = 7; /* no such node: ignored, the NIC decides */
	cr_assert_eq(ripc__loc_decide(l, &cfg, req, 1, &p), 1);
	ripc__loc_unload(l);
}

Test(locality, disabled)
{
	const struct nic nics[] = { { 1, "eth1", 0 } };
	const struct ripc_loc_nic_req req[] = { { RIPC_PROV_TCP, "eth1" } };
	struct ripc_loc *l = load_xml(2, nics, 1);
	struct ripc_loc_cfg cfg = auto_cfg;
	struct ripc_loc_place p;

	cfg.enabled = false;
	cfg.node = 1;
	cr_assert_eq(ripc__loc_decide(l, &cfg, req, 1, &p), -1);
	cr_assert(strstr(p.why, "RIPC_LOCALITY"), "reason: %s", p.why);
	cr_assert_eq(ripc__loc_decide(NULL, &auto_cfg, req, 1, &p), -1,
		     "no topology: no placement");
	ripc__loc_unload(l);
}

/* ---- settings from the environment ----------------------------------- */

Test(locality, cfg_from_env)
{
	struct ripc_loc_cfg cfg;

	ripc__loc_cfg_from_env(&cfg);
	cr_assert(cfg.enabled, "on by default");
	cr_assert_eq(cfg.node, -1, "automatic by default");
	cr_assert_null(cfg.cpus);
	setenv("RIPC_NUMA_NODE", "3", 1);
	setenv("RIPC_LOCALITY", "off", 1);
	ripc__loc_cfg_from_env(&cfg);
	cr_assert_eq(cfg.node, 3);
	cr_assert(!cfg.enabled);
	static const char *const bad[] = { "x", "1x", "-1", "0x1", " ",
					   "99999999999" };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("RIPC_NUMA_NODE", bad[i], 1);
		ripc__loc_cfg_from_env(&cfg);
		cr_assert_eq(cfg.node, -1, "RIPC_NUMA_NODE=\"%s\"", bad[i]);
	}
}

/* ---- the process-wide layer, as the core uses it --------------------- */

static void check_memory(size_t len)
{
	unsigned char *m = ripc__loc_alloc(len);

	cr_assert_not_null(m);
	cr_assert_eq((uintptr_t)m % (uintptr_t)sysconf(_SC_PAGESIZE), 0);
	memset(m, 0xa5, len);
	cr_assert_eq(m[len - 1], 0xa5);
	cr_assert_eq(munmap(m, len), 0, "released with munmap");
}

Test(locality, setup_from_xml_file)
{
	const struct nic nics[] = { { 1, "eth1", 0 } };
	const struct ripc_loc_nic_req req[] = { { RIPC_PROV_SHM, NULL },
						{ RIPC_PROV_TCP, "eth1" } };

	setenv("RIPC_TOPOLOGY", xml_file(2, nics, 1), 1);
	cr_assert_eq(ripc__loc_setup(req, 2), 1);
	cr_assert_eq(ripc__loc_current()->node, 1);
	cr_assert_str_eq(ripc__loc_current()->nic, "eth1");
	/* Not this machine's topology: decided, but nothing is bound. */
	check_memory(100000);
	cr_assert_eq(ripc__loc_bind_thread(pthread_self()), 0);
	ripc__loc_teardown();
	cr_assert_eq(ripc__loc_current()->node, -1);
	check_memory(1);

	setenv("RIPC_NUMA_NODE", "0", 1);
	cr_assert_eq(ripc__loc_setup(req, 2), 0, "override");
	setenv("RIPC_LOCALITY", "0", 1);
	cr_assert_eq(ripc__loc_setup(req, 2), -1, "disabled");
	cr_assert(strstr(ripc__loc_current()->why, "RIPC_LOCALITY"));
}

Test(locality, setup_from_synthetic)
{
	setenv("RIPC_TOPOLOGY", "pack:2 [numa] core:2 pu:1", 1);
	setenv("RIPC_NUMA_NODE", "1", 1);
	cr_assert_eq(ripc__loc_setup(NULL, 0), 1);
	check_memory(4096);
	setenv("RIPC_TOPOLOGY", "core:2 pu:1", 1);
	cr_assert_eq(ripc__loc_setup(NULL, 0), -1, "one node: plain");
	check_memory(4096);
	setenv("RIPC_TOPOLOGY", "this is not a topology", 1);
	cr_assert_eq(ripc__loc_setup(NULL, 0), -1, "bad description");
	cr_assert(strstr(ripc__loc_current()->why, "no topology"));
	setenv("RIPC_TOPOLOGY", "/nonexistent/topology.xml", 1);
	cr_assert_eq(ripc__loc_setup(NULL, 0), -1, "missing file");
	check_memory(4096);
}

/* This machine, whatever it is: the decision is a real node or none, and
 * memory and binding work (on one node: plain memory, nothing bound). */
Test(locality, setup_on_this_machine)
{
	const struct ripc_loc_nic_req req[] = { { RIPC_PROV_SHM, NULL },
						{ RIPC_PROV_TCP,
						  "127.0.0.1" } };
	struct ripc_loc *l = ripc__loc_load(NULL, false);
	int node = ripc__loc_setup(req, 2);

	cr_assert_not_null(l);
	cr_assert(ripc__loc_is_this_system(l));
	if (ripc__loc_nnodes(l) <= 1)
		cr_assert_eq(node, -1, "single node: plain allocation");
	else
		cr_assert(node == -1 || ripc__loc_node_exists(l, node));
	check_memory(1 << 20);
	cr_assert_eq(ripc__loc_bind_thread(pthread_self()), 0);
	ripc__loc_unload(l);
}

/* ---- description ------------------------------------------------------ */

Test(locality, describe_xml)
{
	const struct nic nics[] = { { 1, "eth1", 0 }, { 1, "mlx5_0", 1 } };
	struct ripc_loc *l = load_xml(2, nics, 2);
	struct ripc_loc_summary s;
	struct ripc_loc_node_info n;
	struct ripc_loc_dev_info d;

	ripc__loc_summary(l, &s);
	cr_assert_eq(s.nodes, 2);
	cr_assert_eq(s.packages, 2);
	cr_assert_eq(s.cores, 4);
	cr_assert_eq(s.pus, 4);
	cr_assert(!s.this_system);
	cr_assert(!strncmp(s.source, "xml /", 5), "source: %s", s.source);

	cr_assert(ripc__loc_node_at(l, 1, &n));
	cr_assert_eq(n.os_index, 1);
	cr_assert_eq(n.cores, 2);
	cr_assert_str_eq(n.cpus, "2-3");
	cr_assert_eq(n.memory, 1ull << 34);
	cr_assert(!ripc__loc_node_at(l, 2, &n));

	cr_assert(ripc__loc_dev_at(l, 0, &d));
	cr_assert_str_eq(d.name, "eth1");
	cr_assert_str_eq(d.kind, "network");
	cr_assert_str_eq(d.pci, "0000:10:00.0");
	cr_assert_eq(d.node, 1);
	cr_assert(ripc__loc_dev_at(l, 1, &d));
	cr_assert_str_eq(d.kind, "rdma");
	cr_assert(!ripc__loc_dev_at(l, 2, &d));
	cr_assert_neq(ripc__loc_hwloc_version()[0], '\0');
	ripc__loc_unload(l);
}
