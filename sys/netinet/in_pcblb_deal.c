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
 * The dealt map of an SO_REUSEPORT_LB group.
 *
 * The deal answers one question for every receiving CPU: which members,
 * nearest first, does it feed.  Nearness is the scheduler's cpu_group
 * tree, so the rings are the CPU itself, then its enclosing groups from
 * the SMT core outwards to the root, then every member with deficit.
 * Levels are the outer loop: every receiving CPU settles its exact
 * members before any CPU deals to a sibling, siblings before the L3, and
 * so on, so an exact match is never displaced by a farther CPU.  Because
 * every member is owed the same number of slots and the supply adds up
 * to the same total, the last ring always closes the deal: no member
 * starves and no CPU's range has a hole.
 *
 * Members of a ring are visited in member order.  To keep a rebuild
 * linear in the size of the map, each ring's members are bucketed once
 * per group (a member appears in its CPU's list and in the list of every
 * group enclosing it), and members that have been paid in full are
 * skipped by jump links that are compressed as they are followed.
 */

#ifdef _KERNEL
#include <sys/param.h>
#include <sys/systm.h>
#include <sys/cpuset.h>
#include <sys/smp.h>
#endif

#include <netinet/in_pcblb_deal.h>

#define	LBDEAL_NOLEAF	(~0u)

/* Scratch space of one deal, carved out of the caller's buffer. */
struct lbdeal_work {
	u_int	 w_ngroups;	/* Groups in the tree. */
	u_int	 w_depth;	/* Depth of the deepest group; root is 0. */
	u_int	*w_leaf;	/* [ncpu] innermost group of each CPU. */
	u_int	*w_parent;	/* [ngroups] parent of each group. */
	u_int	*w_gdepth;	/* [ngroups] depth of each group. */
	u_int	*w_lstart;	/* [nlists + 1] first entry of each list. */
	u_int	*w_lcur;	/* [nlists] first entry maybe owed slots. */
	u_int	*w_entry;	/* [nentries] member index. */
	u_int	*w_jump;	/* [nentries] next entry maybe owed slots. */
	u_int	*w_deficit;	/* [nmembers] slots still owed. */
	u_int	*w_fill;	/* [ncpu] slots of the CPU's range dealt. */
	uint32_t *w_count;	/* [ncpu] handshakes, or stand-in counts. */
};

/*
 * Number the groups below cg in preorder, recording each group's parent
 * and depth and each CPU's innermost group.  With w_parent NULL it only
 * counts the groups and measures the depth.  Topologies are a handful of
 * levels deep, so the recursion is shallow.
 */
static void
lbdeal_walk(const struct cpu_group *cg, u_int parent, u_int depth,
    u_int ncpu, struct lbdeal_work *w)
{
	u_int c, id;
	int i;

	id = w->w_ngroups++;
	if (depth > w->w_depth)
		w->w_depth = depth;
	if (w->w_parent != NULL) {
		w->w_parent[id] = parent;
		w->w_gdepth[id] = depth;
		if (cg->cg_children == 0)
			for (c = (u_int)cg->cg_first; c <= (u_int)cg->cg_last &&
			    c < ncpu; c++)
				if (CPU_ISSET(c, &cg->cg_mask))
					w->w_leaf[c] = id;
	}
	for (i = 0; i < cg->cg_children; i++)
		lbdeal_walk(&cg->cg_child[i], id, depth + 1, ncpu, w);
}

/*
 * Lists: one per group (ids 0 .. ngroups - 1), one per CPU for the exact
 * ring (ngroups + cpu), and one holding every member (the last ring).  A
 * member is entered in at most depth + 3 lists.
 */
#define	LBDEAL_NLISTS(w, ncpu)		((w)->w_ngroups + (ncpu) + 1)
#define	LBDEAL_NENTRIES(w, n)		((n) * ((w)->w_depth + 3))

static void
lbdeal_shape(const struct cpu_group *root, u_int ncpu, struct lbdeal_work *w)
{

	memset(w, 0, sizeof(*w));
	if (root != NULL)
		lbdeal_walk(root, 0, 0, ncpu, w);
}

size_t
lbdeal_scratch_size(const struct cpu_group *root, u_int nmembers, u_int ncpu)
{
	struct lbdeal_work w;
	size_t words;

	lbdeal_shape(root, ncpu, &w);
	words = ncpu +				/* w_leaf */
	    2 * (size_t)w.w_ngroups +		/* w_parent, w_gdepth */
	    2 * (size_t)LBDEAL_NLISTS(&w, ncpu) + 1 + /* w_lstart, w_lcur */
	    2 * (size_t)LBDEAL_NENTRIES(&w, nmembers) + /* w_entry, w_jump */
	    nmembers +				/* w_deficit */
	    2 * (size_t)ncpu;			/* w_fill, w_count */
	return (words * sizeof(uint32_t));
}

/* Carve the scratch buffer; the layout matches lbdeal_scratch_size(). */
static void
lbdeal_carve(const struct cpu_group *root, u_int nmembers, u_int ncpu,
    void *scratch, struct lbdeal_work *w)
{
	u_int *p, nlists, nentries;

	lbdeal_shape(root, ncpu, w);
	nlists = LBDEAL_NLISTS(w, ncpu);
	nentries = LBDEAL_NENTRIES(w, nmembers);
	p = scratch;
	w->w_leaf = p;		p += ncpu;
	w->w_parent = p;	p += w->w_ngroups;
	w->w_gdepth = p;	p += w->w_ngroups;
	w->w_lstart = p;	p += nlists + 1;
	w->w_lcur = p;		p += nlists;
	w->w_entry = p;		p += nentries;
	w->w_jump = p;		p += nentries;
	w->w_deficit = p;	p += nmembers;
	w->w_fill = p;		p += ncpu;
	w->w_count = (uint32_t *)p;
}

/* Apply fn to every list member i is entered in. */
#define	LBDEAL_FOREACH_LIST(w, in, i, l, g, fn) do {			\
	u_int _c;							\
									\
	if (LBDEAL_TAGGED((in)->di_tags[i]) &&				\
	    (_c = LBDEAL_TAG_CPU((in)->di_tags[i])) < (in)->di_ncpu) {	\
		(l) = (w)->w_ngroups + _c;				\
		fn;							\
		for ((g) = (w)->w_leaf[_c]; (g) != LBDEAL_NOLEAF;	\
		    (g) = (g) == 0 ? LBDEAL_NOLEAF : (w)->w_parent[g]) {\
			(l) = (g);					\
			fn;						\
		}							\
	}								\
	(l) = (w)->w_ngroups + (in)->di_ncpu;				\
	fn;								\
} while (0)

/* Bucket the members into their lists, keeping member order. */
static void
lbdeal_lists(const struct lbdeal_in *in, struct lbdeal_work *w)
{
	u_int g, i, l, nlists;

	nlists = LBDEAL_NLISTS(w, in->di_ncpu);
	memset(w->w_lstart, 0, (nlists + 1) * sizeof(u_int));
	for (i = 0; i < in->di_nmembers; i++)
		LBDEAL_FOREACH_LIST(w, in, i, l, g, w->w_lstart[l + 1]++);
	for (l = 0; l < nlists; l++) {
		w->w_lstart[l + 1] += w->w_lstart[l];
		w->w_lcur[l] = w->w_lstart[l];
	}
	for (i = 0; i < in->di_nmembers; i++)
		LBDEAL_FOREACH_LIST(w, in, i, l, g,
		    w->w_entry[w->w_lcur[l]++] = i);
	for (l = 0; l < nlists; l++)
		w->w_lcur[l] = w->w_lstart[l];
	for (i = 0; i < w->w_lstart[nlists]; i++)
		w->w_jump[i] = i + 1;
}

/*
 * Deal up to *left slots of the range of cpu from list l, in member
 * order, each member up to its deficit.
 */
static void
lbdeal_fill(struct lbdeal_work *w, struct lbdeal_out *out, u_int cpu,
    u_int l, u_int *left)
{
	uint16_t *slot;
	u_int end, m, pos, prev, take;

	end = w->w_lstart[l + 1];
	slot = out->do_slot + LBDEAL_OFF(out->do_cpu[cpu]) + w->w_fill[cpu];
	prev = end;
	for (pos = w->w_lcur[l]; pos < end && *left > 0;) {
		m = w->w_entry[pos];
		if (w->w_deficit[m] == 0) {
			/* Paid in full: link the last live entry past it. */
			pos = w->w_jump[pos];
			if (prev == end)
				w->w_lcur[l] = pos;
			else
				w->w_jump[prev] = pos;
			continue;
		}
		take = MIN(w->w_deficit[m], *left);
		w->w_deficit[m] -= take;
		w->w_fill[cpu] += take;
		*left -= take;
		while (take-- > 0)
			*slot++ = (uint16_t)m;
		prev = pos;
		pos = w->w_jump[pos];
	}
}

/*
 * Supply: CPU c's exact share of the T slots is T * count_c / total.
 * Each CPU supplies its share rounded down, and the slots this leaves
 * (fewer than the CPUs with a fractional share) go one each to the CPUs
 * with the largest remainders, the lower CPU id first among equal ones:
 * largest-remainder (Hamilton) apportionment.  The supplies add up to T
 * exactly and each is its share rounded down or up, so a CPU whose share
 * falls short of its exact members' 16 slots each only by rounding (15.95
 * for one member) supplies 16 unless as many other CPUs are closer still
 * to their next slot; with two receiving CPUs that is rounding to
 * nearest.  A CPU whose share rounds to zero supplies nothing.  The
 * ranges follow each other in CPU order.  Until the rings are set up,
 * w_lstart holds the CPUs with a remainder and w_lcur and w_leaf the high
 * and low words of each one's remainder.
 */
static uint64_t
lbdeal_rem(const struct lbdeal_work *w, u_int j)
{

	return (((uint64_t)w->w_lcur[j] << 32) | w->w_leaf[j]);
}

static void
lbdeal_supply(struct lbdeal_work *w, struct lbdeal_out *out, u_int ncpu,
    uint64_t total)
{
	uint64_t q, r;
	u_int b, c, j, k, left, m;

	left = out->do_nslots;
	m = 0;
	for (c = 0; c < ncpu; c++) {
		w->w_fill[c] = 0;
		if (w->w_count[c] == 0)
			continue;
		q = (uint64_t)out->do_nslots * w->w_count[c];
		r = q % total;
		w->w_fill[c] = (u_int)(q / total);
		left -= w->w_fill[c];
		if (r != 0) {
			w->w_lstart[m] = c;
			w->w_lcur[m] = (u_int)(r >> 32);
			w->w_leaf[m] = (u_int)r;
			m++;
		}
	}
	KASSERT(left <= m, ("%s: %u slots left for %u CPUs", __func__, left,
	    m));
	/* Move the largest remainders to the front, one per slot left. */
	for (k = 0; k < left && k < m; k++) {
		b = k;
		for (j = k + 1; j < m; j++)
			if (lbdeal_rem(w, j) > lbdeal_rem(w, b) ||
			    (lbdeal_rem(w, j) == lbdeal_rem(w, b) &&
			    w->w_lstart[j] < w->w_lstart[b]))
				b = j;
		c = w->w_lstart[b];
		r = lbdeal_rem(w, b);
		w->w_lstart[b] = w->w_lstart[k];
		w->w_lcur[b] = w->w_lcur[k];
		w->w_leaf[b] = w->w_leaf[k];
		w->w_lstart[k] = c;
		w->w_lcur[k] = (u_int)(r >> 32);
		w->w_leaf[k] = (u_int)r;
		w->w_fill[c]++;
	}
	b = 0;
	for (c = 0; c < ncpu; c++) {
		out->do_cpu[c] = w->w_fill[c] == 0 ? 0 :
		    LBDEAL_ENTRY(b, w->w_fill[c]);
		b += w->w_fill[c];
		w->w_fill[c] = 0;
	}
}

bool
lbdeal(const struct lbdeal_in *in, struct lbdeal_out *out, void *scratch)
{
	struct lbdeal_work w;
	uint64_t total;
	u_int c, g, i, k, left, n, ncpu, ring;
	bool tagged;

	n = in->di_nmembers;
	ncpu = in->di_ncpu;
	KASSERT(n <= LBDEAL_MAXMEMBERS, ("%s: %u members", __func__, n));
	if (n == 0 || n > LBDEAL_MAXMEMBERS)
		return (false);
	lbdeal_carve(in->di_root, n, ncpu, scratch, &w);

	/*
	 * Handshake counts per CPU.  Before anything is counted, each CPU
	 * named by an explicit tag stands in with a count of one, so that
	 * explicit claims work from the first connection (and on loopback,
	 * where nothing is learned).  Learned tags do not stand in: a worker
	 * pinned on a host whose NIC reports no hash must not starve its
	 * neighbours by claiming a CPU that receives nothing.
	 */
	tagged = false;
	total = 0;
	for (c = 0; c < ncpu; c++) {
		w.w_count[c] = in->di_counts != NULL ? in->di_counts[c] : 0;
		total += w.w_count[c];
	}
	for (i = 0; i < n; i++) {
		if (!LBDEAL_TAGGED(in->di_tags[i]) ||
		    (c = LBDEAL_TAG_CPU(in->di_tags[i])) >= ncpu)
			continue;
		tagged = true;
		if (in->di_counts == NULL || total == 0) {
			if ((in->di_tags[i] & LBDEAL_TAG_LEARNED) == 0)
				w.w_count[c] = 1;
		}
	}
	if (!tagged)
		return (false);
	if (total == 0)
		for (c = 0; c < ncpu; c++)
			total += w.w_count[c];
	if (total == 0)
		return (false);

	out->do_nslots = LBDEAL_SLOTS * n;
	lbdeal_supply(&w, out, ncpu, total);
	for (i = 0; i < n; i++)
		w.w_deficit[i] = LBDEAL_SLOTS;

	for (c = 0; c < ncpu; c++)
		w.w_leaf[c] = LBDEAL_NOLEAF;
	if (in->di_root != NULL) {
		w.w_ngroups = 0;
		lbdeal_walk(in->di_root, 0, 0, ncpu, &w);
	}
	lbdeal_lists(in, &w);

	/*
	 * Ring 0 is the CPU itself; ring k, 1 <= k <= depth + 1, is the k-th
	 * group enclosing the CPU (a CPU in a shallower part of the tree
	 * reaches its root sooner and skips the rings above it); the last
	 * ring holds every member.
	 */
	for (ring = 0; ring <= w.w_depth + 2; ring++) {
		for (c = 0; c < ncpu; c++) {
			if (out->do_cpu[c] == 0)
				continue;
			left = LBDEAL_CNT(out->do_cpu[c]) - w.w_fill[c];
			if (left == 0)
				continue;
			if (ring == 0)
				lbdeal_fill(&w, out, c, w.w_ngroups + c, &left);
			else if (ring == w.w_depth + 2)
				lbdeal_fill(&w, out, c, w.w_ngroups + ncpu,
				    &left);
			else if ((g = w.w_leaf[c]) != LBDEAL_NOLEAF &&
			    ring <= w.w_gdepth[g] + 1) {
				for (k = 1; k < ring; k++)
					g = w.w_parent[g];
				lbdeal_fill(&w, out, c, g, &left);
			}
		}
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
