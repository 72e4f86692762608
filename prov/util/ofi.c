/*
 * Shared libfabric plumbing: getinfo with the mr_mode rules, domain, one
 * RDM endpoint, AV, CQ, memory registration, send/inject/read/write, CQ
 * polling and errno translation.  See ripc_prov.h for each op's contract
 * and ../shared/ref/libfabric-1.17.md for why things are done this way.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "log.h"
#include "ofi.h"

#define RIPC_FI_API FI_VERSION(1, 17)

struct ripc_prov {
	const struct ripc_ofi_row *row;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_wait *waitset; /* row->trywait_keeps_signal, else NULL */
	uint64_t mr_mode;     /* what the provider requires */
	unsigned force;       /* RIPC_MRF_* test emulation */
	bool emulate_prov_key;
	bool native;          /* row->native_legacy / _current applies */
};

/* The end of a native RDM-over-TCP process's address (ofi.h, native_*):
 * four bytes that no sockaddr ends with (sockaddr_in ends in zeros). */
static const char native_tag[4] = { 'N', 'T', 'V', '1' };

/* libfabric returns negative FI_E* codes; the standard ones equal errno
 * values, the fabric-specific ones are mapped here. */
static int ofi_errno(int ret)
{
	if (ret >= 0)
		return ret;
	switch (-ret) {
	case FI_ENOKEY:
		return -EEXIST;
	case FI_ETRUNC:
		return -EMSGSIZE;
	case FI_EAVAIL:
	case FI_EOTHER:
	case FI_ENOCQ:
	case FI_EOPBADSTATE:
	case FI_EBADFLAGS:
	case FI_ENOEQ:
	case FI_EDOMAIN:
		return -EIO;
	default:
		return (-ret < FI_ERRNO_OFFSET) ? ret : -EIO;
	}
}

static void ofi_close_all(struct ripc_prov *p)
{
	if (p->ep)
		fi_close(&p->ep->fid);
	if (p->av)
		fi_close(&p->av->fid);
	if (p->cq)
		fi_close(&p->cq->fid);
	if (p->waitset)
		fi_close(&p->waitset->fid);
	if (p->domain)
		fi_close(&p->domain->fid);
	if (p->fabric)
		fi_close(&p->fabric->fid);
	if (p->info)
		fi_freeinfo(p->info);
	free(p);
}

static const char *row_prov_name(const struct ripc_ofi_row *row)
{
	return fi_version() >= FI_VERSION(1, 18) ? row->prov_current
						 : row->prov_legacy;
}

/* Before libfabric's first fi_getinfo: the rows' settings, where the
 * environment does not say otherwise (setenv does not overwrite). */
static void env_defaults_once(void)
{
	for (const struct ripc_ofi_row *const *r = ripc__ofi_rows; *r; r++)
		for (const char *const *e = (*r)->env_defaults; e && *e; e++) {
			const char *eq = strchr(*e, '=');
			char name[64];

			if (!eq || (size_t)(eq - *e) >= sizeof(name))
				continue;
			memcpy(name, *e, (size_t)(eq - *e));
			name[eq - *e] = 0;
			if (!getenv(name)) {
				setenv(name, eq + 1, 0);
				ripc__log(RIPC_LOG_DEBUG, "%s: %s", (*r)->name,
					  *e);
			}
		}
}

/*
 * libfabric grows an AV's entry pool at its first insert (1.17's util_av:
 * 1 024 entries at once, 112 KiB zeroed for shm).  Left to the first peer,
 * that fell in a new process's first exchange: ~28 of its ~35 page faults
 * from the first send to the reply, ~5 us each on a VM, while the reply
 * waited (perf_notes.md, first contact).  Inserting our own address and
 * removing it again does it here.  Best effort: a provider that refuses
 * its own address just grows its pool later.
 */
static void warm_av(struct ripc_prov *p)
{
	char addr[256];
	size_t len = sizeof(addr);
	fi_addr_t fa = FI_ADDR_NOTAVAIL;

	if (fi_getname(&p->ep->fid, addr, &len) || len > sizeof(addr))
		return;
	if (fi_av_insert(p->av, addr, 1, &fa, 0, NULL) == 1 &&
	    fa != FI_ADDR_NOTAVAIL)
		(void)fi_av_remove(p->av, &fa, 1, 0);
}

int ripc__ofi_open(const struct ripc_ofi_row *row,
		   const struct ripc_prov_opts *opts, struct ripc_prov **out,
		   struct ripc_prov_attr *attr)
{
	static pthread_once_t env_once = PTHREAD_ONCE_INIT;
	struct fi_info *hints;
	struct ripc_prov *p;
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_attr cq_attr = { 0 };
	const char *node = NULL;
	uint64_t flags = 0;
	int ret;

	p = calloc(1, sizeof(*p));
	hints = fi_allocinfo();
	if (!p || !hints) {
		free(p);
		fi_freeinfo(hints);
		return -ENOMEM;
	}
	p->row = row;
	p->force = opts->force_mr_bits;
	pthread_once(&env_once, env_defaults_once);

	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA;
	hints->mode = 0;
	hints->domain_attr->mr_mode = row->mr_mode_offer;
	if (row->unchecked_fast_rma && opts->shm_checked)
		hints->domain_attr->mr_mode &= ~(uint64_t)FI_MR_VIRT_ADDR;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	/* libripc drives progress itself.  With automatic data progress
	 * (which rxm's passthrough offers first) rxm starts a connection
	 * thread waiting in fi_eq_sread; a SIGSTOP/SIGCONT makes that wait
	 * return EINTR, whatever the signal mask (signal(7)), and the thread
	 * ends for good: the process never accepts a connection again
	 * (docs/FAULTS.md). */
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	/* Per-sender message order is part of the libripc contract. */
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	hints->fabric_attr->prov_name = strdup(row_prov_name(row));
	if (row->bind_src_addr && opts->src_addr && *opts->src_addr) {
		node = opts->src_addr;
		flags = FI_SOURCE;
	}

	ret = fi_getinfo(RIPC_FI_API, node, NULL, flags, hints, &p->info);
	fi_freeinfo(hints);
	if (ret) {
		ripc__log(RIPC_LOG_INFO, "%s: fi_getinfo(%s): %s", row->name,
			  row_prov_name(row), fi_strerror(-ret));
		free(p);
		return ret == -FI_ENODATA ? -ENODEV : ofi_errno(ret);
	}
	p->mr_mode = p->info->domain_attr->mr_mode;
	p->native = fi_version() >= FI_VERSION(1, 18) ? row->native_current
						      : row->native_legacy;

	if ((ret = fi_fabric(p->info->fabric_attr, &p->fabric, NULL)) ||
	    (ret = fi_domain(p->fabric, p->info, &p->domain, NULL)) ||
	    (ret = fi_endpoint(p->domain, p->info, &p->ep, NULL)) ||
	    (ret = fi_av_open(p->domain, &av_attr, &p->av, NULL)))
		goto fail;
	cq_attr.format = FI_CQ_FORMAT_MSG;
	cq_attr.size = p->info->tx_attr->size + p->info->rx_attr->size;
	cq_attr.wait_obj = row->wait_fd ? FI_WAIT_FD : FI_WAIT_NONE;
	if (row->wait_fd && row->trywait_keeps_signal) {
		struct fi_wait_attr wait_attr = { .wait_obj = FI_WAIT_FD };

		if ((ret = fi_wait_open(p->fabric, &wait_attr, &p->waitset)))
			goto fail;
		cq_attr.wait_obj = FI_WAIT_SET;
		cq_attr.wait_set = p->waitset;
	}
	if ((ret = fi_cq_open(p->domain, &cq_attr, &p->cq, NULL)) ||
	    (ret = fi_ep_bind(p->ep, &p->av->fid, 0)) ||
	    (ret = fi_ep_bind(p->ep, &p->cq->fid, FI_TRANSMIT | FI_RECV)) ||
	    (ret = fi_enable(p->ep)))
		goto fail;
	if (row->warm_av)
		warm_av(p);

	memset(attr, 0, sizeof(*attr));
	attr->name = row->name;
	snprintf(attr->fabric_name, sizeof(attr->fabric_name), "%s",
		 p->info->fabric_attr->prov_name);
	attr->inject_size = p->info->tx_attr->inject_size;
	attr->max_msg_size = p->info->ep_attr->max_msg_size;
	attr->tx_depth = p->info->tx_attr->size;
	attr->rx_depth = p->info->rx_attr->size;
	attr->key_bytes = p->info->domain_attr->mr_key_size;
	if (attr->key_bytes == 0 || attr->key_bytes > 8)
		attr->key_bytes = 8;
	attr->mr_local = (p->mr_mode & FI_MR_LOCAL) ||
			 (p->force & RIPC_MRF_LOCAL);
	attr->mr_virt_addr = p->mr_mode & FI_MR_VIRT_ADDR;
	attr->mr_prov_key = (p->mr_mode & FI_MR_PROV_KEY) ||
			    (p->force & RIPC_MRF_PROV_KEY);
	p->emulate_prov_key = !(p->mr_mode & FI_MR_PROV_KEY) &&
			      (p->force & RIPC_MRF_PROV_KEY);
	if (p->force & RIPC_MRF_KEY32)
		attr->key_bytes = 4;
	attr->same_host_only = row->same_host_only;
	attr->frag_injects = row->frag_injects;
	attr->rma_chunk = row->rma_chunk;
	attr->costly_poll = row->costly_poll;
	attr->checks_rma_keys =
		!(row->unchecked_fast_rma && attr->mr_virt_addr);
	attr->wait_fd = -1;
	if (row->wait_fd) {
		int fd;

		if (fi_control(p->waitset ? &p->waitset->fid : &p->cq->fid,
			       FI_GETWAIT, &fd) == 0)
			attr->wait_fd = fd;
	}
	*out = p;
	return 0;
fail:
	ripc__log(RIPC_LOG_WARN, "%s: libfabric setup failed: %s", row->name,
		  fi_strerror(-ret));
	ofi_close_all(p);
	return ofi_errno(ret);
}

int ripc__ofi_getname(struct ripc_prov *p, void *addr, size_t *len)
{
	size_t tag = p->native ? sizeof(native_tag) : 0;
	size_t room = *len;
	int ret;

	if (room < tag)
		return -ENOSPC;
	*len = room - tag;
	ret = fi_getname(&p->ep->fid, addr, len);
	if (ret == -FI_ETOOSMALL || *len > room - tag)
		return -ENOSPC;
	if (ret)
		return ofi_errno(ret);
	memcpy((char *)addr + *len, native_tag, tag);
	*len += tag;
	return 0;
}

/* Does the address carry the native tag (ripc__ofi_getname)? */
static bool has_native_tag(const void *addr, size_t len)
{
	return len > sizeof(native_tag) &&
	       !memcmp((const char *)addr + len - sizeof(native_tag),
		       native_tag, sizeof(native_tag));
}

/* For a row with a region_prefix: does the region file the address
 * names exist?  false only when it surely does not (ENOENT); an address
 * that names no plain file there is left to the provider to refuse. */
static bool region_present(const struct ripc_ofi_row *row, const void *addr,
			   size_t len)
{
	size_t plen = strlen(row->region_prefix);
	char name[256], path[sizeof(name) + 16];

	if (len == 0 || len >= sizeof(name))
		return true;
	memcpy(name, addr, len);
	name[len] = 0;
	if (strncmp(name, row->region_prefix, plen) || !name[plen] ||
	    strchr(name + plen, '/'))
		return true;
	snprintf(path, sizeof(path), "/dev/shm/%s", name + plen);
	return access(path, F_OK) == 0 || errno != ENOENT;
}

int ripc__ofi_av_insert(struct ripc_prov *p, const void *addr, size_t len,
			 uint64_t *peer)
{
	fi_addr_t fa = FI_ADDR_NOTAVAIL;
	int ret;

	/* Its endpoint is closed, its process most likely gone: inserting
	 * it would leave a node in libfabric's name table (ofi.h).  The file
	 * can still go between this look and the insert; that leaves one
	 * node, where inserting every late peer left one for each. */
	if (p->row->region_prefix && !region_present(p->row, addr, len))
		return -ESRCH;
	/* A peer of the other TCP protocol: neither could reach the other
	 * (a message may even get through one way, its answer never). */
	if (p->native != has_native_tag(addr, len)) {
		ripc__log_rl(RIPC_LOG_WARN,
			     "%s: a peer uses %s, this process %s: they cannot "
			     "talk (RIPC_TCP_NATIVE must be the same in "
			     "every process, see ripc(7) TRANSPORTS)",
			     p->row->name,
			     p->native ? "tcp;ofi_rxm" : "libfabric's native tcp",
			     p->native ? "libfabric's native tcp" : "tcp;ofi_rxm");
		return -EPROTONOSUPPORT;
	}
	if (p->native)
		len -= sizeof(native_tag);
	/* Otherwise the provider knows its address format's length. */
	ret = fi_av_insert(p->av, addr, 1, &fa, 0, NULL);
	if (ret != 1 || fa == FI_ADDR_NOTAVAIL)
		return ret < 0 ? ofi_errno(ret) : -EINVAL;
	*peer = fa;
	return 0;
}

int ripc__ofi_av_remove(struct ripc_prov *p, uint64_t peer)
{
	fi_addr_t fa = peer;

	return ofi_errno(fi_av_remove(p->av, &fa, 1, 0));
}

int ripc__ofi_post_recv(struct ripc_prov *p, void *buf, size_t len,
			 void *desc, void *ctx)
{
	return ofi_errno(fi_recv(p->ep, buf, len, desc, FI_ADDR_UNSPEC, ctx));
}

int ripc__ofi_inject(struct ripc_prov *p, uint64_t peer, const void *buf,
		      size_t len)
{
	return ofi_errno(fi_inject(p->ep, buf, len, peer));
}

int ripc__ofi_send(struct ripc_prov *p, uint64_t peer,
		    const struct iovec *iov, void **desc, size_t cnt,
		    void *ctx)
{
	return ofi_errno(fi_sendv(p->ep, iov, desc, cnt, peer, ctx));
}

int ripc__ofi_read(struct ripc_prov *p, uint64_t peer, void *buf,
		    size_t len, void *desc, uint64_t raddr, uint64_t key,
		    void *ctx)
{
	return ofi_errno(
		fi_read(p->ep, buf, len, desc, peer, raddr, key, ctx));
}

int ripc__ofi_write(struct ripc_prov *p, uint64_t peer, const void *buf,
		     size_t len, void *desc, uint64_t raddr, uint64_t key,
		     void *ctx)
{
	return ofi_errno(
		fi_write(p->ep, buf, len, desc, peer, raddr, key, ctx));
}

int ripc__ofi_mr_reg(struct ripc_prov *p, void *buf, size_t len,
		      unsigned access, uint64_t key, struct ripc_prov_mr *mr)
{
	struct fid_mr *fmr;
	uint64_t acc = 0;
	int ret;

	if (access & RIPC_ACC_REMOTE_READ)
		acc |= FI_REMOTE_READ;
	if (access & RIPC_ACC_REMOTE_WRITE)
		acc |= FI_REMOTE_WRITE;
	if (access & RIPC_ACC_LOCAL)
		acc |= FI_SEND | FI_RECV | FI_READ | FI_WRITE;
	if (p->mr_mode & FI_MR_PROV_KEY)
		key = 0;
	else if (p->emulate_prov_key) {
		/* Test emulation of a provider that picks 32-bit keys. */
		uint32_t k;

		if (getrandom(&k, sizeof(k), 0) != sizeof(k))
			return -EIO;
		key = k & 0x7fffffffu;
	}
	ret = fi_mr_reg(p->domain, buf, len, acc, 0, key, 0, &fmr, NULL);
	if (ret)
		return ofi_errno(ret);
	if (p->mr_mode & FI_MR_ENDPOINT) {
		if ((ret = fi_mr_bind(fmr, &p->ep->fid, 0)) ||
		    (ret = fi_mr_enable(fmr))) {
			fi_close(&fmr->fid);
			return ofi_errno(ret);
		}
	}
	mr->handle = fmr;
	mr->desc = fi_mr_desc(fmr);
	mr->key = fi_mr_key(fmr);
	mr->base = (p->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf
						  : 0;
	return 0;
}

void ripc__ofi_mr_close(struct ripc_prov *p, struct ripc_prov_mr *mr)
{
	(void)p;
	if (mr->handle)
		fi_close(&((struct fid_mr *)mr->handle)->fid);
	mr->handle = NULL;
}

int ripc__ofi_poll(struct ripc_prov *p, struct ripc_cqe *cqe, int max)
{
	struct fi_cq_msg_entry ent[16];
	int n, ret;

	if (max > 16)
		max = 16;
	n = fi_cq_read(p->cq, ent, max);
	if (n > 0) {
		for (int i = 0; i < n; i++) {
			cqe[i].ctx = ent[i].op_context;
			cqe[i].err = 0;
			cqe[i].len = ent[i].len;
			cqe[i].kind = (ent[i].flags & FI_RECV)	  ? RIPC_CQE_RECV
				      : (ent[i].flags & FI_READ)  ? RIPC_CQE_READ
				      : (ent[i].flags & FI_WRITE) ? RIPC_CQE_WRITE
								  : RIPC_CQE_SEND;
		}
		return n;
	}
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };

		ret = fi_cq_readerr(p->cq, &err, 0);
		if (ret != 1)
			return 0;
		/* Flags may be missing on error (verbs); the core knows the
		 * kind from its own context. */
		cqe[0].ctx = err.op_context;
		cqe[0].err = err.err ? -err.err : -EIO;
		cqe[0].len = 0;
		cqe[0].kind = (err.flags & FI_RECV) ? RIPC_CQE_RECV : 0;
		ripc__log_rl(RIPC_LOG_INFO, "%s: completion error: %s (%s)",
			     p->row->name, fi_strerror(err.err),
			     fi_cq_strerror(p->cq, err.prov_errno,
					    err.err_data, NULL, 0));
		return 1;
	}
	return ofi_errno(n);
}

bool ripc__ofi_trywait(struct ripc_prov *p)
{
	struct fid *f = &p->cq->fid;

	/* With no timeout, fi_wait resets the set's signal, runs the CQ's
	 * progress and reports whether it holds completions: 0 if it does,
	 * -FI_ETIMEDOUT if the fd may be slept on. */
	if (p->waitset)
		return fi_wait(p->waitset, 0) == -FI_ETIMEDOUT;
	return fi_trywait(p->fabric, &f, 1) == FI_SUCCESS;
}

void ripc__ofi_close(struct ripc_prov *p)
{
	ofi_close_all(p);
}
