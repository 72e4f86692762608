/*
 * libFuzzer target for ripc__res_decode(), the validating decoder of
 * resolver datagrams (ripc/resolver.c; layout and rules in
 * ripc_protocol(7), RESOLVER).  Datagrams come from anybody on the LAN
 * who can reach the multicast group or the private port.
 *
 * For every input the target checks:
 *
 *  1. Memory safety: decoding runs on a heap copy of exactly the input
 *     bytes (ASan), with UBSan.
 *  2. Agreement with the documentation: an independent reference check
 *     (spec_ok below, written from ripc_protocol(7)) must accept exactly
 *     the inputs the library accepts, with the same field values.
 *  3. For accepted inputs: every address length lies within its array and
 *     its bytes are the ones in the input; ripc__res_encode() of the
 *     decoded datagram has the input's length, is byte-identical to it when
 *     the input lists its addresses in transport order (the encoder's
 *     order), and decodes to the same datagram.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resolver.h"

#define FAIL(...)                                                            \
	do {                                                                 \
		fprintf(stderr, "fuzz_resolver: " __VA_ARGS__);              \
		fputc('\n', stderr);                                         \
		abort();                                                     \
	} while (0)

static uint64_t rd(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Where each transport's address sits in the input (0: absent). */
struct spec_dgram {
	size_t addr_off[RIPC_PROV_MAX];
	uint8_t addr_len[RIPC_PROV_MAX];
	bool sorted; /* entries in increasing transport order */
};

/* The receiver's rules from ripc_protocol(7), RESOLVER, one by one. */
static bool spec_ok(const uint8_t *b, size_t len, struct spec_dgram *s)
{
	size_t off = 40;
	unsigned naddr, last = 0;

	memset(s, 0, sizeof(*s));
	s->sorted = true;
	if (len < 40)
		return false;
	if (rd(b, 4) != 0x52495052 || b[4] != 1)
		return false;
	if (b[5] < 1 || b[5] > 5) /* QUERY, ANSWER, ANNOUNCE, PROBE, DEFEND */
		return false;
	if (rd(b + 6, 2) > 65534)
		return false;
	if (b[18] & ~3u) /* MCAST, DOWN */
		return false;
	naddr = b[19];
	if (naddr > 3)
		return false;
	if (rd(b + 24, 8) == 0) /* incarnation */
		return false;
	for (unsigned i = 0; i < naddr; i++) {
		unsigned tp, alen;

		if (off + 2 > len)
			return false;
		tp = b[off];
		alen = b[off + 1];
		if (tp > 2 || alen < 1 || alen > 112 || off + 2 + alen > len ||
		    s->addr_len[tp])
			return false;
		if (i && tp < last)
			s->sorted = false;
		last = tp;
		s->addr_off[tp] = off + 2;
		s->addr_len[tp] = (uint8_t)alen;
		off += 2 + alen;
	}
	return off == len;
}

static void compare_spec(const uint8_t *b, const struct res_dgram *d,
			 const struct spec_dgram *s)
{
	unsigned n = 0;

	if (d->type != b[5] || d->service != rd(b + 6, 2) ||
	    d->nonce != rd(b + 8, 8) || d->reply_port != rd(b + 16, 2) ||
	    d->flags != b[18] || d->naddr != b[19] ||
	    (uint32_t)d->info.pid != rd(b + 20, 4) ||
	    d->info.incarnation != rd(b + 24, 8) ||
	    d->info.host_id != rd(b + 32, 8))
		FAIL("header fields differ from the reference");
	for (unsigned t = 0; t < RIPC_PROV_MAX; t++) {
		const struct ripc_reg_addr *a = &d->info.addr[t];

		if (a->len > sizeof(a->addr))
			FAIL("address %u: length %u beyond its array", t,
			     a->len);
		if (a->len != s->addr_len[t])
			FAIL("address %u: length %u, reference %u", t, a->len,
			     s->addr_len[t]);
		if (a->len && memcmp(a->addr, b + s->addr_off[t], a->len))
			FAIL("address %u: bytes differ from the input", t);
		n += a->len != 0;
	}
	if (n != d->naddr)
		FAIL("%u addresses decoded, naddr %u", n, d->naddr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Heap copy of exactly the datagram so ASan sees overreads. */
	uint8_t *buf = malloc(size ? size : 1);
	struct res_dgram d, again;
	struct spec_dgram s;
	uint8_t *enc;
	size_t n;
	bool ok, want;

	if (!buf)
		abort();
	memcpy(buf, data, size);
	ok = ripc__res_decode(buf, size, &d);
	want = spec_ok(buf, size, &s);
	if (ok != want)
		FAIL("decoder %s, ripc_protocol(7) %s", ok ? "accepts" : "refuses",
		     want ? "accepts" : "refuses");
	if (!ok) {
		free(buf);
		return 0;
	}
	compare_spec(buf, &d, &s);

	/* Re-encode: the encoder needs RES_MAX_DGRAM bytes of room; give it
	 * exactly that on the heap so an overflow is caught. */
	enc = malloc(RES_MAX_DGRAM);
	if (!enc)
		abort();
	n = ripc__res_encode(&d, enc);
	if (n != size)
		FAIL("re-encoded %zu bytes, input %zu", n, size);
	if (s.sorted && memcmp(enc, buf, n))
		FAIL("re-encoding differs from the input");
	if (!ripc__res_decode(enc, n, &again))
		FAIL("the decoder refuses its own encoding");
	/* Both structs were zeroed by the decoder before being filled, so
	 * padding and unused address bytes compare equal too. */
	if (memcmp(&d, &again, sizeof(d)))
		FAIL("re-decoded datagram differs");
	free(enc);
	free(buf);
	return 0;
}
