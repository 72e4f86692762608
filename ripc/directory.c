/*
 * The service directory, generic part (see directory.h): the table of
 * engines by URL scheme, and the process's one instance behind the
 * ripc__dir_* wrappers.
 *
 * With RIPC_DIRECTORY empty no engine is opened and every wrapper is a
 * cheap no-op, so the core calls them unconditionally.  The instance is
 * set at initialisation and cleared at finalisation, both under the
 * library lock; the wrappers read it without a lock of their own, like
 * the rest of the core's configuration, and engines are thread-safe.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dir_record.h"
#include "directory.h"
#include "log.h"

#ifdef RIPC_HAVE_ZOOKEEPER
extern const struct ripc_dir_ops ripc__dir_zk_ops;
#endif

static const struct ripc_dir_ops *const engines[] = {
#ifdef RIPC_HAVE_ZOOKEEPER
	&ripc__dir_zk_ops,
#endif
	NULL,
};

/* Schemes this library knows of, compiled in or not: a URL naming one
 * that is not compiled in gets a clearer error than "unknown". */
static const char *const known_schemes[] = { "zk" };

static struct {
	const struct ripc_dir_ops *ops;
	struct ripc_dir *d;
	char url[512];
} dir;

/* A forked child's copies of the parent's instance: never used again,
 * kept reachable so leak checkers do not report them. */
static struct ripc_dir *forgotten[4];

const char *ripc__dir_engines(void)
{
#ifdef RIPC_HAVE_ZOOKEEPER
	return "zk";
#else
	return "";
#endif
}

int ripc__dir_open(const char *url, const struct ripc_dir_cfg *cfg)
{
	char scheme[16];
	const char *where;
	int ret;

	if (dir.d)
		return -EALREADY;
	if (!url || !*url)
		return 0; /* no directory */
	if (ripc__dir_url_split(url, scheme, sizeof(scheme), &where)) {
		ripc__log(RIPC_LOG_ERROR,
			  "RIPC_DIRECTORY=%s: not a directory URL "
			  "(scheme://...; e.g. zk://host:2181,host:2181/chroot)",
			  url);
		return -EINVAL;
	}
	for (unsigned i = 0; engines[i]; i++) {
		if (strcmp(engines[i]->scheme, scheme))
			continue;
		ret = engines[i]->open(where, cfg, &dir.d);
		if (ret) {
			ripc__log(RIPC_LOG_ERROR, "RIPC_DIRECTORY=%s: %s", url,
				  ret == -EINVAL ? "malformed URL"
						 : strerror(-ret));
			dir.d = NULL;
			return ret;
		}
		dir.ops = engines[i];
		snprintf(dir.url, sizeof(dir.url), "%s", url);
		return 0;
	}
	for (unsigned i = 0; i < sizeof(known_schemes) / sizeof(*known_schemes);
	     i++)
		if (!strcmp(known_schemes[i], scheme)) {
			ripc__log(RIPC_LOG_ERROR,
				  "RIPC_DIRECTORY=%s: libripc was built without "
				  "ZooKeeper (configure --with-zookeeper needs "
				  "libzookeeper-mt-dev)",
				  url);
			return -ENOTSUP;
		}
	ripc__log(RIPC_LOG_ERROR, "RIPC_DIRECTORY=%s: unknown scheme %s://",
		  url, scheme);
	return -EINVAL;
}

void ripc__dir_close(void)
{
	struct ripc_dir *d = dir.d;

	if (!d)
		return;
	dir.d = NULL;
	dir.ops->close(d);
	dir.ops = NULL;
}

void ripc__dir_forget(void)
{
	if (!dir.d)
		return;
	dir.ops->forget(dir.d);
	for (unsigned i = 0; i < sizeof(forgotten) / sizeof(*forgotten); i++)
		if (!forgotten[i]) {
			forgotten[i] = dir.d;
			break;
		}
	dir.d = NULL;
	dir.ops = NULL;
}

bool ripc__dir_enabled(void)
{
	return dir.d != NULL;
}

const char *ripc__dir_url(void)
{
	return dir.d ? dir.url : "";
}

int ripc__dir_claim(uint16_t id, bool mcast, uint64_t deadline_ns)
{
	return dir.d ? dir.ops->claim(dir.d, id, mcast, deadline_ns) : 0;
}

void ripc__dir_release(uint16_t id, bool mcast)
{
	if (dir.d)
		dir.ops->release(dir.d, id, mcast);
}

int ripc__dir_lookup(uint16_t id, struct ripc_reg_proc_info *out, int max,
		     bool *mcast)
{
	*mcast = false;
	return dir.d ? dir.ops->lookup(dir.d, id, out, max, mcast) : 0;
}

void ripc__dir_invalidate(uint16_t id)
{
	if (dir.d)
		dir.ops->invalidate(dir.d, id);
}

uint64_t ripc__dir_version(void)
{
	return dir.d ? dir.ops->version(dir.d) : 0;
}

int ripc__dir_wait_fd(void)
{
	return dir.d ? dir.ops->wait_fd(dir.d) : -1;
}

void ripc__dir_describe(char *buf, unsigned len)
{
	if (!len)
		return;
	if (dir.d)
		dir.ops->describe(dir.d, buf, len);
	else
		snprintf(buf, len, "none");
}
