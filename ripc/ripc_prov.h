/*
 * The boundary between the core (ripc/, policy) and the transports
 * (prov/, mechanism).  The core never includes libfabric headers; it sees a
 * transport only through this table.
 *
 * General contract for every op:
 *  - Ops never block and never call back into the core.  Completions are
 *    pulled by the core with ->poll().
 *  - Errors are returned as negative POSIX errno values.  -EAGAIN means
 *    "resources are busy, call ->poll() and retry"; every other value is
 *    final for that operation.  The core translates errno to RIPC_E* codes
 *    in one place (errors.c).
 *  - `ctx` pointers are opaque to the transport and are handed back,
 *    unchanged, in exactly one completion (success or error) unless the op
 *    returned an error, in which case no completion is generated.
 *  - Buffers passed to a posting op are owned by the transport until the
 *    matching completion has been returned by ->poll().
 *  - The core serialises all calls on one transport handle; transports do
 *    not need locks of their own.
 */
#ifndef RIPC_PROV_H
#define RIPC_PROV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define RIPC_ADDR_MAX 112 /* bytes of an endpoint address blob */

enum ripc_prov_id {
	RIPC_PROV_SHM = 0,
	RIPC_PROV_VERBS = 1,
	RIPC_PROV_TCP = 2,
	RIPC_PROV_MAX
};

/* Remote access rights of a registration. */
#define RIPC_ACC_REMOTE_READ 0x1u
#define RIPC_ACC_REMOTE_WRITE 0x2u
#define RIPC_ACC_LOCAL 0x4u /* local send/recv/read/write source or sink */

/* Completion kinds. */
enum ripc_cqe_kind {
	RIPC_CQE_RECV = 1,
	RIPC_CQE_SEND,
	RIPC_CQE_READ,
	RIPC_CQE_WRITE,
};

struct ripc_cqe {
	void *ctx;          /* as passed to the posting op */
	int kind;           /* enum ripc_cqe_kind */
	int err;            /* 0 or negative errno */
	size_t len;         /* bytes received (RECV) */
};

/* What the transport reports about itself after ->open(). */
struct ripc_prov_attr {
	const char *name;        /* "shm", "tcp", "verbs" */
	char fabric_name[64];    /* libfabric provider string actually used */
	size_t inject_size;      /* sends up to this size need no completion */
	size_t max_msg_size;     /* largest single send/RMA */
	size_t tx_depth;         /* outstanding transmit ops we may post */
	size_t rx_depth;         /* receives we may keep posted */
	unsigned key_bytes;      /* significant bytes of an MR key (4 or 8) */
	bool mr_local;           /* local buffers need registration + desc */
	bool mr_virt_addr;       /* RMA addresses are VAs, else 0-based */
	bool mr_prov_key;        /* provider chooses keys */
	bool same_host_only;     /* reaches only processes on this host */
	bool checks_rma_keys;    /* target verifies key/bounds (not shm fast) */
	bool costly_poll;        /* a CQ poll makes syscalls (tcp: sockets) */
	/* A send above inject_size is slow (shm 1.17 moves it by CMA, the
	 * receiver answering before it completes): the core sends messages
	 * up to RIPC_FRAG_MAX as trains of injects instead (frag.c). */
	bool frag_injects;
	/* An RMA read needs the data owner's progress, and one to a process
	 * that ended stays in flight for ever and stalls the endpoint's later
	 * reads and sends (shm without CMA: libfabric 1.17 completes shm's
	 * response queue in order).  The core then reaches same-host peers
	 * over another transport when it has one. */
	bool reads_need_peer;
	/* Largest single RDMA read or write the core should post; a bigger
	 * item is moved as several, in flight together (0: the core's
	 * default, RIPC_RMA_CHUNK_DEFAULT).  RIPC_READ_CHUNK overrides it. */
	size_t rma_chunk;
	int wait_fd;             /* fd to poll() before ->poll(), or -1 */
};

/* Options the core passes to ->open(). */
struct ripc_prov_opts {
	const char *src_addr;    /* tcp: local IP address to bind, or NULL */
	bool shm_checked;        /* shm: avoid the unchecked fast RMA path */
	bool tcp_native;         /* tcp: libfabric 1.17's net, not rxm */
	unsigned force_mr_bits;  /* test hook: act as if these RIPC_MRF_* */
};

#define RIPC_MRF_LOCAL 0x1u
#define RIPC_MRF_PROV_KEY 0x2u
#define RIPC_MRF_KEY32 0x4u

struct ripc_prov_mr {
	void *handle;   /* transport's registration object */
	void *desc;     /* local descriptor (NULL unless mr_local) */
	uint64_t key;   /* key peers must use */
	uint64_t base;  /* RMA address of the first byte, as peers use it */
};

struct ripc_prov; /* opaque transport handle */

/* What a watchdog op asks its caller to wake: processes by pid. */
#define RIPC_WD_WAKE_MAX 8
struct ripc_wd_wake {
	unsigned n;
	int32_t pid[RIPC_WD_WAKE_MAX];
};

struct ripc_prov_ops {
	/* Open the transport: fabric, domain, one RDM endpoint, AV, CQ.
	 * Blocking (libfabric setup only).  Returns -ENODEV when the
	 * provider or device is absent, so the caller can skip it. */
	int (*open)(const struct ripc_prov_opts *opts, struct ripc_prov **out,
		    struct ripc_prov_attr *attr);

	/* Copy the endpoint's address blob into addr (*len in: room, out:
	 * bytes).  Returns -ENOSPC if it does not fit. */
	int (*getname)(struct ripc_prov *p, void *addr, size_t *len);

	/* Insert a peer address; *peer receives the handle to send to.
	 * Inserting the same address twice yields the same handle.
	 * Blocking (shm maps the peer's region).  -ESRCH: the transport can
	 * tell that the peer's endpoint is closed (shm: its region file is
	 * gone), and nothing was inserted. */
	int (*av_insert)(struct ripc_prov *p, const void *addr, size_t len,
			 uint64_t *peer);

	/* Forget a peer (after it was found dead).  In-flight ops to it may
	 * complete with errors afterwards. */
	int (*av_remove)(struct ripc_prov *p, uint64_t peer);

	/* Post a receive buffer.  Ownership passes until its RECV cqe. */
	int (*post_recv)(struct ripc_prov *p, void *buf, size_t len,
			 void *desc, void *ctx);

	/* Send len <= inject_size bytes; the buffer may be reused at once and
	 * no completion is generated. */
	int (*inject)(struct ripc_prov *p, uint64_t peer, const void *buf,
		      size_t len);

	/* Send a message gathered from iov[0..cnt) (cnt <= 4); completion
	 * with ctx.  desc[] may be NULL when !mr_local. */
	int (*send)(struct ripc_prov *p, uint64_t peer, const struct iovec *iov,
		    void **desc, size_t cnt, void *ctx);

	/* RMA read len bytes from the peer's (raddr, key) into buf. */
	int (*read)(struct ripc_prov *p, uint64_t peer, void *buf, size_t len,
		    void *desc, uint64_t raddr, uint64_t key, void *ctx);

	/* RMA write len bytes from buf to the peer's (raddr, key).  Once the
	 * WRITE completion is returned, a message sent afterwards on the same
	 * transport to the same peer is seen by the peer only after the
	 * written bytes are in place (tcp: one ordered stream; shm fast path
	 * and verbs RC: completion means placed). */
	int (*write)(struct ripc_prov *p, uint64_t peer, const void *buf,
		     size_t len, void *desc, uint64_t raddr, uint64_t key,
		     void *ctx);

	/* Register [buf, buf+len) with RIPC_ACC_* rights.  `key` is the
	 * requested key (ignored when mr_prov_key).  Returns -EEXIST when
	 * the requested key is taken. */
	int (*mr_reg)(struct ripc_prov *p, void *buf, size_t len,
		      unsigned access, uint64_t key, struct ripc_prov_mr *mr);

	/* Close a registration.  Later remote accesses fail at the peer
	 * (except on shm's unchecked fast path, see ripc(7)). */
	void (*mr_close)(struct ripc_prov *p, struct ripc_prov_mr *mr);

	/* Read up to max completions.  Returns the number read (>= 0) or a
	 * negative errno for a fatal transport error. Never blocks. */
	int (*poll)(struct ripc_prov *p, struct ripc_cqe *cqe, int max);

	/* Returns true when it is safe to sleep on attr.wait_fd now (the
	 * libfabric fi_trywait rule); false means poll again first. */
	bool (*trywait)(struct ripc_prov *p);

	/* Close everything; cancels outstanding ops without completions. */
	void (*close)(struct ripc_prov *p);

	/* Optional (NULL if not needed).  Repairs state that a peer killed at
	 * the wrong moment leaves behind in memory shared with it, so that
	 * this process does not wait for it forever.  The exception to the
	 * serialisation rule: called about every 200 ms from a thread that
	 * holds no library lock (the thread that is stuck may hold it), so it
	 * must touch only such shared state, never the handle's own.
	 * Returns true while it watches something that may need repairing
	 * soon (a lock seen held, not yet released): the caller then keeps
	 * calling it about every 200 ms, idle or not, instead of every few
	 * seconds.  Adds to *wake (up to RIPC_WD_WAKE_MAX) the processes of
	 * this host that only they can repair, and whose own watchdog may be
	 * in its long period because they are idle: the caller wakes them
	 * (their doorbell), without taking the library lock either. */
	bool (*watchdog)(struct ripc_prov *p, struct ripc_wd_wake *wake);
};

/* Transports compiled into the library, indexed by enum ripc_prov_id. */
extern const struct ripc_prov_ops *const ripc__prov_table[RIPC_PROV_MAX];
extern const char *const ripc__prov_names[RIPC_PROV_MAX];

#endif /* RIPC_PROV_H */
