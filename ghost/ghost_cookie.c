/*
 * The request's Cookie header without some of its pairs, for the cache
 * policies' stripCookies (ghost_cache.c) and the session cookie
 * (ghost_session.c).
 */

#include "config.h"

#include <string.h>

#include "cache/cache.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

#define COOKIE	"Cookie: "

static int
is_ws(char c)
{

	return (c == ' ' || c == '\t');
}

/*
 * Walks the "name=value" pairs of the request's first Cookie header (the
 * name and the value without the blanks around them) and asks drop()
 * about each; a pair it returns non-zero for is removed. When a pair was
 * removed, the header is replaced by the pairs kept, joined by "; " (and
 * removed when none is left). Returns the number of pairs removed, *kept
 * the number kept, or -1 out of workspace (the header unchanged).
 */
int
gh_cookie_filter(VRT_CTX, gh_cookie_drop_f *drop, void *priv,
    unsigned *kept)
{
	const char *v, *p, *e, *ne, *eq, *val;
	char *buf, *o;
	size_t l, nl, sep;
	unsigned removed;

	AN(drop);
	AN(kept);
	*kept = 0;
	if (!http_GetHdr(ctx->http_req, H_Cookie, &v))
		return (0);
	/* "; " between the pairs kept: at most one more byte per ';' */
	l = strlen(v);
	for (sep = 0, p = v; (p = strchr(p, ';')) != NULL; p++)
		sep++;
	buf = WS_Alloc(ctx->ws, sizeof COOKIE + l + sep);
	if (buf == NULL)
		return (-1);
	memcpy(buf, COOKIE, sizeof COOKIE - 1);
	o = buf + sizeof COOKIE - 1;
	removed = 0;
	for (p = v; ; p = e + 1) {
		while (is_ws(*p))
			p++;
		e = strchr(p, ';');
		if (e == NULL)
			e = p + strlen(p);
		ne = e;
		while (ne > p && is_ws(ne[-1]))
			ne--;
		if (ne > p) {
			eq = memchr(p, '=', ne - p);
			nl = (eq != NULL ? eq : ne) - p;
			while (nl > 0 && is_ws(p[nl - 1]))
				nl--;
			val = eq != NULL ? eq + 1 : ne;
			while (val < ne && is_ws(*val))
				val++;
			if (drop(ctx, priv, p, nl, val, ne - val))
				removed++;
			else {
				if (o > buf + sizeof COOKIE - 1) {
					*o++ = ';';
					*o++ = ' ';
				}
				memcpy(o, p, ne - p);
				o += ne - p;
				(*kept)++;
			}
		}
		if (*e == '\0')
			break;
	}
	*o = '\0';
	assert(o < buf + sizeof COOKIE + l + sep);
	if (removed == 0)
		return (0);
	http_Unset(ctx->http_req, H_Cookie);
	if (*kept > 0)
		http_SetHeader(ctx->http_req, buf);
	return (removed);
}
