/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Copyright (c) 2026 The rxl project
 *
 * Redistribution and use in source and binary forms, with or without
 * modification, are permitted provided that the following conditions
 * are met:
 * 1. Redistributions of source code must retain the above copyright
 *    notice, this list of conditions and the following disclaimer.
 * 2. Redistributions in binary form must reproduce the above copyright
 *    notice, this list of conditions and the following disclaimer in the
 *    documentation and/or other materials provided with the distribution.
 *
 * THIS SOFTWARE IS PROVIDED BY THE AUTHOR AND CONTRIBUTORS ``AS IS'' AND
 * ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
 * IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE
 * ARE DISCLAIMED.  IN NO EVENT SHALL THE AUTHOR OR CONTRIBUTORS BE LIABLE
 * FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL
 * DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS
 * OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION)
 * HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT
 * LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY
 * OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF
 * SUCH DAMAGE.
 */

/*
 * Spread order of an iflib device's queue CPUs across L3 cache groups.
 *
 * Without it, queue i takes the i-th CPU of the interrupt set by id, so a
 * device with fewer queues than CPUs fills the first L3 group and leaves
 * the others without a receiving CPU, and on a machine that numbers SMT
 * siblings next to each other it doubles up the first cores.  Crossing an
 * L3 group is the one step of the receive-to-worker distance that costs a
 * measurable share of a request, so the order below hands out one CPU of
 * every L3 group of the device's domain before a second one of any, and
 * one thread of every core before a second thread of any.
 *
 * Terms: a unit is an outermost group sharing an L3 (CG_SHARE_L3); the
 * CPUs in no unit count as one more unit, after all others.  A core is
 * the innermost group flagged THREAD (HTT or SMT) holding a CPU; a CPU in
 * none is a core of its own.  A domain is the outermost group flagged
 * NODE holding a CPU (the root for CPUs in none); in a tree without NODE
 * groups, the package: the root's child holding the CPU if it shares no
 * cache, else the root.
 *
 * Within the CPUs of one phase, a CPU's rank is the number of CPUs of
 * the same core and unit before it (0 for a core's first thread).  The
 * order is by rank; within a rank the units take turns, in order of their
 * lowest CPU, each giving its CPUs by id; across domains the domains take
 * turns as well (the local one first, then by their lowest CPU), each
 * giving its CPUs in that same order.  It is computed by sorting 64-bit
 * keys, so the cost is O(n^2) in the eligible CPUs at worst (insertion
 * sort), once per device at attach.
 */

#ifdef _KERNEL
#include <sys/param.h>
#include <sys/systm.h>
#include <sys/cpuset.h>
#include <sys/smp.h>
#endif

#include <net/iflib_spread.h>

/* Key fields, low to high: CPU, unit, index in unit, domain, rank. */
#define	SPREAD_BITS	12
#define	SPREAD_MASK	((1ULL << SPREAD_BITS) - 1)
#define	SPREAD_REST	SPREAD_MASK	/* the unit of CPUs in no unit */
#define	SPREAD_F(k, i)	(((k) >> ((i) * SPREAD_BITS)) & SPREAD_MASK)
#define	SPREAD_K(v, i)	((uint64_t)(v) << ((i) * SPREAD_BITS))
#define	SPREAD_CPU	0
#define	SPREAD_UNIT	1
#define	SPREAD_IDX	2
#define	SPREAD_DOM	3
#define	SPREAD_RANK	4

/* The child of cg holding cpu, or NULL. */
static const struct cpu_group *
spread_child(const struct cpu_group *cg, u_int cpu)
{
	int i;

	for (i = 0; i < cg->cg_children; i++)
		if (CPU_ISSET(cpu, &cg->cg_child[i].cg_mask))
			return (&cg->cg_child[i]);
	return (NULL);
}

/*
 * The group after cg in a preorder walk of the tree below root.  The
 * kernel's cpu_group children are laid out as an array, which gives the
 * next sibling without a link.
 */
static const struct cpu_group *
spread_next(const struct cpu_group *root, const struct cpu_group *cg)
{
	const struct cpu_group *parent;
	int i;

	if (cg->cg_children > 0)
		return (&cg->cg_child[0]);
	while (cg != root) {
		parent = cg->cg_parent;
		i = (int)(cg - parent->cg_child);
		if (i + 1 < parent->cg_children)
			return (&parent->cg_child[i + 1]);
		cg = parent;
	}
	return (NULL);
}

/* The unit (outermost L3 group) holding cpu, or NULL. */
static const struct cpu_group *
spread_unit(const struct cpu_group *root, u_int cpu)
{
	const struct cpu_group *cg;

	for (cg = root; cg != NULL; cg = spread_child(cg, cpu))
		if (cg->cg_level == CG_SHARE_L3)
			return (cg);
	return (NULL);
}

/* The domain of cpu (see the top of the file). */
static const struct cpu_group *
spread_domain(const struct cpu_group *root, bool nodes, u_int cpu)
{
	const struct cpu_group *cg;

	if (!nodes) {
		cg = spread_child(root, cpu);
		if (cg != NULL && cg->cg_level == CG_SHARE_NONE)
			return (cg);
		return (root);
	}
	for (cg = root; cg != NULL; cg = spread_child(cg, cpu))
		if ((cg->cg_flags & CG_FLAG_NODE) != 0)
			return (cg);
	return (root);
}

/* Sort keys[0..n) ascending (insertion sort: n is small, once). */
static void
spread_sort(uint64_t *keys, u_int n)
{
	uint64_t k;
	u_int i, j;

	for (i = 1; i < n; i++) {
		k = keys[i];
		for (j = i; j > 0 && keys[j - 1] > k; j--)
			keys[j] = keys[j - 1];
		keys[j] = k;
	}
}

/*
 * Put the CPUs of set in order[] in spread order (see the top of the
 * file) and return how many there are; keys[] is scratch of as many.
 */
static u_int
spread_phase(const struct cpu_group *root, bool nodes, bool across,
    const struct cpu_group *ldom, const cpuset_t *set,
    const cpuset_t *inunit, u_int ncpu, u_int *order, uint64_t *keys)
{
	const struct cpu_group *cg, *core, *d, *u;
	uint64_t above, dkey, prev;
	u_int c, i, idx, n, rank;

	n = 0;
	for (c = 0; c < ncpu; c++) {
		if (!CPU_ISSET(c, set))
			continue;
		u = spread_unit(root, c);
		core = NULL;
		for (cg = root; cg != NULL; cg = spread_child(cg, c))
			if ((cg->cg_flags & CG_FLAG_THREAD) != 0)
				core = cg;
		rank = 0;
		for (i = core != NULL ? (u_int)core->cg_first : c; i < c; i++)
			if (CPU_ISSET(i, &core->cg_mask) && CPU_ISSET(i, set) &&
			    (u != NULL ? CPU_ISSET(i, &u->cg_mask) :
			    !CPU_ISSET(i, inunit)))
				rank++;
		/* Across domains: the local one first, then by lowest CPU. */
		dkey = 0;
		if (across && (d = spread_domain(root, nodes, c)) != ldom)
			dkey = 1 + (u_int)d->cg_first + (d == root ? 2048 : 0);
		keys[n++] = SPREAD_K(rank, SPREAD_RANK) |
		    SPREAD_K(dkey, SPREAD_DOM) |
		    SPREAD_K(u != NULL ? (u_int)u->cg_first : SPREAD_REST,
		    SPREAD_UNIT) | SPREAD_K(c, SPREAD_CPU);
	}
	spread_sort(keys, n);

	/* Each CPU's index among those of its rank, domain and unit. */
	prev = idx = 0;
	for (i = 0; i < n; i++) {
		above = keys[i] >> (SPREAD_UNIT * SPREAD_BITS);
		idx = i > 0 && above == prev ? idx + 1 : 0;
		prev = above;
		keys[i] |= SPREAD_K(idx, SPREAD_IDX);
	}
	/* By rank, then index: the units of a rank take turns. */
	spread_sort(keys, n);

	if (across) {
		/* The domains of a rank take turns, each in the order above. */
		for (i = 0; i < n; i++) {
			above = keys[i] >> (SPREAD_DOM * SPREAD_BITS);
			idx = i > 0 && above == prev ? idx + 1 : 0;
			prev = above;
			dkey = SPREAD_F(keys[i], SPREAD_DOM);
			keys[i] = SPREAD_K(SPREAD_F(keys[i], SPREAD_RANK),
			    SPREAD_RANK) | SPREAD_K(idx, SPREAD_DOM) |
			    SPREAD_K(dkey, SPREAD_IDX) |
			    SPREAD_K(SPREAD_F(keys[i], SPREAD_CPU), SPREAD_CPU);
		}
		spread_sort(keys, n);
	}
	for (i = 0; i < n; i++)
		order[i] = (u_int)SPREAD_F(keys[i], SPREAD_CPU);
	return (n);
}

u_int
iflib_spread_order(const struct cpu_group *root, const cpuset_t *eligible,
    const cpuset_t *local, u_int ncpu, int mode, u_int *order,
    uint64_t *keys)
{
	const struct cpu_group *cg, *ldom;
	cpuset_t far, inunit, near;
	u_int c, n;
	int first, lfirst;
	bool nodes;

	n = 0;
	CPU_ZERO(&inunit);
	if (ncpu > SPREAD_REST)
		ncpu = SPREAD_REST;
	for (c = 0; root != NULL && c < ncpu; c++)
		if (spread_unit(root, c) != NULL)
			CPU_SET(c, &inunit);
	/* Spread off, or no L3 group reported: the numeric order. */
	if (mode == IFLIB_SPREAD_OFF || CPU_EMPTY(&inunit)) {
		for (c = 0; c < ncpu; c++)
			if (CPU_ISSET(c, eligible))
				order[n++] = c;
		return (n);
	}

	/*
	 * The local domain: that of the first local CPU, or, when the
	 * device's domain is unknown, of the CPU the numeric order takes
	 * first.
	 */
	first = lfirst = -1;
	for (c = 0; c < ncpu; c++) {
		if (!CPU_ISSET(c, eligible))
			continue;
		if (first < 0)
			first = (int)c;
		if (lfirst < 0 && local != NULL && CPU_ISSET(c, local))
			lfirst = (int)c;
	}
	if (first < 0)
		return (0);
	nodes = false;
	for (cg = root; cg != NULL && !nodes; cg = spread_next(root, cg))
		nodes = (cg->cg_flags & CG_FLAG_NODE) != 0;
	ldom = spread_domain(root, nodes, (u_int)(lfirst >= 0 ? lfirst :
	    first));

	/*
	 * Spreading within the domain takes every local CPU before any
	 * other; spreading across domains takes them all in one go.
	 */
	CPU_ZERO(&near);
	CPU_ZERO(&far);
	for (c = 0; c < ncpu; c++) {
		if (!CPU_ISSET(c, eligible))
			continue;
		if (mode == IFLIB_SPREAD_ACROSS || (local != NULL ?
		    CPU_ISSET(c, local) :
		    spread_domain(root, nodes, c) == ldom))
			CPU_SET(c, &near);
		else
			CPU_SET(c, &far);
	}
	n = spread_phase(root, nodes, mode == IFLIB_SPREAD_ACROSS, ldom,
	    &near, &inunit, ncpu, order, keys);
	n += spread_phase(root, nodes, false, ldom, &far, &inunit, ncpu,
	    order + n, keys);
	return (n);
}
