/*
 * Regex hooks for the loader (ghost_load*.c), on top of varnishd's VRE
 * (PCRE2). Patterns are anchored to match the whole value, and the match
 * limits are set once here (VRE_match with limits writes shared state, so
 * requests match with lim = NULL afterwards).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdef.h"
#include "vas.h"
#include "vre.h"
#include "vsb.h"

#include "ghost_state.h"

static const struct vre_limits gh_limits = {10000, 20};

int
gh_re_compile(const char *pat, struct vre **re, char *err, size_t errlen)
{
	struct vsb vsb[1];
	char *p;
	int e, eo;
	size_t l;

	/* the pattern alone first, so errors and offsets are the user's */
	*re = VRE_compile(pat, 0, &e, &eo, 0);
	if (*re == NULL) {
		AN(VSB_init(vsb, err, errlen));
		(void)VRE_error(vsb, e);
		(void)VSB_finish(vsb);
		VSB_fini(vsb);
		l = strlen(err);
		(void)snprintf(err + l, errlen - l, " at offset %d", eo);
		return (-1);
	}
	VRE_free(re);
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
		(void)snprintf(err, errlen, "cannot be anchored (a comment "
		    "or an unbalanced group at the end?)");
		return (-1);
	}
	(void)VRE_match(*re, "", 0, 0, &gh_limits);
	return (0);
}

/*
 * 1: the value matches, 0: it does not, negative: the match failed with
 * a PCRE2 error (VRE_match()'s, a limit of gh_limits above), which says
 * nothing about whether it matches.
 */
int
gh_re_match(const struct vre *re, const char *s, size_t len)
{
	int i;

	/* VRE_match() reads length 0 as "up to the NUL": an empty query
	 * parameter value would be matched with the rest of the URL */
	if (len == 0)
		s = "";
	i = VRE_match(re, s, len, 0, NULL);
	if (i >= 0)
		return (1);
	if (i == VRE_ERROR_NOMATCH)
		return (0);
	assert(i < 0);
	return (i);
}

void
gh_re_free(struct vre **re)
{
	VRE_free(re);
}
