/*
 * The loader's helpers (ghost_load.h): errors that name the JSON path,
 * typed field access, state memory, syntax checks.
 */

#include <ctype.h>
#include <stdarg.h>
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
 * error helpers
 */

int __attribute__((format(printf, 3, 4)))
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
const char *
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

const char *
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

/* the path of a field, built only when needed (errors) */
const char *
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

int
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

int
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

int
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

int
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

int
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

int
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
void *
salloc(struct pc *pc, const char *path, size_t n)
{
	void *p;

	p = gh_arena_alloc(pc->arena, n);
	if (p == NULL)
		(void)fail(pc, path, "out of memory");
	return (p);
}

char *
sdup(struct pc *pc, const char *path, const char *s)
{
	size_t l = strlen(s) + 1;
	char *p;

	p = salloc(pc, path, l);
	if (p != NULL)
		memcpy(p, s, l);
	return (p);
}

void *
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

/*--------------------------------------------------------------------
 * syntax checks
 */

int
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

int
is_redirect_host(const char *s)
{
	for (; *s != '\0'; s++)
		if (!isalnum((unsigned char)*s) && *s != '.' && *s != '-')
			return (0);
	return (1);
}

int
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

int
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

int
is_lower_token(const char *s)
{
	if (!is_token(s))
		return (0);
	for (; *s != '\0'; s++)
		if (isupper((unsigned char)*s))
			return (0);
	return (1);
}

int
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
char *
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

int
load_regex(struct pc *pc, const char *path, const char *pat, struct vre **re)
{
	char e[256], q[96];

	if (gh_re_compile(pat, re, e, sizeof e))
		return (fail(pc, path, "invalid regular expression %s: %s; "
		    "fix the pattern (PCRE2 syntax, matched against the "
		    "whole value)", qv(q, sizeof q, pat), e));
	return (0);
}

/* the methods a route matches and a CORS filter allows */
const char * const methods[] = {
	"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS",
	"TRACE", "PATCH", NULL};
