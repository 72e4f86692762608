/*
 * Encoder and the one validating decoder of the wire protocol.  Layout and
 * rules: wire.h and ripc_protocol(7).  Nothing here trusts a received
 * byte: counts are checked against the limits before any size is derived
 * from them, so no size computation can overflow, and every section is
 * checked to lie inside the bytes actually received.
 */
#include <endian.h>
#include <string.h>

#include "wire.h"

static inline size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* Little-endian field access; on little-endian hosts these are plain
 * unaligned loads and stores. */
static inline void put16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

static inline uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static inline uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

/* Section sizes derived from counts that are already within limits. */
static size_t fixed_part(unsigned nshort, unsigned nlong, unsigned nret,
			 unsigned flags, unsigned addr_len)
{
	size_t n = RIPC_WIRE_HDR;

	n += align8(4 * (size_t)nshort);
	n += RIPC_WIRE_DESC * (size_t)(nlong + nret);
	if (flags & RIPC_WF_ADDR)
		n += align8(2 + (size_t)addr_len);
	return n;
}

size_t ripc__wire_size(const struct ripc_wire_out *m)
{
	size_t payload = 0, sum = 0;

	if (m->nshort > RIPC_MAX_ITEMS || m->nlong > RIPC_MAX_ITEMS ||
	    m->nret > RIPC_MAX_RETURN_BUFS)
		return 0;
	if (m->type == RIPC_MT_RETURN && m->nlong + m->nret > RIPC_MAX_ITEMS)
		return 0;
	if ((m->flags & RIPC_WF_ADDR) &&
	    (m->addr_len == 0 || m->addr_len > RIPC_ADDR_MAX))
		return 0;
	for (unsigned i = 0; i < m->nshort; i++) {
		sum += m->short_len[i];
		payload += align8(m->short_len[i]);
	}
	if (sum > RIPC_SHORT_MAX)
		return 0;
	return fixed_part(m->nshort, m->nlong, m->nret, m->flags,
			  m->addr_len) +
	       payload;
}

static uint8_t *put_desc(uint8_t *p, const struct ripc_wire_desc *d)
{
	put64(p, d->addr);
	put64(p + 8, d->key);
	put32(p + 16, d->len);
	put32(p + 20, d->aux);
	return p + RIPC_WIRE_DESC;
}

size_t ripc__wire_encode(const struct ripc_wire_out *m, void *buf)
{
	return ripc__wire_encode_sized(m, buf, ripc__wire_size(m));
}

/* Everything before the short items' data: header, item sizes,
 * descriptors, address.  Returns its length. */
size_t ripc__wire_encode_head(const struct ripc_wire_out *m, void *buf,
			      size_t total)
{
	uint8_t *p = buf;

	put16(p, RIPC_WIRE_MAGIC);
	p[2] = RIPC_WIRE_VERSION;
	p[3] = m->type;
	put16(p + 4, m->src);
	put16(p + 6, m->dst);
	put64(p + 8, m->src_inc);
	put64(p + 16, m->dst_inc);
	put32(p + 24, (uint32_t)total);
	put16(p + 28, m->nshort);
	put16(p + 30, m->nlong);
	put16(p + 32, m->nret);
	put16(p + 34, m->flags);
	put32(p + 36, m->status);
	put64(p + 40, m->cookie);
	p += RIPC_WIRE_HDR;

	for (unsigned i = 0; i < m->nshort; i++)
		put32(p + 4 * i, m->short_len[i]);
	if (m->nshort & 1)
		put32(p + 4 * m->nshort, 0);
	p += align8(4 * (size_t)m->nshort);
	for (unsigned i = 0; i < m->nlong; i++)
		p = put_desc(p, &m->long_desc[i]);
	for (unsigned i = 0; i < m->nret; i++)
		p = put_desc(p, &m->ret_desc[i]);
	if (m->flags & RIPC_WF_ADDR) {
		size_t n = align8(2 + (size_t)m->addr_len);

		memset(p, 0, n);
		p[0] = m->addr_tp;
		p[1] = m->addr_len;
		memcpy(p + 2, m->addr, m->addr_len);
		p += n;
	}
	return (size_t)(p - (uint8_t *)buf);
}

size_t ripc__wire_encode_sized(const struct ripc_wire_out *m, void *buf,
			       size_t total)
{
	uint8_t *p = (uint8_t *)buf + ripc__wire_encode_head(m, buf, total);

	for (unsigned i = 0; i < m->nshort; i++) {
		size_t n = m->short_len[i];

		if (n) /* a zero-length item may be NULL */
			memcpy(p, m->short_buf[i], n);
		memset(p + n, 0, align8(n) - n);
		p += align8(n);
	}
	return total;
}

void ripc__wire_gather(struct ripc_wire_cursor *c, void *dst, size_t n)
{
	const struct ripc_wire_out *m = c->m;
	uint8_t *d = dst;

	while (n && c->item < m->nshort) {
		size_t len = m->short_len[c->item];
		size_t span = align8(len) - c->at;
		size_t k = span < n ? span : n;

		if (c->at < len) {
			size_t data = len - c->at < k ? len - c->at : k;

			memcpy(d, (const uint8_t *)m->short_buf[c->item] + c->at,
			       data);
			memset(d + data, 0, k - data);
		} else {
			memset(d, 0, k); /* the item's padding */
		}
		d += k;
		n -= k;
		c->at += k;
		if (c->at == align8(len)) {
			c->item++;
			c->at = 0;
		}
	}
}

/* empty_ok: a long item of length 0, described as {0, 0, 0} (nothing was
 * registered for it, so it names no memory).  Return buffers are never
 * empty. */
static int get_desc(const uint8_t *p, struct ripc_wire_desc *d, bool empty_ok)
{
	d->addr = get64(p);
	d->key = get64(p + 8);
	d->len = get32(p + 16);
	d->aux = get32(p + 20);
	if (d->len == 0 && (!empty_ok || d->addr || d->key))
		return RIPC_WIRE_DESC_BAD;
	/* The peer's own address arithmetic must not wrap. */
	if (d->addr + (uint64_t)d->len < d->addr)
		return RIPC_WIRE_DESC_BAD;
	return RIPC_WIRE_OK;
}

/* In a RETURN message the aux fields of all descriptors are the items'
 * positions in the reply: a permutation of 0..n-1.  Elsewhere they are 0. */
static int check_aux(const struct ripc_wire_in *m)
{
	uint64_t seen = 0;
	unsigned n = m->nlong + m->nret;

	for (unsigned i = 0; i < n; i++) {
		const struct ripc_wire_desc *d =
			i < m->nlong ? &m->long_desc[i]
				     : &m->ret_desc[i - m->nlong];

		if (m->type != RIPC_MT_RETURN) {
			if (d->aux)
				return RIPC_WIRE_DESC_BAD;
			continue;
		}
		if (d->aux >= n || (seen & (1ull << d->aux)))
			return RIPC_WIRE_DESC_BAD;
		seen |= 1ull << d->aux;
	}
	return RIPC_WIRE_OK;
}

int ripc__wire_decode(void *buf, size_t len, struct ripc_wire_in *m)
{
	uint8_t *p = buf;
	size_t need, payload = 0, sum = 0;
	int err;

	if (len < RIPC_WIRE_HDR)
		return RIPC_WIRE_SHORT_HDR;
	if (get16(p) != RIPC_WIRE_MAGIC)
		return RIPC_WIRE_MAGIC_BAD;
	if (p[2] != RIPC_WIRE_VERSION)
		return RIPC_WIRE_VERSION_BAD;
	m->type = p[3];
	if (m->type == 0 || m->type >= RIPC_MT_TYPE_MAX)
		return RIPC_WIRE_TYPE_BAD;
	m->src = get16(p + 4);
	m->dst = get16(p + 6);
	m->src_inc = get64(p + 8);
	m->dst_inc = get64(p + 16);
	if (get32(p + 24) != len)
		return RIPC_WIRE_LEN_BAD;
	m->nshort = get16(p + 28);
	m->nlong = get16(p + 30);
	m->nret = get16(p + 32);
	m->flags = get16(p + 34);
	m->status = get32(p + 36);
	m->cookie = get64(p + 40);
	if (m->flags & ~RIPC_WF_ALL)
		return RIPC_WIRE_FLAGS_BAD;
	/* A done message riding in a short one: unicast, with a cookie. */
	if ((m->flags & RIPC_WF_DONE) &&
	    (m->type != RIPC_MT_SHORT || (m->flags & RIPC_WF_MCAST) ||
	     m->cookie == 0))
		return RIPC_WIRE_FLAGS_BAD;
	if (m->src > RIPC_MAX_SERVICE_ID || m->dst > RIPC_MAX_SERVICE_ID)
		return RIPC_WIRE_SERVICE_BAD;

	/* Counts: limits first, then what each type allows. */
	if (m->nshort > RIPC_MAX_ITEMS || m->nlong > RIPC_MAX_ITEMS ||
	    m->nret > RIPC_MAX_RETURN_BUFS)
		return RIPC_WIRE_COUNT_BAD;
	switch (m->type) {
	case RIPC_MT_SHORT:
		if (m->nlong)
			return RIPC_WIRE_COUNT_BAD;
		break;
	case RIPC_MT_LONG:
		if (m->nshort || !m->nlong || !(m->flags & RIPC_WF_ADDR))
			return RIPC_WIRE_COUNT_BAD;
		break;
	case RIPC_MT_RETURN:
		/* Written items (ret descs) and items to pull (long descs):
		 * the latter need the sender's address for the done message. */
		if (m->nshort || !m->nret ||
		    (m->nlong && !(m->flags & RIPC_WF_ADDR)) ||
		    m->nlong + m->nret > RIPC_MAX_ITEMS)
			return RIPC_WIRE_COUNT_BAD;
		break;
	case RIPC_MT_DONE:
	case RIPC_MT_NACK:
		if (m->nshort || m->nlong || m->nret)
			return RIPC_WIRE_COUNT_BAD;
		break;
	}

	/* Fixed sections must lie inside the message. */
	need = RIPC_WIRE_HDR + align8(4 * (size_t)m->nshort) +
	       RIPC_WIRE_DESC * (size_t)(m->nlong + m->nret);
	if (m->flags & RIPC_WF_ADDR)
		need += 2;
	if (need > len)
		return RIPC_WIRE_LEN_BAD;

	p += RIPC_WIRE_HDR;
	for (unsigned i = 0; i < m->nshort; i++) {
		m->short_len[i] = get32(p + 4 * i);
		if (m->short_len[i] > RIPC_SHORT_MAX)
			return RIPC_WIRE_ITEM_BAD;
		sum += m->short_len[i];
		payload += align8(m->short_len[i]);
	}
	if (sum > RIPC_SHORT_MAX)
		return RIPC_WIRE_ITEM_BAD;
	p += align8(4 * (size_t)m->nshort);
	for (unsigned i = 0; i < m->nlong; i++, p += RIPC_WIRE_DESC)
		if ((err = get_desc(p, &m->long_desc[i], true)))
			return err;
	for (unsigned i = 0; i < m->nret; i++, p += RIPC_WIRE_DESC)
		if ((err = get_desc(p, &m->ret_desc[i], false)))
			return err;

	if ((err = check_aux(m)))
		return err;

	m->addr = NULL;
	m->addr_len = 0;
	m->addr_tp = 0;
	if (m->flags & RIPC_WF_ADDR) {
		m->addr_tp = p[0];
		m->addr_len = p[1];
		if (m->addr_tp >= RIPC_PROV_MAX || m->addr_len == 0 ||
		    m->addr_len > RIPC_ADDR_MAX)
			return RIPC_WIRE_ADDR_BAD;
		need = (size_t)(p - (uint8_t *)buf) + align8(2 + m->addr_len);
		if (need > len)
			return RIPC_WIRE_LEN_BAD;
		m->addr = p + 2;
		p = (uint8_t *)buf + need;
	}

	/* The payload must be exactly the padded items. */
	if ((size_t)(p - (uint8_t *)buf) + payload != len)
		return RIPC_WIRE_LEN_BAD;
	for (unsigned i = 0; i < m->nshort; i++) {
		m->short_ptr[i] = p;
		p += align8(m->short_len[i]);
	}
	return RIPC_WIRE_OK;
}

const char *ripc__wire_strerror(int err)
{
	static const char *const s[RIPC_WIRE_ERR_MAX] = {
		"ok",		  "truncated header", "bad magic",
		"bad version",	  "unknown type",     "unknown flags",
		"length mismatch", "bad item count",   "bad item length",
		"bad descriptor", "bad service ID",   "bad address",
	};

	return (err >= 0 && err < RIPC_WIRE_ERR_MAX) ? s[err] : "?";
}

/* ---- framing ---------------------------------------------------------- */

enum ripc_wire_frag_kind ripc__wire_frag_peek(const void *buf, size_t len,
					      size_t max_total,
					      struct ripc_wire_frag *f)
{
	const uint8_t *p = buf;
	uint16_t flags;

	/* Not framing at all, or not ours: the decoder says why. */
	if (len < RIPC_WIRE_HDR || get16(p) != RIPC_WIRE_MAGIC ||
	    p[2] != RIPC_WIRE_VERSION)
		return RIPC_FRAG_NONE;
	flags = get16(p + 34);
	f->src_inc = get64(p + 8);
	if (p[3] == RIPC_MT_FRAG) {
		/* A continuation: bytes after its header, everything else
		 * zero, its length the bytes received. */
		if (get32(p + 24) != len || len == RIPC_WIRE_HDR || flags ||
		    get16(p + 4) || get16(p + 6) || get16(p + 28) ||
		    get16(p + 30) || get16(p + 32) || get64(p + 40))
			return RIPC_FRAG_BAD;
		f->off = get32(p + 36);
		f->len = (uint32_t)(len - RIPC_WIRE_HDR);
		f->total = 0;
		return RIPC_FRAG_NEXT;
	}
	if (!(flags & RIPC_WF_FRAG))
		return RIPC_FRAG_NONE;
	/* A first fragment announces more than it carries, and no more
	 * than a whole message can be. */
	f->total = get32(p + 24);
	if (f->total <= len || f->total > max_total)
		return RIPC_FRAG_BAD;
	f->off = 0;
	f->len = (uint32_t)len;
	return RIPC_FRAG_FIRST;
}

void ripc__wire_frag_mark(void *buf, bool first)
{
	uint8_t *p = buf;
	uint16_t flags = get16(p + 34);

	put16(p + 34, first ? (uint16_t)(flags | RIPC_WF_FRAG)
			    : (uint16_t)(flags & ~RIPC_WF_FRAG));
}

size_t ripc__wire_frag_encode(void *buf, uint64_t src_inc, uint64_t dst_inc,
			      uint32_t off, const void *data, uint32_t n)
{
	ripc__wire_frag_head(buf, src_inc, dst_inc, off, n);
	memcpy((uint8_t *)buf + RIPC_WIRE_HDR, data, n);
	return RIPC_WIRE_HDR + n;
}

void ripc__wire_frag_head(void *buf, uint64_t src_inc, uint64_t dst_inc,
			  uint32_t off, uint32_t n)
{
	uint8_t *p = buf;

	memset(p, 0, RIPC_WIRE_HDR);
	put16(p, RIPC_WIRE_MAGIC);
	p[2] = RIPC_WIRE_VERSION;
	p[3] = RIPC_MT_FRAG;
	put64(p + 8, src_inc);
	put64(p + 16, dst_inc);
	put32(p + 24, RIPC_WIRE_HDR + n);
	put32(p + 36, off);
}
