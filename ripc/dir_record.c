/*
 * Directory node data and names (see dir_record.h; layout in
 * ripc_protocol(7), DIRECTORY).  All fields are little-endian.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "dir_record.h"

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}
static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}
static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

size_t ripc__dir_rec_encode(const struct ripc_dir_rec *r, uint8_t *buf)
{
	size_t off = RIPC_DIR_REC_HDR;
	unsigned naddr = 0;

	/* Only the bytes of the record are written. */
	memset(buf, 0, r->kind == RIPC_DIR_REC_GROUP ? RIPC_DIR_REC_GROUP_LEN
						      : RIPC_DIR_REC_HDR);
	put32(buf, RIPC_DIR_REC_MAGIC);
	buf[4] = RIPC_DIR_REC_VERSION;
	buf[5] = r->kind;
	if (r->kind == RIPC_DIR_REC_GROUP)
		return RIPC_DIR_REC_GROUP_LEN;
	put64(buf + 8, r->info.incarnation);
	put64(buf + 16, r->info.host_id);
	put32(buf + 24, (uint32_t)r->info.pid);
	put64(buf + 32, r->starttime);
	for (unsigned t = 0; t < RIPC_PROV_MAX; t++) {
		const struct ripc_reg_addr *a = &r->info.addr[t];

		if (!a->len || a->len > RIPC_ADDR_MAX)
			continue;
		buf[off] = (uint8_t)t;
		buf[off + 1] = a->len;
		memcpy(buf + off + 2, a->addr, a->len);
		off += 2 + (size_t)a->len;
		naddr++;
	}
	buf[7] = (uint8_t)naddr;
	return off;
}

int ripc__dir_rec_decode(const uint8_t *buf, size_t len,
			 struct ripc_dir_rec *r)
{
	size_t off = RIPC_DIR_REC_HDR;
	unsigned naddr;
	int32_t pid;

	memset(r, 0, sizeof(*r));
	if (!buf || len < RIPC_DIR_REC_GROUP_LEN ||
	    get32(buf) != RIPC_DIR_REC_MAGIC || buf[4] != RIPC_DIR_REC_VERSION ||
	    buf[6] != 0)
		return -EBADMSG;
	naddr = buf[7];
	switch (buf[5]) {
	case RIPC_DIR_REC_GROUP:
		if (len != RIPC_DIR_REC_GROUP_LEN || naddr != 0)
			return -EBADMSG;
		r->kind = RIPC_DIR_REC_GROUP;
		return RIPC_DIR_REC_GROUP;
	case RIPC_DIR_REC_HOLDER:
		break;
	default:
		return -EBADMSG;
	}
	if (len < RIPC_DIR_REC_HDR || naddr > RIPC_PROV_MAX)
		return -EBADMSG;
	pid = (int32_t)get32(buf + 24);
	r->info.incarnation = get64(buf + 8);
	r->info.host_id = get64(buf + 16);
	r->info.pid = pid;
	r->starttime = get64(buf + 32);
	if (r->info.incarnation == 0 || pid <= 0 || get32(buf + 28) != 0)
		goto bad;
	for (unsigned i = 0; i < naddr; i++) {
		uint8_t tp, alen;

		if (off + 2 > len)
			goto bad;
		tp = buf[off];
		alen = buf[off + 1];
		if (tp >= RIPC_PROV_MAX || alen == 0 || alen > RIPC_ADDR_MAX ||
		    off + 2 + alen > len || r->info.addr[tp].len)
			goto bad;
		r->info.addr[tp].len = alen;
		memcpy(r->info.addr[tp].addr, buf + off + 2, alen);
		off += 2 + (size_t)alen;
	}
	if (off != len)
		goto bad;
	r->kind = RIPC_DIR_REC_HOLDER;
	return RIPC_DIR_REC_HOLDER;
bad:
	memset(r, 0, sizeof(*r));
	return -EBADMSG;
}

void ripc__dir_member_name(uint64_t inc, char *buf)
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 15; i >= 0; i--) {
		buf[i] = hex[inc & 15];
		inc >>= 4;
	}
	buf[16] = '\0';
}

bool ripc__dir_member_parse(const char *name, uint64_t *inc)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 16; i++) {
		char c = name[i];

		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t)(c - 'a' + 10);
		else
			return false; /* also the end of a short name */
	}
	if (name[16] != '\0' || v == 0)
		return false;
	*inc = v;
	return true;
}

int ripc__dir_url_split(const char *url, char *scheme, size_t slen,
			const char **where)
{
	const char *sep = url ? strstr(url, "://") : NULL;
	size_t n;

	if (!sep || sep == url)
		return -EINVAL;
	n = (size_t)(sep - url);
	if (n >= slen)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!((url[i] >= 'a' && url[i] <= 'z') ||
		      (url[i] >= '0' && url[i] <= '9')))
			return -EINVAL;
	memcpy(scheme, url, n);
	scheme[n] = '\0';
	*where = sep + 3;
	return 0;
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '-';
}

/* One "host:port" of length n; true if well formed. */
static bool host_ok(const char *h, size_t n)
{
	const char *colon;
	size_t hn;
	unsigned long port = 0;

	if (n == 0)
		return false;
	if (h[0] == '[') {
		const char *close = memchr(h, ']', n);

		if (!close || close == h + 1)
			return false;
		for (const char *p = h + 1; p < close; p++)
			if (!((*p >= '0' && *p <= '9') ||
			      (*p >= 'a' && *p <= 'f') ||
			      (*p >= 'A' && *p <= 'F') || *p == ':' ||
			      *p == '.'))
				return false;
		colon = close + 1;
		if (colon >= h + n || *colon != ':')
			return false;
	} else {
		colon = NULL;
		for (size_t i = 0; i < n; i++)
			if (h[i] == ':')
				colon = h + i;
		if (!colon || colon == h)
			return false;
		hn = (size_t)(colon - h);
		for (size_t i = 0; i < hn; i++)
			if (!name_char(h[i]))
				return false;
	}
	if (colon + 1 >= h + n || h + n - (colon + 1) > 5)
		return false;
	for (const char *p = colon + 1; p < h + n; p++) {
		if (*p < '0' || *p > '9')
			return false;
		port = port * 10 + (unsigned long)(*p - '0');
	}
	return port >= 1 && port <= 65535;
}

int ripc__dir_where_split(const char *where, char *hosts, size_t hlen,
			  char *chroot, size_t clen)
{
	const char *slash = where ? strchr(where, '/') : NULL;
	size_t hn = slash ? (size_t)(slash - where) : strlen(where ? where : "");
	unsigned nhosts = 0;
	const char *p, *end;

	if (!where || hn == 0 || hn >= hlen)
		return -EINVAL;
	/* An IPv6 host has no '/', so the first '/' starts the chroot. */
	for (p = where, end = where + hn; p < end;) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		size_t n = comma ? (size_t)(comma - p) : (size_t)(end - p);

		if (!host_ok(p, n) || ++nhosts > 32)
			return -EINVAL;
		p += n + (comma ? 1 : 0);
		if (comma && p == end)
			return -EINVAL; /* trailing comma */
	}
	if (slash) {
		size_t cn = strlen(slash);
		const char *c = slash;

		if (cn >= clen)
			return -EINVAL;
		if (cn == 1) {
			cn = 0; /* "/" alone: no chroot */
		} else {
			/* "/a/b": components of allowed characters, none
			 * empty, "." or "..". */
			while (*c == '/') {
				const char *s = c + 1, *e = s;

				while (*e && *e != '/') {
					if (!name_char(*e) && *e != '_')
						return -EINVAL;
					e++;
				}
				if (e == s || (e - s == 1 && s[0] == '.') ||
				    (e - s == 2 && s[0] == '.' && s[1] == '.'))
					return -EINVAL;
				c = e;
			}
			if (*c)
				return -EINVAL;
		}
		memcpy(chroot, slash, cn);
		chroot[cn] = '\0';
	} else {
		if (clen < 1)
			return -EINVAL;
		chroot[0] = '\0';
	}
	memcpy(hosts, where, hn);
	hosts[hn] = '\0';
	return 0;
}
