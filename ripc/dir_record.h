/*
 * What the service directory stores (ripc_protocol(7), DIRECTORY): the
 * data of a directory node, and the names the engines give their nodes.
 *
 * Node data is untrusted input: any process that can write to the
 * directory can write anything there.  The decoder checks every field and
 * refuses whatever the documentation does not allow; it has no other
 * dependency than this header, so that the unit tests and the fuzzer
 * reach it without a ZooKeeper client library.
 */
#ifndef RIPC_DIR_RECORD_H
#define RIPC_DIR_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "registry.h"

#define RIPC_DIR_REC_MAGIC 0x52445052u /* bytes "RPDR" */
#define RIPC_DIR_REC_VERSION 1
#define RIPC_DIR_REC_GROUP_LEN 8 /* a group node: the header alone */
#define RIPC_DIR_REC_HDR 40      /* a holder record without addresses */
#define RIPC_DIR_REC_MAX                                                     \
	(RIPC_DIR_REC_HDR + RIPC_PROV_MAX * (2 + RIPC_ADDR_MAX))

enum ripc_dir_rec_kind {
	RIPC_DIR_REC_HOLDER = 1, /* a process holding (or member of) an ID */
	RIPC_DIR_REC_GROUP = 2,  /* the node of a multicast ID */
};

struct ripc_dir_rec {
	uint8_t kind; /* enum ripc_dir_rec_kind */
	struct ripc_reg_proc_info info; /* HOLDER only */
	uint64_t starttime;             /* HOLDER only: with info.pid */
};

/* Encode into buf (RIPC_DIR_REC_MAX bytes); returns the length. */
size_t ripc__dir_rec_encode(const struct ripc_dir_rec *r, uint8_t *buf);
/* Validate and decode: the kind, or -EBADMSG (r is then zeroed). */
int ripc__dir_rec_decode(const uint8_t *buf, size_t len,
			 struct ripc_dir_rec *r);

/* The name of a multicast member's node: its incarnation as 16 lowercase
 * hex digits.  buf: 17 bytes. */
void ripc__dir_member_name(uint64_t inc, char *buf);
/* Parse such a name; false unless it is exactly 16 lowercase hex digits
 * of a non-zero number. */
bool ripc__dir_member_parse(const char *name, uint64_t *inc);

/* Split "scheme://where": 0, or -EINVAL (no "://", empty or overlong
 * scheme). */
int ripc__dir_url_split(const char *url, char *scheme, size_t slen,
			const char **where);
/* Split where = "host:port,host:port,.../chroot" into the host list and
 * the chroot ("" or "/a/b", no trailing slash).  Hosts are names or IPv4
 * addresses ([A-Za-z0-9.-]) or bracketed IPv6 addresses, each with a port
 * of 1 to 65535; at most 32 of them.  Chroot components are made of
 * [A-Za-z0-9._-], none is "." or "..".  0 or -EINVAL. */
int ripc__dir_where_split(const char *where, char *hosts, size_t hlen,
			  char *chroot, size_t clen);

#endif
