/*
 * Unit tests of ripc/errors.c: the one table of RIPC_E* texts, the
 * per-thread last error, and the errno -> RIPC_E* translation.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ripc_int.h"

Test(errors, codes_fit_uint8)
{
	/* The libRIPC API returns them as uint8_t. */
	cr_assert_leq(RIPC_ERROR_MAX, 256);
	cr_assert_eq(RIPC_OK, 0);
}

Test(errors, strerror_every_code)
{
	const char *unknown = ripc_strerror(RIPC_ERROR_MAX);

	cr_assert_not_null(unknown);
	for (int e = 0; e < RIPC_ERROR_MAX; e++) {
		const char *t = ripc_strerror(e);

		cr_assert_not_null(t, "code %d", e);
		cr_assert_gt(strlen(t), 3, "code %d: \"%s\"", e, t);
		cr_assert_str_neq(t, unknown, "code %d has no text of its own",
				  e);
		for (int f = 0; f < e; f++)
			cr_assert_str_neq(t, ripc_strerror(f),
					  "codes %d and %d share \"%s\"", f, e,
					  t);
	}
}

Test(errors, strerror_unknown_codes)
{
	static const int bad[] = { -1,	 -RIPC_EINVAL, RIPC_ERROR_MAX,
				   255,	 256,	       1000,
				   INT_MAX, INT_MIN,   -ENOMEM };
	const char *unknown = ripc_strerror(RIPC_ERROR_MAX);

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *t = ripc_strerror(bad[i]);

		cr_assert_not_null(t, "code %d", bad[i]);
		cr_assert_str_eq(t, unknown, "code %d", bad[i]);
	}
}

Test(errors, from_errno_mapping)
{
	static const struct {
		int neg_errno, want;
	} map[] = {
		{ 0, RIPC_OK },
		{ -EINVAL, RIPC_EINVAL },
		{ -ENOMEM, RIPC_ENOMEM },
		{ -ENOSPC, RIPC_ENOMEM },
		{ -ETIMEDOUT, RIPC_ETIMEDOUT },
		{ -EINTR, RIPC_EINTR },
		{ -ENODEV, RIPC_ENOPROVIDER },
		{ -ENODATA, RIPC_ENOPROVIDER },
		{ -ENOTCONN, RIPC_EPEER },
		{ -ECONNREFUSED, RIPC_EPEER },
		{ -ECONNRESET, RIPC_EPEER },
		{ -EPIPE, RIPC_EPEER },
		{ -EHOSTUNREACH, RIPC_EPEER },
		{ -ECANCELED, RIPC_EPEER },
		{ -ENOSYS, RIPC_ENOTSUP },
		{ -EOPNOTSUPP, RIPC_ENOTSUP },
		{ -EAGAIN, RIPC_EAGAIN },
		{ -EWOULDBLOCK, RIPC_EAGAIN },
		{ -EIO, RIPC_ETRANSPORT },
		{ -EFAULT, RIPC_ETRANSPORT },
		{ -EPROTO, RIPC_ETRANSPORT },
	};

	for (unsigned i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		cr_assert_eq(ripc__err_from_errno(map[i].neg_errno),
			     map[i].want, "%d (%s): got %s, want %s",
			     map[i].neg_errno, strerror(-map[i].neg_errno),
			     ripc_strerror(
				     ripc__err_from_errno(map[i].neg_errno)),
			     ripc_strerror(map[i].want));
}

/* Whatever a transport returns, the result is a real code, and only 0
 * means success. */
Test(errors, from_errno_total)
{
	for (int e = -4200; e <= 4200; e++) {
		int r = ripc__err_from_errno(e);

		cr_assert(r >= 0 && r < RIPC_ERROR_MAX, "%d -> %d", e, r);
		cr_assert((r == RIPC_OK) == (e == 0), "%d -> %d", e, r);
	}
	cr_assert_neq(ripc__err_from_errno(INT_MAX), RIPC_OK);
}

static void *other_thread(void *arg)
{
	int *seen = arg;

	seen[0] = ripc_last_error();
	ripc__set_err(RIPC_EPEER);
	seen[1] = ripc_last_error();
	return NULL;
}

Test(errors, last_error_per_thread)
{
	pthread_t t;
	int seen[2] = { -1, -1 };

	cr_assert_eq(ripc_last_error(), RIPC_OK, "fresh thread");
	cr_assert_eq(ripc__set_err(RIPC_EBADID), RIPC_EBADID,
		     "set returns its argument");
	cr_assert_eq(ripc_last_error(), RIPC_EBADID);
	cr_assert_eq(pthread_create(&t, NULL, other_thread, seen), 0);
	pthread_join(t, NULL);
	cr_assert_eq(seen[0], RIPC_OK, "a new thread starts without error");
	cr_assert_eq(seen[1], RIPC_EPEER);
	cr_assert_eq(ripc_last_error(), RIPC_EBADID,
		     "another thread's error leaked into this one");
}
