/*
 * libFuzzer target for ripc__wire_decode(), the one decoder of untrusted
 * libripc messages (ripc/wire.c, layout and rules in ripc_protocol(7)).
 *
 * For every input the target checks three things:
 *
 *  1. Memory safety: the decoder runs on a heap copy of exactly the input
 *     bytes, so ASan reports any read past the end; UBSan any undefined
 *     arithmetic.
 *  2. Agreement with the documentation: an independent reference decoder
 *     (spec_decode below, written from VALIDATION in ripc_protocol(7),
 *     not from wire.c) must accept exactly the inputs the library accepts,
 *     refuse the others for the same reason (the page fixes the order of
 *     the checks), and agree on every decoded field.
 *  3. For accepted inputs: every pointer and length the decoder returns
 *     lies inside the input; ripc__wire_size() of the decoded message is
 *     the input's length; ripc__wire_encode() reproduces the input
 *     byte for byte except for the padding (which the decoder ignores and
 *     the encoder zeroes), and the decoder accepts the re-encoded message
 *     with the same contents.
 *
 *  4. The framing check below the decoder (ripc__wire_frag_peek, FRAGMENTS
 *     in ripc_protocol(7)) agrees with a reference written from that
 *     section on the kind and fields, and the quick test
 *     (ripc__wire_maybe_frag) lets nothing it calls framing by.
 *
 * Any disagreement aborts with a description, which libFuzzer reports as a
 * crash and saves the input.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define FAIL(...)                                                            \
	do {                                                                 \
		fprintf(stderr, "fuzz_wire: " __VA_ARGS__);                  \
		fputc('\n', stderr);                                         \
		abort();                                                     \
	} while (0)

/* ---- the reference decoder, from ripc_protocol(7) --------------------- */

/* Little-endian reads written out byte by byte: deliberately not the
 * library's helpers. */
static uint64_t rd(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static size_t pad8(size_t n)
{
	return (n + 7) / 8 * 8;
}

struct spec_msg {
	unsigned type, flags, src, dst, nshort, nlong, nret;
	uint64_t src_inc, dst_inc, cookie;
	uint32_t status;
	uint32_t short_len[RIPC_MAX_ITEMS];
	size_t short_off[RIPC_MAX_ITEMS];
	struct ripc_wire_desc desc[RIPC_MAX_ITEMS + RIPC_MAX_RETURN_BUFS];
	unsigned addr_tp, addr_len;
	size_t addr_off;
	/* Padding ranges [off, off + len): the decoder ignores their bytes. */
	size_t npad;
	struct {
		size_t off, len;
	} pad[2 + RIPC_MAX_ITEMS];
};

static void add_pad(struct spec_msg *s, size_t off, size_t len)
{
	if (len) {
		s->pad[s->npad].off = off;
		s->pad[s->npad].len = len;
		s->npad++;
	}
}

/* The numbered checks of VALIDATION, in the page's order; returns the
 * wire.h reason for the first that fails, or RIPC_WIRE_OK. */
static int spec_decode(const uint8_t *b, size_t len, struct spec_msg *s)
{
	size_t off, fixed, sum = 0, payload = 0;
	unsigned ndesc;

	memset(s, 0, sizeof(*s));
	/* 1. at least 48 bytes */
	if (len < 48)
		return RIPC_WIRE_SHORT_HDR;
	/* 2. magic 0x5249, 3. version 1, 4. type 1..5 */
	if (rd(b, 2) != 0x5249)
		return RIPC_WIRE_MAGIC_BAD;
	if (b[2] != 1)
		return RIPC_WIRE_VERSION_BAD;
	s->type = b[3];
	if (s->type < 1 || s->type > 5)
		return RIPC_WIRE_TYPE_BAD;
	s->src = (unsigned)rd(b + 4, 2);
	s->dst = (unsigned)rd(b + 6, 2);
	s->src_inc = rd(b + 8, 8);
	s->dst_inc = rd(b + 16, 8);
	s->nshort = (unsigned)rd(b + 28, 2);
	s->nlong = (unsigned)rd(b + 30, 2);
	s->nret = (unsigned)rd(b + 32, 2);
	s->flags = (unsigned)rd(b + 34, 2);
	s->status = (uint32_t)rd(b + 36, 4);
	s->cookie = rd(b + 40, 8);
	/* 5. length field == bytes received */
	if (rd(b + 24, 4) != len)
		return RIPC_WIRE_LEN_BAD;
	/* 6. only ADDR (1), MCAST (2) and DONE (4); DONE only in a SHORT,
	 * without MCAST, with a cookie */
	if (s->flags & ~7u)
		return RIPC_WIRE_FLAGS_BAD;
	if ((s->flags & 4) && (s->type != 1 || (s->flags & 2) || !s->cookie))
		return RIPC_WIRE_FLAGS_BAD;
	/* 7. service IDs at most 65534 */
	if (s->src > 65534 || s->dst > 65534)
		return RIPC_WIRE_SERVICE_BAD;
	/* 8. each count at most 64 */
	if (s->nshort > 64 || s->nlong > 64 || s->nret > 64)
		return RIPC_WIRE_COUNT_BAD;
	/* 9. counts allowed for the type */
	switch (s->type) {
	case 1: /* SHORT */
		if (s->nlong)
			return RIPC_WIRE_COUNT_BAD;
		break;
	case 2: /* LONG */
		if (s->nshort || !s->nlong || !(s->flags & 1))
			return RIPC_WIRE_COUNT_BAD;
		break;
	case 4: /* RETURN */
		if (s->nshort || !s->nret || (s->nlong && !(s->flags & 1)) ||
		    s->nlong + s->nret > 64)
			return RIPC_WIRE_COUNT_BAD;
		break;
	default: /* DONE, NACK */
		if (s->nshort || s->nlong || s->nret)
			return RIPC_WIRE_COUNT_BAD;
	}
	/* 10. fixed sections (and two address bytes) inside the message */
	fixed = 48 + pad8(4 * (size_t)s->nshort) +
		24 * (size_t)(s->nlong + s->nret);
	if (fixed + ((s->flags & 1) ? 2 : 0) > len)
		return RIPC_WIRE_LEN_BAD;
	/* 11. item lengths 0..65536, sum at most 65536 */
	for (unsigned i = 0; i < s->nshort; i++) {
		s->short_len[i] = (uint32_t)rd(b + 48 + 4 * i, 4);
		if (s->short_len[i] > 65536)
			return RIPC_WIRE_ITEM_BAD;
		sum += s->short_len[i];
		payload += pad8(s->short_len[i]);
	}
	if (sum > 65536)
		return RIPC_WIRE_ITEM_BAD;
	if (s->nshort & 1)
		add_pad(s, 48 + 4 * (size_t)s->nshort, 4);
	/* 12. descriptors, long ones first: len != 0, addr + len < 2^64; a
	 * long (not a return-buffer) descriptor may be {0, 0, 0}: an empty
	 * item */
	ndesc = s->nlong + s->nret;
	off = 48 + pad8(4 * (size_t)s->nshort);
	for (unsigned i = 0; i < ndesc; i++, off += 24) {
		struct ripc_wire_desc *d = &s->desc[i];

		d->addr = rd(b + off, 8);
		d->key = rd(b + off + 8, 8);
		d->len = (uint32_t)rd(b + off + 16, 4);
		d->aux = (uint32_t)rd(b + off + 20, 4);
		if ((d->len == 0 && (i >= s->nlong || d->addr || d->key)) ||
		    (unsigned __int128)d->addr + d->len >=
			    (unsigned __int128)1 << 64)
			return RIPC_WIRE_DESC_BAD;
	}
	/* 13. aux: a permutation of 0..ndesc-1 in RETURN, else 0 */
	{
		bool seen[RIPC_MAX_ITEMS + RIPC_MAX_RETURN_BUFS] = { false };

		for (unsigned i = 0; i < ndesc; i++) {
			uint32_t a = s->desc[i].aux;

			if (s->type != 4) {
				if (a)
					return RIPC_WIRE_DESC_BAD;
			} else if (a >= ndesc || seen[a]) {
				return RIPC_WIRE_DESC_BAD;
			} else {
				seen[a] = true;
			}
		}
	}
	/* 14. address section: transport 0..2, length 1..112, fits */
	if (s->flags & 1) {
		s->addr_tp = b[off];
		s->addr_len = b[off + 1];
		if (s->addr_tp > 2 || s->addr_len < 1 || s->addr_len > 112)
			return RIPC_WIRE_ADDR_BAD;
		if (off + pad8(2 + (size_t)s->addr_len) > len)
			return RIPC_WIRE_LEN_BAD;
		s->addr_off = off + 2;
		add_pad(s, off + 2 + s->addr_len,
			pad8(2 + (size_t)s->addr_len) - 2 - s->addr_len);
		off += pad8(2 + (size_t)s->addr_len);
	}
	/* 15. the rest is exactly the padded items */
	if (off + payload != len)
		return RIPC_WIRE_LEN_BAD;
	for (unsigned i = 0; i < s->nshort; i++) {
		s->short_off[i] = off;
		add_pad(s, off + s->short_len[i],
			pad8(s->short_len[i]) - s->short_len[i]);
		off += pad8(s->short_len[i]);
	}
	return RIPC_WIRE_OK;
}

/* ---- checks ------------------------------------------------------------ */

static bool inside(const uint8_t *buf, size_t len, const void *p, size_t n)
{
	const uint8_t *q = p;

	return q >= buf && q <= buf + len && n <= (size_t)(buf + len - q);
}

static bool desc_eq(const struct ripc_wire_desc *a,
		    const struct ripc_wire_desc *b)
{
	return a->addr == b->addr && a->key == b->key && a->len == b->len &&
	       a->aux == b->aux;
}

/* The library's result against the reference's, field by field. */
static void compare_spec(const uint8_t *buf, size_t len,
			 const struct ripc_wire_in *m, const struct spec_msg *s)
{
	if (m->type != s->type || m->flags != s->flags || m->src != s->src ||
	    m->dst != s->dst || m->src_inc != s->src_inc ||
	    m->dst_inc != s->dst_inc || m->status != s->status ||
	    m->cookie != s->cookie || m->nshort != s->nshort ||
	    m->nlong != s->nlong || m->nret != s->nret)
		FAIL("header fields differ from the reference decoder");
	for (unsigned i = 0; i < m->nshort; i++) {
		if (m->short_len[i] != s->short_len[i])
			FAIL("item %u: length %u, reference %u", i,
			     m->short_len[i], s->short_len[i]);
		if ((uint8_t *)m->short_ptr[i] != buf + s->short_off[i])
			FAIL("item %u: at offset %td, reference %zu", i,
			     (uint8_t *)m->short_ptr[i] - buf, s->short_off[i]);
		if (!inside(buf, len, m->short_ptr[i], m->short_len[i]))
			FAIL("item %u lies outside the input", i);
	}
	for (unsigned i = 0; i < m->nlong; i++)
		if (!desc_eq(&m->long_desc[i], &s->desc[i]))
			FAIL("long descriptor %u differs", i);
	for (unsigned i = 0; i < m->nret; i++)
		if (!desc_eq(&m->ret_desc[i], &s->desc[m->nlong + i]))
			FAIL("return descriptor %u differs", i);
	if (m->flags & RIPC_WF_ADDR) {
		if (m->addr_tp != s->addr_tp || m->addr_len != s->addr_len ||
		    m->addr != buf + s->addr_off)
			FAIL("address section differs from the reference");
		if (!inside(buf, len, m->addr, m->addr_len))
			FAIL("address lies outside the input");
	} else if (m->addr || m->addr_len) {
		FAIL("address returned without the ADDR flag");
	}
}

/* Two decodings of (possibly different buffers of) the same message. */
static void compare_in(const struct ripc_wire_in *a,
		       const struct ripc_wire_in *b)
{
	if (a->type != b->type || a->flags != b->flags || a->src != b->src ||
	    a->dst != b->dst || a->src_inc != b->src_inc ||
	    a->dst_inc != b->dst_inc || a->status != b->status ||
	    a->cookie != b->cookie || a->nshort != b->nshort ||
	    a->nlong != b->nlong || a->nret != b->nret ||
	    a->addr_tp != b->addr_tp || a->addr_len != b->addr_len)
		FAIL("re-decoded header differs");
	for (unsigned i = 0; i < a->nshort; i++)
		if (a->short_len[i] != b->short_len[i] ||
		    memcmp(a->short_ptr[i], b->short_ptr[i], a->short_len[i]))
			FAIL("re-decoded item %u differs", i);
	for (unsigned i = 0; i < a->nlong; i++)
		if (!desc_eq(&a->long_desc[i], &b->long_desc[i]))
			FAIL("re-decoded long descriptor %u differs", i);
	for (unsigned i = 0; i < a->nret; i++)
		if (!desc_eq(&a->ret_desc[i], &b->ret_desc[i]))
			FAIL("re-decoded return descriptor %u differs", i);
	if (a->addr_len && memcmp(a->addr, b->addr, a->addr_len))
		FAIL("re-decoded address differs");
}

/* Encode the decoded message again: same length, same bytes but for the
 * padding, accepted again with the same contents. */
static void reencode(const uint8_t *buf, size_t len,
		     const struct ripc_wire_in *m, const struct spec_msg *s)
{
	struct ripc_wire_out o = {
		.type = m->type,
		.flags = m->flags,
		.src = m->src,
		.dst = m->dst,
		.src_inc = m->src_inc,
		.dst_inc = m->dst_inc,
		.status = m->status,
		.cookie = m->cookie,
		.nshort = m->nshort,
		.nlong = m->nlong,
		.nret = m->nret,
		.short_buf = m->short_ptr,
		.short_len = m->short_len,
		.long_desc = m->long_desc,
		.ret_desc = m->ret_desc,
		.addr_tp = m->addr_tp,
		.addr_len = m->addr_len,
		.addr = m->addr,
	};
	/* static: struct ripc_wire_in is ~4.5 KiB, keep it off the stack
	 * of every run; libFuzzer runs one input at a time. */
	static struct ripc_wire_in again;
	size_t n = ripc__wire_size(&o);
	uint8_t *enc, *want;
	int err;

	if (n != len)
		FAIL("ripc__wire_size() of an accepted message is %zu, the "
		     "message has %zu bytes",
		     n, len);
	enc = malloc(n);
	want = malloc(len);
	if (!enc || !want)
		abort();
	if (ripc__wire_encode(&o, enc) != n)
		FAIL("ripc__wire_encode() wrote a different size");
	memcpy(want, buf, len);
	for (size_t i = 0; i < s->npad; i++)
		memset(want + s->pad[i].off, 0, s->pad[i].len);
	if (memcmp(enc, want, len)) {
		size_t i = 0;

		while (enc[i] == want[i])
			i++;
		FAIL("re-encoding differs from the input at byte %zu "
		     "(0x%02x, input 0x%02x)",
		     i, enc[i], want[i]);
	}
	err = ripc__wire_decode(enc, n, &again);
	if (err != RIPC_WIRE_OK)
		FAIL("the decoder refuses its own encoding: %s",
		     ripc__wire_strerror(err));
	compare_in(m, &again);
	free(enc);
	free(want);
}

/* ---- framing, from FRAGMENTS in ripc_protocol(7) ------------------- */
#define FRAG_MAX_TOTAL 70000 /* any bound: the check takes it as given */

static int spec_frag(const uint8_t *p, size_t n, struct ripc_wire_frag *f)
{
	unsigned flags;

	if (n < 48 || rd(p, 2) != 0x5249 || p[2] != 1)
		return RIPC_FRAG_NONE;
	flags = (unsigned)rd(p + 34, 2);
	f->src_inc = rd(p + 8, 8);
	if (p[3] == 6) {
		if (rd(p + 24, 4) != n || n == 48 || flags || rd(p + 4, 4) ||
		    rd(p + 28, 6) || rd(p + 40, 8))
			return RIPC_FRAG_BAD;
		f->off = (uint32_t)rd(p + 36, 4);
		f->len = (uint32_t)(n - 48);
		return RIPC_FRAG_NEXT;
	}
	if (!(flags & 0x8))
		return RIPC_FRAG_NONE;
	f->total = (uint32_t)rd(p + 24, 4);
	if (f->total <= n || f->total > FRAG_MAX_TOTAL)
		return RIPC_FRAG_BAD;
	f->len = (uint32_t)n;
	return RIPC_FRAG_FIRST;
}

static void check_framing(const uint8_t *buf, size_t size)
{
	struct ripc_wire_frag got = { 0 }, want = { 0 };
	int k = ripc__wire_frag_peek(buf, size, FRAG_MAX_TOTAL, &got);
	int w = spec_frag(buf, size, &want);

	if (k != w)
		FAIL("framing: kind %d, ripc_protocol(7) says %d", k, w);
	if (k != RIPC_FRAG_NONE && !ripc__wire_maybe_frag(buf, size))
		FAIL("framing: the quick test let kind %d by", k);
	if ((k == RIPC_FRAG_FIRST &&
	     (got.total != want.total || got.len != want.len ||
	      got.src_inc != want.src_inc)) ||
	    (k == RIPC_FRAG_NEXT &&
	     (got.off != want.off || got.len != want.len ||
	      got.src_inc != want.src_inc)))
		FAIL("framing: fields differ from ripc_protocol(7)");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ripc_wire_in m;
	static struct spec_msg s;
	/* A heap copy of exactly the received bytes, so that ASan sees any
	 * read beyond them; the decoder wants writable memory because the
	 * items it returns are handed to the application in place. */
	uint8_t *buf = malloc(size ? size : 1);
	int err, want;

	if (!buf)
		abort();
	memcpy(buf, data, size);
	err = ripc__wire_decode(buf, size, &m);
	want = spec_decode(buf, size, &s);
	if (err < 0 || err >= RIPC_WIRE_ERR_MAX)
		FAIL("decoder returned %d", err);
	if (!ripc__wire_strerror(err))
		FAIL("no text for reason %d", err);
	if (err != want)
		FAIL("decoder says \"%s\", ripc_protocol(7) says \"%s\"",
		     ripc__wire_strerror(err), ripc__wire_strerror(want));
	if (err == RIPC_WIRE_OK) {
		compare_spec(buf, size, &m, &s);
		reencode(buf, size, &m, &s);
	}
	check_framing(buf, size);
	free(buf);
	return 0;
}
