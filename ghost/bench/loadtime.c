/*
 * Loader benchmark: gh_conf_load() of one file, N times in a row, the way
 * a router reloads (each new state replaces the previous one, which is
 * then freed), outside varnishd. Prints wall and thread CPU time of each
 * load and of each free. Regexes go through PCRE2 (fuzz/fuzz_re.c).
 *
 * Builds against this tree and, for comparisons, against the loader of
 * older commits (ghost.h before the VMOD's split, which renamed it
 * ghost_state.h; before the chunk pool: GH_CHUNK unset).
 *
 * Usage: loadtime FILE [N]     (make -C ghost bench-load)
 */

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if __has_include("ghost_state.h")
#  include "ghost_state.h"
#else
#  include "ghost.h"
#endif

static double
ms(clockid_t id)
{
	struct timespec t;

	(void)clock_gettime(id, &t);
	return (t.tv_sec * 1e3 + t.tv_nsec / 1e6);
}

int
main(int argc, char **argv)
{
	struct gh_state *st, *old = NULL;
	char err[1024], *buf;
	double w0, w1, w2, c0, c1, c2;
	long len;
	FILE *f;
	int i, n;
#ifdef GH_CHUNK
	static struct gh_chunkpool cp;

	gh_chunkpool_init(&cp);
#endif
	if (argc < 2) {
		fprintf(stderr, "usage: loadtime FILE [N]\n");
		return (2);
	}
	n = argc > 2 ? atoi(argv[2]) : 10;
	f = fopen(argv[1], "r");
	if (f == NULL || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0) {
		perror(argv[1]);
		return (1);
	}
	rewind(f);
	buf = malloc(len + 1);
	if (buf == NULL || fread(buf, 1, len, f) != (size_t)len) {
		perror(argv[1]);
		return (1);
	}
	buf[len] = '\0';
	(void)fclose(f);
	for (i = 0; i < n; i++) {
		w0 = ms(CLOCK_MONOTONIC);
		c0 = ms(CLOCK_THREAD_CPUTIME_ID);
#ifdef GH_CHUNK
		st = gh_conf_load(buf, len, "ghost-admin", &cp, err,
		    sizeof err);
#else
		st = gh_conf_load(buf, len, "ghost-admin", err, sizeof err);
#endif
		w1 = ms(CLOCK_MONOTONIC);
		c1 = ms(CLOCK_THREAD_CPUTIME_ID);
		if (st == NULL) {
			fprintf(stderr, "%s\n", err);
			return (1);
		}
		if (old != NULL)
			gh_state_free(old);
		old = st;
		w2 = ms(CLOCK_MONOTONIC);
		c2 = ms(CLOCK_THREAD_CPUTIME_ID);
		printf("load %d: %.1f ms (CPU %.1f ms), free of the previous "
		    "state %.1f ms (CPU %.1f ms)\n", i + 1, w1 - w0, c1 - c0,
		    w2 - w1, c2 - c1);
	}
	gh_state_free(old);
	free(buf);
	return (0);
}
