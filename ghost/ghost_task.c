/*
 * The per-task state the router's methods share, the handoff from the
 * client task to the backend task, and the weighted pick of a route's
 * group and endpoint (the request's in .recv(), a retry's in
 * .backend_fetch()).
 *
 * The handoff. The client and the backend task have separate PRIV_TASKs,
 * and a background fetch outlives the client task, so what .recv()
 * decided for the backend side travels in one request header, which
 * varnishd copies into the backend request: only for a route that has a
 * timeout, a retry policy or a cache policy, and never on a request that
 * is piped. .recv() first removes every X-Ghost-* request header a client
 * sent, so no client can forge it; .backend_fetch() takes it off the
 * backend request into the backend task (struct gh_btask), so the origin
 * never sees it (main.vcl's vcl_pipe removes it from a request user VCL
 * pipes).
 *
 * X-Ghost-Handoff: "FLAGS TMO[ GEN VHOST ROUTE][ TTL GRACE KEEP FORCE TL
 * HL PL BLOB]", numbers in decimal separated by one space:
 *   FLAGS      GH_HO_RETRY | GH_HO_CACHE: which parts follow
 *   TMO        the route's backend timeout in milliseconds, 0: none
 *   GEN VHOST ROUTE  (retry) the state's generation and the route's
 *              place in it: a retry uses the route only in that state
 *   TTL GRACE KEEP   (cache) the policy's times, in milliseconds
 *   FORCE      1: the TTL replaces the origin's
 *   TL HL PL   the lengths of the tag header name (0: no tags), the host
 *              and the path
 *   BLOB       the tag header name, the host and the URL (the path, then
 *              "?" and the key's query when it has one), one after the
 *              other: lengths rather than separators, so any byte of a
 *              host or a path is safe
 */

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cache/cache.h"

#include "vrnd.h"
#include "vtim.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

/*--------------------------------------------------------------------
 * the client task: what .recv() decided
 */

static void v_matchproto_(vmod_priv_fini_f)
task_fini(VRT_CTX, void *p)
{
	struct gh_task *t;

	(void)ctx;
	CAST_OBJ_NOTNULL(t, p, GH_TASK_MAGIC);
	if (t->st != NULL)
		gh_state_unref(t->rt, &t->st);
}

static const struct vmod_priv_methods task_methods[1] = {{
	.magic = VMOD_PRIV_METHODS_MAGIC,
	.type = "ghost_task",
	.fini = task_fini
}};

struct gh_task *
gh_task_get(VRT_CTX, struct VPFX(ghost_router) *rt, int create)
{
	struct vmod_priv *p;
	struct gh_task *t;

	if (create)
		p = VRT_priv_task(ctx, rt);
	else
		p = VRT_priv_task_get(ctx, rt);
	if (p == NULL) {
		if (create)
			VRT_fail(ctx, "ghost: out of workspace");
		return (NULL);
	}
	if (p->priv != NULL) {
		CAST_OBJ_NOTNULL(t, p->priv, GH_TASK_MAGIC);
		return (t);
	}
	if (!create)
		return (NULL);
	t = WS_Alloc(ctx->ws, sizeof *t);
	if (t == NULL) {
		VRT_fail(ctx, "ghost: out of workspace");
		return (NULL);
	}
	INIT_OBJ(t, GH_TASK_MAGIC);
	t->rt = rt;
	p->priv = t;
	p->methods = task_methods;
	return (t);
}

/*--------------------------------------------------------------------
 * the handoff, client side
 */

#define GH_HO_RETRY	1
#define GH_HO_CACHE	2

#define GH_PFX		"X-Ghost-"

/* every X-Ghost-* header of hp: only ghost sets them */
void
gh_handoff_strip(struct http *hp)
{
	const char *b, *c;
	char h[256];
	unsigned u;
	size_t l;

	CHECK_OBJ_NOTNULL(hp, HTTP_MAGIC);
	for (u = HTTP_HDR_FIRST; u < hp->nhd; ) {
		b = hp->hd[u].b;
		if (b == NULL || strncasecmp(b, GH_PFX, sizeof GH_PFX - 1)) {
			u++;
			continue;
		}
		/* hdr_t: the length of "name:", then "name:" */
		c = strchr(b, ':');
		l = c != NULL ? (size_t)(c - b) + 1 : 0;
		if (l == 0 || l >= sizeof h - 1) {
			u++;		/* longer than any of ghost's */
			continue;
		}
		h[0] = (char)l;
		memcpy(h + 1, b, l);
		h[l + 1] = '\0';
		http_Unset(hp, h);
		if (u < hp->nhd && hp->hd[u].b == b)
			u++;
	}
}

/*
 * .recv(), for a routed request, after its filters: the handoff for the
 * backend task, if any. -1: out of workspace (VRT_fail done).
 */
int
gh_handoff_send(VRT_CTX, const struct gh_task *t)
{
	const struct gh_route *r;
	const struct gh_cache *c;
	char *buf, *o;
	size_t tl, need;
	long long tmo;
	unsigned flags;
	int n;

	CHECK_OBJ_NOTNULL(t, GH_TASK_MAGIC);
	r = t->route;
	CHECK_OBJ_NOTNULL(r, GH_ROUTE_MAGIC);
	CHECK_OBJ_NOTNULL(t->st, GH_STATE_MAGIC);
	CHECK_OBJ_NOTNULL(t->vh, GH_VHOST_MAGIC);
	c = t->cache;
	flags = (t->retry ? GH_HO_RETRY : 0) | (c != NULL ? GH_HO_CACHE : 0);
	/* r->tmo is whole milliseconds (ghost.json's) divided by 1000 */
	tmo = r->tmo > 0 ? (long long)(r->tmo * 1e3 + .5) : 0;
	if (t->pipe || (flags == 0 && tmo == 0))
		return (0);
	tl = c != NULL && c->taghdr != NULL ? strlen(c->taghdr) : 0;
	need = sizeof "X-Ghost-Handoff: " + 12 * 21 + tl + t->khl + t->kul;
	buf = WS_Alloc(ctx->ws, need);
	if (buf == NULL) {
		VRT_fail(ctx, "ghost: out of workspace");
		return (-1);
	}
	n = snprintf(buf, need, "X-Ghost-Handoff: %u %lld", flags, tmo);
	assert(n > 0 && (size_t)n < need);
	o = buf + n;
	if (t->retry) {
		assert(t->vh >= t->st->vhost &&
		    t->vh < t->st->vhost + t->st->nvhost);
		assert(r >= t->vh->route && r < t->vh->route + t->vh->nroute);
		n = snprintf(o, need - (o - buf), " %ju %u %u",
		    (uintmax_t)t->st->generation,
		    (unsigned)(t->vh - t->st->vhost),
		    (unsigned)(r - t->vh->route));
		assert(n > 0 && (size_t)n < need - (o - buf));
		o += n;
	}
	if (c != NULL) {
		CHECK_OBJ(c, GH_CACHE_MAGIC);
		AN(t->khost);
		AN(t->kurl);
		n = snprintf(o, need - (o - buf), " %lld %lld %lld %d %zu %zu "
		    "%zu ", c->ttl_ms, c->grace_ms, c->keep_ms, c->force_ttl,
		    tl, t->khl, t->kpl);
		assert(n > 0 && (size_t)n < need - (o - buf));
		o += n;
		memcpy(o, c->taghdr != NULL ? c->taghdr : "", tl);
		o += tl;
		memcpy(o, t->khost, t->khl);
		o += t->khl;
		memcpy(o, t->kurl, t->kul);
		o += t->kul;
	}
	*o = '\0';
	assert(o < buf + need);
	http_Unset(ctx->http_req, GH_H_HANDOFF);
	http_SetHeader(ctx->http_req, buf);
	return (0);
}

/*--------------------------------------------------------------------
 * the handoff, backend side
 */

static void v_matchproto_(vmod_priv_fini_f)
btask_fini(VRT_CTX, void *p)
{
	struct gh_btask *bt;

	(void)ctx;
	CAST_OBJ_NOTNULL(bt, p, GH_BTASK_MAGIC);
	if (bt->st != NULL)
		gh_state_unref(bt->rt, &bt->st);
}

static const struct vmod_priv_methods btask_methods[1] = {{
	.magic = VMOD_PRIV_METHODS_MAGIC,
	.type = "ghost_btask",
	.fini = btask_fini
}};

/* the backend task's handoff, NULL: none */
struct gh_btask *
gh_btask_get(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct vmod_priv *p;
	struct gh_btask *bt;

	p = VRT_priv_task_get(ctx, &rt->bkey);
	if (p == NULL || p->priv == NULL)
		return (NULL);
	CAST_OBJ_NOTNULL(bt, p->priv, GH_BTASK_MAGIC);
	return (bt);
}

/* "N" at *pp, then a space or the end: N into *out, *pp past the space */
static int
take_num(const char **pp, long long *out)
{
	char *e;

	errno = 0;
	*out = strtoll(*pp, &e, 10);
	if (e == *pp || (*e != ' ' && *e != '\0') || *out < 0 || errno != 0)
		return (-1);
	*pp = *e == ' ' ? e + 1 : e;
	return (0);
}

/*
 * .backend_fetch() of the first attempt: X-Ghost-Handoff off the backend
 * request into the backend task. NULL: none, or malformed (logged).
 */
struct gh_btask *
gh_handoff_take(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct vmod_priv *p;
	struct gh_btask *bt;
	const char *v, *s;
	long long flags, tmo, gen, vi, ri, ttl, grace, keep, force, tl, hl, pl;
	size_t l;
	char *h;

	CHECK_OBJ_NOTNULL(ctx->bo, BUSYOBJ_MAGIC);
	if (!http_GetHdr(ctx->http_bereq, GH_H_HANDOFF, &v))
		return (NULL);
	/* a copy: a background fetch outlives the client's workspace */
	v = WS_Copy(ctx->ws, v, -1);
	http_Unset(ctx->http_bereq, GH_H_HANDOFF);
	if (v == NULL) {
		VRT_fail(ctx, "ghost: out of workspace");
		return (NULL);
	}
	s = v;
	gen = vi = ri = ttl = grace = keep = force = tl = hl = pl = 0;
	l = 0;
	if (take_num(&s, &flags) || take_num(&s, &tmo) ||
	    (flags & ~(long long)(GH_HO_RETRY | GH_HO_CACHE)) != 0 ||
	    ((flags & GH_HO_RETRY) && (take_num(&s, &gen) ||
	    take_num(&s, &vi) || take_num(&s, &ri) || vi >= UINT_MAX ||
	    ri >= UINT_MAX)) ||
	    ((flags & GH_HO_CACHE) && (take_num(&s, &ttl) ||
	    take_num(&s, &grace) || take_num(&s, &keep) ||
	    take_num(&s, &force) || take_num(&s, &tl) || take_num(&s, &hl) ||
	    take_num(&s, &pl) || force > 1 || tl > 254 ||
	    (l = strlen(s)) < (size_t)tl || l - tl < (size_t)hl ||
	    l - tl - hl < (size_t)pl)) ||
	    (!(flags & GH_HO_CACHE) && *s != '\0')) {
		VSLb(ctx->vsl, SLT_VCL_Error, "ghost: malformed X-Ghost-Handoff "
		    "\"%s\": ignored", v);
		return (NULL);
	}
	p = VRT_priv_task(ctx, &rt->bkey);
	bt = WS_Alloc(ctx->ws, sizeof *bt);
	h = tl > 0 ? WS_Alloc(ctx->ws, tl + 3) : NULL;
	if (p == NULL || bt == NULL || (tl > 0 && h == NULL)) {
		VRT_fail(ctx, "ghost: out of workspace");
		return (NULL);
	}
	INIT_OBJ(bt, GH_BTASK_MAGIC);
	bt->rt = rt;
	bt->tmo = tmo / 1e3;
	bt->t_attempt = VTIM_real();
	if (flags & GH_HO_RETRY) {
		bt->retry = 1;
		bt->generation = (uint64_t)gen;
		bt->vhost = (unsigned)vi;
		bt->route = (unsigned)ri;
	}
	if (flags & GH_HO_CACHE) {
		bt->cache = 1;
		bt->ttl = ttl / 1e3;
		bt->grace = grace / 1e3;
		bt->keep = keep / 1e3;
		bt->force = (int)force;
		if (h != NULL) {
			/* hdr_t: the length of "name:", name, ':' */
			h[0] = (char)(tl + 1);
			memcpy(h + 1, s, tl);
			h[tl + 1] = ':';
			h[tl + 2] = '\0';
			bt->taghdr = h;
		}
		bt->host = s + tl;
		bt->hl = hl;
		bt->url = s + tl + hl;
		bt->ul = l - tl - hl;
		bt->pl = pl;
	}
	p->priv = bt;
	p->methods = btask_methods;
	return (bt);
}

/*--------------------------------------------------------------------
 * picks
 */

/* A group of r by weight: uniform over r->wtotal, which must not be 0. */
const struct gh_group *
gh_route_pick(const struct gh_route *r)
{
	uint64_t w;
	unsigned u;

	CHECK_OBJ_NOTNULL(r, GH_ROUTE_MAGIC);
	AN(r->wtotal);
	w = (uint64_t)VRND_RandomTestable() % r->wtotal;
	for (u = 0; u < r->ngroup; u++) {
		if (w < r->group[u].weight)
			break;
		w -= r->group[u].weight;
	}
	assert(u < r->ngroup);
	return (&r->group[u]);
}

/* An endpoint of g, uniformly; g must have one. */
unsigned
gh_group_pick(const struct gh_group *g)
{

	AN(g);
	AN(g->nep);
	return (g->nep > 1 ? VRND_RandomTestable() % g->nep : 0);
}
