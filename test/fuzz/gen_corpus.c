/*
 * Seed corpus for the fuzz targets: one file per message, written with the
 * library's own encoders (ripc__wire_encode, ripc__res_encode,
 * ripc__dir_rec_encode), so that the
 * fuzzer starts from messages a real peer sends and mutates them into
 * near-misses of every check.
 *
 * Usage: gen_corpus <dir>
 *   writes the files into <dir>/wire, <dir>/resolver and <dir>/dirrec.
 *
 * Every seed is decoded again before it is written; a seed the decoder
 * refuses is a bug (in the encoder, the decoder or this program) and makes
 * the generator fail.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dir_record.h"
#include "resolver.h"
#include "wire.h"

/* Resolver datagram types and flags (ripc_protocol(7), RESOLVER); the
 * names are private to resolver.c. */
enum {
	RES_QUERY = 1,
	RES_ANSWER = 2,
	RES_ANNOUNCE = 3,
	RES_PROBE = 4,
	RES_DEFEND = 5
};
#define RES_F_MCAST 0x1u
#define RES_F_DOWN 0x2u

static const char *outdir;
static unsigned nwire, nres, ndir;

static void die(const char *what)
{
	fprintf(stderr, "gen_corpus: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void write_file(const char *sub, const char *name, const void *buf,
		       size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", outdir, sub, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f))
		die(path);
}

/* ---- wire messages ----------------------------------------------------- */

static uint8_t payload[RIPC_SHORT_MAX];
static uint8_t wbuf[RIPC_WIRE_MAX];
static struct ripc_wire_in in;

static void wire(const char *name, struct ripc_wire_out *m)
{
	size_t n = ripc__wire_size(m);
	int err;

	if (!n) {
		fprintf(stderr, "gen_corpus: %s: breaks a limit\n", name);
		exit(1);
	}
	if (ripc__wire_encode(m, wbuf) != n)
		exit(1);
	err = ripc__wire_decode(wbuf, n, &in);
	if (err) {
		fprintf(stderr, "gen_corpus: %s: decoder refuses it: %s\n",
			name, ripc__wire_strerror(err));
		exit(1);
	}
	write_file("wire", name, wbuf, n);
	nwire++;
}

/* Plausible descriptors: user-space addresses, 63-bit keys like the
 * library's CSPRNG keys (bit 31 clear, ref §3.3). */
static struct ripc_wire_desc desc(unsigned i, uint32_t len, uint32_t aux)
{
	return (struct ripc_wire_desc){
		.addr = 0x7f3a12340000ull + 0x100000ull * i,
		.key = (0x5a5a5a5a00000000ull ^ ((uint64_t)i << 40)) |
		       (0x1234567u + i),
		.len = len,
		.aux = aux,
	};
}

static void gen_wire(void)
{
	static void *bufs[RIPC_MAX_ITEMS];
	static uint32_t lens[RIPC_MAX_ITEMS];
	static struct ripc_wire_desc ld[RIPC_MAX_ITEMS],
		rd[RIPC_MAX_RETURN_BUFS];
	/* A tcp;ofi_rxm address (sockaddr_in) and an shm name, as the
	 * providers return them from fi_getname. */
	static const uint8_t tcp_addr[16] = { 2, 0, 0x9c, 0x41, 127, 0, 0, 1 };
	static const char shm_addr[] = "fi_shm://123456:0";
	struct ripc_wire_out m;

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 31 + 7);
	for (unsigned i = 0; i < RIPC_MAX_ITEMS; i++) {
		bufs[i] = payload + 64 * i;
		lens[i] = 1 + (i * 7) % 40; /* 1..40: odd sizes, padding */
		ld[i] = desc(i, 4096u << (i % 9), 0);
		rd[i] = desc(100 + i, 65536, 0);
	}
	const struct ripc_wire_out base = {
		.src = 7,
		.dst = 4242,
		.src_inc = 0x0123456789abcdefull,
		.dst_inc = 0x7edcba9876543210ull,
	};

	/* SHORT: 0, 1 and 64 items; with return-buffer offers; MCAST; one
	 * item of the maximum size. */
	m = base;
	m.type = RIPC_MT_SHORT;
	wire("short-0", &m);
	m.nshort = 1;
	m.short_buf = bufs;
	m.short_len = (uint32_t[]){ 5 };
	bufs[0] = "ping";
	wire("short-1", &m);
	m.short_len = lens;
	bufs[0] = payload;
	m.nshort = RIPC_MAX_ITEMS;
	wire("short-64", &m);
	m.nshort = 3;
	m.nret = 2;
	m.ret_desc = rd;
	m.status = 5000; /* ms the receiver may use the offers */
	wire("short-3-offer-2", &m);
	m.nshort = 1;
	m.nret = RIPC_MAX_RETURN_BUFS;
	wire("short-1-offer-64", &m);
	m = base;
	m.type = RIPC_MT_SHORT;
	m.flags = RIPC_WF_MCAST;
	m.nshort = 2;
	m.short_buf = bufs;
	m.short_len = lens;
	wire("short-mcast", &m);
	m.flags = 0;
	m.nshort = 1;
	m.short_len = (uint32_t[]){ RIPC_SHORT_MAX };
	wire("short-max", &m);
	/* An answer that carries the DONE of a long send. */
	m.flags = RIPC_WF_DONE;
	m.cookie = 0x1122334455667788ull;
	m.short_len = (uint32_t[]){ 3 };
	bufs[0] = "ok";
	wire("short-done", &m);
	bufs[0] = payload;

	/* LONG: 1 and 64 descriptors, over tcp and shm, with offers. */
	m = base;
	m.type = RIPC_MT_LONG;
	m.flags = RIPC_WF_ADDR;
	m.cookie = 0x1122334455667788ull;
	m.nlong = 1;
	m.long_desc = ld;
	m.addr_tp = RIPC_PROV_TCP;
	m.addr_len = sizeof(tcp_addr);
	m.addr = tcp_addr;
	wire("long-1-tcp", &m);
	m.nlong = RIPC_MAX_ITEMS;
	m.addr_tp = RIPC_PROV_SHM;
	m.addr_len = sizeof(shm_addr);
	m.addr = shm_addr;
	wire("long-64-shm", &m);
	m.nlong = 2;
	m.nret = 3;
	m.ret_desc = rd;
	m.status = 5000;
	wire("long-2-offer-3", &m);

	/* DONE: success and a failed pull. */
	m = base;
	m.type = RIPC_MT_DONE;
	m.src = m.dst = 0;
	m.cookie = 0x1122334455667788ull;
	wire("done", &m);
	m.status = RIPC_EPULL;
	wire("done-epull", &m);

	/* RETURN: written items only; written items plus items to pull. The
	 * aux fields are the items' positions in the reply. */
	m = base;
	m.type = RIPC_MT_RETURN;
	m.nret = 2;
	m.ret_desc = (struct ripc_wire_desc[]){ desc(100, 300, 1),
						desc(101, 65536, 0) };
	wire("return-2", &m);
	m.flags = RIPC_WF_ADDR;
	m.cookie = 0x99aabbccddeeff00ull;
	m.addr_tp = RIPC_PROV_TCP;
	m.addr_len = sizeof(tcp_addr);
	m.addr = tcp_addr;
	m.nlong = 2;
	m.long_desc = (struct ripc_wire_desc[]){ desc(0, 1 << 20, 2),
						 desc(1, 4096, 0) };
	m.nret = 1;
	m.ret_desc = (struct ripc_wire_desc[]){ desc(100, 300, 1) };
	wire("return-1-pull-2", &m);

	/* NACK: refused long send; withdrawal of offers (cookie 0). */
	m = base;
	m.type = RIPC_MT_NACK;
	m.status = RIPC_ENOSERVICE;
	m.cookie = 0x1122334455667788ull;
	wire("nack-enoservice", &m);
	m.status = RIPC_ENOTFOUND;
	m.cookie = 0;
	wire("nack-cancel", &m);

	/* Framing (FRAGMENTS): the first fragment of an 8000-byte item's
	 * message, and a continuation of 100 bytes. */
	m = base;
	m.nshort = 1;
	m.short_buf = bufs;
	m.short_len = (uint32_t[]){ 8000 };
	if (ripc__wire_encode(&m, wbuf) < 4097)
		exit(1);
	ripc__wire_frag_mark(wbuf, true);
	write_file("wire", "frag-first", wbuf, 4096);
	write_file("wire", "frag-next",
		   wbuf, ripc__wire_frag_encode(wbuf, base.src_inc,
						base.dst_inc, 4096, payload,
						100));
	nwire += 2;
}

/* ---- resolver datagrams ------------------------------------------------ */

static void res(const char *name, const struct res_dgram *d)
{
	uint8_t buf[RES_MAX_DGRAM];
	struct res_dgram back;
	size_t n = ripc__res_encode(d, buf);

	if (!ripc__res_decode(buf, n, &back)) {
		fprintf(stderr, "gen_corpus: %s: decoder refuses it\n", name);
		exit(1);
	}
	write_file("resolver", name, buf, n);
	nres++;
}

static void set_addr(struct res_dgram *d, unsigned tp, unsigned len)
{
	d->info.addr[tp].len = (uint8_t)len;
	for (unsigned i = 0; i < len; i++)
		d->info.addr[tp].addr[i] = (uint8_t)(tp * 50 + i);
}

static void gen_resolver(void)
{
	const struct res_dgram base = {
		.service = 4242,
		.info = { .incarnation = 0x0123456789abcdefull,
			  .host_id = 0x1badb002cafef00dull,
			  .pid = 12345 },
	};
	struct res_dgram d;

	/* QUERY: a nonce and the private port; the querier's own record. */
	d = base;
	d.type = RES_QUERY;
	d.nonce = 0xfeedfacecafebeefull;
	d.reply_port = 40123;
	res("query", &d);
	set_addr(&d, RIPC_PROV_TCP, 16);
	res("query-tcp", &d);

	/* ANSWER: unicast with one, two and three addresses (the longest
	 * allowed), and a multicast member. */
	d = base;
	d.type = RES_ANSWER;
	d.nonce = 0xfeedfacecafebeefull;
	set_addr(&d, RIPC_PROV_TCP, 16);
	res("answer-tcp", &d);
	set_addr(&d, RIPC_PROV_SHM, 24);
	res("answer-shm-tcp", &d);
	set_addr(&d, RIPC_PROV_VERBS, RIPC_ADDR_MAX);
	res("answer-3", &d);
	d.flags = RES_F_MCAST;
	res("answer-mcast", &d);

	/* ANNOUNCE: up, down, multicast membership up and down. */
	d = base;
	d.type = RES_ANNOUNCE;
	set_addr(&d, RIPC_PROV_TCP, 16);
	res("announce-up", &d);
	d.flags = RES_F_DOWN;
	res("announce-down", &d);
	d.flags = RES_F_MCAST;
	res("announce-mcast-up", &d);
	d.flags = RES_F_MCAST | RES_F_DOWN;
	res("announce-mcast-down", &d);

	/* Duplicate detection: a unicast and a multicast PROBE, a DEFEND
	 * from a unicast holder and one from a member. */
	d = base;
	d.type = RES_PROBE;
	d.nonce = 0x0badc0ffee0ddf00ull;
	d.reply_port = 40124;
	res("probe", &d);
	d.flags = RES_F_MCAST;
	res("probe-mcast", &d);
	d = base;
	d.type = RES_DEFEND;
	d.nonce = 0x0badc0ffee0ddf00ull;
	set_addr(&d, RIPC_PROV_TCP, 16);
	res("defend", &d);
	d.flags = RES_F_MCAST;
	res("defend-mcast", &d);
}

/* ---- directory records -------------------------------------------------- */

static void dir(const char *name, const struct ripc_dir_rec *r)
{
	uint8_t buf[RIPC_DIR_REC_MAX];
	struct ripc_dir_rec back;
	size_t n = ripc__dir_rec_encode(r, buf);

	if (ripc__dir_rec_decode(buf, n, &back) != r->kind) {
		fprintf(stderr, "gen_corpus: %s: decoder refuses it\n", name);
		exit(1);
	}
	write_file("dirrec", name, buf, n);
	ndir++;
}

static void gen_dirrec(void)
{
	struct ripc_dir_rec r = {
		.kind = RIPC_DIR_REC_HOLDER,
		.info = { .incarnation = 0x0123456789abcdefull,
			  .host_id = 0x1badb002cafef00dull,
			  .pid = 12345 },
		.starttime = 8765432,
	};
	struct res_dgram tmp;

	dir("holder-0", &r);
	memset(&tmp, 0, sizeof(tmp));
	set_addr(&tmp, RIPC_PROV_TCP, 16);
	r.info.addr[RIPC_PROV_TCP] = tmp.info.addr[RIPC_PROV_TCP];
	dir("holder-tcp", &r);
	set_addr(&tmp, RIPC_PROV_SHM, 24);
	r.info.addr[RIPC_PROV_SHM] = tmp.info.addr[RIPC_PROV_SHM];
	dir("holder-shm-tcp", &r);
	set_addr(&tmp, RIPC_PROV_VERBS, RIPC_ADDR_MAX);
	r.info.addr[RIPC_PROV_VERBS] = tmp.info.addr[RIPC_PROV_VERBS];
	dir("holder-3", &r);
	memset(&r, 0, sizeof(r));
	r.kind = RIPC_DIR_REC_GROUP;
	dir("group", &r);
}

int main(int argc, char **argv)
{
	char path[4096];

	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus <dir>\n");
		return 2;
	}
	outdir = argv[1];
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", outdir,
			 i == 2 ? "dirrec" : i ? "resolver" : "wire");
		if (mkdir(outdir, 0777) && errno != EEXIST)
			die(outdir);
		if (mkdir(path, 0777) && errno != EEXIST)
			die(path);
	}
	gen_wire();
	gen_resolver();
	gen_dirrec();
	printf("gen_corpus: %u wire messages, %u resolver datagrams, %u "
	       "directory records in %s\n",
	       nwire, nres, ndir, outdir);
	return 0;
}
