/*
 * The router's backend-side VCL methods, called in the backend task
 * (vcl_backend_fetch ... vcl_backend_error): .backend_fetch() takes the
 * client task's handoff (ghost_task.c), the others apply the cache
 * policy (ghost_cache.c), the retry policy (ghost_retry.c) and the
 * timeouts (ghost_timeout.c) it carries.
 */

#include "config.h"

#include <string.h>

#include "cache/cache.h"

#include "vcl.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

VCL_VOID v_matchproto_(td_vmod_ghost_router_backend_fetch)
vmod_router_backend_fetch(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_btask *bt;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	if (ctx->method != VCL_MET_BACKEND_FETCH) {
		VRT_fail(ctx, "ghost: %s.backend_fetch() is only allowed in "
		    "vcl_backend_fetch", rt->vcl_name);
		return;
	}
	CHECK_OBJ_NOTNULL(ctx->bo, BUSYOBJ_MAGIC);
	bt = gh_btask_get(ctx, rt);
	if (bt == NULL)
		(void)gh_handoff_take(ctx, rt);
	else if (ctx->bo->retries > 0)
		gh_retry_fetch(ctx, bt);	/* picks the backend again */
}

VCL_BOOL v_matchproto_(td_vmod_ghost_router_backend_response)
vmod_router_backend_response(VRT_CTX, struct VPFX(ghost_router) *rt)
{

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	if (ctx->method != VCL_MET_BACKEND_RESPONSE) {
		VRT_fail(ctx, "ghost: %s.backend_response() is only allowed "
		    "in vcl_backend_response", rt->vcl_name);
		return (0);
	}
	return (gh_cache_response(ctx, gh_btask_get(ctx, rt)));
}

VCL_BOOL v_matchproto_(td_vmod_ghost_router_retry)
vmod_router_retry(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_btask *bt;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	if (ctx->method != VCL_MET_BACKEND_RESPONSE &&
	    ctx->method != VCL_MET_BACKEND_ERROR) {
		VRT_fail(ctx, "ghost: %s.retry() is only allowed in "
		    "vcl_backend_response and vcl_backend_error",
		    rt->vcl_name);
		return (0);
	}
	bt = gh_btask_get(ctx, rt);
	return (bt != NULL && gh_retry(ctx, bt));
}

VCL_VOID v_matchproto_(td_vmod_ghost_router_backend_error)
vmod_router_backend_error(VRT_CTX, struct VPFX(ghost_router) *rt)
{

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	if (ctx->method != VCL_MET_BACKEND_ERROR) {
		VRT_fail(ctx, "ghost: %s.backend_error() is only allowed "
		    "in vcl_backend_error", rt->vcl_name);
		return;
	}
	gh_timeout_error(ctx, gh_btask_get(ctx, rt));
}
