/*
 * ghost: Gateway API HTTP routing for Varnish from one JSON file.
 *
 * Design (details in README.md):
 *  - one immutable, reference counted struct gh_state per load; the
 *    router holds one reference in rt->cur, each client task pins the
 *    state it started with in PRIV_TASK.
 *  - endpoints are native backends (VRT_new_backend) in a pool keyed by
 *    address, port and timeout; states count their uses of a pool entry
 *    and entries nobody uses are released by the reaper thread with
 *    VRT_Assign_Backend(&be, NULL), outside every lock.
 *  - the routing decision is taken in vcl_recv and req.backend_hint is
 *    set to the chosen endpoint backend: the core takes its own backend
 *    reference there, so no backend-side pinning is needed.
 *  - a state whose last reference is dropped is handed to the reaper
 *    thread, so no request thread ever frees a state.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"

#include "vcl.h"
#include "vrt_obj.h"
#include "vsa.h"
#include "vsb.h"
#include "vtim.h"
#include "vrnd.h"
#include "vtree.h"
#include "vtcp.h"

#include "ghost.h"

#ifndef PTOK
#  define PTOK(e) AZ(e)
#endif

/*
 * Varnish 7.1 (VRT 15) and 7.7 (VRT 21) from one source tree:
 *  - VSL() takes a vxid_t since 7.3; NO_VXID is its "no transaction".
 *  - VRT_new_backend() takes a "via" backend since VRT 17 (NULL: none).
 *  - since 7.5 a backend timeout of 0 means zero and "unset" is negative,
 *    set by VRT_BACKEND_INIT(); before, 0 meant unset.
 */
#ifndef NO_VXID
#  define NO_VXID 0
#endif
#if VRT_MAJOR_VERSION >= 17U
#  define GH_NEW_BACKEND(ctx, vrt) VRT_new_backend(ctx, vrt, NULL)
#else
#  define GH_NEW_BACKEND(ctx, vrt) VRT_new_backend(ctx, vrt)
#endif
#ifndef VRT_BACKEND_INIT
#  define VRT_BACKEND_INIT(be) INIT_OBJ(be, VRT_BACKEND_MAGIC)
#endif
#include "VSC_ghost.h"
#include "VSC_ghostrouter.h"
#include "vcc_ghost_if.h"

#define ADMIN_RELOAD	"/.varnish-ghost/reload"
#define ADMIN_STATS	"/.varnish-ghost/stats"
#define ADMIN_DRAIN	"/.varnish-ghost/drain"

/*
 * Set by POST /.varnish-ghost/drain, never cleared: varnishd is about to
 * stop, so every response from now on says "Connection: close" and each
 * HTTP/1 client connection closes after its current response. One flag
 * per varnishd child: every VCL that imports this libvmod_ghost.so shares
 * it (varnishd loads one copy of the file), so it survives routing
 * reloads and VCL reloads; a new cache child starts without it.
 */
static unsigned gh_draining;

#ifndef NO_VXID
#  define NO_VXID 0	/* VSL() takes a vxid_t since Varnish 7.3 */
#endif

/*--------------------------------------------------------------------*/

struct gh_be {
	unsigned		magic;
#define GH_BE_MAGIC		0x67686265
	VRBT_ENTRY(gh_be)	tree;
	VTAILQ_ENTRY(gh_be)	reap;
	char			key[96];
	VCL_BACKEND		be;
	unsigned		nuse;
	int			on_reapq;
};

static int
be_cmp(const struct gh_be *a, const struct gh_be *b)
{
	return (strcmp(a->key, b->key));
}

VRBT_HEAD(gh_be_tree, gh_be);
VRBT_GENERATE_STATIC(gh_be_tree, gh_be, tree, be_cmp)

struct gh_stat {
	unsigned		magic;
#define GH_STAT_MAGIC		0x67687363
	VRBT_ENTRY(gh_stat)	tree;
	char			*key;
	struct VSC_ghost	*vsc;
	struct vsc_seg		*seg;
};

static int
stat_cmp(const struct gh_stat *a, const struct gh_stat *b)
{
	return (strcmp(a->key, b->key));
}

VRBT_HEAD(gh_stat_tree, gh_stat);
VRBT_GENERATE_STATIC(gh_stat_tree, gh_stat, tree, stat_cmp)

#include "ghost_mirror.h"

struct gh_vcl;

struct VPFX(ghost_router) {
	unsigned		magic;
#define GH_ROUTER_MAGIC		0x67687274
	char			*vcl_name;
	char			*path;
	char			*admin;
	struct gh_vcl		*vcl;
	VTAILQ_ENTRY(VPFX(ghost_router)) list;

	pthread_mutex_t		mtx;		/* cur */
	struct gh_state		*cur;

	pthread_mutex_t		reload_mtx;	/* reloads, stats tree */
	unsigned		stats_pending;	/* stats without a VSC yet */
	char			*rbuf;		/* read buffer, reload_mtx */
	size_t			rbuf_len;
	uint64_t		generation;
	double			last_reload_ms;
	struct gh_stat_tree	stats;
	struct VSC_ghostrouter	*rvsc;
	struct vsc_seg		*rseg;

	pthread_mutex_t		pool_mtx;	/* pool, nuse, queues */
	pthread_cond_t		reap_cond;
	struct gh_be_tree	pool;
	VTAILQ_HEAD(, gh_be)	reapq;
	struct gh_state		*deadq;
	int			reap_stop;
	pthread_t		reaper;
	unsigned		nbackends;

	struct gh_mirror_q	mq;
	struct gh_chunkpool	cpool;		/* memory for loads */
};

struct gh_vcl {
	unsigned		magic;
#define GH_VCL_MAGIC		0x6768766c
	VTAILQ_HEAD(, VPFX(ghost_router)) routers;
};

#define TASK_ROUTE	0
#define TASK_RELOAD	1
#define TASK_STATS	2
#define TASK_ADMINERR	3
#define TASK_DRAIN	4

struct gh_task {
	unsigned		magic;
#define GH_TASK_MAGIC		0x67687473
	struct VPFX(ghost_router) *rt;
	struct gh_state		*st;
	const struct gh_vhost	*vh;
	const struct gh_route	*route;
	unsigned		status;
	int			kind;
	const char		*location;
	const char		*body;
};

/*--------------------------------------------------------------------
 * state references
 */

static struct gh_state *
st_ref(struct VPFX(ghost_router) *rt)
{
	struct gh_state *st;

	PTOK(pthread_mutex_lock(&rt->mtx));
	st = rt->cur;
	if (st != NULL)
		(void)__atomic_add_fetch(&st->refcnt, 1, __ATOMIC_ACQ_REL);
	PTOK(pthread_mutex_unlock(&rt->mtx));
	return (st);
}

static void
st_unref(struct VPFX(ghost_router) *rt, struct gh_state **pst)
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

/* pool_mtx held */
static void
st_detach(struct VPFX(ghost_router) *rt, struct gh_state *st)
{
	unsigned u, v, g, e;
	struct gh_route *r;
	struct gh_be *be;

	for (u = 0; u < st->nvhost; u++) {
		for (v = 0; v < st->vhost[u].nroute; v++) {
			r = &st->vhost[u].route[v];
			for (g = 0; g < r->ngroup; g++) {
				for (e = 0; e < r->group[g].nep; e++) {
					be = r->group[g].ep[e].be;
					if (be == NULL)
						continue;
					r->group[g].ep[e].be = NULL;
					CHECK_OBJ(be, GH_BE_MAGIC);
					AN(be->nuse);
					if (--be->nuse == 0 && !be->on_reapq) {
						be->on_reapq = 1;
						VTAILQ_INSERT_TAIL(&rt->reapq,
						    be, reap);
					}
				}
			}
		}
	}
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
 * building a state: backends and counters
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
 * reload_mtx held. The vhost's counters, or NULL for a vhost seen for the
 * first time: its entry is added without a VSC segment, which
 * stats_create() makes after the swap. Creating a VSC segment costs about
 * a quarter of a millisecond (a shared memory segment of its own), so a
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
 * reload_mtx held. Make the VSC segments stat_get() left pending and, when
 * st is not NULL, hand them to st's vhosts, which requests may be counting
 * with already (a vhost without counters counts nothing).
 */
static void
stats_create(VRT_CTX, struct VPFX(ghost_router) *rt, struct gh_state *st)
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

static int
st_attach(VRT_CTX, struct VPFX(ghost_router) *rt, struct gh_state *st,
    char *err, size_t errlen)
{
	unsigned u, v, g, e;
	struct gh_route *r;
	struct gh_vhost *vh;

	for (u = 0; u < st->nvhost; u++) {
		vh = &st->vhost[u];
		vh->stats = stat_get(rt, vh->key);
		for (v = 0; v < vh->nroute; v++) {
			r = &vh->route[v];
			if (r->redirect != NULL)
				continue;	/* backends are ignored */
			for (g = 0; g < r->ngroup; g++) {
				for (e = 0; e < r->group[g].nep; e++) {
					r->group[g].ep[e].be = pool_get(ctx,
					    rt, &r->group[g].ep[e], r->tmo,
					    err, errlen);
					if (r->group[g].ep[e].be == NULL)
						return (-1);
				}
			}
		}
	}
	return (0);
}

/*--------------------------------------------------------------------
 * load / reload
 */

/*
 * reload_mtx held. Read path into the router's read buffer, which is kept
 * between reloads and grown (mapped with its pages populated in one call)
 * when the file is larger: a reload of a large file into fresh memory
 * would otherwise take a page fault per page (10 to 18 ms for 3.5 MB
 * here), and a reload of the same size reuses warm pages.
 */
static char *
read_file(struct VPFX(ghost_router) *rt, size_t *len, char *err,
    size_t errlen)
{
	int fd;
	struct stat stt;
	char *buf;
	ssize_t n;
	size_t o = 0, need;

	fd = open(rt->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		(void)snprintf(err, errlen, "(file): cannot open %s: %s; "
		    "check that the chaperone wrote it", rt->path,
		    strerror(errno));
		return (NULL);
	}
	if (fstat(fd, &stt) || stt.st_size > GH_MAX_FILE) {
		(void)snprintf(err, errlen, "(file): %s is larger than %d "
		    "bytes or unreadable", rt->path, GH_MAX_FILE);
		(void)close(fd);
		return (NULL);
	}
	need = stt.st_size + 1;
	if (need > rt->rbuf_len) {
		if (rt->rbuf != NULL)
			AZ(munmap(rt->rbuf, rt->rbuf_len));
		need = (need + 65535) & ~(size_t)65535;
		rt->rbuf = mmap(NULL, need, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (rt->rbuf == MAP_FAILED) {
			rt->rbuf = NULL;
			rt->rbuf_len = 0;
			(void)snprintf(err, errlen, "(file): cannot map %zu "
			    "bytes for %s: %s", need, rt->path,
			    strerror(errno));
			(void)close(fd);
			return (NULL);
		}
		rt->rbuf_len = need;
	}
	buf = rt->rbuf;
	while (o < (size_t)stt.st_size) {
		n = read(fd, buf + o, stt.st_size - o);
		if (n <= 0)
			break;
		o += n;
	}
	(void)close(fd);
	buf[o] = '\0';
	*len = o;
	return (buf);
}

struct reload_result {
	int		ok;
	uint64_t	generation;
	unsigned	nvhost, nroute, nendpoint, nbackend;
	double		ms;
	char		err[1024];
};

static void
do_reload(VRT_CTX, struct VPFX(ghost_router) *rt, struct reload_result *res)
{
	struct gh_state *st, *old;
	char *buf;
	size_t len;
	double t0, t1, t2, t3, t4;
	struct timespec c0, c1;

	memset(res, 0, sizeof *res);
	PTOK(pthread_mutex_lock(&rt->reload_mtx));
	t0 = VTIM_mono();
	AZ(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0));
	buf = read_file(rt, &len, res->err, sizeof res->err);
	st = NULL;
	t1 = t2 = t0;
	if (buf != NULL) {
		t1 = VTIM_mono();
		st = gh_conf_load(buf, len, rt->admin, &rt->cpool, res->err,
		    sizeof res->err);
		t2 = VTIM_mono();
	}
	t3 = t2;
	if (st != NULL) {
		st->refcnt = 1;
		t3 = VTIM_mono();
		if (st_attach(ctx, rt, st, res->err, sizeof res->err)) {
			st_unref(rt, &st);
			st = NULL;
		}
	}
	if (st == NULL) {
		stats_create(ctx, rt, NULL);
		res->generation = rt->generation;
		if (rt->rvsc != NULL)
			rt->rvsc->reload_failures++;
		PTOK(pthread_mutex_unlock(&rt->reload_mtx));
		return;
	}
	st->generation = ++rt->generation;
	PTOK(pthread_mutex_lock(&rt->mtx));
	old = rt->cur;
	rt->cur = st;
	PTOK(pthread_mutex_unlock(&rt->mtx));
	if (old != NULL)
		st_unref(rt, &old);
	res->ok = 1;
	res->generation = st->generation;
	res->nvhost = st->nvhost;
	res->nroute = st->nroute;
	res->nendpoint = st->nendpoint;
	res->nbackend = rt->nbackends;
	/* the new routing serves from here on: that is the reload time */
	t4 = VTIM_mono();
	res->ms = (t4 - t0) * 1e3;
	rt->last_reload_ms = res->ms;
	stats_create(ctx, rt, st);
	AZ(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1));
	VSL(SLT_Debug, NO_VXID, "ghost: %s reload %ju: read %.1f ms, parse and "
	    "build %.1f ms, backends %.1f ms, total %.1f ms; then new "
	    "vhost counters %.1f ms (thread CPU %.1f ms)", rt->vcl_name,
	    (uintmax_t)st->generation, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
	    (t4 - t3) * 1e3, res->ms, (VTIM_mono() - t4) * 1e3,
	    (c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6);
	if (rt->rvsc != NULL)
		rt->rvsc->reloads++;
	PTOK(pthread_mutex_unlock(&rt->reload_mtx));
}

/*--------------------------------------------------------------------
 * object
 */

static void
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

VCL_VOID
vmod_router__init(VRT_CTX, struct VPFX(ghost_router) **rtp,
    const char *vcl_name, struct vmod_priv *priv, VCL_STRING path,
    VCL_STRING admin_socket)
{
	struct VPFX(ghost_router) *rt;
	struct gh_vcl *gv;
	struct reload_result res[1];
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
	PTOK(pthread_mutex_init(&rt->pool_mtx, NULL));
	PTOK(pthread_cond_init(&rt->reap_cond, NULL));
	VRBT_INIT(&rt->pool);
	VRBT_INIT(&rt->stats);
	gh_chunkpool_init(&rt->cpool);
	VTAILQ_INIT(&rt->reapq);
	rt->rvsc = VSC_ghostrouter_New(NULL, &rt->rseg, "%s.%s",
	    VCL_Name(ctx->vcl), vcl_name);
	gh_mirror_init(&rt->mq, rt->rvsc);
	PTOK(pthread_create(&rt->reaper, NULL, reaper, rt));
	rt->vcl = gv;
	VTAILQ_INSERT_TAIL(&gv->routers, rt, list);
	*rtp = rt;

	if (stat(path, &stt) && errno == ENOENT) {
		/* no file yet: serve 404 until the first reload */
		struct gh_state *st;
		char e[256];

		static const char empty[] = "{\"version\":1,\"vhosts\":[]}";

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
	do_reload(ctx, rt, res);
	if (!res->ok)
		VRT_fail(ctx, "ghost.router(%s): %s: %s", vcl_name, path,
		    res->err);
}

VCL_VOID
vmod_router__fini(struct VPFX(ghost_router) **rtp)
{
	struct VPFX(ghost_router) *rt;
	struct gh_stat *s, *s2;
	struct gh_be *be, *be2;

	TAKE_OBJ_NOTNULL(rt, rtp, GH_ROUTER_MAGIC);
	gh_mirror_fini(&rt->mq);
	if (rt->cur != NULL)
		st_unref(rt, &rt->cur);
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
	VRBT_FOREACH_SAFE(s, gh_stat_tree, &rt->stats, s2) {
		VRBT_REMOVE(gh_stat_tree, &rt->stats, s);
		VSC_ghost_Destroy(&s->seg);
		free(s->key);
		FREE_OBJ(s);
	}
	if (rt->rseg != NULL)
		VSC_ghostrouter_Destroy(&rt->rseg);
	if (rt->vcl != NULL)
		VTAILQ_REMOVE(&rt->vcl->routers, rt, list);
	PTOK(pthread_mutex_destroy(&rt->mtx));
	PTOK(pthread_mutex_destroy(&rt->reload_mtx));
	PTOK(pthread_mutex_destroy(&rt->pool_mtx));
	PTOK(pthread_cond_destroy(&rt->reap_cond));
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
	struct gh_stat *s;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	if (priv->priv == NULL || (e != VCL_EVENT_WARM && e != VCL_EVENT_COLD))
		return (0);
	CAST_OBJ_NOTNULL(gv, priv->priv, GH_VCL_MAGIC);
	VTAILQ_FOREACH(rt, &gv->routers, list) {
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
	return (0);
}

/*--------------------------------------------------------------------
 * per task state
 */

static void
task_fini(VRT_CTX, void *p)
{
	struct gh_task *t;

	(void)ctx;
	CAST_OBJ_NOTNULL(t, p, GH_TASK_MAGIC);
	if (t->st != NULL)
		st_unref(t->rt, &t->st);
}

static const struct vmod_priv_methods task_methods[1] = {{
	.magic = VMOD_PRIV_METHODS_MAGIC,
	.type = "ghost_task",
	.fini = task_fini
}};

static struct gh_task *
task_get(VRT_CTX, struct VPFX(ghost_router) *rt, int create)
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
 * matching
 */

static int
query_find(const char *q, size_t ql, const struct gh_vmatch *m,
    const char **v, size_t *vl)
{
	const char *e, *n, *eq;

	while (ql > 0) {
		e = memchr(q, '&', ql);
		n = e != NULL ? e : q + ql;
		eq = memchr(q, '=', n - q);
		if ((size_t)((eq != NULL ? eq : n) - q) == m->nlen &&
		    !memcmp(q, m->name, m->nlen)) {
			*v = eq != NULL ? eq + 1 : n;
			*vl = n - *v;
			return (1);
		}
		if (e == NULL)
			break;
		ql -= (e + 1) - q;
		q = e + 1;
	}
	return (0);
}

static const struct gh_route *
route_match(VRT_CTX, const struct gh_vhost *vh, const char *path, size_t pl,
    const char *q, size_t ql)
{
	const struct gh_route *r;
	const struct gh_vmatch *m;
	const char *method, *v;
	size_t vl;
	unsigned u, k;

	method = http_GetMethod(ctx->http_req);
	for (u = 0; u < vh->nroute; u++) {
		r = &vh->route[u];
		switch (r->ptype) {
		case GH_PATH_EXACT:
			if (pl != r->plen || memcmp(path, r->pvalue, pl))
				continue;
			break;
		case GH_PATH_PREFIX:
			if (pl < r->plen || memcmp(path, r->pvalue, r->plen) ||
			    (pl > r->plen && path[r->plen] != '/'))
				continue;
			break;
		default:
			if (!gh_re_match(r->pre, path, pl))
				continue;
			break;
		}
		if (r->method != NULL &&
		    (method == NULL || strcmp(method, r->method)))
			continue;
		for (k = 0; k < r->nhdr; k++) {
			m = &r->hdr[k];
			if (!http_GetHdr(ctx->http_req, m->hdr, &v))
				break;
			if (m->regex ? !gh_re_match(m->re, v, strlen(v)) :
			    strcmp(v, m->value))
				break;
		}
		if (k < r->nhdr)
			continue;
		for (k = 0; k < r->nqry; k++) {
			m = &r->qry[k];
			if (!query_find(q, ql, m, &v, &vl))
				break;
			if (m->regex ? !gh_re_match(m->re, v, vl) :
			    (vl != strlen(m->value) || memcmp(v, m->value, vl)))
				break;
		}
		if (k < r->nqry)
			continue;
		return (r);
	}
	return (NULL);
}

/*--------------------------------------------------------------------
 * filters
 */

static void
hmod_apply(struct http *hp, const struct gh_hmod *h)
{
	unsigned u;

	for (u = 0; u < h->nset; u++) {
		http_Unset(hp, h->set[u].hdr);
		http_PrintfHeader(hp, "%s", h->set[u].line);
	}
	for (u = 0; u < h->nadd; u++)
		http_PrintfHeader(hp, "%s", h->add[u].line);
	for (u = 0; u < h->nremove; u++)
		http_Unset(hp, h->remove[u]);
}

/* new path (and query) after a path modifier, on the workspace */
static const char *
path_modify(VRT_CTX, const struct gh_route *r, const struct gh_pathmod *pm,
    const char *path, size_t pl, const char *q, size_t ql)
{
	const char *qm = ql > 0 ? "?" : "";

	if (pm->type == GH_PMOD_FULL)
		return (WS_Printf(ctx->ws, "%s%s%.*s",
		    pm->vlen > 0 ? pm->value : "/", qm, (int)ql, q));
	assert(pm->type == GH_PMOD_PREFIX);
	assert(pl >= r->plen);
	if (pm->vlen == 0 && pl == r->plen)
		return (WS_Printf(ctx->ws, "/%s%.*s", qm, (int)ql, q));
	return (WS_Printf(ctx->ws, "%.*s%.*s%s%.*s", (int)pm->vlen, pm->value,
	    (int)(pl - r->plen), path + r->plen, qm, (int)ql, q));
}

static const char *
redirect_location(VRT_CTX, const struct gh_route *r, const char *host,
    const char *path, size_t pl, const char *q, size_t ql)
{
	const struct gh_redirect *rd = r->redirect;
	const char *scheme, *np;
	VCL_IP local;
	unsigned port = 0;
	char ports[8] = "";

	scheme = rd->scheme != NULL ? rd->scheme : "http";
	if (rd->hostname != NULL)
		host = rd->hostname;
	if (rd->port > 0)
		port = rd->port;
	else if (rd->scheme == NULL) {
		/*
		 * Gateway API: without port and scheme, the port of the
		 * listener the request came in on (the local port of the
		 * connection), whatever the Host header says.
		 */
		local = VRT_r_local_ip(ctx);
		if (local != NULL)
			port = (unsigned)VSA_Port(local);
	}
	if (port > 0 && port < 65536 &&
	    !(port == 80 && !strcmp(scheme, "http")) &&
	    !(port == 443 && !strcmp(scheme, "https")))
		bprintf(ports, ":%u", port);
	if (rd->path.type != GH_PMOD_NONE) {
		np = path_modify(ctx, r, &rd->path, path, pl, q, ql);
		if (np == NULL)
			return (NULL);
		return (WS_Printf(ctx->ws, "%s://%s%s%s", scheme, host, ports,
		    np));
	}
	return (WS_Printf(ctx->ws, "%s://%s%s%.*s%s%.*s", scheme, host,
	    ports, (int)pl, path, ql > 0 ? "?" : "", (int)ql, q));
}

/*--------------------------------------------------------------------
 * admin
 */

static int
is_loopback(VCL_IP ip)
{
	const unsigned char *p;
	static const unsigned char v6lo[16] = {
	    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	static const unsigned char v4m[12] = {
	    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	if (ip == NULL)
		return (0);
	switch (VSA_GetPtr(ip, &p)) {
	case PF_INET:
		return (p[0] == 127);
	case PF_INET6:
		return (!memcmp(p, v6lo, 16) ||
		    (!memcmp(p, v4m, 12) && p[12] == 127));
	default:
		return (0);
	}
}

static void
json_str(struct vsb *vsb, const char *s)
{
	VSB_putc(vsb, '"');
	VSB_quote(vsb, s, -1, VSB_QUOTE_JSON);
	VSB_putc(vsb, '"');
}

static VCL_BOOL
admin(VRT_CTX, struct VPFX(ghost_router) *rt, struct gh_task *t, int kind)
{
	const char *method;
	struct reload_result res[1];
	struct vsb vsb[1];
	char *buf;
	unsigned u;

	method = http_GetMethod(ctx->http_req);
	if (!is_loopback(VRT_r_remote_ip(ctx)) ||
	    !is_loopback(VRT_r_local_ip(ctx))) {
		t->kind = TASK_ADMINERR;
		t->status = 403;
		t->body = "{\"status\":\"error\",\"error\":\"the admin "
		    "endpoints answer loopback peers only\"}\n";
		return (0);
	}
	if (method == NULL || (strcmp(method, "GET") &&
	    strcmp(method, "POST"))) {
		t->kind = TASK_ADMINERR;
		t->status = 405;
		t->body = "{\"status\":\"error\",\"error\":\"use POST or "
		    "GET\"}\n";
		return (0);
	}
	t->kind = kind;
	t->status = 200;
	if (kind == TASK_STATS) {
		t->st = st_ref(rt);
		return (0);
	}
	if (kind == TASK_DRAIN) {
		if (strcmp(method, "POST")) {
			t->kind = TASK_ADMINERR;
			t->status = 405;
			t->body = "{\"status\":\"error\",\"error\":\"use POST: "
			    "the drain cannot be undone\"}\n";
			return (0);
		}
		if (!__atomic_exchange_n(&gh_draining, 1, __ATOMIC_SEQ_CST))
			VSL(SLT_VCL_Log, NO_VXID, "ghost: draining: responses "
			    "close their connection from now on");
		t->body = "{\"status\":\"ok\",\"draining\":true}\n";
		return (0);
	}
	do_reload(ctx, rt, res);
	u = WS_ReserveAll(ctx->ws);
	buf = WS_Reservation(ctx->ws);
	AN(VSB_init(vsb, buf, u));
	if (res->ok) {
		VSB_printf(vsb, "{\"status\":\"ok\",\"generation\":%ju,"
		    "\"vhosts\":%u,\"routes\":%u,\"endpoints\":%u,"
		    "\"backends\":%u,\"duration_ms\":%.3f}\n",
		    (uintmax_t)res->generation, res->nvhost, res->nroute,
		    res->nendpoint, res->nbackend, res->ms);
	} else {
		t->status = 400;
		VSB_printf(vsb, "{\"status\":\"error\",\"generation\":%ju,"
		    "\"error\":", (uintmax_t)res->generation);
		json_str(vsb, res->err);
		VSB_cat(vsb, "}\n");
	}
	if (VSB_finish(vsb)) {
		WS_Release(ctx->ws, 0);
		t->body = res->ok ? "{\"status\":\"ok\"}\n" :
		    "{\"status\":\"error\",\"error\":\"(answer too long for "
		    "the workspace)\"}\n";
	} else {
		t->body = buf;
		WS_Release(ctx->ws, VSB_len(vsb) + 1);
	}
	VSB_fini(vsb);
	return (0);
}

/*--------------------------------------------------------------------
 * VCL methods
 */

/* a vhost new in this reload gets its counters just after the swap */
#define COUNT(vh, f) do {						\
		struct VSC_ghost *vsc_ =				\
		    __atomic_load_n(&(vh)->stats, __ATOMIC_ACQUIRE);	\
		if (vsc_ != NULL)					\
			(void)__atomic_add_fetch(&vsc_->f, 1,		\
			    __ATOMIC_RELAXED);				\
	} while (0)

/*--------------------------------------------------------------------
 * request id and access log records
 */

static const char H_X_Request_Id[] = "\015X-Request-Id:";

#define REQID_MAX	128

/*
 * A client's X-Request-Id is kept when it is the only one and well formed:
 * 1 to REQID_MAX characters of letters, digits and - _ . : + / = (UUIDs,
 * hex, base64, ULIDs). Anything else could carry log injection or
 * unbounded size into every backend's logs.
 */
static int
reqid_ok(const char *p)
{
	size_t n;

	for (n = 0; p[n] != '\0'; n++) {
		if (n == REQID_MAX)
			return (0);
		if (!(p[n] >= 'a' && p[n] <= 'z') &&
		    !(p[n] >= 'A' && p[n] <= 'Z') &&
		    !(p[n] >= '0' && p[n] <= '9') &&
		    strchr("-_.:+/=", p[n]) == NULL)
			return (0);
	}
	return (n > 0);
}

/*
 * Keep or make the request's X-Request-Id: the client's when it is the
 * only one and well formed, else 128 random bits in hex. The request
 * headers are copied to the backend request, so every backend sees it.
 * It is logged as VCL_Log "ghost.request_id: ..." for the access log:
 * varnishncsa's %{X-Request-Id}i is the client's header on Varnish 7.7,
 * not the one set here.
 */
static void
request_id(VRT_CTX)
{
	struct http *hp;
	const char *p;
	unsigned u, n;
	uint32_t r;
	unsigned char rnd[16];
	char hex[2 * sizeof rnd + 1];

	hp = ctx->http_req;
	CHECK_OBJ_NOTNULL(hp, HTTP_MAGIC);
	n = 0;
	for (u = HTTP_HDR_FIRST; u < hp->nhd; u++)
		if (http_IsHdr(&hp->hd[u], H_X_Request_Id))
			n++;
	if (n == 1 && http_GetHdr(hp, H_X_Request_Id, &p) && reqid_ok(p)) {
		if (ctx->vsl != NULL)
			VSLb(ctx->vsl, SLT_VCL_Log, "ghost.request_id: %s", p);
		return;
	}
	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd) {
		for (u = 0; u < sizeof rnd; u += sizeof r) {
			r = (uint32_t)VRND_RandomTestable();
			memcpy(rnd + u, &r, sizeof r);
		}
	}
	for (u = 0; u < sizeof rnd; u++) {
		hex[2 * u] = "0123456789abcdef"[rnd[u] >> 4];
		hex[2 * u + 1] = "0123456789abcdef"[rnd[u] & 0xf];
	}
	hex[2 * sizeof rnd] = '\0';
	http_Unset(hp, H_X_Request_Id);
	http_PrintfHeader(hp, "X-Request-Id: %s", hex);
	if (ctx->vsl != NULL)
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.request_id: %s", hex);
}

/* The access log's view of the decision (varnishncsa %{VCL_Log:key}x). */
static void
log_route(VRT_CTX, const struct gh_route *r, const struct gh_group *g,
    const struct gh_endpoint *ep)
{

	if (ctx->vsl == NULL)
		return;
	if (r != NULL && r->name != NULL)
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.route: %s", r->name);
	if (g != NULL && g->name != NULL)
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.backend: %s", g->name);
	if (ep != NULL)
		VSLb(ctx->vsl, SLT_VCL_Log, ep->family == AF_INET6 ?
		    "ghost.endpoint: [%s]:%u" : "ghost.endpoint: %s:%u",
		    ep->address, ep->port);
}

VCL_BOOL
vmod_router_recv(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;
	const char *sock, *url, *path, *q, *hosthdr, *np;
	size_t pl, ql, hl;
	const struct gh_htab *tab;
	const struct gh_vhost *vh;
	const struct gh_route *r;
	const struct gh_group *g;
	const struct gh_endpoint *ep;
	uint64_t w;
	unsigned u;
	char host[256];

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	if (ctx->method != VCL_MET_RECV) {
		VRT_fail(ctx, "ghost: %s.recv() is only allowed in vcl_recv",
		    rt->vcl_name);
		return (0);
	}
	t = task_get(ctx, rt, 1);
	if (t == NULL)
		return (0);
	if (t->st != NULL)		/* restart */
		st_unref(rt, &t->st);
	t->vh = NULL;
	t->route = NULL;
	t->status = 0;
	t->kind = TASK_ROUTE;
	t->location = NULL;
	t->body = NULL;

	sock = VRT_r_local_socket(ctx);
	url = ctx->http_req->hd[HTTP_HDR_URL].b;
	AN(url);
	path = url;
	if (*path != '/' && (!strncasecmp(path, "http://", 7) ||
	    !strncasecmp(path, "https://", 8))) {
		path = strchr(strchr(path, ':') + 3, '/');
		if (path == NULL)
			path = "/";
	}
	q = strchr(path, '?');
	if (q != NULL) {
		pl = q - path;
		q++;
		ql = strlen(q);
	} else {
		pl = strlen(path);
		q = "";
		ql = 0;
	}

	if (rt->admin != NULL && sock != NULL && !strcmp(sock, rt->admin)) {
		if (pl == strlen(ADMIN_RELOAD) &&
		    !memcmp(path, ADMIN_RELOAD, pl))
			return (admin(ctx, rt, t, TASK_RELOAD));
		if (pl == strlen(ADMIN_STATS) &&
		    !memcmp(path, ADMIN_STATS, pl))
			return (admin(ctx, rt, t, TASK_STATS));
		if (pl == strlen(ADMIN_DRAIN) &&
		    !memcmp(path, ADMIN_DRAIN, pl))
			return (admin(ctx, rt, t, TASK_DRAIN));
	}

	request_id(ctx);

	t->st = st_ref(rt);
	AN(t->st);
	tab = gh_htab_find(t->st, sock, rt->admin);
	vh = NULL;
	hosthdr = NULL;
	hl = 0;
	host[0] = '\0';
	if (tab != NULL) {
		if (http_GetHdr(ctx->http_req, H_Host, &hosthdr))
			hl = gh_host_normalize(hosthdr, host, sizeof host);
		vh = gh_host_lookup(tab, host, hl);
	}
	if (vh == NULL) {
		if (rt->rvsc != NULL)
			(void)__atomic_add_fetch(&rt->rvsc->unknown_host, 1,
			    __ATOMIC_RELAXED);
		t->status = 404;
		return (0);
	}
	t->vh = vh;
	COUNT(vh, requests);
	r = route_match(ctx, vh, path, pl, q, ql);
	if (r == NULL) {
		COUNT(vh, not_found);
		t->status = 404;
		return (0);
	}
	t->route = r;
	if (r->redirect != NULL) {
		log_route(ctx, r, NULL, NULL);
		t->location = redirect_location(ctx, r, host, path, pl, q,
		    ql);
		if (t->location == NULL) {
			VRT_fail(ctx, "ghost: out of workspace");
			return (0);
		}
		COUNT(vh, redirects);
		t->status = r->redirect->status;
		return (0);
	}

	for (u = 0; u < r->nmirror; u++)
		gh_mirror_send(ctx, &rt->mq, &r->mirror[u]);

	/* weighted group, then a uniform endpoint */
	if (r->wtotal == 0) {
		log_route(ctx, r, NULL, NULL);
		t->status = 500;
		return (0);
	}
	w = (uint64_t)VRND_RandomTestable() % r->wtotal;
	for (u = 0; u < r->ngroup; u++) {
		if (w < r->group[u].weight)
			break;
		w -= r->group[u].weight;
	}
	assert(u < r->ngroup);
	g = &r->group[u];
	if (g->nep == 0) {
		log_route(ctx, r, g, NULL);
		t->status = 500;
		return (0);
	}
	ep = &g->ep[g->nep > 1 ? VRND_RandomTestable() % g->nep : 0];
	CHECK_OBJ_NOTNULL(ep->be, GH_BE_MAGIC);
	log_route(ctx, r, g, ep);

	if (r->rewrite != NULL) {
		if (r->rewrite->path.type != GH_PMOD_NONE) {
			np = path_modify(ctx, r, &r->rewrite->path, path, pl,
			    q, ql);
			if (np == NULL) {
				VRT_fail(ctx, "ghost: out of workspace");
				return (0);
			}
			VRT_l_req_url(ctx, NULL, TOSTRAND(np));
		}
		if (r->rewrite->hostname != NULL) {
			http_Unset(ctx->http_req, H_Host);
			http_PrintfHeader(ctx->http_req, "Host: %s",
			    r->rewrite->hostname);
		}
	}
	if (r->reqhdr != NULL)
		hmod_apply(ctx->http_req, r->reqhdr);

	VRT_l_req_backend_hint(ctx, ep->be->be);
	COUNT(vh, backend_picks);
	return (1);
}

VCL_INT
vmod_router_status(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	t = task_get(ctx, rt, 0);
	return (t != NULL ? t->status : 0);
}

VCL_STRING
vmod_router_route(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	t = task_get(ctx, rt, 0);
	if (t == NULL || t->route == NULL)
		return ("");
	/* pinned by the task's state reference */
	return (t->route->name);
}

VCL_INT
vmod_router_generation(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;
	uint64_t g;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	t = task_get(ctx, rt, 0);
	if (t != NULL && t->st != NULL)
		return ((VCL_INT)t->st->generation);
	PTOK(pthread_mutex_lock(&rt->mtx));
	g = rt->cur != NULL ? rt->cur->generation : 0;
	PTOK(pthread_mutex_unlock(&rt->mtx));
	return ((VCL_INT)g);
}

static void
stats_body(struct VPFX(ghost_router) *rt, const struct gh_state *st,
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
	    __atomic_load_n(&gh_draining, __ATOMIC_RELAXED) ? "true" : "false");
	if (rt->rvsc != NULL)
		VSB_printf(vsb, "\"reloads\":%ju,\"reload_failures\":%ju,"
		    "\"unknown_host\":%ju,\"mirrored\":%ju,"
		    "\"mirror_dropped\":%ju,\"drain_closes\":%ju,",
		    (uintmax_t)rt->rvsc->reloads,
		    (uintmax_t)rt->rvsc->reload_failures,
		    (uintmax_t)rt->rvsc->unknown_host,
		    (uintmax_t)rt->rvsc->mirrored,
		    (uintmax_t)rt->rvsc->mirror_dropped,
		    (uintmax_t)rt->rvsc->drain_closes);
	VSB_cat(vsb, "\"vhost\":[");
	for (u = 0; u < st->nvhost; u++) {
		vh = &st->vhost[u];
		c = __atomic_load_n(&vh->stats, __ATOMIC_ACQUIRE);
		VSB_cat(vsb, u > 0 ? ",\n" : "\n");
		VSB_cat(vsb, "{\"hostname\":");
		json_str(vsb, vh->hostname);
		VSB_cat(vsb, ",\"listeners\":[");
		for (v = 0; v < vh->nlisteners; v++) {
			if (v > 0)
				VSB_cat(vsb, ",");
			json_str(vsb, vh->listeners[v]);
		}
		VSB_printf(vsb, "],\"routes\":%u", vh->nroute);
		if (c != NULL)
			VSB_printf(vsb, ",\"requests\":%ju,\"not_found\":%ju,"
			    "\"errors_5xx\":%ju,\"redirects\":%ju,"
			    "\"backend_picks\":%ju",
			    (uintmax_t)c->requests, (uintmax_t)c->not_found,
			    (uintmax_t)c->errors_5xx, (uintmax_t)c->redirects,
			    (uintmax_t)c->backend_picks);
		VSB_cat(vsb, "}");
	}
	VSB_cat(vsb, "]}\n");
}

/*
 * While varnishd drains, every response closes its connection: varnishd
 * ends an HTTP/1 session after a response with "Connection: close"
 * (V1D_Deliver, cnt_synth), so keep-alive clients reconnect, through the
 * Service, to another pod. HTTP/2 drops the header (connection-specific)
 * and keeps the session.
 */
static void
drain_close(VRT_CTX, struct VPFX(ghost_router) *rt)
{

	if (!__atomic_load_n(&gh_draining, __ATOMIC_RELAXED))
		return;
	http_ForceHeader(ctx->http_resp, H_Connection, "close");
	if (rt->rvsc != NULL)
		(void)__atomic_add_fetch(&rt->rvsc->drain_closes, 1,
		    __ATOMIC_RELAXED);
}

VCL_VOID
vmod_router_synth(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;
	struct vsb *body;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	if (ctx->method != VCL_MET_SYNTH) {
		VRT_fail(ctx, "ghost: %s.synth() is only allowed in "
		    "vcl_synth", rt->vcl_name);
		return;
	}
	drain_close(ctx, rt);
	t = task_get(ctx, rt, 0);
	if (t == NULL || t->status == 0 ||
	    ctx->http_resp->status != t->status)
		return;
	CAST_OBJ_NOTNULL(body, ctx->specific, VSB_MAGIC);
	switch (t->kind) {
	case TASK_RELOAD:
	case TASK_DRAIN:
	case TASK_ADMINERR:
		http_Unset(ctx->http_resp, H_Content_Type);
		http_SetHeader(ctx->http_resp,
		    "Content-Type: application/json");
		VSB_cat(body, t->body);
		return;
	case TASK_STATS:
		http_Unset(ctx->http_resp, H_Content_Type);
		http_SetHeader(ctx->http_resp,
		    "Content-Type: application/json");
		AN(t->st);
		stats_body(rt, t->st, body);
		return;
	default:
		break;
	}
	http_Unset(ctx->http_resp, H_Content_Type);
	http_SetHeader(ctx->http_resp, "Content-Type: text/plain");
	if (t->location != NULL) {
		http_PrintfHeader(ctx->http_resp, "Location: %s",
		    t->location);
	} else if (t->status == 404 && t->vh == NULL) {
		VSB_cat(body, "404 Not Found: no vhost for this host\n");
	} else if (t->status == 404) {
		VSB_cat(body, "404 Not Found: no route matched\n");
	} else if (t->status == 500) {
		VSB_printf(body, "500 Internal Server Error: route %s has no "
		    "usable backend\n", t->route != NULL ? t->route->name : "");
	}
	if (t->route != NULL && t->route->resphdr != NULL)
		hmod_apply(ctx->http_resp, t->route->resphdr);
	if (t->vh != NULL && t->status >= 500)
		COUNT(t->vh, errors_5xx);
}

VCL_VOID
vmod_router_deliver(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	if (ctx->method != VCL_MET_DELIVER) {
		VRT_fail(ctx, "ghost: %s.deliver() is only allowed in "
		    "vcl_deliver", rt->vcl_name);
		return;
	}
	drain_close(ctx, rt);
	t = task_get(ctx, rt, 0);
	if (t == NULL || t->route == NULL || t->status != 0)
		return;
	if (t->route->resphdr != NULL)
		hmod_apply(ctx->http_resp, t->route->resphdr);
	if (t->vh != NULL && ctx->http_resp->status >= 500)
		COUNT(t->vh, errors_5xx);
}
