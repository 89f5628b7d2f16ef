/*
 * Route matching: the first route of the vhost (in precedence order)
 * whose path, method, headers and query parameters all match.
 */

#include "config.h"

#include <string.h>

#include "cache/cache.h"

#include "vre.h"
#include "vsb.h"

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

/*
 * A regex of route r on s[0..l): 1 match, 0 no match. An error (a PCRE2
 * limit) says neither: the first one of the route is kept in *e and the
 * match counts as made, so the route's other conditions decide whether
 * the error matters.
 */
static int
re_match(const struct gh_route *r, const struct vre *re, const char *what,
    const char *name, const char *s, size_t l, struct gh_match_error *e)
{
	int i;

	i = gh_re_match(re, s, l);
	if (i >= 0)
		return (i);
	if (e->route == NULL) {
		e->route = r;
		e->what = what;
		e->name = name;
		e->code = i;
	}
	return (1);
}

/*
 * The first route of vh that matches, or NULL. A route whose conditions
 * all hold but for a regex that failed with an error (PCRE2's match or
 * depth limit), which is neither a match nor a miss, ends the search:
 * NULL, with *e naming the route, logged here. Falling through to a
 * less specific route would let a costly value reach another route than
 * the one it may match. Otherwise e->route is NULL.
 */
const struct gh_route *
gh_route_match(VRT_CTX, const struct gh_vhost *vh, const char *path, size_t pl,
    const char *q, size_t ql, struct gh_match_error *e)
{
	const struct gh_route *r;
	const struct gh_vmatch *m;
	const char *method, *v;
	char buf[VRE_ERROR_LEN];
	struct vsb vsb[1];
	size_t vl;
	unsigned u, k;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(vh, GH_VHOST_MAGIC);
	AN(e);
	method = http_GetMethod(ctx->http_req);
	for (u = 0; u < vh->nroute; u++) {
		r = &vh->route[u];
		e->route = NULL;
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
			if (!re_match(r, r->pre, "path", "", path, pl, e))
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
			if (m->regex ? !re_match(r, m->re, "header", m->name, v,
			    strlen(v), e) : strcmp(v, m->value) != 0)
				break;
		}
		if (k < r->nhdr)
			continue;
		for (k = 0; k < r->nqry; k++) {
			m = &r->qry[k];
			if (!query_find(q, ql, m, &v, &vl))
				break;
			if (m->regex ? !re_match(r, m->re, "query parameter",
			    m->name, v, vl, e) :
			    (vl != strlen(m->value) || memcmp(v, m->value, vl)))
				break;
		}
		if (k < r->nqry)
			continue;
		if (e->route == NULL)
			return (r);
		AN(VSB_init(vsb, buf, sizeof buf));
		(void)VRE_error(vsb, e->code);
		(void)VSB_finish(vsb);
		VSB_fini(vsb);
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.regex_error: route %s: "
		    "%s%s%s: %s", r->name, e->what,
		    *e->name != '\0' ? " " : "", e->name, buf);
		return (NULL);
	}
	e->route = NULL;
	return (NULL);
}
