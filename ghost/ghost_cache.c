/*
 * Cache policies (ghost.json "cachePolicies", README.md "Caching").
 *
 * Client side: .recv() strips the policy's cookies, decides lookup or
 * pass and, on a lookup, builds the key, which .hash() hashes and the
 * handoff (ghost_task.c) carries to the backend side with the policy's
 * times. .deliver() counts HIT/MISS/PASS, sets the policy's status header
 * and strips the object headers below.
 *
 * Backend side: .backend_response() applies the TTL (fallback or forced),
 * grace and keep, makes what the builtin VCL would not cache hit-for-miss,
 * and stamps the object headers that bans match: X-Ghost-Host,
 * X-Ghost-Path, X-Ghost-Url, X-Ghost-Tags.
 *
 * The VCL methods are ghost_router.c's (.cacheable(), .hash()) and
 * ghost_backend.c's; this file holds what they do.
 */

#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cache/cache.h"

#include "vcl.h"
#include "vrt_obj.h"

#include "VSC_ghost.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

static const char H_X_Ghost_Host[] = "\015X-Ghost-Host:";
static const char H_X_Ghost_Path[] = "\015X-Ghost-Path:";
static const char H_X_Ghost_Url[] = "\014X-Ghost-Url:";
static const char H_X_Ghost_Tags[] = "\015X-Ghost-Tags:";

/* what the builtin VCL makes hit-for-miss, for as long */
#define GH_HITMISS_TTL	120.

/*
 * Longer paths are passed: a cached object's X-Ghost-Path is what
 * invalidation bans match regular expressions against, and varnishd's
 * ban lurker panics on a PCRE2 error (match limit) instead of skipping
 * the object, so a client must not get an arbitrarily long path cached.
 * Route matches are at most this long too.
 */
#define GH_CACHE_MAX_PATH	1024

/*--------------------------------------------------------------------
 * client side
 */

/* a cookie the policy strips */
static int
strip_drop(VRT_CTX, void *priv, const char *name, size_t nl,
    const char *val, size_t vl)
{
	const struct gh_cache *c;
	unsigned u;

	(void)ctx;
	(void)val;
	(void)vl;
	CAST_OBJ_NOTNULL(c, priv, GH_CACHE_MAGIC);
	for (u = 0; u < c->nstrip; u++)
		if (c->striplen[u] == nl && !memcmp(c->strip[u], name, nl))
			return (1);
	return (0);
}

/*
 * Remove the policy's cookies from the Cookie header (all with "*"); an
 * emptied header is removed. -1: out of workspace.
 */
static int
cookie_strip(VRT_CTX, const struct gh_cache *c)
{
	unsigned kept;

	if (!http_GetHdr(ctx->http_req, H_Cookie, NULL))
		return (0);
	if (c->strip_all) {
		http_Unset(ctx->http_req, H_Cookie);
		return (0);
	}
	if (gh_cookie_filter(ctx, strip_drop, TRUST_ME(c), &kept) < 0)
		return (-1);
	if (kept == 0)
		http_Unset(ctx->http_req, H_Cookie);
	return (0);
}

/*
 * The key's query from the request's (q, ql bytes, without "?") into o
 * (ql bytes at least): all of it, none, or the parameters queryParams
 * includes or excludes, in their original order. Returns its length.
 */
static size_t
key_query(const struct gh_cache *c, const char *q, size_t ql, char *o)
{
	const char *p, *s, *e, *eq;
	size_t n, nl;
	unsigned u;

	switch (c->qkey) {
	case GH_QK_NONE:
		return (0);
	case GH_QK_ALL:
		memcpy(o, q, ql);
		return (ql);
	default:
		assert(c->qkey == GH_QK_INCLUDE || c->qkey == GH_QK_EXCLUDE);
		break;
	}
	n = 0;
	e = q + ql;
	for (p = q; p < e; p = s + 1) {
		s = memchr(p, '&', e - p);
		if (s == NULL)
			s = e;
		if (s > p) {
			eq = memchr(p, '=', s - p);
			nl = (eq != NULL ? eq : s) - p;
			for (u = 0; u < c->nqparam; u++)
				if (c->qplen[u] == nl &&
				    !memcmp(c->qparam[u], p, nl))
					break;
			if ((u < c->nqparam) == (c->qkey == GH_QK_INCLUDE)) {
				if (n > 0)
					o[n++] = '&';
				memcpy(o + n, p, s - p);
				n += s - p;
			}
		}
		if (s == e)
			break;
	}
	assert(n <= ql);
	return (n);
}

/*
 * Called by .recv() for a routed request, before the route's filters:
 * the policy's decision, lookup (t->cache and the key set) or pass.
 * host is normalized (hl bytes), path and q the client's (before
 * URLRewrite). -1: out of workspace (VRT_fail done).
 */
int
gh_cache_recv(VRT_CTX, struct gh_task *t, const struct gh_route *r,
    const char *host, size_t hl, const char *path, size_t pl,
    const char *q, size_t ql)
{
	const struct gh_cache *c;
	const char *m;
	char *buf, *o;
	size_t need, kl;

	CHECK_OBJ_NOTNULL(t, GH_TASK_MAGIC);
	CHECK_OBJ_NOTNULL(r, GH_ROUTE_MAGIC);
	AZ(t->cache);
	c = r->cache;
	if (c == NULL)
		return (0);
	CHECK_OBJ(c, GH_CACHE_MAGIC);
	m = ctx->http_req->hd[HTTP_HDR_METHOD].b;
	AN(m);
	if (strcmp(m, "GET") && strcmp(m, "HEAD"))
		return (0);
	if (c->nstrip > 0 && cookie_strip(ctx, c)) {
		VRT_fail(ctx, "ghost: out of workspace");
		return (-1);
	}
	if (pl > GH_CACHE_MAX_PATH) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.cache: pass (path over %d "
		    "bytes)", GH_CACHE_MAX_PATH);
		return (0);
	}
	if (!c->allow_auth && http_GetHdr(ctx->http_req, H_Authorization,
	    NULL)) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.cache: pass (Authorization)");
		return (0);
	}
	if (http_GetHdr(ctx->http_req, H_Cookie, NULL)) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.cache: pass (Cookie)");
		return (0);
	}

	/* the key: the URL, a NUL, the host, a NUL */
	need = pl + 1 + ql + 1 + hl + 1;
	buf = WS_Alloc(ctx->ws, need);
	if (buf == NULL) {
		VRT_fail(ctx, "ghost: out of workspace");
		return (-1);
	}
	o = buf;
	t->kurl = o;
	memcpy(o, path, pl);
	o += pl;
	kl = key_query(c, q, ql, o + 1);
	if (kl > 0) {
		*o = '?';
		o += 1 + kl;
	}
	t->kul = o - buf;
	t->kpl = pl;
	*o++ = '\0';
	t->khost = o;
	t->khl = hl;
	memcpy(o, host, hl);
	o[hl] = '\0';
	assert(o + hl < buf + need);
	t->cache = c;
	VSLb(ctx->vsl, SLT_VCL_Log, "ghost.cache: lookup (policy %s)",
	    c->name);
	return (0);
}

/*
 * .deliver(): the object headers never reach the client; a routed
 * response counts as HIT (grace hits too), PASS (pass, hit-for-pass,
 * hit-for-miss, uncacheable) or MISS, and carries the policy's status
 * header.
 */
void
gh_cache_deliver(VRT_CTX, const struct gh_task *t)
{
	const struct gh_cache *c;
	const char *s;

	http_Unset(ctx->http_resp, H_X_Ghost_Host);
	http_Unset(ctx->http_resp, H_X_Ghost_Path);
	http_Unset(ctx->http_resp, H_X_Ghost_Url);
	http_Unset(ctx->http_resp, H_X_Ghost_Tags);
	if (t == NULL || t->route == NULL || t->vh == NULL || t->status != 0)
		return;
	CHECK_OBJ_NOTNULL(t, GH_TASK_MAGIC);
	if (VRT_r_obj_hits(ctx) > 0) {
		GH_COUNT(t->vh, cache_hit);
		s = "HIT";
	} else if (VRT_r_obj_uncacheable(ctx)) {
		GH_COUNT(t->vh, cache_pass);
		s = "PASS";
	} else {
		GH_COUNT(t->vh, cache_miss);
		s = "MISS";
	}
	c = t->route->cache;
	if (c == NULL || c->statushdr == NULL)
		return;
	http_Unset(ctx->http_resp, c->statushdr_h);
	http_PrintfHeader(ctx->http_resp, "%s: %s", c->statushdr, s);
}

/*
 * What a request's routing depends on beyond its host and URL, first in
 * every key: the listener socket (local.socket) and the scheme, so that
 * no listener fills another's objects, and the route (its name: the
 * HTTPRoute's namespace/name/rule/match, which a reload keeps), so that
 * routes told apart by a header, method or query match never share one.
 * A route without a name (a hand-written ghost.json) counts by its vhost
 * and position.
 */
static void
hash_routing(VRT_CTX, const struct gh_task *t)
{
	const char *sock;
	char idx[24];

	sock = VRT_r_local_socket(ctx);
	VRT_hashdata(ctx, TOSTRANDS(2, "socket ", sock != NULL ? sock : ""));
	VRT_hashdata(ctx, TOSTRAND(t != NULL && t->https ? "https" : "http"));
	if (t == NULL || t->route == NULL)
		return;
	CHECK_OBJ(t->route, GH_ROUTE_MAGIC);
	if (*t->route->name != '\0') {
		VRT_hashdata(ctx, TOSTRANDS(2, "route ", t->route->name));
		return;
	}
	CHECK_OBJ_NOTNULL(t->vh, GH_VHOST_MAGIC);
	bprintf(idx, "%u", t->route->index);
	VRT_hashdata(ctx, TOSTRANDS(4, "route ", t->vh->hostname, " ", idx));
}

/* .hash(): the routing, then the key .recv() built (t may be NULL) */
void
gh_cache_hash(VRT_CTX, const struct gh_task *t)
{
	const struct gh_cache *c;
	const char *v;
	unsigned u;

	hash_routing(ctx, t);
	if (t == NULL || t->cache == NULL) {
		/* what the builtin vcl_hash hashes */
		VRT_hashdata(ctx, TOSTRAND(ctx->http_req->hd[HTTP_HDR_URL].b));
		if (http_GetHdr(ctx->http_req, H_Host, &v))
			VRT_hashdata(ctx, TOSTRAND(v));
		else
			VRT_hashdata(ctx, TOSTRAND(VRT_IP_string(ctx,
			    VRT_r_server_ip(ctx))));
		return;
	}
	c = t->cache;
	CHECK_OBJ_NOTNULL(c, GH_CACHE_MAGIC);
	AN(t->khost);
	AN(t->kurl);
	VRT_hashdata(ctx, TOSTRAND(t->khost));
	VRT_hashdata(ctx, TOSTRAND(t->kurl));
	/* a header's value, or its absence */
	for (u = 0; u < c->nkeyhdr; u++) {
		if (http_GetHdr(ctx->http_req, c->keyhdr[u], &v))
			VRT_hashdata(ctx, TOSTRANDS(2, "+", v));
		else
			VRT_hashdata(ctx, TOSTRAND("-"));
	}
}

static VCL_BOOL
hitmiss(VRT_CTX, const char *why)
{
	VSLb(ctx->vsl, SLT_VCL_Log, "ghost.cache: uncacheable (%s)", why);
	VRT_l_beresp_ttl(ctx, GH_HITMISS_TTL);
	VRT_l_beresp_uncacheable(ctx, 1);
	return (1);
}

static int
cc_has(const struct http *hp, const char *directive)
{
	const char *p;

	return (http_GetHdrField(hp, H_Cache_Control, directive, &p));
}

/* X-Ghost-Tags: the tag header's tags, " a b " */
static void
stamp_tags(VRT_CTX, const struct gh_btask *b)
{
	const char *v, *p;
	char *buf, *o, *s;
	size_t l;

	if (b->taghdr == NULL ||
	    !http_GetHdr(ctx->http_beresp, b->taghdr, &v))
		return;
	l = strlen(v);
	buf = WS_Alloc(ctx->ws, sizeof "X-Ghost-Tags: " + l + 2);
	if (buf == NULL) {
		VSLb(ctx->vsl, SLT_VCL_Error, "ghost: out of workspace for "
		    "X-Ghost-Tags: the object has no tags");
		return;
	}
	memcpy(buf, "X-Ghost-Tags: ", sizeof "X-Ghost-Tags: " - 1);
	s = o = buf + sizeof "X-Ghost-Tags: " - 1;
	*o++ = ' ';
	for (p = v; *p != '\0'; p++) {
		if (*p == ',' || *p == ' ' || *p == '\t') {
			if (o[-1] != ' ')
				*o++ = ' ';
		} else
			*o++ = *p;
	}
	if (o[-1] != ' ')
		*o++ = ' ';
	*o = '\0';
	assert(o < buf + sizeof "X-Ghost-Tags: " + l + 2);
	if (o - s > 1)
		http_SetHeader(ctx->http_beresp, buf);
}

/*
 * .backend_response(): the policy's TTLs and the object headers; 0 when
 * the request has no policy (the builtin VCL decides)
 */
int
gh_cache_response(VRT_CTX, const struct gh_btask *b)
{
	struct http *hp;
	const char *v;
	unsigned status;
	int said;

	hp = ctx->http_beresp;
	/* only ghost stamps these, never the origin */
	http_Unset(hp, H_X_Ghost_Host);
	http_Unset(hp, H_X_Ghost_Path);
	http_Unset(hp, H_X_Ghost_Url);
	http_Unset(hp, H_X_Ghost_Tags);
	if (b == NULL || !b->cache)
		return (0);		/* no policy: the builtin VCL */
	CHECK_OBJ(b, GH_BTASK_MAGIC);
	if (VRT_r_bereq_uncacheable(ctx))
		return (1);		/* pass: nothing to cache */

	/*
	 * A background fetch (an object in grace is being refreshed) that
	 * gets a server error is abandoned, so the stale object keeps being
	 * served for the rest of its grace: the builtin VCL would replace it
	 * with a hit-for-miss object and send every client the error. The
	 * handling is checked by the compiled VCL after the if statement
	 * that called us (false: its return (deliver) is not taken).
	 */
	status = http_GetStatus(hp);
	if (status >= 500 && VRT_r_bereq_is_bgfetch(ctx)) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.cache: abandoned (%u from "
		    "the origin on a background fetch; the object in grace "
		    "stays)", status);
		VRT_handling(ctx, VCL_RET_ABANDON);
		return (0);
	}

	/* never cached, forced or not (as the builtin VCL) */
	if (http_GetHdr(hp, H_Set_Cookie, NULL))
		return (hitmiss(ctx, "Set-Cookie"));
	if (cc_has(hp, "no-store"))
		return (hitmiss(ctx, "Cache-Control: no-store"));
	if (cc_has(hp, "private"))
		return (hitmiss(ctx, "Cache-Control: private"));
	if (http_GetHdrField(hp, H_Vary, "*", &v))
		return (hitmiss(ctx, "Vary: *"));
	if (!b->force && cc_has(hp, "no-cache"))
		return (hitmiss(ctx, "Cache-Control: no-cache"));

	/*
	 * varnishd computed beresp.ttl from the headers (RFC2616_Ttl): the
	 * origin's max-age, s-maxage or Expires, else default_ttl for the
	 * statuses cacheable by default, -1 for the others. The policy's TTL
	 * replaces default_ttl (the origin said nothing), or every TTL of
	 * those statuses when forced; other statuses keep varnishd's.
	 */
	said = cc_has(hp, "s-maxage") || cc_has(hp, "max-age") ||
	    http_GetHdr(hp, H_Expires, NULL);
	switch (status) {
	case 200: case 203: case 204: case 300: case 301: case 304:
	case 404: case 410: case 414:
		if (b->force || !said)
			VRT_l_beresp_ttl(ctx, b->ttl);
		break;
	default:
		break;
	}
	if (VRT_r_beresp_ttl(ctx) <= 0.)
		return (hitmiss(ctx, "no TTL"));
	VRT_l_beresp_grace(ctx, b->grace);
	VRT_l_beresp_keep(ctx, b->keep);

	/* the object headers bans match */
	http_PrintfHeader(hp, "X-Ghost-Host: %.*s", (int)b->hl, b->host);
	http_PrintfHeader(hp, "X-Ghost-Path: %.*s", (int)b->pl, b->url);
	http_PrintfHeader(hp, "X-Ghost-Url: %.*s", (int)b->ul, b->url);
	stamp_tags(ctx, b);
	return (1);
}
