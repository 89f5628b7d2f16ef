/*
 * Regex hooks for ghost_conf.c, on top of varnishd's VRE (PCRE2).
 * Patterns are anchored to match the whole value, and the match limits
 * are set once here (VRE_match with limits writes shared state, so
 * requests match with lim = NULL afterwards).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdef.h"
#include "vas.h"
#include "vre.h"
#include "vsb.h"

#include "ghost.h"

static const struct vre_limits gh_limits = {10000, 20};

int
gh_re_compile(const char *pat, struct vre **re, char *err, size_t errlen)
{
	struct vsb vsb[1], *v;
	char *p;
	int e, eo;
	size_t l;

	l = strlen(pat) + 9;
	p = malloc(l);
	if (p == NULL) {
		(void)snprintf(err, errlen, "out of memory");
		return (-1);
	}
	(void)snprintf(p, l, "^(?:%s)\\z", pat);
	*re = VRE_compile(p, 0, &e, &eo, 1);
	free(p);
	if (*re == NULL) {
		v = VSB_init(vsb, err, errlen);
		AN(v);
		(void)VRE_error(vsb, e);
		(void)VSB_finish(vsb);
		l = strlen(err);
		if (eo >= 4)
			eo -= 4;
		(void)snprintf(err + l, errlen - l, " at offset %d", eo);
		VSB_fini(vsb);
		return (-1);
	}
	(void)VRE_match(*re, "", 0, 0, &gh_limits);
	return (0);
}

int
gh_re_match(const struct vre *re, const char *s, size_t len)
{
	return (VRE_match(re, s, len, 0, NULL) >= 0);
}

void
gh_re_free(struct vre **re)
{
	VRE_free(re);
}
