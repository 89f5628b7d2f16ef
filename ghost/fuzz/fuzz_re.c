/*
 * What the loader takes from varnishd, for the fuzzer and
 * bench/loadtime.c: the regex hooks, on PCRE2 directly with the same
 * anchoring and results as ghost_re.c (which uses varnishd's VRE; the
 * loader only compiles, so gh_re_match() here sets none of its match
 * limits), and VAS_Fail() for the assertions of vas.h, which aborts (the
 * fuzzer reports it as a crash).
 */

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdef.h"
#include "vas.h"

#include "ghost_state.h"

void v_noreturn_
VAS_Fail(const char *func, const char *file, int line, const char *cond,
    enum vas_e kind)
{

	(void)kind;
	fprintf(stderr, "assertion failed in %s(), %s line %d: %s\n", func,
	    file, line, cond);
	abort();
}

int
gh_re_compile(const char *pat, struct vre **re, char *err, size_t errlen)
{
	pcre2_code *c;
	int e;
	PCRE2_SIZE eo;
	char *p;
	size_t l;

	c = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, 0, &e, &eo,
	    NULL);
	if (c == NULL) {
		(void)pcre2_get_error_message(e, (PCRE2_UCHAR *)err, errlen);
		return (-1);
	}
	pcre2_code_free(c);
	l = strlen(pat) + 9;
	p = malloc(l);
	if (p == NULL)
		return (-1);
	(void)snprintf(p, l, "^(?:%s)\\z", pat);
	c = pcre2_compile((PCRE2_SPTR)p, PCRE2_ZERO_TERMINATED, 0, &e, &eo,
	    NULL);
	free(p);
	if (c == NULL) {
		(void)pcre2_get_error_message(e, (PCRE2_UCHAR *)err, errlen);
		return (-1);
	}
	*re = (struct vre *)c;
	return (0);
}

int
gh_re_match(const struct vre *re, const char *s, size_t len)
{
	pcre2_match_data *md;
	int r;

	md = pcre2_match_data_create_from_pattern((const pcre2_code *)re,
	    NULL);
	r = pcre2_match((const pcre2_code *)re, (PCRE2_SPTR)s, len, 0, 0, md,
	    NULL);
	pcre2_match_data_free(md);
	if (r >= 0)
		return (1);
	return (r == PCRE2_ERROR_NOMATCH ? 0 : r);
}

void
gh_re_free(struct vre **re)
{
	pcre2_code_free((pcre2_code *)*re);
	*re = NULL;
}
