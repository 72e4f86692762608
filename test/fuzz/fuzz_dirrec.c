/*
 * libFuzzer target for ripc__dir_rec_decode(), the validating decoder of
 * the records in service directory nodes (ripc/dir_record.c; layout and
 * rules in ripc_protocol(7), DIRECTORY).  Anybody who can write to the
 * directory's servers writes these.
 *
 * For every input the target checks:
 *
 *  1. Memory safety: decoding runs on a heap copy of exactly the input
 *     bytes (ASan), with UBSan.
 *  2. Agreement with the documentation: an independent reference check
 *     (spec_ok below, written from ripc_protocol(7)) must accept exactly
 *     the inputs the library accepts, with the same kind and fields; a
 *     refused input leaves the output zeroed.
 *  3. For accepted inputs: ripc__dir_rec_encode() of the decoded record has
 *     the input's length, is byte-identical to it when the addresses are
 *     in transport order (the encoder's order), and decodes to the same
 *     record.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dir_record.h"

#define FAIL(...)                                                            \
	do {                                                                 \
		fprintf(stderr, "fuzz_dirrec: " __VA_ARGS__);                \
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

struct spec_rec {
	int kind;
	size_t addr_off[3];
	uint8_t addr_len[3];
	bool sorted;
};

/* The rules of ripc_protocol(7), DIRECTORY, one by one. */
static bool spec_ok(const uint8_t *b, size_t len, struct spec_rec *s)
{
	size_t off = 40;
	unsigned naddr, last = 0;
	uint32_t pid;

	memset(s, 0, sizeof(*s));
	s->sorted = true;
	if (len < 8 || rd(b, 4) != 0x52445052 || b[4] != 1 || b[6] != 0)
		return false;
	naddr = b[7];
	if (b[5] == 2) { /* group */
		s->kind = 2;
		return len == 8 && naddr == 0;
	}
	if (b[5] != 1 || len < 40 || naddr > 3)
		return false;
	pid = (uint32_t)rd(b + 24, 4);
	if (rd(b + 8, 8) == 0 || pid == 0 || pid > 0x7fffffffu ||
	    rd(b + 28, 4) != 0)
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
	s->kind = 1;
	return off == len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size ? size : 1), *enc;
	struct ripc_dir_rec r, again, zero;
	struct spec_rec s;
	bool want;
	int kind;
	size_t n;

	if (!buf)
		abort();
	memcpy(buf, data, size);
	memset(&r, 0xa5, sizeof(r));
	kind = ripc__dir_rec_decode(buf, size, &r);
	want = spec_ok(buf, size, &s);
	if ((kind > 0) != want)
		FAIL("decoder %s, ripc_protocol(7) %s",
		     kind > 0 ? "accepts" : "refuses",
		     want ? "accepts" : "refuses");
	memset(&zero, 0, sizeof(zero));
	if (kind < 0) {
		if (kind != -EBADMSG)
			FAIL("refusal %d, not -EBADMSG", kind);
		if (memcmp(&r, &zero, sizeof(r)))
			FAIL("a refused record left data in the output");
		free(buf);
		return 0;
	}
	if (kind != s.kind || r.kind != kind)
		FAIL("kind %d, reference %d", kind, s.kind);
	if (kind == RIPC_DIR_REC_HOLDER) {
		if (r.info.incarnation != rd(buf + 8, 8) ||
		    r.info.host_id != rd(buf + 16, 8) ||
		    (uint32_t)r.info.pid != rd(buf + 24, 4) ||
		    r.starttime != rd(buf + 32, 8))
			FAIL("header fields differ from the reference");
		for (unsigned t = 0; t < 3; t++) {
			const struct ripc_reg_addr *a = &r.info.addr[t];

			if (a->len > sizeof(a->addr))
				FAIL("address %u beyond its array", t);
			if (a->len != s.addr_len[t])
				FAIL("address %u: length %u, reference %u", t,
				     a->len, s.addr_len[t]);
			if (a->len && memcmp(a->addr, buf + s.addr_off[t], a->len))
				FAIL("address %u: bytes differ", t);
		}
	}
	enc = malloc(RIPC_DIR_REC_MAX);
	if (!enc)
		abort();
	n = ripc__dir_rec_encode(&r, enc);
	if (n != size)
		FAIL("re-encoded %zu bytes, input %zu", n, size);
	if (s.sorted && memcmp(enc, buf, n))
		FAIL("re-encoding differs from the input");
	if (ripc__dir_rec_decode(enc, n, &again) != kind)
		FAIL("the decoder refuses its own encoding");
	if (memcmp(&r, &again, sizeof(r)))
		FAIL("re-decoded record differs");
	free(enc);
	free(buf);
	return 0;
}
