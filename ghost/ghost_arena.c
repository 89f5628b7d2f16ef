/*
 * Arena allocation for the loader: bump allocation in 2 MB chunks that
 * are released all at once, and a per-router cache of released chunks.
 *
 * A reload builds two large, short-lived sets of small objects: jansson's
 * document (about 14 bytes per byte of ghost.json) and the routing state.
 * With malloc, a reload on a worker thread whose malloc arena had not
 * grown yet spent most of its time in page faults, and freeing either set
 * cost as much as parsing it. Here a state and a document are each one
 * list of chunks, freed by handing the chunks back to the cache, and the
 * next load reuses those warm pages.
 *
 * No varnishd symbols: the fuzzer links this file too.
 */

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ghost_state.h"

struct gh_chunk {
	struct gh_chunk		*next;
	size_t			size;		/* of the mapping */
	size_t			used;		/* from the start */
};

#define HDR	((sizeof(struct gh_chunk) + 15) & ~(size_t)15)

void
gh_chunkpool_init(struct gh_chunkpool *cp)
{
	memset(cp, 0, sizeof *cp);
	(void)pthread_mutex_init(&cp->mtx, NULL);
}

static void
chunk_unmap(struct gh_chunk *c)
{
	(void)munmap(c, c->size);
}

void
gh_chunkpool_fini(struct gh_chunkpool *cp)
{
	struct gh_chunk *c;

	while ((c = cp->free) != NULL) {
		cp->free = c->next;
		chunk_unmap(c);
	}
	cp->nfree = 0;
	(void)pthread_mutex_destroy(&cp->mtx);
}

void
gh_chunkpool_keep(struct gh_chunkpool *cp, unsigned keep)
{
	struct gh_chunk *c, *rel = NULL;

	(void)pthread_mutex_lock(&cp->mtx);
	cp->keep = keep;
	while (cp->nfree > cp->keep) {
		c = cp->free;
		cp->free = c->next;
		cp->nfree--;
		c->next = rel;
		rel = c;
	}
	(void)pthread_mutex_unlock(&cp->mtx);
	while ((c = rel) != NULL) {
		rel = c->next;
		chunk_unmap(c);
	}
}

#ifdef GH_ARENA_MALLOC

void *
gh_arena_alloc(struct gh_arena *a, size_t n)
{
	struct gh_chunk *c;

	c = malloc(HDR + n);
	if (c == NULL)
		return (NULL);
	c->size = HDR + n;
	c->next = a->head;
	a->head = c;
	return ((char *)c + HDR);
}

int
gh_chunkpool_fill_one(struct gh_chunkpool *cp)
{
	(void)cp;
	return (0);
}

int
gh_arena_owns(const struct gh_arena *a, const void *p)
{
	(void)a;
	(void)p;
	return (0);	/* jansson does not use the arena in this build */
}

void
gh_arena_release(struct gh_arena *a)
{
	struct gh_chunk *c;

	while ((c = a->head) != NULL) {
		a->head = c->next;
		free(c);
	}
	a->nchunk = 0;
}

#else

static struct gh_chunk *
chunk_get(struct gh_chunkpool *cp, size_t need)
{
	struct gh_chunk *c = NULL;
	size_t sz = GH_CHUNK;
	void *p;

	if (need + HDR <= GH_CHUNK && cp != NULL) {
		(void)pthread_mutex_lock(&cp->mtx);
		c = cp->free;
		if (c != NULL) {
			cp->free = c->next;
			cp->nfree--;
		}
		(void)pthread_mutex_unlock(&cp->mtx);
	}
	if (c == NULL) {
		if (need + HDR > sz)
			sz = (need + HDR + 4095) & ~(size_t)4095;
		p = mmap(NULL, sz, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (p == MAP_FAILED)
			return (NULL);
		c = p;
		c->size = sz;
	}
	c->next = NULL;
	c->used = HDR;
	return (c);
}

/*
 * Add one chunk, its pages touched, if the pool holds fewer than it
 * keeps: run outside reloads (by the reaper), so that the next reload
 * finds all its memory warm. Returns 1 if a chunk was added.
 */
int
gh_chunkpool_fill_one(struct gh_chunkpool *cp)
{
	struct gh_chunk *c;
	unsigned want;

	(void)pthread_mutex_lock(&cp->mtx);
	want = cp->nfree < cp->keep;
	(void)pthread_mutex_unlock(&cp->mtx);
	if (!want)
		return (0);
	c = chunk_get(NULL, 0);
	if (c == NULL)
		return (0);
	memset((char *)c + HDR, 0, c->size - HDR);
	(void)pthread_mutex_lock(&cp->mtx);
	if (cp->nfree < cp->keep) {
		c->next = cp->free;
		cp->free = c;
		cp->nfree++;
		c = NULL;
	}
	(void)pthread_mutex_unlock(&cp->mtx);
	if (c != NULL) {
		chunk_unmap(c);
		return (0);
	}
	return (1);
}

void *
gh_arena_alloc(struct gh_arena *a, size_t n)
{
	struct gh_chunk *c = a->head;
	void *p;

	if (n > SIZE_MAX / 2)
		return (NULL);
	n = (n + 15) & ~(size_t)15;
	if (n == 0)
		n = 16;
	if (c == NULL || c->size - c->used < n) {
		c = chunk_get(a->pool, n);
		if (c == NULL)
			return (NULL);
		a->nchunk++;
		if (a->head != NULL && c->size > GH_CHUNK) {
			/* an oversized chunk is full: keep the current one */
			c->next = a->head->next;
			a->head->next = c;
		} else {
			c->next = a->head;
			a->head = c;
		}
	}
	p = (char *)c + c->used;
	c->used += n;
	return (p);
}

int
gh_arena_owns(const struct gh_arena *a, const void *p)
{
	const struct gh_chunk *c;
	uintptr_t u = (uintptr_t)p;

	for (c = a->head; c != NULL; c = c->next)
		if (u >= (uintptr_t)c && u < (uintptr_t)c + c->size)
			return (1);
	return (0);
}

void
gh_arena_release(struct gh_arena *a)
{
	struct gh_chunk *c, *rel = NULL;
	struct gh_chunkpool *cp = a->pool;

	if (cp != NULL)
		(void)pthread_mutex_lock(&cp->mtx);
	while ((c = a->head) != NULL) {
		a->head = c->next;
		if (cp != NULL && c->size == GH_CHUNK &&
		    cp->nfree < cp->keep) {
			c->next = cp->free;
			cp->free = c;
			cp->nfree++;
		} else {
			c->next = rel;
			rel = c;
		}
	}
	if (cp != NULL)
		(void)pthread_mutex_unlock(&cp->mtx);
	while ((c = rel) != NULL) {
		rel = c->next;
		chunk_unmap(c);
	}
	a->nchunk = 0;
}

#endif
