/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Copyright (c) 2026 The rxl project
 */

/*
 * Flat entry points to the rxl cores for the userspace build: the
 * harness (harness/rxl/core.py) hands over a topology as arrays, and this
 * file builds the struct cpu_group tree the cores walk, exactly as the
 * kernel's smp_topo() lays it out (each group's children contiguous).
 * Nothing here is part of the kernel series.
 */

#include <stdlib.h>

#include <net/iflib_spread.h>
#include <netinet/in_pcblb_deal.h>
#include <netinet/in_pcblb_learn.h>

#include "rxlcore.h"

struct rxl_topo {
	struct cpu_group	*rt_groups;
	int			 rt_ngroups;
};

struct rxl_topo *
rxl_topo_new(int ngroups, const int *parent, const int *level,
    const int *flags, const int *ncpus, const int *cpus)
{
	struct rxl_topo *t;
	struct cpu_group *cg, *p;
	int c, g, i, k;

	if (ngroups <= 0 || parent[0] != -1)
		return (NULL);
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return (NULL);
	t->rt_groups = calloc((size_t)ngroups, sizeof(*t->rt_groups));
	if (t->rt_groups == NULL) {
		free(t);
		return (NULL);
	}
	t->rt_ngroups = ngroups;
	k = 0;
	for (g = 0; g < ngroups; g++) {
		cg = &t->rt_groups[g];
		cg->cg_level = (int8_t)level[g];
		cg->cg_flags = (int8_t)flags[g];
		cg->cg_first = -1;
		CPU_ZERO(&cg->cg_mask);
		for (i = 0; i < ncpus[g]; i++, k++) {
			c = cpus[k];
			if (c < 0 || c >= CPU_SETSIZE)
				goto bad;
			CPU_SET(c, &cg->cg_mask);
			if (cg->cg_first < 0 || c < cg->cg_first)
				cg->cg_first = c;
			if (c > cg->cg_last)
				cg->cg_last = c;
		}
		cg->cg_count = CPU_COUNT(&cg->cg_mask);
		if (g == 0)
			continue;
		/* Breadth-first order: a parent precedes, siblings adjoin. */
		if (parent[g] < 0 || parent[g] >= g)
			goto bad;
		p = &t->rt_groups[parent[g]];
		cg->cg_parent = p;
		if (p->cg_children == 0)
			p->cg_child = cg;
		else if (&p->cg_child[p->cg_children] != cg)
			goto bad;
		p->cg_children++;
	}
	return (t);
bad:
	rxl_topo_free(t);
	return (NULL);
}

void
rxl_topo_free(struct rxl_topo *t)
{

	if (t == NULL)
		return;
	free(t->rt_groups);
	free(t);
}

static const struct cpu_group *
rxl_root(const struct rxl_topo *t)
{

	return (t != NULL ? &t->rt_groups[0] : NULL);
}

int
rxl_spread(const struct rxl_topo *t, const int *eligible, int neligible,
    int ncpu, int mode, unsigned *order)
{
	cpuset_t elig;
	uint64_t *keys;
	int c, i, n;

	if (ncpu < 0 || ncpu > CPU_SETSIZE || (mode != 0 && mode != 1))
		return (-1);
	CPU_ZERO(&elig);
	for (i = 0; i < neligible; i++) {
		if (eligible[i] < 0 || eligible[i] >= ncpu)
			return (-1);
		CPU_SET(eligible[i], &elig);
	}
	if (mode == 0) {
		/* What iflib walks without the tunable: ids in order. */
		n = 0;
		for (c = 0; c < ncpu; c++)
			if (CPU_ISSET(c, &elig))
				order[n++] = (unsigned)c;
		return (n);
	}
	keys = malloc(sizeof(*keys) * (size_t)(neligible > 0 ? neligible : 1));
	if (keys == NULL)
		return (-1);
	n = (int)iflib_spread_order(rxl_root(t), &elig, (u_int)ncpu, order,
	    keys);
	free(keys);
	return (n);
}

/*
 * The deal with member indices for slots: the members handed to lbdeal()
 * are pointers into an array of indices, turned back into indices after.
 */
int
rxl_deal(const struct rxl_topo *t, int nmembers, const uint16_t *tags,
    const uint32_t *counts, int ncpu, uint32_t *cpuent, uint16_t *slots,
    unsigned *nslots)
{
	struct lbdeal_in in;
	struct lbdeal_out out;
	uint16_t *idx;
	void **members, **mslots, *scratch;
	unsigned i;
	bool built;

	if (nmembers <= 0 || nmembers > LBDEAL_MAXMEMBERS || ncpu <= 0 ||
	    ncpu > CPU_SETSIZE)
		return (-1);
	idx = calloc((size_t)nmembers, sizeof(*idx));
	members = calloc((size_t)nmembers, sizeof(*members));
	mslots = calloc((size_t)nmembers * LBDEAL_SLOTS, sizeof(*mslots));
	in.di_root = rxl_root(t);
	scratch = malloc(lbdeal_scratch_size(in.di_root, (u_int)nmembers,
	    (u_int)ncpu));
	built = false;
	if (idx == NULL || members == NULL || mslots == NULL ||
	    scratch == NULL)
		goto out;
	for (i = 0; i < (unsigned)nmembers; i++) {
		idx[i] = (uint16_t)i;
		members[i] = &idx[i];
	}
	in.di_tags = tags;
	in.di_members = members;
	in.di_counts = counts;
	in.di_nmembers = (u_int)nmembers;
	in.di_ncpu = (u_int)ncpu;
	out.do_cpu = cpuent;
	out.do_slot = mslots;
	built = lbdeal(&in, &out, scratch);
	*nslots = built ? LBDEAL_SLOTS * (unsigned)nmembers : 0;
	for (i = 0; built && i < *nslots; i++)
		slots[i] = *(uint16_t *)mslots[i];
out:
	free(scratch);
	free(mslots);
	free(members);
	free(idx);
	if (idx == NULL || members == NULL || mslots == NULL ||
	    scratch == NULL)
		return (-1);
	return (built ? 1 : 0);
}

unsigned
rxl_select(const uint32_t *cpuent, int ncpu, int cpu, uint32_t h, int n,
    int *steered)
{
	unsigned slot;

	/* The kernel never asks for a CPU beyond the map; this caller may. */
	*steered = cpuent != NULL && cpu >= 0 && cpu < ncpu &&
	    lbdeal_steer(cpuent, (u_int)cpu, h, &slot);
	return (*steered ? slot : h % (unsigned)n);
}

uint32_t
rxl_mix(uint32_t h)
{

	return (LBDEAL_MIX(h));
}

size_t
rxl_deal_scratch_size(const struct rxl_topo *t, int nmembers, int ncpu)
{

	return (lbdeal_scratch_size(rxl_root(t), (u_int)nmembers,
	    (u_int)ncpu));
}

/*
 * A group's learning as the kernel drives it: rl_cum[] stands for the
 * per-CPU handshake counters (cumulative, wrapping), rl_arrays[] for the
 * snapshot, last-window and sum arrays struct lblearn keeps.
 */
struct rxl_learn {
	struct lblearn	 rl_ll;
	uint32_t	*rl_cum;
	uint32_t	*rl_arrays;
};

struct rxl_learn *
rxl_learn_new(int ncpu, int window, int now)
{
	struct rxl_learn *l;

	if (ncpu <= 0 || window <= 0)
		return (NULL);
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return (NULL);
	l->rl_cum = calloc((size_t)ncpu, sizeof(uint32_t));
	l->rl_arrays = calloc(3 * (size_t)ncpu, sizeof(uint32_t));
	if (l->rl_cum == NULL || l->rl_arrays == NULL) {
		rxl_learn_free(l);
		return (NULL);
	}
	lblearn_init(&l->rl_ll, l->rl_arrays, l->rl_arrays + ncpu,
	    l->rl_arrays + 2 * ncpu, (u_int)ncpu, window, now);
	return (l);
}

void
rxl_learn_free(struct rxl_learn *l)
{

	if (l == NULL)
		return;
	free(l->rl_cum);
	free(l->rl_arrays);
	free(l);
}

/* A handshake completed on cpu: what syncache_socket() counts. */
void
rxl_learn_count(struct rxl_learn *l, int cpu, uint32_t n)
{

	if (cpu >= 0 && (u_int)cpu < l->rl_ll.ll_ncpu)
		l->rl_cum[cpu] += n;
}

int
rxl_learn_roll(struct rxl_learn *l, int now)
{

	return (lblearn_roll(&l->rl_ll, now, l->rl_ll.ll_window, l->rl_cum));
}

/* The deal's input as of the last roll, and its total. */
uint64_t
rxl_learn_sum(const struct rxl_learn *l, uint32_t *sum)
{
	uint64_t total;
	u_int c;

	total = 0;
	for (c = 0; c < l->rl_ll.ll_ncpu; c++) {
		sum[c] = l->rl_ll.ll_sum[c];
		total += sum[c];
	}
	return (total);
}

/* cpu's count in the last complete window and so far in this one. */
void
rxl_learn_window(const struct rxl_learn *l, int cpu, uint32_t *last,
    uint32_t *cur)
{

	if (cpu < 0 || (u_int)cpu >= l->rl_ll.ll_ncpu) {
		*last = *cur = 0;
		return;
	}
	*last = l->rl_ll.ll_last[cpu];
	*cur = l->rl_cum[cpu] - l->rl_ll.ll_snap[cpu];
}
