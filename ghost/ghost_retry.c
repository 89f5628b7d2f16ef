/*
 * Route retries (ghost.json route.retry, Gateway API HTTPRouteRetry),
 * with varnishd's own retry: .retry() in vcl_backend_response (the
 * backend answered a status the policy lists) and vcl_backend_error (the
 * fetch failed: refused or reset connection, timeout) tells VCL to
 * return (retry); .backend_fetch() then picks a backend again by weight.
 *
 * Client side: .recv() hands the backend side the route in the request
 * header X-Ghost-Retry: "GENERATION VHOST ROUTE" (the state's generation
 * and the route's place in it; PRIV_TASK does not cross from the client
 * task to the backend task), only for requests that may be retried: no
 * body (varnishd does not keep a passed request's body to send it again)
 * and an idempotent method (RFC 9110 9.2.2: GET, HEAD, OPTIONS, TRACE,
 * PUT, DELETE), and not for WebSocket upgrades, which are piped.
 *
 * Backend side: .backend_fetch() takes the header off the bereq into the
 * backend task (keyed by &rt->rkey). The first .retry() that may retry
 * takes a reference to the router's current state; when it is not the
 * generation the client routed with (a reload in between) nothing is
 * retried. The reference pins the route and the endpoints picked for
 * the retries until the task ends.
 *
 * Bounds: bereq.retries below the policy's attempts and varnishd's
 * max_retries (past that varnishd itself would answer 503), and the whole
 * request (first attempt, backoffs and retries) within timeouts.request,
 * or GH_RETRY_DEADLINE without one: no retry is started that could not
 * wait its backoff before then, and with timeouts.request a retry's
 * connect and first-byte timeouts are cut to what is left.
 *
 * The backoff is a sleep of the backend fetch thread before .retry()
 * returns true: a fixed wait of backoffMs (at most
 * GH_RETRY_MAX_BACKOFF_MS) before each retry. Those threads are
 * varnishd's, shared by every route: at most a tenth of them
 * (thread_pool_max x thread_pools) sleep in one route's backoff at once;
 * a fetch beyond that is not retried (retries_refused), so a burst against
 * one failing route fails fast instead of taking the pool from the others.
 */

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_varnishd.h"	/* cache_param */

#include "vcl.h"
#include "vrt_obj.h"
#include "vtim.h"

#include "VSC_ghost.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

#define GH_RETRY_SLACK	0.005	/* s: timer granularity */

/* per backend task: the route of X-Ghost-Retry and the current attempt */
struct gh_rtask {
	unsigned		magic;
#define GH_RTASK_MAGIC		0x67687274
	struct VPFX(ghost_router) *rt;
	uint64_t		generation;
	unsigned		vhost, route;
	int			resolved;	/* st and r looked up */
	struct gh_state		*st;		/* NULL: no retries */
	const struct gh_route	*r;
	double			t_attempt;	/* the attempt's start */
	double			tmo;		/* its cut timeout, 0: none */
};

static void v_matchproto_(vmod_priv_fini_f)
rtask_fini(VRT_CTX, void *p)
{
	struct gh_rtask *rk;

	(void)ctx;
	CAST_OBJ_NOTNULL(rk, p, GH_RTASK_MAGIC);
	if (rk->st != NULL)
		gh_state_unref(rk->rt, &rk->st);
}

static const struct vmod_priv_methods rtask_methods[1] = {{
	.magic = VMOD_PRIV_METHODS_MAGIC,
	.type = "ghost_retry",
	.fini = rtask_fini
}};

static struct gh_rtask *
rtask_get(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct vmod_priv *p;
	struct gh_rtask *rk;

	p = VRT_priv_task_get(ctx, &rt->rkey);
	if (p == NULL || p->priv == NULL)
		return (NULL);
	CAST_OBJ_NOTNULL(rk, p->priv, GH_RTASK_MAGIC);
	return (rk);
}

/*--------------------------------------------------------------------
 * client side
 */

static int
retryable(const struct http *hp)
{
	static const char * const idem[] = {
		"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE", NULL};
	const char * const *m;
	const char *method, *v;

	method = hp->hd[HTTP_HDR_METHOD].b;
	if (method == NULL)
		return (0);
	for (m = idem; *m != NULL; m++)
		if (!strcmp(method, *m))
			break;
	if (*m == NULL)
		return (0);
	if (http_GetHdr(hp, H_Transfer_Encoding, NULL))
		return (0);
	if (http_GetHdr(hp, H_Content_Length, &v) && strtoull(v, NULL, 10) != 0)
		return (0);
	return (!http_GetHdr(hp, H_Upgrade, NULL));
}

void
gh_retry_recv(VRT_CTX, const struct gh_state *st, const struct gh_vhost *vh,
    const struct gh_route *r)
{

	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	CHECK_OBJ_NOTNULL(vh, GH_VHOST_MAGIC);
	CHECK_OBJ_NOTNULL(r, GH_ROUTE_MAGIC);
	if (r->retry == NULL)
		return;
	if (!retryable(ctx->http_req)) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.retry: not retried (%s with "
		    "a body, a method that is not idempotent or an upgrade)",
		    ctx->http_req->hd[HTTP_HDR_METHOD].b);
		return;
	}
	assert(vh >= st->vhost && vh < st->vhost + st->nvhost);
	assert(r >= vh->route && r < vh->route + vh->nroute);
	http_PrintfHeader(ctx->http_req, "X-Ghost-Retry: %ju %u %u",
	    (uintmax_t)st->generation, (unsigned)(vh - st->vhost),
	    (unsigned)(r - vh->route));
}

/*--------------------------------------------------------------------
 * backend side
 */

/* the route's weighted group and a uniform endpoint, NULL: none */
static const struct gh_be *
repick(VRT_CTX, const struct gh_route *r)
{
	const struct gh_group *g;
	const struct gh_be *be;
	unsigned u;

	if (r->wtotal == 0)
		return (NULL);
	g = gh_route_pick(r);
	if (g->nep == 0 || g->set == NULL) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.retry: %s has no endpoint: "
		    "the retry keeps the previous backend", g->name);
		return (NULL);
	}
	CHECK_OBJ_NOTNULL(g->set, GH_BSET_MAGIC);
	u = gh_group_pick(g);
	be = g->set->be[u];
	CHECK_OBJ_NOTNULL(be, GH_BE_MAGIC);
	gh_log_route(ctx, NULL, g, &g->ep[u]);
	return (be);
}

void
gh_retry_fetch(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct vmod_priv *p;
	struct gh_rtask *rk;
	const struct gh_be *be;
	const char *v;
	char *e;
	uintmax_t gen;
	unsigned long vi, ri;
	double now, left, tmo;

	CHECK_OBJ_NOTNULL(ctx->bo, BUSYOBJ_MAGIC);
	now = VTIM_real();
	rk = rtask_get(ctx, rt);
	if (rk != NULL && ctx->bo->retries > 0) {
		/* a retry: pick again, within the request timeout */
		rk->t_attempt = now;
		rk->tmo = 0;
		if (rk->r == NULL)
			return;
		be = repick(ctx, rk->r);
		if (be != NULL)
			VRT_l_bereq_backend(ctx, be->be);
		if (rk->r->req_tmo > 0) {
			left = rk->r->req_tmo - (now - ctx->bo->t_first);
			tmo = rk->r->tmo;
			if (left > 0 && (tmo == 0 || left < tmo)) {
				rk->tmo = left;
				VRT_l_bereq_connect_timeout(ctx, left);
				VRT_l_bereq_first_byte_timeout(ctx, left);
			}
		}
		return;
	}
	if (!http_GetHdr(ctx->http_bereq, GH_H_RETRY, &v))
		return;
	errno = 0;
	gen = strtoumax(v, &e, 10);
	vi = *e == ' ' ? strtoul(e + 1, &e, 10) : ~0UL;
	ri = *e == ' ' ? strtoul(e + 1, &e, 10) : ~0UL;
	if (*e != '\0' || errno != 0 || vi >= UINT_MAX || ri >= UINT_MAX) {
		VSLb(ctx->vsl, SLT_VCL_Error, "ghost: malformed X-Ghost-Retry "
		    "\"%s\": no retries", v);
		http_Unset(ctx->http_bereq, GH_H_RETRY);
		return;
	}
	http_Unset(ctx->http_bereq, GH_H_RETRY);
	p = VRT_priv_task(ctx, &rt->rkey);
	rk = WS_Alloc(ctx->ws, sizeof *rk);
	if (p == NULL || rk == NULL) {
		VRT_fail(ctx, "ghost: out of workspace");
		return;
	}
	INIT_OBJ(rk, GH_RTASK_MAGIC);
	rk->rt = rt;
	rk->generation = gen;
	rk->vhost = (unsigned)vi;
	rk->route = (unsigned)ri;
	rk->t_attempt = now;
	p->priv = rk;
	p->methods = rtask_methods;
}

/* the route of rk, looked up once in the current state; NULL: none */
static const struct gh_route *
rtask_route(VRT_CTX, struct gh_rtask *rk)
{
	struct gh_state *st;
	const struct gh_vhost *vh;

	if (rk->resolved)
		return (rk->r);
	rk->resolved = 1;
	st = gh_state_ref(rk->rt);
	if (st == NULL)
		return (NULL);
	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	if (st->generation != rk->generation || rk->vhost >= st->nvhost) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.retry: not retried: "
		    "ghost.json was reloaded (generation %ju, the request "
		    "was routed with %ju)", (uintmax_t)st->generation,
		    (uintmax_t)rk->generation);
		gh_state_unref(rk->rt, &st);
		return (NULL);
	}
	vh = &st->vhost[rk->vhost];
	CHECK_OBJ_NOTNULL(vh, GH_VHOST_MAGIC);
	if (rk->route >= vh->nroute || vh->route[rk->route].retry == NULL) {
		gh_state_unref(rk->rt, &st);
		return (NULL);
	}
	rk->st = st;
	rk->r = &vh->route[rk->route];
	CHECK_OBJ_NOTNULL(rk->r, GH_ROUTE_MAGIC);
	return (rk->r);
}

/* .retry(): 1 when the route's policy retries, after the backoff */
int
gh_retry(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_rtask *rk;
	const struct gh_route *r;
	const struct gh_retry *rp;
	struct busyobj *bo;
	unsigned status, retries, n, cap;
	double elapsed, deadline;

	bo = ctx->bo;
	CHECK_OBJ_NOTNULL(bo, BUSYOBJ_MAGIC);
	rk = rtask_get(ctx, rt);
	if (rk == NULL)
		return (0);
	status = http_GetStatus(ctx->http_beresp);
	if (ctx->method == VCL_MET_BACKEND_ERROR) {
		/* a failed fetch; VCL's own return (error(...)) is not */
		if (bo->err_code != 0)
			return (0);
	}
	r = rtask_route(ctx, rk);
	if (r == NULL)
		return (0);
	rp = r->retry;
	CHECK_OBJ_NOTNULL(rp, GH_RETRY_MAGIC);
	if (ctx->method == VCL_MET_BACKEND_RESPONSE &&
	    !gh_retry_code(rp, status))
		return (0);
	retries = bo->retries;
	if (retries >= rp->attempts || retries >= cache_param->max_retries) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.retry: %u after %u "
		    "retries: not retried (attempts %u, max_retries %u)",
		    status, retries, rp->attempts, cache_param->max_retries);
		return (0);
	}
	elapsed = VTIM_real() - bo->t_first;
	deadline = r->req_tmo > 0 ? r->req_tmo : GH_RETRY_DEADLINE;
	if (elapsed + rp->backoff + GH_RETRY_SLACK >= deadline) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.retry: %u after %.3fs: not "
		    "retried, the %s (%.3fs) leaves no time for the backoff "
		    "(%.3fs) and another attempt", status, elapsed,
		    r->req_tmo > 0 ? "request timeout" : "retry deadline",
		    deadline, rp->backoff);
		return (0);
	}
	AN(rk->st);
	if (rp->backoff > 0) {
		AN(rp->nbackoff);
		cap = cache_param->wthread_max * cache_param->wthread_pools / 10;
		if (cap < 1)
			cap = 1;
		n = __atomic_add_fetch(rp->nbackoff, 1, __ATOMIC_RELAXED);
		if (n > cap) {
			(void)__atomic_sub_fetch(rp->nbackoff, 1,
			    __ATOMIC_RELAXED);
			VSLb(ctx->vsl, SLT_VCL_Log, "ghost.retry: %u: not "
			    "retried, %u fetches of the route are in their "
			    "backoff (at most %u, a tenth of varnishd's worker "
			    "threads)", status, n - 1, cap);
			GH_COUNT(&rk->st->vhost[rk->vhost], retries_refused);
			return (0);
		}
	}
	VSLb(ctx->vsl, SLT_VCL_Log, "ghost.retry: %u: retry %u of %u after "
	    "%.3fs", status, retries + 1, rp->attempts, rp->backoff);
	GH_COUNT(&rk->st->vhost[rk->vhost], retries);
	if (rp->backoff > 0) {
		VTIM_sleep(rp->backoff);
		(void)__atomic_sub_fetch(rp->nbackoff, 1, __ATOMIC_RELAXED);
	}
	return (1);
}

/*
 * The current attempt's start and its cut timeout (0: the route's), for
 * .backend_error(); 0: not retried, the fetch's own start applies.
 */
int
gh_retry_attempt(VRT_CTX, struct VPFX(ghost_router) *rt, double *start,
    double *tmo)
{
	struct gh_rtask *rk;

	rk = rtask_get(ctx, rt);
	if (rk == NULL || ctx->bo == NULL || ctx->bo->retries == 0)
		return (0);
	*start = rk->t_attempt;
	*tmo = rk->tmo;
	return (1);
}
