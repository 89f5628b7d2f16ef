/*
 * Route matching: the first route of the vhost (in precedence order)
 * whose path, method, headers and query parameters all match.
 */

#include "config.h"

#include <string.h>

#include "cache/cache.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

static int
query_find(const char *q, size_t ql, const struct gh_vmatch *m,
    const char **v, size_t *vl)
{
	const char *e, *n, *eq;

	while (ql > 0) {
		e = memchr(q, '&', ql);
		n = e != NULL ? e : q + ql;
		eq = memchr(q, '=', n - q);
		if ((size_t)((eq != NULL ? eq : n) - q) == m->nlen &&
		    !memcmp(q, m->name, m->nlen)) {
			*v = eq != NULL ? eq + 1 : n;
			*vl = n - *v;
			return (1);
		}
		if (e == NULL)
			break;
		ql -= (e + 1) - q;
		q = e + 1;
	}
	return (0);
}

const struct gh_route *
gh_route_match(VRT_CTX, const struct gh_vhost *vh, const char *path, size_t pl,
    const char *q, size_t ql)
{
	const struct gh_route *r;
	const struct gh_vmatch *m;
	const char *method, *v;
	size_t vl;
	unsigned u, k;

	method = http_GetMethod(ctx->http_req);
	for (u = 0; u < vh->nroute; u++) {
		r = &vh->route[u];
		switch (r->ptype) {
		case GH_PATH_EXACT:
			if (pl != r->plen || memcmp(path, r->pvalue, pl))
				continue;
			break;
		case GH_PATH_PREFIX:
			if (pl < r->plen || memcmp(path, r->pvalue, r->plen) ||
			    (pl > r->plen && path[r->plen] != '/'))
				continue;
			break;
		default:
			if (!gh_re_match(r->pre, path, pl))
				continue;
			break;
		}
		if (r->method != NULL &&
		    (method == NULL || strcmp(method, r->method)))
			continue;
		for (k = 0; k < r->nhdr; k++) {
			m = &r->hdr[k];
			if (!http_GetHdr(ctx->http_req, m->hdr, &v))
				break;
			if (m->regex ? !gh_re_match(m->re, v, strlen(v)) :
			    strcmp(v, m->value))
				break;
		}
		if (k < r->nhdr)
			continue;
		for (k = 0; k < r->nqry; k++) {
			m = &r->qry[k];
			if (!query_find(q, ql, m, &v, &vl))
				break;
			if (m->regex ? !gh_re_match(m->re, v, vl) :
			    (vl != strlen(m->value) || memcmp(v, m->value, vl)))
				break;
		}
		if (k < r->nqry)
			continue;
		return (r);
	}
	return (NULL);
}

