/*
 * State references, the backend pool and the reaper thread.
 *
 * A state counts its uses of each pool entry; a state whose last
 * reference is dropped goes to the reaper, which frees it and releases
 * the backends no state uses any more with VRT_Assign_Backend(&be, NULL),
 * outside every lock (the release can wait in VCP_Rel).
 */

#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "cache/cache.h"

#include "vsa.h"
#include "vtim.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

static int
be_cmp(const struct gh_be *a, const struct gh_be *b)
{
	return (strcmp(a->key, b->key));
}

VRBT_GENERATE_STATIC(gh_be_tree, gh_be, tree, be_cmp)

/*--------------------------------------------------------------------
 * state references
 */

struct gh_state *
gh_state_ref(struct VPFX(ghost_router) *rt)
{
	struct gh_state *st;

	PTOK(pthread_mutex_lock(&rt->mtx));
	st = rt->cur;
	if (st != NULL)
		(void)__atomic_add_fetch(&st->refcnt, 1, __ATOMIC_ACQ_REL);
	PTOK(pthread_mutex_unlock(&rt->mtx));
	return (st);
}

void
gh_state_unref(struct VPFX(ghost_router) *rt, struct gh_state **pst)
{
	struct gh_state *st;

	TAKE_OBJ_NOTNULL(st, pst, GH_STATE_MAGIC);
	if (__atomic_sub_fetch(&st->refcnt, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	/* the reaper frees it: never on a request thread */
	PTOK(pthread_mutex_lock(&rt->pool_mtx));
	st->priv = rt->deadq;
	rt->deadq = st;
	PTOK(pthread_cond_signal(&rt->reap_cond));
	PTOK(pthread_mutex_unlock(&rt->pool_mtx));
}

/* pool_mtx held: drop the state's uses of its pool entries */
static void
st_detach(struct VPFX(ghost_router) *rt, struct gh_state *st)
{
	struct gh_bset *bs;
	struct gh_be *be;
	unsigned e, n = 0;

	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	for (bs = st->bsets; bs != NULL; bs = bs->all) {
		CHECK_OBJ(bs, GH_BSET_MAGIC);
		for (e = 0; e < bs->backend->nep; e++) {
			be = bs->be[e];
			if (be == NULL)
				continue;	/* attach failed before it */
			bs->be[e] = NULL;
			CHECK_OBJ(be, GH_BE_MAGIC);
			AN(be->nuse);
			if (--be->nuse == 0 && !be->on_reapq) {
				be->on_reapq = 1;
				VTAILQ_INSERT_TAIL(&rt->reapq, be, reap);
			}
		}
		n++;
	}
	assert(n == st->nbset);
}

/* Free dead states, release unused backends; returns work done */
static int
reap_once(struct VPFX(ghost_router) *rt)
{
	struct gh_state *dead, *st;
	struct gh_be *be, *be2;
	VTAILQ_HEAD(, gh_be) rel = VTAILQ_HEAD_INITIALIZER(rel);
	int n = 0;
	double t0;

	PTOK(pthread_mutex_lock(&rt->pool_mtx));
	dead = rt->deadq;
	rt->deadq = NULL;
	for (st = dead; st != NULL; st = st->priv)
		st_detach(rt, st);
	VTAILQ_FOREACH_SAFE(be, &rt->reapq, reap, be2) {
		VTAILQ_REMOVE(&rt->reapq, be, reap);
		be->on_reapq = 0;
		if (be->nuse > 0)
			continue;
		AN(VRBT_REMOVE(gh_be_tree, &rt->pool, be));
		rt->nbackends--;
		VTAILQ_INSERT_TAIL(&rel, be, reap);
	}
	PTOK(pthread_mutex_unlock(&rt->pool_mtx));

	while (dead != NULL) {
		st = dead;
		dead = st->priv;
		gh_state_free(st);
		n++;
	}
	VTAILQ_FOREACH_SAFE(be, &rel, reap, be2) {
		VTAILQ_REMOVE(&rel, be, reap);
		/* may block in VCP_Rel: no lock held here */
		t0 = VTIM_mono();
		VRT_Assign_Backend(&be->be, NULL);
		VSL(SLT_Debug, NO_VXID, "ghost: released backend %s in %.3fs",
		    be->key, VTIM_mono() - t0);
		FREE_OBJ(be);
		n++;
	}
	return (n);
}

static void *
reaper(void *priv)
{
	struct VPFX(ghost_router) *rt;
	struct timespec ts;
	int stop, n;

	CAST_OBJ_NOTNULL(rt, priv, GH_ROUTER_MAGIC);
	for (;;) {
		PTOK(pthread_mutex_lock(&rt->pool_mtx));
		if (!rt->reap_stop && rt->deadq == NULL &&
		    VTAILQ_EMPTY(&rt->reapq)) {
			AZ(clock_gettime(CLOCK_REALTIME, &ts));
			ts.tv_sec += 1;
			(void)pthread_cond_timedwait(&rt->reap_cond,
			    &rt->pool_mtx, &ts);
		}
		stop = rt->reap_stop;
		PTOK(pthread_mutex_unlock(&rt->pool_mtx));
		(void)reap_once(rt);
		if (stop)
			break;
		/*
		 * Between reloads, bring the chunk pool up to the size of
		 * the last load, so the next reload does not page-fault.
		 * One chunk at a time, and only while no reload runs (a
		 * reload is never made to wait for this).
		 */
		while (pthread_mutex_trylock(&rt->reload_mtx) == 0) {
			PTOK(pthread_mutex_unlock(&rt->reload_mtx));
			n = gh_chunkpool_fill_one(&rt->cpool);
			if (!n)
				break;
		}
	}
	return (NULL);
}

/*--------------------------------------------------------------------
 * building a state: its backends
 */

static struct gh_be *
pool_get(VRT_CTX, struct VPFX(ghost_router) *rt, const struct gh_endpoint *ep,
    double tmo, char *err, size_t errlen)
{
	struct gh_be *be, key;
	struct vrt_endpoint vep;
	struct vrt_backend vrt;
	union {
		char buf[256];
		double align;
	} sa;
	const struct suckaddr *sua;
	uint16_t port;
	char name[160];
	VCL_BACKEND b;

	INIT_OBJ(&key, GH_BE_MAGIC);
	if (ep->family == AF_INET6)
		bprintf(key.key, "[%s]:%u", ep->address, ep->port);
	else
		bprintf(key.key, "%s:%u", ep->address, ep->port);
	if (tmo > 0) {
		size_t l = strlen(key.key);
		(void)snprintf(key.key + l, sizeof key.key - l, "~%.0fms",
		    tmo * 1e3);
	}

	PTOK(pthread_mutex_lock(&rt->pool_mtx));
	be = VRBT_FIND(gh_be_tree, &rt->pool, &key);
	if (be != NULL)
		be->nuse++;
	PTOK(pthread_mutex_unlock(&rt->pool_mtx));
	if (be != NULL)
		return (be);

	assert(vsa_suckaddr_len <= sizeof sa.buf);
	port = htons((uint16_t)ep->port);
	sua = VSA_BuildFAP(sa.buf, ep->family, ep->addr,
	    ep->family == AF_INET ? 4 : 16, &port, 2);
	if (sua == NULL) {
		(void)snprintf(err, errlen, "cannot use address %s port %u",
		    ep->address, ep->port);
		return (NULL);
	}
	INIT_OBJ(&vep, VRT_ENDPOINT_MAGIC);
	if (ep->family == AF_INET)
		vep.ipv4 = sua;
	else
		vep.ipv6 = sua;
	VRT_BACKEND_INIT(&vrt);
	vrt.endpoint = &vep;
	bprintf(name, "%s.%s", rt->vcl_name, key.key);
	vrt.vcl_name = name;
	if (tmo > 0) {
		/* otherwise unset: the timeout parameters apply */
		vrt.connect_timeout = tmo;
		vrt.first_byte_timeout = tmo;
		vrt.between_bytes_timeout = tmo;
	}
	b = GH_NEW_BACKEND(ctx, &vrt);
	if (b == NULL) {
		(void)snprintf(err, errlen, "varnishd refused to create "
		    "backend %s (VCL not warm?)", key.key);
		return (NULL);
	}
	ALLOC_OBJ(be, GH_BE_MAGIC);
	AN(be);
	strcpy(be->key, key.key);
	be->be = b;
	be->nuse = 1;
	PTOK(pthread_mutex_lock(&rt->pool_mtx));
	AZ(VRBT_INSERT(gh_be_tree, &rt->pool, be));
	rt->nbackends++;
	PTOK(pthread_mutex_unlock(&rt->pool_mtx));
	return (be);
}

/*
 * A new state takes a use of the pool entry of each endpoint of each of
 * its backend sets: one per backend and timeout, not one per route.
 */
int
gh_pool_attach(VRT_CTX, struct VPFX(ghost_router) *rt, struct gh_state *st,
    char *err, size_t errlen)
{
	struct gh_bset *bs;
	unsigned e;

	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	for (bs = st->bsets; bs != NULL; bs = bs->all) {
		CHECK_OBJ(bs, GH_BSET_MAGIC);
		CHECK_OBJ_NOTNULL(bs->backend, GH_BACKEND_MAGIC);
		for (e = 0; e < bs->backend->nep; e++) {
			AZ(bs->be[e]);
			bs->be[e] = pool_get(ctx, rt, &bs->backend->ep[e],
			    bs->tmo, err, errlen);
			if (bs->be[e] == NULL)
				return (-1);
		}
	}
	return (0);
}

/*--------------------------------------------------------------------
 * the router's pool and reaper
 */

void
gh_pool_init(struct VPFX(ghost_router) *rt)
{

	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	PTOK(pthread_mutex_init(&rt->pool_mtx, NULL));
	PTOK(pthread_cond_init(&rt->reap_cond, NULL));
	VRBT_INIT(&rt->pool);
	VTAILQ_INIT(&rt->reapq);
	PTOK(pthread_create(&rt->reaper, NULL, reaper, rt));
}

/* After the router dropped its state: stop the reaper, release all. */
void
gh_pool_fini(struct VPFX(ghost_router) *rt)
{
	struct gh_be *be, *be2;

	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	PTOK(pthread_mutex_lock(&rt->pool_mtx));
	rt->reap_stop = 1;
	PTOK(pthread_cond_signal(&rt->reap_cond));
	PTOK(pthread_mutex_unlock(&rt->pool_mtx));
	PTOK(pthread_join(rt->reaper, NULL));
	while (reap_once(rt) > 0)
		continue;
	/* entries still referenced can only exist if a state leaked */
	VRBT_FOREACH_SAFE(be, gh_be_tree, &rt->pool, be2) {
		VRBT_REMOVE(gh_be_tree, &rt->pool, be);
		VRT_Assign_Backend(&be->be, NULL);
		FREE_OBJ(be);
	}
	PTOK(pthread_mutex_destroy(&rt->pool_mtx));
	PTOK(pthread_cond_destroy(&rt->reap_cond));
}
