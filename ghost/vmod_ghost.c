/*
 * ghost: Gateway API HTTP routing for Varnish from one JSON file.
 *
 * This file: the router object (__init, __fini), the $Event and the
 * per-VCL list of routers. The other files are listed in ghost.h.
 */

#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "cache/cache.h"

#include "vcl.h"

#include "VSC_ghost.h"
#include "VSC_ghostrouter.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

/*--------------------------------------------------------------------
 * the routers of a VCL, for the $Event
 */

static void v_matchproto_(vmod_priv_fini_f)
gh_vcl_fini(VRT_CTX, void *p)
{
	struct gh_vcl *gv;

	(void)ctx;
	CAST_OBJ_NOTNULL(gv, p, GH_VCL_MAGIC);
	AZ(VTAILQ_FIRST(&gv->routers));
	FREE_OBJ(gv);
}

static const struct vmod_priv_methods gh_vcl_methods[1] = {{
	.magic = VMOD_PRIV_METHODS_MAGIC,
	.type = "ghost_vcl",
	.fini = gh_vcl_fini
}};

/*--------------------------------------------------------------------
 * object
 */

VCL_VOID v_matchproto_(td_vmod_ghost_router__init)
vmod_router__init(VRT_CTX, struct VPFX(ghost_router) **rtp,
    const char *vcl_name, struct vmod_priv *priv, VCL_STRING path,
    VCL_STRING admin_socket)
{
	struct VPFX(ghost_router) *rt;
	struct gh_vcl *gv;
	struct gh_reload_result res[1];
	struct stat stt;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	AN(rtp);
	AZ(*rtp);
	AN(priv);
	if (path == NULL || *path == '\0') {
		VRT_fail(ctx, "ghost.router(%s): path is empty; give the "
		    "path of ghost.json", vcl_name);
		return;
	}
	if (priv->priv == NULL) {
		ALLOC_OBJ(gv, GH_VCL_MAGIC);
		AN(gv);
		VTAILQ_INIT(&gv->routers);
		priv->priv = gv;
		priv->methods = gh_vcl_methods;
	}
	CAST_OBJ_NOTNULL(gv, priv->priv, GH_VCL_MAGIC);

	ALLOC_OBJ(rt, GH_ROUTER_MAGIC);
	AN(rt);
	REPLACE(rt->vcl_name, vcl_name);
	REPLACE(rt->path, path);
	if (admin_socket != NULL && *admin_socket != '\0')
		REPLACE(rt->admin, admin_socket);
	PTOK(pthread_mutex_init(&rt->mtx, NULL));
	PTOK(pthread_mutex_init(&rt->reload_mtx, NULL));
	VRBT_INIT(&rt->stats);
	gh_chunkpool_init(&rt->cpool);
	rt->rvsc = VSC_ghostrouter_New(NULL, &rt->rseg, "%s.%s",
	    VCL_Name(ctx->vcl), vcl_name);
	gh_mirror_init(&rt->mq, rt->rvsc);
	gh_pool_init(rt);	/* starts the reaper: after cpool, reload_mtx */
	rt->vcl = gv;
	VTAILQ_INSERT_TAIL(&gv->routers, rt, list);
	*rtp = rt;

	if (stat(path, &stt) && errno == ENOENT) {
		/* no file yet: serve 404 until the first reload */
		struct gh_state *st;
		char e[256];

		static const char empty[] =
		    "{\"version\":2,\"backends\":[],\"vhosts\":[]}";

		st = gh_conf_load(empty, strlen(empty), rt->admin,
		    &rt->cpool, e, sizeof e);
		AN(st);
		st->refcnt = 1;
		st->generation = ++rt->generation;
		rt->cur = st;
		VSL(SLT_VCL_Log, NO_VXID, "ghost.router(%s): %s does not exist, "
		    "starting with no routes", vcl_name, path);
		return;
	}
	gh_reload(ctx, rt, res);
	if (!res->ok)
		VRT_fail(ctx, "ghost.router(%s): %s: %s", vcl_name, path,
		    res->err);
}

VCL_VOID v_matchproto_(td_vmod_ghost_router__fini)
vmod_router__fini(struct VPFX(ghost_router) **rtp)
{
	struct VPFX(ghost_router) *rt;

	TAKE_OBJ_NOTNULL(rt, rtp, GH_ROUTER_MAGIC);
	gh_mirror_fini(&rt->mq);
	if (rt->cur != NULL)
		gh_state_unref(rt, &rt->cur);
	gh_pool_fini(rt);
	gh_stats_fini(rt);
	if (rt->rseg != NULL)
		VSC_ghostrouter_Destroy(&rt->rseg);
	if (rt->vcl != NULL)
		VTAILQ_REMOVE(&rt->vcl->routers, rt, list);
	PTOK(pthread_mutex_destroy(&rt->mtx));
	PTOK(pthread_mutex_destroy(&rt->reload_mtx));
	gh_chunkpool_fini(&rt->cpool);
	if (rt->rbuf != NULL)
		AZ(munmap(rt->rbuf, rt->rbuf_len));
	free(rt->vcl_name);
	free(rt->path);
	free(rt->admin);
	FREE_OBJ(rt);
}

int v_matchproto_(vmod_event_f)
vmod_event(VRT_CTX, struct vmod_priv *priv, enum vcl_event_e e)
{
	struct gh_vcl *gv;
	struct VPFX(ghost_router) *rt;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	if (priv->priv == NULL || (e != VCL_EVENT_WARM && e != VCL_EVENT_COLD))
		return (0);
	CAST_OBJ_NOTNULL(gv, priv->priv, GH_VCL_MAGIC);
	VTAILQ_FOREACH(rt, &gv->routers, list)
		gh_stats_event(rt, e);
	return (0);
}

