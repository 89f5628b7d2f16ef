/*
 * Request path normalisation, before matching and forwarding: a backend
 * resolves "/public/../admin" or "/public/%2e%2e/admin" to "/admin", so a
 * route must see the path the backend will. As Envoy's normalize_path,
 * merge_slashes and escaped-slash action:
 *
 *  - percent-escapes of unreserved characters (RFC 3986 2.3: ALPHA, DIGIT,
 *    "-", ".", "_", "~") are decoded, the others written with upper case
 *    hexadecimal digits (RFC 3986 6.2.2.1);
 *  - an escaped "/" or "\" (%2F, %5C) makes the request a 400, or is kept
 *    as it is (ghost.json "escapedSlashes": "keep"): never a separator;
 *  - "//" is merged into "/", then the dot-segments "." and ".." are
 *    removed (RFC 3986 5.2.4; ".." never climbs above the root);
 *  - a "%" without two hexadecimal digits makes the request a 400.
 *
 * The query is left as it is. This file uses no varnishd symbol.
 */

#include <stddef.h>
#include <string.h>

#include "vdef.h"
#include "vas.h"

#include "ghost_state.h"

static int
hexval(char c)
{

	if (c >= '0' && c <= '9')
		return (c - '0');
	if (c >= 'a' && c <= 'f')
		return (c - 'a' + 10);
	if (c >= 'A' && c <= 'F')
		return (c - 'A' + 10);
	return (-1);
}

static int
unreserved(int c)
{

	return ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~');
}

/*
 * 1 when gh_path_normalize() would leave the path as it is: it has no
 * "%" and no "/" followed by "/" or "." (the fast path, no copy).
 */
int
gh_path_normal(const char *p, size_t l)
{
	size_t i;

	for (i = 0; i < l; i++) {
		if (p[i] == '%')
			return (0);
		if (p[i] == '/' && i + 1 < l && (p[i + 1] == '/' ||
		    p[i + 1] == '.'))
			return (0);
	}
	return (1);
}

/*
 * Normalise the path p (l bytes, starting with "/") into out (l bytes at
 * least, not NUL-terminated). Returns the length written, or
 * GH_PATH_BAD_ESCAPE, or GH_PATH_ESCAPED_SLASH (keep_slashes 0).
 */
long
gh_path_normalize(const char *p, size_t l, char *out, int keep_slashes)
{
	size_t i, n, o, s, sl;
	int hi, lo, c, trailing;

	assert(l > 0 && p[0] == '/');
	/* decode unreserved escapes, check the others */
	for (i = n = 0; i < l; i++) {
		if (p[i] != '%') {
			out[n++] = p[i];
			continue;
		}
		if (i + 2 >= l)
			return (GH_PATH_BAD_ESCAPE);
		hi = hexval(p[i + 1]);
		lo = hexval(p[i + 2]);
		if (hi < 0 || lo < 0)
			return (GH_PATH_BAD_ESCAPE);
		c = hi * 16 + lo;
		i += 2;
		if (unreserved(c)) {
			out[n++] = (char)c;
			continue;
		}
		if ((c == '/' || c == '\\') && !keep_slashes)
			return (GH_PATH_ESCAPED_SLASH);
		out[n++] = '%';
		out[n++] = "0123456789ABCDEF"[hi];
		out[n++] = "0123456789ABCDEF"[lo];
	}
	assert(n <= l);

	/*
	 * Segments, in place: each kept one is written as "/seg"; empty
	 * ones (merged slashes) are skipped, "." too, ".." removes the one
	 * before. A trailing "/", "." or ".." leaves the path ending in "/".
	 */
	o = 0;
	trailing = 0;
	for (s = 1; s <= n; s += sl + 1) {
		sl = 0;
		while (s + sl < n && out[s + sl] != '/')
			sl++;
		trailing = (s + sl == n && sl == 0);
		if (sl == 0)
			continue;
		if (sl == 1 && out[s] == '.') {
			trailing = (s + sl == n);
			continue;
		}
		if (sl == 2 && out[s] == '.' && out[s + 1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			trailing = (s + sl == n);
			continue;
		}
		assert(o <= s - 1);
		out[o++] = '/';
		memmove(out + o, out + s, sl);
		o += sl;
	}
	if (o == 0 || trailing)
		out[o++] = '/';
	assert(o <= n);
	return ((long)o);
}
