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
 * The dealt map of a load-balancing group.
 *
 * The deal answers one question for every receiving CPU: which members,
 * nearest first, does it feed.  Nearness is the scheduler's cpu_group
 * tree, so the rings are the CPU itself, then its enclosing groups from
 * the SMT core outwards to the root, then every member with deficit.
 * Rings are the outer loop: every receiving CPU settles its exact members
 * before any CPU deals to a sibling, siblings before the L3, and so on,
 * so an exact match is never displaced by a farther CPU.  Every member is
 * owed the same number of slots and the supply adds up to the same total,
 * so the last ring always closes the deal: no member starves and no CPU's
 * range has a hole.
 *
 * The tagged members are sorted once by the position of their CPU in a
 * depth-first walk of the tree (a leaf's CPUs by id), members of one CPU
 * in member order.  The members of any group are then a contiguous run
 * of that order, and a ring visits them in it; the last ring visits every
 * member in member order.  Each run has a cursor that only moves forward:
 * a CPU fills members from the cursor up to their deficit and stops at
 * the first it cannot pay in full, so every member before the cursor is
 * paid.  A rebuild is therefore linear in the members times the depth of
 * the tree, plus the slots, plus the CPUs.
 */

#ifdef _KERNEL
#include <sys/param.h>
#include <sys/systm.h>
#include <sys/cpuset.h>
#include <sys/smp.h>
#endif

#include <netinet/in_pcblb_deal.h>

#define	LBDEAL_NONE	(~0u)
#define	LBDEAL_CPUBITS	12

#ifdef _KERNEL
CTASSERT(MAXCPU <= LBDEAL_MAXCPU);
CTASSERT(LBDEAL_MAXCPU == 1 << LBDEAL_CPUBITS);
#endif

/* A group of the tree: its CPUs are positions [g_first, g_end). */
struct lbdeal_group {
	u_int	g_parent;	/* LBDEAL_NONE for the root. */
	u_int	g_depth;	/* 0 for the root. */
	u_int	g_first;
	u_int	g_end;
	u_int	g_cur;		/* Cursor into w_order[]. */
};

/* Scratch space of one deal, carved out of the caller's buffer. */
struct lbdeal_work {
	uint64_t *w_rem;	/* [ncpu] remainders of the supply. */
	u_int	*w_pos;		/* [ncpu] position of each CPU, or NONE. */
	u_int	*w_leaf;	/* [ncpu] innermost group of each CPU. */
	u_int	*w_start;	/* [ncpu + 1] first w_order[] of a position. */
	u_int	*w_cur;		/* [ncpu] cursor of each CPU's own run. */
	u_int	*w_rx;		/* [ncpu] receiving CPUs with supply left. */
	u_int	*w_order;	/* [nmembers] tagged members, sorted. */
	u_int	*w_deficit;	/* [nmembers] slots still owed. */
	u_int	*w_fill;	/* [ncpu] slots of the CPU's range dealt. */
	uint32_t *w_count;	/* [ncpu] handshakes, or stand-in counts. */
	struct lbdeal_group *w_group; /* [ngroups] in depth-first order. */
	u_int	 w_ngroups;
	u_int	 w_npos;	/* CPUs placed so far. */
	u_int	 w_depth;	/* Depth of the deepest group. */
	u_int	 w_all;		/* Cursor of the last ring, in member order. */
};

/* Count the groups below cg and measure the depth. */
static void
lbdeal_count(const struct cpu_group *cg, u_int depth, u_int *ngroups,
    u_int *maxdepth)
{
	int i;

	(*ngroups)++;
	if (depth > *maxdepth)
		*maxdepth = depth;
	for (i = 0; i < cg->cg_children; i++)
		lbdeal_count(&cg->cg_child[i], depth + 1, ngroups, maxdepth);
}

/*
 * Walk the groups below cg depth first, giving each CPU of a leaf its
 * position and each group its run of positions.  Topologies are a
 * handful of levels deep, so the recursion is shallow.
 */
static void
lbdeal_walk(const struct cpu_group *cg, u_int parent, u_int depth,
    u_int ncpu, struct lbdeal_work *w)
{
	struct lbdeal_group *g;
	u_int c, id;
	int i;

	id = w->w_ngroups++;
	g = &w->w_group[id];
	g->g_parent = parent;
	g->g_depth = depth;
	g->g_first = w->w_npos;
	if (depth > w->w_depth)
		w->w_depth = depth;
	if (cg->cg_children == 0)
		for (c = (u_int)cg->cg_first; c <= (u_int)cg->cg_last &&
		    c < ncpu; c++)
			if (CPU_ISSET(c, &cg->cg_mask) &&
			    w->w_pos[c] == LBDEAL_NONE) {
				w->w_pos[c] = w->w_npos++;
				w->w_leaf[c] = id;
			}
	for (i = 0; i < cg->cg_children; i++)
		lbdeal_walk(&cg->cg_child[i], id, depth + 1, ncpu, w);
	g->g_end = w->w_npos;
}

/* Scratch words: 2 per CPU (w_rem), 7 per CPU, 1, 2 per member. */
#define	LBDEAL_WORDS(nmembers, ncpu)	(2 * (size_t)(ncpu) + \
	7 * (size_t)(ncpu) + 1 + 2 * (size_t)(nmembers))

size_t
lbdeal_scratch_size(const struct cpu_group *root, u_int nmembers, u_int ncpu)
{
	u_int depth, ngroups;

	ngroups = depth = 0;
	if (root != NULL)
		lbdeal_count(root, 0, &ngroups, &depth);
	return (LBDEAL_WORDS(nmembers, ncpu) * sizeof(uint32_t) +
	    ngroups * sizeof(struct lbdeal_group));
}

/* Carve the scratch buffer as lbdeal_scratch_size() sized it. */
static void
lbdeal_carve(u_int nmembers, u_int ncpu, void *scratch,
    struct lbdeal_work *w)
{
	u_int *p;

	memset(w, 0, sizeof(*w));
	w->w_rem = scratch;
	p = (u_int *)(w->w_rem + ncpu);
	w->w_pos = p;		p += ncpu;
	w->w_leaf = p;		p += ncpu;
	w->w_start = p;		p += ncpu + 1;
	w->w_cur = p;		p += ncpu;
	w->w_rx = p;		p += ncpu;
	w->w_fill = p;		p += ncpu;
	w->w_count = p;		p += ncpu;
	w->w_order = p;		p += nmembers;
	w->w_deficit = p;	p += nmembers;
	w->w_group = (struct lbdeal_group *)p;
}

/* The CPU a member's tag names, or LBDEAL_NONE. */
static __inline u_int
lbdeal_cpu(const struct lbdeal_in *in, u_int i)
{
	u_int c;

	if (!LBDEAL_TAGGED(in->di_tags[i]))
		return (LBDEAL_NONE);
	c = LBDEAL_TAG_CPU(in->di_tags[i]);
	return (c < in->di_ncpu ? c : LBDEAL_NONE);
}

/*
 * Deal the rest of cpu's range to the members order[*cur .. end), or,
 * with order NULL, to the members *cur .. end in member order, each up to
 * its deficit.  Returns the slots dealt.  Inline: each of its three
 * callers knows order, and the loop is the rebuild's hottest.
 */
static __inline u_int
lbdeal_fill(struct lbdeal_work *w, const struct lbdeal_in *in,
    struct lbdeal_out *out, u_int cpu, const u_int *order, u_int *cur,
    u_int end)
{
	void **slot, **stop, *member;
	u_int dealt, left, m, pos, take;

	left = LBDEAL_CNT(out->do_cpu[cpu]) - w->w_fill[cpu];
	slot = out->do_slot + LBDEAL_OFF(out->do_cpu[cpu]) + w->w_fill[cpu];
	dealt = left;
	for (pos = *cur; pos < end && left > 0; pos++) {
		m = order != NULL ? order[pos] : pos;
		if (w->w_deficit[m] == 0)
			continue;
		take = MIN(w->w_deficit[m], left);
		w->w_deficit[m] -= take;
		left -= take;
		member = in->di_members[m];
		for (stop = slot + take; slot < stop; slot++)
			*slot = member;
		if (w->w_deficit[m] != 0)
			break;
	}
	*cur = pos;
	dealt -= left;
	w->w_fill[cpu] += dealt;
	return (dealt);
}

/* Sift a[i] down the min-heap a[0 .. n). */
static void
lbdeal_sift(uint64_t *a, u_int i, u_int n)
{
	uint64_t x;
	u_int k;

	x = a[i];
	while ((k = 2 * i + 1) < n) {
		if (k + 1 < n && a[k + 1] < a[k])
			k++;
		if (a[k] >= x)
			break;
		a[i] = a[k];
		i = k;
	}
	a[i] = x;
}

/*
 * Move the k largest of the n keys a[] to a[0 .. k), in no order: a
 * min-heap of the first k, which every later key larger than its least
 * enters.  O(n log k) in place, with no call per comparison: for 64
 * CPUs a seventh of the time a qsort() of all n took.
 */
static void
lbdeal_top(uint64_t *a, u_int n, u_int k)
{
	uint64_t x;
	u_int i;

	for (i = k / 2; i-- > 0;)
		lbdeal_sift(a, i, k);
	for (i = k; i < n; i++)
		if (a[i] > a[0]) {
			x = a[0];
			a[0] = a[i];
			a[i] = x;
			lbdeal_sift(a, 0, k);
		}
}

/*
 * Supply: CPU c's exact share of the T slots is T * count_c / total.
 * Each CPU supplies its share rounded down, and the slots this leaves
 * (fewer than the CPUs with a fractional share) go one each to the CPUs
 * with the largest remainders, the lower CPU id first among equal ones:
 * largest-remainder (Hamilton) apportionment.  The supplies add up to T,
 * each is its share rounded down or up, and a CPU whose share rounds to
 * zero supplies nothing.  The ranges follow each other in CPU order.
 * Remainders are below total < 2^44, so a remainder and a CPU id fit in
 * one 64-bit key, all keys differ, and the CPUs owed a slot are those of
 * the largest keys, which lbdeal_top() finds without sorting.
 */
static void
lbdeal_supply(struct lbdeal_work *w, struct lbdeal_out *out, u_int ncpu,
    u_int nslots, uint64_t total)
{
	uint64_t q, r;
	u_int c, k, left, m, off;

	left = nslots;
	m = 0;
	for (c = 0; c < ncpu; c++) {
		w->w_fill[c] = 0;
		if (w->w_count[c] == 0)
			continue;
		q = (uint64_t)nslots * w->w_count[c];
		w->w_fill[c] = (u_int)(q / total);
		r = q - w->w_fill[c] * total;
		left -= w->w_fill[c];
		if (r != 0)
			w->w_rem[m++] = r << LBDEAL_CPUBITS |
			    (LBDEAL_MAXCPU - 1 - c);
	}
	KASSERT(left <= m, ("%s: %u slots left for %u CPUs", __func__, left,
	    m));
	if (left > 0)
		lbdeal_top(w->w_rem, m, left);
	for (k = 0; k < left; k++)
		w->w_fill[LBDEAL_MAXCPU - 1 -
		    (w->w_rem[k] & (LBDEAL_MAXCPU - 1))]++;
	off = 0;
	for (c = 0; c < ncpu; c++) {
		out->do_cpu[c] = w->w_fill[c] == 0 ? 0 :
		    LBDEAL_ENTRY(off, w->w_fill[c]);
		off += w->w_fill[c];
		w->w_fill[c] = 0;
	}
}

bool
lbdeal(const struct lbdeal_in *in, struct lbdeal_out *out, void *scratch)
{
	struct lbdeal_group *g;
	struct lbdeal_work w;
	uint64_t total;
	u_int c, gi, i, j, k, left, n, ncpu, nrx, p, ring;
	bool tagged;

	n = in->di_nmembers;
	ncpu = in->di_ncpu;
	if (n == 0 || n > LBDEAL_MAXMEMBERS || ncpu > LBDEAL_MAXCPU)
		return (false);
	lbdeal_carve(n, ncpu, scratch, &w);
	for (c = 0; c < ncpu; c++)
		w.w_pos[c] = w.w_leaf[c] = LBDEAL_NONE;
	if (in->di_root != NULL)
		lbdeal_walk(in->di_root, LBDEAL_NONE, 0, ncpu, &w);
	/* CPUs in no group have an exact ring, and no other. */
	for (c = 0; c < ncpu; c++)
		if (w.w_pos[c] == LBDEAL_NONE)
			w.w_pos[c] = w.w_npos++;

	/*
	 * Handshake counts per CPU.  Before anything is counted, each CPU
	 * named by a set tag stands in with a count of one, so that tags work
	 * from the first connection (and on loopback, where nothing is
	 * learned).  Learned tags do not stand in: a worker pinned on a host
	 * whose NIC reports no hash must not starve its neighbours by
	 * claiming a CPU that receives nothing.  The same pass counts the
	 * members of every position, for the sort below.
	 */
	total = 0;
	for (c = 0; c < ncpu; c++) {
		w.w_count[c] = in->di_counts != NULL ? in->di_counts[c] : 0;
		total += w.w_count[c];
	}
	memset(w.w_start, 0, (ncpu + 1) * sizeof(u_int));
	tagged = false;
	for (i = 0; i < n; i++) {
		w.w_deficit[i] = LBDEAL_SLOTS;
		if ((c = lbdeal_cpu(in, i)) == LBDEAL_NONE)
			continue;
		tagged = true;
		if (total == 0 && (in->di_tags[i] & LBDEAL_TAG_LEARNED) == 0)
			w.w_count[c] = 1;
		w.w_start[w.w_pos[c] + 1]++;
	}
	if (!tagged)
		return (false);
	if (total == 0)
		for (c = 0; c < ncpu; c++)
			total += w.w_count[c];
	if (total == 0)
		return (false);
	lbdeal_supply(&w, out, ncpu, LBDEAL_SLOTS * n, total);

	/*
	 * Sort the tagged members by the position of their CPU, keeping
	 * member order among the members of one CPU (a counting sort, from
	 * the last member back, so that each CPU's cursor ends at the start of
	 * its run), and start every group's cursor at its run.
	 */
	for (p = 0; p < w.w_npos; p++)
		w.w_start[p + 1] += w.w_start[p];
	for (c = 0; c < ncpu; c++)
		w.w_cur[c] = w.w_start[w.w_pos[c] + 1];
	for (i = n; i-- > 0;)
		if ((c = lbdeal_cpu(in, i)) != LBDEAL_NONE)
			w.w_order[--w.w_cur[c]] = i;
	for (gi = 0; gi < w.w_ngroups; gi++)
		w.w_group[gi].g_cur = w.w_start[w.w_group[gi].g_first];

	/*
	 * The receiving CPUs, in order; each ring keeps only those with
	 * supply left.  Ring 0 is the CPU itself; ring k, 1 <= k <= depth + 1,
	 * is the k-th group enclosing the CPU (a CPU in a shallower part of
	 * the tree reaches its root sooner and skips the rings above it); the
	 * last ring holds every member.
	 */
	nrx = 0;
	for (c = 0; c < ncpu; c++)
		if (out->do_cpu[c] != 0)
			w.w_rx[nrx++] = c;
	left = LBDEAL_SLOTS * n;
	for (ring = 0; ring <= w.w_depth + 2 && left > 0; ring++) {
		for (i = j = 0; i < nrx; i++) {
			c = w.w_rx[i];
			gi = w.w_leaf[c];
			if (ring == 0)
				left -= lbdeal_fill(&w, in, out, c, w.w_order,
				    &w.w_cur[c], w.w_start[w.w_pos[c] + 1]);
			else if (ring == w.w_depth + 2)
				left -= lbdeal_fill(&w, in, out, c, NULL,
				    &w.w_all, n);
			else if (gi != LBDEAL_NONE &&
			    ring <= w.w_group[gi].g_depth + 1) {
				for (k = 1; k < ring; k++)
					gi = w.w_group[gi].g_parent;
				g = &w.w_group[gi];
				left -= lbdeal_fill(&w, in, out, c, w.w_order,
				    &g->g_cur, w.w_start[g->g_end]);
			}
			if (w.w_fill[c] != LBDEAL_CNT(out->do_cpu[c]))
				w.w_rx[j++] = c;
		}
		nrx = j;
	}
#ifdef INVARIANTS
	for (c = 0; c < ncpu; c++)
		KASSERT(w.w_fill[c] == LBDEAL_CNT(out->do_cpu[c]),
		    ("%s: cpu %u supplied %u of %u", __func__, c, w.w_fill[c],
		    LBDEAL_CNT(out->do_cpu[c])));
	for (i = 0; i < n; i++)
		KASSERT(w.w_deficit[i] == 0,
		    ("%s: member %u owed %u", __func__, i, w.w_deficit[i]));
#endif
	return (true);
}
