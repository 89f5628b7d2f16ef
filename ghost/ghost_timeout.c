/*
 * Route timeouts answer 504: .backend_error() (ghost_backend.c) in
 * vcl_backend_error turns varnishd's 503 "Backend fetch failed" into 504
 * "Gateway Timeout" when the fetch failed because a timeout ran out, as
 * the Gateway API wants for timeouts.request and timeouts.backendRequest.
 *
 * varnishd does not tell VCL why a fetch failed (the reason is only in
 * the FetchError log record), so the time does: a fetch that failed at
 * least the backend's timeout after it started timed out. The timeout is
 * the route's, which the client task hands over (ghost_task.c), else the
 * smaller of the connect and first-byte timeouts in force (varnishd's
 * parameters, or bereq.* set by VCL). A refused connection, a backend
 * that closes without answering, no healthy or no resolved backend, or
 * an error VCL returned itself (return (error(...)), bo->err_code) fail
 * before that and keep their status.
 */

#include "config.h"

#include <math.h>
#include <string.h>

#include "cache/cache_varnishd.h"	/* cache_param */

#include "vcl.h"
#include "vrt_obj.h"
#include "vtim.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

#define GH_TMO_SLACK	0.005	/* s: timer granularity */

static double
min_set(double a, double b)
{

	if (!(b > 0) || isinf(b))
		return (a);
	return (a < b ? a : b);
}

/* .backend_error(): 504 for a fetch whose timeout ran out */
void
gh_timeout_error(VRT_CTX, const struct gh_btask *bt)
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
	if (bt != NULL)
		(void)gh_retry_attempt(ctx, bt, &start, &atmo);
	tmo = atmo > 0 ? atmo : bt != NULL ? bt->tmo : 0;
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
