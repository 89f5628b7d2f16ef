/*
 * The loader's top-level "cachePolicies" table, which routes name.
 */

#include <limits.h>
#include <string.h>

#include <jansson.h>

#include "vdef.h"
#include "vas.h"
#include "miniobj.h"

#include "ghost_state.h"
#include "ghost_load.h"

/* a policy's list of strings: queryParams, keyHeaders, stripCookies */
static int
load_cache_list(struct pc *pc, const char *path, const json_t *j,
    const char *key, size_t maxitems, int header, char ***out, size_t **lens,
    unsigned *n)
{
	json_t *a, *e;
	size_t i;
	const char *s;
	char p[PATHLEN], q[96];

	if (get_array(pc, path, j, key, 0, maxitems, &a))
		return (-1);
	if (a == NULL || json_array_size(a) == 0)
		return (0);
	*out = zalloc(pc, path, json_array_size(a), sizeof **out);
	if (*out == NULL)
		return (-1);
	if (lens != NULL) {
		*lens = zalloc(pc, path, json_array_size(a), sizeof **lens);
		if (*lens == NULL)
			return (-1);
	}
	json_array_foreach(a, i, e) {
		SUB(p, path, ".%s[%zu]", key, i);
		if (want_string(pc, p, e, 1, 256, &s))
			return (-1);
		if (header && !is_lower_token(s))
			return (fail(pc, p, "invalid header name %s; use a "
			    "lower case header name (letters, digits and "
			    "!#$%%&'*+-.^_`|~)", qv(q, sizeof q, s)));
		(*out)[i] = header ? mkhdr(pc, p, s) : sdup(pc, p, s);
		if ((*out)[i] == NULL)
			return (-1);
		if (lens != NULL)
			(*lens)[i] = strlen(s);
		*n = i + 1;
	}
	return (0);
}

static const char * const cache_fields[] = {
	"name", "ttlMs", "forceTtl", "graceMs", "keepMs", "queryKey",
	"queryParams", "keyHeaders", "stripCookies", "allowAuthorization",
	"tagHeader", "statusHeader", NULL};

static const char * const qkeys[] = {"all", "include", "exclude", "none",
	NULL};

static int
load_cache(struct pc *pc, const char *path, const json_t *j,
    struct gh_cache *c)
{
	const char *s;
	char p[PATHLEN], q[96];
	unsigned u;

	if (check_object(pc, path, j, cache_fields) ||
	    get_string(pc, path, j, "name", 1, 1, 512, &s))
		return (-1);
	c->name = sdup(pc, path, s);
	if (c->name == NULL ||
	    get_int(pc, path, j, "ttlMs", 1, 0, LLONG_MAX, 0, &c->ttl_ms) ||
	    get_bool(pc, path, j, "forceTtl", &c->force_ttl) ||
	    get_int(pc, path, j, "graceMs", 0, 0, LLONG_MAX, 0,
	    &c->grace_ms) ||
	    get_int(pc, path, j, "keepMs", 0, 0, LLONG_MAX, 0, &c->keep_ms) ||
	    get_bool(pc, path, j, "allowAuthorization", &c->allow_auth) ||
	    get_string(pc, path, j, "queryKey", 0, 1, 16, &s))
		return (-1);
	c->qkey = GH_QK_ALL;
	if (s != NULL) {
		for (u = 0; qkeys[u] != NULL; u++)
			if (!strcmp(qkeys[u], s))
				break;
		if (qkeys[u] == NULL) {
			SUB(p, path, ".queryKey");
			return (fail(pc, p, "unknown value %s; use \"all\", "
			    "\"include\", \"exclude\" or \"none\"",
			    qv(q, sizeof q, s)));
		}
		c->qkey = (int)u;
	}
	assert(GH_QK_ALL == 0 && GH_QK_INCLUDE == 1 && GH_QK_EXCLUDE == 2 &&
	    GH_QK_NONE == 3);
	if (load_cache_list(pc, path, j, "queryParams", 64, 0, &c->qparam,
	    &c->qplen, &c->nqparam))
		return (-1);
	if (json_object_get(j, "queryParams") != NULL &&
	    c->qkey != GH_QK_INCLUDE && c->qkey != GH_QK_EXCLUDE) {
		SUB(p, path, ".queryParams");
		return (fail(pc, p, "set with queryKey \"%s\"; only "
		    "\"include\" and \"exclude\" use parameter names: remove "
		    "queryParams or set queryKey", qkeys[c->qkey]));
	}
	if (load_cache_list(pc, path, j, "keyHeaders", 16, 1, &c->keyhdr,
	    NULL, &c->nkeyhdr) ||
	    load_cache_list(pc, path, j, "stripCookies", 64, 0, &c->strip,
	    &c->striplen, &c->nstrip))
		return (-1);
	for (u = 0; u < c->nstrip; u++)
		if (!strcmp(c->strip[u], "*"))
			c->strip_all = 1;
	if (get_string(pc, path, j, "tagHeader", 0, 1, 256, &s))
		return (-1);
	if (s != NULL) {
		SUB(p, path, ".tagHeader");
		if (!is_lower_token(s))
			return (fail(pc, p, "invalid header name %s; use a "
			    "lower case header name (letters, digits and "
			    "!#$%%&'*+-.^_`|~)", qv(q, sizeof q, s)));
		c->taghdr = sdup(pc, p, s);
		if (c->taghdr == NULL)
			return (-1);
	}
	if (get_string(pc, path, j, "statusHeader", 0, 1, 256, &s))
		return (-1);
	if (s != NULL) {
		SUB(p, path, ".statusHeader");
		if (!is_lower_token(s))
			return (fail(pc, p, "invalid header name %s; use a "
			    "lower case header name (letters, digits and "
			    "!#$%%&'*+-.^_`|~)", qv(q, sizeof q, s)));
		c->statushdr = sdup(pc, p, s);
		if (c->statushdr == NULL)
			return (-1);
		c->statushdr_h = mkhdr(pc, p, s);
		if (c->statushdr_h == NULL)
			return (-1);
	}
	return (0);
}

/*
 * The optional "cachePolicies" table, and an open-addressing hash of its
 * names for the routes' "cache" (pc->cslot, used during the load only).
 */
int
load_cache_policies(struct pc *pc, const json_t *root, struct gh_state *st)
{
	json_t *a, *e;
	size_t i;
	unsigned sz, h, n;
	char path[PATHLEN], q[96];
	struct gh_cache *c, *o;

	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	if (get_array(pc, "", root, "cachePolicies", 0, 100000, &a))
		return (-1);
	if (a == NULL || json_array_size(a) == 0)
		return (0);
	st->cache = zalloc(pc, "cachePolicies", json_array_size(a),
	    sizeof *st->cache);
	if (st->cache == NULL)
		return (-1);
	for (sz = 8; sz < 2 * json_array_size(a); sz <<= 1)
		continue;
	pc->cslot = zalloc(pc, "cachePolicies", sz, sizeof *pc->cslot);
	if (pc->cslot == NULL)
		return (-1);
	pc->cmask = sz - 1;
	json_array_foreach(a, i, e) {
		c = &st->cache[i];
		c->magic = GH_CACHE_MAGIC;
		c->index = i;
		SUB(path, "cachePolicies", "[%zu]", i);
		if (load_cache(pc, path, e, c))
			return (-1);
		st->ncache = i + 1;
		/* cslot has twice as many slots as entries: one is free */
		h = gh_fnv(GH_FNV0, c->name, strlen(c->name)) & pc->cmask;
		for (n = 0; (o = pc->cslot[h]) != NULL &&
		    strcmp(o->name, c->name); n++) {
			assert(n < pc->cmask);
			h = (h + 1) & pc->cmask;
		}
		if (o != NULL) {
			SUB(path, "cachePolicies", "[%zu].name", i);
			return (fail(pc, path, "duplicate cache policy %s, "
			    "already defined by cachePolicies[%u]; give each "
			    "policy one entry", qv(q, sizeof q, c->name),
			    o->index));
		}
		pc->cslot[h] = c;
	}
	return (0);
}

const struct gh_cache *
cache_find(const struct pc *pc, const char *name)
{
	unsigned h;
	const struct gh_cache *c;

	AN(name);
	if (pc->cslot == NULL)
		return (NULL);
	h = gh_fnv(GH_FNV0, name, strlen(name)) & pc->cmask;
	while ((c = pc->cslot[h]) != NULL) {
		CHECK_OBJ(c, GH_CACHE_MAGIC);
		if (!strcmp(c->name, name))
			return (c);
		h = (h + 1) & pc->cmask;
	}
	return (NULL);
}
