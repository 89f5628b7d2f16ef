/*
 * Route retries (ghost.json route.retry, Gateway API HTTPRouteRetry),
 * with varnishd's own retry: .retry() in vcl_backend_response (the
 * backend answered a status the policy lists) and vcl_backend_error (the
 * fetch failed: refused or reset connection, timeout) tells VCL to
 * return (retry); .backend_fetch() then picks a backend again by weight.
 *
 * Client side: .recv() hands the backend side the route (the state's
 * generation and the route's place in it, in the handoff of
 * ghost_task.c) only for requests that may be retried: no body (varnishd
 * does not keep a passed request's body to send it again) and an
 * idempotent method (RFC 9110 9.2.2: GET, HEAD, OPTIONS, TRACE, PUT,
 * DELETE), and not for WebSocket upgrades, which are piped.
 *
 * Backend side: the first .retry() that may retry takes a reference to
 * the router's current state into the backend task (struct gh_btask);
 * when it is not the generation the client routed with (a reload in
 * between) nothing is retried. The reference pins the route and the
 * endpoints picked for the retries until the task ends.
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

#include <inttypes.h>
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

/* .recv(): t->retry when the route's policy may retry the request */
void
gh_retry_recv(VRT_CTX, struct gh_task *t, const struct gh_route *r)
{

	CHECK_OBJ_NOTNULL(t, GH_TASK_MAGIC);
	CHECK_OBJ_NOTNULL(r, GH_ROUTE_MAGIC);
	t->retry = 0;
	if (r->retry == NULL)
		return;
	if (!retryable(ctx->http_req)) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.retry: not retried (%s with "
		    "a body, a method that is not idempotent or an upgrade)",
		    ctx->http_req->hd[HTTP_HDR_METHOD].b);
		return;
	}
	t->retry = 1;
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

/* .backend_fetch() of a retry: pick again, within the request timeout */
void
gh_retry_fetch(VRT_CTX, struct gh_btask *bt)
{
	const struct gh_be *be;
	double now, left, tmo;

	CHECK_OBJ_NOTNULL(bt, GH_BTASK_MAGIC);
	CHECK_OBJ_NOTNULL(ctx->bo, BUSYOBJ_MAGIC);
	assert(ctx->bo->retries > 0);
	if (!bt->retry)
		return;
	now = VTIM_real();
	bt->t_attempt = now;
	bt->atmo = 0;
	if (bt->r == NULL)
		return;
	be = repick(ctx, bt->r);
	if (be != NULL)
		VRT_l_bereq_backend(ctx, be->be);
	if (bt->r->req_tmo > 0) {
		left = bt->r->req_tmo - (now - ctx->bo->t_first);
		tmo = bt->r->tmo;
		if (left > 0 && (tmo == 0 || left < tmo)) {
			bt->atmo = left;
			VRT_l_bereq_connect_timeout(ctx, left);
			VRT_l_bereq_first_byte_timeout(ctx, left);
		}
	}
}

/* the route of bt, looked up once in the current state; NULL: none */
static const struct gh_route *
btask_route(VRT_CTX, struct gh_btask *bt)
{
	struct gh_state *st;
	const struct gh_vhost *vh;

	if (bt->resolved)
		return (bt->r);
	bt->resolved = 1;
	st = gh_state_ref(bt->rt);
	if (st == NULL)
		return (NULL);
	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	if (st->generation != bt->generation || bt->vhost >= st->nvhost) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.retry: not retried: "
		    "ghost.json was reloaded (generation %ju, the request "
		    "was routed with %ju)", (uintmax_t)st->generation,
		    (uintmax_t)bt->generation);
		gh_state_unref(bt->rt, &st);
		return (NULL);
	}
	vh = &st->vhost[bt->vhost];
	CHECK_OBJ_NOTNULL(vh, GH_VHOST_MAGIC);
	if (bt->route >= vh->nroute || vh->route[bt->route].retry == NULL) {
		gh_state_unref(bt->rt, &st);
		return (NULL);
	}
	bt->st = st;
	bt->r = &vh->route[bt->route];
	CHECK_OBJ_NOTNULL(bt->r, GH_ROUTE_MAGIC);
	return (bt->r);
}

/* .retry(): 1 when the route's policy retries, after the backoff */
int
gh_retry(VRT_CTX, struct gh_btask *bt)
{
	const struct gh_route *r;
	const struct gh_retry *rp;
	struct busyobj *bo;
	unsigned status, retries, n, cap;
	double elapsed, deadline;

	bo = ctx->bo;
	CHECK_OBJ_NOTNULL(bo, BUSYOBJ_MAGIC);
	CHECK_OBJ_NOTNULL(bt, GH_BTASK_MAGIC);
	if (!bt->retry)
		return (0);
	status = http_GetStatus(ctx->http_beresp);
	if (ctx->method == VCL_MET_BACKEND_ERROR) {
		/* a failed fetch; VCL's own return (error(...)) is not */
		if (bo->err_code != 0)
			return (0);
	}
	r = btask_route(ctx, bt);
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
	AN(bt->st);
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
			GH_COUNT(&bt->st->vhost[bt->vhost], retries_refused);
			return (0);
		}
	}
	VSLb(ctx->vsl, SLT_VCL_Log, "ghost.retry: %u: retry %u of %u after "
	    "%.3fs", status, retries + 1, rp->attempts, rp->backoff);
	GH_COUNT(&bt->st->vhost[bt->vhost], retries);
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
gh_retry_attempt(VRT_CTX, const struct gh_btask *bt, double *start,
    double *tmo)
{

	CHECK_OBJ_NOTNULL(bt, GH_BTASK_MAGIC);
	if (!bt->retry || ctx->bo == NULL || ctx->bo->retries == 0)
		return (0);
	*start = bt->t_attempt;
	*tmo = bt->atmo;
	return (1);
}
