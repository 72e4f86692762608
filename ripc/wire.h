/*
 * The libripc wire protocol (documented in ripc_protocol(7)).
 *
 * Every message starts with a 48-byte little-endian header, followed by
 * sections whose sizes follow from the header's counts; every section
 * starts 8-byte aligned:
 *
 *   header            48 bytes
 *   short lengths     nshort x u32, padded to 8
 *   long descriptors  nlong x 24 bytes {u64 addr, u64 key, u32 len, u32 aux}
 *   return buffers    nret x 24 bytes (same layout)
 *   sender address    if RIPC_WF_ADDR: u8 transport, u8 len, len bytes,
 *                     padded to 8
 *   short payload     each item padded to 8 bytes
 *
 * The decoder (ripc__wire_decode) is the only code that reads received
 * bytes; it checks every field before anything else looks at them.
 */
#ifndef RIPC_WIRE_H
#define RIPC_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ripc.h"
#include "ripc_prov.h"

#define RIPC_WIRE_MAGIC 0x5249u /* u16 0x5249: bytes 0x49 0x52 ("IR") */
#define RIPC_WIRE_VERSION 1
#define RIPC_WIRE_HDR 48
#define RIPC_WIRE_DESC 24

enum ripc_wire_type {
	RIPC_MT_SHORT = 1,  /* short items (+ return buffer offers) */
	RIPC_MT_LONG = 2,   /* long descriptors (+ return buffer offers) */
	RIPC_MT_DONE = 3,   /* receiver -> long sender: pull finished */
	RIPC_MT_RETURN = 4, /* items written into the receiver's return bufs */
	RIPC_MT_NACK = 5,   /* message refused (status says why) */
	RIPC_MT_TYPE_MAX,
	/* Framing below the decoder (frag.c), never a whole message: the
	 * continuation of a message sent in fragments.  Header: src_inc,
	 * dst_inc, length = 48 + the bytes it carries, status = their
	 * offset in the whole message; every other field 0. */
	RIPC_MT_FRAG = RIPC_MT_TYPE_MAX
};

#define RIPC_WF_ADDR 0x1u  /* sender's address section present */
#define RIPC_WF_MCAST 0x2u /* sent to a multicast service ID */
/* SHORT only: the message also says DONE (status 0) for the long send
 * whose cookie it carries: a receiver's answer takes its done message
 * along (pull.c) instead of one message more. */
#define RIPC_WF_DONE 0x4u
#define RIPC_WF_ALL (RIPC_WF_ADDR | RIPC_WF_MCAST | RIPC_WF_DONE)
/* Framing (frag.c), not part of a whole message: the first fragment of a
 * message whose header's length is the whole message's; RIPC_MT_FRAG
 * messages from the same process carry the rest, in order.  The receiver
 * clears it before the message reaches the decoder, which refuses it. */
#define RIPC_WF_FRAG 0x8u

struct ripc_wire_desc {
	uint64_t addr;
	uint64_t key;
	uint32_t len;
	uint32_t aux; /* RETURN: the item's position in the reply; else 0 */
};

/* Largest message: header + all sections at their limits. */
#define RIPC_WIRE_MAX                                                        \
	(RIPC_WIRE_HDR + 4 * RIPC_MAX_ITEMS + RIPC_WIRE_DESC * RIPC_MAX_ITEMS + \
	 RIPC_WIRE_DESC * RIPC_MAX_RETURN_BUFS + 8 + RIPC_ADDR_MAX +         \
	 RIPC_SHORT_MAX + 8 * RIPC_MAX_ITEMS)

/* A message to encode. */
struct ripc_wire_out {
	uint8_t type;
	uint16_t flags;
	uint16_t src, dst;
	uint64_t src_inc, dst_inc;
	uint32_t status;
	uint64_t cookie;
	uint16_t nshort, nlong, nret;
	void *const *short_buf; /* nshort items */
	const uint32_t *short_len;
	const struct ripc_wire_desc *long_desc;
	const struct ripc_wire_desc *ret_desc;
	uint8_t addr_tp;
	uint8_t addr_len;
	const void *addr;
};

/* A validated received message; pointers point into the receive buffer. */
struct ripc_wire_in {
	uint8_t type;
	uint16_t flags;
	uint16_t src, dst;
	uint64_t src_inc, dst_inc;
	uint32_t status;
	uint64_t cookie;
	uint16_t nshort, nlong, nret;
	uint32_t short_len[RIPC_MAX_ITEMS];
	void *short_ptr[RIPC_MAX_ITEMS];
	struct ripc_wire_desc long_desc[RIPC_MAX_ITEMS];
	struct ripc_wire_desc ret_desc[RIPC_MAX_RETURN_BUFS];
	uint8_t addr_tp, addr_len;
	const uint8_t *addr;
};

/* Bytes the encoded message will take, or 0 if `m` breaks a limit. */
size_t ripc__wire_size(const struct ripc_wire_out *m);
/* Encode into buf (room >= ripc__wire_size(m)); returns bytes written. */
size_t ripc__wire_encode(const struct ripc_wire_out *m, void *buf);
/* The same, for a caller that already has total = ripc__wire_size(m). */
size_t ripc__wire_encode_sized(const struct ripc_wire_out *m, void *buf,
			       size_t total);
/* Only what comes before the short items' data (header, item sizes,
 * descriptors, address; room >= total - their aligned sizes); returns its
 * length.  With ripc__wire_gather, a sender builds the encoding piece by
 * piece, straight from the caller's items (txq.c: trains). */
size_t ripc__wire_encode_head(const struct ripc_wire_out *m, void *buf,
			      size_t total);
/* A position in a message's short-item data as encoded (each item padded
 * to 8 bytes); starts zeroed but for m. */
struct ripc_wire_cursor {
	const struct ripc_wire_out *m;
	unsigned item; /* the item the next byte comes from */
	size_t at;     /* bytes of it (and its padding) already gathered */
};
/* Copy the next n bytes of that data to dst and advance; stops early
 * only at the data's end. */
void ripc__wire_gather(struct ripc_wire_cursor *c, void *dst, size_t n);

/* Reasons a message is refused (for statistics and tests). */
enum ripc_wire_err {
	RIPC_WIRE_OK = 0,
	RIPC_WIRE_SHORT_HDR,   /* fewer bytes than a header */
	RIPC_WIRE_MAGIC_BAD,
	RIPC_WIRE_VERSION_BAD,
	RIPC_WIRE_TYPE_BAD,
	RIPC_WIRE_FLAGS_BAD,
	RIPC_WIRE_LEN_BAD,     /* header length != bytes received */
	RIPC_WIRE_COUNT_BAD,   /* counts over limits or not allowed for type */
	RIPC_WIRE_ITEM_BAD,    /* zero/oversized item, sizes don't add up */
	RIPC_WIRE_DESC_BAD,    /* zero length, reserved bits, wrap-around */
	RIPC_WIRE_SERVICE_BAD, /* service ID 65535 where one is required */
	RIPC_WIRE_ADDR_BAD,
	RIPC_WIRE_ERR_MAX
};

/* Validate and decode `len` received bytes.  Returns RIPC_WIRE_OK and
 * fills *m, or an error and leaves *m unspecified. */
int ripc__wire_decode(void *buf, size_t len, struct ripc_wire_in *m);
const char *ripc__wire_strerror(int err);

/* ---- framing: a message sent in fragments (frag.c) ------------------
 * A message a little above the inject size of a transport that moves
 * larger sends slowly (shm: by CMA) goes as a train of injects: the
 * first fragment is the message's first bytes, its header flagged
 * RIPC_WF_FRAG; each RIPC_MT_FRAG continuation carries a 48-byte header
 * and the next bytes.  Fragments of one message leave a process back to
 * back on one ordered channel, so the receiver keys a message being
 * assembled by the sender's incarnation alone. */
struct ripc_wire_frag {
	uint64_t src_inc;
	uint32_t total; /* FIRST: the whole message's length */
	uint32_t off;   /* NEXT: where its bytes go in the whole message */
	uint32_t len;   /* FIRST: bytes received; NEXT: bytes carried */
};
enum ripc_wire_frag_kind {
	RIPC_FRAG_NONE = 0, /* not framing: a whole message for the decoder */
	RIPC_FRAG_FIRST,
	RIPC_FRAG_NEXT,
	RIPC_FRAG_BAD,      /* framing that breaks the rules above */
};

/* Cheap test on every received message: does it need the framing layer?
 * (Reads only bytes inside `len`.) */
static inline bool ripc__wire_maybe_frag(const void *buf, size_t len)
{
	const uint8_t *p = buf;

	return len >= RIPC_WIRE_HDR &&
	       (p[3] == RIPC_MT_FRAG || (p[34] & RIPC_WF_FRAG));
}
/* Classify and check a received message's framing; max_total bounds the
 * whole message a first fragment may announce. */
enum ripc_wire_frag_kind ripc__wire_frag_peek(const void *buf, size_t len,
					      size_t max_total,
					      struct ripc_wire_frag *f);
/* Set or clear RIPC_WF_FRAG in an encoded header. */
void ripc__wire_frag_mark(void *buf, bool first);
/* Encode a continuation carrying n bytes at `data`, offset off, into buf
 * (room >= RIPC_WIRE_HDR + n); returns its length. */
size_t ripc__wire_frag_encode(void *buf, uint64_t src_inc, uint64_t dst_inc,
			      uint32_t off, const void *data, uint32_t n);
/* Only a continuation's header, for n bytes that follow it in buf. */
void ripc__wire_frag_head(void *buf, uint64_t src_inc, uint64_t dst_inc,
			  uint32_t off, uint32_t n);

#endif
