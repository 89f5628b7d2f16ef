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

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <jansson.h>

#include "vdef.h"
#include "vas.h"
#include "miniobj.h"

#include "ghost_state.h"

struct pc {
	char		*err;
	size_t		errlen;
	const char	*admin;
	struct gh_arena	*arena;		/* the state's */
	struct gh_state	*st;		/* being built */
	struct gh_backend **bslot;	/* the backends by name */
	unsigned	bmask;		/* size of bslot - 1 */
	struct gh_cache	**cslot;	/* the cache policies by name */
	unsigned	cmask;		/* size of cslot - 1 */
};

#define PATHLEN 384

/*--------------------------------------------------------------------
 * error helpers
 */

static int __attribute__((format(printf, 3, 4)))
fail(struct pc *pc, const char *path, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(pc->err, pc->errlen, "%s: ", path);
	if (n < 0 || (size_t)n >= pc->errlen)
		return (-1);
	va_start(ap, fmt);
	(void)vsnprintf(pc->err + n, pc->errlen - n, fmt, ap);
	va_end(ap);
	return (-1);
}

/* quote a value for an error message, truncated, control chars escaped */
static const char *
qv(char *buf, size_t len, const char *s)
{
	size_t o = 0;

	if (len < 8)
		return ("");
	buf[o++] = '"';
	for (; *s != '\0' && o + 9 < len; s++) {
		if ((unsigned char)*s < 0x20 || *s == '"' || *s == '\\') {
			o += snprintf(buf + o, len - o, "\\x%02x",
			    (unsigned char)*s);
		} else
			buf[o++] = *s;
	}
	if (*s != '\0') {
		buf[o++] = '.';
		buf[o++] = '.';
		buf[o++] = '.';
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return (buf);
}

static const char *
jtype(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT: return ("an object");
	case JSON_ARRAY: return ("an array");
	case JSON_STRING: return ("a string");
	case JSON_INTEGER: return ("an integer");
	case JSON_REAL: return ("a number with a fraction");
	case JSON_TRUE: case JSON_FALSE: return ("a boolean");
	case JSON_NULL: return ("null");
	default: return ("unknown");
	}
}

/* buf = parent + formatted suffix; memcpy, not "%s", for the parent */
#define SUB(buf, parent, ...) do {					\
		size_t _l = strlen(parent);				\
		if (_l >= sizeof buf)					\
			_l = sizeof buf - 1;				\
		memcpy(buf, parent, _l);				\
		(void)snprintf(buf + _l, sizeof buf - _l, __VA_ARGS__);	\
	} while (0)

/* the path of a field, built only when needed (errors) */
static const char *
fpath(char *buf, size_t len, const char *parent, const char *key)
{
	if (*parent == '\0')
		(void)snprintf(buf, len, "%s", key);
	else
		(void)snprintf(buf, len, "%s.%s", parent, key);
	return (buf);
}

/*--------------------------------------------------------------------
 * typed field access
 */

static int
check_object(struct pc *pc, const char *path, const json_t *j,
    const char * const *allowed)
{
	const char *key;
	json_t *v;
	const char * const *a;
	char q[96];

	if (!json_is_object(j))
		return (fail(pc, path, "expected an object, got %s; "
		    "write a JSON object {...}", jtype(j)));
	json_object_foreach((json_t *)j, key, v) {
		for (a = allowed; *a != NULL; a++)
			if (!strcmp(*a, key))
				break;
		if (*a == NULL)
			return (fail(pc, path, "unknown field %s; remove it "
			    "(allowed fields are listed in ghost.schema.json)",
			    qv(q, sizeof q, key)));
	}
	(void)v;
	return (0);
}

static int
want_string(struct pc *pc, const char *path, const json_t *v,
    size_t minlen, size_t maxlen, const char **out)
{
	size_t l;

	if (!json_is_string(v))
		return (fail(pc, path, "expected a string, got %s; "
		    "write a JSON string", jtype(v)));
	l = json_string_length(v);
	if (strlen(json_string_value(v)) != l)
		return (fail(pc, path, "contains a NUL character; "
		    "remove it"));
	if (l < minlen)
		return (fail(pc, path, "is empty; give a value of at least "
		    "%zu character(s)", minlen));
	if (l > maxlen)
		return (fail(pc, path, "is %zu characters long; the maximum "
		    "is %zu, shorten it", l, maxlen));
	*out = json_string_value(v);
	return (0);
}

static int
get_string(struct pc *pc, const char *parent, const json_t *obj,
    const char *key, int required, size_t minlen, size_t maxlen,
    const char **out)
{
	char path[PATHLEN];
	json_t *v;
	size_t l;

	*out = NULL;
	v = json_object_get(obj, key);
	if (v == NULL) {
		if (required)
			return (fail(pc, fpath(path, sizeof path, parent, key),
			    "missing required field; add \"%s\"", key));
		return (0);
	}
	if (json_is_string(v)) {
		/* fast path, no path formatting */
		l = json_string_length(v);
		if (l >= minlen && l <= maxlen &&
		    strlen(json_string_value(v)) == l) {
			*out = json_string_value(v);
			return (0);
		}
	}
	return (want_string(pc, fpath(path, sizeof path, parent, key), v,
	    minlen, maxlen, out));
}

static int
get_int(struct pc *pc, const char *parent, const json_t *obj,
    const char *key, int required, long long min, long long max,
    long long dflt, long long *out)
{
	char path[PATHLEN];
	json_t *v;
	long long i;

	*out = dflt;
	v = json_object_get(obj, key);
	if (v == NULL) {
		if (required)
			return (fail(pc, fpath(path, sizeof path, parent, key),
			    "missing required field; add \"%s\" (an integer "
			    "from %lld to %lld)", key, min, max));
		return (0);
	}
	if (!json_is_integer(v))
		return (fail(pc, fpath(path, sizeof path, parent, key),
		    "expected an integer, got %s; write an integer from %lld "
		    "to %lld", jtype(v), min, max));
	i = json_integer_value(v);
	if (i < min || i > max)
		return (fail(pc, fpath(path, sizeof path, parent, key),
		    "value %lld is out of range; use an integer from %lld to "
		    "%lld", i, min, max));
	*out = i;
	return (0);
}

static int
get_bool(struct pc *pc, const char *parent, const json_t *obj,
    const char *key, int *out)
{
	char path[PATHLEN];
	json_t *v;

	*out = 0;
	v = json_object_get(obj, key);
	if (v == NULL)
		return (0);
	if (!json_is_boolean(v))
		return (fail(pc, fpath(path, sizeof path, parent, key),
		    "expected a boolean, got %s; write true or false",
		    jtype(v)));
	*out = json_is_true(v);
	return (0);
}

static int
get_array(struct pc *pc, const char *parent, const json_t *obj,
    const char *key, int required, size_t maxitems, json_t **out)
{
	char path[PATHLEN];
	json_t *v;

	*out = NULL;
	v = json_object_get(obj, key);
	if (v == NULL) {
		if (required)
			return (fail(pc, fpath(path, sizeof path, parent, key),
			    "missing required field; add \"%s\": [...]", key));
		return (0);
	}
	if (!json_is_array(v))
		return (fail(pc, fpath(path, sizeof path, parent, key),
		    "expected an array, got %s; write a JSON array [...]",
		    jtype(v)));
	if (json_array_size(v) > maxitems)
		return (fail(pc, fpath(path, sizeof path, parent, key),
		    "has %zu items; the maximum is %zu", json_array_size(v),
		    maxitems));
	*out = v;
	return (0);
}

/* state memory: from the state's arena, freed with the state */
static void *
salloc(struct pc *pc, const char *path, size_t n)
{
	void *p;

	p = gh_arena_alloc(pc->arena, n);
	if (p == NULL)
		(void)fail(pc, path, "out of memory");
	return (p);
}

static char *
sdup(struct pc *pc, const char *path, const char *s)
{
	size_t l = strlen(s) + 1;
	char *p;

	p = salloc(pc, path, l);
	if (p != NULL)
		memcpy(p, s, l);
	return (p);
}

static void *
zalloc(struct pc *pc, const char *path, size_t n, size_t sz)
{
	void *p;

	if (n == 0)
		n = 1;
	if (sz != 0 && n > SIZE_MAX / sz) {
		(void)fail(pc, path, "out of memory");
		return (NULL);
	}
	p = salloc(pc, path, n * sz);
	if (p != NULL)
		memset(p, 0, n * sz);
	return (p);
}

/* FNV-1a, for the hash tables of backend names and hostnames */
static uint32_t
fnv(uint32_t h, const char *s, size_t l)
{
	while (l-- > 0) {
		h ^= (unsigned char)*s++;
		h *= 16777619U;
	}
	return (h);
}
#define FNV0	2166136261U

/*--------------------------------------------------------------------
 * syntax checks
 */

static int
is_lower_hostname(const char *s, int allow_wild)
{
	const char *l;

	if (allow_wild && !strcmp(s, "*"))
		return (1);
	if (allow_wild && s[0] == '*' && s[1] == '.')
		s += 2;
	for (;;) {
		l = s;
		while (islower((unsigned char)*s) || isdigit((unsigned char)*s)
		    || *s == '-')
			s++;
		if (s == l || *l == '-' || s[-1] == '-')
			return (0);
		if (*s == '\0')
			return (1);
		if (*s != '.')
			return (0);
		s++;
	}
}

static int
is_redirect_host(const char *s)
{
	for (; *s != '\0'; s++)
		if (!isalnum((unsigned char)*s) && *s != '.' && *s != '-')
			return (0);
	return (1);
}

static int
is_socket_name(const char *s)
{
	if (!isalnum((unsigned char)*s))
		return (0);
	for (s++; *s != '\0'; s++)
		if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' &&
		    *s != '.')
			return (0);
	return (1);
}

static int
is_token(const char *s)
{
	if (*s == '\0')
		return (0);
	for (; *s != '\0'; s++)
		if (!isalnum((unsigned char)*s) &&
		    strchr("!#$%&'*+-.^_`|~", *s) == NULL)
			return (0);
	return (1);
}

static int
has_ctl(const char *s, int space_ok)
{
	for (; *s != '\0'; s++) {
		if ((unsigned char)*s < 0x20 && !(space_ok && *s == '\t'))
			return (1);
		if (*s == 0x7f || (!space_ok && *s == ' '))
			return (1);
	}
	return (0);
}

/* hdr_t for http_GetHdr() and friends: "\<len>name:" */
static char *
mkhdr(struct pc *pc, const char *path, const char *name)
{
	size_t l = strlen(name);
	char *p;

	if (l > 254) {
		(void)fail(pc, path, "header name is %zu characters long; "
		    "ghost handles header names up to 254 characters", l);
		return (NULL);
	}
	p = salloc(pc, path, l + 3);
	if (p == NULL)
		return (NULL);
	p[0] = (char)(l + 1);
	memcpy(p + 1, name, l);
	p[l + 1] = ':';
	p[l + 2] = '\0';
	return (p);
}

size_t
gh_prefix_len(const char *value)
{
	size_t l = strlen(value);

	while (l > 0 && value[l - 1] == '/')
		l--;
	return (l);
}

/*--------------------------------------------------------------------
 * route parts
 */

static int
load_regex(struct pc *pc, const char *path, const char *pat, struct vre **re)
{
	char e[256], q[96];

	if (gh_re_compile(pat, re, e, sizeof e))
		return (fail(pc, path, "invalid regular expression %s: %s; "
		    "fix the pattern (PCRE2 syntax, matched against the "
		    "whole value)", qv(q, sizeof q, pat), e));
	return (0);
}

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

static const char * const hval_fields[] = {"name", "value", NULL};
static const char * const hmod_fields[] = {"set", "add", "remove", NULL};

static int
load_hval_list(struct pc *pc, const char *path, const json_t *j,
    const char *key, struct gh_hval **out, unsigned *n)
{
	json_t *a, *e;
	size_t i;
	const char *name, *value;
	char p[PATHLEN], q[96];

	if (get_array(pc, path, j, key, 0, 16, &a))
		return (-1);
	if (a == NULL)
		return (0);
	*out = zalloc(pc, path, json_array_size(a), sizeof **out);
	if (*out == NULL)
		return (-1);
	*n = json_array_size(a);
	json_array_foreach(a, i, e) {
		SUB(p, path, ".%s[%zu]", key, i);
		if (check_object(pc, p, e, hval_fields) ||
		    get_string(pc, p, e, "name", 1, 1, 256, &name) ||
		    get_string(pc, p, e, "value", 1, 0, 4096, &value))
			return (-1);
		if (!is_token(name)) {
			SUB(p, path, ".%s[%zu].name", key, i);
			return (fail(pc, p, "invalid header name %s; use only "
			    "letters, digits and !#$%%&'*+-.^_`|~",
			    qv(q, sizeof q, name)));
		}
		if (has_ctl(value, 1)) {
			SUB(p, path, ".%s[%zu].value", key, i);
			return (fail(pc, p, "header value %s contains control "
			    "characters (CR, LF, ...); remove them",
			    qv(q, sizeof q, value)));
		}
		(*out)[i].hdr = mkhdr(pc, p, name);
		if ((*out)[i].hdr == NULL)
			return (-1);
		(*out)[i].line = salloc(pc, p, strlen(name) + strlen(value) +
		    3);
		if ((*out)[i].line == NULL)
			return (-1);
		sprintf((*out)[i].line, "%s: %s", name, value);
	}
	return (0);
}

static int
load_hmod(struct pc *pc, const char *path, const json_t *j,
    struct gh_hmod **out)
{
	struct gh_hmod *h;
	json_t *a, *e;
	size_t i;
	const char *name;
	char p[PATHLEN], q[96];

	if (check_object(pc, path, j, hmod_fields))
		return (-1);
	h = zalloc(pc, path, 1, sizeof *h);
	if (h == NULL)
		return (-1);
	*out = h;
	if (load_hval_list(pc, path, j, "set", &h->set, &h->nset) ||
	    load_hval_list(pc, path, j, "add", &h->add, &h->nadd) ||
	    get_array(pc, path, j, "remove", 0, 16, &a))
		return (-1);
	if (a == NULL)
		return (0);
	h->remove = zalloc(pc, path, json_array_size(a), sizeof *h->remove);
	if (h->remove == NULL)
		return (-1);
	h->nremove = json_array_size(a);
	json_array_foreach(a, i, e) {
		SUB(p, path, ".remove[%zu]", i);
		if (want_string(pc, p, e, 1, 256, &name))
			return (-1);
		if (!is_token(name))
			return (fail(pc, p, "invalid header name %s; use only "
			    "letters, digits and !#$%%&'*+-.^_`|~",
			    qv(q, sizeof q, name)));
		h->remove[i] = mkhdr(pc, p, name);
		if (h->remove[i] == NULL)
			return (-1);
	}
	return (0);
}

static const char * const pmod_fields[] = {"type", "value", NULL};

static int
load_pathmod(struct pc *pc, const char *path, const json_t *j,
    const struct gh_route *r, struct gh_pathmod *pm)
{
	const char *type, *value;
	char p[PATHLEN], q[96];

	if (check_object(pc, path, j, pmod_fields) ||
	    get_string(pc, path, j, "type", 1, 1, 64, &type) ||
	    get_string(pc, path, j, "value", 1, 0, 1024, &value))
		return (-1);
	SUB(p, path, ".type");
	if (!strcmp(type, "ReplaceFullPath"))
		pm->type = GH_PMOD_FULL;
	else if (!strcmp(type, "ReplacePrefixMatch")) {
		pm->type = GH_PMOD_PREFIX;
		if (r->ptype != GH_PATH_PREFIX)
			return (fail(pc, p, "ReplacePrefixMatch needs a "
			    "PathPrefix path match; change the match type to "
			    "PathPrefix or use ReplaceFullPath"));
	} else
		return (fail(pc, p, "unknown path modifier %s; use "
		    "\"ReplaceFullPath\" or \"ReplacePrefixMatch\"",
		    qv(q, sizeof q, type)));
	SUB(p, path, ".value");
	if (value[0] != '\0' && value[0] != '/')
		return (fail(pc, p, "path %s does not start with \"/\"; "
		    "write an absolute path", qv(q, sizeof q, value)));
	if (has_ctl(value, 0) || strpbrk(value, "?#") != NULL)
		return (fail(pc, p, "path %s contains spaces, control "
		    "characters, '?' or '#'; remove them",
		    qv(q, sizeof q, value)));
	pm->value = sdup(pc, p, value);
	if (pm->value == NULL)
		return (-1);
	pm->vlen = pm->type == GH_PMOD_PREFIX ?
	    gh_prefix_len(value) : strlen(value);
	return (0);
}

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
static int
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
		h = fnv(FNV0, s, strlen(s)) & pc->bmask;
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
	h = fnv(FNV0, name, strlen(name)) & pc->bmask;
	while ((b = pc->bslot[h]) != NULL) {
		CHECK_OBJ(b, GH_BACKEND_MAGIC);
		if (!strcmp(b->name, name))
			return (b);
		h = (h + 1) & pc->bmask;
	}
	return (NULL);
}

/*--------------------------------------------------------------------
 * the top-level "cachePolicies" table
 */

static int
is_lower_token(const char *s)
{
	if (!is_token(s))
		return (0);
	for (; *s != '\0'; s++)
		if (isupper((unsigned char)*s))
			return (0);
	return (1);
}

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
static int
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
		h = fnv(FNV0, c->name, strlen(c->name)) & pc->cmask;
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

static const struct gh_cache *
cache_find(const struct pc *pc, const char *name)
{
	unsigned h;
	const struct gh_cache *c;

	AN(name);
	if (pc->cslot == NULL)
		return (NULL);
	h = fnv(FNV0, name, strlen(name)) & pc->cmask;
	while ((c = pc->cslot[h]) != NULL) {
		CHECK_OBJ(c, GH_CACHE_MAGIC);
		if (!strcmp(c->name, name))
			return (c);
		h = (h + 1) & pc->cmask;
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
static int
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
static int
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

static const char * const redirect_fields[] = {
	"scheme", "hostname", "port", "path", "statusCode", NULL};
static const char * const rewrite_fields[] = {"hostname", "path", NULL};
static const char * const mirror_fields[] = {
	"backend", "unresolved", "percent", NULL};

static const struct filter_type {
	const char		*type;		/* "type" in the file */
	const char		*key;		/* its config object */
	enum gh_filter		bit;
} filter_types[] = {
	{"RequestHeaderModifier", "requestHeaderModifier", GH_FILTER_REQHDR},
	{"ResponseHeaderModifier", "responseHeaderModifier", GH_FILTER_RESPHDR},
	{"RequestRedirect", "requestRedirect", GH_FILTER_REDIRECT},
	{"URLRewrite", "urlRewrite", GH_FILTER_REWRITE},
	{"RequestMirror", "requestMirror", GH_FILTER_MIRROR},
	{"CORS", "cors", GH_FILTER_CORS},
	{NULL, NULL, 0}
};

static const char * const methods[] = {
	"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS",
	"TRACE", "PATCH", NULL};

static const char * const cors_fields[] = {
	"allowOrigins", "allowMethods", "allowHeaders", "exposeHeaders",
	"allowCredentials", "maxAge", NULL};

/*
 * An allowed origin: "*" (handled by the caller), or scheme://host[:port]
 * with scheme http or https and a lower-case host that may be "*" or
 * start with "*.".
 */
static int
load_cors_origin(struct pc *pc, const char *path, const char *s,
    struct gh_cors_origin *o)
{
	const char *h, *colon;
	char host[254], q[96];
	size_t l;
	long port;
	char *end;

	if (!strncmp(s, "https://", 8)) {
		o->https = 1;
		h = s + 8;
	} else if (!strncmp(s, "http://", 7)) {
		h = s + 7;
	} else
		return (fail(pc, path, "origin %s has no scheme http:// or "
		    "https://; write scheme://host[:port], or \"*\" alone",
		    qv(q, sizeof q, s)));
	colon = strchr(h, ':');
	l = colon != NULL ? (size_t)(colon - h) : strlen(h);
	if (l == 0 || l >= sizeof host)
		return (fail(pc, path, "origin %s has no host, or one longer "
		    "than 253 characters; write scheme://host[:port]",
		    qv(q, sizeof q, s)));
	memcpy(host, h, l);
	host[l] = '\0';
	if (!is_lower_hostname(host, 1))
		return (fail(pc, path, "origin %s: host %s is not a lower-case "
		    "host name (\"*.\" allowed in front, or \"*\" alone); "
		    "write scheme://host[:port]", qv(q, sizeof q, s), host));
	o->port = o->https ? 443 : 80;
	if (colon != NULL) {
		errno = 0;
		port = strtol(colon + 1, &end, 10);
		if (!isdigit((unsigned char)colon[1]) || *end != '\0' ||
		    errno != 0 || port < 1 || port > 65535)
			return (fail(pc, path, "origin %s: the port is not a "
			    "number from 1 to 65535; fix it or leave it out "
			    "(80 for http, 443 for https)", qv(q, sizeof q, s)));
		o->port = (unsigned)port;
	}
	if (!strcmp(host, "*")) {
		o->host_any = 1;
		return (0);
	}
	if (host[0] == '*') {
		o->host_wild = 1;
		o->host = sdup(pc, path, host + 1);	/* ".suffix" */
	} else
		o->host = sdup(pc, path, host);
	if (o->host == NULL)
		return (-1);
	o->hlen = strlen(o->host);
	return (0);
}

/*
 * A list of a CORS filter as a response header value ("a, b"): each item
 * a token (methods: a method name), or the single "*" (*any set, *out
 * NULL).
 */
static int
load_cors_list(struct pc *pc, const char *path, const json_t *j,
    const char *key, size_t maxitems, int method, int *any, char **out)
{
	json_t *a, *e;
	size_t i, len = 0;
	const char *v;
	const char * const *mt;
	char p[PATHLEN], q[96];

	*any = 0;
	*out = NULL;
	if (get_array(pc, path, j, key, 0, maxitems, &a))
		return (-1);
	if (a == NULL || json_array_size(a) == 0)
		return (0);
	json_array_foreach(a, i, e) {
		SUB(p, path, ".%s[%zu]", key, i);
		if (want_string(pc, p, e, 1, 256, &v))
			return (-1);
		if (!strcmp(v, "*")) {
			if (json_array_size(a) > 1)
				return (fail(pc, p, "\"*\" alongside other "
				    "values; keep it alone or remove it"));
			*any = 1;
			return (0);
		}
		if (method) {
			for (mt = methods; *mt != NULL; mt++)
				if (!strcmp(*mt, v))
					break;
			if (*mt == NULL)
				return (fail(pc, p, "unknown method %s; use one "
				    "of GET, HEAD, POST, PUT, DELETE, CONNECT, "
				    "OPTIONS, TRACE, PATCH, or \"*\" alone",
				    qv(q, sizeof q, v)));
		} else if (!is_token(v))
			return (fail(pc, p, "invalid header name %s; use only "
			    "letters, digits and !#$%%&'*+-.^_`|~, or \"*\" "
			    "alone", qv(q, sizeof q, v)));
		len += strlen(v) + 2;
	}
	SUB(p, path, ".%s", key);
	*out = salloc(pc, p, len);
	if (*out == NULL)
		return (-1);
	(*out)[0] = '\0';
	json_array_foreach(a, i, e) {
		if (i > 0)
			strcat(*out, ", ");
		strcat(*out, json_string_value(e));
	}
	return (0);
}

static int
load_cors(struct pc *pc, const char *path, const json_t *j,
    struct gh_cors **out)
{
	struct gh_cors *c;
	json_t *a, *e;
	size_t i;
	const char *v;
	long long ll;
	int any;
	char p[PATHLEN];

	if (check_object(pc, path, j, cors_fields))
		return (-1);
	c = zalloc(pc, path, 1, sizeof *c);
	if (c == NULL)
		return (-1);
	c->magic = GH_CORS_MAGIC;
	*out = c;
	if (get_array(pc, path, j, "allowOrigins", 0, 64, &a))
		return (-1);
	if (a != NULL && json_array_size(a) > 0) {
		c->origin = zalloc(pc, path, json_array_size(a),
		    sizeof *c->origin);
		if (c->origin == NULL)
			return (-1);
		json_array_foreach(a, i, e) {
			SUB(p, path, ".allowOrigins[%zu]", i);
			if (want_string(pc, p, e, 1, 300, &v))
				return (-1);
			if (!strcmp(v, "*")) {
				if (json_array_size(a) > 1)
					return (fail(pc, p, "\"*\" alongside "
					    "other origins; \"*\" allows every "
					    "origin, keep it alone or remove "
					    "it"));
				c->origin_any = 1;
				continue;
			}
			if (load_cors_origin(pc, p, v, &c->origin[i]))
				return (-1);
			c->norigin++;
		}
	}
	if (load_cors_list(pc, path, j, "allowMethods", 9, 1, &c->method_any,
	    &c->methods) ||
	    load_cors_list(pc, path, j, "allowHeaders", 64, 0, &c->header_any,
	    &c->headers) ||
	    load_cors_list(pc, path, j, "exposeHeaders", 64, 0, &any,
	    &c->expose) ||
	    get_bool(pc, path, j, "allowCredentials", &c->credentials) ||
	    get_int(pc, path, j, "maxAge", 0, 0, INT32_MAX, 5, &ll))
		return (-1);
	if (any) {
		SUB(p, path, ".exposeHeaders");
		c->expose = sdup(pc, p, "*");
		if (c->expose == NULL)
			return (-1);
	}
	c->max_age = ll > 0 ? (unsigned)ll : 5;
	return (0);
}

static int
load_filter(struct pc *pc, const char *path, const json_t *j,
    struct gh_route *r, unsigned *nmirror)
{
	const char *type, *s, *key;
	const char *allowed[3] = {"type", NULL, NULL};
	const struct filter_type *ft;
	char p[PATHLEN], q[96];
	json_t *c;
	long long ll;
	struct gh_mirror *mi;

	if (!json_is_object(j))
		return (fail(pc, path, "expected an object, got %s; "
		    "write a JSON object {...}", jtype(j)));
	if (get_string(pc, path, j, "type", 1, 1, 64, &type))
		return (-1);
	for (ft = filter_types; ft->type != NULL; ft++)
		if (!strcmp(type, ft->type))
			break;
	if (ft->type == NULL) {
		SUB(p, path, ".type");
		return (fail(pc, p, "unknown filter type %s; use one of "
		    "RequestHeaderModifier, ResponseHeaderModifier, "
		    "RequestRedirect, URLRewrite, RequestMirror, CORS",
		    qv(q, sizeof q, type)));
	}
	key = ft->key;
	allowed[1] = key;
	if (check_object(pc, path, j, allowed))
		return (-1);
	SUB(p, path, ".%s", key);
	c = json_object_get(j, key);
	if (c == NULL)
		return (fail(pc, p, "missing required field for a %s "
		    "filter; add \"%s\": {...}", type, key));
	if ((r->filters & ft->bit) && ft->bit != GH_FILTER_MIRROR)
		return (fail(pc, path, "a second %s filter in the same "
		    "route; the Gateway API allows it once per rule, merge "
		    "them", type));
	r->filters |= ft->bit;
	if ((r->filters & GH_FILTER_REDIRECT) &&
	    (r->filters & GH_FILTER_REWRITE))
		return (fail(pc, path, "RequestRedirect and URLRewrite "
		    "cannot be combined in one rule; keep one of them"));

	switch (ft->bit) {
	case GH_FILTER_REQHDR:
		return (load_hmod(pc, p, c, &r->reqhdr));
	case GH_FILTER_RESPHDR:
		return (load_hmod(pc, p, c, &r->resphdr));
	case GH_FILTER_REDIRECT:
		if (check_object(pc, p, c, redirect_fields))
			return (-1);
		r->redirect = zalloc(pc, p, 1, sizeof *r->redirect);
		if (r->redirect == NULL ||
		    get_string(pc, p, c, "scheme", 0, 1, 16, &s))
			return (-1);
		if (s != NULL) {
			if (strcmp(s, "http") && strcmp(s, "https")) {
				SUB(p, path, ".%s.scheme", key);
				return (fail(pc, p, "unknown scheme %s; use "
				    "\"http\" or \"https\"",
				    qv(q, sizeof q, s)));
			}
			r->redirect->scheme = sdup(pc, p, s);
			if (r->redirect->scheme == NULL)
				return (-1);
		}
		if (get_string(pc, p, c, "hostname", 0, 1, 253, &s))
			return (-1);
		if (s != NULL) {
			if (!is_redirect_host(s)) {
				SUB(p, path, ".%s.hostname", key);
				return (fail(pc, p, "%s is not a host name; "
				    "use letters, digits, '-' and '.'",
				    qv(q, sizeof q, s)));
			}
			r->redirect->hostname = sdup(pc, p, s);
			if (r->redirect->hostname == NULL)
				return (-1);
		}
		if (get_int(pc, p, c, "port", 0, 1, 65535, 0, &ll))
			return (-1);
		r->redirect->port = (unsigned)ll;
		if (get_int(pc, p, c, "statusCode", 0, 301, 308, 302, &ll))
			return (-1);
		if (ll != 301 && ll != 302 && ll != 303 && ll != 307 &&
		    ll != 308) {
			SUB(p, path, ".%s.statusCode", key);
			return (fail(pc, p, "status %lld is not allowed; use "
			    "301, 302, 303, 307 or 308", ll));
		}
		r->redirect->status = (unsigned)ll;
		if (json_object_get(c, "path") != NULL) {
			SUB(p, path, ".%s.path", key);
			return (load_pathmod(pc, p, json_object_get(c, "path"),
			    r, &r->redirect->path));
		}
		return (0);
	case GH_FILTER_REWRITE:
		if (check_object(pc, p, c, rewrite_fields))
			return (-1);
		r->rewrite = zalloc(pc, p, 1, sizeof *r->rewrite);
		if (r->rewrite == NULL ||
		    get_string(pc, p, c, "hostname", 0, 1, 253, &s))
			return (-1);
		if (s != NULL) {
			if (!is_redirect_host(s)) {
				SUB(p, path, ".%s.hostname", key);
				return (fail(pc, p, "%s is not a host name; "
				    "use letters, digits, '-' and '.'",
				    qv(q, sizeof q, s)));
			}
			r->rewrite->hostname = sdup(pc, p, s);
			if (r->rewrite->hostname == NULL)
				return (-1);
		}
		if (json_object_get(c, "path") != NULL) {
			SUB(p, path, ".%s.path", key);
			return (load_pathmod(pc, p, json_object_get(c, "path"),
			    r, &r->rewrite->path));
		}
		return (0);
	case GH_FILTER_MIRROR:
		/* load_route counted the RequestMirror filters */
		assert(*nmirror < r->nmirror);
		mi = &r->mirror[(*nmirror)++];
		if (check_object(pc, p, c, mirror_fields) ||
		    get_int(pc, p, c, "percent", 0, 0, 100, 100, &ll))
			return (-1);
		mi->percent = (unsigned)ll;
		return (load_ref(pc, p, c, &mi->group));
	case GH_FILTER_CORS:
		return (load_cors(pc, p, c, &r->cors));
	}
	WRONG("filter type");
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

static int
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
static int
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
		h = fnv(FNV0, vh->hostname, strlen(vh->hostname)) & t->mask;
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

const struct gh_vhost *
gh_host_lookup(const struct gh_htab *t, const char *host, size_t len)
{
	uint32_t h;
	size_t i;
	struct gh_vhost *vh;

	AN(t);
	AN(t->slot);
	if (len > 0) {
		AN(host);
		h = fnv(FNV0, host, len) & t->mask;
		while ((vh = t->slot[h]) != NULL) {
			if (vh->kind == GH_HOST_EXACT &&
			    !strncmp(vh->hostname, host, len) &&
			    vh->hostname[len] == '\0')
				return (vh);
			h = (h + 1) & t->mask;
		}
	}
	if (t->nwild > 0) {
		/* longest suffix first: leftmost dot after the first label */
		for (i = 1; i < len; i++) {
			if (host[i] != '.')
				continue;
			h = fnv(fnv(FNV0, "*", 1), host + i, len - i) & t->mask;
			while ((vh = t->slot[h]) != NULL) {
				if (vh->kind == GH_HOST_WILD &&
				    !strncmp(vh->hostname + 1, host + i,
				    len - i) && vh->hostname[len - i + 1] == '\0')
					return (vh);
				h = (h + 1) & t->mask;
			}
		}
	}
	return (t->any);
}

const struct gh_htab *
gh_htab_find(const struct gh_state *st, const char *socket,
    const char *admin)
{
	unsigned u;

	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	if (socket != NULL) {
		for (u = 0; u < st->ntab; u++)
			if (!strcmp(st->tab[u].socket, socket))
				return (&st->tab[u]);
		if (admin != NULL && !strcmp(socket, admin))
			return (NULL);
	}
	return (&st->deftab);
}

size_t
gh_host_normalize(const char *in, char *out, size_t outlen)
{
	size_t o = 0;

	if (*in == '[') {
		/* IPv6 literal: keep the brackets, drop the port */
		while (*in != '\0' && *in != ']' && o + 2 < outlen)
			out[o++] = (char)tolower((unsigned char)*in++);
		if (*in != ']')
			return (0);
		out[o++] = ']';
		out[o] = '\0';
		return (o);
	}
	while (*in != '\0' && *in != ':') {
		if (o + 1 >= outlen)
			return (0);
		out[o++] = (char)tolower((unsigned char)*in++);
	}
	while (o > 0 && out[o - 1] == '.')
		o--;
	out[o] = '\0';
	return (o);
}

/*--------------------------------------------------------------------
 * described sockets: TLS, and the listeners for the server name check
 */

#define MAX_SOCKETS 64

const struct gh_sock *
gh_sock_find(const struct gh_state *st, const char *socket)
{
	unsigned u;

	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	if (socket == NULL)
		return (NULL);
	for (u = 0; u < st->nsock; u++)
		if (!strcmp(st->sock[u].name, socket))
			return (&st->sock[u]);
	return (NULL);
}

/*
 * The listener of sk that accepts host (normalized, len bytes) most
 * specifically, as the Gateway API orders listener hostnames: the exact
 * hostname, then the longest wildcard suffix, then the listener without
 * hostname; NULL when none accepts it.
 */
const struct gh_listener *
gh_listener_select(const struct gh_sock *sk, const char *host, size_t len)
{
	const struct gh_listener *l, *best = NULL;
	size_t sl;
	long rank, brank = -1;
	unsigned u;

	CHECK_OBJ_NOTNULL(sk, GH_SOCK_MAGIC);
	AN(host);
	for (u = 0; u < sk->nlistener; u++) {
		l = &sk->listener[u];
		switch (l->kind) {
		case GH_HOST_EXACT:
			if (len == l->hlen && !memcmp(host, l->hostname, len))
				return (l);
			continue;
		case GH_HOST_WILD:
			/* "*.example.com": one label or more before the
			 * suffix ".example.com" */
			sl = l->hlen - 1;
			if (len <= sl || memcmp(host + len - sl,
			    l->hostname + 1, sl))
				continue;
			rank = (long)sl;
			break;
		default:
			assert(l->kind == GH_HOST_ANY);
			rank = 0;
			break;
		}
		if (rank > brank) {
			best = l;
			brank = rank;
		}
	}
	return (best);
}

static const char * const sock_fields[] = {"name", "tls", "listeners", NULL};
static const char * const listener_fields[] = {"name", "hostname", NULL};

static int
load_listener(struct pc *pc, const char *path, const json_t *j,
    const struct gh_sock *sk, struct gh_listener *l, unsigned idx)
{
	const char *s;
	char p[PATHLEN], q[96];
	unsigned u;

	if (check_object(pc, path, j, listener_fields) ||
	    get_string(pc, path, j, "name", 1, 1, 253, &s))
		return (-1);
	SUB(p, path, ".name");
	if (has_ctl(s, 0))
		return (fail(pc, p, "%s contains a control character or a "
		    "space; use the Gateway listener name",
		    qv(q, sizeof q, s)));
	for (u = 0; u < idx; u++)
		if (!strcmp(sk->listener[u].name, s))
			return (fail(pc, p, "duplicate listener %s, already "
			    "at listeners[%u]; listener names are unique",
			    qv(q, sizeof q, s), u));
	l->name = sdup(pc, p, s);
	if (l->name == NULL ||
	    get_string(pc, path, j, "hostname", 0, 1, 253, &s))
		return (-1);
	SUB(p, path, ".hostname");
	if (s == NULL)
		s = "*";
	else if (!is_lower_hostname(s, 1))
		return (fail(pc, p, "%s is not a valid listener hostname; use "
		    "a lower case DNS name (www.example.com), a wildcard "
		    "(*.example.com), or leave it out for every host",
		    qv(q, sizeof q, s)));
	for (u = 0; u < idx; u++) {
		if (strcmp(sk->listener[u].hostname, s))
			continue;
		if (!strcmp(s, "*"))
			return (fail(pc, p, "listeners[%u] (%s) already has "
			    "no hostname (every host); at most one listener "
			    "of a socket has none", u, sk->listener[u].name));
		return (fail(pc, p, "%s is already the hostname of "
		    "listeners[%u] (%s); give each listener of a socket its "
		    "own hostname", qv(q, sizeof q, s), u,
		    sk->listener[u].name));
	}
	l->hostname = sdup(pc, p, s);
	if (l->hostname == NULL)
		return (-1);
	l->hlen = strlen(s);
	l->kind = !strcmp(s, "*") ? GH_HOST_ANY :
	    s[0] == '*' ? GH_HOST_WILD : GH_HOST_EXACT;
	return (0);
}

/* the optional top-level "sockets" */
static int
load_sockets(struct pc *pc, const json_t *root, struct gh_state *st)
{
	json_t *a, *e, *v, *la, *le;
	size_t i, k;
	unsigned u;
	const char *s;
	char path[PATHLEN], p[PATHLEN], q[96];
	struct gh_sock *sk;

	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	if (get_array(pc, "", root, "sockets", 0, MAX_SOCKETS, &a))
		return (-1);
	if (a == NULL || json_array_size(a) == 0)
		return (0);
	st->sock = zalloc(pc, "sockets", json_array_size(a),
	    sizeof *st->sock);
	if (st->sock == NULL)
		return (-1);
	json_array_foreach(a, i, e) {
		sk = &st->sock[i];
		sk->magic = GH_SOCK_MAGIC;
		SUB(path, "sockets", "[%zu]", i);
		if (check_object(pc, path, e, sock_fields) ||
		    get_string(pc, path, e, "name", 1, 1, 63, &s))
			return (-1);
		SUB(p, path, ".name");
		if (!is_socket_name(s))
			return (fail(pc, p, "%s is not a socket name; use "
			    "letters, digits, '-', '_' and '.' as in varnishd "
			    "-a NAME=...", qv(q, sizeof q, s)));
		for (u = 0; u < i; u++)
			if (!strcmp(st->sock[u].name, s))
				return (fail(pc, p, "duplicate socket %s, "
				    "already described by sockets[%u]; merge "
				    "the two", qv(q, sizeof q, s), u));
		sk->name = sdup(pc, p, s);
		if (sk->name == NULL)
			return (-1);
		st->nsock = i + 1;
		v = json_object_get(e, "tls");
		if (v != NULL) {
			SUB(p, path, ".tls");
			if (!json_is_boolean(v))
				return (fail(pc, p, "expected a boolean, got "
				    "%s; write true or false", jtype(v)));
			sk->tls = json_is_true(v);
		}
		if (sk->tls && pc->admin != NULL && !strcmp(pc->admin, s))
			return (fail(pc, p, "%s is ghost's admin socket, which "
			    "is plain HTTP on loopback; remove \"tls\" or "
			    "name another socket", qv(q, sizeof q, s)));
		if (get_array(pc, path, e, "listeners", 0, MAX_SOCKETS, &la))
			return (-1);
		if (la == NULL || json_array_size(la) == 0)
			continue;
		sk->listener = zalloc(pc, path, json_array_size(la),
		    sizeof *sk->listener);
		if (sk->listener == NULL)
			return (-1);
		json_array_foreach(la, k, le) {
			SUB(p, path, ".listeners[%zu]", k);
			if (load_listener(pc, p, le, sk, &sk->listener[k],
			    (unsigned)k))
				return (-1);
			sk->nlistener = k + 1;
		}
	}
	return (0);
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
