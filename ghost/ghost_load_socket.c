/*
 * The loader's top-level "sockets": TLS, and the listeners for the
 * server name check.
 */

#include <string.h>

#include <jansson.h>

#include "vdef.h"
#include "vas.h"
#include "miniobj.h"

#include "ghost_state.h"
#include "ghost_load.h"

static const char * const sock_fields[] = {"name", "tls", "listeners", NULL};
static const char * const listener_fields[] = {"name", "hostname", NULL};

static int
load_listener(struct pc *pc, const char *path, const json_t *j,
    const struct gh_sock *sk, struct gh_listener *l, unsigned idx)
{
	const char *s;
	char p[PATHLEN], q[96];
	unsigned u;

	if (check_object(pc, path, j, listener_fields) ||
	    get_string(pc, path, j, "name", 1, 1, 253, &s))
		return (-1);
	SUB(p, path, ".name");
	if (has_ctl(s, 0))
		return (fail(pc, p, "%s contains a control character or a "
		    "space; use the Gateway listener name",
		    qv(q, sizeof q, s)));
	for (u = 0; u < idx; u++)
		if (!strcmp(sk->listener[u].name, s))
			return (fail(pc, p, "duplicate listener %s, already "
			    "at listeners[%u]; listener names are unique",
			    qv(q, sizeof q, s), u));
	l->name = sdup(pc, p, s);
	if (l->name == NULL ||
	    get_string(pc, path, j, "hostname", 0, 1, 253, &s))
		return (-1);
	SUB(p, path, ".hostname");
	if (s == NULL)
		s = "*";
	else if (!is_lower_hostname(s, 1))
		return (fail(pc, p, "%s is not a valid listener hostname; use "
		    "a lower case DNS name (www.example.com), a wildcard "
		    "(*.example.com), or leave it out for every host",
		    qv(q, sizeof q, s)));
	for (u = 0; u < idx; u++) {
		if (strcmp(sk->listener[u].hostname, s))
			continue;
		if (!strcmp(s, "*"))
			return (fail(pc, p, "listeners[%u] (%s) already has "
			    "no hostname (every host); at most one listener "
			    "of a socket has none", u, sk->listener[u].name));
		return (fail(pc, p, "%s is already the hostname of "
		    "listeners[%u] (%s); give each listener of a socket its "
		    "own hostname", qv(q, sizeof q, s), u,
		    sk->listener[u].name));
	}
	l->hostname = sdup(pc, p, s);
	if (l->hostname == NULL)
		return (-1);
	l->hlen = strlen(s);
	l->kind = !strcmp(s, "*") ? GH_HOST_ANY :
	    s[0] == '*' ? GH_HOST_WILD : GH_HOST_EXACT;
	return (0);
}

/* the optional top-level "sockets" */
int
load_sockets(struct pc *pc, const json_t *root, struct gh_state *st)
{
	json_t *a, *e, *v, *la, *le;
	size_t i, k;
	unsigned u;
	const char *s;
	char path[PATHLEN], p[PATHLEN], q[96];
	struct gh_sock *sk;

	CHECK_OBJ_NOTNULL(st, GH_STATE_MAGIC);
	if (get_array(pc, "", root, "sockets", 0, MAX_SOCKETS, &a))
		return (-1);
	if (a == NULL || json_array_size(a) == 0)
		return (0);
	st->sock = zalloc(pc, "sockets", json_array_size(a),
	    sizeof *st->sock);
	if (st->sock == NULL)
		return (-1);
	json_array_foreach(a, i, e) {
		sk = &st->sock[i];
		sk->magic = GH_SOCK_MAGIC;
		SUB(path, "sockets", "[%zu]", i);
		if (check_object(pc, path, e, sock_fields) ||
		    get_string(pc, path, e, "name", 1, 1, 63, &s))
			return (-1);
		SUB(p, path, ".name");
		if (!is_socket_name(s))
			return (fail(pc, p, "%s is not a socket name; use "
			    "letters, digits, '-', '_' and '.' as in varnishd "
			    "-a NAME=...", qv(q, sizeof q, s)));
		for (u = 0; u < i; u++)
			if (!strcmp(st->sock[u].name, s))
				return (fail(pc, p, "duplicate socket %s, "
				    "already described by sockets[%u]; merge "
				    "the two", qv(q, sizeof q, s), u));
		sk->name = sdup(pc, p, s);
		if (sk->name == NULL)
			return (-1);
		st->nsock = i + 1;
		v = json_object_get(e, "tls");
		if (v != NULL) {
			SUB(p, path, ".tls");
			if (!json_is_boolean(v))
				return (fail(pc, p, "expected a boolean, got "
				    "%s; write true or false", jtype(v)));
			sk->tls = json_is_true(v);
		}
		if (sk->tls && pc->admin != NULL && !strcmp(pc->admin, s))
			return (fail(pc, p, "%s is ghost's admin socket, which "
			    "is plain HTTP on loopback; remove \"tls\" or "
			    "name another socket", qv(q, sizeof q, s)));
		if (get_array(pc, path, e, "listeners", 0, MAX_SOCKETS, &la))
			return (-1);
		if (la == NULL || json_array_size(la) == 0)
			continue;
		sk->listener = zalloc(pc, path, json_array_size(la),
		    sizeof *sk->listener);
		if (sk->listener == NULL)
			return (-1);
		json_array_foreach(la, k, le) {
			SUB(p, path, ".listeners[%zu]", k);
			if (load_listener(pc, p, le, sk, &sk->listener[k],
			    (unsigned)k))
				return (-1);
			sk->nlistener = k + 1;
		}
	}
	return (0);
}
