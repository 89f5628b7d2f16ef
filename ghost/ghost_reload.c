/*
 * Reload: read ghost.json, build a new state, attach its backends and
 * counters, swap it in. Reloads are serialised by the router's
 * reload_mtx; the swap is a pointer exchange under its mtx.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"

#include "vtim.h"

#include "VSC_ghostrouter.h"

#include "vcc_ghost_if.h"
#include "ghost.h"

/*
 * reload_mtx held. Read path into the router's read buffer, which is kept
 * between reloads and grown (mapped with its pages populated in one call)
 * when the file is larger: a reload of a large file into fresh memory
 * would otherwise take a page fault per page (10 to 18 ms for 3.5 MB
 * here), and a reload of the same size reuses warm pages.
 */
static char *
read_file(struct VPFX(ghost_router) *rt, size_t *len, char *err,
    size_t errlen)
{
	int fd;
	struct stat stt;
	char *buf;
	ssize_t n;
	size_t o = 0, need;

	fd = open(rt->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		(void)snprintf(err, errlen, "(file): cannot open %s: %s; "
		    "check that the chaperone wrote it", rt->path,
		    strerror(errno));
		return (NULL);
	}
	if (fstat(fd, &stt) || stt.st_size > GH_MAX_FILE) {
		(void)snprintf(err, errlen, "(file): %s is larger than %d "
		    "bytes or unreadable", rt->path, GH_MAX_FILE);
		(void)close(fd);
		return (NULL);
	}
	need = stt.st_size + 1;
	if (need > rt->rbuf_len) {
		if (rt->rbuf != NULL)
			AZ(munmap(rt->rbuf, rt->rbuf_len));
		need = (need + 65535) & ~(size_t)65535;
		rt->rbuf = mmap(NULL, need, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (rt->rbuf == MAP_FAILED) {
			rt->rbuf = NULL;
			rt->rbuf_len = 0;
			(void)snprintf(err, errlen, "(file): cannot map %zu "
			    "bytes for %s: %s", need, rt->path,
			    strerror(errno));
			(void)close(fd);
			return (NULL);
		}
		rt->rbuf_len = need;
	}
	buf = rt->rbuf;
	while (o < (size_t)stt.st_size) {
		n = read(fd, buf + o, stt.st_size - o);
		if (n <= 0)
			break;
		o += n;
	}
	(void)close(fd);
	buf[o] = '\0';
	*len = o;
	return (buf);
}

/*
 * Load the file into a new state and swap it in; on error res->err says
 * why and the state in use stays.
 */
void
gh_reload(VRT_CTX, struct VPFX(ghost_router) *rt,
    struct gh_reload_result *res)
{
	struct gh_state *st, *old;
	char *buf;
	size_t len;
	double t0, t1, t2, t3, t4;
	struct timespec c0, c1;

	memset(res, 0, sizeof *res);
	PTOK(pthread_mutex_lock(&rt->reload_mtx));
	t0 = VTIM_mono();
	AZ(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0));
	buf = read_file(rt, &len, res->err, sizeof res->err);
	st = NULL;
	t1 = t2 = t0;
	if (buf != NULL) {
		t1 = VTIM_mono();
		st = gh_conf_load(buf, len, rt->admin, &rt->cpool, res->err,
		    sizeof res->err);
		t2 = VTIM_mono();
	}
	t3 = t2;
	if (st != NULL) {
		st->refcnt = 1;
		t3 = VTIM_mono();
		if (gh_pool_attach(ctx, rt, st, res->err, sizeof res->err)) {
			gh_state_unref(rt, &st);
			st = NULL;
		} else
			gh_stats_attach(rt, st);
	}
	if (st == NULL) {
		gh_stats_create(ctx, rt, NULL);
		res->generation = rt->generation;
		if (rt->rvsc != NULL)
			rt->rvsc->reload_failures++;
		PTOK(pthread_mutex_unlock(&rt->reload_mtx));
		return;
	}
	st->generation = ++rt->generation;
	PTOK(pthread_mutex_lock(&rt->mtx));
	old = rt->cur;
	rt->cur = st;
	PTOK(pthread_mutex_unlock(&rt->mtx));
	if (old != NULL)
		gh_state_unref(rt, &old);
	res->ok = 1;
	res->generation = st->generation;
	res->nvhost = st->nvhost;
	res->nroute = st->nroute;
	res->nendpoint = st->nendpoint;
	res->nbackend = rt->nbackends;
	/* the new routing serves from here on: that is the reload time */
	t4 = VTIM_mono();
	res->ms = (t4 - t0) * 1e3;
	rt->last_reload_ms = res->ms;
	gh_stats_create(ctx, rt, st);
	AZ(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1));
	VSL(SLT_Debug, NO_VXID, "ghost: %s reload %ju: read %.1f ms, parse and "
	    "build %.1f ms, backends %.1f ms, total %.1f ms; then new "
	    "vhost counters %.1f ms (thread CPU %.1f ms)", rt->vcl_name,
	    (uintmax_t)st->generation, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
	    (t4 - t3) * 1e3, res->ms, (VTIM_mono() - t4) * 1e3,
	    (c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6);
	if (rt->rvsc != NULL)
		rt->rvsc->reloads++;
	PTOK(pthread_mutex_unlock(&rt->reload_mtx));
}

