/*
 * The admin endpoints, answered on the admin socket to loopback peers
 * only: POST/GET /.varnish-ghost/reload and /stats, POST
 * /.varnish-ghost/drain.
 */

#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "cache/cache.h"

#include "vrt_obj.h"
#include "vsa.h"
#include "vsb.h"

#include "VSC_ghostrouter.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

/*
 * Set by POST /.varnish-ghost/drain, never cleared: varnishd is about to
 * stop, so every response from now on says "Connection: close" and each
 * HTTP/1 client connection closes after its current response. One flag
 * per varnishd child: every VCL that imports this libvmod_ghost.so shares
 * it (varnishd loads one copy of the file), so it survives routing
 * reloads and VCL reloads; a new cache child starts without it.
 */
static unsigned draining;

int
gh_draining(void)
{

	return (__atomic_load_n(&draining, __ATOMIC_RELAXED) != 0);
}

static int
is_loopback(VCL_IP ip)
{
	const unsigned char *p;
	static const unsigned char v6lo[16] = {
	    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	static const unsigned char v4m[12] = {
	    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	if (ip == NULL)
		return (0);
	switch (VSA_GetPtr(ip, &p)) {
	case PF_INET:
		return (p[0] == 127);
	case PF_INET6:
		return (!memcmp(p, v6lo, 16) ||
		    (!memcmp(p, v4m, 12) && p[12] == 127));
	default:
		return (0);
	}
}

void
gh_json_str(struct vsb *vsb, const char *s)
{
	VSB_putc(vsb, '"');
	VSB_quote(vsb, s, -1, VSB_QUOTE_JSON);
	VSB_putc(vsb, '"');
}

/*
 * .recv() of a request for an admin path on the admin socket: answer it
 * (the answer is the synth that follows: t->status, t->body).
 */
VCL_BOOL
gh_admin(VRT_CTX, struct VPFX(ghost_router) *rt, struct gh_task *t,
    enum gh_task_kind kind)
{
	const char *method;
	struct gh_reload_result res[1];
	struct vsb vsb[1];
	char *buf;
	unsigned u;

	method = http_GetMethod(ctx->http_req);
	if (!is_loopback(VRT_r_remote_ip(ctx)) ||
	    !is_loopback(VRT_r_local_ip(ctx))) {
		t->kind = GH_TASK_ADMINERR;
		t->status = 403;
		t->body = "{\"status\":\"error\",\"error\":\"the admin "
		    "endpoints answer loopback peers only\"}\n";
		return (0);
	}
	if (method == NULL || (strcmp(method, "GET") &&
	    strcmp(method, "POST"))) {
		t->kind = GH_TASK_ADMINERR;
		t->status = 405;
		t->body = "{\"status\":\"error\",\"error\":\"use POST or "
		    "GET\"}\n";
		return (0);
	}
	t->kind = kind;
	t->status = 200;
	if (kind == GH_TASK_STATS) {
		t->st = gh_state_ref(rt);
		return (0);
	}
	if (kind == GH_TASK_DRAIN) {
		if (strcmp(method, "POST")) {
			t->kind = GH_TASK_ADMINERR;
			t->status = 405;
			t->body = "{\"status\":\"error\",\"error\":\"use POST: "
			    "the drain cannot be undone\"}\n";
			return (0);
		}
		if (!__atomic_exchange_n(&draining, 1, __ATOMIC_SEQ_CST))
			VSL(SLT_VCL_Log, NO_VXID, "ghost: draining: responses "
			    "close their connection from now on");
		t->body = "{\"status\":\"ok\",\"draining\":true}\n";
		return (0);
	}
	gh_reload(ctx, rt, res);
	u = WS_ReserveAll(ctx->ws);
	buf = WS_Reservation(ctx->ws);
	AN(VSB_init(vsb, buf, u));
	if (res->ok) {
		VSB_printf(vsb, "{\"status\":\"ok\",\"generation\":%ju,"
		    "\"vhosts\":%u,\"routes\":%u,\"endpoints\":%u,"
		    "\"backends\":%u,\"duration_ms\":%.3f}\n",
		    (uintmax_t)res->generation, res->nvhost, res->nroute,
		    res->nendpoint, res->nbackend, res->ms);
	} else {
		t->status = 400;
		VSB_printf(vsb, "{\"status\":\"error\",\"generation\":%ju,"
		    "\"error\":", (uintmax_t)res->generation);
		gh_json_str(vsb, res->err);
		VSB_cat(vsb, "}\n");
	}
	if (VSB_finish(vsb)) {
		WS_Release(ctx->ws, 0);
		t->body = res->ok ? "{\"status\":\"ok\"}\n" :
		    "{\"status\":\"error\",\"error\":\"(answer too long for "
		    "the workspace)\"}\n";
	} else {
		t->body = buf;
		WS_Release(ctx->ws, VSB_len(vsb) + 1);
	}
	VSB_fini(vsb);
	return (0);
}

/*
 * While varnishd drains, every response closes its connection: varnishd
 * ends an HTTP/1 session after a response with "Connection: close"
 * (V1D_Deliver, cnt_synth), so keep-alive clients reconnect, through the
 * Service, to another pod. HTTP/2 drops the header (connection-specific)
 * and keeps the session.
 */
void
gh_drain_close(VRT_CTX, struct VPFX(ghost_router) *rt)
{

	if (!gh_draining())
		return;
	http_ForceHeader(ctx->http_resp, H_Connection, "close");
	if (rt->rvsc != NULL)
		(void)__atomic_add_fetch(&rt->rvsc->drain_closes, 1,
		    __ATOMIC_RELAXED);
}

