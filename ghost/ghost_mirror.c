/*
 * RequestMirror: fire-and-forget copies of the request line and headers
 * (no body), sent by one VMOD-owned thread per router from a fixed ring
 * of preallocated slots (struct gh_mirror_q in ghost.h). A full ring, a
 * request too large for a slot or a failed connection drops the copy and
 * counts it; the main request is never delayed or failed.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
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

#define MIRROR_TMO_MS	1000

static int
hdr_skip(const txt *t)
{
	static const char * const skip[] = {
	    "content-length:", "transfer-encoding:", "connection:",
	    "keep-alive:", "expect:", NULL};
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
	VSB_cat(vsb, "Connection: close\r\n\r\n");
	r = VSB_finish(vsb);
	VSB_fini(vsb);
	return (r);
}

void
gh_mirror_send(VRT_CTX, struct gh_mirror_q *q, const struct gh_mirror *m)
{
	const struct gh_endpoint *ep;
	struct gh_mirror_item *it;

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
		if (q->rvsc != NULL)
			(void)__atomic_add_fetch(&q->rvsc->mirror_dropped, 1,
			    __ATOMIC_RELAXED);
		return;
	}
	it = &q->items[(q->head + q->n) % GH_MIRROR_SLOTS];
	if (serialize(ctx->http_req, it->buf, sizeof it->buf)) {
		PTOK(pthread_mutex_unlock(&q->mtx));
		if (q->rvsc != NULL)
			(void)__atomic_add_fetch(&q->rvsc->mirror_dropped, 1,
			    __ATOMIC_RELAXED);
		return;
	}
	it->len = strlen(it->buf);
	it->family = ep->family;
	memcpy(it->addr, ep->addr, sizeof it->addr);
	it->port = ep->port;
	q->n++;
	PTOK(pthread_cond_signal(&q->cond));
	PTOK(pthread_mutex_unlock(&q->mtx));
}

static int
mirror_one(const struct gh_mirror_item *it)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *s4 = (void *)&ss;
	struct sockaddr_in6 *s6 = (void *)&ss;
	socklen_t sl;
	struct pollfd pfd;
	size_t o = 0;
	ssize_t n;
	char rbuf[1024];
	int fd, err;
	socklen_t el = sizeof err;
	double deadline;

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
	if (connect(fd, (void *)&ss, sl) && errno != EINPROGRESS) {
		(void)close(fd);
		return (-1);
	}
	pfd.fd = fd;
	pfd.events = POLLOUT;
	if (poll(&pfd, 1, MIRROR_TMO_MS) != 1 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) || err != 0) {
		(void)close(fd);
		return (-1);
	}
	deadline = VTIM_mono() + MIRROR_TMO_MS / 1e3;
	while (o < it->len) {
		n = send(fd, it->buf + o, it->len - o, MSG_NOSIGNAL);
		if (n > 0) {
			o += n;
			continue;
		}
		if (n < 0 && errno != EAGAIN) {
			(void)close(fd);
			return (-1);
		}
		pfd.events = POLLOUT;
		if (VTIM_mono() > deadline || poll(&pfd, 1, 100) < 0) {
			(void)close(fd);
			return (-1);
		}
	}
	/* drain the answer until EOF or the deadline; it is discarded */
	pfd.events = POLLIN;
	while (VTIM_mono() < deadline && poll(&pfd, 1, 100) >= 0) {
		if (!(pfd.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = recv(fd, rbuf, sizeof rbuf, 0);
		if (n <= 0 && !(n < 0 && errno == EAGAIN))
			break;
	}
	(void)close(fd);
	return (0);
}

static void *
mirror_thread(void *priv)
{
	struct gh_mirror_q *q = priv;
	struct gh_mirror_item *it;

	it = malloc(sizeof *it);
	AN(it);
	PTOK(pthread_mutex_lock(&q->mtx));
	while (!q->stop) {
		if (q->n == 0) {
			PTOK(pthread_cond_wait(&q->cond, &q->mtx));
			continue;
		}
		memcpy(it, &q->items[q->head], sizeof *it);
		q->head = (q->head + 1) % GH_MIRROR_SLOTS;
		q->n--;
		PTOK(pthread_mutex_unlock(&q->mtx));
		if (q->rvsc != NULL)
			(void)__atomic_add_fetch(mirror_one(it) ?
			    &q->rvsc->mirror_dropped : &q->rvsc->mirrored, 1,
			    __ATOMIC_RELAXED);
		PTOK(pthread_mutex_lock(&q->mtx));
	}
	PTOK(pthread_mutex_unlock(&q->mtx));
	free(it);
	return (NULL);
}

void
gh_mirror_init(struct gh_mirror_q *q, struct VSC_ghostrouter *rvsc)
{
	memset(q, 0, sizeof *q);
	PTOK(pthread_mutex_init(&q->mtx, NULL));
	PTOK(pthread_cond_init(&q->cond, NULL));
	q->rvsc = rvsc;
	q->items = calloc(GH_MIRROR_SLOTS, sizeof *q->items);
	AN(q->items);
	PTOK(pthread_create(&q->thr, NULL, mirror_thread, q));
	q->started = 1;
}

void
gh_mirror_fini(struct gh_mirror_q *q)
{
	PTOK(pthread_mutex_lock(&q->mtx));
	q->stop = 1;
	PTOK(pthread_cond_signal(&q->cond));
	PTOK(pthread_mutex_unlock(&q->mtx));
	if (q->started)
		PTOK(pthread_join(q->thr, NULL));
	free(q->items);
	PTOK(pthread_mutex_destroy(&q->mtx));
	PTOK(pthread_cond_destroy(&q->cond));
}
