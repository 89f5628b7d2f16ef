/*
 * ghost.json loader: parse, validate against schema version 2, build an
 * immutable struct gh_state (the backends table, vhost tables per
 * listener, routes sorted in Gateway API precedence order, compiled
 * regexes).
 *
 * Every error names the JSON path of the offending field, the value and
 * the fix. The loader is all-or-nothing: on error the partial state is
 * freed and NULL is returned.
 */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "vdef.h"
#include "vas.h"
#include "miniobj.h"

#include "ghost_state.h"
#include "ghost_load.h"

/*--------------------------------------------------------------------
 * host tables
 */

static int
htab_init(struct pc *pc, struct gh_htab *t, unsigned n)
{
	unsigned sz = 8;

	while (sz < 2 * n)
		sz <<= 1;
	t->slot = zalloc(pc, "vhosts", sz, sizeof *t->slot);
	if (t->slot == NULL)
		return (-1);
	t->mask = sz - 1;
	return (0);
}

static int
htab_add(struct pc *pc, struct gh_htab *t, struct gh_vhost *vh)
{
	uint32_t h;
	unsigned n;
	struct gh_vhost *o = NULL;
	char p[PATHLEN], q[96];

	CHECK_OBJ_NOTNULL(vh, GH_VHOST_MAGIC);
	AN(vh->hostname);
	AN(t->slot);		/* htab_init() ran */
	if (vh->kind == GH_HOST_ANY) {
		o = t->any;
		if (o == NULL)
			t->any = vh;
	} else {
		/* htab_init() sized the table for twice the entries */
		h = gh_fnv(GH_FNV0, vh->hostname, strlen(vh->hostname)) & t->mask;
		for (n = 0; t->slot[h] != NULL &&
		    strcmp(t->slot[h]->hostname, vh->hostname); n++) {
			assert(n < t->mask);
			h = (h + 1) & t->mask;
		}
		o = t->slot[h];
		if (o == NULL) {
			t->slot[h] = vh;
			if (vh->kind == GH_HOST_WILD)
				t->nwild++;
		}
	}
	if (o == NULL)
		return (0);
	SUB(p, "vhosts", "[%u].hostname", vh->index);
	return (fail(pc, p, "duplicate hostname %s on listener %s%s%s, "
	    "already defined by vhosts[%u]; merge the two vhosts or give "
	    "them different listeners", qv(q, sizeof q, vh->hostname),
	    t->socket != NULL ? "\"" : "",
	    t->socket != NULL ? t->socket : "(every listener)",
	    t->socket != NULL ? "\"" : "", o->index));
}

/*--------------------------------------------------------------------
 * top level
 */

static const char * const top_fields[] = {
	"version", "sockets", "backends", "cachePolicies", "escapedSlashes",
	"vhosts", NULL};
static const char * const vhost_fields[] = {
	"hostname", "listeners", "routes", NULL};

static int
load_vhost(struct pc *pc, const json_t *j, struct gh_state *st,
    struct gh_vhost *vh)
{
	char path[PATHLEN], p[PATHLEN], q[96];
	const char *s;
	json_t *a, *e;
	size_t i, kl;
	unsigned u;

	vh->magic = GH_VHOST_MAGIC;
	SUB(path, "vhosts", "[%u]", vh->index);
	if (check_object(pc, path, j, vhost_fields) ||
	    get_string(pc, path, j, "hostname", 1, 1, 253, &s))
		return (-1);
	SUB(p, path, ".hostname");
	if (!is_lower_hostname(s, 1))
		return (fail(pc, p, "%s is not a valid hostname; use a lower "
		    "case DNS name (www.example.com), a wildcard "
		    "(*.example.com) or \"*\"", qv(q, sizeof q, s)));
	vh->hostname = sdup(pc, p, s);
	if (vh->hostname == NULL)
		return (-1);
	vh->kind = !strcmp(s, "*") ? GH_HOST_ANY :
	    s[0] == '*' ? GH_HOST_WILD : GH_HOST_EXACT;

	if (get_array(pc, path, j, "listeners", 0, MAX_SOCKETS, &a))
		return (-1);
	kl = strlen(s) + 2;
	if (a != NULL && json_array_size(a) > 0) {
		vh->listeners = zalloc(pc, path, json_array_size(a),
		    sizeof *vh->listeners);
		if (vh->listeners == NULL)
			return (-1);
		vh->nlisteners = json_array_size(a);
		json_array_foreach(a, i, e) {
			SUB(p, path, ".listeners[%zu]", i);
			if (want_string(pc, p, e, 1, 63, &s))
				return (-1);
			if (!is_socket_name(s))
				return (fail(pc, p, "%s is not a socket name; "
				    "use letters, digits, '-', '_' and '.' "
				    "as in varnishd -a NAME=...",
				    qv(q, sizeof q, s)));
			for (u = 0; u < i; u++)
				if (!strcmp(vh->listeners[u], s))
					return (fail(pc, p, "listener %s is "
					    "listed twice; remove the "
					    "duplicate", qv(q, sizeof q, s)));
			vh->listeners[i] = sdup(pc, p, s);
			if (vh->listeners[i] == NULL)
				return (-1);
			kl += strlen(s) + 1;
		}
	}
	vh->key = salloc(pc, path, kl);
	if (vh->key == NULL)
		return (-1);
	strcpy(vh->key, vh->hostname);
	for (u = 0; u < vh->nlisteners; u++) {
		strcat(vh->key, u == 0 ? "@" : "+");
		strcat(vh->key, vh->listeners[u]);
	}

	if (get_array(pc, path, j, "routes", 1, 100000, &a))
		return (-1);
	if (json_array_size(a) > 0) {
		vh->route = zalloc(pc, path, json_array_size(a),
		    sizeof *vh->route);
		if (vh->route == NULL)
			return (-1);
		vh->nroute = json_array_size(a);
		json_array_foreach(a, i, e) {
			vh->route[i].index = i;
			SUB(p, path, ".routes[%zu]", i);
			if (load_route(pc, p, e, st, &vh->route[i]))
				return (-1);
		}
		qsort(vh->route, vh->nroute, sizeof *vh->route, route_cmp);
		/* matching takes the first route that matches */
		for (u = 1; u < vh->nroute; u++)
			assert(route_cmp(&vh->route[u - 1],
			    &vh->route[u]) < 0);
	}
	st->nroute += vh->nroute;
	return (0);
}

/* reject deep nesting before jansson recurses on a small worker stack */
static int
check_depth(struct pc *pc, const char *buf, size_t len)
{
	size_t i;
	int d = 0, instr = 0;

	for (i = 0; i < len; i++) {
		if (instr) {
			if (buf[i] == '\\')
				i++;
			else if (buf[i] == '"')
				instr = 0;
			continue;
		}
		switch (buf[i]) {
		case '"': instr = 1; break;
		case '[': case '{':
			if (++d > GH_MAX_DEPTH)
				return (fail(pc, "(file)", "JSON nesting "
				    "deeper than %d levels at byte %zu; "
				    "ghost.json is never that deep, check the "
				    "generator", GH_MAX_DEPTH, i));
			break;
		case ']': case '}': d--; break;
		default: break;
		}
	}
	return (0);
}

static int
build_tables(struct pc *pc, struct gh_state *st)
{
	const char *names[MAX_SOCKETS];
	unsigned nn = 0, u, v, w, cnt;
	struct gh_vhost *vh;
	struct gh_htab *t;
	char q[96];

	for (u = 0; u < st->nvhost; u++) {
		vh = &st->vhost[u];
		for (v = 0; v < vh->nlisteners; v++) {
			for (w = 0; w < nn; w++)
				if (!strcmp(names[w], vh->listeners[v]))
					break;
			if (w < nn)
				continue;
			if (nn == MAX_SOCKETS) {
				char p[PATHLEN];
				SUB(p, "vhosts", "[%u].listeners[%u]", u, v);
				return (fail(pc, p, "more than %d distinct "
				    "listener names (at %s); ghost supports %d",
				    MAX_SOCKETS, qv(q, sizeof q,
				    vh->listeners[v]), MAX_SOCKETS));
			}
			names[nn++] = vh->listeners[v];
		}
	}
	if (nn > 0) {
		st->tab = zalloc(pc, "vhosts", nn, sizeof *st->tab);
		if (st->tab == NULL)
			return (-1);
		st->ntab = nn;
	}
	cnt = 0;
	for (u = 0; u < st->nvhost; u++)
		if (st->vhost[u].nlisteners == 0)
			cnt++;
	if (htab_init(pc, &st->deftab, cnt))
		return (-1);
	for (u = 0; u < st->nvhost; u++)
		if (st->vhost[u].nlisteners == 0 &&
		    htab_add(pc, &st->deftab, &st->vhost[u]))
			return (-1);
	for (w = 0; w < nn; w++) {
		t = &st->tab[w];
		t->socket = sdup(pc, "vhosts", names[w]);
		if (t->socket == NULL)
			return (-1);
		if (pc->admin != NULL && !strcmp(pc->admin, t->socket))
			cnt = 0;	/* admin socket: explicit vhosts only */
		else {
			cnt = 0;
			for (u = 0; u < st->nvhost; u++)
				if (st->vhost[u].nlisteners == 0)
					cnt++;
		}
		for (u = 0; u < st->nvhost; u++)
			for (v = 0; v < st->vhost[u].nlisteners; v++)
				if (!strcmp(st->vhost[u].listeners[v],
				    t->socket))
					cnt++;
		if (htab_init(pc, t, cnt))
			return (-1);
		/* explicit first, so duplicates name the later vhost */
		for (u = 0; u < st->nvhost; u++) {
			vh = &st->vhost[u];
			if (vh->nlisteners == 0) {
				if (pc->admin != NULL &&
				    !strcmp(pc->admin, t->socket))
					continue;
			} else {
				for (v = 0; v < vh->nlisteners; v++)
					if (!strcmp(vh->listeners[v],
					    t->socket))
						break;
				if (v == vh->nlisteners)
					continue;
			}
			if (htab_add(pc, t, vh))
				return (-1);
		}
	}
	return (0);
}

/*
 * jansson's document lives in an arena too: jansson allocates through
 * these hooks (set once, process-wide), which use the arena of the load
 * running on this thread and plain malloc everywhere else. The document
 * is never freed object by object: the arena goes back to the pool.
 */
#ifndef GH_ARENA_MALLOC
static __thread struct gh_arena *json_arena;

static void *
json_alloc(size_t n)
{
	if (json_arena != NULL)
		return (gh_arena_alloc(json_arena, n));
	return (malloc(n));
}

static void
json_release(void *p)
{
	if (p == NULL)
		return;
	if (json_arena != NULL && gh_arena_owns(json_arena, p))
		return;
	free(p);
}

static pthread_once_t json_once = PTHREAD_ONCE_INIT;

static void
json_hooks(void)
{
	json_set_alloc_funcs(json_alloc, json_release);
}
#endif

/* "escapedSlashes": "reject" (default: %2F and %5C in a path are a 400)
 * or "keep" (kept escaped, never a separator); ghost_path.c */
static int
load_escaped_slashes(struct pc *pc, const json_t *root, struct gh_state *st)
{
	const char *s;
	char q[96];

	if (get_string(pc, "", root, "escapedSlashes", 0, 1, 16, &s))
		return (-1);
	if (s == NULL || !strcmp(s, "reject"))
		return (0);
	if (!strcmp(s, "keep")) {
		st->keep_escaped_slashes = 1;
		return (0);
	}
	return (fail(pc, "escapedSlashes", "unknown value %s; use "
	    "\"reject\" (a request whose path has %%2F or %%5C is answered "
	    "400) or \"keep\" (they stay escaped)", qv(q, sizeof q, s)));
}

static int
conf_load(struct pc *pc, const char *buf, size_t len,
    struct gh_state **stp, json_t **rootp)
{
	json_t *root, *a, *e;
	json_error_t je;
	struct gh_state *st;
	long long ver;
	size_t i;

	if (check_depth(pc, buf, len))
		return (-1);
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL) {
		(void)fail(pc, "(file)", "invalid JSON at line %d column %d: "
		    "%s; fix the syntax", je.line, je.column, je.text);
		return (-1);
	}
	*rootp = root;
	if (check_object(pc, "(top level)", root, top_fields))
		return (-1);
	if (json_object_get(root, "version") == NULL) {
		(void)fail(pc, "version", "missing required field; add "
		    "\"version\": %d", GH_VERSION);
		return (-1);
	}
	/* one version; another is an error, the router keeps its state */
	e = json_object_get(root, "version");
	if (!json_is_integer(e)) {
		(void)fail(pc, "version", "expected the integer %d, got %s; "
		    "write \"version\": %d", GH_VERSION, jtype(e),
		    GH_VERSION);
		return (-1);
	}
	ver = json_integer_value(e);
	if (ver != GH_VERSION) {
		(void)fail(pc, "version", "unsupported version %lld; this "
		    "build of ghost reads version %d: write \"version\": %d "
		    "(ghost/README.md), or upgrade ghost to the release of "
		    "the chaperone that wrote the file (they ship in one "
		    "image)", ver, GH_VERSION, GH_VERSION);
		return (-1);
	}

	st = zalloc(pc, "(state)", 1, sizeof *st);
	if (st == NULL)
		return (-1);
	*stp = st;
	st->magic = GH_STATE_MAGIC;
	pc->st = st;
	if (load_sockets(pc, root, st))
		return (-1);
	if (load_escaped_slashes(pc, root, st))
		return (-1);
	/* the backends first: routes refer to them by name */
	if (load_backends(pc, root, st))
		return (-1);
	/* and the cache policies: routes name them too */
	if (load_cache_policies(pc, root, st))
		return (-1);
	if (get_array(pc, "", root, "vhosts", 1, 100000, &a))
		return (-1);
	st->vhost = zalloc(pc, "vhosts", json_array_size(a),
	    sizeof *st->vhost);
	if (st->vhost == NULL)
		return (-1);
	st->nvhost = json_array_size(a);
	json_array_foreach(a, i, e) {
		st->vhost[i].index = i;
		if (load_vhost(pc, e, st, &st->vhost[i]))
			return (-1);
	}
	return (build_tables(pc, st));
}

/*
 * The invariants the VMOD relies on in a state gh_conf_load() returns:
 * the pool (ghost_pool.c) walks the sets, the router the groups.
 */
static void
check_state(const struct gh_state *st)
{
	const struct gh_bset *bs;
	const struct gh_route *r;
	const struct gh_group *g;
	unsigned u, v, w, n;
	uint64_t wt;

	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	assert(st->refcnt == 0);
	for (u = 0; u < st->nsock; u++) {
		CHECK_OBJ(&st->sock[u], GH_SOCK_MAGIC);
		AN(st->sock[u].name);
		for (v = 0; v < st->sock[u].nlistener; v++) {
			AN(st->sock[u].listener[v].name);
			AN(st->sock[u].listener[v].hostname);
			assert(st->sock[u].listener[v].hlen > 0);
		}
	}
	for (n = 0, bs = st->bsets; bs != NULL; bs = bs->all, n++) {
		CHECK_OBJ(bs, GH_BSET_MAGIC);
		CHECK_OBJ_NOTNULL(bs->backend, GH_BACKEND_MAGIC);
		assert(bs->backend->nep > 0);
		AN(bs->be);
	}
	assert(n == st->nbset);
	for (u = 0; u < st->ncache; u++) {
		CHECK_OBJ(&st->cache[u], GH_CACHE_MAGIC);
		AN(st->cache[u].name);
		assert(st->cache[u].qkey >= GH_QK_ALL &&
		    st->cache[u].qkey <= GH_QK_NONE);
		assert(st->cache[u].nqparam == 0 ||
		    st->cache[u].qkey == GH_QK_INCLUDE ||
		    st->cache[u].qkey == GH_QK_EXCLUDE);
	}
	for (u = 0; u < st->nvhost; u++) {
		CHECK_OBJ(&st->vhost[u], GH_VHOST_MAGIC);
		for (v = 0; v < st->vhost[u].nroute; v++) {
			r = &st->vhost[u].route[v];
			CHECK_OBJ(r, GH_ROUTE_MAGIC);
			assert(r->nmirror == 0 || (r->filters &
			    GH_FILTER_MIRROR));
			if (r->filters & GH_FILTER_CORS) {
				CHECK_OBJ_NOTNULL(r->cors, GH_CORS_MAGIC);
				assert(r->cors->norigin == 0 ||
				    !r->cors->origin_any);
			} else
				AZ(r->cors);
			for (wt = 0, w = 0; w < r->ngroup; w++) {
				g = &r->group[w];
				wt += g->weight;
				/* unresolved: no backend, no endpoints */
				assert(g->unresolved == GH_RESOLVED ||
				    (g->backend == NULL && g->nep == 0));
				if (g->set == NULL)
					continue;
				/* a set only where the route sends */
				assert(!(r->filters & GH_FILTER_REDIRECT));
				assert(g->set->backend == g->backend);
				assert(g->set->tmo == r->tmo);
				assert(g->nep == g->backend->nep);
			}
			assert(wt == r->wtotal);
			if (r->cache != NULL)
				CHECK_OBJ(r->cache, GH_CACHE_MAGIC);
			for (w = 0; w < r->nmirror; w++)
				AZ(r->mirror[w].group.set);
		}
	}
}

struct gh_state *
gh_conf_load(const char *buf, size_t len, const char *admin,
    struct gh_chunkpool *cp, char *err, size_t errlen)
{
	struct pc pc[1];
	struct gh_arena sa, ja;
	struct gh_state *st;
	json_t *root = NULL;
	int i;

	pc->err = err;
	pc->errlen = errlen;
	pc->admin = admin;
	pc->arena = &sa;
	pc->st = NULL;
	pc->bslot = NULL;
	pc->bmask = 0;
	pc->cslot = NULL;
	pc->cmask = 0;
	err[0] = '\0';

	if (len > GH_MAX_FILE) {
		(void)fail(pc, "(file)", "file is %zu bytes; the maximum is "
		    "%d bytes", len, GH_MAX_FILE);
		return (NULL);
	}
#ifndef GH_ARENA_MALLOC
	(void)pthread_once(&json_once, json_hooks);
#endif
	memset(&sa, 0, sizeof sa);
	memset(&ja, 0, sizeof ja);
	sa.pool = cp;
	ja.pool = cp;
	st = NULL;
#ifndef GH_ARENA_MALLOC
	json_arena = &ja;
	i = conf_load(pc, buf, len, &st, &root);
	json_arena = NULL;
#else
	i = conf_load(pc, buf, len, &st, &root);
	if (root != NULL)
		json_decref(root);
#endif
	if (i == 0) {
		check_state(st);
		/* keep enough chunks for the next load of this size */
		if (cp != NULL)
			gh_chunkpool_keep(cp, sa.nchunk + ja.nchunk);
		gh_arena_release(&ja);
		st->arena = sa;
		return (st);
	}
	gh_arena_release(&ja);
	if (st != NULL) {
		st->arena = sa;
		gh_state_free(st);
	} else
		gh_arena_release(&sa);
	if (err[0] == '\0')
		(void)snprintf(err, errlen, "(file): rejected");
	return (NULL);
}

/*--------------------------------------------------------------------
 * free: the compiled regexes, then the arena with everything else
 */

static void
free_vmatch(struct gh_vmatch *m, unsigned n)
{
	unsigned u;

	for (u = 0; m != NULL && u < n; u++)
		if (m[u].re != NULL)
			gh_re_free(&m[u].re);
}

void
gh_state_free(struct gh_state *st)
{
	struct gh_arena a;
	struct gh_route *r;
	unsigned u, v;

	if (st == NULL)
		return;
	for (u = 0; st->vhost != NULL && u < st->nvhost; u++) {
		for (v = 0; st->vhost[u].route != NULL &&
		    v < st->vhost[u].nroute; v++) {
			r = &st->vhost[u].route[v];
			if (r->pre != NULL)
				gh_re_free(&r->pre);
			free_vmatch(r->hdr, r->nhdr);
			free_vmatch(r->qry, r->nqry);
		}
	}
	a = st->arena;		/* st lives in its own arena */
	gh_arena_release(&a);
}
