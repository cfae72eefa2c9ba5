/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Copyright (c) 2026 The rxl project
 */

/*
 * libFuzzer target: the spread order of an iflib device's queue CPUs
 * (sys/net/iflib_spread.c) on any valid topology and interrupt set,
 * through the userspace library's rxl_spread().
 *
 * Invariants, from iflib_spread.c, for both core_spread values:
 *   - the order is a permutation of the eligible CPUs;
 *   - with core_spread=0 it is ascending: the order without the tunable;
 *   - with core_spread=1, a domain's CPUs (outermost NODE group; the CPUs
 *     in none form one more, first) come together, domains by their lowest
 *     CPU; within a
 *     domain the ranks (eligible CPUs in the CPU's core, its innermost
 *     THREAD group, below it) do not decrease; within a domain and rank,
 *     each unit's (outermost L3 group, one more for the CPUs in none)
 *     CPUs come in ascending id, and the units take turns: a unit's k-th
 *     CPU of the round comes after every unit's (k-1)-th, and units with
 *     the same turn come by their lowest CPU.
 */

#include <limits.h>

#include "fuzz_common.h"

static struct fz_tree tree;
static int neligible, mode;
static int eligible[FZ_MAXCPU];

static void
fz_print_case(FILE *fp)
{
	int i;

	fprintf(fp, "FUZZ_CASE {\"target\": \"spread\", \"mode\": %d, ", mode);
	fz_print_tree(fp, &tree);
	fprintf(fp, ", \"eligible\": [");
	for (i = 0; i < neligible; i++)
		fprintf(fp, "%s%d", i ? ", " : "", eligible[i]);
	fprintf(fp, "]}\n");
}

/* A subset of the CPUs below ncpu, mostly of the present ones. */
static int
subset(struct fz *f, int *out)
{
	const struct fz_tree *t = &tree;
	int c, n, kind, p;

	n = 0;
	kind = fz_byte(f) % 4;
	for (c = 0; c < t->t_ncpu; c++) {
		p = t->t_leaf[c] >= 0;
		if (kind == 0 ? p :			/* every present CPU */
		    kind == 1 ? p && (fz_byte(f) & 1) :	/* some of them */
		    kind == 2 ? (fz_byte(f) & 1) :	/* absent ones too */
		    p && fz_below(f, 8) == 0)		/* a few */
			out[n++] = c;
	}
	return (n);
}

static void
decode(struct fz *f)
{

	/*
	 * The order costs CPUs x groups (it runs once per device at
	 * attach): larger machines are rarer here than for the deal.
	 */
	fz_tree(f, &tree, 4, 64);
	neligible = subset(f, eligible);
	mode = fz_byte(f) % 2;
}

/* Lowest CPU of group g. */
static int
lowest(int g)
{
	int c, i;

	c = INT_MAX;
	for (i = 0; i < tree.t_ncpus[g]; i++)
		if (tree.t_cpus[tree.t_first[g] + i] < c)
			c = tree.t_cpus[tree.t_first[g] + i];
	return (c);
}

/* Whether group g holds cpu. */
static bool
holds(int g, int cpu)
{
	int i;

	for (i = 0; i < tree.t_ncpus[g]; i++)
		if (tree.t_cpus[tree.t_first[g] + i] == cpu)
			return (true);
	return (false);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int dom[FZ_MAXCPU], unit[FZ_MAXCPU], core[FZ_MAXCPU];
	static int rank[FZ_MAXCPU], turn[FZ_MAXCPU], iselig[FZ_MAXCPU];
	static int seen[FZ_MAXCPU];
	static unsigned order[FZ_MAXCPU];
	struct fz f;
	struct rxl_topo *topo;
	int a, b, c, d, g, i, j, n, ncpu;

	fz_init(&f, data, size);
	decode(&f);
	ncpu = tree.t_ncpu;
	if (getenv("RXL_FUZZ_PRINT") != NULL)
		fz_print_case(stdout);
	topo = fz_topo(&tree);
	FZ_CHECK(topo != NULL, "rxl_topo_new refused a valid tree");
	n = rxl_spread(topo, eligible, neligible, ncpu, mode, order);
	rxl_topo_free(topo);

	/* A permutation of the eligible CPUs. */
	FZ_CHECK(n == neligible, "%d CPUs in the order, %d eligible", n,
	    neligible);
	for (c = 0; c < ncpu; c++)
		seen[c] = iselig[c] = 0;
	for (i = 0; i < neligible; i++)
		iselig[eligible[i]] = 1;
	for (i = 0; i < n; i++) {
		FZ_CHECK(order[i] < (unsigned)ncpu && iselig[order[i]] &&
		    !seen[order[i]], "order[%d] = %u: not eligible or twice",
		    i, order[i]);
		seen[order[i]] = 1;
	}
	if (mode == 0) {
		for (i = 1; i < n; i++)
			FZ_CHECK(order[i - 1] < order[i], "numeric order: cpu %u "
			    "after cpu %u", order[i], order[i - 1]);
		return (0);
	}

	/*
	 * Each CPU's domain (the key: its lowest CPU), unit (its lowest
	 * CPU, INT_MAX for none) and core, from the groups holding it:
	 * groups are numbered so that a parent comes before its children.
	 */
	for (c = 0; c < ncpu; c++) {
		dom[c] = 0;
		unit[c] = INT_MAX;
		core[c] = -1;
		d = 0;
		for (g = 0; g < tree.t_ngroups; g++) {
			if (!holds(g, c))
				continue;
			if ((tree.t_flags[g] & CG_FLAG_NODE) != 0 && !d) {
				dom[c] = 1 + lowest(g);
				d = 1;
			}
			if (tree.t_level[g] == CG_SHARE_L3 &&
			    unit[c] == INT_MAX)
				unit[c] = lowest(g);
			if ((tree.t_flags[g] & CG_FLAG_THREAD) != 0 &&
			    (core[c] < 0 ||
			    tree.t_gdepth[g] > tree.t_gdepth[core[c]]))
				core[c] = g;
		}
	}
	for (i = 0; i < n; i++) {
		c = (int)order[i];
		rank[c] = 0;
		for (j = 0; j < n; j++)
			if (core[c] >= 0 && (int)order[j] < c &&
			    holds(core[c], (int)order[j]))
				rank[c]++;
		turn[c] = 0;
		for (j = 0; j < i; j++)
			if (dom[order[j]] == dom[c] && rank[order[j]] == rank[c] &&
			    unit[order[j]] == unit[c])
				turn[c]++;
	}
	for (i = 1; i < n; i++) {
		a = (int)order[i - 1];
		b = (int)order[i];
		FZ_CHECK(dom[a] <= dom[b], "domain of cpu %d after cpu %d's",
		    b, a);
		if (dom[a] != dom[b])
			continue;
		FZ_CHECK(rank[a] <= rank[b], "rank %d of cpu %d after rank %d",
		    rank[b], b, rank[a]);
		if (rank[a] != rank[b])
			continue;
		FZ_CHECK(turn[a] < turn[b] || (turn[a] == turn[b] &&
		    unit[a] < unit[b]), "cpu %d (unit %d, turn %d) after cpu "
		    "%d (unit %d, turn %d)", b, unit[b], turn[b], a, unit[a],
		    turn[a]);
	}
	return (0);
}
