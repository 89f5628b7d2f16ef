/*
 * ghost: Gateway API routing state built from ghost.json.
 *
 * Everything under struct gh_state is immutable once built and is shared
 * read-only by all worker threads; it is reference counted by the VMOD
 * (ghost_pool.c) and freed with gh_state_free().
 *
 * This file, the loader (ghost_load*.c) and the lookups (ghost_lookup.c)
 * use no varnishd symbols except through the regex hooks gh_re_*() and
 * the assertions of vas.h (VAS_Fail), so they can be fuzzed outside
 * varnishd (fuzz/fuzz_re.c provides both).
 */

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct gh_be;		/* backend pool entry, owned by ghost_pool.c */
struct VSC_ghost;	/* per-vhost counters, owned by ghost_stats.c */
struct vre;

#define GH_PATH_EXACT	0
#define GH_PATH_PREFIX	1
#define GH_PATH_REGEX	2

/* A route's filters, one bit each in struct gh_route's filters. */
enum gh_filter {
	GH_FILTER_REQHDR	= 1U << 0,	/* RequestHeaderModifier */
	GH_FILTER_RESPHDR	= 1U << 1,	/* ResponseHeaderModifier */
	GH_FILTER_REDIRECT	= 1U << 2,	/* RequestRedirect */
	GH_FILTER_REWRITE	= 1U << 3,	/* URLRewrite */
	GH_FILTER_MIRROR	= 1U << 4,	/* RequestMirror (repeatable) */
	GH_FILTER_CORS		= 1U << 5,	/* CORS */
};

#define GH_PMOD_NONE	0
#define GH_PMOD_FULL	1
#define GH_PMOD_PREFIX	2

#define GH_VERSION	2	/* the one version read */
#define GH_MAX_FILE	(64 * 1024 * 1024)
#define GH_MAX_DEPTH	32

/*
 * Arena (ghost_arena.c): bump allocation in chunks of GH_CHUNK bytes,
 * freed all at once. Released chunks go back to a gh_chunkpool (one per
 * router), which keeps up to `keep` of them for the next load.
 */
#define GH_CHUNK	(2 * 1024 * 1024)

/*
 * Under AddressSanitizer (make test-asan, make fuzz) every arena
 * allocation is its own malloc block, so overflows are still caught, and
 * jansson keeps plain malloc.
 */
#if defined(__SANITIZE_ADDRESS__)
#  define GH_ARENA_MALLOC 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define GH_ARENA_MALLOC 1
#  endif
#endif

struct gh_chunk;

struct gh_chunkpool {
	pthread_mutex_t		mtx;
	struct gh_chunk		*free;
	unsigned		nfree;
	unsigned		keep;
};

struct gh_arena {
	struct gh_chunkpool	*pool;		/* NULL: no cache */
	struct gh_chunk		*head;
	unsigned		nchunk;
};

void gh_chunkpool_init(struct gh_chunkpool *cp);
void gh_chunkpool_fini(struct gh_chunkpool *cp);
void gh_chunkpool_keep(struct gh_chunkpool *cp, unsigned keep);
int gh_chunkpool_fill_one(struct gh_chunkpool *cp);
void *gh_arena_alloc(struct gh_arena *a, size_t n);	/* not zeroed */
int gh_arena_owns(const struct gh_arena *a, const void *p);
void gh_arena_release(struct gh_arena *a);

/* An endpoint of a backend. */
struct gh_endpoint {
	char			*address;	/* as in the file */
	unsigned		port;
	int			family;		/* AF_INET / AF_INET6 */
	unsigned char		addr[16];	/* network order */
};

struct gh_bset;

/*
 * An entry of the file's "backends" table: a named list of endpoints,
 * parsed once however many routes send to it.
 */
struct gh_backend {
	unsigned		magic;
#define GH_BACKEND_MAGIC	0x6768626b
	unsigned		index;		/* in the file */
	char			*name;
	int			websocket;	/* appProtocol kubernetes.io/ws:
						 * upgrades are piped */
	unsigned		nep;
	struct gh_endpoint	*ep;
	struct gh_bset		*sets;		/* see struct gh_bset */
};

/*
 * A backend's endpoints as varnishd backends with one timeout (a varnishd
 * backend has its own timeouts): the routes that send to a backend with
 * the same timeout share a set, so a state has one set per backend and
 * distinct timeout, usually one per backend. The loader makes them, the
 * VMOD fills be[] when it attaches the state to its backend pool.
 */
struct gh_bset {
	unsigned		magic;
#define GH_BSET_MAGIC		0x67686273
	const struct gh_backend	*backend;
	double			tmo;		/* seconds, 0: defaults */
	struct gh_be		**be;		/* [backend->nep], the VMOD's */
	struct gh_bset		*next;		/* of the same backend */
	struct gh_bset		*all;		/* every set of the state */
};

/* Why a backend reference has no endpoints (its "unresolved" field). */
enum gh_unresolved {
	GH_RESOLVED = 0,
	GH_UNRESOLVED_NOT_FOUND,	/* BackendNotFound */
	GH_UNRESOLVED_INVALID_KIND,	/* InvalidKind */
	GH_UNRESOLVED_NOT_PERMITTED,	/* RefNotPermitted */
	GH_UNRESOLVED_UNSUPPORTED_PROTOCOL,	/* UnsupportedProtocol */
};

/* A weighted backend group of a route, or a mirror's backend. */
struct gh_group {
	const char		*name;		/* the reference, for logs */
	unsigned		weight;
	enum gh_unresolved	unresolved;
	const struct gh_backend	*backend;	/* NULL when unresolved */
	unsigned		nep;		/* backend's, 0 if unresolved */
	const struct gh_endpoint *ep;		/* backend's */
	const struct gh_bset	*set;		/* NULL: no endpoints, route
						 * redirects, or a mirror */
	struct gh_hmod		*reqhdr;	/* the backendRef's
						 * RequestHeaderModifier,
						 * NULL: none */
	uint64_t		*sid;		/* [nep] session identifiers
						 * of the endpoints (struct
						 * gh_session); NULL: none */
};

/* A header match or query parameter match */
struct gh_vmatch {
	int			regex;
	char			*name;
	size_t			nlen;
	char			*hdr;		/* hdr_t: "\NNNname:" */
	char			*value;
	struct vre		*re;
};

struct gh_hval {
	char			*hdr;		/* hdr_t */
	char			*line;		/* "Name: value" */
};

struct gh_hmod {
	unsigned		nset, nadd, nremove;
	struct gh_hval		*set;
	struct gh_hval		*add;
	char			**remove;	/* hdr_t */
};

struct gh_pathmod {
	int			type;		/* GH_PMOD_* */
	char			*value;
	size_t			vlen;		/* for PREFIX: without trailing / */
};

struct gh_redirect {
	char			*scheme;	/* NULL: keep */
	char			*hostname;	/* NULL: keep */
	unsigned		port;		/* 0: derive */
	unsigned		status;
	struct gh_pathmod	path;
};

struct gh_rewrite {
	char			*hostname;
	struct gh_pathmod	path;
};

struct gh_mirror {
	unsigned		percent;
	struct gh_group		group;
};

/*
 * A CORS filter (ghost_cors.c answers preflights and adds the response
 * headers). An allowed origin is a scheme, a host and a port (the
 * scheme's default when the file gives none); the host is exact, "*."
 * followed by a suffix (one or more labels in its place), or "*".
 * The lists are joined for the response headers when loading.
 */
struct gh_cors_origin {
	int			https;
	int			host_any;	/* host "*" */
	int			host_wild;	/* host "*.": host is the suffix,
						 * with its leading '.' */
	char			*host;		/* lower case */
	size_t			hlen;
	unsigned		port;
};

struct gh_cors {
	unsigned		magic;
#define GH_CORS_MAGIC		0x6768636f
	int			origin_any;	/* allowOrigins ["*"] */
	unsigned		norigin;
	struct gh_cors_origin	*origin;
	int			method_any;	/* allowMethods ["*"] */
	char			*methods;	/* "GET, PUT"; NULL: none */
	int			header_any;	/* allowHeaders ["*"] */
	char			*headers;	/* joined; NULL: none */
	char			*expose;	/* joined or "*"; NULL: none */
	int			credentials;
	unsigned		max_age;	/* seconds */
};

/*
 * An entry of the file's "cachePolicies" table (README, "Caching"): an
 * effective cache policy that routes name. Header names are lower case
 * in the file; hdr_t forms are for http_GetHdr().
 */
#define GH_QK_ALL	0	/* the whole query in the key */
#define GH_QK_INCLUDE	1	/* only qparam[] */
#define GH_QK_EXCLUDE	2	/* all but qparam[] */
#define GH_QK_NONE	3	/* no query */

struct gh_cache {
	unsigned		magic;
#define GH_CACHE_MAGIC		0x67686370
	unsigned		index;		/* in the file */
	char			*name;
	long long		ttl_ms;
	long long		grace_ms;
	long long		keep_ms;
	int			force_ttl;
	int			allow_auth;
	int			qkey;		/* GH_QK_* */
	unsigned		nqparam;
	char			**qparam;
	size_t			*qplen;
	unsigned		nkeyhdr;
	char			**keyhdr;	/* hdr_t */
	unsigned		nstrip;
	char			**strip;	/* cookie names */
	size_t			*striplen;
	int			strip_all;	/* "*" */
	char			*taghdr;	/* name, NULL: none */
	char			*statushdr;	/* name, NULL: none */
	char			*statushdr_h;	/* its hdr_t */
};

/*
 * A route's retry policy (the file's route.retry, Gateway API
 * HTTPRouteRetry; ghost_retry.c applies it).
 */
#define GH_RETRY_MAX_ATTEMPTS	100
#define GH_RETRY_MAX_BACKOFF_MS	2000	/* a backoff holds a worker thread */
#define GH_RETRY_DEADLINE	30.	/* s: retries end without timeouts.request */
struct gh_retry {
	unsigned		magic;
#define GH_RETRY_MAGIC		0x67687279
	unsigned		attempts;	/* retries after the first */
	double			backoff;	/* seconds before each retry */
	uint64_t		codes[4];	/* bit (status - 400) */
	unsigned		*nbackoff;	/* fetches in its backoff now,
						 * atomic: the one mutable
						 * field of a state */
};

static inline int
gh_retry_code(const struct gh_retry *rp, unsigned status)
{

	if (status < 400 || status > 599)
		return (0);
	status -= 400;
	return ((rp->codes[status / 64] >> (status % 64)) & 1);
}

/*
 * Session persistence of a route (ghost_session.c, README "Session
 * persistence"), by cookie or, with header set, by a request and response
 * header of that name. The value is "<id>.<time>": the
 * identifier of an endpoint of one of the route's groups (16 hexadecimal
 * digits, gh_session_id() of the scope, the group's backend name and the
 * endpoint's address and port; the groups' sid[]) and the Unix time the
 * session began, in seconds.
 */
struct gh_session {
	unsigned		magic;
#define GH_SESSION_MAGIC	0x67687370
	char			*name;		/* cookie or header name */
	size_t			nlen;
	int			header;		/* type Header */
	char			*hdr;		/* header: its hdr_t */
	char			*path;		/* cookie Path; NULL: header */
	char			*scope;		/* the rule */
	long long		timeout;	/* absolute, seconds; 0: none */
	int			permanent;	/* Max-Age = timeout */
};

#define GH_SESSION_IDLEN	16	/* hexadecimal digits */

struct gh_route {
	unsigned		magic;
#define GH_ROUTE_MAGIC		0x67687274
	unsigned		index;		/* position in the file */
	unsigned		pgroup;		/* precedenceGroup, 0 first */
	char			*name;
	int			ptype;		/* GH_PATH_* */
	char			*pvalue;
	size_t			plen;		/* PREFIX: without trailing / */
	struct vre		*pre;
	char			*method;
	unsigned		nhdr, nqry;
	struct gh_vmatch	*hdr;
	struct gh_vmatch	*qry;

	unsigned		filters;	/* enum gh_filter bits */
	struct gh_hmod		*reqhdr;	/* GH_FILTER_REQHDR */
	struct gh_hmod		*resphdr;	/* GH_FILTER_RESPHDR */
	struct gh_redirect	*redirect;	/* GH_FILTER_REDIRECT */
	struct gh_rewrite	*rewrite;	/* GH_FILTER_REWRITE */
	unsigned		nmirror;	/* GH_FILTER_MIRROR */
	struct gh_mirror	*mirror;
	struct gh_cors		*cors;		/* GH_FILTER_CORS */

	double			tmo;		/* seconds, 0: defaults */
	double			req_tmo;	/* timeouts.request, s; 0: none */
	const struct gh_retry	*retry;		/* NULL: no retries */
	const struct gh_cache	*cache;		/* NULL: passed */
	struct gh_session	*session;	/* NULL: none */
	unsigned		ngroup;
	struct gh_group		*group;
	uint64_t		wtotal;
};

#define GH_HOST_EXACT	0
#define GH_HOST_WILD	1
#define GH_HOST_ANY	2

struct gh_vhost {
	unsigned		magic;
#define GH_VHOST_MAGIC		0x67687668
	unsigned		index;
	char			*hostname;
	int			kind;		/* GH_HOST_* */
	unsigned		nlisteners;
	char			**listeners;
	char			*key;		/* stats identity */
	unsigned		nroute;
	struct gh_route		*route;		/* in precedence order */
	struct VSC_ghost	*stats;		/* set by the VMOD */
};

/*
 * A Gateway listener of a described socket (the file's
 * sockets[].listeners[]), for the server name (SNI) check.
 */
struct gh_listener {
	char			*name;
	char			*hostname;	/* "*": every host */
	size_t			hlen;
	int			kind;		/* GH_HOST_* */
};

/* A listener socket the file describes (its "sockets") */
struct gh_sock {
	unsigned		magic;
#define GH_SOCK_MAGIC		0x6768736b
	char			*name;
	int			tls;		/* scheme https, SNI check */
	unsigned		nlistener;
	struct gh_listener	*listener;
};

/* Host table for one listener socket */
struct gh_htab {
	char			*socket;	/* NULL: sockets not named */
	unsigned		mask;		/* size - 1 */
	struct gh_vhost		**slot;
	struct gh_vhost		*any;		/* hostname "*" */
	unsigned		nwild;
};

struct gh_state {
	unsigned		magic;
#define GH_STATE_MAGIC		0x67687374
	int			refcnt;
	uint64_t		generation;
	unsigned		nvhost, nroute, nendpoint;
	struct gh_vhost		*vhost;
	unsigned		nbackend;
	struct gh_backend	*backend;	/* the file's table */
	unsigned		nbset;
	struct gh_bset		*bsets;		/* linked by ->all */
	unsigned		nsock;
	struct gh_sock		*sock;		/* the file's "sockets" */
	unsigned		ncache;
	struct gh_cache		*cache;		/* "cachePolicies" */
	int			keep_escaped_slashes;	/* "escapedSlashes":
							 * "keep" */
	unsigned		ntab;
	struct gh_htab		*tab;		/* named sockets */
	struct gh_htab		deftab;		/* other sockets */
	void			*priv;		/* for the VMOD */
	struct gh_arena		arena;		/* holds everything above */
};

/*
 * regex hooks (ghost_re.c in varnishd, fuzz_re.c for the fuzzer);
 * gh_re_match(): 1 match, 0 no match, negative a PCRE2 error (a limit)
 */
int gh_re_compile(const char *pat, struct vre **re, char *err, size_t errlen);
int gh_re_match(const struct vre *re, const char *s, size_t len);
void gh_re_free(struct vre **re);

/* FNV-1a, for the hash tables of backend names and hostnames */
#define GH_FNV0	2166136261U
static inline uint32_t
gh_fnv(uint32_t h, const char *s, size_t l)
{
	while (l-- > 0) {
		h ^= (unsigned char)*s++;
		h *= 16777619U;
	}
	return (h);
}

/* ghost_load.c: the loader (ghost_load.h) */
struct gh_state *gh_conf_load(const char *buf, size_t len,
    const char *admin_socket, struct gh_chunkpool *cp, char *err,
    size_t errlen);
void gh_state_free(struct gh_state *st);
size_t gh_prefix_len(const char *value);
uint64_t gh_session_id(const char *scope, const char *backend,
    const char *address, unsigned port);

/* ghost_lookup.c */
const struct gh_htab *gh_htab_find(const struct gh_state *st,
    const char *socket, const char *admin_socket);
const struct gh_vhost *gh_host_lookup(const struct gh_htab *t,
    const char *host, size_t len);
size_t gh_host_normalize(const char *in, char *out, size_t outlen);
const struct gh_sock *gh_sock_find(const struct gh_state *st,
    const char *socket);
const struct gh_listener *gh_listener_select(const struct gh_sock *sk,
    const char *host, size_t len);

/* ghost_path.c */
#define GH_PATH_BAD_ESCAPE	(-1)	/* "%" without two hex digits */
#define GH_PATH_ESCAPED_SLASH	(-2)	/* %2F or %5C, rejected */
int gh_path_normal(const char *p, size_t l);
long gh_path_normalize(const char *p, size_t l, char *out, int keep_slashes);
