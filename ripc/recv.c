/*
 * Receive: handing a ready message to the application.
 *
 * Short items stay where they arrived, in the receive slot, which becomes
 * the application's (ripc_buf_free(short_items[0]) returns it); long items
 * are where the pull put them (a window, a library buffer) or where the
 * peer wrote them (a return buffer).  The arrays of pointers and sizes are
 * malloc()ed, as libRIPC did: the caller free()s them.  The waiting that
 * precedes a receive is the API layer's (api.c).
 */
#include <stdlib.h>

#include "ripc_int.h"

int ripc__recv_hand_over(struct ripc_msg *m, const struct ripc_recv_out *o)
{
	void **sp = NULL, **lp = NULL;
	uint32_t *ss = NULL, *ls = NULL;
	unsigned ns = m->nshort, nl = m->nlong;
	int err = m->err;

	if (m->err == RIPC_EPULL)
		nl = 0; /* nothing of it was delivered */
	if (ns && o->short_items) {
		sp = malloc(ns * sizeof(*sp));
		ss = malloc(ns * sizeof(*ss));
	}
	if (nl && o->long_items) {
		lp = malloc(nl * sizeof(*lp));
		ls = malloc(nl * sizeof(*ls));
	}
	if ((ns && o->short_items && (!sp || !ss)) ||
	    (nl && o->long_items && (!lp || !ls))) {
		free(sp), free(ss), free(lp), free(ls);
		return RIPC_ENOMEM;
	}
	for (unsigned i = 0; sp && i < ns; i++) {
		sp[i] = m->short_ptr[i];
		ss[i] = m->short_len[i];
	}
	for (unsigned i = 0; lp && i < nl; i++) {
		lp[i] = m->long_ptr[i];
		ls[i] = m->long_len[i];
	}
	if (o->from)
		*o->from = m->from;
	if (o->short_items) {
		*o->short_items = sp;
		if (o->short_sizes)
			*o->short_sizes = ss;
		else
			free(ss);
		if (o->num_short)
			*o->num_short = (uint16_t)ns;
		if (ns)
			m->slot = NULL; /* now the application's */
	} else if (o->num_short) {
		*o->num_short = 0;
	}
	if (o->long_items) {
		*o->long_items = lp;
		if (o->long_sizes)
			*o->long_sizes = ls;
		else
			free(ls);
		if (o->num_long)
			*o->num_long = (uint16_t)nl;
		if (nl)
			m->nlong = 0; /* buffers are the application's */
	} else if (o->num_long) {
		*o->num_long = 0;
	}
	ripc__msg_free(m);
	return err;
}
