/*
 * Session persistence (ghost.json routes' "sessionPersistence", README.md
 * "Session persistence"), by cookie or by header.
 *
 * .recv(): the session cookie (or request header) of a route that has one
 * is read and taken off the request (the origin never sees it, and a cache
 * policy decides as if it were not there). Its value "<id>.<time>" selects
 * the endpoint
 * whose identifier is <id> among the route's own groups, weight 0 too,
 * while the session is younger than its absolute timeout and the endpoint
 * is healthy. Otherwise the route picks by weight, and .deliver() sets the
 * cookie (or the response header) to the picked endpoint and the time, on
 * a response below 500.
 *
 * The identifiers (struct gh_group's sid[]) are computed by the loader,
 * so a request costs a scan of the Cookie header and a comparison per
 * endpoint of the route; the rewritten Cookie header and the Set-Cookie
 * header are on the workspace.
 */

#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cache/cache.h"

#include "vcl.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

/* the seconds a cookie's time may be ahead of ours (clock skew) */
#define GH_SESSION_SKEW	300

/* "<16 hex>.<seconds>" of l bytes at v: 0, or -1 if malformed */
static int
parse_value(const char *v, size_t l, uint64_t *id, long long *tm)
{
	uint64_t x;
	long long n;
	size_t i;
	int c;

	if (l < GH_SESSION_IDLEN + 2 || l > GH_SESSION_IDLEN + 1 + 18 ||
	    v[GH_SESSION_IDLEN] != '.')
		return (-1);
	x = 0;
	for (i = 0; i < GH_SESSION_IDLEN; i++) {
		c = (unsigned char)v[i];
		if (c >= '0' && c <= '9')
			c -= '0';
		else if (c >= 'a' && c <= 'f')
			c -= 'a' - 10;
		else
			return (-1);
		x = (x << 4) | (uint64_t)c;
	}
	n = 0;
	for (i = GH_SESSION_IDLEN + 1; i < l; i++) {
		if (v[i] < '0' || v[i] > '9')
			return (-1);
		n = n * 10 + (v[i] - '0');
	}
	*id = x;
	*tm = n;
	return (0);
}

/*
 * The endpoint of the route whose identifier is id: 1 with *gp, *ep set
 * when it is healthy, 0 when there is none or it is sick.
 */
static int
find_endpoint(VRT_CTX, const struct gh_route *r, uint64_t id,
    const struct gh_group **gp, unsigned *ep)
{
	const struct gh_group *g;
	const struct gh_be *be;
	unsigned u, e;

	for (u = 0; u < r->ngroup; u++) {
		g = &r->group[u];
		if (g->sid == NULL)
			continue;
		for (e = 0; e < g->nep; e++) {
			if (g->sid[e] != id)
				continue;
			CHECK_OBJ_NOTNULL(g->set, GH_BSET_MAGIC);
			be = g->set->be[e];
			CHECK_OBJ_NOTNULL(be, GH_BE_MAGIC);
			if (!VRT_Healthy(ctx, be->be, NULL)) {
				VSLb(ctx->vsl, SLT_VCL_Log, "ghost.session: "
				    "endpoint %s:%u of %s is sick: picked "
				    "again", g->ep[e].address, g->ep[e].port,
				    g->name);
				return (0);
			}
			*gp = g;
			*ep = e;
			return (1);
		}
	}
	return (0);
}

/* a session's value (l bytes at v): 1 if it selects an endpoint */
static int
check_value(VRT_CTX, const struct gh_route *r, const char *v, size_t l,
    const struct gh_group **gp, unsigned *ep)
{
	const struct gh_session *sp = r->session;
	uint64_t id;
	long long tm;

	if (parse_value(v, l, &id, &tm)) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.session: %s %s is "
		    "malformed: picked again", sp->header ? "header" : "cookie",
		    sp->name);
		return (0);
	}
	if (sp->timeout > 0 && ((double)tm + sp->timeout <= ctx->now ||
	    (double)tm > ctx->now + GH_SESSION_SKEW)) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.session: %s %s expired "
		    "(began %lld, absolute timeout %llds): picked again",
		    sp->header ? "header" : "cookie", sp->name, tm,
		    sp->timeout);
		return (0);
	}
	if (find_endpoint(ctx, r, id, gp, ep))
		return (1);
	VSLb(ctx->vsl, SLT_VCL_Log, "ghost.session: %s %s names no "
	    "usable endpoint of the route: picked again",
	    sp->header ? "header" : "cookie", sp->name);
	return (0);
}

/* the cookie walk of gh_session_recv() */
struct sess_walk {
	const struct gh_route	*r;
	const struct gh_group	**gp;
	unsigned		*ep;
	int			found;
};

/* the session's cookies are dropped; the first that selects wins */
static int
sess_drop(VRT_CTX, void *priv, const char *name, size_t nl,
    const char *val, size_t vl)
{
	struct sess_walk *w = priv;
	const struct gh_session *sp = w->r->session;

	if (nl != sp->nlen || memcmp(name, sp->name, nl))
		return (0);
	if (!w->found)
		w->found = check_value(ctx, w->r, val, vl, w->gp, w->ep);
	return (1);
}

/*
 * Called by .recv() for a route with session persistence, before the
 * cache policy: 1 with *gp and *ep set when the request's cookie (or
 * header) names a usable endpoint of the route, 0 when the route must
 * pick, -1 when out of workspace (VRT_fail done). The session's cookies
 * (or headers) are removed from the request either way.
 */
int
gh_session_recv(VRT_CTX, const struct gh_route *r,
    const struct gh_group **gp, unsigned *ep)
{
	const struct gh_session *sp;
	struct sess_walk w;
	const char *v;
	unsigned kept;
	int found;

	CHECK_OBJ_NOTNULL(r, GH_ROUTE_MAGIC);
	sp = r->session;
	CHECK_OBJ_NOTNULL(sp, GH_SESSION_MAGIC);
	*gp = NULL;
	*ep = 0;
	if (sp->header) {
		/* the first such header; all of them are removed */
		if (!http_GetHdr(ctx->http_req, sp->hdr, &v))
			return (0);
		found = check_value(ctx, r, v, strlen(v), gp, ep);
		http_Unset(ctx->http_req, sp->hdr);
	} else {
		/* one header, as HTTP/2 clients may send many */
		http_CollectHdrSep(ctx->http_req, H_Cookie, "; ");
		w.r = r;
		w.gp = gp;
		w.ep = ep;
		w.found = 0;
		if (gh_cookie_filter(ctx, sess_drop, &w, &kept) < 0) {
			VRT_fail(ctx, "ghost: out of workspace");
			return (-1);
		}
		found = w.found;
	}
	if (found) {
		AN(*gp);
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.session: kept on %s:%u "
		    "of %s", (*gp)->ep[*ep].address, (*gp)->ep[*ep].port,
		    (*gp)->name);
	}
	return (found);
}

/* .recv() picked endpoint e of g for a new session */
void
gh_session_new(VRT_CTX, struct gh_task *t, const struct gh_group *g,
    unsigned e)
{

	CHECK_OBJ_NOTNULL(t, GH_TASK_MAGIC);
	AN(g);
	AN(g->sid);
	assert(e < g->nep);
	t->sess_id = g->sid[e];
	t->sess_time = (long long)ctx->now;
	t->sess_new = 1;
}

/*
 * .deliver(): the new session's cookie (or response header, replacing
 * the backend's), on a response below 500
 */
void
gh_session_deliver(VRT_CTX, const struct gh_task *t)
{
	const struct gh_session *sp;

	CHECK_OBJ_NOTNULL(t, GH_TASK_MAGIC);
	if (!t->sess_new || t->route == NULL ||
	    ctx->http_resp->status >= 500)
		return;
	sp = t->route->session;
	CHECK_OBJ_NOTNULL(sp, GH_SESSION_MAGIC);
	if (sp->header) {
		http_Unset(ctx->http_resp, sp->hdr);
		http_PrintfHeader(ctx->http_resp, "%s: %016" PRIx64 ".%lld",
		    sp->name, t->sess_id, t->sess_time);
	} else if (sp->permanent)
		http_PrintfHeader(ctx->http_resp, "Set-Cookie: %s=%016"
		    PRIx64 ".%lld; Path=%s; Max-Age=%lld; HttpOnly; "
		    "SameSite=Lax%s", sp->name, t->sess_id, t->sess_time,
		    sp->path, sp->timeout, t->https ? "; Secure" : "");
	else
		http_PrintfHeader(ctx->http_resp, "Set-Cookie: %s=%016"
		    PRIx64 ".%lld; Path=%s; HttpOnly; SameSite=Lax%s",
		    sp->name, t->sess_id, t->sess_time, sp->path,
		    t->https ? "; Secure" : "");
}
