/*
 * Unit tests of ripc/wire.c, the one decoder of untrusted input.
 *
 * The tests carry their own encoder (raw_encode), written from the layout
 * documented in wire.h and independent of the library's.  It has no limits,
 * so the refusal tests can build messages that are consistent in every way
 * but the one under test: a refusal then proves that rule is checked, not
 * that an earlier check happened to trip over a side effect.  For valid
 * messages the library encoder must produce exactly the same bytes.
 *
 * Decoded messages are always decoded from a heap copy of exactly the bytes
 * "received", so a read past the end shows up under the sanitizers.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ripc_int.h"
#include "wire.h"

#define NMAX 80 /* room for counts over the limits */

struct spec {
	uint8_t type;
	uint16_t flags;
	uint16_t src, dst;
	uint64_t src_inc, dst_inc;
	uint32_t status;
	uint64_t cookie;
	uint16_t nshort, nlong, nret;
	uint32_t short_len[NMAX];
	struct ripc_wire_desc ldesc[NMAX], rdesc[NMAX];
	uint8_t addr_tp, addr_len;
	uint8_t addr[256];
};

/* Payload source: item i is pat + item_off(i), so items differ. */
#define PAT_LEN (2 * RIPC_SHORT_MAX + 512)
static uint8_t pat[PAT_LEN];

static size_t item_off(unsigned i)
{
	return (i * 13u) % 251u;
}

/* Runs in the runner before Criterion forks a child per test. */
__attribute__((constructor)) static void pat_init(void)
{
	for (size_t k = 0; k < PAT_LEN; k++)
		pat[k] = (uint8_t)(k * 7u + k / 251u + 1u);
}

static size_t al8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static void w16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void w32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void w64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Offset of the first payload byte (end of the fixed sections). */
static size_t spec_fixed(const struct spec *s)
{
	size_t n = RIPC_WIRE_HDR + al8(4 * (size_t)s->nshort) +
		   RIPC_WIRE_DESC * ((size_t)s->nlong + s->nret);

	if (s->flags & RIPC_WF_ADDR)
		n += al8(2 + (size_t)s->addr_len);
	return n;
}

static size_t spec_size(const struct spec *s)
{
	size_t n = spec_fixed(s);

	for (unsigned i = 0; i < s->nshort; i++)
		n += al8(s->short_len[i]);
	return n;
}

static void spec_init(struct spec *s, uint8_t type)
{
	memset(s, 0, sizeof(*s));
	s->type = type;
	s->src = 7;
	s->dst = 4242;
	s->src_inc = 0x0123456789abcdefull;
	s->dst_inc = 0xfedcba9876543210ull;
	s->cookie = 0x1122334455667788ull;
	s->status = 0;
}

static void spec_addr(struct spec *s, uint8_t tp, uint8_t len)
{
	s->flags |= RIPC_WF_ADDR;
	s->addr_tp = tp;
	s->addr_len = len;
	for (unsigned i = 0; i < sizeof(s->addr); i++)
		s->addr[i] = (uint8_t)(0xc0 ^ i);
}

static struct ripc_wire_desc mkdesc(unsigned i, uint32_t len, uint32_t aux)
{
	return (struct ripc_wire_desc){
		.addr = 0x7f0000001000ull + 0x10000ull * i,
		.key = 0xabcd000000000000ull | i,
		.len = len,
		.aux = aux,
	};
}

static void put_desc_raw(uint8_t *p, const struct ripc_wire_desc *d)
{
	w64(p, d->addr);
	w64(p + 8, d->key);
	w32(p + 16, d->len);
	w32(p + 20, d->aux);
}

/* The test's encoder: the documented layout, no limits, zero padding.
 * Returns a malloc'd buffer of exactly *len bytes. */
static uint8_t *raw_encode(const struct spec *s, size_t *len)
{
	size_t total = spec_size(s);
	uint8_t *b = calloc(1, total), *p;

	cr_assert_not_null(b);
	w16(b, RIPC_WIRE_MAGIC);
	b[2] = RIPC_WIRE_VERSION;
	b[3] = s->type;
	w16(b + 4, s->src);
	w16(b + 6, s->dst);
	w64(b + 8, s->src_inc);
	w64(b + 16, s->dst_inc);
	w32(b + 24, (uint32_t)total);
	w16(b + 28, s->nshort);
	w16(b + 30, s->nlong);
	w16(b + 32, s->nret);
	w16(b + 34, s->flags);
	w32(b + 36, s->status);
	w64(b + 40, s->cookie);
	p = b + RIPC_WIRE_HDR;
	for (unsigned i = 0; i < s->nshort; i++)
		w32(p + 4 * i, s->short_len[i]);
	p += al8(4 * (size_t)s->nshort);
	for (unsigned i = 0; i < s->nlong; i++, p += RIPC_WIRE_DESC)
		put_desc_raw(p, &s->ldesc[i]);
	for (unsigned i = 0; i < s->nret; i++, p += RIPC_WIRE_DESC)
		put_desc_raw(p, &s->rdesc[i]);
	if (s->flags & RIPC_WF_ADDR) {
		p[0] = s->addr_tp;
		p[1] = s->addr_len;
		memcpy(p + 2, s->addr, s->addr_len);
		p += al8(2 + (size_t)s->addr_len);
	}
	for (unsigned i = 0; i < s->nshort; i++) {
		memcpy(p, pat + item_off(i), s->short_len[i]);
		p += al8(s->short_len[i]);
	}
	cr_assert_eq((size_t)(p - b), total);
	*len = total;
	return b;
}

static void spec_to_out(const struct spec *s, struct ripc_wire_out *o,
			void **bufs)
{
	for (unsigned i = 0; i < s->nshort && i < NMAX; i++)
		bufs[i] = pat + item_off(i);
	*o = (struct ripc_wire_out){
		.type = s->type,
		.flags = s->flags,
		.src = s->src,
		.dst = s->dst,
		.src_inc = s->src_inc,
		.dst_inc = s->dst_inc,
		.status = s->status,
		.cookie = s->cookie,
		.nshort = s->nshort,
		.nlong = s->nlong,
		.nret = s->nret,
		.short_buf = bufs,
		.short_len = s->short_len,
		.long_desc = s->ldesc,
		.ret_desc = s->rdesc,
		.addr_tp = s->addr_tp,
		.addr_len = s->addr_len,
		.addr = s->addr,
	};
}

static uint8_t *dup_bytes(const void *p, size_t len)
{
	uint8_t *b = malloc(len ? len : 1);

	cr_assert_not_null(b);
	if (len)
		memcpy(b, p, len);
	return b;
}

static int decode_copy(const void *p, size_t len, struct ripc_wire_in *in)
{
	uint8_t *b = dup_bytes(p, len);
	int err = ripc__wire_decode(b, len, in);

	free(b);
	return err;
}

/* Decoded fields equal the spec; item pointers point at the right bytes of
 * the buffer and carry the right contents. */
static void check_matches(const struct spec *s, const uint8_t *b, size_t len,
			  const struct ripc_wire_in *in, const char *what)
{
	const uint8_t *p = b + spec_fixed(s);

	cr_assert_eq(in->type, s->type, "%s: type", what);
	cr_assert_eq(in->flags, s->flags, "%s: flags", what);
	cr_assert_eq(in->src, s->src, "%s: src", what);
	cr_assert_eq(in->dst, s->dst, "%s: dst", what);
	cr_assert_eq(in->src_inc, s->src_inc, "%s: src_inc", what);
	cr_assert_eq(in->dst_inc, s->dst_inc, "%s: dst_inc", what);
	cr_assert_eq(in->status, s->status, "%s: status", what);
	cr_assert_eq(in->cookie, s->cookie, "%s: cookie", what);
	cr_assert_eq(in->nshort, s->nshort, "%s: nshort", what);
	cr_assert_eq(in->nlong, s->nlong, "%s: nlong", what);
	cr_assert_eq(in->nret, s->nret, "%s: nret", what);
	for (unsigned i = 0; i < s->nshort; i++) {
		cr_assert_eq(in->short_len[i], s->short_len[i],
			     "%s: item %u length", what, i);
		cr_assert_eq((const uint8_t *)in->short_ptr[i], p,
			     "%s: item %u position", what, i);
		cr_assert(p + s->short_len[i] <= b + len);
		cr_assert(!memcmp(in->short_ptr[i], pat + item_off(i),
				  s->short_len[i]),
			  "%s: item %u contents", what, i);
		p += al8(s->short_len[i]);
	}
	for (unsigned i = 0; i < s->nlong; i++)
		cr_assert(!memcmp(&in->long_desc[i], &s->ldesc[i],
				  sizeof(s->ldesc[i])),
			  "%s: long descriptor %u", what, i);
	for (unsigned i = 0; i < s->nret; i++)
		cr_assert(!memcmp(&in->ret_desc[i], &s->rdesc[i],
				  sizeof(s->rdesc[i])),
			  "%s: return descriptor %u", what, i);
	if (s->flags & RIPC_WF_ADDR) {
		cr_assert_eq(in->addr_tp, s->addr_tp, "%s: addr_tp", what);
		cr_assert_eq(in->addr_len, s->addr_len, "%s: addr_len", what);
		cr_assert_eq(in->addr,
			     b + RIPC_WIRE_HDR + al8(4 * (size_t)s->nshort) +
				     RIPC_WIRE_DESC * ((size_t)s->nlong +
						       s->nret) +
				     2,
			     "%s: addr position", what);
		cr_assert(!memcmp(in->addr, s->addr, s->addr_len),
			  "%s: addr bytes", what);
	} else {
		cr_assert_null(in->addr, "%s: addr without RIPC_WF_ADDR", what);
		cr_assert_eq(in->addr_len, 0, "%s: addr_len", what);
	}
}

/*
 * Full round trip of one valid spec: the library encoder writes exactly
 * ripc__wire_size bytes, identical to the documented layout with zero
 * padding and nothing past the end; the decoder accepts them (also from an
 * odd address) and gives back every field.
 */
static void round_trip(const struct spec *s, const char *what)
{
	struct ripc_wire_out o;
	struct ripc_wire_in *in = malloc(sizeof(*in));
	void *bufs[NMAX];
	size_t rlen, sz, n;
	uint8_t *raw = raw_encode(s, &rlen), *enc, *odd;
	int err;

	cr_assert_not_null(in);
	spec_to_out(s, &o, bufs);
	sz = ripc__wire_size(&o);
	cr_assert_eq(sz, rlen, "%s: wire size %zu, layout says %zu", what, sz,
		     rlen);
	cr_assert_leq(sz, (size_t)RIPC_WIRE_MAX, "%s: over RIPC_WIRE_MAX",
		      what);
	cr_assert_eq(sz % 8, 0, "%s: size not a multiple of 8", what);

	enc = malloc(sz + 64);
	cr_assert_not_null(enc);
	memset(enc, 0xa5, sz + 64);
	n = ripc__wire_encode(&o, enc);
	cr_assert_eq(n, sz, "%s: encode returned %zu, size %zu", what, n, sz);
	for (size_t k = sz; k < sz + 64; k++)
		cr_assert_eq(enc[k], 0xa5, "%s: encoder wrote past the end",
			     what);
	for (size_t k = 0; k < sz; k++)
		cr_assert_eq(enc[k], raw[k],
			     "%s: byte %zu is %#x, layout (zero padding) "
			     "says %#x",
			     what, k, enc[k], raw[k]);
	/* Piece by piece (txq.c's trains): the head, then the items' data
	 * gathered in pieces that cross item and padding boundaries. */
	memset(enc, 0xa5, sz + 64);
	n = ripc__wire_encode_head(&o, enc, sz);
	cr_assert_leq(n, sz, "%s: head of %zu bytes", what, n);
	{
		struct ripc_wire_cursor c = { .m = &o };
		static const size_t piece[] = { 1, 7, 13, 4040, 3, 64 };

		for (unsigned k = 0; n < sz; k++) {
			size_t p = piece[k % 6] < sz - n ? piece[k % 6] : sz - n;

			ripc__wire_gather(&c, enc + n, p);
			n += p;
		}
		ripc__wire_gather(&c, enc + sz, 64); /* past the end: nothing */
	}
	for (size_t k = 0; k < sz + 64; k++)
		cr_assert_eq(enc[k], k < sz ? raw[k] : 0xa5,
			     "%s: gathered byte %zu is %#x", what, k, enc[k]);

	err = decode_copy(enc, sz, in);
	cr_assert_eq(err, RIPC_WIRE_OK, "%s: decode: %s", what,
		     ripc__wire_strerror(err));

	/* Decode in place to compare pointers, then from an odd address:
	 * the decoder must not depend on alignment. */
	err = ripc__wire_decode(enc, sz, in);
	cr_assert_eq(err, RIPC_WIRE_OK);
	check_matches(s, enc, sz, in, what);
	odd = malloc(sz + 3);
	cr_assert_not_null(odd);
	memcpy(odd + 3, enc, sz);
	err = ripc__wire_decode(odd + 3, sz, in);
	cr_assert_eq(err, RIPC_WIRE_OK, "%s: decode at odd address: %s", what,
		     ripc__wire_strerror(err));
	check_matches(s, odd + 3, sz, in, what);

	free(odd);
	free(enc);
	free(raw);
	free(in);
}

/* Decode the raw encoding of s and expect `want`. */
static void expect_refused(const struct spec *s, int want, const char *what)
{
	struct ripc_wire_in *in = malloc(sizeof(*in));
	size_t len;
	uint8_t *b = raw_encode(s, &len);
	int err;

	cr_assert_not_null(in);
	err = ripc__wire_decode(b, len, in);
	cr_assert_eq(err, want, "%s: got \"%s\", want \"%s\"", what,
		     ripc__wire_strerror(err), ripc__wire_strerror(want));
	free(b);
	free(in);
}

static int decode_patched(const struct spec *s, size_t off, const void *v,
			  size_t vlen)
{
	struct ripc_wire_in *in = malloc(sizeof(*in));
	size_t len;
	uint8_t *b = raw_encode(s, &len);
	int err;

	cr_assert_not_null(in);
	memcpy(b + off, v, vlen);
	err = ripc__wire_decode(b, len, in);
	free(b);
	free(in);
	return err;
}

/* ---- sample messages ------------------------------------------------ */

static void sample_short(struct spec *s, unsigned n)
{
	spec_init(s, RIPC_MT_SHORT);
	s->nshort = (uint16_t)n;
	for (unsigned i = 0; i < n; i++)
		s->short_len[i] = 1 + (i * 131u + n * 17u) % 1000u;
}

static void sample_long(struct spec *s, unsigned nlong, unsigned nret)
{
	spec_init(s, RIPC_MT_LONG);
	spec_addr(s, RIPC_PROV_TCP, 16);
	s->nlong = (uint16_t)nlong;
	s->nret = (uint16_t)nret;
	for (unsigned i = 0; i < nlong; i++)
		s->ldesc[i] = mkdesc(i, 4096 * (i + 1) + i, 0);
	for (unsigned i = 0; i < nret; i++)
		s->rdesc[i] = mkdesc(100 + i, 1 + i, 0);
}

/* A RETURN with nlong items to pull and nret written ones; the aux fields
 * are the reverse permutation spread over both lists. */
static void sample_return(struct spec *s, unsigned nlong, unsigned nret)
{
	unsigned n = nlong + nret;

	spec_init(s, RIPC_MT_RETURN);
	if (nlong)
		spec_addr(s, RIPC_PROV_SHM, 24);
	s->nlong = (uint16_t)nlong;
	s->nret = (uint16_t)nret;
	for (unsigned i = 0; i < nlong; i++)
		s->ldesc[i] = mkdesc(i, 1000 + i, n - 1 - i);
	for (unsigned i = 0; i < nret; i++)
		s->rdesc[i] = mkdesc(50 + i, 2000 + i, n - 1 - (nlong + i));
}

static void sample_done(struct spec *s)
{
	spec_init(s, RIPC_MT_DONE);
	s->status = RIPC_EPULL;
}

static void sample_nack(struct spec *s)
{
	spec_init(s, RIPC_MT_NACK);
	s->status = RIPC_ENOSERVICE;
}

/* ---- round trips ---------------------------------------------------- */

Test(wire, short_every_count)
{
	struct spec s;
	char what[64];

	for (unsigned n = 0; n <= RIPC_MAX_ITEMS; n++) {
		sample_short(&s, n);
		snprintf(what, sizeof(what), "short, %u items", n);
		round_trip(&s, what);
	}
}

Test(wire, short_sizes_and_padding)
{
	static const uint32_t sizes[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16,
					  17, 2000, 4095, 4096, 4097 };
	struct spec s;
	char what[64];

	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		/* One item, then three of that size (odd count: the length
		 * section carries 4 bytes of padding). */
		for (unsigned n = 1; n <= 3; n += 2) {
			spec_init(&s, RIPC_MT_SHORT);
			s.nshort = (uint16_t)n;
			for (unsigned i = 0; i < n; i++)
				s.short_len[i] = sizes[k];
			snprintf(what, sizeof(what), "short, %u x %u bytes", n,
				 sizes[k]);
			round_trip(&s, what);
		}
	}
}

Test(wire, short_at_the_limits)
{
	struct spec s;

	/* One item of exactly RIPC_SHORT_MAX bytes. */
	spec_init(&s, RIPC_MT_SHORT);
	s.nshort = 1;
	s.short_len[0] = RIPC_SHORT_MAX;
	round_trip(&s, "one item of RIPC_SHORT_MAX");

	/* The maximum split over the maximum count. */
	spec_init(&s, RIPC_MT_SHORT);
	s.nshort = RIPC_MAX_ITEMS;
	for (unsigned i = 0; i < RIPC_MAX_ITEMS; i++)
		s.short_len[i] = RIPC_SHORT_MAX / RIPC_MAX_ITEMS;
	round_trip(&s, "64 items totalling RIPC_SHORT_MAX");

	/* Worst case for the padded size: 63 one-byte items plus the rest,
	 * 64 return buffers and the largest address.  It must still fit
	 * RIPC_WIRE_MAX, the size of a receive slot. */
	spec_init(&s, RIPC_MT_SHORT);
	s.nshort = RIPC_MAX_ITEMS;
	for (unsigned i = 0; i < RIPC_MAX_ITEMS - 1; i++)
		s.short_len[i] = 1;
	s.short_len[RIPC_MAX_ITEMS - 1] = RIPC_SHORT_MAX - (RIPC_MAX_ITEMS - 1);
	s.nret = RIPC_MAX_RETURN_BUFS;
	for (unsigned i = 0; i < RIPC_MAX_RETURN_BUFS; i++)
		s.rdesc[i] = mkdesc(i, 0xffffffffu, 0);
	spec_addr(&s, RIPC_PROV_VERBS, RIPC_ADDR_MAX);
	s.flags |= RIPC_WF_MCAST;
	round_trip(&s, "largest short message");
	cr_assert_geq((size_t)RIPC_SLOT_SIZE, (size_t)RIPC_WIRE_MAX);
}

Test(wire, short_with_offers_and_address)
{
	struct spec s;

	sample_short(&s, 5);
	s.nret = 3;
	for (unsigned i = 0; i < 3; i++)
		s.rdesc[i] = mkdesc(i, 100 * (i + 1), 0);
	round_trip(&s, "short with return buffers");
	for (unsigned alen = 1; alen <= RIPC_ADDR_MAX; alen++) {
		char what[64];

		sample_short(&s, 2);
		spec_addr(&s, RIPC_PROV_TCP, (uint8_t)alen);
		snprintf(what, sizeof(what), "short, address of %u bytes",
			 alen);
		round_trip(&s, what);
	}
}

Test(wire, long_messages)
{
	struct spec s;

	sample_long(&s, 1, 0);
	round_trip(&s, "long, 1 item");
	sample_long(&s, RIPC_MAX_ITEMS, RIPC_MAX_RETURN_BUFS);
	round_trip(&s, "long, 64 items, 64 return buffers");
	for (unsigned tp = 0; tp < RIPC_PROV_MAX; tp++) {
		sample_long(&s, 3, 1);
		spec_addr(&s, (uint8_t)tp, RIPC_ADDR_MAX);
		s.flags |= RIPC_WF_MCAST;
		round_trip(&s, "long, every transport");
	}
	/* Descriptor extremes that are legal: the largest item, an item
	 * that ends at the top of the address space. */
	sample_long(&s, 2, 0);
	s.ldesc[0] = (struct ripc_wire_desc){ .addr = 0, .key = ~0ull,
					      .len = RIPC_LONG_ITEM_MAX };
	s.ldesc[1] = (struct ripc_wire_desc){ .addr = UINT64_MAX - 100,
					      .key = 0, .len = 100 };
	round_trip(&s, "long, extreme descriptors");
}

Test(wire, return_messages)
{
	struct spec s;

	sample_return(&s, 0, 1);
	round_trip(&s, "return, 1 written");
	sample_return(&s, 0, RIPC_MAX_ITEMS);
	round_trip(&s, "return, 64 written");
	sample_return(&s, 2, 3);
	round_trip(&s, "return, 2 pulled + 3 written");
	sample_return(&s, RIPC_MAX_ITEMS - 1, 1);
	round_trip(&s, "return, 63 pulled + 1 written");
	sample_return(&s, 32, 32);
	round_trip(&s, "return, 32 + 32");
}

Test(wire, control_messages)
{
	struct spec s;

	sample_done(&s);
	round_trip(&s, "done");
	sample_done(&s);
	s.status = 0;
	s.cookie = UINT64_MAX;
	s.src = s.dst = RIPC_MAX_SERVICE_ID;
	round_trip(&s, "done, extreme fields");
	sample_nack(&s);
	round_trip(&s, "nack");
	sample_nack(&s);
	s.cookie = 0;
	s.status = RIPC_ENOTFOUND;
	s.src = 0;
	s.dst = 0;
	round_trip(&s, "nack, cookie 0");
}

/* ---- refusals: header --------------------------------------------- */

Test(wire, refuses_truncated_header)
{
	struct spec s;
	size_t len;
	uint8_t *b;
	struct ripc_wire_in in;

	sample_done(&s);
	b = raw_encode(&s, &len);
	cr_assert_eq(len, RIPC_WIRE_HDR);
	for (size_t n = 0; n < RIPC_WIRE_HDR; n++)
		cr_assert_eq(decode_copy(b, n, &in), RIPC_WIRE_SHORT_HDR,
			     "%zu bytes", n);
	free(b);
}

Test(wire, refuses_bad_magic_version_type)
{
	static const uint8_t versions[] = { 0, RIPC_WIRE_VERSION + 1, 0xff };
	static const uint8_t types[] = { 0, RIPC_MT_TYPE_MAX, 0x80, 0xff };
	struct spec s;
	uint8_t v[2];

	sample_short(&s, 2);
	for (int bit = 0; bit < 16; bit++) {
		uint16_t m = RIPC_WIRE_MAGIC ^ (uint16_t)(1u << bit);

		w16(v, m);
		cr_assert_eq(decode_patched(&s, 0, v, 2), RIPC_WIRE_MAGIC_BAD,
			     "magic %#x", m);
	}
	for (unsigned i = 0; i < sizeof(versions); i++)
		cr_assert_eq(decode_patched(&s, 2, &versions[i], 1),
			     RIPC_WIRE_VERSION_BAD, "version %u", versions[i]);
	for (unsigned i = 0; i < sizeof(types); i++)
		cr_assert_eq(decode_patched(&s, 3, &types[i], 1),
			     RIPC_WIRE_TYPE_BAD, "type %u", types[i]);
}

Test(wire, refuses_unknown_flags)
{
	struct spec s;

	for (int bit = 0; bit < 16; bit++) {
		if ((1u << bit) & RIPC_WF_ALL)
			continue;
		sample_short(&s, 1);
		s.flags = (uint16_t)(1u << bit);
		expect_refused(&s, RIPC_WIRE_FLAGS_BAD, "unknown flag");
		sample_long(&s, 1, 0);
		s.flags |= (uint16_t)(1u << bit);
		expect_refused(&s, RIPC_WIRE_FLAGS_BAD,
			       "unknown flag with known ones");
	}
}

/* A done message riding in a short one (RIPC_WF_DONE): only in a unicast
 * SHORT, and only with the cookie of the long send it completes. */
Test(wire, done_rides_in_short_only)
{
	struct spec s;

	sample_short(&s, 2);
	s.flags |= RIPC_WF_DONE;
	s.cookie = 0x1234567890abcdefull;
	round_trip(&s, "short carrying a done");
	sample_short(&s, 0);
	s.flags |= RIPC_WF_DONE;
	s.cookie = 1;
	round_trip(&s, "short without items carrying a done");

	sample_short(&s, 1);
	s.flags |= RIPC_WF_DONE;
	s.cookie = 0;
	expect_refused(&s, RIPC_WIRE_FLAGS_BAD, "done without a cookie");
	sample_short(&s, 1);
	s.flags |= RIPC_WF_DONE | RIPC_WF_MCAST;
	s.cookie = 7;
	expect_refused(&s, RIPC_WIRE_FLAGS_BAD, "done in a multicast copy");
	sample_long(&s, 1, 0);
	s.flags |= RIPC_WF_DONE;
	s.cookie = 7;
	expect_refused(&s, RIPC_WIRE_FLAGS_BAD, "done in a LONG");
	for (uint8_t t = RIPC_MT_DONE; t < RIPC_MT_TYPE_MAX; t++) {
		spec_init(&s, t);
		if (t == RIPC_MT_RETURN) {
			s.nret = 1;
			s.rdesc[0] = mkdesc(0, 100, 0);
		}
		s.flags |= RIPC_WF_DONE;
		s.cookie = 7;
		expect_refused(&s, RIPC_WIRE_FLAGS_BAD, "done flag, type 3-5");
	}
}

Test(wire, refuses_service_65535)
{
	struct spec s;

	sample_short(&s, 1);
	s.src = RIPC_INVALID_SERVICE_ID;
	expect_refused(&s, RIPC_WIRE_SERVICE_BAD, "src 65535");
	sample_short(&s, 1);
	s.dst = RIPC_INVALID_SERVICE_ID;
	expect_refused(&s, RIPC_WIRE_SERVICE_BAD, "dst 65535");
	sample_done(&s);
	s.dst = RIPC_INVALID_SERVICE_ID;
	expect_refused(&s, RIPC_WIRE_SERVICE_BAD, "done to 65535");
}

/* The length field must equal the bytes received, in both directions. */
Test(wire, refuses_length_mismatch)
{
	static const int64_t delta[] = { -8, -1, 1, 7, 8, 4096 };
	struct ripc_wire_in in;
	struct spec s;
	size_t len;
	uint8_t *b, *big;

	sample_short(&s, 3);
	b = raw_encode(&s, &len);
	for (unsigned i = 0; i < sizeof(delta) / sizeof(delta[0]); i++) {
		uint8_t v[4];

		/* Field lies, bytes are right. */
		w32(v, (uint32_t)((int64_t)len + delta[i]));
		cr_assert_eq(decode_patched(&s, 24, v, 4), RIPC_WIRE_LEN_BAD,
			     "field %+ld", (long)delta[i]);
		/* Field is right, fewer or more bytes arrived (the extra
		 * bytes are zero, as if the message had trailing padding). */
		if (delta[i] < 0) {
			cr_assert_eq(decode_copy(b, len + delta[i], &in),
				     RIPC_WIRE_LEN_BAD);
		} else {
			big = calloc(1, len + delta[i]);
			memcpy(big, b, len);
			cr_assert_eq(ripc__wire_decode(big, len + delta[i],
						       &in),
				     RIPC_WIRE_LEN_BAD, "%+ld bytes",
				     (long)delta[i]);
			/* ... and with the field agreeing with them. */
			w32(big + 24, (uint32_t)(len + delta[i]));
			cr_assert_eq(ripc__wire_decode(big, len + delta[i],
						       &in),
				     RIPC_WIRE_LEN_BAD,
				     "trailing %+ld bytes", (long)delta[i]);
			free(big);
		}
	}
	{
		uint8_t v[4];

		w32(v, 0);
		cr_assert_eq(decode_patched(&s, 24, v, 4), RIPC_WIRE_LEN_BAD);
		w32(v, UINT32_MAX);
		cr_assert_eq(decode_patched(&s, 24, v, 4), RIPC_WIRE_LEN_BAD);
	}
	free(b);
}

/* ---- refusals: counts ----------------------------------------------- */

Test(wire, refuses_counts_over_limits)
{
	struct spec s;

	sample_short(&s, RIPC_MAX_ITEMS + 1);
	for (unsigned i = 0; i <= RIPC_MAX_ITEMS; i++)
		s.short_len[i] = 8;
	expect_refused(&s, RIPC_WIRE_COUNT_BAD, "65 short items");

	sample_long(&s, RIPC_MAX_ITEMS + 1, 0);
	expect_refused(&s, RIPC_WIRE_COUNT_BAD, "65 long items");

	sample_short(&s, 1);
	s.nret = RIPC_MAX_RETURN_BUFS + 1;
	for (unsigned i = 0; i < s.nret; i++)
		s.rdesc[i] = mkdesc(i, 8, 0);
	expect_refused(&s, RIPC_WIRE_COUNT_BAD, "65 return buffers");

	/* A count field far beyond anything: must not be used to size a
	 * section before it is checked. */
	{
		uint8_t v[2];

		sample_short(&s, 1);
		w16(v, 0xffff);
		cr_assert_eq(decode_patched(&s, 28, v, 2), RIPC_WIRE_COUNT_BAD);
		cr_assert_eq(decode_patched(&s, 30, v, 2), RIPC_WIRE_COUNT_BAD);
		cr_assert_eq(decode_patched(&s, 32, v, 2), RIPC_WIRE_COUNT_BAD);
	}

	/* RETURN: pulled + written items form one reply of <= 64 items. */
	sample_return(&s, 33, 32);
	expect_refused(&s, RIPC_WIRE_COUNT_BAD, "return, 33 + 32 items");
	sample_return(&s, 1, RIPC_MAX_ITEMS);
	expect_refused(&s, RIPC_WIRE_COUNT_BAD, "return, 1 + 64 items");
}

Test(wire, refuses_counts_not_allowed_for_type)
{
	struct spec s;

	sample_short(&s, 2);
	s.nlong = 1;
	s.ldesc[0] = mkdesc(0, 10, 0);
	expect_refused(&s, RIPC_WIRE_COUNT_BAD, "short with a long item");

	sample_long(&s, 1, 0);
	s.nshort = 1;
	s.short_len[0] = 8;
	expect_refused(&s, RIPC_WIRE_COUNT_BAD, "long with a short item");
	sample_long(&s, 0, 1);
	expect_refused(&s, RIPC_WIRE_COUNT_BAD, "long without items");
	sample_long(&s, 2, 0);
	s.flags &= (uint16_t)~RIPC_WF_ADDR;
	expect_refused(&s, RIPC_WIRE_COUNT_BAD, "long without address");

	sample_return(&s, 0, 2);
	s.nshort = 1;
	s.short_len[0] = 4;
	expect_refused(&s, RIPC_WIRE_COUNT_BAD, "return with a short item");
	sample_return(&s, 2, 0);
	expect_refused(&s, RIPC_WIRE_COUNT_BAD, "return without written");
	sample_return(&s, 1, 1);
	s.flags &= (uint16_t)~RIPC_WF_ADDR;
	expect_refused(&s, RIPC_WIRE_COUNT_BAD,
		       "return with pulled items and no address");

	for (int t = 0; t < 2; t++) {
		const char *name = t ? "nack" : "done";

		t ? sample_nack(&s) : sample_done(&s);
		s.nshort = 1;
		s.short_len[0] = 8;
		expect_refused(&s, RIPC_WIRE_COUNT_BAD, name);
		t ? sample_nack(&s) : sample_done(&s);
		s.nlong = 1;
		s.ldesc[0] = mkdesc(0, 8, 0);
		spec_addr(&s, RIPC_PROV_TCP, 8);
		expect_refused(&s, RIPC_WIRE_COUNT_BAD, name);
		t ? sample_nack(&s) : sample_done(&s);
		s.nret = 1;
		s.rdesc[0] = mkdesc(0, 8, 0);
		expect_refused(&s, RIPC_WIRE_COUNT_BAD, name);
	}
}

/* ---- refusals: items and descriptors -------------------------------- */

Test(wire, refuses_bad_items)
{
	struct spec s;

	/* Zero-length items are items (libRIPC sent them): accepted. */
	sample_short(&s, 3);
	s.short_len[1] = 0;
	round_trip(&s, "zero-length item");
	sample_short(&s, 1);
	s.short_len[0] = 0;
	round_trip(&s, "only item zero-length");

	sample_short(&s, 1);
	s.short_len[0] = RIPC_SHORT_MAX + 1;
	expect_refused(&s, RIPC_WIRE_ITEM_BAD, "item over RIPC_SHORT_MAX");

	sample_short(&s, 2);
	s.short_len[0] = RIPC_SHORT_MAX;
	s.short_len[1] = 1;
	expect_refused(&s, RIPC_WIRE_ITEM_BAD, "sum RIPC_SHORT_MAX + 1");

	sample_short(&s, RIPC_MAX_ITEMS);
	for (unsigned i = 0; i < RIPC_MAX_ITEMS; i++)
		s.short_len[i] = RIPC_SHORT_MAX / RIPC_MAX_ITEMS + 1;
	expect_refused(&s, RIPC_WIRE_ITEM_BAD, "64 items over the sum");

	/* Lengths whose sum wraps 32 bits must not look small. */
	{
		uint8_t v[4];

		sample_short(&s, 2);
		s.short_len[0] = 8;
		s.short_len[1] = 8;
		w32(v, UINT32_MAX);
		cr_assert_eq(decode_patched(&s, RIPC_WIRE_HDR, v, 4),
			     RIPC_WIRE_ITEM_BAD);
		w32(v, UINT32_MAX - 7);
		cr_assert_eq(decode_patched(&s, RIPC_WIRE_HDR + 4, v, 4),
			     RIPC_WIRE_ITEM_BAD);
	}
}

Test(wire, refuses_bad_descriptors)
{
	struct spec s;

	sample_long(&s, 3, 0);
	s.ldesc[2].len = 0;
	expect_refused(&s, RIPC_WIRE_DESC_BAD,
		       "long item of length 0 that names memory");
	sample_long(&s, 3, 0);
	s.ldesc[2] = (struct ripc_wire_desc){ 0 };
	round_trip(&s, "long item of length 0 described as {0, 0, 0}");
	sample_long(&s, 2, 0);
	s.ldesc[0] = (struct ripc_wire_desc){ .key = 7 };
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "empty long item with a key");
	sample_long(&s, 1, 2);
	s.rdesc[1].len = 0;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "return buffer of length 0");
	sample_short(&s, 1);
	s.nret = 1;
	s.rdesc[0] = mkdesc(0, 0, 0);
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "short offer of length 0");
	sample_return(&s, 1, 1);
	s.rdesc[0].len = 0;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "return written length 0");

	sample_long(&s, 2, 0);
	s.ldesc[1].addr = UINT64_MAX - 10;
	s.ldesc[1].len = 100;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "long item wraps");
	sample_long(&s, 2, 0);
	s.ldesc[0].addr = UINT64_MAX;
	s.ldesc[0].len = RIPC_LONG_ITEM_MAX;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "long item wraps (max)");
	sample_short(&s, 0);
	s.nret = 1;
	s.rdesc[0] = mkdesc(0, 0x1000, 0);
	s.rdesc[0].addr = UINT64_MAX - 0xfff + 1;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "offer wraps");
	sample_return(&s, 1, 1);
	s.ldesc[0].addr = UINT64_MAX - 1;
	s.ldesc[0].len = 3;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "return pulled item wraps");
}

Test(wire, aux_rules)
{
	struct spec s;

	/* RETURN: the aux fields are a permutation of 0..n-1 over both
	 * descriptor lists. */
	sample_return(&s, 2, 3);
	s.ldesc[0].aux = 0;
	s.ldesc[1].aux = 3;
	s.rdesc[0].aux = 4;
	s.rdesc[1].aux = 1;
	s.rdesc[2].aux = 2;
	round_trip(&s, "return, mixed permutation");

	sample_return(&s, 2, 3);
	s.rdesc[2].aux = s.ldesc[0].aux;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "aux duplicate across lists");
	sample_return(&s, 0, 3);
	s.rdesc[1].aux = s.rdesc[0].aux;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "aux duplicate");
	sample_return(&s, 1, 2);
	s.rdesc[0].aux = 3;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "aux == n");
	sample_return(&s, 0, RIPC_MAX_ITEMS);
	s.rdesc[5].aux = RIPC_MAX_ITEMS;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "aux == 64");
	sample_return(&s, 0, 2);
	s.rdesc[0].aux = UINT32_MAX;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "aux huge");
	sample_return(&s, 0, 1);
	s.rdesc[0].aux = 1u << 31;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "aux bit 31");

	/* Elsewhere aux is reserved and must be zero. */
	sample_long(&s, 2, 0);
	s.ldesc[1].aux = 1;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "aux in a long item");
	sample_long(&s, 1, 1);
	s.rdesc[0].aux = 0x80000000u;
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "aux in a long's offer");
	sample_short(&s, 1);
	s.nret = 2;
	s.rdesc[0] = mkdesc(0, 8, 0);
	s.rdesc[1] = mkdesc(1, 8, 1);
	expect_refused(&s, RIPC_WIRE_DESC_BAD, "aux in a short's offer");
}

/* ---- refusals: address section ------------------------------------- */

Test(wire, refuses_bad_address)
{
	struct ripc_wire_in in;
	struct spec s;

	for (unsigned tp = RIPC_PROV_MAX; tp < 256; tp += 17) {
		sample_long(&s, 1, 0);
		s.addr_tp = (uint8_t)tp;
		expect_refused(&s, RIPC_WIRE_ADDR_BAD,
			       "transport out of range");
	}
	sample_short(&s, 1);
	spec_addr(&s, RIPC_PROV_MAX, 4);
	expect_refused(&s, RIPC_WIRE_ADDR_BAD, "short, transport MAX");

	sample_long(&s, 1, 0);
	s.addr_len = 0;
	expect_refused(&s, RIPC_WIRE_ADDR_BAD, "address of length 0");
	sample_long(&s, 1, 0);
	s.addr_len = RIPC_ADDR_MAX + 1;
	expect_refused(&s, RIPC_WIRE_ADDR_BAD, "address over RIPC_ADDR_MAX");
	sample_long(&s, 1, 0);
	s.addr_len = 255;
	expect_refused(&s, RIPC_WIRE_ADDR_BAD, "address of 255 bytes");

	/* The address runs past the end of the message: the length field
	 * agrees with the (short) bytes received. */
	for (unsigned cut = 1; cut <= al8(2 + RIPC_ADDR_MAX); cut++) {
		size_t len;
		uint8_t *b, *t;
		int err;

		sample_long(&s, 1, 0);
		s.addr_len = RIPC_ADDR_MAX;
		b = raw_encode(&s, &len);
		/* The address section is last: drop its final `cut`
		 * bytes (padding first, then address bytes). */
		len -= cut;
		t = dup_bytes(b, len);
		w32(t + 24, (uint32_t)len);
		err = ripc__wire_decode(t, len, &in);
		cr_assert(err == RIPC_WIRE_LEN_BAD || err == RIPC_WIRE_ADDR_BAD,
			  "address cut by %u: %s", cut,
			  ripc__wire_strerror(err));
		free(t);
		free(b);
	}
	/* Flag set but not even the two bytes of the section header. */
	{
		size_t len;
		uint8_t *b;

		sample_done(&s);
		b = raw_encode(&s, &len);
		w16(b + 34, RIPC_WF_ADDR);
		cr_assert_eq(ripc__wire_decode(b, len, &in), RIPC_WIRE_LEN_BAD);
		free(b);
	}
}

/* ---- truncations ---------------------------------------------------- */

static void build_samples(struct spec *s, unsigned *n)
{
	unsigned k = 0;

	sample_short(&s[k++], 0);
	sample_short(&s[k++], 1);
	sample_short(&s[k++], 5);
	sample_short(&s[k], 3);
	s[k].nret = 2;
	s[k].rdesc[0] = mkdesc(0, 64, 0);
	s[k].rdesc[1] = mkdesc(1, 64, 0);
	spec_addr(&s[k++], RIPC_PROV_SHM, 13);
	sample_long(&s[k++], 1, 0);
	sample_long(&s[k++], 4, 2);
	sample_return(&s[k++], 0, 3);
	sample_return(&s[k++], 2, 2);
	sample_done(&s[k++]);
	sample_nack(&s[k++]);
	*n = k;
}

#define NSAMPLES 10

/* Every proper prefix of a valid message is refused, whether the length
 * field still claims the full size or was adjusted to the prefix. */
Test(wire, every_truncation_refused)
{
	static struct spec s[NSAMPLES];
	struct ripc_wire_in *in = malloc(sizeof(*in));
	unsigned ns;

	cr_assert_not_null(in);
	build_samples(s, &ns);
	cr_assert_eq(ns, NSAMPLES);
	for (unsigned k = 0; k < ns; k++) {
		size_t len;
		uint8_t *b = raw_encode(&s[k], &len);

		cr_assert_eq(ripc__wire_decode(b, len, in), RIPC_WIRE_OK,
			     "sample %u", k);
		for (size_t n = 0; n < len; n++) {
			uint8_t *t = dup_bytes(b, n);
			int err = ripc__wire_decode(t, n, in);

			cr_assert_neq(err, RIPC_WIRE_OK,
				      "sample %u: prefix of %zu/%zu accepted",
				      k, n, len);
			if (n >= 28) {
				w32(t + 24, (uint32_t)n);
				err = ripc__wire_decode(t, n, in);
				cr_assert_neq(err, RIPC_WIRE_OK,
					      "sample %u: prefix of %zu/%zu "
					      "with matching length field "
					      "accepted",
					      k, n, len);
			}
			free(t);
		}
		free(b);
	}
	free(in);
}

/* ---- random mutations ----------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

/* Everything a decoder that said OK hands out must be consistent and lie
 * inside the bytes received. */
static void check_sane(const uint8_t *b, size_t len,
		       const struct ripc_wire_in *m, unsigned iter)
{
	const uint8_t *end = b + len, *prev_end;
	struct ripc_wire_out o;
	uint64_t seen = 0;
	size_t fixed, sum = 0;
	unsigned n = m->nlong + m->nret;

	cr_assert(m->type >= RIPC_MT_SHORT && m->type < RIPC_MT_TYPE_MAX,
		  "iter %u", iter);
	cr_assert_eq(m->flags & ~RIPC_WF_ALL, 0, "iter %u", iter);
	cr_assert(!(m->flags & RIPC_WF_DONE) ||
			  (m->type == RIPC_MT_SHORT && m->cookie &&
			   !(m->flags & RIPC_WF_MCAST)),
		  "iter %u: done flag", iter);
	cr_assert(m->src <= RIPC_MAX_SERVICE_ID &&
			  m->dst <= RIPC_MAX_SERVICE_ID,
		  "iter %u", iter);
	cr_assert(m->nshort <= RIPC_MAX_ITEMS && m->nlong <= RIPC_MAX_ITEMS &&
			  m->nret <= RIPC_MAX_RETURN_BUFS,
		  "iter %u", iter);
	switch (m->type) {
	case RIPC_MT_SHORT:
		cr_assert_eq(m->nlong, 0, "iter %u", iter);
		break;
	case RIPC_MT_LONG:
		cr_assert(!m->nshort && m->nlong &&
				  (m->flags & RIPC_WF_ADDR),
			  "iter %u", iter);
		break;
	case RIPC_MT_RETURN:
		cr_assert(!m->nshort && m->nret && n <= RIPC_MAX_ITEMS,
			  "iter %u", iter);
		cr_assert(!m->nlong || (m->flags & RIPC_WF_ADDR), "iter %u",
			  iter);
		break;
	default:
		cr_assert(!m->nshort && !m->nlong && !m->nret, "iter %u",
			  iter);
	}
	for (unsigned i = 0; i < n; i++) {
		const struct ripc_wire_desc *d =
			i < m->nlong ? &m->long_desc[i]
				     : &m->ret_desc[i - m->nlong];

		cr_assert(d->len > 0 && d->addr + d->len > d->addr,
			  "iter %u: descriptor %u", iter, i);
		if (m->type == RIPC_MT_RETURN) {
			cr_assert(d->aux < n && !(seen & (1ull << d->aux)),
				  "iter %u: aux", iter);
			seen |= 1ull << d->aux;
		} else {
			cr_assert_eq(d->aux, 0, "iter %u: aux", iter);
		}
	}
	fixed = RIPC_WIRE_HDR + al8(4 * (size_t)m->nshort) +
		RIPC_WIRE_DESC * (size_t)n;
	if (m->flags & RIPC_WF_ADDR) {
		cr_assert(m->addr_tp < RIPC_PROV_MAX && m->addr_len > 0 &&
				  m->addr_len <= RIPC_ADDR_MAX,
			  "iter %u: address", iter);
		cr_assert(m->addr == b + fixed + 2 &&
				  m->addr + m->addr_len <= end,
			  "iter %u: address outside the message", iter);
		fixed += al8(2 + (size_t)m->addr_len);
	} else {
		cr_assert_null(m->addr, "iter %u", iter);
	}
	prev_end = b + fixed;
	for (unsigned i = 0; i < m->nshort; i++) {
		const uint8_t *p = m->short_ptr[i];

		cr_assert(m->short_len[i] > 0, "iter %u", iter);
		cr_assert(p >= prev_end && p <= end &&
				  m->short_len[i] <= (size_t)(end - p),
			  "iter %u: item %u outside the message", iter, i);
		prev_end = p + m->short_len[i];
		sum += m->short_len[i];
	}
	cr_assert_leq(sum, (size_t)RIPC_SHORT_MAX, "iter %u", iter);

	/* What was accepted is exactly what the encoder would produce. */
	o = (struct ripc_wire_out){ .type = m->type, .flags = m->flags,
				    .nshort = m->nshort, .nlong = m->nlong,
				    .nret = m->nret,
				    .short_len = m->short_len,
				    .addr_len = m->addr_len };
	cr_assert_eq(ripc__wire_size(&o), len, "iter %u: size", iter);
}

Test(wire, random_mutations, .timeout = 120)
{
	static struct spec s[NSAMPLES];
	struct ripc_wire_in *in = malloc(sizeof(*in));
	unsigned ns, ok = 0, refused = 0;
	const unsigned iters = 200000;

	cr_assert_not_null(in);
	build_samples(s, &ns);
	for (unsigned it = 0; it < iters; it++) {
		const struct spec *sp = &s[it % ns];
		size_t len, mlen;
		uint8_t *b = raw_encode(sp, &len), *t;
		unsigned flips = 1 + rnd() % 4, mode = rnd() % 4;
		int err;

		/* mode 3: also change the size (with the length field
		 * following), which lets mutations reach the sections. */
		mlen = mode == 3 ? rnd() % (len + 24) : len;
		t = malloc(mlen ? mlen : 1);
		cr_assert_not_null(t);
		for (size_t k = 0; k < mlen; k++)
			t[k] = k < len ? b[k] : (uint8_t)rnd();
		for (unsigned f = 0; f < flips && mlen; f++) {
			/* mode 0: anywhere; 1: header; 2: fixed sections. */
			size_t lim = mode == 1	 ? RIPC_WIRE_HDR
				     : mode == 2 ? spec_fixed(sp)
						 : mlen;
			size_t pos = rnd() % (lim < mlen ? lim : mlen);

			if (pos == 24 && mode != 0)
				continue; /* keep the length consistent */
			t[pos] ^= (uint8_t)(1 + rnd() % 255);
		}
		if (mode == 3 && mlen >= 28)
			w32(t + 24, (uint32_t)mlen);
		err = ripc__wire_decode(t, mlen, in);
		cr_assert(err >= 0 && err < RIPC_WIRE_ERR_MAX,
			  "iter %u: decode returned %d", it, err);
		if (err == RIPC_WIRE_OK) {
			check_sane(t, mlen, in, it);
			ok++;
		} else {
			refused++;
		}
		free(t);
		free(b);
	}
	/* Both outcomes must have been exercised for the test to mean
	 * anything. */
	cr_log_info("mutations: %u accepted, %u refused", ok, refused);
	cr_assert_gt(ok, iters / 100, "only %u mutated messages accepted", ok);
	cr_assert_gt(refused, iters / 100, "only %u refused", refused);
	free(in);
}

/* ---- the encoder's limits ------------------------------------------- */

Test(wire, size_zero_over_limits)
{
	struct ripc_wire_out o;
	void *bufs[NMAX];
	struct spec s;

	sample_short(&s, RIPC_MAX_ITEMS + 1);
	spec_to_out(&s, &o, bufs);
	cr_assert_eq(ripc__wire_size(&o), 0, "65 short items");

	sample_long(&s, RIPC_MAX_ITEMS + 1, 0);
	spec_to_out(&s, &o, bufs);
	cr_assert_eq(ripc__wire_size(&o), 0, "65 long items");

	sample_long(&s, 1, RIPC_MAX_RETURN_BUFS + 1);
	spec_to_out(&s, &o, bufs);
	cr_assert_eq(ripc__wire_size(&o), 0, "65 return buffers");

	sample_long(&s, 1, 0);
	s.addr_len = 0;
	spec_to_out(&s, &o, bufs);
	cr_assert_eq(ripc__wire_size(&o), 0, "address of length 0");
	s.addr_len = RIPC_ADDR_MAX + 1;
	spec_to_out(&s, &o, bufs);
	cr_assert_eq(ripc__wire_size(&o), 0, "address over RIPC_ADDR_MAX");

	sample_short(&s, 1);
	s.short_len[0] = RIPC_SHORT_MAX + 1;
	spec_to_out(&s, &o, bufs);
	cr_assert_eq(ripc__wire_size(&o), 0, "item over RIPC_SHORT_MAX");

	sample_short(&s, RIPC_MAX_ITEMS);
	for (unsigned i = 0; i < RIPC_MAX_ITEMS; i++)
		s.short_len[i] = RIPC_SHORT_MAX / RIPC_MAX_ITEMS;
	s.short_len[7]++;
	spec_to_out(&s, &o, bufs);
	cr_assert_eq(ripc__wire_size(&o), 0, "sum RIPC_SHORT_MAX + 1");

	/* Sums that wrap 32 bits. */
	sample_short(&s, 2);
	s.short_len[0] = UINT32_MAX;
	s.short_len[1] = 1;
	spec_to_out(&s, &o, bufs);
	cr_assert_eq(ripc__wire_size(&o), 0, "UINT32_MAX + 1");
}

/*
 * Whatever the encoder agrees to size must be a message the decoder
 * accepts: otherwise a sender "successfully" sends what every receiver
 * drops as malformed.
 */
Test(wire, size_zero_when_decoder_would_refuse)
{
	struct ripc_wire_out o;
	void *bufs[NMAX];
	struct spec s;

	sample_return(&s, 33, 32);
	spec_to_out(&s, &o, bufs);
	cr_expect_eq(ripc__wire_size(&o), 0,
		     "RETURN with 33 + 32 items: the decoder refuses it "
		     "(RIPC_WIRE_COUNT_BAD) but the encoder sizes it");
}

Test(wire, strerror_every_reason)
{
	for (int e = 0; e < RIPC_WIRE_ERR_MAX; e++) {
		const char *t = ripc__wire_strerror(e);

		cr_assert(t && *t && strcmp(t, "?"), "reason %d has no text",
			  e);
		for (int f = 0; f < e; f++)
			cr_assert_str_neq(t, ripc__wire_strerror(f),
					  "reasons %d and %d", e, f);
	}
	cr_assert_not_null(ripc__wire_strerror(-1));
	cr_assert_not_null(ripc__wire_strerror(RIPC_WIRE_ERR_MAX));
	cr_assert_not_null(ripc__wire_strerror(1000));
}

/* ---- framing (RIPC_WF_FRAG, RIPC_MT_FRAG; frag.c puts messages together)
 * A continuation built by hand from the layout in ripc_protocol(7). */
static uint8_t *raw_frag(uint64_t src_inc, uint64_t dst_inc, uint32_t off,
			 uint32_t n, size_t *len)
{
	uint8_t *b = calloc(1, RIPC_WIRE_HDR + n);

	cr_assert_not_null(b);
	w16(b, RIPC_WIRE_MAGIC);
	b[2] = RIPC_WIRE_VERSION;
	b[3] = RIPC_MT_FRAG;
	w64(b + 8, src_inc);
	w64(b + 16, dst_inc);
	w32(b + 24, RIPC_WIRE_HDR + n);
	w32(b + 36, off);
	memcpy(b + RIPC_WIRE_HDR, pat + off % 251, n);
	*len = RIPC_WIRE_HDR + n;
	return b;
}

static enum ripc_wire_frag_kind peek_copy(const void *p, size_t len,
					  size_t max, struct ripc_wire_frag *f)
{
	uint8_t *c = dup_bytes(p, len);
	enum ripc_wire_frag_kind k = ripc__wire_frag_peek(c, len, max, f);

	/* The quick test may send a message to the check for nothing, never
	 * pass framing by. */
	cr_assert(k == RIPC_FRAG_NONE || ripc__wire_maybe_frag(c, len),
		  "the quick test missed framing (kind %d)", k);
	free(c);
	return k;
}

Test(wire, frag_whole_messages_are_not_framing)
{
	struct spec s[16];
	struct ripc_wire_frag f;
	unsigned n = 0;

	build_samples(s, &n);
	for (unsigned i = 0; i < n; i++) {
		size_t len;
		uint8_t *b = raw_encode(&s[i], &len);

		cr_assert_eq(peek_copy(b, len, RIPC_SLOT_SIZE, &f),
			     RIPC_FRAG_NONE, "sample %u", i);
		for (size_t cut = 0; cut < RIPC_WIRE_HDR && cut < len; cut++)
			cr_assert_eq(peek_copy(b, cut, RIPC_SLOT_SIZE, &f),
				     RIPC_FRAG_NONE, "%zu bytes", cut);
		free(b);
	}
}

Test(wire, frag_first_fragment)
{
	struct spec s;
	struct ripc_wire_frag f;
	size_t len;
	uint8_t *b;

	sample_short(&s, 1);
	s.short_len[0] = 8000;
	b = raw_encode(&s, &len);
	ripc__wire_frag_mark(b, true);
	cr_assert_eq(b[34], (uint8_t)(s.flags | RIPC_WF_FRAG));
	cr_assert_eq(peek_copy(b, 4096, RIPC_SLOT_SIZE, &f), RIPC_FRAG_FIRST);
	cr_assert_eq(f.total, len);
	cr_assert_eq(f.len, 4096);
	cr_assert_eq(f.src_inc, s.src_inc);
	/* Announcing no more than it carries, or more than a slot holds. */
	cr_assert_eq(peek_copy(b, len, RIPC_SLOT_SIZE, &f), RIPC_FRAG_BAD);
	cr_assert_eq(peek_copy(b, 4096, len - 1, &f), RIPC_FRAG_BAD);
	w32(b + 24, 4096);
	cr_assert_eq(peek_copy(b, 4096, RIPC_SLOT_SIZE, &f), RIPC_FRAG_BAD);
	w32(b + 24, 0xffffffffu);
	cr_assert_eq(peek_copy(b, 4096, RIPC_SLOT_SIZE, &f), RIPC_FRAG_BAD);
	/* Cleared, it is the whole message again, and decodes. */
	w32(b + 24, (uint32_t)len);
	ripc__wire_frag_mark(b, false);
	cr_assert_eq(peek_copy(b, len, RIPC_SLOT_SIZE, &f), RIPC_FRAG_NONE);
	cr_assert_eq(decode_copy(b, len, &(struct ripc_wire_in){ 0 }),
		     RIPC_WIRE_OK);
	free(b);
}

Test(wire, frag_continuation_encode_and_peek)
{
	static const uint32_t sizes[] = { 1, 7, 8, 4048, 60000 };

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i], off = 4096 + 4048 * i;
		uint8_t *mine = malloc(RIPC_WIRE_HDR + n);
		struct ripc_wire_frag f;
		size_t len, got;
		uint8_t *want = raw_frag(0x1234567890abcdefull, 0x42, off, n,
					 &len);

		cr_assert_not_null(mine);
		got = ripc__wire_frag_encode(mine, 0x1234567890abcdefull, 0x42,
					     off, pat + off % 251, n);
		cr_assert_eq(got, len);
		cr_assert(!memcmp(mine, want, len), "continuation of %u bytes",
			  n);
		cr_assert_eq(peek_copy(mine, len, RIPC_SLOT_SIZE, &f),
			     RIPC_FRAG_NEXT);
		cr_assert_eq(f.off, off);
		cr_assert_eq(f.len, n);
		cr_assert_eq(f.src_inc, 0x1234567890abcdefull);
		free(mine);
		free(want);
	}
}

Test(wire, frag_continuation_refused)
{
	/* Fields a continuation must have 0 in: services, counts, flags
	 * (any bit), cookie. */
	static const size_t zero_at[] = { 4, 6, 28, 30, 32, 34, 35, 40, 47 };
	struct ripc_wire_frag f;
	size_t len;
	uint8_t *b = raw_frag(1, 2, 4096, 100, &len);

	for (unsigned i = 0; i < sizeof(zero_at) / sizeof(zero_at[0]); i++) {
		b[zero_at[i]] = 1;
		cr_assert_eq(peek_copy(b, len, RIPC_SLOT_SIZE, &f),
			     RIPC_FRAG_BAD, "byte %zu", zero_at[i]);
		b[zero_at[i]] = 0;
	}
	/* Its length must be what arrived, and more than a header. */
	cr_assert_eq(peek_copy(b, len - 1, RIPC_SLOT_SIZE, &f), RIPC_FRAG_BAD);
	w32(b + 24, (uint32_t)len + 1);
	cr_assert_eq(peek_copy(b, len, RIPC_SLOT_SIZE, &f), RIPC_FRAG_BAD);
	w32(b + 24, RIPC_WIRE_HDR);
	cr_assert_eq(peek_copy(b, RIPC_WIRE_HDR, RIPC_SLOT_SIZE, &f),
		     RIPC_FRAG_BAD);
	free(b);
}

/* The quick test never lets by what the check calls framing, whatever
 * the bytes (peek_copy asserts it). */
Test(wire, frag_quick_test_agrees_on_random_bytes)
{
	uint8_t b[96];
	struct ripc_wire_frag f;

	for (int i = 0; i < 200000; i++) {
		size_t len = rnd() % sizeof(b);

		for (size_t k = 0; k < sizeof(b); k++)
			b[k] = (uint8_t)rnd();
		if (rnd() & 1) {
			w16(b, RIPC_WIRE_MAGIC);
			b[2] = RIPC_WIRE_VERSION;
		}
		if (rnd() & 1)
			b[3] = RIPC_MT_FRAG;
		peek_copy(b, len, RIPC_SLOT_SIZE, &f);
	}
}
