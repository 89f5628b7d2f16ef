/*
 * RequestMirror: fire-and-forget copies of the request line and headers
 * (no body), sent by one VMOD-owned thread per router. A fixed ring of
 * preallocated slots: when it is full the copy is dropped and counted,
 * so the main request is never delayed or failed.
 */

#define GH_MIRROR_SLOTS	32
#define GH_MIRROR_BUF	8192

struct gh_mirror_item {
	int			family;
	unsigned char		addr[16];
	unsigned		port;
	size_t			len;
	char			buf[GH_MIRROR_BUF];
};

struct gh_mirror_q {
	pthread_mutex_t		mtx;
	pthread_cond_t		cond;
	struct gh_mirror_item	*items;
	unsigned		head, n;
	int			stop;
	int			started;
	pthread_t		thr;
	struct VSC_ghostrouter	*rvsc;
};

void gh_mirror_init(struct gh_mirror_q *, struct VSC_ghostrouter *);
void gh_mirror_fini(struct gh_mirror_q *);
void gh_mirror_send(VRT_CTX, struct gh_mirror_q *, const struct gh_mirror *);
