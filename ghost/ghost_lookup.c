/*
 * Per-request lookups in a state: the host table of a listener socket,
 * the vhost of a host, the described socket and the listener of a host.
 * No varnishd symbol, like the loader (the fuzzer runs them).
 */

#include <ctype.h>
#include <string.h>

#include "vdef.h"
#include "vas.h"
#include "miniobj.h"

#include "ghost_state.h"

const struct gh_vhost *
gh_host_lookup(const struct gh_htab *t, const char *host, size_t len)
{
	uint32_t h;
	size_t i;
	struct gh_vhost *vh;

	AN(t);
	AN(t->slot);
	if (len > 0) {
		AN(host);
		h = gh_fnv(GH_FNV0, host, len) & t->mask;
		while ((vh = t->slot[h]) != NULL) {
			if (vh->kind == GH_HOST_EXACT &&
			    !strncmp(vh->hostname, host, len) &&
			    vh->hostname[len] == '\0')
				return (vh);
			h = (h + 1) & t->mask;
		}
	}
	if (t->nwild > 0) {
		/* longest suffix first: leftmost dot after the first label */
		for (i = 1; i < len; i++) {
			if (host[i] != '.')
				continue;
			h = gh_fnv(gh_fnv(GH_FNV0, "*", 1), host + i, len - i) & t->mask;
			while ((vh = t->slot[h]) != NULL) {
				if (vh->kind == GH_HOST_WILD &&
				    !strncmp(vh->hostname + 1, host + i,
				    len - i) && vh->hostname[len - i + 1] == '\0')
					return (vh);
				h = (h + 1) & t->mask;
			}
		}
	}
	return (t->any);
}

const struct gh_htab *
gh_htab_find(const struct gh_state *st, const char *socket,
    const char *admin)
{
	unsigned u;

	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	if (socket != NULL) {
		for (u = 0; u < st->ntab; u++)
			if (!strcmp(st->tab[u].socket, socket))
				return (&st->tab[u]);
		if (admin != NULL && !strcmp(socket, admin))
			return (NULL);
	}
	return (&st->deftab);
}

size_t
gh_host_normalize(const char *in, char *out, size_t outlen)
{
	size_t o = 0;

	if (*in == '[') {
		/* IPv6 literal: keep the brackets, drop the port */
		while (*in != '\0' && *in != ']' && o + 2 < outlen)
			out[o++] = (char)tolower((unsigned char)*in++);
		if (*in != ']')
			return (0);
		out[o++] = ']';
		out[o] = '\0';
		return (o);
	}
	while (*in != '\0' && *in != ':') {
		if (o + 1 >= outlen)
			return (0);
		out[o++] = (char)tolower((unsigned char)*in++);
	}
	while (o > 0 && out[o - 1] == '.')
		o--;
	out[o] = '\0';
	return (o);
}

const struct gh_sock *
gh_sock_find(const struct gh_state *st, const char *socket)
{
	unsigned u;

	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	if (socket == NULL)
		return (NULL);
	for (u = 0; u < st->nsock; u++)
		if (!strcmp(st->sock[u].name, socket))
			return (&st->sock[u]);
	return (NULL);
}

/*
 * The listener of sk that accepts host (normalized, len bytes) most
 * specifically, as the Gateway API orders listener hostnames: the exact
 * hostname, then the longest wildcard suffix, then the listener without
 * hostname; NULL when none accepts it.
 */
const struct gh_listener *
gh_listener_select(const struct gh_sock *sk, const char *host, size_t len)
{
	const struct gh_listener *l, *best = NULL;
	size_t sl;
	long rank, brank = -1;
	unsigned u;

	CHECK_OBJ_NOTNULL(sk, GH_SOCK_MAGIC);
	AN(host);
	for (u = 0; u < sk->nlistener; u++) {
		l = &sk->listener[u];
		switch (l->kind) {
		case GH_HOST_EXACT:
			if (len == l->hlen && !memcmp(host, l->hostname, len))
				return (l);
			continue;
		case GH_HOST_WILD:
			/* "*.example.com": one label or more before the
			 * suffix ".example.com" */
			sl = l->hlen - 1;
			if (len <= sl || memcmp(host + len - sl,
			    l->hostname + 1, sl))
				continue;
			rank = (long)sl;
			break;
		default:
			assert(l->kind == GH_HOST_ANY);
			rank = 0;
			break;
		}
		if (rank > brank) {
			best = l;
			brank = rank;
		}
	}
	return (best);
}
