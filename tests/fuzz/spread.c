/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Copyright (c) 2026 The rxl project
 */

/*
 * libFuzzer target: the spread order of an iflib device's queue CPUs
 * (sys/net/iflib_spread.c) on any valid topology, interrupt set and NUMA
 * domain, through the userspace library's rxl_spread().
 *
 * Invariants, from iflib_spread.h, for every core_spread value (0-2):
 *   - the order is a permutation of the eligible CPUs;
 *   - with core_spread=0, or no L3 unit (outermost L3 group) in the tree,
 *     it is ascending: the order without the tunable, unchanged;
 *   - with core_spread=1 and a domain given, every local CPU comes before
 *     every other one;
 *   - two CPUs of one core (innermost THREAD group) and one unit, in the
 *     same phase, come in ascending id: a core's first thread before its
 *     second.
 */

#include "fuzz_common.h"

static struct fz_tree tree;
static int neligible, nlocal, haslocal, mode;
static int eligible[FZ_MAXCPU], local[FZ_MAXCPU];

static void
fz_print_case(FILE *fp)
{
	int i;

	fprintf(fp, "FUZZ_CASE {\"target\": \"spread\", \"mode\": %d, ", mode);
	fz_print_tree(fp, &tree);
	fprintf(fp, ", \"eligible\": [");
	for (i = 0; i < neligible; i++)
		fprintf(fp, "%s%d", i ? ", " : "", eligible[i]);
	fprintf(fp, "], \"local\": ");
	if (!haslocal)
		fprintf(fp, "null");
	else {
		fprintf(fp, "[");
		for (i = 0; i < nlocal; i++)
			fprintf(fp, "%s%d", i ? ", " : "", local[i]);
		fprintf(fp, "]");
	}
	fprintf(fp, "}\n");
}

/* A subset of the CPUs below ncpu, mostly of the present ones. */
static int
subset(struct fz *f, int *out)
{
	const struct fz_tree *t = &tree;
	int c, n, mode, p;

	n = 0;
	mode = fz_byte(f) % 4;
	for (c = 0; c < t->t_ncpu; c++) {
		p = t->t_leaf[c] >= 0;
		if (mode == 0 ? p :			/* every present CPU */
		    mode == 1 ? p && (fz_byte(f) & 1) :	/* some of them */
		    mode == 2 ? (fz_byte(f) & 1) :	/* absent ones too */
		    p && fz_below(f, 8) == 0)		/* a few */
			out[n++] = c;
	}
	return (n);
}

static void
decode(struct fz *f)
{

	/*
	 * The order costs CPUs x units x groups (it runs once per device at
	 * attach): larger machines are rarer here than for the deal.
	 */
	fz_tree(f, &tree, 4, 64);
	neligible = subset(f, eligible);
	haslocal = fz_byte(f) % 3 != 0;
	nlocal = haslocal ? subset(f, local) : 0;
	mode = fz_byte(f) % 3;
}

/* Units: the outermost L3 groups, in preorder, as iflib_spread.c walks. */
static int unit_of[FZ_MAXCPU];
static int nunits;

static void
find_units(int g, const int *kid0, const int *nkids)
{
	const struct fz_tree *t = &tree;
	int i;

	if (t->t_level[g] == CG_SHARE_L3) {
		for (i = 0; i < t->t_ncpus[g]; i++)
			unit_of[t->t_cpus[t->t_first[g] + i]] = nunits;
		nunits++;
		return;
	}
	for (i = 0; i < nkids[g]; i++)
		find_units(kid0[g] + i, kid0, nkids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int kid0[FZ_MAXGROUPS], nkids[FZ_MAXGROUPS];
	static int isloc[FZ_MAXCPU], iselig[FZ_MAXCPU], seen[FZ_MAXCPU];
	static int core_of[FZ_MAXCPU];
	static unsigned order[FZ_MAXCPU];
	struct fz f;
	struct rxl_topo *topo;
	int c, g, i, j, n, ncpu, phase, u;

	fz_init(&f, data, size);
	decode(&f);
	ncpu = tree.t_ncpu;
	if (getenv("RXL_FUZZ_PRINT") != NULL)
		fz_print_case(stdout);
	topo = fz_topo(&tree);
	FZ_CHECK(topo != NULL, "rxl_topo_new refused a valid tree");
	n = rxl_spread(topo, eligible, neligible, haslocal ? local : NULL,
	    nlocal, ncpu, mode, order);
	rxl_topo_free(topo);

	/* A permutation of the eligible CPUs. */
	FZ_CHECK(n == neligible, "%d CPUs in the order, %d eligible", n,
	    neligible);
	for (c = 0; c < ncpu; c++) {
		seen[c] = iselig[c] = 0;
		isloc[c] = !haslocal;
	}
	for (i = 0; i < neligible; i++)
		iselig[eligible[i]] = 1;
	for (i = 0; i < nlocal; i++)
		isloc[local[i]] = 1;
	for (i = 0; i < n; i++) {
		FZ_CHECK(order[i] < (unsigned)ncpu && iselig[order[i]] &&
		    !seen[order[i]], "order[%d] = %u: not eligible or twice",
		    i, order[i]);
		seen[order[i]] = 1;
	}
	/* Units; nunits stands for the CPUs in none. */
	memset(nkids, 0, (size_t)tree.t_ngroups * sizeof(int));
	for (g = tree.t_ngroups - 1; g >= 1; g--) {
		kid0[tree.t_parent[g]] = g;
		nkids[tree.t_parent[g]]++;
	}
	nunits = 0;
	for (c = 0; c < ncpu; c++)
		unit_of[c] = -1;
	find_units(0, kid0, nkids);
	for (c = 0; c < ncpu; c++)
		if (unit_of[c] < 0)
			unit_of[c] = nunits;

	if (mode == 0 || nunits == 0) {
		for (i = 1; i < n; i++)
			FZ_CHECK(order[i - 1] < order[i], "numeric order: cpu %u "
			    "after cpu %u", order[i], order[i - 1]);
		return (0);
	}
	if (mode == 1 && haslocal)
		for (i = 1; i < n; i++)
			FZ_CHECK(isloc[order[i - 1]] || !isloc[order[i]],
			    "local cpu %u after non-local cpu %u", order[i],
			    order[i - 1]);
	/* Cores: the innermost THREAD group of each CPU (-1: none). */
	for (c = 0; c < ncpu; c++)
		core_of[c] = -1;
	for (g = 0; g < tree.t_ngroups; g++) {
		if (!(tree.t_flags[g] & CG_FLAG_THREAD))
			continue;
		for (j = 0; j < tree.t_ncpus[g]; j++) {
			c = tree.t_cpus[tree.t_first[g] + j];
			if (core_of[c] < 0 ||
			    tree.t_gdepth[g] > tree.t_gdepth[core_of[c]])
				core_of[c] = g;
		}
	}
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++) {
			c = (int)order[i];
			u = (int)order[j];
			/* The phases are known with a domain, or across. */
			phase = mode == 2 || (haslocal && isloc[c] == isloc[u]);
			FZ_CHECK(!(phase && core_of[c] >= 0 &&
			    core_of[c] == core_of[u] && unit_of[c] == unit_of[u] &&
			    u < c), "core %d gives cpu %d after cpu %d",
			    core_of[c], u, c);
		}
	return (0);
}
