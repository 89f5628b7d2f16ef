/*
 * The per-task state the router's methods share, and the weighted pick of
 * a route's group and endpoint (the request's in .recv(), a retry's in
 * .backend_fetch()).
 */

#include "config.h"

#include <string.h>

#include "cache/cache.h"

#include "vrnd.h"

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
