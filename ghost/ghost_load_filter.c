/*
 * The loader's route filters: header modifiers, redirects, rewrites,
 * mirrors, CORS.
 */

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "vdef.h"
#include "vas.h"
#include "miniobj.h"

#include "ghost_state.h"
#include "ghost_load.h"

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

int
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

int
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
