/*
 * libFuzzer target for the ghost.json loader (ghost_load*.c): parse,
 * validate, build the host tables and sorted routes, run some lookups
 * (hosts, and listeners of the described sockets),
 * free. Regexes go through PCRE2 directly (fuzz_re.c) instead of
 * varnishd's VRE, with the same anchoring and limits.
 */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ghost_state.h"

static const char * const hosts[] = {
	"", "a", "www.example.com", "a.example.com", "a.b.example.com",
	"example.com", "x", "*.example.com", NULL
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gh_state *st;
	const struct gh_htab *t;
	const struct gh_sock *sk;
	const char * const *h;
	char err[1024], nh[256];
	static const char * const socks[] = {"http", "ghost-admin", "x",
	    "port-443", NULL};
	const char * const *s;

	static struct gh_chunkpool cp;
	static int cp_init;

	if (!cp_init) {
		gh_chunkpool_init(&cp);
		cp_init = 1;
	}
	/* both the cached (a router's) and the uncached arena path */
	st = gh_conf_load((const char *)data, size, "ghost-admin",
	    (size & 1) ? &cp : NULL, err, sizeof err);
	if (st == NULL) {
		/* every rejection has a message naming a place */
		if (err[0] == '\0' || strchr(err, ':') == NULL)
			__builtin_trap();
		return (0);
	}
	for (s = socks; *s != NULL; s++) {
		t = gh_htab_find(st, *s, "ghost-admin");
		if (t == NULL)
			continue;
		for (h = hosts; *h != NULL; h++)
			(void)gh_host_lookup(t, *h, strlen(*h));
	}
	/* the listener selection of TLS sockets (SNI and Host) */
	for (s = socks; *s != NULL; s++) {
		sk = gh_sock_find(st, *s);
		if (sk == NULL)
			continue;
		for (h = hosts; *h != NULL; h++)
			(void)gh_listener_select(sk, *h, strlen(*h));
	}
	if (size < sizeof nh) {
		memcpy(nh, data, size);
		nh[size] = '\0';
		(void)gh_host_normalize(nh, err, sizeof err);
	}
	gh_state_free(st);
	return (0);
}
