/*
 * Filters applied on the request path: header modifiers, path modifiers
 * (URLRewrite, RequestRedirect) and the redirect Location. Strings go to
 * the workspace.
 */

#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "cache/cache.h"

#include "vrt_obj.h"
#include "vsa.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

void
gh_hmod_apply(struct http *hp, const struct gh_hmod *h)
{
	unsigned u;

	AN(h);
	for (u = 0; u < h->nset; u++) {
		http_Unset(hp, h->set[u].hdr);
		http_PrintfHeader(hp, "%s", h->set[u].line);
	}
	for (u = 0; u < h->nadd; u++)
		http_PrintfHeader(hp, "%s", h->add[u].line);
	for (u = 0; u < h->nremove; u++)
		http_Unset(hp, h->remove[u]);
}

/* new path (and query) after a path modifier, on the workspace */
const char *
gh_path_modify(VRT_CTX, const struct gh_route *r, const struct gh_pathmod *pm,
    const char *path, size_t pl, const char *q, size_t ql)
{
	const char *qm = ql > 0 ? "?" : "";

	if (pm->type == GH_PMOD_FULL)
		return (WS_Printf(ctx->ws, "%s%s%.*s",
		    pm->vlen > 0 ? pm->value : "/", qm, (int)ql, q));
	assert(pm->type == GH_PMOD_PREFIX);
	assert(pl >= r->plen);
	if (pm->vlen == 0 && pl == r->plen)
		return (WS_Printf(ctx->ws, "/%s%.*s", qm, (int)ql, q));
	return (WS_Printf(ctx->ws, "%.*s%.*s%s%.*s", (int)pm->vlen, pm->value,
	    (int)(pl - r->plen), path + r->plen, qm, (int)ql, q));
}

/*
 * The Location of a redirect, Gateway API HTTPRouteRedirectPortAndScheme:
 *  - scheme: the filter's, else the request's (https on a TLS socket);
 *  - port: the filter's; else, without a scheme, the port of the listener
 *    the request came in on (server.ip: the PROXY destination behind
 *    hitch, the local address otherwise); else, with a scheme, its
 *    well-known port. A port that is its scheme's well-known port is
 *    left out.
 */
const char *
gh_redirect_location(VRT_CTX, const struct gh_route *r, int https,
    const char *host, const char *path, size_t pl, const char *q, size_t ql)
{
	const struct gh_redirect *rd;
	const char *scheme, *np;
	VCL_IP server;
	unsigned port = 0;
	char ports[8] = "";

	CHECK_OBJ_NOTNULL(r, GH_ROUTE_MAGIC);
	assert(r->filters & GH_FILTER_REDIRECT);
	rd = r->redirect;
	AN(rd);

	if (rd->scheme != NULL)
		scheme = rd->scheme;
	else
		scheme = https ? "https" : "http";
	if (rd->hostname != NULL)
		host = rd->hostname;
	if (rd->port > 0)
		port = rd->port;
	else if (rd->scheme == NULL) {
		/*
		 * Without port and scheme: the port of the listener the
		 * request came in on, whatever the Host header says.
		 * server.ip is local.ip without PROXY; behind hitch it is
		 * the PROXY destination (hitch's frontend, the listener
		 * port), while local.ip is the Unix socket.
		 */
		server = VRT_r_server_ip(ctx);
		if (server != NULL)
			port = (unsigned)VSA_Port(server);
	}
	if (port > 0 && port < 65536 &&
	    !(port == 80 && !strcmp(scheme, "http")) &&
	    !(port == 443 && !strcmp(scheme, "https")))
		bprintf(ports, ":%u", port);
	if (rd->path.type != GH_PMOD_NONE) {
		np = gh_path_modify(ctx, r, &rd->path, path, pl, q, ql);
		if (np == NULL)
			return (NULL);
		return (WS_Printf(ctx->ws, "%s://%s%s%s", scheme, host, ports,
		    np));
	}
	return (WS_Printf(ctx->ws, "%s://%s%s%.*s%s%.*s", scheme, host,
	    ports, (int)pl, path, ql > 0 ? "?" : "", (int)ql, q));
}
