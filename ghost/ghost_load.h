/*
 * ghost: the loader's private header, shared by its files:
 *
 *   ghost_load.c          gh_conf_load(): the top level, vhosts, host
 *                         tables, the state's invariants, gh_state_free()
 *   ghost_load_util.c     errors naming the JSON path, typed field access,
 *                         state memory, syntax checks
 *   ghost_load_socket.c   "sockets"
 *   ghost_load_backend.c  "backends", and the references to them
 *   ghost_load_cache.c    "cachePolicies"
 *   ghost_load_route.c    routes: matches, timeouts, groups, retry, session
 *   ghost_load_filter.c   route filters
 *
 * Include after ghost_state.h and <jansson.h>. The names are hidden: they
 * never bind to a varnishd symbol of the same name.
 */

#pragma GCC visibility push(hidden)

/* one load's context */
struct pc {
	char		*err;
	size_t		errlen;
	const char	*admin;
	struct gh_arena	*arena;		/* the state's */
	struct gh_state	*st;		/* being built */
	struct gh_backend **bslot;	/* the backends by name */
	unsigned	bmask;		/* size of bslot - 1 */
	struct gh_cache	**cslot;	/* the cache policies by name */
	unsigned	cmask;		/* size of cslot - 1 */
};

#define PATHLEN		384	/* a JSON path in an error */
#define MAX_SOCKETS	64	/* described sockets, listener names */

/* buf = parent + formatted suffix; memcpy, not "%s", for the parent */
#define SUB(buf, parent, ...) do {					\
		size_t _l = strlen(parent);				\
		if (_l >= sizeof buf)					\
			_l = sizeof buf - 1;				\
		memcpy(buf, parent, _l);				\
		(void)snprintf(buf + _l, sizeof buf - _l, __VA_ARGS__);	\
	} while (0)

/* ghost_load_util.c: errors; fail() always returns -1 */
int fail(struct pc *pc, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *qv(char *buf, size_t len, const char *s);
const char *jtype(const json_t *j);
const char *fpath(char *buf, size_t len, const char *parent,
    const char *key);

/* ghost_load_util.c: typed field access, 0 or -1 (pc->err set) */
int check_object(struct pc *pc, const char *path, const json_t *j,
    const char * const *allowed);
int want_string(struct pc *pc, const char *path, const json_t *v,
    size_t minlen, size_t maxlen, const char **out);
int get_string(struct pc *pc, const char *parent, const json_t *obj,
    const char *key, int required, size_t minlen, size_t maxlen,
    const char **out);
int get_int(struct pc *pc, const char *parent, const json_t *obj,
    const char *key, int required, long long min, long long max,
    long long dflt, long long *out);
int get_bool(struct pc *pc, const char *parent, const json_t *obj,
    const char *key, int *out);
int get_array(struct pc *pc, const char *parent, const json_t *obj,
    const char *key, int required, size_t maxitems, json_t **out);

/* ghost_load_util.c: state memory, from the state's arena */
void *salloc(struct pc *pc, const char *path, size_t n);
char *sdup(struct pc *pc, const char *path, const char *s);
void *zalloc(struct pc *pc, const char *path, size_t n, size_t sz);

/* ghost_load_util.c: syntax checks */
int is_lower_hostname(const char *s, int allow_wild);
int is_redirect_host(const char *s);
int is_socket_name(const char *s);
int is_token(const char *s);
int is_lower_token(const char *s);
int has_ctl(const char *s, int space_ok);
char *mkhdr(struct pc *pc, const char *path, const char *name);
int load_regex(struct pc *pc, const char *path, const char *pat,
    struct vre **re);
extern const char * const methods[];

/* the sections, each 0 or -1 (pc->err set) */
int load_sockets(struct pc *pc, const json_t *root, struct gh_state *st);
int load_backends(struct pc *pc, const json_t *root, struct gh_state *st);
int load_ref(struct pc *pc, const char *path, const json_t *j,
    struct gh_group *g);
int load_group(struct pc *pc, const char *path, const json_t *j,
    struct gh_state *st, const struct gh_route *r, struct gh_group *g);
int load_cache_policies(struct pc *pc, const json_t *root,
    struct gh_state *st);
const struct gh_cache *cache_find(const struct pc *pc, const char *name);
int load_route(struct pc *pc, const char *path, const json_t *j,
    struct gh_state *st, struct gh_route *r);
int route_cmp(const void *a, const void *b);
int load_hmod(struct pc *pc, const char *path, const json_t *j,
    struct gh_hmod **out);
int load_filter(struct pc *pc, const char *path, const json_t *j,
    struct gh_route *r, unsigned *nmirror);

#pragma GCC visibility pop
