/*
 * ghost: the VMOD's private header, shared by its files (one per
 * concern, the way vmod_directors splits its directors):
 *
 *   vmod_ghost.c     the router object (__init, __fini), $Event, PRIV_VCL
 *   ghost_task.c     the per-task state, the handoff from the client task
 *                    to the backend task, the pick of a group and endpoint
 *   ghost_router.c   the client-side VCL methods (.sni() ... .hash())
 *   ghost_backend.c  the backend-side VCL methods (.backend_fetch() ...
 *                    .backend_error())
 *   ghost_pool.c     state references, the backend pool, the reaper thread
 *   ghost_reload.c   reading ghost.json, building and swapping a state
 *   ghost_stats.c    per-vhost counters and the stats endpoint's JSON
 *   ghost_admin.c    the admin endpoints (reload, stats, drain)
 *   ghost_match.c    route matching
 *   ghost_filter.c   filters applied to a routed request or a redirect
 *   ghost_reqid.c    X-Request-Id and the access log records
 *   ghost_mirror.c   RequestMirror copies
 *   ghost_cors.c     CORS filters: preflights, response headers
 *   ghost_session.c  session persistence: the cookie's endpoint, the
 *                    Set-Cookie of a new session
 *   ghost_cookie.c   the Cookie header without some of its pairs
 *   ghost_cache.c    cache policies: lookup or pass, the cache key, TTLs
 *                    and the object headers for invalidation
 *   ghost_timeout.c  504 for a fetch whose timeout ran out
 *   ghost_retry.c    retries and the backend picked again for a retry
 *   ghost_path.c     the request path normalised before matching
 * and the loader and the lookups, which use no varnishd symbol but
 * through the regex hooks of ghost_re.c (ghost_state.h, ghost_load.h):
 *   ghost_load*.c, ghost_lookup.c, ghost_arena.c
 *
 * Calls go one way: the VCL methods (ghost_router.c, ghost_backend.c)
 * call the concerns, which call ghost_task.c and the lookups.
 *
 * Include after "cache/cache.h" and "vcc_ghost_if.h".
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
 *    reference there, so no backend-side pinning is needed. What the
 *    backend side needs of the decision crosses in one request header
 *    (ghost_task.c).
 *  - a state whose last reference is dropped is handed to the reaper
 *    thread, so no request thread ever frees a state.
 */

#include "ghost_state.h"

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

#define GH_ADMIN_RELOAD	"/.varnish-ghost/reload"
#define GH_ADMIN_STATS	"/.varnish-ghost/stats"
#define GH_ADMIN_DRAIN	"/.varnish-ghost/drain"

/* the request header of the handoff to the backend task (ghost_task.c) */
#define GH_H_HANDOFF	"\020X-Ghost-Handoff:"

struct VSC_ghost;
struct VSC_ghostrouter;
struct vsc_seg;

/*--------------------------------------------------------------------
 * backend pool entry (ghost_pool.c): one native backend per address,
 * port and timeout, shared by every route and state that uses it
 */

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

VRBT_HEAD(gh_be_tree, gh_be);

/* a vhost's counters (ghost_stats.c), kept across reloads by its key */
struct gh_stat {
	unsigned		magic;
#define GH_STAT_MAGIC		0x67687363
	VRBT_ENTRY(gh_stat)	tree;
	char			*key;
	struct VSC_ghost	*vsc;
	struct vsc_seg		*seg;
};

VRBT_HEAD(gh_stat_tree, gh_stat);

/*--------------------------------------------------------------------
 * RequestMirror (ghost_mirror.c): fire-and-forget copies of the request
 * line and headers (no body), queued in a fixed ring of preallocated
 * slots and sent by GH_MIRROR_SENDERS VMOD-owned threads per router over
 * kept-alive connections (up to GH_MIRROR_CONNS per sender). A full ring
 * drops the copy and counts it, so the main request is never delayed or
 * failed.
 */

#define GH_MIRROR_SLOTS		256
#define GH_MIRROR_BUF		8192
#define GH_MIRROR_SENDERS	4
#define GH_MIRROR_CONNS		8

struct gh_mirror_item {
	int			family;
	unsigned char		addr[16];
	unsigned		port;
	int			head;		/* HEAD: an answer without body */
	size_t			len;
	char			buf[GH_MIRROR_BUF];
};

struct gh_mirror_q {
	pthread_mutex_t		mtx;
	pthread_cond_t		cond;
	struct gh_mirror_item	*items;
	unsigned		head, n;
	int			stop;
	unsigned		nthr;
	pthread_t		thr[GH_MIRROR_SENDERS];
	struct VSC_ghostrouter	*rvsc;
};

/*--------------------------------------------------------------------
 * the router object and the per-VCL list of routers
 */

struct gh_vcl;

struct VPFX(ghost_router) {
	unsigned		magic;
#define GH_ROUTER_MAGIC		0x6768726f
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
	char			bkey;		/* backend PRIV_TASK key */
};

struct gh_vcl {
	unsigned		magic;
#define GH_VCL_MAGIC		0x6768766c
	VTAILQ_HEAD(, VPFX(ghost_router)) routers;
};

/*--------------------------------------------------------------------
 * per client task (PRIV_TASK): what .recv() decided, for the methods
 * called after it
 */

/*
 * A route whose regular expression failed with an error (a PCRE2 limit)
 * while nothing else ruled it out: route selection stops there
 * (ghost_match.c) and the request is answered 500.
 */
struct gh_match_error {
	const struct gh_route	*route;		/* NULL: no error */
	const char		*what;		/* "path", "header", ... */
	const char		*name;		/* its name, "" for the path */
	int			code;		/* gh_re_match()'s, < 0 */
};

enum gh_task_kind {
	GH_TASK_ROUTE = 0,	/* routed, or 404/500/redirect */
	GH_TASK_RELOAD,		/* admin: reload answer in body */
	GH_TASK_STATS,		/* admin: stats of st */
	GH_TASK_ADMINERR,	/* admin: refused, error in body */
	GH_TASK_DRAIN,		/* admin: drain answer in body */
};

struct gh_task {
	unsigned		magic;
#define GH_TASK_MAGIC		0x67687473
	struct VPFX(ghost_router) *rt;
	struct gh_state		*st;
	const struct gh_vhost	*vh;
	const struct gh_route	*route;
	unsigned		status;
	enum gh_task_kind	kind;
	struct gh_match_error	rerr;		/* 500: a regex failed */
	const char		*location;
	const char		*body;
	const char		*sni;		/* .sni(), normalized, ws */
	size_t			snil;
	int			https;		/* a TLS socket's request */
	const struct gh_listener *lhost;	/* 421: the Host's listener */
	const struct gh_listener *lsni;		/* 421: the SNI's, or NULL */
	const struct gh_cache	*cache;		/* lookup's policy, NULL: none */
	const char		*khost;		/* key: host, ws */
	const char		*kurl;		/* key: path?query, ws */
	size_t			khl, kul, kpl;	/* their lengths, the path's */
	int			retry;		/* may be retried (ghost_retry.c) */
	const char		*cors_origin;	/* allowed Origin, ws; NULL */
	int			cors_preflight;	/* answered by ghost_cors.c */
	int			sess_new;	/* .deliver() sets the cookie */
	uint64_t		sess_id;	/* of the picked endpoint */
	long long		sess_time;	/* the session's start */
	int			pipe;		/* a WebSocket upgrade to a
						 * kubernetes.io/ws backend */
};

/*
 * per backend task (PRIV_TASK keyed by &rt->bkey): what the client task
 * handed over (ghost_task.c), and the retries' state (ghost_retry.c)
 */
struct gh_btask {
	unsigned		magic;
#define GH_BTASK_MAGIC		0x67686274
	struct VPFX(ghost_router) *rt;
	double			tmo;		/* the route's backend timeout,
						 * s; 0: varnishd's */
	/* retries: the route, by the generation and its place in it */
	int			retry;
	uint64_t		generation;
	unsigned		vhost, route;
	int			resolved;	/* st and r looked up */
	struct gh_state		*st;		/* NULL: no retries */
	const struct gh_route	*r;
	double			t_attempt;	/* the attempt's start */
	double			atmo;		/* its cut timeout, 0: none */
	/* a lookup's cache policy */
	int			cache;
	double			ttl, grace, keep;	/* seconds */
	int			force;
	const char		*taghdr;	/* hdr_t, ws; NULL: none */
	const char		*host;		/* ws, hl bytes */
	size_t			hl;
	const char		*url;		/* ws, ul bytes; path: pl */
	size_t			ul, pl;
};

/* the answer of a reload, for the admin endpoint and vcl_init */
struct gh_reload_result {
	int			ok;
	uint64_t		generation;
	unsigned		nvhost, nroute, nendpoint, nbackend;
	double			ms;
	char			err[1024];
};

/* a vhost new in this reload gets its counters just after the swap */
#define GH_COUNT(vh, f) do {						\
		struct VSC_ghost *vsc_ =				\
		    __atomic_load_n(&(vh)->stats, __ATOMIC_ACQUIRE);	\
		if (vsc_ != NULL)					\
			(void)__atomic_add_fetch(&vsc_->f, 1,		\
			    __ATOMIC_RELAXED);				\
	} while (0)

/* ghost_pool.c */
struct gh_state *gh_state_ref(struct VPFX(ghost_router) *rt);
void gh_state_unref(struct VPFX(ghost_router) *rt, struct gh_state **pst);
int gh_pool_attach(VRT_CTX, struct VPFX(ghost_router) *rt,
    struct gh_state *st, char *err, size_t errlen);
void gh_pool_init(struct VPFX(ghost_router) *rt);
void gh_pool_fini(struct VPFX(ghost_router) *rt);

/* ghost_reload.c */
void gh_reload(VRT_CTX, struct VPFX(ghost_router) *rt,
    struct gh_reload_result *res);

/* ghost_stats.c */
void gh_stats_attach(struct VPFX(ghost_router) *rt, struct gh_state *st);
void gh_stats_create(VRT_CTX, struct VPFX(ghost_router) *rt,
    struct gh_state *st);
void gh_stats_body(struct VPFX(ghost_router) *rt, const struct gh_state *st,
    struct vsb *vsb);
void gh_stats_event(struct VPFX(ghost_router) *rt, enum vcl_event_e e);
void gh_stats_fini(struct VPFX(ghost_router) *rt);

/* ghost_admin.c */
VCL_BOOL gh_admin(VRT_CTX, struct VPFX(ghost_router) *rt, struct gh_task *t,
    enum gh_task_kind kind);
int gh_draining(void);
void gh_json_str(struct vsb *vsb, const char *s);
void gh_drain_close(VRT_CTX, struct VPFX(ghost_router) *rt);

/* ghost_match.c */
const struct gh_route *gh_route_match(VRT_CTX, const struct gh_vhost *vh,
    const char *path, size_t pl, const char *q, size_t ql,
    struct gh_match_error *e);

/* ghost_filter.c */
void gh_hmod_apply(struct http *hp, const struct gh_hmod *h);
const char *gh_path_modify(VRT_CTX, const struct gh_route *r,
    const struct gh_pathmod *pm, const char *path, size_t pl,
    const char *q, size_t ql);
const char *gh_redirect_location(VRT_CTX, const struct gh_route *r,
    int https, const char *host, const char *path, size_t pl,
    const char *q, size_t ql);

/* ghost_reqid.c */
void gh_request_id(VRT_CTX);
void gh_log_route(VRT_CTX, const struct gh_route *r, const struct gh_group *g,
    const struct gh_endpoint *ep);

/* ghost_task.c */
struct gh_task *gh_task_get(VRT_CTX, struct VPFX(ghost_router) *rt,
    int create);
void gh_handoff_strip(struct http *hp);
int gh_handoff_send(VRT_CTX, const struct gh_task *t);
struct gh_btask *gh_handoff_take(VRT_CTX, struct VPFX(ghost_router) *rt);
struct gh_btask *gh_btask_get(VRT_CTX, struct VPFX(ghost_router) *rt);
const struct gh_group *gh_route_pick(const struct gh_route *r);
unsigned gh_group_pick(const struct gh_group *g);

/* ghost_cache.c */
int gh_cache_recv(VRT_CTX, struct gh_task *t, const struct gh_route *r,
    const char *host, size_t hl, const char *path, size_t pl,
    const char *q, size_t ql);
void gh_cache_hash(VRT_CTX, const struct gh_task *t);
void gh_cache_deliver(VRT_CTX, const struct gh_task *t);
int gh_cache_response(VRT_CTX, const struct gh_btask *bt);

/* ghost_retry.c */
void gh_retry_recv(VRT_CTX, struct gh_task *t, const struct gh_route *r);
void gh_retry_fetch(VRT_CTX, struct gh_btask *bt);
int gh_retry(VRT_CTX, struct gh_btask *bt);
int gh_retry_attempt(VRT_CTX, const struct gh_btask *bt, double *start,
    double *tmo);

/* ghost_timeout.c */
void gh_timeout_error(VRT_CTX, const struct gh_btask *bt);
/* ghost_cookie.c: drop a pair (name nl bytes, value vl bytes) or keep it */
typedef int gh_cookie_drop_f(VRT_CTX, void *priv, const char *name,
    size_t nl, const char *val, size_t vl);
int gh_cookie_filter(VRT_CTX, gh_cookie_drop_f *drop, void *priv,
    unsigned *kept);

/* ghost_session.c */
int gh_session_recv(VRT_CTX, const struct gh_route *r,
    const struct gh_group **gp, unsigned *ep);
void gh_session_new(VRT_CTX, struct gh_task *t, const struct gh_group *g,
    unsigned e);
void gh_session_deliver(VRT_CTX, const struct gh_task *t);

/* ghost_cors.c */
int gh_cors_allowed(const struct gh_cors *c, const char *origin);
int gh_cors_recv(VRT_CTX, struct gh_task *t, const struct gh_route *r);
void gh_cors_preflight(VRT_CTX, const struct gh_task *t);
void gh_cors_response(VRT_CTX, const struct gh_task *t);

/* ghost_mirror.c */
void gh_mirror_init(struct gh_mirror_q *, struct VSC_ghostrouter *);
void gh_mirror_fini(struct gh_mirror_q *);
void gh_mirror_send(VRT_CTX, struct gh_mirror_q *, const struct gh_mirror *);
