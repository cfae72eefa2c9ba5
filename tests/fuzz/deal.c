/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Copyright (c) 2026 The rxl project
 */

/*
 * libFuzzer target: the deal (sys/netinet/in_pcblb_deal.c) on any valid
 * topology, any tags and any receiving counts, through the userspace
 * library's rxl_deal() and rxl_select().
 *
 * Invariants, from the deal's own contract (in_pcblb_deal.h) and the
 * design (seed 000, "What the drawings commit to"):
 *   - a map is built exactly when some member is tagged with a CPU below
 *     ncpu and something is counted, or an explicit tag stands in;
 *     without a map the output is untouched;
 *   - T = 16 x members slots; every member owns exactly 16 of them;
 *   - a CPU supplies a range only if its (stand-in) count is non-zero, of
 *     length floor or ceil of T x count / total (both the cumulative and
 *     the largest-remainder rounding give this), the ranges adding up to
 *     T and tiling the slot array in CPU order;
 *   - within every CPU's range the rings are dealt nearest first, and the
 *     CPU's own (exact) members get min(range, 16 x own members) slots, so
 *     an exact member is never displaced by a farther ring;
 *   - a lookup from every CPU, for 64 hashes, lands in that CPU's range
 *     (and on a member) or, from a CPU without a range, on the tuple hash.
 */

#include "fuzz_common.h"

#define	SLOTS		16
#define	MAXMEMBERS	4095
#define	TAG_NONE	0xffff
#define	TAG_HASH	0xfffe
#define	TAG_LEARNED	0x8000
#define	TAGGED(t)	((t) < TAG_HASH)
#define	TAG_CPU(t)	((int)((t) & 0x7fff))

static struct fz_tree tree;
static uint16_t tags[MAXMEMBERS];
static uint32_t counts[FZ_MAXCPU];
static int nmembers;

static void
fz_print_case(FILE *fp)
{
	int c, i, first;

	fprintf(fp, "FUZZ_CASE {\"target\": \"deal\", ");
	fz_print_tree(fp, &tree);
	fprintf(fp, ", \"tags\": [");
	for (i = 0; i < nmembers; i++)
		fprintf(fp, "%s%u", i ? ", " : "", tags[i]);
	fprintf(fp, "], \"counts\": [");
	for (c = 0, first = 1; c < tree.t_ncpu; c++)
		if (counts[c] != 0) {
			fprintf(fp, "%s[%d, %u]", first ? "" : ", ", c,
			    counts[c]);
			first = 0;
		}
	fprintf(fp, "]}\n");
}

static void
decode(struct fz *f)
{
	struct fz_tree *t = &tree;
	uint32_t b, kinds;
	int c, i, k, mode;

	fz_tree(f, t, 4, 16);
	b = fz_byte(f);
	if (b < 192)
		nmembers = 1 + (int)(b % 32);
	else if (b < 248)
		nmembers = 1 + (int)(fz_u32(f, 2) % 256);
	else
		nmembers = 1 + (int)(fz_u32(f, 2) % MAXMEMBERS);
	/* Most cases mix kinds; some hold one kind only. */
	kinds = fz_byte(f);
	for (i = 0; i < nmembers; i++) {
		k = (int)((kinds & 0x80) ? (kinds % 10) : fz_below(f, 10));
		c = t->t_present[fz_below(f, (uint32_t)t->t_npresent)];
		switch (k) {
		case 0: case 1: case 2: case 3:
			tags[i] = (uint16_t)c;			/* exact */
			break;
		case 4: case 5:
			tags[i] = (uint16_t)(c | TAG_LEARNED);	/* learned */
			break;
		case 6:
			tags[i] = TAG_NONE;
			break;
		case 7:
			tags[i] = TAG_HASH;
			break;
		case 8:		/* Any id below ncpu, absent ones too. */
			tags[i] = (uint16_t)(fz_below(f,
			    (uint32_t)t->t_ncpu) | (fz_byte(f) & TAG_LEARNED));
			break;
		default:	/* Beyond ncpu: a CPU this map does not have. */
			tags[i] = (uint16_t)((t->t_ncpu + fz_below(f,
			    0x7fff - (uint32_t)t->t_ncpu + 1)) & 0x7fff) |
			    (uint16_t)((fz_byte(f) & 1) ? TAG_LEARNED : 0);
			if (TAG_CPU(tags[i]) < t->t_ncpu)
				tags[i] = TAG_NONE;
			break;
		}
	}
	memset(counts, 0, (size_t)t->t_ncpu * sizeof(counts[0]));
	mode = fz_byte(f) % 6;
	switch (mode) {
	case 0:		/* Nothing counted: explicit tags stand in. */
		break;
	case 1:
		for (i = 0; i < t->t_npresent; i++)
			if ((b = fz_byte(f)) >= 128)
				counts[t->t_present[i]] = b - 127;
		break;
	case 2:
		for (i = 0; i < t->t_npresent; i++)
			counts[t->t_present[i]] = fz_u32(f, 4);
		break;
	case 3:		/* The largest total there is. */
		for (i = 0; i < t->t_npresent; i++)
			counts[t->t_present[i]] = UINT32_MAX;
		break;
	case 4:		/* Absent CPUs count too (the C reads ncpu counts). */
		for (c = 0; c < t->t_ncpu; c++) {
			b = fz_byte(f) % 4;
			counts[c] = b == 0 ? 0 : b == 1 ? 1 : b == 2 ?
			    fz_byte(f) : fz_u32(f, 4);
		}
		break;
	default:	/* A few receiving CPUs. */
		for (k = 1 + (int)fz_below(f, 4); k > 0; k--)
			counts[t->t_present[fz_below(f,
			    (uint32_t)t->t_npresent)]] = fz_u32(f, 4);
		break;
	}
}

/* The ring of a member tagged tag for receiving CPU c, as the deal numbers
 * them: 0 exact, k the k-th enclosing group, depth + 2 every member. */
static int
ring(int c, uint16_t tag)
{
	const struct fz_tree *t = &tree;
	int g, k, last, lt;

	last = t->t_depth + 2;
	if (!TAGGED(tag) || TAG_CPU(tag) >= t->t_ncpu)
		return (last);
	if (TAG_CPU(tag) == c)
		return (0);
	if (t->t_leaf[c] < 0 || (lt = t->t_leaf[TAG_CPU(tag)]) < 0)
		return (last);
	for (g = t->t_leaf[c], k = 1; g >= 0; g = t->t_parent[g], k++)
		if (fz_encloses(t, g, lt))
			return (k);
	return (last);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint32_t eff[FZ_MAXCPU];
	static int own[FZ_MAXCPU], held[MAXMEMBERS];
	struct fz f;
	struct rxl_topo *topo;
	uint32_t *cpuent, e, h;
	uint16_t *slots;
	uint64_t total, lo, hi, hs;
	unsigned nslots, idx, T, off, len, s;
	int c, i, rc, r, prev, steered, got, ncpu;
	bool tagged, built;

	fz_init(&f, data, size);
	decode(&f);
	ncpu = tree.t_ncpu;
	if (getenv("RXL_FUZZ_PRINT") != NULL)
		fz_print_case(stdout);
	topo = fz_topo(&tree);
	FZ_CHECK(topo != NULL, "rxl_topo_new refused a valid tree");

	/* What the deal must do, from its contract. */
	tagged = false;
	total = 0;
	memset(own, 0, (size_t)ncpu * sizeof(own[0]));
	for (c = 0; c < ncpu; c++)
		total += counts[c];
	for (c = 0; c < ncpu; c++)
		eff[c] = total != 0 ? counts[c] : 0;
	for (i = 0; i < nmembers; i++) {
		if (!TAGGED(tags[i]) || TAG_CPU(tags[i]) >= ncpu)
			continue;
		tagged = true;
		own[TAG_CPU(tags[i])]++;
		if (total == 0 && (tags[i] & TAG_LEARNED) == 0)
			eff[TAG_CPU(tags[i])] = 1;
	}
	if (total == 0)
		for (c = 0; c < ncpu; c++)
			total += eff[c];
	built = tagged && total != 0;

	/* Exactly sized, so that ASan sees any write past them. */
	cpuent = malloc((size_t)ncpu * sizeof(*cpuent));
	slots = malloc((size_t)nmembers * SLOTS * sizeof(*slots));
	if (cpuent == NULL || slots == NULL)
		abort();
	for (c = 0; c < ncpu; c++)
		cpuent[c] = 0xa5a5a5a5;
	nslots = 12345;
	rc = rxl_deal(topo, nmembers, tags, counts, ncpu, cpuent, slots,
	    &nslots);
	FZ_CHECK(rc == (built ? 1 : 0), "rxl_deal returned %d, expected %d",
	    rc, built);
	if (!built) {
		FZ_CHECK(nslots == 0, "no map but %u slots", nslots);
		for (c = 0; c < ncpu; c++)
			FZ_CHECK(cpuent[c] == 0xa5a5a5a5,
			    "no map but cpu %d's entry written", c);
		goto lookups;
	}

	T = SLOTS * (unsigned)nmembers;
	FZ_CHECK(nslots == T, "%u slots for %d members", nslots, nmembers);
	/* Supply: proportional ranges tiling [0, T) in CPU order. */
	off = 0;
	for (c = 0; c < ncpu; c++) {
		e = cpuent[c];
		len = e & 0xffff;
		lo = (uint64_t)T * eff[c] / total;
		hi = lo + ((uint64_t)T * eff[c] % total != 0);
		FZ_CHECK(len >= lo && len <= hi,
		    "cpu %d supplies %u slots, share is %llu..%llu", c, len,
		    (unsigned long long)lo, (unsigned long long)hi);
		if (len == 0) {
			FZ_CHECK(e == 0, "cpu %d: empty range %#x", c, e);
			continue;
		}
		FZ_CHECK((e >> 16) == off, "cpu %d's range at %u, not %u", c,
		    e >> 16, off);
		off += len;
	}
	FZ_CHECK(off == T, "ranges add up to %u of %u slots", off, T);

	/* Members: each exactly 16 slots, every slot a member. */
	memset(held, 0, (size_t)nmembers * sizeof(held[0]));
	for (s = 0; s < T; s++) {
		FZ_CHECK(slots[s] < nmembers, "slot %u holds member %u of %d",
		    s, slots[s], nmembers);
		held[slots[s]]++;
	}
	for (i = 0; i < nmembers; i++)
		FZ_CHECK(held[i] == SLOTS, "member %d holds %d slots", i,
		    held[i]);

	/* Rings nearest first; exact members paid first. */
	for (c = 0; c < ncpu; c++) {
		off = cpuent[c] >> 16;
		len = cpuent[c] & 0xffff;
		prev = 0;
		got = 0;
		for (s = off; s < off + len; s++) {
			r = ring(c, tags[slots[s]]);
			FZ_CHECK(r >= prev, "cpu %d: slot %u of ring %d after "
			    "ring %d", c, s, r, prev);
			prev = r;
			got += r == 0;
		}
		FZ_CHECK((unsigned)got == MIN(len, SLOTS * (unsigned)own[c]),
		    "cpu %d: %d exact slots, range %u, %d own members", c,
		    got, len, own[c]);
	}

lookups:
	hs = f.f_s;
	for (c = 0; c < ncpu; c++) {
		e = built ? cpuent[c] : 0;
		for (i = 0; i < 64; i++) {
			h = i == 0 ? 0 : i == 1 ? UINT32_MAX : fz_hash(&hs);
			idx = rxl_select(built ? cpuent : NULL, ncpu, c, h,
			    nmembers, &steered);
			if (e == 0) {
				FZ_CHECK(!steered && idx == h % (unsigned)nmembers,
				    "cpu %d without a range steered", c);
				continue;
			}
			FZ_CHECK(steered, "cpu %d with a range not steered", c);
			FZ_CHECK(idx >= (e >> 16) && idx < (e >> 16) +
			    (e & 0xffff), "cpu %d: hash %#x to slot %u, "
			    "range %#x", c, h, idx, e);
			FZ_CHECK(slots[idx] < nmembers, "slot %u bad", idx);
		}
	}
	free(cpuent);
	free(slots);
	rxl_topo_free(topo);
	return (0);
}
