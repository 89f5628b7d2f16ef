/*
 * The loader's routes: matches, timeouts, cache policy, weighted groups,
 * retry policy, session persistence; their precedence order.
 */

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "vdef.h"
#include "vas.h"
#include "miniobj.h"

#include "ghost_state.h"
#include "ghost_load.h"

static const char * const vmatch_fields[] = {"type", "name", "value", NULL};

static int
load_vmatch(struct pc *pc, const char *path, const json_t *j,
    struct gh_vmatch *m, int is_header)
{
	const char *type, *name, *value;
	char p[PATHLEN], q[96];

	if (check_object(pc, path, j, vmatch_fields) ||
	    get_string(pc, path, j, "type", 1, 1, 64, &type) ||
	    get_string(pc, path, j, "name", 1, 1, 256, &name) ||
	    get_string(pc, path, j, "value", 1, 0, 4096, &value))
		return (-1);
	if (!strcmp(type, "Exact"))
		m->regex = 0;
	else if (!strcmp(type, "RegularExpression"))
		m->regex = 1;
	else {
		SUB(p, path, ".type");
		return (fail(pc, p, "unknown match type %s; use \"Exact\" "
		    "or \"RegularExpression\"", qv(q, sizeof q, type)));
	}
	SUB(p, path, ".name");
	if (is_header && !is_token(name))
		return (fail(pc, p, "invalid header name %s; use only "
		    "letters, digits and !#$%%&'*+-.^_`|~",
		    qv(q, sizeof q, name)));
	m->name = sdup(pc, p, name);
	if (m->name == NULL)
		return (-1);
	m->nlen = strlen(name);
	if (is_header) {
		m->hdr = mkhdr(pc, p, name);
		if (m->hdr == NULL)
			return (-1);
	}
	SUB(p, path, ".value");
	m->value = sdup(pc, p, value);
	if (m->value == NULL)
		return (-1);
	if (m->regex && load_regex(pc, p, value, &m->re))
		return (-1);
	return (0);
}

/* match.headers or match.queryParams: up to 16 matches, all must hold */
static int
load_vmatch_list(struct pc *pc, const char *mpath, const json_t *m,
    const char *key, int is_header, struct gh_vmatch **out, unsigned *n)
{
	json_t *a, *e;
	size_t i;
	char p[PATHLEN];

	if (get_array(pc, mpath, m, key, 0, 16, &a))
		return (-1);
	if (a == NULL || json_array_size(a) == 0)
		return (0);
	*out = zalloc(pc, mpath, json_array_size(a), sizeof **out);
	if (*out == NULL)
		return (-1);
	*n = json_array_size(a);
	json_array_foreach(a, i, e) {
		SUB(p, mpath, ".%s[%zu]", key, i);
		if (load_vmatch(pc, p, e, &(*out)[i], is_header))
			return (-1);
	}
	return (0);
}

/*
 * A session identifier: FNV-1a (64 bits) of the scope, the backend name,
 * the address and the port in decimal, each followed by a NUL byte. Not a
 * secret: .recv() only looks a cookie's identifier up among the route's
 * own endpoints, so a forged one can select nothing else (README,
 * "Session persistence").
 */
static uint64_t
fnv64(uint64_t h, const char *s, size_t l)
{
	while (l-- > 0) {
		h ^= (unsigned char)*s++;
		h *= 1099511628211ULL;
	}
	/* the terminating NUL: h ^= 0, then the multiplication */
	return (h * 1099511628211ULL);
}

uint64_t
gh_session_id(const char *scope, const char *backend, const char *address,
    unsigned port)
{
	char pb[16];
	uint64_t h;
	int n;

	n = snprintf(pb, sizeof pb, "%u", port);
	assert(n > 0 && (size_t)n < sizeof pb);
	h = 14695981039346656037ULL;
	h = fnv64(h, scope, strlen(scope));
	h = fnv64(h, backend, strlen(backend));
	h = fnv64(h, address, strlen(address));
	return (fnv64(h, pb, (size_t)n));
}

static const char * const session_fields[] = {
	"type", "name", "path", "scope", "absoluteTimeoutMs", "permanent",
	NULL};

/* "sessionPersistence", after the route's backends */
static int
load_session(struct pc *pc, const char *path, const json_t *j,
    struct gh_route *r)
{
	struct gh_session *sp;
	struct gh_group *g;
	const char *s, *name, *cpath, *scope;
	char q[96];
	long long ms;
	unsigned u, e;
	int perm, hdr;

	if (check_object(pc, path, j, session_fields) ||
	    get_string(pc, path, j, "type", 1, 1, 64, &s))
		return (-1);
	if (strcmp(s, "Cookie") && strcmp(s, "Header"))
		return (fail(pc, path, "type %s is not supported; use "
		    "\"Cookie\" or \"Header\"", qv(q, sizeof q, s)));
	hdr = !strcmp(s, "Header");
	if (r->filters & GH_FILTER_REDIRECT)
		return (fail(pc, path, "the route redirects, so it has no "
		    "backend to keep a session on; remove sessionPersistence "
		    "or the RequestRedirect filter"));
	if (get_string(pc, path, j, "name", 1, 1, 128, &name) ||
	    get_string(pc, path, j, "path", !hdr, 1, 1024, &cpath) ||
	    get_string(pc, path, j, "scope", 1, 1, 512, &scope) ||
	    get_int(pc, path, j, "absoluteTimeoutMs", 0, 0, 315360000000LL,
	    0, &ms) || get_bool(pc, path, j, "permanent", &perm))
		return (-1);
	if (!is_token(name))
		return (fail(pc, path, "name %s is not a cookie or header "
		    "name; use letters, digits and !#$%%&'*+-.^_`|~ only",
		    qv(q, sizeof q, name)));
	if (hdr && (cpath != NULL || perm))
		return (fail(pc, path, "path and permanent are cookie "
		    "attributes, and the type is \"Header\"; remove them"));
	if (!hdr && (cpath[0] != '/' || has_ctl(cpath, 0) ||
	    strchr(cpath, ';')))
		return (fail(pc, path, "path %s is not an absolute path "
		    "without ';', spaces or control characters; write the "
		    "route's path such as \"/\" or \"/cart\"",
		    qv(q, sizeof q, cpath)));
	if (ms % 1000 != 0)
		return (fail(pc, path, "absoluteTimeoutMs %lld is not whole "
		    "seconds; use a multiple of 1000", ms));
	if (perm && ms == 0)
		return (fail(pc, path, "permanent without absoluteTimeoutMs: "
		    "a permanent cookie needs its Max-Age; set "
		    "absoluteTimeoutMs or remove permanent"));
	sp = zalloc(pc, path, 1, sizeof *sp);
	if (sp == NULL)
		return (-1);
	sp->magic = GH_SESSION_MAGIC;
	sp->name = sdup(pc, path, name);
	sp->scope = sdup(pc, path, scope);
	if (sp->name == NULL || sp->scope == NULL)
		return (-1);
	sp->header = hdr;
	if (hdr)
		sp->hdr = mkhdr(pc, path, name);
	else
		sp->path = sdup(pc, path, cpath);
	if (sp->hdr == NULL && sp->path == NULL)
		return (-1);
	sp->nlen = strlen(name);
	sp->timeout = ms / 1000;
	sp->permanent = perm;
	/* every group with endpoints, weight 0 too (GEP-1619) */
	for (u = 0; u < r->ngroup; u++) {
		g = &r->group[u];
		if (g->nep == 0 || g->set == NULL)
			continue;
		CHECK_OBJ_NOTNULL(g->backend, GH_BACKEND_MAGIC);
		g->sid = zalloc(pc, path, g->nep, sizeof *g->sid);
		if (g->sid == NULL)
			return (-1);
		for (e = 0; e < g->nep; e++)
			g->sid[e] = gh_session_id(scope, g->backend->name,
			    g->ep[e].address, g->ep[e].port);
	}
	r->session = sp;
	return (0);
}

static const char * const route_fields[] = {
	"name", "precedenceGroup", "match", "filters", "timeouts", "backends",
	"cache", "retry", "sessionPersistence", NULL};
static const char * const match_fields[] = {
	"path", "method", "headers", "queryParams", NULL};
static const char * const path_fields[] = {"type", "value", NULL};
static const char * const tmo_fields[] = {
	"requestMs", "backendRequestMs", NULL};
static const char * const retry_fields[] = {
	"attempts", "backoffMs", "codes", NULL};

/* route.retry; call after the backends are loaded */
static int
load_retry(struct pc *pc, const char *path, const json_t *j,
    struct gh_route *r)
{
	struct gh_retry *rp;
	json_t *a, *e;
	char p[PATHLEN];
	long long n, ms;
	size_t i;
	unsigned c, u;

	if (check_object(pc, path, j, retry_fields) ||
	    get_int(pc, path, j, "attempts", 1, 1, GH_RETRY_MAX_ATTEMPTS, 1,
	    &n) ||
	    get_int(pc, path, j, "backoffMs", 0, 0, GH_RETRY_MAX_BACKOFF_MS,
	    0, &ms) ||
	    get_array(pc, path, j, "codes", 0, 200, &a))
		return (-1);
	rp = zalloc(pc, path, 1, sizeof *rp);
	if (rp == NULL)
		return (-1);
	rp->magic = GH_RETRY_MAGIC;
	rp->attempts = (unsigned)n;
	rp->backoff = ms / 1e3;
	rp->nbackoff = zalloc(pc, path, 1, sizeof *rp->nbackoff);
	if (rp->nbackoff == NULL)
		return (-1);
	if (a != NULL) {
		json_array_foreach(a, i, e) {
			SUB(p, path, ".codes[%zu]", i);
			if (!json_is_integer(e))
				return (fail(pc, p, "expected an integer, got %s; "
				    "list the backend statuses to retry, such "
				    "as 502 or 503", jtype(e)));
			if (json_integer_value(e) < 400 ||
			    json_integer_value(e) > 599)
				return (fail(pc, p, "status %lld is not from 400 "
				    "to 599; list the backend statuses to "
				    "retry, such as 502 or 503",
				    (long long)json_integer_value(e)));
			c = (unsigned)json_integer_value(e);
			if (gh_retry_code(rp, c))
				return (fail(pc, p, "status %u is listed twice; "
				    "list each status once", c));
			c -= 400;
			rp->codes[c / 64] |= (uint64_t)1 << (c % 64);
		}
	}
	for (u = 0; u < r->ngroup; u++)
		if (r->group[u].reqhdr != NULL)
			return (fail(pc, path, "backends[%u] has filters of its "
			    "own, which ghost cannot apply again to a retry "
			    "that picks another backend; remove the retry "
			    "policy or the backend's filters", u));
	r->retry = rp;
	return (0);
}

int
load_route(struct pc *pc, const char *path, const json_t *j,
    struct gh_state *st, struct gh_route *r)
{
	const char *s;
	json_t *m, *pj, *a, *e;
	char p[PATHLEN], mp[PATHLEN], q[96];
	const char * const *mt;
	size_t i, nm;
	unsigned nmirror;
	long long rq, brq, pg;

	r->magic = GH_ROUTE_MAGIC;
	if (check_object(pc, path, j, route_fields) ||
	    get_string(pc, path, j, "name", 0, 0, 512, &s) ||
	    get_int(pc, path, j, "precedenceGroup", 0, 0, 1000000, 0, &pg))
		return (-1);
	r->pgroup = (unsigned)pg;
	r->name = sdup(pc, path, s != NULL ? s : "");
	if (r->name == NULL)
		return (-1);

	/* match */
	SUB(mp, path, ".match");
	m = json_object_get(j, "match");
	if (m == NULL)
		return (fail(pc, mp, "missing required field; add \"match\": "
		    "{\"path\": {\"type\": \"PathPrefix\", \"value\": \"/\"}}"));
	if (check_object(pc, mp, m, match_fields))
		return (-1);
	SUB(p, mp, ".path");
	pj = json_object_get(m, "path");
	if (pj == NULL)
		return (fail(pc, p, "missing required field; add \"path\": "
		    "{\"type\": \"PathPrefix\", \"value\": \"/\"}"));
	if (check_object(pc, p, pj, path_fields) ||
	    get_string(pc, p, pj, "type", 1, 1, 64, &s))
		return (-1);
	if (!strcmp(s, "Exact"))
		r->ptype = GH_PATH_EXACT;
	else if (!strcmp(s, "PathPrefix"))
		r->ptype = GH_PATH_PREFIX;
	else if (!strcmp(s, "RegularExpression"))
		r->ptype = GH_PATH_REGEX;
	else {
		SUB(p, mp, ".path.type");
		return (fail(pc, p, "unknown path match type %s; use "
		    "\"Exact\", \"PathPrefix\" or \"RegularExpression\"",
		    qv(q, sizeof q, s)));
	}
	if (get_string(pc, p, pj, "value", 1, 1, 1024, &s))
		return (-1);
	SUB(p, mp, ".path.value");
	if (r->ptype != GH_PATH_REGEX && s[0] != '/')
		return (fail(pc, p, "path %s does not start with \"/\"; "
		    "write an absolute path such as \"/\" or \"/api\"",
		    qv(q, sizeof q, s)));
	if (r->ptype != GH_PATH_REGEX && (has_ctl(s, 0) ||
	    strpbrk(s, "?#") != NULL))
		return (fail(pc, p, "path %s contains spaces, control "
		    "characters, '?' or '#'; match the path only",
		    qv(q, sizeof q, s)));
	r->pvalue = sdup(pc, p, s);
	if (r->pvalue == NULL)
		return (-1);
	r->plen = r->ptype == GH_PATH_PREFIX ? gh_prefix_len(s) : strlen(s);
	if (r->ptype == GH_PATH_REGEX && load_regex(pc, p, s, &r->pre))
		return (-1);

	if (get_string(pc, mp, m, "method", 0, 1, 16, &s))
		return (-1);
	if (s != NULL) {
		for (mt = methods; *mt != NULL; mt++)
			if (!strcmp(*mt, s))
				break;
		if (*mt == NULL) {
			SUB(p, mp, ".method");
			return (fail(pc, p, "unknown method %s; use one of GET, "
			    "HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, "
			    "PATCH", qv(q, sizeof q, s)));
		}
		r->method = sdup(pc, p, s);
		if (r->method == NULL)
			return (-1);
	}
	if (load_vmatch_list(pc, mp, m, "headers", 1, &r->hdr, &r->nhdr) ||
	    load_vmatch_list(pc, mp, m, "queryParams", 0, &r->qry, &r->nqry))
		return (-1);

	/* filters */
	if (get_array(pc, path, j, "filters", 0, 64, &a))
		return (-1);
	if (a != NULL) {
		nm = 0;
		json_array_foreach(a, i, e)
			if (json_is_object(e) && json_is_string(
			    json_object_get(e, "type")) && !strcmp("RequestMirror",
			    json_string_value(json_object_get(e, "type"))))
				nm++;
		if (nm > 0) {
			r->mirror = zalloc(pc, path, nm, sizeof *r->mirror);
			if (r->mirror == NULL)
				return (-1);
			r->nmirror = nm;
		}
		nmirror = 0;
		json_array_foreach(a, i, e) {
			SUB(p, path, ".filters[%zu]", i);
			if (load_filter(pc, p, e, r, &nmirror))
				return (-1);
		}
		assert(nmirror == r->nmirror);
	}

	/* timeouts */
	SUB(p, path, ".timeouts");
	e = json_object_get(j, "timeouts");
	if (e != NULL) {
		if (check_object(pc, p, e, tmo_fields) ||
		    get_int(pc, p, e, "requestMs", 0, 0, 86400000, 0, &rq) ||
		    get_int(pc, p, e, "backendRequestMs", 0, 0, 86400000, 0,
		    &brq))
			return (-1);
		r->req_tmo = rq / 1000.0;
		if (rq > 0 && (brq == 0 || rq < brq))
			brq = rq;
		r->tmo = brq / 1000.0;
	}

	/* cache policy */
	if (get_string(pc, path, j, "cache", 0, 1, 512, &s))
		return (-1);
	if (s != NULL) {
		SUB(p, path, ".cache");
		r->cache = cache_find(pc, s);
		if (r->cache == NULL)
			return (fail(pc, p, "unknown cache policy %s: the "
			    "top-level \"cachePolicies\" table has no entry "
			    "of that name; add one or fix the name",
			    qv(q, sizeof q, s)));
	}

	/* backends */
	if (get_array(pc, path, j, "backends", 0, 1024, &a))
		return (-1);
	if (a != NULL && json_array_size(a) > 0) {
		r->group = zalloc(pc, path, json_array_size(a),
		    sizeof *r->group);
		if (r->group == NULL)
			return (-1);
		r->ngroup = json_array_size(a);
		json_array_foreach(a, i, e) {
			SUB(p, path, ".backends[%zu]", i);
			if (load_group(pc, p, e, st, r, &r->group[i]))
				return (-1);
			r->wtotal += r->group[i].weight;
		}
	}

	/* retry policy */
	e = json_object_get(j, "retry");
	if (e != NULL) {
		SUB(p, path, ".retry");
		if (load_retry(pc, p, e, r))
			return (-1);
	}

	/* session persistence, which identifies the groups' endpoints */
	e = json_object_get(j, "sessionPersistence");
	if (e != NULL) {
		SUB(p, path, ".sessionPersistence");
		if (load_session(pc, p, e, r))
			return (-1);
	}
	return (0);
}

/* Gateway API precedence; ties keep the file order. */
int
route_cmp(const void *a, const void *b)
{
	const struct gh_route *ra = a, *rb = b;

	if (ra->pgroup != rb->pgroup)
		return (ra->pgroup < rb->pgroup ? -1 : 1);
	if (ra->ptype != rb->ptype)
		return (ra->ptype - rb->ptype);
	if (ra->ptype != GH_PATH_REGEX && ra->plen != rb->plen)
		return (ra->plen > rb->plen ? -1 : 1);
	if ((ra->method != NULL) != (rb->method != NULL))
		return (ra->method != NULL ? -1 : 1);
	if (ra->nhdr != rb->nhdr)
		return (ra->nhdr > rb->nhdr ? -1 : 1);
	if (ra->nqry != rb->nqry)
		return (ra->nqry > rb->nqry ? -1 : 1);
	return (ra->index < rb->index ? -1 : 1);
}
