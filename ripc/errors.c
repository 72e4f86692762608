/*
 * Error codes: the one table of RIPC_E* texts, the per-thread "last error",
 * and the single place where errno values coming from transports are
 * translated into RIPC_E* codes.
 */
#include <errno.h>

#include "ripc_int.h"

static const char *const ripc_errstr[RIPC_ERROR_MAX] = {
	[RIPC_OK] = "Success",
	[RIPC_EINVAL] = "Invalid argument",
	[RIPC_ENOMEM] = "Out of memory or registration resources",
	[RIPC_EBADID] = "Service ID out of range (valid: 0-65534)",
	[RIPC_EINUSE] = "Service ID is held by a live process",
	[RIPC_ENOTOWNER] = "Service ID is not held by this process",
	[RIPC_ENOSERVICE] = "Destination service is not registered",
	[RIPC_E2BIG] = "Message exceeds the short-message maximum",
	[RIPC_ETOOMANY] = "Too many items or return buffers",
	[RIPC_ETIMEDOUT] = "Operation timed out",
	[RIPC_EINTR] = "Interrupted by a signal",
	[RIPC_EPEER] = "Peer unreachable, dead or restarted",
	[RIPC_ETRANSPORT] = "Fabric transport error",
	[RIPC_ENOPROVIDER] = "No usable fabric provider",
	[RIPC_EPULL] = "A long item could not be pulled from its sender",
	[RIPC_ENOTFOUND] = "No such buffer or window",
	[RIPC_EREGISTRY] = "Service registry unusable",
	[RIPC_ENOTSUP] = "Not supported in this configuration",
	[RIPC_ESHUTDOWN] = "Library is shutting down",
	[RIPC_EAGAIN] = "No message available",
	[RIPC_ETRUNC] = "Some long items had no receive window and no library buffer",
	[RIPC_EEXPIRED] = "Exposure ended: the peer did not finish in time",
	[RIPC_ECANCELED] = "Cancelled by this process, or left unused",
};

__attribute__((visibility("default"))) const char *ripc_strerror(int err)
{
	if (err < 0 || err >= RIPC_ERROR_MAX || !ripc_errstr[err])
		return "Unknown libripc error";
	return ripc_errstr[err];
}

static RIPC_TLS int ripc_tls_err;

int ripc__set_err(int err)
{
	ripc_tls_err = err;
	return err;
}

__attribute__((visibility("default"))) int ripc_last_error(void)
{
	return ripc_tls_err;
}

int ripc__err_from_errno(int neg_errno)
{
	switch (-neg_errno) {
	case 0:
		return RIPC_OK;
	case EINVAL:
		return RIPC_EINVAL;
	case ENOMEM:
	case ENOSPC:
		return RIPC_ENOMEM;
	case ETIMEDOUT:
		return RIPC_ETIMEDOUT;
	case EINTR:
		return RIPC_EINTR;
	case ENODEV:
	case ENODATA:
		return RIPC_ENOPROVIDER;
	case ENOTCONN:
	case ECONNREFUSED:
	case ECONNRESET:
	case EPIPE:
	case EHOSTUNREACH:
	case ECANCELED:
		return RIPC_EPEER;
	case ENOSYS:
	case EOPNOTSUPP:
	case EPROTONOSUPPORT: /* a peer of the other tcp protocol */
		return RIPC_ENOTSUP;
	case EAGAIN:
		return RIPC_EAGAIN;
	default:
		return RIPC_ETRANSPORT;
	}
}
