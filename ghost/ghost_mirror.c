/*
 * RequestMirror: fire-and-forget copies of the request line and headers
 * (no body). The request thread serializes the copy into a slot of a
 * fixed ring of preallocated slots (struct gh_mirror_q in ghost.h) and
 * returns; GH_MIRROR_SENDERS VMOD-owned threads per router send the
 * copies over kept-alive HTTP/1.1 connections, each sender keeping up to
 * GH_MIRROR_CONNS of them (one per mirror endpoint it talks to). A sender
 * reads each answer to its end so the connection can carry the next copy,
 * and discards it.
 *
 * Counting: a copy whose request was written in full is "mirrored"
 * (whatever the answer); a full ring, a request too large for a slot, or
 * a connection that cannot be opened or written (after one retry on a new
 * connection when a kept-alive one had gone stale) is "mirror_dropped".
 * The main request is never delayed or failed.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cache/cache.h"

#include "vrnd.h"
#include "vsb.h"
#include "vtim.h"

#include "VSC_ghostrouter.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

#define MIRROR_TMO	1.0	/* s: connect, send, and each answer */
#define MIRROR_IDLE	30.0	/* s: an unused connection is closed */
#define MIRROR_RBUF	8192	/* answer header buffer per sender */

static int
hdr_skip(const txt *t)
{
	static const char * const skip[] = {
	    "content-length:", "transfer-encoding:", "connection:",
	    "keep-alive:", "expect:", "te:", "upgrade:", NULL};
	const char * const *s;
	size_t l;

	for (s = skip; *s != NULL; s++) {
		l = strlen(*s);
		if ((size_t)(t->e - t->b) >= l && !strncasecmp(t->b, *s, l))
			return (1);
	}
	return (0);
}

static int
serialize(const struct http *hp, char *buf, size_t len)
{
	struct vsb vsb[1];
	unsigned u;
	int r;

	AN(VSB_init(vsb, buf, len));
	VSB_printf(vsb, "%s %s HTTP/1.1\r\n", hp->hd[HTTP_HDR_METHOD].b,
	    hp->hd[HTTP_HDR_URL].b);
	for (u = HTTP_HDR_FIRST; u < hp->nhd; u++) {
		if (hp->hd[u].b == NULL || (hp->hdf[u] & HDF_FILTER) ||
		    hdr_skip(&hp->hd[u]))
			continue;
		VSB_bcat(vsb, hp->hd[u].b, hp->hd[u].e - hp->hd[u].b);
		VSB_cat(vsb, "\r\n");
	}
	VSB_cat(vsb, "\r\n");
	r = VSB_finish(vsb);
	VSB_fini(vsb);
	return (r);
}

static void
count(const struct gh_mirror_q *q, int dropped)
{

	if (q->rvsc == NULL)
		return;
	(void)__atomic_add_fetch(dropped ? &q->rvsc->mirror_dropped :
	    &q->rvsc->mirrored, 1, __ATOMIC_RELAXED);
}

/* the request path: a copy into the ring, or a counted drop; no I/O */
void
gh_mirror_send(VRT_CTX, struct gh_mirror_q *q, const struct gh_mirror *m)
{
	const struct gh_endpoint *ep;
	struct gh_mirror_item *it;

	CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
	if (m->group.nep == 0 || m->percent == 0)
		return;
	if (m->percent < 100 &&
	    (unsigned)(VRND_RandomTestable() % 100) >= m->percent)
		return;
	ep = &m->group.ep[m->group.nep > 1 ?
	    VRND_RandomTestable() % m->group.nep : 0];
	PTOK(pthread_mutex_lock(&q->mtx));
	if (q->items == NULL || q->stop || q->n == GH_MIRROR_SLOTS) {
		PTOK(pthread_mutex_unlock(&q->mtx));
		count(q, 1);
		return;
	}
	it = &q->items[(q->head + q->n) % GH_MIRROR_SLOTS];
	if (serialize(ctx->http_req, it->buf, sizeof it->buf)) {
		PTOK(pthread_mutex_unlock(&q->mtx));
		count(q, 1);
		return;
	}
	it->len = strlen(it->buf);
	it->head = !strcmp(ctx->http_req->hd[HTTP_HDR_METHOD].b, "HEAD");
	it->family = ep->family;
	memcpy(it->addr, ep->addr, sizeof it->addr);
	it->port = ep->port;
	q->n++;
	PTOK(pthread_cond_signal(&q->cond));
	PTOK(pthread_mutex_unlock(&q->mtx));
}

/*--------------------------------------------------------------------
 * a sender: its kept-alive connections and its answer reader
 */

struct mconn {
	int			fd;		/* -1: free */
	int			family;
	unsigned char		addr[16];
	unsigned		port;
	double			used;
};

struct sender {
	unsigned		magic;
#define GH_MSENDER_MAGIC	0x67686d73
	struct gh_mirror_q	*q;
	struct mconn		conn[GH_MIRROR_CONNS];
	struct gh_mirror_item	it;
	char			rbuf[MIRROR_RBUF];
	size_t			rb, re;		/* unread: rbuf[rb..re) */
	int			eof;		/* the peer closed or reset */
};

static void
conn_close(struct mconn *c)
{

	if (c->fd >= 0)
		(void)close(c->fd);
	c->fd = -1;
}

static int
conn_open(struct mconn *c, const struct gh_mirror_item *it)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *s4 = (void *)&ss;
	struct sockaddr_in6 *s6 = (void *)&ss;
	socklen_t sl, el;
	struct pollfd pfd;
	int fd, err, one = 1;

	memset(&ss, 0, sizeof ss);
	if (it->family == AF_INET) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(it->port);
		memcpy(&s4->sin_addr, it->addr, 4);
		sl = sizeof *s4;
	} else {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(it->port);
		memcpy(&s6->sin6_addr, it->addr, 16);
		sl = sizeof *s6;
	}
	fd = socket(it->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return (-1);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, (void *)&ss, sl) && errno != EINPROGRESS) {
		(void)close(fd);
		return (-1);
	}
	pfd.fd = fd;
	pfd.events = POLLOUT;
	el = sizeof err;
	if (poll(&pfd, 1, (int)(MIRROR_TMO * 1e3)) != 1 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) || err != 0) {
		(void)close(fd);
		return (-1);
	}
	c->fd = fd;
	c->family = it->family;
	memcpy(c->addr, it->addr, sizeof c->addr);
	c->port = it->port;
	return (0);
}

/*
 * The sender's connection to the item's endpoint: a kept-alive one that
 * is still open (*reused = 1), else a new one in a free slot or in place
 * of the least recently used. NULL: no connection.
 */
static struct mconn *
conn_get(struct sender *s, const struct gh_mirror_item *it, int *reused)
{
	struct mconn *c, *lru = NULL;
	struct pollfd pfd;
	unsigned u;

	*reused = 0;
	for (u = 0; u < GH_MIRROR_CONNS; u++) {
		c = &s->conn[u];
		if (c->fd >= 0 && c->family == it->family &&
		    c->port == it->port &&
		    !memcmp(c->addr, it->addr, sizeof c->addr))
			break;
		if (lru == NULL || c->fd < 0 ||
		    (lru->fd >= 0 && c->used < lru->used))
			lru = c;
	}
	if (u < GH_MIRROR_CONNS) {
		/* an idle connection with something to read was closed */
		pfd.fd = c->fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 0) == 0) {
			*reused = 1;
			return (c);
		}
		conn_close(c);
		lru = c;
	}
	AN(lru);
	conn_close(lru);
	if (conn_open(lru, it))
		return (NULL);
	return (lru);
}

static int
send_all(int fd, const char *b, size_t len, double deadline)
{
	struct pollfd pfd;
	ssize_t n;
	size_t o = 0;

	pfd.fd = fd;
	pfd.events = POLLOUT;
	while (o < len) {
		n = send(fd, b + o, len - o, MSG_NOSIGNAL);
		if (n > 0) {
			o += n;
			continue;
		}
		if (n < 0 && errno != EAGAIN)
			return (-1);
		if (VTIM_mono() > deadline || poll(&pfd, 1, 100) < 0)
			return (-1);
	}
	return (0);
}

/*
 * more answer bytes into rbuf; 0: got some, -1: EOF, error (s->eof set)
 * or deadline
 */
static int
rd_fill(struct sender *s, int fd, double deadline)
{
	struct pollfd pfd;
	ssize_t n;
	int tmo;

	if (s->rb > 0) {
		memmove(s->rbuf, s->rbuf + s->rb, s->re - s->rb);
		s->re -= s->rb;
		s->rb = 0;
	}
	if (s->re == sizeof s->rbuf)
		return (-1);
	pfd.fd = fd;
	pfd.events = POLLIN;
	while (1) {
		n = recv(fd, s->rbuf + s->re, sizeof s->rbuf - s->re, 0);
		if (n > 0) {
			s->re += n;
			return (0);
		}
		if (n == 0 || errno != EAGAIN) {
			s->eof = 1;
			return (-1);
		}
		tmo = (int)((deadline - VTIM_mono()) * 1e3);
		if (tmo <= 0 || poll(&pfd, 1, tmo) <= 0)
			return (-1);
	}
}

/* a line of the answer (CRLF stripped, NUL terminated) or NULL */
static char *
rd_line(struct sender *s, int fd, double deadline)
{
	char *p, *l;

	while (1) {
		p = memchr(s->rbuf + s->rb, '\n', s->re - s->rb);
		if (p != NULL) {
			l = s->rbuf + s->rb;
			s->rb = p + 1 - s->rbuf;
			*p = '\0';
			if (p > l && p[-1] == '\r')
				p[-1] = '\0';
			return (l);
		}
		if (rd_fill(s, fd, deadline))
			return (NULL);
	}
}

/* skip n body bytes; 0: done */
static int
rd_skip(struct sender *s, int fd, uintmax_t n, double deadline)
{
	size_t k;

	while (n > 0) {
		if (s->rb == s->re && rd_fill(s, fd, deadline))
			return (-1);
		k = s->re - s->rb;
		if (k > n)
			k = n;
		s->rb += k;
		n -= k;
	}
	return (0);
}

/* a comma-separated header value holds token t */
static int
has_token(const char *v, const char *t)
{
	size_t n = strlen(t);

	for (; *v != '\0'; v++)
		if (!strncasecmp(v, t, n))
			return (1);
	return (0);
}

static int
hdr_is(const char *l, const char *name, const char **v)
{
	size_t n = strlen(name);

	if (strncasecmp(l, name, n) || l[n] != ':')
		return (0);
	for (l += n + 1; *l == ' ' || *l == '\t'; l++)
		continue;
	*v = l;
	return (1);
}

/*
 * Read one answer to its end. 1: the connection can carry another copy,
 * 0: it cannot (closed, close-delimited, malformed or too slow), -1: the
 * peer closed it without a byte of answer (a kept-alive connection it had
 * closed: the copy was not read). A mirror that has not answered within
 * the deadline got the copy: 0, not sent again.
 */
static int
read_answer(struct sender *s, int fd, int head, double deadline)
{
	const char *v;
	char *l, *e;
	uintmax_t cl = 0, sz;
	int status, have_cl = 0, chunked = 0, close_ = 0, keep = 1;

	s->rb = s->re = 0;
	s->eof = 0;
	do {
		l = rd_line(s, fd, deadline);
		if (l == NULL)
			return (s->re == 0 && s->eof ? -1 : 0);
		/* HTTP/1.x NNN; 1xx answers are followed by the real one */
		if (strncmp(l, "HTTP/1.", 7) || strlen(l) < 12)
			return (0);
		status = atoi(l + 9);
		keep = l[7] == '1';
		while ((l = rd_line(s, fd, deadline)) != NULL && *l != '\0') {
			if (hdr_is(l, "Content-Length", &v)) {
				cl = strtoumax(v, &e, 10);
				have_cl = 1;
			} else if (hdr_is(l, "Transfer-Encoding", &v))
				chunked = has_token(v, "chunked");
			else if (hdr_is(l, "Connection", &v)) {
				if (has_token(v, "close"))
					close_ = 1;
				else if (has_token(v, "keep-alive"))
					keep = 1;
			}
		}
		if (l == NULL)
			return (0);
	} while (status >= 100 && status < 200);
	if (!keep || close_)
		keep = 0;
	if (head || status == 204 || status == 304)
		return (keep);
	if (chunked) {
		do {
			l = rd_line(s, fd, deadline);
			if (l == NULL)
				return (0);
			sz = strtoumax(l, &e, 16);
			if (e == l)
				return (0);
			if (rd_skip(s, fd, sz, deadline))
				return (0);
			if (sz > 0 && (l = rd_line(s, fd, deadline)) == NULL)
				return (0);
		} while (sz > 0);
		/* trailers up to the empty line */
		while ((l = rd_line(s, fd, deadline)) != NULL && *l != '\0')
			continue;
		return (l == NULL ? 0 : keep);
	}
	if (have_cl)
		return (rd_skip(s, fd, cl, deadline) ? 0 : keep);
	return (0);	/* close-delimited: read to EOF by nobody */
}

/* 0: the copy was sent; -1: dropped */
static int
mirror_one(struct sender *s, const struct gh_mirror_item *it)
{
	struct mconn *c;
	double deadline;
	int reused, r, try;

	for (try = 0; try < 2; try++) {
		c = conn_get(s, it, &reused);
		if (c == NULL)
			return (-1);
		deadline = VTIM_mono() + MIRROR_TMO;
		if (send_all(c->fd, it->buf, it->len, deadline)) {
			conn_close(c);
			if (reused)
				continue;
			return (-1);
		}
		c->used = VTIM_mono();
		r = read_answer(s, c->fd, it->head, deadline);
		if (r == -1 && reused) {
			/* stale: the peer closed it before reading the copy */
			conn_close(c);
			continue;
		}
		if (r != 1)
			conn_close(c);
		return (0);
	}
	return (-1);
}

static void
sender_idle(struct sender *s, double now)
{
	unsigned u;

	for (u = 0; u < GH_MIRROR_CONNS; u++)
		if (s->conn[u].fd >= 0 && now - s->conn[u].used > MIRROR_IDLE)
			conn_close(&s->conn[u]);
}

static void *
mirror_thread(void *priv)
{
	struct gh_mirror_q *q = priv;
	struct sender *s;
	struct timespec ts;
	unsigned u;

	ALLOC_OBJ(s, GH_MSENDER_MAGIC);
	AN(s);
	s->q = q;
	for (u = 0; u < GH_MIRROR_CONNS; u++)
		s->conn[u].fd = -1;
	PTOK(pthread_mutex_lock(&q->mtx));
	while (!q->stop) {
		if (q->n == 0) {
			/* wake now and then to close idle connections */
			ts = VTIM_timespec(VTIM_real() + 5.0);
			(void)pthread_cond_timedwait(&q->cond, &q->mtx, &ts);
			if (q->n == 0) {
				PTOK(pthread_mutex_unlock(&q->mtx));
				sender_idle(s, VTIM_mono());
				PTOK(pthread_mutex_lock(&q->mtx));
			}
			continue;
		}
		memcpy(&s->it, &q->items[q->head], sizeof s->it);
		q->head = (q->head + 1) % GH_MIRROR_SLOTS;
		q->n--;
		PTOK(pthread_mutex_unlock(&q->mtx));
		count(q, mirror_one(s, &s->it) != 0);
		PTOK(pthread_mutex_lock(&q->mtx));
	}
	PTOK(pthread_mutex_unlock(&q->mtx));
	for (u = 0; u < GH_MIRROR_CONNS; u++)
		conn_close(&s->conn[u]);
	FREE_OBJ(s);
	return (NULL);
}

void
gh_mirror_init(struct gh_mirror_q *q, struct VSC_ghostrouter *rvsc)
{
	unsigned u;

	memset(q, 0, sizeof *q);
	PTOK(pthread_mutex_init(&q->mtx, NULL));
	PTOK(pthread_cond_init(&q->cond, NULL));
	q->rvsc = rvsc;
	q->items = calloc(GH_MIRROR_SLOTS, sizeof *q->items);
	AN(q->items);
	for (u = 0; u < GH_MIRROR_SENDERS; u++) {
		PTOK(pthread_create(&q->thr[u], NULL, mirror_thread, q));
		q->nthr++;
	}
}

void
gh_mirror_fini(struct gh_mirror_q *q)
{
	unsigned u;

	PTOK(pthread_mutex_lock(&q->mtx));
	q->stop = 1;
	PTOK(pthread_cond_broadcast(&q->cond));
	PTOK(pthread_mutex_unlock(&q->mtx));
	for (u = 0; u < q->nthr; u++)
		PTOK(pthread_join(q->thr[u], NULL));
	free(q->items);
	PTOK(pthread_mutex_destroy(&q->mtx));
	PTOK(pthread_cond_destroy(&q->cond));
}
