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
 * the others without a receiving CPU.  Crossing an L3 group is the one
 * step of the receive-to-worker distance that costs a measurable share
 * of a request, so the order below hands out one CPU of every L3 group
 * of the device's domain before it hands out a second one of any.
 */

#ifdef _KERNEL
#include <sys/param.h>
#include <sys/systm.h>
#include <sys/cpuset.h>
#include <sys/smp.h>
#endif

#include <net/iflib_spread.h>

/*
 * The group after cg in a preorder walk of the tree below root, entering
 * cg's children only if descend is set.  NULL at the end of the walk.
 * The kernel's cpu_group children are laid out as an array, which gives
 * the next sibling without a link.
 */
static const struct cpu_group *
spread_next(const struct cpu_group *root, const struct cpu_group *cg,
    bool descend)
{
	const struct cpu_group *parent;
	int i;

	if (descend && cg->cg_children > 0)
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

/*
 * The first L3 group after prev (or the first one, if prev is NULL) in
 * preorder.  Groups below an L3 group are never units themselves.
 */
static const struct cpu_group *
spread_unit(const struct cpu_group *root, const struct cpu_group *prev)
{
	const struct cpu_group *cg;

	cg = prev == NULL ? root : spread_next(root, prev, false);
	while (cg != NULL && cg->cg_level != CG_SHARE_L3)
		cg = spread_next(root, cg, true);
	return (cg);
}

static bool
spread_in_unit(const struct cpu_group *root, u_int cpu)
{
	const struct cpu_group *u;

	for (u = spread_unit(root, NULL); u != NULL; u = spread_unit(root, u))
		if (CPU_ISSET(cpu, &u->cg_mask))
			return (true);
	return (false);
}

/*
 * The n-th CPU (from zero, by id) of unit u that is eligible and local or
 * not as asked; -1 if u has fewer.  A NULL unit stands for the CPUs that
 * are in no L3 group at all.
 */
static int
spread_nth(const struct cpu_group *root, const struct cpu_group *u,
    const cpuset_t *eligible, const cpuset_t *local, bool want_local,
    u_int ncpu, u_int n)
{
	u_int c, first, last;

	first = u != NULL ? (u_int)u->cg_first : 0;
	last = u != NULL ? (u_int)u->cg_last : ncpu - 1;
	if (last >= ncpu)
		last = ncpu - 1;
	for (c = first; c <= last; c++) {
		if (!CPU_ISSET(c, eligible))
			continue;
		if (want_local != (local == NULL || CPU_ISSET(c, local)))
			continue;
		if (u != NULL ? !CPU_ISSET(c, &u->cg_mask) :
		    spread_in_unit(root, c))
			continue;
		if (n-- == 0)
			return ((int)c);
	}
	return (-1);
}

u_int
iflib_spread_order(const struct cpu_group *root, const cpuset_t *eligible,
    const cpuset_t *local, u_int ncpu, u_int *order)
{
	const struct cpu_group *u;
	u_int c, n, round;
	int cpu, phase;
	bool rest, took;

	n = 0;
	if (ncpu == 0)
		return (0);
	/* No L3 group reported, or only one: the numeric order. */
	u = root != NULL ? spread_unit(root, NULL) : NULL;
	if (u == NULL || spread_unit(root, u) == NULL) {
		for (phase = 0; phase < 2; phase++)
			for (c = 0; c < ncpu; c++)
				if (CPU_ISSET(c, eligible) && (phase == 0) ==
				    (local == NULL || CPU_ISSET(c, local)))
					order[n++] = c;
		return (n);
	}

	/* Are there eligible CPUs outside every L3 group? */
	rest = false;
	for (c = 0; c < ncpu && !rest; c++)
		if (CPU_ISSET(c, eligible) && !spread_in_unit(root, c))
			rest = true;

	/*
	 * Local CPUs first, all of them, then the rest.  Within each phase
	 * every round takes the next CPU of every L3 group in tree order;
	 * CPUs in no L3 group come last in a round.
	 */
	for (phase = 0; phase < 2; phase++) {
		for (round = 0;; round++) {
			took = false;
			for (u = spread_unit(root, NULL);; u =
			    spread_unit(root, u)) {
				cpu = spread_nth(root, u, eligible, local,
				    phase == 0, ncpu, round);
				if (cpu >= 0) {
					order[n++] = (u_int)cpu;
					took = true;
				}
				if (u == NULL)
					break;
				if (!rest && spread_unit(root, u) == NULL)
					break;
			}
			if (!took)
				break;
		}
	}
	return (n);
}
