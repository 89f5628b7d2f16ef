/*
 * Per-vhost counters (VSC segments kept across reloads, keyed by hostname
 * and listeners) and the JSON of GET /.varnish-ghost/stats.
 */

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"

#include "vcl.h"
#include "vsb.h"

#include "VSC_ghost.h"
#include "VSC_ghostrouter.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

static int
stat_cmp(const struct gh_stat *a, const struct gh_stat *b)
{
	return (strcmp(a->key, b->key));
}

VRBT_GENERATE_STATIC(gh_stat_tree, gh_stat, tree, stat_cmp)

/*
 * reload_mtx held. The vhost's counters, or NULL for a vhost seen for the
 * first time: its entry is added without a VSC segment, which
 * gh_stats_create() makes after the swap. Creating a VSC segment costs
 * about a quarter of a millisecond (a shared memory segment of its own), so a
 * reload that brings 1,000 new vhosts would otherwise serve its routing
 * a quarter of a second later.
 */
static struct VSC_ghost *
stat_get(struct VPFX(ghost_router) *rt, const char *k)
{
	struct gh_stat *s, key;

	INIT_OBJ(&key, GH_STAT_MAGIC);
	key.key = TRUST_ME(k);
	s = VRBT_FIND(gh_stat_tree, &rt->stats, &key);
	if (s != NULL)
		return (s->vsc);
	ALLOC_OBJ(s, GH_STAT_MAGIC);
	AN(s);
	REPLACE(s->key, k);
	AZ(VRBT_INSERT(gh_stat_tree, &rt->stats, s));
	rt->stats_pending++;
	return (NULL);
}

/*
 * reload_mtx held. Make the VSC segments stat_get() left pending
 * and, when st is not NULL, hand them to st's vhosts, which requests may be counting
 * with already (a vhost without counters counts nothing).
 */
void
gh_stats_create(VRT_CTX, struct VPFX(ghost_router) *rt, struct gh_state *st)
{
	struct gh_stat *s, key;
	struct gh_vhost *vh;
	unsigned u;

	if (rt->stats_pending == 0)
		return;
	VRBT_FOREACH(s, gh_stat_tree, &rt->stats) {
		CHECK_OBJ_NOTNULL(s, GH_STAT_MAGIC);
		if (s->vsc != NULL)
			continue;
		s->vsc = VSC_ghost_New(NULL, &s->seg, "%s.%s.%s",
		    VCL_Name(ctx->vcl), rt->vcl_name, s->key);
		AN(s->vsc);
	}
	rt->stats_pending = 0;
	if (st == NULL)
		return;
	INIT_OBJ(&key, GH_STAT_MAGIC);
	for (u = 0; u < st->nvhost; u++) {
		vh = &st->vhost[u];
		if (__atomic_load_n(&vh->stats, __ATOMIC_RELAXED) != NULL)
			continue;
		key.key = TRUST_ME(vh->key);
		s = VRBT_FIND(gh_stat_tree, &rt->stats, &key);
		CHECK_OBJ_NOTNULL(s, GH_STAT_MAGIC);
		__atomic_store_n(&vh->stats, s->vsc, __ATOMIC_RELEASE);
	}
}

/* The answer of GET /.varnish-ghost/stats for the state st. */
void
gh_stats_body(struct VPFX(ghost_router) *rt, const struct gh_state *st,
    struct vsb *vsb)
{
	unsigned u, v;
	const struct gh_vhost *vh;
	const struct VSC_ghost *c;

	VSB_printf(vsb, "{\"generation\":%ju,\"vhosts\":%u,\"routes\":%u,"
	    "\"endpoints\":%u,\"backends\":%u,\"last_reload_ms\":%.3f,"
	    "\"draining\":%s,",
	    (uintmax_t)st->generation, st->nvhost, st->nroute,
	    st->nendpoint, rt->nbackends, rt->last_reload_ms,
	    gh_draining() ? "true" : "false");
	if (rt->rvsc != NULL)
		VSB_printf(vsb, "\"reloads\":%ju,\"reload_failures\":%ju,"
		    "\"unknown_host\":%ju,\"misdirected\":%ju,"
		    "\"mirrored\":%ju,"
		    "\"mirror_dropped\":%ju,\"drain_closes\":%ju,",
		    (uintmax_t)rt->rvsc->reloads,
		    (uintmax_t)rt->rvsc->reload_failures,
		    (uintmax_t)rt->rvsc->unknown_host,
		    (uintmax_t)rt->rvsc->misdirected,
		    (uintmax_t)rt->rvsc->mirrored,
		    (uintmax_t)rt->rvsc->mirror_dropped,
		    (uintmax_t)rt->rvsc->drain_closes);
	VSB_cat(vsb, "\"vhost\":[");
	for (u = 0; u < st->nvhost; u++) {
		vh = &st->vhost[u];
		c = __atomic_load_n(&vh->stats, __ATOMIC_ACQUIRE);
		VSB_cat(vsb, u > 0 ? ",\n" : "\n");
		VSB_cat(vsb, "{\"hostname\":");
		gh_json_str(vsb, vh->hostname);
		VSB_cat(vsb, ",\"listeners\":[");
		for (v = 0; v < vh->nlisteners; v++) {
			if (v > 0)
				VSB_cat(vsb, ",");
			gh_json_str(vsb, vh->listeners[v]);
		}
		VSB_printf(vsb, "],\"routes\":%u", vh->nroute);
		if (c != NULL)
			VSB_printf(vsb, ",\"requests\":%ju,\"not_found\":%ju,"
			    "\"errors_5xx\":%ju,\"redirects\":%ju,"
			    "\"backend_picks\":%ju,\"cache_hit\":%ju,"
			    "\"cache_miss\":%ju,\"cache_pass\":%ju,"
			    "\"retries\":%ju,\"retries_refused\":%ju,"
			    "\"regex_errors\":%ju",
			    (uintmax_t)c->requests, (uintmax_t)c->not_found,
			    (uintmax_t)c->errors_5xx, (uintmax_t)c->redirects,
			    (uintmax_t)c->backend_picks,
			    (uintmax_t)c->cache_hit, (uintmax_t)c->cache_miss,
			    (uintmax_t)c->cache_pass, (uintmax_t)c->retries,
			    (uintmax_t)c->retries_refused,
			    (uintmax_t)c->regex_errors);
		VSB_cat(vsb, "}");
	}
	VSB_cat(vsb, "]}\n");
}

/* reload_mtx held: attach the counters of st's vhosts, see above */
void
gh_stats_attach(struct VPFX(ghost_router) *rt, struct gh_state *st)
{
	unsigned u;

	for (u = 0; u < st->nvhost; u++)
		st->vhost[u].stats = stat_get(rt, st->vhost[u].key);
}

/* Counters are hidden while the VCL is cold. */
void
gh_stats_event(struct VPFX(ghost_router) *rt, enum vcl_event_e e)
{
	struct gh_stat *s;

	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	assert(e == VCL_EVENT_WARM || e == VCL_EVENT_COLD);
	PTOK(pthread_mutex_lock(&rt->reload_mtx));
	VRBT_FOREACH(s, gh_stat_tree, &rt->stats) {
		if (e == VCL_EVENT_WARM)
			VRT_VSC_Reveal(s->seg);
		else
			VRT_VSC_Hide(s->seg);
	}
	if (rt->rseg != NULL) {
		if (e == VCL_EVENT_WARM)
			VRT_VSC_Reveal(rt->rseg);
		else
			VRT_VSC_Hide(rt->rseg);
	}
	PTOK(pthread_mutex_unlock(&rt->reload_mtx));
}

void
gh_stats_fini(struct VPFX(ghost_router) *rt)
{
	struct gh_stat *s, *s2;

	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	VRBT_FOREACH_SAFE(s, gh_stat_tree, &rt->stats, s2) {
		VRBT_REMOVE(gh_stat_tree, &rt->stats, s);
		VSC_ghost_Destroy(&s->seg);
		free(s->key);
		FREE_OBJ(s);
	}
}
