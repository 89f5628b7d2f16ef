/*
 * CORS filters (the Gateway API HTTPCORSFilter): a preflight request
 * (OPTIONS with Origin and Access-Control-Request-Method) on a route with
 * a CORS filter is answered by ghost itself, 204 with the filter's
 * Access-Control-* headers when the Origin is allowed and without them
 * when it is not; the responses of other requests get
 * Access-Control-Allow-Origin (the request's Origin, echoed),
 * -Allow-Credentials and -Expose-Headers when the Origin is allowed.
 * On such a route ghost owns those headers: a backend's are removed.
 *
 * The Origin is echoed, never "*", so that an allowed origin works with
 * and without credentials alike; every response of the route says
 * "Vary: Origin".
 */

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cache/cache.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

#define H_ORIGIN	"\007Origin:"
#define H_ACRM		"\036Access-Control-Request-Method:"
#define H_ACRH		"\037Access-Control-Request-Headers:"

/* the response headers ghost owns on a route with a CORS filter */
static const char * const gh_cors_owned[] = {
	"\034Access-Control-Allow-Origin:",
	"\041Access-Control-Allow-Credentials:",
	"\036Access-Control-Expose-Headers:",
	"\035Access-Control-Allow-Methods:",
	"\035Access-Control-Allow-Headers:",
	"\027Access-Control-Max-Age:",
	NULL
};

/*
 * Whether the Origin header value o is allowed by c. o must be a
 * serialised origin, scheme://host[:port]: "null" and anything with a
 * path are not allowed, whatever the filter says.
 */
int
gh_cors_allowed(const struct gh_cors *c, const char *o)
{
	const struct gh_cors_origin *co;
	const char *h, *he, *ps;
	unsigned u, port;
	size_t hl;
	long l;
	char *end;
	int https;

	CHECK_OBJ_NOTNULL(c, GH_CORS_MAGIC);
	AN(o);
	if (!strncasecmp(o, "https://", 8)) {
		https = 1;
		h = o + 8;
	} else if (!strncasecmp(o, "http://", 7)) {
		https = 0;
		h = o + 7;
	} else
		return (0);
	if (*h == '[') {			/* IPv6 literal */
		he = strchr(h, ']');
		if (he == NULL)
			return (0);
		he++;
	} else
		he = h + strcspn(h, ":/?#");
	hl = he - h;
	if (hl == 0)
		return (0);
	port = https ? 443 : 80;
	if (*he == ':') {
		ps = he + 1;
		if (*ps < '0' || *ps > '9')
			return (0);
		l = strtol(ps, &end, 10);
		if (*end != '\0' || l < 1 || l > 65535)
			return (0);
		port = (unsigned)l;
	} else if (*he != '\0')
		return (0);
	if (c->origin_any)
		return (1);
	for (u = 0; u < c->norigin; u++) {
		co = &c->origin[u];
		if (co->https != https || co->port != port)
			continue;
		if (co->host_any)
			return (1);
		if (co->host_wild) {
			/* one or more labels in place of the "*" */
			if (hl > co->hlen && *h != '.' &&
			    !strncasecmp(h + hl - co->hlen, co->host,
			    co->hlen))
				return (1);
			continue;
		}
		if (hl == co->hlen && !strncasecmp(h, co->host, hl))
			return (1);
	}
	return (0);
}

/*
 * In vcl_recv, on the matched route r: remember an allowed Origin for
 * the response, and decide whether the request is a preflight, which
 * ghost answers itself (1: t->status is set, answer with synth).
 */
int
gh_cors_recv(VRT_CTX, struct gh_task *t, const struct gh_route *r)
{
	const char *o, *m;
	int ok;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(t, GH_TASK_MAGIC);
	CHECK_OBJ_NOTNULL(r, GH_ROUTE_MAGIC);
	if (!(r->filters & GH_FILTER_CORS))
		return (0);
	CHECK_OBJ_NOTNULL(r->cors, GH_CORS_MAGIC);
	if (!http_GetHdr(ctx->http_req, H_ORIGIN, &o))
		return (0);
	ok = gh_cors_allowed(r->cors, o);
	if (ok) {
		/* the request's headers may be rewritten by filters */
		t->cors_origin = WS_Copy(ctx->ws, o, -1);
		if (t->cors_origin == NULL) {
			VRT_fail(ctx, "ghost: out of workspace");
			return (0);
		}
	}
	if (http_GetMethod(ctx->http_req) == NULL ||
	    strcmp(http_GetMethod(ctx->http_req), "OPTIONS") ||
	    !http_GetHdr(ctx->http_req, H_ACRM, &m))
		return (0);
	VSLb(ctx->vsl, SLT_VCL_Log, "ghost.cors: preflight from %s %s", o,
	    ok ? "allowed" : "not allowed");
	t->cors_preflight = 1;
	t->status = 204;
	return (1);
}

static void
cors_unset(struct http *hp)
{
	const char * const *h;

	for (h = gh_cors_owned; *h != NULL; h++)
		http_Unset(hp, *h);
}

/* in vcl_synth: the headers of a preflight's answer */
void
gh_cors_preflight(VRT_CTX, const struct gh_task *t)
{
	const struct gh_cors *c;
	struct http *hp;
	const char *v;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(t, GH_TASK_MAGIC);
	CHECK_OBJ_NOTNULL(t->route, GH_ROUTE_MAGIC);
	c = t->route->cors;
	CHECK_OBJ_NOTNULL(c, GH_CORS_MAGIC);
	hp = ctx->http_resp;
	cors_unset(hp);
	http_Unset(hp, H_Content_Type);
	http_PrintfHeader(hp, "Vary: Origin");
	if (t->cors_origin == NULL)
		return;
	http_PrintfHeader(hp, "Access-Control-Allow-Origin: %s",
	    t->cors_origin);
	if (c->credentials)
		http_SetHeader(hp, "Access-Control-Allow-Credentials: true");
	if (c->methods != NULL)
		http_PrintfHeader(hp, "Access-Control-Allow-Methods: %s",
		    c->methods);
	else if (c->method_any && http_GetHdr(ctx->http_req, H_ACRM, &v))
		http_PrintfHeader(hp, "Access-Control-Allow-Methods: %s", v);
	if (c->headers != NULL)
		http_PrintfHeader(hp, "Access-Control-Allow-Headers: %s",
		    c->headers);
	else if (c->header_any && http_GetHdr(ctx->http_req, H_ACRH, &v))
		http_PrintfHeader(hp, "Access-Control-Allow-Headers: %s", v);
	if (c->expose != NULL && !(c->credentials && !strcmp(c->expose, "*")))
		http_PrintfHeader(hp, "Access-Control-Expose-Headers: %s",
		    c->expose);
	http_PrintfHeader(hp, "Access-Control-Max-Age: %u", c->max_age);
}

/* in vcl_deliver or vcl_synth: the headers of any other response */
void
gh_cors_response(VRT_CTX, const struct gh_task *t)
{
	const struct gh_cors *c;
	struct http *hp;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(t, GH_TASK_MAGIC);
	CHECK_OBJ_NOTNULL(t->route, GH_ROUTE_MAGIC);
	if (!(t->route->filters & GH_FILTER_CORS))
		return;
	c = t->route->cors;
	CHECK_OBJ_NOTNULL(c, GH_CORS_MAGIC);
	hp = ctx->http_resp;
	cors_unset(hp);
	http_PrintfHeader(hp, "Vary: Origin");
	if (t->cors_origin == NULL)
		return;
	http_PrintfHeader(hp, "Access-Control-Allow-Origin: %s",
	    t->cors_origin);
	if (c->credentials)
		http_SetHeader(hp, "Access-Control-Allow-Credentials: true");
	if (c->expose != NULL && !(c->credentials && !strcmp(c->expose, "*")))
		http_PrintfHeader(hp, "Access-Control-Expose-Headers: %s",
		    c->expose);
}
