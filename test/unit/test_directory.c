/*
 * Unit tests of what the service directory takes from outside (issue 13):
 * the records in directory nodes (ripc/dir_record.c, untrusted: anybody
 * who can write to the servers writes them), the names of member nodes,
 * the RIPC_DIRECTORY URL, the generic part without a directory
 * (ripc/directory.c), and the resolver's duplicate-detection datagrams
 * (PROBE, DEFEND) in its codec.
 *
 * Records are built here byte by byte from the layout in ripc_protocol(7),
 * DIRECTORY, independently of the library's encoder, and decoded from a
 * heap copy of exactly their bytes so that sanitizers see overreads.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "dir_record.h"
#include "directory.h"
#include "resolver.h"

struct raw {
	uint8_t b[600];
	size_t len;
};

static void le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* A holder record as ripc_protocol(7) describes it. */
static struct raw holder(unsigned naddr)
{
	struct raw r;

	memset(&r, 0, sizeof(r));
	le(r.b, 0x52445052, 4);
	r.b[4] = 1;
	r.b[5] = 1;
	r.b[6] = 0;
	r.b[7] = (uint8_t)naddr;
	le(r.b + 8, 0x1122334455667788ull, 8);
	le(r.b + 16, 0xabcdef, 8);
	le(r.b + 24, 4242, 4);
	le(r.b + 32, 987654321, 8);
	r.len = 40;
	for (unsigned i = 0; i < naddr; i++) {
		unsigned alen = i == 2 ? 112 : 5 + i;

		r.b[r.len] = (uint8_t)i;
		r.b[r.len + 1] = (uint8_t)alen;
		memset(r.b + r.len + 2, 0x30 + (int)i, alen);
		r.len += 2 + alen;
	}
	return r;
}

static struct raw group(void)
{
	struct raw r;

	memset(&r, 0, sizeof(r));
	le(r.b, 0x52445052, 4);
	r.b[4] = 1;
	r.b[5] = 2;
	r.len = 8;
	return r;
}

static int decode(const struct raw *r, struct ripc_dir_rec *out)
{
	uint8_t *copy = malloc(r->len ? r->len : 1);
	int ret;

	cr_assert(copy);
	memcpy(copy, r->b, r->len);
	ret = ripc__dir_rec_decode(copy, r->len, out);
	free(copy);
	return ret;
}

Test(dirrec, holder_roundtrip)
{
	for (unsigned n = 0; n <= 3; n++) {
		struct raw r = holder(n);
		struct ripc_dir_rec d;
		uint8_t enc[RIPC_DIR_REC_MAX];
		size_t len;

		cr_assert_eq(decode(&r, &d), RIPC_DIR_REC_HOLDER, "naddr %u", n);
		cr_assert_eq(d.info.incarnation, 0x1122334455667788ull);
		cr_assert_eq(d.info.host_id, 0xabcdef);
		cr_assert_eq(d.info.pid, 4242);
		cr_assert_eq(d.starttime, 987654321);
		for (unsigned t = 0; t < RIPC_PROV_MAX; t++)
			cr_assert_eq(d.info.addr[t].len,
				     t < n ? (t == 2 ? 112 : 5 + t) : 0);
		len = ripc__dir_rec_encode(&d, enc);
		cr_assert_eq(len, r.len);
		cr_assert_eq(memcmp(enc, r.b, len), 0,
			     "the library encodes as documented");
	}
}

Test(dirrec, group_roundtrip)
{
	struct raw r = group();
	struct ripc_dir_rec d = { .kind = RIPC_DIR_REC_GROUP };
	uint8_t enc[RIPC_DIR_REC_MAX];

	cr_assert_eq(decode(&r, &d), RIPC_DIR_REC_GROUP);
	cr_assert_eq(ripc__dir_rec_encode(&d, enc), 8);
	cr_assert_eq(memcmp(enc, r.b, 8), 0);
}

Test(dirrec, addresses_in_any_order)
{
	struct raw r = holder(0);
	struct ripc_dir_rec d;

	/* tcp (2) before shm (0): allowed, each once. */
	r.b[7] = 2;
	r.b[40] = 2, r.b[41] = 3, memset(r.b + 42, 7, 3);
	r.b[45] = 0, r.b[46] = 1, r.b[47] = 9;
	r.len = 48;
	cr_assert_eq(decode(&r, &d), RIPC_DIR_REC_HOLDER);
	cr_assert_eq(d.info.addr[2].len, 3);
	cr_assert_eq(d.info.addr[0].len, 1);
	cr_assert_eq(d.info.addr[0].addr[0], 9);
}

/* Every rule of ripc_protocol(7), one by one: a record consistent in
 * every way but one is refused, and nothing is left in the output. */
Test(dirrec, refusals)
{
	struct ripc_dir_rec d;
	struct raw r;

#define REFUSE(what)                                                         \
	do {                                                                 \
		memset(&d, 0xa5, sizeof(d));                                 \
		cr_assert_eq(decode(&r, &d), -EBADMSG, what);                \
		cr_assert_eq(d.kind, 0, what ": output zeroed");             \
		cr_assert_eq(d.info.addr[0].len, 0, what);                   \
	} while (0)

	r = holder(1), r.len = 0;
	REFUSE("empty");
	r = holder(1), r.len = 7;
	REFUSE("shorter than a group");
	r = holder(1), r.b[0] ^= 1;
	REFUSE("magic");
	r = holder(1), r.b[4] = 2;
	REFUSE("version");
	r = holder(1), r.b[5] = 0;
	REFUSE("kind 0");
	r = holder(1), r.b[5] = 3;
	REFUSE("kind 3");
	r = holder(1), r.b[6] = 1;
	REFUSE("flags");
	r = group(), r.len = 9;
	REFUSE("group with a trailing byte");
	r = group(), r.b[7] = 1;
	REFUSE("group with addresses");
	r = holder(0), r.len = 39;
	REFUSE("holder shorter than its header");
	r = holder(0), le(r.b + 8, 0, 8);
	REFUSE("incarnation 0");
	r = holder(0), le(r.b + 24, 0, 4);
	REFUSE("pid 0");
	r = holder(0), le(r.b + 24, 0x80000000u, 4);
	REFUSE("negative pid");
	r = holder(0), r.b[28] = 1;
	REFUSE("reserved bytes");
	r = holder(3), r.b[7] = 4;
	REFUSE("naddr 4");
	r = holder(1), r.b[40] = 3;
	REFUSE("unknown transport");
	r = holder(1), r.b[41] = 0;
	REFUSE("address length 0");
	r = holder(1), r.b[41] = 113, r.len = 40 + 2 + 113;
	REFUSE("address longer than 112");
	r = holder(1), r.b[41] = 6;
	REFUSE("address past the end");
	r = holder(2), r.b[40 + 2 + 5] = 0;
	REFUSE("transport twice");
	r = holder(1), r.len += 1;
	REFUSE("trailing byte");
	r = holder(2), r.b[7] = 1;
	REFUSE("naddr smaller than the entries");
	r = holder(1), r.b[7] = 2;
	REFUSE("naddr larger than the entries");
#undef REFUSE
}

Test(dirrec, every_truncation_refused)
{
	struct raw full = holder(3);
	struct ripc_dir_rec d;

	for (size_t n = 0; n < full.len; n++) {
		struct raw r = full;

		r.len = n;
		cr_assert_eq(decode(&r, &d), -EBADMSG, "length %zu", n);
	}
	cr_assert_eq(decode(&full, &d), RIPC_DIR_REC_HOLDER);
}

Test(dirrec, member_names)
{
	char name[17];
	uint64_t inc;

	ripc__dir_member_name(0x00ab00cd00ef0012ull, name);
	cr_assert_str_eq(name, "00ab00cd00ef0012");
	cr_assert(ripc__dir_member_parse(name, &inc));
	cr_assert_eq(inc, 0x00ab00cd00ef0012ull);
	cr_assert(!ripc__dir_member_parse("0000000000000000", &inc));
	cr_assert(!ripc__dir_member_parse("00ab00cd00ef001", &inc));
	cr_assert(!ripc__dir_member_parse("00ab00cd00ef00123", &inc));
	cr_assert(!ripc__dir_member_parse("00AB00CD00EF0012", &inc));
	cr_assert(!ripc__dir_member_parse("00ab00cd00ef001g", &inc));
	cr_assert(!ripc__dir_member_parse("", &inc));
}

Test(dirurl, split)
{
	char scheme[16], hosts[256], chroot[64];
	const char *where;

	cr_assert_eq(ripc__dir_url_split("zk://h:1/x", scheme, sizeof(scheme),
					 &where),
		     0);
	cr_assert_str_eq(scheme, "zk");
	cr_assert_str_eq(where, "h:1/x");
	cr_assert_eq(ripc__dir_url_split("zk:/h:1", scheme, 16, &where),
		     -EINVAL);
	cr_assert_eq(ripc__dir_url_split("://h:1", scheme, 16, &where),
		     -EINVAL);
	cr_assert_eq(ripc__dir_url_split("ZK://h:1", scheme, 16, &where),
		     -EINVAL);
	cr_assert_eq(ripc__dir_url_split("averyveryverylongscheme://h:1",
					 scheme, 16, &where),
		     -EINVAL);

#define OK(w, h, c)                                                          \
	do {                                                                 \
		cr_assert_eq(ripc__dir_where_split(w, hosts, sizeof(hosts),  \
						   chroot, sizeof(chroot)),  \
			     0, "%s", w);                                    \
		cr_assert_str_eq(hosts, h);                                  \
		cr_assert_str_eq(chroot, c);                                 \
	} while (0)
#define BAD(w)                                                               \
	cr_assert_eq(ripc__dir_where_split(w, hosts, sizeof(hosts), chroot,  \
					   sizeof(chroot)),                  \
		     -EINVAL, "%s", w)
	OK("h1:2181,h2:2181,10.0.0.3:2181/apps/ripc",
	   "h1:2181,h2:2181,10.0.0.3:2181", "/apps/ripc");
	OK("zk.example.org:2181", "zk.example.org:2181", "");
	OK("h:1/", "h:1", "");
	OK("[::1]:2181,[fe80::1]:2182/a_b-c.d", "[::1]:2181,[fe80::1]:2182",
	   "/a_b-c.d");
	OK("h:65535", "h:65535", "");
	BAD("");
	BAD("/x");
	BAD("h");
	BAD("h:");
	BAD(":1");
	BAD("h:0");
	BAD("h:65536");
	BAD("h:123456");
	BAD("h:1x");
	BAD("h:1,");
	BAD("h:1,,h:2");
	BAD("h_1:1");
	BAD("h:1/a/");
	BAD("h:1/a//b");
	BAD("h:1/./b");
	BAD("h:1/a/..");
	BAD("h:1/a b");
	BAD("h:1/a?b");
	BAD("[::1:1");
	BAD("[]:1");
	BAD("[::g]:1");
	BAD("h:1/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
#undef OK
#undef BAD
}

/* Without RIPC_DIRECTORY nothing is opened and the wrappers do nothing. */
Test(directory, none)
{
	struct ripc_reg_proc_info out[2];
	struct ripc_dir_cfg cfg = { .session_timeout_ms = 1000 };
	char buf[64];
	bool mcast = true;

	cr_assert_eq(ripc__dir_open("", &cfg), 0);
	cr_assert_eq(ripc__dir_open(NULL, &cfg), 0);
	cr_assert(!ripc__dir_enabled());
	cr_assert_eq(ripc__dir_claim(7, false, 0), 0);
	cr_assert_eq(ripc__dir_lookup(7, out, 2, &mcast), 0);
	cr_assert(!mcast);
	cr_assert_eq(ripc__dir_wait_fd(), -1);
	cr_assert_eq(ripc__dir_version(), 0);
	ripc__dir_release(7, false);
	ripc__dir_invalidate(7);
	ripc__dir_describe(buf, sizeof(buf));
	cr_assert_str_eq(buf, "none");
	cr_assert_str_eq(ripc__dir_url(), "");
	ripc__dir_close();
	ripc__dir_forget();
}

Test(directory, bad_urls)
{
	struct ripc_dir_cfg cfg = { .session_timeout_ms = 1000 };

	cr_assert_eq(ripc__dir_open("zookeeper", &cfg), -EINVAL);
	cr_assert_eq(ripc__dir_open("etcd://h:1", &cfg), -EINVAL);
	if (*ripc__dir_engines()) {
		cr_assert_eq(ripc__dir_open("zk://h", &cfg), -EINVAL);
		cr_assert_eq(ripc__dir_open("zk://h:1/a//b", &cfg), -EINVAL);
	} else {
		cr_assert_eq(ripc__dir_open("zk://h:1", &cfg), -ENOTSUP,
			     "built without ZooKeeper: a clear refusal");
	}
	cr_assert(!ripc__dir_enabled());
}

/* The resolver's duplicate detection datagrams: PROBE (4), DEFEND (5). */
Test(resolver_codec, probe_and_defend)
{
	for (uint8_t type = 4; type <= 5; type++) {
		struct res_dgram d = { .type = type,
				       .service = 4711,
				       .nonce = 0x0102030405060708ull,
				       .reply_port = 40000,
				       .flags = 1 };
		struct res_dgram back;
		uint8_t buf[RES_MAX_DGRAM];
		size_t n;

		d.info.incarnation = 99;
		d.info.host_id = 5;
		d.info.pid = 12;
		n = ripc__res_encode(&d, buf);
		cr_assert_eq(n, RES_HDR);
		cr_assert(ripc__res_decode(buf, n, &back), "type %u", type);
		cr_assert_eq(back.type, type);
		cr_assert_eq(back.service, 4711);
		cr_assert_eq(back.nonce, d.nonce);
		cr_assert_eq(back.reply_port, 40000);
		cr_assert_eq(back.flags, 1);
		buf[5] = 6; /* no type 6 */
		cr_assert(!ripc__res_decode(buf, n, &back));
		buf[5] = 0;
		cr_assert(!ripc__res_decode(buf, n, &back));
	}
}
