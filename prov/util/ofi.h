/*
 * The one libfabric data path behind every transport.  Providers differ
 * only by the data in struct ripc_ofi_row (prov/<name>/<name>.c).
 */
#ifndef RIPC_OFI_H
#define RIPC_OFI_H

#include <stdbool.h>
#include <stdint.h>

#include "ripc_prov.h"

struct ripc_ofi_row {
	const char *name;          /* transport name seen by the core */
	const char *prov_legacy;   /* libfabric provider string before 1.18 */
	const char *prov_current;  /* ... from 1.18 on */
	uint64_t mr_mode_offer;    /* FI_MR_* bits this code can handle */
	bool bind_src_addr;        /* bind to opts->src_addr (IP transports) */
	bool same_host_only;
	bool wait_fd;              /* CQ supports FI_WAIT_FD */
	/* fi_trywait does not reset the CQ's wait object: libfabric 1.17's
	 * net returns success without reading the byte a completion wrote
	 * into the wait's signal socketpair, so its fd stays readable and a
	 * thread that sleeps on it never does (perf_notes.md 12-02).  The
	 * CQ then gets a wait set of our own, and trywait is fi_wait on it
	 * with no timeout, which does reset the signal (util_wait_fd_try). */
	bool trywait_keeps_signal;
	/* The provider opened speaks libfabric's native RDM protocol over
	 * TCP (1.17's net; tcp from 1.18 on), with this libfabric and the
	 * other: its addresses are plain sockaddrs like those of
	 * tcp;ofi_rxm, whose protocol it does not speak (fi_net(7)).  Our
	 * addresses then end in a tag (ripc__ofi_getname), so that a
	 * process of one kind refuses the other's address with a clear
	 * error instead of sending into silence. */
	bool native_legacy, native_current;
	bool costly_poll;          /* polling the CQ costs syscalls */
	bool frag_injects;         /* see struct ripc_prov_attr */
	size_t rma_chunk;          /* see struct ripc_prov_attr */
	/* The provider's fast RMA path ignores keys when FI_MR_VIRT_ADDR is
	 * granted (shm 1.17, ref §3.2); withhold VIRT_ADDR in checked mode. */
	bool unchecked_fast_rma;
	/* The insert maps the peer's region, the file /dev/shm/<address
	 * after this prefix> (shm).  libfabric 1.17 accepts the insert of
	 * a peer whose file is gone, maps nothing, and on the remove skips
	 * a peer it never mapped, so the name's node in its table stays
	 * for ever (40 bytes; smr_map_add/smr_map_del): such a peer is not
	 * inserted (-ESRCH). */
	const char *region_prefix;
	/* Insert our own address at open, and remove it: the AV's first
	 * insert grows its entry pool (ripc__ofi_open, warm_av). */
	bool warm_av;
	/* libfabric settings ("NAME=value", NULL-terminated) this transport
	 * wants unless the environment has them already.  libfabric reads
	 * every provider's settings once, at the first fi_getinfo of any:
	 * all rows' defaults are applied before that (ripc__ofi_rows). */
	const char *const *env_defaults;
};

/* Every compiled-in row (prov/prov.c), NULL-terminated. */
extern const struct ripc_ofi_row *const ripc__ofi_rows[];

/* shm quirk (prov/shm): see the watchdog op in ripc_prov.h. */
bool ripc__shm_watchdog(struct ripc_prov *p, struct ripc_wd_wake *wake);

int ripc__ofi_open(const struct ripc_ofi_row *row,
		   const struct ripc_prov_opts *opts, struct ripc_prov **out,
		   struct ripc_prov_attr *attr);

/* The shared ops (contracts in ripc_prov.h). */
int ripc__ofi_getname(struct ripc_prov *p, void *addr, size_t *len);
int ripc__ofi_av_insert(struct ripc_prov *p, const void *addr, size_t len,
			uint64_t *peer);
int ripc__ofi_av_remove(struct ripc_prov *p, uint64_t peer);
int ripc__ofi_post_recv(struct ripc_prov *p, void *buf, size_t len,
			void *desc, void *ctx);
int ripc__ofi_inject(struct ripc_prov *p, uint64_t peer, const void *buf,
		     size_t len);
int ripc__ofi_send(struct ripc_prov *p, uint64_t peer,
		   const struct iovec *iov, void **desc, size_t cnt, void *ctx);
int ripc__ofi_read(struct ripc_prov *p, uint64_t peer, void *buf, size_t len,
		   void *desc, uint64_t raddr, uint64_t key, void *ctx);
int ripc__ofi_write(struct ripc_prov *p, uint64_t peer, const void *buf,
		    size_t len, void *desc, uint64_t raddr, uint64_t key,
		    void *ctx);
int ripc__ofi_mr_reg(struct ripc_prov *p, void *buf, size_t len,
		     unsigned access, uint64_t key, struct ripc_prov_mr *mr);
void ripc__ofi_mr_close(struct ripc_prov *p, struct ripc_prov_mr *mr);
int ripc__ofi_poll(struct ripc_prov *p, struct ripc_cqe *cqe, int max);
bool ripc__ofi_trywait(struct ripc_prov *p);
void ripc__ofi_close(struct ripc_prov *p);

/* Ops table of a libfabric transport whose open calls ripc__ofi_open()
 * with its row (and which may need a watchdog, see ripc_prov.h). */
#define RIPC_OFI_OPS(open_fn) RIPC_OFI_OPS_WATCHDOG(open_fn, NULL)
#define RIPC_OFI_OPS_WATCHDOG(open_fn, wd_fn)                                \
	{                                                                    \
		.open = (open_fn), .getname = ripc__ofi_getname,             \
		.av_insert = ripc__ofi_av_insert,                            \
		.av_remove = ripc__ofi_av_remove,                            \
		.post_recv = ripc__ofi_post_recv,                            \
		.inject = ripc__ofi_inject, .send = ripc__ofi_send,          \
		.read = ripc__ofi_read, .write = ripc__ofi_write,            \
		.mr_reg = ripc__ofi_mr_reg, .mr_close = ripc__ofi_mr_close,  \
		.poll = ripc__ofi_poll, .trywait = ripc__ofi_trywait,        \
		.close = ripc__ofi_close, .watchdog = (wd_fn),               \
	}

#endif
