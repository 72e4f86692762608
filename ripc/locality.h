/*
 * Locality: on which NUMA node the library's memory and its progress
 * thread should live, decided with hwloc.
 *
 * The rule (ripc(7) LOCALITY): memory that the NIC reads and writes by DMA
 * (receive slots, ripc_buf_alloc buffers, pulled items) is best placed on
 * the NUMA node the NIC is attached to, and the thread that polls the
 * completion queue and touches that memory next to it.  On a machine with
 * one NUMA node there is nothing to decide: everything degrades to plain
 * mmap() and no thread is bound, and hwloc is not even loaded.
 *
 * Two layers:
 *  - a pure one that works on any topology handle (this machine, an XML
 *    file or a synthetic description) and only computes decisions; the
 *    unit tests drive it with hwloc XML and synthetic topologies;
 *  - a process-wide one (ripc__loc_setup ... ripc__loc_teardown) that the
 *    core calls: it loads this machine's topology once per initialisation,
 *    records the decision and applies it to memory and the progress thread.
 *
 * Settings (ripc/env.c): RIPC_LOCALITY=0 disables placement altogether,
 * RIPC_NUMA_NODE=<n> forces node n, RIPC_TOPOLOGY replaces the machine's
 * topology by an XML file or a synthetic description (for tests and for
 * "what would happen on that machine" with ripc_info -t); a topology that
 * is not this machine's is used for decisions only, nothing is bound.
 *
 * Nothing here is fatal: when hwloc fails, the decision is "no placement"
 * and the library works as without this module.  No libfabric here, and
 * hwloc stays inside locality.c.
 */
#ifndef RIPC_LOCALITY_H
#define RIPC_LOCALITY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Results of the node queries besides a node number (>= 0). */
#define RIPC_LOC_ANY (-1)   /* local to no single node (machine-wide) */
#define RIPC_LOC_NODEV (-2) /* the device is not in the topology */

struct ripc_loc; /* a loaded hwloc topology */

/* Where the traffic of one open transport enters the host. */
struct ripc_loc_nic_req {
	int tp;          /* enum ripc_prov_id */
	const char *dev; /* tcp: the local IP address it binds to
			  * (RIPC_TCP_ADDR) or an interface name;
			  * verbs: the RDMA device name, NULL: the first
			  * RDMA device of the topology; shm: ignored */
};

/* Placement settings, normally from the environment. */
struct ripc_loc_cfg {
	bool enabled;     /* RIPC_LOCALITY */
	int node;         /* RIPC_NUMA_NODE, or -1: automatic */
	const char *cpus; /* CPUs this process runs on as an hwloc list
			   * ("0-3,8"); NULL: its current affinity.  Set by
			   * tests only. */
};

/* A decision. */
struct ripc_loc_place {
	int node;      /* OS index of the NUMA node; -1: no placement */
	int tp;        /* transport whose NIC decided it, -1 if none */
	char nic[32];  /* that NIC's OS device name, "" if none */
	char why[128]; /* one line for logs and ripc_info */
};

/* ---- topologies and pure decisions ---------------------------------- */

/* Load a topology.  source NULL or "": this machine; containing '/': an
 * hwloc XML file (as written by `lstopo file.xml`); otherwise an hwloc
 * synthetic description ("pack:2 [numa] core:4 pu:1").  io: also discover
 * PCI and OS devices (NICs), which costs ~15 ms on a real machine.
 * Returns NULL on failure (logged as a warning).  Beware that hwloc trusts
 * XML files: a malformed one can crash it. */
struct ripc_loc *ripc__loc_load(const char *source, bool io);
void ripc__loc_unload(struct ripc_loc *l);

/* Is it the topology of the machine we run on (binding possible)? */
bool ripc__loc_is_this_system(const struct ripc_loc *l);
unsigned ripc__loc_nnodes(const struct ripc_loc *l);

/* Does a NUMA node with this OS index exist? */
bool ripc__loc_node_exists(const struct ripc_loc *l, int node);

/* NUMA node nearest the network or RDMA device named `name` (an OS device
 * of hwloc: "eth0", "ib0", "mlx5_0"): a node number, RIPC_LOC_ANY when the
 * device hangs off several nodes (or the machine as a whole), or
 * RIPC_LOC_NODEV when the topology has no such device (virtual interfaces
 * such as lo, or a topology loaded without io). */
int ripc__loc_dev_node(const struct ripc_loc *l, const char *name);

/* NUMA node nearest the NIC a transport uses (see struct
 * ripc_loc_nic_req); the NIC's name goes into nic[nic_len] ("" if none).
 * shm has no NIC: RIPC_LOC_NODEV.  tcp: the address is mapped to its
 * interface with getifaddrs(3) (only meaningful for this machine). */
int ripc__loc_nic_node(const struct ripc_loc *l,
		       const struct ripc_loc_nic_req *req, char *nic,
		       size_t nic_len);

/* The single NUMA node that holds all the given CPUs (an hwloc list such
 * as "0-3"; NULL: the CPUs the calling thread may run on), or RIPC_LOC_ANY
 * when they span several nodes or are unknown. */
int ripc__loc_cpus_node(const struct ripc_loc *l, const char *cpus);

/* Settings from RIPC_LOCALITY and RIPC_NUMA_NODE (cpus = NULL).  A value
 * of RIPC_NUMA_NODE that is not a number is ignored with a warning. */
void ripc__loc_cfg_from_env(struct ripc_loc_cfg *cfg);

/* Decide where memory and the progress thread go, given the transports
 * that are open (req[0..nreq), any order).  In order:
 *  1. disabled (cfg->enabled false), no topology (l NULL) or a single
 *     NUMA node: no placement (-1);
 *  2. cfg->node >= 0 and such a node exists: that node (a node that does
 *     not exist is ignored with a warning and the rules go on);
 *  3. the node of the NIC of verbs, else of tcp, when that NIC is local to
 *     one node (the bulk data goes through the NIC by DMA);
 *  4. else the node that holds all the CPUs the process runs on (shm,
 *     loopback tcp: the data is only touched by CPUs);
 *  5. else no placement.
 * Fills *out (always) and returns out->node. */
int ripc__loc_decide(const struct ripc_loc *l, const struct ripc_loc_cfg *cfg,
		     const struct ripc_loc_nic_req *req, unsigned nreq,
		     struct ripc_loc_place *out);

/* ---- description (ripc_info -t) ------------------------------------- */

struct ripc_loc_summary {
	bool this_system;
	unsigned nodes, packages, cores, pus;
	char source[128]; /* "this machine", "xml <path>", "synthetic <d>" */
};
void ripc__loc_summary(const struct ripc_loc *l, struct ripc_loc_summary *s);

struct ripc_loc_node_info {
	int os_index;
	unsigned cores, pus;
	uint64_t memory; /* bytes of local memory, 0 if unknown */
	char cpus[64];   /* hwloc list of its PUs' OS indexes, "" if none */
};
/* The i-th NUMA node (logical order); false past the last. */
bool ripc__loc_node_at(const struct ripc_loc *l, unsigned i,
		       struct ripc_loc_node_info *out);

struct ripc_loc_dev_info {
	char name[32];
	const char *kind; /* "network" or "rdma" */
	char pci[16];     /* PCI bus ID "0000:00:03.0", "" if none */
	int node;         /* as ripc__loc_dev_node() */
};
/* The i-th network or RDMA device; false past the last. */
bool ripc__loc_dev_at(const struct ripc_loc *l, unsigned i,
		      struct ripc_loc_dev_info *out);

/* Release of hwloc the library was built with ("2.9.0"). */
const char *ripc__loc_hwloc_version(void);

/* ---- process-wide placement (called by the core) --------------------- *
 *
 * Call order and locking: ripc__loc_setup() once per initialisation, after
 * the transports are open and before the first ripc__loc_alloc(); then any
 * number of ripc__loc_alloc() and one ripc__loc_bind_thread() for the
 * progress thread; ripc__loc_teardown() at finalisation, after the
 * progress thread has stopped.  All with the core lock held, like every
 * other piece of core state.  Calling setup again (after a fork, or after
 * finalize + init) starts afresh.
 */

/* Decide the placement for this process from the environment and the open
 * transports (see ripc__loc_decide), log it at info level and remember it.
 * Loads hwloc only on a machine with several NUMA nodes (or when
 * RIPC_TOPOLOGY is set).  Returns the node, or -1 for no placement; never
 * an error. */
int ripc__loc_setup(const struct ripc_loc_nic_req *req, unsigned nreq);

/* The current decision (node -1 before setup and after teardown). */
const struct ripc_loc_place *ripc__loc_current(void);

/* len bytes (rounded up to pages) of private anonymous memory, bound to
 * the chosen node when there is one (preferred, not strict: when the node
 * is full the kernel falls back to another one rather than fail).  It is
 * always plain mmap(2) memory, so it is released with munmap(p, len),
 * also after teardown: hwloc_alloc_membind() would have to be paired with
 * hwloc_free() and the topology it came from, which library buffers
 * outlive (ripc_buf_free after ripc_finalize).  NULL on failure. */
void *ripc__loc_alloc(size_t len);

/* As ripc__loc_alloc, and from 2 MiB up aligned to 2 MiB
 * and advised for transparent huge pages (MADV_HUGEPAGE), for memory that
 * peers read or write with RDMA: shm's reads and writes go through
 * process_vm_readv/writev(2), which walk the pages of the other process's
 * memory, 2-4x faster over huge pages (measured: 4 MiB, 3.2-4.7 ->
 * 8.5-16.5 GB/s).  ripc_buf_alloc asks for whole 2 MiB pages from 1 MiB
 * (ripc__buf_alloc_len).  Still released with munmap(p, len). */
void *ripc__loc_alloc_huge(size_t len);

/* Bind thread th to the CPUs of the chosen node that the calling thread
 * may run on (th should be a thread it just created, which inherited its
 * affinity: a process confined by taskset/cgroups to other CPUs is
 * respected and th is then left alone).  The whole node rather than one
 * core, so the scheduler can still keep th off busy cores.  Returns 0
 * (also when there is nothing to do) or a negative errno; failing to bind
 * is harmless and only worth a log line. */
int ripc__loc_bind_thread(pthread_t th);

/* Forget the decision and release the topology. */
void ripc__loc_teardown(void);

#endif /* RIPC_LOCALITY_H */
