/*
 * The loader's top-level "backends" table, and the references of routes'
 * weighted groups and of mirrors to it.
 */

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include <jansson.h>

#include "vdef.h"
#include "vas.h"
#include "miniobj.h"

#include "ghost_state.h"
#include "ghost_load.h"

static const char * const ep_fields[] = {"address", "port", NULL};

/* a backend's "endpoints": IP address literals and ports */
static int
load_endpoints(struct pc *pc, const char *path, const json_t *j,
    struct gh_backend *b)
{
	const char *s;
	long long ll;
	json_t *a, *e;
	size_t i;
	char p[PATHLEN], q[96];
	struct gh_endpoint *ep;

	if (get_array(pc, path, j, "endpoints", 1, 100000, &a))
		return (-1);
	b->ep = zalloc(pc, path, json_array_size(a), sizeof *b->ep);
	if (b->ep == NULL)
		return (-1);
	b->nep = json_array_size(a);
	json_array_foreach(a, i, e) {
		ep = &b->ep[i];
		SUB(p, path, ".endpoints[%zu]", i);
		if (check_object(pc, p, e, ep_fields) ||
		    get_string(pc, p, e, "address", 1, 2, 45, &s) ||
		    get_int(pc, p, e, "port", 1, 1, 65535, 0, &ll))
			return (-1);
		ep->port = (unsigned)ll;
		SUB(p, path, ".endpoints[%zu].address", i);
		if (inet_pton(AF_INET, s, ep->addr) == 1)
			ep->family = AF_INET;
		else if (inet_pton(AF_INET6, s, ep->addr) == 1)
			ep->family = AF_INET6;
		else
			return (fail(pc, p, "%s is not an IPv4 or IPv6 "
			    "address literal; write e.g. \"10.0.0.1\" or "
			    "\"fd00::1\" (no brackets, no names)",
			    qv(q, sizeof q, s)));
		ep->address = sdup(pc, p, s);
		if (ep->address == NULL)
			return (-1);
	}
	return (0);
}

static const char * const backend_fields[] = {"name", "endpoints",
    "websocket", NULL};

/*
 * The top-level "backends" table, and an open-addressing hash of its
 * names for the routes' references (pc->bslot, used during the load only).
 */
int
load_backends(struct pc *pc, const json_t *root, struct gh_state *st)
{
	json_t *a, *e;
	size_t i;
	unsigned sz, h, n;
	const char *s;
	char path[PATHLEN], q[96];
	struct gh_backend *b, *o;

	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	AZ(st->nendpoint);
	if (get_array(pc, "", root, "backends", 1, 100000, &a))
		return (-1);
	st->backend = zalloc(pc, "backends", json_array_size(a),
	    sizeof *st->backend);
	if (st->backend == NULL)
		return (-1);
	st->nbackend = json_array_size(a);
	for (sz = 8; sz < 2 * st->nbackend; sz <<= 1)
		continue;
	pc->bslot = zalloc(pc, "backends", sz, sizeof *pc->bslot);
	if (pc->bslot == NULL)
		return (-1);
	pc->bmask = sz - 1;
	json_array_foreach(a, i, e) {
		b = &st->backend[i];
		b->magic = GH_BACKEND_MAGIC;
		b->index = i;
		SUB(path, "backends", "[%zu]", i);
		if (check_object(pc, path, e, backend_fields) ||
		    get_string(pc, path, e, "name", 1, 1, 512, &s))
			return (-1);
		/* bslot has twice as many slots as entries: one is free */
		h = gh_fnv(GH_FNV0, s, strlen(s)) & pc->bmask;
		for (n = 0; (o = pc->bslot[h]) != NULL && strcmp(o->name, s);
		    n++) {
			assert(n < pc->bmask);
			h = (h + 1) & pc->bmask;
		}
		if (o != NULL) {
			SUB(path, "backends", "[%zu].name", i);
			return (fail(pc, path, "duplicate backend name %s, "
			    "already defined by backends[%u]; give each "
			    "backend one entry, with all its endpoints",
			    qv(q, sizeof q, s), o->index));
		}
		b->name = sdup(pc, path, s);
		if (b->name == NULL || load_endpoints(pc, path, e, b) ||
		    get_bool(pc, path, e, "websocket", &b->websocket))
			return (-1);
		AN(b->ep);
		pc->bslot[h] = b;
		st->nendpoint += b->nep;
	}
	return (0);
}

static struct gh_backend *
backend_find(const struct pc *pc, const char *name)
{
	unsigned h;
	struct gh_backend *b;

	AN(name);
	AN(pc->bslot);		/* load_backends() ran */
	h = gh_fnv(GH_FNV0, name, strlen(name)) & pc->bmask;
	while ((b = pc->bslot[h]) != NULL) {
		CHECK_OBJ(b, GH_BACKEND_MAGIC);
		if (!strcmp(b->name, name))
			return (b);
		h = (h + 1) & pc->bmask;
	}
	return (NULL);
}

static const struct {
	const char		*name;
	enum gh_unresolved	why;
} unresolved_reasons[] = {
	{"BackendNotFound", GH_UNRESOLVED_NOT_FOUND},
	{"InvalidKind", GH_UNRESOLVED_INVALID_KIND},
	{"RefNotPermitted", GH_UNRESOLVED_NOT_PERMITTED},
	{"UnsupportedProtocol", GH_UNRESOLVED_UNSUPPORTED_PROTOCOL},
	{NULL, GH_RESOLVED}
};

/*
 * A reference to the table, of a weighted group or a mirror: "backend"
 * names a table entry, whose endpoints the group uses; with "unresolved"
 * (the Gateway API reason), the reference has no endpoints and "backend"
 * only names it for logs (it need not be in the table).
 */
int
load_ref(struct pc *pc, const char *path, const json_t *j,
    struct gh_group *g)
{
	const char *name, *why;
	char p[PATHLEN], q[96];
	unsigned u;

	if (get_string(pc, path, j, "backend", 1, 1, 512, &name) ||
	    get_string(pc, path, j, "unresolved", 0, 1, 64, &why))
		return (-1);
	if (why != NULL) {
		for (u = 0; unresolved_reasons[u].name != NULL; u++)
			if (!strcmp(why, unresolved_reasons[u].name))
				break;
		if (unresolved_reasons[u].name == NULL) {
			SUB(p, path, ".unresolved");
			return (fail(pc, p, "unknown reason %s; use "
			    "\"BackendNotFound\", \"InvalidKind\", "
			    "\"RefNotPermitted\" or \"UnsupportedProtocol\", "
			    "or leave the field out for "
			    "a backend of the \"backends\" table",
			    qv(q, sizeof q, why)));
		}
		g->unresolved = unresolved_reasons[u].why;
		g->name = sdup(pc, path, name);
		return (g->name == NULL ? -1 : 0);
	}
	g->backend = backend_find(pc, name);
	if (g->backend == NULL) {
		SUB(p, path, ".backend");
		return (fail(pc, p, "unknown backend %s: the top-level "
		    "\"backends\" table has no entry of that name; add one or "
		    "fix the name (or set \"unresolved\" for a reference "
		    "that has no endpoints)", qv(q, sizeof q, name)));
	}
	CHECK_OBJ(g->backend, GH_BACKEND_MAGIC);
	g->name = g->backend->name;
	g->nep = g->backend->nep;
	g->ep = g->backend->ep;
	return (0);
}

/*
 * The set of the group's backend for the route's timeout, shared with
 * every other route that uses the backend with the same timeout.
 */
static struct gh_bset *
bset_get(struct pc *pc, const char *path, struct gh_state *st,
    const struct gh_group *g, double tmo)
{
	struct gh_backend *b;
	struct gh_bset *bs;

	CAST_OBJ_NOTNULL(b, TRUST_ME(g->backend), GH_BACKEND_MAGIC);
	assert(b->nep > 0);
	for (bs = b->sets; bs != NULL; bs = bs->next) {
		CHECK_OBJ(bs, GH_BSET_MAGIC);
		assert(bs->backend == b);
		if (bs->tmo == tmo)
			return (bs);
	}
	bs = zalloc(pc, path, 1, sizeof *bs);
	if (bs == NULL)
		return (NULL);
	bs->magic = GH_BSET_MAGIC;
	bs->backend = b;
	bs->tmo = tmo;
	bs->be = zalloc(pc, path, b->nep, sizeof *bs->be);
	if (bs->be == NULL)
		return (NULL);
	bs->next = b->sets;
	b->sets = bs;
	bs->all = st->bsets;
	st->bsets = bs;
	st->nbset++;
	return (bs);
}

static const char * const group_fields[] = {
	"backend", "weight", "unresolved", "filters", NULL};
static const char * const group_filter_fields[] = {
	"type", "requestHeaderModifier", NULL};

/*
 * A group's "filters": the filters of its backendRef, applied only when
 * the group is picked. Only RequestHeaderModifier, once.
 */
static int
load_group_filters(struct pc *pc, const char *path, const json_t *j,
    struct gh_group *g)
{
	json_t *a, *e, *c;
	size_t i;
	const char *type;
	char p[PATHLEN], q[96];

	if (get_array(pc, path, j, "filters", 0, 16, &a))
		return (-1);
	if (a == NULL)
		return (0);
	json_array_foreach(a, i, e) {
		SUB(p, path, ".filters[%zu]", i);
		if (!json_is_object(e))
			return (fail(pc, p, "expected an object, got %s; "
			    "write a JSON object {...}", jtype(e)));
		if (get_string(pc, p, e, "type", 1, 1, 64, &type))
			return (-1);
		if (strcmp(type, "RequestHeaderModifier")) {
			SUB(p, path, ".filters[%zu].type", i);
			return (fail(pc, p, "filter type %s is not supported "
			    "on a backend; use RequestHeaderModifier, or move "
			    "the filter to the route", qv(q, sizeof q, type)));
		}
		if (check_object(pc, p, e, group_filter_fields))
			return (-1);
		if (g->reqhdr != NULL)
			return (fail(pc, p, "a second RequestHeaderModifier "
			    "filter on the same backend; the Gateway API "
			    "allows it once per backendRef, merge them"));
		c = json_object_get(e, "requestHeaderModifier");
		SUB(p, path, ".filters[%zu].requestHeaderModifier", i);
		if (c == NULL)
			return (fail(pc, p, "missing required field for a "
			    "RequestHeaderModifier filter; add "
			    "\"requestHeaderModifier\": {...}"));
		if (load_hmod(pc, p, c, &g->reqhdr))
			return (-1);
	}
	return (0);
}

/* a route's weighted group; after the route's filters and timeouts */
int
load_group(struct pc *pc, const char *path, const json_t *j,
    struct gh_state *st, const struct gh_route *r, struct gh_group *g)
{
	long long ll;

	if (check_object(pc, path, j, group_fields) ||
	    load_ref(pc, path, j, g) || load_group_filters(pc, path, j, g))
		return (-1);
	if (get_int(pc, path, j, "weight", 0, 0, 1000000, 1, &ll))
		return (-1);
	g->weight = (unsigned)ll;
	if (g->nep == 0 || (r->filters & GH_FILTER_REDIRECT))
		return (0);	/* no backends: 500, or ignored */
	g->set = bset_get(pc, path, st, g, r->tmo);
	return (g->set == NULL ? -1 : 0);
}
