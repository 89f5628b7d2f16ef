/*
 * Route timeouts answer 504: .backend_error() (ghost_backend.c) in
 * vcl_backend_error turns varnishd's 503 "Backend fetch failed" into 504
 * "Gateway Timeout" when the fetch failed because a timeout ran out, as
 * the Gateway API wants for timeouts.request and timeouts.backendRequest.
 *
 * varnishd does not tell VCL why a fetch failed (the reason is only in
 * the FetchError log record), so the time does: a fetch that failed at
 * least the backend's timeout after it started timed out. The timeout is
 * the route's, which ghost puts in the name of the endpoint's backend
 * ("<router>.<address>:<port>~<ms>ms", ghost_pool.c), else the smaller
 * of the connect and first-byte timeouts in force (varnishd's parameters,
 * or bereq.* set by VCL). A refused connection, a backend that closes
 * without answering, no healthy or no resolved backend, or an error VCL
 * returned itself (return (error(...)), bo->err_code) fail before that
 * and keep their status.
 */

#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_varnishd.h"	/* cache_param */

#include "vcl.h"
#include "vrt_obj.h"
#include "vtim.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

#define GH_TMO_SLACK	0.005	/* s: timer granularity */

/* the route's timeout from a ghost backend's name; 0: none */
static double
route_tmo(VCL_BACKEND be)
{
	const char *n, *t;
	char *e;
	double ms;

	if (be == NULL)
		return (0);
	n = VRT_BACKEND_string(be);
	if (n == NULL || (t = strrchr(n, '~')) == NULL)
		return (0);
	ms = strtod(t + 1, &e);
	if (e == t + 1 || strcmp(e, "ms") || !(ms > 0))
		return (0);
	return (ms / 1e3);
}

static double
min_set(double a, double b)
{

	if (!(b > 0) || isinf(b))
		return (a);
	return (a < b ? a : b);
}

/* .backend_error(): 504 for a fetch whose timeout ran out */
void
gh_timeout_error(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct busyobj *bo;
	double tmo, elapsed, start, atmo;

	bo = ctx->bo;
	CHECK_OBJ_NOTNULL(bo, BUSYOBJ_MAGIC);
	if (bo->err_code != 0 || ctx->http_beresp->status != 503)
		return;		/* VCL's own error, or not a failed fetch */
	/* a retry: its own start, and its timeout when the request
	 * timeout cut it (ghost_retry.c) */
	start = bo->t_first;
	atmo = 0;
	(void)gh_retry_attempt(ctx, rt, &start, &atmo);
	tmo = atmo > 0 ? atmo : route_tmo(VRT_r_beresp_backend(ctx));
	if (tmo == 0) {
		tmo = min_set(cache_param->connect_timeout,
		    cache_param->first_byte_timeout);
		tmo = min_set(tmo, bo->connect_timeout);
		tmo = min_set(tmo, bo->first_byte_timeout);
	}
	elapsed = VTIM_real() - start;
	if (!(tmo > 0) || !(elapsed + GH_TMO_SLACK >= tmo))
		return;
	VSLb(ctx->vsl, SLT_VCL_Log, "ghost: backend timeout (%.3fs after "
	    "%.3fs): 504", tmo, elapsed);
	VRT_l_beresp_status(ctx, 504);
	VRT_l_beresp_reason(ctx, NULL, TOSTRAND("Gateway Timeout"));
}
