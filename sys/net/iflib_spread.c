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
 * Spread order of an iflib device's queue CPUs.
 *
 * Without it, queue i takes the i-th CPU of the interrupt set by id, so a
 * device with fewer queues than CPUs fills the first L3 group and leaves
 * the others without a receiving CPU, and on a machine that numbers SMT
 * siblings next to each other it doubles up the first cores.  Crossing an
 * L3 group is the one step of the receive-to-worker distance that costs a
 * measurable share of a request, so this order hands out one CPU of every
 * L3 group before a second one of any, and one thread of every core
 * before a second thread of any.
 *
 * Terms, all read from the scheduler's cpu_group tree: a core is the
 * innermost group flagged THREAD (HTT or SMT) holding a CPU, or the CPU
 * alone; a unit is the outermost group sharing an L3 cache (CG_SHARE_L3),
 * and the CPUs in none form one more unit after all others; a domain is
 * the outermost group flagged NODE, and the CPUs in none form one more
 * domain, before all others (in a tree without NODE groups, the whole
 * machine).  A CPU's rank is the number of eligible CPUs in its core
 * below it, 0 for a core's first thread.
 *
 * The order is by domain (by their lowest CPU), then by rank; within a
 * rank the units take turns (by their lowest CPU), each giving its CPUs
 * by id.  It is computed by sorting 64-bit keys twice, once per device
 * at attach.
 */

#ifdef _KERNEL
#include <sys/param.h>
#include <sys/systm.h>
#include <sys/cpuset.h>
#include <sys/smp.h>
#else
#include <stdlib.h>
#endif

#include <net/iflib_spread.h>

/* Key fields, low to high: CPU, unit, turn within the unit, rank, domain. */
#define	SPREAD_BITS	12
#define	SPREAD_MAX	((1u << SPREAD_BITS) - 1)
#define	SPREAD_REST	SPREAD_MAX	/* the unit of the CPUs in no unit */
#define	SPREAD_CPU	0
#define	SPREAD_UNIT	1
#define	SPREAD_TURN	2
#define	SPREAD_RANK	3
#define	SPREAD_DOM	4
#define	SPREAD_K(v, f)	((uint64_t)(v) << ((f) * SPREAD_BITS))
#define	SPREAD_F(k, f)	((u_int)((k) >> ((f) * SPREAD_BITS)) & SPREAD_MAX)

#ifdef _KERNEL
/* Every field holds a CPU id, or one more; SPREAD_REST is above all. */
CTASSERT(MAXCPU < SPREAD_REST);
#endif

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

static int
spread_cmp(const void *a, const void *b)
{
	uint64_t x, y;

	x = *(const uint64_t *)a;
	y = *(const uint64_t *)b;
	return ((x > y) - (x < y));
}

u_int
iflib_spread_order(const struct cpu_group *root, const cpuset_t *eligible,
    u_int ncpu, u_int *order, uint64_t *keys)
{
	const struct cpu_group *cg, *core, *dom, *unit;
	uint64_t prev;
	u_int c, i, n, rank, turn;

	if (ncpu > SPREAD_REST)
		ncpu = SPREAD_REST;
	n = 0;
	for (c = 0; c < ncpu; c++) {
		if (!CPU_ISSET(c, eligible))
			continue;
		core = dom = unit = NULL;
		for (cg = root; cg != NULL && CPU_ISSET(c, &cg->cg_mask);
		    cg = spread_child(cg, c)) {
			if ((cg->cg_flags & CG_FLAG_THREAD) != 0)
				core = cg;
			if (unit == NULL && cg->cg_level == CG_SHARE_L3)
				unit = cg;
			if (dom == NULL && (cg->cg_flags & CG_FLAG_NODE) != 0)
				dom = cg;
		}
		rank = 0;
		for (i = core != NULL ? (u_int)core->cg_first : c; i < c; i++)
			if (CPU_ISSET(i, &core->cg_mask) &&
			    CPU_ISSET(i, eligible))
				rank++;
		keys[n++] = SPREAD_K(dom != NULL ? 1 + (u_int)dom->cg_first :
		    0, SPREAD_DOM) | SPREAD_K(rank, SPREAD_RANK) |
		    SPREAD_K(unit != NULL ? (u_int)unit->cg_first : SPREAD_REST,
		    SPREAD_UNIT) | SPREAD_K(c, SPREAD_CPU);
	}
	qsort(keys, n, sizeof(*keys), spread_cmp);

	/*
	 * Number each CPU's turn among the CPUs of its domain, rank and
	 * unit, then sort again: within a rank the units take turns.
	 */
	prev = 0;
	turn = 0;
	for (i = 0; i < n; i++) {
		turn = i > 0 && keys[i] >> (SPREAD_UNIT * SPREAD_BITS) == prev ?
		    turn + 1 : 0;
		prev = keys[i] >> (SPREAD_UNIT * SPREAD_BITS);
		keys[i] |= SPREAD_K(turn, SPREAD_TURN);
	}
	qsort(keys, n, sizeof(*keys), spread_cmp);
	for (i = 0; i < n; i++)
		order[i] = SPREAD_F(keys[i], SPREAD_CPU);
	return (n);
}
