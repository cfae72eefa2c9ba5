/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Copyright (c) 2026 The rxl project
 */

/*
 * Shared by the libFuzzer targets of the rxl cores (tests/fuzz/), a
 * reader that turns the fuzzer's bytes into decisions, and a generator of
 * valid cpu_group trees handed to the cores through rxl_topo_new() of the
 * userspace library (lib/userspace/rxlcore.c), as the property tests do.
 *
 * Bytes are consumed front to back; past the end of the input, decisions
 * come from a xorshift generator seeded with a hash of the whole input, so
 * a short input still describes a large case (1024 CPUs, 4095 members)
 * and the same input always decodes to the same case.
 *
 * A target that finds a broken invariant prints the decoded case as one
 * line of JSON (FUZZ_CASE ...) before it aborts, in the form that
 * tests/unit/decide/test_fuzz_cases.py replays through the cffi binding; with
 * RXL_FUZZ_PRINT set in the environment every case is printed.
 */

#ifndef _RXL_FUZZ_COMMON_H_
#define	_RXL_FUZZ_COMMON_H_

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "rxlcore.h"

/*
 * The decoder's own comparisons teach the fuzzer nothing and cost most of
 * an execution when traced: keep sanitizer coverage out of it.
 */
#define	FZ_QUIET	__attribute__((no_sanitize("coverage")))

struct fz {
	const uint8_t	*f_p;
	size_t		 f_n;
	uint64_t	 f_s;
};

FZ_QUIET static inline void
fz_init(struct fz *f, const uint8_t *data, size_t size)
{
	uint64_t h;
	size_t i;

	/* FNV-1a, 64 bits: any bit of the input moves the tail. */
	h = 0xcbf29ce484222325ULL;
	for (i = 0; i < size; i++)
		h = (h ^ data[i]) * 0x100000001b3ULL;
	f->f_p = data;
	f->f_n = size;
	f->f_s = h != 0 ? h : 1;
}

FZ_QUIET static inline uint8_t
fz_byte(struct fz *f)
{

	if (f->f_n > 0) {
		f->f_n--;
		return (*f->f_p++);
	}
	f->f_s ^= f->f_s << 13;
	f->f_s ^= f->f_s >> 7;
	f->f_s ^= f->f_s << 17;
	return ((uint8_t)(f->f_s >> 24));
}

FZ_QUIET static inline uint32_t
fz_u32(struct fz *f, int nbytes)
{
	uint32_t v;
	int i;

	v = 0;
	for (i = 0; i < nbytes; i++)
		v = (v << 8) | fz_byte(f);
	return (v);
}

/* Uniform enough in [0, n), n > 0. */
FZ_QUIET static inline uint32_t
fz_below(struct fz *f, uint32_t n)
{

	return (n <= 256 ? fz_byte(f) % n : fz_u32(f, 4) % n);
}

/* A generated tree, breadth first, as rxl_topo_new() takes it. */
#define	FZ_MAXCPU	1024	/* CPU_MAXSIZE */
#define	FZ_MAXDEPTH	6	/* Levels, root included. */
#define	FZ_MAXGROUPS	(FZ_MAXCPU * FZ_MAXDEPTH)

struct fz_tree {
	int	 t_ncpu;			/* mp_maxid + 1 */
	int	 t_ngroups;
	int	 t_depth;			/* Deepest group; root is 0. */
	int	 t_parent[FZ_MAXGROUPS];
	int	 t_level[FZ_MAXGROUPS];
	int	 t_flags[FZ_MAXGROUPS];
	int	 t_ncpus[FZ_MAXGROUPS];
	int	 t_first[FZ_MAXGROUPS];		/* Into t_cpus[]. */
	int	 t_gdepth[FZ_MAXGROUPS];
	int	 t_haskids[FZ_MAXGROUPS];
	int	 t_cpus[FZ_MAXCPU * FZ_MAXDEPTH];
	int	 t_ncpuslots;
	int	 t_leaf[FZ_MAXCPU];		/* -1: absent CPU. */
	int	 t_present[FZ_MAXCPU];
	int	 t_npresent;
};

static inline int
fz_cmpint(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return ((x > y) - (x < y));
}

/*
 * Split group g into children, appended at the end (breadth first, so
 * siblings are contiguous).  Levels either follow the kernel's shape by
 * depth (root NONE, then a NUMA node or package, L3, L2 with SMT, L1) or
 * are arbitrary; flags likewise.
 */
static inline void
fz_split(struct fz *f, struct fz_tree *t, int g, int maxdepth, bool shaped)
{
	static const int shape_level[FZ_MAXDEPTH] = { CG_SHARE_NONE,
	    CG_SHARE_NONE, CG_SHARE_L3, CG_SHARE_L2, CG_SHARE_L1,
	    CG_SHARE_L1 };
	int cpus[FZ_MAXCPU];
	int i, j, k, left, n, sz, c, d;

	n = t->t_ncpus[g];
	d = t->t_gdepth[g];
	if (d + 1 >= maxdepth || (fz_byte(f) & 3) == 0)
		return;
	/* 1 to 8 children; one child is legal (a package of one L3). */
	k = 1 + (int)fz_below(f, (uint32_t)MIN(n, 8));
	if (t->t_ngroups + k > FZ_MAXGROUPS)
		return;
	memcpy(cpus, &t->t_cpus[t->t_first[g]], (size_t)n * sizeof(int));
	if (fz_byte(f) & 1) {
		/* Groups need not be id ranges: interleave the ids. */
		for (i = n - 1; i > 0; i--) {
			j = (int)fz_below(f, (uint32_t)i + 1);
			c = cpus[i];
			cpus[i] = cpus[j];
			cpus[j] = c;
		}
	}
	left = n;
	for (i = 0, j = 0; i < k; i++) {
		c = t->t_ngroups++;
		sz = i == k - 1 ? left :
		    1 + (int)fz_below(f, (uint32_t)(left - (k - i - 1)));
		left -= sz;
		t->t_parent[c] = g;
		t->t_gdepth[c] = d + 1;
		if (d + 1 > t->t_depth)
			t->t_depth = d + 1;
		t->t_first[c] = t->t_ncpuslots;
		t->t_ncpus[c] = sz;
		memcpy(&t->t_cpus[t->t_ncpuslots], &cpus[j],
		    (size_t)sz * sizeof(int));
		qsort(&t->t_cpus[t->t_ncpuslots], (size_t)sz, sizeof(int),
		    fz_cmpint);
		t->t_ncpuslots += sz;
		j += sz;
		if (shaped) {
			t->t_level[c] = shape_level[d + 1];
			t->t_flags[c] = d + 1 == 1 && (fz_byte(f) & 1) ?
			    CG_FLAG_NODE : 0;
		} else {
			t->t_level[c] = fz_byte(f) % 4;
			t->t_flags[c] = fz_byte(f) & CG_FLAG_THREAD;
		}
	}
}

/*
 * Decode a tree: 1 to 1024 CPU ids with or without gaps, 1 to 6 levels,
 * SMT and non-SMT leaves.  Most cases have at most 16 CPUs; one in
 * midodds up to 64, one in bigodds up to 1024.  Returns the tree's number
 * of present CPUs.
 */
static inline int
fz_tree(struct fz *f, struct fz_tree *t, int midodds, int bigodds)
{
	int c, g, i, maxdepth, mode, density;
	bool shaped;

	/* Only what is used is reset: a case is mostly a few CPUs. */
	t->t_ngroups = t->t_depth = t->t_ncpuslots = t->t_npresent = 0;
	mode = fz_byte(f);
	/*
	 * Mostly small machines, for speed; up to 1024 CPUs when the fuzzer
	 * asks (a second byte, one value in bigodds).
	 */
	if (fz_below(f, (uint32_t)bigodds) == 0)
		t->t_ncpu = 1 + (int)(fz_u32(f, 2) % FZ_MAXCPU);
	else
		t->t_ncpu = 1 + (int)fz_below(f, fz_below(f,
		    (uint32_t)midodds) == 0 ? 64 : 16);
	density = (mode >> 2) & 3;	/* 0: no gaps. */
	for (c = 0; c < t->t_ncpu; c++) {
		t->t_leaf[c] = -1;
		if (density == 0 || fz_below(f, 4) < (uint32_t)density ||
		    (density == 3 && c == t->t_ncpu - 1))
			t->t_present[t->t_npresent++] = c;
	}
	if (t->t_npresent == 0)
		t->t_present[t->t_npresent++] = t->t_ncpu - 1;
	maxdepth = 1 + (int)fz_below(f, FZ_MAXDEPTH);
	shaped = (mode & 0x10) == 0;

	t->t_ngroups = 1;
	t->t_gdepth[0] = 0;
	t->t_parent[0] = -1;
	t->t_level[0] = shaped ? CG_SHARE_NONE : fz_byte(f) % 4;
	t->t_flags[0] = 0;
	t->t_ncpus[0] = t->t_npresent;
	memcpy(t->t_cpus, t->t_present, (size_t)t->t_npresent * sizeof(int));
	t->t_ncpuslots = t->t_npresent;
	for (g = 0; g < t->t_ngroups; g++)
		fz_split(f, t, g, maxdepth, shaped);
	/* Leaves: SMT flags on the shaped tree's innermost groups. */
	memset(t->t_haskids, 0, (size_t)t->t_ngroups * sizeof(int));
	for (g = 1; g < t->t_ngroups; g++)
		t->t_haskids[t->t_parent[g]] = 1;
	for (g = 0; g < t->t_ngroups; g++) {
		if (t->t_haskids[g])
			continue;
		if (shaped && g != 0 && t->t_ncpus[g] > 1 &&
		    (fz_byte(f) & 1)) {
			t->t_level[g] = CG_SHARE_L2;
			t->t_flags[g] = CG_FLAG_THREAD;
		}
		for (i = 0; i < t->t_ncpus[g]; i++)
			t->t_leaf[t->t_cpus[t->t_first[g] + i]] = g;
	}
	return (t->t_npresent);
}

static inline struct rxl_topo *
fz_topo(const struct fz_tree *t)
{

	return (rxl_topo_new(t->t_ngroups, t->t_parent, t->t_level,
	    t->t_flags, t->t_ncpus, t->t_cpus));
}

/* Is group a an ancestor of group g, or g itself? */
static inline bool
fz_encloses(const struct fz_tree *t, int a, int g)
{

	for (; g >= 0; g = t->t_parent[g])
		if (g == a)
			return (true);
	return (false);
}

/* The tree as JSON: {"ncpu": N, "groups": [{"parent", "level", ...}]}. */
static inline void
fz_print_tree(FILE *fp, const struct fz_tree *t)
{
	int g, i;

	fprintf(fp, "\"ncpu\": %d, \"groups\": [", t->t_ncpu);
	for (g = 0; g < t->t_ngroups; g++) {
		fprintf(fp, "%s{\"parent\": %d, \"level\": %d, \"flags\": %d, "
		    "\"cpus\": [", g ? ", " : "", t->t_parent[g], t->t_level[g],
		    t->t_flags[g]);
		for (i = 0; i < t->t_ncpus[g]; i++)
			fprintf(fp, "%s%d", i ? ", " : "",
			    t->t_cpus[t->t_first[g] + i]);
		fprintf(fp, "]}");
	}
	fprintf(fp, "]");
}

/* Print the case (the target's printer) and abort: a finding. */
static void fz_print_case(FILE *fp);

static inline void
fz_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FUZZ_FAIL ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	fz_print_case(stderr);
	abort();
}

/* A stream of 32-bit hashes for lookups, cheaper than the reader. */
FZ_QUIET static inline uint32_t
fz_hash(uint64_t *s)
{

	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return ((uint32_t)(*s >> 32));
}

#define	FZ_CHECK(cond, ...) do {					\
	if (!(cond))							\
		fz_fail(__VA_ARGS__);					\
} while (0)

#endif /* !_RXL_FUZZ_COMMON_H_ */
