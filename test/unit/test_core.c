/*
 * In-process tests of the core through the public API, over libfabric shm,
 * with a process sending to its own services (which the model allows);
 * where the API cannot see a fault (a receive slot ripc_buf_free misses
 * stays held), the internal state behind it is checked too.
 *
 * Criterion runs every test in a process of its own; the suite's .init
 * sets the environment there before the library initialises lazily on
 * first use, with a registry file of that process's own, and .fini
 * finalises the library and removes the file.
 *
 * A crash inside the library usually happens with its lock held; the
 * default crash handling then runs exit(), whose ripc_finalize waits for
 * that lock forever and the test only ends at its timeout.  The suite's
 * handler makes such a test die at once, reported as crashed, and removes
 * its registry file.
 */
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <ripc.h>

#include "ripc_int.h" /* the arena index (buf_free_held_slots_from_inside) */

static char regpath[96];

static void die_now(int sig)
{
	static const char m[] = "test_core: fatal signal in the test\n";

	if (write(2, m, sizeof(m) - 1) < 0)
		(void)0;
	unlink(regpath); /* .fini will not run */
	signal(sig, SIG_DFL);
	raise(sig);
}

static void core_init(void)
{
	static const int fatal[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE,
				     SIGABRT };

	for (unsigned i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		signal(fatal[i], die_now);
	snprintf(regpath, sizeof(regpath), "/tmp/ripc-unit-core-%d.reg",
		 (int)getpid());
	unlink(regpath);
	setenv("RIPC_REGISTRY", regpath, 1);
	setenv("RIPC_PROVIDER", "shm", 1);
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("RIPC_LOG_LEVEL", "error", 1);
}

static void core_fini(void)
{
	ripc_finalize();
	unlink(regpath);
}

TestSuite(core, .init = core_init, .fini = core_fini, .timeout = 60);

/* The same with RIPC_PROGRESS=manual: nothing happens between calls. */
static void core_init_manual(void)
{
	core_init();
	setenv("RIPC_PROGRESS", "manual", 1);
}

#define SVC 100
#define SVC2 101

/* Initialise now; a machine without a usable shm transport skips. */
static void need_lib(void)
{
	uint8_t err = ripc_init();

	if (err == RIPC_ENOPROVIDER)
		cr_skip_test("libfabric shm is not usable here");
	cr_assert_eq(err, RIPC_OK, "ripc_init: %s", ripc_strerror(err));
}

static void need_service(int id)
{
	need_lib();
	cr_assert_eq(ripc_register_service_id(id), 1,
		     "register %d: %s", id, ripc_strerror(ripc_last_error()));
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 31u + seed + i / 256u);
}

static bool check_fill(const uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)(i * 31u + seed + i / 256u))
			return false;
	return true;
}

/* A received message; release() frees what ripc_receive handed over. */
struct rx {
	uint16_t from, nshort, nlong;
	void **sitems, **litems;
	uint32_t *ssizes, *lsizes;
	uint8_t err;
};

static void receive(uint16_t svc, struct rx *r)
{
	memset(r, 0, sizeof(*r));
	r->err = ripc_receive(svc, &r->from, &r->sitems, &r->ssizes,
			      &r->nshort, &r->litems, &r->lsizes, &r->nlong);
}

static void release(struct rx *r, bool free_long)
{
	if (r->nshort)
		ripc_buf_free(r->sitems[0]);
	for (unsigned i = 0; free_long && i < r->nlong; i++)
		ripc_buf_free(r->litems[i]);
	free(r->sitems);
	free(r->ssizes);
	free(r->litems);
	free(r->lsizes);
}

/* Short-send one item to ourselves, receive and release it. */
static void send_receive_one(uint16_t svc, void **b, uint32_t *l)
{
	struct rx r;

	cr_assert_eq(ripc_send_short(svc, svc, b, l, 1, NULL, NULL, 0),
		     RIPC_OK);
	receive(svc, &r);
	cr_assert_eq(r.err, RIPC_OK);
	release(&r, false);
}

/* Long-send one item of `len` bytes to ourselves and return where the
 * receive put it (the caller releases it). */
static void *long_roundtrip(uint16_t svc, size_t len, unsigned seed,
			    struct rx *r)
{
	uint8_t *src = malloc(len);
	void *b[1] = { src };
	uint32_t l[1] = { (uint32_t)len };
	uint8_t err;

	cr_assert_not_null(src);
	fill(src, len, seed);
	err = ripc_send_long(svc, svc, b, l, 1, NULL, NULL, 0);
	cr_assert_eq(err, RIPC_OK, "send_long: %s", ripc_strerror(err));
	receive(svc, r);
	cr_assert_eq(r->err, RIPC_OK, "receive: %s", ripc_strerror(r->err));
	cr_assert_eq(r->nlong, 1);
	cr_assert_eq(r->lsizes[0], len);
	cr_assert(check_fill(r->litems[0], len, seed), "contents differ");
	cr_assert_eq(ripc_wait_released(src, -1), RIPC_OK);
	free(src);
	return r->litems[0];
}

/* ---- limits and buffers --------------------------------------------- */

Test(core, limits)
{
	cr_assert_eq(ripc_limit(RIPC_LIMIT_SHORT_PAYLOAD), RIPC_SHORT_MAX);
	cr_assert_eq(ripc_limit(RIPC_LIMIT_ITEMS), RIPC_MAX_ITEMS);
	cr_assert_eq(ripc_limit(RIPC_LIMIT_RETURN_BUFS), RIPC_MAX_RETURN_BUFS);
	cr_assert_eq(ripc_limit(RIPC_LIMIT_LONG_ITEM), RIPC_LONG_ITEM_MAX);
	setenv("RIPC_QUEUE_MAX", "77", 1);
	setenv("RIPC_RESOLVE_TIMEOUT_MS", "1234", 1);
	setenv("RIPC_SEND_TIMEOUT_MS", "2k", 1);
	setenv("RIPC_LONG_TIMEOUT_MS", "99", 1);
	cr_assert_eq(ripc_limit(RIPC_LIMIT_QUEUE), 77);
	cr_assert_eq(ripc_limit(RIPC_LIMIT_RESOLVE_TIMEOUT_MS), 1234);
	cr_assert_eq(ripc_limit(RIPC_LIMIT_SEND_TIMEOUT_MS), 2048);
	cr_assert_eq(ripc_limit(RIPC_LIMIT_LONG_TIMEOUT_MS), 99);
	cr_assert_eq(ripc_limit((enum ripc_limit)0), 0);
	cr_assert_eq(ripc_last_error(), RIPC_EINVAL);
	cr_assert_eq(ripc_limit((enum ripc_limit)999), 0);
}

/* The VmFlags line of the mapping that holds p (/proc/self/smaps).  Not
 * the one that starts at p: the kernel merges a buffer's mapping with a
 * neighbour of the same flags (another huge-page buffer). */
static bool vma_flags(const void *p, char *flags, size_t len)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/self/smaps", "r");
	unsigned long a = (unsigned long)(uintptr_t)p, lo, hi;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (!found && sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    lo <= a && a < hi)
			found = true;
		else if (found && !strncmp(line, "VmFlags:", 8)) {
			snprintf(flags, len, "%s", line + 8);
			break;
		}
	}
	fclose(f);
	return found;
}

/* The buffer of size bytes at p lies on huge pages (2 MiB-aligned,
 * advised) or not. */
static void expect_huge(const void *p, size_t size, bool huge)
{
	char flags[256] = "";

	if (huge) {
		cr_assert_eq((uintptr_t)p % (2u << 20), 0,
			     "%zu bytes: %p not 2 MiB-aligned", size, (void *)p);
		cr_assert(vma_flags(p, flags, sizeof(flags)),
			  "no mapping at %p", (void *)p);
		cr_expect(strstr(flags, " hg"),
			  "%zu bytes: not MADV_HUGEPAGE: %s", size, flags);
	} else if (vma_flags(p, flags, sizeof(flags))) {
		cr_expect(!strstr(flags, " hg"), "%zu bytes advised: %s", size,
			  flags);
	}
}

static uint8_t *alloc_expect_huge(size_t size, bool huge)
{
	uint8_t *p = ripc_buf_alloc(size);

	cr_assert_not_null(p, "%zu bytes: %s", size,
			   ripc_strerror(ripc_last_error()));
	expect_huge(p, size, huge);
	return p;
}

Test(core, buf_alloc_huge_pages)
{
	uint8_t *p, *q;

	need_lib();
	/* From 2 MiB: aligned to 2 MiB and advised for huge pages. */
	p = alloc_expect_huge(5 << 20, true);
	fill(p, 5 << 20, 3); /* all of it is ours */
	cr_assert(check_fill(p, 5 << 20, 3));
	/* From 1 MiB: a whole huge page (a peer's process_vm_readv or
	 * writev of 4 KiB pages took twice as long at 1 MiB). */
	q = alloc_expect_huge(1 << 20, true);
	fill(q, 1 << 20, 4);
	/* Growing within the huge page keeps the buffer and its bytes. */
	cr_assert_eq(ripc_buf_realloc(q, 3 << 19), q, "1.5 MiB moved");
	cr_assert(check_fill(q, 1 << 20, 4));
	fill(q, 3 << 19, 5);
	cr_assert(check_fill(q, 3 << 19, 5));
	ripc_buf_free(q);
	/* Below 1 MiB: plain pages (a huge page would be more than twice
	 * the memory asked for). */
	ripc_buf_free(alloc_expect_huge((1 << 20) - 4096, false));
	ripc_buf_free(alloc_expect_huge(100000, false));
	ripc_buf_free(p);
	/* A size that rounds past the end of the address space fails. */
	cr_assert_null(ripc_buf_alloc(SIZE_MAX));
	cr_assert_eq(ripc_last_error(), RIPC_ENOMEM);
	cr_assert_null(ripc_buf_alloc(SIZE_MAX - (1u << 20)));
	cr_assert_eq(ripc_last_error(), RIPC_ENOMEM);
	q = ripc_buf_alloc(4096);
	cr_assert_not_null(q);
	cr_assert_null(ripc_buf_realloc(q, SIZE_MAX));
	cr_assert_eq(ripc_last_error(), RIPC_ENOMEM);
	ripc_buf_free(q); /* still the caller's after the failed realloc */
}

Test(core, buf_alloc_zeroed_after_reuse)
{
	uint8_t *p;

	need_lib();
	/* A freed buffer is kept for reuse; handed out again it must still
	 * be "filled with zeros" (ripc_buf_alloc(3)). */
	for (int i = 0; i < 3; i++) {
		p = ripc_buf_alloc(1 << 20);
		cr_assert_not_null(p);
		for (size_t k = 0; k < (1 << 20); k += 4096)
			cr_assert_eq(p[k] | p[k + 4095], 0,
				     "round %d: byte %zu not zero", i, k);
		memset(p, 0xa5, 1 << 20);
		ripc_buf_free(p);
	}
}

Test(core, buf_alloc_realloc_free)
{
	uint8_t *p, *q, stack[16];

	need_lib();
	cr_assert_null(ripc_buf_alloc(0));
	cr_assert_eq(ripc_last_error(), RIPC_EINVAL);

	p = ripc_buf_alloc(1);
	cr_assert_not_null(p, "%s", ripc_strerror(ripc_last_error()));
	p[0] = 0x5a;
	ripc_buf_free(p);

	p = ripc_buf_alloc(10000);
	cr_assert_not_null(p);
	fill(p, 10000, 1);
	/* Growing keeps the contents. */
	q = ripc_buf_realloc(p, 3 << 20);
	cr_assert_not_null(q);
	cr_assert(check_fill(q, 10000, 1), "contents lost when growing");
	q[(3 << 20) - 1] = 1;
	/* Shrinking keeps the prefix. */
	p = ripc_buf_realloc(q, 100);
	cr_assert_not_null(p);
	cr_assert(check_fill(p, 100, 1), "contents lost when shrinking");
	/* Size 0 frees. */
	cr_assert_null(ripc_buf_realloc(p, 0));
	/* NULL allocates. */
	p = ripc_buf_realloc(NULL, 64);
	cr_assert_not_null(p);
	/* Memory that is not the library's is refused and left alone. */
	memset(stack, 7, sizeof(stack));
	cr_assert_null(ripc_buf_realloc(stack, 32));
	cr_assert_eq(ripc_last_error(), RIPC_ENOTFOUND);
	cr_assert_eq(stack[0], 7);
	ripc_buf_free(stack); /* ignored */
	ripc_buf_free(NULL);
	ripc_buf_free(p);
}

Test(core, buf_register_unregister)
{
	static uint8_t area[8192];

	need_lib();
	cr_assert_eq(ripc_buf_register(NULL, 10), RIPC_EINVAL);
	cr_assert_eq(ripc_buf_register(area, 0), RIPC_EINVAL);
	cr_assert_eq(ripc_buf_register(area, sizeof(area)), RIPC_OK);
	cr_assert_eq(ripc_buf_unregister(area), 1);
	cr_assert_eq(ripc_buf_unregister(area), 0, "unregistered twice");
	cr_assert_eq(ripc_last_error(), RIPC_ENOTFOUND);
	cr_assert_eq(ripc_buf_unregister(NULL), 0);
}

/* ripc_buf_free finds a held receive slot from any pointer into it, in
 * every arena.  A slot it misses stays held, which the public API cannot
 * see until the slots run out (and may not then), so the index behind it
 * (buffers.c) is checked here directly: every slot's first and last byte,
 * and the bytes just outside each arena. */
static void check_arena_index(void)
{
	size_t slot_len = RIPC_SLOT_SIZE;
	unsigned narenas = 0, bad = 0;

	/* Asserts wait for the unlock: a failed one ends the test, and
	 * finalize would wait for the lock. */
	ripc__lock();
	for (struct ripc_arena *a = CTX->mem.arenas; a; a = a->next) {
		size_t len = a->nslots * slot_len;
		struct ripc_slot *s;

		narenas++;
		for (size_t i = 0; i < a->nslots; i++) {
			bad += ripc__slot_of(a->base + i * slot_len) !=
			       &a->slot[i];
			bad += ripc__slot_of(a->base + (i + 1) * slot_len -
					     1) != &a->slot[i];
		}
		/* Outside: no slot of this arena (another's, if adjacent). */
		s = ripc__slot_of(a->base - 1);
		bad += s && !(s->arena != a && s->buf < a->base &&
			      a->base - 1 < s->buf + slot_len);
		s = ripc__slot_of(a->base + len);
		bad += s && !(s->arena != a && s->buf == a->base + len);
	}
	ripc__unlock();
	cr_assert_eq(bad, 0, "%u wrong look-ups in %u arenas", bad, narenas);
	cr_assert_geq(narenas, 10);
}

/* The state of the slot p lies in (-1: none). */
static int slot_state(const void *p)
{
	struct ripc_slot *s;
	int st;

	ripc__lock();
	s = ripc__slot_of(p);
	st = s ? s->state : -1;
	ripc__unlock();
	return st;
}

Test(core, buf_free_held_slots_from_inside)
{
	enum { HELD = 200, ROUNDS = 3 };
	static struct rx r[HELD];
	struct ripc_stats st;

	need_service(SVC);
	for (unsigned round = 0; round < ROUNDS; round++) {
		for (unsigned i = 0; i < HELD; i++) {
			uint8_t msg[40];
			void *b[1] = { msg };
			uint32_t l[1] = { sizeof(msg) };
			uint8_t err;

			fill(msg, sizeof(msg), round * HELD + i);
			cr_assert_eq(ripc_send_short(SVC, SVC, b, l, 1, NULL,
						     NULL, 0),
				     RIPC_OK);
			memset(&r[i], 0, sizeof(r[i]));
			err = ripc_receive_timeout(
				SVC, &r[i].from, &r[i].sitems, &r[i].ssizes,
				&r[i].nshort, &r[i].litems, &r[i].lsizes,
				&r[i].nlong, 5000);
			cr_assert_eq(err, RIPC_OK, "round %u, message %u: %s",
				     round, i, ripc_strerror(err));
			cr_assert_eq(r[i].nshort, 1);
			cr_assert(check_fill(r[i].sitems[0], sizeof(msg),
					     round * HELD + i));
		}
		/* HELD messages held: a dozen arenas or more. */
		check_arena_index();
		for (unsigned i = 0; i < HELD; i++) {
			uint8_t *p = r[i].sitems[0];

			cr_assert_eq(slot_state(p), SLOT_HELD);
			/* One end of the item, then the other (no longer
			 * held by then: ignored); which end goes first
			 * alternates. */
			ripc_buf_free(p + ((i & 1) ? r[i].ssizes[0] - 1 : 0));
			ripc_buf_free(p + ((i & 1) ? 0 : r[i].ssizes[0] - 1));
			cr_assert_neq(slot_state(p), SLOT_HELD,
				      "round %u, message %u: still held",
				      round, i);
			cr_assert_neq(slot_state(p), -1);
			r[i].nshort = 0;
			release(&r[i], false);
		}
	}
	cr_assert_eq(ripc_stats(&st, sizeof(st)), RIPC_OK);
	cr_assert_eq(st.short_recv, (uint64_t)HELD * ROUNDS);
	cr_assert_eq(st.drops_queue_full + st.drops_malformed, 0);
}

/* ---- services ------------------------------------------------------- */

Test(core, register_services)
{
	uint16_t r;

	need_lib();
	cr_assert_eq(ripc_register_service_id(RIPC_INVALID_SERVICE_ID), 0);
	cr_assert_eq(ripc_last_error(), RIPC_EBADID);
	cr_assert_eq(ripc_register_service_id(-1), 0);
	cr_assert_eq(ripc_register_service_id(70000), 0);
	need_service(SVC);
	cr_assert_eq(ripc_register_service_id(SVC), 0, "registered twice");
	cr_assert_eq(ripc_last_error(), RIPC_EINUSE);
	cr_assert_eq(ripc_register_multicast_service_id(SVC), 0);
	r = ripc_register_random_service_id();
	cr_assert_neq(r, RIPC_INVALID_SERVICE_ID);
	cr_assert_neq(r, SVC);
	cr_assert_eq(ripc_unregister_service_id(r), RIPC_OK);
	cr_assert_eq(ripc_unregister_service_id(r), RIPC_ENOTOWNER);
	cr_assert_eq(ripc_unregister_service_id(RIPC_INVALID_SERVICE_ID),
		     RIPC_EBADID);
}

/* ---- short sends to oneself ----------------------------------------- */

Test(core, short_to_self)
{
	static const char hello[] = "hello, service";
	uint8_t one = 0xee, big[1000];
	void *b[3] = { (void *)hello, &one, big };
	uint32_t l[3] = { sizeof(hello), 1, sizeof(big) };
	struct rx r;

	need_service(SVC);
	fill(big, sizeof(big), 3);
	cr_assert_eq(ripc_send_short(SVC, SVC, b, l, 3, NULL, NULL, 0),
		     RIPC_OK, "%s", ripc_strerror(ripc_last_error()));
	receive(SVC, &r);
	cr_assert_eq(r.err, RIPC_OK, "%s", ripc_strerror(r.err));
	cr_assert_eq(r.from, SVC);
	cr_assert_eq(r.nshort, 3);
	cr_assert_eq(r.nlong, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(r.ssizes[i], l[i], "item %d size", i);
	cr_assert(!memcmp(r.sitems[0], hello, sizeof(hello)));
	cr_assert_eq(*(uint8_t *)r.sitems[1], 0xee);
	cr_assert(check_fill(r.sitems[2], sizeof(big), 3));
	release(&r, false);
}

/* Messages a little above shm's 4096-byte inject size go as trains of
 * injects (RIPC_FRAG_MAX, frag.c): every size around the fragment
 * boundaries arrives whole, in order, with several queued at once; the
 * counters say the trains were used, and that none are with
 * RIPC_FRAG_MAX=0. */
/* A pair's first messages go through the doorbell, whole, until shm is
 * set up (ripc(7) NOTES): small ones to ourselves until one did not; *st
 * the statistics after it. */
static void shm_past_doorbell(uint16_t svc, struct ripc_stats *st)
{
	for (unsigned k = 0;; k++) {
		uint64_t bell, v = 0;
		void *b[1] = { &v };
		uint32_t l[1] = { sizeof(v) };

		cr_assert(k < 2000, "shm never took over from the doorbell");
		cr_assert_eq(ripc_stats(st, sizeof(*st)), RIPC_OK);
		bell = st->bell_msgs_sent;
		send_receive_one(svc, b, l);
		cr_assert_eq(ripc_stats(st, sizeof(*st)), RIPC_OK);
		if (st->bell_msgs_sent == bell)
			break;
		usleep(1000);
	}
}

static void frag_sizes(bool on)
{
	static const uint32_t sizes[] = { 4040, 4041, 4048, 4096, 4097, 8136,
					  8137, 8144, 12000, 16384, 20424,
					  20425, 30000, 65536 };
	static uint8_t src[RIPC_SHORT_MAX];
	const unsigned n = sizeof(sizes) / sizeof(sizes[0]);
	struct ripc_stats st;
	struct rx r;

	need_service(SVC);
	shm_past_doorbell(SVC, &st);
	cr_assert_eq(st.frag_msgs_sent + st.frag_msgs_recv, 0);
	/* All queued first, then received: trains back to back. */
	for (unsigned i = 0; i < n; i++) {
		void *b[1] = { src };
		uint32_t l[1] = { sizes[i] };

		fill(src, sizes[i], i);
		cr_assert_eq(ripc_send_short(SVC, SVC, b, l, 1, NULL, NULL, 0),
			     RIPC_OK, "%u bytes: %s", sizes[i],
			     ripc_strerror(ripc_last_error()));
	}
	for (unsigned i = 0; i < n; i++) {
		receive(SVC, &r);
		cr_assert_eq(r.err, RIPC_OK, "%s", ripc_strerror(r.err));
		cr_assert_eq(r.nshort, 1);
		cr_assert_eq(r.ssizes[0], sizes[i], "message %u: %u bytes", i,
			     r.ssizes[0]);
		cr_assert(check_fill(r.sitems[0], sizes[i], i),
			  "%u bytes: contents differ", sizes[i]);
		release(&r, false);
	}
	cr_assert_eq(ripc_stats(&st, sizeof(st)), RIPC_OK);
	/* Above shm's inject size (4040 bytes of items and the 56-byte
	 * header), up to the 20 KiB default (header included): 4041 ..
	 * 20424, 10 sizes. */
	cr_assert_eq(st.frag_msgs_sent, on ? 10 : 0, "sent %llu trains",
		     (unsigned long long)st.frag_msgs_sent);
	cr_assert_eq(st.frag_msgs_recv, st.frag_msgs_sent);
	cr_assert_eq(st.drops_malformed + st.drops_stale + st.drops_queue_full,
		     0);
}

Test(core, short_in_fragments)
{
	/* The boundaries of a 20 KiB limit, whatever this CPU's default. */
	setenv("RIPC_FRAG_MAX", "20k", 1);
	frag_sizes(true);
}

/* RIPC_FRAG_MAX's default, auto, by the CPU's vendor (init.c
 * frag_max_auto), read here from /proc/cpuinfo rather than CPUID; a
 * number set overrides it. */
Test(core, frag_max_auto_by_cpu_vendor)
{
	char line[256];
	bool intel = false;
	FILE *f = fopen("/proc/cpuinfo", "r");

	cr_assert(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "vendor_id", 9)) {
			intel = strstr(line, "GenuineIntel") != NULL;
			break;
		}
	fclose(f);
	unsetenv("RIPC_FRAG_MAX");
	ripc__load_config();
	cr_assert_eq(CTX->cfg.frag_max, intel ? 8144u : 20480u,
		     "intel %d: %u", intel, CTX->cfg.frag_max);
	setenv("RIPC_FRAG_MAX", "auto", 1);
	ripc__load_config();
	cr_assert_eq(CTX->cfg.frag_max, intel ? 8144u : 20480u);
	setenv("RIPC_FRAG_MAX", "12000", 1);
	ripc__load_config();
	cr_assert_eq(CTX->cfg.frag_max, 12000u);
}

Test(core, short_not_in_fragments_when_off)
{
	setenv("RIPC_FRAG_MAX", "0", 1);
	frag_sizes(false);
}

/* Trains are sent straight from the caller's items (txq.c): items of odd
 * sizes, whose padding the train must fill, and more trains than shm's
 * queue holds, so that some stall part-way and their rest follows from a
 * slot (no progress thread takes them meanwhile), and items that the
 * caller overwrites as soon as each send returns. */
enum { TRAIN_ITEMS = 3 };

/* Message i's item sizes: 4 KiB to 16 KiB in all, odd ones included. */
static void train_sizes(unsigned i, uint32_t l[TRAIN_ITEMS])
{
	l[0] = 1 + i % 7;
	l[1] = 4093 + i % 13;
	l[2] = 3001 + i * 17 % 9000;
}

Test(core, trains_from_items_stall_and_arrive_whole)
{
	enum { MSGS = 600, ITEMS = TRAIN_ITEMS };
	static uint8_t src[ITEMS][RIPC_SHORT_MAX / ITEMS];
	struct ripc_stats st;
	uint64_t retries;
	struct rx r;

	/* Nothing takes the trains off shm's queue while we send. */
	setenv("RIPC_PROGRESS", "manual", 1);
	setenv("RIPC_FRAG_MAX", "20k", 1); /* every size here a train */
	need_service(SVC);
	shm_past_doorbell(SVC, &st);
	retries = st.send_retries;
	for (unsigned i = 0; i < MSGS; i++) {
		void *b[ITEMS] = { src[0], src[1], src[2] };
		uint32_t l[ITEMS];

		train_sizes(i, l);
		for (unsigned k = 0; k < ITEMS; k++)
			fill(src[k], l[k], i * ITEMS + k);
		cr_assert_eq(ripc_send_short(SVC, SVC, b, l, ITEMS, NULL, NULL,
					     0),
			     RIPC_OK, "message %u: %s", i,
			     ripc_strerror(ripc_last_error()));
	}
	for (unsigned k = 0; k < ITEMS; k++)
		memset(src[k], 0xee, sizeof(src[k]));
	for (unsigned i = 0; i < MSGS; i++) {
		uint32_t l[ITEMS];

		train_sizes(i, l);
		receive(SVC, &r);
		cr_assert_eq(r.err, RIPC_OK, "%s", ripc_strerror(r.err));
		cr_assert_eq(r.nshort, ITEMS);
		for (unsigned k = 0; k < ITEMS; k++) {
			cr_assert_eq(r.ssizes[k], l[k], "message %u item %u", i,
				     k);
			cr_assert(check_fill(r.sitems[k], l[k], i * ITEMS + k),
				  "message %u item %u: contents differ", i, k);
		}
		release(&r, false);
	}
	cr_assert_eq(ripc_stats(&st, sizeof(st)), RIPC_OK);
	cr_assert_eq(st.frag_msgs_recv, MSGS, "%llu trains",
		     (unsigned long long)st.frag_msgs_recv);
	cr_assert(st.send_retries > retries, "no train stalled");
	cr_assert_eq(st.drops_malformed + st.drops_stale + st.drops_queue_full,
		     0);
}

Test(core, short_order_and_empty_queue)
{
	uint32_t v, l[1] = { sizeof(v) };
	void *b[1] = { &v };
	struct rx r;
	uint8_t err;

	need_service(SVC);
	for (v = 0; v < 20; v++)
		cr_assert_eq(ripc_send_short(SVC, SVC, b, l, 1, NULL, NULL, 0),
			     RIPC_OK);
	for (uint32_t i = 0; i < 20; i++) {
		receive(SVC, &r);
		cr_assert_eq(r.err, RIPC_OK);
		cr_assert_eq(*(uint32_t *)r.sitems[0], i, "out of order");
		release(&r, false);
	}
	/* Nothing left: a poll does not block and says "nothing". */
	err = ripc_receive_timeout(SVC, NULL, NULL, NULL, NULL, NULL, NULL,
				   NULL, 0);
	cr_assert_eq(err, RIPC_EAGAIN, "got %s", ripc_strerror(err));
	err = ripc_receive_timeout(SVC, NULL, NULL, NULL, NULL, NULL, NULL,
				   NULL, 1);
	cr_assert_eq(err, RIPC_ETIMEDOUT, "got %s", ripc_strerror(err));
	cr_assert_eq(ripc_receive_timeout(SVC2, NULL, NULL, NULL, NULL, NULL,
					  NULL, NULL, 0),
		     RIPC_ENOTOWNER);
	cr_assert_eq(ripc_receive_timeout(RIPC_INVALID_SERVICE_ID, NULL, NULL,
					  NULL, NULL, NULL, NULL, NULL, 0),
		     RIPC_EBADID);
}

Test(core, short_limits)
{
	static uint8_t data[RIPC_SHORT_MAX + 8];
	void *b[RIPC_MAX_ITEMS + 1];
	uint32_t l[RIPC_MAX_ITEMS + 1];
	struct rx r;

	need_service(SVC);
	fill(data, sizeof(data), 9);
	for (int i = 0; i <= RIPC_MAX_ITEMS; i++) {
		b[i] = data + i * (RIPC_SHORT_MAX / RIPC_MAX_ITEMS);
		l[i] = RIPC_SHORT_MAX / RIPC_MAX_ITEMS;
	}
	/* Exactly the maximum: 64 items, 64 KiB. */
	cr_assert_eq(ripc_send_short(SVC, SVC, b, l, RIPC_MAX_ITEMS, NULL,
				     NULL, 0),
		     RIPC_OK, "%s", ripc_strerror(ripc_last_error()));
	receive(SVC, &r);
	cr_assert_eq(r.err, RIPC_OK);
	cr_assert_eq(r.nshort, RIPC_MAX_ITEMS);
	for (int i = 0; i < RIPC_MAX_ITEMS; i++) {
		cr_assert_eq(r.ssizes[i], l[i]);
		cr_assert(!memcmp(r.sitems[i], b[i], l[i]), "item %d", i);
	}
	release(&r, false);

	/* One byte more. */
	l[5]++;
	cr_assert_eq(ripc_send_short(SVC, SVC, b, l, RIPC_MAX_ITEMS, NULL,
				     NULL, 0),
		     RIPC_E2BIG);
	l[5]--;
	cr_assert_eq(ripc_send_short(SVC, SVC, b, l, RIPC_MAX_ITEMS + 1, NULL,
				     NULL, 0),
		     RIPC_ETOOMANY);
	b[1] = NULL;
	cr_assert_eq(ripc_send_short(SVC, SVC, b, l, 2, NULL, NULL, 0),
		     RIPC_EINVAL, "NULL item");
	cr_assert_eq(ripc_send_short(SVC, SVC, NULL, l, 1, NULL, NULL, 0),
		     RIPC_EINVAL);
	b[1] = data;
	cr_assert_eq(ripc_send_short(SVC2, SVC, b, l, 1, NULL, NULL, 0),
		     RIPC_ENOTOWNER, "source not ours");
	cr_assert_eq(ripc_send_short(SVC, RIPC_INVALID_SERVICE_ID, b, l, 1,
				     NULL, NULL, 0),
		     RIPC_EBADID);
	/* Nothing of the refused sends arrived. */
	cr_assert_neq(ripc_receive_timeout(SVC, NULL, NULL, NULL, NULL, NULL,
					   NULL, NULL, 0),
		      RIPC_OK);
}

/* ---- long sends to oneself ------------------------------------------ */

/* Items that find no window land in library buffers, on huge pages from
 * 2 MiB: past the cache every such message maps its buffer afresh and the
 * pull faults all of it in, 2-3.5x faster 2 MiB at a time (perf_notes.md,
 * 11-29). */
Test(core, long_to_self_library_buffers)
{
	const size_t big = (1 << 20) + 3, huge = (5 << 20) + 3;
	uint8_t *a = malloc(big), *h = malloc(huge), small[3] = { 1, 2, 3 };
	void *b[3] = { a, small, h };
	uint32_t l[3] = { (uint32_t)big, 3, (uint32_t)huge };
	struct rx r;

	cr_assert(a && h);
	need_service(SVC);
	fill(a, big, 5);
	fill(h, huge, 6);
	cr_assert_eq(ripc_send_long(SVC, SVC, b, l, 3, NULL, NULL, 0), RIPC_OK,
		     "%s", ripc_strerror(ripc_last_error()));
	receive(SVC, &r);
	cr_assert_eq(r.err, RIPC_OK, "%s", ripc_strerror(r.err));
	cr_assert_eq(r.from, SVC);
	cr_assert_eq(r.nshort, 0);
	cr_assert_eq(r.nlong, 3);
	cr_assert_eq(r.lsizes[0], big);
	cr_assert_eq(r.lsizes[1], 3);
	cr_assert_eq(r.lsizes[2], huge);
	cr_assert(check_fill(r.litems[0], big, 5));
	cr_assert(!memcmp(r.litems[1], small, 3));
	cr_assert(check_fill(r.litems[2], huge, 6));
	expect_huge(r.litems[0], big, false);
	expect_huge(r.litems[2], huge, true);
	/* The pull is over, so the sender's buffers are released. */
	cr_assert_eq(ripc_wait_released(a, -1), RIPC_OK);
	cr_assert_eq(ripc_buf_exposed(a), 0);
	cr_assert_eq(ripc_buf_exposed(small), 0);
	cr_assert_eq(ripc_buf_exposed(h), 0);
	release(&r, true);
	free(a);
	free(h);

	cr_assert_eq(ripc_send_long(SVC, SVC, b, l, 0, NULL, NULL, 0),
		     RIPC_EINVAL, "long send without items");
}

/* ---- receive windows ------------------------------------------------ */

static bool inside(const void *p, const uint8_t *base, size_t size)
{
	return (const uint8_t *)p >= base && (const uint8_t *)p < base + size;
}

Test(core, window_service_before_process_wide)
{
	static uint8_t global[4096], mine[4096];
	struct rx r;
	void *p;

	need_service(SVC);
	/* The process-wide one is registered first. */
	cr_assert_eq(ripc_reg_recv_window(global, sizeof(global)), RIPC_OK);
	cr_assert_eq(ripc_reg_recv_window_for_service(mine, sizeof(mine),
						      SVC),
		     RIPC_OK);
	p = long_roundtrip(SVC, 100, 1, &r);
	cr_assert_eq(p, (void *)mine, "service window not tried first");
	release(&r, false);
	/* It was consumed by that item: next the process-wide one. */
	p = long_roundtrip(SVC, 100, 2, &r);
	cr_assert_eq(p, (void *)global, "process-wide window not used");
	release(&r, false);
	/* Both consumed: a library buffer. */
	p = long_roundtrip(SVC, 100, 3, &r);
	cr_assert(!inside(p, global, sizeof(global)) &&
			  !inside(p, mine, sizeof(mine)),
		  "a consumed window was used again");
	release(&r, true);
}

Test(core, window_of_other_service_not_used)
{
	static uint8_t theirs[4096];
	struct rx r;
	void *p;

	need_service(SVC);
	need_service(SVC2);
	cr_assert_eq(ripc_reg_recv_window_for_service(theirs, sizeof(theirs),
						      SVC2),
		     RIPC_OK);
	p = long_roundtrip(SVC, 100, 1, &r);
	cr_assert(!inside(p, theirs, sizeof(theirs)),
		  "another service's window was used");
	release(&r, true);
	p = long_roundtrip(SVC2, 100, 1, &r);
	cr_assert_eq(p, (void *)theirs);
	release(&r, false);
}

Test(core, window_first_fit)
{
	static uint8_t a[128], bb[8192], c[8192];
	struct rx r;
	void *p;

	need_service(SVC);
	cr_assert_eq(ripc_reg_recv_window(a, sizeof(a)), RIPC_OK);
	cr_assert_eq(ripc_reg_recv_window(bb, sizeof(bb)), RIPC_OK);
	cr_assert_eq(ripc_reg_recv_window(c, sizeof(c)), RIPC_OK);
	/* Too big for a: the first that fits is bb. */
	p = long_roundtrip(SVC, 5000, 1, &r);
	cr_assert_eq(p, (void *)bb, "not first fit");
	release(&r, false);
	/* Small: a, registered first, though c fits too. */
	p = long_roundtrip(SVC, 128, 2, &r);
	cr_assert_eq(p, (void *)a, "not first fit");
	release(&r, false);
	p = long_roundtrip(SVC, 8192, 3, &r);
	cr_assert_eq(p, (void *)c);
	release(&r, false);
	/* Larger than any window: a library buffer. */
	cr_assert_eq(ripc_reg_recv_window(a, sizeof(a)), RIPC_OK,
		     "a consumed window cannot be registered again");
	p = long_roundtrip(SVC, 200, 4, &r);
	cr_assert(!inside(p, a, sizeof(a)));
	release(&r, true);
}

/* A window takes one item even when there is room left for more. */
Test(core, window_one_item_each)
{
	static uint8_t win[65536];
	uint8_t x[10], y[10];
	void *b[2] = { x, y };
	uint32_t l[2] = { 10, 10 };
	struct rx r;

	need_service(SVC);
	fill(x, 10, 1);
	fill(y, 10, 2);
	cr_assert_eq(ripc_reg_recv_window(win, sizeof(win)), RIPC_OK);
	cr_assert_eq(ripc_send_long(SVC, SVC, b, l, 2, NULL, NULL, 0),
		     RIPC_OK);
	receive(SVC, &r);
	cr_assert_eq(r.err, RIPC_OK, "%s", ripc_strerror(r.err));
	cr_assert_eq(r.nlong, 2);
	cr_assert_eq(r.litems[0], (void *)win, "first item not at the base");
	cr_assert(!inside(r.litems[1], win, sizeof(win)),
		  "second item placed in the same window");
	cr_assert(check_fill(r.litems[0], 10, 1));
	cr_assert(check_fill(r.litems[1], 10, 2));
	ripc_buf_free(r.litems[1]);
	r.nlong = 0;
	release(&r, false);
}

Test(core, window_arguments_and_overlap)
{
	static uint8_t w[8192];

	need_service(SVC);
	cr_assert_eq(ripc_reg_recv_window(NULL, 10), RIPC_EINVAL);
	cr_assert_eq(ripc_reg_recv_window(w, 0), RIPC_EINVAL);
	cr_assert_eq(ripc_reg_recv_window((void *)(UINTPTR_MAX - 10), 100),
		     RIPC_EINVAL, "wrapping window");
	cr_assert_eq(ripc_reg_recv_window_for_service(w, 10, SVC2),
		     RIPC_ENOTOWNER);
	cr_assert_eq(ripc_reg_recv_window_for_service(
			     w, 10, RIPC_INVALID_SERVICE_ID),
		     RIPC_EBADID);

	cr_assert_eq(ripc_reg_recv_window(w + 1000, 1000), RIPC_OK);
	/* Any overlap is refused, whoever the window is for. */
	cr_assert_eq(ripc_reg_recv_window(w + 1000, 1000), RIPC_EINVAL);
	cr_assert_eq(ripc_reg_recv_window(w + 1999, 1), RIPC_EINVAL);
	cr_assert_eq(ripc_reg_recv_window(w + 500, 501), RIPC_EINVAL);
	cr_assert_eq(ripc_reg_recv_window(w, 4096), RIPC_EINVAL, "covers it");
	cr_assert_eq(ripc_reg_recv_window(w + 1500, 10), RIPC_EINVAL,
		     "inside it");
	cr_assert_eq(ripc_reg_recv_window_for_service(w + 1500, 10, SVC),
		     RIPC_EINVAL);
	/* Adjacent is fine. */
	cr_assert_eq(ripc_reg_recv_window(w + 500, 500), RIPC_OK);
	cr_assert_eq(ripc_reg_recv_window_for_service(w + 2000, 100, SVC),
		     RIPC_OK);
}

Test(core, unreg_recv_window)
{
	static uint8_t w[4096], v[4096];
	struct rx r;
	void *p;

	need_service(SVC);
	cr_assert_eq(ripc_unreg_recv_window(w), RIPC_ENOTFOUND);
	cr_assert_eq(ripc_reg_recv_window(w, sizeof(w)), RIPC_OK);
	cr_assert_eq(ripc_unreg_recv_window(w + 1), RIPC_ENOTFOUND,
		     "found by an inner pointer");
	cr_assert_eq(ripc_unreg_recv_window(w), RIPC_OK);
	cr_assert_eq(ripc_unreg_recv_window(w), RIPC_ENOTFOUND);
	cr_assert_eq(ripc_unreg_recv_window(NULL), RIPC_ENOTFOUND);
	p = long_roundtrip(SVC, 100, 1, &r);
	cr_assert(!inside(p, w, sizeof(w)), "unregistered window used");
	release(&r, true);
	/* It can be registered again (nothing of it is left behind). */
	cr_assert_eq(ripc_reg_recv_window(w, sizeof(w)), RIPC_OK);

	/* A service's windows go away with the service. */
	need_service(SVC2);
	cr_assert_eq(ripc_reg_recv_window_for_service(v, sizeof(v), SVC2),
		     RIPC_OK);
	cr_assert_eq(ripc_unregister_service_id(SVC2), RIPC_OK);
	cr_assert_eq(ripc_unreg_recv_window(v), RIPC_ENOTFOUND);
	cr_assert_eq(ripc_reg_recv_window(v, sizeof(v)), RIPC_OK);
}

/* ---- queue limit, statistics, fd, multicast ------------------------- */

/* Drive progress until `n` messages reached SVC's queue or were dropped;
 * bounded by a count of rounds, not by time. */
static void settle(uint64_t n)
{
	struct ripc_stats st;

	for (long i = 0; i < 1000000; i++) {
		ripc_progress();
		cr_assert_eq(ripc_stats(&st, sizeof(st)), RIPC_OK);
		if (st.short_recv + st.drops_queue_full >= n)
			return;
		sched_yield();
	}
	cr_assert_fail("messages sent to ourselves never arrived");
}

Test(core, queue_limit)
{
	uint32_t v, l[1] = { sizeof(v) };
	void *b[1] = { &v };
	struct ripc_stats st;
	struct rx r;

	setenv("RIPC_QUEUE_MAX", "3", 1);
	setenv("RIPC_PROGRESS", "manual", 1);
	need_service(SVC);
	cr_assert_eq(ripc_limit(RIPC_LIMIT_QUEUE), 3);
	for (v = 0; v < 5; v++)
		cr_assert_eq(ripc_send_short(SVC, SVC, b, l, 1, NULL, NULL, 0),
			     RIPC_OK);
	settle(5);
	for (uint32_t i = 0; i < 3; i++) {
		receive(SVC, &r);
		cr_assert_eq(r.err, RIPC_OK);
		cr_assert_eq(*(uint32_t *)r.sitems[0], i);
		release(&r, false);
	}
	cr_assert_neq(ripc_receive_timeout(SVC, NULL, NULL, NULL, NULL, NULL,
					   NULL, NULL, 0),
		      RIPC_OK, "more than RIPC_QUEUE_MAX messages queued");
	cr_assert_eq(ripc_stats(&st, sizeof(st)), RIPC_OK);
	cr_assert_eq(st.drops_queue_full, 2);
	cr_assert_eq(st.short_recv, 3);
}

/* ripc_limit tells the application the limit in force: the library
 * queues at least one message whatever RIPC_QUEUE_MAX says. */
Test(core, limit_queue_is_the_one_in_force)
{
	uint64_t lim;

	setenv("RIPC_QUEUE_MAX", "-5", 1);
	need_lib();
	lim = ripc_limit(RIPC_LIMIT_QUEUE);
	cr_expect_eq(lim, 1,
		     "RIPC_QUEUE_MAX=-5: ripc_limit says %llu, the library "
		     "queues 1",
		     (unsigned long long)lim);
}

Test(core, stats)
{
	uint8_t x[100];
	void *b[1] = { x };
	uint32_t l[1] = { sizeof(x) };
	struct ripc_stats st, part;

	need_service(SVC);
	cr_assert_eq(ripc_stats(NULL, sizeof(st)), RIPC_EINVAL);
	for (int i = 0; i < 2; i++)
		send_receive_one(SVC, b, l);
	cr_assert_eq(ripc_stats(&st, sizeof(st)), RIPC_OK);
	cr_assert_eq(st.short_sent, 2);
	cr_assert_eq(st.short_recv, 2);
	cr_assert_eq(st.bytes_sent_short, 200);
	cr_assert_eq(st.bytes_recv_short, 200);
	cr_assert_eq(st.drops_malformed, 0);
	/* A smaller struct (an older caller) gets only its part. */
	memset(&part, 0xee, sizeof(part));
	cr_assert_eq(ripc_stats(&part, sizeof(uint64_t)), RIPC_OK);
	cr_assert_eq(part.short_sent, 2);
	cr_assert_eq(part.short_recv, 0xeeeeeeeeeeeeeeeeull,
		     "wrote past the size given");
}

Test(core, fd_readable_while_messages_wait)
{
	uint8_t x = 1;
	void *b[1] = { &x };
	uint32_t l[1] = { 1 };
	struct pollfd p;
	struct rx r;
	int fd;

	need_service(SVC);
	fd = ripc_get_fd();
	cr_assert_geq(fd, 0);
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 0), 0, "readable with nothing queued");
	cr_assert_eq(ripc_send_short(SVC, SVC, b, l, 1, NULL, NULL, 0),
		     RIPC_OK);
	/* The progress thread delivers it and makes the fd readable. */
	cr_assert_eq(poll(&p, 1, -1), 1);
	receive(SVC, &r);
	cr_assert_eq(r.err, RIPC_OK);
	release(&r, false);
	p.revents = 0;
	cr_assert_eq(poll(&p, 1, 0), 0, "still readable after the receive");
}

Test(core, multicast_to_self)
{
	static const char msg[] = "to the group";
	void *b[1] = { (void *)msg };
	uint32_t l[1] = { sizeof(msg) };
	struct rx r;

	need_service(SVC);
	cr_assert_eq(ripc_register_multicast_service_id(500), 1, "%s",
		     ripc_strerror(ripc_last_error()));
	cr_assert_eq(ripc_register_service_id(500), 0);
	cr_assert_eq(ripc_send_short(SVC, 500, b, l, 1, NULL, NULL, 0),
		     RIPC_OK, "%s", ripc_strerror(ripc_last_error()));
	receive(500, &r);
	cr_assert_eq(r.err, RIPC_OK);
	cr_assert_eq(r.from, SVC);
	cr_assert_eq(r.nshort, 1);
	cr_assert_str_eq(r.sitems[0], msg);
	release(&r, false);
}

Test(core, unknown_destination)
{
	uint8_t x = 1;
	void *b[1] = { &x };
	uint32_t l[1] = { 1 };

	setenv("RIPC_RESOLVE_TIMEOUT_MS", "50", 1);
	need_service(SVC);
	cr_assert_eq(ripc_send_short(SVC, 4321, b, l, 1, NULL, NULL, 0),
		     RIPC_ENOSERVICE);
	cr_assert_eq(ripc_send_long(SVC, 4321, b, l, 1, NULL, NULL, 0),
		     RIPC_ENOSERVICE);
	cr_assert_null(ripc_transport_of(4321));
	cr_assert_str_eq(ripc_transport_of(SVC), "shm");
}

/*
 * Fresh heap memory in a short test is mostly zero, which hides fields the
 * library forgets to initialise; in a long-running application malloc
 * recycles blocks that hold anything.  M_PERTURB makes every new block
 * non-zero, so a message record with an uninitialised field is used as
 * the application would see it sooner or later.
 */
Test(core, short_receive_with_recycled_heap)
{
	static const char msg[] = "recycled";
	void *b[1] = { (void *)msg };
	uint32_t l[1] = { sizeof(msg) };
	struct rx r;

	mallopt(M_PERTURB, 0xa5);
	need_service(SVC);
	cr_assert_eq(ripc_send_short(SVC, SVC, b, l, 1, NULL, NULL, 0),
		     RIPC_OK);
	receive(SVC, &r);
	cr_assert_eq(r.err, RIPC_OK);
	cr_assert_str_eq(r.sitems[0], msg);
	release(&r, false);
}

/* ---- lifetime ------------------------------------------------------- */

/* Messages queued on a service die with it; a new registration of the
 * same ID starts empty. */
Test(core, unregister_drops_queued)
{
	uint8_t x = 1;
	void *b[1] = { &x };
	uint32_t l[1] = { 1 };
	struct ripc_stats st;

	setenv("RIPC_PROGRESS", "manual", 1);
	need_service(SVC);
	cr_assert_eq(ripc_send_short(SVC, SVC, b, l, 1, NULL, NULL, 0),
		     RIPC_OK);
	settle(1);
	cr_assert_eq(ripc_stats(&st, sizeof(st)), RIPC_OK);
	cr_assert_eq(st.short_recv, 1);
	cr_assert_eq(ripc_unregister_service_id(SVC), RIPC_OK);
	cr_assert_eq(ripc_receive_timeout(SVC, NULL, NULL, NULL, NULL, NULL,
					  NULL, NULL, 0),
		     RIPC_ENOTOWNER);
	need_service(SVC);
	cr_assert_neq(ripc_receive_timeout(SVC, NULL, NULL, NULL, NULL, NULL,
					   NULL, NULL, 0),
		      RIPC_OK, "message of the old registration delivered");
	/* The fd does not claim a message either. */
	{
		struct pollfd p = { .fd = ripc_get_fd(), .events = POLLIN };

		cr_assert_eq(poll(&p, 1, 0), 0);
	}
}

/* A long message its receiver throws away still releases the sender's
 * buffers (DONE or NACK), instead of keeping them exposed until the
 * long timeout; the owner learns that it was pulled (if the pull won the
 * race) or that the receiver gave up. */
Test(core, long_released_when_receiver_drops_it)
{
	const size_t len = 4 << 20;
	uint8_t *a = malloc(len);
	void *b[1] = { a };
	uint32_t l[1] = { (uint32_t)len };
	uint8_t err;

	cr_assert_not_null(a);
	fill(a, len, 1);
	setenv("RIPC_LONG_TIMEOUT_MS", "600000", 1);
	need_service(SVC);
	cr_assert_eq(ripc_send_long(SVC, SVC, b, l, 1, NULL, NULL, 0),
		     RIPC_OK);
	cr_assert_eq(ripc_unregister_service_id(SVC), RIPC_OK);
	err = ripc_wait_released(a, -1);
	cr_assert(err == RIPC_OK || err == RIPC_EPEER, "%s",
		  ripc_strerror(err));
	cr_assert_eq(ripc_buf_exposed(a), 0);
	free(a);
}

Test(core, reinit_after_finalize)
{
	static const char msg[] = "again";
	void *b[1] = { (void *)msg };
	uint32_t l[1] = { sizeof(msg) };
	struct rx r;

	for (int round = 0; round < 3; round++) {
		need_service(SVC);
		cr_assert_eq(ripc_send_short(SVC, SVC, b, l, 1, NULL, NULL, 0),
			     RIPC_OK, "round %d: %s", round,
			     ripc_strerror(ripc_last_error()));
		receive(SVC, &r);
		cr_assert_eq(r.err, RIPC_OK, "round %d", round);
		cr_assert_str_eq(r.sitems[0], msg);
		release(&r, false);
		ripc_finalize();
		/* Finalised: its IDs are free for anyone. */
	}
}

/* A forked child starting the library afresh is tested in
 * test/functional/ripc_register.c, in a plain process: here Criterion's
 * own reporting thread may hold the allocator's lock at fork(), which
 * under ASan (GCC 12, no fork handler in its allocator) deadlocks the
 * child whatever the library does. */

/* The sweep (ripc__peers_sweep) frees a cached route that leads nowhere:
 * no peer, no members, not current.  Such a route is left when its peer's
 * process ended or when it let go of its peer for room in a full peer
 * table (route_shells: clients of other hosts, which no sweep finds dead),
 * and a service answering clients that come and go kept one per client
 * (churn.sh checks that end to end, for clients of this host).  Never
 * while a send holds a route across its wait (routes_held), and never a
 * route that leads somewhere.  White-box: routes made by hand. */
Test(core, sweep_frees_routes_that_lead_nowhere)
{
	const uint16_t nowhere = 4242, current = 4243;
	struct ripc_route *r, *live;
	bool kept_held, shells_held, freed_free, live_kept, shells_done;
	bool not_looked, shells_scan;
	uint64_t freed, freed1, freed2;

	need_lib();
	r = calloc(1, sizeof(*r));
	live = calloc(1, sizeof(*live));
	cr_assert(r && live);
	live->reg_version = 1; /* as if looked up: leads somewhere */
	/* Under the lock, with results noted and asserted after it: a
	 * failed assertion with the lock held would hang the teardown. */
	/* Routes are made by API calls only, and this test makes none. */
	cr_assert_null(CTX->route[nowhere]);
	cr_assert_null(CTX->route[current]);
	ripc__lock();
	CTX->route[nowhere] = r;
	CTX->route[current] = live;
	freed = CTX->stats.routes_freed;
	/* A send holds a route: nothing is freed, and the next sweep looks
	 * again. */
	CTX->route_shells = true;
	CTX->routes_held = 1;
	ripc__peers_sweep();
	kept_held = CTX->route[nowhere] == r;
	shells_held = CTX->route_shells;
	/* Nobody holds one: the route that leads nowhere goes. */
	CTX->routes_held = 0;
	ripc__peers_sweep();
	freed_free = CTX->route[nowhere] == NULL;
	live_kept = CTX->route[current] == live;
	freed1 = CTX->stats.routes_freed;
	shells_done = !CTX->route_shells;
	/* No dead peer and no shells: the routes are not even looked at;
	 * with shells, they are. */
	live->reg_version = 0;
	ripc__peers_sweep();
	not_looked = CTX->route[current] == live;
	CTX->route_shells = true;
	ripc__peers_sweep();
	shells_scan = CTX->route[current] == NULL;
	freed2 = CTX->stats.routes_freed;
	ripc__unlock();
	cr_assert(kept_held, "freed while a send held a route");
	cr_assert(shells_held, "not looked for again after a held sweep");
	cr_assert(freed_free, "a route that leads nowhere was kept");
	cr_assert(live_kept, "a route that leads somewhere was freed");
	cr_assert_eq(freed1, freed + 1);
	cr_assert(shells_done);
	cr_assert(not_looked, "routes looked at with no dead peer or shell");
	cr_assert(shells_scan, "a route that let go of its peer was kept");
	cr_assert_eq(freed2, freed + 2);
}

/* RIPC_SHM=0 keeps a process off shm: it publishes no shm address, so even
 * a peer on the same host (here: itself) reaches it over tcp. */
Test(core, shm_off_means_tcp)
{
	static const char hi[] = "over tcp";
	void *b[1] = { (void *)hi };
	uint32_t l[1] = { sizeof(hi) };
	struct rx r;

	setenv("RIPC_PROVIDER", "", 1); /* all transports that work */
	setenv("RIPC_SHM", "0", 1);
	setenv("RIPC_RESOLVER", "0", 1);
	need_service(SVC);
	cr_assert_str_eq(ripc_transport_of(SVC), "tcp");
	cr_assert_eq(ripc_send_short(SVC, SVC, b, l, 1, NULL, NULL, 0),
		     RIPC_OK, "%s", ripc_strerror(ripc_last_error()));
	receive(SVC, &r);
	cr_assert_eq(r.err, RIPC_OK);
	cr_assert(!memcmp(r.sitems[0], hi, sizeof(hi)));
	release(&r, false);
}

/* With shm on, the same process is reached over shm. */
Test(core, shm_on_means_shm)
{
	setenv("RIPC_PROVIDER", "", 1);
	setenv("RIPC_RESOLVER", "0", 1);
	need_service(SVC);
	cr_assert_str_eq(ripc_transport_of(SVC), "shm");
}

/* A full peer table and a new incarnation at the address of a peer in it
 * (a tcp client's port taken again by a new client, ~1 in 1000 clients
 * here against the last 16 ports): room is made without forgetting that
 * peer, whose transport handle the new one shares.  It was forgotten: its
 * handle removed from the address vector, then read from freed memory and
 * used for the new peer. */
Test(core, evict_keeps_the_peer_whose_address_is_reused)
{
	struct ripc_tp *t;
	struct ripc_peer *np = NULL, *old = NULL;
	uint8_t a[RIPC_ADDR_MAX];
	unsigned made = 0, room, kept = 0;
	uint64_t evicted0, evicted;
	size_t len;
	int err = 0;

	setenv("RIPC_PROVIDER", "tcp", 1);
	setenv("RIPC_RESOLVER", "0", 1);
	setenv("RIPC_TEST_PEERS_MAX", "16", 1);
	need_lib();
	t = &CTX->tp[RIPC_PROV_TCP];
	cr_assert(t->open);
	len = t->addrlen;
	/* A sockaddr_in: other peers are other ports of our address. */
	cr_assert(len == 16 && t->addr[0] + (t->addr[1] << 8) == AF_INET,
		  "tcp address of %zu bytes, family %u", len, t->addr[0]);
	memcpy(a, t->addr, len);
	ripc__lock();
	room = CTX->cfg.peers_max - CTX->npeers;
	evicted0 = CTX->stats.peers_evicted;
	for (unsigned i = 0; i < room; i++) {
		a[2] = 0xf0;
		a[3] = (uint8_t)i; /* port 61440 + i */
		if (ripc__peer_get(RIPC_PROV_TCP, a, len, 1000 + i, &err))
			made++;
	}
	/* Full.  The first of them (the least recently used) restarts. */
	a[3] = 0;
	np = ripc__peer_get(RIPC_PROV_TCP, a, len, 5000, &err);
	for (unsigned b = 0; b < 256; b++)
		for (struct ripc_peer *p = CTX->peer_hash[b]; p; p = p->hnext) {
			if (p->tp != RIPC_PROV_TCP || memcmp(p->addr, a, len))
				continue;
			if (p->inc == 1000)
				old = p;
			kept++;
		}
	evicted = CTX->stats.peers_evicted - evicted0;
	ripc__unlock();
	cr_assert_eq(made, room, "%u of %u peers made: %s", made, room,
		     ripc_strerror((uint8_t)err));
	cr_assert_not_null(np, "no peer for the new incarnation: %s",
			   ripc_strerror((uint8_t)err));
	cr_assert_geq(evicted, 1, "nothing forgotten: the table was not full");
	cr_assert_not_null(old, "the peer whose handle is shared was forgotten "
				"(%u peers at its address)", kept);
	cr_assert_eq(kept, 2);
	cr_assert(np->mapped && old->mapped);
	cr_assert_eq(np->handle, old->handle);
}

/* A full peer table over shm (peers there are forgotten only once their
 * process has ended): a new peer takes the place of one whose process the
 * registry holds ended, at once, and the routes to that one let go of it.
 * It was left to the sweep, which waits for a quiet moment, and under load
 * a burst of new clients came first: their replies failed with "peer table
 * full" (churn.sh -p shm with RIPC_TEST_PEERS_MAX=16 beside a soak, 3 of
 * 10).  A peer whose record is not found is not taken for ended, and with
 * none ended the new peer is refused.  White-box: peers made by hand at
 * made-up addresses, never mapped (the engine does that, and it waits for
 * the lock), their registry record ours (alive) or one out of range
 * (ended). */
Test(core, full_table_forgets_an_ended_same_host_peer)
{
	const uint16_t via = 4244;
	const int32_t ended = RIPC_REG_MAX_PROCS + 1;
	int32_t self;
	struct ripc_peer *mine[16], *np_full, *np, *gone;
	struct ripc_route *r;
	uint8_t a[RIPC_ADDR_MAX];
	unsigned room, made = 0, left = 0, passes = 0;
	uint64_t reaped0, reaped_full, reaped;
	bool route_let_go, gone_kept = false, full_err;
	struct ripc_tp *t;
	size_t len;
	int err = 0;

	setenv("RIPC_PROVIDER", "shm", 1);
	setenv("RIPC_RESOLVER", "0", 1);
	setenv("RIPC_TEST_PEERS_MAX", "16", 1);
	need_service(SVC); /* in the registry from here */
	self = ripc__reg_self_slot();
	t = &CTX->tp[RIPC_PROV_SHM];
	cr_assert(t->open && t->attr.same_host_only);
	cr_assert(self >= 0, "not in the registry");
	len = t->addrlen;
	cr_assert(len >= 2 && len <= RIPC_ADDR_MAX);
	memcpy(a, t->addr, len);
	r = calloc(1, sizeof(*r));
	cr_assert_not_null(r);
	cr_assert_null(CTX->route[via]);
	ripc__lock();
	room = CTX->cfg.peers_max - CTX->npeers;
	reaped0 = CTX->stats.peers_reaped;
	for (unsigned i = 0; i < room && i < 16; i++) {
		a[len - 2] = 0xa0;
		a[len - 1] = (uint8_t)i;
		mine[i] = ripc__peer_get(RIPC_PROV_SHM, a, len,
					 CTX->incarnation, &err);
		if (!mine[i])
			break;
		/* Alive: our own record, at our incarnation. */
		mine[i]->proc_slot1 = mine[i]->reg_slot1 = self + 1;
		made++;
	}
	/* The one that will end: its record not found yet (not ended, as
	 * far as anyone can tell), and a cached route to it. */
	gone = made ? mine[made / 2] : NULL;
	if (gone) {
		gone->proc_slot1 = gone->reg_slot1 = 0;
		r->peer = ripc__peer_hold(gone);
		r->reg_version = 1;
		CTX->route[via] = r;
	}
	a[len - 2] = 0xb0;
	a[len - 1] = 0;
	np_full = ripc__peer_get(RIPC_PROV_SHM, a, len, CTX->incarnation + 1,
				 &err);
	full_err = err == RIPC_ENOMEM;
	reaped_full = CTX->stats.peers_reaped;
	/* Its process ends: its record is gone. */
	if (gone)
		gone->proc_slot1 = gone->reg_slot1 = ended;
	np = ripc__peer_get(RIPC_PROV_SHM, a, len, CTX->incarnation + 1, &err);
	reaped = CTX->stats.peers_reaped;
	route_let_go = r->peer == NULL;
	/* By its address, not its pointer: the new peer may be given the
	 * freed one's memory (ThreadSanitizer's allocator did so). */
	for (unsigned b = 0; b < 256 && gone; b++)
		for (struct ripc_peer *p = CTX->peer_hash[b]; p; p = p->hnext)
			gone_kept |= p->tp == RIPC_PROV_SHM &&
				     p->addrlen == len &&
				     !memcmp(p->addr, a, len - 2) &&
				     p->addr[len - 2] == 0xa0 &&
				     p->addr[len - 1] == (uint8_t)(made / 2);
	/* Away with them all: the sweep forgets ended peers (and the route
	 * that leads nowhere now). */
	for (unsigned b = 0; b < 256; b++)
		for (struct ripc_peer *p = CTX->peer_hash[b]; p; p = p->hnext)
			if (p->tp == RIPC_PROV_SHM && p->addrlen == len &&
			    !memcmp(p->addr, a, len - 2) &&
			    (p->addr[len - 2] == 0xa0 ||
			     p->addr[len - 2] == 0xb0))
				p->proc_slot1 = p->reg_slot1 = ended;
	do
		ripc__peers_sweep();
	while (CTX->sweep_reaping && ++passes < 1000);
	for (unsigned b = 0; b < 256; b++)
		for (struct ripc_peer *p = CTX->peer_hash[b]; p; p = p->hnext)
			left += p->tp == RIPC_PROV_SHM && p->addrlen == len &&
				!memcmp(p->addr, a, len - 2) &&
				(p->addr[len - 2] == 0xa0 ||
				 p->addr[len - 2] == 0xb0);
	if (CTX->route[via] == r)
		CTX->route[via] = NULL, free(r); /* not swept: ours */
	ripc__unlock();
	cr_assert_eq(made, room, "%u of %u peers made: %s", made, room,
		     ripc_strerror((uint8_t)err));
	cr_assert_null(np_full, "a full table of live peers took a new one");
	cr_assert(full_err, "refused, but not for want of room");
	cr_assert_eq(reaped_full, reaped0,
		     "a peer whose record was not found was taken for ended");
	cr_assert_not_null(np, "refused with an ended peer in the table: %s",
			   ripc_strerror((uint8_t)err));
	cr_assert_eq(reaped, reaped0 + 1);
	cr_assert(!gone_kept, "the ended peer is still in the table");
	cr_assert(route_let_go, "a route still refers to the ended peer");
	cr_assert_eq(left, 0, "%u made-up peers left after the sweep", left);
}

/* How big one RDMA read or write is: tcp's own 512 KiB and shm's 8 MiB
 * (the core's default) unless RIPC_READ_CHUNK says otherwise for all
 * (ripc__rma_chunk); and an item of several such reads over tcp (5 MiB: ten
 * reads, in flight together) arrives intact. */
Test(core, rma_chunk_per_transport)
{
	setenv("RIPC_PROVIDER", "", 1);
	setenv("RIPC_RESOLVER", "0", 1);
	need_service(SVC);
	cr_assert(CTX->tp[RIPC_PROV_TCP].open && CTX->tp[RIPC_PROV_SHM].open);
	cr_assert_eq(ripc__rma_chunk(&CTX->tp[RIPC_PROV_TCP].attr), 512 << 10);
	cr_assert_eq(ripc__rma_chunk(&CTX->tp[RIPC_PROV_SHM].attr), 8 << 20);
}

Test(core, rma_chunk_from_environment)
{
	setenv("RIPC_PROVIDER", "", 1);
	setenv("RIPC_RESOLVER", "0", 1);
	setenv("RIPC_READ_CHUNK", "1m", 1);
	need_service(SVC);
	cr_assert_eq(ripc__rma_chunk(&CTX->tp[RIPC_PROV_TCP].attr), 1 << 20);
	cr_assert_eq(ripc__rma_chunk(&CTX->tp[RIPC_PROV_SHM].attr), 1 << 20);
}

Test(core, long_to_self_over_tcp_in_chunks)
{
	const size_t huge = (5 << 20) + 3;
	uint8_t *h = malloc(huge);
	void *b[1] = { h };
	uint32_t l[1] = { (uint32_t)huge };
	struct rx r;

	cr_assert(h);
	setenv("RIPC_PROVIDER", "", 1);
	setenv("RIPC_SHM", "0", 1);
	setenv("RIPC_RESOLVER", "0", 1);
	need_service(SVC);
	cr_assert_str_eq(ripc_transport_of(SVC), "tcp");
	cr_assert_lt(ripc__rma_chunk(&CTX->tp[RIPC_PROV_TCP].attr), huge / 8);
	fill(h, huge, 7);
	cr_assert_eq(ripc_send_long(SVC, SVC, b, l, 1, NULL, NULL, 0), RIPC_OK,
		     "%s", ripc_strerror(ripc_last_error()));
	receive(SVC, &r);
	cr_assert_eq(r.err, RIPC_OK, "%s", ripc_strerror(r.err));
	cr_assert_eq(r.nlong, 1);
	cr_assert_eq(r.lsizes[0], huge);
	cr_assert(check_fill(r.litems[0], huge, 7));
	cr_assert_eq(ripc_wait_released(h, -1), RIPC_OK);
	release(&r, true);
	free(h);
}

/* shm without CMA cannot pull safely (ripc(7), TRANSPORTS): with tcp open
 * the process closes shm, and even it reaches itself over tcp; a long
 * item, pulled by RDMA read, arrives intact that way. */
Test(core, shm_without_cma_gives_way_to_tcp)
{
	static uint8_t big[100000];
	void *b[1] = { big };
	uint32_t l[1] = { sizeof(big) };
	struct rx r;

	setenv("FI_SHM_DISABLE_CMA", "1", 1); /* before libfabric starts */
	setenv("RIPC_PROVIDER", "shm,tcp", 1);
	setenv("RIPC_RESOLVER", "0", 1);
	need_service(SVC);
	cr_assert_str_eq(ripc_transport_of(SVC), "tcp");
	fill(big, sizeof(big), 7);
	cr_assert_eq(ripc_send_long(SVC, SVC, b, l, 1, NULL, NULL, 0),
		     RIPC_OK, "%s", ripc_strerror(ripc_last_error()));
	receive(SVC, &r);
	cr_assert_eq(r.err, RIPC_OK);
	cr_assert_eq(r.nlong, 1);
	cr_assert_eq(r.lsizes[0], sizeof(big));
	cr_assert(!memcmp(r.litems[0], big, sizeof(big)));
	release(&r, true);
}

/* With shm alone there is nothing to give way to: shm stays. */
Test(core, shm_without_cma_alone_stays)
{
	setenv("FI_SHM_DISABLE_CMA", "1", 1);
	setenv("RIPC_RESOLVER", "0", 1);
	need_service(SVC);
	cr_assert_str_eq(ripc_transport_of(SVC), "shm");
}

/* ---- zero-length items (libRIPC sent them) --------------------------- */

Test(core, zero_length_short_items)
{
	char a[8] = "abcdefg", c[5] = "wxyz";
	void *b[4] = { a, NULL, c, a };
	uint32_t l[4] = { sizeof(a), 0, sizeof(c), 0 };
	struct rx r;

	need_service(SVC);
	cr_assert_eq(ripc_send_short(SVC, SVC, b, l, 4, NULL, NULL, 0),
		     RIPC_OK, "%s", ripc_strerror(ripc_last_error()));
	receive(SVC, &r);
	cr_assert_eq(r.err, RIPC_OK);
	cr_assert_eq(r.nshort, 4);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(r.ssizes[i], l[i], "item %d", i);
	cr_assert(!memcmp(r.sitems[0], a, sizeof(a)));
	cr_assert(!memcmp(r.sitems[2], c, sizeof(c)));
	release(&r, false);
	/* Only zero-length items may be NULL. */
	l[1] = 1;
	cr_assert_eq(ripc_send_short(SVC, SVC, b, l, 4, NULL, NULL, 0),
		     RIPC_EINVAL);
}

Test(core, zero_length_long_items)
{
	size_t n = 20000;
	uint8_t *src = malloc(n), *tail = malloc(100);
	void *b[3] = { src, NULL, tail };
	uint32_t l[3] = { (uint32_t)n, 0, 100 };
	struct rx r;

	cr_assert(src && tail);
	fill(src, n, 1);
	fill(tail, 100, 2);
	need_service(SVC);
	cr_assert_eq(ripc_send_long(SVC, SVC, b, l, 3, NULL, NULL, 0),
		     RIPC_OK, "%s", ripc_strerror(ripc_last_error()));
	receive(SVC, &r);
	cr_assert_eq(r.err, RIPC_OK, "%s", ripc_strerror(r.err));
	cr_assert_eq(r.nlong, 3);
	cr_assert_eq(r.lsizes[0], n);
	cr_assert_eq(r.lsizes[1], 0);
	cr_assert_eq(r.lsizes[2], 100);
	cr_assert(check_fill(r.litems[0], n, 1));
	cr_assert(check_fill(r.litems[2], 100, 2));
	cr_assert_eq(ripc_wait_released(src, 5000), RIPC_OK);
	release(&r, true);
	/* All items empty: nothing registered, still a message. */
	l[0] = l[2] = 0;
	cr_assert_eq(ripc_send_long(SVC, SVC, b, l, 3, NULL, NULL, 0),
		     RIPC_OK);
	receive(SVC, &r);
	cr_assert_eq(r.err, RIPC_OK);
	cr_assert_eq(r.nlong, 3);
	release(&r, true);
	free(src);
	free(tail);
}

/* ---- how exposures end ----------------------------------------------- */

static bool fd_readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

Test(core, release_events_and_fd)
{
	uint8_t *x = malloc(5000), *y = malloc(7000);
	void *b[2] = { x, y };
	uint32_t l[2] = { 5000, 7000 };
	struct ripc_release ev[8];
	struct rx r;
	int fd, n = 0;

	cr_assert(x && y);
	need_service(SVC);
	fd = ripc_get_fd();
	cr_assert_geq(fd, 0);
	/* The first call turns events on. */
	cr_assert_eq(ripc_release_poll(NULL, 0), 0);
	cr_assert_eq(ripc_release_poll(NULL, 1), -1);
	cr_assert_eq(ripc_last_error(), RIPC_EINVAL);
	cr_assert_eq(ripc_send_long(SVC, SVC, b, l, 2, NULL, NULL, 0),
		     RIPC_OK);
	receive(SVC, &r);
	cr_assert_eq(r.err, RIPC_OK);
	release(&r, true);
	cr_assert_eq(ripc_wait_released(x, 5000), RIPC_OK);
	cr_assert_eq(ripc_wait_released(y, 5000), RIPC_OK);
	/* No message waits, but events do: the fd says so. */
	cr_assert(fd_readable(fd), "fd not readable with events pending");
	n = ripc_release_poll(ev, 8);
	cr_assert_eq(n, 2, "%d events", n);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(ev[i].buf, b[i]);
		cr_assert_eq(ev[i].length, l[i]);
		cr_assert_eq(ev[i].service, SVC);
		cr_assert_eq(ev[i].kind, RIPC_RELEASE_LONG);
		cr_assert_eq(ev[i].status, RIPC_OK);
	}
	cr_assert(!fd_readable(fd), "fd readable with nothing pending");
	cr_assert_eq(ripc_release_poll(ev, 8), 0);
	free(x);
	free(y);
}

/* The receiver refuses (its service went away before the message was
 * dispatched): the owner learns "given up", not "pulled". */
Test(core, release_refused_is_not_success,
     .init = core_init_manual)
{
	uint8_t *x = malloc(9000);
	void *b[1] = { x };
	uint32_t l[1] = { 9000 };
	struct ripc_release ev[2];

	cr_assert_not_null(x);
	need_service(SVC);
	need_service(SVC2);
	cr_assert_eq(ripc_release_poll(NULL, 0), 0);
	cr_assert_eq(ripc_send_long(SVC, SVC2, b, l, 1, NULL, NULL, 0),
		     RIPC_OK);
	/* Manual progress: nothing was dispatched yet. */
	cr_assert_eq(ripc_unregister_service_id(SVC2), RIPC_OK);
	cr_assert_eq(ripc_wait_released(x, 5000), RIPC_EPEER);
	cr_assert_eq(ripc_buf_exposed(x), 0);
	cr_assert_eq(ripc_release_poll(ev, 2), 1);
	cr_assert_eq(ev[0].status, RIPC_EPEER);
	cr_assert_eq(ev[0].buf, x);
	free(x);
}

/* shm: the insert of a peer whose endpoint is closed (a short-lived
 * client that had its answer through the doorbell and ended before the
 * server came to map it) is refused with -ESRCH and never reaches
 * libfabric 1.17, which would accept it, map nothing, and keep the
 * name's node in its table for ever (prov/util/ofi.h, region_prefix). */
Test(core, shm_insert_of_a_closed_endpoint)
{
	const struct ripc_prov_ops *ops = ripc__prov_table[RIPC_PROV_SHM];
	struct ripc_prov_opts opts = { 0 };
	struct ripc_prov_attr attr;
	struct ripc_prov *p[3];
	uint8_t addr[3][RIPC_ADDR_MAX];
	size_t len[3];
	uint64_t h = 0;
	int r, live, closed;

	for (int i = 0; i < 3; i++) {
		r = ops->open(&opts, &p[i], &attr);
		if (r == -ENODEV)
			cr_skip_test("libfabric shm is not usable here");
		cr_assert_eq(r, 0, "open shm: %d", r);
		len[i] = sizeof(addr[i]);
		cr_assert_eq(ops->getname(p[i], addr[i], &len[i]), 0);
	}
	live = ops->av_insert(p[0], addr[1], len[1], &h);
	ops->close(p[2]); /* removes its region file */
	closed = ops->av_insert(p[0], addr[2], len[2], &h);
	ops->close(p[1]);
	ops->close(p[0]);
	cr_assert_eq(live, 0, "insert of a live endpoint: %d", live);
	cr_assert_eq(closed, -ESRCH, "insert of a closed endpoint: %d",
		     closed);
}

/* The two protocols over tcp (RIPC_TCP_NATIVE): each refuses the other's
 * address (a clear RIPC_ENOTSUP instead of a first message that got
 * through and an answer that timed out), and over libfabric 1.17's net a
 * transport that has had a completion and says it may sleep has a wait fd
 * that is quiet: net's fi_trywait left its wait object's signal set, and
 * a progress thread that slept on that fd spun at 98 % of a CPU. */
Test(core, tcp_native_refuses_rxm_and_sleeps)
{
	const struct ripc_prov_ops *ops = ripc__prov_table[RIPC_PROV_TCP];
	struct ripc_prov_opts rxm = { .src_addr = "127.0.0.1" };
	struct ripc_prov_opts native = rxm;
	struct ripc_prov_attr attr[3];
	struct ripc_prov *p[3]; /* native A, native B, rxm R */
	uint8_t addr[3][RIPC_ADDR_MAX];
	size_t len[3];
	uint64_t h = 0, b_at_a = 0;
	char rbuf[64], ctx;
	struct ripc_cqe cqe[4];
	bool got = false, quiet = false;
	int r;

	native.tcp_native = true;
	for (int i = 0; i < 3; i++) {
		r = ops->open(i < 2 ? &native : &rxm, &p[i], &attr[i]);
		if (r == -ENODEV)
			cr_skip_test("libfabric tcp or net is not usable here");
		cr_assert_eq(r, 0, "open tcp %d: %d", i, r);
		len[i] = sizeof(addr[i]);
		cr_assert_eq(ops->getname(p[i], addr[i], &len[i]), 0);
	}
	cr_assert(len[0] > 4 && !memcmp(addr[0] + len[0] - 4, "NTV1", 4),
		  "a native address carries its tag");
	cr_assert(len[2] < 4 || memcmp(addr[2] + len[2] - 4, "NTV1", 4));
	cr_assert_eq(ops->av_insert(p[2], addr[0], len[0], &h),
		     -EPROTONOSUPPORT, "rxm refuses a native address");
	cr_assert_eq(ops->av_insert(p[0], addr[2], len[2], &h),
		     -EPROTONOSUPPORT, "native refuses an rxm address");
	cr_assert_eq(ripc__err_from_errno(-EPROTONOSUPPORT), RIPC_ENOTSUP);
	cr_assert_eq(ops->av_insert(p[0], addr[1], len[1], &b_at_a), 0);

	/* A message from A to B. */
	cr_assert_eq(ops->post_recv(p[1], rbuf, sizeof(rbuf), NULL, &ctx), 0);
	for (int i = 0; i < 5000 && !got; i++) {
		if (i == 0 || r == -EAGAIN)
			r = ops->inject(p[0], b_at_a, "hello", 6);
		cr_assert(r == 0 || r == -EAGAIN, "inject: %d", r);
		ops->poll(p[0], cqe, 4);
		for (int n = ops->poll(p[1], cqe, 4), k = 0; k < n; k++)
			got |= cqe[k].ctx == &ctx && cqe[k].err == 0;
		if (!got)
			usleep(1000);
	}
	cr_assert(got && !strcmp(rbuf, "hello"), "B received");

	/* B, idle now: once it may sleep, its wait fd is quiet. */
	cr_assert_geq(attr[1].wait_fd, 0);
	for (int i = 0; i < 100 && !quiet; i++) {
		ops->poll(p[1], cqe, 4);
		if (ops->trywait(p[1]))
			quiet = poll(&(struct pollfd){ .fd = attr[1].wait_fd,
						       .events = POLLIN },
				     1, 0) == 0;
	}
	for (int i = 0; i < 3; i++)
		ops->close(p[i]);
	cr_assert(quiet, "the wait fd stayed readable after trywait said "
			 "it may be slept on");
}
