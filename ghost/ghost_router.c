/*
 * The router's client-side VCL methods, .sni() ... .hash(); the
 * backend side's are in ghost_backend.c.
 */

#include "config.h"

#include <string.h>
#include <strings.h>

#include "cache/cache.h"

#include "vcl.h"
#include "vre.h"
#include "vrt_obj.h"
#include "vsb.h"

#include "VSC_ghost.h"
#include "VSC_ghostrouter.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

/*--------------------------------------------------------------------
 * VCL methods
 */

VCL_VOID v_matchproto_(td_vmod_ghost_router_sni)
vmod_router_sni(VRT_CTX, struct VPFX(ghost_router) *rt, VCL_STRING name)
{
	struct gh_task *t;
	char *n;
	size_t l;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	if (ctx->method != VCL_MET_RECV) {
		VRT_fail(ctx, "ghost: %s.sni() is only allowed in vcl_recv",
		    rt->vcl_name);
		return;
	}
	t = gh_task_get(ctx, rt, 1);
	if (t == NULL)
		return;
	t->sni = NULL;
	t->snil = 0;
	if (name == NULL || *name == '\0')
		return;
	l = strlen(name);
	n = WS_Alloc(ctx->ws, l + 2);
	if (n == NULL) {
		VRT_fail(ctx, "ghost: out of workspace");
		return;
	}
	/* as the Host header: lower case, without a trailing dot */
	t->snil = gh_host_normalize(name, n, l + 2);
	t->sni = n;
}

/*
 * The Gateway API's misdirected requests (Listener.Hostname): on a TLS
 * socket, the server name the client sent (SNI, .sni()) and the Host
 * header each select a listener of the socket. A Host no listener accepts
 * is answered 404 (as an unknown host); a Host whose listener is not the
 * server name's (another listener matches the Host, or matches it more
 * specifically) 421. Without a server name only the Host counts.
 */
static int
gh_misdirected(VRT_CTX, struct VPFX(ghost_router) *rt, struct gh_task *t,
    const struct gh_sock *sk, const char *host, size_t hl)
{
	const struct gh_listener *lh, *ls;

	if (sk == NULL || !sk->tls || sk->nlistener == 0 || t->snil == 0)
		return (0);
	AN(t->sni);
	lh = gh_listener_select(sk, host, hl);
	if (lh == NULL) {
		if (rt->rvsc != NULL)
			(void)__atomic_add_fetch(&rt->rvsc->unknown_host, 1,
			    __ATOMIC_RELAXED);
		t->status = 404;
		return (1);
	}
	ls = gh_listener_select(sk, t->sni, t->snil);
	if (ls == lh)
		return (0);
	if (rt->rvsc != NULL)
		(void)__atomic_add_fetch(&rt->rvsc->misdirected, 1,
		    __ATOMIC_RELAXED);
	VSLb(ctx->vsl, SLT_VCL_Log, "ghost.misdirected: host %s is listener "
	    "%s's, server name %.*s %s%s", host, lh->name, (int)t->snil,
	    t->sni, ls != NULL ? "is listener " : "matches no listener",
	    ls != NULL ? ls->name : "");
	t->lhost = lh;
	t->lsni = ls;
	t->status = 421;
	return (1);
}

/*
 * Protocol upgrades. Varnish cannot wait for the backend's 101 before it
 * pipes, and a pipe relays every later byte of the client connection to
 * the backend unrouted. So a WebSocket upgrade (RFC 6455: Upgrade:
 * websocket, Connection: upgrade) is piped only to a backend whose Service
 * port has appProtocol kubernetes.io/ws (GEP-1911, the backends table's
 * "websocket"); every other request loses its Upgrade header and the
 * upgrade token of Connection and is served as plain HTTP. Returns 1 to
 * pipe, 0 to go on, -1 out of workspace (VRT_fail done).
 */
static int
gh_upgrade(VRT_CTX, const struct gh_group *g)
{
	struct http *hp;
	const char *v, *p, *e, *te;
	char *buf, *o;
	size_t l;

	hp = ctx->http_req;
	CHECK_OBJ_NOTNULL(hp, HTTP_MAGIC);
	if (g != NULL && g->backend != NULL && g->backend->websocket &&
	    http_GetHdrToken(hp, H_Upgrade, "websocket", NULL, NULL) &&
	    http_GetHdrToken(hp, H_Connection, "upgrade", NULL, NULL))
		return (1);
	if (http_GetHdr(hp, H_Upgrade, NULL)) {
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.upgrade: not piped, "
		    "backend %s%s", g != NULL ? g->name : "",
		    g != NULL && g->backend != NULL && g->backend->websocket ?
		    " (not a WebSocket upgrade)" :
		    " has no appProtocol kubernetes.io/ws");
		http_Unset(hp, H_Upgrade);
	}
	if (!http_GetHdrToken(hp, H_Connection, "upgrade", NULL, NULL))
		return (0);
	/* Connection without its upgrade tokens */
	AN(http_GetHdr(hp, H_Connection, &v));
	l = strlen(v);
	buf = WS_Alloc(ctx->ws, sizeof "Connection: " + l);
	if (buf == NULL) {
		VRT_fail(ctx, "ghost: out of workspace");
		return (-1);
	}
	memcpy(buf, "Connection: ", sizeof "Connection: " - 1);
	o = buf + sizeof "Connection: " - 1;
	for (p = v; *p != '\0'; p = *e == ',' ? e + 1 : e) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		e = strchr(p, ',');
		if (e == NULL)
			e = p + strlen(p);
		for (te = e; te > p && (te[-1] == ' ' || te[-1] == '\t'); te--)
			continue;
		if (te == p || (te - p == 7 && !strncasecmp(p, "upgrade", 7)))
			continue;
		if (o > buf + sizeof "Connection: " - 1) {
			*o++ = ',';
			*o++ = ' ';
		}
		memcpy(o, p, te - p);
		o += te - p;
	}
	*o = '\0';
	assert(o < buf + sizeof "Connection: " + l);
	http_Unset(hp, H_Connection);
	if (o > buf + sizeof "Connection: " - 1)
		http_SetHeader(hp, buf);
	return (0);
}

/*
 * The request's path, normalised (ghost_path.c), in *path and *pl, and in
 * req.url when it changed: "PATH?QUERY" (or "PATH") in workspace, laid out
 * as the URL it replaces. -1: answered 400 (t->status, t->body) or out of
 * workspace (VRT_fail done).
 */
static int
gh_path_recv(VRT_CTX, struct gh_task *t, const char **path, size_t *pl,
    const char *q, size_t ql)
{
	char *buf;
	long n;

	if (**path != '/' || gh_path_normal(*path, *pl))
		return (0);
	buf = WS_Alloc(ctx->ws, *pl + 1 + ql + 1);
	if (buf == NULL) {
		VRT_fail(ctx, "ghost: out of workspace");
		return (-1);
	}
	n = gh_path_normalize(*path, *pl, buf, t->st->keep_escaped_slashes);
	if (n < 0) {
		t->status = 400;
		t->body = n == GH_PATH_ESCAPED_SLASH ?
		    "the path has an escaped \"/\" or \"\\\" (%2F, %5C), "
		    "which this gateway refuses" :
		    "the path has a \"%\" without two hexadecimal digits";
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.path: 400, %s", t->body);
		return (-1);
	}
	if ((size_t)n == *pl && !memcmp(buf, *path, n))
		return (0);
	if (ql > 0) {
		buf[n] = '?';
		memcpy(buf + n + 1, q, ql);
		buf[n + 1 + ql] = '\0';
	} else
		buf[n] = '\0';
	VSLb(ctx->vsl, SLT_VCL_Log, "ghost.path: %.*s", (int)n, buf);
	VRT_l_req_url(ctx, NULL, TOSTRAND(buf));
	*path = buf;
	*pl = (size_t)n;
	return (0);
}

VCL_BOOL v_matchproto_(td_vmod_ghost_router_recv)
vmod_router_recv(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;
	const char *sock, *url, *path, *q, *hosthdr, *np;
	size_t pl, ql, hl;
	const struct gh_htab *tab;
	const struct gh_sock *sk;
	const struct gh_vhost *vh;
	const struct gh_route *r;
	const struct gh_group *g;
	const struct gh_endpoint *ep;
	const struct gh_be *be;
	unsigned u;
	char host[256];

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	if (ctx->method != VCL_MET_RECV) {
		VRT_fail(ctx, "ghost: %s.recv() is only allowed in vcl_recv",
		    rt->vcl_name);
		return (0);
	}
	t = gh_task_get(ctx, rt, 1);
	if (t == NULL)
		return (0);
	if (t->st != NULL)		/* restart */
		gh_state_unref(rt, &t->st);
	t->vh = NULL;
	t->route = NULL;
	t->status = 0;
	t->kind = GH_TASK_ROUTE;
	t->rerr.route = NULL;
	t->location = NULL;
	t->body = NULL;
	t->https = 0;
	t->lhost = NULL;
	t->lsni = NULL;
	t->cache = NULL;
	t->khost = NULL;
	t->kurl = NULL;
	t->khl = t->kul = t->kpl = 0;
	t->retry = 0;
	t->cors_origin = NULL;
	t->cors_preflight = 0;
	t->sess_new = 0;
	t->sess_id = 0;
	t->sess_time = 0;
	t->pipe = 0;
	/* only ghost sets X-Ghost-* request headers (ghost_task.c) */
	gh_handoff_strip(ctx->http_req);

	sock = VRT_r_local_socket(ctx);
	url = ctx->http_req->hd[HTTP_HDR_URL].b;
	AN(url);
	path = url;
	if (*path != '/' && (!strncasecmp(path, "http://", 7) ||
	    !strncasecmp(path, "https://", 8))) {
		path = strchr(strchr(path, ':') + 3, '/');
		if (path == NULL)
			path = "/";
	}
	q = strchr(path, '?');
	if (q != NULL) {
		pl = q - path;
		q++;
		ql = strlen(q);
	} else {
		pl = strlen(path);
		q = "";
		ql = 0;
	}

	if (rt->admin != NULL && sock != NULL && !strcmp(sock, rt->admin)) {
		if (pl == strlen(GH_ADMIN_RELOAD) &&
		    !memcmp(path, GH_ADMIN_RELOAD, pl))
			return (gh_admin(ctx, rt, t, GH_TASK_RELOAD));
		if (pl == strlen(GH_ADMIN_STATS) &&
		    !memcmp(path, GH_ADMIN_STATS, pl))
			return (gh_admin(ctx, rt, t, GH_TASK_STATS));
		if (pl == strlen(GH_ADMIN_DRAIN) &&
		    !memcmp(path, GH_ADMIN_DRAIN, pl))
			return (gh_admin(ctx, rt, t, GH_TASK_DRAIN));
	}

	gh_request_id(ctx);

	t->st = gh_state_ref(rt);
	AN(t->st);
	/* routes and backends see the same path */
	if (gh_path_recv(ctx, t, &path, &pl, q, ql))
		return (0);
	tab = gh_htab_find(t->st, sock, rt->admin);
	sk = gh_sock_find(t->st, sock);
	if (sk != NULL)
		t->https = sk->tls;
	vh = NULL;
	hosthdr = NULL;
	hl = 0;
	host[0] = '\0';
	if (tab != NULL) {
		if (http_GetHdr(ctx->http_req, H_Host, &hosthdr))
			hl = gh_host_normalize(hosthdr, host, sizeof host);
		if (gh_misdirected(ctx, rt, t, sk, host, hl))
			return (0);
		vh = gh_host_lookup(tab, host, hl);
	}
	if (vh == NULL) {
		if (rt->rvsc != NULL)
			(void)__atomic_add_fetch(&rt->rvsc->unknown_host, 1,
			    __ATOMIC_RELAXED);
		t->status = 404;
		return (0);
	}
	t->vh = vh;
	GH_COUNT(vh, requests);
	r = gh_route_match(ctx, vh, path, pl, q, ql, &t->rerr);
	if (r == NULL && t->rerr.route != NULL) {
		/* a failed regex is no "no match": no other route */
		GH_COUNT(vh, regex_errors);
		t->status = 500;
		return (0);
	}
	if (r == NULL) {
		GH_COUNT(vh, not_found);
		t->status = 404;
		return (0);
	}
	t->route = r;
	/* a CORS preflight is answered before the route redirects or sends */
	if (gh_cors_recv(ctx, t, r)) {
		gh_log_route(ctx, r, NULL, NULL);
		return (0);
	}
	if (r->filters & GH_FILTER_REDIRECT) {
		AN(r->redirect);
		gh_log_route(ctx, r, NULL, NULL);
		t->location = gh_redirect_location(ctx, r, t->https, host,
		    path, pl, q, ql);
		if (t->location == NULL) {
			VRT_fail(ctx, "ghost: out of workspace");
			return (0);
		}
		GH_COUNT(vh, redirects);
		t->status = r->redirect->status;
		return (0);
	}

	if (r->filters & GH_FILTER_MIRROR) {
		AN(r->nmirror);
		for (u = 0; u < r->nmirror; u++)
			gh_mirror_send(ctx, &rt->mq, &r->mirror[u]);
	}

	/* the session's endpoint, whatever the weights (GEP-1619) */
	g = NULL;
	u = 0;
	if (r->session != NULL && gh_session_recv(ctx, r, &g, &u) < 0)
		return (0);
	if (g == NULL) {
		/* weighted group, then a uniform endpoint */
		if (r->wtotal == 0) {
			gh_log_route(ctx, r, NULL, NULL);
			t->status = 500;
			return (0);
		}
		g = gh_route_pick(r);
		if (g->nep == 0) {
			gh_log_route(ctx, r, g, NULL);
			t->status = 500;
			return (0);
		}
		u = gh_group_pick(g);
		if (r->session != NULL)
			gh_session_new(ctx, t, g, u);
	}
	ep = &g->ep[u];
	CHECK_OBJ_NOTNULL(g->set, GH_BSET_MAGIC);
	switch (gh_upgrade(ctx, g)) {
	case 1:
		t->pipe = 1;
		break;
	case 0:
		break;
	default:
		return (0);
	}
	be = g->set->be[u];
	CHECK_OBJ_NOTNULL(be, GH_BE_MAGIC);
	gh_log_route(ctx, r, g, ep);

	/* the client's request decides, before filters and rewrites */
	if (gh_cache_recv(ctx, t, r, host, hl, path, pl, q, ql))
		return (0);

	if (r->filters & GH_FILTER_REWRITE) {
		AN(r->rewrite);
		if (r->rewrite->path.type != GH_PMOD_NONE) {
			np = gh_path_modify(ctx, r, &r->rewrite->path, path, pl,
			    q, ql);
			if (np == NULL) {
				VRT_fail(ctx, "ghost: out of workspace");
				return (0);
			}
			VRT_l_req_url(ctx, NULL, TOSTRAND(np));
		}
		if (r->rewrite->hostname != NULL) {
			http_Unset(ctx->http_req, H_Host);
			http_PrintfHeader(ctx->http_req, "Host: %s",
			    r->rewrite->hostname);
		}
	}
	if (r->filters & GH_FILTER_REQHDR)
		gh_hmod_apply(ctx->http_req, r->reqhdr);
	/* the picked backendRef's own filter, after the rule's */
	if (g->reqhdr != NULL)
		gh_hmod_apply(ctx->http_req, g->reqhdr);

	/* what the backend side needs: timeout, retries, cache policy */
	gh_retry_recv(ctx, t, r);
	if (gh_handoff_send(ctx, t))
		return (0);

	VRT_l_req_backend_hint(ctx, be->be);
	GH_COUNT(vh, backend_picks);
	return (1);
}

VCL_BOOL v_matchproto_(td_vmod_ghost_router_websocket)
vmod_router_websocket(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	t = gh_task_get(ctx, rt, 0);
	return (t != NULL && t->pipe);
}

VCL_INT v_matchproto_(td_vmod_ghost_router_status)
vmod_router_status(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	t = gh_task_get(ctx, rt, 0);
	return (t != NULL ? t->status : 0);
}

VCL_STRING v_matchproto_(td_vmod_ghost_router_route)
vmod_router_route(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	t = gh_task_get(ctx, rt, 0);
	if (t == NULL || t->route == NULL)
		return ("");
	/* pinned by the task's state reference */
	return (t->route->name);
}

VCL_INT v_matchproto_(td_vmod_ghost_router_generation)
vmod_router_generation(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;
	uint64_t g;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	t = gh_task_get(ctx, rt, 0);
	if (t != NULL && t->st != NULL)
		return ((VCL_INT)t->st->generation);
	PTOK(pthread_mutex_lock(&rt->mtx));
	g = rt->cur != NULL ? rt->cur->generation : 0;
	PTOK(pthread_mutex_unlock(&rt->mtx));
	return ((VCL_INT)g);
}

VCL_VOID v_matchproto_(td_vmod_ghost_router_synth)
vmod_router_synth(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;
	struct vsb *body;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	if (ctx->method != VCL_MET_SYNTH) {
		VRT_fail(ctx, "ghost: %s.synth() is only allowed in "
		    "vcl_synth", rt->vcl_name);
		return;
	}
	gh_drain_close(ctx, rt);
	t = gh_task_get(ctx, rt, 0);
	if (t == NULL || t->status == 0 ||
	    ctx->http_resp->status != t->status)
		return;
	CAST_OBJ_NOTNULL(body, ctx->specific, VSB_MAGIC);
	switch (t->kind) {
	case GH_TASK_RELOAD:
	case GH_TASK_DRAIN:
	case GH_TASK_ADMINERR:
		http_Unset(ctx->http_resp, H_Content_Type);
		http_SetHeader(ctx->http_resp,
		    "Content-Type: application/json");
		VSB_cat(body, t->body);
		return;
	case GH_TASK_STATS:
		http_Unset(ctx->http_resp, H_Content_Type);
		http_SetHeader(ctx->http_resp,
		    "Content-Type: application/json");
		AN(t->st);
		gh_stats_body(rt, t->st, body);
		return;
	default:
		break;
	}
	if (t->cors_preflight) {
		gh_cors_preflight(ctx, t);
		if (t->route->filters & GH_FILTER_RESPHDR)
			gh_hmod_apply(ctx->http_resp, t->route->resphdr);
		return;
	}
	http_Unset(ctx->http_resp, H_Content_Type);
	http_SetHeader(ctx->http_resp, "Content-Type: text/plain");
	if (t->location != NULL) {
		http_PrintfHeader(ctx->http_resp, "Location: %s",
		    t->location);
	} else if (t->status == 421 && t->lhost != NULL) {
		VSB_printf(body, "421 Misdirected Request: the Host is "
		    "served by listener %s, this connection's TLS server name "
		    "(SNI) %s%s; send the request on a connection for its "
		    "host\n", t->lhost->name, t->lsni != NULL ?
		    "selected listener " : "selects no listener",
		    t->lsni != NULL ? t->lsni->name : "");
	} else if (t->status == 400 && t->body != NULL) {
		VSB_printf(body, "400 Bad Request: %s\n", t->body);
	} else if (t->status == 404 && t->vh == NULL) {
		VSB_cat(body, "404 Not Found: no vhost for this host\n");
	} else if (t->status == 404) {
		VSB_cat(body, "404 Not Found: no route matched\n");
	} else if (t->status == 500 && t->rerr.route != NULL) {
		VSB_printf(body, "500 Internal Server Error: route %s: "
		    "regular expression error on %s%s%s: ",
		    t->rerr.route->name, t->rerr.what,
		    *t->rerr.name != '\0' ? " " : "", t->rerr.name);
		(void)VRE_error(body, t->rerr.code);
		VSB_cat(body, "\n");
	} else if (t->status == 500) {
		VSB_printf(body, "500 Internal Server Error: route %s has no "
		    "usable backend\n", t->route != NULL ? t->route->name : "");
	}
	if (t->route != NULL)
		gh_cors_response(ctx, t);
	if (t->route != NULL && (t->route->filters & GH_FILTER_RESPHDR))
		gh_hmod_apply(ctx->http_resp, t->route->resphdr);
	if (t->vh != NULL && t->status >= 500)
		GH_COUNT(t->vh, errors_5xx);
}

VCL_VOID v_matchproto_(td_vmod_ghost_router_deliver)
vmod_router_deliver(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	if (ctx->method != VCL_MET_DELIVER) {
		VRT_fail(ctx, "ghost: %s.deliver() is only allowed in "
		    "vcl_deliver", rt->vcl_name);
		return;
	}
	gh_drain_close(ctx, rt);
	t = gh_task_get(ctx, rt, 0);
	gh_cache_deliver(ctx, t);
	if (t == NULL || t->route == NULL || t->status != 0)
		return;
	gh_cors_response(ctx, t);
	gh_session_deliver(ctx, t);
	if (t->route->filters & GH_FILTER_RESPHDR)
		gh_hmod_apply(ctx->http_resp, t->route->resphdr);
	if (t->vh != NULL && ctx->http_resp->status >= 500)
		GH_COUNT(t->vh, errors_5xx);
}

VCL_BOOL v_matchproto_(td_vmod_ghost_router_cacheable)
vmod_router_cacheable(VRT_CTX, struct VPFX(ghost_router) *rt)
{
	struct gh_task *t;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	if (!(ctx->method & VCL_MET_TASK_C)) {
		VRT_fail(ctx, "ghost: %s.cacheable() is only allowed on the "
		    "client side", rt->vcl_name);
		return (0);
	}
	t = gh_task_get(ctx, rt, 0);
	return (t != NULL && t->cache != NULL);
}

VCL_VOID v_matchproto_(td_vmod_ghost_router_hash)
vmod_router_hash(VRT_CTX, struct VPFX(ghost_router) *rt)
{

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	CHECK_OBJ_NOTNULL(rt, GH_ROUTER_MAGIC);
	if (ctx->method != VCL_MET_HASH) {
		VRT_fail(ctx, "ghost: %s.hash() is only allowed in vcl_hash",
		    rt->vcl_name);
		return;
	}
	gh_cache_hash(ctx, gh_task_get(ctx, rt, 0));
}
