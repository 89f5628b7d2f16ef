/*
 * X-Request-Id and the access log records (VCL_Log "ghost.*").
 */

#include "config.h"

#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "cache/cache.h"

#include "vrnd.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

static const char H_X_Request_Id[] = "\015X-Request-Id:";

#define REQID_MAX	128

/*
 * A client's X-Request-Id is kept when it is the only one and well formed:
 * 1 to REQID_MAX characters of letters, digits and - _ . : + / = (UUIDs,
 * hex, base64, ULIDs). Anything else could carry log injection or
 * unbounded size into every backend's logs.
 */
static int
reqid_ok(const char *p)
{
	size_t n;

	for (n = 0; p[n] != '\0'; n++) {
		if (n == REQID_MAX)
			return (0);
		if (!(p[n] >= 'a' && p[n] <= 'z') &&
		    !(p[n] >= 'A' && p[n] <= 'Z') &&
		    !(p[n] >= '0' && p[n] <= '9') &&
		    strchr("-_.:+/=", p[n]) == NULL)
			return (0);
	}
	return (n > 0);
}

/*
 * Keep or make the request's X-Request-Id: the client's when it is the
 * only one and well formed, else 128 random bits in hex. The request
 * headers are copied to the backend request, so every backend sees it.
 * It is logged as VCL_Log "ghost.request_id: ..." for the access log:
 * varnishncsa's %{X-Request-Id}i is the client's header on Varnish 7.7,
 * not the one set here.
 */
void
gh_request_id(VRT_CTX)
{
	struct http *hp;
	const char *p;
	unsigned u, n;
	uint32_t r;
	unsigned char rnd[16];
	char hex[2 * sizeof rnd + 1];

	hp = ctx->http_req;
	CHECK_OBJ_NOTNULL(hp, HTTP_MAGIC);
	n = 0;
	for (u = HTTP_HDR_FIRST; u < hp->nhd; u++)
		if (http_IsHdr(&hp->hd[u], H_X_Request_Id))
			n++;
	if (n == 1 && http_GetHdr(hp, H_X_Request_Id, &p) && reqid_ok(p)) {
		if (ctx->vsl != NULL)
			VSLb(ctx->vsl, SLT_VCL_Log, "ghost.request_id: %s", p);
		return;
	}
	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd) {
		for (u = 0; u < sizeof rnd; u += sizeof r) {
			r = (uint32_t)VRND_RandomTestable();
			memcpy(rnd + u, &r, sizeof r);
		}
	}
	for (u = 0; u < sizeof rnd; u++) {
		hex[2 * u] = "0123456789abcdef"[rnd[u] >> 4];
		hex[2 * u + 1] = "0123456789abcdef"[rnd[u] & 0xf];
	}
	hex[2 * sizeof rnd] = '\0';
	http_Unset(hp, H_X_Request_Id);
	http_PrintfHeader(hp, "X-Request-Id: %s", hex);
	if (ctx->vsl != NULL)
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.request_id: %s", hex);
}

/* The access log's view of the decision (varnishncsa %{VCL_Log:key}x). */
void
gh_log_route(VRT_CTX, const struct gh_route *r, const struct gh_group *g,
    const struct gh_endpoint *ep)
{

	if (ctx->vsl == NULL)
		return;
	if (r != NULL && r->name != NULL)
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.route: %s", r->name);
	if (g != NULL && g->name != NULL)
		VSLb(ctx->vsl, SLT_VCL_Log, "ghost.backend: %s", g->name);
	if (ep != NULL)
		VSLb(ctx->vsl, SLT_VCL_Log, ep->family == AF_INET6 ?
		    "ghost.endpoint: [%s]:%u" : "ghost.endpoint: %s:%u",
		    ep->address, ep->port);
}

