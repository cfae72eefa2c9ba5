/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Copyright (c) 2026 The rxl project
 */

/*
 * Userspace cost of the dealt map, with the kernel's own deal and select
 * (sys/netinet/in_pcblb_deal.c).  Modes:
 *
 *   lookup N	N lookups of each kind, in separate noinline functions, for
 *		callgrind to count: plain (today's il_inp[h % n]), untagged
 *		(the patched lookup of a group without a map) and steered
 *		(the patched lookup of a group with one).  Each function is
 *		the whole group lookup of a SYN, as in_pcblookup_lbgroup()
 *		does it: walk the port's bucket, match the group, hash the
 *		tuple (the base tree's seeded Jenkins hash), select.
 *   rebuild R	time R deals of 256 members over 64 receiving CPUs on a
 *		128-CPU two-L3 machine, scratch allocation included; prints
 *		the median in nanoseconds and the map's size in bytes.
 *
 * The group and map layouts mirror the series' struct inpcblbgroup and
 * struct inpcblbmap: member pointers, not indices, in the slot array.
 */

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <netinet/in_pcblb_deal.h>

#define	NMEMBERS	256
#define	NRX		64
#define	NCPU		128

struct member {
	int		m_id;
};

/* As the series' struct inpcblbmap: the slots follow the per-CPU array. */
struct lbmap {
	struct member	**lm_slot;	/* [16 * members], after lm_cpu[] */
	u_int		 lm_ncpu;
	u_int		 lm_nslots;
	uint32_t	 lm_cpu[];	/* [lm_ncpu] */
};

struct prison {
	u_int		 pr_flags;
};

struct ucred {
	struct prison	*cr_prison;
};

struct lbgroup {
	struct lbgroup	*il_next;	/* Bucket chain. */
	struct ucred	*il_cred;
	uint16_t	 il_lport;
	uint8_t		 il_vflag;
	uint32_t	 il_laddr;
	struct lbmap	*il_map;
	u_int		 il_inpcnt;
	struct member	*il_inp[NMEMBERS];
};

struct conn {
	struct conn	*c_next;
	uint32_t	 c_faddr, c_laddr;
	uint16_t	 c_fport, c_lport;
	uint8_t		 c_vflag;
};

static struct prison prison0;
static struct ucred cred0 = { &prison0 };
static struct lbgroup *buckets[64];
static struct conn *conns[256];
static struct conn established[512];
static struct member members[NMEMBERS];
static struct cpu_group topo[1 + 2 + NCPU / 2];

/*
 * The tuple hash of the base tree (14.0's in_pcb.h): a seeded Jenkins
 * hash of the foreign address, called out of line as the kernel calls its
 * libkern one, XORed with the byte-swapped ports.  One 32-bit word through
 * Bob Jenkins' lookup3 final mix (public domain algorithm).
 */
static uint32_t hashseed = 0x5eed1e55;

#define	ROT32(x, k)	(((x) << (k)) | ((x) >> (32 - (k))))

__attribute__((noinline)) uint32_t
jhash_word(uint32_t k, uint32_t seed)
{
	uint32_t a, b, c;

	a = b = c = 0xdeadbeef + (1 << 2) + seed;
	a += k;
	c ^= b; c -= ROT32(b, 14);
	a ^= c; a -= ROT32(c, 11);
	b ^= a; b -= ROT32(a, 25);
	c ^= b; c -= ROT32(b, 16);
	a ^= c; a -= ROT32(c, 4);
	b ^= a; b -= ROT32(a, 14);
	c ^= b; c -= ROT32(b, 24);
	return (c);
}

static inline uint32_t
addrhash(uint32_t addr)
{

	return (addr == 0 ? hashseed : jhash_word(addr, hashseed));
}

static inline uint32_t
pkthash(uint32_t faddr, uint16_t lport, uint16_t fport)
{

	return (addrhash(faddr) ^ __builtin_bswap16(lport ^ fport));
}

/* Is the credential jailed with its own IPv4 addresses?  A real call. */
__attribute__((noinline)) int
prison_flag(struct ucred *cred, u_int flag)
{

	return ((cred->cr_prison->pr_flags & flag) != 0);
}

static inline struct lbgroup *
find_group(uint32_t laddr, uint16_t lport)
{
	struct lbgroup *grp, *wild;

	wild = NULL;
	for (grp = buckets[lport & 63]; grp != NULL; grp = grp->il_next) {
		if ((grp->il_vflag & 1) == 0 || grp->il_lport != lport)
			continue;
		if (prison_flag(grp->il_cred, 0x2) != 0)
			continue;	/* Jailed groups: not in this bench. */
		if (grp->il_laddr == laddr)
			return (grp);
		if (grp->il_laddr == 0 && wild == NULL)
			wild = grp;
	}
	return (wild);
}

/*
 * A SYN first misses the exact-match (connection) hash, as
 * in_pcblookup_hash_locked() tries it before any group.
 */
static inline __attribute__((always_inline)) struct conn *
find_exact(uint32_t faddr, uint16_t fport, uint32_t laddr, uint16_t lport)
{
	struct conn *c;

	for (c = conns[pkthash(faddr, lport, fport) & 255]; c != NULL;
	    c = c->c_next)
		if ((c->c_vflag & 1) != 0 && c->c_faddr == faddr &&
		    c->c_laddr == laddr && c->c_fport == fport &&
		    c->c_lport == lport)
			return (c);
	return (NULL);
}

static inline __attribute__((always_inline)) struct member *
lbgroup_plain(uint32_t faddr, uint16_t fport, uint32_t laddr, uint16_t lport,
    u_int cpu)
{
	struct lbgroup *grp;

	(void)cpu;
	grp = find_group(laddr, lport);
	if (grp == NULL)
		return (NULL);
	return (grp->il_inp[pkthash(faddr, lport, fport) % grp->il_inpcnt]);
}

static inline __attribute__((always_inline)) struct member *
lbgroup_dealt(uint32_t faddr, uint16_t fport, uint32_t laddr, uint16_t lport,
    u_int cpu)
{
	struct lbgroup *grp;
	struct lbmap *map;
	uint32_t h;
	u_int slot;

	grp = find_group(laddr, lport);
	if (grp == NULL)
		return (NULL);
	h = pkthash(faddr, lport, fport);
	map = __atomic_load_n(&grp->il_map, __ATOMIC_ACQUIRE);
	if (__predict_false(map != NULL) &&
	    lbdeal_steer(map->lm_cpu, cpu, LBDEAL_MIX(h), &slot))
		return (map->lm_slot[slot]);
	return (grp->il_inp[h % grp->il_inpcnt]);
}

/*
 * Each kind in its own function for callgrind: the group lookup alone,
 * and the whole lookup of a SYN (exact-match miss, then the group).
 */
#define	LOOKUP(name, body)						\
__attribute__((noinline)) struct member *				\
name(uint32_t faddr, uint16_t fport, uint32_t laddr, uint16_t lport,	\
    u_int cpu)								\
{									\
									\
	body;								\
}
#define	SYN(fn)								\
	if (find_exact(faddr, fport, laddr, lport) != NULL)		\
		return (NULL);						\
	return (fn(faddr, fport, laddr, lport, cpu))

LOOKUP(lookup_plain, return (lbgroup_plain(faddr, fport, laddr, lport, cpu)))
LOOKUP(lookup_untagged, return (lbgroup_dealt(faddr, fport, laddr, lport,
    cpu)))
LOOKUP(lookup_steered, return (lbgroup_dealt(faddr, fport, laddr, lport,
    cpu)))
LOOKUP(syn_plain, SYN(lbgroup_plain))
LOOKUP(syn_untagged, SYN(lbgroup_dealt))
LOOKUP(syn_steered, SYN(lbgroup_dealt))

/* Two L3 groups of 32 SMT cores: the shape of a 2-socket, 128-CPU host. */
static void
make_topo(void)
{
	struct cpu_group *root, *l3, *core;
	int c, i, k;

	root = &topo[0];
	root->cg_child = &topo[1];
	root->cg_children = 2;
	root->cg_first = 0;
	root->cg_last = NCPU - 1;
	for (c = 0; c < NCPU; c++)
		CPU_SET(c, &root->cg_mask);
	root->cg_count = NCPU;
	for (i = 0; i < 2; i++) {
		l3 = &topo[1 + i];
		l3->cg_parent = root;
		l3->cg_level = CG_SHARE_L3;
		l3->cg_child = &topo[3 + i * (NCPU / 4)];
		l3->cg_children = NCPU / 4;
		l3->cg_first = i * NCPU / 2;
		l3->cg_last = (i + 1) * NCPU / 2 - 1;
		for (c = l3->cg_first; c <= l3->cg_last; c++)
			CPU_SET(c, &l3->cg_mask);
		l3->cg_count = NCPU / 2;
		for (k = 0; k < NCPU / 4; k++) {
			core = &l3->cg_child[k];
			core->cg_parent = l3;
			core->cg_level = CG_SHARE_L2;
			core->cg_flags = CG_FLAG_SMT;
			core->cg_first = l3->cg_first + 2 * k;
			core->cg_last = core->cg_first + 1;
			CPU_SET(core->cg_first, &core->cg_mask);
			CPU_SET(core->cg_last, &core->cg_mask);
			core->cg_count = 2;
		}
	}
}

/* Deal: members on every CPU twice over, every other CPU receiving. */
static struct lbmap *
deal(struct lbgroup *grp, uint64_t *ns)
{
	static uint16_t tags[NMEMBERS];
	static uint32_t counts[NCPU];
	struct timespec t0, t1;
	struct lbdeal_in in;
	struct lbdeal_out out;
	struct lbmap *map;
	void *members[NMEMBERS];
	void *scratch;
	u_int i;

	for (i = 0; i < NMEMBERS; i++)
		tags[i] = (uint16_t)(i % NCPU);
	for (i = 0; i < NCPU; i++)
		counts[i] = (i % 2 == 0) ? 1000 + i : 0;
	in.di_root = &topo[0];
	in.di_tags = tags;
	in.di_members = members;
	in.di_counts = counts;
	in.di_nmembers = NMEMBERS;
	in.di_ncpu = NCPU;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* As the kernel's rebuild: copy the members, allocate, deal. */
	for (i = 0; i < NMEMBERS; i++)
		members[i] = grp->il_inp[i];
	map = malloc(sizeof(*map) + NCPU * sizeof(uint32_t) +
	    LBDEAL_SLOTS * NMEMBERS * sizeof(struct member *));
	scratch = malloc(lbdeal_scratch_size(in.di_root, NMEMBERS, NCPU));
	if (map == NULL || scratch == NULL)
		abort();
	/* 128 four-byte entries keep the slot pointers aligned. */
	map->lm_slot = (struct member **)&map->lm_cpu[NCPU];
	map->lm_ncpu = NCPU;
	map->lm_nslots = LBDEAL_SLOTS * NMEMBERS;
	out.do_cpu = map->lm_cpu;
	out.do_slot = (void **)map->lm_slot;
	if (!lbdeal(&in, &out, scratch))
		abort();
	free(scratch);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 +
	    (uint64_t)(t1.tv_nsec - t0.tv_nsec);
	return (map);
}

static int
cmp64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

int
main(int argc, char **argv)
{
	static struct lbgroup other80, other81, untagged, steered;
	struct member *volatile sink;
	struct lbmap *map;
	uint64_t *ns;
	uint32_t b, h;
	long i, n;

	if (argc != 3 || (n = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: bench_core lookup|rebuild COUNT\n");
		return (2);
	}
	make_topo();
	for (i = 0; i < NMEMBERS; i++) {
		members[i].m_id = (int)i;
		untagged.il_inp[i] = steered.il_inp[i] = &members[i];
	}
	/*
	 * Port 80 (untagged) and 81 (steered): each bucket holds an unrelated
	 * group ahead of the one looked up, so both walks are alike.
	 */
	other80.il_lport = 80 + 64;
	other81.il_lport = 81 + 64;
	other80.il_vflag = other81.il_vflag = 1;
	other80.il_cred = other81.il_cred = &cred0;
	untagged.il_cred = steered.il_cred = &cred0;
	untagged.il_lport = 80;
	steered.il_lport = 81;
	untagged.il_vflag = steered.il_vflag = 1;
	untagged.il_inpcnt = steered.il_inpcnt = NMEMBERS;
	other80.il_next = &untagged;
	other81.il_next = &steered;
	buckets[80 & 63] = &other80;
	buckets[81 & 63] = &other81;

	if (strcmp(argv[1], "rebuild") == 0) {
		ns = calloc((size_t)n, sizeof(*ns));
		if (ns == NULL)
			return (1);
		for (i = 0; i < n; i++) {
			map = deal(&steered, &ns[i]);
			free(map);
		}
		qsort(ns, (size_t)n, sizeof(*ns), cmp64);
		printf("{\"members\": %d, \"rx_cpus\": %d, \"ncpu\": %d, "
		    "\"median_ns\": %llu, \"min_ns\": %llu, "
		    "\"map_bytes\": %zu, \"scratch_bytes\": %zu}\n",
		    NMEMBERS, NRX, NCPU, (unsigned long long)ns[n / 2],
		    (unsigned long long)ns[0],
		    sizeof(struct lbmap) + NCPU * sizeof(uint32_t) +
		    LBDEAL_SLOTS * NMEMBERS * sizeof(struct member *),
		    lbdeal_scratch_size(&topo[0], NMEMBERS, NCPU));
		free(ns);
		return (0);
	}
	if (strcmp(argv[1], "lookup") != 0) {
		fprintf(stderr, "bench_core: unknown mode %s\n", argv[1]);
		return (2);
	}
	/* One established connection per bucket, none of them a SYN's. */
	for (i = 0; i < 512; i++) {
		established[i].c_faddr = (uint32_t)i * 2654435761u;
		established[i].c_fport = (uint16_t)(1024 + i);
		established[i].c_lport = 80;
		established[i].c_vflag = 1;
		b = pkthash(established[i].c_faddr, 80,
		    established[i].c_fport) & 255;
		established[i].c_next = conns[b];
		conns[b] = &established[i];
	}
	steered.il_map = deal(&steered, &(uint64_t){0});
	h = 0x12345678;
	for (i = 0; i < n; i++) {
		h = h * 1664525 + 1013904223;	/* Numerical Recipes LCG. */
		sink = lookup_plain(h, (uint16_t)(h >> 7), 0, 80,
		    (h >> 9) % NCPU);
		sink = lookup_untagged(h, (uint16_t)(h >> 7), 0, 80,
		    (h >> 9) % NCPU);
		sink = lookup_steered(h, (uint16_t)(h >> 7), 0, 81,
		    (h >> 9) % NCPU);
		sink = syn_plain(h, (uint16_t)(h >> 7), 0, 80, (h >> 9) % NCPU);
		sink = syn_untagged(h, (uint16_t)(h >> 7), 0, 80,
		    (h >> 9) % NCPU);
		sink = syn_steered(h, (uint16_t)(h >> 7), 0, 81,
		    (h >> 9) % NCPU);
	}
	(void)sink;
	free(steered.il_map);
	return (0);
}
